//! The one write path: a [`ChangeSet`] applied in one transaction, with a version row for every
//! form whose text changed (added, edited or deleted).
//!
//! Callers describe the new state of whole files (their forms with ids already assigned by
//! `identity`); `apply` compares with what is stored and writes only the difference. Nothing is
//! written if any step fails.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use cozo::DataValue;

use crate::forms::Call;
use crate::nsdecl::NsDecl;
use crate::sites::Site;
use crate::store::{column, int_at, params, str_at, Result, Store, StoreError};
use crate::syntax::Pos;

/// A form as stored.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FormRow {
    pub id: String,
    pub file: String,
    pub ns: String,
    pub pos: i64,
    /// Id of the enclosing `(comment ...)` block, or empty for top-level forms.
    pub parent: String,
    pub kind: String,
    pub head: String,
    pub name: String,
    /// `ns/name` when the form defines a var, else empty.
    pub fqn: String,
    pub dispatch: String,
    pub doc: String,
    pub arglists: Vec<String>,
    pub leading: String,
    pub source: String,
    pub canonical: String,
    pub start: Pos,
    pub end: Pos,
    pub hash: String,
    pub private: bool,
    pub dynamic: bool,
    pub deprecated: bool,
    pub test: bool,
    pub export: bool,
    pub macro_: bool,
    pub platforms: Vec<String>,
    pub purity: String,
    /// Hash of what resolution derived (canonical text, calls, unresolved symbols, defines):
    /// a form whose text is unchanged is still rewritten when this changes.
    pub rhash: String,
    #[serde(skip)]
    pub calls: Vec<Call>,
    #[serde(skip)]
    pub unresolved: Vec<(String, Pos)>,
    /// Fully-qualified vars this form defines, with their lines.
    #[serde(skip)]
    pub defines: Vec<(String, u32)>,
    /// Its calls as the diagnostics check them (top-level forms only).
    #[serde(skip)]
    pub sites: Vec<Site>,
}

/// A file's own row: what is not in its forms.
#[derive(Clone, Debug, PartialEq)]
pub struct FileRow {
    pub path: String,
    pub lang: String,
    pub ns: String,
    pub hash: String,
    pub trailing: String,
    /// Set when the file did not parse; its text is then kept whole in `raw`.
    pub error: Option<crate::syntax::SyntaxError>,
    pub raw: Vec<u8>,
}

#[derive(Clone, Debug)]
pub enum Change {
    /// The new state of a Clojure file: its row, every form, and its ns declaration.
    PutFile {
        file: FileRow,
        forms: Vec<FormRow>,
        decl: Option<Box<NsDecl>>,
    },
    /// New versions of some top-level forms of a stored file, in place: its other forms stay as
    /// they are ([`crate::import::form_in_place`]). Forms that only move may carry nothing but
    /// their `form` row, so `apply` refuses the change ([`StoreError::Moved`]) unless the store
    /// is still at `generation`, the one they were read at.
    PutForms {
        file: FileRow,
        forms: Vec<FormRow>,
        generation: u64,
    },
    /// New purity classes for stored forms (after a callee's purity changed elsewhere).
    SetPurity {
        rows: Vec<(String, String)>,
    },
    /// Remove a file and all its forms.
    DeleteFile {
        path: String,
    },
    /// A non-Clojure file, kept as it is.
    PutBlob {
        path: String,
        hash: String,
        content: Vec<u8>,
    },
    DeleteBlob {
        path: String,
    },
    /// Keep a save that could not be applied, exactly as written.
    PutDraft(Draft),
    /// Drop a path's draft (a good save replaced it, or it was discarded).
    DropDraft {
        path: String,
    },
    /// What the change set was computed from: the stored forms of the files it replaces, read
    /// at a generation of the store. `apply` uses them instead of reading the same rows again
    /// when the store is still at that generation (a save of an 8,000-line file reads them in
    /// about 5 ms); otherwise it reads them afresh. Writes nothing.
    Read(Box<StoredForms>),
    /// Rows of a relation outside the form model, written in the same transaction as the rest
    /// of the set: bookkeeping that must hold exactly when the change does (the sync's record
    /// of what the working directory and the store last agreed on). `rows` are whole rows in
    /// schema order; `delete` are keys.
    Bookkeeping {
        relation: String,
        rows: Vec<Vec<DataValue>>,
        delete: Vec<Vec<DataValue>>,
    },
}

/// Relations only `apply` itself writes: a [`Change::Bookkeeping`] naming one is refused.
const MODEL_RELATIONS: &[&str] = &[
    "meta",
    "file",
    "blob",
    "form",
    "form_at",
    "ns_form",
    "defines",
    "defined_by",
    "calls",
    "unresolved",
    "call_site",
    "diagnostic",
    "version",
    "version_commit",
    "purity_rule",
    "ns_decl",
    "ns_refer",
    "ns_require",
    "search_text",
    "draft",
    "file_tomb",
];

/// A save kept as written because it could not be applied: its bytes, who wrote them and why
/// they were refused.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Draft {
    pub path: String,
    pub user: String,
    #[serde(skip)]
    pub bytes: Vec<u8>,
    pub error: String,
    pub line: u32,
    pub col: u32,
    /// The text the writer had read before writing (for merging later); empty if unknown.
    #[serde(skip)]
    pub base: Vec<u8>,
}

/// The stored forms of some files as `apply` compares with them, read at one generation.
#[derive(Clone, Debug)]
pub struct StoredForms {
    pub(crate) generation: u64,
    pub(crate) paths: HashSet<String>,
    pub(crate) forms: HashMap<String, OldForm>,
}

/// Changes applied together, attributed to one author.
#[derive(Clone, Debug)]
pub struct ChangeSet {
    pub author: String,
    /// What the change was (`import`, `save`, `replace_form`, …), recorded in history.
    pub op: String,
    pub changes: Vec<Change>,
}

/// What applying a change set did, counted in forms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Applied {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    pub unchanged: usize,
    /// Forms whose text is the same but whose place (line, position) moved.
    pub moved: usize,
    pub versions: usize,
    /// `ns` declarations written or removed: when none, the require graph is as it was.
    pub decls: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct OldForm {
    pub(crate) rhash: String,
    pub(crate) ns: String,
    pub(crate) hash: String,
    pub(crate) pos: i64,
    pub(crate) line: i64,
    pub(crate) col: i64,
    pub(crate) parent: String,
    pub(crate) purity: String,
    pub(crate) file: String,
    /// The vars it calls (the keys of its `calls` rows, with its id).
    pub(crate) callees: Vec<DataValue>,
    /// What its callers' checks depend on: [arglists, macro, kind, platforms, purity].
    pub(crate) sig: DataValue,
}

/// Columns of `form` an [`OldForm`] is read from, in [`OldForm::from_row`]'s order.
pub(crate) const OLD_FORM_COLS: &str =
    "id, hash, pos, line, col, parent, purity, file, ns, rhash, callees, arglists, macro, kind, platforms";
/// The same less `file` and `pos`, for a `*form{...}` atom joined to `*form_at{file, pos, id}`:
/// naming them in both atoms makes Cozo scan `form` instead of looking each id up.
pub(crate) const OLD_FORM_ATOM: &str =
    "id, hash, line, col, parent, purity, ns, rhash, callees, arglists, macro, kind, platforms";

impl OldForm {
    /// From a row selected with [`OLD_FORM_COLS`] (its id first).
    pub(crate) fn from_row(r: &[DataValue]) -> OldForm {
        let callees = match &r[10] {
            DataValue::List(l) => l.clone(),
            _ => Vec::new(),
        };
        OldForm {
            hash: str_at(r, 1),
            pos: int_at(r, 2),
            line: int_at(r, 3),
            col: int_at(r, 4),
            parent: str_at(r, 5),
            purity: str_at(r, 6),
            file: str_at(r, 7),
            ns: str_at(r, 8),
            rhash: str_at(r, 9),
            callees,
            sig: DataValue::List(vec![
                r[11].clone(),
                r[12].clone(),
                r[13].clone(),
                r[14].clone(),
                r[6].clone(),
            ]),
        }
    }
}

/// When a change set's versions are recorded, and the git commit they come from, if any.
#[derive(Clone, Debug, Default)]
pub struct Stamp {
    /// Seconds since the Unix epoch; `None` is now.
    pub at: Option<f64>,
    /// The commit whose change this is (history imported from git): each version gets a
    /// `version_commit` row naming it.
    pub commit: Option<String>,
}

/// Apply a change set in one transaction, its versions recorded now.
pub fn apply(store: &Store, set: &ChangeSet) -> Result<Applied> {
    apply_at(store, set, &Stamp::default())
}

/// [`apply`] with its versions recorded at another time, or as a git commit's.
pub fn apply_at(store: &Store, set: &ChangeSet, stamp: &Stamp) -> Result<Applied> {
    let applied = apply_locked(store, set, stamp)?;
    store.committed();
    Ok(applied)
}

fn apply_locked(store: &Store, set: &ChangeSet, stamp: &Stamp) -> Result<Applied> {
    // One writer at a time: what is read below must still hold when the batch is written.
    let _writer = store.writer()?;
    let mut trace = crate::trace::Timings::traced("apply");
    let mut applied = Applied::default();
    let put_paths: Vec<&str> = set
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::PutFile { file, .. } => Some(file.path.as_str()),
            Change::DeleteFile { path } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    // Read under the writer lock: the generation tells whether what the change was computed
    // from still holds, and the new generation follows it.
    let generation = crate::query::generation(store)?;
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
    let old = if !snapshots.is_empty() && put_paths.iter().all(|p| covered(p)) {
        snapshots
            .iter()
            .flat_map(|s| &s.forms)
            .filter(|(_, o)| put_paths.contains(&o.file.as_str()))
            .map(|(id, o)| (id.clone(), o.clone()))
            .collect()
    } else {
        load_old_forms(store, &put_paths)?
    };
    let mut new_ids: HashSet<&str> = HashSet::new();
    for c in &set.changes {
        if let Change::PutFile { forms, .. } | Change::PutForms { forms, .. } = c {
            new_ids.extend(forms.iter().map(|f| f.id.as_str()));
        }
    }
    // Forms that moved in from another file keep their id; they count as changed, not new.
    let moved_in: Vec<&str> = new_ids.iter().copied().filter(|id| !old.contains_key(*id)).collect();
    let elsewhere = load_forms_by_id(store, &moved_in)?;
    trace.lap("stored forms");

    let now = stamp.at.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    });
    // Every put goes straight into one batch as it is computed; deletes are added once what
    // they remove has been read (under the store's write lock, so nothing changes between the
    // reads and the write). The batch goes to Cozo's `import_relations` as one transaction,
    // which writes rows directly instead of planning a query per relation. Its map is ordered by
    // relation name, and `-name` (delete) sorts before every `name` (put), so deletes land first.
    let mut out = Batch::default();
    let mut touched: Vec<DataValue> = Vec::new();
    let mut versioned: Vec<(&FormRow, &'static str)> = Vec::new();
    let mut deleted: Vec<(String, String)> = Vec::new();
    let mut deleted_files: Vec<DataValue> = Vec::new();
    let mut purity_rows: Vec<(String, String)> = Vec::new();
    let mut written: Vec<&FormRow> = Vec::new();
    // What the callers' checks depend on, per old form written or removed (`sig`).
    let mut old_sigs: HashMap<String, DataValue> = HashMap::new();
    // Namespaces whose declaration is written: their old `ns_refer` rows are dropped.
    let mut decls_put: Vec<DataValue> = Vec::new();

    for c in &set.changes {
        match c {
            Change::PutFile { file, forms, .. } | Change::PutForms { file, forms, .. } => {
                let decl = match c {
                    Change::PutFile { decl, .. } => decl.as_deref(),
                    _ => None,
                };
                let mut seen = HashSet::new();
                for f in forms {
                    if !seen.insert(f.id.as_str()) {
                        return Err(StoreError::Refused(format!(
                            "form id {} appears twice in {}",
                            f.id, file.path
                        )));
                    }
                    let prior = old.get(f.id.as_str()).or_else(|| elsewhere.get(f.id.as_str()));
                    let (write, version) = match prior {
                        None => {
                            applied.added += 1;
                            (true, Some("add"))
                        }
                        Some(o) if o.hash != f.hash || o.file != f.file => {
                            applied.changed += 1;
                            (true, Some("edit"))
                        }
                        Some(o)
                            if o.col != f.start.col as i64
                                || o.ns != f.ns
                                || o.parent != f.parent
                                || o.purity != f.purity
                                || o.rhash != f.rhash =>
                        {
                            applied.moved += 1;
                            (true, None)
                        }
                        Some(o) if o.pos != f.pos || o.line != f.start.line as i64 => {
                            // Moved by whole lines or places only: what hangs off the form is
                            // stored relative to its first line, so only its place is written.
                            applied.moved += 1;
                            place(&mut out, Some(o), f);
                            out.put("form", form_value(f));
                            continue;
                        }
                        Some(_) => {
                            applied.unchanged += 1;
                            (false, None)
                        }
                    };
                    if !write {
                        continue;
                    }
                    let id: DataValue = f.id.as_str().into();
                    // Places of what hangs off the form are stored relative to its first line.
                    let first = i64::from(f.start.line);
                    if let Some(o) = prior {
                        // Only stored forms have old calls, unresolved symbols, defines and
                        // places to drop.
                        touched.push(id.clone());
                        for to in &o.callees {
                            out.del("calls", vec![to.clone(), id.clone()]);
                        }
                        old_sigs.insert(f.id.clone(), o.sig.clone());
                    }
                    place(&mut out, prior, f);
                    out.put("form", form_value(f));
                    for c in &f.calls {
                        let kind =
                            if c.kind == crate::resolve::RefKind::Call { "call" } else { "value" };
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
                    for site in &f.sites {
                        out.put("call_site", site_value(&id, site, first));
                    }
                    for (var, line) in &f.defines {
                        out.put(
                            "defines",
                            vec![
                                var.as_str().into(),
                                id.clone(),
                                (i64::from(*line) - first).into(),
                            ],
                        );
                        out.put("defined_by", vec![id.clone(), var.as_str().into()]);
                    }
                    if let Some(op) = version {
                        versioned.push((f, op));
                    }
                    written.push(f);
                }
                out.put("file", file_value(file));
                if let Some(d) = decl {
                    decls_put.push(d.name.as_str().into());
                    applied.decls += 1;
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
                            DataValue::Json(cozo::JsonData(
                                serde_json::to_value(d).unwrap_or_default(),
                            )),
                        ],
                    );
                }
            }
            Change::DeleteFile { path } => {
                deleted_files.push(path.as_str().into());
                out.del("file", vec![path.as_str().into()]);
                // The file's text is kept so `restore` can bring it back whole.
                if let Some(bytes) = crate::query::file_bytes(store, path)? {
                    out.put(
                        "file_tomb",
                        vec![
                            path.as_str().into(),
                            now.into(),
                            set.author.as_str().into(),
                            DataValue::Bytes(bytes),
                        ],
                    );
                }
            }
            Change::PutDraft(d) => out.put(
                "draft",
                vec![
                    d.path.as_str().into(),
                    d.user.as_str().into(),
                    now.into(),
                    DataValue::Bytes(d.bytes.clone()),
                    d.error.as_str().into(),
                    (d.line as i64).into(),
                    (d.col as i64).into(),
                    DataValue::Bytes(d.base.clone()),
                ],
            ),
            Change::DropDraft { path } => out.del("draft", vec![path.as_str().into()]),
            Change::Read(_) => {}
            Change::SetPurity { rows } => purity_rows.extend(rows.iter().cloned()),
            Change::PutBlob { path, hash, content } => out.put(
                "blob",
                vec![path.as_str().into(), hash.as_str().into(), DataValue::Bytes(content.clone())],
            ),
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
    }
    // Old forms of the touched files that are not in the new state are deleted.
    for (id, o) in &old {
        if !new_ids.contains(id.as_str()) {
            deleted.push((id.clone(), o.file.clone()));
            touched.push(id.as_str().into());
            for to in &o.callees {
                out.del("calls", vec![to.clone(), id.as_str().into()]);
            }
            old_sigs.insert(id.clone(), o.sig.clone());
            out.del("form", vec![id.as_str().into()]);
            out.del("form_at", vec![o.file.as_str().into(), o.pos.into(), id.as_str().into()]);
            out.del("ns_form", vec![o.ns.as_str().into(), o.pos.into(), id.as_str().into()]);
            applied.removed += 1;
        }
    }
    deleted.sort();

    let versioned_ids: Vec<&str> = versioned
        .iter()
        .map(|(f, _)| f.id.as_str())
        .chain(deleted.iter().map(|(id, _)| id.as_str()))
        .collect();
    trace.lap("rows");
    let next_version = next_versions(store, &versioned_ids)?;
    for (f, op) in &versioned {
        out.put(
            "version",
            vec![
                f.id.as_str().into(),
                next_version.get(f.id.as_str()).copied().unwrap_or(1).into(),
                now.into(),
                set.author.as_str().into(),
                (if set.op.is_empty() { *op } else { set.op.as_str() }).into(),
                f.file.as_str().into(),
                f.ns.as_str().into(),
                f.name.as_str().into(),
                f.hash.as_str().into(),
                format!("{}{}", f.leading, f.source).into(),
            ],
        );
    }
    let deleted_meta = load_deleted_meta(store, &deleted)?;
    for (id, file) in &deleted {
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
        for id in &versioned_ids {
            let v = next_version.get(*id).copied().unwrap_or(1);
            out.put("version_commit", vec![(*id).into(), v.into(), commit.as_str().into()]);
        }
    }
    applied.versions = versioned_ids.len();

    // What else hangs off the old forms, in one read: (relation, key…).
    let mut old_defines: HashMap<String, Vec<String>> = HashMap::new();
    trace.lap("versions");
    if !touched.is_empty() {
        let rows = store.query(
            "ids[id] <- $ids
             ?[rel, a, b, c, d, e, f] := ids[a], *unresolved{from: a, sym: b}, rel = 'unresolved', c = 0, d = 0, e = 0, f = 0
             ?[rel, a, b, c, d, e, f] := ids[a], *call_site{from: a, line: b, col: c}, rel = 'call_site', d = 0, e = 0, f = 0
             ?[rel, a, b, c, d, e, f] := ids[a], *defined_by{id: a, var: b}, rel = 'defined_by', c = 0, d = 0, e = 0, f = 0
             ?[rel, a, b, c, d, e, f] := ids[a], *form{id: a, ns: f}, *diagnostic{ns: f, id: a, line: b, col: c, kind: d, message: e}, rel = 'diagnostic'",

            params([("ids", column(touched))]),
        )?;
        for r in rows.rows {
            let [rel, a, b, c, d, e, f]: [DataValue; 7] = r.try_into().map_err(|_| {
                StoreError::Query("reading the old forms' rows: not seven columns".into())
            })?;
            match rel.get_str().unwrap_or_default() {
                "unresolved" => out.del("unresolved", vec![a, b]),
                "call_site" => out.del("call_site", vec![a, b, c]),
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
    }
    let rewritten: Vec<DataValue> = set
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::PutFile { file, .. } => Some(file.path.as_str().into()),
            _ => None,
        })
        .collect();
    if !deleted_files.is_empty() || !decls_put.is_empty() || !rewritten.is_empty() {
        // The declarations of deleted files go, and so does the one a rewritten file had (its
        // `ns` form may now name another namespace, or be gone; one it still declares is put
        // again); those written again drop what they referred and required.
        let p = params([
            ("paths", column(deleted_files)),
            ("nss", column(decls_put)),
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
                applied.decls += 1;
            }
        }
    }
    let new_purity: HashMap<&str, &str> =
        purity_rows.iter().map(|(id, p)| (id.as_str(), p.as_str())).collect();
    if !new_purity.is_empty() {
        let ids = column(new_purity.keys().map(|id| (*id).into()));
        let rows = store.query(
            &format!("ids[id] <- $ids ?[{FORM_COLS}] := ids[id], *form{{{FORM_COLS}}}"),
            params([("ids", ids)]),
        )?;
        let purity_col = FORM_COLS.split(", ").position(|c| c == "purity").expect("purity column");
        for mut r in rows.rows {
            if let Some(p) = r[0].get_str().and_then(|id| new_purity.get(id)) {
                r[purity_col] = (*p).into();
                out.put("form", r);
            }
        }
    }
    trace.lap("old rows");
    diagnose(
        store,
        &mut out,
        &Diagnose {
            written: &written,
            deleted: &deleted,
            old_sigs,
            old_defines,
            new_purity: &new_purity,
        },
    )?;
    if applied.added + applied.changed + applied.removed > 0 {
        out.put("meta", vec!["search_dirty".into(), "1".into()]);
    }
    trace.lap("diagnose");
    let t = std::time::Instant::now();
    let n = out.len();
    // Every write moves the store's generation on, so a reader in another thread or process
    // (a mount's cache) can tell cheaply that something changed.
    out.put("meta", vec!["generation".into(), (generation + 1).to_string().into()]);
    crate::trace::count_script();
    store.db.import_relations(out.into_named_rows(store)?).map_err(|e| {
        StoreError::Query(format!("writing the change failed, nothing was written: {e}"))
    })?;
    // The files' namespaces this handle holds follow the write.
    let files: Vec<(&str, &str)> = set
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
        eprintln!("{:>8.1} ms  one transaction, {n} rows", t.elapsed().as_secs_f64() * 1000.0);
    }
    trace.lap("transaction");
    Ok(applied)
}

/// The rows that place form `f` (`form_at`, `ns_form`), where `old` had it elsewhere or
/// nowhere: a form that keeps its file, position and namespace keeps them as they are.
fn place(out: &mut Batch, old: Option<&OldForm>, f: &FormRow) {
    let id: DataValue = f.id.as_str().into();
    if let Some(o) = old {
        if (o.file.as_str(), o.pos, o.ns.as_str()) == (f.file.as_str(), f.pos, f.ns.as_str()) {
            return;
        }
        out.del("form_at", vec![o.file.as_str().into(), o.pos.into(), id.clone()]);
        out.del("ns_form", vec![o.ns.as_str().into(), o.pos.into(), id.clone()]);
    }
    out.put("form_at", vec![f.file.as_str().into(), f.pos.into(), id.clone()]);
    out.put("ns_form", vec![f.ns.as_str().into(), f.pos.into(), id]);
}

/// What a change does that the stored diagnostics follow.
struct Diagnose<'a> {
    /// Forms written (new, changed or moved).
    written: &'a [&'a FormRow],
    /// (id, file) of forms removed.
    deleted: &'a [(String, String)],
    /// What the callers' checks depend on, per old form written or removed (`sig` rows).
    old_sigs: HashMap<String, DataValue>,
    /// Vars the old forms defined.
    old_defines: HashMap<String, Vec<String>>,
    /// New purity classes of stored forms not written (`Change::SetPurity`).
    new_purity: &'a HashMap<&'a str, &'a str>,
}

/// Keep the stored diagnostics (`diagnostic`) in step with a change: check every top-level
/// form it writes, and every stored top-level form that calls a var whose signature (arglists,
/// macro-ness, kind, platforms, purity) the change moves or whose own purity it changes; drop
/// the findings of the forms it removes (their old rows were read with the form's other rows).
fn diagnose(store: &Store, out: &mut Batch, d: &Diagnose) -> Result<()> {
    use crate::checks::{self, Definition, Known};
    let clojure = |file: &str| {
        crate::syntax::Lang::from_path(file).is_some_and(|l| l != crate::syntax::Lang::Edn)
    };
    // Unresolved symbols of every form written (a comment block's children are reported with
    // the block).
    for f in d.written.iter().filter(|f| clojure(&f.file)) {
        let report = if f.parent.is_empty() { &f.id } else { &f.parent };
        for (sym, at) in &f.unresolved {
            let finding = checks::unresolved(&f.ns, sym, *at, !f.parent.is_empty());
            put_finding(out, &f.id, report, &f.ns, &f.file, f.start.line, finding);
        }
    }
    let sig_of = |f: &FormRow| -> DataValue {
        DataValue::List(vec![
            strs(&f.arglists),
            f.macro_.into(),
            f.kind.as_str().into(),
            strs(&f.platforms),
            f.purity.as_str().into(),
        ])
    };
    // Vars whose signature this change moves: defined by a form added, removed, or written
    // with another signature, or by a stored form whose purity changes.
    let mut changed: BTreeSet<String> = BTreeSet::new();
    for f in d.written {
        if d.old_sigs.get(&f.id) != Some(&sig_of(f)) {
            changed.extend(f.defines.iter().map(|(v, _)| v.clone()));
            changed.extend(d.old_defines.get(&f.id).into_iter().flatten().cloned());
        }
    }
    for (id, _) in d.deleted {
        changed.extend(d.old_defines.get(id).into_iter().flatten().cloned());
    }
    let rewritten: HashSet<&str> = d
        .written
        .iter()
        .map(|f| f.id.as_str())
        .chain(d.deleted.iter().map(|(id, _)| id.as_str()))
        .collect();
    if !d.new_purity.is_empty() {
        let rows = store.query(
            "ids[id] <- $ids ?[var] := ids[id], *defined_by{id, var}",
            params([("ids", column(d.new_purity.keys().map(|id| (*id).into())))]),
        )?;
        changed.extend(rows.rows.iter().map(|r| str_at(r, 0)));
    }
    // Stored top-level forms to check again: callers of those vars, and forms whose purity
    // changes; with their facts, their call sites and their old findings.
    let mut again: BTreeSet<String> = d.new_purity.keys().map(|id| id.to_string()).collect();
    if !changed.is_empty() {
        let rows = store.query(
            "vars[v] <- $vars
             ?[id] := vars[v], *calls{to: v, from}, *form{id: from, parent}, parent == '', id = from
             ?[id] := vars[v], *calls{to: v, from}, *form{id: from, parent}, parent != '', id = parent",
            params([("vars", column(changed.iter().map(|v| v.as_str().into())))]),
        )?;
        again.extend(rows.rows.iter().map(|r| str_at(r, 0)));
    }
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
        let sites = store.query(
            "ids[id] <- $ids
             ?[from, line, col, to, argc, outer, load, head] := ids[from], *call_site{from, line, col, to, argc, outer, load, head}",
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
        let mut by_form: HashMap<String, Vec<Site>> = HashMap::new();
        for r in &sites.rows {
            by_form.entry(str_at(r, 0)).or_default().push(site_from_row(&r[1..]));
        }
        for r in &forms.rows {
            let mut f = form_from_row(r);
            f.sites = by_form.remove(&f.id).unwrap_or_default();
            // Back to lines of the file, as the checks read them.
            for s in &mut f.sites {
                s.pos.line += f.start.line;
            }
            if let Some(p) = d.new_purity.get(f.id.as_str()) {
                f.purity = p.to_string();
            }
            stored.push(f);
        }
    }
    let to_check: Vec<(&FormRow, checks::Form)> = d
        .written
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
                sites: &f.sites,
            };
            (f, form)
        })
        .collect();
    if to_check.is_empty() {
        return Ok(());
    }
    // The called vars' definitions as they will be: stored ones, less the forms this change
    // rewrites, plus the forms it writes; with the purity it sets.
    let named: BTreeSet<&str> =
        to_check.iter().flat_map(|(_, f)| f.sites.iter().map(|s| s.to.as_str())).collect();
    let mut definitions: Vec<Definition> = Vec::new();
    if !named.is_empty() {
        let rows = store.query(
            "vars[var] <- $vars
             ?[var, id, fqn, arglists, macro, kind, platforms, purity, source] := vars[var], *defines{var, id}, *form{id, fqn, arglists, macro, kind, platforms, purity, source}",
            params([("vars", column(named.iter().map(|v| (*v).into())))]),
        )?;
        for r in &rows.rows {
            let id = str_at(r, 1);
            if rewritten.contains(id.as_str()) {
                continue;
            }
            let purity =
                d.new_purity.get(id.as_str()).map_or_else(|| str_at(r, 7), |p| p.to_string());
            definitions.push(Definition {
                var: str_at(r, 0),
                id,
                fqn: str_at(r, 2),
                arglists: string_list(&r[3]),
                macro_: r[4].get_bool().unwrap_or(false),
                kind: str_at(r, 5),
                platforms: string_list(&r[6]),
                purity,
                source: str_at(r, 8),
            });
        }
    }
    for f in d.written {
        for (var, _) in &f.defines {
            if named.contains(var.as_str()) {
                definitions.push(Definition {
                    var: var.clone(),
                    id: f.id.clone(),
                    fqn: f.fqn.clone(),
                    arglists: f.arglists.clone(),
                    macro_: f.macro_,
                    kind: f.kind.clone(),
                    platforms: f.platforms.clone(),
                    purity: f.purity.clone(),
                    source: f.source.clone(),
                });
            }
        }
    }
    let known = Known::new(&definitions);
    for (f, form) in &to_check {
        for finding in checks::check(form, &known) {
            put_finding(out, &f.id, &f.id, &f.ns, &f.file, f.start.line, finding);
        }
    }
    Ok(())
}

fn put_finding(
    out: &mut Batch,
    id: &str,
    report: &str,
    ns: &str,
    file: &str,
    first_line: u32,
    f: crate::checks::Finding,
) {
    out.put(
        "diagnostic",
        vec![
            ns.into(),
            id.into(),
            // Relative to the form's first line, as the other places hanging off it.
            (f.line - i64::from(first_line)).into(),
            f.col.into(),
            f.kind.into(),
            f.message.into(),
            f.severity.into(),
            file.into(),
            report.into(),
        ],
    );
}

/// The strings of a stored list (`[String]` column); empty for anything else.
fn string_list(v: &DataValue) -> Vec<String> {
    match v {
        DataValue::List(items) => {
            items.iter().map(|i| i.get_str().unwrap_or_default().to_string()).collect()
        }
        _ => Vec::new(),
    }
}

/// A `call_site` row of form `id`, which starts on line `first`.
fn site_value(id: &DataValue, site: &Site, first: i64) -> Vec<DataValue> {
    vec![
        id.clone(),
        (i64::from(site.pos.line) - first).into(),
        i64::from(site.pos.col).into(),
        site.to.as_str().into(),
        site.argc.into(),
        site.outer.as_str().into(),
        site.load.into(),
        site.head.as_str().into(),
    ]
}

/// A call site read back from the columns after `from`: (line, col, to, argc, outer, load,
/// head); its line is still relative to its form's first line.
pub(crate) fn site_from_row(r: &[DataValue]) -> Site {
    Site {
        pos: Pos { line: int_at(r, 0) as u32, col: int_at(r, 1) as u32 },
        to: str_at(r, 2),
        argc: int_at(r, 3),
        outer: str_at(r, 4),
        load: r[5].get_bool().unwrap_or(false),
        head: str_at(r, 6),
    }
}

/// Columns of the `form` relation in the order `form_value` writes them.
pub const FORM_COLS: &str = "id, file, ns, pos, parent, kind, head, name, fqn, dispatch, doc, arglists, leading, source, canonical, line, col, end_line, end_col, hash, private, dynamic, deprecated, test, export, macro, platforms, purity, rhash, callees";

fn strs(v: &[String]) -> DataValue {
    DataValue::List(v.iter().map(|s| s.as_str().into()).collect())
}

fn form_value(f: &FormRow) -> Vec<DataValue> {
    vec![
        f.id.as_str().into(),
        f.file.as_str().into(),
        f.ns.as_str().into(),
        f.pos.into(),
        f.parent.as_str().into(),
        f.kind.as_str().into(),
        f.head.as_str().into(),
        f.name.as_str().into(),
        f.fqn.as_str().into(),
        f.dispatch.as_str().into(),
        f.doc.as_str().into(),
        strs(&f.arglists),
        f.leading.as_str().into(),
        f.source.as_str().into(),
        f.canonical.as_str().into(),
        (f.start.line as i64).into(),
        (f.start.col as i64).into(),
        (f.end.line as i64).into(),
        (f.end.col as i64).into(),
        f.hash.as_str().into(),
        f.private.into(),
        f.dynamic.into(),
        f.deprecated.into(),
        f.test.into(),
        f.export.into(),
        f.macro_.into(),
        strs(&f.platforms),
        f.purity.as_str().into(),
        f.rhash.as_str().into(),
        DataValue::List(f.calls.iter().map(|c| c.to.as_str().into()).collect()),
    ]
}

/// Read a `form` row (selected with `FORM_COLS`) back.
pub fn form_from_row(r: &[DataValue]) -> FormRow {
    let list = string_list;
    let b = |v: &DataValue| v.get_bool().unwrap_or(false);
    FormRow {
        id: str_at(r, 0),
        file: str_at(r, 1),
        ns: str_at(r, 2),
        pos: int_at(r, 3),
        parent: str_at(r, 4),
        kind: str_at(r, 5),
        head: str_at(r, 6),
        name: str_at(r, 7),
        fqn: str_at(r, 8),
        dispatch: str_at(r, 9),
        doc: str_at(r, 10),
        arglists: list(&r[11]),
        leading: str_at(r, 12),
        source: str_at(r, 13),
        canonical: str_at(r, 14),
        start: Pos { line: int_at(r, 15) as u32, col: int_at(r, 16) as u32 },
        end: Pos { line: int_at(r, 17) as u32, col: int_at(r, 18) as u32 },
        hash: str_at(r, 19),
        private: b(&r[20]),
        dynamic: b(&r[21]),
        deprecated: b(&r[22]),
        test: b(&r[23]),
        export: b(&r[24]),
        macro_: b(&r[25]),
        platforms: list(&r[26]),
        purity: str_at(r, 27),
        rhash: str_at(r, 28),
        // Only callee names are on the row; places and kinds are in `calls`.
        calls: list(&r[29])
            .into_iter()
            .map(|to| Call {
                to,
                kind: crate::resolve::RefKind::Call,
                pos: Pos::default(),
                count: 0,
            })
            .collect(),
        unresolved: Vec::new(),
        defines: Vec::new(),
        sites: Vec::new(),
    }
}

fn file_value(f: &FileRow) -> Vec<DataValue> {
    let (error, line, col) = match &f.error {
        Some(e) => (e.message.clone(), e.pos.line as i64, e.pos.col as i64),
        None => (String::new(), 0, 0),
    };
    vec![
        f.path.as_str().into(),
        f.lang.as_str().into(),
        f.ns.as_str().into(),
        f.hash.as_str().into(),
        f.trailing.as_str().into(),
        error.into(),
        line.into(),
        col.into(),
        DataValue::Bytes(f.raw.clone()),
    ]
}

/// Stored forms of the given files.
fn load_old_forms(store: &Store, paths: &[&str]) -> Result<HashMap<String, OldForm>> {
    let (cols, atom) = (OLD_FORM_COLS, OLD_FORM_ATOM);
    load_forms(
        store,
        &format!(
            "paths[file] <- $keys ?[{cols}] := paths[file], *form_at{{file, pos, id}}, *form{{{atom}}}"
        ),
        paths,
    )
}

/// Stored forms with the given ids (wherever they live).
fn load_forms_by_id(store: &Store, ids: &[&str]) -> Result<HashMap<String, OldForm>> {
    let cols = OLD_FORM_COLS;
    load_forms(store, &format!("ids[id] <- $keys ?[{cols}] := ids[id], *form{{{cols}}}"), ids)
}

fn load_forms(store: &Store, script: &str, keys: &[&str]) -> Result<HashMap<String, OldForm>> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = store.query(script, params([("keys", column(keys.iter().map(|k| (*k).into())))]))?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), OldForm::from_row(r))).collect())
}

fn load_deleted_meta(
    store: &Store,
    deleted: &[(String, String)],
) -> Result<HashMap<String, (String, String)>> {
    if deleted.is_empty() {
        return Ok(HashMap::new());
    }
    let list = column(deleted.iter().map(|(id, _)| id.as_str().into()));
    let rows = store.query(
        "ids[id] <- $ids ?[id, ns, name] := ids[id], *form{id, ns, name}",
        params([("ids", list)]),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), (str_at(r, 1), str_at(r, 2)))).collect())
}

fn next_versions(store: &Store, ids: &[&str]) -> Result<BTreeMap<String, i64>> {
    if ids.is_empty() {
        return Ok(BTreeMap::new());
    }
    let list = column(ids.iter().map(|p| (*p).into()));
    let rows = store.query(
        "ids[id] <- $ids ?[id, max(v)] := ids[id], *version{id, v}",
        params([("ids", list)]),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), int_at(r, 1) + 1)).collect())
}

/// Deletes and puts per relation, for one `import_relations` transaction.
#[derive(Default)]
struct Batch {
    rows: BTreeMap<String, Vec<Vec<DataValue>>>,
}

impl Batch {
    fn put(&mut self, rel: &str, row: Vec<DataValue>) {
        self.rows.entry(rel.to_string()).or_default().push(row);
    }

    fn del(&mut self, rel: &str, key: Vec<DataValue>) {
        self.rows.entry(format!("-{rel}")).or_default().push(key);
    }

    fn len(&self) -> usize {
        self.rows.values().map(Vec::len).sum()
    }

    /// Name the columns of every relation from the store's own schema. A delete of a key the
    /// batch also puts is left out: the put replaces the row anyway (most rows of an edited
    /// form are written again as they were), and a relation left with nothing to delete costs
    /// the transaction nothing.
    fn into_named_rows(mut self, store: &Store) -> Result<BTreeMap<String, cozo::NamedRows>> {
        let mut out = BTreeMap::new();
        let puts: Vec<String> = self.rows.keys().filter(|r| !r.starts_with('-')).cloned().collect();
        for rel in puts {
            let Some(deletes) = self.rows.get(&format!("-{rel}")) else { continue };
            let keys = store.columns(&rel)?.iter().filter(|(_, is_key)| *is_key).count();
            // Row values are strings, numbers, lists and bytes: nothing in them changes while
            // they are keys (the lint sees the regex variant a query value can hold).
            #[allow(clippy::mutable_key_type)]
            let put: HashSet<&[DataValue]> =
                self.rows[&rel].iter().map(|r| &r[..keys.min(r.len())]).collect();
            let kept: Vec<Vec<DataValue>> =
                deletes.iter().filter(|k| !put.contains(k.as_slice())).cloned().collect();
            self.rows.insert(format!("-{rel}"), kept);
        }
        for (rel, rows) in self.rows {
            if rows.is_empty() {
                continue;
            }
            let is_delete = rel.starts_with('-');
            let headers: Vec<String> = store
                .columns(rel.trim_start_matches('-'))?
                .iter()
                .filter(|(_, is_key)| !is_delete || *is_key)
                .map(|(name, _)| name.clone())
                .collect();
            out.insert(rel, cozo::NamedRows::new(headers, rows));
        }
        Ok(out)
    }
}
