//! The named Datalog queries of formdb.
//!
//! Each query is a `.cozo` file in `queries/`, embedded at build time so the binary needs
//! nothing beside it, and readable (and extendable) as plain files. This crate only names and
//! carries the text; running them is the engine's job.

/// A named query: its name (the file stem), the text, and the parameters it reads.
#[derive(Clone, Copy, Debug)]
pub struct NamedQuery {
    pub name: &'static str,
    pub script: &'static str,
}

impl NamedQuery {
    /// Parameters named in the script (`$name`), in order of first appearance.
    pub fn params(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        let s = self.script;
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'$' {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len()
                    && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_')
                {
                    end += 1;
                }
                let name = &s[start..end];
                if !name.is_empty() && !out.contains(&name) {
                    out.push(name);
                }
                i = end;
            } else {
                i += 1;
            }
        }
        out
    }
}

macro_rules! queries {
    ($($name:literal),* $(,)?) => {
        /// Every named query shipped with formdb.
        pub const ALL: &[NamedQuery] = &[
            $(NamedQuery { name: $name, script: include_str!(concat!("../", $name, ".cozo")) },)*
        ];
    };
}

queries![
    "form",
    "usages",
    "callers",
    "callees",
    "ns_overview",
    "search",
    "unresolved",
    "findings",
    "dead_vars",
    "ns_cycles",
    "stats",
    "history",
    "churn",
    "changed-together",
];

/// Look a query up by name.
pub fn get(name: &str) -> Option<&'static NamedQuery> {
    ALL.iter().find(|q| q.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_is_embedded_and_names_its_params() {
        assert!(ALL.len() >= 9);
        for q in ALL {
            assert!(!q.script.trim().is_empty(), "{} is empty", q.name);
        }
        assert_eq!(get("usages").unwrap().params(), vec!["fqn"]);
        assert!(get("callers").unwrap().params().contains(&"depth"));
        assert!(get("nope").is_none());
    }
}
