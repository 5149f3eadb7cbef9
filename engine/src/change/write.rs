//! `apply` in phases: read what is stored, compute the rows that differ, drop what hangs off
//! the old forms, record versions, keep the diagnostics in step, write one transaction.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use cozo::DataValue;

use super::diagnose::{diagnose, Diagnose, Findings};
use super::rows::{
    file_value, form_value, load_deleted_meta, load_forms_by_id, load_old_forms, next_versions,
    query_in_parts, Batch, FORM_COLS,
};
use super::{
    Applied, Change, ChangeSet, FileRow, FormRow, OldForm, Stamp, StoredForms, Written,
    FILE_TEXT_MAX, MODEL_RELATIONS,
};
use crate::nsdecl::NsDecl;
use crate::packed;
use crate::store::{column, params, Result, Store, StoreError, Transaction};

pub(super) fn apply_locked(
    store: &Store,
    set: &ChangeSet,
    stamp: &Stamp,
    chunks: Chunks,
    written: &mut Option<Written>,
    payloads: Payloads,
) -> Result<Applied> {
    // One writer at a time: what is read below must still hold when the batch is written.
    let _writer = store.writer()?;
    let mut trace = crate::trace::Timings::traced("apply");
    // Read under the writer lock: the generation tells whether what the change was computed
    // from still holds, and the new generation follows it.
    let generation = crate::query::generation(store)?;
    let known = Written::hold_at(written, generation);
    let stored = read_stored_forms(store, set, generation, known)?;
    trace.lap("stored forms");

    let now = stamp.at.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    });
    let mut rows = Rows::new(set, now, chunks, payloads);
    for (ci, c) in set.changes.iter().enumerate() {
        rows.put_change(store, &stored, ci, c)?;
    }
    rows.drop_removed_forms(&stored);
    trace.lap("rows");
    rows.put_versions(store, stamp, known)?;
    trace.lap("versions");
    let old_defines = rows.drop_old_form_rows(store)?;
    rows.drop_old_decls(store)?;
    rows.put_purity(store)?;
    trace.lap("old rows");
    diagnose(
        store,
        &mut rows.out,
        &mut rows.findings,
        &Diagnose {
            written: &rows.written,
            deleted: &rows.deleted,
            old_sigs: std::mem::take(&mut rows.old_sigs),
            old_defines,
            new_purity: &rows.new_purity,
            known,
        },
    )?;
    trace.lap("diagnose");
    let applied = rows.write(store, generation)?;
    trace.lap("transaction");
    Written::record(written, set, generation);
    Ok(applied)
}

/// How a change's forms are written: a change writing more than `above` forms writes their
/// rows `size` forms at a time inside its one transaction (a form's rows are 2–4 KB as Cozo
/// values); smaller ones are written by `import_relations` in one call, which plans no query
/// per relation.
#[derive(Clone, Copy, Debug)]
pub(super) struct Chunks {
    pub(super) above: usize,
    pub(super) size: usize,
    /// Rows of one relation handed Cozo in one script: it copies a script's constant rows
    /// several times over (the findings of a big save's forms are megabytes of them).
    pub(super) rows: usize,
}

/// A save of a big file is chunked; an import's batch of 256 files (about 5,000 forms at 1 M
/// lines) is bounded already and is written in one call. A chunk's script is what Cozo copies
/// over (parsed, evaluated, put: 8 MB at the peak of a 5 MB save of real code with 512 forms a
/// chunk and 2,048 rows a script): 128 and 512 peaked 3 MB lower (+45 against +47–48 MB, three
/// runs side by side) in the same time; 64 and 256 were no lower and slower.
pub(super) const CHUNKS: Chunks = Chunks { above: 16_384, size: 128, rows: 512 };

/// What is stored of the forms a change set writes, read before anything is written.
struct StoredBefore<'a> {
    /// The stored forms of the files the change puts or deletes, by id: borrowed from the
    /// change's snapshot when it is current (a big file's are hundreds of bytes a form).
    old: HashMap<Cow<'a, str>, Cow<'a, OldForm>>,
    /// Forms the change puts that are stored in another file (they moved in), by id.
    elsewhere: HashMap<String, OldForm>,
    /// The ids of every form the change puts.
    new_ids: HashSet<&'a str>,
}

/// Read the stored forms the change set replaces, from its [`Change::Read`] snapshots when
/// they are still current and cover every file it puts, else from the store.
fn read_stored_forms<'a>(
    store: &Store,
    set: &'a ChangeSet,
    generation: u64,
    known: Option<&Written>,
) -> Result<StoredBefore<'a>> {
    let put_paths: Vec<&str> = set
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::PutFile { file, .. } => Some(file.path.as_str()),
            Change::DeleteFile { path } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    let snapshots: Vec<&StoredForms> = set
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::Read(s) if s.generation == generation => Some(&**s),
            _ => None,
        })
        .collect();
    for c in &set.changes {
        if let Change::PutForms { generation: read, .. } = c {
            if *read != generation {
                return Err(StoreError::Moved { read: *read, now: generation });
            }
        }
    }
    let covered = |p: &str| snapshots.iter().any(|s| s.paths.contains(p));
    let old: HashMap<Cow<str>, Cow<OldForm>> =
        if !snapshots.is_empty() && put_paths.iter().all(|p| covered(p)) {
            let put: HashSet<&str> = put_paths.iter().copied().collect();
            snapshots
                .iter()
                .flat_map(|s| &s.forms)
                .filter(|(_, o)| put.contains(o.file.as_str()))
                .map(|(id, o)| (Cow::Borrowed(id.as_str()), Cow::Borrowed(o)))
                .collect()
        } else {
            let read = load_old_forms(store, &put_paths)?;
            read.into_iter().map(|(id, o)| (Cow::Owned(id), Cow::Owned(o))).collect()
        };
    let mut new_ids: HashSet<&str> = HashSet::new();
    for c in &set.changes {
        if let Change::PutFile { forms, .. } | Change::PutForms { forms, .. } = c {
            new_ids.extend(forms.iter().map(|f| f.id.as_str()));
        }
    }
    // Forms that moved in from another file keep their id; they count as changed, not new.
    // Those a current snapshot holds (an edit in place: its form and the forms it moves) are
    // not read again.
    let mut elsewhere = HashMap::new();
    let mut moved_in = Vec::new();
    for id in new_ids.iter().copied().filter(|id| !old.contains_key(*id)) {
        match snapshots.iter().find_map(|s| s.forms.get(id)) {
            Some(o) => {
                elsewhere.insert(id.to_string(), o.clone());
            }
            None => moved_in.push(id),
        }
    }
    // Into an empty store, only an id the import wrote before can be stored elsewhere.
    moved_in.retain(|id| known.is_none_or(|w| w.may_hold_id(id)));
    elsewhere.extend(load_forms_by_id(store, &moved_in)?);
    Ok(StoredBefore { old, elsewhere, new_ids })
}

/// The rows a change set writes and deletes, gathered before the one transaction, with what
/// the later phases need to know of them.
///
/// Every put goes straight into one batch as it is computed; deletes are added once what
/// they remove has been read (under the store's write lock, so nothing changes between the
/// reads and the write). The batch goes to Cozo's `import_relations` as one transaction,
/// which writes rows directly instead of planning a query per relation. Its map is ordered by
/// relation name, and `-name` (delete) sorts before every `name` (put), so deletes land first.
struct Rows<'a> {
    set: &'a ChangeSet,
    /// When the versions are recorded, in seconds since the Unix epoch.
    now: f64,
    out: Batch,
    /// The forms written, whose rows (a few kilobytes a form as Cozo values) are made only
    /// when the batch is written: a big change writes them a chunk at a time.
    form_puts: Vec<FormPut<'a>>,
    /// The next version of each versioned form that had one (others get version 1).
    next_version: BTreeMap<String, i64>,
    /// The git commit the versions come from, if any.
    commit: Option<&'a str>,
    /// When and by how many its forms are written a chunk at a time.
    chunks: Chunks,
    applied: Applied,
    /// Ids of stored forms written again or removed: what hangs off them is dropped.
    touched: Vec<DataValue>,
    /// Forms that get a version row, with its op.
    versioned: Vec<(&'a FormRow, &'static str)>,
    /// (id, file) of forms removed, sorted.
    deleted: Vec<(String, String)>,
    /// Paths of the files deleted.
    deleted_files: Vec<DataValue>,
    /// New purity classes of stored forms (`Change::SetPurity`), by id.
    new_purity: HashMap<&'a str, &'a str>,
    /// Forms written (new, changed or moved).
    written: Vec<&'a FormRow>,
    /// What the callers' checks depend on, per old form written or removed (`sig`).
    old_sigs: HashMap<String, super::Sig>,
    /// Namespaces whose declaration is written: their old `ns_refer` rows are dropped.
    decls_put: Vec<DataValue>,
    /// Two files of one change declaring the same namespace (a .clj and a .cljs): `ns_decl`
    /// keeps the last one, and so do `ns_refer` and `ns_require` (as when the files come in two
    /// changes: each declaration written replaces the rows of the one before).
    last_decl: HashMap<&'a str, usize>,
    /// The bytes of drafts and blobs taken out of a set given away, to move into their rows.
    payloads: Payloads,
    /// The findings to write, made rows only when written (a chunk at a time in a big change).
    findings: Findings,
}

/// The bytes of a change set's drafts (text and merge base) and blobs, by change index, taken
/// out of a set its caller gave away ([`super::apply_owned`]): each moves into its row rather
/// than being copied there. A big save kept as a draft is copied several times over on its way
/// into the store (Cozo encodes each value again), and this copy was one of ours.
#[derive(Default)]
pub(super) struct Payloads(HashMap<usize, (Vec<u8>, Vec<u8>)>);

impl Payloads {
    /// Take the bytes out of `set`'s drafts and blobs, which are left empty: only the rows
    /// built from `set` with these payloads may be written.
    pub(super) fn take(set: &mut ChangeSet) -> Payloads {
        let mut taken = HashMap::new();
        for (ci, c) in set.changes.iter_mut().enumerate() {
            match c {
                Change::PutDraft(d) => {
                    taken.insert(ci, (std::mem::take(&mut d.bytes), std::mem::take(&mut d.base)));
                }
                Change::PutBlob { content, .. } => {
                    taken.insert(ci, (std::mem::take(content), Vec::new()));
                }
                _ => {}
            }
        }
        Payloads(taken)
    }

    /// The bytes of change `ci`: taken if they were, else copied from `bytes` and `base`.
    fn of(&mut self, ci: usize, bytes: &[u8], base: &[u8]) -> (Vec<u8>, Vec<u8>) {
        self.0.remove(&ci).unwrap_or_else(|| (bytes.to_vec(), base.to_vec()))
    }
}

impl<'a> Rows<'a> {
    fn new(set: &'a ChangeSet, now: f64, chunks: Chunks, payloads: Payloads) -> Rows<'a> {
        let mut last_decl = HashMap::new();
        for (i, c) in set.changes.iter().enumerate() {
            if let Change::PutFile { decl: Some(d), .. } = c {
                last_decl.insert(d.name.as_str(), i);
            }
        }
        Rows {
            set,
            now,
            out: Batch::default(),
            form_puts: Vec::new(),
            next_version: BTreeMap::new(),
            commit: None,
            chunks,
            applied: Applied::default(),
            touched: Vec::new(),
            versioned: Vec::new(),
            deleted: Vec::new(),
            deleted_files: Vec::new(),
            new_purity: HashMap::new(),
            written: Vec::new(),
            old_sigs: HashMap::new(),
            decls_put: Vec::new(),
            last_decl,
            payloads,
            findings: Findings::default(),
        }
    }

    /// The rows of change `c`, the `ci`th of the set.
    fn put_change(
        &mut self,
        store: &Store,
        stored: &StoredBefore,
        ci: usize,
        c: &'a Change,
    ) -> Result<()> {
        let now = self.now;
        let out = &mut self.out;
        match c {
            Change::PutFile { file, forms, decl } => {
                self.put_forms(stored, file, forms)?;
                let text = file.error.is_none().then(|| assembled_text(file, forms)).flatten();
                put_file_text(&mut self.out, &file.path, text.map(|t| packed::pack(t.as_bytes())));
                if let Some(d) = decl.as_deref() {
                    if self.last_decl.get(d.name.as_str()) == Some(&ci) {
                        self.put_decl(file, d);
                    }
                }
            }
            Change::PutForms { file, forms, text, .. } => {
                self.put_forms(stored, file, forms)?;
                put_file_text(&mut self.out, &file.path, text.clone());
            }
            Change::DeleteFile { path } => {
                self.deleted_files.push(path.as_str().into());
                out.del("file", vec![path.as_str().into()]);
                out.del("file_text", vec![path.as_str().into()]);
                // The file's text is kept so `restore` can bring it back whole.
                if let Some(bytes) = crate::query::file_bytes(store, path)? {
                    out.put(
                        "file_tomb",
                        vec![
                            path.as_str().into(),
                            now.into(),
                            self.set.author.as_str().into(),
                            DataValue::Bytes(bytes),
                        ],
                    );
                }
            }
            Change::PutDraft(d) => {
                let (bytes, base) = self.payloads.of(ci, &d.bytes, &d.base);
                out.put(
                    "draft",
                    vec![
                        d.path.as_str().into(),
                        d.user.as_str().into(),
                        now.into(),
                        DataValue::Bytes(bytes),
                        d.error.as_str().into(),
                        (d.line as i64).into(),
                        (d.col as i64).into(),
                        DataValue::Bytes(base),
                    ],
                )
            }
            Change::DropDraft { path } => out.del("draft", vec![path.as_str().into()]),
            Change::Read(_) => {}
            Change::SetPurity { rows } => {
                self.new_purity.extend(rows.iter().map(|(id, p)| (id.as_str(), p.as_str())))
            }
            Change::PutBlob { path, hash, content } => {
                let (content, _) = self.payloads.of(ci, content, &[]);
                out.put(
                    "blob",
                    vec![path.as_str().into(), hash.as_str().into(), DataValue::Bytes(content)],
                )
            }
            Change::DeleteBlob { path } => out.del("blob", vec![path.as_str().into()]),
            Change::Bookkeeping { relation, rows, delete } => {
                if MODEL_RELATIONS.contains(&relation.as_str()) {
                    return Err(StoreError::Refused(format!(
                        "`{relation}` is written by the change itself, not as bookkeeping"
                    )));
                }
                for key in delete {
                    out.del(relation, key.clone());
                }
                for row in rows {
                    out.put(relation, row.clone());
                }
            }
        }
        Ok(())
    }

    /// The rows of a file's forms that differ from what is stored, and the file's own row.
    fn put_forms(
        &mut self,
        stored: &StoredBefore,
        file: &FileRow,
        forms: &'a [FormRow],
    ) -> Result<()> {
        let mut seen = HashSet::new();
        for f in forms {
            if !seen.insert(f.id.as_str()) {
                return Err(StoreError::Refused(format!(
                    "form id {} appears twice in {}",
                    f.id, file.path
                )));
            }
            let prior = (stored.old.get(f.id.as_str()).map(|o| &**o))
                .or_else(|| stored.elsewhere.get(f.id.as_str()));
            let version = match prior {
                None => {
                    self.applied.added += 1;
                    Some("add")
                }
                Some(o) if o.hash != f.hash || o.file != f.file => {
                    self.applied.changed += 1;
                    Some("edit")
                }
                Some(o)
                    if o.col != f.start.col as i64
                        || o.ns != f.ns
                        || o.parent != f.parent
                        || o.purity != f.purity
                        || o.rhash != f.rhash =>
                {
                    self.applied.moved += 1;
                    None
                }
                Some(o) if o.pos != f.pos || o.line != f.start.line as i64 => {
                    // Moved by whole lines or places only: what hangs off the form is
                    // stored relative to its first line, so only its place is written.
                    self.applied.moved += 1;
                    let place = unplace(&mut self.out, Some(o), f);
                    self.form_puts.push(FormPut { form: f, place, whole: false });
                    continue;
                }
                Some(_) => {
                    self.applied.unchanged += 1;
                    continue;
                }
            };
            self.put_form(prior, f);
            if let Some(op) = version {
                self.versioned.push((f, op));
            }
            self.written.push(f);
        }
        self.out.put("file", file_value(file));
        Ok(())
    }

    /// A form written whole: its row (with its call sites), its place and what hangs off it
    /// (calls, unresolved symbols, defines); what hung off the old form is dropped with the
    /// touched forms' (`drop_old_form_rows`).
    fn put_form(&mut self, prior: Option<&OldForm>, f: &'a FormRow) {
        let out = &mut self.out;
        let id: DataValue = f.id.as_str().into();
        if let Some(o) = prior {
            // Only stored forms have old calls, unresolved symbols, defines and
            // places to drop.
            self.touched.push(id.clone());
            self.old_sigs.insert(f.id.to_string(), o.sig);
        }
        let place = unplace(out, prior, f);
        self.form_puts.push(FormPut { form: f, place, whole: true });
    }

    /// The rows of forms written (see [`FormPut`]) and of their versions.
    fn emit(&self, puts: &[FormPut], versioned: &[(&FormRow, &str)], out: &mut Batch) {
        for p in puts {
            // The place row holds a top-level form's lengths of its texts (a form inside one
            // gets zeros, whatever the form held before): written with the form when it is
            // written whole or moves. A form moved by whole lines only kept its texts (its hash
            // covers `leading` and `source`), and a line shift in a big file moves hundreds of
            // them.
            if p.place || p.whole {
                out.put("form_at", form_at_value(p.form));
            }
            out.put("form", form_value(p.form));
            if p.whole {
                put_hanging(out, p.form);
            }
        }
        let (set, now) = (self.set, self.now);
        for (f, op) in versioned {
            let v = self.next_version.get(f.id.as_str()).copied().unwrap_or(1);
            out.put(
                "version",
                vec![
                    f.id.as_str().into(),
                    v.into(),
                    now.into(),
                    set.author.as_str().into(),
                    (if set.op.is_empty() { *op } else { set.op.as_str() }).into(),
                    f.file.as_str().into(),
                    f.ns.as_str().into(),
                    f.name.as_str().into(),
                    f.hash.as_str().into(),
                    // The current version's text is the form's own (see `keep_replaced_texts`).
                    "".into(),
                ],
            );
            if let Some(commit) = self.commit {
                out.put("version_commit", vec![f.id.as_str().into(), v.into(), commit.into()]);
            }
        }
    }
    /// A namespace declaration written: its `ns_decl`, `ns_refer` and `ns_require` rows.
    fn put_decl(&mut self, file: &FileRow, d: &NsDecl) {
        let out = &mut self.out;
        self.decls_put.push(d.name.as_str().into());
        self.applied.decls += 1;
        for var in d.refers.values() {
            out.put("ns_refer", vec![var.as_str().into(), d.name.as_str().into()]);
        }
        for lib in &d.requires {
            out.put("ns_require", vec![d.name.as_str().into(), lib.as_str().into()]);
        }
        out.put(
            "ns_decl",
            vec![
                d.name.as_str().into(),
                file.path.as_str().into(),
                d.doc.clone().unwrap_or_default().into(),
                DataValue::List(d.requires.iter().map(|r| r.as_str().into()).collect()),
                DataValue::Json(cozo::JsonData(serde_json::to_value(d).unwrap_or_default())),
            ],
        );
    }

    /// Old forms of the touched files that are not in the new state are deleted.
    fn drop_removed_forms(&mut self, stored: &StoredBefore) {
        let out = &mut self.out;
        for (id, o) in &stored.old {
            let id: &str = id;
            if !stored.new_ids.contains(id) {
                self.deleted.push((id.to_string(), o.file.to_string()));
                self.touched.push(id.into());
                self.old_sigs.insert(id.to_string(), o.sig);
                out.del("form", vec![id.into()]);
                out.del("form_at", vec![o.file.as_str().into(), o.pos.into(), id.into()]);
                self.applied.removed += 1;
            }
        }
        self.deleted.sort();
    }

    /// A version row for every form added, edited or removed (and its commit, if any).
    fn put_versions(
        &mut self,
        store: &Store,
        stamp: &'a Stamp,
        known: Option<&Written>,
    ) -> Result<()> {
        self.commit = stamp.commit.as_deref();
        let (set, now, out) = (self.set, self.now, &mut self.out);
        let versioned_ids: Vec<&str> = self
            .versioned
            .iter()
            .map(|(f, _)| f.id.as_str())
            .chain(self.deleted.iter().map(|(id, _)| id.as_str()))
            .collect();
        // Into an empty store, only an id the import wrote before has versions.
        let maybe_versioned: Vec<&str> = (versioned_ids.iter().copied())
            .filter(|id| known.is_none_or(|w| w.may_hold_id(id)))
            .collect();
        let next_version = next_versions(store, &maybe_versioned)?;
        // The rows of the written forms' versions are made with their forms' (`emit`).
        // Only a stored form had a current version (an added form's last one, if any, is a
        // delete, which keeps no text).
        let replaced: Vec<&str> = (self.versioned.iter())
            .filter(|(_, op)| *op != "add")
            .map(|(f, _)| f.id.as_str())
            .chain(self.deleted.iter().map(|(id, _)| id.as_str()))
            .collect();
        keep_replaced_texts(store, &replaced, out)?;
        let deleted_meta = load_deleted_meta(store, &self.deleted)?;
        for (id, file) in &self.deleted {
            let (ns, name) = deleted_meta.get(id.as_str()).cloned().unwrap_or_default();
            out.put(
                "version",
                vec![
                    id.as_str().into(),
                    next_version.get(id.as_str()).copied().unwrap_or(1).into(),
                    now.into(),
                    set.author.as_str().into(),
                    "delete".into(),
                    file.as_str().into(),
                    ns.into(),
                    name.into(),
                    "".into(),
                    "".into(),
                ],
            );
        }
        if let Some(commit) = &stamp.commit {
            for (id, _) in &self.deleted {
                let v = next_version.get(id.as_str()).copied().unwrap_or(1);
                out.put(
                    "version_commit",
                    vec![id.as_str().into(), v.into(), commit.as_str().into()],
                );
            }
        }
        self.applied.versions = versioned_ids.len();
        self.next_version = next_version;
        Ok(())
    }

    /// Drop what hangs off the touched old forms, read in one query: calls (the keys of their
    /// `callees`), unresolved symbols, defines and diagnostics. Returns the vars each old form
    /// defined.
    fn drop_old_form_rows(&mut self, store: &Store) -> Result<HashMap<String, Vec<String>>> {
        let mut old_defines: HashMap<String, Vec<String>> = HashMap::new();
        if self.touched.is_empty() {
            return Ok(old_defines);
        }
        let out = &mut self.out;
        let touched = std::mem::take(&mut self.touched);
        let old_rows = "ids[id] <- $ids
             ?[rel, a, b, c, d, e, f] := ids[a], *unresolved{from: a, sym: b}, rel = 'unresolved', c = 0, d = 0, e = 0, f = 0
             ?[rel, a, b, c, d, e, f] := ids[a], *defined_by{id: a, var: b}, rel = 'defined_by', c = 0, d = 0, e = 0, f = 0
             ?[rel, a, b, c, d, e, f] := ids[a], *form{id: a, callees}, b in callees, rel = 'calls', c = 0, d = 0, e = 0, f = 0
             ?[rel, a, b, c, d, e, f] := ids[a], *form{id: a, ns: f}, *diagnostic{ns: f, id: a, line: b, col: c, kind: d, message: e}, rel = 'diagnostic'";
        query_in_parts(store, old_rows, "ids", &touched, DataValue::clone, |rows| {
            for r in rows {
                let [rel, a, b, c, d, e, f]: [DataValue; 7] =
                    r.try_into().map_err(|_| StoreError::Query {
                        script: "change::write reading the old forms' rows".into(),
                        message: "not seven columns".into(),
                    })?;
                match rel.get_str().unwrap_or_default() {
                    "unresolved" => out.del("unresolved", vec![a, b]),
                    "calls" => out.del("calls", vec![b, a]),
                    "diagnostic" => out.del("diagnostic", vec![f, a, b, c, d, e]),
                    _ => {
                        let (id, var) =
                            (a.get_str().unwrap_or_default(), b.get_str().unwrap_or_default());
                        old_defines.entry(id.to_string()).or_default().push(var.to_string());
                        out.del("defines", vec![b.clone(), a.clone()]);
                        out.del("defined_by", vec![a, b]);
                    }
                }
            }
            Ok(())
        })?;
        Ok(old_defines)
    }

    /// The declarations of deleted files go, and so does the one a rewritten file had (its
    /// `ns` form may now name another namespace, or be gone; one it still declares is put
    /// again); those written again drop what they referred and required.
    fn drop_old_decls(&mut self, store: &Store) -> Result<()> {
        let rewritten: Vec<DataValue> = self
            .set
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::PutFile { file, .. } => Some(file.path.as_str().into()),
                _ => None,
            })
            .collect();
        if self.deleted_files.is_empty() && self.decls_put.is_empty() && rewritten.is_empty() {
            return Ok(());
        }
        let p = params([
            ("paths", column(std::mem::take(&mut self.deleted_files))),
            ("nss", column(std::mem::take(&mut self.decls_put))),
            ("rewritten", column(rewritten)),
        ]);
        let decls = store.query(
            "paths[p] <- $paths
             nss[n] <- $nss
             rewritten[p] <- $rewritten
             ?[ns, deleted, decl, requires] := paths[file], *ns_decl{ns, file, decl, requires}, deleted = true
             ?[ns, deleted, decl, requires] := rewritten[file], *file{path: file, ns}, ns != '', *ns_decl{ns, file, decl, requires}, deleted = true
             ?[ns, deleted, decl, requires] := nss[ns], *ns_decl{ns, decl, requires}, deleted = false",
            p,
        )?;
        let out = &mut self.out;
        for r in decls.rows {
            let ns = r[0].clone();
            for lib in r[3].get_slice().unwrap_or_default() {
                out.del("ns_require", vec![ns.clone(), lib.clone()]);
            }
            if let DataValue::Json(decl) = &r[2] {
                let refers = decl.0.get("refers").and_then(|m| m.as_object());
                for var in refers.into_iter().flat_map(|m| m.values()).filter_map(|v| v.as_str()) {
                    out.del("ns_refer", vec![var.into(), ns.clone()]);
                }
            }
            if r[1].get_bool() == Some(true) {
                out.del("ns_decl", vec![ns]);
                self.applied.decls += 1;
            }
        }
        Ok(())
    }

    /// Stored forms whose purity class changed (`Change::SetPurity`) are written again with it.
    fn put_purity(&mut self, store: &Store) -> Result<()> {
        if self.new_purity.is_empty() {
            return Ok(());
        }
        let ids = column(self.new_purity.keys().map(|id| (*id).into()));
        let rows = store.query(
            &format!("ids[id] <- $ids ?[{FORM_COLS}] := ids[id], *form{{{FORM_COLS}}}"),
            params([("ids", ids)]),
        )?;
        let purity_col = FORM_COLS.split(", ").position(|c| c == "purity").expect("purity column");
        for mut r in rows.rows {
            if let Some(p) = r[0].get_str().and_then(|id| self.new_purity.get(id)) {
                r[purity_col] = (*p).into();
                self.out.put("form", r);
            }
        }
        Ok(())
    }

    /// Write a big change in one transaction a chunk of forms at a time, so their rows as Cozo
    /// values (a few kilobytes a form) are never all made at once: every delete first, then
    /// the forms' rows, then the rest of the batch (as `import_relations` orders them: a row
    /// of the rest replaces a form's where both put one key, as it follows it there).
    fn write_in_chunks(&mut self, store: &Store) -> Result<()> {
        // Nothing reads the store while the transaction is open: Cozo's SQLite storage makes
        // every read wait for the writer. So the relations' columns are read first.
        for rel in FORM_RELATIONS.iter().chain(&["diagnostic"]) {
            store.columns(rel)?;
        }
        let rest = std::mem::take(&mut self.out).into_named_rows(store)?;
        let tx = store.transaction()?;
        let (deletes, puts): (Vec<_>, Vec<_>) =
            rest.into_iter().partition(|(rel, _)| rel.starts_with('-'));
        for (rel, rows) in deletes {
            write_rows(store, &tx, &rel, rows, self.chunks.rows)?;
        }
        let size = self.chunks.size.max(1);
        let chunks = self.form_puts.len().div_ceil(size).max(self.versioned.len().div_ceil(size));
        for i in 0..chunks {
            let range = |len: usize| (i * size).min(len)..((i + 1) * size).min(len);
            let mut chunk = Batch::default();
            self.emit(
                &self.form_puts[range(self.form_puts.len())],
                &self.versioned[range(self.versioned.len())],
                &mut chunk,
            );
            for (rel, rows) in chunk.into_named_rows(store)? {
                write_rows(store, &tx, &rel, rows, self.chunks.rows)?;
            }
        }
        // The findings: made rows a chunk at a time, as the forms' (only `diagnose` puts them).
        let (found, per_chunk) = (self.findings.len(), self.chunks.rows.max(1));
        for start in (0..found).step_by(per_chunk) {
            let mut chunk = Batch::default();
            self.findings.emit(start..found.min(start + per_chunk), &mut chunk);
            for (rel, rows) in chunk.into_named_rows(store)? {
                write_rows(store, &tx, &rel, rows, self.chunks.rows)?;
            }
        }
        for (rel, rows) in puts {
            write_rows(store, &tx, &rel, rows, self.chunks.rows)?;
        }
        tx.commit()
    }

    /// Write the batch in one transaction, moving the store's generation on.
    fn write(mut self, store: &Store, generation: u64) -> Result<Applied> {
        let applied = self.applied;
        let t = std::time::Instant::now();
        let n = self.out.len();
        // Every write moves the store's generation on, so a reader in another thread or process
        // (a mount's cache) can tell cheaply that something changed.
        self.out.put("meta", vec!["generation".into(), (generation + 1).to_string().into()]);
        let n = n + self.form_puts.len() + self.versioned.len() + self.findings.len();
        let written = if self.form_puts.len() + self.versioned.len() <= self.chunks.above {
            let mut batch = Batch::default();
            self.emit(&self.form_puts, &self.versioned, &mut batch);
            self.findings.emit(0..self.findings.len(), &mut batch);
            batch.append(std::mem::take(&mut self.out));
            crate::trace::count_script();
            let rows = batch.into_named_rows(store)?;
            store.db.import_relations(rows).map_err(|e| e.to_string())
        } else {
            self.write_in_chunks(store).map_err(|e| e.to_string())
        };
        written.map_err(|e| StoreError::Query {
            script: "change::write's transaction".into(),
            message: format!("writing the change failed, nothing was written: {e}"),
        })?;
        // The files' namespaces this handle holds follow the write.
        let files: Vec<(&str, &str)> = self
            .set
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::PutFile { file, .. } | Change::PutForms { file, .. } => {
                    Some((file.path.as_str(), file.ns.as_str()))
                }
                Change::DeleteFile { path } => Some((path.as_str(), "")),
                _ => None,
            })
            .collect();
        store.follow_file_nss(generation, &files);
        if crate::trace::tracing() {
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            tracing::info!(target: crate::trace::TARGET, "{ms:>8.1} ms  one transaction, {n} rows");
        }
        Ok(applied)
    }
}

/// The relations [`Rows::emit`] writes.
const FORM_RELATIONS: [&str; 8] = [
    "form",
    "form_at",
    "calls",
    "unresolved",
    "defines",
    "defined_by",
    "version",
    "version_commit",
];

/// Put (`rel`) or delete (`-rel`) rows inside transaction `tx`, whose columns are read already
/// (see [`Rows::write_in_chunks`]).
fn write_rows(
    store: &Store,
    tx: &Transaction,
    rel: &str,
    rows: cozo::NamedRows,
    per_script: usize,
) -> Result<()> {
    let (name, op) = match rel.strip_prefix('-') {
        Some(name) => (name, ":rm"),
        None => (rel, ":put"),
    };
    let columns = store.columns(name)?;
    let keys: Vec<&str> =
        columns.iter().filter(|(_, is_key)| *is_key).map(|(c, _)| c.as_str()).collect();
    let values: Vec<&str> =
        columns.iter().filter(|(_, is_key)| !*is_key).map(|(c, _)| c.as_str()).collect();
    let head = rows.headers.join(", ");
    let spec = if op == ":rm" || values.is_empty() {
        keys.join(", ")
    } else {
        format!("{} => {}", keys.join(", "), values.join(", "))
    };
    let script = format!("?[{head}] <- $rows {op} {name} {{{spec}}}");
    // `per_script` rows at a time (see [`Chunks::rows`]).
    let mut rows = rows.rows.into_iter().peekable();
    while rows.peek().is_some() {
        let part: Vec<DataValue> =
            rows.by_ref().take(per_script.max(1)).map(DataValue::List).collect();
        crate::trace::count_script();
        tx.run(&script, params([("rows", DataValue::List(part))]))?;
    }
    Ok(())
}

/// A form written: its `form` row, its place when it moved (`place`) and, written `whole`,
/// what hangs off it and its texts' lengths beside its place.
struct FormPut<'a> {
    form: &'a FormRow,
    place: bool,
    whole: bool,
}

/// Drop the row that places form `f` (`form_at`) where `old` had it elsewhere; whether `f`
/// needs it put: a form that keeps its file and position keeps it as it is (`form_at` is
/// written again with a form written whole, for its texts' lengths).
fn unplace(out: &mut Batch, old: Option<&OldForm>, f: &FormRow) -> bool {
    if let Some(o) = old {
        if (o.file.as_str(), o.pos) == (f.file.as_str(), f.pos) {
            return false;
        }
        let id: DataValue = f.id.as_str().into();
        out.del("form_at", vec![o.file.as_str().into(), o.pos.into(), id]);
    }
    true
}

/// A parsed file's whole text from its new state: every top-level form's trivia and source in
/// place order, then the trailing trivia; `None` past [`FILE_TEXT_MAX`].
fn assembled_text(file: &FileRow, forms: &[FormRow]) -> Option<String> {
    let mut top: Vec<&FormRow> = forms.iter().filter(|f| f.parent.is_empty()).collect();
    let len =
        top.iter().map(|f| f.leading.len() + f.source.len()).sum::<usize>() + file.trailing.len();
    if len > FILE_TEXT_MAX {
        return None;
    }
    top.sort_unstable_by_key(|f| f.pos);
    let mut text = String::with_capacity(len);
    for f in top {
        text.push_str(&f.leading);
        text.push_str(&f.source);
    }
    text.push_str(&file.trailing);
    Some(text)
}

/// `path`'s `file_text` row: its text, packed, or gone (`None`: not kept).
fn put_file_text(out: &mut Batch, path: &str, packed: Option<Vec<u8>>) {
    match packed {
        Some(p) => out.put("file_text", vec![path.into(), DataValue::Bytes(p)]),
        None => out.del("file_text", vec![path.into()]),
    }
}

/// Form `f`'s `form_at` row: its place, and a top-level form's lengths of its texts.
fn form_at_value(f: &FormRow) -> Vec<DataValue> {
    let chars = |s: &str| i64::try_from(s.chars().count()).unwrap_or(i64::MAX);
    let (leading, source) =
        if f.parent.is_empty() { (chars(&f.leading), chars(&f.source)) } else { (0, 0) };
    vec![f.file.as_str().into(), f.pos.into(), f.id.as_str().into(), leading.into(), source.into()]
}

/// What hangs off a form written whole: its calls, unresolved symbols and defines.
fn put_hanging(out: &mut Batch, f: &FormRow) {
    let id: DataValue = f.id.as_str().into();
    // Places of what hangs off the form are stored relative to its first line.
    let first = i64::from(f.start.line);
    for c in &f.calls {
        let kind = if c.kind == crate::resolve::RefKind::Call { "call" } else { "value" };
        out.put(
            "calls",
            vec![
                c.to.as_str().into(),
                id.clone(),
                kind.into(),
                (i64::from(c.pos.line) - first).into(),
                (c.pos.col as i64).into(),
                (c.count as i64).into(),
            ],
        );
    }
    for (sym, pos) in &f.unresolved {
        out.put(
            "unresolved",
            vec![
                id.clone(),
                sym.as_str().into(),
                (i64::from(pos.line) - first).into(),
                (pos.col as i64).into(),
            ],
        );
    }
    for (var, line) in &f.defines {
        out.put(
            "defines",
            vec![var.as_str().into(), id.clone(), (i64::from(*line) - first).into()],
        );
        out.put("defined_by", vec![id.clone(), var.as_str().into()]);
    }
}

/// The versions of forms `$ids` that keep no text, with their form's text. `kept` is bound and
/// then compared: a constant in a stored atom's non-key column (`source: ''`) makes Cozo read
/// the whole relation and join it in memory (every version of a 1 M-line store, 0.5 s an edit).
const REPLACED_TEXTS: &str = "ids[id] <- $ids
     ?[id, v, at, author, op, file, ns, name, hash, text] := ids[id],
         *version{id, v, at, author, op, file, ns, name, hash, source: kept}, kept == '',
         op != 'delete', *form{id, leading, source}, text = concat(leading, source)";

/// The current version of a live form keeps no text of its own: it is the form's `leading` +
/// `source` (each text stored once). When the form gets a new version or is deleted, the
/// version it had takes its text from the form, read before this change is written.
fn keep_replaced_texts(store: &Store, ids: &[&str], out: &mut Batch) -> Result<()> {
    query_in_parts(
        store,
        REPLACED_TEXTS,
        "ids",
        ids,
        |id| (*id).into(),
        |rows| {
            for row in rows {
                out.put("version", row);
            }
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replaced form's versions are read by their key (`stored_prefix_join`), not by reading
    /// every version of the store and joining in memory (`stored_mat_join`).
    #[test]
    fn replaced_texts_are_read_by_key() {
        let store = Store::open_in_memory().unwrap();
        let steps =
            store.plan_steps(REPLACED_TEXTS, params([("ids", column(["x".into()]))])).unwrap();
        let ops: Vec<String> = steps.into_iter().map(|(op, _)| op).collect();
        assert!(!ops.iter().any(|o| o == "stored_mat_join"), "{ops:?}");
        assert!(ops.iter().any(|o| o == "stored_prefix_join"), "{ops:?}");
    }
}
