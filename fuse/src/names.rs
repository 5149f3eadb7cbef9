//! Which new names are scratch: kept in memory by the mount, never written to the store.
//!
//! The rule: a path the store holds (a file, a blob or a draft) is always tracked, whatever its
//! name. A path the store does not hold is scratch when any of its components is
//! - hidden (starts with `.`): vim swap files `.f.swp`, emacs locks `.#f`, temp files of atomic
//!   writers (`.f.XXXXXX`, `.goutputstream-*`), tool caches (`.cpcache/`, `.lsp/`);
//! - an editor's scratch name ([`formdb_engine::paths::editor_scratch`], the rules the sync
//!   shares): emacs and vim files, `sed -i` temporaries, backups.
//!
//! Everything else is tracked: a new tracked file is committed to the store when it gets content
//! (see the crate docs for when).

/// Is this one path component a scratch name?
pub fn scratch_component(name: &str) -> bool {
    name.starts_with('.') || formdb_engine::paths::editor_scratch(name)
}

/// Is a path (relative, `/`-separated) that the store does not hold a scratch path?
pub fn scratch_path(path: &str) -> bool {
    path.split('/').any(scratch_component)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_and_editor_scratch_names() {
        for n in [".cart.clj.swp", ".goutputstream-XYZ", ".lsp", "sedAb12Cd", "cart.clj~"] {
            assert!(scratch_component(n), "{n} should be scratch");
        }
        for n in ["cart.clj", "deps.edn", "sed.clj", "4913.clj", "#x", ""] {
            assert!(!scratch_component(n), "{n} should be tracked");
        }
        assert!(scratch_path("src/.cpcache/x.clj"));
        assert!(!scratch_path("src/shop/new_ns.clj"));
    }
}
