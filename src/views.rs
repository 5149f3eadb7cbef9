//! `formdb view`, `formdb export`, `formdb alias`: the projector's views on the command line.

use std::path::{Component, Path};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use formdb_engine::store::Store;
use formdb_projector::aliases::{self, AliasMap};
use formdb_projector::views::{self, Fallback, Render};
use serde_json::json;

#[derive(Args)]
pub(crate) struct ViewArgs {
    /// The namespace to show.
    pub ns: String,
    /// Render with this user's alias map.
    #[arg(long)]
    pub user: Option<String>,
    /// One top-level form per line (read-only view for grep and semantic diffs).
    #[arg(long)]
    pub oneline: bool,
    /// Also report aliases that fell back to the stored one (collisions).
    #[arg(long)]
    pub explain: bool,
}

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// The directory to write the tree into.
    pub dir: std::path::PathBuf,
    #[arg(long)]
    pub user: Option<String>,
    #[arg(long)]
    pub oneline: bool,
}

#[derive(Args)]
pub(crate) struct FmtArgs {
    /// The namespace to format.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub ns: Option<String>,
    /// Format every namespace of the store.
    #[arg(long)]
    pub all: bool,
    /// Who the history rows name as author.
    #[arg(long, default_value = "fmt")]
    pub author: String,
}

#[derive(Subcommand)]
pub(crate) enum AliasCmd {
    /// Set USER's alias for NS.
    Set { user: String, ns: String, alias: String },
    /// Import USER's alias map from an EDN file: `{:aliases {clojure.string str}}`.
    Import { user: String, file: std::path::PathBuf },
    /// List USER's alias map.
    List { user: String },
}

fn render_mode(store: &Store, user: &Option<String>, oneline: bool) -> Result<Render> {
    if oneline && user.is_some() {
        bail!("--oneline and --user don't combine: the one-line view keeps the stored aliases");
    }
    Ok(if oneline {
        Render::Oneline
    } else if let Some(u) = user {
        Render::User(aliases::load(store, u)?)
    } else {
        Render::AsStored
    })
}

fn explain_line(f: &Fallback) -> String {
    format!("{}: wanted `{}`, kept `{}`: {}", f.ns, f.wanted, f.used, f.reason)
}

pub(crate) fn view(store: &Store, args: ViewArgs, json: bool) -> Result<()> {
    let how = render_mode(store, &args.user, args.oneline)?;
    let path = views::ns_path(store, &args.ns)?;
    let (bytes, fallbacks) = views::render_path(store, &path, &how)?;
    if json {
        let text = String::from_utf8_lossy(&bytes);
        let mut out = json!({"ns": args.ns, "path": path, "text": text});
        if args.explain {
            out["fallbacks"] = serde_json::to_value(&fallbacks)?;
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&bytes)?;
    stdout.flush()?;
    if args.explain {
        for f in &fallbacks {
            eprintln!("{}", explain_line(f));
        }
    }
    Ok(())
}

/// A stored path as a relative path under the export directory; refuses escapes.
fn safe_rel(path: &str) -> Result<&Path> {
    let p = Path::new(path);
    if p.components().all(|c| matches!(c, Component::Normal(_))) {
        Ok(p)
    } else {
        bail!("refusing to export stored path `{path}`: it is not a plain relative path")
    }
}

pub(crate) fn export(store: &Store, args: ExportArgs, json: bool) -> Result<()> {
    let how = render_mode(store, &args.user, args.oneline)?;
    let paths = formdb_engine::query::paths(store)?;
    let mut fallbacks = 0usize;
    for path in &paths {
        let rel = safe_rel(path)?;
        let (bytes, fb) = views::render_path(store, path, &how)?;
        fallbacks += fb.len();
        let dest = args.dir.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&dest, bytes).with_context(|| format!("cannot write {}", dest.display()))?;
    }
    if json {
        println!(
            "{}",
            json!({"dir": args.dir.display().to_string(), "files": paths.len(), "fallbacks": fallbacks})
        );
    } else {
        println!("exported {} files to {}", paths.len(), args.dir.display());
        if fallbacks > 0 {
            println!(
                "{fallbacks} preferred aliases fell back (see `formdb view NS --user U --explain`)"
            );
        }
    }
    Ok(())
}

fn print_map(map: &AliasMap, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&map.0)?);
    } else {
        for (ns, alias) in map.iter() {
            println!("{ns}\t{alias}");
        }
    }
    Ok(())
}

pub(crate) fn alias(store: &Store, cmd: AliasCmd, json: bool) -> Result<()> {
    match cmd {
        AliasCmd::Set { user, ns, alias } => {
            aliases::set(store, &user, &ns, &alias)?;
            if json {
                println!("{}", json!({"user": user, "ns": ns, "alias": alias}));
            } else {
                println!("{user} reads {ns} as {alias}");
            }
        }
        AliasCmd::Import { user, file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let map = aliases::import_edn(store, &user, &text)
                .with_context(|| format!("{}", file.display()))?;
            if json {
                print_map(&map, true)?;
            } else {
                println!("imported {} aliases for {user}", map.0.len());
            }
        }
        AliasCmd::List { user } => print_map(&aliases::load(store, &user)?, json)?,
    }
    Ok(())
}

/// `formdb fmt`: every form of the chosen files laid out by `projector::layout`, applied as one
/// change set (forms whose text changes get a version; ids are kept by the engine's identity
/// rules).
pub(crate) fn fmt(store: &Store, args: FmtArgs, json: bool) -> Result<()> {
    use formdb_engine::change::{self, ChangeSet};
    use formdb_engine::import::{self, Incoming, Quiet};
    use formdb_projector::layout;
    let paths: Vec<String> = if args.all {
        formdb_engine::read::namespaces::declaring_files(store)?
    } else {
        let ns = args.ns.unwrap_or_default();
        vec![views::ns_path(store, &ns).with_context(|| format!("namespace `{ns}`"))?]
    };
    let mut incoming = Vec::new();
    for path in &paths {
        let text = views::stored_text(store, path)?;
        let laid = layout::format_file(&text, &layout::LayoutOptions::default())
            .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
        if laid != text {
            incoming.push(Incoming { path: path.clone(), bytes: laid.into_bytes() });
        }
    }
    let files = incoming.len();
    let (changes, errors) = import::file_changes(store, incoming, &Quiet)?;
    if let Some(e) = errors.first() {
        bail!("formatting produced text that does not parse, nothing was changed: {e}");
    }
    let applied =
        change::apply(store, &ChangeSet { author: args.author, op: "fmt".into(), changes })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&json!({"files": files, "forms": applied}))?);
    } else {
        println!(
            "formatted {files} of {} file(s): {} form(s) changed",
            paths.len(),
            applied.changed
        );
    }
    Ok(())
}
