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

/// What an edit can fail with. Every message says what was wrong; where finding the right
/// input takes a command of the transport (an MCP tool, a CLI subcommand, a file of the mount),
/// the error is a variant of its own and the transport words that advice for its users.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    View(#[from] ViewError),
    /// No form has this id.
    #[error("no form with id `{id}` in the store")]
    UnknownId { id: String },
    /// No stored file declares this namespace.
    #[error("no namespace `{ns}` in the store")]
    NoNamespace { ns: String },
    /// No stored form defines this var.
    #[error("no var `{fqn}` is defined in the store")]
    NoVar { fqn: String },
    /// A symbol sent to name a var is neither a var name nor a form id.
    #[error("`{symbol}` is neither a var name (such as `my.ns/foo`) nor a form id")]
    NotAVar { symbol: String },
    /// The text an edit would store does not parse; nothing was changed.
    #[error("{file}:{line}:{col}: the edited file would not parse ({why}); nothing was changed")]
    Unparsable { file: String, line: u32, col: u32, why: String },
    /// Op `n` (1-based) of a batch failed with `error`; nothing of the batch was applied.
    #[error("op {n} ({op}): {error}")]
    InOp { n: usize, op: String, error: Box<EditError> },
    /// Other bad input: a path outside the tree, a name that exists already, …; the message says
    /// what to send instead, in words of no transport.
    #[error("{0}")]
    Invalid(String),
}

impl EditError {
    /// The error itself, out of the batch op it happened in.
    pub fn cause(&self) -> &EditError {
        match self {
            EditError::InOp { error, .. } => error.cause(),
            e => e,
        }
    }
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
