//! What git tracks in a directory: the files of its index, which belong to the project even when
//! a `.gitignore` rule matches them (as in git, where ignore rules apply to untracked files only).
//! In the clj-kondo repository, `AwesomeClass$Foo.class` is committed while `*.class` is ignored.
//!
//! Read with the git CLI (`git ls-files`): it is the reference reader of the index (every index
//! version, split and sparse indexes, `GIT_DIR` and worktrees) at the cost of one process start
//! per read, a few milliseconds, and no new dependency. Where git is missing or the directory is
//! not in a work tree, nothing is tracked and the ignore files alone decide.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

/// The files git's index holds under a directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tracked {
    /// Paths relative to the directory, `/`-separated.
    pub files: BTreeSet<String>,
    /// The index file they were read from (to tell when to read them again).
    pub index: PathBuf,
}

impl Tracked {
    /// Whether `rel` is a tracked file.
    pub fn contains(&self, rel: &str) -> bool {
        self.files.contains(rel)
    }

    /// Whether a tracked file lies below the directory `rel`.
    pub fn has_below(&self, rel: &str) -> bool {
        let prefix = format!("{rel}/");
        self.files.range(prefix.clone()..).next().is_some_and(|f| f.starts_with(&prefix))
    }

    /// The index file's modification time, size and inode: what a write of it changes (git
    /// writes a new index and renames it into place).
    pub fn index_stamp(&self) -> Option<(SystemTime, u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&self.index).ok()?;
        Some((m.modified().ok()?, m.len(), m.ino()))
    }
}

fn git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

/// What git tracks under `root`, or `None` when `root` is not in a git work tree (or git does not
/// run).
pub fn tracked(root: &Path) -> Option<Tracked> {
    // Paths come relative to `root` (git's working directory), NUL-separated and unquoted.
    let listed = git(root, &["ls-files", "-z", "--cached"])?;
    let index = git(root, &["rev-parse", "--git-path", "index"])?;
    let index = Path::new(OsStr::from_bytes(index.strip_suffix(b"\n").unwrap_or(&index)));
    let files = listed
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    Some(Tracked { files, index: root.join(index) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(root: &Path, args: &[&str]) {
        let ok = Command::new("git").arg("-C").arg(root).args(args).status().unwrap().success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn tracked_files_are_listed_relative_to_the_directory_asked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(tracked(root), None, "not a work tree");
        run(root, &["init", "-q"]);
        std::fs::create_dir_all(root.join("sub/classes")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.class\n").unwrap();
        std::fs::write(root.join("sub/classes/A$B.class"), b"\xca\xfe").unwrap();
        std::fs::write(root.join("sub/classes/C.class"), b"\xca\xfe").unwrap();
        std::fs::write(root.join("sub/a b.clj"), "(ns a)").unwrap();
        run(root, &["add", "-f", "sub/classes/A$B.class", "sub/a b.clj", ".gitignore"]);

        let all = tracked(root).unwrap();
        let files: Vec<&str> = all.files.iter().map(String::as_str).collect();
        assert_eq!(files, [".gitignore", "sub/a b.clj", "sub/classes/A$B.class"]);
        assert!(all.has_below("sub/classes") && all.has_below("sub") && !all.has_below("su"));
        assert!(all.index_stamp().is_some(), "{:?}", all.index);

        let sub = tracked(&root.join("sub")).unwrap();
        assert!(sub.contains("classes/A$B.class") && sub.contains("a b.clj"), "{sub:?}");
        assert_eq!(sub.files.len(), 2);
        assert_eq!(sub.index_stamp(), all.index_stamp(), "the same index");
    }
}
