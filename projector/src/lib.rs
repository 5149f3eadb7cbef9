//! The projector: the store's namespaces rendered as file text, and file text parsed back.
//!
//! Owns the views (as stored, a user's alias view, one form per line), alias maps, the
//! cljfmt-style layout of forms that have no author layout (`layout`), and placement of new
//! forms. Must not write to the store except through the engine's change API, and must not know
//! about mounts or protocols.

mod alias_view;
pub mod aliases;
pub mod cache;
mod error;
pub mod layout;
mod oneline;
mod scan;
pub mod views;
