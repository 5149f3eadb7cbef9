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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use formdb_engine::checks;
use formdb_engine::read;
use formdb_engine::store::Store;
use formdb_engine::syntax::{self, LineIndex};
use formdb_engine::trace::Timings;

use crate::refactor::{libspecs, path_between};
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
    formdb_engine::store::on_worker(|| diagnostics_here(store, scope, true))
}

/// The diagnostics of a scope but its namespace cycles: for a caller that knows there are
/// none (it found none before an edit that wrote no `ns` declaration).
pub fn diagnostics_but_cycles(store: &Store, scope: &Scope) -> Result<Vec<Diagnostic>> {
    formdb_engine::store::on_worker(|| diagnostics_here(store, scope, false))
}

fn diagnostics_here(store: &Store, scope: &Scope, with_cycles: bool) -> Result<Vec<Diagnostic>> {
    let mut trace = Timings::traced("diagnostics");
    let sc = Resolved::of(store, scope)?;
    let mut out = Vec::new();
    drafts(store, &sc, &mut out)?;
    trace.lap("drafts");
    checked(store, &sc, &mut out)?;
    trace.lap("checks");
    if with_cycles {
        cycles(store, &sc, &mut out)?;
        trace.lap("cycles");
    }
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
                if !read::namespaces::exists(store, ns)? {
                    return Err(EditError::NoNamespace { ns: ns.clone() });
                }
                Resolved { nss: Some(BTreeSet::from([ns.clone()])), id: None }
            }
            Scope::Id(id) => {
                let Some(place) = read::forms::place(store, id)? else {
                    return Err(EditError::UnknownId { id: id.clone() });
                };
                // A form inside a comment block is reported with its block.
                let top = if place.parent.is_empty() { id.clone() } else { place.parent };
                Resolved { nss: Some(BTreeSet::from([place.ns])), id: Some((top, place.file)) }
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
    for draft in read::drafts::headers(store)? {
        let (path, user, error) = (draft.path, draft.user, draft.error);
        // A form draft (`.formdb/forms/<id>.clj`) belongs to its form; a file draft to the
        // file's namespace (read from the draft itself for a file the store does not have).
        let form_id = path
            .strip_prefix(".formdb/forms/")
            .and_then(|p| p.strip_suffix(".clj"))
            .map(str::to_string);
        let (ns, id, file) = match &form_id {
            Some(fid) => match read::forms::place(store, fid)? {
                Some(f) => (f.ns, fid.clone(), f.file),
                None => (String::new(), fid.clone(), String::new()),
            },
            None => {
                let ns = match read::files::ns_of(store, &path)? {
                    Some(ns) => ns,
                    None => read::drafts::declared_ns(store, &path)?.unwrap_or_default(),
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
        let (line, col) = (draft.line, draft.col);
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
    // A file stored raw has no namespace and no forms: it belongs to no scope but the whole
    // store's, and reading it for a scoped pass would read every file row.
    if sc.nss.is_some() || sc.id.is_some() {
        return Ok(());
    }
    for file in read::files::unparsed(store)? {
        let (path, ns, error) = (file.path, file.ns, file.error);
        let (line, col) = (file.line, file.col);
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

// ---------------------------------------------------------------------------------------------
// unresolved symbols, arity and side effects: what the engine found when it wrote the forms

/// The stored findings of the checks that need the called vars (`formdb_engine::checks`),
/// for the top-level forms in scope: one read, whatever the size of the scope.
fn checked(store: &Store, sc: &Resolved, out: &mut Vec<Diagnostic>) -> Result<()> {
    // A comment block's children are reported by their own id, in the block's scope.
    let report = sc.id.as_ref().map(|(id, _)| id.as_str());
    for f in read::findings::findings(store, sc.nss.as_ref(), report)? {
        if !sc.has_form(&f.ns, &f.report) {
            continue;
        }
        let message = checks::located(&f.kind, &f.file, f.line, f.col, &f.message);
        out.push(diag(&f.kind, &f.severity, &f.ns, &f.id, &f.file, f.line, f.col, message));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// cycles

fn cycles(store: &Store, sc: &Resolved, out: &mut Vec<Diagnostic>) -> Result<()> {
    // A cycle through a namespace lies within what it requires, directly or not: a scoped pass
    // reads only that part of the require graph.
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (ns, lib) in read::findings::require_edges(store, sc.nss.as_ref())? {
        graph.entry(ns).or_default().insert(lib);
    }
    let mut found: Vec<(&str, Vec<String>)> = Vec::new();
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
        if let Some(path) = best {
            found.push((ns, path));
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    // The files of the namespaces in a cycle, to place each report.
    let in_cycles = found.iter().map(|(ns, _)| (*ns).to_string()).collect();
    let files: HashMap<String, String> =
        read::findings::declaring_files_of(store, &in_cycles)?.into_iter().collect();
    for (ns, path) in found {
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

/// Where a file requires `lib` (line, column, id of the form), else its first form. Only the
/// forms that can require (the `ns` form, top-level `require`, `use`, … calls) are read and
/// parsed, each alone: a namespace in a cycle is reported on every edit of it, and parsing
/// the whole of `clojure/core.clj` each time cost 30 ms.
fn require_site(store: &Store, file: &str, lib: &str) -> Result<(i64, i64, String)> {
    const HEADS: [&str; 6] = ["require", "use", "require-macros", "use-macros", "refer", "ns"];
    let heads: Vec<String> =
        HEADS.iter().flat_map(|h| [(*h).to_string(), format!("clojure.core/{h}")]).collect();
    let forms = read::findings::requiring_forms(store, file, &heads)?;
    for form in &forms {
        let (source, line, col) = (form.source.as_str(), form.line, form.col);
        let tree = syntax::parse(source);
        let nodes = syntax::top_level_forms(&tree);
        if let Some(spec) = libspecs(&nodes, source).into_iter().find(|s| s.lib == lib) {
            // A place in the form's own text, moved to where the form starts in the file.
            let p = LineIndex::new(source).pos(spec.at.start_byte());
            let (l, c) = if p.line == 1 {
                (line, col + i64::from(p.col) - 1)
            } else {
                (line + i64::from(p.line) - 1, i64::from(p.col))
            };
            return Ok((l, c, form.id.clone()));
        }
    }
    Ok(match forms.first() {
        Some(f) if f.pos == 0 => (f.line, f.col, f.id.clone()),
        _ => (1, 1, String::new()),
    })
}
