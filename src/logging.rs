//! The process's `tracing` subscriber: what the daemon and the library crates log, on stderr.
//!
//! `FORMDB_LOG` is an `EnvFilter` (`warn` when unset: problems only, as before); `FORMDB_TRACE`
//! adds the phase timings of `formdb_engine::trace` (`scripts`: each Cozo script too). Lines
//! carry no time, level or target, so a message reads as it did when it was an `eprintln!`.

use tracing_subscriber::EnvFilter;

/// The filter `FORMDB_LOG` and `FORMDB_TRACE` ask for; a `FORMDB_LOG` that does not parse is
/// reported and the default used.
fn filter(formdb_log: Option<&str>, formdb_trace: Option<&std::ffi::OsStr>) -> EnvFilter {
    let mut filter = match formdb_log {
        Some(spec) => EnvFilter::builder().parse(spec).unwrap_or_else(|e| {
            eprintln!("formdb: FORMDB_LOG={spec:?} is not a log filter ({e}); using `warn`");
            EnvFilter::new("warn")
        }),
        None => EnvFilter::new("warn"),
    };
    if let Some(d) = formdb_engine::trace::directive(formdb_trace) {
        filter = filter.add_directive(d.parse().expect("the trace directive parses"));
    }
    filter
}

/// Install the subscriber for the whole process (once, first thing in `main`).
pub(crate) fn init() {
    let log = std::env::var("FORMDB_LOG").ok();
    let trace = std::env::var_os("FORMDB_TRACE");
    tracing_subscriber::fmt()
        .with_env_filter(filter(log.as_deref(), trace.as_deref()))
        .with_writer(std::io::stderr)
        .without_time()
        .with_level(false)
        .with_target(false)
        .with_ansi(false)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    use tracing::Level;
    use tracing_subscriber::layer::SubscriberExt;

    /// Whether `filter` lets the trace target's events at `level` through.
    fn traces(filter: EnvFilter, level: Level) -> bool {
        let subscriber = tracing_subscriber::registry().with(filter);
        tracing::subscriber::with_default(subscriber, || match level {
            Level::DEBUG => tracing::enabled!(target: "formdb::trace", Level::DEBUG),
            _ => formdb_engine::trace::tracing(),
        })
    }

    #[test]
    fn formdb_trace_turns_on_phases_and_scripts() {
        assert!(!traces(filter(None, None), Level::INFO));
        assert!(traces(filter(None, Some("1".as_ref())), Level::INFO));
        assert!(!traces(filter(None, Some("1".as_ref())), Level::DEBUG));
        assert!(traces(filter(None, Some("scripts".as_ref())), Level::DEBUG));
        assert!(traces(filter(Some("formdb::trace=info"), None), Level::INFO));
        assert!(!traces(filter(Some("formdb::trace=loud"), None), Level::INFO));
    }
}
