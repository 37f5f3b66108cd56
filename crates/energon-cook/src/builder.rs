//! Assembling the per-worker pipelines of a rank and the loader over them (the reference's
//! `get_train_dataset` / `get_val_dataset` followed by `get_savable_loader`).
//!
//! One builder for every input: a metadataset split is a [`MixPlan`]; one dataset becomes a plan
//! of one leaf when the loader is built ([`MixPlan::single`]), so both run the same stages and
//! save the same kind of state.

mod common;
mod leaf;
mod linked;

use std::sync::Arc;

use energon_dist::{WorkerConfig, WorkerSlices};
use energon_mix::{LeafData, LeafSample, MixOptions, MixPlan, SingleLeaf};
use energon_reader::{Decoder, FileStore, RawSample, leaf::LeafConfig};
use serde_json::{Map, Value};

pub(crate) use self::common::{Common, fingerprint};
pub use self::{leaf::LeafLoad, linked::WorkerPipeline};
use crate::{
    apply::{Apply, ApplyFn},
    checkpoint::PipelineConfig,
    context::StageEnv,
    encoder::{Cooker, DefaultTaskEncoder, TaskEncoder},
    error::{Error, Result},
    hook::{HookError, Outputs},
    loader::Loader,
    pipeline,
    policy::FailureStats,
    restore_key::{RestoreKey, loader_worker_id, split_loader_key},
    source::LeafSource,
    stage::{Keyed, Stage},
};

pub use energon_mix::SampleSource;

/// A function applied to each item by a map stage; `Ok(None)` skips the item.
pub type MapFn<A, B> = Arc<dyn Fn(A) -> Result<Option<B>> + Send + Sync>;

/// A boxed stage yielding keyed items.
pub type BoxStage<T> = Box<dyn Stage<Item = Keyed<T>>>;

/// Builds the loader of a rank, stage by stage as the reference's `get_train_dataset` (or
/// `get_val_dataset`) and `get_savable_loader` do, in the reference's stage order:
///
/// 1. per leaf: the worker's slices in the leaf order, each sample read and turned into a `T` by
///    `load` (decoding happens here, in the worker), then, for a crude leaf (JSONL files, crude
///    WebDatasets), cooked by the task encoder's first cooker matching its subflavors, with its
///    auxiliary sources;
/// 2. the leaves combined as the plan says (training: repeated forever, blended by weight or
///    epochized; validation: one after the other);
/// 3. training only: the shuffle buffer, if `shuffle_buffer_size > 1`;
/// 4. to 6. the task encoder's stages: `encode_sample` (or `preencode_sample`), packing,
///    `postencode_sample`, batching (by group with `batch_group_criterion`), `encode_batch`;
/// 7. virtual epochs (training) or the limit (validation).
///
/// The input is a metadataset's plan ([`LoaderBuilder::from_plan`]) or one dataset
/// ([`LoaderBuilder::new`]), which is planned as a plan of one leaf; a
/// [`LoaderSpec`](crate::LoaderSpec) describes a loader as a value and makes its builder. The
/// task encoder is [`DefaultTaskEncoder`] unless [`LoaderBuilder::task_encoder`] sets one.
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
    input: Input<T>,
    encoder: Arc<E>,
    aux_decoder: Option<Decoder>,
    /// A setting of one dataset that was given for a plan (building fails).
    refused: Option<&'static str>,
    common: Common,
}

/// What a loader reads.
enum Input<T> {
    /// A plan, and how each of its leaves loads.
    Plan { plan: Arc<MixPlan>, leaves: Vec<LeafLoad<T>> },
    /// One dataset, planned when the loader is built (its settings may change until then).
    Dataset(Box<DatasetInput<T>>),
}

/// One dataset and the settings that shape its plan.
struct DatasetInput<T> {
    source: Arc<dyn SampleSource>,
    worker_config: WorkerConfig,
    load: LeafLoad<T>,
    crude: bool,
    shuffle_over_epochs: Option<i64>,
    parallel_shard_iters: Option<usize>,
    max_samples_per_sequence: Option<u64>,
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
        let path = dataset.path().display().to_string();
        let load = LeafLoad::new(move |sample| match sample {
            LeafSample::Raw(raw) => load(raw),
            LeafSample::Joined(_) => Err(Error::InvalidSetting {
                setting: "dataset",
                value: path.clone(),
                reason: "a loader of one dataset reads no joined samples",
            }),
        });
        let input = DatasetInput {
            source: dataset,
            worker_config,
            load,
            crude: false,
            shuffle_over_epochs: Some(1),
            parallel_shard_iters: None,
            max_samples_per_sequence: None,
        };
        LoaderBuilder::of(Input::Dataset(Box::new(input)), true)
    }

    /// A loader over `plan`, turning each sample (or joined sample) of every leaf into a `T`
    /// with `load` (`Ok(None)` skips the sample); a crude leaf's cooker is chosen by the leaf's
    /// subflavors. Training or validation is the plan's.
    pub fn from_plan<L>(plan: MixPlan, load: L) -> Self
    where
        L: Fn(LeafSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        let leaf = LeafLoad::new(load);
        let leaves = plan
            .leaves
            .iter()
            .map(|planned| match &planned.leaf.subflavors {
                Some(subflavors) => leaf.clone().subflavors(subflavors.clone()),
                None => leaf.clone(),
            })
            .collect();
        LoaderBuilder::with_leaves(plan, leaves)
    }

    /// A loader over `plan` with a way to items for each of its leaves, in the plan's order
    /// (fails later, when building, unless there is one per leaf).
    pub fn with_leaves(plan: MixPlan, leaves: Vec<LeafLoad<T>>) -> Self {
        let training = plan.options.training;
        LoaderBuilder::of(Input::Plan { plan: Arc::new(plan), leaves }, training)
    }

    fn of(input: Input<T>, training: bool) -> Self {
        let mut common = Common::default();
        common.settings.training = training;
        LoaderBuilder {
            input,
            encoder: Arc::new(DefaultTaskEncoder::default()),
            aux_decoder: Some(Decoder::default()),
            refused: None,
            common,
        }
    }

    /// Marks a dataset crude and cooks its samples (every crude leaf's, for a plan) with `cook`
    /// after `load` (a catch-all cooker of the default task encoder; the reference cooks crude
    /// samples, such as JSONL records, in a map stage of their own).
    pub fn cook<F>(mut self, cook: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        if let Input::Dataset(input) = &mut self.input {
            input.crude = true;
        }
        let cooker = Cooker::of_fn(cook);
        let encoder = Arc::make_mut(&mut self.encoder);
        *encoder = encoder.clone().with_cookers(vec![cooker]);
        self
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

impl<T: Send + 'static, E: TaskEncoder<Sample = T>> LoaderBuilder<T, E> {
    /// The same loader with another task encoder.
    pub fn task_encoder<E2: TaskEncoder<Sample = T>>(self, encoder: E2) -> LoaderBuilder<T, E2> {
        LoaderBuilder {
            input: self.input,
            encoder: Arc::new(encoder),
            aux_decoder: self.aux_decoder,
            refused: self.refused,
            common: self.common,
        }
    }

    /// The task encoder.
    pub fn encoder(&self) -> &Arc<E> {
        &self.encoder
    }

    /// The settings of one dataset; a plan's were decided when it was made, so `setting` given
    /// for a plan makes building fail.
    fn dataset(&mut self, setting: &'static str) -> Option<&mut DatasetInput<T>> {
        match &mut self.input {
            Input::Dataset(input) => Some(input),
            Input::Plan { .. } => {
                self.refused.get_or_insert(setting);
                None
            }
        }
    }

    /// Whether the dataset's samples are crude, to be cooked by the task encoder's cookers
    /// (a plan knows which of its leaves are).
    pub fn crude(mut self, crude: bool) -> Self {
        if let Some(input) = self.dataset("crude") {
            input.crude = crude;
        }
        self
    }

    /// Marks the dataset crude and cooks its samples with `cooker`, instead of the task
    /// encoder's first cooker matching the subflavors (a caller that chose the cooker itself).
    pub fn cooker(mut self, cooker: Cooker<T>) -> Self {
        if let Some(input) = self.dataset("cooker") {
            input.crude = true;
            input.load = input.load.clone().cooker(cooker);
        }
        self
    }

    /// The dataset's subflavors: they select the cooker of a crude dataset.
    pub fn subflavors(mut self, subflavors: Option<Map<String, Value>>) -> Self {
        if let Some(input) = self.dataset("subflavors") {
            input.load.subflavors = subflavors.map(Arc::new);
        }
        self
    }

    /// Adds an auxiliary source for the cookers of the dataset (the metadataset's `aux:`),
    /// decoded with the auxiliary decoder.
    pub fn aux(mut self, name: impl Into<String>, store: Arc<dyn FileStore>) -> Self {
        if let Some(input) = self.dataset("aux") {
            input.load = input.load.clone().aux(name, store);
        }
        self
    }

    /// How files read from auxiliary sources are decoded (default: the default decoder; `None`
    /// keeps raw bytes).
    pub fn aux_decoder(mut self, decoder: Option<Decoder>) -> Self {
        self.aux_decoder = decoder;
        self
    }

    /// Training (shuffled slices, infinite repetition, shuffle buffer, virtual epochs) or
    /// validation (sequential slices, one pass, limit). Default: training; a plan's is its
    /// own.
    pub fn training(mut self, training: bool) -> Self {
        if self.dataset("training").is_some() {
            self.common.settings.training = training;
        }
        self
    }

    /// The reference's `shuffle_over_epochs` for training: `k >= 1` or `-1` (default 1).
    pub fn shuffle_over_epochs(mut self, shuffle_over_epochs: i64) -> Self {
        if let Some(input) = self.dataset("shuffle_over_epochs") {
            input.shuffle_over_epochs = Some(shuffle_over_epochs);
        }
        self
    }

    /// Slices open at once per worker (the reference's `parallel_shard_iters`; default 16 for
    /// training, 1 for validation).
    pub fn parallel_shard_iters(mut self, parallel_shard_iters: usize) -> Self {
        if let Some(input) = self.dataset("parallel_shard_iters") {
            input.parallel_shard_iters = Some(parallel_shard_iters);
        }
        self
    }

    /// Cuts slices longer than 1.5 times this many samples.
    pub fn max_samples_per_sequence(mut self, max_samples_per_sequence: Option<u64>) -> Self {
        if let Some(input) = self.dataset("max_samples_per_sequence") {
            input.max_samples_per_sequence = max_samples_per_sequence;
        }
        self
    }

    /// Whether the passes repeat forever. Training repeats by default (the reference's
    /// `repeat=True`; a dataset that does not repeat ends after one shuffled pass, a plan's
    /// repetition is its own); a validation loader that repeats is the reference's
    /// `RepeatDataset` around it.
    pub fn repeat(mut self, repeat: bool) -> Self {
        self.common.settings.repeat = Some(repeat);
        self
    }

    common::common_setters!();

    /// The plan the loader runs: the metadataset's, or the one-leaf plan of the dataset with
    /// the settings so far.
    pub fn plan(&self) -> Result<Arc<MixPlan>> {
        match &self.input {
            Input::Plan { plan, .. } => Ok(Arc::clone(plan)),
            Input::Dataset(input) => {
                let training = self.common.settings.training;
                // The split part the dataset was opened with (after its dataset.yaml), as a
                // metadataset's leaf records it: their checkpoints restore into each other.
                let leaf = SingleLeaf {
                    split_part: input.source.split_part(),
                    crude: input.crude,
                    subflavors: input.load.subflavors.as_deref().cloned(),
                    shuffle_over_epochs: input.shuffle_over_epochs,
                };
                let options = MixOptions::default()
                    .training(training)
                    .repeat(!training || self.common.settings.repeat.unwrap_or(true))
                    .max_samples_per_sequence(input.max_samples_per_sequence)
                    .parallel_shard_iters(input.parallel_shard_iters);
                let source = Arc::clone(&input.source);
                Ok(Arc::new(MixPlan::single(source, leaf, input.worker_config, options)?))
            }
        }
    }

    /// The leaf configuration of the dataset (of the first leaf of a plan).
    pub fn leaf_config(&self) -> Result<LeafConfig> {
        Ok(self.plan()?.leaves[0].leaf_config)
    }

    /// The slices of every local worker of this rank (of the first leaf of a plan).
    pub fn worker_slices(&self) -> Result<Vec<WorkerSlices>> {
        Ok(self.plan()?.leaves[0].workers.clone())
    }

    fn leaves(&self) -> &[LeafLoad<T>] {
        match &self.input {
            Input::Plan { leaves, .. } => leaves,
            Input::Dataset(input) => std::slice::from_ref(&input.load),
        }
    }

    /// The configuration a checkpoint of this loader records (and a restore compares).
    pub fn config(&self) -> Result<PipelineConfig> {
        Ok(self.config_of(&*self.plan()?))
    }

    fn config_of(&self, plan: &MixPlan) -> PipelineConfig {
        let mut config = self.common.config(&plan.worker_config, &*self.encoder);
        config.insert("dataset.mode", format!("{:?}", plan.mode));
        config.insert("dataset.repeat", plan.options.repeat);
        config.insert(
            "dataset.max_samples_per_sequence",
            format!("{:?}", plan.options.max_samples_per_sequence),
        );
        if let Some(repeat) = self.common.settings.repeat.filter(|_| !plan.options.training) {
            config.insert("repeat", repeat);
        }
        for (i, (leaf, load)) in plan.leaves.iter().zip(self.leaves()).enumerate() {
            config.insert(format!("_leaf.{i}.path"), leaf.leaf.path.display());
            config.insert(format!("leaf.{i}.split_part"), &leaf.split_part);
            let shards = match &leaf.data {
                LeafData::Dataset(dataset) => {
                    fingerprint(&dataset.shard_names(), &dataset.shard_counts())
                }
                LeafData::Joined(joined) => format!("join of {} rows", joined.n_rows()),
            };
            config.insert(format!("leaf.{i}.shards"), shards);
            config.insert(format!("leaf.{i}.weight"), leaf.blend_weight);
            config.insert(format!("leaf.{i}.repeats"), format!("{:?}", leaf.repeats));
            config.insert(format!("leaf.{i}.subset"), format!("{:?}", leaf.leaf.subset));
            config.insert(format!("leaf.{i}.slices"), format!("{:?}", leaf.leaf_config));
            config.insert(format!("leaf.{i}.crude"), leaf.crude);
            let subflavors = load.subflavors.as_deref().or(leaf.leaf.subflavors.as_ref());
            if let Some(subflavors) = subflavors {
                config.insert(format!("leaf.{i}.subflavors"), Value::Object(subflavors.clone()));
            }
            for (name, store) in &load.aux {
                config.insert(format!("_leaf.{i}.aux.{name}"), store.path().display());
            }
        }
        config
    }

    /// The pipelines of every local worker up to the task encoder's sample stages (encoded,
    /// packed, not batched), without a loader; pipeline `w` is local worker `w`'s.
    pub fn build_sample_pipelines(&self) -> Result<Vec<BoxStage<E::Encoded>>> {
        let plan = self.plan()?;
        let encoded = self.encoded_pipelines(&plan, &FailureStats::default(), None)?;
        Ok(encoded.into_iter().map(|(s, _)| s).collect())
    }

    /// The encoded pipelines of every local worker, or only of local worker `only`.
    fn encoded_pipelines(
        &self,
        plan: &MixPlan,
        stats: &FailureStats,
        only: Option<usize>,
    ) -> Result<Vec<(BoxStage<E::Encoded>, StageEnv)>> {
        let loads = self.leaves();
        let settings = &self.common.settings;
        pipeline::check_hooks(&*self.encoder, settings)?;
        if loads.len() != plan.leaves.len() {
            return Err(Error::InvalidSetting {
                setting: "leaves",
                value: loads.len().to_string(),
                reason: "needs one way to items per leaf of the plan",
            });
        }
        if let Some(setting) = self.refused {
            return Err(Error::InvalidSetting {
                setting,
                value: "given for a plan".to_owned(),
                reason: "a plan's leaves are set by its metadataset and MixOptions",
            });
        }
        if let (Input::Plan { .. }, Some(repeat)) = (&self.input, self.common.settings.repeat)
            && plan.options.training
            && repeat != plan.options.repeat
        {
            return Err(Error::InvalidSetting {
                setting: "repeat",
                value: repeat.to_string(),
                reason: "a training plan repeats as its MixOptions say",
            });
        }
        let cookings = plan
            .leaves
            .iter()
            .zip(loads)
            .map(|(leaf, load)| load.cooking(leaf, &*self.encoder, self.aux_decoder))
            .collect::<Result<Vec<_>>>()?;
        let cfg = plan.worker_config;
        let tree = plan.tree();
        let workers = only.map_or(0..cfg.n_local_workers(), |w| w..w + 1);
        let mut res = Vec::with_capacity(workers.len());
        for worker in workers {
            let env = self.common.env(&cfg, worker, stats)?;
            let iters = plan.worker_leaves(worker)?;
            let mut leaves = Vec::with_capacity(iters.len());
            for ((iter, leaf), (load, cooking)) in
                iters.into_iter().zip(&plan.leaves).zip(loads.iter().zip(&cookings))
            {
                let data = leaf.data.clone();
                let mut source = LeafSource::new(iter, move |index| Ok(data.read(index)?));
                if matches!(leaf.leaf.kind, energon_mix::LeafKind::Joined(_)) {
                    source = source.joined();
                }
                if leaf.data.is_remote() {
                    let data = leaf.data.clone();
                    source = source.with_prefetch(move |index| data.prefetch(index));
                }
                let mut stage: BoxStage<T> =
                    Box::new(Apply::new(source, "load_sample", load_fn(&load.load), env.clone()));
                if let Some(cooking) = cooking {
                    stage = pipeline::cook_stage(&self.encoder, stage, cooking.clone(), &env);
                }
                leaves.push(Some(stage));
            }
            let stage = leaf::combine(&tree, &mut leaves, &cfg, worker)?;
            let rng = cfg.worker_rng(worker)?;
            let stage = pipeline::encode_stages(&self.encoder, stage, settings, &env, rng)?;
            res.push((stage, env));
        }
        Ok(res)
    }

    /// Every local worker's whole pipeline of encoded samples, as [`LoaderBuilder::build_samples`]
    /// runs them (for a caller that runs one worker's pipeline itself); failures are counted in
    /// `stats`.
    pub fn sample_worker_pipelines(
        &self,
        stats: &FailureStats,
    ) -> Result<Vec<BoxStage<E::Encoded>>> {
        self.common
            .sample_pipelines(&*self.encoder, self.encoded_pipelines(&*self.plan()?, stats, None)?)
    }

    /// Every local worker's whole pipeline of batches, as [`LoaderBuilder::build_batches`] runs
    /// them; failures are counted in `stats`.
    pub fn batch_worker_pipelines(&self, stats: &FailureStats) -> Result<Vec<BoxStage<E::Output>>> {
        self.common
            .batch_pipelines(&self.encoder, self.encoded_pipelines(&*self.plan()?, stats, None)?)
    }

    /// Makes the sample of a loader's restore key again (the reference's
    /// `loader.restore_sample`, for a loader of samples): the key starts with the loader
    /// wrapper's `(name, global_worker_id, worker_item_index)` (see
    /// [`RestoreKey::of_loader`]); the sample is re-read and re-run through that worker's
    /// stages with the same indices, so the same per-sample seeds. The result carries the same
    /// key. No loader needs to run; the stages run in the caller's thread.
    pub fn restore_sample(&self, key: &RestoreKey) -> Result<Keyed<E::Encoded>> {
        let (plan, worker) = self.restore_worker(key)?;
        let encoded = self.encoded_pipelines(&plan, &FailureStats::default(), Some(worker))?;
        let mut pipelines = self.common.sample_pipelines(&*self.encoder, encoded)?;
        restore_in(&mut pipelines[0], key)
    }

    /// Makes the batch of a loader's restore key again (`loader.restore_sample` for a loader
    /// of batches), as [`LoaderBuilder::restore_sample`] does for a sample.
    pub fn restore_batch(&self, key: &RestoreKey) -> Result<Keyed<E::Output>> {
        let (plan, worker) = self.restore_worker(key)?;
        let encoded = self.encoded_pipelines(&plan, &FailureStats::default(), Some(worker))?;
        let mut pipelines = self.common.batch_pipelines(&self.encoder, encoded)?;
        restore_in(&mut pipelines[0], key)
    }

    /// The plan and the local worker of a loader's restore key.
    fn restore_worker(&self, key: &RestoreKey) -> Result<(Arc<MixPlan>, usize)> {
        let plan = self.plan()?;
        let worker = key_worker(key, &plan.worker_config)?;
        Ok((plan, worker))
    }

    /// The loader of encoded samples (no batching: no batch size, no batching by group).
    pub fn build_samples(mut self) -> Result<Loader<Keyed<E::Encoded>>> {
        // The plan is made once: for one dataset, planning slices every shard.
        let plan = self.plan()?;
        let stats = FailureStats::default();
        let encoded = self.encoded_pipelines(&plan, &stats, None)?;
        let pipelines = self.common.sample_pipelines(&*self.encoder, encoded)?;
        self.deal_reshaped(&plan, &pipelines)?;
        self.common.start(pipelines, &plan.worker_config, self.config_of(&plan), stats, false)
    }

    /// The loader of batches (a batch size, or batching by group).
    pub fn build_batches(mut self) -> Result<Loader<Keyed<E::Output>>> {
        let plan = self.plan()?;
        let stats = FailureStats::default();
        let encoded = self.encoded_pipelines(&plan, &stats, None)?;
        let pipelines = self.common.batch_pipelines(&self.encoder, encoded)?;
        self.deal_reshaped(&plan, &pipelines)?;
        self.common.start(pipelines, &plan.worker_config, self.config_of(&plan), stats, true)
    }

    /// A state to restore that was saved with another number of workers
    /// ([`Checkpoint::reshape`](crate::Checkpoint::reshape)) becomes this rank's workers'
    /// states: their fresh pipelines' with their shares of the old passes.
    fn deal_reshaped<I>(&mut self, plan: &MixPlan, pipelines: &[BoxStage<I>]) -> Result<()> {
        let Some(state) = &mut self.common.restore else { return Ok(()) };
        let Some(reshaped) = state.reshaped.take() else { return Ok(()) };
        let fresh = pipelines.iter().map(|p| p.state()).collect::<Result<Vec<_>>>()?;
        state.workers = crate::elastic::deal(plan, &reshaped, fresh)?;
        Ok(())
    }
}

/// The local worker (of `cfg`'s rank) whose item a loader's restore key is: the key starts with
/// the loader's wrapper, the global worker id and the worker's item index.
pub fn key_worker(key: &RestoreKey, cfg: &WorkerConfig) -> Result<usize> {
    let bad = || Error::BadState {
        reason: format!(
            "restore key {key} is not one of a loader of rank {} with {} workers (it starts \
             with the loader's wrapper, the global worker id and the worker's item index)",
            cfg.rank(),
            cfg.num_workers()
        ),
    };
    let (_, global, _, _) = split_loader_key(key.parts()).ok_or_else(bad)?;
    let first = loader_worker_id(cfg, 0);
    let local = global.checked_sub(first).filter(|&w| w < cfg.n_local_workers() as u64);
    Ok(local.ok_or_else(bad)? as usize)
}

/// Makes the item of a loader's `key` again in its worker's pipeline (see [`key_worker`]),
/// with that key: the item is re-read and re-run through the pipeline's stages with the same
/// indices, without changing the pipeline's progress.
pub fn restore_in<T>(pipeline: &mut BoxStage<T>, key: &RestoreKey) -> Result<Keyed<T>> {
    let Some((wrapper, global, index, _)) = split_loader_key(key.parts()) else {
        return Err(crate::stage::bad_key("loader", key.parts()));
    };
    let mut item = pipeline.restore_item(key.parts())?;
    item.restore_key = item.restore_key.of_loader(wrapper, global, index);
    Ok(item)
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
        let mut s = f.debug_struct("LoaderBuilder");
        match &self.input {
            Input::Plan { plan, .. } => {
                s.field("mode", &plan.mode).field("leaves", &plan.leaves.len());
            }
            Input::Dataset(input) => {
                s.field("dataset", &input.source.path())
                    .field("worker_config", &input.worker_config)
                    .field("crude", &input.crude)
                    .field("shuffle_over_epochs", &input.shuffle_over_epochs)
                    .field("parallel_shard_iters", &input.parallel_shard_iters)
                    .field("max_samples_per_sequence", &input.max_samples_per_sequence);
            }
        }
        s.field("common", &self.common).finish_non_exhaustive()
    }
}
