//! The `energon` command: prepare, inspect and load Energon datasets.
//!
//! Subcommands and flags follow megatron-energon's `energon` command so that users can switch
//! without relearning. This is the only crate that prints.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod benchmark;
mod checkpoint;
mod info;
mod lint;
mod mount;
mod prepare;
mod prepare_media;
mod preview;
mod prompt;
mod splits;
mod trace;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Prepare, inspect and load Energon datasets (a fast, compatible implementation of
/// megatron-energon's `energon` command).
#[derive(Debug, Parser)]
#[command(name = "energon", version = concat!("energon-rs ", env!("CARGO_PKG_VERSION")), propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Index a WebDataset folder (tar shards), a JSONL file, or a metadataset's joins.
    Prepare(prepare::PrepareArgs),
    /// Compute media metadata (image sizes, audio and video durations) of a prepared
    /// WebDataset or a plain folder of media files.
    #[command(name = "prepare-media")]
    PrepareMedia(prepare_media::PrepareMediaArgs),
    /// Print a summary of a prepared dataset.
    Info(info::InfoArgs),
    /// Check a dataset: index files, then every sample read and decoded.
    Lint(lint::LintArgs),
    /// Print samples of a dataset, field by field.
    Preview(preview::PreviewArgs),
    /// Print the sample keys this rank's loader yields, in order.
    Trace(trace::TraceArgs),
    /// Measure how fast this rank's loader delivers samples.
    Benchmark(benchmark::BenchmarkArgs),
    /// Inspect loader checkpoints, or spread them over another number of ranks.
    Checkpoint(checkpoint::CheckpointArgs),
    /// Show a prepared WebDataset as a read-only folder of files (FUSE).
    Mount(mount::MountArgs),
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Prepare(args) => prepare::run(args),
        Command::Info(args) => info::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Preview(args) => preview::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Benchmark(args) => benchmark::run(args),
        Command::Checkpoint(args) => checkpoint::run(args),
        Command::PrepareMedia(args) => prepare_media::run(args),
        Command::Mount(args) => mount::run(args),
    };
    match res {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ENERGON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}
