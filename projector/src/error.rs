//! What can go wrong rendering or parsing back a view, for every module of the projector.

use formdb_engine::store::StoreError;

/// What can go wrong rendering or parsing back a view.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No stored file declares this namespace (each transport words where to find one).
    #[error("no namespace `{0}` in the store")]
    NoNamespace(String),
    #[error("no file `{0}` in the store")]
    NoFile(String),
    #[error("{0}: the stored file is not UTF-8 text; it has no text view")]
    NotText(String),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = ViewError> = std::result::Result<T, E>;
