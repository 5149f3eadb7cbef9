//! Edits: how a mount's saves and an agent's edits become one transaction each.
//!
//! Owns whole-file saves (parse-back of a user's view, drafts for saves that cannot be applied,
//! per-form merges against a store that moved on, deletes and restores: `save`), and form-level
//! edits by id (replace, insert with placement, delete, comments, new namespaces, batches:
//! `ops`, `place`), with the checks agent source gets first (`check`) and the diagnostics of a
//! namespace (`diagnostics`). Every edit computes new file texts and hands them to the engine's
//! `import::file_changes` + `change::apply`, so identity, resolution, purity and history follow
//! the same rules as an import. Must not know about FUSE, MCP or any other transport.

pub mod check;
pub mod diagnostics;
pub mod ops;
pub mod place;
pub mod refactor;
pub mod save;

use formdb_engine::store::StoreError;
use formdb_projector::views::ViewError;

/// What an edit can fail with. Every message says what was wrong and what to send instead.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    View(#[from] ViewError),
    /// Bad input: an unknown id, a path outside the tree, a name that exists already.
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = EditError> = std::result::Result<T, E>;

/// A path as the store keeps it: relative, `/`-separated, no `.`/`..`, no empty parts.
pub fn check_path(path: &str) -> Result<&str> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.contains('\0')
        || path.split('/').any(|p| p.is_empty() || p == "." || p == "..");
    if bad {
        return Err(EditError::Invalid(format!(
            "`{path}` is not a path inside the tree: send a relative path such as `src/my/ns.clj` (no leading `/`, no `..`)"
        )));
    }
    Ok(path)
}
