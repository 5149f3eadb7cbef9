//! Placement of a form inserted without a position: after the last form of its namespace that
//! it uses and before the first form that uses it, so the file still loads in Clojure (a var
//! must be defined before it is used). When the two conflict (the new form and an earlier form
//! use each other), the form goes after what it uses and a `(declare name)` goes before its
//! first user.

use std::collections::HashSet;

use formdb_engine::forms::{self, Content};
use formdb_engine::syntax::{self, Lang};

use formdb_engine::syntax::unqualified_symbols as symbols;

/// Where a new form goes among a file's top-level forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Index among the current top-level forms to insert at.
    pub at: usize,
    /// A `(declare ...)` to insert first, at `declare_at`, when uses run both ways.
    pub declare: Option<String>,
    pub declare_at: usize,
}

/// Place `new_source` (one form) in `file_text`.
pub fn place(file_text: &str, lang: Lang, path: &str, new_source: &str) -> Placed {
    let end = Placed { at: usize::MAX, declare: None, declare_at: 0 };
    let parsed = forms::parse_file_bounded(path, lang, file_text.to_string());
    let Content::Forms { forms, .. } = &parsed.content else {
        return end;
    };
    let new = forms::parse_file(path, lang, new_source.to_string());
    let Content::Forms { forms: new_forms, .. } = &new.content else {
        return end;
    };
    let Some(new_form) = new_forms.first() else {
        return end;
    };
    let defined: HashSet<&str> =
        new_form.analysis.defines.iter().map(|d| d.name.as_str()).collect();
    let tree = syntax::parse(new_source);
    let mut uses = HashSet::new();
    symbols(tree.root_node(), new_source, &mut uses);

    // The last existing form defining something the new form uses.
    let last_callee = forms.iter().rposition(|f| {
        f.analysis.kind.as_str() != "ns"
            && f.analysis
                .defines
                .iter()
                .any(|d| uses.contains(d.name.as_str()) && !defined.contains(d.name.as_str()))
    });
    // The first existing form using what the new form defines (a `declare` does not count).
    let first_caller = if defined.is_empty() {
        None
    } else {
        forms.iter().position(|f| {
            if f.analysis.head == "declare" || f.analysis.kind.as_str() == "ns" {
                return false;
            }
            let t = syntax::parse(&f.source);
            let mut used = HashSet::new();
            symbols(t.root_node(), &f.source, &mut used);
            let own: HashSet<&str> = f.analysis.defines.iter().map(|d| d.name.as_str()).collect();
            defined.iter().any(|d| used.contains(*d) && !own.contains(d))
        })
    };
    // Never before the `ns` form.
    let after_ns = forms.iter().position(|f| f.analysis.kind.as_str() == "ns").map_or(0, |i| i + 1);
    match (last_callee, first_caller) {
        (_, None) => Placed { at: forms.len(), declare: None, declare_at: 0 },
        (None, Some(c)) => Placed { at: c.max(after_ns), declare: None, declare_at: 0 },
        (Some(l), Some(c)) if l < c => Placed { at: c, declare: None, declare_at: 0 },
        (Some(l), Some(c)) => {
            let mut names: Vec<&str> = defined.into_iter().collect();
            names.sort();
            Placed {
                at: l + 1,
                declare: Some(format!("(declare {})", names.join(" "))),
                declare_at: c.max(after_ns),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str =
        "(ns a.b)\n\n(defn helper [x] (inc x))\n\n(defn main [] (twice 2))\n\n(defn other [] 1)\n";

    #[test]
    fn goes_before_its_first_caller() {
        let p = place(FILE, Lang::Clj, "a/b.clj", "(defn twice [x] (* 2 x))");
        assert_eq!(p, Placed { at: 2, declare: None, declare_at: 0 });
    }

    #[test]
    fn goes_after_what_it_calls_when_nothing_calls_it() {
        let p = place(FILE, Lang::Clj, "a/b.clj", "(defn thrice [x] (helper (* 3 x)))");
        assert_eq!(p.at, 4);
        assert!(p.declare.is_none());
    }

    #[test]
    fn a_cycle_gets_a_declare_before_the_caller() {
        let file = "(ns a.b)\n\n(defn even2? [n] (if (zero? n) true (odd2? (dec n))))\n";
        let p = place(
            file,
            Lang::Clj,
            "a/b.clj",
            "(defn odd2? [n] (if (zero? n) false (even2? (dec n))))",
        );
        assert_eq!(p.at, 2);
        assert_eq!(p.declare.as_deref(), Some("(declare odd2?)"));
        assert_eq!(p.declare_at, 1);
    }

    #[test]
    fn recursion_is_not_a_cycle() {
        let p = place(
            FILE,
            Lang::Clj,
            "a/b.clj",
            "(defn fact [n] (if (< n 2) 1 (* n (fact (dec n)))))",
        );
        assert_eq!(p.at, 4);
        assert!(p.declare.is_none());
    }
}
