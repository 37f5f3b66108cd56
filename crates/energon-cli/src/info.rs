//! `energon info PATH`: a summary of a prepared dataset.

use std::{path::PathBuf, process::ExitCode};

use clap::Args;

/// Flags of `energon info`.
#[derive(Debug, Args)]
pub(crate) struct InfoArgs {
    /// Prepared dataset folder.
    path: PathBuf,
    /// Split config file name inside .nv-meta.
    #[arg(long = "split-config", default_value = energon_index::SPLIT_YAML)]
    split_config: String,
    /// Dataset config file name inside .nv-meta.
    #[arg(long = "dataset-config", default_value = energon_index::DATASET_YAML)]
    dataset_config: String,
}

pub(crate) fn run(_args: InfoArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
