//! Which paths of the working directory the sync keeps in step with the store.
//!
//! The files `formdb_engine::import::walk` would import (its skipped directories, `.gitignore`,
//! `.ignore` and `.git/info/exclude` rules, and every file git tracks whatever those say), less
//! editor scratch files and our own temporary files. The initial re-sync lists files with `walk`
//! itself; single paths reported by the watcher are judged here with the same ignore files and
//! git index, so both agree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use formdb_engine::git::{self, Tracked};

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
    /// What git tracks, managed even where an ignore rule matches (`None` outside a work tree).
    git: Option<Mutex<GitIndex>>,
}

/// The files git tracks, and the stamp of the index they were read from.
struct GitIndex {
    tracked: Tracked,
    stamp: Option<(std::time::SystemTime, u64, u64)>,
}

impl Rules {
    /// Read the ignore files among `files` (relative paths as `walk` lists them).
    pub fn load<'a>(root: &Path, files: impl IntoIterator<Item = &'a str>) -> Rules {
        let mut rules = Rules {
            root: root.to_path_buf(),
            dot_ignore: BTreeMap::new(),
            git_ignore: BTreeMap::new(),
            exclude: None,
            git: git::tracked(root)
                .map(|tracked| Mutex::new(GitIndex { stamp: tracked.index_stamp(), tracked })),
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
                return self.tracked(rel, false);
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
                return self.tracked(rel, true);
            }
        }
        true
    }

    /// Whether git tracks the file `rel` (with `below`, some file under the directory `rel`). The
    /// index is read again when git has written it since the last read; asked only of paths an
    /// ignore rule matches, so most events cost nothing here.
    fn tracked(&self, rel: &str, below: bool) -> bool {
        let Some(git) = &self.git else { return false };
        let mut index = git.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let stamp = index.tracked.index_stamp();
        if stamp != index.stamp {
            if let Some(now) = git::tracked(&self.root) {
                // The stamp from before the read: a write during it is seen next time.
                *index = GitIndex { tracked: now, stamp };
            }
        }
        match below {
            true => index.tracked.has_below(rel),
            false => index.tracked.contains(rel),
        }
    }

    /// As the `ignore` crate decides (before git's index, which `managed` asks): `.ignore` files (deepest first) before `.gitignore` files
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

    fn git(root: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    }

    /// Git's index wins over `.gitignore`, as import's walk has it: a committed
    /// `AwesomeClass$Foo.class` under `*.class` is synced, an untracked `.class` file is not, and
    /// a file added to the index later is synced from then on.
    #[test]
    fn files_git_tracks_are_managed_whatever_gitignore_says() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::create_dir_all(root.join("classes/deep")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.class\nclasses/\n").unwrap();
        for f in ["src/AwesomeClass$Foo.class", "src/Other.class", "classes/deep/K.class"] {
            std::fs::write(root.join(f), b"\xca\xfe\xba\xbe").unwrap();
        }
        std::fs::write(root.join("src/a.clj"), "(ns a)\n").unwrap();
        git(root, &["add", "-f", "src/AwesomeClass$Foo.class", "classes/deep/K.class"]);

        let files = formdb_engine::import::walk(root).unwrap();
        let walked: Vec<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
        assert_eq!(
            walked,
            [".gitignore", "classes/deep/K.class", "src/AwesomeClass$Foo.class", "src/a.clj"]
        );
        let rules = Rules::load(root, walked.iter().copied());
        for rel in &walked {
            assert!(rules.managed(rel), "{rel}: walk and the sync agree");
        }
        assert!(!rules.managed("src/Other.class"), "untracked and ignored");
        assert!(!rules.managed("classes/deep/New.class"));
        assert!(rules.managed_dir("classes") && rules.managed_dir("classes/deep"));

        // git add -f later: the next question reads the index again.
        git(root, &["add", "-f", "src/Other.class"]);
        assert!(rules.managed("src/Other.class"));
        git(root, &["rm", "-q", "--cached", "classes/deep/K.class"]);
        assert!(!rules.managed("classes/deep/K.class"));
        assert!(!rules.managed_dir("classes"));
    }
}
