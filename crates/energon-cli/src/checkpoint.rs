//! `energon checkpoint info FILE...` and `energon checkpoint redist INPUT... OUTPUT
//! --new-world-size N [--new-num-workers W]`: what loader checkpoints hold, and spreading them
//! over other numbers of ranks and workers.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::Context;
use clap::{Args, Subcommand};
use energon_cook::{Checkpoint, LoaderState, StageState, checkpoint::Encoding};

/// Flags of `energon checkpoint`.
#[derive(Debug, Args)]
pub(crate) struct CheckpointArgs {
    #[command(subcommand)]
    command: CheckpointCommand,
}

#[derive(Debug, Subcommand)]
enum CheckpointCommand {
    /// Print what loader checkpoints hold: ranks, workers, the next worker, progress.
    Info(InfoArgs),
    /// Spread the checkpoints of all ranks over other numbers of ranks and workers: with
    /// world_size x num_workers unchanged each worker keeps its slices and seeds; otherwise the
    /// rest of every worker's pass is dealt to the new workers when the loader restores.
    Redist(RedistArgs),
}

#[derive(Debug, Args)]
struct InfoArgs {
    /// Checkpoint files (one rank's, or several ranks' in one file).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Also print the loader configuration each rank was saved with.
    #[arg(long)]
    config: bool,
    /// Print the checkpoints in their JSON form instead.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RedistArgs {
    /// The checkpoints of every rank (one file per rank, or one file with all ranks), then the
    /// output: a folder for one file per new rank (named like the inputs), or a file for a
    /// single input holding all ranks.
    #[arg(required = true, num_args = 2..)]
    paths: Vec<PathBuf>,
    /// The new number of ranks.
    #[arg(long)]
    new_world_size: usize,
    /// The new number of workers per rank (0: loading in the main thread). Without it the
    /// number of workers in all stays, and must be divisible by the new number of ranks.
    #[arg(long)]
    new_num_workers: Option<usize>,
}

pub(crate) fn run(args: CheckpointArgs) -> anyhow::Result<u8> {
    match args.command {
        CheckpointCommand::Info(args) => info(&args),
        CheckpointCommand::Redist(args) => redist(args),
    }
}

fn read(path: &Path) -> anyhow::Result<Checkpoint> {
    Checkpoint::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn info(args: &InfoArgs) -> anyhow::Result<u8> {
    for path in &args.files {
        let checkpoint = read(path)?;
        if args.json {
            let bytes = checkpoint.to_bytes(Encoding::Json)?;
            out!("{}", String::from_utf8_lossy(&bytes));
            continue;
        }
        let kind = if checkpoint.ranks.len() == 1 { "per-rank" } else { "global" };
        outln!(
            "{}: {kind} checkpoint, {} rank{}",
            path.display(),
            checkpoint.ranks.len(),
            if checkpoint.ranks.len() == 1 { "" } else { "s" }
        );
        for state in &checkpoint.ranks {
            print_rank(state, args.config)?;
        }
    }
    Ok(0)
}

fn print_rank(state: &LoaderState, config: bool) -> anyhow::Result<()> {
    let batch = state.micro_batch_size.map_or_else(|| "none".to_owned(), |b| b.to_string());
    outln!(
        "  rank {} of {}: {} workers, next worker {}, micro batch size {batch}",
        state.rank,
        state.world_size,
        state.num_workers,
        state.next_worker
    );
    for (local, worker) in state.workers.iter().enumerate() {
        let (items, buffered) =
            worker.state.as_ref().map_or((0, 0), |s| (items_of(s), buffered(s)));
        let mut line = format!(
            "    worker {local} (global {}): {items} items handed out, {buffered} samples \
             buffered",
            worker.global_worker_id
        );
        if worker.replay > 0 {
            line.push_str(&format!(", {} items to replay", worker.replay));
        }
        if worker.state.is_none() {
            line.push_str(", not started");
        }
        if worker.exhausted {
            line.push_str(", pass ended");
        }
        outln!("{line}");
    }
    if let Some(old) = &state.reshaped {
        outln!(
            "    continues a job of {} ranks x {} workers: the rest of their {} workers' passes \
             is dealt to this rank's workers when it restores",
            old.world_size,
            old.num_workers,
            old.workers.len()
        );
    }
    if config {
        for (key, value) in &state.config.0 {
            outln!("    {key} = {value}");
        }
    }
    Ok(())
}

/// The items a worker handed out (its outermost stage's count).
fn items_of(state: &StageState) -> u64 {
    match state {
        StageState::Worker { index, .. } => *index,
        _ => 0,
    }
}

/// The samples a worker's stages hold as restore keys.
fn buffered(state: &StageState) -> usize {
    let own = match state {
        StageState::ShuffleBuffer { restore_keys, .. } => restore_keys.len(),
        StageState::GroupBatch { buckets, .. } => {
            buckets.iter().map(|b| b.restore_keys.len()).sum()
        }
        StageState::Packing { reading, pre_packed, .. } => reading.len() + pre_packed.len(),
        _ => 0,
    };
    own + state.children().iter().map(buffered).sum::<usize>()
}

fn redist(args: RedistArgs) -> anyhow::Result<u8> {
    let mut paths = args.paths;
    let output = paths.pop().expect("clap requires at least two paths");
    let inputs = paths;
    let mut ranks = Vec::new();
    let mut names = Vec::new();
    for path in &inputs {
        let checkpoint = read(path)?;
        for state in &checkpoint.ranks {
            names.push((state.rank, path.clone()));
        }
        ranks.extend(checkpoint.ranks);
    }
    let global = inputs.len() == 1 && ranks.len() > 1;
    let redistributed = Checkpoint { ranks }
        .reshape(args.new_world_size, args.new_num_workers)
        .context("cannot redistribute the checkpoints")?;
    if global && !output.is_dir() {
        redistributed.write(&output)?;
        outln!("{}", output.display());
        return Ok(0);
    }
    fs::create_dir_all(&output)
        .with_context(|| format!("cannot create the folder {}", output.display()))?;
    names.sort();
    let pattern = names.first().and_then(|(rank, path)| NamePattern::of(path, *rank));
    for state in redistributed.ranks {
        let name = match &pattern {
            Some(pattern) => pattern.name(state.rank),
            None => format!("rank{}.ckpt", state.rank),
        };
        let path = output.join(name);
        Checkpoint::of_rank(state).write(&path)?;
        outln!("{}", path.display());
    }
    Ok(0)
}

/// A file name with the rank in it (`state-r0.ckpt`, `ckpt_rank003.json`): the last run of
/// digits that reads as the rank.
#[derive(Debug, PartialEq)]
struct NamePattern {
    prefix: String,
    width: usize,
    suffix: String,
}

impl NamePattern {
    fn of(path: &Path, rank: usize) -> Option<NamePattern> {
        let name = path.file_name()?.to_str()?;
        let bytes = name.as_bytes();
        let mut end = bytes.len();
        while end > 0 {
            if !bytes[end - 1].is_ascii_digit() {
                end -= 1;
                continue;
            }
            let mut start = end;
            while start > 0 && bytes[start - 1].is_ascii_digit() {
                start -= 1;
            }
            if name[start..end].parse::<usize>().ok() == Some(rank) {
                let width = if name[start..end].starts_with('0') { end - start } else { 0 };
                return Some(NamePattern {
                    prefix: name[..start].to_owned(),
                    width,
                    suffix: name[end..].to_owned(),
                });
            }
            end = start;
        }
        None
    }

    fn name(&self, rank: usize) -> String {
        format!("{}{rank:0width$}{}", self.prefix, self.suffix, width = self.width)
    }
}
