//! Users' alias maps: which alias each user reads for a namespace (`alias_map` relation), over a
//! project default map in `.formdb/aliases.edn` beside the store.

use std::collections::BTreeMap;

use formdb_engine::read;
use formdb_engine::store::Store;

use crate::error::{Result, ViewError};

/// Namespace -> preferred alias.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AliasMap(pub BTreeMap<String, String>);

impl AliasMap {
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> AliasMap {
        AliasMap(pairs.into_iter().collect())
    }

    /// The preferred alias for a namespace.
    pub fn get(&self, ns: &str) -> Option<&str> {
        self.0.get(ns).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }
}

/// The name of the project default map, inside the store directory.
pub const DEFAULT_FILE: &str = "aliases.edn";

/// True if `s` can be written as an alias: a symbol without a namespace part.
pub fn valid_alias(s: &str) -> bool {
    valid_symbol(s) && !s.contains('/')
}

/// A plain symbol name (namespaces too): no whitespace, no reader macro characters, not a
/// number, not `nil`/`true`/`false`.
fn valid_symbol(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    if first.is_ascii_digit() || matches!(first, ':' | '#' | '\'' | '\\' | '^' | '@' | '`' | '~') {
        return false;
    }
    if matches!(s, "nil" | "true" | "false") || s.starts_with('/') || s.ends_with('/') {
        return false;
    }
    if (first == '+' || first == '-') && s[1..].starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    !s.chars().any(|c| {
        c.is_whitespace()
            || matches!(
                c,
                '(' | ')' | '[' | ']' | '{' | '}' | '"' | ';' | ',' | '\\' | '@' | '^' | '`' | '~'
            )
    })
}

/// The user's own map only.
pub fn user_map(store: &Store, user: &str) -> Result<AliasMap> {
    Ok(AliasMap::from_pairs(read::aliases::user_pairs(store, user)?))
}

/// The project default map from `.formdb/aliases.edn`, if the store has a location and the file
/// exists.
pub fn project_map(store: &Store) -> Result<AliasMap> {
    let Some(dir) = store.location() else { return Ok(AliasMap::default()) };
    let path = dir.join(DEFAULT_FILE);
    if !path.is_file() {
        return Ok(AliasMap::default());
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ViewError::Invalid(format!("{}: cannot read: {e}", path.display())))?;
    parse_edn(&text).map_err(|e| ViewError::Invalid(format!("{}: {e}", path.display())))
}

/// The user's map merged over the project default map (the user's own entries win; a default
/// whose alias the user gives to another namespace is dropped).
pub fn load(store: &Store, user: &str) -> Result<AliasMap> {
    let own = user_map(store, user)?;
    let mut merged = project_map(store)?;
    let taken: std::collections::BTreeSet<&String> = own.0.values().collect();
    merged.0.retain(|ns, alias| !own.0.contains_key(ns) && !taken.contains(alias));
    merged.0.extend(own.0.clone());
    Ok(merged)
}

/// Set the user's alias for a namespace. Refused if the alias is not a plain symbol or the user
/// already reads it for another namespace.
pub fn set(store: &Store, user: &str, ns: &str, alias: &str) -> Result<()> {
    if !valid_symbol(ns) || ns.contains('/') {
        return Err(ViewError::Invalid(format!("`{ns}` is not a namespace name")));
    }
    if !valid_alias(alias) {
        return Err(ViewError::Invalid(format!(
            "`{alias}` is not a valid alias (a symbol without `/`)"
        )));
    }
    let own = user_map(store, user)?;
    if let Some((other, _)) = own.iter().find(|(n, a)| *a == alias && *n != ns) {
        return Err(ViewError::Invalid(format!(
            "{user} already reads `{alias}` as `{other}`; one alias can name only one namespace"
        )));
    }
    read::aliases::set_alias(store, user, ns, alias)?;
    Ok(())
}

/// Parse `{:aliases {clojure.string str, ...}}`, rejecting invalid maps with a message naming
/// the offending entry.
pub fn parse_edn(text: &str) -> std::result::Result<AliasMap, String> {
    use edn_format::Value;
    let value = edn_format::parse_str(text).map_err(|e| format!("not valid EDN: {e}"))?;
    let Value::Map(top) = value else {
        return Err("expected a map `{:aliases {some.ns alias ...}}`".into());
    };
    let key = Value::Keyword(edn_format::Keyword::from_name("aliases"));
    let Some(aliases) = top.get(&key) else {
        return Err("missing `:aliases` map: expected `{:aliases {some.ns alias ...}}`".into());
    };
    let Value::Map(entries) = aliases else {
        return Err(format!(
            "`:aliases` must be a map of namespace symbols to alias symbols, not `{}`",
            edn_format::emit_str(aliases)
        ));
    };
    let mut out = AliasMap::default();
    let mut by_alias: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in entries {
        let entry = format!("{} {}", edn_format::emit_str(k), edn_format::emit_str(v));
        let Value::Symbol(ns) = k else {
            return Err(format!("entry `{entry}`: the key must be a namespace symbol"));
        };
        let Value::Symbol(alias) = v else {
            return Err(format!("entry `{entry}`: the value must be an alias symbol"));
        };
        if ns.namespace().is_some() || !valid_symbol(ns.name()) {
            return Err(format!("entry `{entry}`: `{}` is not a namespace name", emit_sym(ns)));
        }
        if alias.namespace().is_some() || !valid_alias(alias.name()) {
            return Err(format!(
                "entry `{entry}`: `{}` is not a valid alias (a symbol without `/`)",
                emit_sym(alias)
            ));
        }
        if let Some(other) = by_alias.insert(alias.name().to_string(), ns.name().to_string()) {
            return Err(format!(
                "entry `{entry}`: alias `{}` is also given to `{other}`; one alias can name only one namespace",
                alias.name()
            ));
        }
        out.0.insert(ns.name().to_string(), alias.name().to_string());
    }
    Ok(out)
}

fn emit_sym(s: &edn_format::Symbol) -> String {
    edn_format::emit_str(&edn_format::Value::Symbol(s.clone()))
}

/// Replace the user's alias map with the one in an EDN text. Nothing is written when the map is
/// invalid. Returns the imported map.
pub fn import_edn(store: &Store, user: &str, text: &str) -> Result<AliasMap> {
    let map = parse_edn(text).map_err(ViewError::Invalid)?;
    read::aliases::replace_user_pairs(
        store,
        user,
        map.iter().map(|(ns, a)| (ns.as_str(), a.as_str())),
    )?;
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edn_maps_are_validated() {
        let m = parse_edn("{:aliases {clojure.string str, clojure.java.io io}}").unwrap();
        assert_eq!(m.get("clojure.string"), Some("str"));
        let e = parse_edn("{:aliases {clojure.string s, clojure.set s}}").unwrap_err();
        assert!(e.contains("alias `s` is also given to"), "{e}");
        let e = parse_edn("{:aliases {\"clojure.string\" s}}").unwrap_err();
        assert!(e.contains("\"clojure.string\" s"), "{e}");
        let e = parse_edn("{:aliases {clojure.string :s}}").unwrap_err();
        assert!(e.contains("must be an alias symbol"), "{e}");
        let e = parse_edn("{:other {}}").unwrap_err();
        assert!(e.contains("missing `:aliases`"), "{e}");
        let e = parse_edn("{:aliases {clojure.string a/b}}").unwrap_err();
        assert!(e.contains("not a valid alias"), "{e}");
    }
}
