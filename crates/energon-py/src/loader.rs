//! The native loader `_Loader`: the Rust loader (worker threads, round robin) behind a Python
//! iterator that waits with the GIL released and answers Ctrl-C.
//!
//! A pump thread owns the Rust loader. It pulls items in the loader's order, collates batches
//! (off the GIL) or runs the Python batch hooks, and hands the results over a channel of one
//! slot. `__next__` waits on that channel with the GIL released, waking every 100 ms to let
//! Python deliver signals, and converts the item into Python objects (the numpy arrays take the
//! Rust buffers over, without a copy).
//!
//! Fork safety: a loader records the process that made it. In a forked child (a torch
//! `DataLoader` worker) its threads do not exist, so it refuses to iterate and, when dropped,
//! leaks its handles instead of joining threads that are not there. Children build their own
//! loaders; forking in the middle of an iteration is not supported.

use std::{
    sync::Arc,
    thread::{self, JoinHandle},
    time::Duration,
};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use energon_cook::{Batch, Batcher, Keyed, Loaded, Loader, LoaderConfig, Map, Stage};
use energon_reader::Sample;
use pyo3::{exceptions::PyAttributeError, prelude::*, types::PyDict};

use crate::{
    convert::Converter,
    dataset::DatasetSpec,
    errors::{LoaderError, to_py_err},
    hooks::{Hooks, Item},
    sample::{Collated, sample_to_py},
};

/// How often a waiting `__next__` lets Python handle signals (Ctrl-C).
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// An item as the Rust loader yields it.
#[expect(
    clippy::large_enum_variant,
    reason = "an item is made once and moved a few times; boxing would add an allocation"
)]
enum Raw {
    Sample(Keyed<Item>),
    Batch(Keyed<WorkerBatch>),
}

/// A batch as a worker thread leaves it: collated in Rust (in parallel across workers), or its
/// items for the Python batch hooks.
enum WorkerBatch {
    Collated(Collated),
    Items(Batch<Item>),
    Failed(String),
}

impl WorkerBatch {
    fn new(batch: Batch<Item>, hooks: &Hooks) -> Self {
        let all_rust = batch.samples.iter().all(|s| matches!(s.value, Item::Rust(_)));
        if !all_rust || hooks.has_batch_hooks() {
            return WorkerBatch::Items(batch);
        }
        let samples = batch
            .samples
            .into_iter()
            .filter_map(|k| match k.value {
                Item::Rust(s) => Some(Keyed { restore_key: k.restore_key, value: s }),
                Item::Py(_) => None,
            })
            .collect();
        match Collated::new(Batch { samples }) {
            Ok(collated) => WorkerBatch::Collated(collated),
            Err(message) => WorkerBatch::Failed(message),
        }
    }
}

type RawIter = Box<dyn Iterator<Item = energon_cook::Result<Raw>> + Send>;

/// An item ready for conversion, or why the iteration ended.
#[expect(
    clippy::large_enum_variant,
    reason = "an item is made once and moved a few times; boxing would add an allocation"
)]
enum Prepared {
    Sample(Keyed<Sample>),
    Collated(Collated),
    Py(Py<PyAny>),
    /// A sample a Python hook made, and the loader's restore key for it.
    PySample(Keyed<Py<PyAny>>),
    Failed(energon_cook::Error),
    FailedPy(PyErr),
    FailedBatch(String),
}

/// Iterates a dataset's loader (all workers of this rank, or one worker's pipeline).
#[pyclass(name = "_Loader", module = "energon_rs._native", weakref)]
pub(crate) struct PyLoader {
    receiver: Option<Receiver<Prepared>>,
    pump: Option<JoinHandle<()>>,
    hooks: Arc<Hooks>,
    pid: u32,
}

#[pymethods]
impl PyLoader {
    /// Starts the loader of `spec`: with `worker` unset, the rank's loader with its worker
    /// threads; with `worker = w`, only local worker `w`'s pipeline, in this process (for torch
    /// `DataLoader` worker processes). The first `skip` items are dropped unconverted.
    #[new]
    #[pyo3(signature = (spec, *, prefetch_factor = 2, worker = None, skip = 0))]
    fn new(
        py: Python<'_>,
        spec: &Bound<'_, DatasetSpec>,
        prefetch_factor: usize,
        worker: Option<usize>,
        skip: u64,
    ) -> PyResult<Self> {
        let spec = spec.get();
        let hooks = Arc::clone(spec.hooks());
        let source =
            py.detach(|| build(spec, prefetch_factor, worker)).map_err(|e| to_py_err(&e))?;
        let (sender, receiver) = crossbeam_channel::bounded(1);
        let pump_hooks = Arc::clone(&hooks);
        let pump = thread::Builder::new()
            .name("energon-pump".to_owned())
            .spawn(move || pump(source, skip, &pump_hooks, &sender))
            .map_err(|e| to_py_err(&e))?;
        Ok(PyLoader { receiver: Some(receiver), pump: Some(pump), hooks, pid: std::process::id() })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next item; blocks with the GIL released; `KeyboardInterrupt` (or any signal handler's
    /// exception) interrupts the wait.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if std::process::id() != self.pid {
            return Err(LoaderError::new_err(
                "this loader was started in another process (before a fork); build a new one \
                 in this process",
            ));
        }
        let Some(receiver) = &self.receiver else { return Ok(None) };
        let prepared = loop {
            match py.detach(|| receiver.recv_timeout(SIGNAL_CHECK_INTERVAL)) {
                Ok(prepared) => break prepared,
                Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        };
        let conv = Converter::new(py, self.hooks.torch())?;
        let res = match prepared {
            Prepared::Sample(Keyed { restore_key, value }) => {
                sample_to_py(&conv, value, Some(&restore_key))?
            }
            Prepared::Collated(collated) => collated.into_py(&conv)?,
            Prepared::Py(obj) => obj.into_bound(py),
            Prepared::PySample(Keyed { restore_key, value }) => {
                let obj = value.into_bound(py);
                set_restore_key(&obj, conv.restore_key(&restore_key)?.into_any())?;
                obj
            }
            Prepared::Failed(err) => {
                return Err(self.hooks.take_failure().unwrap_or_else(|| to_py_err(&err)));
            }
            Prepared::FailedPy(err) => return Err(err),
            Prepared::FailedBatch(message) => return Err(LoaderError::new_err(message)),
        };
        Ok(Some(res.unbind()))
    }

    /// Stops the worker threads (also done when the loader is garbage collected).
    fn close(&mut self, py: Python<'_>) {
        let pump = self.pump.take();
        self.receiver = None;
        if let Some(pump) = pump {
            // Threads that wait for the GIL while the interpreter shuts down never get it, so
            // joining them then would hang the exit; the process is ending anyway.
            let finalizing = py
                .import("sys")
                .and_then(|sys| sys.call_method0("is_finalizing"))
                .and_then(|v| v.extract::<bool>())
                .unwrap_or(true);
            if std::process::id() == self.pid && !finalizing {
                // A panic of the pump thread was already reported as a failed item.
                let _ = py.detach(|| pump.join());
            } else {
                std::mem::forget(pump);
            }
        }
    }
}

impl Drop for PyLoader {
    fn drop(&mut self) {
        if self.pump.is_some() {
            Python::attach(|py| self.close(py));
        }
    }
}

/// Builds the Rust loader (or one worker's pipeline) of `spec` as an iterator of raw items: the
/// builder's per-worker pipelines, then (with a batch size) batches collated on the worker
/// threads, as `LoaderBuilder::build_batches` does with an identity `encode_batch`.
fn build(
    spec: &DatasetSpec,
    prefetch_factor: usize,
    worker: Option<usize>,
) -> energon_cook::Result<RawIter> {
    let mut pipelines = spec.sample_pipelines()?;
    let num_workers = match worker {
        None => spec.n_workers(),
        Some(worker) => {
            if worker >= pipelines.len() {
                return Err(energon_cook::Error::InvalidSetting {
                    setting: "worker",
                    value: worker.to_string(),
                    reason: "must be below the dataset's number of workers (max(1, num_workers))",
                });
            }
            pipelines = vec![pipelines.swap_remove(worker)];
            0
        }
    };
    let config = LoaderConfig { num_workers, prefetch_factor };
    let Some(batch_size) = spec.batch_size() else {
        let stages = pipelines.into_iter().map(|s| Box::new(s) as Box<dyn Stage<Item = _>>);
        return Ok(Box::new(Loader::new(stages.collect(), config)?.map(|r| r.map(sample_of))));
    };
    let mut stages: Vec<Box<dyn Stage<Item = Keyed<WorkerBatch>>>> = Vec::new();
    for stage in pipelines {
        let batches = Batcher::new(stage, batch_size, spec.drop_last())?;
        let hooks = Arc::clone(spec.hooks());
        // COMPAT(energon 7.4.1): the default task encoder's `encode_batch` map stage (it shows in
        // the restore keys); collating here keeps the copying on the worker threads.
        stages.push(Box::new(Map::new(batches, move |b| Ok(Some(WorkerBatch::new(b, &hooks))))));
    }
    Ok(Box::new(Loader::new(stages, config)?.map(|r| r.map(batch_of))))
}

fn sample_of(loaded: Loaded<Keyed<Item>>) -> Raw {
    Raw::Sample(loaded.value)
}

fn batch_of(loaded: Loaded<Keyed<WorkerBatch>>) -> Raw {
    Raw::Batch(loaded.value)
}

/// The pump thread: pulls, prepares and sends items until the loader ends, fails, or nobody
/// listens any more.
fn pump(source: RawIter, skip: u64, hooks: &Hooks, sender: &Sender<Prepared>) {
    let mut source = source;
    for _ in 0..skip {
        match source.next() {
            Some(Ok(_)) => {}
            Some(Err(err)) => {
                let _ = sender.send(Prepared::Failed(err));
                return;
            }
            None => return,
        }
    }
    for item in source {
        let Some(prepared) = prepare(item, hooks) else { continue };
        let last = matches!(
            prepared,
            Prepared::Failed(_) | Prepared::FailedPy(_) | Prepared::FailedBatch(_)
        );
        // A send fails only when the Python loader is gone.
        if sender.send(prepared).is_err() || last {
            return;
        }
    }
}

/// Prepares one item; `None` when a Python batch hook skipped it.
fn prepare(item: energon_cook::Result<Raw>, hooks: &Hooks) -> Option<Prepared> {
    Some(match item {
        Err(err) => Prepared::Failed(err),
        Ok(Raw::Sample(Keyed { restore_key, value: Item::Rust(sample) })) => {
            Prepared::Sample(Keyed { restore_key, value: sample })
        }
        Ok(Raw::Sample(Keyed { restore_key, value: Item::Py(obj) })) => {
            Prepared::PySample(Keyed { restore_key, value: obj })
        }
        Ok(Raw::Batch(Keyed { restore_key, value })) => match value {
            WorkerBatch::Collated(collated) => Prepared::Collated(collated.with_key(restore_key)),
            WorkerBatch::Failed(message) => Prepared::FailedBatch(message),
            WorkerBatch::Items(batch) => {
                let batch = Keyed { restore_key, value: batch };
                match Python::attach(|py| hooks.batch_py(py, batch)) {
                    Ok(Some(obj)) => Prepared::Py(obj),
                    Ok(None) => return None,
                    Err(err) => Prepared::FailedPy(err),
                }
            }
        },
    })
}

/// Sets the `__restore_key__` of a sample a hook made (a dataclass with that field, or a dict
/// with that key), as the reference's stages do with their outputs; other objects are left as
/// they are.
fn set_restore_key(obj: &Bound<'_, PyAny>, key: Bound<'_, PyAny>) -> PyResult<()> {
    const FIELD: &str = "__restore_key__";
    if let Ok(dict) = obj.cast::<PyDict>() {
        if dict.contains(FIELD)? {
            dict.set_item(FIELD, key)?;
        }
    } else if obj.hasattr(FIELD)? {
        match obj.setattr(FIELD, key) {
            // A frozen dataclass keeps its own key.
            Err(err) if err.is_instance_of::<PyAttributeError>(obj.py()) => {}
            res => res?,
        }
    }
    Ok(())
}
