//! The formdb engine: Clojure source in, form entities in a CozoDB store out.
//!
//! Owns parsing (`syntax`, `forms`, over a text owned or shared with its writer: `file_text`), namespace declarations and symbol resolution (`nsdecl`,
//! `resolve`), purity classification (`purity`), the call sites diagnostics check (`sites`) and the checks stored with them (`checks`), form identity (`identity`), the store schema and
//! the one write path (`store`, `change`), and directory import (`import`).
//!
//! Must not touch: rendering files for users (the projector), mounts or protocols. Every write to
//! the store goes through [`change::apply`], one transaction per change set, with a version row
//! per changed form.

pub mod analyze;
pub mod change;
pub mod checks;
pub mod evals;
pub mod file_text;
pub mod forms;
pub mod git;
pub mod history;
pub mod identity;
pub mod import;
mod memo;
pub mod nsdecl;
pub mod packed;
pub mod paths;
pub mod purity;
pub mod query;
pub mod reach;
pub mod read;
pub mod resolve;
pub mod scan;
pub mod sites;
mod sqlite_connections;
pub mod stamp;
pub mod store;
pub mod syntax;
pub mod trace;

pub use store::{Store, StoreError};
