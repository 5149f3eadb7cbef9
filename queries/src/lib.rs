//! The named Datalog queries of formdb.
//!
//! Each query is a `.cozo` file in `queries/`, embedded at build time so the binary needs
//! nothing beside it, and readable (and extendable) as plain files. This crate only names and
//! carries the text; running them is the engine's job.

/// A named query: its name (the file stem), the text, and the parameters it reads.
///
/// A script opens with a comment: what the query answers, in whole sentences for users (what
/// `formdb run --list` prints), then a `Params:` line, then any notes for maintainers.
#[derive(Clone, Copy, Debug)]
pub struct NamedQuery {
    pub name: &'static str,
    pub script: &'static str,
}

impl NamedQuery {
    /// What the query answers: the opening comment up to its `Params:` line, as one paragraph.
    pub fn about(&self) -> String {
        let words: Vec<&str> = self
            .script
            .lines()
            .map_while(|l| l.strip_prefix('#'))
            .map(str::trim)
            .take_while(|l| !l.starts_with("Params:"))
            .flat_map(str::split_whitespace)
            .collect();
        words.join(" ")
    }

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

    /// `formdb run --list` shows these to users: whole sentences, no names from inside formdb
    /// (relations, Rust paths, `$params`, code spans).
    #[test]
    fn every_query_says_what_it_answers_in_whole_sentences() {
        for q in ALL {
            let about = q.about();
            let first =
                about.chars().next().unwrap_or_else(|| panic!("{}: no description", q.name));
            assert!(first.is_uppercase(), "{}: starts a sentence: {about}", q.name);
            assert!(about.ends_with('.'), "{}: ends a sentence: {about}", q.name);
            for internal in ['`', '$', '*', '_'] {
                assert!(!about.contains(internal), "{}: no `{internal}` in: {about}", q.name);
            }
            assert!(!about.contains("::"), "{}: no Rust paths in: {about}", q.name);
            assert!(!about.contains("Params:"), "{}: {about}", q.name);
        }
        assert_eq!(
            get("usages").unwrap().about(),
            "Every form that uses a var directly, with the place of its first use."
        );
    }
}
