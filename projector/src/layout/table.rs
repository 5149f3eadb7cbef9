//! The indentation table: cljfmt's default indents for known symbols and the fuzzy patterns.

/// One cljfmt indentation spec: `[:block n]` or `[:inner depth index?]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Spec {
    Block(usize),
    Inner(usize, Option<usize>),
}

pub(super) const B0: &[Spec] = &[Spec::Block(0)];
pub(super) const B1: &[Spec] = &[Spec::Block(1)];
pub(super) const B2: &[Spec] = &[Spec::Block(2)];
pub(super) const I0: &[Spec] = &[Spec::Inner(0, None)];

/// cljfmt's default indents for a symbol, matched on the symbol's name (keys are unqualified).
pub(super) fn symbol_specs(name: &str) -> Option<&'static [Spec]> {
    Some(match name {
        "alt!" | "alt!!" | "comment" | "cond" | "do" | "finally" | "future" | "go" | "thread"
        | "try" | "with-out-str" => B0,
        "binding" | "case" | "cond->" | "cond->>" | "defstruct" | "doseq" | "dotimes" | "doto"
        | "extend" | "for" | "go-loop" | "if" | "if-let" | "if-not" | "if-some" | "let"
        | "locking" | "loop" | "match" | "ns" | "struct-map" | "testing" | "when"
        | "when-first" | "when-let" | "when-not" | "when-some" | "while" | "with-local-vars"
        | "with-open" | "with-precision" | "with-redefs" | "let-routes" => B1,
        "are" | "as->" | "catch" | "condp" => B2,
        "bound-fn" | "def" | "defmacro" | "defmethod" | "defmulti" | "defn" | "defn-"
        | "defonce" | "deftest" | "fdef" | "fn" | "use-fixtures" | "ANY" | "DELETE" | "GET"
        | "HEAD" | "OPTIONS" | "PATCH" | "POST" | "PUT" | "context" | "defroutes" | "rfn" => I0,
        "defprotocol" | "extend-protocol" | "extend-type" => {
            &[Spec::Block(1), Spec::Inner(1, None)]
        }
        "defrecord" | "deftype" | "proxy" => &[Spec::Block(2), Spec::Inner(1, None)],
        "reify" => &[Spec::Inner(0, None), Spec::Inner(1, None)],
        "letfn" => &[Spec::Block(1), Spec::Inner(2, Some(0))],
        _ => return None,
    })
}

/// Keys whose specs reach below depth 0, in cljfmt's order (deepest first, then by name). They
/// are tried before any depth-0 rule.
pub(super) const DEEP_KEYS: [&str; 8] = [
    "letfn",
    "defprotocol",
    "defrecord",
    "deftype",
    "extend-protocol",
    "extend-type",
    "proxy",
    "reify",
];

/// The fuzzy rules, tried after every symbol rule: `#"^def"` and `#"^with-"`, both `[[:inner 0]]`.
pub(super) const PATTERNS: [&str; 2] = ["def", "with-"];

/// Heads whose first argument is a binding vector (pairs).
pub(super) fn binds_first_arg(name: &str) -> bool {
    matches!(
        name,
        "let"
            | "loop"
            | "binding"
            | "doseq"
            | "for"
            | "if-let"
            | "when-let"
            | "if-some"
            | "when-some"
            | "when-first"
            | "dotimes"
            | "with-open"
            | "with-redefs"
            | "with-local-vars"
            | "go-loop"
            | "let-routes"
    )
}

/// Heads whose list children are method bodies (`[:inner 1]`).
pub(super) fn has_method_children(name: &str) -> bool {
    matches!(name, "defrecord" | "deftype" | "extend-protocol" | "extend-type" | "proxy" | "reify")
}
