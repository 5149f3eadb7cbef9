//! The CozoDB store: schema, opening (with a schema-version check), and parameterised queries.
//!
//! Parameters always travel as Cozo script parameters (`$name`), never spliced into script text.
//! Reads go through [`Store::query`]; user-supplied scripts through [`Store::query_user`], which
//! refuses anything that would mutate. Writes live in `change`.
//!
//! Several handles may open one store at once (the daemon, a CLI command, a test's second
//! handle). SQLite answers a reader that meets another connection's commit with "database is
//! locked", and Cozo 0.7.6 unwraps some of those answers into panics. So every handle and process
//! agrees on one lock, `.formdb/lock` (`flock`): shared around each read, exclusive from a
//! writer's first read to its commit ([`Store::writer`]). Readers wait for a commit instead of
//! failing, and no two writers interleave their reads and writes.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cozo::{DataValue, DbInstance, NamedRows, ScriptMutability};

/// Bump when the schema changes shape; a store of another version is refused with a message.
/// A store of an earlier version from `store_migrate::OLDEST` on is brought forward at open.
pub const SCHEMA_VERSION: i64 = 10;

#[path = "store_migrate.rs"]
mod migrate;

/// The directory that holds a project's store, like `.git`.
pub const STORE_DIR: &str = ".formdb";
pub use crate::paths::STORE_FILE as DB_FILE;

/// The lock every handle of an on-disk store takes around its Cozo calls (see the module doc).
const LOCK_FILE: &str = "lock";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no formdb store found in {0} or any parent directory (run `formdb import` first, or pass --db PATH)")]
    NotFound(PathBuf),
    #[error("the store at {path} has schema version {found}, this formdb expects {expected}; re-import into a new store (remove {path} and run `formdb import`)")]
    SchemaVersion { path: PathBuf, found: i64, expected: i64 },
    #[error("cannot open the store at {path}: {message}")]
    Open { path: PathBuf, message: String },
    /// A script failed; `script` names it: the engine source line that ran it, a queries file,
    /// or the user's script.
    #[error("query failed ({script}): {message}")]
    Query { script: String, message: String },
    /// No form has this id or defines this var name.
    #[error("no form with id or var name `{key}` in the store (ids look like `k3m9xq2a`; var names like `my.ns/my-fn`)")]
    NoForm { key: String },
    #[error("refused: {0}")]
    Refused(String),
    /// A change computed from what the store held at one generation met a later one (another
    /// writer came in between); nothing was written, and the change can be computed again.
    #[error("the store changed while the edit was being made (generation {read} became {now}); nothing was written: make the edit again")]
    Moved { read: u64, now: u64 },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub type Params = BTreeMap<String, DataValue>;

/// An open formdb store.
pub struct Store {
    pub(crate) db: DbInstance,
    location: Option<PathBuf>,
    /// The SQLite file of a store on SQLite (`None` on other engines and in memory).
    pub(crate) sqlite_file: Option<PathBuf>,
    /// `sqlite_file` open for [`Store::change_stamp`], opened at its first call.
    pub(crate) stamp_file: std::sync::OnceLock<std::fs::File>,
    /// `.formdb/lock` of an on-disk store; `None` in memory.
    lock_path: Option<PathBuf>,
    /// Tells this handle apart in the thread-local list of held writer locks.
    key: u64,
    /// One writer thread per handle; the file lock orders handles and processes.
    write_lock: Mutex<()>,
    /// Column names (and whether each is a key) per relation, read once: the schema is fixed
    /// once the store is open.
    /// Relations created later (the sync's bookkeeping) are read when first asked for.
    columns: Mutex<HashMap<String, Vec<(String, bool)>>>,
    /// The namespace of every stored file that has one (path → ns) at one generation: what
    /// resolving any form reads to tell a namespace from a class, about 0.4 ms to read on the
    /// corpus. `change::apply` moves it along with this handle's own writes; a write by another
    /// handle moves the generation past it, and it is read again.
    file_nss: Mutex<Option<(u64, FileNss)>>,
    /// Called after each change set this handle commits (`change::apply`): how a writer outside
    /// `formdb up` writes its changes back to the working directory before it answers.
    after_commit: Mutex<Option<AfterCommit>>,
}

/// See [`Store::set_after_commit`].
pub type AfterCommit = std::sync::Arc<dyn Fn() + Send + Sync>;

/// Stored files' namespaces: path → ns, for the files that have one, and the set of those
/// namespaces, which every resolution reads whole (an edit shares it instead of collecting
/// 4,000 names of a 1 M-line store again).
#[derive(Clone, Default)]
pub(crate) struct FileNamespaces {
    pub(crate) by_path: HashMap<String, String>,
    pub(crate) known: Arc<std::collections::HashSet<String>>,
}

impl FileNamespaces {
    pub(crate) fn new(by_path: HashMap<String, String>) -> FileNamespaces {
        let known = Arc::new(by_path.values().cloned().collect());
        FileNamespaces { by_path, known }
    }

    /// File `path` now has namespace `ns` (`""`: none, or the file is gone).
    fn set(&mut self, path: &str, ns: &str) {
        let old = if ns.is_empty() {
            self.by_path.remove(path)
        } else {
            self.by_path.insert(path.to_string(), ns.to_string())
        };
        if let Some(old) = old.filter(|old| old != ns) {
            // Another file may declare it too (a `.clj` and a `.cljs` of one namespace).
            if !self.by_path.values().any(|n| *n == old) {
                Arc::make_mut(&mut self.known).remove(&old);
            }
        }
        if !ns.is_empty() && !self.known.contains(ns) {
            Arc::make_mut(&mut self.known).insert(ns.to_string());
        }
    }
}

pub(crate) type FileNss = Arc<FileNamespaces>;

const SCHEMA: &[&str] = &[
    ":create meta {key: String => value: String}",
    ":create file {path: String => lang: String, ns: String, hash: String, trailing: String, error: String, error_line: Int, error_col: Int, raw: Bytes}",
    ":create blob {path: String => hash: String, content: Bytes}",
    // Each text once: `canonical` is empty where it equals `source`. `sites`: the call sites of
    // a top-level form as diagnostics check them (`sites::stored`: argument count, the call
    // around it, whether it runs at load, the head as written), one column rather than a row
    // per call.
    ":create form {id: String => file: String, ns: String, pos: Int, parent: String, kind: String, head: String, name: String, fqn: String, dispatch: String, doc: String, arglists: [String], leading: String, source: String, canonical: String, line: Int, col: Int, end_line: Int, end_col: Int, hash: String, private: Bool, dynamic: Bool, deprecated: Bool, test: Bool, export: Bool, macro: Bool, platforms: [String], purity: String, rhash: String, callees: [String], sites: String}",
    // Secondary access paths are plain relations kept by `change::apply`, not Cozo indices:
    // Cozo 0.7.6 picks an index for a user query that binds an indexed column and then joins
    // it wrongly when the query reads other columns (rows silently go missing).
    // A form's place in its file, with a top-level form's lengths (in characters, as Cozo
    // counts them) of its leading trivia and source (0 for a form inside one, whose text is its
    // parent's): a big file's save finds the form its changed bytes fall in from these alone
    // (`read::files::span_holding`). The texts are the form's own; a file's whole text is
    // `file_text`.
    ":create form_at {file: String, pos: Int, id: String => leading_chars: Int, source_chars: Int}",
    // A parsed file's whole text as stored, packed (`crate::packed`), for files of up to
    // `change::FILE_TEXT_MAX` bytes: a reader of whole files reads one value a file instead of
    // a row per form (`read::files::file_texts`). Derived, and checked against the file's hash
    // when read: where one is missing or stale, the file is read from its forms' rows, placed
    // by `form_at`.
    ":create file_text {path: String => text: Bytes}",
    ":create defines {var: String, id: String => line: Int}",
    ":create defined_by {id: String, var: String}",
    // Keyed by callee first: usages are prefix lookups. The forward direction is the form's own
    // `callees` list, so each edge is written once.
    ":create calls {to: String, from: String => kind: String, line: Int, col: Int, count: Int}",
    ":create unresolved {from: String, sym: String => line: Int, col: Int}",
    // What the checks found in each form (`checks`): its unresolved symbols, and for top-level
    // forms the checks that need the called vars. Kept by `change::apply` for the forms it
    // writes and for the callers of vars it changes; `report` is the top-level form reported
    // (a comment block for its children). Keyed by namespace first: a namespace's findings
    // are one range.
    ":create diagnostic {ns: String, id: String, line: Int, col: Int, kind: String, message: String => severity: String, file: String, report: String}",
    // `source` is `leading` + `source` of the form as this version left it; empty for a delete,
    // and for the current version of a live form (whose text is the form's own).
    ":create version {id: String, v: Int => at: Float, author: String, op: String, file: String, ns: String, name: String, hash: String, source: String}",
    ":create purity_rule {var: String => class: String}",
    // Each user's preferred alias per namespace (the projector's views).
    ":create alias_map {user: String, ns: String => alias: String}",
    ":create ns_decl {ns: String => file: String, doc: String, requires: [String], decl: Json}",
    // The vars each `ns` form refers by name (`:refer [f]`, `:rename`), keyed by var: who
    // names a var without calling it is a key lookup, not a read of every declaration.
    ":create ns_refer {var: String, ns: String}",
    // What each `ns` form requires, keyed by namespace: the require graph, walked without
    // reading whole declarations.
    ":create ns_require {ns: String, lib: String}",
    // A save that did not parse (or was refused) keeps its bytes here, exactly as written, until
    // a good save replaces it or it is discarded. `base` is the text the writer had read.
    ":create draft {path: String => user: String, at: Float, bytes: Bytes, error: String, line: Int, col: Int, base: Bytes}",
    // The whole text of a deleted file, so it can be restored.
    ":create file_tomb {path: String, at: Float => author: String, bytes: Bytes}",
    // History imported from git (`history`): the commits that changed forms (`seq` orders
    // them oldest first), the commit of each version recorded from one, and what the walk
    // reached (`last_commit`), so a re-run starts after it.
    ":create commit {sha: String => seq: Int, author: String, email: String, at: Float, summary: String}",
    ":create version_commit {id: String, v: Int => commit: String}",
    ":create git_import {key: String => value: String}",
];

/// Every `:create` a new store runs: the schema's, and those of the relations older stores
/// make on first use (the sync's, the evaluation log).
fn creations() -> impl Iterator<Item = &'static str> {
    let lazily_made = crate::read::sync_state::RELATIONS.iter().map(|(_, stmt)| *stmt);
    SCHEMA.iter().copied().chain(lazily_made).chain([crate::evals::CREATE])
}

/// The relation a `:create` statement makes.
fn relation_made_by(stmt: &str) -> Option<&str> {
    stmt.strip_prefix(":create ")?.split_whitespace().next()
}

impl Store {
    /// Open (creating if needed) the persistent store in `dir` (a `.formdb` directory).
    pub fn open(dir: &Path) -> Result<Store> {
        Store::open_on("sqlite", dir, DB_FILE)
    }

    /// Open (creating if needed) a store on another Cozo storage engine (`sqlite`, `sled`,
    /// `mem`): for measuring them against each other.
    pub fn open_with_engine(engine: &str, dir: &Path) -> Result<Store> {
        Store::open_on(engine, dir, &format!("store.{engine}"))
    }

    fn open_on(engine: &str, dir: &Path, file_name: &str) -> Result<Store> {
        let open_err = |path: &Path, e: &dyn std::fmt::Display| StoreError::Open {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        create_private_dir(dir).map_err(|e| open_err(dir, &e))?;
        // The store lives inside a working tree: keep it out of git's way, as `.venv` and
        // `.pytest_cache` do. A user's own ignore file there is left alone.
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "# written by formdb: the store is not source\n*\n")
                .map_err(|e| open_err(&ignore, &e))?;
        }
        let lock_path = dir.join(LOCK_FILE);
        // Exclusive while Cozo opens the file and the schema is checked or created: opening
        // reads (and after a crash rolls back a hot journal), creating writes.
        let exclusive = locked(&lock_path, Hold::Exclusive)?;
        let file = dir.join(file_name);
        if engine == "sqlite" {
            crate::sqlite_connections::configure();
            // Created here, before SQLite would create it 0644: it holds private source.
            // SQLite gives its journal the database file's mode.
            create_private_file(&file).map_err(|e| open_err(&file, &e))?;
            lay_out_new_file(&file).map_err(|e| open_err(&file, &e))?;
        }
        let db = DbInstance::new(engine, file.to_string_lossy().as_ref(), "")
            .map_err(|e| open_err(&file, &e))?;
        let mut store = Store::with(db, Some(dir.to_path_buf()), Some(lock_path));
        store.sqlite_file = (engine == "sqlite").then_some(file);
        let mark = WritingMark::new(store.key);
        store.init()?;
        drop(mark);
        drop(exclusive);
        Ok(store)
    }

    fn with(db: DbInstance, location: Option<PathBuf>, lock_path: Option<PathBuf>) -> Store {
        static KEYS: AtomicU64 = AtomicU64::new(0);
        Store {
            db,
            location,
            sqlite_file: None,
            stamp_file: std::sync::OnceLock::new(),
            lock_path,
            key: KEYS.fetch_add(1, Ordering::Relaxed),
            write_lock: Mutex::new(()),
            columns: Default::default(),
            file_nss: Default::default(),
            after_commit: Default::default(),
        }
    }

    /// Open an existing store; never creates one.
    pub fn open_existing(dir: &Path) -> Result<Store> {
        if !dir.join(DB_FILE).is_file() {
            return Err(StoreError::NotFound(dir.to_path_buf()));
        }
        Store::open(dir)
    }

    /// A store in memory, for tests whose subject is not persistence.
    pub fn open_in_memory() -> Result<Store> {
        let db = DbInstance::new("mem", "", "")
            .map_err(|e| StoreError::Open { path: "<memory>".into(), message: e.to_string() })?;
        let store = Store::with(db, None, None);
        store.init()?;
        Ok(store)
    }

    /// Find `.formdb/` in `start` or a parent directory, the way git finds `.git`.
    pub fn discover(start: &Path) -> Result<PathBuf> {
        let mut dir = Some(start);
        while let Some(d) = dir {
            let candidate = d.join(STORE_DIR);
            if candidate.join(DB_FILE).is_file() {
                return Ok(candidate);
            }
            dir = d.parent();
        }
        Err(StoreError::NotFound(start.to_path_buf()))
    }

    /// This handle's number, unique in the process (never reused): what the caches of files
    /// being edited (`memo`, `syntax::parse_at`) and the projector's render cache of a memory
    /// store are keyed by, so that two stores never see each other's entries.
    pub fn id(&self) -> u64 {
        self.key
    }

    pub fn location(&self) -> Option<&Path> {
        self.location.as_deref()
    }

    fn init(&self) -> Result<()> {
        let existing = self
            .db
            .run_script("::relations", Default::default(), ScriptMutability::Immutable)
            .map_err(|e| failed_at(Location::caller(), e))?;
        let has_meta =
            existing.rows.iter().any(|r| r.first().and_then(|v| v.get_str()) == Some("meta"));
        if has_meta {
            let rows =
                self.query("?[v] := *meta{key: 'schema_version', value: v}", Params::new())?;
            let found = rows
                .rows
                .first()
                .and_then(|r| r[0].get_str())
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if (migrate::OLDEST..SCHEMA_VERSION).contains(&found) {
                return migrate::migrate(self, found);
            }
            if found == SCHEMA_VERSION {
                // An upgrade stopped part-way: its rows are at this schema, and it goes on.
                let from = self.meta(migrate::UPGRADING_FROM)?.and_then(|v| v.parse().ok());
                if let Some(from) = from.filter(|v| (migrate::OLDEST..SCHEMA_VERSION).contains(v)) {
                    return migrate::migrate(self, from);
                }
            }
            if rows.rows.is_empty() && self.made_half(&existing)? {
                // Made by a formdb that was killed while it made a store one relation a
                // commit: it holds nothing, so it is made again, as a new store is.
                let names: Vec<String> = existing.rows.iter().map(|r| str_at(r, 0)).collect();
                self.db
                    .run_script(
                        &format!("::remove {}", names.join(", ")),
                        Default::default(),
                        ScriptMutability::Mutable,
                    )
                    .map_err(|e| failed_at(Location::caller(), e))?;
                return self.create();
            }
            if found != SCHEMA_VERSION {
                return Err(StoreError::SchemaVersion {
                    path: self.location.clone().unwrap_or_default(),
                    found,
                    expected: SCHEMA_VERSION,
                });
            }
            if existing
                .rows
                .iter()
                .any(|r| r.first().and_then(|v| v.get_str()) == Some("call_site"))
            {
                // An upgrade to schema 7 stopped after moving the call sites into `form`.
                return migrate::drop_call_site(self);
            }
            return Ok(());
        }
        if !existing.rows.is_empty() {
            return Err(StoreError::Open {
                path: self.location.clone().unwrap_or_default(),
                message: "not a formdb store (it has relations but no schema version)".into(),
            });
        }
        self.create()
    }

    /// Whether a store without a schema version holds only relations of formdb's, all empty:
    /// what a formdb that made a store one relation a commit left when it was killed.
    fn made_half(&self, existing: &NamedRows) -> Result<bool> {
        let ours: HashSet<&str> = creations().filter_map(relation_made_by).collect();
        for row in &existing.rows {
            let name = str_at(row, 0);
            if !ours.contains(name.as_str()) {
                return Ok(false);
            }
            let arity = row.get(1).and_then(DataValue::get_int).unwrap_or(0);
            let vars: Vec<String> = (0..arity).map(|i| format!("c{i}")).collect();
            let script = format!("?[c0] := *{name}[{}] :limit 1", vars.join(", "));
            if !self.query(&script, Params::new())?.rows.is_empty() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Make every relation, with the purity rules and the schema version.
    fn create(&self) -> Result<()> {
        // Every relation, the purity rules and the schema version in one transaction: a
        // process killed while it made a new store leaves no relations behind (the next open
        // found `meta` without a version and refused the store as schema version 0), and one
        // commit (four fsyncs) replaces 22, and the sync's four on its first use.
        let mut script: String = creations().map(|stmt| format!("{{{stmt}}}\n")).collect();
        script.push_str(
            "{?[var, class] <- $rules :put purity_rule {var => class}}
             {?[key, value] <- [['schema_version', $v]] :put meta {key => value}}",
        );
        let rules: Vec<DataValue> = crate::purity::default_rules()
            .rows()
            .into_iter()
            .map(|(var, class)| DataValue::List(vec![var.into(), class.as_str().into()]))
            .collect();
        let mut p = Params::new();
        p.insert("rules".into(), DataValue::List(rules));
        p.insert("v".into(), SCHEMA_VERSION.to_string().into());
        self.db.run_script(&script, p, ScriptMutability::Mutable).map_err(|e| {
            StoreError::Query { script: "the schema".into(), message: e.to_string() }
        })?;
        Ok(())
    }

    /// Run a read-only script with parameters. A failure names the engine line that called.
    #[track_caller]
    pub fn query(&self, script: &str, params: Params) -> Result<NamedRows> {
        let at = Location::caller();
        let _shared = self.reader()?;
        let _timed = crate::trace::Script::new(script);
        self.db
            .run_script(script, params, ScriptMutability::Immutable)
            .map_err(|e| failed_at(at, e))
    }

    /// The steps of `script`'s plan (`::explain`): each step's operation, and its whole row as
    /// text. For tests that keep a query reading by key: where a stored atom binds a non-key
    /// column to a constant, Cozo 0.7.6 reads the whole relation and joins it in memory
    /// (`stored_mat_join`).
    pub fn plan_steps(&self, script: &str, params: Params) -> Result<Vec<(String, String)>> {
        let plan = self.query(&format!("::explain {{ {script} }}"), params)?;
        let op = plan.headers.iter().position(|h| h == "op").ok_or_else(|| StoreError::Query {
            script: script.to_string(),
            message: "its plan has no `op` column".into(),
        })?;
        Ok(plan
            .rows
            .iter()
            .map(|r| {
                let text = r.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" ");
                (str_at(r, op), text)
            })
            .collect())
    }

    /// Run a mutating script for data outside the form model (the search index, alias maps).
    /// Forms and files change only through `change::apply`.
    #[track_caller]
    pub fn write(&self, script: &str, params: Params) -> Result<NamedRows> {
        let at = Location::caller();
        let _writer = self.writer()?;
        let _timed = crate::trace::Script::new(script);
        self.db.run_script(script, params, ScriptMutability::Mutable).map_err(|e| failed_at(at, e))
    }

    /// Put whole rows (`relation` → rows in schema order) and delete keys (`-relation` → keys)
    /// in one transaction, for data outside the form model as [`Store::write`]. The rows go to
    /// Cozo's `import_relations` as they are: a `:put` script copies every constant it is given
    /// several times over while it is planned and run, about six copies of a 5 MB text (the
    /// sync's merge base of a big file written back, a mount save's peak).
    #[track_caller]
    pub(crate) fn put_rows(&self, rows: BTreeMap<String, Vec<Vec<DataValue>>>) -> Result<()> {
        let at = Location::caller();
        let _writer = self.writer()?;
        let mut named = BTreeMap::new();
        for (rel, rows) in rows {
            if rows.is_empty() {
                continue;
            }
            let rows = self.named_rows(&rel, rows)?;
            named.insert(rel, rows);
        }
        if named.is_empty() {
            return Ok(());
        }
        crate::trace::count_script();
        self.db.import_relations(named).map_err(|e| failed_at(at, e))
    }

    /// Rows of `rel` (whole rows in schema order; of `-rel`, keys to delete) as Cozo's
    /// `import_relations` takes them: named with the relation's columns, in key order.
    pub(crate) fn named_rows(&self, rel: &str, rows: Vec<Vec<DataValue>>) -> Result<NamedRows> {
        let is_delete = rel.starts_with('-');
        let columns = self.columns(rel.trim_start_matches('-'))?;
        let keys = columns.iter().filter(|(_, is_key)| *is_key).count();
        // In key order, each row lands next to the one before it in SQLite's B-tree (the
        // pages just written are still in its cache) rather than at a random page: keys are
        // hashes, names and paths. The sort is stable, so of two puts of one key the later
        // still wins.
        // Most keys start with a text (an id, a path, a var), whose first eight bytes decide most
        // comparisons without reaching the values: `DataValue` orders texts by their bytes,
        // and every other value before them (its prefix is 0, and ties compare whole).
        let prefix = |r: &[DataValue]| match r.first() {
            Some(DataValue::Str(s)) => {
                let mut head = [0u8; 8];
                let n = s.len().min(8);
                head[..n].copy_from_slice(&s.as_bytes()[..n]);
                u64::from_be_bytes(head)
            }
            _ => 0,
        };
        let mut keyed: Vec<(u64, Vec<DataValue>)> =
            rows.into_iter().map(|r| (prefix(&r), r)).collect();
        keyed.sort_by(|(pa, a), (pb, b)| {
            pa.cmp(pb).then_with(|| a[..keys.min(a.len())].cmp(&b[..keys.min(b.len())]))
        });
        let rows: Vec<Vec<DataValue>> = keyed.into_iter().map(|(_, r)| r).collect();
        let headers: Vec<String> = columns
            .into_iter()
            .filter(|(_, is_key)| !is_delete || *is_key)
            .map(|(name, _)| name)
            .collect();
        Ok(NamedRows::new(headers, rows))
    }

    /// The writer lock of this store, held from a writer's first read to its commit: one thread
    /// of this handle, one handle among all handles and processes. Re-entrant: a thread that
    /// holds it gets a guard that locks nothing, and its reads take no shared lock.
    /// Run `hook` after every change set this handle commits, on the committing thread, once
    /// `change::apply` has released its write lock.
    pub fn set_after_commit(&self, hook: Option<AfterCommit>) {
        *self.after_commit.lock().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    pub(crate) fn committed(&self) {
        let hook = self.after_commit.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(hook) = hook {
            hook();
        }
    }

    pub fn writer(&self) -> Result<Writer<'_>> {
        if WritingMark::held(self.key) {
            return Ok(Writer { _mark: None, _file: None, _thread: None });
        }
        let thread = self.write_lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let file = self.lock_path.as_deref().map(|p| locked(p, Hold::Exclusive)).transpose()?;
        Ok(Writer { _mark: Some(WritingMark::new(self.key)), _file: file, _thread: Some(thread) })
    }

    /// Run `reads` (several scripts) under one shared lock, so that together they read one
    /// state of the store: a writer waits for all of them, not for each. (Each script inside
    /// takes a shared lock of its own too; shared locks never wait for one another.)
    pub(crate) fn reading<T>(&self, reads: impl FnOnce() -> Result<T>) -> Result<T> {
        let _shared = self.reader()?;
        reads()
    }

    /// The shared lock around one read, unless this thread is the writer.
    fn reader(&self) -> Result<Option<File>> {
        let Some(path) = &self.lock_path else { return Ok(None) };
        if WritingMark::held(self.key) {
            return Ok(None);
        }
        locked(path, Hold::Shared).map(Some)
    }

    /// Run a script written by a user (CLI `query`, MCP `query`): read-only, mutation refused.
    pub fn query_user(&self, script: &str, params: Params) -> Result<NamedRows> {
        let trimmed = script.trim_start();
        if trimmed.starts_with("::") && !is_read_only_sys_op(trimmed) {
            return Err(StoreError::Refused("system operations that change the store are not allowed here; this is a read-only query".into()));
        }
        let _shared = self.reader()?;
        let _timed = crate::trace::Script::new(script);
        self.db.run_script(script, params, ScriptMutability::Immutable).map_err(|e| {
            let msg = e.to_string();
            if msg.contains("mutat")
                || msg.contains("read-only")
                || msg.contains("ReadOnly")
                || msg.contains("immutable")
            {
                StoreError::Refused(format!(
                    "this is a read-only query; the script tries to change the store ({msg})"
                ))
            } else {
                StoreError::Query {
                    script: USER_SCRIPT.into(),
                    message: msg.split_whitespace().collect::<Vec<_>>().join(" "),
                }
            }
        })
    }

    /// The columns of a relation in schema order, each with whether it is part of the key.
    pub(crate) fn columns(&self, relation: &str) -> Result<Vec<(String, bool)>> {
        let mut known = self.columns.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(cols) = known.get(relation) {
            return Ok(cols.clone());
        }
        let rels = self.query("::relations", Params::new())?;
        if !rels.rows.iter().any(|r| str_at(r, 0) == relation) {
            return Err(StoreError::Query {
                script: "::relations".into(),
                message: format!("no relation `{relation}` in the store"),
            });
        }
        let cols = self.query(&format!("::columns {relation}"), Params::new())?;
        let cols: Vec<(String, bool)> =
            cols.rows.iter().map(|c| (str_at(c, 0), c[1].get_bool().unwrap_or(false))).collect();
        known.insert(relation.to_string(), cols.clone());
        Ok(cols)
    }

    /// The files' namespaces (path → ns) as of `generation`, if this handle holds them.
    pub(crate) fn file_nss_at(&self, generation: u64) -> Option<FileNss> {
        let held = self.file_nss.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        held.as_ref().filter(|(g, _)| *g == generation).map(|(_, m)| m.clone())
    }

    /// Hold the files' namespaces read at `generation`.
    pub(crate) fn hold_file_nss(&self, generation: u64, nss: FileNss) {
        *self.file_nss.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some((generation, nss));
    }

    /// A write that moved the store from `generation` to the next one set these files'
    /// namespaces (`""`: none, or the file is gone): the held ones follow if they were of
    /// `generation`, else they are dropped.
    pub(crate) fn follow_file_nss(&self, generation: u64, files: &[(&str, &str)]) {
        let mut held = self.file_nss.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match held.take() {
            Some((g, nss)) if g == generation => {
                let mut nss = Arc::unwrap_or_clone(nss);
                for (path, ns) in files {
                    nss.set(path, ns);
                }
                *held = Some((generation + 1, Arc::new(nss)));
            }
            _ => {}
        }
    }

    /// A value of the `meta` relation.
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        let rows = self.query("?[v] := *meta{key: $k, value: v}", params([("k", key.into())]))?;
        Ok(rows.rows.first().and_then(|r| r[0].get_str()).map(str::to_string))
    }
}

/// One write transaction across several scripts ([`Store::transaction`]): nothing it writes is
/// seen by anyone until [`Transaction::commit`], and dropping it uncommitted writes nothing.
///
/// Cozo runs a multi-script transaction on a thread that waits for scripts on a channel.
/// `DbInstance::multi_transaction` puts that thread on rayon's current pool, which, on the
/// one-worker pool of [`on_worker`] (where saves run), is the very thread that would wait for
/// it; so it gets a thread of its own here.
pub(crate) struct Transaction {
    scripts: crossbeam_channel::Sender<cozo::TransactionPayload>,
    results: crossbeam_channel::Receiver<std::result::Result<NamedRows, cozo::Error>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Store {
    /// Open a write transaction. The caller holds the writer lock ([`Store::writer`]) until it
    /// is committed or dropped: no other handle reads or writes meanwhile. Nor may the caller
    /// read through this handle before it ends: Cozo's SQLite storage makes every read wait
    /// for an open write transaction, so such a read would wait forever.
    pub(crate) fn transaction(&self) -> Result<Transaction> {
        let (scripts, scripts_in) = crossbeam_channel::bounded(1);
        let (results_out, results) = crossbeam_channel::bounded(1);
        let db = self.db.clone();
        let thread = std::thread::Builder::new()
            .name("formdb-transaction".into())
            .spawn(move || db.run_multi_transaction(true, scripts_in, results_out))
            .map_err(|e| StoreError::Query {
                script: "a write transaction".into(),
                message: format!("cannot start its thread: {e}"),
            })?;
        Ok(Transaction { scripts, results, thread: Some(thread) })
    }
}

impl Transaction {
    /// Run a mutating script inside the transaction.
    #[track_caller]
    pub(crate) fn run(&self, script: &str, params: Params) -> Result<NamedRows> {
        let at = Location::caller();
        let _timed = crate::trace::Script::new(script);
        let payload = cozo::TransactionPayload::Query((script.to_string(), params));
        self.scripts.send(payload).map_err(|e| failed_at(at, e))?;
        self.results.recv().map_err(|e| failed_at(at, e))?.map_err(|e| failed_at(at, e))
    }

    /// Commit everything the transaction wrote, at once.
    pub(crate) fn commit(mut self) -> Result<()> {
        let at = Location::caller();
        self.scripts.send(cozo::TransactionPayload::Commit).map_err(|e| failed_at(at, e))?;
        let committed = self.results.recv().map_err(|e| failed_at(at, e))?;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        committed.map(|_| ()).map_err(|e| failed_at(at, e))
    }
}

impl Drop for Transaction {
    /// Uncommitted: roll back, and wait for the thread so the store is as before on return.
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            if self.scripts.send(cozo::TransactionPayload::Abort).is_ok() {
                let _ = self.results.recv();
            }
            let _ = thread.join();
        }
    }
}

/// A held writer lock ([`Store::writer`]); released when dropped.
pub struct Writer<'a> {
    // Dropped in this order: the mark, then the file lock, then the thread mutex.
    _mark: Option<WritingMark>,
    _file: Option<File>,
    _thread: Option<MutexGuard<'a, ()>>,
}

/// Run `f`, which runs many store queries, on a rayon worker thread of its own: in place when
/// this thread is a rayon worker already, else on the one worker of a pool this thread keeps,
/// this thread waiting.
///
/// Why: Cozo evaluates the rules of each stratum with rayon's `par_iter`. From a thread outside
/// every rayon pool, each evaluation round hands its rules to rayon's global pool and sleeps
/// until they are done: about 0.15 ms per query of more than one rule, more than most queries
/// here take to run. On a worker the rules run in place. Edits, saves and diagnostics run
/// dozens of queries and call this once around themselves.
///
/// The pool is this thread's alone and has one worker, so nothing else ever runs on that
/// worker: the work keeps the thread-local state it would have had on the caller (the writer
/// lock marks), and never waits on a job queued behind it.
pub fn on_worker<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    thread_local! {
        static POOL: Option<rayon::ThreadPool> =
            rayon::ThreadPoolBuilder::new().num_threads(1).build().ok();
    }
    if rayon::current_thread_index().is_some() || WritingMark::held_any() {
        // On a worker already; or holding a writer lock, whose mark lives on this thread.
        return f();
    }
    POOL.with(|pool| match pool {
        Some(pool) => pool.install(f),
        None => f(),
    })
}

thread_local! {
    /// The stores (by `Store::key`) whose writer lock this thread holds.
    static WRITING: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Marks this thread as the writer of one store until dropped.
struct WritingMark(u64);

impl WritingMark {
    fn new(key: u64) -> WritingMark {
        WRITING.with(|w| w.borrow_mut().push(key));
        WritingMark(key)
    }

    fn held(key: u64) -> bool {
        WRITING.with(|w| w.borrow().contains(&key))
    }

    fn held_any() -> bool {
        WRITING.with(|w| !w.borrow().is_empty())
    }
}

impl Drop for WritingMark {
    fn drop(&mut self) {
        WRITING.with(|w| {
            let mut w = w.borrow_mut();
            if let Some(i) = w.iter().rposition(|k| *k == self.0) {
                w.remove(i);
            }
        });
    }
}

#[derive(Clone, Copy)]
enum Hold {
    Shared,
    Exclusive,
}

/// The lock file, freshly opened and locked (released when the file is dropped). A fresh open
/// each time: `flock` locks belong to one open file description, so each holder needs its own
/// for threads of one process to exclude each other. Read-only: `flock` needs no more, and
/// closing a file opened for writing is an `IN_CLOSE_WRITE` event for every watcher of the
/// directory (the sync watches the working tree, `.formdb` included), once per query.
fn locked(path: &Path, hold: Hold) -> Result<File> {
    let err = |e: std::io::Error| StoreError::Open {
        path: path.to_path_buf(),
        message: format!("cannot take the store's lock: {e}"),
    };
    let file = match File::open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            private_options().write(true).create(true).truncate(false).open(path).ok();
            File::open(path)
        }
        other => other,
    }
    .map_err(err)?;
    match hold {
        Hold::Shared => file.lock_shared(),
        Hold::Exclusive => file.lock(),
    }
    .map_err(err)?;
    Ok(file)
}

/// Options that create a file readable and writable by its owner alone (0600 on Unix).
fn private_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Bytes per page of a new store's SQLite file. Cozo keeps each row as one key and one value
/// in one table; a `form` value is about 1.4 KB, and a page of 4 KiB holds few of them and
/// spills the rest of a long one to an overflow page it fills only partly. The 1 M-line store
/// is 10% smaller on 16 KiB pages, and imports as fast.
///
/// Cozo's table keeps its rowid: `WITHOUT ROWID` (each key stored once, not also in the
/// primary-key index) made that store another 11% smaller but its import 25% slower (53 s →
/// 66 s): with a rowid, rows are appended to the table and only the keys land at random.
const PAGE_SIZE: u32 = 16 * 1024;

/// Give a new (empty) SQLite file pages of [`PAGE_SIZE`] before Cozo opens it, by creating
/// Cozo's table as Cozo would (it creates it only if missing). A file that has content keeps
/// its layout.
fn lay_out_new_file(file: &Path) -> std::result::Result<(), sqlite::Error> {
    if std::fs::metadata(file).map(|m| m.len() > 0).unwrap_or(true) {
        return Ok(());
    }
    let conn = sqlite::open(file)?;
    conn.execute(format!(
        "PRAGMA page_size = {PAGE_SIZE};
         CREATE TABLE IF NOT EXISTS cozo (k BLOB PRIMARY KEY, v BLOB);"
    ))
}

/// Create `path` empty, owner-only, unless it exists (an existing store keeps its mode).
fn create_private_file(path: &Path) -> std::io::Result<()> {
    match private_options().write(true).create_new(true).open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other.map(drop),
    }
}

/// Create the store directory owner-only (0700 on Unix), its parents as usual, unless it exists.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

fn is_read_only_sys_op(s: &str) -> bool {
    ["::relations", "::columns", "::indices", "::explain", "::running", "::describe"]
        .iter()
        .any(|op| s.starts_with(op))
}

/// The `script` of a failed user script (`formdb query`, the MCP `query` tool).
pub const USER_SCRIPT: &str = "the user's script";

/// A script that failed, named by the source line that ran it.
pub(crate) fn failed_at(at: &Location<'_>, e: impl std::fmt::Display) -> StoreError {
    StoreError::Query { script: format!("{}:{}", at.file(), at.line()), message: e.to_string() }
}

/// Build a parameter map.
pub fn params<const N: usize>(pairs: [(&str, DataValue); N]) -> Params {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// A one-column relation for a `rel[x] <- $param` constant rule: each value becomes a row.
pub fn column(values: impl IntoIterator<Item = DataValue>) -> DataValue {
    DataValue::List(values.into_iter().map(|v| DataValue::List(vec![v])).collect())
}

/// Read helpers for result rows.
pub fn str_at(row: &[DataValue], i: usize) -> String {
    match &row[i] {
        DataValue::Str(s) => s.to_string(),
        DataValue::Null => String::new(),
        other => other.to_string(),
    }
}

/// [`str_at`] for a short text, held inline ([`compact_str::CompactString`]: up to 24 bytes).
pub fn cstr_at(row: &[DataValue], i: usize) -> compact_str::CompactString {
    match &row[i] {
        DataValue::Str(s) => s.as_str().into(),
        _ => str_at(row, i).into(),
    }
}

pub fn int_at(row: &[DataValue], i: usize) -> i64 {
    row[i].get_int().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The set of the files' namespaces a handle holds follows its writes (a namespace goes
    /// with the last file declaring it), and is shared, not collected again, while no write
    /// changes which namespaces there are: every in-place edit reads it whole.
    #[test]
    fn held_namespaces_follow_writes_and_are_shared_between_them() {
        let store = Store::open_in_memory().unwrap();
        let files = |pairs: &[(&str, &str)]| {
            pairs.iter().map(|(p, n)| (p.to_string(), n.to_string())).collect()
        };
        let nss = FileNamespaces::new(files(&[
            ("src/a.clj", "a"),
            ("src/a.cljs", "a"),
            ("src/b.clj", "b"),
        ]));
        store.hold_file_nss(7, Arc::new(nss));
        let known = |g| crate::import::known_namespaces(&store, &Default::default(), Some(g));
        let before = known(7).unwrap();
        // An edit that keeps every file's namespace leaves the set as it was, shared.
        store.follow_file_nss(7, &[("src/b.clj", "b")]);
        let after = known(8).unwrap();
        assert!(Arc::ptr_eq(&before, &after), "the set was collected again");
        drop((before, after));
        // `a` stays while a file declares it; `b` goes with its file; `c` comes.
        store.follow_file_nss(8, &[("src/a.clj", ""), ("src/b.clj", ""), ("src/c.clj", "c")]);
        let mut now: Vec<String> = known(9).unwrap().iter().cloned().collect();
        now.sort();
        assert_eq!(now, ["a", "c"]);
        // Replaced files' namespaces are left out.
        let replaced = std::collections::HashSet::from(["src/a.cljs"]);
        let without = crate::import::known_namespaces(&store, &replaced, Some(9)).unwrap();
        assert_eq!(without.iter().collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn new_store_has_schema_and_rules() {
        let s = Store::open_in_memory().unwrap();
        assert_eq!(s.meta("schema_version").unwrap(), Some(SCHEMA_VERSION.to_string()));
        let rows = s
            .query("?[c] := *purity_rule{var: 'clojure.core/swap!', class: c}", Params::new())
            .unwrap();
        assert_eq!(str_at(&rows.rows[0], 0), "impure");
    }

    /// A new store is made in one transaction, so a process killed while it makes one leaves
    /// either no relation or all of them with the schema version (a store made half was
    /// refused at every later open: "schema version 0"). SQLite counts each commit in the
    /// file's header (its change counter, bytes 24..28).
    #[test]
    fn a_new_store_is_made_in_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STORE_DIR);
        let s = Store::open(&path).unwrap();
        let header = std::fs::read(path.join(DB_FILE)).unwrap();
        let commits = u32::from_be_bytes(header[24..28].try_into().unwrap());
        // The file's page size (`lay_out_new_file`), Cozo's table, then every relation with
        // the schema version: made one relation a commit, it was 24.
        assert!(commits <= 3, "a new store took {commits} commits");
        // The relations made on first use by the sync and the evaluation log are made with it.
        let rels = s.query("::relations", Params::new()).unwrap();
        let names: Vec<String> = rels.rows.iter().map(|r| str_at(r, 0)).collect();
        for name in
            ["form", "meta", "sync_state", "sync_intent", "sync_base", "sync_origin", "eval_log"]
        {
            assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
        }
        drop(s);
        Store::open_existing(&path).expect("the store reopens");
    }

    /// A store an older formdb was killed while making (some relations, no schema version,
    /// no rows) is made again at its next open; one that holds a row is refused, unchanged.
    #[test]
    fn a_store_made_half_is_made_again_if_it_holds_nothing() {
        let half = |rows: &str| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(STORE_DIR);
            std::fs::create_dir_all(&path).unwrap();
            let file = path.join(DB_FILE);
            let db = DbInstance::new("sqlite", file.to_str().unwrap(), "").unwrap();
            for stmt in &SCHEMA[..3] {
                db.run_script(stmt, Default::default(), ScriptMutability::Mutable).unwrap();
            }
            if !rows.is_empty() {
                db.run_script(rows, Default::default(), ScriptMutability::Mutable).unwrap();
            }
            drop(db);
            (dir, path)
        };
        let (_dir, path) = half("");
        let s = Store::open(&path).expect("made again");
        let version = s.query("?[v] := *meta{key: 'schema_version', value: v}", Params::new());
        assert_eq!(str_at(&version.unwrap().rows[0], 0), SCHEMA_VERSION.to_string());
        let rels = s.query("::relations", Params::new()).unwrap();
        assert_eq!(rels.rows.len(), creations().count());

        let (_dir, path) = half("?[key, value] <- [['kept', 'x']] :put meta {key => value}");
        let err = Store::open(&path).err().expect("a store with a row is not made again");
        assert!(matches!(err, StoreError::SchemaVersion { found: 0, .. }), "{err}");
        let db = DbInstance::new("sqlite", path.join(DB_FILE).to_str().unwrap(), "").unwrap();
        let kept = db
            .run_script(
                "?[v] := *meta{key: 'kept', value: v}",
                Default::default(),
                ScriptMutability::Immutable,
            )
            .unwrap();
        assert_eq!(kept.rows.len(), 1, "the refused store is left as it was");
    }

    #[test]
    fn persistent_store_reopens_and_checks_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STORE_DIR);
        drop(Store::open(&path).unwrap());
        let s = Store::open_existing(&path).unwrap();
        s.db.run_script(
            "?[key, value] <- [['schema_version', '999']] :put meta {key => value}",
            Default::default(),
            ScriptMutability::Mutable,
        )
        .unwrap();
        drop(s);
        let err = Store::open_existing(&path).err().expect("version mismatch is refused");
        assert!(matches!(err, StoreError::SchemaVersion { found: 999, .. }), "{err}");
        assert!(err.to_string().contains("schema version 999"));
    }

    /// Two handles on one file, as the daemon and a CLI command are: readers of one never fail
    /// while the other commits, and writers of both never lose each other's rows.
    #[test]
    fn handles_of_one_store_wait_for_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STORE_DIR);
        let a = std::sync::Arc::new(Store::open(&path).unwrap());
        let b = std::sync::Arc::new(Store::open(&path).unwrap());
        let writers: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .enumerate()
            .map(|(w, s)| {
                std::thread::spawn(move || {
                    for i in 0..60 {
                        let key = format!("w{w}-{i}");
                        s.write(
                            "?[key, value] <- [[$k, 'x']] :put meta {key => value}",
                            params([("k", key.into())]),
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        let readers: Vec<_> = [a.clone(), b.clone(), a.clone()]
            .into_iter()
            .map(|s| {
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        s.query("?[count(k)] := *meta{key: k}", Params::new()).unwrap();
                    }
                })
            })
            .collect();
        for t in writers.into_iter().chain(readers) {
            t.join().unwrap();
        }
        for s in [&a, &b] {
            let n = s
                .query("?[count(k)] := *meta{key: k}, starts_with(k, 'w')", Params::new())
                .unwrap();
            assert_eq!(n.rows[0][0].get_int(), Some(120));
        }
        // A writer thread may read and write again while it holds the lock.
        let w = a.writer().unwrap();
        assert!(a.meta("schema_version").unwrap().is_some());
        a.write("?[key, value] <- [['nested', 'y']] :put meta {key => value}", Params::new())
            .unwrap();
        drop(w);
        assert_eq!(b.meta("nested").unwrap().as_deref(), Some("y"));
    }

    /// The store holds private source: `.formdb/` is its owner's alone, and so is every file
    /// in it that holds or guards the data (the journal SQLite writes beside it too), whatever
    /// the umask lets others read.
    #[cfg(unix)]
    #[test]
    fn a_new_store_is_readable_by_its_owner_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STORE_DIR);
        let s = Store::open(&path).unwrap();
        // A write: SQLite has made (and removed) its journal.
        s.write("?[key, value] <- [['k', 'v']] :put meta {key => value}", Params::new()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o700, ".formdb/");
        let mut checked = Vec::new();
        for entry in std::fs::read_dir(&path).unwrap() {
            let p = entry.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name == ".gitignore" {
                continue;
            }
            assert_eq!(mode(&p), 0o600, "{name}");
            checked.push(name);
        }
        checked.sort();
        assert!(
            checked.contains(&DB_FILE.to_string()) && checked.contains(&LOCK_FILE.to_string()),
            "{checked:?}"
        );
        // A store dir that exists keeps its mode; a reopen changes nothing.
        drop(s);
        drop(Store::open(&path).unwrap());
        assert_eq!(mode(&path.join(DB_FILE)), 0o600);
    }

    #[test]
    fn discover_walks_up() {
        let dir = tempfile::tempdir().unwrap();
        drop(Store::open(&dir.path().join(STORE_DIR)).unwrap());
        let deep = dir.path().join("src/a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(Store::discover(&deep).unwrap(), dir.path().join(STORE_DIR));
        let other = tempfile::tempdir().unwrap();
        assert!(matches!(Store::discover(other.path()), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn user_queries_cannot_mutate() {
        let s = Store::open_in_memory().unwrap();
        let err = s
            .query_user("?[key, value] <- [['x', 'y']] :put meta {key => value}", Params::new())
            .unwrap_err();
        assert!(matches!(err, StoreError::Refused(_)), "{err}");
        let err = s.query_user("::remove meta", Params::new()).unwrap_err();
        assert!(matches!(err, StoreError::Refused(_)), "{err}");
        assert!(s.query_user("?[k] := *meta{key: k}", Params::new()).is_ok());
    }
}
