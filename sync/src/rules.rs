//! Which paths of the working directory the sync keeps in step with the store.
//!
//! The files `formdb_engine::import::walk` would import (its skipped directories, `.gitignore`,
//! `.ignore` and `.git/info/exclude` rules), less editor scratch files and our own temporary
//! files. The initial re-sync lists files with `walk` itself; single paths reported by the
//! watcher are judged here with the same ignore files, so both agree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

/// Directories never synced: the ones `import::walk` skips (kept in step with its list).
pub const SKIP_DIRS: &[&str] =
    &[".git", ".formdb", "target", "node_modules", ".cpcache", ".shadow-cljs"];

/// Marks the temporary files of our atomic writes (`.NAME.formdb-tmp-PID-N`).
pub const TMP_MARK: &str = ".formdb-tmp-";

/// An editor's scratch file (swap, backup, lock, autosave, write test) or our own temporary
/// file: never synced either way.
pub fn is_scratch(name: &str) -> bool {
    let dot = name.starts_with('.');
    (dot && name.contains(TMP_MARK))
        // Emacs lock files and autosaves, backups.
        || name.starts_with(".#")
        || (name.starts_with('#') && name.ends_with('#') && name.len() > 1)
        || name.ends_with('~')
        // Vim swap files (.x.swp, .x.swo, …) and its write test file.
        || (dot && name.len() > 4 && {
            let ext = &name[name.len() - 4..];
            ext.starts_with(".sw") && ext.as_bytes()[3].is_ascii_lowercase()
        })
        || name == "4913"
        // JetBrains safe-write temporaries.
        || name.ends_with("___jb_tmp___")
        || name.ends_with("___jb_old___")
}

/// The ignore rules of one working directory.
pub struct Rules {
    root: PathBuf,
    /// `.ignore` files, by the directory holding them (relative, `""` for the root).
    dot_ignore: BTreeMap<String, Gitignore>,
    /// `.gitignore` files, likewise.
    git_ignore: BTreeMap<String, Gitignore>,
    /// `.git/info/exclude`.
    exclude: Option<Gitignore>,
}

impl Rules {
    /// Read the ignore files among `files` (relative paths as `walk` lists them).
    pub fn load<'a>(root: &Path, files: impl IntoIterator<Item = &'a str>) -> Rules {
        let mut rules = Rules {
            root: root.to_path_buf(),
            dot_ignore: BTreeMap::new(),
            git_ignore: BTreeMap::new(),
            exclude: None,
        };
        for rel in files {
            let (dir, name) = match rel.rsplit_once('/') {
                Some((d, n)) => (d, n),
                None => ("", rel),
            };
            let table = match name {
                ".gitignore" => &mut rules.git_ignore,
                ".ignore" => &mut rules.dot_ignore,
                _ => continue,
            };
            if let Some(gi) = build(&root.join(dir), &root.join(rel)) {
                table.insert(dir.to_string(), gi);
            }
        }
        let exclude = root.join(".git/info/exclude");
        if exclude.is_file() {
            rules.exclude = build(root, &exclude);
        }
        rules
    }

    /// Whether `rel` (a file path relative to the root, `/`-separated) is synced.
    pub fn managed(&self, rel: &str) -> bool {
        if rel.is_empty() {
            return false;
        }
        let parts: Vec<&str> = rel.split('/').collect();
        let (name, dirs) = parts.split_last().expect("non-empty");
        if is_scratch(name) || dirs.iter().any(|d| SKIP_DIRS.contains(d) || d.is_empty()) {
            return false;
        }
        // A directory that is ignored hides everything below it.
        let mut prefix = String::new();
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                prefix.push('/');
            }
            prefix.push_str(part);
            if self.ignored(&prefix, i + 1 < parts.len()) {
                return false;
            }
        }
        true
    }

    /// Whether a directory (relative) should be watched.
    pub fn managed_dir(&self, rel: &str) -> bool {
        if rel.is_empty() {
            return true;
        }
        let mut prefix = String::new();
        for (i, part) in rel.split('/').enumerate() {
            if SKIP_DIRS.contains(&part) || part.is_empty() {
                return false;
            }
            if i > 0 {
                prefix.push('/');
            }
            prefix.push_str(part);
            if self.ignored(&prefix, true) {
                return false;
            }
        }
        true
    }

    /// As the `ignore` crate decides: `.ignore` files (deepest first) before `.gitignore` files
    /// (deepest first) before `.git/info/exclude`.
    fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        let abs = self.root.join(rel);
        for table in [&self.dot_ignore, &self.git_ignore] {
            if table.is_empty() {
                continue;
            }
            let mut dir = rel;
            loop {
                dir = match dir.rsplit_once('/') {
                    Some((d, _)) => d,
                    None if dir.is_empty() => break,
                    None => "",
                };
                if let Some(gi) = table.get(dir) {
                    match gi.matched(&abs, is_dir) {
                        Match::Ignore(_) => return true,
                        Match::Whitelist(_) => return false,
                        Match::None => {}
                    }
                }
                if dir.is_empty() {
                    break;
                }
            }
        }
        match &self.exclude {
            Some(gi) => gi.matched(&abs, is_dir).is_ignore(),
            None => false,
        }
    }
}

fn build(dir: &Path, file: &Path) -> Option<Gitignore> {
    let mut b = GitignoreBuilder::new(dir);
    if b.add(file).is_some() {
        // An unreadable or partly invalid ignore file: use what could be read.
    }
    b.build().ok()
}

/// Whether a file name is one whose change alters the rules.
pub fn is_rule_file(name: &str) -> bool {
    name == ".gitignore" || name == ".ignore"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_names() {
        for n in [
            ".#core.clj",
            "#core.clj#",
            "core.clj~",
            ".core.clj.swp",
            ".core.clj.swx",
            "4913",
            ".core.clj.formdb-tmp-1-2",
            "core.clj___jb_tmp___",
        ] {
            assert!(is_scratch(n), "{n}");
        }
        for n in ["core.clj", ".gitignore", "deps.edn", "#", ".swp", "a.swp"] {
            assert!(!is_scratch(n), "{n}");
        }
    }

    #[test]
    fn gitignore_rules_apply_below_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/gen")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
        std::fs::write(root.join("src/.gitignore"), "gen/\n!keep.log\n").unwrap();
        let rules = Rules::load(root, [".gitignore", "src/.gitignore"]);
        assert!(rules.managed("src/a.clj"));
        assert!(!rules.managed("x.log"));
        assert!(rules.managed("src/keep.log"), "whitelisted deeper");
        assert!(!rules.managed("src/gen/a.clj"));
        assert!(!rules.managed("build/a.clj"));
        assert!(!rules.managed(".git/config"));
        assert!(!rules.managed("target/a.clj"));
        assert!(!rules.managed("src/.a.clj.swp"));
        assert!(rules.managed("gen/a.clj"), "src/.gitignore does not apply at the root");
        assert!(!rules.managed_dir("src/gen"));
        assert!(rules.managed_dir("src"));
    }
}
