//! Wall-clock phases of one piece of work (an import, a save, a tool call): where its time goes.
//!
//! With `FORMDB_TRACE` set in the environment, a traced piece of work prints its phases on
//! stderr, one line, when it ends. `formdb bench import` reads the phases of an import whether
//! or not tracing is on.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    /// Cozo scripts this thread has run: a traced piece of work reports how many were its own.
    static SCRIPTS: Cell<u64> = const { Cell::new(0) };
}

/// Count one Cozo script run on this thread (the store calls this for each).
pub(crate) fn count_script() {
    SCRIPTS.with(|n| n.set(n.get() + 1));
}

/// One script run, counted; with `FORMDB_TRACE=scripts` its time and first line are printed
/// when it ends (where an edit's milliseconds go, script by script).
pub(crate) struct Script<'a> {
    text: &'a str,
    start: Option<Instant>,
}

impl<'a> Script<'a> {
    pub(crate) fn new(text: &'a str) -> Script<'a> {
        count_script();
        let each = setting().is_some_and(|v| v == "scripts");
        Script { text, start: each.then(Instant::now) }
    }
}

impl Drop for Script<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.start {
            let first: String = self
                .text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(150)
                .collect();
            eprintln!("    {:>6.2} ms  script: {first}", t.elapsed().as_secs_f64() * 1000.0);
        }
    }
}

fn scripts() -> u64 {
    SCRIPTS.with(Cell::get)
}

/// Phases of one piece of work, in order, in milliseconds.
pub struct Timings {
    label: String,
    laps: Vec<(String, f64)>,
    last: Option<Instant>,
    print: bool,
    /// This thread's script count when the work started.
    scripts_at_start: u64,
}

/// `FORMDB_TRACE` as the process started with it, read once: every store query asks.
fn setting() -> Option<&'static std::ffi::OsStr> {
    static SETTING: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    SETTING.get_or_init(|| std::env::var_os("FORMDB_TRACE")).as_deref()
}

/// Whether `FORMDB_TRACE` asks for phases on stderr.
pub fn tracing() -> bool {
    setting().is_some()
}

impl Timings {
    /// Timed always (the caller reads the phases); printed when tracing.
    pub fn start(label: impl Into<String>) -> Timings {
        Timings {
            label: label.into(),
            laps: Vec::new(),
            last: Some(Instant::now()),
            print: tracing(),
            scripts_at_start: scripts(),
        }
    }

    /// Timed and printed only when tracing: free otherwise.
    pub fn traced(label: impl Into<String>) -> Timings {
        if tracing() {
            Timings::start(label)
        } else {
            Timings {
                label: String::new(),
                laps: Vec::new(),
                last: None,
                print: false,
                scripts_at_start: 0,
            }
        }
    }

    /// The phase that ends now.
    pub fn lap(&mut self, phase: &str) {
        if let Some(t) = self.last {
            let now = Instant::now();
            self.laps.push((phase.to_string(), (now - t).as_secs_f64() * 1000.0));
            self.last = Some(now);
        }
    }

    /// The phases so far.
    pub fn laps(&self) -> &[(String, f64)] {
        &self.laps
    }
}

impl Drop for Timings {
    fn drop(&mut self) {
        if self.print {
            let total: f64 = self.laps.iter().map(|(_, ms)| ms).sum();
            let parts: Vec<String> =
                self.laps.iter().map(|(p, ms)| format!("{p} {ms:.1}")).collect();
            let queries = scripts() - self.scripts_at_start;
            eprintln!("{total:>8.1} ms  {}: {} [{queries} scripts]", self.label, parts.join(", "));
        }
    }
}
