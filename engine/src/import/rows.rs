//! Each new form's row and id: matched against the file's stored forms (`identity`), against
//! forms moving in from other files of the change, or given a fresh id.

use super::*;
use crate::identity::IdSet;
use crate::store::cstr_at;
use compact_str::CompactString;

/// A named top-level form's identity across files: kind, name, dispatch value.
pub(super) type MoveKey = (CompactString, CompactString, CompactString);

/// A named top-level form's identity with its namespace: namespace, kind, name, dispatch value.
type NsMoveKey = (CompactString, CompactString, CompactString, CompactString);

/// Stored forms that may keep their id in another file of the change.
#[derive(Default)]
pub(super) struct Moves {
    /// Forms whose namespace and name now stand in another file, and no longer in their own
    /// (a file renamed onto a path whose file moved away or was deleted, in one change): the
    /// same form, moved with its namespace, whatever its old path holds now. Taken before any
    /// file's forms are matched by name: the old path's new forms may have its kind and name
    /// too (another namespace's `-main`), and matched it first.
    by_ns: HashMap<NsMoveKey, String>,
    /// The ids `by_ns` holds: not matched in their own file.
    claimed: HashSet<String>,
    /// Forms that leave their file (it no longer has a form of that kind and name, or it is
    /// removed and not moved whole): a form of that kind and name in another file is the same
    /// form, moved (`move_form`, cut and paste between files).
    by_name: HashMap<MoveKey, String>,
}

fn ns_key_of(f: &ParsedForm) -> NsMoveKey {
    let a = &f.analysis;
    (f.ns.clone(), a.kind.as_str().into(), a.name.clone(), a.dispatch.clone())
}

/// The named top-level forms of `olds`: the ones that can move.
fn named(olds: &[OldForm]) -> impl Iterator<Item = &OldForm> {
    olds.iter().filter(|o| o.stored.parent.is_empty() && !o.name.is_empty())
}

fn ns_key_of_old(o: &OldForm) -> NsMoveKey {
    (o.stored.ns.clone(), o.kind.clone(), o.name.clone(), o.dispatch.clone())
}

/// What stored forms may move between the files of this change ([`Moves`]). Keys held by two
/// stored forms, or (by namespace) wanted by two new files, are ambiguous and left out.
pub(super) fn movable_forms(
    parsed: &[ParsedFile],
    old: &HashMap<String, Vec<OldForm>>,
    removals: &Removals,
) -> Moves {
    if old.is_empty() {
        // Nothing stored to move (a first import).
        return Moves::default();
    }
    let moved_whole: HashSet<&str> = removals.moved_from.values().map(String::as_str).collect();
    // Where each new named form stands, by namespace and name; `None` where it stands twice.
    let mut wanted: HashMap<NsMoveKey, Option<&str>> = HashMap::new();
    for f in parsed {
        for form in f.forms().iter().filter(|form| !form.analysis.name.is_empty()) {
            wanted
                .entry(ns_key_of(form))
                .and_modify(|e| *e = None)
                .or_insert(Some(f.path.as_str()));
        }
    }
    let mut by_ns: HashMap<NsMoveKey, Option<String>> = HashMap::new();
    for (path, olds) in old {
        if moved_whole.contains(path.as_str()) {
            continue;
        }
        for o in named(olds) {
            let key = ns_key_of_old(o);
            match wanted.get(&key) {
                Some(Some(to)) if *to != path.as_str() => {
                    by_ns
                        .entry(key)
                        .and_modify(|e| *e = None)
                        .or_insert_with(|| Some(o.id.to_string()));
                }
                _ => {}
            }
        }
    }
    let by_ns: HashMap<NsMoveKey, String> =
        by_ns.into_iter().filter_map(|(k, id)| Some((k, id?))).collect();
    let claimed: HashSet<String> = by_ns.values().cloned().collect();
    let mut by_name: HashMap<MoveKey, Option<String>> = HashMap::new();
    for (path, olds) in old {
        if moved_whole.contains(path.as_str()) {
            continue;
        }
        let staying: HashSet<MoveKey> = parsed
            .iter()
            .filter(|f| f.path == *path)
            .flat_map(|f| f.forms())
            .map(|f| {
                let a = &f.analysis;
                (a.kind.as_str().into(), a.name.clone(), a.dispatch.clone())
            })
            .collect();
        for o in named(olds).filter(|o| !claimed.contains(o.id.as_str())) {
            let key = (o.kind.clone(), o.name.clone(), o.dispatch.clone());
            if !staying.contains(&key) {
                by_name
                    .entry(key)
                    .and_modify(|e| *e = None)
                    .or_insert_with(|| Some(o.id.to_string()));
            }
        }
    }
    let by_name = by_name.into_iter().filter_map(|(k, id)| Some((k, id?))).collect();
    Moves { by_ns, claimed, by_name }
}

/// Rows for every form of a file (top-level forms, then each comment block's children after
/// their block), with ids matched against the file's stored forms, then against the forms
/// `movable` from other files. Each form moves into its row; a file resolved in chunks
/// ([`Resolution::InChunks`]) is resolved a chunk of forms at a time, each chunk's forms and
/// resolution gone into rows before the next is resolved.
pub(super) fn form_rows(
    file: &ParsedFile,
    mut forms: Vec<ParsedForm>,
    res: Resolution,
    olds: &[OldForm],
    moves: &mut Moves,
    taken: &mut TakenIds,
) -> Vec<FormRow> {
    // Forms that moved in with their namespace keep their ids; the rest are matched against
    // this file's stored forms that did not move out with theirs.
    let mut matched: Vec<Option<String>> = forms
        .iter()
        .map(|f| match f.analysis.name.is_empty() {
            true => None,
            false => moves.by_ns.remove(&ns_key_of(f)),
        })
        .collect();
    let old_top: Vec<&OldForm> = olds
        .iter()
        .filter(|o| o.stored.parent.is_empty() && !moves.claimed.contains(o.id.as_str()))
        .collect();
    {
        let unmatched: Vec<usize> = (0..forms.len()).filter(|i| matched[*i].is_none()).collect();
        let old_keys: Vec<Key> = old_top.iter().map(|o| o.key()).collect();
        let new_keys: Vec<Key> = unmatched.iter().map(|i| key_of(&forms[*i], *i)).collect();
        for (i, m) in unmatched.iter().zip(identity::match_forms(&old_keys, &new_keys)) {
            matched[*i] = m.map(|oi| old_top[oi].id.to_string());
        }
    }

    let children: usize = forms.iter().map(|f| f.children.len()).sum();
    let mut rows = Vec::with_capacity(forms.len() + children);
    // A big file's rows (one resolved in chunks) hold their call sites as stored (`Sites`).
    let sites = if matches!(res, Resolution::InChunks(..)) { Held::Stored } else { Held::Found };
    let (chunk, mut made, nss) = match res {
        Resolution::Made(res) => (forms.len().max(1), Some(res.into_iter()), None),
        Resolution::InChunks(nss, chunk) => (chunk, None, Some(nss)),
    };
    // The forms in chunks (with the position of each one's first), each dropped once its rows
    // are built: split off from the end, so the list shrinks as they are taken (a big file's
    // list of forms is hundreds of bytes a form).
    let mut chunks: Vec<(usize, Vec<ParsedForm>)> = Vec::new();
    while !forms.is_empty() {
        let at = (forms.len() - 1) / chunk * chunk;
        let tail = if at == 0 { std::mem::take(&mut forms) } else { forms.split_off(at) };
        forms.shrink_to_fit();
        chunks.push((at, tail));
    }
    // The index of a text read in runs, made once for all its chunks (it is 8 bytes a line).
    let lines = (nss.is_some() && file.tree.is_none()).then(|| LineIndex::new(&file.text));
    let mut occurrences: HashMap<String, usize> = HashMap::new();
    while let Some((start, forms)) = chunks.pop() {
        let mut res = match (&mut made, nss) {
            (Some(res), _) => std::mem::take(res),
            (None, Some(nss)) => {
                forms::resolve_forms_from(file, &forms, start, nss, lines.as_ref()).into_iter()
            }
            (None, None) => Vec::new().into_iter(),
        };
        for (i, mut f) in (start..).zip(forms) {
            let a = &f.analysis;
            let id = match matched[i].take() {
                Some(id) => id,
                None => {
                    let moved_key = (a.kind.as_str().into(), a.name.clone(), a.dispatch.clone());
                    match moves.by_name.remove(&moved_key).filter(|_| !a.name.is_empty()) {
                        Some(id) => id,
                        None => fresh_id(&file.path, "", &f, &mut occurrences, taken),
                    }
                }
            };
            let kids = std::mem::take(&mut f.children);
            let r = res.next().unwrap_or_default();
            rows.push(row_from(file, f, r, (&id, "", i), sites));
            if !kids.is_empty() {
                let old_children: Vec<&OldForm> =
                    olds.iter().filter(|o| o.stored.parent == id).collect();
                let ok: Vec<Key> = old_children.iter().map(|o| o.key()).collect();
                let nk: Vec<Key> = kids.iter().enumerate().map(|(i, c)| key_of(c, i)).collect();
                let cm = identity::match_forms(&ok, &nk);
                drop(nk);
                for (ci, (c, m)) in kids.into_iter().zip(cm).enumerate() {
                    let cid = match m {
                        Some(oi) => old_children[oi].id.to_string(),
                        None => fresh_id(&file.path, &id, &c, &mut occurrences, taken),
                    };
                    let r = res.next().unwrap_or_default();
                    rows.push(row_from(file, c, r, (&cid, &id, ci), sites));
                }
            }
        }
    }
    rows
}

pub(super) fn fresh_id(
    path: &str,
    parent: &str,
    f: &ParsedForm,
    occurrences: &mut HashMap<String, usize>,
    taken: &mut TakenIds,
) -> String {
    let a = &f.analysis;
    let base = if a.name.is_empty() {
        format!("{path}\0{parent}\0{}", f.hash)
    } else {
        format!("{path}\0{parent}\0{}\0{}\0{}", a.kind.as_str(), a.name, a.dispatch)
    };
    let n = occurrences.entry(base.clone()).or_insert(0);
    *n += 1;
    let seed = format!("{base}\0{n}");
    let id = identity::new_id(&seed, &mut |c| taken.contains(c));
    taken.insert(id.clone());
    id
}

/// The form ids in use, for fresh ids to avoid: those given out in this change, and the
/// store's. A save that needs a few fresh ids asks the store about each; one that needs many
/// (an import) reads all the store's ids once.
pub(super) struct TakenIds<'s> {
    pub(super) store: &'s Store,
    pub(super) ours: IdSet,
    pub(super) stored: Option<IdSet>,
    pub(super) asked: usize,
    /// The first store error: the change is refused with it (an id is never guessed free).
    pub(super) failed: Option<StoreError>,
}

impl<'s> TakenIds<'s> {
    /// Questions to the store before reading all its ids is cheaper.
    const ASK_LIMIT: usize = 64;

    pub(super) fn new(store: &'s Store) -> TakenIds<'s> {
        TakenIds { store, ours: IdSet::default(), stored: None, asked: 0, failed: None }
    }

    pub(super) fn contains(&mut self, id: &str) -> bool {
        if self.ours.contains(id) {
            return true;
        }
        if self.stored.is_none() && self.asked >= Self::ASK_LIMIT {
            match all_ids(self.store) {
                Ok(ids) => self.stored = Some(ids),
                Err(e) => return self.fail(e),
            }
        }
        if let Some(stored) = &self.stored {
            return stored.contains(id);
        }
        self.asked += 1;
        match self.store.query("?[id] := id = $id, *form{id}", params([("id", id.into())])) {
            Ok(rows) => !rows.rows.is_empty(),
            Err(e) => self.fail(e),
        }
    }

    /// After an error every id counts as free, so no loop keeps asking; `check` then refuses
    /// the whole change.
    pub(super) fn fail(&mut self, e: StoreError) -> bool {
        self.failed.get_or_insert(e);
        false
    }

    pub(super) fn insert(&mut self, id: String) {
        self.ours.insert(&id);
    }

    /// The store error met while looking ids up, if any.
    pub(super) fn check(&mut self) -> Result<()> {
        self.failed.take().map_or(Ok(()), Err)
    }
}

pub(super) fn key_of(f: &ParsedForm, pos: usize) -> Key<'_> {
    Key {
        kind: f.analysis.kind.as_str(),
        head: &f.analysis.head,
        name: &f.analysis.name,
        dispatch: &f.analysis.dispatch,
        hash: &f.hash,
        source: &f.source,
        pos,
    }
}

pub(super) fn row_of(
    file: &ParsedFile,
    f: &ParsedForm,
    r: Resolved,
    id: &str,
    parent: &str,
    pos: usize,
) -> FormRow {
    row_from(file, f.clone(), r, (id, parent, pos), Held::Found)
}

/// How a row holds its call sites ([`change::Sites`]).
#[derive(Clone, Copy)]
pub(super) enum Held {
    Found,
    Stored,
}

/// The row of form `f`, which moves into it, with its resolution `r`.
pub(super) fn row_from(
    file: &ParsedFile,
    f: ParsedForm,
    r: Resolved,
    (id, parent, pos): (&str, &str, usize),
    sites: Held,
) -> FormRow {
    let ParsedForm { leading, source, start, end, ns, analysis: a, hash, .. } = f;
    // Forms inside a `(comment ...)` block define nothing when the file loads.
    let defines_var =
        parent.is_empty() && a.kind.defines_var() && !a.name.starts_with(':') && !a.name.is_empty();
    let fqn = if defines_var { format!("{ns}/{}", a.name) } else { String::new() };
    let defines = if parent.is_empty() {
        a.defines
            .iter()
            .map(|d| (compact_str::format_compact!("{ns}/{}", d.name), d.line))
            .collect()
    } else {
        Vec::new()
    };
    let mut row = FormRow {
        id: id.into(),
        file: file.path.as_str().into(),
        ns,
        pos: pos as i64,
        parent: parent.into(),
        kind: a.kind.as_str().into(),
        head: a.head,
        name: a.name,
        fqn: fqn.into(),
        dispatch: a.dispatch,
        doc: a.doc,
        arglists: a.arglists,
        leading,
        canonical: if r.canonical == source { String::new() } else { r.canonical },
        source,
        start,
        end,
        hash,
        private: a.flags.private,
        dynamic: a.flags.dynamic,
        deprecated: a.flags.deprecated,
        test: a.flags.test,
        export: a.flags.export,
        macro_: a.flags.macro_,
        platforms: a.platforms,
        purity: r.purity.as_str().into(),
        rhash: Default::default(),
        calls: r.calls,
        unresolved: r.unresolved,
        sites: change::Sites::default(),
        defines,
    };
    row.rhash = resolution_hash(&row, &r.sites).into();
    row.sites = change::Sites::Found(r.sites);
    if let Held::Stored = sites {
        let mut column = row.stored_sites().into_owned();
        column.shrink_to_fit();
        row.sites = change::Sites::Stored(column);
    }
    // Held until the change is written: without the room they grew into (the texts are
    // written with room for more, a list of one arglist holds four).
    row.arglists.shrink_to_fit();
    row.platforms.shrink_to_fit();
    row
}

/// A stored form, as identity matching needs it, and (`stored`) as `change::apply` compares
/// the new forms with it.
pub(super) struct OldForm {
    pub(super) id: CompactString,
    pub(super) kind: CompactString,
    pub(super) head: CompactString,
    pub(super) name: CompactString,
    pub(super) dispatch: CompactString,
    /// Empty unless identity matching may compare it by text ([`read_needed_sources`]).
    pub(super) source: String,
    pub(super) stored: change::OldForm,
}

impl OldForm {
    pub(super) fn key(&self) -> Key<'_> {
        Key {
            kind: &self.kind,
            head: &self.head,
            name: &self.name,
            dispatch: &self.dispatch,
            hash: &self.stored.hash,
            source: &self.source,
            pos: self.stored.pos as usize,
        }
    }
}

/// The ids of the stored forms `paths` place, comment blocks' children included.
pub(super) fn ids_in_files<'p>(
    store: &Store,
    paths: impl IntoIterator<Item = &'p str>,
) -> Result<Vec<String>> {
    let rows = store.query(
        "paths[file] <- $paths ?[id] := paths[file], *form_at{file, id}",
        params([("paths", column(paths.into_iter().map(DataValue::from)))]),
    )?;
    Ok(rows.rows.iter().map(|r| str_at(r, 0)).collect())
}

/// The stored forms of `paths`, each file's in order. Read a part at a time: the ids first,
/// then [`change::KEYS_PER_QUERY`] forms' rows a query, so that Cozo's copies of a big file's
/// rows (its source and a dozen other columns, kilobytes a form) are never all alive at once.
pub(super) fn old_forms(
    store: &Store,
    paths: &HashSet<&str>,
) -> Result<HashMap<String, Vec<OldForm>>> {
    if paths.is_empty() {
        return Ok(HashMap::new());
    }
    let ids = ids_in_files(store, paths.iter().copied())?;
    // `apply`'s columns first, then what identity matching reads. Sources are read afterwards,
    // of the forms that matching can compare by text ([`read_needed_sources`]).
    let cols = change::OLD_FORM_COLS;
    let script =
        format!("ids[id] <- $ids ?[{cols}, head, name, dispatch] := ids[id], *form{{{cols}, head, name, dispatch}}");
    let n = cols.split(", ").count();
    let kind_at = cols.split(", ").position(|c| c == "kind").expect("kind column");
    let mut out: HashMap<String, Vec<OldForm>> = HashMap::new();
    change::query_in_parts(
        store,
        &script,
        "ids",
        &ids,
        |id| id.as_str().into(),
        |rows| {
            for r in &rows {
                let stored = change::OldForm::from_row(r);
                let form = OldForm {
                    id: cstr_at(r, 0),
                    kind: cstr_at(r, kind_at),
                    head: cstr_at(r, n),
                    name: cstr_at(r, n + 1),
                    dispatch: cstr_at(r, n + 2),
                    source: String::new(),
                    stored,
                };
                out.entry(form.stored.file.to_string()).or_default().push(form);
            }
            Ok(())
        },
    )?;
    for forms in out.values_mut() {
        forms.sort_by_key(|f| f.stored.pos);
    }
    Ok(out)
}

/// Read the sources of the stored forms in `old` that identity matching may compare by text
/// ([`identity::match_forms`]): unnamed forms and comment blocks' children (matched by content),
/// and named forms that matching by kind, name and dispatch can leave over (renamed in place:
/// their name and dispatch are not among the new forms' of their file as often as among the
/// stored ones). A named form whose name stays is matched by it and its text is never read: a
/// second save of a big file held every stored form's text for nothing (its size again, and
/// Cozo's copy of it while they were read). Forms that move between files are matched by key
/// alone; when a change moves any, every source is read, as before.
pub(super) fn read_needed_sources(
    store: &Store,
    parsed: &[ParsedFile],
    old: &mut HashMap<String, Vec<OldForm>>,
    moves: &Moves,
    removals: &Removals,
) -> Result<()> {
    let every = !moves.by_ns.is_empty() || !moves.by_name.is_empty();
    // (name, dispatch) of each new top-level named form, counted, by the path of the stored
    // forms it is matched against.
    let mut new_names: HashMap<&str, HashMap<(&str, &str), usize>> = HashMap::new();
    for f in parsed {
        let against = removals.moved_from.get(&f.path).unwrap_or(&f.path);
        let names = new_names.entry(against.as_str()).or_default();
        for form in f.forms().iter().filter(|form| !form.analysis.name.is_empty()) {
            *names.entry((&form.analysis.name, &form.analysis.dispatch)).or_default() += 1;
        }
    }
    let mut wanted: Vec<String> = Vec::new();
    for (path, olds) in old.iter() {
        let names = new_names.get(path.as_str());
        let mut old_names: HashMap<(&str, &str), usize> = HashMap::new();
        for o in olds.iter().filter(|o| o.stored.parent.is_empty() && !o.name.is_empty()) {
            *old_names.entry((&o.name, &o.dispatch)).or_default() += 1;
        }
        for o in olds {
            let key = (o.name.as_str(), o.dispatch.as_str());
            let kept_by_name = !every
                && o.stored.parent.is_empty()
                && !o.name.is_empty()
                && names.and_then(|n| n.get(&key)).is_some_and(|n| *n >= old_names[&key]);
            if !kept_by_name {
                wanted.push(o.id.to_string());
            }
        }
    }
    if wanted.is_empty() {
        return Ok(());
    }
    let mut sources: HashMap<String, String> = HashMap::with_capacity(wanted.len());
    change::query_in_parts(
        store,
        "ids[id] <- $ids ?[id, source] := ids[id], *form{id, source}",
        "ids",
        &wanted,
        |id| id.as_str().into(),
        |rows| {
            sources.extend(rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))));
            Ok(())
        },
    )?;
    for o in old.values_mut().flatten() {
        if let Some(source) = sources.remove(o.id.as_str()) {
            o.source = source;
        }
    }
    Ok(())
}

/// `old` as `change::apply` compares with it, for it to use instead of reading it again (moved
/// there: a big file's stored forms are hundreds of bytes each).
pub(super) fn stored_forms(
    generation: u64,
    replaced: &HashSet<&str>,
    old: HashMap<String, Vec<OldForm>>,
) -> StoredForms {
    let forms = old.into_values().flatten().map(|o| (o.id.to_string(), o.stored)).collect();
    StoredForms { generation, paths: replaced.iter().map(|p| p.to_string()).collect(), forms }
}

/// Every form id in the store, read a range of ids at a time: Cozo decodes each `form` row
/// whole (about 2 KB of values) and holds a query's rows until it returns, so one query of
/// all ids held the whole relation, and a save of a new file cost as much memory as the store
/// it went into (a 5 MB save into a store of 170,000 forms peaked at +400 MB through the
/// mount; heaptrack put 334 MB of its 368 MB heap peak in that query).
/// One range per first character of the id alphabet bounds that to a thirty-second of it,
/// each a range scan of the key.
pub(super) fn all_ids(store: &Store) -> Result<IdSet> {
    // The ranges cover every string, ids of any other shape too: up to the alphabet's second
    // character (in byte order), from each character to the next, from the last one up.
    let mut firsts: Vec<String> =
        crate::identity::ALPHABET.iter().map(|&c| (c as char).to_string()).collect();
    firsts.sort_unstable();
    let mut ids = IdSet::default();
    for i in 0..firsts.len() {
        let mut script = String::from("?[id] := *form{id}");
        let mut bounds = crate::store::Params::default();
        if i > 0 {
            script.push_str(", id >= $lo");
            bounds.insert("lo".into(), DataValue::from(firsts[i].as_str()));
        }
        if let Some(next) = firsts.get(i + 1) {
            script.push_str(", id < $hi");
            bounds.insert("hi".into(), DataValue::from(next.as_str()));
        }
        for r in &store.query(&script, bounds)?.rows {
            ids.insert(r[0].get_str().unwrap_or_default());
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranges `all_ids` reads cover the ids: together they hold every id one query of the
    /// whole relation returns, ids starting with each character of the alphabet among them.
    #[test]
    fn all_ids_reads_every_stored_id_a_range_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree/src/big");
        std::fs::create_dir_all(&tree).unwrap();
        let mut text = String::from("(ns big.core)\n");
        for i in 0..600 {
            text.push_str(&format!("(defn f{i} [x] (+ x {i}))\n(comment (f{i} 1))\n"));
        }
        std::fs::write(tree.join("core.clj"), text).unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        crate::import::import_dir(&store, &dir.path().join("tree"), "t", &crate::import::Quiet)
            .unwrap();
        let whole = store.query("?[id] := *form{id}", Default::default()).unwrap();
        let stored: Vec<String> =
            whole.rows.iter().map(|r| r[0].get_str().unwrap().to_string()).collect();
        assert!(stored.len() > 1_800, "{} forms", stored.len());
        let ids = all_ids(&store).unwrap();
        assert!(stored.iter().all(|id| ids.contains(id)));
        let firsts: HashSet<char> = stored.iter().filter_map(|id| id.chars().next()).collect();
        assert_eq!(firsts.len(), crate::identity::ALPHABET.len(), "ids start with every letter");
    }
}
