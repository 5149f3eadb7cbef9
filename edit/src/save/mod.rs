//! Whole-file saves: what a mount does when an editor writes a file.
//!
//! A save is parsed (for the writer's alias map), diffed against the stored forms of that file
//! and applied in one transaction. A save that cannot be applied (does not parse, is not UTF-8,
//! holds a NUL byte, a second `ns` form, or an `ns` another file owns) changes nothing but the
//! file's draft: the bytes exactly as written, with the error, readable back until a good save
//! replaces them or they are discarded. Nothing a user typed is lost. A save of a big file that
//! changes one definition is applied to that form alone ([`in_place`]).

mod in_place;

pub use in_place::IN_PLACE_OVER;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use formdb_engine::change::{self, Applied, Change, ChangeSet, Draft};
use formdb_engine::file_text::FileText;
use formdb_engine::forms::{self, Content, ParsedFile};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::read;
use formdb_engine::store::Store;
use formdb_engine::syntax::{Lang, LineIndex};
use formdb_engine::trace::Timings;
use formdb_projector::aliases::AliasMap;
use formdb_projector::views::{self, Render};

use crate::{check_path, EditError, Result};

/// Who writes: the history author and the alias map their views are rendered with.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    pub user: String,
    pub aliases: AliasMap,
    /// Every save takes the whole-file path, never one form's edit ([`in_place`]): what a save
    /// in place must store the same as (the tests compare the two; `examples/big_save`
    /// measures both).
    whole_file_saves: bool,
}

impl Writer {
    /// `bytes` this writer wrote to `path` (having read `base`), kept as a draft with `error`
    /// at `line`:`col`.
    pub(crate) fn draft(
        &self,
        path: &str,
        bytes: &[u8],
        base: Option<&[u8]>,
        error: String,
        line: u32,
        col: u32,
    ) -> Draft {
        Draft {
            path: path.to_string(),
            user: self.user.clone(),
            bytes: bytes.to_vec(),
            error,
            line,
            col,
            base: base.map(<[u8]>::to_vec).unwrap_or_default(),
        }
    }

    pub fn new(user: &str, aliases: AliasMap) -> Writer {
        Writer { user: user.to_string(), aliases, whole_file_saves: false }
    }

    /// This writer with every save taking the whole-file path.
    pub fn saving_whole_files(self) -> Writer {
        Writer { whole_file_saves: true, ..self }
    }

    /// How this writer's files are rendered.
    pub fn render(&self) -> Render {
        if self.aliases.is_empty() {
            Render::AsStored
        } else {
            Render::User(self.aliases.clone())
        }
    }
}

/// What a save did.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Saved {
    /// Applied in one transaction.
    Committed { path: String, applied: Applied },
    /// The text is what the store holds already.
    Unchanged { path: String },
    /// Not applied; kept as a draft with its error. The store is unchanged. The draft's bytes
    /// and base are in the store ([`draft`]), not here.
    Draft { draft: Draft },
    /// Merged with changes the store had taken since the writer read the file: forms changed on
    /// one side took that side; forms changed on both sides kept the store's version, and the
    /// writer's text is kept as a draft with the conflict.
    Conflict { path: String, applied: Applied, draft: Draft },
}

impl Saved {
    /// The draft this save left, if any.
    pub fn draft(&self) -> Option<&Draft> {
        match self {
            Saved::Draft { draft } | Saved::Conflict { draft, .. } => Some(draft),
            _ => None,
        }
    }
}

/// The bytes a reader of `path` sees: its draft if it has one, else the rendered view; `None`
/// if the path is neither stored nor drafted.
pub fn read(store: &Store, path: &str, how: &Render) -> Result<Option<Vec<u8>>> {
    if let Some(d) = draft(store, path)? {
        return Ok(Some(d.bytes));
    }
    match views::render_path(store, path, how) {
        Ok((bytes, _)) => Ok(Some(bytes)),
        Err(views::ViewError::NoFile(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Every path a reader sees: stored files, blobs and drafts of files not stored yet, sorted.
pub fn paths(store: &Store) -> Result<Vec<String>> {
    Ok(read::files::visible_paths(store)?)
}

/// Every draft, by path.
pub fn drafts(store: &Store) -> Result<Vec<Draft>> {
    Ok(read::drafts::stored(store)?)
}

/// The draft of one path.
pub fn draft(store: &Store, path: &str) -> Result<Option<Draft>> {
    Ok(read::drafts::stored_one(store, path)?)
}

/// Drop a path's draft. Returns whether there was one.
pub fn discard_draft(store: &Store, writer: &Writer, path: &str) -> Result<bool> {
    if !read::drafts::exists(store, path)? {
        return Ok(false);
    }
    apply(store, writer, "discard", vec![Change::DropDraft { path: path.to_string() }])?;
    Ok(true)
}

fn apply(store: &Store, writer: &Writer, op: &str, changes: Vec<Change>) -> Result<Applied> {
    let set = ChangeSet { author: writer.user.clone(), op: op.to_string(), changes };
    // Taken: a big save's rows go before the write-back the commit starts reads the file back.
    Ok(change::apply_owned(store, set)?)
}

/// Save `bytes` as the new content of `path`, written by `writer` in their view. `base` is the
/// text the writer read before editing (what a mount served the open handle); when the store
/// changed since, the save is merged per form instead of overwriting what others did.
pub fn save(
    store: &Store,
    writer: &Writer,
    path: &str,
    bytes: &[u8],
    base: Option<&[u8]>,
) -> Result<Saved> {
    // Dozens of queries: run them where Cozo evaluates in place (see `on_worker`).
    formdb_engine::store::on_worker(|| save_here(store, writer, path, bytes, None, base))
}

/// [`save`] of bytes the writer shares: the save's parse reads them where they are instead of
/// copying them (a mount's buffer of a big file, which it keeps to serve the open handle).
pub fn save_shared(
    store: &Store,
    writer: &Writer,
    path: &str,
    bytes: &Arc<Vec<u8>>,
    base: Option<&[u8]>,
) -> Result<Saved> {
    formdb_engine::store::on_worker(|| save_here(store, writer, path, bytes, Some(bytes), base))
}

fn save_here(
    store: &Store,
    writer: &Writer,
    path: &str,
    bytes: &[u8],
    shared: Option<&Arc<Vec<u8>>>,
    base: Option<&[u8]>,
) -> Result<Saved> {
    let path = check_path(path)?;
    let mut trace = Timings::traced(format!("save {path}"));
    // Held from the read of the stored text to the commit: the save is merged per form with
    // what the store holds, and a writer coming in between (an agent's form edit) would have
    // its form written back as it was before.
    let _lock = store.writer()?;
    // Whether there is one, not its bytes: a big file's draft is megabytes.
    let had_draft = read::drafts::exists(store, path)?;
    let Some(lang) = Lang::from_path(path) else {
        return save_blob(store, writer, path, bytes, had_draft);
    };
    let keep =
        |error: String, line: u32, col: u32| writer.draft(path, bytes, base, error, line, col);
    let text = match written_text(bytes) {
        Ok(t) => t,
        Err((error, line, col)) => return keep_draft(store, writer, keep(error, line, col)),
    };
    if !writer.whole_file_saves {
        if let Some(saved) = in_place::save_one_form(store, writer, path, text, base, had_draft)? {
            trace.lap("one form in place");
            return Ok(saved);
        }
    }
    // One parse of the writer's text gives its syntax error and, when that text is what gets
    // stored (no aliases to map back, no merge), the forms checked below: a file of 8,000 lines
    // takes tens of milliseconds to parse.
    let mine_text = match shared.map(|b| FileText::shared(b.clone())) {
        Some(Ok(shared)) => shared,
        _ => FileText::from(text.to_string()),
    };
    let parsed_mine = forms::parse_edited_file(store, path, lang, mine_text);
    if let Content::Raw { error } = &parsed_mine.content {
        let (message, line, col) = (error.message.clone(), error.pos.line, error.pos.col);
        // Its copy of the text goes before the draft makes its own.
        drop(parsed_mine);
        return keep_draft(store, writer, keep(message, line, col));
    }
    trace.lap("parse");

    let stored = match views::stored_text(store, path) {
        Ok(t) => Some(t),
        Err(views::ViewError::NoFile(_)) => None,
        // A stored file that is not text is replaced whole.
        Err(views::ViewError::NotText(_)) => None,
        Err(e) => return Err(e.into()),
    };
    // What the writer's view of the stored file is now, to compare with what they had read.
    // Texts are borrowed where they are the same: a copy of a big file is megabytes.
    let current = stored.as_deref().map(|s| user_text(s, &writer.aliases));
    trace.lap("stored text");
    let mut conflicts = Vec::new();
    let mine: Cow<str> = match (base, &current) {
        (Some(base), Some(current)) if base != current.as_bytes() => {
            match std::str::from_utf8(base).ok().and_then(|b| merge(path, lang, b, current, text)) {
                Some(merged) => {
                    conflicts = merged.conflicts;
                    Cow::Owned(merged.text)
                }
                None => Cow::Borrowed(text),
            }
        }
        _ => Cow::Borrowed(text),
    };
    drop(current);
    let canonical: Cow<str> = match &stored {
        Some(s) if !writer.aliases.is_empty() => {
            Cow::Owned(views::parse_back_text(s, &mine, &writer.aliases))
        }
        _ => mine,
    };

    trace.lap("merge");
    let parsed = if canonical == text {
        parsed_mine
    } else {
        drop(parsed_mine);
        forms::parse_edited_file(store, path, lang, canonical.to_string())
    };
    if let Some(d) = refuse_file(store, &parsed)? {
        let (line, col, error) = d;
        return keep_draft(store, writer, keep(error, line, col));
    }
    trace.lap("checks");
    if stored.as_deref() == Some(&*canonical) && conflicts.is_empty() {
        if had_draft {
            apply(store, writer, "save", vec![Change::DropDraft { path: path.to_string() }])?;
        }
        return Ok(Saved::Unchanged { path: path.to_string() });
    }
    // The stored text is a copy of the file as big as the save: not alive beside its rows.
    drop((stored, canonical));
    let (mut changes, errors) = import::parsed_file_changes(store, vec![parsed], &Quiet)?;
    if let Some(e) = errors.into_iter().find(|e| e.path == path) {
        return keep_draft(store, writer, keep(e.message, e.line, e.col));
    }
    trace.lap("file changes");
    let conflict = (!conflicts.is_empty()).then(|| {
        keep(
            format!(
                "conflict: changed here and in the store since you read the file: {}; the store's version of those forms is kept, your text is this draft",
                conflicts.join(", ")
            ),
            0,
            0,
        )
    });
    match &conflict {
        Some(d) => changes.push(Change::PutDraft(d.clone())),
        None if had_draft => changes.push(Change::DropDraft { path: path.to_string() }),
        None => {}
    }
    let applied = apply(store, writer, "save", changes)?;
    trace.lap("apply");
    Ok(match conflict {
        Some(draft) => Saved::Conflict { path: path.to_string(), applied, draft },
        None => Saved::Committed { path: path.to_string(), applied },
    })
}

/// The writer's view of a stored text.
fn user_text<'s>(stored: &'s str, aliases: &AliasMap) -> Cow<'s, str> {
    if aliases.is_empty() {
        Cow::Borrowed(stored)
    } else {
        Cow::Owned(views::user_view_text(stored, aliases).text)
    }
}

fn keep_draft(store: &Store, writer: &Writer, d: Draft) -> Result<Saved> {
    Ok(Saved::Draft { draft: put_draft(store, writer, d)? })
}

/// Keep `d` as the draft of its path, in a change set of its own. Returns it without its bytes
/// and base, which the store holds now ([`draft`] reads them): they are not copied again for
/// the reply (a 50 MB save's draft is copied several times over on its way into the store).
pub(crate) fn put_draft(store: &Store, writer: &Writer, d: Draft) -> Result<Draft> {
    let kept = Draft {
        path: d.path.clone(),
        user: d.user.clone(),
        bytes: Vec::new(),
        error: d.error.clone(),
        line: d.line,
        col: d.col,
        base: Vec::new(),
    };
    apply(store, writer, "draft", vec![Change::PutDraft(d)])?;
    Ok(kept)
}

/// Written bytes as text, or why they cannot be Clojure source (message, line, column): not
/// UTF-8, or holding a NUL byte.
pub(crate) fn written_text(bytes: &[u8]) -> std::result::Result<&str, (String, u32, u32)> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let valid = e.valid_up_to();
        let pos = LineIndex::new(&String::from_utf8_lossy(&bytes[..valid])).pos(valid);
        (format!("invalid UTF-8 at byte {valid}"), pos.line, pos.col)
    })?;
    match text.find('\0') {
        Some(at) => {
            let pos = LineIndex::new(text).pos(at);
            Err(("a NUL byte".into(), pos.line, pos.col))
        }
        None => Ok(text),
    }
}

fn save_blob(
    store: &Store,
    writer: &Writer,
    path: &str,
    bytes: &[u8],
    had_draft: bool,
) -> Result<Saved> {
    let hash = forms::content_hash(bytes);
    let same = read::files::blob_hash(store, path)?.is_some_and(|stored| stored == hash);
    if same && !had_draft {
        return Ok(Saved::Unchanged { path: path.to_string() });
    }
    let mut changes =
        vec![Change::PutBlob { path: path.to_string(), hash, content: bytes.to_vec() }];
    if had_draft {
        changes.push(Change::DropDraft { path: path.to_string() });
    }
    let applied = apply(store, writer, "save", changes)?;
    Ok(Saved::Committed { path: path.to_string(), applied })
}

/// Why a parsed file may not replace what the store holds: `(line, col, message)`.
fn refuse_file(store: &Store, parsed: &ParsedFile) -> Result<Option<(u32, u32, String)>> {
    let Content::Forms { forms, .. } = &parsed.content else {
        return Ok(None);
    };
    let mut ns_forms = forms.iter().filter(|f| f.analysis.kind.as_str() == "ns");
    let first = ns_forms.next();
    if let Some(second) = ns_forms.next() {
        return Ok(Some((
            second.start.line,
            second.start.col,
            format!(
                "a second `ns` form (the first is on line {}): one file declares one namespace",
                first.map(|f| f.start.line).unwrap_or(0)
            ),
        )));
    }
    if let Some(ns_form) = first.filter(|_| parsed.declares_ns()) {
        let ns = &parsed.decl.name;
        if let Some(file) = read::namespaces::declared_by(store, ns)? {
            if file != parsed.path {
                return Ok(Some((
                    ns_form.start.line,
                    ns_form.start.col,
                    format!(
                        "namespace `{ns}` is already declared by {file}; rename it here or there"
                    ),
                )));
            }
        }
    }
    Ok(None)
}

/// Delete a file (or blob) and its draft. The file's text is kept for [`restore`].
pub fn delete(store: &Store, writer: &Writer, path: &str) -> Result<bool> {
    let path = check_path(path)?;
    let _lock = store.writer()?;
    let mut changes = Vec::new();
    let kind = stored_kind(store, path)?;
    match kind {
        Some(StoredKind::File) => changes.push(Change::DeleteFile { path: path.to_string() }),
        Some(StoredKind::Blob) => changes.push(Change::DeleteBlob { path: path.to_string() }),
        None => {}
    }
    if draft(store, path)?.is_some() {
        changes.push(Change::DropDraft { path: path.to_string() });
    }
    if changes.is_empty() {
        return Ok(false);
    }
    apply(store, writer, "delete", changes)?;
    Ok(true)
}

enum StoredKind {
    File,
    Blob,
}

fn stored_kind(store: &Store, path: &str) -> Result<Option<StoredKind>> {
    if read::files::is_file(store, path)? {
        return Ok(Some(StoredKind::File));
    }
    if read::files::is_blob(store, path)? {
        return Ok(Some(StoredKind::Blob));
    }
    Ok(None)
}

/// Rename a file: its stored content and its draft (either may be missing) move to `to` in one
/// transaction; the moved forms keep their ids. Refused when `to` exists and `replace` is false.
pub fn rename(store: &Store, writer: &Writer, from: &str, to: &str, replace: bool) -> Result<()> {
    let (from, to) = (check_path(from)?, check_path(to)?);
    // The text read here is written at `to`: nothing may change it in between.
    let _lock = store.writer()?;
    let kind = stored_kind(store, from)?;
    let from_draft = draft(store, from)?;
    if kind.is_none() && from_draft.is_none() {
        return Err(EditError::Invalid(format!("no file `{from}` in the store")));
    }
    if !replace && read(store, to, &Render::AsStored)?.is_some() {
        return Err(EditError::Invalid(format!("`{to}` exists already")));
    }
    let mut changes = Vec::new();
    // The stored text moves whatever the draft says: a draft is not the file, and dropping the
    // stored forms would lose their ids.
    let bytes = match kind {
        Some(_) => formdb_engine::query::file_bytes(store, from)?,
        None => None,
    };
    if let Some(bytes) = bytes {
        if Lang::from_path(to).is_some() {
            // `from` goes in the same change set: its vars must not count, it must not be
            // re-resolved as a neighbour of `to`, and `to`'s forms keep its ids.
            let removals = import::Removals {
                removed: vec![from.to_string()],
                moved_from: [(to.to_string(), from.to_string())].into(),
            };
            let incoming = vec![Incoming { path: to.to_string(), bytes }];
            let (more, errors) =
                import::file_changes_with_removals(store, incoming, &removals, &Quiet)?;
            if let Some(e) = errors.first() {
                return Err(EditError::Invalid(format!(
                    "{}:{}:{}: {}",
                    e.path, e.line, e.col, e.message
                )));
            }
            changes.extend(more);
        } else {
            let hash = forms::content_hash(&bytes);
            changes.push(Change::PutBlob { path: to.to_string(), hash, content: bytes });
        }
    }
    if let Some(mut d) = from_draft {
        changes.push(Change::DropDraft { path: from.to_string() });
        d.path = to.to_string();
        changes.push(Change::PutDraft(d));
    } else if draft(store, to)?.is_some() {
        changes.push(Change::DropDraft { path: to.to_string() });
    }
    match kind {
        Some(StoredKind::File) => changes.push(Change::DeleteFile { path: from.to_string() }),
        Some(StoredKind::Blob) => changes.push(Change::DeleteBlob { path: from.to_string() }),
        None => {}
    }
    match (kind, stored_kind(store, to)?) {
        // Only a draft moves (`from` was never stored, or did not parse): what is stored at
        // `to` goes, as a rename over a file on a disk replaces it. Left there, the draft stood
        // over `to`'s old forms, and the next save of `to` was merged with them.
        (None, Some(StoredKind::File)) => changes.push(Change::DeleteFile { path: to.to_string() }),
        (None, Some(StoredKind::Blob)) => changes.push(Change::DeleteBlob { path: to.to_string() }),
        // A Clojure file renamed to a non-Clojure name (or back) changes which table holds it.
        (Some(_), Some(StoredKind::File)) if Lang::from_path(to).is_none() => {
            changes.push(Change::DeleteFile { path: to.to_string() })
        }
        _ => {}
    }
    apply(store, writer, "rename", changes)?;
    Ok(())
}

/// Rename a directory: every stored file, blob and draft under `from/` moves to the same place
/// under `to/`, all in one change set, so the moved files are not re-resolved as neighbours of
/// each other's old paths and their forms keep their ids (`import::Removals`). A file stored as
/// raw text (it did not parse) moves as raw text; a file with a draft moves with its draft.
/// Returns the moved paths, old → new. Refused, with nothing changed, when `to` is `from` or
/// inside it, when nothing is stored under `from/`, or when a path under `to/` exists.
pub fn rename_dir(
    store: &Store,
    writer: &Writer,
    from: &str,
    to: &str,
) -> Result<Vec<(String, String)>> {
    let (from, to) = (check_path(from)?, check_path(to)?);
    // The texts read here are written under `to/`: nothing may change them in between.
    let _lock = store.writer()?;
    if to == from || to.starts_with(&format!("{from}/")) {
        return Err(EditError::Invalid(format!(
            "cannot move directory `{from}` into itself (`{to}`)"
        )));
    }
    let prefix = format!("{from}/");
    let under = |paths: Vec<String>| -> Vec<String> {
        paths.into_iter().filter(|p| p.starts_with(&prefix)).collect()
    };
    let files = under(read::files::file_paths(store)?);
    let blobs = under(read::files::blob_paths(store)?);
    let drafted = under(read::drafts::paths(store)?);
    let new_path = |p: &str| format!("{to}/{}", &p[prefix.len()..]);
    let mut moved: Vec<(String, String)> =
        files.iter().chain(&blobs).chain(&drafted).map(|p| (p.clone(), new_path(p))).collect();
    moved.sort();
    moved.dedup();
    if moved.is_empty() {
        return Err(EditError::Invalid(format!("nothing is stored under `{from}/`")));
    }
    for (_, new) in &moved {
        if stored_kind(store, new)?.is_some() || draft(store, new)?.is_some() {
            return Err(EditError::Invalid(format!(
                "`{new}` exists already: move or delete it first"
            )));
        }
    }

    // The files' stored text (not their drafts: a draft moves as a draft) at the new paths,
    // with the old paths removed in the same change set.
    let mut incoming = Vec::new();
    let mut removals = import::Removals::default();
    for old in &files {
        let bytes = formdb_engine::query::file_bytes(store, old)?.unwrap_or_default();
        let new = new_path(old);
        removals.removed.push(old.clone());
        removals.moved_from.insert(new.clone(), old.clone());
        incoming.push(Incoming { path: new, bytes });
    }
    // Errors are files stored raw before the move: they move raw, as they were.
    let (mut changes, _raw) =
        import::file_changes_with_removals(store, incoming, &removals, &Quiet)?;
    for old in &files {
        changes.push(Change::DeleteFile { path: old.clone() });
    }
    for old in &blobs {
        let content = formdb_engine::query::file_bytes(store, old)?.unwrap_or_default();
        let hash = forms::content_hash(&content);
        changes.push(Change::PutBlob { path: new_path(old), hash, content });
        changes.push(Change::DeleteBlob { path: old.clone() });
    }
    for old in &drafted {
        if let Some(mut d) = draft(store, old)? {
            changes.push(Change::DropDraft { path: old.clone() });
            d.path = new_path(old);
            changes.push(Change::PutDraft(d));
        }
    }
    apply(store, writer, "rename", changes)?;
    Ok(moved)
}

/// Bring back the last deleted text of `path`.
pub fn restore(store: &Store, writer: &Writer, path: &str) -> Result<Saved> {
    let path = check_path(path)?;
    let Some(text) = read::files::last_deleted_text(store, path)? else {
        return Err(EditError::Invalid(format!("`{path}` was never deleted: nothing to restore")));
    };
    if stored_kind(store, path)?.is_some() {
        return Err(EditError::Invalid(format!(
            "`{path}` exists; delete or rename it before restoring its old text"
        )));
    }
    // The tomb holds the as-stored text, so it is saved without any alias mapping.
    let as_stored = Writer { aliases: AliasMap::default(), ..writer.clone() };
    save(store, &as_stored, path, &text, None)
}

// ---------------------------------------------------------------------------------------------
// Per-form three-way merge

struct Merged {
    text: String,
    conflicts: Vec<String>,
}

/// A top-level form of a text as per-form merges see it: the identity it is matched by, and its
/// text (leading trivia included). Shared by the mount's merges here and the directory sync's.
pub struct Piece {
    /// Kind, name and dispatch value (unnamed forms: their text), numbered within the text so
    /// that a redefinition is told apart by its order.
    pub key: String,
    /// The var name (empty for unnamed forms) and the form's first line, to name it in reports.
    pub name: String,
    pub line: usize,
    pub text: String,
}

impl Piece {
    fn label(&self) -> String {
        if self.name.is_empty() {
            format!("line {}", self.line)
        } else {
            format!("`{}` (line {})", self.name, self.line)
        }
    }
}

/// The top-level forms of `text` and its trailing trivia; `None` when it does not parse.
pub fn pieces(path: &str, lang: Lang, text: &str) -> Option<(Vec<Piece>, String)> {
    let parsed = forms::parse_file_bounded(path, lang, text.to_string());
    let Content::Forms { forms, trailing } = parsed.content else {
        return None;
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    let out = forms
        .into_iter()
        .map(|f| {
            let a = &f.analysis;
            let base = if a.name.is_empty() {
                format!("text:{}", f.source.trim())
            } else {
                format!("{}:{}:{}", a.kind.as_str(), a.name, a.dispatch)
            };
            let n = seen.entry(base.clone()).or_default();
            *n += 1;
            Piece {
                key: format!("{base}#{n}"),
                name: a.name.to_string(),
                line: f.start.line as usize,
                text: format!("{}{}", f.leading, f.source),
            }
        })
        .collect();
    Some((out, trailing))
}

/// Whether two texts of one form (a [`Piece`]'s) are the same: the whitespace before a form is
/// not a change of it (deleting its neighbour leaves more or fewer blank lines before it), a
/// comment before it is.
pub fn same_form_text(a: &str, b: &str) -> bool {
    a.trim_start() == b.trim_start()
}

/// Merge `mine` (the writer's text, edited from `base`) with `current` (the store's text now,
/// in the writer's view), form by form.
fn merge(path: &str, lang: Lang, base: &str, current: &str, mine: &str) -> Option<Merged> {
    let (base, _) = pieces(path, lang, base)?;
    let (current, _) = pieces(path, lang, current)?;
    let (mine, trailing) = pieces(path, lang, mine)?;
    let base_text: HashMap<&str, &str> =
        base.iter().map(|p| (p.key.as_str(), p.text.as_str())).collect();
    let current_text: HashMap<&str, &str> =
        current.iter().map(|p| (p.key.as_str(), p.text.as_str())).collect();
    let mine_keys: HashSet<&str> = mine.iter().map(|p| p.key.as_str()).collect();
    let mut conflicts = Vec::new();
    let mut out: Vec<(String, String)> = Vec::new();
    for p in &mine {
        let key = p.key.as_str();
        let text = match (base_text.get(key), current_text.get(key)) {
            (Some(b), Some(c)) if same_form_text(b, &p.text) => c.to_string(),
            (Some(b), Some(c)) if same_form_text(b, c) || same_form_text(c, &p.text) => {
                p.text.clone()
            }
            (Some(_), Some(c)) => {
                conflicts.push(p.label());
                c.to_string()
            }
            // Deleted in the store since: gone unless the writer changed it too.
            (Some(b), None) if same_form_text(b, &p.text) => continue,
            (Some(_), None) => {
                conflicts.push(p.label());
                continue;
            }
            (None, Some(c)) if !same_form_text(c, &p.text) => {
                conflicts.push(p.label());
                c.to_string()
            }
            (None, _) => p.text.clone(),
        };
        out.push((p.key.clone(), text));
    }
    // Forms the store gained, and forms the writer deleted but the store changed, go after the
    // form that precedes them in the store's text.
    for (i, c) in current.iter().enumerate() {
        let key = c.key.as_str();
        if mine_keys.contains(key) {
            continue;
        }
        let keep = match base_text.get(key) {
            None => true,
            Some(b) if !same_form_text(b, &c.text) => {
                conflicts.push(c.label());
                true
            }
            Some(_) => false,
        };
        if !keep {
            continue;
        }
        let after =
            current[..i].iter().rev().find_map(|prev| out.iter().position(|(k, _)| *k == prev.key));
        let at = after.map(|a| a + 1).unwrap_or(0);
        out.insert(at, (c.key.clone(), c.text.clone()));
    }
    let mut text: String = out.into_iter().map(|(_, t)| t).collect();
    text.push_str(&trailing);
    Some(Merged { text, conflicts })
}
