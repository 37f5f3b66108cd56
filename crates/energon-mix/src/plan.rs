//! The per-worker plan of a resolved split: which samples each worker reads from each leaf, and
//! how the leaves are combined (the reference's `build_train_datasets` / `build_val_datasets`).
//!
//! [`MixPlan::new`] opens every leaf (to learn its shard counts), computes each leaf's rotation
//! offset (`sum of the lengths of the leaves before it mod G`), slices it over the workers of
//! this rank (subset applied), and converts weights and repetitions into float32 blend weights.
//! [`MixPlan::worker_leaves`] gives one worker's slice iteration of every leaf, and
//! [`MixPlan::tree`] how the worker's stages combine them ([`MixTree`]); the loader builds its
//! stages from these and decides what a leaf yields.

use std::{
    num::{NonZeroU32, NonZeroUsize},
    path::Path,
    sync::Arc,
};

use energon_dist::{WorkerConfig, WorkerSlices, rotation_offsets, shard_workers};
use energon_index::{DATASET_YAML, NV_META, dataset_config::read_dataset_config};
use energon_reader::{
    Dataset, JsonlDataset, OpenOptions, PartFilter, RawSample, WebDataset,
    leaf::{LeafConfig, LeafIter, SliceOrder},
};
use serde_json::Value;

use crate::{
    error::{Error, Result},
    join::{JoinedDataset, JoinedSample},
    resolve::{BlendMode, LeafKind, Origin, ResolvedLeaf, ResolvedSplit},
};

/// Loader options that shape the plan (the reference's `get_train_dataset` /
/// `get_val_dataset` arguments that reach the leaves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MixOptions {
    /// Training (shuffled slices, repetition, blending) or validation (sequential slices, one
    /// pass, leaves concatenated).
    pub training: bool,
    /// Training only: repeat forever (default). `false` ends after one pass, which only
    /// `blend_epochized` or a single dataset allow.
    pub repeat: bool,
    /// Cut slices longer than 1.5 times this many samples.
    pub max_samples_per_sequence: Option<u64>,
    /// Slices open at once per worker (default 16 for training, 1 for validation).
    pub parallel_shard_iters: Option<usize>,
}

impl MixOptions {
    /// With `training` set.
    pub fn training(mut self, training: bool) -> Self {
        self.training = training;
        self
    }

    /// With `repeat` set.
    pub fn repeat(mut self, repeat: bool) -> Self {
        self.repeat = repeat;
        self
    }

    /// With `max_samples_per_sequence` set.
    pub fn max_samples_per_sequence(mut self, max_samples_per_sequence: Option<u64>) -> Self {
        self.max_samples_per_sequence = max_samples_per_sequence;
        self
    }

    /// With `parallel_shard_iters` set.
    pub fn parallel_shard_iters(mut self, parallel_shard_iters: Option<usize>) -> Self {
        self.parallel_shard_iters = parallel_shard_iters;
        self
    }

    /// How many shard maps a reader keeps open for a loader with `n_workers` workers (local to
    /// the rank): one per slice they read at once (`parallel_shard_iters`, 16 for training and
    /// 1 for validation, times the workers), as the reference keeps one tar handle per open
    /// slice. More would only keep pages of shards nobody reads any more in memory. The one rule
    /// for every reader of a loader.
    pub fn max_open_shards(&self, n_workers: usize) -> usize {
        let slots = if self.training { self.parallel_shard_iters.unwrap_or(16) } else { 1 };
        (slots * n_workers.max(1)).max(2)
    }
}

impl Default for MixOptions {
    fn default() -> Self {
        MixOptions {
            training: true,
            repeat: true,
            max_samples_per_sequence: None,
            parallel_shard_iters: None,
        }
    }
}

/// What a leaf reads from: a dataset's shards and random access to its samples.
///
/// Implemented for energon-reader's [`Dataset`]; tests implement it over synthetic samples.
pub trait SampleSource: Send + Sync {
    /// The dataset path, for messages.
    fn path(&self) -> &Path;
    /// Sample counts per shard in split order (one virtual shard for JSONL).
    fn shard_counts(&self) -> Vec<u64>;
    /// Sample `index`; `Ok(None)` for an excluded sample.
    fn read(&self, index: u64) -> energon_reader::Result<Option<RawSample>>;
    /// Whether the samples are in an object store (where [`SampleSource::prefetch`] helps).
    fn is_remote(&self) -> bool {
        false
    }
    /// A hint that sample `index` will be read soon (nothing by default).
    fn prefetch(&self, _index: u64) {}
    /// The shard names in split order, which identify the dataset in a checkpoint (none by
    /// default: the counts identify it then).
    fn shard_names(&self) -> Vec<Arc<str>> {
        Vec::new()
    }
    /// A JSONL file (its records are crude samples), or shards.
    fn is_jsonl(&self) -> bool {
        false
    }
    /// The split part the samples are of (none by default, and for a JSONL file).
    fn split_part(&self) -> String {
        String::new()
    }
    /// The source as energon-reader's [`Dataset`], if it is one (to read it with a
    /// [`SampleReader`](energon_reader::SampleReader)).
    fn into_dataset(self: Arc<Self>) -> Option<Arc<Dataset>> {
        None
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

    fn is_remote(&self) -> bool {
        Dataset::is_remote(self)
    }

    fn prefetch(&self, index: u64) {
        Dataset::prefetch(self, index);
    }

    fn shard_names(&self) -> Vec<Arc<str>> {
        Dataset::shard_names(self)
    }

    fn is_jsonl(&self) -> bool {
        matches!(self, Dataset::Jsonl(_))
    }

    fn split_part(&self) -> String {
        match self {
            Dataset::WebDataset(w) => w.split_part().to_owned(),
            _ => String::new(),
        }
    }

    fn into_dataset(self: Arc<Self>) -> Option<Arc<Dataset>> {
        Some(self)
    }
}

/// What [`MixPlan::single`] needs to know of its one dataset beyond what it reads.
#[derive(Debug, Clone, Default)]
pub struct SingleLeaf {
    /// The split part the dataset was opened for (for messages and checkpoints).
    pub split_part: String,
    /// Whether its samples are crude, for the task encoder's cookers.
    pub crude: bool,
    /// Its subflavors, which choose the cooker of crude samples.
    pub subflavors: Option<serde_json::Map<String, Value>>,
    /// Training: `None` for no shuffling, `-1` for slices drawn with replacement, else the
    /// number of epochs a slice order spans (the reference's default: 1).
    pub shuffle_over_epochs: Option<i64>,
}

/// An opened leaf dataset.
#[derive(Clone)]
pub enum LeafData {
    /// A WebDataset split part or a JSONL file (every part read).
    Dataset(Arc<dyn SampleSource>),
    /// A join.
    Joined(Arc<JoinedDataset>),
}

impl std::fmt::Debug for LeafData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeafData::Dataset(source) => f.debug_tuple("Dataset").field(&source.path()).finish(),
            LeafData::Joined(joined) => f.debug_tuple("Joined").field(joined).finish(),
        }
    }
}

/// A sample read from a leaf.
#[derive(Debug, Clone)]
pub enum LeafSample {
    /// From a WebDataset or JSONL leaf.
    Raw(RawSample),
    /// From a join: one sample per joined dataset.
    Joined(JoinedSample),
}

impl LeafSample {
    /// The sample key (the primary's, for a join).
    pub fn key(&self) -> &str {
        match self {
            LeafSample::Raw(raw) => &raw.key,
            LeafSample::Joined(joined) => joined.key(),
        }
    }
}

impl LeafData {
    /// The leaf's dataset, unless it is a join or a source other than a [`Dataset`].
    pub fn dataset(&self) -> Option<Arc<Dataset>> {
        match self {
            LeafData::Dataset(source) => Arc::clone(source).into_dataset(),
            LeafData::Joined(_) => None,
        }
    }

    /// Whether the leaf reads a dataset in an object store (joins are not prefetched).
    pub fn is_remote(&self) -> bool {
        match self {
            LeafData::Dataset(source) => source.is_remote(),
            LeafData::Joined(_) => false,
        }
    }

    /// A hint that sample `index` will be read soon (see [`SampleSource::prefetch`]).
    pub fn prefetch(&self, index: u64) {
        if let LeafData::Dataset(source) = self {
            source.prefetch(index);
        }
    }

    /// Reads sample (or join row) `index`; `Ok(None)` for an excluded sample.
    pub fn read(&self, index: u64) -> Result<Option<LeafSample>> {
        match self {
            LeafData::Dataset(dataset) => Ok(dataset.read(index)?.map(LeafSample::Raw)),
            LeafData::Joined(joined) => Ok(joined.read(index)?.map(LeafSample::Joined)),
        }
    }
}

/// One leaf of the plan.
#[derive(Debug, Clone)]
pub struct PlannedLeaf {
    /// The resolved leaf.
    pub leaf: ResolvedLeaf,
    /// The opened dataset.
    pub data: LeafData,
    /// The split part actually read (a `dataset.yaml` may override the metadataset's).
    pub split_part: String,
    /// The leaf's full length (the reference's `len(dataset)`: all samples of the split part,
    /// ignoring the subset; for a join, the primary's): the unit of rotation offsets and of
    /// epochized blend weights.
    pub len: u64,
    /// The samples of each shard of the split part (for a join, of the primary's).
    pub shard_counts: Vec<u64>,
    /// Slices longer than 1.5 times this many samples are cut (the option, or the leaf's
    /// `dataset.yaml`).
    pub max_samples_per_sequence: Option<u64>,
    /// Where the remainder samples of this leaf start among the global workers.
    pub rotation_offset: u64,
    /// The slices of each local worker of this rank.
    pub workers: Vec<WorkerSlices>,
    /// How the leaf is iterated on each worker.
    pub leaf_config: LeafConfig,
    /// The float32 weight of the leaf in a blend (1.0 when there is no blend).
    pub blend_weight: f32,
    /// For `blend_epochized`: the repetitions of the leaf per pass, `None` when it is 1.
    pub repeats: Option<f64>,
    /// Whether the leaf yields crude samples that cookers turn into samples (a JSONL file, or a
    /// WebDataset whose `dataset.yaml` is `CrudeWebdataset`).
    pub crude: bool,
}

impl PlannedLeaf {
    /// The slices of each local worker of `worker_config`'s rank (the leaf's subset applied,
    /// rotated by `rotation_offset`).
    fn slice(&self, worker_config: &WorkerConfig) -> Result<Vec<WorkerSlices>> {
        let total: u64 = self.shard_counts.iter().sum();
        let subset = self.leaf.subset.map(|s| s.compute(total)).transpose()?;
        Ok(shard_workers(
            &self.shard_counts,
            subset,
            worker_config,
            self.rotation_offset,
            self.max_samples_per_sequence,
        )?)
    }

    /// The leaf's auxiliary sources opened as file stores, by name, in file order (the keyword
    /// arguments the reference hands to cookers).
    pub fn aux_stores(&self) -> Result<Vec<(String, Arc<dyn energon_reader::FileStore>)>> {
        self.leaf.aux.iter().map(|(name, source)| Ok((name.clone(), source.open()?))).collect()
    }
}

/// The plan of one split for one rank.
#[derive(Debug, Clone)]
pub struct MixPlan {
    /// How the leaves combine.
    pub mode: BlendMode,
    /// The options the plan was made with.
    pub options: MixOptions,
    /// The workers of this rank.
    pub worker_config: WorkerConfig,
    /// The leaves in tree order.
    pub leaves: Vec<PlannedLeaf>,
}

impl MixPlan {
    /// Opens the leaves of `split` and plans them for `worker_config`'s rank.
    pub fn new(
        split: ResolvedSplit,
        worker_config: WorkerConfig,
        options: MixOptions,
    ) -> Result<Self> {
        if split.leaves.is_empty() {
            return Err(Error::InvalidOption {
                option: "metadataset",
                value: "0 leaves".to_owned(),
                reason: "no datasets given".to_owned(),
            });
        }
        if options.training && !options.repeat && split.mode == BlendMode::DatasetWeight {
            return Err(Error::InvalidOption {
                option: "repeat",
                value: "false".to_owned(),
                reason: "a blend by weights repeats its datasets forever; only blend_epochized or \
                         a single dataset can stop after one pass"
                    .to_owned(),
            });
        }
        let mut opened = Vec::with_capacity(split.leaves.len());
        for leaf in split.leaves {
            opened.push(open_leaf(leaf, &options, worker_config.n_local_workers())?);
        }
        MixPlan::of_opened(split.mode, opened, worker_config, options)
    }

    /// The plan of one dataset already opened (the reference's `get_train_dataset` /
    /// `get_val_dataset` on a dataset): a plan of one leaf reading `source`, the whole of it.
    pub fn single(
        source: Arc<dyn SampleSource>,
        leaf: SingleLeaf,
        worker_config: WorkerConfig,
        options: MixOptions,
    ) -> Result<Self> {
        let shard_counts = source.shard_counts();
        let len = shard_counts.iter().sum();
        let kind = if source.is_jsonl() { LeafKind::Jsonl } else { LeafKind::WebDataset };
        let path = source.path().to_owned();
        let leaf_config =
            leaf_config(options.training, leaf.shuffle_over_epochs, options.parallel_shard_iters)?;
        let opened = Opened {
            leaf: ResolvedLeaf {
                path: path.clone(),
                kind,
                split_part: leaf.split_part.clone(),
                dataset_config: None,
                split_config: None,
                weight: None,
                repetitions: None,
                subflavors: leaf.subflavors,
                shuffle_over_epochs: leaf.shuffle_over_epochs,
                subset: None,
                aux: Vec::new(),
                origin: Origin { file: path, yaml_path: String::new() },
            },
            data: LeafData::Dataset(source),
            split_part: leaf.split_part,
            shard_counts,
            len,
            leaf_config,
            max_samples_per_sequence: options.max_samples_per_sequence,
            crude: leaf.crude,
        };
        MixPlan::of_opened(BlendMode::None, vec![opened], worker_config, options)
    }

    fn of_opened(
        mode: BlendMode,
        opened: Vec<Opened>,
        worker_config: WorkerConfig,
        options: MixOptions,
    ) -> Result<Self> {
        let lens: Vec<u64> = opened.iter().map(|o| o.len).collect();
        let rotations = rotation_offsets(&lens, &worker_config);
        let mut leaves = Vec::with_capacity(opened.len());
        for (open, rotation_offset) in opened.into_iter().zip(rotations) {
            let (blend_weight, repeats) = weights(mode, &open.leaf, open.len)?;
            let mut leaf = PlannedLeaf {
                leaf: open.leaf,
                data: open.data,
                split_part: open.split_part,
                len: open.len,
                shard_counts: open.shard_counts,
                max_samples_per_sequence: open.max_samples_per_sequence,
                rotation_offset,
                workers: Vec::new(),
                leaf_config: open.leaf_config,
                blend_weight,
                repeats,
                crude: open.crude,
            };
            leaf.workers = leaf.slice(&worker_config)?;
            leaves.push(leaf);
        }
        Ok(MixPlan { mode, options, worker_config, leaves })
    }

    /// The same plan for another rank or worker configuration: the same open leaves, sliced
    /// over `worker_config`'s workers (for a checkpoint saved with other ranks or workers).
    pub fn for_worker_config(&self, worker_config: WorkerConfig) -> Result<MixPlan> {
        let lens: Vec<u64> = self.leaves.iter().map(|l| l.len).collect();
        let rotations = rotation_offsets(&lens, &worker_config);
        let mut res = MixPlan { worker_config, ..self.clone() };
        for (leaf, rotation_offset) in res.leaves.iter_mut().zip(rotations) {
            leaf.rotation_offset = rotation_offset;
            leaf.workers = leaf.slice(&worker_config)?;
        }
        Ok(res)
    }

    /// The number of samples local worker `worker` reads in one pass of every leaf, repetitions
    /// applied as the reference's `len_worker` applies them.
    pub fn len_worker(&self, worker: usize) -> u64 {
        self.leaves
            .iter()
            .map(|leaf| {
                let n = leaf.workers.get(worker).map_or(0, WorkerSlices::n_samples);
                match leaf.repeats {
                    Some(r) => (n as f64 * r) as u64,
                    None => n,
                }
            })
            .sum()
    }

    /// The slice iterations of local worker `worker`, one per leaf in plan order, each drawing
    /// from its own stream.
    ///
    /// Fails, as the reference does when it starts iterating, if this worker has no sample in
    /// any leaf of a training pipeline.
    pub fn worker_leaves(&self, worker: usize) -> Result<Vec<LeafIter>> {
        let cfg = &self.worker_config;
        let n_local = cfg.n_local_workers();
        if worker >= n_local {
            return Err(Error::Dist(energon_dist::Error::WorkerOutOfRange {
                worker_id: worker,
                n_local_workers: n_local,
            }));
        }
        let mut res = Vec::with_capacity(self.leaves.len());
        for leaf in &self.leaves {
            let slices = leaf.workers[worker].clone();
            let mut config = leaf.leaf_config;
            if config.order == SliceOrder::WithReplacement && slices.n_slices() == 0 {
                // Never iterated (its blend weight is 0), but it must exist to keep the child
                // indices of the blend.
                config.order = SliceOrder::Shuffled { epochs: NonZeroU32::MIN };
            }
            res.push(LeafIter::new(slices, config, cfg.worker_rng(worker)?)?);
        }
        if self.options.training && !res.iter().any(|leaf| leaf.len_worker() > 0) {
            return Err(Error::EmptyWorker {
                rank: cfg.rank(),
                worker,
                n_leaves: self.leaves.len(),
            });
        }
        Ok(res)
    }

    /// How every worker's stages combine the leaves (the reference's `build_train_datasets` /
    /// `build_val_datasets`):
    ///
    /// - training, `blend`: every leaf repeated forever, blended (a single leaf: no blend);
    /// - training, `blend_epochized` (or a single dataset without repetition): every leaf
    ///   repeated its number of times, blended, and the whole repeated forever unless
    ///   `repeat` is off;
    /// - training, single dataset or join: repeated forever;
    /// - validation: the leaves one after the other.
    pub fn tree(&self) -> MixTree {
        let leaves = (0..self.leaves.len()).map(MixTree::Leaf);
        if !self.options.training {
            let mut leaves: Vec<MixTree> = leaves.collect();
            return match leaves.len() {
                1 => leaves.remove(0),
                _ => MixTree::Concat(leaves),
            };
        }
        let weights: Vec<f32> = self.leaves.iter().map(|l| l.blend_weight).collect();
        match (self.mode, self.options.repeat) {
            // COMPAT(energon 7.4.1): task_encoder/base.py:build_train_datasets (each leaf
            // repeated forever; a single leaf is not blended).
            (BlendMode::DatasetWeight, _) | (BlendMode::None, true) => {
                let children = leaves.map(|leaf| MixTree::repeat(None, leaf)).collect();
                MixTree::blend(children, weights)
            }
            (BlendMode::SampleRepetitions, _) | (BlendMode::None, false) => {
                let children = leaves
                    .zip(&self.leaves)
                    .map(|(leaf, planned)| match planned.repeats {
                        None => leaf,
                        Some(r) => MixTree::repeat(Some(r), leaf),
                    })
                    .collect();
                let combined = MixTree::blend(children, weights);
                if self.options.repeat { MixTree::repeat(None, combined) } else { combined }
            }
        }
    }
}

/// How a worker's stages combine the leaves of a plan ([`MixPlan::tree`]); the same for every
/// worker of a rank.
#[derive(Debug, Clone, PartialEq)]
pub enum MixTree {
    /// Leaf `i` of the plan.
    Leaf(usize),
    /// The passes of a subtree, forever (`None`) or a possibly fractional number of times (the
    /// reference's `RepeatDataset`).
    Repeat {
        /// The repetitions.
        repeats: Option<f64>,
        /// The subtree.
        inner: Box<MixTree>,
    },
    /// Subtrees sampled by float32 weight (the reference's `BlendDataset`).
    Blend {
        /// One weight per child.
        weights: Vec<f32>,
        /// The children.
        children: Vec<MixTree>,
    },
    /// Subtrees one after the other (the reference's `ConcatDataset`).
    Concat(Vec<MixTree>),
}

impl MixTree {
    fn repeat(repeats: Option<f64>, inner: MixTree) -> MixTree {
        MixTree::Repeat { repeats, inner: Box::new(inner) }
    }

    /// A blend of `children`, or the only child.
    fn blend(mut children: Vec<MixTree>, weights: Vec<f32>) -> MixTree {
        match children.len() {
            1 => children.remove(0),
            _ => MixTree::Blend { weights, children },
        }
    }
}

/// The float32 blend weight and the repetitions of a leaf.
///
/// A blend weight that float32 cannot hold (a normalized weight that rounds to 0, or a product
/// past float32's range) is an error naming the leaf's node.
fn weights(mode: BlendMode, leaf: &ResolvedLeaf, len: u64) -> Result<(f32, Option<f64>)> {
    Ok(match mode {
        // COMPAT(energon 7.4.1): task_encoder/base.py:build_train_datasets rounds the double
        // weight to float32 in the BlendDataset's tensor.
        BlendMode::DatasetWeight | BlendMode::None => {
            let weight = leaf.weight.unwrap_or(1.0);
            let rounded = weight as f32;
            if !(rounded.is_finite() && rounded > 0.0) {
                return Err(Error::BadNode {
                    file: leaf.origin.file.clone(),
                    yaml_path: leaf.origin.yaml_path.clone(),
                    reason: format!(
                        "the blend weight of this dataset, normalized by the sum of its blend, \
                         is {weight:e}, which float32 rounds to {rounded} (it holds down to \
                         {:e}); make the weights of the blend closer to each other",
                        f32::from_bits(1)
                    ),
                });
            }
            (rounded, None)
        }
        BlendMode::SampleRepetitions => {
            let reps = leaf.repetitions.unwrap_or(crate::grammar::Repetitions::Int(1));
            // `len(dataset) * repetitions`: an integer product stays exact, a float one is a
            // double; both are rounded to float32 by the tensor.
            let weight = match reps {
                crate::grammar::Repetitions::Int(r) => len.saturating_mul(r) as f32,
                crate::grammar::Repetitions::Float(r) => (len as f64 * r) as f32,
            };
            if len > 0 && !(weight.is_finite() && weight > 0.0) {
                return Err(Error::BadNode {
                    file: leaf.origin.file.clone(),
                    yaml_path: leaf.origin.yaml_path.clone(),
                    reason: format!(
                        "repetitions {:e} of this dataset's {len} samples give a blend weight of \
                         {weight} in float32 (it holds {:e} to {:e}); nothing of it would be read",
                        reps.as_f64(),
                        f32::from_bits(1),
                        f32::MAX
                    ),
                });
            }
            let repeats = (!reps.is_one()).then(|| reps.as_f64());
            (weight, repeats)
        }
    })
}

/// A leaf opened, before slicing.
struct Opened {
    leaf: ResolvedLeaf,
    data: LeafData,
    split_part: String,
    shard_counts: Vec<u64>,
    len: u64,
    leaf_config: LeafConfig,
    max_samples_per_sequence: Option<u64>,
    crude: bool,
}

fn open_leaf(leaf: ResolvedLeaf, options: &MixOptions, n_workers: usize) -> Result<Opened> {
    let mut split_part = leaf.split_part.clone();
    let mut split_config = leaf.split_config.clone();
    let mut shuffle_over_epochs = leaf.shuffle_over_epochs;
    let mut max_samples_per_sequence = options.max_samples_per_sequence;
    let mut parallel_shard_iters = options.parallel_shard_iters;
    let mut crude = false;
    let (data, shard_counts, len) = match &leaf.kind {
        LeafKind::WebDataset => {
            // COMPAT(energon 7.4.1): dataset_config.py:get_dataset_from_config merges dataset.yaml
            // over the loader's arguments.
            let overrides = DatasetOverrides::read(&leaf.path, leaf.dataset_config.as_deref())?;
            if let Some(part) = overrides.split_part {
                split_part = part;
            }
            if let Some(config) = overrides.split_config {
                split_config = Some(config);
            }
            if let Some(soe) = overrides.shuffle_over_epochs {
                shuffle_over_epochs = soe;
            }
            if let Some(msps) = overrides.max_samples_per_sequence {
                max_samples_per_sequence = msps;
            }
            if let Some(p) = overrides.parallel_shard_iters {
                parallel_shard_iters = p;
            }
            crude = overrides.crude;
            let mut open = OpenOptions::default();
            open.split_part.clone_from(&split_part);
            open.split_config = split_config;
            // Only the parts the dataset's samples are made of, as the reference reads them (and
            // as their sources list them).
            open.part_filter = overrides.part_filter.clone();
            open.max_open_shards =
                MixOptions { parallel_shard_iters, ..*options }.max_open_shards(n_workers);
            let dataset = WebDataset::open(&leaf.path, &open)?;
            let counts = dataset.shard_counts();
            let len = dataset.len();
            (LeafData::Dataset(Arc::new(Dataset::WebDataset(Box::new(dataset)))), counts, len)
        }
        LeafKind::Jsonl => {
            let dataset = JsonlDataset::open(&leaf.path, &PartFilter::All)?;
            let len = dataset.len();
            crude = true;
            // A JSONL file has no split parts: whatever was asked for reads the same samples
            // (and a checkpoint records none).
            split_part = String::new();
            (LeafData::Dataset(Arc::new(Dataset::Jsonl(dataset))), vec![len], len)
        }
        LeafKind::Joined(spec) => {
            let joined = JoinedDataset::open(spec)?;
            let rows = joined.n_rows();
            let len = joined.primary_len();
            (LeafData::Joined(Arc::new(joined)), vec![rows], len)
        }
    };
    let leaf_config = leaf_config(options.training, shuffle_over_epochs, parallel_shard_iters)?;
    Ok(Opened {
        leaf,
        data,
        split_part,
        shard_counts,
        len,
        leaf_config,
        max_samples_per_sequence,
        crude,
    })
}

/// How a leaf is iterated: its slice order (training: as `shuffle_over_epochs` says;
/// validation: sequential) and the slices open at once (default 16 for training, 1 for
/// validation).
fn leaf_config(
    training: bool,
    shuffle_over_epochs: Option<i64>,
    parallel_shard_iters: Option<usize>,
) -> Result<LeafConfig> {
    let order = if training {
        SliceOrder::from_shuffle_over_epochs(shuffle_over_epochs).ok_or_else(|| {
            Error::InvalidOption {
                option: "shuffle_over_epochs",
                value: format!("{shuffle_over_epochs:?}"),
                reason: "must be -1, null or at least 1".to_owned(),
            }
        })?
    } else {
        SliceOrder::Sequential
    };
    let p = parallel_shard_iters.unwrap_or(if training { 16 } else { 1 });
    let parallel_slice_iters = NonZeroUsize::new(p).ok_or_else(|| Error::InvalidOption {
        option: "parallel_shard_iters",
        value: "0".to_owned(),
        reason: "must be at least 1".to_owned(),
    })?;
    Ok(LeafConfig { order, parallel_slice_iters })
}

/// The parts of the dataset at `root` that its config (`dataset_config`, default
/// `dataset.yaml`) reads; all without a config.
pub(crate) fn dataset_part_filter(root: &Path, dataset_config: Option<&str>) -> Result<PartFilter> {
    Ok(DatasetOverrides::read(root, dataset_config)?.part_filter)
}

/// Loader arguments a `dataset.yaml` overrides (`None`: not set there).
#[derive(Debug, Default)]
struct DatasetOverrides {
    split_part: Option<String>,
    split_config: Option<String>,
    shuffle_over_epochs: Option<Option<i64>>,
    max_samples_per_sequence: Option<Option<u64>>,
    parallel_shard_iters: Option<Option<usize>>,
    crude: bool,
    /// The parts the config's field map or part filter reads (all without a config).
    part_filter: PartFilter,
}

impl DatasetOverrides {
    /// Reads the overrides of the dataset at `root`; a dataset without its config file has none
    /// (raw samples can still be read).
    fn read(root: &Path, dataset_config: Option<&str>) -> Result<Self> {
        let path = root.join(NV_META).join(dataset_config.unwrap_or(DATASET_YAML));
        if !energon_index::storage::is_file(&path) {
            return Ok(DatasetOverrides::default());
        }
        let config = read_dataset_config(&path)?;
        let extra = config.extra();
        let bad = |key: &str, expected: &str| Error::BadNode {
            file: path.clone(),
            yaml_path: key.to_owned(),
            reason: format!("expected {expected}, found {}", extra[key]),
        };
        let string = |key: &str| match extra.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(key, "a string")),
        };
        let opt_int = |key: &str| match extra.get(key) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::Number(n)) if n.as_i64().is_some() => Ok(Some(n.as_i64())),
            Some(_) => Err(bad(key, "an integer or null")),
        };
        let non_negative = |key: &str| -> Result<Option<Option<u64>>> {
            opt_int(key)?
                .map(|v| v.map(u64::try_from).transpose().map_err(|_| bad(key, "an integer >= 0")))
                .transpose()
        };
        Ok(DatasetOverrides {
            part_filter: energon_reader::config_part_filter(&config),
            crude: config.yields_crude(),
            split_part: string("split_part")?,
            split_config: string("split_config")?,
            shuffle_over_epochs: opt_int("shuffle_over_epochs")?,
            max_samples_per_sequence: non_negative("max_samples_per_sequence")?,
            parallel_shard_iters: non_negative("parallel_shard_iters")?
                .map(|v| v.map(|p| p as usize)),
        })
    }
}
