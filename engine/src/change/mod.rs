//! The one write path: a [`ChangeSet`] applied in one transaction, with a version row for every
//! form whose text changed (added, edited or deleted).
//!
//! Callers describe the new state of whole files (their forms with ids already assigned by
//! `identity`); `apply` compares with what is stored and writes only the difference. Nothing is
//! written if any step fails.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use compact_str::CompactString;
use cozo::DataValue;

use crate::forms::Call;
use crate::nsdecl::NsDecl;
use crate::sites::Site;
use crate::store::{cstr_at, int_at, Result, Store};
use crate::syntax::Pos;

mod diagnose;
mod rows;
mod write;
mod written;

use rows::strs_of;
pub use rows::{form_from_row, FORM_COLS};
pub(crate) use rows::{query_in_parts, KEYS_PER_QUERY};
pub(crate) use written::Written;

/// A form as stored.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FormRow {
    pub id: CompactString,
    pub file: CompactString,
    pub ns: CompactString,
    pub pos: i64,
    /// Id of the enclosing `(comment ...)` block, or empty for top-level forms.
    pub parent: CompactString,
    pub kind: CompactString,
    pub head: CompactString,
    pub name: CompactString,
    /// `ns/name` when the form defines a var, else empty.
    pub fqn: CompactString,
    pub dispatch: CompactString,
    pub doc: CompactString,
    pub arglists: Vec<String>,
    pub leading: CompactString,
    pub source: String,
    /// The source with aliases written fully qualified; empty where it is the source (four
    /// forms in five), here as in the store: a big save holds each text once
    /// ([`FormRow::canonical()`]).
    pub canonical: String,
    pub start: Pos,
    pub end: Pos,
    pub hash: CompactString,
    pub private: bool,
    pub dynamic: bool,
    pub deprecated: bool,
    pub test: bool,
    pub export: bool,
    pub macro_: bool,
    pub platforms: Vec<String>,
    pub purity: CompactString,
    /// Hash of what resolution derived (canonical text, calls, unresolved symbols, defines):
    /// a form whose text is unchanged is still rewritten when this changes.
    pub rhash: CompactString,
    #[serde(skip)]
    pub calls: Vec<Call>,
    #[serde(skip)]
    pub unresolved: Vec<(String, Pos)>,
    /// Fully-qualified vars this form defines, with their lines.
    #[serde(skip)]
    pub defines: Vec<(CompactString, u32)>,
    /// Its calls as the diagnostics check them (top-level forms only).
    #[serde(skip)]
    pub sites: Sites,
}

/// A form's call sites: as resolution found them, or held as the `sites` column stores them
/// ([`crate::sites::stored`]: lines from the form's first, vars by their place among its
/// callees), a tenth of the memory. A big file's rows hold them stored: a save holds every
/// form's row until the change is written (a fifth of a 5 MB save's peak were its sites).
/// Other rows keep them found: an import's diagnostics read every form's sites, and decoding
/// them took 4% of its time.
#[derive(Clone, Debug, PartialEq)]
pub enum Sites {
    Found(Vec<Site>),
    Stored(String),
}

impl Default for Sites {
    fn default() -> Sites {
        Sites::Found(Vec::new())
    }
}

impl FormRow {
    /// Its canonical text: the source with aliases written fully qualified.
    pub fn canonical(&self) -> &str {
        if self.canonical.is_empty() {
            &self.source
        } else {
            &self.canonical
        }
    }

    /// Its call sites, on lines of its file.
    pub fn call_sites(&self) -> Cow<'_, [Site]> {
        match &self.sites {
            Sites::Found(sites) => Cow::Borrowed(sites),
            Sites::Stored(column) => {
                Cow::Owned(crate::sites::from_stored(column, self.start.line, &self.callees()))
            }
        }
    }

    /// Its call sites as its `sites` column stores them.
    pub fn stored_sites(&self) -> Cow<'_, str> {
        match &self.sites {
            Sites::Found(sites) => {
                Cow::Owned(crate::sites::stored(sites, self.start.line, &self.callees()))
            }
            Sites::Stored(column) => Cow::Borrowed(column),
        }
    }

    fn callees(&self) -> Vec<&str> {
        self.calls.iter().map(|c| c.to.as_str()).collect()
    }
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
    /// their `form` row, so `apply` refuses the change ([`crate::store::StoreError::Moved`])
    /// unless the store is still at `generation`, the one they were read at.
    PutForms {
        file: FileRow,
        forms: Vec<FormRow>,
        generation: u64,
        /// The file's whole new text, packed ([`crate::packed`]), where it is short enough to
        /// keep whole ([`FILE_TEXT_MAX`]); `None` drops the file's kept text. Packed by the
        /// caller, which holds the text already: a copy of a big file's text would be most of
        /// its edit's memory.
        text: Option<Vec<u8>>,
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

/// The longest file text kept whole in `file_text` (packed, about a quarter of it): Cozo copies
/// a value several times over as it writes it. A longer file is read from its forms' rows, a
/// point read each (a 5 MB file of 45,859 forms: 0.24 s, against 0.08 s kept whole).
pub const FILE_TEXT_MAX: usize = 8 << 20;

/// Relations only `apply` itself writes: a [`Change::Bookkeeping`] naming one is refused.
const MODEL_RELATIONS: &[&str] = &[
    "meta",
    "file",
    "blob",
    "form",
    "form_at",
    "file_text",
    "defines",
    "defined_by",
    "calls",
    "unresolved",
    "diagnostic",
    "version",
    "version_commit",
    "purity_rule",
    "ns_decl",
    "ns_refer",
    "ns_require",
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

impl Applied {
    /// Count `other`'s forms too (an import written in several transactions).
    pub fn add(&mut self, other: &Applied) {
        self.added += other.added;
        self.changed += other.changed;
        self.removed += other.removed;
        self.unchanged += other.unchanged;
        self.moved += other.moved;
        self.versions += other.versions;
        self.decls += other.decls;
    }
}

#[derive(Clone, Debug)]
pub(crate) struct OldForm {
    pub(crate) rhash: CompactString,
    pub(crate) ns: CompactString,
    pub(crate) hash: CompactString,
    pub(crate) pos: i64,
    pub(crate) line: i64,
    pub(crate) col: i64,
    pub(crate) parent: CompactString,
    pub(crate) purity: CompactString,
    pub(crate) file: CompactString,
    /// What its callers' checks depend on.
    pub(crate) sig: Sig,
}

/// What the checks of a var's callers depend on (its arglists, macro-ness, kind, platforms and
/// purity), as a digest: it is only compared, and a big save's stored forms each held it as a
/// list of Cozo values (about 300 bytes a form, a twentieth of a second save's peak).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sig([u8; 16]);

impl Sig {
    pub(crate) fn of<'a>(
        arglists: impl IntoIterator<Item = &'a str>,
        macro_: bool,
        kind: &str,
        platforms: impl IntoIterator<Item = &'a str>,
        purity: &str,
    ) -> Sig {
        let mut h = blake3::Hasher::new();
        // Each list item and text ends in a NUL, which none holds; each list ends in a 1.
        let list = |h: &mut blake3::Hasher, items: &mut dyn Iterator<Item = &'a str>| {
            for item in items {
                h.update(item.as_bytes());
                h.update(&[0]);
            }
            h.update(&[1]);
        };
        list(&mut h, &mut arglists.into_iter());
        h.update(&[u8::from(macro_)]);
        h.update(kind.as_bytes());
        h.update(&[0]);
        list(&mut h, &mut platforms.into_iter());
        h.update(purity.as_bytes());
        let mut digest = [0; 16];
        digest.copy_from_slice(&h.finalize().as_bytes()[..16]);
        Sig(digest)
    }
}

/// Columns of `form` an [`OldForm`] is read from, in [`OldForm::from_row`]'s order.
pub(crate) const OLD_FORM_COLS: &str =
    "id, hash, pos, line, col, parent, purity, file, ns, rhash, arglists, macro, kind, platforms";
/// The same less `file` and `pos`, for a `*form{...}` atom joined to `*form_at{file, pos, id}`:
/// naming them in both atoms makes Cozo scan `form` instead of looking each id up.
pub(crate) const OLD_FORM_ATOM: &str =
    "id, hash, line, col, parent, purity, ns, rhash, arglists, macro, kind, platforms";

impl OldForm {
    /// From a row selected with [`OLD_FORM_COLS`] (its id first).
    pub(crate) fn from_row(r: &[DataValue]) -> OldForm {
        OldForm {
            hash: cstr_at(r, 1),
            pos: int_at(r, 2),
            line: int_at(r, 3),
            col: int_at(r, 4),
            parent: cstr_at(r, 5),
            purity: cstr_at(r, 6),
            file: cstr_at(r, 7),
            ns: cstr_at(r, 8),
            rhash: cstr_at(r, 9),
            sig: Sig::of(
                strs_of(&r[10]),
                r[11].get_bool().unwrap_or(false),
                r[12].get_str().unwrap_or_default(),
                strs_of(&r[13]),
                r[6].get_str().unwrap_or_default(),
            ),
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

/// [`apply`] taking the change set: its rows are dropped before the store's after-commit hook
/// runs (a write-back to the directory, which reads the files written back from the store), so
/// that a big save's rows and its write-back are never in memory together. Once a big change
/// set is dropped, the process's [`on_big_change_dropped`] function runs first.
pub fn apply_owned(store: &Store, mut set: ChangeSet) -> Result<Applied> {
    // Measured only where something runs for a big set (the commands that stay up).
    let dropped = BIG_CHANGE_DROPPED.get().filter(|_| text_bytes(&set) >= BIG_CHANGE_BYTES);
    // Drafts' and blobs' bytes move into their rows (a big draft is not copied once more).
    let payloads = write::Payloads::take(&mut set);
    let applied =
        write::apply_locked(store, &set, &Stamp::default(), write::CHUNKS, &mut None, payloads)?;
    drop(set);
    if let Some(dropped) = dropped {
        dropped();
    }
    store.committed();
    Ok(applied)
}

/// A change set carrying this much text (forms, drafts, blobs) is big: its rows are tens of
/// bytes a byte of it.
const BIG_CHANGE_BYTES: usize = 1 << 20;

static BIG_CHANGE_DROPPED: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Run `dropped` whenever [`apply_owned`] has dropped a big change set, before the store's
/// after-commit hook: the binary, which owns the allocator, gives the freed memory back there.
/// A big save's rows are freed in many small blocks that the allocator keeps, and the
/// write-back that follows (the file's text rendered, written, kept as the merge base) takes
/// big ones anew on top of them: a 5 MB save of real code through the mount peaked 17 MB
/// higher. Set once per process; later calls change nothing.
pub fn on_big_change_dropped(dropped: fn()) {
    let _ = BIG_CHANGE_DROPPED.set(dropped);
}

/// The text a change set carries, in bytes.
fn text_bytes(set: &ChangeSet) -> usize {
    set.changes
        .iter()
        .map(|c| match c {
            Change::PutFile { forms, file, .. } | Change::PutForms { forms, file, .. } => {
                // An in-place edit also carries the file's text, packed.
                let kept = match c {
                    Change::PutForms { text: Some(text), .. } => text.len(),
                    _ => 0,
                };
                file.raw.len()
                    + kept
                    + forms.iter().map(|f| f.source.len() + f.canonical.len()).sum::<usize>()
            }
            Change::PutBlob { content, .. } => content.len(),
            Change::PutDraft(d) => d.bytes.len() + d.base.len(),
            _ => 0,
        })
        .sum()
}

/// [`apply`] with its versions recorded at another time, or as a git commit's.
pub fn apply_at(store: &Store, set: &ChangeSet, stamp: &Stamp) -> Result<Applied> {
    apply_with(store, set, stamp, write::CHUNKS, &mut None)
}

/// [`apply_at`], a change writing more than `forms_per_chunk` forms writing their rows that
/// many at a time, and its other rows that many of a relation at a time (still in one
/// transaction). For tests, which compare small chunks with one.
#[doc(hidden)]
pub fn apply_in_chunks_of(
    store: &Store,
    set: &ChangeSet,
    stamp: &Stamp,
    forms_per_chunk: usize,
) -> Result<Applied> {
    let chunks =
        write::Chunks { above: forms_per_chunk, size: forms_per_chunk, rows: forms_per_chunk };
    apply_with(store, set, stamp, chunks, &mut None)
}

fn apply_with(
    store: &Store,
    set: &ChangeSet,
    stamp: &Stamp,
    chunks: write::Chunks,
    written: &mut Option<Written>,
) -> Result<Applied> {
    let applied =
        write::apply_locked(store, set, stamp, chunks, written, write::Payloads::default())?;
    store.committed();
    Ok(applied)
}

/// [`apply`] for a batch of an import into a store that was empty (`written`, see [`Written`]):
/// keys the import has not written are not looked up, and `written` grows by the batch.
pub(crate) fn apply_importing(
    store: &Store,
    set: &ChangeSet,
    written: &mut Option<Written>,
) -> Result<Applied> {
    apply_with(store, set, &Stamp::default(), write::CHUNKS, written)
}
