//! `energon trace PATH`: the sample keys this rank's loader yields, in order.
//!
//! The loader is the real one (same slicing, random streams, shuffle buffer, batching and worker
//! round robin), so the keys come out exactly as a training job with these settings would see them,
//! and exactly as megatron-energon's loader yields them. Samples are not decoded.

use std::{
    io::{self, BufWriter, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use clap::Args;
use energon_cook::{
    Batch, Checkpoint, Keyed, Loaded, Loader, LoaderBuilder, LoaderSpec, LoaderState, RestoreKey,
    StageState,
};
use energon_dist::WorkerConfig;
use energon_mix::LeafSample;
use energon_reader::{Dataset, OpenOptions, RawSample};

/// The loader settings shared by `trace` and `benchmark` (the reference's `WorkerConfig`,
/// `get_train_dataset`/`get_val_dataset` and `get_loader` arguments).
#[derive(Debug, Args)]
pub(crate) struct LoaderArgs {
    /// Prepared dataset folder, JSONL file, or metadataset YAML (trace only).
    pub(crate) path: PathBuf,
    /// Split part to load [default: train, or val with --val].
    #[arg(long)]
    pub(crate) split_part: Option<String>,
    /// Number of data-parallel ranks.
    #[arg(long, default_value_t = 1)]
    pub(crate) world_size: usize,
    /// This rank.
    #[arg(long, default_value_t = 0)]
    pub(crate) rank: usize,
    /// Loader workers per rank (0: load in the main thread).
    #[arg(long, default_value_t = 0)]
    pub(crate) num_workers: usize,
    /// Samples per batch (0: no batching).
    #[arg(long, default_value_t = 1)]
    pub(crate) batch_size: usize,
    /// Drop the last, shorter batch of a pass (validation only; training never ends a pass).
    #[arg(long)]
    pub(crate) drop_last: bool,
    /// Shuffle buffer size (training only; 0 or 1: none).
    #[arg(long, default_value_t = 0)]
    pub(crate) shuffle_buffer_size: usize,
    /// Seed offset of the worker seeds.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub(crate) seed_offset: i64,
    /// Cut slices longer than 1.5 times this many samples.
    #[arg(long)]
    pub(crate) max_samples_per_sequence: Option<u64>,
    /// Slices read in parallel per worker [default: 16, or 1 with --val].
    #[arg(long)]
    pub(crate) parallel_shard_iters: Option<usize>,
    /// Epochs shuffled together (k >= 1), or -1 for slices drawn with replacement.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub(crate) shuffle_over_epochs: i64,
    /// Validation pipeline: sequential slices, one pass, no shuffle buffer.
    #[arg(long)]
    pub(crate) val: bool,
    /// Items each worker prepares ahead.
    #[arg(long, default_value_t = 2)]
    pub(crate) prefetch_factor: usize,
}

impl LoaderArgs {
    /// The loader these flags describe (raw samples: decoding is the caller's).
    pub(crate) fn spec(&self) -> anyhow::Result<LoaderSpec> {
        let worker_config = WorkerConfig::new(self.rank, self.world_size, self.num_workers)?
            .with_seed_offset(self.seed_offset);
        let mut spec = LoaderSpec::new(&self.path, worker_config);
        spec.split_part.clone_from(&self.split_part);
        spec.training = !self.val;
        spec.shuffle_over_epochs = Some(self.shuffle_over_epochs);
        spec.max_samples_per_sequence = self.max_samples_per_sequence;
        spec.parallel_shard_iters = self.parallel_shard_iters;
        spec.shuffle_buffer_size = self.shuffle_buffer_size;
        spec.batch_size = (self.batch_size > 0).then_some(self.batch_size);
        spec.drop_last = self.drop_last;
        spec.prefetch_factor = self.prefetch_factor;
        spec.decoder = None;
        Ok(spec)
    }

    /// Opens the dataset (raw samples, every part).
    pub(crate) fn open(&self, spec: &LoaderSpec) -> anyhow::Result<Arc<Dataset>> {
        let mut options = OpenOptions::default();
        options.split_part = spec.part();
        options.max_open_shards = spec.max_open_shards();
        let dataset = Dataset::open(&self.path, &options)
            .with_context(|| format!("cannot open {}", self.path.display()))?;
        Ok(Arc::new(dataset))
    }

    /// A loader builder with these settings over `dataset`, turning samples into `T` with `load`.
    pub(crate) fn builder<T, L>(
        &self,
        spec: &LoaderSpec,
        dataset: Arc<Dataset>,
        load: L,
    ) -> LoaderBuilder<T>
    where
        T: Send + 'static,
        L: Fn(RawSample) -> energon_cook::Result<Option<T>> + Send + Sync + 'static,
    {
        let crude = matches!(*dataset, Dataset::Jsonl(_));
        let builder = spec.dataset_builder(dataset, load);
        if crude {
            // COMPAT(energon 7.4.1): JSONL samples are crude; the reference cooks them in a map
            // stage of their own (it shows in the restore keys).
            return builder.cook(|x| Ok(Some(x)));
        }
        builder
    }

    /// A loader builder over the plan of the path (a metadataset, or a dataset as a plan of one
    /// leaf) with these settings (`--shuffle-over-epochs` is the outermost
    /// `shuffle_over_epochs_multiplier`), turning samples into `T` with `load`.
    pub(crate) fn mix_builder<T, L>(&self, load: L) -> anyhow::Result<LoaderBuilder<T>>
    where
        T: Send + 'static,
        L: Fn(LeafSample) -> energon_cook::Result<Option<T>> + Send + Sync + 'static,
    {
        let spec = self.spec()?;
        let plan = spec.plan().with_context(|| format!("cannot open {}", self.path.display()))?;
        Ok(spec.plan_settings(LoaderBuilder::from_plan(plan, load)).cook(|x| Ok(Some(x))))
    }
}

/// Flags of `energon trace`.
#[derive(Debug, Args)]
pub(crate) struct TraceArgs {
    #[command(flatten)]
    loader: LoaderArgs,
    /// Samples to print [default: one epoch of this rank for training (with --restore: the rest
    /// of the epoch it continues), everything with --val].
    #[arg(short = 'n', long)]
    limit: Option<u64>,
    /// One JSON object per sample: worker, batch index, key and restore key.
    #[arg(long)]
    json: bool,
    /// Stop after this many items (batches; samples with --batch-size 0) and save the loader's
    /// state to --state-out.
    #[arg(long, requires = "state_out")]
    save_after_batches: Option<u64>,
    /// Where --save-after-batches writes the state (JSON if the name ends in .json, else the
    /// compact binary form).
    #[arg(long, requires = "save_after_batches")]
    state_out: Option<PathBuf>,
    /// Continue from a saved state of this rank (written by --state-out, or any checkpoint of a
    /// loader with the same settings).
    #[arg(long)]
    restore: Option<PathBuf>,
}

/// The key loaders of `trace`: of samples (no batching) or of batches.
type KeyLoaders = (Option<Loader<Keyed<String>>>, Option<Loader<Keyed<Batch<String>>>>);

/// One sample as `trace` reports it.
struct Traced<'a> {
    worker: usize,
    batch: u64,
    key: &'a str,
    restore_key: &'a RestoreKey,
}

/// The state of rank `rank` in a checkpoint file.
pub(crate) fn rank_state(path: &Path, rank: usize) -> anyhow::Result<LoaderState> {
    let checkpoint = Checkpoint::read(path)?;
    let ranks: Vec<usize> = checkpoint.ranks.iter().map(|s| s.rank).collect();
    checkpoint.rank(rank).cloned().with_context(|| {
        format!("{} has no state of rank {rank} (it has ranks {ranks:?})", path.display())
    })
}

/// The items a saved state's workers had handed out (their outermost stage's count).
fn items_before(state: &LoaderState) -> u64 {
    state
        .workers
        .iter()
        .map(|w| match &w.state {
            Some(StageState::Worker { index, .. }) => *index + w.replay,
            _ => w.replay,
        })
        .sum()
}

pub(crate) fn run(args: TraceArgs) -> anyhow::Result<u8> {
    let restore = args.restore.as_ref().map(|p| rank_state(p, args.loader.rank)).transpose()?;
    let first_item = restore.as_ref().map_or(0, items_before);
    let batched = args.loader.batch_size > 0;
    // The loader is built (and its settings checked) even when nothing is to be printed.
    // A dataset is a plan of one leaf: datasets and metadatasets load through the same stages.
    let mut builder = args.loader.mix_builder(|s: LeafSample| Ok(Some(s.key().to_owned())))?;
    let plan = builder.plan()?;
    let mut epoch: u64 =
        (0..plan.worker_config.n_local_workers()).map(|w| plan.len_worker(w)).sum();
    if let Some(state) = &restore {
        builder = builder.restore_state(state.clone());
    }
    let loaders: KeyLoaders = if batched {
        (None, Some(builder.build_batches()?))
    } else {
        (Some(builder.build_samples()?), None)
    };
    if let Some(state) = &restore {
        // A resumed trace prints the rest of the pass it continues.
        epoch = energon_cook::samples_left_in_pass(&plan, state)?;
    }
    let limit = match args.limit {
        Some(limit) => limit,
        None if args.loader.val || args.save_after_batches.is_some() => u64::MAX,
        None => epoch,
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut printer = Printer { out: &mut out, json: args.json, printed: 0, limit };
    match loaders {
        (Some(loader), _) => {
            drive(loader, &args, first_item, &mut printer, |Keyed { restore_key, value }| {
                vec![(value.as_str(), restore_key)]
            })?;
        }
        (_, Some(loader)) => drive(loader, &args, first_item, &mut printer, |batch| {
            batch.value.samples.iter().map(|s| (s.value.as_str(), &s.restore_key)).collect()
        })?,
        _ => unreachable!("one loader is built"),
    }
    out.flush()?;
    Ok(0)
}

/// Prints samples up to a limit.
struct Printer<'a, W> {
    out: &'a mut W,
    json: bool,
    printed: u64,
    limit: u64,
}

impl<W: Write> Printer<'_, W> {
    fn emit(&mut self, sample: Traced<'_>) -> io::Result<()> {
        if self.printed >= self.limit {
            return Ok(());
        }
        if self.json {
            let line = serde_json::json!({
                "worker": sample.worker,
                "batch": sample.batch,
                "key": sample.key,
                "restore_key": sample.restore_key,
            });
            writeln!(self.out, "{line}")?;
        } else {
            writeln!(self.out, "{}", sample.key)?;
        }
        self.printed += 1;
        Ok(())
    }

    fn done(&self) -> bool {
        self.printed >= self.limit
    }
}

/// Pulls items and prints their samples: until the limit, the end of a validation pass, or
/// `--save-after-batches` items (then saves the state).
fn drive<I, W: Write>(
    mut loader: Loader<Keyed<I>>,
    args: &TraceArgs,
    first_item: u64,
    printer: &mut Printer<'_, W>,
    samples: impl Fn(&Keyed<I>) -> Vec<(&str, &RestoreKey)>,
) -> anyhow::Result<()> {
    let mut items = 0u64;
    loop {
        match args.save_after_batches {
            Some(n) if items >= n => break,
            None if printer.done() => break,
            _ => {}
        }
        let Some(item) = loader.next() else { break };
        let Loaded { worker, value, .. } = item?;
        let batch = first_item + items;
        for (key, restore_key) in samples(&value) {
            printer.emit(Traced { worker, batch, key, restore_key })?;
        }
        items += 1;
    }
    if let Some(path) = &args.state_out {
        let state = loader.save_state()?;
        Checkpoint::of_rank(state)
            .write(path)
            .with_context(|| format!("cannot save the loader state after {items} items"))?;
    }
    Ok(())
}
