//! Views of a namespace's file: as stored (byte for byte), a user's alias view, one form per
//! line; and the inverse of the alias view (`parse_back`), so an edited view can be imported.
//!
//! The alias view changes only the alias tokens of the syntax tree: the `:as`/`:as-alias`
//! binding in the namespace declaration, the namespace part of `alias/name` symbols and of
//! `::alias/kw` keywords, and `#::alias{...}` map prefixes. Strings and comments are never
//! touched. Continuation lines aligned past a renamed token are re-indented by the length
//! delta so the file still looks hand-formatted.

use std::sync::Arc;

use formdb_engine::store::Store;
use formdb_engine::syntax;

use crate::aliases::AliasMap;
use crate::cache::Content;

pub use crate::error::{Result, ViewError};

pub use crate::alias_view::{
    file_decl, parse_back_text, user_view_text, user_view_text_checked, user_view_text_parsed,
    user_view_text_scanned, Fallback, UserView,
};
pub use crate::oneline::oneline_text;

/// The stored path of a namespace's file: the declaring file, else the first file in the ns.
/// Cached (see [`crate::cache`]).
pub fn ns_path(store: &Store, ns: &str) -> Result<String> {
    crate::cache::global().ns_path(store, ns)
}

/// A stored file's text (reassembled from its forms), byte for byte. Served from the render
/// cache while the file is unchanged in the store.
pub fn stored_text(store: &Store, path: &str) -> Result<String> {
    Ok(stored_text_shared(store, path)?.to_string())
}

/// [`stored_text`] without copying: the cached text itself.
pub fn stored_text_shared(store: &Store, path: &str) -> Result<Arc<str>> {
    match crate::cache::global().stored(store, path)? {
        Content::Text(t) => Ok(t),
        Content::Bytes(_) => Err(ViewError::NotText(path.into())),
    }
}

/// The namespace's file text as stored: byte-identical to the source for an untouched import.
pub fn as_stored(store: &Store, ns: &str) -> Result<String> {
    stored_text(store, &ns_path(store, ns)?)
}

/// [`as_stored`] without copying: the cached text itself.
pub fn as_stored_shared(store: &Store, ns: &str) -> Result<Arc<str>> {
    stored_text_shared(store, &ns_path(store, ns)?)
}

/// The namespace's file with the user's preferred aliases.
pub fn user_view(store: &Store, ns: &str, aliases: &AliasMap) -> Result<UserView> {
    Ok(UserView::clone(&*user_view_shared(store, ns, aliases)?))
}

/// [`user_view`] without copying: the cached view itself.
pub fn user_view_shared(store: &Store, ns: &str, aliases: &AliasMap) -> Result<Arc<UserView>> {
    let path = ns_path(store, ns)?;
    crate::cache::global()
        .user_view(store, &path, aliases)?
        .ok_or_else(|| ViewError::NotText(path.clone()))
}

/// The inverse of [`user_view`]: the user's aliases mapped back to the stored ones.
pub fn parse_back(store: &Store, ns: &str, text: &str, aliases: &AliasMap) -> Result<String> {
    let stored = as_stored_shared(store, ns)?;
    Ok(parse_back_text(&stored, text, aliases))
}

/// Every top-level form of the namespace's file on one line.
pub fn oneline(store: &Store, ns: &str) -> Result<String> {
    Ok(oneline_shared(store, ns)?.to_string())
}

/// [`oneline`] without copying: the cached view itself.
pub fn oneline_shared(store: &Store, ns: &str) -> Result<Arc<str>> {
    let path = ns_path(store, ns)?;
    crate::cache::global().oneline(store, &path)?.ok_or_else(|| ViewError::NotText(path.clone()))
}

/// How to render stored files.
#[derive(Clone, Debug)]
pub enum Render {
    AsStored,
    User(AliasMap),
    Oneline,
}

/// Read the stored texts of `path` and of the files `after` it ahead of rendering them, in one
/// store read, when the render cache has none of `path` (see `RenderCache::prefetch`).
pub fn read_ahead(store: &Store, path: &str, after: &[&str]) -> Result<usize> {
    crate::cache::global().prefetch(store, path, after)
}

/// A stored path rendered: Clojure files that parse as the chosen view, anything else (blobs,
/// files stored raw, non-UTF-8 files) as its stored bytes. Served from the render cache while
/// the file is unchanged in the store.
pub fn render_path(store: &Store, path: &str, how: &Render) -> Result<(Vec<u8>, Vec<Fallback>)> {
    let cache = crate::cache::global();
    if matches!(how, Render::AsStored) || syntax::Lang::from_path(path).is_none() {
        return Ok((cache.stored(store, path)?.as_bytes().to_vec(), Vec::new()));
    }
    let rendered = match how {
        Render::User(map) => cache
            .user_view(store, path, map)?
            .map(|v| (v.text.clone().into_bytes(), v.fallbacks.clone())),
        Render::Oneline => cache.oneline(store, path)?.map(|t| (t.as_bytes().to_vec(), Vec::new())),
        Render::AsStored => None,
    };
    match rendered {
        Some(r) => Ok(r),
        None => Ok((cache.stored(store, path)?.as_bytes().to_vec(), Vec::new())),
    }
}
