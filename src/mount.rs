//! `formdb mount`, `formdb drafts`, `formdb restore`: argument parsing and output; the mount
//! itself is `formdb-fuse`, drafts and restores are `formdb-edit`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use formdb_edit::save::{self, Saved, Writer};
use formdb_engine::store::Store;
use serde_json::json;

#[derive(clap::Args)]
pub(crate) struct MountArgs {
    /// Where to mount the tree (an existing, empty directory).
    pub mountpoint: PathBuf,
    /// Render files with this user's alias map; saves are recorded as this user's.
    #[arg(long)]
    pub user: Option<String>,
    /// Serve the tree read-only.
    #[arg(long)]
    pub read_only: bool,
}

#[derive(clap::Subcommand)]
pub(crate) enum DraftsCmd {
    /// Every draft: path, position and error (the default).
    List,
    /// A draft's bytes exactly as written.
    Show { path: String },
    /// Drop a path's draft.
    Discard {
        path: String,
        /// Recorded as the author of the discard.
        #[arg(long)]
        user: Option<String>,
    },
}

#[derive(clap::Args)]
pub(crate) struct RestoreArgs {
    /// The deleted file's path in the tree, e.g. `src/my/ns.clj`.
    pub path: String,
    /// Recorded as the author of the restore.
    #[arg(long)]
    pub user: Option<String>,
}

/// `--user`, else `$USER`, else the login name of the process's user, else `local`.
pub(crate) fn default_user(user: Option<String>) -> String {
    [user, std::env::var("USER").ok(), login_name()]
        .into_iter()
        .flatten()
        .find(|u| !u.is_empty())
        .unwrap_or_else(|| "local".into())
}

/// The name the password database gives the real user id (what `id -un` prints).
fn login_name() -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: all-zero bytes are a valid `passwd` (null pointers, zero ids); getpwuid_r fills it
    // with pointers into `buf`, which outlives every read of them below.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwuid_r(libc::getuid(), &mut entry, buf.as_mut_ptr().cast(), buf.len(), &mut found)
    };
    if rc != 0 || found.is_null() || entry.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points to a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
    name.to_str().ok().map(str::to_string)
}

/// A path as the store keeps it: `./` and a leading `/` dropped.
fn store_path(p: &str) -> String {
    p.trim_start_matches("./").trim_start_matches('/').to_string()
}

pub(crate) fn mount(db: &Option<PathBuf>, args: MountArgs, json: bool) -> Result<()> {
    // Before any thread starts, so the signals reach the thread waiting for them.
    formdb_fuse::block_signals();
    let dir = match db {
        Some(p) => p.clone(),
        None => Store::discover(&std::env::current_dir()?)?,
    };
    crate::refuse_if_served(&dir, "formdb mount")?;
    let store = Arc::new(Store::open_existing(&dir)?);
    let user = default_user(args.user);
    if !args.read_only {
        // Each save reaches the directory the store was imported from before it returns, as
        // under `formdb up`.
        formdb_sync::write_back_after_commits(&store, &user, true);
    }
    let opts = formdb_fuse::Options {
        user,
        read_only: args.read_only,
        verbose: !json,
        ..Default::default()
    };
    let mounted = formdb_fuse::spawn(store, &args.mountpoint, &opts)
        .with_context(|| format!("cannot mount at {}", args.mountpoint.display()))?;
    let at = mounted.mountpoint().display().to_string();
    if let Some(n) = &mounted.note {
        eprintln!("formdb mount: {n}");
    }
    if json {
        println!(
            "{}",
            json!({"event": "mounted", "mountpoint": at, "store": dir.display().to_string(), "user": opts.user, "read_only": opts.read_only})
        );
    } else {
        println!(
            "mounted {} at {at} for {}{} (Ctrl-C unmounts)",
            dir.display(),
            opts.user,
            if opts.read_only { ", read-only" } else { "" }
        );
    }
    std::io::stdout().flush()?;
    let (signal, note) = formdb_fuse::wait_for_signal(mounted)?;
    if let Some(n) = &note {
        eprintln!("formdb mount: {n}");
    }
    if json {
        println!(
            "{}",
            json!({"event": "unmounted", "mountpoint": at, "signal": signal, "note": note})
        );
    } else {
        match signal {
            Some(s) => println!("unmounted {at} ({s})"),
            None => println!("unmounted {at} (unmounted from outside)"),
        }
    }
    Ok(())
}

pub(crate) fn drafts(store: &Store, cmd: Option<DraftsCmd>, json: bool) -> Result<()> {
    match cmd.unwrap_or(DraftsCmd::List) {
        DraftsCmd::List => {
            let ds = save::drafts(store)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&ds)?);
            } else if ds.is_empty() {
                println!("no drafts");
            } else {
                for d in &ds {
                    println!(
                        "{}:{}:{}: {} (by {}, {} bytes)",
                        d.path,
                        d.line,
                        d.col,
                        d.error,
                        d.user,
                        d.bytes.len()
                    );
                }
            }
        }
        DraftsCmd::Show { path } => {
            let path = store_path(&path);
            let Some(d) = save::draft(store, &path)? else {
                bail!("no draft for `{path}` (`formdb drafts` lists them)")
            };
            if json {
                let mut v = serde_json::to_value(&d)?;
                v["text"] = json!(String::from_utf8_lossy(&d.bytes));
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                std::io::stdout().write_all(&d.bytes)?;
            }
        }
        DraftsCmd::Discard { path, user } => {
            let path = store_path(&path);
            let writer = Writer::new(&default_user(user), Default::default());
            if !save::discard_draft(store, &writer, &path)? {
                bail!("no draft for `{path}` (`formdb drafts` lists them)");
            }
            if json {
                println!("{}", json!({"discarded": path}));
            } else {
                println!("discarded the draft of {path}");
            }
        }
    }
    Ok(())
}

pub(crate) fn restore(store: &Store, args: RestoreArgs, json: bool) -> Result<()> {
    let path = store_path(&args.path);
    let writer = Writer::new(&default_user(args.user), Default::default());
    let saved = save::restore(store, &writer, &path)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&saved)?);
        return Ok(());
    }
    match saved {
        Saved::Committed { applied, .. } => {
            println!("restored {path}: {} forms added, {} changed", applied.added, applied.changed)
        }
        Saved::Unchanged { .. } => println!("restored {path} (unchanged)"),
        Saved::Draft { draft } | Saved::Conflict { draft, .. } => println!(
            "restored {path} as a draft: {}:{}:{}: {}",
            draft.path, draft.line, draft.col, draft.error
        ),
    }
    Ok(())
}
