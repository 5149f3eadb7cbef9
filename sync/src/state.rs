//! The directory sync's bookkeeping in the store (`sync_state`, `sync_base`, `sync_origin`,
//! `sync_intent`): kept by the engine, which owns the store; see
//! [`formdb_engine::read::sync_state`].

pub(crate) use formdb_engine::read::sync_state::*;
