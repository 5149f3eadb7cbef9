//! Purity classification from call edges, driven by the rule list in `data/purity.txt`.
//!
//! The rules are data: the same list is loaded into the store's `purity_rule` relation so queries
//! can join against it. Classification here is direct (a form's own calls); `import` folds in the
//! purity of called store vars afterwards (`propagate`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use indexmap::IndexSet;

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Purity {
    Pure,
    Telemetry,
    Impure,
    #[default]
    Unknown,
}

impl Purity {
    pub fn as_str(self) -> &'static str {
        match self {
            Purity::Pure => "pure",
            Purity::Telemetry => "telemetry",
            Purity::Impure => "impure",
            Purity::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Purity> {
        Some(match s {
            "pure" => Purity::Pure,
            "telemetry" => Purity::Telemetry,
            "impure" => Purity::Impure,
            "unknown" => Purity::Unknown,
            _ => return None,
        })
    }
}

/// The rule list shipped with formdb.
pub const DEFAULT_RULES: &str = include_str!("../data/purity.txt");

/// Parsed rules: exact vars and whole namespaces.
#[derive(Debug, Default)]
pub struct Rules {
    pub exact: HashMap<String, Purity>,
    pub namespaces: HashMap<String, Purity>,
}

impl Rules {
    /// Parse the `CLASS VAR` line format. Errors name the line.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let mut rules = Rules::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(class), Some(var), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format!(
                    "purity rules line {}: expected `CLASS VAR`, got `{line}`",
                    i + 1
                ));
            };
            let class = Purity::parse(class).ok_or_else(|| format!("purity rules line {}: unknown class `{class}` (pure, telemetry, impure, unknown)", i + 1))?;
            match var.strip_suffix("/*") {
                Some(ns) => rules.namespaces.insert(ns.to_string(), class),
                None => rules.exact.insert(var.to_string(), class),
            };
        }
        Ok(rules)
    }

    /// The class of one var, if a rule names it.
    pub fn class_of(&self, fqn: &str) -> Option<Purity> {
        self.exact_class(fqn).or_else(|| self.namespace_class(fqn))
    }

    /// The class a rule gives this var by name (`clojure.core/swap!`).
    pub fn exact_class(&self, fqn: &str) -> Option<Purity> {
        self.exact.get(fqn).copied()
    }

    /// The class a rule gives every var of this var's namespace (`clojure.java.io/*`).
    pub fn namespace_class(&self, fqn: &str) -> Option<Purity> {
        let ns = fqn.split_once('/').map(|(ns, _)| ns)?;
        self.namespaces.get(ns).copied()
    }

    /// Every rule as (var-or-pattern, class) rows, for the store.
    pub fn rows(&self) -> Vec<(String, Purity)> {
        let mut rows: Vec<_> = self.exact.iter().map(|(k, v)| (k.clone(), *v)).collect();
        rows.extend(self.namespaces.iter().map(|(k, v)| (format!("{k}/*"), *v)));
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }
}

pub fn default_rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| Rules::parse(DEFAULT_RULES).expect("the shipped purity rules parse"))
}

/// Combine the classes of a form's callees: impure wins, then telemetry; all pure is pure; any
/// unknown callee makes the whole unknown (unless something is impure).
pub fn combine(classes: impl Iterator<Item = Purity>) -> Purity {
    let mut any_unknown = false;
    let mut any_telemetry = false;
    for c in classes {
        match c {
            Purity::Impure => return Purity::Impure,
            Purity::Telemetry => any_telemetry = true,
            Purity::Unknown => any_unknown = true,
            Purity::Pure => {}
        }
    }
    if any_unknown {
        Purity::Unknown
    } else if any_telemetry {
        Purity::Telemetry
    } else {
        Purity::Pure
    }
}

/// Direct classification of a form from its callees, by the shipped rules alone.
pub fn classify<'a>(calls: impl Iterator<Item = &'a str>) -> Purity {
    let rules = default_rules();
    combine(calls.map(|c| rules.class_of(c).unwrap_or(Purity::Unknown)))
}

/// Fold store vars into purity: a var defined in the store takes the purity of its defining
/// form, iterated to a fixpoint. `forms` maps a form key to (its own defined FQNs, its callees);
/// `known` holds the purity of vars defined outside `forms` (the rest of the store). Returns the
/// purity per form key.
pub fn propagate<K: Clone + Eq + std::hash::Hash, S: AsRef<str>>(
    forms: &[(K, Vec<S>, Vec<S>)],
    known: &HashMap<String, Purity>,
) -> HashMap<K, Purity> {
    let mut graph = Graph::default();
    for (_, defs, calls) in forms {
        graph.push(defs.iter().map(AsRef::as_ref), calls.iter().map(AsRef::as_ref));
    }
    let classes = graph.propagate(known);
    forms.iter().zip(classes).map(|((k, _, _), p)| (k.clone(), p)).collect()
}

/// Forms for [`propagate`], each its defined vars and callees: kept one after another in flat
/// lists (form `i`'s ending where form `i + 1`'s start), borrowed where they can be. A callee is
/// kept once however many forms call it, and each call is its index: a 20 MB save's forms made
/// 560,000 calls of far fewer vars, 13.6 MB as a text each (see [`Graph::push`]).
#[derive(Default)]
pub struct Graph<'a> {
    defs: Vec<Cow<'a, str>>,
    /// Each form's callees, as indices into `callees`.
    calls: Vec<u32>,
    /// Every callee once, in the order first called.
    callees: IndexSet<Cow<'a, str>>,
    /// Where each form's defined vars and calls end in `defs` and `calls`.
    ends: Vec<(usize, usize)>,
}

impl<'a> Graph<'a> {
    /// Add a form: the vars it defines, and its callees (a symbol that resolves to nothing as
    /// `?sym`, of unknown class).
    pub fn push<D, C>(&mut self, defs: impl Iterator<Item = D>, calls: impl Iterator<Item = C>)
    where
        D: Into<Cow<'a, str>>,
        C: Into<Cow<'a, str>>,
    {
        self.defs.extend(defs.map(Into::into));
        for c in calls {
            let (i, _) = self.callees.insert_full(c.into());
            // Past four billion distinct callees (no change comes near) a call counts as one
            // of unknown class (see `propagate`).
            self.calls.push(u32::try_from(i).unwrap_or(u32::MAX));
        }
        self.ends.push((self.defs.len(), self.calls.len()));
    }

    /// How many forms.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The vars form `i` defines.
    pub fn defs(&self, i: usize) -> &[Cow<'a, str>] {
        let d0 = if i == 0 { 0 } else { self.ends[i - 1].0 };
        &self.defs[d0..self.ends[i].0]
    }

    /// The vars the forms call that none of them defines: those whose class [`Graph::propagate`]
    /// takes from `known`. Unresolved symbols (`?sym`) are no vars.
    pub fn outside_callees(&self) -> std::collections::BTreeSet<&str> {
        let defined: std::collections::HashSet<&str> =
            self.defs.iter().map(AsRef::as_ref).collect();
        (self.callees.iter().map(AsRef::as_ref))
            .filter(|c| !c.starts_with('?') && !defined.contains(c))
            .collect()
    }

    /// Fold store vars into purity: a var defined by these forms takes the purity of its
    /// defining forms, iterated to a fixpoint; `known` holds the purity of vars defined outside
    /// them (the rest of the store). Returns each form's class, in order.
    pub fn propagate(&self, known: &HashMap<String, Purity>) -> Vec<Purity> {
        let rules = default_rules();
        // Each callee is either fixed by a rule or the stored purity, or one of the vars the
        // given forms define (a slot that the rounds below lower until stable).
        #[derive(Clone, Copy)]
        enum Callee {
            Fixed(Purity),
            Var(usize),
        }
        let mut slot_of: HashMap<&str, usize> = HashMap::new();
        for d in &self.defs {
            let n = slot_of.len();
            slot_of.entry(d.as_ref()).or_insert(n);
        }
        // Start optimistic (pure) and lower until stable: a cycle of otherwise-pure functions
        // stays pure, which is right for mutual recursion. A var's own rule wins over its body.
        let mut slots = vec![Purity::Pure; slot_of.len()];
        let mut pinned = vec![false; slot_of.len()];
        for (d, &i) in &slot_of {
            if let Some(p) = rules.class_of(d) {
                slots[i] = p;
                pinned[i] = true;
            }
        }
        let defs: Vec<usize> = self.defs.iter().map(|d| slot_of[d.as_ref()]).collect();
        // Decided once per callee, not once per call.
        let callees: Vec<Callee> = (self.callees.iter().map(AsRef::as_ref))
            .map(|c| match rules.class_of(c) {
                Some(p) => Callee::Fixed(p),
                None => match slot_of.get(c) {
                    Some(&i) => Callee::Var(i),
                    None => Callee::Fixed(known.get(c).copied().unwrap_or(Purity::Unknown)),
                },
            })
            .collect();
        drop(slot_of);
        let mut result = vec![Purity::Pure; self.len()];
        for _round in 0..64 {
            let mut changed = false;
            // A var defined by several forms (`declare` then `defn`, a redefinition) is as bad
            // as the worst of them: each round collects them all before the var's slot moves,
            // so the forms never take turns overwriting it.
            let mut next: Vec<Option<Purity>> = vec![None; slots.len()];
            let mut starts = (0, 0);
            for (fi, &ends) in self.ends.iter().enumerate() {
                let (defs, calls) = (&defs[starts.0..ends.0], &self.calls[starts.1..ends.1]);
                starts = ends;
                // An index past the callees (none is: `push` gives out only theirs) is of
                // unknown class, as a callee that resolves to nothing.
                let p = combine(calls.iter().map(|&c| match callees.get(c as usize) {
                    Some(Callee::Fixed(p)) => *p,
                    Some(Callee::Var(i)) => slots[*i],
                    None => Purity::Unknown,
                }));
                if result[fi] != p {
                    result[fi] = p;
                    changed = true;
                }
                for &d in defs {
                    next[d] = Some(next[d].map_or(p, |q| combine([q, p].into_iter())));
                }
            }
            for (d, p) in next.into_iter().enumerate() {
                if let Some(p) = p.filter(|p| !pinned[d] && slots[d] != *p) {
                    slots[d] = p;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(declare f)` then `(defn f [] (swap! a inc))`: f is impure, and so is its caller,
    /// whatever order the forms come in.
    #[test]
    fn a_var_defined_twice_takes_the_worse_class() {
        let forms = |order: [usize; 3]| {
            let all = [
                ("declare", vec!["my/f".to_string()], vec![]),
                ("defn", vec!["my/f".to_string()], vec!["clojure.core/swap!".to_string()]),
                ("caller", vec!["my/g".to_string()], vec!["my/f".to_string()]),
            ];
            order.map(|i| all[i].clone()).to_vec()
        };
        for order in [[0, 1, 2], [1, 0, 2], [2, 1, 0], [2, 0, 1]] {
            let got = propagate(&forms(order), &HashMap::new());
            assert_eq!(got["defn"], Purity::Impure, "{order:?}");
            assert_eq!(got["caller"], Purity::Impure, "{order:?}");
            assert_eq!(got["declare"], Purity::Pure, "{order:?}");
        }
    }

    #[test]
    fn shipped_rules_classify_core_vars() {
        let r = default_rules();
        assert_eq!(r.class_of("clojure.core/map"), Some(Purity::Pure));
        assert_eq!(r.class_of("clojure.core/swap!"), Some(Purity::Impure));
        assert_eq!(r.class_of("clojure.tools.logging/info"), Some(Purity::Telemetry));
        assert_eq!(r.class_of("clojure.java.io/reader"), Some(Purity::Impure));
        assert_eq!(r.class_of("my.app/thing"), None);
        // The var named `/`: its namespace is what comes before the first slash.
        assert_eq!(r.class_of("clojure.core//"), Some(Purity::Pure));
    }

    #[test]
    fn direct_classification() {
        assert_eq!(classify(["clojure.core/map", "clojure.core/inc"].into_iter()), Purity::Pure);
        assert_eq!(
            classify(["clojure.core/map", "clojure.core/println"].into_iter()),
            Purity::Impure
        );
        assert_eq!(
            classify(["clojure.core/map", "clojure.tools.logging/info"].into_iter()),
            Purity::Telemetry
        );
        assert_eq!(classify(["clojure.core/map", "my.app/thing"].into_iter()), Purity::Unknown);
        assert_eq!(classify(std::iter::empty()), Purity::Pure);
    }

    #[test]
    fn propagation_through_store_vars() {
        let forms = vec![
            ("a", vec!["app/a".to_string()], vec!["app/b".to_string()]),
            ("b", vec!["app/b".to_string()], vec!["clojure.core/println".to_string()]),
            (
                "c",
                vec!["app/c".to_string()],
                vec!["app/d".to_string(), "clojure.core/inc".to_string()],
            ),
            ("d", vec!["app/d".to_string()], vec!["app/c".to_string()]),
            ("e", vec!["app/e".to_string()], vec!["unknown.lib/x".to_string()]),
        ];
        let p = propagate(&forms, &HashMap::new());
        assert_eq!(p["a"], Purity::Impure);
        assert_eq!(p["b"], Purity::Impure);
        assert_eq!(p["c"], Purity::Pure, "mutual recursion of pure fns stays pure");
        assert_eq!(p["e"], Purity::Unknown);
    }

    /// Callees are kept once for all the forms that call them: each form still takes the class
    /// of its own calls, whether a callee is fixed by a rule, known from the store, defined by
    /// the forms or unresolved, and called once or many times.
    #[test]
    fn forms_sharing_callees_each_take_their_own_calls_class() {
        let mut graph = Graph::default();
        let form = |graph: &mut Graph<'static>, defs: &[&'static str], calls: &[&'static str]| {
            graph.push(defs.iter().copied(), calls.iter().copied())
        };
        form(&mut graph, &["app/a"], &["clojure.core/inc", "store/logs", "clojure.core/inc"]);
        form(&mut graph, &["app/b"], &["clojure.core/inc", "app/c", "app/c"]);
        form(&mut graph, &["app/c"], &["store/pure", "clojure.core/inc"]);
        form(&mut graph, &["app/d"], &["app/c", "?nowhere", "store/pure"]);
        form(&mut graph, &["app/e"], &["store/pure", "app/c", "clojure.core/swap!"]);
        form(&mut graph, &["app/f"], &["app/e", "store/unknown-here"]);
        let known: HashMap<String, Purity> =
            [("store/logs", Purity::Telemetry), ("store/pure", Purity::Pure)]
                .map(|(v, p)| (v.to_string(), p))
                .into();
        assert_eq!(
            graph.propagate(&known),
            [
                Purity::Telemetry,
                Purity::Pure,
                Purity::Pure,
                Purity::Unknown,
                Purity::Impure,
                Purity::Impure,
            ]
        );
        // Each var from outside the forms once (rules' vars included: the store may know
        // them), no unresolved symbol among them.
        assert_eq!(
            graph.outside_callees().into_iter().collect::<Vec<_>>(),
            [
                "clojure.core/inc",
                "clojure.core/swap!",
                "store/logs",
                "store/pure",
                "store/unknown-here"
            ]
        );
        assert_eq!(graph.defs(1), ["app/b"]);
    }

    #[test]
    fn bad_rules_name_the_line() {
        let err = Rules::parse("pure a/b\nsideways c/d\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }
}
