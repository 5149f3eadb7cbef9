//! Purity classes of new rows through the store's vars, and of stored forms elsewhere whose
//! class a change moves; the resolution hash that tells a re-resolved form changed.

use super::*;

/// Stored forms elsewhere whose purity class a change moves: (id, new class), sorted.
pub(super) type Stale = Vec<(String, String)>;

/// The purity class of every new row (in order, file by file) through the store's own vars, to a
/// fixpoint, and the stored forms elsewhere whose class moves with it (id, class). When the vars
/// defined here change class (or appear or vanish), forms elsewhere that reach them through
/// calls may change too: those are recomputed and the ones whose class moved are updated.
pub(super) fn purity_of_rows(
    store: &Store,
    all_rows: &[(usize, Vec<FormRow>)],
    replaced: &HashSet<&str>,
    old: &HashMap<String, Vec<OldForm>>,
    known: Option<&Written>,
) -> Result<(Vec<Purity>, Stale)> {
    // The rows' vars and callees are borrowed: copied, they were a few hundred bytes a form.
    let mut graph = purity::Graph::default();
    for r in all_rows.iter().flat_map(|(_, rows)| rows) {
        graph.push(
            r.defines.iter().map(|(v, _)| v.as_str()),
            // A call of a symbol that resolves to nothing has unknown purity.
            (r.calls.iter().filter(|c| c.to != r.fqn).map(|c| Cow::Borrowed(c.to.as_str())))
                .chain(r.unresolved.iter().map(|(s, _)| Cow::Owned(format!("?{s}")))),
        );
    }
    let new = graph.len();
    let known_purity = stored_purity(store, graph.outside_callees(), replaced, known)?;
    let mut purity = graph.propagate(&known_purity);
    drop(known_purity);
    let mut stale = Vec::new();
    let before = purity_of_vars(store, replaced, old)?;
    let mut after: HashMap<&str, Purity> = HashMap::new();
    for (i, p) in purity.iter().enumerate() {
        for d in graph.defs(i) {
            by_var(&mut after, d.as_ref(), *p);
        }
    }
    let changed: BTreeSet<&str> = (before.keys().map(String::as_str))
        .chain(after.keys().copied())
        .filter(|v| before.get(*v) != after.get(*v))
        .collect();
    // A var is as bad as the worst of its definitions, so one that the rest of the store also
    // defines moves only if the worst of all of them moves. A namespace declared by several
    // files (a copy per source root) would otherwise send every stored caller of each of its
    // vars, and every other definition of them, back through propagation at each import of one
    // of those files: at a million lines that grew to 0.7 s a batch.
    let elsewhere = stored_purity(store, changed.clone(), replaced, known)?;
    let with_elsewhere = |v: &str, here: Option<&Purity>| {
        let classes: Vec<Purity> = elsewhere.get(v).into_iter().chain(here).copied().collect();
        (!classes.is_empty()).then(|| purity::combine(classes.into_iter()))
    };
    let moved: BTreeSet<&str> = changed
        .into_iter()
        .filter(|v| with_elsewhere(v, before.get(*v)) != with_elsewhere(v, after.get(*v)))
        .collect();
    drop(elsewhere);
    // Vars defined here changed class (or appeared, or vanished): the stored forms that reach
    // them through calls may change too. Only those forms are recomputed, with the rest of the
    // store's vars fixed at their stored class.
    // Into an empty store, only a var the import called before has stored callers.
    let moved: BTreeSet<&str> =
        moved.into_iter().filter(|v| known.is_none_or(|w| w.may_call(v))).collect();
    let affected =
        if moved.is_empty() { Vec::new() } else { affected_forms(store, &moved, replaced)? };
    drop(moved);
    drop(after);
    if !affected.is_empty() {
        let mut current = Vec::with_capacity(affected.len());
        for (id, defs, calls, p) in affected {
            graph.push(defs.into_iter(), calls.into_iter());
            current.push((id, p));
        }
        let classes = stored_purity(store, graph.outside_callees(), replaced, known)?;
        purity = graph.propagate(&classes);
        for ((id, was), p) in current.into_iter().zip(&purity[new..]) {
            if was != *p {
                stale.push((id, p.as_str().to_string()));
            }
        }
        stale.sort();
    }
    purity.truncate(new);
    Ok((purity, stale))
}

/// The class of each of `vars` the store defines outside `replaced`: the worst of its
/// definitions. Into an empty store (`known`), only a var the import defined before is stored.
pub(super) fn stored_purity(
    store: &Store,
    mut vars: BTreeSet<&str>,
    replaced: &HashSet<&str>,
    known: Option<&Written>,
) -> Result<HashMap<String, Purity>> {
    vars.retain(|v| known.is_none_or(|w| w.may_define(v)));
    let mut out = HashMap::new();
    for (var, p, file) in stored_purity_rows(store, &vars)? {
        if !replaced.contains(file.as_str()) {
            by_var(&mut out, var, p);
        }
    }
    Ok(out)
}

/// (var, class, file) of every stored definition of `vars`.
pub(super) fn stored_purity_rows(
    store: &Store,
    vars: &BTreeSet<&str>,
) -> Result<Vec<(String, Purity, String)>> {
    let vars: Vec<&str> = vars.iter().copied().collect();
    let mut out = Vec::new();
    let script = "vars[var] <- $vars
         ?[var, purity, file] := vars[var], *defines{var, id}, *form{id, purity, file}";
    change::query_in_parts(
        store,
        script,
        "vars",
        &vars,
        |v| (*v).into(),
        |rows| {
            out.extend(
                (rows.iter()).filter_map(|r| {
                    Some((str_at(r, 0), Purity::parse(&str_at(r, 1))?, str_at(r, 2)))
                }),
            );
            Ok(())
        },
    )?;
    Ok(out)
}

/// A hash of what resolution derived for a form, so re-resolution can tell what changed.
/// Lines count from the form's first line: a form moved down the file by whole lines (a form
/// above it grew) keeps its hash, and its move is seen from its place (`change::apply`).
/// The parts are [`forms::hash_text`]'s, written straight into the hasher: formatted into
/// strings first, they were 0.4 s of a million-line import's writer.
pub(super) fn resolution_hash(r: &FormRow, sites: &[crate::sites::Site]) -> String {
    let line = |l: u32| i64::from(l) - i64::from(r.start.line);
    let mut h = forms::PartsHasher::default();
    h.part(r.canonical());
    for c in &r.calls {
        let (l, col) = (line(c.pos.line), c.pos.col);
        h.part_fmt(format_args!("{}|{:?}|{l}|{col}|{}", c.to, c.kind, c.count));
    }
    for (s, p) in &r.unresolved {
        h.part_fmt(format_args!("?{s}|{}|{}", line(p.line), p.col));
    }
    for (v, l) in &r.defines {
        h.part_fmt(format_args!("={v}|{}", line(*l)));
    }
    // A comment block's sites are its children's calls: they change with the children's
    // resolution, which the block's own calls do not show.
    for site in sites {
        let (l, col) = (line(site.pos.line), site.pos.col);
        let (to, argc, outer, load) = (&site.to, site.argc, &site.outer, site.load);
        h.part_fmt(format_args!("@{to}|{l}|{col}|{argc}|{outer}|{load}"));
    }
    h.finish()
}

/// The stored purity of the vars that the given files define.
pub(super) fn purity_of_vars(
    store: &Store,
    paths: &HashSet<&str>,
    old: &HashMap<String, Vec<OldForm>>,
) -> Result<HashMap<String, Purity>> {
    // The forms' classes are in `old` already: only which vars they define is read, by id, a
    // part at a time (a big file's pairs in one query took +43 MB in Cozo for 105,000 forms).
    let class: HashMap<&str, &str> = (old.values().flatten())
        .filter(|o| paths.contains(o.stored.file.as_str()))
        .map(|o| (o.id.as_str(), o.stored.purity.as_str()))
        .collect();
    let ids: Vec<&str> = class.keys().copied().collect();
    let mut out = HashMap::new();
    change::query_in_parts(
        store,
        "ids[id] <- $ids ?[var, id] := ids[id], *defined_by{id, var}",
        "ids",
        &ids,
        |id| (*id).into(),
        |rows| {
            for r in &rows {
                if let Some(p) = class.get(str_at(r, 1).as_str()).and_then(|c| Purity::parse(c)) {
                    by_var(&mut out, str_at(r, 0), p);
                }
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// Record a var's class. A var that several forms define (`declare` then `defn`, a `def`
/// redefined) takes the worst of them, whatever order they come in: a map that kept the last
/// one seen would compare unequal to the same facts read in another order, and every save of
/// such a file would recompute the whole store's purity.
pub(super) fn by_var<V: Eq + std::hash::Hash>(map: &mut HashMap<V, Purity>, var: V, p: Purity) {
    let class = map.entry(var).or_insert(p);
    *class = purity::combine([*class, p].into_iter());
}

/// A stored form for purity propagation: id, the vars it defines, its callees, its class now.
pub(super) type StoredPurity = (String, Vec<String>, Vec<String>, Purity);

/// The stored forms outside `replaced` whose purity may follow the class of the `moved` vars:
/// those calling them, those calling the vars those define, and so on; with every other form
/// that defines one of their vars (a var is as bad as the worst of its definitions). Each comes
/// with its defined vars, callees (an unresolved symbol as `?sym`) and current purity.
pub(super) fn affected_forms(
    store: &Store,
    moved: &BTreeSet<&str>,
    replaced: &HashSet<&str>,
) -> Result<Vec<StoredPurity>> {
    let replaced_list = column(replaced.iter().map(|p| (*p).into()));
    // What the vars reach is the union of what each part of them reaches: a big save moves
    // every var it defines, sent a part at a time (see `KEYS_PER_QUERY`).
    let moved: Vec<&str> = moved.iter().copied().collect();
    let mut reached: BTreeSet<String> = BTreeSet::new();
    for part in moved.chunks(KEYS_PER_QUERY) {
        let ids = store.query(
            "moved[v] <- $moved
             replaced[f] <- $replaced
             up[id] := moved[v], *calls{to: v, from: id}, *form{id, file}, not replaced[file]
             up[id] := up[x], *defined_by{id: x, var: v}, *calls{to: v, from: id}, *form{id, file}, not replaced[file]
             ?[id] := up[id]
             ?[id] := up[x], *defined_by{id: x, var: v}, *defines{var: v, id}, *form{id, file}, not replaced[file]",
            params([
                ("moved", column(part.iter().map(|v| (*v).into()))),
                ("replaced", replaced_list.clone()),
            ]),
        )?;
        reached.extend(ids.rows.iter().map(|r| str_at(r, 0)));
    }
    stored_purity_of(store, &reached)
}

/// Each of the stored forms `ids` with the vars it defines, its callees (an unresolved symbol
/// as `?sym`) and its class now, by id.
pub(super) fn stored_purity_of(store: &Store, ids: &BTreeSet<String>) -> Result<Vec<StoredPurity>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = column(ids.iter().map(|id| id.as_str().into()));
    let p = || params([("ids", ids.clone())]);
    let forms = store.query(
        "ids[id] <- $ids ?[id, purity, fqn, callees] := ids[id], *form{id, purity, fqn, callees}",
        p(),
    )?;
    let defs = store.query("ids[id] <- $ids ?[id, var] := ids[id], *defined_by{id, var}", p())?;
    let unresolved =
        store.query("ids[id] <- $ids ?[from, sym] := ids[from], *unresolved{from, sym}", p())?;
    let mut by_id: HashMap<String, StoredPurity> = HashMap::new();
    for r in &forms.rows {
        let (id, fqn) = (str_at(r, 0), str_at(r, 2));
        let calls = r[3]
            .get_slice()
            .unwrap_or(&[])
            .iter()
            .filter_map(|c| c.get_str())
            .filter(|c| *c != fqn)
            .map(str::to_string)
            .collect();
        let purity = Purity::parse(&str_at(r, 1)).unwrap_or_default();
        by_id.insert(id.clone(), (id, Vec::new(), calls, purity));
    }
    for r in &defs.rows {
        if let Some(e) = by_id.get_mut(&str_at(r, 0)) {
            e.1.push(str_at(r, 1));
        }
    }
    for r in &unresolved.rows {
        if let Some(e) = by_id.get_mut(&str_at(r, 0)) {
            e.2.push(format!("?{}", str_at(r, 1)));
        }
    }
    let mut out: Vec<StoredPurity> = by_id.into_values().collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash as it was first written: every part a string, then [`forms::hash_text`]. Stored
    /// `rhash`es were made this way; a different hash would rewrite every form at the next
    /// import.
    fn by_parts(r: &FormRow) -> String {
        let line = |l: u32| i64::from(l) - i64::from(r.start.line);
        let mut parts: Vec<String> = vec![r.canonical().to_string()];
        for c in &r.calls {
            let (l, col) = (line(c.pos.line), c.pos.col);
            parts.push(format!("{}|{:?}|{l}|{col}|{}", c.to, c.kind, c.count));
        }
        for (s, p) in &r.unresolved {
            parts.push(format!("?{s}|{}|{}", line(p.line), p.col));
        }
        for (v, l) in &r.defines {
            parts.push(format!("={v}|{}", line(*l)));
        }
        for site in r.call_sites().iter() {
            let (l, col) = (line(site.pos.line), site.pos.col);
            let (to, argc, outer, load) = (&site.to, site.argc, &site.outer, site.load);
            parts.push(format!("@{to}|{l}|{col}|{argc}|{outer}|{load}"));
        }
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        forms::hash_text(&refs)
    }

    #[test]
    fn the_resolution_hash_is_the_one_stored_stores_hold() {
        let store = Store::open_in_memory().unwrap();
        let text = "(ns p.a (:require [clojure.string :as str]))\n\n\
                    (defn f\n  \"Doc.\"\n  [x]\n  (str/upper-case (g x) undefined-thing))\n\n\
                    (defn- g [x] (let [y (inc x)] (map inc [y])))\n\n\
                    (comment\n  (f 1)\n  (g 2 3))\n\n\
                    (defmacro m [& body] `(do ~@body))\n";
        let incoming = vec![Incoming { path: "src/p/a.clj".into(), bytes: text.into() }];
        let (changes, errors) = file_changes(&store, incoming, &Quiet).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let rows: Vec<&FormRow> = changes
            .iter()
            .flat_map(|c| match c {
                Change::PutFile { forms, .. } => forms.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        assert!(rows.iter().any(|r| !r.calls.is_empty() && !r.unresolved.is_empty()));
        assert!(rows.iter().any(|r| !r.call_sites().is_empty() && !r.defines.is_empty()));
        for r in rows {
            assert_eq!(resolution_hash(r, &r.call_sites()), by_parts(r), "{}", r.source);
            assert_eq!(r.rhash, by_parts(r), "{}", r.source);
        }
    }
}
