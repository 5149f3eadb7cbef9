//! `formdb`: the command-line front end. Parses arguments, opens the store, calls the engine,
//! prints text or `--json`. No logic of its own beyond presentation.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use formdb_engine::query::{self, Rows};
use formdb_engine::store::{Store, STORE_DIR};
use serde_json::{json, Map, Value};

mod advice;
mod allocator;
mod bench;
mod bench_mcp;
mod bench_mount;
mod bench_repl;
mod bench_scale;
mod bench_up;
mod history;
mod logging;
mod mount;
mod progress;
mod repl;
mod up;
mod views;

#[derive(Parser)]
#[command(
    name = "formdb",
    version,
    about = "A code database for Clojure: the store is the source of truth, files are views."
)]
struct Cli {
    /// The store directory (default: `.formdb` in the current directory or a parent).
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import (or re-import) a Clojure source tree into the store.
    Import {
        /// The tree to import (default: the current directory).
        dir: Option<PathBuf>,
        /// Who the history rows name as author.
        #[arg(long, default_value = "import")]
        author: String,
        #[command(flatten)]
        history: history::ImportArgs,
    },
    /// Who last changed a form (by id or `ns/name`), and when: its commit when it came from git.
    Blame { key: String },
    /// Show one form by id or fully-qualified var name.
    Show { key: String },
    /// Forms that use a var (by name or by the id of its defining form), directly or (with
    /// --depth) transitively.
    Usages {
        fqn: String,
        #[arg(long, default_value_t = 1)]
        depth: i64,
    },
    /// Vars a form calls, directly or (with --depth) transitively.
    Callees {
        key: String,
        #[arg(long, default_value_t = 1)]
        depth: i64,
    },
    /// A namespace's docstring and public vars in file order.
    Ns { ns: String },
    /// Full-text search over names, docstrings and source.
    Search {
        text: Vec<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// Run a read-only Cozo Datalog script from a file or `-` (stdin); mutation is refused.
    Query {
        file: String,
        /// Script parameters as NAME=VALUE (values are JSON if they parse, else strings).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
    },
    /// Run a named query from queries/*.cozo (`formdb run --list` lists them).
    Run {
        name: Option<String>,
        /// Parameters as NAME=VALUE.
        #[arg(value_name = "NAME=VALUE")]
        params: Vec<String>,
        #[arg(long)]
        list: bool,
    },
    /// Every recorded version of a form.
    History { key: String },
    /// Symbols that resolve to nothing.
    Unresolved,
    /// Vars nothing refers to.
    Dead,
    /// Namespace dependency cycles.
    Cycles,
    /// Counts of what the store holds.
    Stats,
    /// Print a namespace as file text: as stored, in a user's alias view, or one form per line.
    View(views::ViewArgs),
    /// Write the whole tree (Clojure views and stored blobs) under a directory.
    Export(views::ExportArgs),
    /// Lay out a namespace's forms (or every namespace's) cljfmt-style, as one recorded edit.
    Fmt(views::FmtArgs),
    /// Users' alias maps: which alias each user reads for a namespace.
    Alias {
        #[command(subcommand)]
        cmd: views::AliasCmd,
    },
    /// Benchmarks, printed side by side with their baselines.
    Bench {
        #[command(subcommand)]
        what: bench::Bench,
    },
    /// Mount the store's source tree with FUSE: editors edit files, saves become entities.
    Mount(mount::MountArgs),
    /// Saves kept as drafts (did not parse, or conflicted): list, show, discard.
    Drafts {
        #[command(subcommand)]
        cmd: Option<mount::DraftsCmd>,
    },
    /// Bring back a deleted file's last text.
    Restore(mount::RestoreArgs),
    /// One process for a working directory: import it (first time), keep it and the store in
    /// step, mount the tree, serve MCP over HTTP on 127.0.0.1. Ctrl-C stops.
    Up(up::UpArgs),
    /// Serve MCP on stdio: agents read, query and edit forms by id. When `formdb up` runs for
    /// the store, relays to it instead of opening the store.
    Mcp {
        /// Whose alias map views use, and who history names as author.
        #[arg(long, default_value = "agent")]
        user: String,
        /// Refuse every edit.
        #[arg(long)]
        read_only: bool,
        #[command(flatten)]
        connect: repl::ReplArgs,
    },
    /// Evaluate Clojure code in the project's nREPL (logged in the store).
    Eval(repl::EvalArgs),
    /// Run clojure.test tests in the project's nREPL: by id, by namespace, or the tests a form
    /// or var reaches through calls (`--affected-by`).
    Test(repl::TestArgs),
}

fn main() -> ExitCode {
    allocator::give_memory_back();
    logging::init();
    // User scripts are evaluated in a child of this binary, which can be stopped (sandbox).
    if std::env::args_os().nth(1).is_some_and(|a| a == query::sandbox::WORKER_ARG) {
        return if query::sandbox::serve_worker() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    if let Ok(exe) = std::env::current_exe() {
        query::sandbox::run_scripts_in(exe);
    }
    // Die quietly on a closed pipe (`formdb ... | head`), like other Unix tools.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at =
            info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("formdb: internal error{at}: {msg} (please report this)");
    }));
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            chain.extend(advice::for_shell(&e).map(str::to_string));
            eprintln!("formdb: {}", chain.join(": "));
            ExitCode::FAILURE
        }
    }
}

/// The store directory: `--db`, else `.formdb` in the current directory or a parent.
fn store_dir(db: &Option<PathBuf>) -> Result<PathBuf> {
    Ok(match db {
        Some(p) => p.clone(),
        None => Store::discover(&std::env::current_dir()?)?,
    })
}

fn open_store(db: &Option<PathBuf>) -> Result<Store> {
    Ok(Store::open_existing(&store_dir(db)?)?)
}

fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    match cli.command {
        Command::Import { dir, author, history } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            let dir = dir.canonicalize().with_context(|| format!("{}", dir.display()))?;
            let db = cli.db.clone().unwrap_or_else(|| dir.join(STORE_DIR));
            refuse_if_served(&db, "formdb import")?;
            allocator::purge_lazily();
            if history.history {
                return history::import(&dir, &db, &history.options(author), json);
            }
            let store = std::sync::Arc::new(Store::open(&db)?);
            // Store edits not yet in DIR are written there (merged form by form with what
            // changed in DIR) before the import, so it never reverts them.
            let kept = formdb_sync::keep_store_edits(store.clone(), &dir, &author)?;
            for c in &kept.conflict_list {
                eprintln!("formdb import: {}", formdb_sync::describe(c));
            }
            let bar = progress::Bar::new(!json && std::io::stderr().is_terminal());
            let s = formdb_engine::import::import_dir(&store, &dir, &author, &bar)?;
            formdb_sync::record_in_step(store.clone(), &dir, &author)?;
            if json {
                let mut v = serde_json::to_value(&s)?;
                v["conflicts"] = serde_json::to_value(&kept.conflict_list)?;
                v["written_back"] = json!(kept.files_written);
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "files: {} added, {} changed, {} removed, {} unchanged ({} non-Clojure kept as blobs)",
                    s.files_added, s.files_changed, s.files_removed, s.files_unchanged, s.blobs
                );
                println!(
                    "forms: {} added, {} changed, {} removed, {} unchanged, {} moved",
                    s.forms.added,
                    s.forms.changed,
                    s.forms.removed,
                    s.forms.unchanged,
                    s.forms.moved
                );
                if !s.errors.is_empty() {
                    println!("{} file(s) did not parse and are kept as raw text:", s.errors.len());
                    for e in &s.errors {
                        println!("  {e}");
                    }
                }
                println!("store: {}", db.display());
            }
        }
        Command::Show { key } => {
            let store = open_store(&cli.db)?;
            let f = query::form_required(&store, &key)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&f)?);
            } else {
                print_form(&f);
            }
        }
        Command::Usages { fqn, depth } => {
            let store = open_store(&cli.db)?;
            let fqn = var_of(&store, &fqn)?;
            let rows = if depth <= 1 {
                query::usages(&store, &fqn)?
            } else {
                query::callers(&store, &fqn, depth)?
            };
            print_rows(
                &rows,
                json,
                &["file", "line", "caller", "caller_id", "depth", "fqn", "id"],
            )?;
        }
        Command::Callees { key, depth } => {
            let store = open_store(&cli.db)?;
            query::form_required(&store, &key)?;
            let mut rows = query::callees(&store, &key, depth.max(1))?;
            if !json {
                // A var defined outside the store has no id, file or line: show none.
                for r in rows.rows.iter_mut().filter(|r| s(r, "id").is_empty()) {
                    r.insert("line".into(), Value::Null);
                }
            }
            print_rows(&rows, json, &["depth", "fqn", "id", "file", "line"])?;
        }
        Command::Ns { ns } => {
            let store = open_store(&cli.db)?;
            let Some((doc, file)) = query::ns_info(&store, &ns)? else {
                bail!("no namespace `{ns}` in the store");
            };
            let rows = query::ns_overview(&store, &ns)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"ns": ns, "doc": doc, "file": file, "vars": rows.rows})
                    )?
                );
            } else {
                println!("{ns}  ({file})");
                if !doc.is_empty() {
                    println!("  {}", doc.lines().collect::<Vec<_>>().join("\n  "));
                }
                for r in &rows.rows {
                    let args = r
                        .get("arglists")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
                        .unwrap_or_default();
                    println!(
                        "{:>5}  {:<12} {} {}  [{}]",
                        s(r, "line"),
                        s(r, "kind"),
                        s(r, "name"),
                        args,
                        s(r, "id")
                    );
                    let doc = s(r, "doc");
                    if let Some(first) = doc.lines().next().filter(|l| !l.trim().is_empty()) {
                        println!("{:>19}{}", "", first.trim());
                    }
                }
            }
        }
        Command::Search { text, limit } => {
            let store = open_store(&cli.db)?;
            let mut rows = query::search(&store, &text.join(" "), limit)?;
            round_scores(&mut rows);
            print_rows(&rows, json, &["score", "fqn", "kind", "file", "line", "id"])?;
        }
        Command::Query { file, params: ps } => {
            let store = open_store(&cli.db)?;
            let script = if file == "-" {
                let mut s = String::new();
                std::io::stdin().read_to_string(&mut s)?;
                s
            } else {
                std::fs::read_to_string(&file).with_context(|| file.clone())?
            };
            let rows =
                query::sandbox::run_user(&std::sync::Arc::new(store), &script, parse_params(&ps)?)?;
            let headers: Vec<&str> = rows.headers.iter().map(String::as_str).collect();
            print_rows(&rows, json, &headers)?;
        }
        Command::Run { name, params: ps, list } => {
            if list || name.is_none() {
                if json {
                    let all: Vec<Value> = formdb_queries::ALL.iter().map(|q| json!({"name": q.name, "about": q.about(), "params": q.params(), "script": q.script})).collect();
                    println!("{}", serde_json::to_string_pretty(&all)?);
                } else {
                    let rows = formdb_queries::ALL.iter().map(|q| {
                        let row = json!({"name": q.name, "params": q.params().join(" "), "about": q.about()});
                        row.as_object().cloned().unwrap_or_default()
                    });
                    let headers = ["name", "params", "about"];
                    let rows =
                        Rows { headers: headers.map(String::from).to_vec(), rows: rows.collect() };
                    print_rows(&rows, false, &headers)?;
                }
                return Ok(());
            }
            let store = open_store(&cli.db)?;
            let name = name.unwrap_or_default();
            let mut p = parse_params(&ps)?;
            if name == "search" {
                p.entry("limit".into()).or_insert(20.into());
            }
            let rows = query::sandbox::run_named(&std::sync::Arc::new(store), &name, p)?;
            let headers: Vec<&str> = rows.headers.iter().map(String::as_str).collect();
            print_rows(&rows, json, &headers)?;
        }
        Command::History { key } => {
            let store = open_store(&cli.db)?;
            let mut rows = query::history(&store, &key)?;
            if rows.is_empty() {
                bail!("no history for `{key}`: no form has that id or var name");
            }
            for r in &mut rows.rows {
                // `at`: ISO-8601 in UTC for people; `at_unix`: seconds since the Unix epoch.
                let at = r.remove("at").unwrap_or(Value::Null);
                r.insert("at".into(), at.as_f64().map(utc_time).into());
                r.insert("at_unix".into(), at);
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows.rows)?);
            } else {
                print_rows(&rows, json, &["v", "at", "author", "op", "hash", "commit", "summary"])?;
            }
        }
        Command::Blame { key } => history::blame(&open_store(&cli.db)?, &key, json)?,
        Command::Unresolved => {
            let store = open_store(&cli.db)?;
            print_rows(
                &query::run_named(&store, "unresolved", Default::default())?,
                json,
                &["file", "line", "col", "sym"],
            )?;
        }
        Command::Dead => {
            let store = open_store(&cli.db)?;
            print_rows(
                &query::run_named(&store, "dead_vars", Default::default())?,
                json,
                &["file", "line", "fqn", "kind", "id"],
            )?;
        }
        Command::Cycles => {
            let store = open_store(&cli.db)?;
            print_rows(
                &query::run_named(&store, "ns_cycles", Default::default())?,
                json,
                &["ns", "collect(other)"],
            )?;
        }
        Command::Stats => {
            let store = open_store(&cli.db)?;
            let rows = query::stats(&store)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows.rows.first())?);
            } else if let Some(r) = rows.rows.first() {
                for h in &rows.headers {
                    println!("{h:<12} {}", s(r, h));
                }
            }
        }
        Command::Bench { what } => bench::run(what, json)?,
        Command::View(args) => views::view(&open_store(&cli.db)?, args, json)?,
        Command::Export(args) => views::export(&open_store(&cli.db)?, args, json)?,
        Command::Alias { cmd: cmd @ views::AliasCmd::List { .. } } => {
            views::alias(&open_store(&cli.db)?, cmd, json)?
        }
        Command::Alias { cmd } => {
            let (store, _) = writer_store(&cli.db, "formdb alias")?;
            views::alias(&store, cmd, json)?
        }
        Command::Fmt(args) => {
            let (store, written) = writer_store(&cli.db, "formdb fmt")?;
            views::fmt(&store, args, json)?;
            report_write_backs("formdb fmt", &written);
        }
        Command::Mount(args) => {
            allocator::trim_while_running();
            mount::mount(&cli.db, args, json)?
        }
        Command::Drafts { cmd: cmd @ Some(mount::DraftsCmd::Discard { .. }) } => {
            let (store, _) = writer_store(&cli.db, "formdb drafts discard")?;
            mount::drafts(&store, cmd, json)?
        }
        Command::Drafts { cmd } => mount::drafts(&open_store(&cli.db)?, cmd, json)?,
        Command::Restore(args) => {
            let (store, written) = writer_store(&cli.db, "formdb restore")?;
            mount::restore(&store, args, json)?;
            report_write_backs("formdb restore", &written);
        }
        Command::Up(args) => {
            allocator::trim_while_running();
            up::up(&cli.db, args, json)?
        }
        Command::Eval(args) => {
            let dir = store_dir(&cli.db)?;
            let store = std::sync::Arc::new(Store::open_existing(&dir)?);
            if !repl::eval(&store, &dir, args, json)? {
                std::process::exit(1);
            }
        }
        Command::Test(args) => {
            let dir = store_dir(&cli.db)?;
            let store = std::sync::Arc::new(Store::open_existing(&dir)?);
            if !repl::test(&store, &dir, args, json)? {
                std::process::exit(1);
            }
        }
        Command::Mcp { user, read_only, connect } => {
            let dir = store_dir(&cli.db)?;
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            // One process owns a store: when `formdb up` serves it, talk to that process.
            // (A read-only session needs the store's own server, which can refuse edits.)
            match formdb_mcp::http::live_server(&dir).filter(|_| !read_only) {
                Some(info) => runtime.block_on(formdb_mcp::relay::relay_stdio(info, &user))?,
                None => {
                    allocator::trim_while_running();
                    let store = std::sync::Arc::new(Store::open_existing(&dir)?);
                    if !read_only {
                        // Each edit reaches the directory the store was imported from before
                        // its reply, as under `formdb up`.
                        formdb_sync::write_back_after_commits(&store, &user, true);
                    }
                    let repl = Some(connect.open(&repl::tree_of(&dir))?);
                    let opts = formdb_mcp::ServeOptions { user, read_only, repl };
                    runtime.block_on(formdb_mcp::serve_stdio(store, opts))?;
                }
            }
        }
    }
    Ok(())
}

/// Refuse a second writer while `formdb up` owns the store: it names the daemon and what to do.
fn refuse_if_served(store_dir: &std::path::Path, what: &str) -> Result<()> {
    if let Some(running) = formdb_mcp::http::live_server(store_dir) {
        bail!(
            "{what} refused: formdb up (pid {}, {}) owns {} and is its only writer; make the change through it (its mount, `formdb mcp`, or DIR itself), or stop it first (kill {})",
            running.pid,
            running.url,
            store_dir.display(),
            running.pid
        );
    }
    Ok(())
}

/// The store for a command that writes: refused while `formdb up` owns it; each commit is
/// written back to the directory it was imported from before the command goes on.
fn writer_store(
    db: &Option<PathBuf>,
    what: &str,
) -> Result<(std::sync::Arc<Store>, formdb_sync::WriteBacks)> {
    let dir = store_dir(db)?;
    refuse_if_served(&dir, what)?;
    let store = std::sync::Arc::new(Store::open_existing(&dir)?);
    let written = formdb_sync::write_back_after_commits(&store, what, false);
    Ok((store, written))
}

/// Say on stderr when something did not reach the working directory (no directory, gone, a
/// refused or failed write, a conflict); a write-back that did what it should is silent.
fn report_write_backs(what: &str, written: &formdb_sync::WriteBacks) {
    for w in written.take().iter().filter(|w| w.is_trouble()) {
        eprintln!("{what}: {}", w.describe());
    }
}

/// The var named by a key: a fully-qualified name as is, or the var a form id defines.
fn var_of(store: &Store, key: &str) -> Result<String> {
    if formdb_engine::identity::looks_like_id(key) {
        if let Some(f) = query::form(store, key)? {
            let fqn = s(&f, "fqn");
            if fqn.is_empty() {
                bail!("form {key} defines no var, so nothing can use it");
            }
            return Ok(fqn);
        }
    }
    require_var(store, key)?;
    Ok(key.to_string())
}

fn require_var(store: &Store, fqn: &str) -> Result<()> {
    if !fqn.contains('/') {
        bail!("`{fqn}` is not a fully-qualified var name or a form id (write it as `my.ns/my-fn`)");
    }
    if !formdb_engine::read::usages::is_known(store, fqn)? {
        bail!("no var `{fqn}` is defined or used in the store");
    }
    Ok(())
}

fn parse_params(ps: &[String]) -> Result<formdb_engine::store::Params> {
    let mut out = Vec::new();
    for p in ps {
        let Some((k, v)) = p.split_once('=') else { bail!("parameter `{p}` is not NAME=VALUE") };
        let value = serde_json::from_str::<Value>(v).unwrap_or_else(|_| Value::from(v));
        out.push((k.to_string(), value));
    }
    Ok(query::json_params(out))
}

fn s(r: &Map<String, Value>, k: &str) -> String {
    match r.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

/// Rows as a table: a header line, then one line per row, each column as wide as its widest
/// cell (numbers right-aligned, `-` for an empty cell). With `--json`, the rows as they are.
fn print_rows(rows: &Rows, json: bool, columns: &[&str]) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&rows.rows)?);
        return Ok(());
    }
    if rows.rows.is_empty() {
        println!("(none)");
        return Ok(());
    }
    let cols: Vec<&str> =
        columns.iter().copied().filter(|c| rows.headers.iter().any(|h| h == c)).collect();
    let header: Vec<String> = cols.iter().map(|c| column_label(c)).collect();
    let body: Vec<Vec<String>> =
        rows.rows.iter().map(|r| cols.iter().map(|c| cell(r.get(*c))).collect()).collect();
    let numeric: Vec<bool> = cols
        .iter()
        .map(|c| rows.rows.iter().all(|r| r.get(*c).is_none_or(|v| v.is_number() || v.is_null())))
        .collect();
    let widths: Vec<usize> = (0..cols.len())
        .map(|i| {
            std::iter::once(&header[i])
                .chain(body.iter().map(|line| &line[i]))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in std::iter::once(&header).chain(&body) {
        let padded: Vec<String> = line
            .iter()
            .enumerate()
            .map(|(i, c)| match numeric[i] {
                true => format!("{c:>w$}", w = widths[i]),
                false => format!("{c:<w$}", w = widths[i]),
            })
            .collect();
        println!("{}", padded.join("  ").trim_end());
    }
    Ok(())
}

/// A column's header: its `--json` key in capitals, or a name for a computed one.
fn column_label(key: &str) -> String {
    match key {
        "collect(other)" => "CYCLE".into(),
        "at" => "TIME_UTC".into(),
        "about" => "DESCRIPTION".into(),
        _ => key.to_uppercase(),
    }
}

/// A value as a table cell: a list as its items, nothing as `-`.
fn cell(v: Option<&Value>) -> String {
    let text = match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            items.iter().map(|i| cell(Some(i))).collect::<Vec<_>>().join(" ")
        }
        Some(v) => v.to_string(),
    };
    if text.is_empty() {
        "-".into()
    } else {
        text
    }
}

/// Search scores to two decimals: more digits rank nothing a reader can see.
fn round_scores(rows: &mut Rows) {
    for r in &mut rows.rows {
        if let Some(score) = r.get("score").and_then(Value::as_f64) {
            r.insert("score".into(), json!((score * 100.0).round() / 100.0));
        }
    }
}

/// A stored time (seconds since the Unix epoch) as ISO-8601 in UTC, to the second.
fn utc_time(at: f64) -> String {
    match std::time::Duration::try_from_secs_f64(at) {
        Ok(since) => humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + since).to_string(),
        Err(_) => at.to_string(),
    }
}

fn print_form(f: &Map<String, Value>) {
    let title = if s(f, "fqn").is_empty() { format!("{} form", s(f, "kind")) } else { s(f, "fqn") };
    println!(
        "{title}  [{}]  {}:{}  {}  {}",
        s(f, "id"),
        s(f, "file"),
        s(f, "line"),
        s(f, "kind"),
        s(f, "purity")
    );
    if let Some(a) = f.get("arglists").and_then(Value::as_array).filter(|a| !a.is_empty()) {
        println!("  {}", a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "));
    }
    let doc = s(f, "doc");
    if !doc.is_empty() {
        println!("  {}", doc.lines().collect::<Vec<_>>().join("\n  "));
    }
    if let Some(c) = f.get("calls").and_then(Value::as_array).filter(|a| !a.is_empty()) {
        println!("  calls: {}", c.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "));
    }
    println!();
    println!("{}", s(f, "source"));
}
