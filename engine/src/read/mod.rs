//! Typed reads of the store for the other crates: each function runs its script here and
//! returns plain data, so a relation or column renamed in the schema breaks the engine's build,
//! not a query somewhere else at run time. Writes go through `change::apply`; the few writes of
//! data outside the form model (alias maps, the directory sync's bookkeeping) are here too.

pub mod aliases;
pub mod drafts;
pub mod files;
pub mod findings;
pub mod forms;
pub mod namespaces;
pub mod sync_state;
pub mod usages;
