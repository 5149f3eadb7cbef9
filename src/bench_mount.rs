//! `formdb bench mount`: the FUSE mount against the disk and a FUSE passthrough (bindfs).

use std::path::PathBuf;

use anyhow::{bail, Result};

pub fn run(dir: PathBuf, _runs: usize, _json_out: bool) -> Result<()> {
    bail!("{}: not measured yet", dir.display())
}
