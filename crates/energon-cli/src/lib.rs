//! The `energon` command: prepare, inspect and load Energon datasets.
//!
//! Subcommands and flags follow megatron-energon's `energon` command so that users can switch
//! without relearning. This is the only crate that prints. The program (`main.rs`) and the
//! Python package's `energon` command both run [`run`].
#![allow(clippy::print_stdout, clippy::print_stderr)]

/// `println!` that gives the error of a closed stdout (a broken pipe) to `?` instead of
/// panicking; [`run`] ends quietly on it, as a command piped into `head` should.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// `print!` as [`outln!`] does it, flushed (a prompt shows before its answer is read).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*)?;
        stdout.flush()?
    }};
}

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

use std::ffi::OsString;

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

/// Runs the command line `args` (the program name first) and returns the exit status: 0, 1
/// where a check failed (lint, a prepare that was refused), 2 for an error (printed), or what
/// clap exits with for `--help`, `--version` and bad usage.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    init_logging();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version go to stdout with status 0, usage errors to stderr with 2.
            let _ = err.print();
            return u8::try_from(err.exit_code()).unwrap_or(2);
        }
    };
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
                return 0;
            }
            eprintln!("error: {}", energon_cook::message_with_causes(err.as_ref()));
            2
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
    // (Once per process: a second run in the same process keeps the first subscriber.)
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
