//! Turning source text into change sets: a whole directory (`import_dir`), or single files whose
//! new text arrives from elsewhere (`file_changes`, used by saves).
//!
//! Steps: read and hash (unchanged files are skipped), parse in parallel, build the namespace
//! tables from the store plus the new files, resolve in parallel, match identities against the
//! stored forms of each file, classify purity, and hand one `ChangeSet` to `change::apply`.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use cozo::DataValue;
use rayon::prelude::*;

use crate::analyze::Kind;
use crate::change::{
    self, Applied, Change, ChangeSet, FileRow, FormRow, StoredForms, Written, KEYS_PER_QUERY,
};
use crate::forms::{self, Namespaces, ParsedFile, ParsedForm, Resolved};
use crate::identity::{self, Key};
use crate::nsdecl::NsDecl;
use crate::paths::SKIP_DIRS;
use crate::purity::{self, Purity};
use crate::store::{column, int_at, params, str_at, Result, Store, StoreError};
use crate::syntax::{Lang, LineIndex, SyntaxError};
use crate::trace::Timings;

mod batches;
mod classes;
mod dependents;
mod in_place;
mod rows;
mod tables;
mod walk;

pub use batches::{import_dir, import_dir_in_batches, IMPORT_BATCH_FILES};
use classes::*;
use dependents::*;
pub use in_place::form_in_place;
use rows::*;
use tables::*;
pub use tables::{known_namespaces, namespace_tables};
pub use walk::walk;

/// Progress events for a front end to show.
pub trait Progress: Sync {
    fn start(&self, _phase: &str, _total: u64) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}

/// No progress display.
pub struct Quiet;

impl Progress for Quiet {}

/// A file that did not parse, with the place of the error.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FileError {
    pub path: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: {}", self.path, self.line, self.col, self.message)
    }
}

/// What an import did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ImportSummary {
    pub files_added: usize,
    pub files_changed: usize,
    pub files_removed: usize,
    pub files_unchanged: usize,
    pub blobs: usize,
    pub forms: Applied,
    pub errors: Vec<FileError>,
    /// Wall time per phase, in milliseconds, in order.
    pub timings: Vec<(String, f64)>,
}

/// A file's new content, as read from disk or written by a user.
pub struct Incoming {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// Build the changes for new texts of Clojure files, resolved against the store. Files that
/// don't parse become raw files carrying their error.
pub fn file_changes(
    store: &Store,
    incoming: Vec<Incoming>,
    progress: &dyn Progress,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    file_changes_with_removals(store, incoming, &Removals::default(), progress)
}

/// Stored files that go away in the same change set as some new texts. Their definitions no
/// longer count when the new texts are resolved, and they are never re-resolved as dependents
/// (which would put them back). The caller adds their `Change::DeleteFile`s.
#[derive(Debug, Default)]
pub struct Removals {
    /// Paths removed from the store.
    pub removed: Vec<String>,
    /// New path → removed path it was moved from: its forms keep the old file's ids.
    pub moved_from: HashMap<String, String>,
}

/// [`file_changes`] for texts that arrive together with removals (a file moved or renamed, a
/// checkout that deletes some files and edits others).
pub fn file_changes_with_removals(
    store: &Store,
    incoming: Vec<Incoming>,
    removals: &Removals,
    progress: &dyn Progress,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    let mut timings = Timings::traced("file changes");
    file_changes_timed(store, incoming, removals, progress, &mut timings)
}

/// [`file_changes_with_removals`] that leaves the stored files depending on these as they are
/// (their resolution may go stale): for a walk through git history, which records only text
/// and ends by resolving every file again ([`crate::history`]).
pub fn file_changes_leaving_dependents(
    store: &Store,
    incoming: Vec<Incoming>,
    removals: &Removals,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    let mut timings = Timings::traced("file changes");
    let (mut parsed, raw_bytes) = parse_all(incoming, &Quiet);
    let paths = replaced_paths(&parsed, removals);
    let replaced: HashSet<&str> = paths.iter().map(String::as_str).collect();
    resolve_and_build(
        store,
        &mut parsed,
        raw_bytes,
        &replaced,
        removals,
        None,
        &Quiet,
        &mut timings,
    )
}

fn file_changes_timed(
    store: &Store,
    incoming: Vec<Incoming>,
    removals: &Removals,
    progress: &dyn Progress,
    timings: &mut Timings,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    let (parsed, raw_bytes) = parse_all(incoming, progress);
    timings.lap("parse+analyze");
    changes_of_parsed(store, parsed, raw_bytes, removals, progress, timings)
}

/// [`file_changes`] for file texts the caller has parsed already (a save parses the text it
/// checks): each text is parsed once.
pub fn parsed_file_changes(
    store: &Store,
    parsed: Vec<ParsedFile>,
    progress: &dyn Progress,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    let mut timings = Timings::traced("file changes");
    let raw_bytes = parsed.iter().map(|_| None).collect();
    changes_of_parsed(store, parsed, raw_bytes, &Removals::default(), progress, &mut timings)
}

fn changes_of_parsed(
    store: &Store,
    mut parsed: Vec<ParsedFile>,
    mut raw_bytes: Vec<Option<Vec<u8>>>,
    removals: &Removals,
    progress: &dyn Progress,
    timings: &mut Timings,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    // Files elsewhere whose symbols may resolve differently now are re-read from the store and
    // resolved again (their text is unchanged, so only resolution rows can change).
    let dependents = dependent_files(store, &parsed, &removals.removed)?;
    if !dependents.is_empty() {
        let (more, more_raw) = parse_all(dependents, &Quiet);
        parsed.extend(more);
        raw_bytes.extend(more_raw);
        timings.lap("parse dependents");
    }
    let paths = replaced_paths(&parsed, removals);
    let replaced: HashSet<&str> = paths.iter().map(String::as_str).collect();
    resolve_and_build(store, &mut parsed, raw_bytes, &replaced, removals, None, progress, timings)
}

/// The paths whose stored forms a change replaces: the parsed files' and the removed ones'.
/// Owned, as the parsed files' forms are taken out of them as their rows are built.
fn replaced_paths(parsed: &[ParsedFile], removals: &Removals) -> Vec<String> {
    parsed.iter().map(|f| f.path.clone()).chain(removals.removed.iter().cloned()).collect()
}

/// Parse new file texts in parallel. Invalid UTF-8 can't be a `String`: those files keep their
/// bytes beside the parse result. A big text is read in runs, as a save reads it
/// ([`forms::parse_file_bounded`]).
fn parse_all(
    incoming: Vec<Incoming>,
    progress: &dyn Progress,
) -> (Vec<ParsedFile>, Vec<Option<Vec<u8>>>) {
    progress.start("parsing", incoming.len() as u64);
    let (parsed, raw_bytes): (Vec<ParsedFile>, Vec<Option<Vec<u8>>>) = incoming
        .into_par_iter()
        .map(|inc| {
            let lang = Lang::from_path(&inc.path).unwrap_or(Lang::Clj);
            progress.inc(1);
            match String::from_utf8(inc.bytes) {
                Ok(text) => (forms::parse_file_bounded(&inc.path, lang, text), None),
                Err(e) => {
                    let valid = e.utf8_error().valid_up_to();
                    let bytes = e.into_bytes();
                    let prefix = String::from_utf8_lossy(&bytes[..valid]).into_owned();
                    let pos = LineIndex::new(&prefix).pos(valid);
                    let error =
                        SyntaxError { pos, message: format!("invalid UTF-8 at byte {valid}") };
                    let hash = forms::content_hash(&bytes);
                    let pf = ParsedFile::raw(&inc.path, lang, String::new(), hash, error);
                    (pf, Some(bytes))
                }
            }
        })
        .unzip();
    progress.finish();
    (parsed, raw_bytes)
}

// `batched`: the ids given out so far and the batch's resolution (against the whole tree's
// namespace tables), for one batch of an import. The parsed files' forms are taken out of them
// as their rows are built.
#[allow(clippy::too_many_arguments)]
fn resolve_and_build<'s>(
    store: &'s Store,
    parsed: &mut [ParsedFile],
    mut raw_bytes: Vec<Option<Vec<u8>>>,
    replaced: &HashSet<&str>,
    removals: &Removals,
    batched: Option<Batched<'_, 's>>,
    progress: &dyn Progress,
    timings: &mut Timings,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    // Read first: what is read below is of this generation or a later one, never an earlier.
    let generation = crate::query::generation(store)?;
    let (built, mut own_taken);
    let mut known = None;
    let (taken, resolved): (_, Vec<Resolution>) = match batched {
        Some(Batched { taken, resolved, written }) => {
            known = Written::if_at(written, generation);
            (taken, resolved.into_iter().map(Resolution::Made).collect())
        }
        None => {
            built = namespace_tables(store, parsed, replaced, Some(generation))?;
            timings.lap("namespace tables");
            own_taken = TakenIds::new(store);
            progress.start("resolving", parsed.len() as u64);
            // A big file is resolved a chunk at a time as its rows are built (`form_rows`).
            let resolved: Vec<Resolution> = parsed
                .par_iter()
                .map(|f| {
                    let r = match forms::resolved_in_chunks(f) {
                        Some(chunk) => Resolution::InChunks(&built, chunk),
                        None => Resolution::Made(forms::resolve_file(f, &built)),
                    };
                    progress.inc(1);
                    r
                })
                .collect();
            progress.finish();
            timings.lap("resolve");
            (&mut own_taken, resolved)
        }
    };

    let mut old = old_forms(store, replaced)?;
    let mut moves = movable_forms(parsed, &old, removals);
    read_needed_sources(store, parsed, &mut old, &moves, removals)?;
    timings.lap("load stored forms");

    let mut errors = Vec::new();
    let mut changes = Vec::new();
    let mut all_rows: Vec<(usize, Vec<FormRow>)> = Vec::new();
    // Each file's parse and resolution move into its rows (a save of many small forms would
    // otherwise hold all three, kilobytes a form).
    for (fi, (file, res)) in parsed.iter_mut().zip(resolved).enumerate() {
        let raw = raw_bytes[fi].take();
        // `ns_decl` names the one file that declares a namespace; `in-ns` files share it.
        let decl =
            (!file.decl.name.is_empty() && file.declares_ns()).then(|| Box::new(file.decl.clone()));
        let (row, forms) = match &mut file.content {
            forms::Content::Raw { error } => {
                errors.push(FileError {
                    path: file.path.clone(),
                    line: error.pos.line,
                    col: error.pos.col,
                    message: error.message.clone(),
                });
                let raw = raw.unwrap_or_else(|| file.text.as_bytes().to_vec());
                (
                    FileRow {
                        path: file.path.clone(),
                        lang: file.lang.as_str().into(),
                        ns: String::new(),
                        hash: file.hash.clone(),
                        trailing: String::new(),
                        error: Some(error.clone()),
                        raw,
                    },
                    Vec::new(),
                )
            }
            forms::Content::Forms { forms, trailing } => {
                let trailing = trailing.clone();
                let forms = std::mem::take(forms);
                let file = &*file;
                let olds = old
                    .get(file.path.as_str())
                    .or_else(|| old.get(removals.moved_from.get(&file.path)?.as_str()))
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let rows = form_rows(file, forms, res, olds, &mut moves, taken);
                (
                    FileRow {
                        path: file.path.clone(),
                        lang: file.lang.as_str().into(),
                        ns: file.ns.clone(),
                        hash: file.hash.clone(),
                        trailing,
                        error: None,
                        raw: Vec::new(),
                    },
                    rows,
                )
            }
        };
        all_rows.push((fi, forms));
        changes.push(Change::PutFile { file: row, forms: Vec::new(), decl });
    }
    taken.check()?;
    timings.lap("identity");
    let (purity, stale) = purity_of_rows(store, &all_rows, replaced, &old, known)?;
    let mut purity = purity.into_iter();
    for (fi, mut rows) in all_rows {
        for r in rows.iter_mut() {
            let p = purity.next().unwrap_or(Purity::Unknown);
            r.purity = p.as_str().into();
        }
        if let Change::PutFile { forms, .. } = &mut changes[fi] {
            *forms = rows;
        }
    }
    if !stale.is_empty() {
        changes.push(Change::SetPurity { rows: stale });
    }
    changes.push(Change::Read(Box::new(stored_forms(generation, replaced, old))));
    timings.lap("purity");
    Ok((changes, errors))
}

/// A batch of a streamed import, resolved already: the ids given out so far, its files'
/// resolutions, and what the import wrote before it into a store that was empty.
struct Batched<'a, 's> {
    taken: &'a mut TakenIds<'s>,
    resolved: Vec<Vec<Resolved>>,
    written: Option<&'a Written>,
}

/// A file's resolution as its rows are built: made already, or made a chunk of forms at a
/// time with the rows ([`forms::resolved_in_chunks`]).
enum Resolution<'n> {
    Made(Vec<Resolved>),
    /// To be resolved against these tables, this many top-level forms at a time.
    InChunks(&'n Namespaces, usize),
}
