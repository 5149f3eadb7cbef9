//! The files of a tree to import: what the ignore files leave and what git tracks, never
//! through a symlink.

use super::*;

/// Files under `root` to import, as (relative path with `/`, absolute path), sorted: those the
/// ignore files (`.gitignore`, `.ignore`, `.git/info/exclude`) leave, and every regular file git
/// tracks, since git's index wins over its ignore rules (see `git`). Symlinks and the
/// `SKIP_DIRS` are never followed.
pub fn walk(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    if !root.is_dir() {
        return Err(StoreError::Refused(format!("{}: not a directory", root.display())));
    }
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .git_global(false)
        .parents(false)
        .filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir())
                && SKIP_DIRS.contains(&e.file_name().to_string_lossy().as_ref()))
        })
        .sort_by_file_path(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        let entry =
            entry.map_err(|e| StoreError::Refused(format!("walking {}: {e}", root.display())))?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        let rel =
            rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        out.push((rel, entry.path().to_path_buf()));
    }
    if let Some(tracked) = crate::git::tracked(root) {
        let walked: HashSet<String> = out.iter().map(|(rel, _)| rel.clone()).collect();
        let real_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        for rel in tracked.files.into_iter().filter(|rel| !walked.contains(rel)) {
            let path = root.join(&rel);
            let skipped = rel.split('/').any(|part| SKIP_DIRS.contains(&part));
            // A regular file reached without a symlink, as the walk above never follows them.
            let plain = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                && path.canonicalize().is_ok_and(|real| real == real_root.join(&rel));
            if !skipped && plain {
                out.push((rel, path));
            }
        }
        out.sort_by(|a, b| a.1.cmp(&b.1));
    }
    Ok(out)
}
