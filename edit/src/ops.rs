//! Form-level edits by id: replace, insert (with placement), delete, top-level comments, new
//! namespaces, line-anchored replacement, and batches of them — each batch one transaction.
//!
//! Edits work on the writer's view of each touched file, cut into top-level pieces that carry
//! their stored ids. An op changes pieces; the batch then turns every touched file back into
//! stored text (the inverse alias mapping) and hands all of them to the engine at once, so ids,
//! resolution, purity and history follow the import rules, and a failed op writes nothing.

use std::collections::BTreeMap;

use formdb_engine::analyze::Kind;
use formdb_engine::change::{self, Applied, ChangeSet};
use formdb_engine::forms::{self, Content};
use formdb_engine::import::{self, Quiet};
use formdb_engine::read;
use formdb_engine::store::{Store, StoreError};
use formdb_engine::syntax::{self, Lang};
use formdb_engine::trace::Timings;
use formdb_projector::layout::{self, LayoutOptions};
use formdb_projector::views;

use crate::check::{self, SourceProblem};
use crate::save::{self, Writer};
use crate::{check_path, EditError, Result};

/// One edit. Sources are in the writer's view (their aliases).
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Replace {
        id: String,
        source: String,
        #[serde(default)]
        expected_hash: Option<String>,
    },
    Insert {
        ns: String,
        source: String,
        #[serde(default)]
        before: Option<String>,
        #[serde(default)]
        after: Option<String>,
    },
    Delete {
        id: String,
    },
    /// A `;; ` comment before or after a form (`anchor_id`), or at a line of a file.
    InsertComment {
        #[serde(default)]
        anchor_id: Option<String>,
        #[serde(default)]
        file: Option<String>,
        #[serde(default)]
        line: Option<u32>,
        text: String,
        #[serde(default = "after")]
        position: String,
    },
    /// Replace the top-level form at `line` of `file`; when `target_line` is given, the form
    /// must start with it, searched two lines around `line`.
    ReplaceTopLevel {
        file: String,
        line: u32,
        #[serde(default)]
        target_line: Option<String>,
        new_form: String,
    },
    CreateNamespace {
        ns: String,
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        doc: Option<String>,
        #[serde(default)]
        requires: Vec<String>,
    },
}

fn after() -> String {
    "after".into()
}

/// How agent source is treated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Accept Parinfer's bracket repair instead of refusing with it.
    pub repair: bool,
    /// Keep the source's own layout (a human's edit) instead of laying it out cljfmt-style.
    pub keep_layout: bool,
}

/// What an edit refused, with what to send instead.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error(transparent)]
    Edit(#[from] EditError),
    /// The source did not pass the checks (unbalanced, several forms, does not parse).
    #[error("{}", .0.message)]
    Source(Box<SourceProblem>),
    /// `expected_hash` is not the form's hash any more.
    #[error("{message}")]
    Stale { message: String, id: String, current_hash: String, current_source: String },
}

impl From<formdb_engine::store::StoreError> for OpError {
    fn from(e: formdb_engine::store::StoreError) -> Self {
        OpError::Edit(e.into())
    }
}

impl From<views::ViewError> for OpError {
    fn from(e: views::ViewError) -> Self {
        OpError::Edit(e.into())
    }
}

fn invalid(msg: String) -> OpError {
    OpError::Edit(EditError::Invalid(msg))
}

/// What one op did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct OpResult {
    pub op: String,
    /// The id of the form the op wrote (empty for deletes and comments).
    pub id: String,
    pub hash: String,
    pub ns: String,
    pub file: String,
    pub line: i64,
    /// The bracket repair applied, as a diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repaired: Option<String>,
}

/// What a batch did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Edited {
    pub results: Vec<OpResult>,
    pub applied: Applied,
    /// Files written.
    pub files: Vec<String>,
    /// Namespaces touched.
    pub namespaces: Vec<String>,
    /// Things done that the caller did not ask for (a `declare` added for a cycle, …).
    pub notes: Vec<String>,
}

/// Apply `ops` all-or-nothing in one transaction.
pub fn apply(
    store: &Store,
    writer: &Writer,
    ops: &[Op],
    opts: Options,
) -> std::result::Result<Edited, OpError> {
    // Dozens of queries: run them where Cozo evaluates in place (see `on_worker`).
    formdb_engine::store::on_worker(|| apply_here(store, writer, ops, opts))
}

fn apply_here(
    store: &Store,
    writer: &Writer,
    ops: &[Op],
    opts: Options,
) -> std::result::Result<Edited, OpError> {
    if ops.is_empty() {
        return Err(invalid("no edits given: send at least one op".into()));
    }
    let mut trace = Timings::traced("ops");
    // Held from the first read of a file to the commit: the ops change the pieces they name
    // of the text read here, and every other piece is written back as read, so no other
    // writer (a mount save, another session) may come in between and be reverted.
    let _lock = store.writer()?;
    let mut ws = Workspace::new(store, writer);
    let mut marks = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let mark = ws.run(op, opts).map_err(|e| match e {
            OpError::Edit(e)
                if ops.len() > 1 && !matches!(e, EditError::Store(_) | EditError::View(_)) =>
            {
                OpError::Edit(EditError::InOp { n: i + 1, op: op_name(op), error: Box::new(e) })
            }
            e => e,
        })?;
        marks.push(mark);
    }
    let op_label = if ops.len() == 1 { op_name(&ops[0]) } else { "batch".to_string() };
    trace.lap("run");
    let (applied, files) = ws.commit(&op_label)?;
    trace.lap("commit");
    // Read back what each op wrote, by the piece it marked.
    let mut results = Vec::new();
    for (op, mark) in ops.iter().zip(marks) {
        let mut r = OpResult { op: op_name(op), ..OpResult::default() };
        if let Some((path, key, repaired)) = mark {
            r.file = path.clone();
            r.repaired = repaired;
            let ix = ws.files.get(&path).and_then(|f| f.index_of(key));
            if let Some((id, hash, ns, line)) =
                ix.and_then(|ix| ws.in_place.get(&(path.clone(), ix as i64)))
            {
                (r.id, r.hash, r.ns, r.line) = (id.clone(), hash.clone(), ns.clone(), *line);
            } else if let Some(ix) = ix {
                if let Some(at) = read::forms::top_level_at(store, &path, ix as i64)? {
                    (r.id, r.hash, r.ns, r.line) = (at.id, at.hash, at.ns, at.line);
                }
            }
        }
        results.push(r);
    }
    trace.lap("read back");
    let namespaces: Vec<String> = {
        let mut v: Vec<String> = ws.files.values().filter_map(|f| f.ns.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    Ok(Edited { results, applied, files, namespaces, notes: ws.notes })
}

fn op_name(op: &Op) -> String {
    match op {
        Op::Replace { .. } => "replace_form",
        Op::Insert { .. } => "insert_form",
        Op::Delete { .. } => "delete_form",
        Op::InsertComment { .. } => "insert_comment",
        Op::ReplaceTopLevel { .. } => "replace_top_level_form",
        Op::CreateNamespace { .. } => "create_namespace",
    }
    .to_string()
}

/// Commit whole new texts of files (in the writer's view; new paths allowed) as one change set:
/// the path refactorings (`refactor`) take to the store. Returns what was applied and the
/// files written. Nothing is written if any file does not parse. The caller holds the store's
/// writer lock from its first read of the files: their texts are written whole.
pub fn commit_texts(
    store: &Store,
    writer: &Writer,
    op: &str,
    files: Vec<(String, String)>,
) -> std::result::Result<(Applied, Vec<String>), OpError> {
    let _lock = store.writer()?;
    let mut ws = Workspace::new(store, writer);
    for (path, text) in files {
        let path = check_path(&path)?.to_string();
        let lang = Lang::from_path(&path)
            .ok_or_else(|| invalid(format!("`{path}` is not a Clojure file name")))?;
        let stored = match views::stored_text(store, &path) {
            Ok(s) => Some(s),
            Err(views::ViewError::NoFile(_)) => None,
            Err(e) => return Err(e.into()),
        };
        let tree = syntax::parse(&text);
        let spans = syntax::split_pieces(&tree);
        let pieces = spans
            .iter()
            .map(|s| Piece {
                key: new_key(),
                leading: text[s.leading_start..s.start].to_string(),
                source: text[s.start..s.end].to_string(),
            })
            .collect();
        let trailing = text[spans.last().map_or(0, |s| s.end)..].to_string();
        ws.files.insert(
            path.clone(),
            FileText {
                path,
                lang,
                ns: None,
                stored,
                pieces,
                trailing,
                changed: true,
                loaded: None,
            },
        );
    }
    ws.commit(op)
}

/// A form's source in the writer's view, with a final newline: what `/.formdb/forms/<id>.clj`
/// shows.
pub fn form_text(store: &Store, writer: &Writer, id: &str) -> Result<String> {
    let (path, ix) = locate(store, id)?;
    let file = FileText::load(store, writer, &path)?;
    let piece = file
        .pieces
        .get(ix)
        .ok_or_else(|| EditError::Invalid(format!("form {id} is not in {path}")))?;
    Ok(format!("{}\n", piece.source))
}

/// Replace one form with text a human wrote (layout kept): what a save of
/// `.formdb/forms/<id>.clj` does. `base` is the text the writer had read (what the mount served
/// the handle); when the form changed in the store since, the store's version is kept and the
/// writer's text becomes a draft with the conflict, as whole-file saves do for a form changed on
/// both sides. Every save that is refused (not UTF-8, a NUL byte, does not parse as one form,
/// the form is gone, a conflict) keeps the bytes exactly as written as the draft of
/// `.formdb/forms/<id>.clj`, so nothing typed is lost.
pub fn save_form_text(
    store: &Store,
    writer: &Writer,
    id: &str,
    bytes: &[u8],
    base: Option<&[u8]>,
) -> Result<save::Saved> {
    // Dozens of queries: run them where Cozo evaluates in place (see `on_worker`).
    formdb_engine::store::on_worker(|| save_form_text_here(store, writer, id, bytes, base))
}

fn save_form_text_here(
    store: &Store,
    writer: &Writer,
    id: &str,
    bytes: &[u8],
    base: Option<&[u8]>,
) -> Result<save::Saved> {
    // The form is compared with `base` and replaced under one hold of the lock: no other
    // writer's change can come in between and be overwritten.
    let _lock = store.writer()?;
    let draft_path = format!(".formdb/forms/{id}.clj");
    let put_draft = |error: String, line: u32, col: u32| -> Result<change::Draft> {
        save::put_draft(store, writer, writer.draft(&draft_path, bytes, base, error, line, col))
    };
    let keep = |error: String, line: u32, col: u32| -> Result<save::Saved> {
        Ok(save::Saved::Draft { draft: put_draft(error, line, col)? })
    };
    let drop_draft = || -> Result<()> {
        save::discard_draft(store, writer, &draft_path)?;
        Ok(())
    };
    let text = match save::written_text(bytes) {
        Ok(t) => t,
        Err((error, line, col)) => return keep(error, line, col),
    };
    // The form as the writer's view shows it now, and its hash: the replace below is refused if
    // the form moves on between this read and the write.
    let hash = read::forms::hash(store, id)?;
    let Some(hash) = hash else {
        let gone = EditError::UnknownId { id: id.to_string() };
        let since = if base.is_some() { " (deleted since you read it)" } else { "" };
        return keep(format!("{gone}{since}; your text is this draft"), 0, 0);
    };
    let current = match form_text(store, writer, id) {
        Ok(t) => t,
        Err(e) => return keep(e.to_string(), 0, 0),
    };
    // Leading/trailing blank lines and trailing blanks are not part of a form's text (the
    // replace trims them), so they do not make a difference between base and store.
    let norm = |t: &str| t.trim_matches(|c: char| c == '\n' || c == '\r').trim_end().to_string();
    // Nothing of the writer's is applied: the store's version of the form stands.
    let conflict = || -> Result<save::Saved> {
        let draft = put_draft(
            format!("conflict: form {id} changed here and in the store since you read it; the store's version is kept, your text is this draft"),
            0,
            0,
        )?;
        Ok(save::Saved::Conflict { path: draft_path.clone(), applied: Default::default(), draft })
    };
    let mut expected_hash = None;
    if let Some(base) = base {
        let base = norm(&String::from_utf8_lossy(base));
        if base != norm(&current) {
            if norm(text) == base || norm(text) == norm(&current) {
                // Unchanged here, or the same change on both sides: the store's text stands.
                drop_draft()?;
                return Ok(save::Saved::Unchanged { path: draft_path });
            }
            return conflict();
        }
        expected_hash = Some(hash);
    }
    let op = Op::Replace { id: id.to_string(), source: text.to_string(), expected_hash };
    match apply(store, writer, &[op], Options { repair: false, keep_layout: true }) {
        Ok(e) => {
            drop_draft()?;
            Ok(save::Saved::Committed { path: e.files.join(" "), applied: e.applied })
        }
        Err(OpError::Source(p)) => keep(p.message.clone(), p.line, p.col),
        // The form moved on between the comparison above and the write.
        Err(OpError::Stale { .. }) => conflict(),
        Err(OpError::Edit(e)) => keep(e.to_string(), 0, 0),
    }
}

/// The file and top-level index of a form.
fn locate(store: &Store, id: &str) -> Result<(String, usize)> {
    let file = locate_file(store, id)?;
    let all = read::files::top_level_ids(store, &file)?;
    let ix = all.iter().position(|other| other == id).unwrap_or(all.len());
    Ok((file, ix))
}

/// The file of top-level form `id`.
fn locate_file(store: &Store, id: &str) -> Result<String> {
    let Some(place) = read::forms::place(store, id)? else {
        return Err(EditError::UnknownId { id: id.to_string() });
    };
    let (file, parent) = (place.file, place.parent);
    if !parent.is_empty() {
        return Err(EditError::Invalid(format!(
            "form {id} sits inside the (comment ...) block {parent}: edit that block instead"
        )));
    }
    Ok(file)
}

/// A touched file: its pieces in the writer's view, each with the id it had in the store.
struct FileText {
    path: String,
    lang: Lang,
    ns: Option<String>,
    /// The stored text a writer with aliases edits a view of, to map it back (absent for a new
    /// file, and for a writer without aliases, who edits the stored pieces themselves).
    stored: Option<String>,
    pieces: Vec<Piece>,
    trailing: String,
    changed: bool,
    /// The pieces and trailing text as loaded, for a writer without aliases: a commit that
    /// changed the text of one of them alone can be applied to that form in place.
    loaded: Option<(Vec<Piece>, String)>,
}

#[derive(Clone)]
struct Piece {
    /// Marks a piece through later ops: the stored id, or a number for new pieces.
    key: Key,
    leading: String,
    source: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Key {
    Stored(String),
    New(usize),
}

impl FileText {
    fn load(store: &Store, writer: &Writer, path: &str) -> Result<FileText> {
        if writer.aliases.is_empty() {
            return FileText::load_stored(store, path);
        }
        // A writer with aliases edits the file in their view, parsed into pieces here.
        let stored = views::stored_text(store, path)?;
        let text = views::user_view_text(&stored, &writer.aliases).text;
        let ids = read::files::top_level_ids(store, path)?;
        let ns = read::files::ns_of(store, path)?.filter(|s| !s.is_empty());
        let tree = syntax::parse_at(store, path, &text);
        if syntax::first_error(&tree, &text).is_some() {
            return Err(EditError::Invalid(format!(
                "{path} is stored as raw text (it did not parse): fix it with a whole-file save first"
            )));
        }
        let spans = syntax::split_pieces(&tree);
        if spans.len() != ids.len() {
            return Err(EditError::Invalid(format!(
                "{path}: the view has {} forms but the store {}: re-import the file",
                spans.len(),
                ids.len()
            )));
        }
        let pieces = spans
            .iter()
            .zip(ids)
            .map(|(s, id)| Piece {
                key: Key::Stored(id),
                leading: text[s.leading_start..s.start].to_string(),
                source: text[s.start..s.end].to_string(),
            })
            .collect();
        let trailing = text[spans.last().map_or(0, |s| s.end)..].to_string();
        Ok(FileText {
            path: path.to_string(),
            lang: Lang::from_path(path).unwrap_or(Lang::Clj),
            ns,
            stored: Some(stored),
            pieces,
            trailing,
            changed: false,
            loaded: None,
        })
    }

    /// A file as stored (the view of a writer without aliases): its pieces are the stored
    /// forms' own leading text and source, read in one query, with nothing to parse.
    fn load_stored(store: &Store, path: &str) -> Result<FileText> {
        let Some(f) = read::files::head(store, path)? else {
            return Err(views::ViewError::NoFile(path.to_string()).into());
        };
        if !f.error.is_empty() {
            return Err(EditError::Invalid(format!(
                "{path} is stored as raw text (it did not parse): fix it with a whole-file save first"
            )));
        }
        let pieces: Vec<Piece> = read::files::top_level_id_pieces(store, path)?
            .into_iter()
            .map(|p| Piece { key: Key::Stored(p.id), leading: p.leading, source: p.source })
            .collect();
        let trailing = f.trailing;
        let mut text = FileText {
            path: path.to_string(),
            lang: Lang::from_path(path).unwrap_or(Lang::Clj),
            ns: Some(f.ns).filter(|s| !s.is_empty()),
            stored: None,
            pieces,
            trailing,
            changed: false,
            loaded: None,
        };
        text.loaded = Some((text.pieces.clone(), text.trailing.clone()));
        Ok(text)
    }

    /// The one stored form whose text alone changed since the file was loaded, and its new
    /// text; `None` if anything else changed.
    fn one_form_edited(&self) -> Option<(&str, &str)> {
        let (pieces, trailing) = self.loaded.as_ref()?;
        if pieces.len() != self.pieces.len() || *trailing != self.trailing {
            return None;
        }
        let mut edited = None;
        for (now, then) in self.pieces.iter().zip(pieces) {
            if now.key != then.key || now.leading != then.leading {
                return None;
            }
            if now.source != then.source {
                let Key::Stored(id) = &now.key else { return None };
                if edited.replace((id.as_str(), now.source.as_str())).is_some() {
                    return None;
                }
            }
        }
        edited
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            out.push_str(&p.leading);
            out.push_str(&p.source);
        }
        out.push_str(&self.trailing);
        out
    }

    fn index_of(&self, key: Key) -> Option<usize> {
        self.pieces.iter().position(|p| p.key == key)
    }
}

struct Workspace<'s> {
    store: &'s Store,
    writer: &'s Writer,
    files: BTreeMap<String, FileText>,
    notes: Vec<String>,
    /// The top-level forms a commit applied in place, by (file, position): what the op's
    /// result reports of them, known without reading them back.
    in_place: std::collections::HashMap<(String, i64), Placed>,
}

/// A top-level form as an op's result reports it: id, hash, namespace, line.
type Placed = (String, String, String, i64);

/// Where an op's written form is, to read its id back after the commit.
type Mark = Option<(String, Key, Option<String>)>;

static NEXT_NEW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn new_key() -> Key {
    Key::New(NEXT_NEW.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

impl<'s> Workspace<'s> {
    fn new(store: &'s Store, writer: &'s Writer) -> Workspace<'s> {
        Workspace {
            store,
            writer,
            files: BTreeMap::new(),
            notes: Vec::new(),
            in_place: Default::default(),
        }
    }

    fn file(&mut self, path: &str) -> Result<&mut FileText> {
        if !self.files.contains_key(path) {
            let f = FileText::load(self.store, self.writer, path)?;
            self.files.insert(path.to_string(), f);
        }
        Ok(self.files.get_mut(path).expect("just loaded"))
    }

    /// The file and piece index of a form id, following earlier ops of this batch.
    fn find(&mut self, id: &str) -> std::result::Result<(String, usize), OpError> {
        let key = Key::Stored(id.to_string());
        for (path, f) in &self.files {
            if let Some(ix) = f.index_of(key.clone()) {
                return Ok((path.clone(), ix));
            }
        }
        let path = locate_file(self.store, id)?;
        let f = self.file(&path)?;
        let ix = f.index_of(key).ok_or_else(|| {
            invalid(format!("form {id} was deleted by an earlier op of this batch"))
        })?;
        Ok((path, ix))
    }

    fn ns_file(&mut self, ns: &str) -> std::result::Result<String, OpError> {
        if let Some((p, _)) = self.files.iter().find(|(_, f)| f.ns.as_deref() == Some(ns)) {
            return Ok(p.clone());
        }
        match views::ns_path(self.store, ns) {
            Ok(p) => Ok(p),
            Err(views::ViewError::NoNamespace(_)) => {
                Err(OpError::Edit(EditError::NoNamespace { ns: ns.to_string() }))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn prepare(
        &self,
        source: &str,
        opts: Options,
    ) -> std::result::Result<(String, Option<String>), OpError> {
        let checked =
            check::source(source, opts.repair, false).map_err(|p| OpError::Source(Box::new(p)))?;
        let text = if opts.keep_layout {
            checked.source
        } else {
            layout::layout_form(&checked.source, &LayoutOptions::default())
                .unwrap_or(checked.source)
        };
        Ok((text.trim_end().to_string(), checked.repaired))
    }

    /// Refuse a replace of stored form `id` (in `path`) by `text` that would change which var
    /// it defines: the form's id follows its name, so a renamed definition is a new form (its
    /// callers break), and a second definition of a var takes the id of the form that defined
    /// it first.
    fn check_keeps_name(
        &mut self,
        id: &str,
        path: &str,
        text: &str,
        op: &str,
    ) -> std::result::Result<(), OpError> {
        let Some(read::forms::Naming { kind, name, ns }) = read::forms::naming(self.store, id)?
        else {
            return Ok(());
        };
        let lang = Lang::from_path(path).unwrap_or(Lang::Clj);
        let parsed = forms::parse_file(path, lang, text.to_string());
        let Some(new) = parsed.forms().first().map(|f| &f.analysis) else { return Ok(()) };
        // Keyword-named forms (`(s/def ::k ...)`) name no var.
        let names_var = |kind: Kind, name: &str| {
            kind.defines_var() && !name.is_empty() && !name.starts_with(':')
        };
        if !names_var(new.kind, &new.name) || new.name == name {
            return Ok(());
        }
        if names_var(Kind::parse(&kind), &name) {
            return Err(invalid(format!(
                "{op} would rename `{ns}/{name}` to `{new_name}`: form {id} defines `{name}` and a replace keeps the name it defines; nothing was changed. To rename it together with every use, use rename_symbol (`{ns}/{name}` to `{new_name}`); to add `{new_name}` beside it, insert a new form",
                new_name = new.name
            )));
        }
        // A form that named no var now defines one: it must not be defined already.
        let fqn = format!("{ns}/{}", new.name);
        let others = read::forms::definers(self.store, &fqn)?;
        for read::forms::Definer { id: other, file, line, .. } in others {
            if other == id {
                continue;
            }
            // Deleted by an earlier op of this batch.
            if self
                .files
                .get(&file)
                .is_some_and(|f| f.index_of(Key::Stored(other.clone())).is_none())
            {
                continue;
            }
            return Err(invalid(format!(
                "{op}: `{fqn}` is defined already by form {other} ({file}:{line}); a second definition would take that form's id; nothing was changed. Edit form {other} instead, or send a definition of another name"
            )));
        }
        Ok(())
    }

    fn run(&mut self, op: &Op, opts: Options) -> std::result::Result<Mark, OpError> {
        match op {
            Op::Replace { id, source, expected_hash } => {
                if let Some(want) = expected_hash {
                    if let Some(hash) = read::forms::hash(self.store, id)? {
                        if hash != *want {
                            return Err(OpError::Stale {
                                message: format!(
                                    "form {id} changed since you read it (its hash is {hash}, you sent {want}); nothing was stored: redo your edit on the current source and send its hash"
                                ),
                                id: id.clone(),
                                current_hash: hash,
                                current_source: form_text(self.store, self.writer, id)?,
                            });
                        }
                    }
                }
                let mut t = Timings::traced("replace");
                let (path, ix) = self.find(id)?;
                t.lap("find and load");
                let (text, repaired) = self.prepare(source, opts)?;
                t.lap("check and lay out");
                self.check_keeps_name(id, &path, &text, "replace_form")?;
                let f = self.file(&path)?;
                f.pieces[ix].source = text;
                f.changed = true;
                Ok(Some((path, Key::Stored(id.clone()), repaired)))
            }
            Op::Insert { ns, source, before, after } => {
                let (text, repaired) = self.prepare(source, opts)?;
                let path = self.ns_file(ns)?;
                let anchor = match (before, after) {
                    (Some(_), Some(_)) => return Err(invalid(
                        "send `before` or `after`, not both (or neither, to let placement choose)"
                            .into(),
                    )),
                    (Some(id), None) => Some((id, true)),
                    (None, Some(id)) => Some((id, false)),
                    (None, None) => None,
                };
                let key = new_key();
                let at = match anchor {
                    Some((id, before)) => {
                        let (p, ix) = self.find(id)?;
                        if p != path {
                            return Err(invalid(format!(
                                "form {id} is in {p}, not in namespace {ns}'s file {path}"
                            )));
                        }
                        if before {
                            ix
                        } else {
                            ix + 1
                        }
                    }
                    None => {
                        let f = self.file(&path)?;
                        let placed = crate::place::place(&f.text(), f.lang, &path, &text);
                        if let Some(declare) = placed.declare {
                            let f = self.file(&path)?;
                            let at = placed.declare_at.min(f.pieces.len());
                            f.pieces.insert(
                                at,
                                Piece {
                                    key: new_key(),
                                    leading: "\n\n".into(),
                                    source: declare.clone(),
                                },
                            );
                            self.notes.push(format!(
                                "added {declare} to {path}: the new form and the form it is used by call each other"
                            ));
                            placed.at + 1
                        } else {
                            placed.at
                        }
                    }
                };
                let f = self.file(&path)?;
                let at = at.min(f.pieces.len());
                insert_piece(
                    f,
                    at,
                    Piece { key: key.clone(), leading: String::new(), source: text },
                );
                Ok(Some((path, key, repaired)))
            }
            Op::Delete { id } => {
                let (path, ix) = self.find(id)?;
                let f = self.file(&path)?;
                let removed = f.pieces.remove(ix);
                // The first form's leading trivia is the file header (shebang, licence): keep it.
                if ix == 0 {
                    if let Some(next) = f.pieces.first_mut() {
                        let header = removed.leading.trim_end();
                        if !header.is_empty() {
                            next.leading = format!("{header}\n\n{}", next.leading.trim_start());
                        } else {
                            next.leading = next.leading.trim_start().to_string();
                        }
                    }
                }
                f.changed = true;
                Ok(None)
            }
            Op::InsertComment { anchor_id, file, line, text, position } => {
                let before = match position.as_str() {
                    "before" => true,
                    "after" => false,
                    other => {
                        return Err(invalid(format!(
                            "position `{other}`: send `before` or `after`"
                        )))
                    }
                };
                let (path, ix) =
                    match (anchor_id, file, line) {
                        (Some(id), _, _) => self.find(id)?,
                        (None, Some(file), Some(line)) => {
                            let path = check_path(file)?.to_string();
                            let f = self.file(&path)?;
                            let ix = piece_at_line(f, *line).ok_or_else(|| {
                                invalid(format!("{path} has no form at or after line {line}"))
                            })?;
                            (path, ix)
                        }
                        _ => return Err(invalid(
                            "send `anchor_id`, or `file` and `line`, to say where the comment goes"
                                .into(),
                        )),
                    };
                let comment: String = text
                    .lines()
                    .map(|l| {
                        let l = l.trim_end();
                        if l.is_empty() {
                            ";;\n".to_string()
                        } else {
                            format!(";; {l}\n")
                        }
                    })
                    .collect();
                if comment.is_empty() {
                    return Err(invalid("the comment text is empty".into()));
                }
                let f = self.file(&path)?;
                let target = if before { Some(ix) } else { Some(ix + 1) };
                match target {
                    Some(t) if t < f.pieces.len() => {
                        let p = &mut f.pieces[t];
                        let lead = p.leading.trim_end_matches([' ', '\t']).to_string();
                        let sep = if t == 0 || lead.ends_with("\n\n") || lead.is_empty() {
                            ""
                        } else {
                            "\n"
                        };
                        let lead =
                            if t > 0 && lead.trim().is_empty() { "\n\n".to_string() } else { lead };
                        p.leading = format!("{lead}{sep}{comment}");
                    }
                    _ => {
                        let rest = f.trailing.trim_start_matches([' ', '\t', '\n', '\r']);
                        f.trailing = format!("\n\n{}{rest}", comment);
                    }
                }
                f.changed = true;
                Ok(None)
            }
            Op::ReplaceTopLevel { file, line, target_line, new_form } => {
                let path = check_path(file)?.to_string();
                let (text, repaired) = self.prepare(new_form, opts)?;
                let f = self.file(&path)?;
                let starts = piece_lines(f);
                let ix = match target_line {
                    Some(want) => {
                        let want = want.trim();
                        let lo = line.saturating_sub(2).max(1);
                        let hi = line + 2;
                        starts
                            .iter()
                            .position(|(l, first)| {
                                (lo..=hi).contains(l) && first.trim() == want
                            })
                            .ok_or_else(|| {
                                let full = f.text();
                                invalid(format!(
                                    "no top-level form starting with `{want}` within two lines of {path}:{line}; nothing was changed. The lines there:\n{}",
                                    check::window(&full, *line as usize, 3)
                                ))
                            })?
                    }
                    None => {
                        starts.iter().position(|(l, _)| l == line).ok_or_else(|| {
                            invalid(format!(
                            "no top-level form starts at {path}:{line}; forms start at lines {}",
                            starts.iter().map(|(l, _)| l.to_string()).collect::<Vec<_>>().join(", ")
                        ))
                        })?
                    }
                };
                if let Key::Stored(id) = f.pieces[ix].key.clone() {
                    self.check_keeps_name(&id, &path, &text, "replace_top_level_form")?;
                }
                let f = self.file(&path)?;
                f.pieces[ix].source = text;
                f.changed = true;
                let key = f.pieces[ix].key.clone();
                Ok(Some((path, key, repaired)))
            }
            Op::CreateNamespace { ns, path, doc, requires } => {
                if !valid_ns(ns) {
                    return Err(invalid(format!(
                        "`{ns}` is not a namespace name: send dotted symbol parts such as `my.app.core`"
                    )));
                }
                if views::ns_path(self.store, ns).is_ok() {
                    return Err(invalid(format!("namespace `{ns}` exists already")));
                }
                let path = match path {
                    Some(p) => check_path(p)?.to_string(),
                    None => default_path(self.store, ns)?,
                };
                if save::read(self.store, &path, &views::Render::AsStored)?.is_some()
                    || self.files.contains_key(&path)
                {
                    return Err(invalid(format!("`{path}` exists already")));
                }
                let Some(lang) = Lang::from_path(&path) else {
                    return Err(invalid(format!(
                        "`{path}` is not a Clojure file name: end it in .clj, .cljc or .cljs"
                    )));
                };
                let mut src = format!("(ns {ns}");
                if let Some(d) = doc.as_ref().filter(|d| !d.is_empty()) {
                    src.push_str(&format!("\n  {}", edn_string(d)));
                }
                for (i, r) in requires.iter().enumerate() {
                    let r = r.trim();
                    let spec = if r.starts_with('[') { r.to_string() } else { format!("[{r}]") };
                    // The conventional layout: specs aligned under the first one.
                    src.push_str(if i == 0 { "\n  (:require " } else { "\n            " });
                    src.push_str(&spec);
                }
                if !requires.is_empty() {
                    src.push(')');
                }
                src.push(')');
                let source = check::source(&src, false, false)
                    .map_err(|p| OpError::Source(Box::new(p)))?
                    .source;
                let key = new_key();
                self.files.insert(
                    path.clone(),
                    FileText {
                        path: path.clone(),
                        lang,
                        ns: Some(ns.clone()),
                        stored: None,
                        pieces: vec![Piece { key: key.clone(), leading: String::new(), source }],
                        trailing: "\n".into(),
                        changed: true,
                        loaded: None,
                    },
                );
                Ok(Some((path, key, None)))
            }
        }
    }

    /// Every changed file back to stored text, all in one change set.
    fn commit(&mut self, op: &str) -> std::result::Result<(Applied, Vec<String>), OpError> {
        if let Some(done) = self.commit_in_place(op)? {
            return Ok(done);
        }
        let mut incoming = Vec::new();
        for f in self.files.values().filter(|f| f.changed) {
            let text = f.text();
            let stored_text = match &f.stored {
                Some(s) if !self.writer.aliases.is_empty() => {
                    views::parse_back_text(s, &text, &self.writer.aliases)
                }
                _ => text,
            };
            let parsed = forms::parse_edited_file(self.store, &f.path, f.lang, stored_text);
            if let Content::Raw { error } = &parsed.content {
                return Err(OpError::Edit(EditError::Unparsable {
                    file: f.path.clone(),
                    line: error.pos.line,
                    col: error.pos.col,
                    why: error.message.clone(),
                }));
            }
            let ns_forms = match &parsed.content {
                Content::Forms { forms, .. } => {
                    forms.iter().filter(|f| f.analysis.kind.as_str() == "ns").count()
                }
                Content::Raw { .. } => 0,
            };
            if ns_forms > 1 {
                return Err(invalid(format!(
                    "{}: the edit would give the file a second `ns` form; nothing was stored",
                    f.path
                )));
            }
            incoming.push(parsed);
        }
        let files: Vec<String> = incoming.iter().map(|i| i.path.clone()).collect();
        if incoming.is_empty() {
            return Ok((Applied::default(), files));
        }
        let (changes, errors) = import::parsed_file_changes(self.store, incoming, &Quiet)?;
        if let Some(e) = errors.first() {
            return Err(invalid(format!(
                "{}:{}:{}: {}; nothing was stored",
                e.path, e.line, e.col, e.message
            )));
        }
        let applied = self.apply(op, changes)?;
        Ok((applied, files))
    }

    /// A commit whose only change is the text of one stored form, applied to that form alone
    /// when the engine can (`import::form_in_place`); `None` to commit the whole file.
    fn commit_in_place(
        &mut self,
        op: &str,
    ) -> std::result::Result<Option<(Applied, Vec<String>)>, OpError> {
        let mut changed = self.files.values().filter(|f| f.changed);
        let (Some(f), None) = (changed.next(), changed.next()) else { return Ok(None) };
        let Some((id, source)) = f.one_form_edited() else { return Ok(None) };
        let Some(changes) = import::form_in_place(self.store, &f.path, id, source, &f.text())?
        else {
            return Ok(None);
        };
        let files = vec![f.path.clone()];
        let mut placed = Vec::new();
        for c in &changes {
            if let change::Change::PutForms { forms, .. } = c {
                for f in forms.iter().filter(|f| f.parent.is_empty()) {
                    let what = (
                        f.id.to_string(),
                        f.hash.to_string(),
                        f.ns.to_string(),
                        f.start.line.into(),
                    );
                    placed.push(((f.file.to_string(), f.pos), what));
                }
            }
        }
        let applied = match self.apply(op, changes) {
            // Another writer came in since the form was read: the whole file is computed
            // again from what the store holds now.
            Err(OpError::Edit(EditError::Store(StoreError::Moved { .. }))) => return Ok(None),
            other => other?,
        };
        self.in_place.extend(placed);
        Ok(Some((applied, files)))
    }

    /// Apply `changes` as this writer's `op`. The edited files' drafts stay: a draft is another
    /// writer's unsaved text (a save through the mount that did not parse, a sync conflict's
    /// store text) that nothing else holds, and that writer's next good save merges this edit
    /// in. Dropping them here lost a user's draft to any agent's edit of another form.
    fn apply(
        &self,
        op: &str,
        changes: Vec<change::Change>,
    ) -> std::result::Result<Applied, OpError> {
        let set = ChangeSet { author: self.writer.user.clone(), op: op.to_string(), changes };
        Ok(change::apply(self.store, &set)?)
    }
}

/// Insert a new piece, spaced by one blank line from its neighbours.
fn insert_piece(f: &mut FileText, at: usize, mut piece: Piece) {
    piece.leading = if at == 0 { String::new() } else { "\n\n".into() };
    if at == 0 {
        if let Some(next) = f.pieces.first_mut() {
            // The old first form keeps its comments, now after a blank line.
            let lead = next.leading.trim_start_matches(['\n', '\r']).to_string();
            next.leading = format!("\n\n{lead}");
        }
    }
    if at == f.pieces.len() && f.trailing.trim().is_empty() {
        f.trailing = "\n".into();
    }
    f.pieces.insert(at, piece);
    f.changed = true;
}

/// The 1-based start line of each piece's form, and that line's text.
fn piece_lines(f: &FileText) -> Vec<(u32, String)> {
    let mut line = 1u32;
    let mut out = Vec::new();
    for p in &f.pieces {
        line += p.leading.matches('\n').count() as u32;
        out.push((line, p.source.lines().next().unwrap_or("").to_string()));
        line += p.source.matches('\n').count() as u32;
    }
    out
}

/// The piece whose form spans `line`, else the first after it.
fn piece_at_line(f: &FileText, line: u32) -> Option<usize> {
    let starts = piece_lines(f);
    starts.iter().enumerate().find_map(|(i, (start, _))| {
        let end = start + f.pieces[i].source.matches('\n').count() as u32;
        (line <= end).then_some(i)
    })
}

fn valid_ns(ns: &str) -> bool {
    !ns.is_empty()
        && ns.split('.').all(|p| {
            !p.is_empty()
                && !p.starts_with(|c: char| c.is_ascii_digit())
                && p.chars().all(|c| c.is_alphanumeric() || "-_*+!?<>=".contains(c))
        })
}

/// Where a new namespace's file goes: beside the files of the namespace sharing the longest
/// prefix (so `my.app.util` lands in the same source root as `my.app.core`), else `src/`.
fn default_path(store: &Store, ns: &str) -> Result<String> {
    let rel = ns.replace('.', "/").replace('-', "_");
    let mut best: Option<(usize, String, String)> = None;
    for (other, file) in read::namespaces::declared(store)? {
        let other_rel = other.replace('.', "/").replace('-', "_");
        let Some(stem) = file.rsplit_once('.').map(|(s, _)| s) else { continue };
        let Some(root) = stem.strip_suffix(&other_rel) else { continue };
        let shared = ns.split('.').zip(other.split('.')).take_while(|(a, b)| a == b).count();
        let ext = file.rsplit('.').next().unwrap_or("clj").to_string();
        if best.as_ref().is_none_or(|(n, _, _)| shared > *n) {
            best = Some((shared, root.to_string(), ext));
        }
    }
    Ok(match best {
        Some((_, root, ext)) => format!("{root}{rel}.{ext}"),
        None => format!("src/{rel}.clj"),
    })
}

fn edn_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
