//! `formdb view`, `formdb export`, `formdb alias`: the projector's views on the command line.
//! (Being written.)

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use formdb_engine::store::Store;

#[derive(Args)]
pub struct ViewArgs {
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
pub struct ExportArgs {
    /// The directory to write the tree into.
    pub dir: std::path::PathBuf,
    #[arg(long)]
    pub user: Option<String>,
    #[arg(long)]
    pub oneline: bool,
}

#[derive(Subcommand)]
pub enum AliasCmd {
    /// Set USER's alias for NS.
    Set { user: String, ns: String, alias: String },
    /// Import USER's alias map from an EDN file: `{:aliases {clojure.string str}}`.
    Import { user: String, file: std::path::PathBuf },
    /// List USER's alias map.
    List { user: String },
}

pub fn view(_store: &Store, _args: ViewArgs, _json: bool) -> Result<()> {
    bail!("`formdb view` is not available yet")
}

pub fn export(_store: &Store, _args: ExportArgs, _json: bool) -> Result<()> {
    bail!("`formdb export` is not available yet")
}

pub fn alias(_store: &Store, _cmd: AliasCmd, _json: bool) -> Result<()> {
    bail!("`formdb alias` is not available yet")
}
