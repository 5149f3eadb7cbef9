//! Wall-clock phases of one piece of work (an import, a save, a tool call): where its time goes.
//!
//! A traced piece of work reports its phases, one line when it ends, as a `tracing` event of
//! target [`TARGET`] at INFO; each Cozo script's time and first line is an event at DEBUG. The
//! binary's subscriber enables them with `FORMDB_TRACE` set in the environment (`scripts`: the
//! scripts too), or through `FORMDB_LOG` (`formdb::trace=debug`). Without a subscriber that
//! wants them nothing is timed. `formdb bench import` reads the phases of an import whether or
//! not tracing is on.

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

/// The `tracing` target of the phase and script events.
pub const TARGET: &str = "formdb::trace";

/// One script run, counted; with `FORMDB_TRACE=scripts` its time and first line are reported
/// when it ends (where an edit's milliseconds go, script by script).
pub(crate) struct Script<'a> {
    text: &'a str,
    start: Option<Instant>,
}

impl<'a> Script<'a> {
    pub(crate) fn new(text: &'a str) -> Script<'a> {
        count_script();
        let each = tracing::enabled!(target: TARGET, tracing::Level::DEBUG);
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
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            tracing::debug!(target: TARGET, "    {ms:>6.2} ms  script: {first}");
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

/// Whether phases are wanted (the subscriber enables [`TARGET`] at INFO; `FORMDB_TRACE`).
pub fn tracing() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// The filter directives `FORMDB_TRACE` stands for: phases, and with `scripts` each script.
pub fn directive(formdb_trace: Option<&std::ffi::OsStr>) -> Option<String> {
    let level = if formdb_trace? == "scripts" { "debug" } else { "info" };
    Some(format!("{TARGET}={level}"))
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
            tracing::info!(
                target: TARGET,
                "{total:>8.1} ms  {}: {} [{queries} scripts]",
                self.label,
                parts.join(", ")
            );
        }
    }
}
