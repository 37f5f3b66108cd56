//! The native dataset objects: `_Reader` (random access to typed samples) and `_DatasetSpec`
//! (what `get_train_dataset` / `get_val_dataset` return: a dataset or metadataset with its
//! pipeline settings, from which loaders are built).

use std::{path::PathBuf, sync::Arc};

use energon_cook::{
    BoxStage, FailureStats, InlineWorker, Loader, LoaderBuilder, LoaderConfig, LoaderSpec,
    LoaderState, Opened, WorkerLink, WorkerMessage, checkpoint::PipelineConfig,
};
use energon_dist::WorkerConfig;
use energon_reader::{Dataset, Decoder, ImageDecode, ReaderOptions, SampleReader};
use pyo3::prelude::*;

use crate::{
    convert::{AvOutput, Converter, Output, av_decode_of, pil_mode},
    encoder::{PyEncoder, WorkerBatch},
    errors::{config_error, to_py_err},
    hooks::{Hooks, Item, Primary},
    loader::{LoaderSource, Raw, RustLoader, map_message},
    mix::MixSource,
    sample::sample_to_py,
    workers::{ProcessWorker, batch_item, sample_item},
};

/// The decoder of the Python API's settings: `image_decode` is one of the reference's names
/// (`torchrgb`, `rgb8`, ...; the `pil*` modes decode to `u8` arrays that the conversion to Python
/// turns into PIL images, see [`pil_mode`]); `None` keeps every part as raw bytes.
/// `av_decode` and `video_decode_audio` are the reference's (see [`av_decode_of`]); the
/// returned [`AvOutput`] says what the parts left as bytes become in Python.
pub(crate) fn decoder_of(
    image_decode: Option<&str>,
    guess_content: bool,
    av_decode: &str,
    video_decode_audio: bool,
) -> PyResult<(Option<Decoder>, AvOutput)> {
    let (av, av_output) = av_decode_of(av_decode, video_decode_audio).map_err(config_error)?;
    let Some(name) = image_decode else { return Ok((None, av_output)) };
    let image: ImageDecode = pil_mode(name).unwrap_or(name).parse().map_err(config_error)?;
    Ok((Some(Decoder { image, av, guess_content, ..Decoder::default() }), av_output))
}

/// Imports the user's sample class of a reader's `dataset.yaml`, if it names one, as the
/// reference does when it builds the dataset: a class that cannot be imported is a
/// [`config_error`] naming the dataset config and the class, caused by the import's error.
pub(crate) fn check_sample_class(py: Python<'_>, reader: &SampleReader) -> PyResult<()> {
    let Some(class) = reader.sample_class() else { return Ok(()) };
    let found = py.import(class.module.as_str()).and_then(|m| m.getattr(class.class.as_str()));
    match found {
        Ok(_) => Ok(()),
        Err(cause) => {
            let err = config_error(format!(
                "the dataset config in {} names the sample_type {}.{}, which cannot be \
                 imported: {cause}",
                reader.dataset().path().join(energon_index::NV_META).display(),
                class.module,
                class.class
            ));
            err.set_cause(py, Some(cause));
            Err(err)
        }
    }
}

/// Random access to the typed samples of one split part (no loader, no shuffling).
#[pyclass(name = "_Reader", module = "energon_rs._native", frozen)]
pub(crate) struct Reader {
    reader: Arc<SampleReader>,
    /// Images as PIL images (a `pil*` decode mode).
    pil_images: bool,
    /// What audio and video parts become.
    av: AvOutput,
}

#[pymethods]
impl Reader {
    #[new]
    #[pyo3(signature = (
        path, split_part = "train", image_decode = Some("torchrgb"), guess_content = false,
        split_config = None, dataset_config = None, av_decode = "AVDecoder",
        video_decode_audio = false
    ))]
    #[expect(clippy::too_many_arguments, reason = "the Python API's keyword arguments")]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        split_part: &str,
        image_decode: Option<&str>,
        guess_content: bool,
        split_config: Option<String>,
        dataset_config: Option<String>,
        av_decode: &str,
        video_decode_audio: bool,
    ) -> PyResult<Self> {
        let (decoder, av) = decoder_of(image_decode, guess_content, av_decode, video_decode_audio)?;
        let mut options = ReaderOptions::default();
        options.split_part = split_part.to_owned();
        options.split_config = split_config;
        options.dataset_config = dataset_config;
        options.decoder = decoder;
        // COMPAT(energon 7.4.1): samples carry a dict of subflavors, empty unless the dataset's
        // own `dataset.yaml` sets some.
        options.subflavors = Some(serde_json::Map::new());
        // Random access over the whole dataset: a fixed number of shards stay mapped.
        options.max_open_shards = 64;
        // Python's sample classes take what a field map gives, as the reference's do.
        options.loose_fields = true;
        let reader =
            py.detach(|| SampleReader::open(&path, &options)).map_err(|e| to_py_err(&e))?;
        let pil_images = image_decode.is_some_and(|m| pil_mode(m).is_some());
        Ok(Reader { reader: Arc::new(reader), pil_images, av })
    }

    /// Number of samples of the split part (excluded ones included).
    fn __len__(&self) -> usize {
        usize::try_from(self.reader.len()).unwrap_or(usize::MAX)
    }

    /// The reference's class name of the samples (`CaptioningSample`, `CrudeSample`, ...).
    #[getter]
    fn sample_type(&self) -> &str {
        self.reader.sample_type()
    }

    /// Reads and decodes sample `index` (the GIL is released meanwhile); `None` if excluded.
    #[pyo3(signature = (index, torch = false))]
    fn read(&self, py: Python<'_>, index: u64, torch: bool) -> PyResult<Option<Py<PyAny>>> {
        let reader = Arc::clone(&self.reader);
        let sample = py.detach(move || reader.read(index)).map_err(|e| to_py_err(&e))?;
        let conv = Converter::new(
            py,
            Output { torch, pil_images: self.pil_images, av: self.av, ..Output::default() },
        )?;
        sample.map(|s| Ok(sample_to_py(&conv, s, None)?.unbind())).transpose()
    }
}

/// What a dataset pipeline reads.
enum Input {
    /// A prepared dataset or JSONL file, and the cooker of its crude samples.
    Single { reader: Arc<SampleReader>, cook: Option<Arc<Py<PyAny>>> },
    /// A metadataset split.
    Mix(Arc<MixSource>),
}

/// The settings of one dataset pipeline (the arguments of `get_train_dataset` or
/// `get_val_dataset`), validated, with the dataset (or every dataset of a metadataset) opened.
#[pyclass(name = "_DatasetSpec", module = "energon_rs._native", frozen)]
pub(crate) struct DatasetSpec {
    input: Input,
    spec: LoaderSpec,
    hooks: Arc<Hooks>,
}

#[pymethods]
impl DatasetSpec {
    /// Opens `path`: a prepared dataset, a JSONL file or a metadataset (whose split
    /// `split_part` is read; `shuffle_over_epochs` is then the outermost
    /// `shuffle_over_epochs_multiplier`, `None` for no shuffling).
    #[new]
    #[pyo3(signature = (
        path, *, split_part, rank, world_size, num_workers, seed_offset = 0, training = true,
        batch_size = None, drop_last = false, shuffle_buffer_size = None,
        max_samples_per_sequence = None, parallel_shard_iters = None, shuffle_over_epochs = Some(1),
        virtual_epoch_length = 0, limit = None, packing_buffer_size = None, repeat = None,
        leaf = None, image_decode = Some("torchrgb"), guess_content = false, split_config = None,
        dataset_config = None, hooks = None, av_decode = "AVDecoder", video_decode_audio = false
    ))]
    #[expect(clippy::too_many_arguments, reason = "the Python API's keyword arguments")]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        split_part: &str,
        rank: usize,
        world_size: usize,
        num_workers: usize,
        seed_offset: i64,
        training: bool,
        batch_size: Option<usize>,
        drop_last: bool,
        shuffle_buffer_size: Option<usize>,
        max_samples_per_sequence: Option<u64>,
        parallel_shard_iters: Option<usize>,
        shuffle_over_epochs: Option<i64>,
        virtual_epoch_length: u64,
        limit: Option<u64>,
        packing_buffer_size: Option<usize>,
        repeat: Option<bool>,
        leaf: Option<usize>,
        image_decode: Option<&str>,
        guess_content: bool,
        split_config: Option<String>,
        dataset_config: Option<String>,
        hooks: Option<Bound<'_, PyAny>>,
        av_decode: &str,
        video_decode_audio: bool,
    ) -> PyResult<Self> {
        let mut hooks = hooks.map(|h| Hooks::from_py(&h)).transpose()?.unwrap_or_default();
        hooks.set_pil_images(image_decode.is_some_and(|m| pil_mode(m).is_some()));
        let (decoder, av) = decoder_of(image_decode, guess_content, av_decode, video_decode_audio)?;
        hooks.set_av_output(av);
        let hooks = Arc::new(hooks);
        let worker_config = WorkerConfig::new(rank, world_size, num_workers)
            .map_err(|e| to_py_err(&e))?
            .with_seed_offset(seed_offset);
        let mut spec = LoaderSpec::new(path, worker_config);
        spec.split_part = Some(split_part.to_owned());
        spec.training = training;
        spec.repeat = repeat;
        spec.shuffle_over_epochs = shuffle_over_epochs;
        spec.max_samples_per_sequence = max_samples_per_sequence;
        spec.parallel_shard_iters = parallel_shard_iters;
        spec.shuffle_buffer_size = shuffle_buffer_size.unwrap_or(0);
        spec.batch_size = batch_size;
        spec.drop_last = drop_last;
        spec.virtual_epoch_length = virtual_epoch_length;
        spec.limit = limit;
        spec.packing_buffer_size = packing_buffer_size;
        spec.leaf = leaf;
        spec.split_config = split_config;
        spec.dataset_config = dataset_config;
        spec.decoder = decoder;
        // Python's sample classes take what a field map gives, as the reference's do.
        spec.loose_fields = true;
        let opened = py.detach(|| spec.open()).map_err(|e| to_py_err(&e))?;
        let input = match opened {
            Opened::Dataset(reader) => {
                check_sample_class(py, &reader)?;
                let cook = if reader.is_crude() {
                    let primary = Primary {
                        path: reader.dataset().path().to_path_buf(),
                        jsonl: matches!(**reader.dataset(), Dataset::Jsonl(_)),
                        dataset_config: spec.dataset_config.clone(),
                    };
                    hooks.make_cook(py, reader.subflavors(), Vec::new(), primary)?.map(Arc::new)
                } else {
                    None
                };
                Input::Single { reader, cook }
            }
            Opened::Metadataset { plan, leaves } => {
                Input::Mix(Arc::new(MixSource::new(py, plan, leaves, &hooks)?))
            }
        };
        let spec = DatasetSpec { input, spec, hooks };
        // Settings are checked now (as the reference does when it builds the dataset), not at
        // the first iteration.
        py.detach(|| spec.check()).map_err(|e| to_py_err(&e))?;
        Ok(spec)
    }

    /// Makes the item (sample or batch) of a loader's restore key again: the key as the
    /// loader's items carry it, starting with the loader wrapper, the global worker id and the
    /// worker's item index (the reference's `loader.restore_sample`).
    fn restore_item(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let builder = self.builder();
        let batches = self.batches();
        crate::loader::restore_item(py, key, &self.all_hooks(), |key| {
            Ok(if batches {
                Raw::Batch(builder.restore_batch(key)?)
            } else {
                Raw::Sample(builder.restore_sample(key)?)
            })
        })
    }

    /// The reference's class name of the samples (`CaptioningSample`, `CrudeSample`, ...);
    /// `None` for a metadataset whose datasets yield different types.
    #[getter]
    fn sample_type(&self) -> Option<&str> {
        match &self.input {
            Input::Single { reader, .. } => Some(reader.sample_type()),
            Input::Mix(mix) => mix.sample_type(),
        }
    }

    /// Number of samples of the split part (excluded ones included); for a metadataset, the sum
    /// over its datasets.
    #[getter]
    fn n_samples(&self) -> u64 {
        match &self.input {
            Input::Single { reader, .. } => reader.len(),
            Input::Mix(mix) => mix.plan().leaves.iter().map(|l| l.len).sum(),
        }
    }

    /// Whether the dataset is a metadataset.
    #[getter]
    fn is_metadataset(&self) -> bool {
        matches!(self.input, Input::Mix(_))
    }

    /// The number of samples each local worker of this rank reads in one pass (of every
    /// dataset, repetitions applied, for a metadataset).
    fn worker_sample_counts(&self) -> PyResult<Vec<u64>> {
        match &self.input {
            Input::Single { reader, cook } => {
                let encoder = PyEncoder::new(Arc::clone(&self.hooks));
                let builder = self.single_builder(reader, cook.as_ref(), &encoder);
                let slices = builder.worker_slices().map_err(|e| to_py_err(&e))?;
                Ok(slices.iter().map(|s| s.n_samples()).collect())
            }
            Input::Mix(mix) => {
                let plan = mix.plan();
                Ok((0..plan.worker_config.n_local_workers()).map(|w| plan.len_worker(w)).collect())
            }
        }
    }
}

impl DatasetSpec {
    /// The loader builder over one dataset (see [`DatasetSpec::builder`]).
    fn single_builder(
        &self,
        reader: &Arc<SampleReader>,
        cook: Option<&Arc<Py<PyAny>>>,
        encoder: &PyEncoder,
    ) -> LoaderBuilder<Item, PyEncoder> {
        let load_reader = Arc::clone(reader);
        let load_hooks = Arc::clone(&self.hooks);
        // A sample that cannot be built goes to the error handler; energon-cook's error
        // policy then drops it (or stops after too many in a row).
        let load = move |raw: energon_reader::RawSample| match load_reader.build(&raw) {
            Ok(sample) => Ok(Some(Item::Rust(sample))),
            Err(err) => {
                let err = energon_cook::Error::from(err);
                if err.is_sample_error() {
                    load_hooks.report_sample_error(&err, raw.source_info())?;
                }
                Err(err)
            }
        };
        let builder =
            LoaderBuilder::new(Arc::clone(reader.dataset()), self.spec.worker_config, load)
                .task_encoder(encoder.clone());
        let mut builder = self.spec.dataset_settings(builder);
        if reader.is_crude() {
            // COMPAT(energon 7.4.1): crude samples are cooked in a map stage of their own
            // (it shows in the restore keys), with the task encoder's cooker.
            builder = builder.cooker(encoder.cooker(cook.cloned()));
        }
        builder
    }

    /// The loader builder of these settings over the dataset or metadataset (a plan of one leaf
    /// or of many, in the same builder); items are samples (or what the Python hooks make of
    /// them).
    fn builder(&self) -> LoaderBuilder<Item, PyEncoder> {
        let encoder = PyEncoder::new(Arc::clone(&self.hooks));
        let builder = match &self.input {
            Input::Single { reader, cook } => self.single_builder(reader, cook.as_ref(), &encoder),
            Input::Mix(mix) => {
                let leaves = mix.leaf_loads(&encoder);
                let builder =
                    LoaderBuilder::with_leaves(mix.plan().clone(), leaves).task_encoder(encoder);
                self.spec.plan_settings(builder)
            }
        };
        builder.error_policy(self.hooks.error_policy())
    }

    /// Every local worker's whole pipeline, of batches or of samples.
    pub(crate) fn pipelines(&self, stats: &FailureStats) -> energon_cook::Result<Pipelines> {
        let builder = self.builder();
        Ok(if self.batches() {
            Pipelines::Batches(builder.batch_worker_pipelines(stats)?)
        } else {
            Pipelines::Samples(builder.sample_worker_pipelines(stats)?)
        })
    }

    /// Starts the rank's loader (with its worker threads), continuing from `restore` if given;
    /// with `worker = w`, only local worker `w`'s pipeline, in the caller's thread (for torch
    /// `DataLoader` worker processes).
    fn start_loader(
        &self,
        prefetch_factor: usize,
        worker: Option<usize>,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<RustLoader> {
        let mut builder = self.builder().prefetch_factor(prefetch_factor);
        if let Some(state) = restore {
            builder = builder.restore_state(state);
        }
        let batches = self.batches();
        let Some(worker) = worker else {
            return Ok(if batches {
                RustLoader::Batches(builder.build_batches()?)
            } else {
                RustLoader::Samples(builder.build_samples()?)
            });
        };
        let n_workers = self.spec.worker_config.n_local_workers();
        if worker >= n_workers {
            return Err(energon_cook::Error::InvalidSetting {
                setting: "worker",
                value: worker.to_string(),
                reason: "must be below the dataset's number of workers (max(1, num_workers))",
            });
        }
        let stats = FailureStats::default();
        let config = LoaderConfig::new(0, prefetch_factor);
        Ok(if batches {
            let mut pipelines = builder.batch_worker_pipelines(&stats)?;
            RustLoader::Batches(Loader::new(vec![pipelines.swap_remove(worker)], config)?)
        } else {
            let mut pipelines = builder.sample_worker_pipelines(&stats)?;
            RustLoader::Samples(Loader::new(vec![pipelines.swap_remove(worker)], config)?)
        })
    }

    /// The loader builder of these settings, to continue from `restore` if given.
    fn restored_builder(&self, restore: Option<LoaderState>) -> LoaderBuilder<Item, PyEncoder> {
        let builder = self.builder();
        match restore {
            Some(state) => builder.restore_state(state),
            None => builder,
        }
    }

    /// The configuration this dataset's loader records in its checkpoints.
    pub(crate) fn config(&self) -> energon_cook::Result<PipelineConfig> {
        self.builder().config()
    }

    /// Whether the loader batches: a batch size, or batching by group.
    pub(crate) fn batches(&self) -> bool {
        self.spec.batch_size.is_some() || self.hooks.has_group_criterion()
    }

    /// Checks the settings by assembling every worker's pipeline once.
    fn check(&self) -> energon_cook::Result<()> {
        let stats = FailureStats::default();
        let builder = self.builder();
        if self.batches() {
            builder.batch_worker_pipelines(&stats).map(drop)
        } else {
            builder.sample_worker_pipelines(&stats).map(drop)
        }
    }

    /// The per-call Python hooks.
    pub(crate) fn hooks(&self) -> &Arc<Hooks> {
        &self.hooks
    }
}

/// Every local worker's whole pipeline of a dataset.
pub(crate) enum Pipelines {
    Samples(Vec<BoxStage<Item>>),
    Batches(Vec<BoxStage<WorkerBatch>>),
}

impl LoaderSource for DatasetSpec {
    fn all_hooks(&self) -> Vec<Arc<Hooks>> {
        vec![Arc::clone(&self.hooks)]
    }

    fn worker_config(&self) -> WorkerConfig {
        self.spec.worker_config
    }

    fn start(
        &self,
        prefetch_factor: usize,
        worker: Option<usize>,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<RustLoader> {
        self.start_loader(prefetch_factor, worker, restore)
    }

    fn start_linked(
        &self,
        workers: Vec<ProcessWorker>,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<RustLoader> {
        let builder = self.restored_builder(restore);
        let hooks = &self.hooks;
        let mut links = workers.into_iter().enumerate();
        Ok(if self.batches() {
            let links = links.map(|(w, p)| p.link(w, hooks, batch_item)).collect();
            RustLoader::Batches(builder.build_batches_linked(links)?)
        } else {
            let links = links.by_ref().map(|(w, p)| p.link(w, hooks, sample_item)).collect();
            RustLoader::Samples(builder.build_samples_linked(links)?)
        })
    }

    fn start_inline(&self, restore: Option<LoaderState>) -> energon_cook::Result<RustLoader> {
        let n = self.spec.worker_config.n_local_workers();
        let stats = FailureStats::default();
        let builder = || self.restored_builder(restore.clone());
        Ok(if self.batches() {
            let links = (0..n)
                .map(|w| Ok(boxed(builder().batch_worker(w, &stats)?.into_inline())))
                .collect::<energon_cook::Result<_>>()?;
            RustLoader::Batches(builder().build_batches_linked(links)?)
        } else {
            let links = (0..n)
                .map(|w| Ok(boxed(builder().sample_worker(w, &stats)?.into_inline())))
                .collect::<energon_cook::Result<_>>()?;
            RustLoader::Samples(builder().build_samples_linked(links)?)
        })
    }

    fn serve(
        &self,
        worker: usize,
        restore: Option<LoaderState>,
        send: &mut dyn FnMut(WorkerMessage<Raw>) -> bool,
    ) -> energon_cook::Result<()> {
        let builder = self.restored_builder(restore);
        let stats = FailureStats::default();
        if self.batches() {
            builder.batch_worker(worker, &stats)?.serve(|m| send(map_message(m, Raw::Batch)));
        } else {
            builder.sample_worker(worker, &stats)?.serve(|m| send(map_message(m, Raw::Sample)));
        }
        Ok(())
    }
}

/// A worker as a boxed link.
fn boxed<I: 'static>(worker: InlineWorker<I>) -> Box<dyn WorkerLink<I>> {
    Box::new(worker)
}
