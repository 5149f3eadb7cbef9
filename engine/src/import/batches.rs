//! A whole directory imported in bounded batches: walk results grouped, parsed a few trees at
//! a time, resolved against namespace tables that grow in require order, written and dropped.

use super::*;

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
    // Into an empty store, the batches ask it only about keys they wrote themselves.
    let mut written = Written::if_empty(store)?;
    if !changes.is_empty() {
        let blobs = ChangeSet { author: author.to_string(), op: "import".into(), changes };
        change::apply_importing(store, &blobs, &mut written)?;
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
        let batch_written = beside.in_place_scope(|scope| {
            if let Some(incoming) = following {
                scope.spawn(move |_| *prepared = Some(growing.read_batch(incoming)));
            }
            let result = write_batch(store, author, batch, &mut taken, &mut written, &mut timings);
            timings.lap("store transaction");
            result
        });
        let (applied, errors, files) = batch_written?;
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
        let (applied, errors, files) =
            write_batch(store, author, batch, &mut taken, &mut written, &mut timings)?;
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
pub(super) fn in_groups(
    files: Vec<(Incoming, String)>,
    size: usize,
) -> Vec<Vec<(Incoming, String)>> {
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
pub(super) const TREES_AT_ONCE: usize = 32;

/// The most source whose syntax trees may all be alive at once (trees take about 56 bytes a
/// byte of source: some 220 MB): an import this small reads each batch in one step, on every
/// core, instead of [`TREES_AT_ONCE`] files at a time (a step waits for its largest file, and
/// a small tree is one or two batches, so little of its reading runs beside a write).
pub(super) const ONE_STEP_UP_TO: usize = 4 << 20;

/// A batch of files read and resolved, to be written.
pub(super) struct Batch {
    pub(super) parsed: Vec<ParsedFile>,
    pub(super) raw: Vec<Option<Vec<u8>>>,
    pub(super) resolved: Vec<Vec<Resolved>>,
}

/// Build a resolved batch's rows and write them in one transaction: what it did, the files that
/// did not parse, and how many files it wrote.
pub(super) fn write_batch<'s>(
    store: &'s Store,
    author: &str,
    batch: Batch,
    taken: &mut TakenIds<'s>,
    written: &mut Option<Written>,
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
        Some(Batched { taken, resolved, written: written.as_ref() }),
        &Quiet,
        timings,
    )?;
    drop(replaced);
    let files = parsed.len();
    drop(parsed);
    let applied = change::apply_importing(
        store,
        &ChangeSet { author: author.to_string(), op: "import".into(), changes },
        written,
    )?;
    Ok((applied, errors, files))
}

/// The namespace tables of a streamed import as its batches are read: the store's (outside the
/// imported files) with the definitions of every batch read so far, and what finds, once all
/// are read, the files resolved against tables that grew after them.
pub(super) struct GrowingTables {
    pub(super) nss: Namespaces,
    /// The namespaces known before any file was read: the store's.
    pub(super) stored_known: std::sync::Arc<HashSet<String>>,
    /// Namespaces counted known from the start, as guessed from the files' first `ns` forms.
    pub(super) guessed: HashSet<String>,
    /// Namespaces the imported files' forms are read in.
    pub(super) read: HashSet<String>,
    /// The last batch that defined a var in each namespace.
    pub(super) grown_at: HashMap<String, usize>,
    /// The batch each namespace neither stored nor guessed was first read in.
    pub(super) known_at: HashMap<String, usize>,
    /// Every var the imported files define, per namespace.
    pub(super) defined: HashMap<String, HashSet<String>>,
    pub(super) files: Vec<FileResolved>,
    /// Steps resolved so far ([`GrowingTables::resolve_step`]); "batch" below counts them.
    pub(super) steps: usize,
    /// Files parsed and resolved in one step.
    pub(super) step_files: usize,
}

/// Where a file was resolved: its batch, and the namespaces whose tables it read (those its
/// forms are read in, and those it refers wholesale).
pub(super) struct FileResolved {
    pub(super) path: String,
    pub(super) hash: String,
    pub(super) batch: usize,
    pub(super) read: Vec<String>,
}

impl GrowingTables {
    pub(super) fn new(
        mut nss: Namespaces,
        guessed: HashSet<String>,
        step_files: usize,
    ) -> GrowingTables {
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
    pub(super) fn read_batch(&mut self, incoming: Vec<(Incoming, String)>) -> Batch {
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
    pub(super) fn resolve_step(
        &mut self,
        mut parsed: Vec<ParsedFile>,
        raw: Vec<Option<Vec<u8>>>,
    ) -> Batch {
        let k = self.steps;
        self.steps += 1;
        for f in &parsed {
            for form in f.forms() {
                // `add_definitions` below makes it known.
                if !form.ns.is_empty() && !self.nss.known.contains(form.ns.as_str()) {
                    self.known_at.insert(form.ns.to_string(), k);
                }
                if !self.read.contains(form.ns.as_str()) {
                    self.read.insert(form.ns.to_string());
                }
                if !form.analysis.defines.is_empty() {
                    self.grown_at.insert(form.ns.to_string(), k);
                    let defined = self.defined.entry(form.ns.to_string()).or_default();
                    defined.extend(form.analysis.defines.iter().map(|d| d.name.to_string()));
                }
            }
            add_definitions(&mut self.nss, f);
            if f.forms().is_empty() {
                continue;
            }
            let mut read: Vec<String> = (f.forms().iter().map(|form| form.ns.to_string()))
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
    pub(super) fn stale_files(&mut self, root: &Path) -> Vec<String> {
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
pub(super) fn qualifiers(text: &str) -> impl Iterator<Item = &str> {
    let delimiter = |c: char| c.is_whitespace() || "()[]{}\"';,@~^`\\".contains(c);
    text.split(delimiter).filter_map(|token| {
        let (ns, _) = token.split_once('/')?;
        (!ns.is_empty()).then_some(ns)
    })
}

const CLOJURE_CORE: &str = "clojure.core";

/// Files ordered so that a namespace comes after those it requires (cycles broken in path
/// order); files of one namespace stay together, in path order. `key` gives an item's
/// namespace, its requires and its path. Every namespace requires `clojure.core`, as the
/// Clojure reader does, without saying so.
pub(super) fn in_require_order<T>(
    items: &mut [T],
    key: impl Fn(&T) -> (&String, &Vec<String>, &String),
) {
    let mut requires: std::collections::BTreeMap<&str, BTreeSet<&str>> = Default::default();
    for item in items.iter() {
        let (ns, reqs, _) = key(item);
        let deps = requires.entry(ns.as_str()).or_default();
        deps.extend(reqs.iter().map(String::as_str));
        if ns != CLOJURE_CORE {
            deps.insert(CLOJURE_CORE);
        }
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
pub(super) fn summed(laps: &[(String, f64)]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for (phase, ms) in laps {
        match out.iter_mut().find(|(p, _)| p == phase) {
            Some((_, total)) => *total += ms,
            None => out.push((phase.clone(), *ms)),
        }
    }
    out
}

/// Every stored path with its content hash and whether it is a Clojure `file` or a `blob`.
pub(super) fn stored_paths(store: &Store) -> Result<HashMap<String, (String, String)>> {
    let rows = store.query(
        "?[path, hash, kind] := *file{path, hash}, kind = 'file'
         ?[path, hash, kind] := *blob{path, hash}, kind = 'blob'",
        Default::default(),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), (str_at(r, 1), str_at(r, 2)))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `clojure.core` comes before the namespaces that use it without requiring it, even
    /// those whose names sort before it (`clj-time.core`). Had it come after them, the batch
    /// defining it would have moved the class of vars they had called already (its
    /// `load`ed protocols reach most of the store), and every form that reaches them would have
    /// been classed again: 0.5–1 s a batch on the corpus in batches of 32 or 64 files.
    #[test]
    fn clojure_core_comes_before_every_namespace() {
        let item = |ns: &str, reqs: &[&str], path: &str| {
            (
                ns.to_string(),
                reqs.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
                path.to_string(),
            )
        };
        let mut items = vec![
            item("clj-time.core", &[], "clj-time/core.clj"),
            item("", &[], "clojure/core_print.clj"),
            item("clojure.core", &[], "clojure/core.clj"),
            item("clj-time.format", &["clj-time.core"], "clj-time/format.clj"),
            item("clojure.core", &[], "clojure/core.cljs"),
        ];
        in_require_order(&mut items, |(ns, reqs, path)| (ns, reqs, path));
        let paths: Vec<&str> = items.iter().map(|(_, _, p)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "clojure/core.clj",
                "clojure/core.cljs",
                "clojure/core_print.clj",
                "clj-time/core.clj",
                "clj-time/format.clj"
            ]
        );
    }
}
