//! The REPL options of `formdb up`, `formdb mcp`, `formdb eval` and `formdb test`, and the two
//! commands themselves: flags to an endpoint, and a `formdb-repl` loop's answer to text/`--json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use formdb_engine::reach;
use formdb_engine::store::Store;
use formdb_repl::server::{self, Endpoint};
use formdb_repl::session::{Loop, Ran, TestReport};
use formdb_repl::Repl;

/// How formdb finds the project's nREPL server.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct ReplArgs {
    /// Connect to the nREPL server at HOST:PORT (localhost only) instead of the port in
    /// `DIR/.nrepl-port`.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "repl")]
    pub nrepl: Option<String>,
    /// Start an nREPL server for the tree (Debian's `clojure` and `nrepl.jar` on the source
    /// paths of `deps.edn`, else `src` and `test`), and stop it on exit.
    #[arg(long)]
    pub repl: bool,
    /// The command `--repl` runs; `{port}` and `{classpath}` are filled in.
    #[arg(long, value_name = "CMD", default_value = server::DEFAULT_COMMAND, requires = "repl")]
    pub repl_command: String,
}

impl ReplArgs {
    /// The REPL for the tree in `dir`: started now with `--repl`, else found (at each
    /// connection) by `--nrepl` or `DIR/.nrepl-port`.
    pub(crate) fn open(&self, dir: &Path) -> Result<Arc<Repl>> {
        let endpoint = if self.repl {
            server::start(dir, Some(&self.repl_command), Duration::from_secs(120))?
        } else if let Some(addr) = &self.nrepl {
            Endpoint::Addr(addr.clone())
        } else {
            Endpoint::PortFile(dir.to_path_buf())
        };
        Ok(Arc::new(Repl::new(endpoint)))
    }
}

/// The tree a store was imported from: the directory holding `.formdb`.
pub(crate) fn tree_of(store_dir: &Path) -> PathBuf {
    store_dir.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

/// One line for `formdb up`'s status: where the REPL is and whether it answers.
pub(crate) fn status_line(repl: &Repl) -> String {
    let s = repl.status();
    match (s.connected, s.last_error) {
        (true, _) => format!("connected to {} ({})", s.addr.unwrap_or_default(), s.source),
        (false, Some(e)) => format!("not connected: {e}"),
        (false, None) => format!("not connected yet ({})", s.source),
    }
}

#[derive(clap::Args)]
pub(crate) struct EvalArgs {
    /// Clojure code; `-` reads it from stdin.
    pub code: String,
    /// The namespace to evaluate in.
    #[arg(long)]
    pub ns: Option<String>,
    /// Interrupt the evaluation after this many milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// Who the evaluation log names.
    #[arg(long, default_value = "cli")]
    pub user: String,
    #[command(flatten)]
    pub connect: ReplArgs,
}

#[derive(clap::Args)]
pub(crate) struct TestArgs {
    /// Test forms by id or var name.
    pub tests: Vec<String>,
    /// Every test of this namespace (repeatable).
    #[arg(long)]
    pub ns: Vec<String>,
    /// The tests that reach this form (id) or var through calls, transitively (repeatable).
    #[arg(long, value_name = "ID_OR_VAR")]
    pub affected_by: Vec<String>,
    /// Only list the tests that would run.
    #[arg(long)]
    pub list: bool,
    #[arg(long, default_value_t = 120_000)]
    pub timeout_ms: u64,
    #[arg(long, default_value = "cli")]
    pub user: String,
    #[command(flatten)]
    pub connect: ReplArgs,
}

pub(crate) fn eval(store: &Arc<Store>, store_dir: &Path, a: EvalArgs, json: bool) -> Result<bool> {
    let code =
        if a.code == "-" { std::io::read_to_string(std::io::stdin())? } else { a.code.clone() };
    let repl = a.connect.open(&tree_of(store_dir))?;
    let l =
        Loop { store, repl: &repl, user: &a.user, timeout: Duration::from_millis(a.timeout_ms) };
    let aliases = formdb_projector::aliases::load(store, &a.user)?;
    let ran = l.eval(&code, a.ns.as_deref(), &aliases)?;
    let ok = ran.exception.is_none() && !ran.interrupted;
    if json {
        println!("{}", serde_json::to_string_pretty(&ran)?);
    } else {
        print_ran(&ran);
    }
    Ok(ok)
}

fn print_ran(ran: &Ran) {
    print!("{}", ran.out);
    eprint!("{}", ran.err);
    if let Some(ex) = &ran.exception {
        eprintln!("{}: {}", ex.class, ex.message);
        for c in &ex.causes {
            eprintln!("  caused by {}: {}", c.class, c.message);
        }
    } else if let Some(v) = &ran.value {
        println!("{v}");
    }
    if ran.interrupted {
        eprintln!("interrupted after {:.0} ms", ran.elapsed_ms);
    }
    if ran.truncated {
        eprintln!("(cut at a page: the whole is evaluation {} of the log)", ran.log_seq);
    }
}

pub(crate) fn test(store: &Arc<Store>, store_dir: &Path, a: TestArgs, json: bool) -> Result<bool> {
    let mut tests = Vec::new();
    for ns in &a.ns {
        tests.extend(reach::ns_tests(store, ns)?);
    }
    for key in &a.tests {
        match reach::form_by_key(store, key)? {
            Some(f) if f.test => tests.push(f),
            Some(f) => bail!("`{key}` is not a test ({} at {}:{})", f.fqn, f.file, f.line),
            None => bail!("no form or var `{key}` in the store"),
        }
    }
    if !a.affected_by.is_empty() {
        tests.extend(reach::tests_reaching(store, &a.affected_by)?);
    }
    if a.ns.is_empty() && a.tests.is_empty() && a.affected_by.is_empty() {
        bail!("name the tests: test ids or vars, --ns NS, or --affected-by ID_OR_VAR");
    }
    let mut seen = std::collections::HashSet::new();
    tests.retain(|t| seen.insert(t.id.clone()));
    if a.list || tests.is_empty() {
        if json {
            println!("{}", serde_json::to_string_pretty(&tests)?);
        } else if tests.is_empty() {
            println!("no test reaches what was named");
        } else {
            for t in &tests {
                println!("{}  [{}]  {}:{}", t.fqn, t.id, t.file, t.line);
            }
        }
        return Ok(true);
    }
    let repl = a.connect.open(&tree_of(store_dir))?;
    let l =
        Loop { store, repl: &repl, user: &a.user, timeout: Duration::from_millis(a.timeout_ms) };
    let report = l.run_tests(&tests)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(report.fail == 0 && report.error == 0)
}

fn print_report(r: &TestReport) {
    for f in &r.failures {
        println!(
            "{} in {} [{}]  {}:{} (form {})",
            f.kind.to_uppercase(),
            f.test,
            f.test_id,
            f.file,
            f.line,
            f.form_id
        );
        if !f.message.is_empty() {
            println!("  {}", f.message);
        }
        println!("  expected: {}\n    actual: {}", f.expected, f.actual);
    }
    println!(
        "Ran {} tests: {} assertions passed, {} failed, {} errors ({:.0} ms)",
        r.ran, r.pass, r.fail, r.error, r.elapsed_ms
    );
}
