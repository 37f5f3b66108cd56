//! One description of a rank's loader ([`LoaderSpec`]): a path and the settings of the
//! reference's `get_train_dataset` / `get_val_dataset` and `get_loader`, from which the command
//! line, the Python package (its main process and every worker process) and the examples build
//! their loaders.
//!
//! The spec is where each decision is made once: what the path is (a prepared dataset, a JSONL
//! file or a metadataset), how a metadataset's split is resolved and planned, which typed
//! reader each leaf gets (one per joined dataset for a join), how many shard maps the readers
//! keep open, and which settings reach the builder.

use std::{path::PathBuf, sync::Arc};

use energon_dist::WorkerConfig;
use energon_index::discover::{DatasetKind, classify};
use energon_mix::{
    LeafKind, LeafSample, MixOptions, MixPlan, PlannedLeaf, ResolveOptions, SampleSource,
    grammar::Joiner, resolve_path,
};
use energon_reader::{Decoder, RawSample, ReaderOptions, Sample, SampleReader};
use serde_json::{Map, Value};

use crate::{
    builder::{LeafLoad, LoaderBuilder},
    encoder::{DefaultTaskEncoder, TaskEncoder},
    error::{Error, Result},
};

/// Subflavors attached to a leaf's samples.
pub type Subflavors = Arc<Map<String, Value>>;

/// A rank's loader as a value: the dataset (or metadataset) and every setting that shapes the
/// samples, their order and their batches. Build it with [`LoaderSpec::new`] and set fields.
///
/// ```
/// use energon_cook::LoaderSpec;
/// use energon_dist::WorkerConfig;
/// use energon_reader::Sample;
///
/// // A metadataset blending the reference-prepared fixture with half of itself.
/// let fixture = energon_fixtures::ref_small_dir();
/// let dir = tempfile::tempdir()?;
/// let yaml = dir.path().join("blend.yaml");
/// let blend = [
///     "__module__: megatron.energon",
///     "__class__: MetadatasetV2",
///     "splits:",
///     "  train:",
///     "    blend:",
///     &format!("      - {{weight: 2, path: {}}}", fixture.display()),
///     &format!("      - {{weight: 1, path: {}, subset: {{range: [0%, 50%]}}}}", fixture.display()),
/// ];
/// std::fs::write(&yaml, blend.join("\n"))?;
/// let spec = LoaderSpec::new(yaml, WorkerConfig::new(0, 1, 2)?);
/// // Typed samples, as the fixture's dataset.yaml says.
/// let mut loader = spec.samples()?.build_samples()?;
/// let sample = loader.next().expect("training never ends")?;
/// assert!(matches!(sample.value.value, Sample::Captioning(_)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LoaderSpec {
    /// A prepared dataset folder, a JSONL file or a metadataset YAML (local, or an object-store
    /// URL).
    pub path: PathBuf,
    /// The split part; `None`: `train` for training, `val` for validation.
    pub split_part: Option<String>,
    /// This rank and its workers.
    pub worker_config: WorkerConfig,
    /// Training (shuffled slices, repetition, blending, shuffle buffer, virtual epochs) or
    /// validation (sequential slices, one pass, limit).
    pub training: bool,
    /// Whether the passes repeat forever; `None`: training does, validation does not.
    pub repeat: Option<bool>,
    /// One dataset's `shuffle_over_epochs` (`k >= 1`, or -1); for a metadataset the outermost
    /// `shuffle_over_epochs_multiplier`. `None` leaves the dataset's own (1).
    pub shuffle_over_epochs: Option<i64>,
    /// Cut slices longer than 1.5 times this many samples.
    pub max_samples_per_sequence: Option<u64>,
    /// Slices open at once per worker (default 16 for training, 1 for validation).
    pub parallel_shard_iters: Option<usize>,
    /// Training only: the shuffle buffer's size (0 or 1: none).
    pub shuffle_buffer_size: usize,
    /// Samples per batch (`None`: no batching).
    pub batch_size: Option<usize>,
    /// Validation only: drop a last, shorter batch.
    pub drop_last: bool,
    /// Training only: items per virtual epoch (0: none).
    pub virtual_epoch_length: u64,
    /// Validation only: at most this many items.
    pub limit: Option<u64>,
    /// Samples gathered for the task encoder's packing (`None`: no packing).
    pub packing_buffer_size: Option<usize>,
    /// Items each worker prepares ahead.
    pub prefetch_factor: usize,
    /// One dataset of a metadataset's split on its own, by its place in the split (the
    /// reference's `get_val_datasets`).
    pub leaf: Option<usize>,
    /// One dataset's split file instead of `split.yaml`.
    pub split_config: Option<String>,
    /// One dataset's config file instead of `dataset.yaml`.
    pub dataset_config: Option<String>,
    /// How parts are decoded (`None`: every part stays bytes).
    pub decoder: Option<Decoder>,
    /// A field-map value of another type than the sample type declares is kept as it is (the
    /// Python classes take what a field map gives); otherwise it is a sample error.
    pub loose_fields: bool,
}

/// What a spec's path opened as, with typed readers.
#[derive(Debug)]
pub enum Opened {
    /// A prepared dataset or JSONL file.
    Dataset(Arc<SampleReader>),
    /// A metadataset's split planned for the rank, and each leaf's readers in the plan's order.
    Metadataset {
        /// The plan.
        plan: MixPlan,
        /// One per leaf of the plan.
        leaves: Vec<LeafReader>,
    },
}

/// How a leaf of a plan builds its samples.
#[derive(Debug)]
pub enum LeafReader {
    /// A WebDataset or JSONL leaf: its reader and the subflavors of its samples (the dataset's
    /// own, updated with the metadataset's).
    Dataset {
        /// The leaf's reader (it builds samples; the plan's datasets read them).
        reader: Box<SampleReader>,
        /// The samples' subflavors.
        subflavors: Subflavors,
    },
    /// A join: one reader and subflavors per joined dataset, and the joiner.
    Join {
        /// The joined datasets' readers, in the join's order.
        readers: Vec<(SampleReader, Subflavors)>,
        /// What combines the joined samples.
        joiner: Joiner,
        /// The joined datasets' names, when the join is a mapping (the joiner then takes
        /// keyword arguments).
        names: Option<Vec<String>>,
    },
}

/// How many shard maps a leaf's own reader keeps open: it only builds samples (the plan's
/// datasets read them), so it never maps a shard.
const BUILD_ONLY_OPEN_SHARDS: usize = 1;

impl LoaderSpec {
    /// A training loader over `path` for `worker_config`'s rank, with the reference's defaults:
    /// no batching, no shuffle buffer, `shuffle_over_epochs` 1, `prefetch_factor` 2, the
    /// default decoder.
    pub fn new(path: impl Into<PathBuf>, worker_config: WorkerConfig) -> Self {
        LoaderSpec {
            path: path.into(),
            split_part: None,
            worker_config,
            training: true,
            repeat: None,
            shuffle_over_epochs: Some(1),
            max_samples_per_sequence: None,
            parallel_shard_iters: None,
            shuffle_buffer_size: 0,
            batch_size: None,
            drop_last: false,
            virtual_epoch_length: 0,
            limit: None,
            packing_buffer_size: None,
            prefetch_factor: 2,
            leaf: None,
            split_config: None,
            dataset_config: None,
            decoder: Some(Decoder::default()),
            loose_fields: false,
        }
    }

    /// The split part read: the one set, else `train` for training and `val` for validation.
    pub fn part(&self) -> String {
        match &self.split_part {
            Some(part) => part.clone(),
            None if self.training => "train".to_owned(),
            None => "val".to_owned(),
        }
    }

    /// The options that shape a metadataset's plan.
    pub fn mix_options(&self) -> MixOptions {
        MixOptions::default()
            .training(self.training)
            .repeat(self.repeat.unwrap_or(true))
            .max_samples_per_sequence(self.max_samples_per_sequence)
            .parallel_shard_iters(self.parallel_shard_iters)
    }

    /// How many shard maps the dataset's reader keeps open (see
    /// [`MixOptions::max_open_shards`]).
    pub fn max_open_shards(&self) -> usize {
        self.mix_options().max_open_shards(self.worker_config.n_local_workers())
    }

    /// The options of the dataset's reader.
    pub fn reader_options(&self) -> ReaderOptions {
        let mut options = ReaderOptions::default();
        options.split_part = self.part();
        options.split_config.clone_from(&self.split_config);
        options.dataset_config.clone_from(&self.dataset_config);
        options.decoder = self.decoder;
        // COMPAT(energon 7.4.1): samples carry a dict of subflavors, empty unless the dataset's
        // own `dataset.yaml` sets some.
        options.subflavors = Some(Map::new());
        options.max_open_shards = self.max_open_shards();
        options.loose_fields = self.loose_fields;
        options
    }

    /// What the path is.
    fn kind(&self) -> Result<DatasetKind> {
        Ok(classify(&self.path).map_err(energon_reader::Error::from)?)
    }

    /// Whether the path is a metadataset.
    pub fn is_metadataset(&self) -> Result<bool> {
        Ok(self.kind()? == DatasetKind::Metadataset)
    }

    /// The plan of the path for this rank: a metadataset's split (or its one leaf), or a
    /// dataset as a plan of one leaf, its samples raw.
    pub fn plan(&self) -> Result<MixPlan> {
        if (self.split_config.is_some() || self.dataset_config.is_some())
            && self.is_metadataset()?
        {
            return Err(Error::InvalidSetting {
                setting: "split_config",
                value: self.path.display().to_string(),
                reason: "split_config and dataset_config apply to a dataset, not to a \
                         metadataset (set them on its entries)",
            });
        }
        let resolve =
            ResolveOptions::default().shuffle_over_epochs_multiplier(self.shuffle_over_epochs);
        let mut split = resolve_path(&self.path, &self.part(), &resolve)?;
        if let Some(leaf) = self.leaf {
            if leaf >= split.leaves.len() {
                return Err(energon_mix::Error::InvalidOption {
                    option: "leaf",
                    value: leaf.to_string(),
                    reason: format!("the split has {} datasets", split.leaves.len()),
                }
                .into());
            }
            split.leaves = vec![split.leaves.swap_remove(leaf)];
        }
        Ok(MixPlan::new(split, self.worker_config, self.mix_options())?)
    }

    /// Opens the path with typed readers: a dataset's reader, or a metadataset's plan and each
    /// leaf's readers.
    pub fn open(&self) -> Result<Opened> {
        let kind = self.kind()?;
        if kind != DatasetKind::Metadataset {
            let mut options = self.reader_options();
            if kind == DatasetKind::Jsonl {
                // COMPAT(energon 7.4.1): a JSONL file's own records carry no subflavors (None),
                // where a WebDataset's samples carry a dict.
                options.subflavors = None;
            }
            let reader = SampleReader::open(&self.path, &options)?;
            return Ok(Opened::Dataset(Arc::new(reader)));
        }
        let plan = self.plan()?;
        let options = self.reader_options();
        let leaves = plan
            .leaves
            .iter()
            .map(|planned| LeafReader::open(planned, &options))
            .collect::<Result<_>>()?;
        Ok(Opened::Metadataset { plan, leaves })
    }

    /// A loader builder over one dataset read by `dataset`, turning samples into `T` with
    /// `load`, with these settings.
    pub fn dataset_builder<D, T, L>(&self, dataset: Arc<D>, load: L) -> LoaderBuilder<T>
    where
        D: SampleSource + 'static,
        T: Send + 'static,
        L: Fn(RawSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        self.dataset_settings(LoaderBuilder::new(dataset, self.worker_config, load))
    }

    /// The settings of one dataset (training, its slices, repetition) and every loader's.
    pub fn dataset_settings<T, E>(&self, builder: LoaderBuilder<T, E>) -> LoaderBuilder<T, E>
    where
        T: Send + 'static,
        E: TaskEncoder<Sample = T>,
    {
        let mut builder =
            builder.training(self.training).max_samples_per_sequence(self.max_samples_per_sequence);
        if let Some(k) = self.shuffle_over_epochs {
            builder = builder.shuffle_over_epochs(k);
        }
        if let Some(p) = self.parallel_shard_iters {
            builder = builder.parallel_shard_iters(p);
        }
        if let Some(repeat) = self.repeat {
            builder = builder.repeat(repeat);
        }
        self.loader_settings(builder)
    }

    /// A loader builder over `plan` (made by [`LoaderSpec::plan`] or [`LoaderSpec::open`])
    /// with a way to items for each leaf, with these settings.
    pub fn plan_builder<T>(&self, plan: MixPlan, leaves: Vec<LeafLoad<T>>) -> LoaderBuilder<T>
    where
        T: Send + 'static,
    {
        self.plan_settings(LoaderBuilder::with_leaves(plan, leaves))
    }

    /// The settings of a plan's loader (a plan's repetition for training is its own; validation
    /// repeats on request, the reference's `RepeatDataset` around it) and every loader's.
    pub fn plan_settings<T, E>(&self, builder: LoaderBuilder<T, E>) -> LoaderBuilder<T, E>
    where
        T: Send + 'static,
        E: TaskEncoder<Sample = T>,
    {
        let builder = match self.repeat {
            Some(repeat) if !self.training => builder.repeat(repeat),
            _ => builder,
        };
        self.loader_settings(builder)
    }

    fn loader_settings<T, E>(&self, builder: LoaderBuilder<T, E>) -> LoaderBuilder<T, E>
    where
        T: Send + 'static,
        E: TaskEncoder<Sample = T>,
    {
        builder
            .shuffle_buffer_size(self.shuffle_buffer_size)
            .batch_size(self.batch_size)
            .drop_last(self.drop_last)
            .virtual_epoch_length(self.virtual_epoch_length)
            .limit(self.limit)
            .packing_buffer_size(self.packing_buffer_size)
            .prefetch_factor(self.prefetch_factor)
    }

    /// A loader builder of typed samples over the path, whatever it is: a dataset's samples as
    /// its `dataset.yaml` says, a metadataset's as each leaf's does. Crude samples (JSONL files,
    /// crude WebDatasets) go to the task encoder's cookers: set a task encoder with cookers
    /// ([`LoaderBuilder::task_encoder`]), or building fails with [`Error::NoCooker`] as the
    /// reference's default task encoder does. A join needs its joiner, which is Python code: a
    /// metadataset with a join is refused.
    pub fn samples(&self) -> Result<LoaderBuilder<Sample>> {
        let builder = match self.open()? {
            Opened::Dataset(reader) => {
                let crude = reader.is_crude();
                let subflavors = reader.subflavors().cloned();
                let dataset = Arc::clone(reader.dataset());
                self.dataset_builder(dataset, move |raw| Ok(Some(reader.build(&raw)?)))
                    .crude(crude)
                    .subflavors(subflavors)
            }
            Opened::Metadataset { plan, leaves } => {
                let loads = leaves
                    .into_iter()
                    .map(|leaf| match leaf {
                        LeafReader::Dataset { reader, subflavors } => {
                            let reader = Arc::<SampleReader>::from(reader);
                            // The cooker of a crude leaf is chosen by its samples' subflavors.
                            let chooser = (*subflavors).clone();
                            let load = LeafLoad::new(move |sample| match sample {
                                LeafSample::Raw(raw) => {
                                    Ok(Some(with_subflavors(reader.build(&raw)?, &subflavors)))
                                }
                                LeafSample::Joined(_) => Err(Error::InvalidSetting {
                                    setting: "metadataset",
                                    value: "join".to_owned(),
                                    reason: "a joined sample from a leaf that is not a join",
                                }),
                            });
                            Ok(load.subflavors(chooser))
                        }
                        LeafReader::Join { .. } => Err(Error::InvalidSetting {
                            setting: "metadataset",
                            value: self.path.display().to_string(),
                            reason: "a join combines its samples with its joiner, a Python \
                                     class or function: load it with the Python package",
                        }),
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.plan_builder(plan, loads)
            }
        };
        Ok(builder.task_encoder(DefaultTaskEncoder::samples()))
    }
}

/// `sample` with its leaf's `subflavors` instead of what its reader set.
pub fn with_subflavors(mut sample: Sample, subflavors: &Subflavors) -> Sample {
    sample.meta_mut().subflavors = Some(Arc::clone(subflavors));
    sample
}

impl LeafReader {
    /// Opens the readers of a planned leaf with `options` (its split part, split file and
    /// config are the leaf's; they only build samples, so they keep no shard open).
    pub fn open(planned: &PlannedLeaf, options: &ReaderOptions) -> Result<Self> {
        let leaf = &planned.leaf;
        let options = |split_part: &str, split_config: &Option<String>, dataset_config| {
            let mut res = options.clone();
            res.split_part = split_part.to_owned();
            res.split_config.clone_from(split_config);
            res.dataset_config = dataset_config;
            res.subflavors = None;
            res.max_open_shards = BUILD_ONLY_OPEN_SHARDS;
            res
        };
        Ok(match (&leaf.kind, planned.data.dataset()) {
            (LeafKind::Jsonl, Some(dataset)) => {
                let reader = SampleReader::crude(dataset, &options("", &None, None));
                // COMPAT(energon 7.4.1): a leaf's samples carry a dict of subflavors, empty
                // if none.
                let subflavors = Arc::new(leaf.sample_subflavors(None));
                LeafReader::Dataset { reader: Box::new(reader), subflavors }
            }
            (LeafKind::Joined(spec), _) => {
                let mut readers = Vec::with_capacity(spec.sources.len());
                for source in &spec.sources {
                    let opts = options(
                        &source.split_part,
                        &source.split_config,
                        source.dataset_config.clone(),
                    );
                    let reader = SampleReader::open(&source.path, &opts)?;
                    let mut subflavors = dataset_subflavors(&reader);
                    for (k, v) in source.subflavors.iter().flatten() {
                        subflavors.insert(k.clone(), v.clone());
                    }
                    readers.push((reader, Arc::new(subflavors)));
                }
                let names = spec
                    .named
                    .then(|| spec.sources.iter().map(|s| s.name.clone().unwrap_or_default()))
                    .map(Iterator::collect);
                LeafReader::Join { readers, joiner: spec.joiner.clone(), names }
            }
            _ => {
                let opts =
                    options(&leaf.split_part, &leaf.split_config, leaf.dataset_config.clone());
                let reader = SampleReader::open(&leaf.path, &opts)?;
                // COMPAT(energon 7.4.1): dataset_config.py:get_dataset_from_config updates the
                // dataset's own subflavors with the metadataset's.
                let subflavors = leaf.sample_subflavors(Some(&dataset_subflavors(&reader)));
                LeafReader::Dataset { reader: Box::new(reader), subflavors: Arc::new(subflavors) }
            }
        })
    }
}

/// The subflavors of a dataset's own `dataset.yaml` (empty if none).
fn dataset_subflavors(reader: &SampleReader) -> Map<String, Value> {
    reader.config().and_then(|c| c.subflavors()).cloned().unwrap_or_default()
}
