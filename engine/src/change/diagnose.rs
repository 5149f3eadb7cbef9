//! The stored diagnostics kept in step with a change.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use compact_str::CompactString;

use super::rows::{form_from_row, query_in_parts, string_list, Batch, FORM_COLS};
use super::{FormRow, Sig, Written};
use crate::checks::Finding;
use crate::store::{column, params, str_at, Result, Store};
use crate::syntax::Pos;

/// What a change does that the stored diagnostics follow.
pub(super) struct Diagnose<'a> {
    /// Forms written (new, changed or moved).
    pub(super) written: &'a [&'a FormRow],
    /// (id, file) of forms removed.
    pub(super) deleted: &'a [(String, String)],
    /// What the callers' checks depend on, per old form written or removed (`sig` rows).
    pub(super) old_sigs: HashMap<String, Sig>,
    /// Vars the old forms defined.
    pub(super) old_defines: HashMap<String, Vec<String>>,
    /// New purity classes of stored forms not written (`Change::SetPurity`).
    pub(super) new_purity: &'a HashMap<&'a str, &'a str>,
    /// What an import into an empty store wrote before this change: a var it never called has
    /// no stored caller, one it never defined no stored definition.
    pub(super) known: Option<&'a Written>,
}

/// Keep the stored diagnostics (`diagnostic`) in step with a change: check every top-level
/// form it writes, and every stored top-level form that calls a var whose signature (arglists,
/// macro-ness, kind, platforms, purity) the change moves or whose own purity it changes; drop
/// the findings of the forms it removes (their old rows were read with the form's other rows).
pub(super) fn diagnose(
    store: &Store,
    out: &mut Batch,
    findings: &mut Findings,
    d: &Diagnose,
) -> Result<()> {
    use crate::checks::{self, Definition, Known};
    let clojure = |file: &str| {
        crate::syntax::Lang::from_path(file).is_some_and(|l| l != crate::syntax::Lang::Edn)
    };
    // Unresolved symbols of every form written (a comment block's children are reported with
    // the block).
    for f in d.written.iter().filter(|f| clojure(&f.file)) {
        let report = if f.parent.is_empty() { &f.id } else { &f.parent };
        for (sym, at) in &f.unresolved {
            let in_comment = !f.parent.is_empty();
            findings.put(f, report, Found::Unresolved { symbol: sym.into(), at: *at, in_comment });
        }
    }
    let sig_of = |f: &FormRow| {
        let (arglists, platforms) = (f.arglists.iter(), f.platforms.iter());
        Sig::of(
            arglists.map(String::as_str),
            f.macro_,
            &f.kind,
            platforms.map(String::as_str),
            &f.purity,
        )
    };
    // Vars whose signature this change moves: defined by a form added, removed, or written
    // with another signature, or by a stored form whose purity changes.
    // Borrowed: a big save's forms each define a var, all of them new.
    let mut changed: BTreeSet<&str> = BTreeSet::new();
    for f in d.written {
        if d.old_sigs.get(f.id.as_str()) != Some(&sig_of(f)) {
            changed.extend(f.defines.iter().map(|(v, _)| v.as_str()));
            changed
                .extend(d.old_defines.get(f.id.as_str()).into_iter().flatten().map(String::as_str));
        }
    }
    for (id, _) in d.deleted {
        changed.extend(d.old_defines.get(id).into_iter().flatten().map(String::as_str));
    }
    let rewritten: HashSet<&str> = d
        .written
        .iter()
        .map(|f| f.id.as_str())
        .chain(d.deleted.iter().map(|(id, _)| id.as_str()))
        .collect();
    let repurified = if d.new_purity.is_empty() {
        Vec::new()
    } else {
        let rows = store.query(
            "ids[id] <- $ids ?[var] := ids[id], *defined_by{id, var}",
            params([("ids", column(d.new_purity.keys().map(|id| (*id).into())))]),
        )?;
        rows.rows.iter().map(|r| str_at(r, 0)).collect()
    };
    changed.extend(repurified.iter().map(String::as_str));
    // Stored top-level forms to check again: callers of those vars, and forms whose purity
    // changes; with their facts, their call sites and their old findings.
    let mut again: BTreeSet<String> = d.new_purity.keys().map(|id| id.to_string()).collect();
    let changed: Vec<&str> =
        changed.into_iter().filter(|v| d.known.is_none_or(|w| w.may_call(v))).collect();
    let callers = "vars[v] <- $vars
             ?[id] := vars[v], *calls{to: v, from}, *form{id: from, parent}, parent == '', id = from
             ?[id] := vars[v], *calls{to: v, from}, *form{id: from, parent}, parent != '', id = parent";
    query_in_parts(
        store,
        callers,
        "vars",
        &changed,
        |v| (*v).into(),
        |rows| {
            again.extend(rows.iter().map(|r| str_at(r, 0)));
            Ok(())
        },
    )?;
    drop(changed);
    again.retain(|id| !rewritten.contains(id.as_str()));
    // The stored forms to check again, as rows, with their call sites and the purity this
    // change gives them.
    let mut stored: Vec<FormRow> = Vec::new();
    if !again.is_empty() {
        let p = params([("ids", column(again.iter().map(|id| id.as_str().into())))]);
        let forms = store.query(
            &format!(
                "ids[id] <- $ids ?[{FORM_COLS}] := ids[id], *form{{{FORM_COLS}}}, parent == ''"
            ),
            p.clone(),
        )?;
        // Their unresolved symbols stay as they were: only the checks are run again.
        let old = store.query(
            "ids[id] <- $ids ?[ns, id, line, col, kind, message] := ids[id], *form{id, ns}, *diagnostic{ns, id, line, col, kind, message}, kind != 'unresolved'",
            p,
        )?;
        for r in old.rows {
            out.del("diagnostic", r);
        }
        for r in &forms.rows {
            // Its call sites come with it, on lines of the file, as the checks read them.
            let mut f = form_from_row(r);
            if let Some(p) = d.new_purity.get(f.id.as_str()) {
                f.purity = (*p).into();
            }
            stored.push(f);
        }
    }
    // Gone through twice, not collected: a big save checks every form it writes.
    let to_check = || {
        d.written
            .iter()
            .copied()
            .chain(&stored)
            .filter(|f| f.parent.is_empty() && clojure(&f.file))
            .map(|f| {
                let form = checks::Form {
                    ns: &f.ns,
                    line: f.start.line.into(),
                    col: f.start.col.into(),
                    kind: &f.kind,
                    head: &f.head,
                    purity: &f.purity,
                    source: &f.source,
                    sites: f.call_sites(),
                };
                (f, form)
            })
    };
    if to_check().next().is_none() {
        return Ok(());
    }
    // The called vars' definitions as they will be: stored ones, less the forms this change
    // rewrites, plus the forms it writes; with the purity it sets.
    // Owned: a big file's rows hold their sites as stored, read back here a form at a time.
    let mut named: BTreeSet<String> = BTreeSet::new();
    for (_, form) in to_check() {
        for s in form.sites.iter() {
            if !named.contains(&s.to) {
                named.insert(s.to.clone());
            }
        }
    }
    let mut definitions: Vec<Definition> = Vec::new();
    // Into an empty store, only a var the import defined before has a stored definition.
    let named_list: Vec<&str> = named
        .iter()
        .map(String::as_str)
        .filter(|v| d.known.is_none_or(|w| w.may_define(v)))
        .collect();
    let defined = "vars[var] <- $vars
             ?[var, id, fqn, arglists, macro, kind, platforms, purity, source] := vars[var], *defines{var, id}, *form{id, fqn, arglists, macro, kind, platforms, purity, source}";
    query_in_parts(
        store,
        defined,
        "vars",
        &named_list,
        |v| (*v).into(),
        |rows| {
            for r in &rows {
                let id = str_at(r, 1);
                if rewritten.contains(id.as_str()) {
                    continue;
                }
                let purity =
                    d.new_purity.get(id.as_str()).map_or_else(|| str_at(r, 7), |p| p.to_string());
                definitions.push(Definition {
                    var: str_at(r, 0).into(),
                    id: id.into(),
                    fqn: str_at(r, 2).into(),
                    arglists: string_list(&r[3]).into(),
                    macro_: r[4].get_bool().unwrap_or(false),
                    kind: str_at(r, 5).into(),
                    platforms: string_list(&r[6]).into(),
                    purity: purity.into(),
                    source: str_at(r, 8).into(),
                });
            }
            Ok(())
        },
    )?;
    // The forms written are borrowed, texts and lists alike.
    for f in d.written {
        for (var, _) in &f.defines {
            if named.contains(var.as_str()) {
                definitions.push(Definition {
                    var: var.as_str().into(),
                    id: f.id.as_str().into(),
                    fqn: f.fqn.as_str().into(),
                    arglists: f.arglists.as_slice().into(),
                    macro_: f.macro_,
                    kind: f.kind.as_str().into(),
                    platforms: f.platforms.as_slice().into(),
                    purity: f.purity.as_str().into(),
                    source: f.source.as_str().into(),
                });
            }
        }
    }
    let known = Known::new(&definitions);
    for (f, form) in to_check() {
        for finding in checks::check(&form, &known) {
            findings.put(f, &f.id, Found::Checked(finding));
        }
    }
    Ok(())
}

/// The findings a change writes, held as found until its transaction writes them: as Cozo
/// rows a finding is about 700 bytes, its message alone 200, and a big save of real code finds
/// thousands (12,291 unresolved symbols in 5 MB of the corpus, 8.4 MB of its peak).
#[derive(Default)]
pub(super) struct Findings {
    found: Vec<FindingAt>,
    /// Each namespace and path once: a file's findings share them.
    names: HashSet<Arc<str>>,
}

/// A finding with the form it is stored under.
struct FindingAt {
    id: CompactString,
    /// The form it is reported with (a `comment` block's children report with the block).
    report: CompactString,
    ns: Arc<str>,
    file: Arc<str>,
    /// The form's first line: the store keeps the finding's line relative to it.
    first_line: u32,
    found: Found,
}

enum Found {
    /// An unresolved symbol: its message, the same for every one but the symbol, is made when
    /// it is written.
    Unresolved {
        symbol: CompactString,
        at: Pos,
        in_comment: bool,
    },
    Checked(Finding),
}

impl Findings {
    fn put(&mut self, f: &FormRow, report: &str, found: Found) {
        let (ns, file) = (self.name(&f.ns), self.name(&f.file));
        self.found.push(FindingAt {
            id: f.id.clone(),
            report: report.into(),
            ns,
            file,
            first_line: f.start.line,
            found,
        });
    }

    fn name(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.names.get(name) {
            return known.clone();
        }
        let name: Arc<str> = name.into();
        self.names.insert(name.clone());
        name
    }

    pub(super) fn len(&self) -> usize {
        self.found.len()
    }

    /// Put the findings in `range` into `out` as rows of `diagnostic`.
    pub(super) fn emit(&self, range: Range<usize>, out: &mut Batch) {
        for at in &self.found[range] {
            let f = match &at.found {
                Found::Unresolved { symbol, at: pos, in_comment } => {
                    crate::checks::unresolved(&at.ns, symbol, *pos, *in_comment)
                }
                Found::Checked(f) => f.clone(),
            };
            out.put(
                "diagnostic",
                vec![
                    (*at.ns).into(),
                    at.id.as_str().into(),
                    // Relative to the form's first line, as the other places hanging off it.
                    (f.line - i64::from(at.first_line)).into(),
                    f.col.into(),
                    f.kind.into(),
                    f.message.into(),
                    f.severity.into(),
                    (*at.file).into(),
                    at.report.as_str().into(),
                ],
            );
        }
    }
}
