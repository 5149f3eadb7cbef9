//! The checks of a form that diagnostics report: symbols that resolve to nothing
//! (`unresolved`), and, knowing the vars a top-level form calls, calls whose argument count fits
//! no arglist of the called store function (`arity`) and what the form does when its namespace
//! loads (`side_effect`).
//!
//! [`crate::change::apply`] runs them on every form it writes and on every stored form that
//! calls a var whose arglists, macro-ness or purity it changes, and stores the findings
//! (`diagnostic`) in the same transaction, so reading the diagnostics of a namespace is one
//! query. The checks read only what the engine stored of the form (its call sites, kind, head,
//! purity) and of the called vars' defining forms; a form's own text is parsed only to word a
//! finding.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use tree_sitter::Node;

use crate::purity::{self, Purity};
use crate::sites::Site;
use crate::syntax::{self, Pos};
use crate::syntax::{KindOf, NodeKind};

mod text_facts;

/// One defining form of a var, as the checks read it: borrowed from the rows a change writes
/// (a big save's forms are most of the vars it calls: copying their texts and lists grew a 50 MB
/// save's diagnostics by 30 MB), owned when read from the store.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Definition<'a> {
    pub var: Cow<'a, str>,
    pub id: Cow<'a, str>,
    /// The form's own var (`ns/name`), which a helper var it defines (`->Rec`) is not.
    pub fqn: Cow<'a, str>,
    pub arglists: Cow<'a, [String]>,
    pub macro_: bool,
    pub kind: Cow<'a, str>,
    pub platforms: Cow<'a, [String]>,
    pub purity: Cow<'a, str>,
    /// The defining form's text: where its reader conditionals are tells whether its
    /// arglists hold on every platform.
    pub source: Cow<'a, str>,
}

/// What a var accepts.
#[derive(Clone, Debug)]
struct Arity {
    /// Fixed parameter counts, and the minimum of the variadic arity.
    fixed: Vec<usize>,
    variadic: Option<usize>,
    written: Vec<String>,
}

impl Arity {
    fn accepts(&self, n: usize) -> bool {
        self.fixed.contains(&n) || self.variadic.is_some_and(|m| n >= m)
    }

    /// From stored arglists (`["[x]", "[x & more]"]`); `None` if any is not a vector.
    fn parse(arglists: &[String]) -> Option<Arity> {
        if arglists.is_empty() {
            return None;
        }
        let mut a = Arity { fixed: Vec::new(), variadic: None, written: arglists.to_vec() };
        for al in arglists {
            match text_facts::arglist(al)? {
                text_facts::Arglist::Fixed(n) => a.fixed.push(n),
                text_facts::Arglist::Variadic(i) => {
                    a.variadic = Some(a.variadic.map_or(i, |m: usize| m.min(i)))
                }
            }
        }
        Some(a)
    }
}

/// What the checks know of the called vars: arities of store functions, store macros, purity.
pub struct Known<'d> {
    arity: HashMap<&'d str, Arity>,
    macros: HashSet<&'d str>,
    rules: &'static purity::Rules,
    purity: HashMap<&'d str, &'d str>,
}

impl<'d> Known<'d> {
    /// From the defining forms of the called vars, borrowing their names (a big save's are
    /// most of its forms').
    pub fn new(definitions: &'d [Definition]) -> Known<'d> {
        // A var's own definitions (the form's name is the var), each distinct (var, arglists,
        // macro, kind, per-platform signature) once, in order. Only `defn`/`defn-` whose
        // reader conditionals all sit inside arity bodies have arglists that hold on every
        // platform.
        type Own<'d> = (&'d str, &'d [String], bool, &'d str, bool);
        let mut own: Vec<Own> = definitions
            .iter()
            .filter(|d| d.fqn == d.var)
            .map(|d| {
                // Only a `defn`'s arities are used below: another kind's text is not parsed.
                let per_platform = !d.platforms.is_empty()
                    && matches!(&*d.kind, "defn" | "defn-")
                    && text_facts::signature_per_platform(&d.source);
                (&*d.var, &d.arglists[..], d.macro_, &*d.kind, per_platform)
            })
            .collect();
        own.sort();
        own.dedup();
        let mut arity = HashMap::new();
        let mut macros = HashSet::new();
        let mut seen: HashSet<&str> = HashSet::new();
        // Macros a form defines below its head (`#?(:clj (do (defmacro a ...) ...))`) or
        // through a macro-defining macro (`(defmacroalias a other/a)`).
        // A var's own macro definition says so in its row (below): its text is not parsed
        // (most callees are `clojure.core` macros; an edit parsed their texts every time).
        // One form often defines many vars this way (Specter's 17 KB `#?(:clj (do ...))` block
        // defines dozens of macros): its text is parsed once, not once a var (0.9 s of a
        // million-line import, 8.6 MB of texts parsed, most of them that one form).
        let mut defined_by_form: HashMap<&str, Vec<String>> = HashMap::new();
        for d in definitions {
            let own_macro = d.fqn == d.var && (d.macro_ || d.kind == "defmacro");
            if own_macro || !d.source.contains("macro") {
                continue;
            }
            let names = defined_by_form
                .entry(&*d.id)
                .or_insert_with(|| text_facts::macros_defined(&d.source));
            let name = d.var.rsplit_once('/').map_or(&*d.var, |(_, n)| n);
            if names.iter().any(|n| n == name) {
                macros.insert(&*d.var);
            }
        }
        for (var, arglists, macro_, kind, per_platform) in own {
            if macro_ || kind == "defmacro" {
                macros.insert(var);
            }
            // Defined twice (redefinitions): trust neither.
            if !seen.insert(var) {
                arity.remove(var);
                continue;
            }
            if !matches!(kind, "defn" | "defn-") || per_platform || macros.contains(var) {
                continue;
            }
            if let Some(a) = Arity::parse(arglists) {
                arity.insert(var, a);
            }
        }
        // Of a var's several classes the greatest stands, in any order of its definitions.
        let mut purity: HashMap<&str, &str> = HashMap::new();
        for d in definitions {
            let class = purity.entry(&*d.var).or_insert(&*d.purity);
            *class = (*class).max(&*d.purity);
        }
        Known { arity, macros, rules: purity::default_rules(), purity }
    }

    /// The purity of a var: a rule naming it, else the purity of its form, else a rule for its
    /// namespace. The rules are the shipped ones, which the engine classified forms by.
    fn purity_of(&self, fqn: &str) -> Purity {
        self.rules
            .exact_class(fqn)
            .or_else(|| self.purity.get(fqn).and_then(|c| Purity::parse(c)))
            .or_else(|| self.rules.namespace_class(fqn))
            .unwrap_or(Purity::Unknown)
    }
}

/// Whether a `.clj` file is data in the shape of code, read as data like an `.edn` file (no
/// resolution, no findings): Leiningen's `project.clj` (a `defproject` of keys and
/// coordinates) and `profiles.clj` (a map), and the reader's `data_readers.clj(c)` (a map of
/// tags to var names, which Clojure reads and never evaluates). A tools.build `build.clj` is a
/// namespace of functions and is checked as code.
pub fn build_data_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, "project.clj" | "profiles.clj" | "data_readers.clj" | "data_readers.cljc")
}

/// A top-level form as the checks read it.
pub struct Form<'a> {
    pub ns: &'a str,
    pub line: i64,
    pub col: i64,
    pub kind: &'a str,
    pub head: &'a str,
    pub purity: &'a str,
    pub source: &'a str,
    pub sites: std::borrow::Cow<'a, [Site]>,
}

/// One finding of a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `arity` or `side_effect`.
    pub kind: &'static str,
    /// `error`, `warning` or `info`.
    pub severity: &'static str,
    pub line: i64,
    pub col: i64,
    /// What was found and what to do, without its place: the store keeps a finding's line
    /// relative to its form, so a form that only moves keeps its findings; [`located`] puts
    /// the place in front when it is read.
    pub message: String,
}

/// A finding's message as a user reads it: `file:line:col: message`, or `file:line: message`
/// for a side effect (it is the whole top-level form's).
pub fn located(kind: &str, file: &str, line: i64, col: i64, message: &str) -> String {
    if kind == "side_effect" {
        format!("{file}:{line}: {message}")
    } else {
        format!("{file}:{line}:{col}: {message}")
    }
}

/// A symbol of a form that resolves to nothing, at `at` (in namespace `ns`); REPL
/// scratch in a `(comment ...)` block often uses names defined by earlier entries, so there it
/// is only `info`.
pub fn unresolved(ns: &str, sym: &str, at: Pos, in_comment: bool) -> Finding {
    let fix = match sym.split_once('/') {
        Some((q, _)) if !q.is_empty() => format!(
            "`{q}` is neither an alias nor a namespace `{ns}` requires: add `[<namespace> :as {q}]` to its `(:require ...)`, or fix the qualifier"
        ),
        _ => format!(
            "it is not a local, a var of `{ns}` or of a namespace it refers, a class or a special form: define it, require and refer it, or fix the spelling"
        ),
    };
    let (severity, place) =
        if in_comment { ("info", " (in a `comment` block)") } else { ("warning", "") };
    let (line, col) = (at.line, at.col);
    Finding {
        kind: "unresolved",
        severity,
        line: line.into(),
        col: col.into(),
        message: format!("`{sym}`{place} resolves to nothing; {fix}"),
    }
}

/// Every finding of the checks on `form`.
pub fn check(form: &Form, known: &Known) -> Vec<Finding> {
    let mut out = Vec::new();
    arity_calls(form, known, &mut out);
    side_effects(form, known, &mut out);
    out
}

/// Every call of a store function in the form whose argument count fits no arity. An argument
/// of a store macro is whatever the macro makes of it (method bodies of a `reify`-like macro,
/// templates, …), not necessarily a call.
fn arity_calls(form: &Form, known: &Known, out: &mut Vec<Finding>) {
    for s in form.sites.iter() {
        let Ok(n) = usize::try_from(s.argc) else { continue };
        let Some(a) = known.arity.get(s.to.as_str()) else { continue };
        if a.accepts(n) || known.macros.contains(s.outer.as_str()) {
            continue;
        }
        let fqn = &s.to;
        let (line, col) = (s.pos.line, s.pos.col);
        let takes = a.written.join(" or ");
        let plural = if n == 1 { "" } else { "s" };
        out.push(Finding {
            kind: "arity",
            severity: "error",
            line: line.into(),
            col: col.into(),
            message: format!(
                "`({} ...)` passes {n} argument{plural} to `{fqn}`, which takes {takes}: change the call to match an arglist, or add an arity to `{fqn}`",
                s.head
            ),
        });
    }
}

fn side_effects(form: &Form, known: &Known, out: &mut Vec<Finding>) {
    let (ns, kind, line) = (form.ns, form.kind, form.line);
    if kind == "other" && !form.head.is_empty() && !setup_head(form.head) {
        if form.purity == "pure" {
            return;
        }
        // Only now is the form's own text parsed: to see what it wraps.
        let tree = syntax::parse(form.source);
        let Some(node) = syntax::top_level_forms(&tree).first().copied() else { return };
        if node.node_kind() != NodeKind::List || defines_inside(node, form.source) {
            // A wrapper of definitions (`(when cond (defn ...))`, `(profile (def ...))`).
            return;
        }
        let compiler_flag = form.head == "set!"
            && syntax::values(node).get(1).is_some_and(|t| {
                let t = syntax::text(*t, form.source);
                t.starts_with('*') && t.ends_with('*')
            });
        if compiler_flag {
            return;
        }
        let (severity, why) = match form.purity {
            "impure" => ("warning", "it is impure"),
            "telemetry" => ("info", "it logs"),
            _ => ("info", "its purity is unknown"),
        };
        let shown = short(form.source);
        out.push(Finding {
            kind: "side_effect",
            severity,
            line,
            col: form.col,
            message: format!(
                "the top-level `{shown}` runs every time `{ns}` is loaded ({why}): move it into a function (a `-main` or `start!`) or a `(comment ...)` block"
            ),
        });
        return;
    }
    if !matches!(kind, "def" | "defonce") {
        return;
    }
    // The engine marked the calls of the init that run when the `def` does (`Site::load`).
    let impure: BTreeSet<&str> = form
        .sites
        .iter()
        .filter(|s| s.load && !known.macros.contains(s.to.as_str()))
        .filter(|s| known.purity_of(&s.to) == Purity::Impure)
        .map(|s| s.to.as_str())
        .collect();
    if impure.is_empty() {
        return;
    }
    let list = impure.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
    let tree = syntax::parse(form.source);
    let name = syntax::top_level_forms(&tree)
        .first()
        .and_then(|n| syntax::values(*n).get(1).map(|v| syntax::text(*v, form.source)))
        .unwrap_or("")
        .to_string();
    out.push(Finding {
        kind: "side_effect",
        severity: "warning",
        line,
        col: form.col,
        message: format!(
            "`({kind} {name} ...)` calls {list} (impure) when `{ns}` is loaded: make it a function, wrap the init in `(delay ...)`, or start it from `-main`"
        ),
    });
}

/// Heads of top-level calls that set a namespace up rather than do something.
fn setup_head(head: &str) -> bool {
    let name = head.split_once('/').map_or(head, |(_, n)| n);
    matches!(
        name,
        "in-ns"
            | "require"
            | "use"
            | "import"
            | "refer"
            | "refer-clojure"
            | "load"
            | "declare"
            | "alias"
            | "gen-class"
            | "gen-interface"
            | "comment"
            | "fdef"
            | "def"
            | "extend"
            | "derive"
            | "prefer-method"
            | "set-validator!"
            | "ns-unmap"
            | "ns-unalias"
    )
}

/// Whether a form defines or extends something below its head (`def...`, `extend...`).
fn defines_inside(node: Node, text: &str) -> bool {
    let mut found = false;
    for v in syntax::values(node).into_iter().skip(1) {
        syntax::visit(v, &mut |n| {
            if let Some(h) = syntax::list_head_name(n, text) {
                found |= h.starts_with("def") || h.starts_with("extend");
            }
        });
    }
    found
}

/// The first line of a form, cut short.
fn short(s: &str) -> String {
    let first = s.lines().next().unwrap_or("");
    let cut: String = first.chars().take(40).collect();
    if cut.len() < s.len() {
        format!("{cut} ...")
    } else {
        cut
    }
}
