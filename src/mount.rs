//! `formdb mount`, `formdb drafts`, `formdb restore` (being written).

use std::path::PathBuf;

use anyhow::Result;
use formdb_engine::store::Store;

#[derive(clap::Args)]
pub struct MountArgs {
    /// Where to mount the tree.
    pub mountpoint: PathBuf,
}

#[derive(clap::Subcommand)]
pub enum DraftsCmd {
    /// Drop a path's draft.
    Discard { path: String },
}

#[derive(clap::Args)]
pub struct RestoreArgs {
    pub path: String,
}

pub fn mount(_db: &Option<PathBuf>, _args: MountArgs, _json: bool) -> Result<()> {
    anyhow::bail!("not yet")
}

pub fn drafts(_store: &Store, _cmd: Option<DraftsCmd>, _json: bool) -> Result<()> {
    anyhow::bail!("not yet")
}

pub fn restore(_store: &Store, _args: RestoreArgs, _json: bool) -> Result<()> {
    anyhow::bail!("not yet")
}
