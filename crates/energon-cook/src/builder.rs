//! Assembling the per-worker pipelines of one dataset and the loader over them (the reference's
//! `get_train_dataset` / `get_val_dataset` followed by `get_savable_loader`).

mod common;

use std::{num::NonZeroUsize, path::Path, sync::Arc};

use energon_dist::{WorkerConfig, WorkerSlices, shard_workers};
use energon_reader::{
    Dataset, Decoder, FileStore, RawSample, ReaderOptions, Sample, SampleReader,
    WebdatasetFileStore,
    leaf::{LeafConfig, LeafIter, SliceOrder},
};
use serde_json::{Map, Value};

pub(crate) use self::common::{Common, common_setters, fingerprint};
use crate::{
    apply::{Apply, ApplyFn},
    checkpoint::PipelineConfig,
    encoder::{AuxStore, Cooker, DefaultTaskEncoder, TaskEncoder},
    error::{Error, Result},
    hook::{HookError, Outputs},
    loader::Loader,
    pipeline::{self, Cooking},
    policy::FailureStats,
    repeat::Repeat,
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
    /// The shard names in split order, which identify the dataset in a checkpoint (none by
    /// default: the counts identify it then).
    fn shard_names(&self) -> Vec<Arc<str>> {
        Vec::new()
    }
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

    fn shard_names(&self) -> Vec<Arc<str>> {
        Dataset::shard_names(self)
    }
}

/// A function applied to each item by a map stage; `Ok(None)` skips the item.
pub type MapFn<A, B> = Arc<dyn Fn(A) -> Result<Option<B>> + Send + Sync>;

/// A boxed stage yielding keyed items.
pub type BoxStage<T> = Box<dyn Stage<Item = Keyed<T>>>;

/// Builds the loader of one dataset, stage by stage as the reference's `get_train_dataset` (or
/// `get_val_dataset`) and `get_savable_loader` do, in the reference's stage order:
///
/// 1. leaf: the worker's slices in the leaf order, each sample read and turned into a `T` by
///    `load` (decoding happens here, in the worker), then, for a crude dataset, cooked by the
///    task encoder's first matching cooker;
/// 2. training only: repeated forever;
/// 3. training only: the shuffle buffer, if `shuffle_buffer_size > 1`;
/// 4. to 6. the task encoder's stages: `encode_sample` (or `preencode_sample`), packing,
///    `postencode_sample`, batching (by group with `batch_group_criterion`), `encode_batch`;
/// 7. virtual epochs (training) or the limit (validation).
///
/// The task encoder is [`DefaultTaskEncoder`] unless [`LoaderBuilder::task_encoder`] sets one.
/// Then one pipeline per worker goes to a [`Loader`]. Defaults follow the reference: training,
/// `shuffle_over_epochs = 1`, `parallel_shard_iters` 16 for training and 1 for validation, no
/// `max_samples_per_sequence`, no shuffle buffer, no batching, `prefetch_factor = 2`, failure
/// tolerance 100.
///
/// The loader saves its state exactly ([`Loader::save_state`]); [`LoaderBuilder::restore_state`]
/// builds a loader that continues from a saved state.
///
/// ```
/// use std::{path::Path, sync::Arc};
/// use energon_cook::LoaderBuilder;
/// use energon_dist::WorkerConfig;
/// use energon_reader::{Dataset, OpenOptions};
///
/// let root = energon_fixtures::ref_small_dir();
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
pub struct LoaderBuilder<T, E = DefaultTaskEncoder<T>> {
    dataset: Arc<dyn SampleSource>,
    worker_config: WorkerConfig,
    load: MapFn<RawSample, T>,
    encoder: Arc<E>,
    crude: bool,
    cooker: Option<Cooker<T>>,
    subflavors: Option<Arc<Map<String, Value>>>,
    aux: Vec<(String, Arc<dyn FileStore>)>,
    aux_decoder: Option<Decoder>,
    shuffle_over_epochs: Option<i64>,
    parallel_shard_iters: Option<usize>,
    max_samples_per_sequence: Option<u64>,
    repeat: Option<bool>,
    common: Common,
}

impl<T: Send + 'static> LoaderBuilder<T> {
    /// A training loader over `dataset` for `worker_config`'s rank, turning each raw sample into
    /// a `T` with `load` (`Ok(None)` skips the sample; an error of the sample, such as a part
    /// that cannot be decoded, drops it under the error policy).
    pub fn new<D, L>(dataset: Arc<D>, worker_config: WorkerConfig, load: L) -> Self
    where
        D: SampleSource + 'static,
        L: Fn(RawSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        LoaderBuilder {
            dataset,
            worker_config,
            load: Arc::new(load),
            encoder: Arc::new(DefaultTaskEncoder::default()),
            crude: false,
            cooker: None,
            subflavors: None,
            aux: Vec::new(),
            aux_decoder: Some(Decoder::default()),
            shuffle_over_epochs: Some(1),
            parallel_shard_iters: None,
            max_samples_per_sequence: None,
            repeat: None,
            common: Common::default(),
        }
    }

    /// Marks the dataset crude and cooks every sample with `cook` after `load` (the reference
    /// cooks crude samples, such as JSONL records, in a map stage of their own).
    pub fn cook<F>(self, cook: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        self.cooker(Cooker::of_fn(cook))
    }

    /// Sets the per-sample encoding of the default task encoder (its `encode_sample`; identity
    /// by default).
    pub fn encode<F>(mut self, encode: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        let encoder = Arc::make_mut(&mut self.encoder);
        *encoder = encoder.clone().encode_with(encode);
        self
    }
}

impl LoaderBuilder<Sample> {
    /// A training loader over the dataset `reader` reads: typed samples as its `dataset.yaml`
    /// says, or crude samples (JSONL files, crude WebDatasets) for the task encoder's cookers,
    /// with the dataset's subflavors. The task encoder is [`DefaultTaskEncoder::samples`].
    pub fn from_reader(reader: Arc<SampleReader>, worker_config: WorkerConfig) -> Self {
        let crude = reader.sample_type() == "CrudeSample";
        let subflavors = reader.subflavors().cloned().map(Arc::new);
        let dataset = Arc::clone(reader.dataset());
        let mut res = LoaderBuilder::new(dataset, worker_config, move |raw: RawSample| {
            Ok(Some(reader.build(&raw)?))
        });
        res.encoder = Arc::new(DefaultTaskEncoder::samples());
        res.crude = crude;
        res.subflavors = subflavors;
        res
    }

    /// Opens the dataset at `path` (a prepared WebDataset or a JSONL file) and makes a training
    /// loader over it, as [`LoaderBuilder::from_reader`] does.
    ///
    /// The reader keeps one shard map per slice the workers read at once (16 per worker, the
    /// training default of `parallel_shard_iters`), whatever `options.max_open_shards` says, so
    /// memory stays flat however many shards the dataset has. Use
    /// [`LoaderBuilder::from_reader`] to choose otherwise.
    pub fn open(path: &Path, worker_config: WorkerConfig, options: ReaderOptions) -> Result<Self> {
        let options = ReaderOptions {
            max_open_shards: max_open_shards(true, None, worker_config.num_workers()),
            ..options
        };
        let reader = SampleReader::open(path, &options)?;
        Ok(LoaderBuilder::from_reader(Arc::new(reader), worker_config))
    }
}

/// How many shard maps a reader should keep open for a loader: one per slice its workers read
/// at once (`parallel_shard_iters`, 16 for training and 1 for validation, times the workers), as
/// the reference keeps one tar handle per open slice. More only keep pages of shards nobody
/// reads any more in memory.
pub fn max_open_shards(
    training: bool,
    parallel_shard_iters: Option<usize>,
    num_workers: usize,
) -> usize {
    let slots = if training { parallel_shard_iters.unwrap_or(16) } else { 1 };
    (slots * num_workers.max(1)).max(2)
}

impl<T: Send + 'static, E: TaskEncoder<Sample = T>> LoaderBuilder<T, E> {
    /// The same loader with another task encoder.
    pub fn task_encoder<E2: TaskEncoder<Sample = T>>(self, encoder: E2) -> LoaderBuilder<T, E2> {
        LoaderBuilder {
            dataset: self.dataset,
            worker_config: self.worker_config,
            load: self.load,
            encoder: Arc::new(encoder),
            crude: self.crude,
            cooker: self.cooker,
            subflavors: self.subflavors,
            aux: self.aux,
            aux_decoder: self.aux_decoder,
            shuffle_over_epochs: self.shuffle_over_epochs,
            parallel_shard_iters: self.parallel_shard_iters,
            max_samples_per_sequence: self.max_samples_per_sequence,
            repeat: self.repeat,
            common: self.common,
        }
    }

    /// The task encoder.
    pub fn encoder(&self) -> &Arc<E> {
        &self.encoder
    }

    /// Whether the dataset's samples are crude, to be cooked by the task encoder's cookers.
    pub fn crude(mut self, crude: bool) -> Self {
        self.crude = crude;
        self
    }

    /// Marks the dataset crude and cooks its samples with `cooker`, instead of the task
    /// encoder's first cooker matching the subflavors (a caller that chose the cooker itself).
    pub fn cooker(mut self, cooker: Cooker<T>) -> Self {
        self.cooker = Some(cooker);
        self.crude = true;
        self
    }

    /// The dataset's subflavors: they select the cooker of a crude dataset.
    pub fn subflavors(mut self, subflavors: Option<Map<String, Value>>) -> Self {
        self.subflavors = subflavors.map(Arc::new);
        self
    }

    /// Adds an auxiliary source for the cookers (the metadataset's `aux:`), decoded with the
    /// auxiliary decoder.
    pub fn aux(mut self, name: impl Into<String>, store: Arc<dyn FileStore>) -> Self {
        self.aux.push((name.into(), store));
        self
    }

    /// How files read from auxiliary sources are decoded (default: the default decoder; `None`
    /// keeps raw bytes).
    pub fn aux_decoder(mut self, decoder: Option<Decoder>) -> Self {
        self.aux_decoder = decoder;
        self
    }

    /// Training (shuffled slices, infinite repetition, shuffle buffer, virtual epochs) or
    /// validation (sequential slices, one pass, limit). Default: training.
    pub fn training(mut self, training: bool) -> Self {
        self.common.settings.training = training;
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

    /// Whether the dataset's passes repeat forever (default: when training, as the reference's
    /// `repeat=True`; a validation loader that repeats is the reference's `RepeatDataset` around
    /// it). A training loader that does not repeat ends after one shuffled pass.
    pub fn repeat(mut self, repeat: bool) -> Self {
        self.repeat = Some(repeat);
        self
    }

    /// Cuts slices longer than 1.5 times this many samples.
    pub fn max_samples_per_sequence(mut self, max_samples_per_sequence: Option<u64>) -> Self {
        self.max_samples_per_sequence = max_samples_per_sequence;
        self
    }

    common::common_setters!();

    /// The leaf configuration these settings give.
    pub fn leaf_config(&self) -> Result<LeafConfig> {
        if !self.common.settings.training {
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

    /// The configuration a checkpoint of this loader records (and a restore compares).
    pub fn config(&self) -> Result<PipelineConfig> {
        let leaf = self.leaf_config()?;
        let mut config = self.common.config(&self.worker_config, &*self.encoder);
        config.insert("dataset.kind", "dataset");
        config.insert("_dataset.path", self.dataset.path().display());
        let counts = self.dataset.shard_counts();
        let names = self.dataset.shard_names();
        config.insert("dataset.shards", fingerprint(&names, &counts));
        config.insert("dataset.crude", self.crude);
        if let Some(subflavors) = &self.subflavors {
            config.insert("dataset.subflavors", Value::Object((**subflavors).clone()));
        }
        config.insert(
            "dataset.shuffle_over_epochs",
            format!("{:?}", leaf.order.shuffle_over_epochs()),
        );
        config.insert("dataset.parallel_shard_iters", leaf.n_slots());
        config.insert(
            "dataset.max_samples_per_sequence",
            format!("{:?}", self.max_samples_per_sequence),
        );
        // Only when it is not the default, so that checkpoints saved before the setting existed
        // still restore.
        if let Some(repeat) = self.repeat.filter(|&r| r != self.common.settings.training) {
            config.insert("dataset.repeat", repeat);
        }
        for (name, store) in &self.aux {
            config.insert(format!("_aux.{name}"), store.path().display());
        }
        Ok(config)
    }

    /// The pipelines of every local worker up to the task encoder's sample stages (encoded,
    /// packed, not batched), without a loader; pipeline `w` is local worker `w`'s.
    pub fn build_sample_pipelines(&self) -> Result<Vec<BoxStage<E::Encoded>>> {
        Ok(self.encoded_pipelines(&FailureStats::default())?.into_iter().map(|(s, _)| s).collect())
    }

    fn encoded_pipelines(
        &self,
        stats: &FailureStats,
    ) -> Result<Vec<(BoxStage<E::Encoded>, crate::context::StageEnv)>> {
        pipeline::check_hooks(&*self.encoder, &self.common.settings)?;
        let leaf_config = self.leaf_config()?;
        let cfg = &self.worker_config;
        let workers = self.worker_slices()?;
        let cooking = self.cooking()?;
        let training = self.common.settings.training;
        let mut res = Vec::with_capacity(workers.len());
        for (worker, slices) in workers.into_iter().enumerate() {
            if training && slices.n_samples() == 0 {
                return Err(Error::EmptyWorker {
                    dataset: self.dataset.path().display().to_string(),
                    rank: cfg.rank(),
                    worker,
                });
            }
            let env = self.common.env(cfg, worker, stats)?;
            let leaf = LeafIter::new(slices, leaf_config, cfg.worker_rng(worker)?)?;
            let dataset = Arc::clone(&self.dataset);
            let source = LeafSource::new(leaf, move |index| Ok(dataset.read(index)?));
            let mut stage: BoxStage<T> =
                Box::new(Apply::new(source, "load_sample", load_fn(&self.load), env.clone()));
            if let Some(cooking) = &cooking {
                stage = pipeline::cook_stage(&self.encoder, stage, cooking.clone(), &env);
            }
            if self.repeat.unwrap_or(training) {
                stage = Box::new(Repeat::forever(stage, worker));
            }
            let stage = pipeline::encode_stages(
                &self.encoder,
                stage,
                &self.common.settings,
                &env,
                cfg.worker_rng(worker)?,
            )?;
            res.push((stage, env));
        }
        Ok(res)
    }

    /// The cooker of a crude dataset, with what it gets.
    fn cooking(&self) -> Result<Option<Cooking<T>>> {
        if !self.crude {
            return Ok(None);
        }
        let dataset = self.dataset.path().display().to_string();
        let cooker = match &self.cooker {
            Some(cooker) => cooker.clone(),
            None => pipeline::select_cooker(
                self.encoder.cookers(),
                self.subflavors.as_deref(),
                &dataset,
            )?,
        };
        let primary = if cooker.needs_primary() {
            let store: Arc<dyn FileStore> =
                Arc::new(WebdatasetFileStore::open(self.dataset.path())?);
            Some(AuxStore::new("primary", store, self.aux_decoder))
        } else {
            None
        };
        let aux: Vec<AuxStore> = self
            .aux
            .iter()
            .map(|(name, store)| AuxStore::new(name.clone(), Arc::clone(store), self.aux_decoder))
            .collect();
        Ok(Some(Cooking { cooker, subflavors: self.subflavors.clone(), aux: aux.into(), primary }))
    }

    /// Every local worker's whole pipeline of encoded samples, as [`LoaderBuilder::build_samples`]
    /// runs them (for a caller that runs one worker's pipeline itself); failures are counted in
    /// `stats`.
    pub fn sample_worker_pipelines(
        &self,
        stats: &FailureStats,
    ) -> Result<Vec<BoxStage<E::Encoded>>> {
        self.common.sample_pipelines(&*self.encoder, self.encoded_pipelines(stats)?)
    }

    /// Every local worker's whole pipeline of batches, as [`LoaderBuilder::build_batches`] runs
    /// them; failures are counted in `stats`.
    pub fn batch_worker_pipelines(&self, stats: &FailureStats) -> Result<Vec<BoxStage<E::Output>>> {
        self.common.batch_pipelines(&self.encoder, self.encoded_pipelines(stats)?)
    }

    /// The loader of encoded samples (no batching: no batch size, no batching by group).
    pub fn build_samples(self) -> Result<Loader<Keyed<E::Encoded>>> {
        let stats = FailureStats::default();
        let pipelines = self.sample_worker_pipelines(&stats)?;
        self.common.start(pipelines, &self.worker_config, self.config()?, stats, false)
    }

    /// The loader of batches (a batch size, or batching by group).
    pub fn build_batches(self) -> Result<Loader<Keyed<E::Output>>> {
        let stats = FailureStats::default();
        let pipelines = self.batch_worker_pipelines(&stats)?;
        self.common.start(pipelines, &self.worker_config, self.config()?, stats, true)
    }
}

/// The `load` function as a map hook: `Ok(None)` skips, errors go to the error policy (a
/// sample's are dropped, the loader's stop it).
pub(crate) fn load_fn<A: 'static, T: 'static>(load: &MapFn<A, T>) -> ApplyFn<A, T> {
    let load = Arc::clone(load);
    Arc::new(move |raw, _| match load(raw) {
        Ok(Some(value)) => Ok(Outputs::One(value)),
        Ok(None) => Err(HookError::Skip),
        Err(err) => Err(HookError::Failed(Box::new(err))),
    })
}

impl<T, E> std::fmt::Debug for LoaderBuilder<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderBuilder")
            .field("dataset", &self.dataset.path())
            .field("worker_config", &self.worker_config)
            .field("crude", &self.crude)
            .field("shuffle_over_epochs", &self.shuffle_over_epochs)
            .field("parallel_shard_iters", &self.parallel_shard_iters)
            .field("max_samples_per_sequence", &self.max_samples_per_sequence)
            .field("common", &self.common)
            .finish_non_exhaustive()
    }
}
