//! The native dataset objects: `_Reader` (random access to typed samples) and `_DatasetSpec`
//! (what `get_train_dataset` / `get_val_dataset` return: a dataset with its pipeline settings,
//! from which loaders are built).

use std::{path::PathBuf, sync::Arc};

use energon_cook::LoaderBuilder;
use energon_dist::WorkerConfig;
use energon_reader::{Decoder, ImageDecode, ReaderOptions, SampleReader};
use pyo3::prelude::*;

use crate::{
    convert::Converter,
    errors::{config_error, to_py_err},
    hooks::{Hooks, Item},
    sample::sample_to_py,
};

/// Opens a [`SampleReader`] with the Python API's decoder settings.
fn open_reader(
    path: &std::path::Path,
    split_part: &str,
    image_decode: Option<&str>,
    guess_content: bool,
    split_config: Option<String>,
    dataset_config: Option<String>,
    max_open_shards: usize,
) -> PyResult<SampleReader> {
    let decoder = match image_decode {
        None => None,
        Some(name) => {
            let image: ImageDecode = name.parse().map_err(config_error)?;
            Some(Decoder { image, guess_content, ..Decoder::default() })
        }
    };
    let options = ReaderOptions {
        split_part: split_part.to_owned(),
        split_config,
        dataset_config,
        decoder,
        max_open_shards,
        ..ReaderOptions::default()
    };
    SampleReader::open(path, &options).map_err(|e| to_py_err(&e))
}

/// Random access to the typed samples of one split part (no loader, no shuffling).
#[pyclass(name = "_Reader", module = "energon_rs._native", frozen)]
pub(crate) struct Reader {
    reader: Arc<SampleReader>,
}

#[pymethods]
impl Reader {
    #[new]
    #[pyo3(signature = (path, split_part = "train", image_decode = Some("torchrgb"), guess_content = false, split_config = None, dataset_config = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        split_part: &str,
        image_decode: Option<&str>,
        guess_content: bool,
        split_config: Option<String>,
        dataset_config: Option<String>,
    ) -> PyResult<Self> {
        let image_decode = image_decode.map(str::to_owned);
        let split_part = split_part.to_owned();
        let reader = py.detach(|| {
            open_reader(
                &path,
                &split_part,
                image_decode.as_deref(),
                guess_content,
                split_config,
                dataset_config,
                64,
            )
        })?;
        Ok(Reader { reader: Arc::new(reader) })
    }

    /// Number of samples of the split part (excluded ones included).
    fn __len__(&self) -> usize {
        usize::try_from(self.reader.len()).unwrap_or(usize::MAX)
    }

    /// The reference's class name of the samples (`CaptioningSample`, `CrudeSample`, ...).
    #[getter]
    fn sample_type(&self) -> &'static str {
        self.reader.sample_type()
    }

    /// Reads and decodes sample `index` (the GIL is released meanwhile); `None` if excluded.
    #[pyo3(signature = (index, torch = false))]
    fn read(&self, py: Python<'_>, index: u64, torch: bool) -> PyResult<Option<Py<PyAny>>> {
        let reader = Arc::clone(&self.reader);
        let sample = py.detach(move || reader.read(index)).map_err(|e| to_py_err(&e))?;
        let conv = Converter::new(py, torch)?;
        sample.map(|s| Ok(sample_to_py(&conv, s, None)?.unbind())).transpose()
    }
}

/// The settings of one dataset pipeline (the arguments of `get_train_dataset` or
/// `get_val_dataset`), validated, with the dataset opened.
#[pyclass(name = "_DatasetSpec", module = "energon_rs._native", frozen)]
pub(crate) struct DatasetSpec {
    reader: Arc<SampleReader>,
    worker_config: WorkerConfig,
    training: bool,
    batch_size: Option<usize>,
    drop_last: bool,
    shuffle_buffer_size: usize,
    max_samples_per_sequence: Option<u64>,
    parallel_shard_iters: Option<usize>,
    shuffle_over_epochs: i64,
    hooks: Arc<Hooks>,
}

#[pymethods]
impl DatasetSpec {
    #[new]
    #[pyo3(signature = (
        path, *, split_part, rank, world_size, num_workers, seed_offset = 0, training = true,
        batch_size = None, drop_last = false, shuffle_buffer_size = None,
        max_samples_per_sequence = None, parallel_shard_iters = None, shuffle_over_epochs = 1,
        image_decode = Some("torchrgb"), guess_content = false, split_config = None,
        dataset_config = None, hooks = None
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
        shuffle_over_epochs: i64,
        image_decode: Option<&str>,
        guess_content: bool,
        split_config: Option<String>,
        dataset_config: Option<String>,
        hooks: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let hooks = hooks.map(|h| Hooks::from_py(&h)).transpose()?.unwrap_or_default();
        let worker_config = WorkerConfig::new(rank, world_size, num_workers)
            .map_err(|e| to_py_err(&e))?
            .with_seed_offset(seed_offset);
        // One shard map per slice the workers read at once, as the reference keeps one tar
        // handle per open slice.
        let slots = if training { parallel_shard_iters.unwrap_or(16) } else { 1 };
        let max_open_shards = (slots * num_workers.max(1)).max(2);
        let image_decode = image_decode.map(str::to_owned);
        let split_part = split_part.to_owned();
        let reader = py.detach(|| {
            open_reader(
                &path,
                &split_part,
                image_decode.as_deref(),
                guess_content,
                split_config,
                dataset_config,
                max_open_shards,
            )
        })?;
        let spec = DatasetSpec {
            reader: Arc::new(reader),
            worker_config,
            training,
            batch_size,
            drop_last,
            shuffle_buffer_size: shuffle_buffer_size.unwrap_or(0),
            max_samples_per_sequence,
            parallel_shard_iters,
            shuffle_over_epochs,
            hooks: Arc::new(hooks),
        };
        // Settings are checked now (as the reference does when it builds the dataset), not at
        // the first iteration.
        spec.builder().leaf_config().map_err(|e| to_py_err(&e))?;
        spec.builder().worker_slices().map_err(|e| to_py_err(&e))?;
        Ok(spec)
    }

    /// The reference's class name of the samples (`CaptioningSample`, `CrudeSample`, ...).
    #[getter]
    fn sample_type(&self) -> &'static str {
        self.reader.sample_type()
    }

    /// Number of samples of the split part (excluded ones included).
    #[getter]
    fn n_samples(&self) -> u64 {
        self.reader.len()
    }

    /// The number of samples each local worker of this rank reads in one pass.
    fn worker_sample_counts(&self) -> PyResult<Vec<u64>> {
        let slices = self.builder().worker_slices().map_err(|e| to_py_err(&e))?;
        Ok(slices.iter().map(|s| s.n_samples()).collect())
    }
}

impl DatasetSpec {
    /// A loader builder with these settings; items are samples (or what the Python hooks make
    /// of them).
    pub(crate) fn builder(&self) -> LoaderBuilder<Item> {
        let reader = Arc::clone(&self.reader);
        let load = move |raw: energon_reader::RawSample| Ok(Some(Item::Rust(reader.build(&raw)?)));
        let mut builder =
            LoaderBuilder::new(Arc::clone(self.reader.dataset()), self.worker_config, load)
                .training(self.training)
                .shuffle_over_epochs(self.shuffle_over_epochs)
                .max_samples_per_sequence(self.max_samples_per_sequence)
                .shuffle_buffer_size(self.shuffle_buffer_size)
                .batch_size(self.batch_size)
                .drop_last(self.drop_last);
        if let Some(p) = self.parallel_shard_iters {
            builder = builder.parallel_shard_iters(p);
        }
        let crude = self.reader.sample_type() == "CrudeSample";
        if crude {
            // COMPAT(energon 7.4.1): crude samples are cooked in a map stage of their own (it
            // shows in the restore keys), with the task encoder's cookers.
            let hooks = Arc::clone(&self.hooks);
            builder = builder.cook(move |item| hooks.cook(item));
        }
        if self.hooks.has_encode_sample() {
            let hooks = Arc::clone(&self.hooks);
            builder = builder.encode(move |item| hooks.encode_sample(item));
        }
        builder
    }

    /// The per-call Python hooks.
    pub(crate) fn hooks(&self) -> &Arc<Hooks> {
        &self.hooks
    }

    /// The batch size, if batching.
    pub(crate) fn batch_size(&self) -> Option<usize> {
        self.batch_size
    }

    /// Whether the last short batch of a pass is dropped.
    pub(crate) fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// The loader workers of this rank (0: in one thread).
    pub(crate) fn n_workers(&self) -> usize {
        self.worker_config.num_workers()
    }
}
