//! Names of paths every crate treats the same way: the directories never imported, synced or
//! taken from git history, the store's database file, and editors' scratch files.

/// Directories whose files are never imported, synced or read from history.
pub const SKIP_DIRS: &[&str] =
    &[".git", ".formdb", "target", "node_modules", ".cpcache", ".shadow-cljs"];

/// The SQLite file `Store::open` keeps inside the store directory.
pub const STORE_FILE: &str = "store.db";

/// Whether `rel` (relative, `/`-separated) lies below one of [`SKIP_DIRS`].
pub fn in_skipped_dir(rel: &str) -> bool {
    rel.split('/').rev().skip(1).any(|dir| SKIP_DIRS.contains(&dir))
}

/// Suffixes of editors' scratch files: vim swap files, temporaries and backups of other tools.
const SCRATCH_SUFFIXES: &[&str] =
    &[".swp", ".swo", ".swx", ".tmp", ".bak", ".orig", "___jb_tmp___", "___jb_old___"];

/// Is this one path component the name of an editor's scratch file, never a source file?
/// - an emacs lock `.#f`, autosave `#f#` or backup `f~`;
/// - a vim swap file `.f.swp` (`.f.swo`, …, any `.sw` and a lowercase letter after a dot name);
/// - all digits: vim's `4913` write probe (and the `4913 + n*123` names it tries after it);
/// - `sed` and six letters or digits: the temp file of `sed -i`;
/// - `*.swp`, `*.swo`, `*.swx`, `*.tmp`, `*.bak`, `*.orig`, `*___jb_tmp___`, `*___jb_old___`.
///
/// Other hidden names (a mount keeps every new one in memory) are the caller's rule: `.gitignore`
/// is a source file to the sync.
pub fn editor_scratch(name: &str) -> bool {
    let digits = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
    let sed = name.len() == 9
        && name.starts_with("sed")
        && name[3..].bytes().all(|b| b.is_ascii_alphanumeric());
    let vim_swap = name.starts_with('.') && name.len() > 4 && {
        let ext = &name.as_bytes()[name.len() - 4..];
        ext.starts_with(b".sw") && ext[3].is_ascii_lowercase()
    };
    name.starts_with(".#")
        || (name.len() > 1 && name.starts_with('#') && name.ends_with('#'))
        || name.ends_with('~')
        || digits
        || sed
        || vim_swap
        || SCRATCH_SUFFIXES.iter().any(|s| name.len() > s.len() && name.ends_with(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editor_scratch_names() {
        for n in [
            ".cart.clj.swp",
            ".cart.clj.swx",
            ".cart.clj.swa",
            ".#cart.clj",
            "#cart.clj#",
            "cart.clj~",
            "4913",
            "5036",
            "sedAb12Cd",
            "cart.clj.tmp",
            "cart.clj.bak",
            "cart.clj.orig",
            "a.swp",
            "cart.clj___jb_tmp___",
            "cart.clj___jb_old___",
        ] {
            assert!(editor_scratch(n), "{n} should be scratch");
        }
        for n in [
            "cart.clj",
            "deps.edn",
            "README.md",
            ".gitignore",
            "sed.clj",
            "sedimentary",
            "4913.clj",
            "#",
            "#x",
            ".swp",
            ".orig",
            "",
        ] {
            assert!(!editor_scratch(n), "{n} should be a source name");
        }
    }

    #[test]
    fn skipped_dirs_are_any_directory_of_a_path() {
        assert!(in_skipped_dir("target/a.clj"));
        assert!(in_skipped_dir("src/node_modules/x/a.cljs"));
        assert!(!in_skipped_dir("src/target.clj"));
        assert!(!in_skipped_dir("target"));
    }
}
