//! Progress bars for long work, shown on a terminal only.

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Mutex;

/// An indicatif bar driven by the engine's progress events.
pub(crate) struct Bar {
    enabled: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bar {
    pub(crate) fn new(enabled: bool) -> Bar {
        Bar { enabled, bar: Mutex::new(None) }
    }
}

impl formdb_engine::import::Progress for Bar {
    fn start(&self, phase: &str, total: u64) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:>10} [{bar:40}] {pos}/{len} files, {per_sec}, {eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(phase.to_string());
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar);
        }
    }

    fn inc(&self, n: u64) {
        if let Ok(b) = self.bar.lock() {
            if let Some(b) = b.as_ref() {
                b.inc(n);
            }
        }
    }

    fn finish(&self) {
        if let Ok(mut b) = self.bar.lock() {
            if let Some(b) = b.take() {
                b.finish_and_clear();
            }
        }
    }
}
