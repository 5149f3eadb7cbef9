//! Vars: where they are defined and used.
