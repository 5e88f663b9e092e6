//! `cargo xtask bench` (being written).
#[derive(clap::Args)]
pub struct Options {}
pub fn run(_: &Options) -> anyhow::Result<()> { anyhow::bail!("bench not yet implemented") }
