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
    self, Applied, Change, ChangeSet, FileRow, FormRow, StoredForms, KEYS_PER_QUERY,
};
use crate::forms::{self, Namespaces, ParsedFile, ParsedForm, Resolved};
use crate::identity::{self, Key};
use crate::nsdecl::NsDecl;
use crate::paths::SKIP_DIRS;
use crate::purity::{self, Purity};
use crate::store::{column, int_at, params, str_at, Result, Store, StoreError};
use crate::syntax::{Lang, LineIndex, SyntaxError};
use crate::trace::Timings;

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

/// Import (or re-import) the tree under `root`: files are stored under their path relative to
/// `root`; files gone from the tree are removed from the store.
pub fn import_dir(
    store: &Store,
    root: &Path,
    author: &str,
    progress: &dyn Progress,
) -> Result<ImportSummary> {
    import_dir_in_batches(store, root, author, progress, IMPORT_BATCH_FILES)
}

/// Files written per transaction by [`import_dir`]: large enough that a transaction's fixed
/// costs are spread, small enough that a batch's rows stay a few megabytes.
pub const IMPORT_BATCH_FILES: usize = 256;

/// [`import_dir`] writing `batch_files` files per transaction (0: the whole tree in one).
pub fn import_dir_in_batches(
    store: &Store,
    root: &Path,
    author: &str,
    progress: &dyn Progress,
    batch_files: usize,
) -> Result<ImportSummary> {
    let mut timings = Timings::start(format!("import {}", root.display()));
    let walked = walk(root)?;
    let stored = stored_paths(store)?;
    let mut summary = ImportSummary::default();

    progress.start("reading", walked.len() as u64);
    let read: Vec<(String, std::io::Result<Vec<u8>>)> = walked
        .par_iter()
        .map(|(rel, abs)| {
            let r = std::fs::read(abs);
            progress.inc(1);
            (rel.clone(), r)
        })
        .collect();
    progress.finish();

    let mut incoming = Vec::new();
    let mut changes = Vec::new();
    let mut present = HashSet::new();
    let mut unchanged_sources = Vec::new();
    for (rel, bytes) in read {
        let bytes = bytes.map_err(|e| {
            StoreError::Refused(format!("{}: cannot read: {e}", root.join(&rel).display()))
        })?;
        present.insert(rel.clone());
        let hash = forms::content_hash(&bytes);
        match stored.get(&rel) {
            Some((h, _)) if *h == hash => {
                summary.files_unchanged += 1;
                if Lang::from_path(&rel).is_some() {
                    unchanged_sources.push(rel);
                }
                continue;
            }
            Some(_) => summary.files_changed += 1,
            None => summary.files_added += 1,
        }
        if Lang::from_path(&rel).is_some() {
            incoming.push(Incoming { path: rel, bytes });
        } else {
            summary.blobs += 1;
            changes.push(Change::PutBlob { path: rel, hash, content: bytes });
        }
    }
    let mut removed_paths = Vec::new();
    for (path, (_, kind)) in stored {
        if !present.contains(&path) {
            summary.files_removed += 1;
            removed_paths.push(path.clone());
            changes.push(if kind == "blob" {
                Change::DeleteBlob { path }
            } else {
                Change::DeleteFile { path }
            });
        }
    }
    timings.lap("walk+read+hash");
    let removals = Removals { removed: removed_paths, moved_from: HashMap::new() };
    if !removals.removed.is_empty() || batch_files == 0 {
        // Files gone from the tree: one change, so that a form moved out of a removed file
        // into any other keeps its id (moves are matched within one change).
        let (file_changes, errors) =
            file_changes_timed(store, incoming, &removals, progress, &mut timings)?;
        changes.extend(file_changes);
        summary.errors = errors;
        summary.forms = change::apply(
            store,
            &ChangeSet { author: author.to_string(), op: "import".into(), changes },
        )?;
        timings.lap("store transaction");
        summary.timings = timings.laps().to_vec();
        return Ok(summary);
    }
    if !changes.is_empty() {
        let blobs = ChangeSet { author: author.to_string(), op: "import".into(), changes };
        change::apply(store, &blobs)?;
        timings.lap("store transaction");
    }
    // Each file is parsed once, in batches of `batch_files` written one transaction each (a
    // batch's trees and rows are dropped once it is written). Batches go in the order of the
    // namespaces' requires (guessed from each file's first `ns` form, read without parsing the
    // file), so that the vars a batch calls are mostly read, and written, already. A batch is
    // resolved against the namespace tables of the store and of the batches read so far,
    // itself included; the namespaces the guesses name count as known from the start. Once
    // all are read, the files whose resolution may have read tables that grew later (a
    // namespace spread over batches, a require cycle, a namespace named before it was read or
    // guessed wrong) are resolved again and written again: a handful of files. Two batches
    // are in flight: batch k+1 is parsed and resolved (both cores) while batch k is written
    // (Cozo writes are serial). Each transaction leaves a consistent store; an import stopped
    // between two (Ctrl-C) is resumed by importing again, which skips the files written.
    let imported: HashSet<String> = incoming.iter().map(|i| i.path.clone()).collect();
    let source_bytes: usize = incoming.iter().map(|i| i.bytes.len()).sum();
    let step_files = if source_bytes <= ONE_STEP_UP_TO { usize::MAX } else { TREES_AT_ONCE };
    let replaced: HashSet<&str> = imported.iter().map(String::as_str).collect();
    // What the imported paths define in the store before any batch is written: the stored
    // files that depend on what changes are found against it at the end.
    let old_vars = vars_of_files(store, &replaced)?;
    let mut guessed: Vec<(Incoming, NsDecl)> = incoming
        .into_par_iter()
        .map(|inc| {
            let decl = std::str::from_utf8(&inc.bytes)
                .ok()
                .and_then(forms::first_ns_decl)
                .unwrap_or_default();
            (inc, decl)
        })
        .collect();
    in_require_order(&mut guessed, |(inc, decl)| (&decl.name, &decl.requires, &inc.path));
    let guessed_nss: HashSet<String> =
        guessed.iter().map(|(_, d)| d.name.clone()).filter(|n| !n.is_empty()).collect();
    let guessed: Vec<(Incoming, String)> =
        guessed.into_iter().map(|(inc, decl)| (inc, decl.name)).collect();
    let batches = in_groups(guessed, batch_files);
    timings.lap("namespace declarations");
    let generation = crate::query::generation(store)?;
    let mut batches = batches.into_iter();
    let Some(first) = batches.next() else {
        summary.timings = summed(timings.laps());
        return Ok(summary);
    };
    progress.start("importing", imported.len() as u64);
    // One batch reads the store's tables of its own namespaces only (a re-import of a few
    // files must not read the whole store's); more read them all once.
    let (mut tables, first) = if batches.as_slice().is_empty() {
        let first = first.into_iter().map(|(inc, _)| inc).collect();
        let (parsed, raw) = parse_all(first, &Quiet);
        let (needed, referred) = namespaces_read(&parsed);
        let stored = stored_tables(store, Some((&needed, &referred)), &replaced, Some(generation))?;
        let mut tables = GrowingTables::new(stored, HashSet::new(), step_files);
        let first = tables.resolve_step(parsed, raw);
        (tables, first)
    } else {
        let stored = stored_tables(store, None, &replaced, Some(generation))?;
        let mut tables = GrowingTables::new(stored, guessed_nss, step_files);
        let first = tables.read_batch(first);
        (tables, first)
    };
    let mut next = Some(first);
    timings.lap("namespace tables+parse+resolve");
    let mut taken = TakenIds::new(store);
    // The next batch is read on the cores the writer leaves: on all of them, it would take
    // the writer's turn, and the writer is the longer path.
    let beside = rayon::ThreadPoolBuilder::new()
        .num_threads(rayon::current_num_threads().saturating_sub(1).max(1))
        .build()
        .map_err(|e| StoreError::Refused(format!("cannot start the import's threads: {e}")))?;
    while let Some(batch) = next.take() {
        let following = batches.next();
        let growing = &mut tables;
        let prepared = &mut next;
        // The writer runs here; the next batch is read on the pool beside it.
        let written = beside.in_place_scope(|scope| {
            if let Some(incoming) = following {
                scope.spawn(move |_| *prepared = Some(growing.read_batch(incoming)));
            }
            let written = write_batch(store, author, batch, &mut taken, &mut timings);
            timings.lap("store transaction");
            written
        });
        let (applied, errors, files) = written?;
        summary.forms.add(&applied);
        summary.errors.extend(errors);
        timings.lap("waiting for the next batch's parse+resolve");
        progress.inc(files as u64);
    }
    progress.finish();
    // Resolved again: files that read tables grown after them, and stored files outside the
    // import whose resolution depends on what the imported files define now.
    let changed = changed_namespaces(&old_vars, &tables.defined);
    let mut again = unchanged_dependents(store, &changed, &unchanged_sources)?;
    for path in tables.stale_files(root) {
        if let Some(bytes) = crate::query::file_bytes(store, &path)? {
            again.push(Incoming { path, bytes });
        }
    }
    timings.lap("find files to resolve again");
    if !again.is_empty() {
        let (parsed, raw) = parse_all(again, &Quiet);
        let resolved = parsed.par_iter().map(|f| forms::resolve_file(f, &tables.nss)).collect();
        let batch = Batch { parsed, raw, resolved };
        let (applied, errors, files) = write_batch(store, author, batch, &mut taken, &mut timings)?;
        summary.forms.add(&applied);
        summary.errors.extend(errors);
        timings.lap(&format!("resolve again ({files} files)"));
    }
    summary.timings = summed(timings.laps());
    Ok(summary)
}

/// Files (with their guessed namespace) in groups of `size`, in order: files of one namespace
/// stay in one group, which may then be larger, so that none is resolved before the tables
/// have the vars its namespace's other files define.
fn in_groups(files: Vec<(Incoming, String)>, size: usize) -> Vec<Vec<(Incoming, String)>> {
    let mut groups: Vec<Vec<(Incoming, String)>> = Vec::new();
    for (inc, ns) in files {
        match groups.last_mut() {
            Some(group)
                if group.len() < size
                    || group.last().is_some_and(|(_, last)| !ns.is_empty() && *last == ns) =>
            {
                group.push((inc, ns))
            }
            _ => groups.push(vec![(inc, ns)]),
        }
    }
    groups
}

/// Files a streamed import parses and resolves at once: their trees are alive together.
const TREES_AT_ONCE: usize = 32;

/// The most source whose syntax trees may all be alive at once (trees take about 56 bytes a
/// byte of source: some 220 MB): an import this small reads each batch in one step, on every
/// core, instead of [`TREES_AT_ONCE`] files at a time (a step waits for its largest file, and
/// a small tree is one or two batches, so little of its reading runs beside a write).
const ONE_STEP_UP_TO: usize = 4 << 20;

/// A batch of files read and resolved, to be written.
struct Batch {
    parsed: Vec<ParsedFile>,
    raw: Vec<Option<Vec<u8>>>,
    resolved: Vec<Vec<Resolved>>,
}

/// Build a resolved batch's rows and write them in one transaction: what it did, the files that
/// did not parse, and how many files it wrote.
fn write_batch<'s>(
    store: &'s Store,
    author: &str,
    batch: Batch,
    taken: &mut TakenIds<'s>,
    timings: &mut Timings,
) -> Result<(Applied, Vec<FileError>, usize)> {
    let Batch { mut parsed, raw, resolved } = batch;
    let paths: Vec<String> = parsed.iter().map(|f| f.path.clone()).collect();
    let replaced: HashSet<&str> = paths.iter().map(String::as_str).collect();
    let (changes, errors) = resolve_and_build(
        store,
        &mut parsed,
        raw,
        &replaced,
        &Removals::default(),
        Some((taken, resolved)),
        &Quiet,
        timings,
    )?;
    drop(replaced);
    let files = parsed.len();
    drop(parsed);
    let applied = change::apply(
        store,
        &ChangeSet { author: author.to_string(), op: "import".into(), changes },
    )?;
    Ok((applied, errors, files))
}

/// The namespace tables of a streamed import as its batches are read: the store's (outside the
/// imported files) with the definitions of every batch read so far, and what finds, once all
/// are read, the files resolved against tables that grew after them.
struct GrowingTables {
    nss: Namespaces,
    /// The namespaces known before any file was read: the store's.
    stored_known: std::sync::Arc<HashSet<String>>,
    /// Namespaces counted known from the start, as guessed from the files' first `ns` forms.
    guessed: HashSet<String>,
    /// Namespaces the imported files' forms are read in.
    read: HashSet<String>,
    /// The last batch that defined a var in each namespace.
    grown_at: HashMap<String, usize>,
    /// The batch each namespace neither stored nor guessed was first read in.
    known_at: HashMap<String, usize>,
    /// Every var the imported files define, per namespace.
    defined: HashMap<String, HashSet<String>>,
    files: Vec<FileResolved>,
    /// Steps resolved so far ([`GrowingTables::resolve_step`]); "batch" below counts them.
    steps: usize,
    /// Files parsed and resolved in one step.
    step_files: usize,
}

/// Where a file was resolved: its batch, and the namespaces whose tables it read (those its
/// forms are read in, and those it refers wholesale).
struct FileResolved {
    path: String,
    hash: String,
    batch: usize,
    read: Vec<String>,
}

impl GrowingTables {
    fn new(mut nss: Namespaces, guessed: HashSet<String>, step_files: usize) -> GrowingTables {
        let stored_known = nss.known.clone();
        let unknown: Vec<&String> = guessed.iter().filter(|ns| !nss.known.contains(*ns)).collect();
        if !unknown.is_empty() {
            std::sync::Arc::make_mut(&mut nss.known).extend(unknown.into_iter().cloned());
        }
        GrowingTables {
            nss,
            stored_known,
            guessed,
            read: HashSet::new(),
            grown_at: HashMap::new(),
            known_at: HashMap::new(),
            defined: HashMap::new(),
            files: Vec::new(),
            steps: 0,
            step_files,
        }
    }

    /// Parse and resolve a batch's files `step_files` at a time: few syntax trees are
    /// alive at once (a tree is tens of times its text), each step's dropped once resolved.
    fn read_batch(&mut self, incoming: Vec<(Incoming, String)>) -> Batch {
        let mut batch = Batch { parsed: Vec::new(), raw: Vec::new(), resolved: Vec::new() };
        for step in in_groups(incoming, self.step_files) {
            let step: Vec<Incoming> = step.into_iter().map(|(inc, _)| inc).collect();
            let (parsed, raw) = parse_all(step, &Quiet);
            let read = self.resolve_step(parsed, raw);
            batch.parsed.extend(read.parsed);
            batch.raw.extend(read.raw);
            batch.resolved.extend(read.resolved);
        }
        batch
    }

    /// Add the definitions of parsed files to the tables, then resolve them against the
    /// tables (every core); their syntax trees are dropped.
    fn resolve_step(&mut self, mut parsed: Vec<ParsedFile>, raw: Vec<Option<Vec<u8>>>) -> Batch {
        let k = self.steps;
        self.steps += 1;
        for f in &parsed {
            for form in f.forms() {
                // `add_definitions` below makes it known.
                if !form.ns.is_empty() && !self.nss.known.contains(&form.ns) {
                    self.known_at.insert(form.ns.clone(), k);
                }
                if !self.read.contains(&form.ns) {
                    self.read.insert(form.ns.clone());
                }
                if !form.analysis.defines.is_empty() {
                    self.grown_at.insert(form.ns.clone(), k);
                    let defined = self.defined.entry(form.ns.clone()).or_default();
                    defined.extend(form.analysis.defines.iter().map(|d| d.name.clone()));
                }
            }
            add_definitions(&mut self.nss, f);
            if f.forms().is_empty() {
                continue;
            }
            let mut read: Vec<String> = (f.forms().iter().map(|form| form.ns.clone()))
                .chain(f.decl.refer_all.iter().cloned())
                .collect();
            read.sort();
            read.dedup();
            self.files.push(FileResolved {
                path: f.path.clone(),
                hash: f.hash.clone(),
                batch: k,
                read,
            });
        }
        let resolved = parsed.par_iter().map(|f| forms::resolve_file(f, &self.nss)).collect();
        for f in &mut parsed {
            f.tree = None;
        }
        Batch { parsed, raw, resolved }
    }

    /// Once every batch is read: the files whose resolution may differ from one against the
    /// final tables, which the tables become (guesses that named no namespace are dropped).
    /// A file read a namespace's vars before a later batch added to them, or may name (`n/x`)
    /// a namespace unknown when it was resolved, or a guessed one that is none: those it may
    /// name are found in its text under `root` (a file changed since is counted stale).
    fn stale_files(&mut self, root: &Path) -> Vec<String> {
        let mut late: HashMap<&str, usize> =
            self.known_at.iter().map(|(ns, k)| (ns.as_str(), *k)).collect();
        let wrong: Vec<String> = (self.guessed.iter())
            .filter(|ns| !self.stored_known.contains(*ns) && !self.read.contains(*ns))
            .filter(|ns| !self.nss.all_vars.contains_key(*ns))
            .cloned()
            .collect();
        for ns in &wrong {
            late.insert(ns.as_str(), usize::MAX);
        }
        let stale: Vec<String> = self
            .files
            .par_iter()
            .filter(|f| {
                let grown = f.read.iter().filter_map(|ns| self.grown_at.get(ns)).max();
                if grown.is_some_and(|k| *k > f.batch) {
                    return true;
                }
                if !late.values().any(|k| *k > f.batch) {
                    return false;
                }
                let Ok(bytes) = std::fs::read(root.join(&f.path)) else { return true };
                if forms::content_hash(&bytes) != f.hash {
                    return true;
                }
                let text = String::from_utf8_lossy(&bytes);
                let named_late =
                    qualifiers(&text).any(|ns| late.get(ns).is_some_and(|k| *k > f.batch));
                named_late
            })
            .map(|f| f.path.clone())
            .collect();
        drop(late);
        if !wrong.is_empty() {
            let known = std::sync::Arc::make_mut(&mut self.nss.known);
            for ns in &wrong {
                known.remove(ns);
            }
        }
        stale
    }
}

/// The namespace part of every qualified symbol-like token of a text (`a.b` of `a.b/c`), and
/// some more (in strings and comments): a superset of the namespaces its symbols name.
fn qualifiers(text: &str) -> impl Iterator<Item = &str> {
    let delimiter = |c: char| c.is_whitespace() || "()[]{}\"';,@~^`\\".contains(c);
    text.split(delimiter).filter_map(|token| {
        let (ns, _) = token.split_once('/')?;
        (!ns.is_empty()).then_some(ns)
    })
}

/// Files ordered so that a namespace comes after those it requires (cycles broken in path
/// order); files of one namespace stay together, in path order. `key` gives an item's
/// namespace, its requires and its path.
fn in_require_order<T>(items: &mut [T], key: impl Fn(&T) -> (&String, &Vec<String>, &String)) {
    let mut requires: std::collections::BTreeMap<&str, BTreeSet<&str>> = Default::default();
    for item in items.iter() {
        let (ns, reqs, _) = key(item);
        let deps = requires.entry(ns.as_str()).or_default();
        deps.extend(reqs.iter().map(String::as_str));
    }
    let mut rank: HashMap<String, usize> = HashMap::new();
    // Depth-first, each namespace after its requires; a namespace met again on the way
    // (a cycle) is taken where it is.
    fn visit<'a>(
        ns: &'a str,
        requires: &std::collections::BTreeMap<&'a str, BTreeSet<&'a str>>,
        on_path: &mut HashSet<&'a str>,
        rank: &mut HashMap<String, usize>,
    ) {
        if rank.contains_key(ns) || !on_path.insert(ns) {
            return;
        }
        for dep in requires.get(ns).into_iter().flatten() {
            if requires.contains_key(dep) {
                visit(dep, requires, on_path, rank);
            }
        }
        on_path.remove(ns);
        let next = rank.len();
        rank.insert(ns.to_string(), next);
    }
    let mut on_path = HashSet::new();
    for ns in requires.keys() {
        visit(ns, &requires, &mut on_path, &mut rank);
    }
    drop(requires);
    items.sort_by(|a, b| {
        let ((na, _, pa), (nb, _, pb)) = (key(a), key(b));
        (rank[na.as_str()], pa).cmp(&(rank[nb.as_str()], pb))
    });
}

/// Phases repeated per batch, summed, in the order each first ended.
fn summed(laps: &[(String, f64)]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for (phase, ms) in laps {
        match out.iter_mut().find(|(p, _)| p == phase) {
            Some((_, total)) => *total += ms,
            None => out.push((phase.clone(), *ms)),
        }
    }
    out
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
/// bytes beside the parse result.
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
                Ok(text) => (forms::parse_file(&inc.path, lang, text), None),
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
    batched: Option<(&mut TakenIds<'s>, Vec<Vec<Resolved>>)>,
    progress: &dyn Progress,
    timings: &mut Timings,
) -> Result<(Vec<Change>, Vec<FileError>)> {
    // Read first: what is read below is of this generation or a later one, never an earlier.
    let generation = crate::query::generation(store)?;
    let (built, mut own_taken);
    let (taken, resolved): (_, Vec<Resolution>) = match batched {
        Some((taken, resolved)) => (taken, resolved.into_iter().map(Resolution::Made).collect()),
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

    let old = old_forms(store, replaced)?;
    let mut movable = movable_forms(parsed, &old, removals);
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
                let rows = form_rows(file, forms, res, olds, &mut movable, taken);
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
    let (purity, stale) = purity_of_rows(store, &all_rows, replaced, &old)?;
    let mut purity = purity.into_iter();
    for (fi, mut rows) in all_rows {
        for r in rows.iter_mut() {
            let p = purity.next().unwrap_or(Purity::Unknown);
            r.purity = p.as_str().to_string();
            r.rhash = resolution_hash(r);
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

/// A file's resolution as its rows are built: made already, or made a chunk of forms at a
/// time with the rows ([`forms::resolved_in_chunks`]).
enum Resolution<'n> {
    Made(Vec<Resolved>),
    /// To be resolved against these tables, this many top-level forms at a time.
    InChunks(&'n Namespaces, usize),
}

/// Stored forms elsewhere whose purity class a change moves: (id, new class), sorted.
type Stale = Vec<(String, String)>;

/// The purity class of every new row (in order, file by file) through the store's own vars, to a
/// fixpoint, and the stored forms elsewhere whose class moves with it (id, class). When the vars
/// defined here change class (or appear or vanish), forms elsewhere that reach them through
/// calls may change too: those are recomputed and the ones whose class moved are updated.
fn purity_of_rows(
    store: &Store,
    all_rows: &[(usize, Vec<FormRow>)],
    replaced: &HashSet<&str>,
    old: &HashMap<String, Vec<OldForm>>,
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
    let known_purity = stored_purity(store, graph.outside_callees(), replaced)?;
    let mut purity = graph.propagate(&known_purity);
    drop(known_purity);
    let mut stale = Vec::new();
    let before = purity_of_vars(store, replaced, old)?;
    let mut after: HashMap<&str, Purity> = HashMap::new();
    for (i, p) in purity.iter().enumerate() {
        for d in graph.form(i).0 {
            by_var(&mut after, d.as_ref(), *p);
        }
    }
    let moved: BTreeSet<&str> = (before.keys().map(String::as_str))
        .chain(after.keys().copied())
        .filter(|v| before.get(*v) != after.get(*v))
        .collect();
    // Vars defined here changed class (or appeared, or vanished): the stored forms that reach
    // them through calls may change too. Only those forms are recomputed, with the rest of the
    // store's vars fixed at their stored class.
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
        let known = stored_purity(store, graph.outside_callees(), replaced)?;
        purity = graph.propagate(&known);
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

/// A named top-level form's identity across files: kind, name, dispatch value.
type MoveKey = (String, String, String);

/// Named top-level forms that leave their file in this change (the file no longer has a form
/// of that kind and name, or the file is removed and not moved whole): a form of the same kind
/// and name that appears in another file of the change is the same form, moved (`move_form`,
/// cut and paste between files), and keeps its id. Keys held by two such forms are ambiguous
/// and left out.
fn movable_forms(
    parsed: &[ParsedFile],
    old: &HashMap<String, Vec<OldForm>>,
    removals: &Removals,
) -> HashMap<MoveKey, String> {
    let moved_whole: HashSet<&str> = removals.moved_from.values().map(String::as_str).collect();
    let mut out: HashMap<MoveKey, Option<String>> = HashMap::new();
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
                (a.kind.as_str().to_string(), a.name.clone(), a.dispatch.clone())
            })
            .collect();
        for o in olds.iter().filter(|o| o.stored.parent.is_empty() && !o.name.is_empty()) {
            let key = (o.kind.clone(), o.name.clone(), o.dispatch.clone());
            if !staying.contains(&key) {
                out.entry(key).and_modify(|e| *e = None).or_insert_with(|| Some(o.id.clone()));
            }
        }
    }
    out.into_iter().filter_map(|(k, id)| Some((k, id?))).collect()
}

/// Rows for every form of a file (top-level forms, then each comment block's children after
/// their block), with ids matched against the file's stored forms, then against the forms
/// `movable` from other files. Each form moves into its row; a file resolved in chunks
/// ([`Resolution::InChunks`]) is resolved a chunk of forms at a time, each chunk's forms and
/// resolution gone into rows before the next is resolved.
fn form_rows(
    file: &ParsedFile,
    mut forms: Vec<ParsedForm>,
    res: Resolution,
    olds: &[OldForm],
    movable: &mut HashMap<MoveKey, String>,
    taken: &mut TakenIds,
) -> Vec<FormRow> {
    let old_top: Vec<&OldForm> = olds.iter().filter(|o| o.stored.parent.is_empty()).collect();
    let matched = {
        let old_keys: Vec<Key> = old_top.iter().map(|o| o.key()).collect();
        let new_keys: Vec<Key> = forms.iter().enumerate().map(|(i, f)| key_of(f, i)).collect();
        identity::match_forms(&old_keys, &new_keys)
    };

    let children: usize = forms.iter().map(|f| f.children.len()).sum();
    let mut rows = Vec::with_capacity(forms.len() + children);
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
            let id = match matched[i] {
                Some(oi) => old_top[oi].id.clone(),
                None => {
                    let moved_key =
                        (a.kind.as_str().to_string(), a.name.clone(), a.dispatch.clone());
                    match movable.remove(&moved_key).filter(|_| !a.name.is_empty()) {
                        Some(id) => id,
                        None => fresh_id(&file.path, "", &f, &mut occurrences, taken),
                    }
                }
            };
            let kids = std::mem::take(&mut f.children);
            let r = res.next().unwrap_or_default();
            rows.push(row_from(file, f, r, &id, "", i));
            if !kids.is_empty() {
                let old_children: Vec<&OldForm> =
                    olds.iter().filter(|o| o.stored.parent == id).collect();
                let ok: Vec<Key> = old_children.iter().map(|o| o.key()).collect();
                let nk: Vec<Key> = kids.iter().enumerate().map(|(i, c)| key_of(c, i)).collect();
                let cm = identity::match_forms(&ok, &nk);
                drop(nk);
                for (ci, (c, m)) in kids.into_iter().zip(cm).enumerate() {
                    let cid = match m {
                        Some(oi) => old_children[oi].id.clone(),
                        None => fresh_id(&file.path, &id, &c, &mut occurrences, taken),
                    };
                    let r = res.next().unwrap_or_default();
                    rows.push(row_from(file, c, r, &cid, &id, ci));
                }
            }
        }
    }
    rows
}

fn fresh_id(
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
struct TakenIds<'s> {
    store: &'s Store,
    ours: IdSet,
    stored: Option<IdSet>,
    asked: usize,
    /// The first store error: the change is refused with it (an id is never guessed free).
    failed: Option<StoreError>,
}

impl<'s> TakenIds<'s> {
    /// Questions to the store before reading all its ids is cheaper.
    const ASK_LIMIT: usize = 64;

    fn new(store: &'s Store) -> TakenIds<'s> {
        TakenIds { store, ours: IdSet::default(), stored: None, asked: 0, failed: None }
    }

    fn contains(&mut self, id: &str) -> bool {
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
    fn fail(&mut self, e: StoreError) -> bool {
        self.failed.get_or_insert(e);
        false
    }

    fn insert(&mut self, id: String) {
        self.ours.insert(&id);
    }

    /// The store error met while looking ids up, if any.
    fn check(&mut self) -> Result<()> {
        self.failed.take().map_or(Ok(()), Err)
    }
}

fn key_of(f: &ParsedForm, pos: usize) -> Key<'_> {
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

fn row_of(
    file: &ParsedFile,
    f: &ParsedForm,
    r: Resolved,
    id: &str,
    parent: &str,
    pos: usize,
) -> FormRow {
    row_from(file, f.clone(), r, id, parent, pos)
}

/// The row of form `f`, which moves into it, with its resolution `r`.
fn row_from(
    file: &ParsedFile,
    f: ParsedForm,
    r: Resolved,
    id: &str,
    parent: &str,
    pos: usize,
) -> FormRow {
    let ParsedForm { leading, source, start, end, ns, analysis: a, hash, .. } = f;
    // Forms inside a `(comment ...)` block define nothing when the file loads.
    let defines_var =
        parent.is_empty() && a.kind.defines_var() && !a.name.starts_with(':') && !a.name.is_empty();
    let fqn = if defines_var { format!("{ns}/{}", a.name) } else { String::new() };
    let defines = if parent.is_empty() {
        a.defines.iter().map(|d| (format!("{ns}/{}", d.name), d.line)).collect()
    } else {
        Vec::new()
    };
    FormRow {
        id: id.to_string(),
        file: file.path.clone(),
        ns,
        pos: pos as i64,
        parent: parent.to_string(),
        kind: a.kind.as_str().to_string(),
        head: a.head,
        name: a.name,
        fqn,
        dispatch: a.dispatch,
        doc: a.doc,
        arglists: a.arglists,
        leading,
        canonical: if r.canonical.is_empty() { source.clone() } else { r.canonical },
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
        purity: r.purity.as_str().to_string(),
        rhash: String::new(),
        calls: r.calls,
        unresolved: r.unresolved,
        sites: r.sites,
        defines,
    }
}

/// Files under `root` to import, as (relative path with `/`, absolute path), sorted: those the
/// ignore files (`.gitignore`, `.ignore`, `.git/info/exclude`) leave, and every regular file git
/// tracks, since git's index wins over its ignore rules (see `git`). Symlinks and the
/// `SKIP_DIRS` are never followed.
pub fn walk(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    if !root.is_dir() {
        return Err(StoreError::Refused(format!("{}: not a directory", root.display())));
    }
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .git_global(false)
        .parents(false)
        .filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir())
                && SKIP_DIRS.contains(&e.file_name().to_string_lossy().as_ref()))
        })
        .sort_by_file_path(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        let entry =
            entry.map_err(|e| StoreError::Refused(format!("walking {}: {e}", root.display())))?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        let rel =
            rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        out.push((rel, entry.path().to_path_buf()));
    }
    if let Some(tracked) = crate::git::tracked(root) {
        let walked: HashSet<String> = out.iter().map(|(rel, _)| rel.clone()).collect();
        let real_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        for rel in tracked.files.into_iter().filter(|rel| !walked.contains(rel)) {
            let path = root.join(&rel);
            let skipped = rel.split('/').any(|part| SKIP_DIRS.contains(&part));
            // A regular file reached without a symlink, as the walk above never follows them.
            let plain = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                && path.canonicalize().is_ok_and(|real| real == real_root.join(&rel));
            if !skipped && plain {
                out.push((rel, path));
            }
        }
        out.sort_by(|a, b| a.1.cmp(&b.1));
    }
    Ok(out)
}

/// Every stored path with its content hash and whether it is a Clojure `file` or a `blob`.
fn stored_paths(store: &Store) -> Result<HashMap<String, (String, String)>> {
    let rows = store.query(
        "?[path, hash, kind] := *file{path, hash}, kind = 'file'
         ?[path, hash, kind] := *blob{path, hash}, kind = 'blob'",
        Default::default(),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), (str_at(r, 1), str_at(r, 2)))).collect())
}

/// The namespace tables resolving `parsed` needs, as the store holds them outside `replaced`
/// with the parsed files' own definitions added: every var of the namespaces the files' forms
/// live in, the public vars of those they refer wholesale (`:refer :all`, `:use`), and the names
/// of every namespace the store knows. Only those namespaces' vars are read: a save of one file
/// must not read the whole store's.
pub fn namespace_tables<P: std::borrow::Borrow<ParsedFile>>(
    store: &Store,
    parsed: &[P],
    replaced: &HashSet<&str>,
    generation: Option<u64>,
) -> Result<Namespaces> {
    let (needed, referred) = namespaces_read(parsed);
    let mut nss = stored_tables(store, Some((&needed, &referred)), replaced, generation)?;
    for f in parsed.iter().map(P::borrow) {
        add_definitions(&mut nss, f);
    }
    Ok(nss)
}

/// The namespaces whose vars resolving `parsed` reads (those their forms live in, and those
/// they refer wholesale), and those referred wholesale (`:refer :all`, `:use`).
fn namespaces_read<P: std::borrow::Borrow<ParsedFile>>(
    parsed: &[P],
) -> (BTreeSet<&str>, BTreeSet<&str>) {
    let mut needed: BTreeSet<&str> = BTreeSet::new();
    let mut referred: BTreeSet<&str> = BTreeSet::new();
    for f in parsed.iter().map(P::borrow) {
        needed.insert(&f.decl.name);
        referred.extend(f.decl.refer_all.iter().map(String::as_str));
        needed.extend(f.forms().iter().map(|form| form.ns.as_str()));
    }
    needed.extend(&referred);
    needed.remove("");
    (needed, referred)
}

/// The store's namespace tables outside `replaced`: the vars of the namespaces `of` names
/// (`None`: of every namespace), public ones told apart in those referred wholesale (`None`:
/// in all), and the names of every namespace the store knows.
fn stored_tables(
    store: &Store,
    of: Option<(&BTreeSet<&str>, &BTreeSet<&str>)>,
    replaced: &HashSet<&str>,
    generation: Option<u64>,
) -> Result<Namespaces> {
    let mut nss = Namespaces::default();
    let stored = stored_vars(store, of.map(|(needed, _)| needed), replaced)?;
    let referred = |ns: &str| of.is_none_or(|(_, referred)| referred.contains(ns));
    // Privacy matters only where a namespace is referred wholesale (`:refer :all`, `:use`):
    // asked of those vars alone, as it costs a read of each defining form.
    let referred_ids: Vec<&str> = stored
        .iter()
        .filter(|(var, _)| var.split_once('/').is_some_and(|(ns, _)| referred(ns)))
        .map(|(_, id)| id.as_str())
        .collect();
    let private: HashSet<String> = if referred_ids.is_empty() {
        HashSet::new()
    } else {
        let rows = store.query(
            "ids[id] <- $ids ?[id] := ids[id], *form{id, private}, private",
            params([("ids", column(referred_ids.iter().map(|id| (*id).into())))]),
        )?;
        rows.rows.iter().map(|r| str_at(r, 0)).collect()
    };
    for (var, id) in &stored {
        let Some((ns, name)) = var.split_once('/') else { continue };
        nss.all_vars.entry(ns.to_string()).or_default().insert(name.to_string());
        if referred(ns) && !private.contains(id) {
            nss.publics.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    }
    let mut known = known_namespaces(store, replaced, generation)?;
    // Shared with the store handle: copied only when a namespace is not in it yet.
    for ns in nss.all_vars.keys() {
        if !ns.is_empty() && !known.contains(ns) {
            std::sync::Arc::make_mut(&mut known).insert(ns.to_string());
        }
    }
    nss.known = known;
    Ok(nss)
}

/// Add a parsed file's namespaces and definitions to the tables.
fn add_definitions(nss: &mut Namespaces, f: &ParsedFile) {
    for form in f.forms() {
        if !form.ns.is_empty() && !nss.known.contains(&form.ns) {
            std::sync::Arc::make_mut(&mut nss.known).insert(form.ns.clone());
        }
    }
    for form in f.forms() {
        for d in &form.analysis.defines {
            nss.all_vars.entry(form.ns.clone()).or_default().insert(d.name.clone());
            if !form.analysis.flags.private {
                nss.publics.entry(form.ns.clone()).or_default().insert(d.name.clone());
            }
        }
    }
}

/// (var, defining form id) of every var of the `nss` namespaces defined outside `replaced`.
/// Read from `defines` by key range (`ns/` up to `ns0`, `0` being the byte after `/`), the
/// cheapest read of a namespace's vars; a change touching many namespaces (an import) reads
/// all of `defines` once instead.
fn stored_vars(
    store: &Store,
    nss: Option<&BTreeSet<&str>>,
    replaced: &HashSet<&str>,
) -> Result<Vec<(String, String)>> {
    const RANGES_PER_QUERY: usize = 32;
    if nss.is_some_and(|nss| nss.is_empty()) {
        return Ok(Vec::new());
    }
    let rows = if let Some(nss) = nss.filter(|nss| nss.len() <= RANGES_PER_QUERY) {
        let mut script = Vec::new();
        let mut bounds = Vec::new();
        for (i, ns) in nss.iter().enumerate() {
            script.push(format!("?[var, id] := *defines{{var, id}}, var >= $lo{i}, var < $hi{i}"));
            bounds.push((format!("lo{i}"), DataValue::from(format!("{ns}/"))));
            bounds.push((format!("hi{i}"), DataValue::from(format!("{ns}0"))));
        }
        store.query(&script.join("\n"), bounds.into_iter().collect())?.rows
    } else {
        let rows = store.query("?[var, id] := *defines{var, id}", Default::default())?;
        rows.rows
            .into_iter()
            .filter(|r| {
                nss.is_none_or(|nss| {
                    r[0].get_str()
                        .and_then(|v| v.split_once('/'))
                        .is_some_and(|(ns, _)| nss.contains(ns))
                })
            })
            .collect()
    };
    let mut gone: HashSet<String> = HashSet::new();
    if !replaced.is_empty() {
        let ids = store.query(
            "replaced[file] <- $replaced ?[id] := replaced[file], *form_at{file, id}",
            params([("replaced", column(replaced.iter().map(|p| (*p).into())))]),
        )?;
        gone = ids.rows.iter().map(|r| str_at(r, 0)).collect();
    }
    Ok(rows
        .iter()
        .map(|r| (str_at(r, 0), str_at(r, 1)))
        .filter(|(_, id)| !gone.contains(id))
        .collect())
}

/// The namespaces of the store's files outside `replaced`: the ones a fully qualified symbol
/// may name without a `require`. With nothing replaced, the set the store handle holds.
pub fn known_namespaces(
    store: &Store,
    replaced: &HashSet<&str>,
    generation: Option<u64>,
) -> Result<std::sync::Arc<HashSet<String>>> {
    // Held by the store handle from one generation to the next (see `Store::file_nss_at`).
    let held = generation.and_then(|g| store.file_nss_at(g));
    let nss = match held {
        Some(nss) => nss,
        None => {
            let rows =
                store.query("?[path, ns] := *file{path, ns}, ns != ''", Default::default())?;
            let nss: crate::store::FileNss =
                std::sync::Arc::new(crate::store::FileNamespaces::new(
                    rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect(),
                ));
            if let Some(g) = generation {
                store.hold_file_nss(g, nss.clone());
            }
            nss
        }
    };
    if !replaced.iter().any(|path| nss.by_path.contains_key(*path)) {
        return Ok(nss.known.clone());
    }
    Ok(std::sync::Arc::new(
        nss.by_path
            .iter()
            .filter(|(path, _)| !replaced.contains(path.as_str()))
            .map(|(_, ns)| ns.clone())
            .collect(),
    ))
}

/// A stored form, as identity matching needs it, and (`stored`) as `change::apply` compares
/// the new forms with it.
struct OldForm {
    id: String,
    kind: String,
    head: String,
    name: String,
    dispatch: String,
    source: String,
    stored: change::OldForm,
}

impl OldForm {
    fn key(&self) -> Key<'_> {
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

fn old_forms(store: &Store, paths: &HashSet<&str>) -> Result<HashMap<String, Vec<OldForm>>> {
    if paths.is_empty() {
        return Ok(HashMap::new());
    }
    let list = column(paths.iter().map(|p| (*p).into()));
    // `apply`'s columns first, then what identity matching reads.
    let (cols, atom) = (change::OLD_FORM_COLS, change::OLD_FORM_ATOM);
    let rows = store.query(
        &format!(
            "paths[file] <- $paths
             ?[{cols}, head, name, dispatch, source] := paths[file], *form_at{{file, pos, id}}, *form{{{atom}, head, name, dispatch, source}}
             :order file, pos"
        ),
        params([("paths", list)]),
    )?;
    let n = cols.split(", ").count();
    let kind_at = cols.split(", ").position(|c| c == "kind").expect("kind column");
    let mut out: HashMap<String, Vec<OldForm>> = HashMap::new();
    for r in &rows.rows {
        let stored = change::OldForm::from_row(r);
        let form = OldForm {
            id: str_at(r, 0),
            kind: str_at(r, kind_at),
            head: str_at(r, n),
            name: str_at(r, n + 1),
            dispatch: str_at(r, n + 2),
            source: str_at(r, n + 3),
            stored,
        };
        out.entry(form.stored.file.clone()).or_default().push(form);
    }
    Ok(out)
}

/// `old` as `change::apply` compares with it, for it to use instead of reading it again (moved
/// there: a big file's stored forms are hundreds of bytes each).
fn stored_forms(
    generation: u64,
    replaced: &HashSet<&str>,
    old: HashMap<String, Vec<OldForm>>,
) -> StoredForms {
    let forms = old.into_values().flatten().map(|o| (o.id, o.stored)).collect();
    StoredForms { generation, paths: replaced.iter().map(|p| p.to_string()).collect(), forms }
}

fn all_ids(store: &Store) -> Result<IdSet> {
    let rows = store.query("?[id] := *form{id}", Default::default())?;
    let mut ids = IdSet::default();
    for r in &rows.rows {
        ids.insert(r[0].get_str().unwrap_or_default());
    }
    Ok(ids)
}

/// A set of form ids, those `identity::new_id` makes held as numbers: a big save gives out an
/// id a form, and a big store holds one a form (as strings, about 90 bytes each).
#[derive(Default)]
struct IdSet {
    numbers: HashSet<u64>,
    others: HashSet<String>,
}

impl IdSet {
    fn insert(&mut self, id: &str) {
        match identity::id_number(id) {
            Some(n) => self.numbers.insert(n),
            None => self.others.insert(id.to_string()),
        };
    }

    fn contains(&self, id: &str) -> bool {
        match identity::id_number(id) {
            Some(n) => self.numbers.contains(&n),
            None => self.others.contains(id),
        }
    }
}

/// The class of each of `vars` the store defines outside `replaced`: the worst of its
/// definitions.
fn stored_purity(
    store: &Store,
    vars: BTreeSet<&str>,
    replaced: &HashSet<&str>,
) -> Result<HashMap<String, Purity>> {
    let mut out = HashMap::new();
    for (var, p, file) in stored_purity_rows(store, &vars)? {
        if !replaced.contains(file.as_str()) {
            by_var(&mut out, var, p);
        }
    }
    Ok(out)
}

/// (var, class, file) of every stored definition of `vars`.
fn stored_purity_rows(
    store: &Store,
    vars: &BTreeSet<&str>,
) -> Result<Vec<(String, Purity, String)>> {
    let vars: Vec<&str> = vars.iter().copied().collect();
    let mut out = Vec::new();
    for part in vars.chunks(KEYS_PER_QUERY) {
        let rows = store.query(
            "vars[var] <- $vars
             ?[var, purity, file] := vars[var], *defines{var, id}, *form{id, purity, file}",
            params([("vars", column(part.iter().map(|v| (*v).into())))]),
        )?;
        out.extend(
            (rows.rows.iter())
                .filter_map(|r| Some((str_at(r, 0), Purity::parse(&str_at(r, 1))?, str_at(r, 2)))),
        );
    }
    Ok(out)
}

/// A hash of what resolution derived for a form, so re-resolution can tell what changed.
/// Lines count from the form's first line: a form moved down the file by whole lines (a form
/// above it grew) keeps its hash, and its move is seen from its place (`change::apply`).
fn resolution_hash(r: &FormRow) -> String {
    let line = |l: u32| i64::from(l) - i64::from(r.start.line);
    let mut parts: Vec<String> = vec![r.canonical.clone()];
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
    // A comment block's sites are its children's calls: they change with the children's
    // resolution, which the block's own calls do not show.
    for site in &r.sites {
        let (l, col) = (line(site.pos.line), site.pos.col);
        let (to, argc, outer, load) = (&site.to, site.argc, &site.outer, site.load);
        parts.push(format!("@{to}|{l}|{col}|{argc}|{outer}|{load}"));
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    forms::hash_text(&refs)
}

/// Stored Clojure files (not among `parsed`) whose resolution can change because the vars that
/// `parsed` define differ from what the store holds for those files: files of the same
/// namespaces, and files that require them. Their stored text comes back as `Incoming`.
fn dependent_files(
    store: &Store,
    parsed: &[ParsedFile],
    removed: &[String],
) -> Result<Vec<Incoming>> {
    // A removed file defines nothing any more: its old vars count as changed.
    let paths: HashSet<&str> =
        parsed.iter().map(|f| f.path.as_str()).chain(removed.iter().map(String::as_str)).collect();
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let mut new_vars: HashMap<String, HashSet<String>> = HashMap::new();
    for f in parsed {
        for (ns, name) in f.defined_vars() {
            new_vars.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    }
    let old_vars = vars_of_files(store, &paths)?;
    files_depending_on(store, &changed_namespaces(&old_vars, &new_vars), &paths)
}

/// The vars the stored files at `paths` define, per namespace.
fn vars_of_files(store: &Store, paths: &HashSet<&str>) -> Result<HashMap<String, HashSet<String>>> {
    let mut vars: HashMap<String, HashSet<String>> = HashMap::new();
    if paths.is_empty() {
        return Ok(vars);
    }
    let rows = store.query(
        "paths[file] <- $paths ?[var] := paths[file], *form_at{file, id}, *defined_by{id, var}",
        params([("paths", column(paths.iter().map(|p| (*p).into())))]),
    )?;
    for r in &rows.rows {
        if let Some((ns, name)) = str_at(r, 0).split_once('/') {
            vars.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    }
    Ok(vars)
}

/// The namespaces whose vars differ between two readings, sorted.
fn changed_namespaces(
    old_vars: &HashMap<String, HashSet<String>>,
    new_vars: &HashMap<String, HashSet<String>>,
) -> Vec<String> {
    let mut changed: Vec<String> = new_vars
        .keys()
        .chain(old_vars.keys())
        .filter(|ns| new_vars.get(*ns) != old_vars.get(*ns))
        .cloned()
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

/// Of the `unchanged` stored files, those of the `changed` namespaces or requiring them, with
/// their stored text.
fn unchanged_dependents(
    store: &Store,
    changed: &[String],
    unchanged: &[String],
) -> Result<Vec<Incoming>> {
    if changed.is_empty() || unchanged.is_empty() {
        return Ok(Vec::new());
    }
    let changed: HashSet<&str> = changed.iter().map(String::as_str).collect();
    let files = || params([("files", column(unchanged.iter().map(|p| p.as_str().into())))]);
    let of_ns = store.query(
        "files[file] <- $files ?[file, ns] := files[file], *file{path: file, ns, error}, error == ''",
        files(),
    )?;
    let requiring = store.query(
        "files[file] <- $files ?[file, n] := files[file], *ns_decl{file, requires}, n in requires",
        files(),
    )?;
    let mut paths: BTreeSet<String> = BTreeSet::new();
    for r in of_ns.rows.iter().chain(&requiring.rows) {
        if changed.contains(str_at(r, 1).as_str()) {
            paths.insert(str_at(r, 0));
        }
    }
    let mut out = Vec::new();
    for path in paths {
        if let Some(bytes) = crate::query::file_bytes(store, &path)? {
            out.push(Incoming { path, bytes });
        }
    }
    Ok(out)
}

/// Stored Clojure files outside `paths` of the `changed` namespaces or requiring them, with
/// their stored text.
fn files_depending_on(
    store: &Store,
    changed: &[String],
    paths: &HashSet<&str>,
) -> Result<Vec<Incoming>> {
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let rows = store.query(
        "changed[n] <- $changed
         ?[file] := changed[n], *ns_decl{file, requires}, is_in(n, requires)
         ?[file] := changed[n], *file{path: file, ns: n, error}, error == ''",
        params([("changed", column(changed.iter().map(|n| n.as_str().into())))]),
    )?;
    let mut out = Vec::new();
    for r in &rows.rows {
        let path = str_at(r, 0);
        if paths.contains(path.as_str()) {
            continue;
        }
        if let Some(bytes) = crate::query::file_bytes(store, &path)? {
            out.push(Incoming { path, bytes });
        }
    }
    Ok(out)
}

/// The stored purity of the vars that the given files define.
fn purity_of_vars(
    store: &Store,
    paths: &HashSet<&str>,
    old: &HashMap<String, Vec<OldForm>>,
) -> Result<HashMap<String, Purity>> {
    // The forms' classes are in `old` already: only which vars they define is read.
    let class: HashMap<&str, &str> =
        old.values().flatten().map(|o| (o.id.as_str(), o.stored.purity.as_str())).collect();
    let rows = store.query(
        "paths[file] <- $paths ?[var, id] := paths[file], *form_at{file, id}, *defined_by{id, var}",
        params([("paths", column(paths.iter().map(|p| (*p).into())))]),
    )?;
    let mut out = HashMap::new();
    for r in &rows.rows {
        if let Some(p) = class.get(str_at(r, 1).as_str()).and_then(|c| Purity::parse(c)) {
            by_var(&mut out, str_at(r, 0), p);
        }
    }
    Ok(out)
}

/// Record a var's class. A var that several forms define (`declare` then `defn`, a `def`
/// redefined) takes the worst of them, whatever order they come in: a map that kept the last
/// one seen would compare unequal to the same facts read in another order, and every save of
/// such a file would recompute the whole store's purity.
fn by_var<V: Eq + std::hash::Hash>(map: &mut HashMap<V, Purity>, var: V, p: Purity) {
    let class = map.entry(var).or_insert(p);
    *class = purity::combine([*class, p].into_iter());
}

/// A stored form for purity propagation: id, the vars it defines, its callees, its class now.
type StoredPurity = (String, Vec<String>, Vec<String>, Purity);

/// The stored forms outside `replaced` whose purity may follow the class of the `moved` vars:
/// those calling them, those calling the vars those define, and so on; with every other form
/// that defines one of their vars (a var is as bad as the worst of its definitions). Each comes
/// with its defined vars, callees (an unresolved symbol as `?sym`) and current purity.
fn affected_forms(
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
    if reached.is_empty() {
        return Ok(Vec::new());
    }
    let ids = column(reached.iter().map(|id| id.as_str().into()));
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

/// The change that gives one stored top-level form a new text, computed for that form alone,
/// when nothing else in the store can read differently because of it. `file_text` is the whole
/// new text of its file (for the file's hash).
///
/// A save of a file re-reads, re-parses and re-resolves the whole file; an agent replacing one
/// function of a large file paid for all of it. In place, the form is parsed at its place,
/// resolved under its namespace's stored declaration and tables, and classified against the
/// stored purity of what it calls. That holds only while the rest of the store stays as it was,
/// so `None` (take the whole file through [`file_changes`]) unless:
/// - the old and the new form are top-level definitions (no `ns` form, no `comment` block, no
///   top-level call: a `(require ...)` changes how the file's other forms resolve);
/// - the new form defines the same vars, with the same privacy (the namespace tables the
///   other forms resolve against stay the same);
/// - no other form starts on its last line (the forms after it then move by whole lines,
///   their columns unchanged);
/// - its purity class is the old one, and the stored classes it is computed from did not come
///   from its old text (a callee in its own file that calls it back).
///
/// The forms after it come as their `form` rows alone, moved; the change carries the store
/// generation everything was read at, and `apply` refuses it at a later one.
pub fn form_in_place(
    store: &Store,
    path: &str,
    id: &str,
    source: &str,
    file_text: &str,
) -> Result<Option<Vec<Change>>> {
    let mut timings = Timings::traced("form in place");
    let Some(lang) = Lang::from_path(path).filter(|l| *l != Lang::Edn) else { return Ok(None) };
    let rows = store.query(
        "?[ns, pos, kind, line, col, end_line, leading, purity, private, decl, trailing, generation,
           hash, rhash, callees, arglists, macro, platforms] :=
             *form{id: $id, file, ns, pos, parent, kind, line, col, end_line, leading, purity, private,
                   hash, rhash, callees, arglists, macro, platforms},
             file == $path, parent == '',
             *file{path: file, ns: file_ns, error, trailing}, error == '', file_ns == ns,
             *ns_decl{ns, file: decl_file, decl}, decl_file == file,
             *meta{key: 'generation', value: generation}",
        params([("id", id.into()), ("path", path.into())]),
    )?;
    let Some(r) = rows.rows.first() else { return Ok(None) };
    let (ns, pos, old_kind) = (str_at(r, 0), int_at(r, 1), str_at(r, 2));
    let (line, col, end_line) = (int_at(r, 3), int_at(r, 4), int_at(r, 5));
    let (leading, old_purity, old_private) = (str_at(r, 6), str_at(r, 7), r[8] == true.into());
    let in_place = |k: Kind| !matches!(k, Kind::Ns | Kind::Comment | Kind::Other);
    if !in_place(Kind::parse(&old_kind)) {
        return Ok(None);
    }
    let decl: NsDecl = match &r[9] {
        DataValue::Json(j) => match serde_json::from_value(j.0.clone()) {
            Ok(d) => d,
            Err(_) => return Ok(None),
        },
        _ => return Ok(None),
    };
    let trailing = str_at(r, 10);
    // What everything below is read at: `apply` writes the change only at the same generation.
    let Ok(generation) = str_at(r, 11).parse::<u64>() else { return Ok(None) };
    let old_vars: BTreeSet<String> =
        crate::query::vars_defined_by(store, id)?.into_iter().collect();
    // The stored form as `apply` compares with it, so that it reads it no more.
    let mut old_forms = HashMap::new();
    old_forms.insert(id.to_string(), stored_old_form(id, path, r));
    timings.lap("stored form");

    // The new text where the old one starts: every place in it is the file's.
    let (Ok(line0), Ok(col0)) = (usize::try_from(line - 1), usize::try_from(col - 1)) else {
        return Ok(None);
    };
    let placed = format!("{}{}{source}", "\n".repeat(line0), " ".repeat(col0));
    let mut parsed = forms::parse_file(path, lang, placed);
    let forms::Content::Forms { forms, trailing: after } = &mut parsed.content else {
        return Ok(None);
    };
    let [form] = forms.as_mut_slice() else { return Ok(None) };
    let a = &form.analysis;
    let new_vars: BTreeSet<String> = a.defines.iter().map(|d| format!("{ns}/{}", d.name)).collect();
    // Lines the forms after it move by.
    let shift = i64::from(form.end.line) - i64::from(form.start.line) - (end_line - line);
    if !in_place(a.kind)
        || !after.trim().is_empty()
        || new_vars != old_vars
        || a.flags.private != old_private
        || !next_form_on_a_later_line(store, path, pos)?
    {
        return Ok(None);
    }
    form.ns = ns.clone();
    form.leading = leading;
    form.hash = forms::hash_text(&[&form.leading, &form.source]);
    parsed.ns = ns.clone();
    parsed.decl = decl;
    timings.lap("parse");

    // Resolved under the namespace's tables as stored: the file's other forms define what
    // they did, and this one the same vars.
    let nss = namespace_tables(store, &[&parsed], &HashSet::new(), Some(generation))?;
    let resolved = forms::resolve_file(&parsed, &nss);
    let Some(res) = resolved.first() else { return Ok(None) };
    let mut row = row_of(&parsed, &parsed.forms()[0], res.clone(), id, "", pos as usize);
    timings.lap("resolve");

    // Purity: against the stored class of every callee, and again with the callees of its
    // own file taken as pure; the two agree when the stored classes of its file do not matter.
    let calls: Vec<String> = row
        .calls
        .iter()
        .map(|c| c.to.clone())
        .filter(|c| *c != row.fqn)
        .chain(row.unresolved.iter().map(|(s, _)| format!("?{s}")))
        .collect();
    let defs: Vec<String> = row.defines.iter().map(|(v, _)| v.clone()).collect();
    let callees: BTreeSet<&str> =
        calls.iter().map(String::as_str).filter(|c| !c.starts_with('?')).collect();
    let mut stored = HashMap::new();
    let mut own_file = HashMap::new();
    for (var, p, file) in stored_purity_rows(store, &callees)? {
        by_var(&mut stored, var.clone(), p);
        by_var(&mut own_file, var, if file == path { Purity::Pure } else { p });
    }
    let one = [((), defs.clone(), calls)];
    let purity = purity::propagate(&one, &stored)[&()];
    if purity.as_str() != old_purity {
        return Ok(None);
    }
    if purity != purity::propagate(&one, &own_file)[&()]
        && calls_back(store, path, &own_file, &stored, &defs)?
    {
        return Ok(None);
    }
    row.purity = purity.as_str().to_string();
    row.rhash = resolution_hash(&row);
    timings.lap("purity");
    let file = FileRow {
        path: path.to_string(),
        lang: lang.as_str().into(),
        ns,
        hash: forms::content_hash(file_text.as_bytes()),
        trailing,
        error: None,
        raw: Vec::new(),
    };
    let mut forms = vec![row];
    if shift != 0 {
        forms.extend(forms_after(store, path, pos, shift, &mut old_forms)?);
        timings.lap("forms after");
    }
    let read = StoredForms { generation, paths: HashSet::new(), forms: old_forms };
    Ok(Some(vec![Change::PutForms { file, forms, generation }, Change::Read(Box::new(read))]))
}

/// The top-level form `id` of `path` as `apply` compares with it, from the columns
/// [`form_in_place`] reads of it.
fn stored_old_form(id: &str, path: &str, r: &[DataValue]) -> change::OldForm {
    // In `change::OLD_FORM_COLS` order: id, hash, pos, line, col, parent, purity, file, ns,
    // rhash, callees, arglists, macro, kind, platforms.
    let old = [
        id.into(),
        r[12].clone(),
        r[1].clone(),
        r[3].clone(),
        r[4].clone(),
        "".into(),
        r[7].clone(),
        path.into(),
        r[0].clone(),
        r[13].clone(),
        r[14].clone(),
        r[15].clone(),
        r[16].clone(),
        r[2].clone(),
        r[17].clone(),
    ];
    change::OldForm::from_row(&old)
}

/// Stored forms as `apply` compares with them, from their rows read with `change::FORM_COLS`.
fn old_forms_of_rows(
    rows: &[Vec<DataValue>],
) -> impl Iterator<Item = (String, change::OldForm)> + '_ {
    let form_cols: Vec<&str> = change::FORM_COLS.split(", ").collect();
    // The `FORM_COLS` place of each `OLD_FORM_COLS` column.
    let at: Vec<usize> = (change::OLD_FORM_COLS.split(", "))
        .map(|c| form_cols.iter().position(|f| *f == c).expect("a column of `form`"))
        .collect();
    rows.iter().map(move |r| {
        let old: Vec<DataValue> = at.iter().map(|&i| r[i].clone()).collect();
        (str_at(r, 0), change::OldForm::from_row(&old))
    })
}

/// The stored forms after top-level position `pos` of `path` (with their comment-block
/// children), moved down by `shift` lines: what a whole-file save would write of them. Only
/// their `form` rows are read: what hangs off a form (calls, unresolved symbols, defines, call
/// sites, findings) is stored relative to its first line, and `apply` writes nothing else of
/// a form that only moved.
fn forms_after(
    store: &Store,
    path: &str,
    pos: i64,
    shift: i64,
    old_forms: &mut HashMap<String, change::OldForm>,
) -> Result<Vec<FormRow>> {
    let cols = change::FORM_COLS;
    let top = store.query(
        &format!(
            "?[{cols}] := *form_at{{file: $path, pos: p, id}}, p > $pos, *form{{{cols}}}, parent == ''"
        ),
        params([("path", path.into()), ("pos", pos.into())]),
    )?;
    let mut rows = top.rows;
    // The children of the comment blocks among them (there is no index by parent: the file's
    // forms are read, and only when there is a block).
    let blocks: Vec<DataValue> =
        rows.iter().filter(|r| r[5].get_str() == Some("comment")).map(|r| r[0].clone()).collect();
    if !blocks.is_empty() {
        let children = store.query(
            &format!(
                "?[{cols}] := *form_at{{file: $path, id}}, *form{{{cols}}}, is_in(parent, $blocks)"
            ),
            params([("path", path.into()), ("blocks", DataValue::List(blocks))]),
        )?;
        rows.extend(children.rows);
    }
    // As stored, for `apply` to compare with instead of reading them again.
    old_forms.extend(old_forms_of_rows(&rows));
    let mut forms: Vec<FormRow> = rows.iter().map(|r| change::form_from_row(r)).collect();
    let moved = |l: u32| (i64::from(l) + shift).max(1) as u32;
    for f in &mut forms {
        f.start.line = moved(f.start.line);
        f.end.line = moved(f.end.line);
        for s in &mut f.sites {
            s.pos.line = moved(s.pos.line);
        }
    }
    forms.sort_by(|a, b| (&a.parent, a.pos).cmp(&(&b.parent, b.pos)));
    Ok(forms)
}

/// Whether a callee of the form defined in its own file (one whose class in `own_file` was
/// taken as pure) calls, through its file, one of the form's own vars `defs`: then its stored
/// class may have come from the form's old text.
fn calls_back(
    store: &Store,
    path: &str,
    own_file: &HashMap<String, Purity>,
    stored: &HashMap<String, Purity>,
    defs: &[String],
) -> Result<bool> {
    let start: Vec<&str> = own_file
        .iter()
        .filter(|(v, p)| stored.get(*v) != Some(p))
        .map(|(v, _)| v.as_str())
        .collect();
    let rows = store.query(
        "start[v] <- $start
         reach[v] := start[v]
         reach[w] := reach[v], *defines{var: v, id}, *form{id, callees, file}, file == $path, w in callees
         ?[v] := reach[v], is_in(v, $own)",
        params([
            ("start", column(start.iter().map(|v| (*v).into()))),
            ("path", path.into()),
            ("own", DataValue::List(defs.iter().map(|v| v.as_str().into()).collect())),
        ]),
    )?;
    Ok(!rows.rows.is_empty())
}

/// Whether the top-level form after position `pos` of `path` (if any) starts on a later line
/// than the one at `pos` ends.
fn next_form_on_a_later_line(store: &Store, path: &str, pos: i64) -> Result<bool> {
    let rows = store.query(
        "?[leading] := *form_at{file: $path, pos: $next, id}, *form{id, leading}",
        params([("path", path.into()), ("next", (pos + 1).into())]),
    )?;
    Ok(rows.rows.first().is_none_or(|r| str_at(r, 0).contains('\n')))
}
