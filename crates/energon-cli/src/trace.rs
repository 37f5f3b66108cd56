//! `energon trace PATH`: the sample keys this rank's loader yields, in order.
//!
//! The loader is the real one (same slicing, random streams, shuffle buffer, batching and worker
//! round robin), so the keys come out exactly as a training job with these settings would see them,
//! and exactly as megatron-energon's loader yields them. Samples are not decoded.

use std::{
    io::{self, BufWriter, Write},
    path::PathBuf,
    process::ExitCode,
    sync::Arc,
};

use anyhow::Context;
use clap::Args;
use energon_cook::{Batch, Keyed, Loaded, Loader, LoaderBuilder, MixLoaderBuilder, RestoreKey};
use energon_dist::WorkerConfig;
use energon_index::discover::{DatasetKind, classify};
use energon_mix::{LeafSample, MixOptions, MixPlan, ResolveOptions};
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
    /// The split part: the one given, else `val` for validation and `train` for training.
    pub(crate) fn split_part(&self) -> String {
        match &self.split_part {
            Some(part) => part.clone(),
            None if self.val => "val".to_owned(),
            None => "train".to_owned(),
        }
    }

    /// How many shard maps the reader keeps open: one per slice the workers read at once, as
    /// the reference keeps one tar handle per open slice. More would only hold pages of shards
    /// nobody reads any more in memory (they count in the process's resident set).
    pub(crate) fn max_open_shards(&self) -> usize {
        let slots = if self.val { 1 } else { self.parallel_shard_iters.unwrap_or(16) };
        (slots * self.num_workers.max(1)).max(2)
    }

    /// Opens the dataset (raw samples, every part).
    pub(crate) fn open(&self) -> anyhow::Result<Arc<Dataset>> {
        let options = OpenOptions {
            split_part: self.split_part(),
            max_open_shards: self.max_open_shards(),
            ..OpenOptions::default()
        };
        let dataset = Dataset::open(&self.path, &options)
            .with_context(|| format!("cannot open {}", self.path.display()))?;
        Ok(Arc::new(dataset))
    }

    /// A loader builder with these settings over `dataset`, turning samples into `T` with `load`.
    pub(crate) fn builder<T, L>(
        &self,
        dataset: Arc<Dataset>,
        load: L,
    ) -> anyhow::Result<LoaderBuilder<T>>
    where
        T: Send + 'static,
        L: Fn(RawSample) -> energon_cook::Result<Option<T>> + Send + Sync + 'static,
    {
        let worker_config = WorkerConfig::new(self.rank, self.world_size, self.num_workers)?
            .with_seed_offset(self.seed_offset);
        let crude = matches!(*dataset, Dataset::Jsonl(_));
        let mut builder = LoaderBuilder::new(dataset, worker_config, load)
            .training(!self.val)
            .shuffle_over_epochs(self.shuffle_over_epochs)
            .max_samples_per_sequence(self.max_samples_per_sequence)
            .shuffle_buffer_size(self.shuffle_buffer_size)
            .batch_size((self.batch_size > 0).then_some(self.batch_size))
            .drop_last(self.drop_last)
            .prefetch_factor(self.prefetch_factor);
        if let Some(p) = self.parallel_shard_iters {
            builder = builder.parallel_shard_iters(p);
        }
        if crude {
            // COMPAT(energon 7.4.1): JSONL samples are crude; the reference cooks them in a map
            // stage of their own (it shows in the restore keys).
            builder = builder.cook(|x| Ok(Some(x)));
        }
        Ok(builder)
    }
}

impl LoaderArgs {
    /// Whether the path is a metadataset.
    pub(crate) fn is_metadataset(&self) -> bool {
        matches!(classify(&self.path), Ok(DatasetKind::Metadataset))
    }

    /// A metadataset loader builder with these settings (`--shuffle-over-epochs` is the outermost
    /// `shuffle_over_epochs_multiplier`), turning samples into `T` with `load`.
    pub(crate) fn mix_builder<T, L>(&self, load: L) -> anyhow::Result<MixLoaderBuilder<T>>
    where
        T: Send + 'static,
        L: Fn(LeafSample) -> energon_cook::Result<Option<T>> + Send + Sync + 'static,
    {
        let worker_config = WorkerConfig::new(self.rank, self.world_size, self.num_workers)?
            .with_seed_offset(self.seed_offset);
        let resolve = ResolveOptions {
            shuffle_over_epochs_multiplier: Some(self.shuffle_over_epochs),
            subflavors: None,
        };
        let split = energon_mix::resolve_path(&self.path, &self.split_part(), &resolve)
            .with_context(|| format!("cannot open {}", self.path.display()))?;
        let options = MixOptions {
            training: !self.val,
            repeat: true,
            max_samples_per_sequence: self.max_samples_per_sequence,
            parallel_shard_iters: self.parallel_shard_iters,
        };
        let plan = MixPlan::new(split, worker_config, options)
            .with_context(|| format!("cannot open {}", self.path.display()))?;
        Ok(MixLoaderBuilder::new(plan, load)
            // COMPAT(energon 7.4.1): crude leaves are cooked in a map stage of their own.
            .cook(|x| Ok(Some(x)))
            .shuffle_buffer_size(self.shuffle_buffer_size)
            .batch_size((self.batch_size > 0).then_some(self.batch_size))
            .drop_last(self.drop_last)
            .prefetch_factor(self.prefetch_factor))
    }
}

/// The key loaders of `trace`: of samples (no batching) or of batches.
type KeyLoaders = (Option<Loader<Keyed<String>>>, Option<Loader<Keyed<Batch<String>>>>);

/// Flags of `energon trace`.
#[derive(Debug, Args)]
pub(crate) struct TraceArgs {
    #[command(flatten)]
    loader: LoaderArgs,
    /// Samples to print [default: one epoch of this rank for training, everything with --val].
    #[arg(short = 'n', long)]
    limit: Option<u64>,
    /// One JSON object per sample: worker, batch index, key and restore key.
    #[arg(long)]
    json: bool,
}

/// One sample as `trace` reports it.
struct Traced<'a> {
    worker: usize,
    batch: u64,
    key: &'a str,
    restore_key: &'a RestoreKey,
}

pub(crate) fn run(args: TraceArgs) -> anyhow::Result<ExitCode> {
    let batched = args.loader.batch_size > 0;
    // The loader is built (and its settings checked) even when nothing is to be printed.
    let (epoch, (samples, batches)): (u64, KeyLoaders) = if args.loader.is_metadataset() {
        let builder = args.loader.mix_builder(|s: LeafSample| Ok(Some(s.key().to_owned())))?;
        let plan = builder.plan();
        let epoch = (0..plan.worker_config.n_local_workers()).map(|w| plan.len_worker(w)).sum();
        let loaders = if batched {
            (None, Some(builder.build_batches()?))
        } else {
            (Some(builder.build_samples()?), None)
        };
        (epoch, loaders)
    } else {
        let dataset = args.loader.open()?;
        let builder = args.loader.builder(dataset, |raw| Ok(Some(raw.key)))?;
        let epoch = builder.worker_slices()?.iter().map(|s| s.n_samples()).sum();
        let loaders = if batched {
            (None, Some(builder.build_batches()?))
        } else {
            (Some(builder.build_samples()?), None)
        };
        (epoch, loaders)
    };
    let limit = match args.limit {
        Some(limit) => limit,
        None if args.loader.val => u64::MAX,
        None => epoch,
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut printed = 0u64;
    let mut emit = |sample: Traced<'_>| -> io::Result<bool> {
        if printed >= limit {
            return Ok(false);
        }
        if args.json {
            let line = serde_json::json!({
                "worker": sample.worker,
                "batch": sample.batch,
                "key": sample.key,
                "restore_key": sample.restore_key,
            });
            writeln!(out, "{line}")?;
        } else {
            writeln!(out, "{}", sample.key)?;
        }
        printed += 1;
        Ok(printed < limit)
    };
    if limit == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(loader) = samples {
        for (batch, item) in loader.enumerate() {
            let Loaded { worker, value: Keyed { restore_key, value } } = item?;
            let sample =
                Traced { worker, batch: batch as u64, key: &value, restore_key: &restore_key };
            if !emit(sample)? {
                break;
            }
        }
    } else if let Some(loader) = batches {
        'batches: for (batch, item) in loader.enumerate() {
            let Loaded { worker, value: Keyed { value: Batch { samples }, .. } } = item?;
            for Keyed { restore_key, value } in &samples {
                let sample = Traced { worker, batch: batch as u64, key: value, restore_key };
                if !emit(sample)? {
                    break 'batches;
                }
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
