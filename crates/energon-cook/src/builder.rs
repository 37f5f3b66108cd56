//! Assembling the per-worker pipelines of one dataset and the loader over them (the reference's
//! `get_train_dataset` / `get_val_dataset` followed by `get_loader`).

use std::{num::NonZeroUsize, path::Path, sync::Arc};

use energon_dist::{WorkerConfig, WorkerSlices, shard_workers};
use energon_reader::{
    Dataset, RawSample,
    leaf::{LeafConfig, LeafIter, SliceOrder},
};

use crate::{
    batch::{Batch, Batcher},
    error::{Error, Result},
    loader::{Loader, LoaderConfig},
    map::Map,
    repeat::Repeat,
    shuffle::ShuffleBuffer,
    source::LeafSource,
    stage::{Keyed, Stage},
};

/// What a loader reads from: a dataset's shards and random access to its samples.
///
/// Implemented for energon-reader's [`Dataset`]; tests implement it over synthetic samples.
pub trait SampleSource: Send + Sync {
    /// The dataset path, for messages.
    fn path(&self) -> &Path;
    /// Sample counts per shard in split order (one virtual shard for JSONL).
    fn shard_counts(&self) -> Vec<u64>;
    /// Sample `index`; `Ok(None)` for an excluded sample.
    fn read(&self, index: u64) -> energon_reader::Result<Option<RawSample>>;
}

impl SampleSource for Dataset {
    fn path(&self) -> &Path {
        Dataset::path(self)
    }

    fn shard_counts(&self) -> Vec<u64> {
        Dataset::shard_counts(self)
    }

    fn read(&self, index: u64) -> energon_reader::Result<Option<RawSample>> {
        Dataset::read(self, index)
    }
}

/// A function applied to each item by a map stage; `Ok(None)` skips the item.
pub type MapFn<A, B> = Arc<dyn Fn(A) -> Result<Option<B>> + Send + Sync>;

/// A boxed stage yielding keyed items.
pub type BoxStage<T> = Box<dyn Stage<Item = Keyed<T>>>;

/// Builds the loader of one dataset, stage by stage as the reference's `get_train_dataset` (or
/// `get_val_dataset`) and `get_loader` do:
///
/// 1. leaf: the worker's slices in the leaf order, each sample read and turned into a `T` by
///    `load` (decoding happens here, in the worker), then `cook` if set;
/// 2. training only: repeated forever;
/// 3. training only: the shuffle buffer, if `shuffle_buffer_size > 1`;
/// 4. `encode` (identity unless set);
/// 5. with a batch size: batches, then `encode_batch` (identity).
///
/// Then one pipeline per worker goes to a [`Loader`]. Defaults follow the reference: training,
/// `shuffle_over_epochs = 1`, `parallel_shard_iters` 16 for training and 1 for validation, no
/// `max_samples_per_sequence`, no shuffle buffer, no batching, `prefetch_factor = 2`.
///
/// ```
/// use std::{path::Path, sync::Arc};
/// use energon_cook::LoaderBuilder;
/// use energon_dist::WorkerConfig;
/// use energon_reader::{Dataset, OpenOptions};
///
/// let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/energon-ref-small");
/// let dataset = Arc::new(Dataset::open(&root, &OpenOptions::default())?);
/// let worker_config = WorkerConfig::new(0, 1, 2)?;
/// let loader = LoaderBuilder::new(dataset, worker_config, |raw| Ok(Some(raw.key)))
///     .batch_size(Some(4))
///     .shuffle_buffer_size(16)
///     .build_batches()?;
/// for batch in loader.take(3) {
///     let batch = batch?;
///     assert_eq!(batch.value.value.len(), 4);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LoaderBuilder<T> {
    dataset: Arc<dyn SampleSource>,
    worker_config: WorkerConfig,
    load: MapFn<RawSample, T>,
    cook: Option<MapFn<T, T>>,
    encode: Option<MapFn<T, T>>,
    training: bool,
    shuffle_over_epochs: Option<i64>,
    parallel_shard_iters: Option<usize>,
    max_samples_per_sequence: Option<u64>,
    shuffle_buffer_size: usize,
    batch_size: Option<usize>,
    drop_last: bool,
    prefetch_factor: usize,
}

impl<T: Send + 'static> LoaderBuilder<T> {
    /// A training loader over `dataset` for `worker_config`'s rank, turning each raw sample into
    /// a `T` with `load` (`Ok(None)` skips the sample).
    pub fn new<D, L>(dataset: Arc<D>, worker_config: WorkerConfig, load: L) -> Self
    where
        D: SampleSource + 'static,
        L: Fn(RawSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        LoaderBuilder {
            dataset,
            worker_config,
            load: Arc::new(load),
            cook: None,
            encode: None,
            training: true,
            shuffle_over_epochs: Some(1),
            parallel_shard_iters: None,
            max_samples_per_sequence: None,
            shuffle_buffer_size: 0,
            batch_size: None,
            drop_last: false,
            prefetch_factor: 2,
        }
    }

    /// Adds a cooking stage after `load` (the reference cooks crude samples, such as JSONL
    /// records, in a map stage of its own).
    pub fn cook<F>(mut self, cook: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        self.cook = Some(Arc::new(cook));
        self
    }

    /// Sets the per-sample encoding (the task encoder's `encode_sample`; identity by default).
    pub fn encode<F>(mut self, encode: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        self.encode = Some(Arc::new(encode));
        self
    }

    /// Training (shuffled slices, infinite repetition, shuffle buffer) or validation
    /// (sequential slices, one pass, no shuffle buffer). Default: training.
    pub fn training(mut self, training: bool) -> Self {
        self.training = training;
        self
    }

    /// The reference's `shuffle_over_epochs` for training: `k >= 1` or `-1` (default 1).
    pub fn shuffle_over_epochs(mut self, shuffle_over_epochs: i64) -> Self {
        self.shuffle_over_epochs = Some(shuffle_over_epochs);
        self
    }

    /// Slices open at once per worker (the reference's `parallel_shard_iters`; default 16 for
    /// training, 1 for validation).
    pub fn parallel_shard_iters(mut self, parallel_shard_iters: usize) -> Self {
        self.parallel_shard_iters = Some(parallel_shard_iters);
        self
    }

    /// Cuts slices longer than 1.5 times this many samples.
    pub fn max_samples_per_sequence(mut self, max_samples_per_sequence: Option<u64>) -> Self {
        self.max_samples_per_sequence = max_samples_per_sequence;
        self
    }

    /// The shuffle buffer size (training only; sizes 0 and 1 mean no buffer).
    pub fn shuffle_buffer_size(mut self, shuffle_buffer_size: usize) -> Self {
        self.shuffle_buffer_size = shuffle_buffer_size;
        self
    }

    /// The batch size (`None`: no batching, for [`LoaderBuilder::build_samples`]).
    pub fn batch_size(mut self, batch_size: Option<usize>) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Whether the last, shorter batch of a pass is dropped.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Items each worker may prepare ahead (default 2).
    pub fn prefetch_factor(mut self, prefetch_factor: usize) -> Self {
        self.prefetch_factor = prefetch_factor;
        self
    }

    /// The leaf configuration these settings give.
    pub fn leaf_config(&self) -> Result<LeafConfig> {
        if !self.training {
            return Ok(LeafConfig::VAL);
        }
        let order =
            SliceOrder::from_shuffle_over_epochs(self.shuffle_over_epochs).ok_or_else(|| {
                Error::InvalidSetting {
                    setting: "shuffle_over_epochs",
                    value: format!("{:?}", self.shuffle_over_epochs),
                    reason: "must be -1 or at least 1",
                }
            })?;
        let p = self.parallel_shard_iters.unwrap_or(16);
        let parallel_slice_iters = NonZeroUsize::new(p).ok_or(Error::InvalidSetting {
            setting: "parallel_shard_iters",
            value: "0".into(),
            reason: "must be at least 1",
        })?;
        Ok(LeafConfig { order, parallel_slice_iters })
    }

    /// The slices of every local worker of this rank.
    pub fn worker_slices(&self) -> Result<Vec<WorkerSlices>> {
        let counts = self.dataset.shard_counts();
        let msps = self.max_samples_per_sequence;
        Ok(shard_workers(&counts, None, &self.worker_config, 0, msps)?)
    }

    /// The pipelines of every local worker up to the encode stage (samples, not batched), without
    /// a loader; pipeline `w` is local worker `w`'s.
    pub fn build_sample_pipelines(&self) -> Result<Vec<BoxStage<T>>> {
        let leaf_config = self.leaf_config()?;
        let cfg = &self.worker_config;
        let workers = self.worker_slices()?;
        let mut res = Vec::with_capacity(workers.len());
        for (worker, slices) in workers.into_iter().enumerate() {
            if self.training && slices.n_samples() == 0 {
                return Err(Error::EmptyWorker {
                    dataset: self.dataset.path().display().to_string(),
                    rank: cfg.rank(),
                    worker,
                });
            }
            let leaf = LeafIter::new(slices, leaf_config, cfg.worker_rng(worker)?)?;
            let dataset = Arc::clone(&self.dataset);
            let source = LeafSource::new(leaf, move |index| Ok(dataset.read(index)?));
            let load = Arc::clone(&self.load);
            let mut stage: BoxStage<T> = Box::new(Map::new(source, move |raw| load(raw)));
            if let Some(cook) = &self.cook {
                let cook = Arc::clone(cook);
                stage = Box::new(Map::new(stage, move |x| cook(x)));
            }
            if self.training {
                stage = Box::new(Repeat::forever(stage, worker));
                if self.shuffle_buffer_size > 1 {
                    let rng = cfg.worker_rng(worker)?;
                    stage = Box::new(ShuffleBuffer::new(stage, self.shuffle_buffer_size, rng));
                }
            }
            // COMPAT(energon 7.4.1): DefaultTaskEncoder overrides encode_sample, so the reference
            // always has this map stage (it shows in the restore keys).
            stage = match &self.encode {
                Some(encode) => {
                    let encode = Arc::clone(encode);
                    Box::new(Map::new(stage, move |x| encode(x)))
                }
                None => Box::new(Map::new(stage, |x| Ok(Some(x)))),
            };
            res.push(stage);
        }
        Ok(res)
    }

    /// The loader of samples (no batching; the batch size must be unset).
    pub fn build_samples(self) -> Result<Loader<Keyed<T>>> {
        if let Some(batch_size) = self.batch_size {
            return Err(Error::InvalidSetting {
                setting: "batch_size",
                value: batch_size.to_string(),
                reason: "a loader of samples has no batch size; use build_batches",
            });
        }
        let pipelines = self
            .build_sample_pipelines()?
            .into_iter()
            .map(|stage| Box::new(stage) as Box<dyn Stage<Item = Keyed<T>>>)
            .collect();
        Loader::new(pipelines, self.loader_config())
    }

    /// The loader of batches (the batch size must be set).
    pub fn build_batches(self) -> Result<Loader<Keyed<Batch<T>>>> {
        let batch_size = self.batch_size.ok_or(Error::InvalidSetting {
            setting: "batch_size",
            value: "None".into(),
            reason: "a loader of batches needs a batch size",
        })?;
        let mut pipelines: Vec<Box<dyn Stage<Item = Keyed<Batch<T>>>>> = Vec::new();
        for stage in self.build_sample_pipelines()? {
            let batches = Batcher::new(stage, batch_size, self.drop_last)?;
            // COMPAT(energon 7.4.1): DefaultTaskEncoder overrides encode_batch (a map stage).
            pipelines.push(Box::new(Map::new(batches, |b| Ok(Some(b)))));
        }
        Loader::new(pipelines, self.loader_config())
    }

    fn loader_config(&self) -> LoaderConfig {
        LoaderConfig {
            num_workers: self.worker_config.num_workers(),
            prefetch_factor: self.prefetch_factor,
        }
    }
}

impl<T> std::fmt::Debug for LoaderBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderBuilder")
            .field("dataset", &self.dataset.path())
            .field("worker_config", &self.worker_config)
            .field("training", &self.training)
            .field("shuffle_over_epochs", &self.shuffle_over_epochs)
            .field("parallel_shard_iters", &self.parallel_shard_iters)
            .field("max_samples_per_sequence", &self.max_samples_per_sequence)
            .field("shuffle_buffer_size", &self.shuffle_buffer_size)
            .field("batch_size", &self.batch_size)
            .field("drop_last", &self.drop_last)
            .field("prefetch_factor", &self.prefetch_factor)
            .finish_non_exhaustive()
    }
}
