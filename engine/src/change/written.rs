//! What an import into an empty store has written so far, so that its batches need not ask
//! the store about keys it cannot hold.
//!
//! A batch of a first import asks the store, for each of its thousands of forms and vars,
//! whether the id is stored already (moved in from elsewhere), what versions it has, and which
//! stored forms call the vars it defines or moves. Into an empty store nearly every answer is
//! "none", and the questions were a fifth of a million-line import (about 2.5 s of 13 s). Every
//! form such a store holds was written by one of the import's own batches, so these sets,
//! grown by `apply` as it writes each batch, tell which keys may be stored: a key outside them
//! is not, and is not looked up. They hold only while no one else writes: each is tied to the
//! generation its last batch left, and is dropped once the store is at another.

use std::collections::HashSet;

use super::{Change, ChangeSet};
use crate::identity::IdSet;
use crate::store::{Result, Store};

/// Every form id, defined var and called var the import's batches have written, at `at`.
#[derive(Default)]
pub(crate) struct Written {
    /// The store's generation once the last batch was written (or at the start).
    at: u64,
    ids: IdSet,
    defined: HashSet<String>,
    called: HashSet<String>,
}

impl Written {
    /// Empty sets for an import into `store`, if it holds no form, version or call (a store
    /// that once held forms keeps their versions, and is asked as before).
    pub(crate) fn if_empty(store: &Store) -> Result<Option<Written>> {
        let before = crate::query::generation(store)?;
        for script in [
            "?[id] := *form{id} :limit 1",
            "?[id] := *version{id} :limit 1",
            "?[to] := *calls{to} :limit 1",
        ] {
            if !store.query(script, Default::default())?.rows.is_empty() {
                return Ok(None);
            }
        }
        // Another writer in between: the emptiness seen may not be the store's at `before`.
        if crate::query::generation(store)? != before {
            return Ok(None);
        }
        Ok(Some(Written { at: before, ..Written::default() }))
    }

    /// `written` if it describes the store at `generation`.
    pub(crate) fn if_at(written: Option<&Written>, generation: u64) -> Option<&Written> {
        written.filter(|w| w.at == generation)
    }

    /// [`Written::if_at`], dropping `written` for good if it does not (some other writer came in
    /// between: what it wrote is in no set).
    pub(super) fn hold_at(written: &mut Option<Written>, generation: u64) -> Option<&Written> {
        if Written::if_at(written.as_ref(), generation).is_none() {
            *written = None;
        }
        written.as_ref()
    }

    /// Whether a form with this id may be stored (or may have been, and left versions).
    pub(crate) fn may_hold_id(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Whether a stored form may define `var`.
    pub(crate) fn may_define(&self, var: &str) -> bool {
        self.defined.contains(var)
    }

    /// Whether a stored form may call (or refer to) `var`.
    pub(crate) fn may_call(&self, var: &str) -> bool {
        self.called.contains(var)
    }

    /// Count `set`, just written over `generation`: the store is now at the next one.
    pub(super) fn record(written: &mut Option<Written>, set: &ChangeSet, generation: u64) {
        let Some(w) = written.as_mut() else { return };
        for c in &set.changes {
            match c {
                Change::PutFile { forms, .. } | Change::PutForms { forms, .. } => {
                    for f in forms {
                        w.ids.insert(&f.id);
                        w.defined.extend(f.defines.iter().map(|(v, _)| v.to_string()));
                        w.called.extend(f.calls.iter().map(|c| c.to.to_string()));
                    }
                }
                // No form written. Removals leave their ids and vars in the sets: "may be
                // stored" stays true of them, which only costs a lookup.
                Change::SetPurity { .. }
                | Change::DeleteFile { .. }
                | Change::PutBlob { .. }
                | Change::DeleteBlob { .. }
                | Change::PutDraft(_)
                | Change::DropDraft { .. }
                | Change::Read(_)
                | Change::Bookkeeping { .. } => {}
            }
        }
        w.at = generation + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{apply, apply_importing};
    use crate::import::{file_changes, Incoming, Quiet};
    use crate::store::str_at;

    fn changes(store: &Store, path: &str, text: &str) -> ChangeSet {
        let incoming = vec![Incoming { path: path.into(), bytes: text.as_bytes().to_vec() }];
        let (changes, errors) = file_changes(store, incoming, &Quiet).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        ChangeSet { author: "test".into(), op: "import".into(), changes }
    }

    fn findings_of(store: &Store, ns: &str) -> Vec<String> {
        let rows = store
            .query(
                "?[kind, message] := *diagnostic{ns: $ns, kind, message}",
                crate::store::params([("ns", ns.into())]),
            )
            .unwrap();
        rows.rows.iter().map(|r| format!("{}: {}", str_at(r, 0), str_at(r, 1))).collect()
    }

    /// A batch written after another writer's change looks its keys up again: here the caller
    /// that writer stored, whose call no longer fits the var the batch changes.
    #[test]
    fn a_write_by_anyone_else_drops_what_the_import_wrote() {
        let store = Store::open_in_memory().unwrap();
        let mut written = Written::if_empty(&store).unwrap();
        assert!(written.is_some(), "an empty store");
        let one = changes(&store, "src/c.clj", "(ns c)\n\n(defn h [x] x)\n");
        apply_importing(&store, &one, &mut written).unwrap();
        assert!(written.as_ref().unwrap().may_define("c/h"));
        assert!(!written.as_ref().unwrap().may_call("c/h"));

        // Someone else stores a caller of `c/h`: in none of the import's sets.
        let other = changes(&store, "src/b.clj", "(ns b (:require [c]))\n\n(defn g [] (c/h 1))\n");
        apply(&store, &other).unwrap();
        assert!(findings_of(&store, "b").is_empty(), "{:?}", findings_of(&store, "b"));

        // The import's next batch takes an arity from `c/h`: its stored caller is checked again.
        let two = changes(&store, "src/c.clj", "(ns c)\n\n(defn h [x y] x)\n");
        apply_importing(&store, &two, &mut written).unwrap();
        assert!(written.is_none(), "the sets no longer describe the store");
        let found = findings_of(&store, "b");
        assert!(found.iter().any(|f| f.contains("c/h")), "no finding for the call: {found:?}");
    }

    #[test]
    fn a_store_that_held_forms_is_asked_as_before() {
        let store = Store::open_in_memory().unwrap();
        apply(&store, &changes(&store, "src/c.clj", "(ns c)\n\n(defn h [x] x)\n")).unwrap();
        assert!(Written::if_empty(&store).unwrap().is_none());
    }
}
