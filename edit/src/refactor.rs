//! Refactorings across the store: rename a var, move a form (being written).
