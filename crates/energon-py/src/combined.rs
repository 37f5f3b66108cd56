//! Datasets built separately and combined as a whole (the reference's `BlendDataset`,
//! `ConcatDataset` and `MixBatchDataset` around datasets each made by `get_train_dataset`):
//! every dataset's worker pipelines, with their own task encoders and batch sizes, blended or
//! concatenated worker by worker by energon-cook, and for a mix the blended batches grouped by
//! the Python `batch_mix_fn`.

use std::sync::Arc;

use energon_cook::{
    BoxStage, FailureStats, InlineWorker, Keyed, Loader, LoaderConfig, LoaderStart, LoaderState,
    MixBatch, MixFn, WorkerLink, WorkerMessage, checkpoint::PipelineConfig, combine_pipelines,
    key_worker, mix_batch_pipelines, restore_in, serve_worker,
};
use energon_dist::WorkerConfig;
use pyo3::prelude::*;

use crate::{
    convert::Converter,
    dataset::{DatasetSpec, Pipelines},
    encoder::WorkerBatch,
    errors::{LoaderError, config_error, to_py_err},
    hooks::Hooks,
    loader::{LoaderSource, Raw, RustLoader, map_message},
    workers::{ProcessWorker, batch_item, sample_item},
};

/// Datasets combined: blended by weight (`weights` given) or one after the other; with `mix`,
/// the blended batches grouped by its hooks' `batch`.
#[pyclass(name = "_CombinedSpec", module = "energon_rs._native", frozen)]
pub(crate) struct CombinedSpec {
    children: Vec<Py<DatasetSpec>>,
    weights: Option<Vec<f32>>,
    mix: Option<Mix>,
    worker_config: WorkerConfig,
}

/// How blended batches are mixed: `batch_size` of them at a time by `hooks.batch`.
struct Mix {
    batch_size: usize,
    hooks: Arc<Hooks>,
}

#[pymethods]
impl CombinedSpec {
    /// Combines `children` (datasets of one worker configuration, all batched or none):
    /// blended by `weights` (one per child, positive), or concatenated without weights. With
    /// `mix_batch_size` and `mix_hooks` (a hooks object, see `Hooks::from_py`, whose `batch` is
    /// the mixing function), batched children are blended and their batches mixed
    /// `mix_batch_size` at a time.
    #[new]
    #[pyo3(signature = (children, weights = None, mix_batch_size = None, mix_hooks = None))]
    fn new(
        children: Vec<Py<DatasetSpec>>,
        weights: Option<Vec<f32>>,
        mix_batch_size: Option<usize>,
        mix_hooks: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let Some(first) = children.first() else {
            return Err(config_error("combining datasets needs at least one dataset"));
        };
        let worker_config = first.get().worker_config();
        if children.iter().any(|c| c.get().worker_config() != worker_config) {
            return Err(config_error("the combined datasets must have the same worker_config"));
        }
        if children.iter().any(|c| c.get().batches() != first.get().batches()) {
            return Err(config_error(
                "the combined datasets must all batch (a batch size) or none of them",
            ));
        }
        if weights.as_ref().is_some_and(|w| w.len() != children.len()) {
            return Err(config_error("one weight per blended dataset"));
        }
        let mix = match (mix_batch_size, mix_hooks) {
            (None, None) => None,
            (Some(batch_size), Some(hooks)) => {
                if weights.is_none() || !first.get().batches() {
                    return Err(config_error(
                        "mixing batches needs weights and datasets that batch (batch_size=1)",
                    ));
                }
                Some(Mix { batch_size, hooks: Arc::new(Hooks::from_py(&hooks)?) })
            }
            _ => return Err(config_error("mixing batches needs mix_batch_size and mix_hooks")),
        };
        let spec = CombinedSpec { children, weights, mix, worker_config };
        // The settings are checked now, as for one dataset.
        spec.pipelines().map_err(|e| to_py_err(&e))?;
        Ok(spec)
    }

    /// Makes the item of a loader's restore key again (see `_DatasetSpec.restore_item`).
    fn restore_item(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        crate::loader::restore_item(py, key, &self.all_hooks(), |key| {
            let worker = key_worker(key, &self.worker_config)?;
            Ok(match self.pipelines()? {
                Pipelines::Samples(mut p) => Raw::Sample(restore_in(&mut p[worker], key)?),
                Pipelines::Batches(mut p) => Raw::Batch(restore_in(&mut p[worker], key)?),
            })
        })
    }
}

impl CombinedSpec {
    /// Whether the loader batches (the datasets batch).
    fn batches(&self) -> bool {
        self.children[0].get().batches()
    }

    /// Every local worker's combined pipeline.
    fn pipelines(&self) -> energon_cook::Result<Pipelines> {
        let stats = FailureStats::default();
        let mut samples = Vec::new();
        let mut batches = Vec::new();
        for child in &self.children {
            match child.get().pipelines(&stats)? {
                Pipelines::Samples(p) => samples.push(p),
                Pipelines::Batches(p) => batches.push(p),
            }
        }
        let weights = self.weights.as_deref();
        if let (Some(mix), Some(weights)) = (&self.mix, weights) {
            let hooks = Arc::clone(&mix.hooks);
            let f: MixFn<WorkerBatch, WorkerBatch> = Arc::new(move |batches, ctx| {
                Ok(hooks.batch_objects(batches, batch_to_py, ctx)?.map(WorkerBatch::Py))
            });
            let mix = MixBatch {
                batch_size: mix.batch_size,
                mix: f,
                policy: mix.hooks.error_policy(),
                stats,
            };
            return Ok(Pipelines::Batches(mix_batch_pipelines(
                batches,
                weights,
                mix,
                &self.worker_config,
            )?));
        }
        Ok(if batches.is_empty() {
            Pipelines::Samples(combine_pipelines(samples, weights, &self.worker_config)?)
        } else {
            Pipelines::Batches(combine_pipelines(batches, weights, &self.worker_config)?)
        })
    }
}

/// A blended batch as the mixing function gets it: collated batches become their Python
/// batch, with their key.
fn batch_to_py<'py>(
    conv: &Converter<'py>,
    batch: Keyed<WorkerBatch>,
) -> PyResult<Bound<'py, PyAny>> {
    match batch.value {
        WorkerBatch::Collated(collated) => collated.with_key(batch.restore_key).into_py(conv),
        WorkerBatch::Py(obj) => Ok(obj.into_bound(conv.py())),
        WorkerBatch::Failed(message) => Err(LoaderError::new_err(message)),
    }
}

impl CombinedSpec {
    /// How the combined loader starts: what its checkpoints record (every dataset's
    /// configuration, the weights and the mixing), and the state to continue from.
    fn loader_start(
        &self,
        prefetch_factor: usize,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<LoaderStart> {
        let mut config = PipelineConfig::default();
        for (i, child) in self.children.iter().enumerate() {
            for (key, value) in child.get().config()?.0 {
                config.insert(format!("combined.{i}.{key}"), value);
            }
        }
        config.insert("combined.weights", format!("{:?}", self.weights));
        if let Some(mix) = &self.mix {
            config.insert("combined.mix_batch_size", mix.batch_size);
        }
        let mut start = LoaderStart::new(self.worker_config);
        start.config = config;
        start.prefetch_factor = prefetch_factor;
        start.restore = restore;
        Ok(start)
    }
}

impl LoaderSource for CombinedSpec {
    fn all_hooks(&self) -> Vec<Arc<Hooks>> {
        let children = self.children.iter().map(|c| Arc::clone(c.get().hooks()));
        children.chain(self.mix.iter().map(|m| Arc::clone(&m.hooks))).collect()
    }

    fn worker_config(&self) -> WorkerConfig {
        self.worker_config
    }

    fn start(
        &self,
        prefetch_factor: usize,
        worker: Option<usize>,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<RustLoader> {
        let Some(w) = worker else {
            let start = self.loader_start(prefetch_factor, restore)?;
            return Ok(match self.pipelines()? {
                Pipelines::Samples(p) => RustLoader::Samples(start.start(p)?),
                Pipelines::Batches(p) => RustLoader::Batches(start.start(p)?),
            });
        };
        // One worker's pipeline in this thread, from its start (a torch DataLoader worker
        // process, which saves no state).
        if restore.is_some() {
            return Err(energon_cook::Error::InvalidSetting {
                setting: "restore",
                value: "a saved state".to_owned(),
                reason: "one worker's pipeline on its own starts fresh",
            });
        }
        let one = LoaderConfig::new(0, prefetch_factor);
        Ok(match self.pipelines()? {
            Pipelines::Samples(mut p) if w < p.len() => {
                RustLoader::Samples(Loader::new(vec![p.swap_remove(w)], one)?)
            }
            Pipelines::Batches(mut p) if w < p.len() => {
                RustLoader::Batches(Loader::new(vec![p.swap_remove(w)], one)?)
            }
            _ => {
                return Err(energon_cook::Error::InvalidSetting {
                    setting: "worker",
                    value: w.to_string(),
                    reason: "must be below the number of workers (max(1, num_workers))",
                });
            }
        })
    }

    fn start_linked(
        &self,
        workers: Vec<ProcessWorker>,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<RustLoader> {
        let start = self.loader_start(1, restore)?;
        let hooks = &self.all_hooks()[0];
        let workers = workers.into_iter().enumerate();
        Ok(if self.batches() {
            let links = workers.map(|(w, p)| p.link(w, hooks, batch_item)).collect();
            RustLoader::Batches(start.start_linked(links)?)
        } else {
            let links = workers.map(|(w, p)| p.link(w, hooks, sample_item)).collect();
            RustLoader::Samples(start.start_linked(links)?)
        })
    }

    fn start_inline(&self, restore: Option<LoaderState>) -> energon_cook::Result<RustLoader> {
        let start = self.loader_start(1, restore)?;
        Ok(match self.pipelines()? {
            Pipelines::Samples(p) => {
                RustLoader::Samples(start.start_linked(inline_all(p, &start)?)?)
            }
            Pipelines::Batches(p) => {
                RustLoader::Batches(start.start_linked(inline_all(p, &start)?)?)
            }
        })
    }

    fn serve(
        &self,
        worker: usize,
        restore: Option<LoaderState>,
        send: &mut dyn FnMut(WorkerMessage<Raw>) -> bool,
    ) -> energon_cook::Result<()> {
        let start = self.loader_start(1, restore)?.worker_start(worker)?;
        let bad = || energon_cook::Error::InvalidSetting {
            setting: "worker",
            value: worker.to_string(),
            reason: "must be below the number of workers (max(1, num_workers))",
        };
        match self.pipelines()? {
            Pipelines::Samples(mut p) => {
                let pipeline = (worker < p.len()).then(|| p.swap_remove(worker)).ok_or_else(bad)?;
                serve_worker(pipeline, &start, 1, |m| send(map_message(m, Raw::Sample)));
            }
            Pipelines::Batches(mut p) => {
                let pipeline = (worker < p.len()).then(|| p.swap_remove(worker)).ok_or_else(bad)?;
                serve_worker(pipeline, &start, 1, |m| send(map_message(m, Raw::Batch)));
            }
        }
        Ok(())
    }
}

/// Every pipeline as a worker pulled in the loader's thread, from where `start` says.
fn inline_all<T: 'static>(
    pipelines: Vec<BoxStage<T>>,
    start: &LoaderStart,
) -> energon_cook::Result<Vec<Box<dyn WorkerLink<Keyed<T>>>>> {
    pipelines
        .into_iter()
        .enumerate()
        .map(|(w, p)| {
            Ok(Box::new(InlineWorker::new(p, start.worker_start(w)?, 1))
                as Box<dyn WorkerLink<Keyed<T>>>)
        })
        .collect()
}
