//! Diagnostics of the store, a namespace or one form: what an agent should look at before and
//! after an edit.
//!
//! - `draft`: saves kept as drafts (they did not parse or conflicted), and files stored as raw
//!   text because they do not parse;
//! - `unresolved`: symbols the resolver found no meaning for;
//! - `arity`: calls whose argument count matches no arglist of the called store var (counted at
//!   each call site from the syntax tree, threading macros included; macros and vars without
//!   arglists are skipped);
//! - `side_effect`: top-level forms that do something when the namespace loads: a bare call
//!   that is not pure, or a `def` whose init (not a `fn`) calls something impure;
//! - `cycle`: namespace require cycles.
//!
//! Every message names the place and what to do about it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use cozo::DataValue;
use formdb_engine::purity::{self, Purity};
use formdb_engine::store::{column, int_at, params, str_at, Store};
use formdb_engine::syntax::{self, Lang, LineIndex};
use formdb_engine::trace::Timings;
use formdb_projector::views;
use tree_sitter::Node;

use crate::refactor::{libspecs, path_between, visit};
use crate::{EditError, Result};

/// What to report on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The whole store.
    All,
    /// One namespace.
    Ns(String),
    /// Several namespaces in one pass: the store's tables are read once for all of them (an
    /// edit's diagnostics cover every namespace it can change). Names the store does not have
    /// are skipped.
    Nss(Vec<String>),
    /// One form, by id.
    Id(String),
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Diagnostic {
    /// `draft`, `unresolved`, `arity`, `side_effect` or `cycle`.
    pub kind: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
    pub ns: String,
    /// The form's id, or empty.
    pub id: String,
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
}

/// The diagnostics of a scope, ordered by file, line and column.
pub fn diagnostics(store: &Store, scope: &Scope) -> Result<Vec<Diagnostic>> {
    // Dozens of queries: run them where Cozo evaluates in place (see `on_worker`).
    formdb_engine::store::on_worker(|| diagnostics_here(store, scope))
}

fn diagnostics_here(store: &Store, scope: &Scope) -> Result<Vec<Diagnostic>> {
    let mut trace = Timings::traced("diagnostics");
    let sc = Resolved::of(store, scope)?;
    let mut out = Vec::new();
    drafts(store, &sc, &mut out)?;
    trace.lap("drafts");
    unresolved(store, &sc, &mut out)?;
    trace.lap("unresolved");
    per_form(store, &sc, &mut out, &mut trace)?;
    cycles(store, &sc, &mut out)?;
    trace.lap("cycles");
    out.sort_by(|a, b| {
        (&a.file, a.line, a.col, &a.kind, &a.message)
            .cmp(&(&b.file, b.line, b.col, &b.kind, &b.message))
    });
    out.dedup();
    Ok(out)
}

/// A scope with what it stands for in the store.
struct Resolved {
    /// `None`: every namespace.
    nss: Option<BTreeSet<String>>,
    /// The form (and its file) for `Scope::Id`.
    id: Option<(String, String)>,
}

impl Resolved {
    fn of(store: &Store, scope: &Scope) -> Result<Resolved> {
        Ok(match scope {
            Scope::All => Resolved { nss: None, id: None },
            Scope::Nss(nss) => Resolved { nss: Some(nss.iter().cloned().collect()), id: None },
            Scope::Ns(ns) => {
                let known = store.query(
                    "?[n] := n = $ns, *ns_decl{ns: n} ?[n] := n = $ns, *form{ns: n}",
                    params([("ns", ns.as_str().into())]),
                )?;
                if known.rows.is_empty() {
                    return Err(EditError::Invalid(format!(
                        "no namespace `{ns}` in the store: send a namespace `list_namespaces` shows, or no scope for the whole store"
                    )));
                }
                Resolved { nss: Some(BTreeSet::from([ns.clone()])), id: None }
            }
            Scope::Id(id) => {
                let rows = store.query(
                    "?[ns, file, parent] := *form{id: $id, ns, file, parent}",
                    params([("id", id.as_str().into())]),
                )?;
                let Some(r) = rows.rows.first() else {
                    return Err(EditError::Invalid(format!(
                        "no form with id `{id}`: ids are 8 characters, as `get_form`, `explore_namespace` and `search` return them"
                    )));
                };
                // A form inside a comment block is reported with its block.
                let parent = str_at(r, 2);
                let top = if parent.is_empty() { id.clone() } else { parent };
                Resolved {
                    nss: Some(BTreeSet::from([str_at(r, 0)])),
                    id: Some((top, str_at(r, 1))),
                }
            }
        })
    }

    fn has_ns(&self, ns: &str) -> bool {
        self.nss.as_ref().is_none_or(|nss| nss.contains(ns))
    }

    fn has_form(&self, ns: &str, id: &str) -> bool {
        match &self.id {
            Some((want, _)) => want == id,
            None => self.has_ns(ns),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn diag(
    kind: &str,
    severity: &str,
    ns: &str,
    id: &str,
    file: &str,
    line: i64,
    col: i64,
    message: String,
) -> Diagnostic {
    Diagnostic {
        kind: kind.into(),
        severity: severity.into(),
        ns: ns.into(),
        id: id.into(),
        file: file.into(),
        line: line.max(0) as u32,
        col: col.max(0) as u32,
        message,
    }
}

// ---------------------------------------------------------------------------------------------
// drafts

fn drafts(store: &Store, sc: &Resolved, out: &mut Vec<Diagnostic>) -> Result<()> {
    let rows = store.query(
        "?[path, user, error, line, col, bytes] := *draft{path, user, error, line, col, bytes}",
        Default::default(),
    )?;
    for r in &rows.rows {
        let (path, user, error) = (str_at(r, 0), str_at(r, 1), str_at(r, 2));
        // A form draft (`.formdb/forms/<id>.clj`) belongs to its form; a file draft to the
        // file's namespace (read from the draft itself for a file the store does not have).
        let form_id = path
            .strip_prefix(".formdb/forms/")
            .and_then(|p| p.strip_suffix(".clj"))
            .map(str::to_string);
        let (ns, id, file) = match &form_id {
            Some(fid) => {
                let f = store.query(
                    "?[ns, file] := *form{id: $id, ns, file}",
                    params([("id", fid.as_str().into())]),
                )?;
                match f.rows.first() {
                    Some(f) => (str_at(f, 0), fid.clone(), str_at(f, 1)),
                    None => (String::new(), fid.clone(), String::new()),
                }
            }
            None => {
                let f = store
                    .query("?[ns] := *file{path: $p, ns}", params([("p", path.as_str().into())]))?;
                let ns = match f.rows.first() {
                    Some(f) => str_at(f, 0),
                    None => {
                        let bytes = r[5].get_bytes().unwrap_or(&[]);
                        ns_of_text(&String::from_utf8_lossy(bytes))
                    }
                };
                (ns, String::new(), path.clone())
            }
        };
        let in_scope = match &sc.id {
            Some((want, want_file)) => {
                form_id.as_ref() == Some(want) || (form_id.is_none() && &file == want_file)
            }
            None => sc.has_ns(&ns),
        };
        if !in_scope {
            continue;
        }
        let (line, col) = (int_at(r, 3), int_at(r, 4));
        let what = if form_id.is_some() {
            format!("an edit of form {id} by {user}")
        } else {
            format!("a save of {path} by {user}")
        };
        let base = if file.is_empty() { path.clone() } else { file.clone() };
        out.push(diag(
            "draft",
            "error",
            &ns,
            &id,
            &path,
            line,
            col,
            format!(
                "{path}:{line}:{col}: {what} was kept as a draft and not applied: {error}. The store still has the last good text of {base}; fix the draft and save it again, or discard it"
            ),
        ));
    }
    let raw = store.query(
        "?[path, ns, error, line, col] := *file{path, ns, error, error_line: line, error_col: col}, error != ''",
        Default::default(),
    )?;
    for r in &raw.rows {
        let (path, ns, error) = (str_at(r, 0), str_at(r, 1), str_at(r, 2));
        let in_scope = match &sc.id {
            Some((_, want_file)) => &path == want_file,
            None => sc.has_ns(&ns),
        };
        if !in_scope {
            continue;
        }
        let (line, col) = (int_at(r, 3), int_at(r, 4));
        out.push(diag(
            "draft",
            "error",
            &ns,
            "",
            &path,
            line,
            col,
            format!(
                "{path}:{line}:{col} does not parse ({error}), so the file is stored as raw text and none of its forms are known: fix the text there and save the whole file"
            ),
        ));
    }
    Ok(())
}

/// The namespace an `ns` form at the start of a text names (empty if none).
fn ns_of_text(text: &str) -> String {
    let tree = syntax::parse(text);
    syntax::top_level_forms(&tree)
        .into_iter()
        .find_map(|n| formdb_engine::nsdecl::parse_ns_form(n, text))
        .map(|d| d.name)
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// unresolved

fn unresolved(store: &Store, sc: &Resolved, out: &mut Vec<Diagnostic>) -> Result<()> {
    let rows = match &sc.nss {
        // A namespace's forms by the `ns_form` index, not a pass over every unresolved symbol.
        Some(nss) => store.query(
            "nss[ns] <- $nss
             ?[id, parent, sym, line, col, ns, file] := nss[ns], *ns_form{ns, id}, *unresolved{from: id, sym, line, col}, *form{id, file, parent}",
            params([("nss", column(nss.iter().map(|n| n.as_str().into())))]),
        )?,
        None => store.query(
            "?[id, parent, sym, line, col, ns, file] := *unresolved{from: id, sym, line, col}, *form{id, ns, file, parent}",
            Default::default(),
        )?,
    };
    for r in &rows.rows {
        let (id, parent, sym, ns, file) =
            (str_at(r, 0), str_at(r, 1), str_at(r, 2), str_at(r, 5), str_at(r, 6));
        let in_comment = !parent.is_empty();
        let top = if parent.is_empty() { id.clone() } else { parent };
        if !sc.has_form(&ns, &top) {
            continue;
        }
        let (line, col) = (int_at(r, 3), int_at(r, 4));
        let fix = match sym.split_once('/') {
            Some((q, _)) if !q.is_empty() => format!(
                "`{q}` is neither an alias nor a namespace `{ns}` requires: add `[<namespace> :as {q}]` to its `(:require ...)`, or fix the qualifier"
            ),
            _ => format!(
                "it is not a local, a var of `{ns}` or of a namespace it refers, a class or a special form: define it, require and refer it, or fix the spelling"
            ),
        };
        // REPL scratch in `(comment ...)` blocks often uses names defined by earlier entries.
        let (severity, place) =
            if in_comment { ("info", " (in a `comment` block)") } else { ("warning", "") };
        out.push(diag(
            "unresolved",
            severity,
            &ns,
            &id,
            &file,
            line,
            col,
            format!("{file}:{line}:{col}: `{sym}`{place} resolves to nothing; {fix}"),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// arity and side effects: per form, from the call sites the engine stored

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

    /// Parse stored arglists (`["[x]", "[x & more]"]`); `None` if any is not a vector.
    fn parse(arglists: &[String]) -> Option<Arity> {
        if arglists.is_empty() {
            return None;
        }
        let mut a = Arity { fixed: Vec::new(), variadic: None, written: arglists.to_vec() };
        for al in arglists {
            let tree = syntax::parse(al);
            let top = syntax::top_level_forms(&tree);
            let [v] = top.as_slice() else { return None };
            if v.kind() != "vec_lit" || syntax::first_error(&tree, al).is_some() {
                return None;
            }
            let vals = syntax::values(*v);
            match vals.iter().position(|p| p.kind() == "sym_lit" && syntax::text(*p, al) == "&") {
                Some(i) => a.variadic = Some(a.variadic.map_or(i, |m: usize| m.min(i))),
                None => a.fixed.push(vals.len()),
            }
        }
        Some(a)
    }
}

/// The store's definitions of `vars`, read once for the checks that need them (arities,
/// macros, purity): per defining form, (var, id, fqn, arglists, macro, kind, platforms,
/// purity).
fn definitions(store: &Store, vars: &BTreeSet<&str>) -> Result<Vec<Vec<DataValue>>> {
    Ok(store
        .query(
            "vars[var] <- $vars
             ?[var, id, fqn, arglists, macro, kind, platforms, purity] := vars[var], *defines{var, id}, *form{id, fqn, arglists, macro, kind, platforms, purity}",
            params([("vars", column(vars.iter().map(|v| (*v).into())))]),
        )?
        .rows)
}

/// Arities of the store functions among the `definitions` (`defn`/`defn-` outside reader
/// conditionals, whose arglists are the same on every platform), and which are store macros.
fn arities(definitions: &[Vec<DataValue>]) -> (HashMap<String, Arity>, HashSet<String>) {
    // A var's own definitions (the form's name is the var), each distinct (var, arglists, macro,
    // kind, platforms) once, in order.
    let mut rows: Vec<[&DataValue; 5]> = definitions
        .iter()
        .filter(|r| r[2] == r[0])
        .map(|r| [&r[0], &r[3], &r[4], &r[5], &r[6]])
        .collect();
    rows.sort();
    rows.dedup();
    let mut out = HashMap::new();
    let mut macros = HashSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    for r in &rows {
        let var = r[0].get_str().unwrap_or_default().to_string();
        let kind = r[3].get_str().unwrap_or_default();
        if r[2].get_bool().unwrap_or(false) || kind == "defmacro" {
            macros.insert(var.clone());
        }
        // Defined twice (redefinitions): trust neither.
        if !seen.insert(var.clone()) {
            out.remove(&var);
            continue;
        }
        let per_platform = r[4].get_slice().is_some_and(|p| !p.is_empty());
        if !matches!(kind, "defn" | "defn-") || per_platform || macros.contains(&var) {
            continue;
        }
        let lists: Vec<String> = r[1]
            .get_slice()
            .map(|s| s.iter().filter_map(|v| v.get_str().map(str::to_string)).collect())
            .unwrap_or_default();
        if let Some(a) = Arity::parse(&lists) {
            out.insert(var, a);
        }
    }
    (out, macros)
}

/// The purity of a var: a rule naming it, else the purity of its form, else a rule for its
/// namespace. The rules are the shipped ones, which are what the store's `purity_rule` holds
/// (written when the store is made, never changed) and what the engine classified forms by.
struct Purities {
    rules: &'static purity::Rules,
    vars: HashMap<String, String>,
}

impl Purities {
    /// The rules, and the purity of the stored forms among the `definitions`.
    fn load(definitions: &[Vec<DataValue>]) -> Purities {
        // Each distinct (var, purity) once, in order: of several classes the last stands.
        let classes: BTreeSet<(String, String)> =
            definitions.iter().map(|r| (str_at(r, 0), str_at(r, 7))).collect();
        Purities { rules: purity::default_rules(), vars: classes.into_iter().collect() }
    }

    fn of(&self, fqn: &str) -> Purity {
        self.rules
            .exact_class(fqn)
            .or_else(|| self.vars.get(fqn).and_then(|c| Purity::parse(c)))
            .or_else(|| self.rules.namespace_class(fqn))
            .unwrap_or(Purity::Unknown)
    }
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
        visit(v, &mut |n| {
            if let Some(h) = head_name(n, text) {
                found |= h.starts_with("def") || h.starts_with("extend");
            }
        });
    }
    found
}

/// A top-level form of a Clojure file in scope, as the checks read it.
struct TopForm {
    id: String,
    ns: String,
    file: String,
    line: i64,
    col: i64,
    purity: String,
    kind: String,
    head: String,
    source: String,
}

/// The top-level forms of the Clojure files in scope, in one read.
fn top_level_forms(store: &Store, sc: &Resolved) -> Result<Vec<TopForm>> {
    const FORM: &str = "*form_at{file, pos, id}, *form{id, parent, ns, line, col, purity, kind, head, source}, parent == ''";
    const COLS: &str = "id, ns, file, line, col, purity, kind, head, source";
    let rows = match (&sc.id, &sc.nss) {
        (Some((_, file)), _) => store.query(
            &format!("?[{COLS}] := file = $file, {FORM}"),
            params([("file", file.as_str().into())]),
        )?,
        (None, Some(nss)) => store.query(
            &format!(
                "nss[fns] <- $nss
                 ?[{COLS}] := nss[fns], *file{{path: file, ns: fns}}, {FORM}"
            ),
            params([("nss", column(nss.iter().map(|n| n.as_str().into())))]),
        )?,
        (None, None) => store.query(
            &format!("?[{COLS}] := *file{{path: file, error}}, error == '', {FORM}"),
            Default::default(),
        )?,
    };
    Ok(rows
        .rows
        .iter()
        .map(|r| TopForm {
            id: str_at(r, 0),
            ns: str_at(r, 1),
            file: str_at(r, 2),
            line: int_at(r, 3),
            col: int_at(r, 4),
            purity: str_at(r, 5),
            kind: str_at(r, 6),
            head: str_at(r, 7),
            source: str_at(r, 8),
        })
        .filter(|f| Lang::from_path(&f.file).is_some_and(|l| l != Lang::Edn))
        .filter(|f| sc.has_form(&f.ns, &f.id))
        .collect())
}

/// A call of a var as the engine stored it (`call_site`).
struct Site {
    line: i64,
    col: i64,
    to: String,
    /// -1: not told by the text.
    argc: i64,
    /// The var called around this call.
    outer: String,
    /// Runs when the namespace loads.
    load: bool,
    /// The called symbol as written.
    head: String,
}

/// The call sites of `forms`, by form id.
fn call_sites(store: &Store, forms: &[TopForm]) -> Result<HashMap<String, Vec<Site>>> {
    let rows = store.query(
        "ids[id] <- $ids
         ?[from, line, col, to, argc, outer, load, head] := ids[from], *call_site{from, line, col, to, argc, outer, load, head}",
        params([("ids", column(forms.iter().map(|f| f.id.as_str().into())))]),
    )?;
    let mut out: HashMap<String, Vec<Site>> = HashMap::new();
    for r in &rows.rows {
        out.entry(str_at(r, 0)).or_default().push(Site {
            line: int_at(r, 1),
            col: int_at(r, 2),
            to: str_at(r, 3),
            argc: int_at(r, 4),
            outer: str_at(r, 5),
            load: r[6].get_bool().unwrap_or(false),
            head: str_at(r, 7),
        });
    }
    Ok(out)
}

/// Arity and side-effect checks of the top-level forms in scope, from what the engine stored
/// of their calls (`call_site`) when it parsed them: no file is parsed again here.
fn per_form(
    store: &Store,
    sc: &Resolved,
    out: &mut Vec<Diagnostic>,
    trace: &mut Timings,
) -> Result<()> {
    let forms = top_level_forms(store, sc)?;
    trace.lap("top-level forms");
    let sites = call_sites(store, &forms)?;
    trace.lap("call sites");
    // What the checks need to know of the vars the forms call, and of no others.
    let named: BTreeSet<&str> = sites.values().flatten().map(|s| s.to.as_str()).collect();
    let definitions = definitions(store, &named)?;
    let (arity, macros) = arities(&definitions);
    let purity = Purities::load(&definitions);
    trace.lap("arities and purities");
    let check = Check { arity: &arity, macros: &macros, purity: &purity };
    for form in &forms {
        let sites = sites.get(&form.id).map_or(&[][..], Vec::as_slice);
        check.arity_calls(form, sites, out);
        check.side_effects(form, sites, out);
    }
    trace.lap("check forms");
    Ok(())
}

/// What the checks know of the called vars.
struct Check<'a> {
    arity: &'a HashMap<String, Arity>,
    macros: &'a HashSet<String>,
    purity: &'a Purities,
}

impl Check<'_> {
    /// Every call of a store function in the form whose argument count fits no arity. An
    /// argument of a store macro is whatever the macro makes of it (method bodies of a
    /// `reify`-like macro, templates, …), not necessarily a call.
    fn arity_calls(&self, form: &TopForm, sites: &[Site], out: &mut Vec<Diagnostic>) {
        for s in sites {
            let Ok(n) = usize::try_from(s.argc) else { continue };
            let Some(a) = self.arity.get(&s.to) else { continue };
            if a.accepts(n) || self.macros.contains(&s.outer) {
                continue;
            }
            let (path, fqn) = (&form.file, &s.to);
            let takes = a.written.join(" or ");
            let plural = if n == 1 { "" } else { "s" };
            out.push(diag(
                "arity",
                "error",
                &form.ns,
                &form.id,
                path,
                s.line,
                s.col,
                format!(
                    "{path}:{}:{}: `({} ...)` passes {n} argument{plural} to `{fqn}`, which takes {takes}: change the call to match an arglist, or add an arity to `{fqn}`",
                    s.line, s.col, s.head
                ),
            ));
        }
    }

    fn side_effects(&self, form: &TopForm, sites: &[Site], out: &mut Vec<Diagnostic>) {
        let (path, ns, kind) = (&form.file, &form.ns, form.kind.as_str());
        let shown = short(&form.source);
        if kind == "other" && !form.head.is_empty() && !setup_head(&form.head) {
            if form.purity == "pure" {
                return;
            }
            // Only now is the form's own text parsed: to see what it wraps.
            let tree = syntax::parse(&form.source);
            let Some(node) = syntax::top_level_forms(&tree).first().copied() else { return };
            if node.kind() != "list_lit" {
                return;
            }
            if defines_inside(node, &form.source) {
                return; // a wrapper of definitions (`(when cond (defn ...))`, `(profile (def ...))`)
            }
            let compiler_flag = form.head == "set!"
                && syntax::values(node).get(1).is_some_and(|t| {
                    let t = syntax::text(*t, &form.source);
                    t.starts_with('*') && t.ends_with('*')
                });
            if compiler_flag {
                return;
            }
            let (severity, why) = match form.purity.as_str() {
                "impure" => ("warning", "it is impure"),
                "telemetry" => ("info", "it logs"),
                _ => ("info", "its purity is unknown"),
            };
            out.push(diag(
                "side_effect",
                severity,
                ns,
                &form.id,
                path,
                form.line,
                form.col,
                format!(
                    "{path}:{}: the top-level `{shown}` runs every time `{ns}` is loaded ({why}): move it into a function (a `-main` or `start!`) or a `(comment ...)` block",
                    form.line
                ),
            ));
            return;
        }
        if !matches!(kind, "def" | "defonce") {
            return;
        }
        // The engine marks the calls of the init that run when the `def` does.
        let impure: BTreeSet<&str> = sites
            .iter()
            .filter(|s| s.load && !self.macros.contains(&s.to))
            .filter(|s| self.purity.of(&s.to) == Purity::Impure)
            .map(|s| s.to.as_str())
            .collect();
        if impure.is_empty() {
            return;
        }
        let list = impure.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
        let tree = syntax::parse(&form.source);
        let name = syntax::top_level_forms(&tree)
            .first()
            .and_then(|n| syntax::values(*n).get(1).map(|v| syntax::text(*v, &form.source)))
            .unwrap_or("")
            .to_string();
        out.push(diag(
            "side_effect",
            "warning",
            ns,
            &form.id,
            path,
            form.line,
            form.col,
            format!(
                "{path}:{}: `({kind} {name} ...)` calls {list} (impure) when `{ns}` is loaded: make it a function, wrap the init in `(delay ...)`, or start it from `-main`",
                form.line
            ),
        ));
    }
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

fn head_name<'s>(n: Node, text: &'s str) -> Option<&'s str> {
    if n.kind() != "list_lit" {
        return None;
    }
    let h = *syntax::values(n).first()?;
    (h.kind() == "sym_lit").then(|| syntax::sym_parts(h, text).1)
}

// ---------------------------------------------------------------------------------------------
// cycles

fn cycles(store: &Store, sc: &Resolved, out: &mut Vec<Diagnostic>) -> Result<()> {
    // A cycle through a namespace lies within what it requires, directly or not: a scoped pass
    // reads only that part of the require graph.
    let decls = match &sc.nss {
        Some(nss) => store.query(
            "start[n] <- $nss
             reach[n] := start[n]
             reach[m] := reach[n], *ns_decl{ns: n, requires}, m in requires
             ?[ns, file, requires] := reach[ns], *ns_decl{ns, file, requires}",
            params([("nss", column(nss.iter().map(|n| n.as_str().into())))]),
        )?,
        None => store
            .query("?[ns, file, requires] := *ns_decl{ns, file, requires}", Default::default())?,
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files: HashMap<String, String> = HashMap::new();
    for r in &decls.rows {
        let reqs = r[2]
            .get_slice()
            .map(|s| s.iter().filter_map(|v| v.get_str().map(str::to_string)).collect())
            .unwrap_or_default();
        graph.insert(str_at(r, 0), reqs);
        files.insert(str_at(r, 0), str_at(r, 1));
    }
    for ns in graph.keys().filter(|ns| sc.has_ns(ns)) {
        // The shortest way round, starting with one of this namespace's requires.
        let mut best: Option<Vec<String>> = None;
        for next in graph.get(ns).into_iter().flatten() {
            if let Some(p) = path_between(&graph, next, ns) {
                if best.as_ref().is_none_or(|b| p.len() < b.len()) {
                    best = Some(p);
                }
            }
        }
        let Some(path) = best else { continue };
        let next = path[0].clone();
        let cycle = std::iter::once(ns.to_string()).chain(path).collect::<Vec<_>>().join(" → ");
        let file = files.get(ns).cloned().unwrap_or_default();
        let (line, col, id) = require_site(store, &file, &next)?;
        out.push(diag(
            "cycle",
            "error",
            ns,
            &id,
            &file,
            line,
            col,
            format!(
                "{file}:{line}: `{ns}` requires `{next}` here, in the namespace cycle {cycle}; Clojure cannot load a cycle: move the vars both sides use into a namespace that requires neither, or drop one of the requires"
            ),
        ));
    }
    Ok(())
}

/// Where a file requires `lib` (line, column, id of the form), else its `ns` form.
fn require_site(store: &Store, file: &str, lib: &str) -> Result<(i64, i64, String)> {
    let text = match views::stored_text(store, file) {
        Ok(t) => t,
        Err(_) => return Ok((1, 1, String::new())),
    };
    let tree = syntax::parse(&text);
    let nodes = syntax::top_level_forms(&tree);
    let idx = LineIndex::new(&text);
    let ids = store.query(
        "?[pos, id] := *form_at{file: $f, pos, id}, *form{id, parent}, parent == '' :order pos",
        params([("f", file.into())]),
    )?;
    let id_of = |b: usize| {
        nodes
            .iter()
            .position(|n| n.start_byte() <= b && b < n.end_byte())
            .and_then(|i| ids.rows.get(i))
            .map(|r| str_at(r, 1))
            .unwrap_or_default()
    };
    if let Some(spec) = libspecs(&nodes, &text).into_iter().find(|s| s.lib == lib) {
        let p = idx.pos(spec.at.start_byte());
        return Ok((p.line as i64, p.col as i64, id_of(spec.at.start_byte())));
    }
    let first = nodes.first().map_or(0, |n| n.start_byte());
    let p = idx.pos(first);
    Ok((p.line as i64, p.col as i64, id_of(first)))
}
