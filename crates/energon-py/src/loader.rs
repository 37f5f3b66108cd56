//! The native loader `_Loader`: energon-cook's loader (worker threads, round robin) behind a
//! Python iterator that waits with the GIL released and answers Ctrl-C.
//!
//! A pump thread owns the Rust loader. It pulls items in the loader's order (every Python hook,
//! the batch hooks included, ran on the worker threads; batches of Rust samples were collated
//! there) and hands them over a channel of one slot, each with the loader's state
//! after it when the loader is savable: the pump reads ahead, so the state that `save_state`
//! returns is the one that came with the last item Python took. `__next__` waits on that
//! channel with the GIL released, waking every 100 ms to let Python deliver signals, and
//! converts the item into Python objects (the numpy arrays take the Rust buffers over, without
//! a copy).
//!
//! Fork safety: a loader records the process that made it. In a forked child (a torch
//! `DataLoader` worker) its threads do not exist, so it refuses to iterate and, when dropped,
//! leaks its handles instead of joining threads that are not there. Children build their own
//! loaders; forking in the middle of an iteration is not supported.

use std::{
    path::Path,
    sync::Arc,
    thread::{self, JoinHandle},
    time::Duration,
};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use energon_cook::{
    Keyed, Loaded, Loader, LoaderState, LoaderWrapper, RestoreKey, WorkerMessage,
    checkpoint::{Checkpoint, Encoding},
    loader_worker_id,
};
use energon_reader::Sample;
use pyo3::{
    exceptions::PyAttributeError,
    prelude::*,
    types::{PyBytes, PyDict},
};

use crate::{
    combined::CombinedSpec,
    convert::{Converter, key_from_py},
    dataset::DatasetSpec,
    encoder::WorkerBatch,
    errors::{LoaderError, to_py_err},
    hooks::{Hooks, Item},
    sample::{Collated, sample_to_py},
    workers::ProcessWorker,
};

/// How often a waiting `__next__` lets Python handle signals (Ctrl-C).
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// The Rust loader of a dataset: samples, or batches.
pub(crate) enum RustLoader {
    Samples(Loader<Keyed<Item>>),
    Batches(Loader<Keyed<WorkerBatch>>),
}

/// An item as the Rust loader yields it.
#[expect(
    clippy::large_enum_variant,
    reason = "an item is made once and moved a few times; boxing would add an allocation"
)]
pub(crate) enum Raw {
    Sample(Keyed<Item>),
    Batch(Keyed<WorkerBatch>),
}

/// How the restore keys of a loader's items start, as the reference's loader makes them: its
/// wrapper, and the global worker id of a worker whose pipeline runs alone (torch `DataLoader`
/// worker processes); else the loader knows each item's worker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyPrefix {
    pub(crate) wrapper: LoaderWrapper,
    pub(crate) worker: Option<u64>,
}

impl KeyPrefix {
    /// The item of `loaded` with the loader's restore key.
    fn apply<T, L>(self, loader: &Loader<L>, loaded: Loaded<Keyed<T>>) -> Keyed<T> {
        let worker = self.worker.unwrap_or_else(|| loader.global_worker_id(loaded.worker));
        let Keyed { restore_key, value } = loaded.value;
        Keyed { restore_key: restore_key.of_loader(self.wrapper, worker, loaded.index), value }
    }
}

impl RustLoader {
    /// The next item, with the loader's restore key; `None` at the end of a pass (the call
    /// after it starts the next pass).
    fn next(&mut self, prefix: KeyPrefix) -> Option<energon_cook::Result<Raw>> {
        match self {
            RustLoader::Samples(l) => {
                l.next().map(|r| r.map(|loaded| Raw::Sample(prefix.apply(l, loaded))))
            }
            RustLoader::Batches(l) => {
                l.next().map(|r| r.map(|loaded| Raw::Batch(prefix.apply(l, loaded))))
            }
        }
    }

    /// The state between the items handed out and the next one.
    fn save_state(&self) -> energon_cook::Result<LoaderState> {
        match self {
            RustLoader::Samples(l) => l.save_state(),
            RustLoader::Batches(l) => l.save_state(),
        }
    }
}

/// An item ready for conversion, or why the iteration ended.
#[expect(
    clippy::large_enum_variant,
    reason = "an item is made once and moved a few times; boxing would add an allocation"
)]
pub(crate) enum Prepared {
    Sample(Keyed<Sample>),
    Collated(Collated),
    /// A sample (or batch) a Python hook made, and the loader's restore key for it.
    PySample(Keyed<Py<PyAny>>),
    /// The end of a pass.
    End,
    Failed(energon_cook::Error),
    FailedBatch(String),
}

/// What the pump sends: a prepared item and, for a savable loader, the loader's state after it.
type Message = (Prepared, Option<LoaderState>);

/// Iterates a dataset's loader (all workers of this rank, or one worker's pipeline).
#[pyclass(name = "_Loader", module = "energon_rs._native", weakref)]
pub(crate) struct PyLoader {
    receiver: Option<Receiver<Message>>,
    /// Tells the pump, after the end of a pass, to start the next one.
    next_pass: Option<Sender<()>>,
    /// Whether the last message was the end of a pass.
    ended: bool,
    pump: Option<JoinHandle<()>>,
    /// The hooks of the pipeline (of every combined dataset's).
    hooks: Vec<Arc<Hooks>>,
    pid: u32,
    rank: usize,
    /// The loader's state after the last item handed to Python (savable loaders only).
    state: Option<LoaderState>,
    /// The sockets of its worker processes: shut down on close, so that the pump's wait on a
    /// worker returns.
    sockets: Vec<std::os::unix::net::UnixStream>,
    /// The Python object that started the worker processes (`energon_rs.workers.ProcessWorkers`):
    /// kept while the loader lives (whoever holds only the iterator), closed with it.
    processes: Option<Py<PyAny>>,
    /// The worker process whose item the loader waits for now, if any.
    waiting: crate::workers::Waiting,
}

#[pymethods]
impl PyLoader {
    /// Starts the loader of `spec`: with `worker` unset, the rank's loader with its worker
    /// threads; with `worker = w`, only local worker `w`'s pipeline, in this process (for torch
    /// `DataLoader` worker processes); with `processes` (an `energon_rs.workers.ProcessWorkers`,
    /// whose `links()` gives a `(socket fd, pid)` per local worker), the rank's loader over worker
    /// processes that serve their pipelines (`serve_worker`), which `close` ends;
    /// with `inline`, the rank's loader pulling every worker's pipeline in its own thread. A
    /// `savable` loader keeps its state after every item (`save_state`); `restore` is a state
    /// it saved (`save_state`'s bytes), to continue from.
    #[new]
    #[pyo3(signature = (
        spec, *, prefetch_factor = 2, worker = None, savable = false, restore = None,
        processes = None, inline = false
    ))]
    #[expect(clippy::too_many_arguments, reason = "the keyword arguments of a Python constructor")]
    fn new(
        py: Python<'_>,
        spec: &Bound<'_, PyAny>,
        prefetch_factor: usize,
        worker: Option<usize>,
        savable: bool,
        restore: Option<&[u8]>,
        processes: Option<Py<PyAny>>,
        inline: bool,
    ) -> PyResult<Self> {
        let spec = source_of(spec)?;
        let hooks = spec.all_hooks();
        let config = spec.worker_config();
        let rank = config.rank();
        let prefix = KeyPrefix {
            wrapper: LoaderWrapper::of(savable, config.num_workers()),
            worker: worker.map(|w| loader_worker_id(&config, w)),
        };
        let restore = restore.map(|bytes| rank_state(bytes, rank)).transpose()?;
        let waiting = crate::workers::Waiting::new((-1).into());
        let workers = match &processes {
            Some(processes) => {
                let links: Vec<(i32, i32)> = processes.bind(py).call_method0("links")?.extract()?;
                let workers =
                    links.into_iter().map(|(fd, pid)| ProcessWorker::new(fd, pid, &waiting));
                Some(workers.collect::<PyResult<Vec<_>>>()?)
            }
            None => None,
        };
        let sockets = workers
            .iter()
            .flatten()
            .map(|w| w.stream.try_clone())
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| to_py_err(&e))?;
        let source = py
            .detach(|| match (workers, inline) {
                (Some(workers), _) => spec.start_linked(workers, restore),
                (None, true) => spec.start_inline(restore),
                (None, false) => spec.start(prefetch_factor, worker, restore),
            })
            .map_err(|e| to_py_err(&e))?;
        let state =
            if savable { Some(source.save_state().map_err(|e| to_py_err(&e))?) } else { None };
        let (sender, receiver) = crossbeam_channel::bounded(1);
        let (next_pass, next_pass_receiver) = crossbeam_channel::bounded(1);
        let pump = thread::Builder::new()
            .name("energon-pump".to_owned())
            .spawn(move || pump(source, prefix, savable, &sender, &next_pass_receiver))
            .map_err(|e| to_py_err(&e))?;
        Ok(PyLoader {
            receiver: Some(receiver),
            next_pass: Some(next_pass),
            ended: false,
            pump: Some(pump),
            hooks,
            pid: std::process::id(),
            rank,
            state,
            sockets,
            processes,
            waiting,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next item; blocks with the GIL released; `KeyboardInterrupt` (or any signal handler's
    /// exception) interrupts the wait. The end of a pass ends the iteration; iterating again
    /// continues with the next pass.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if std::process::id() != self.pid {
            return Err(LoaderError::new_err(
                "this loader was started in another process (before a fork); build a new one \
                 in this process",
            ));
        }
        let Some(receiver) = &self.receiver else { return Ok(None) };
        if std::mem::take(&mut self.ended) {
            // The pump waits for this before it starts the next pass; it is gone if it failed.
            if let Some(next_pass) = &self.next_pass {
                let _ = next_pass.send(());
            }
        }
        let (prepared, state) = loop {
            match py.detach(|| receiver.recv_timeout(SIGNAL_CHECK_INTERVAL)) {
                Ok(message) => break message,
                Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        };
        if state.is_some() {
            self.state = state;
        }
        let res = to_python(py, prepared, &self.hooks);
        if res.is_err() {
            // A failed loader yields nothing more: its worker processes may end now.
            self.shutdown_sockets();
        }
        let res = res?;
        self.ended = res.is_none();
        Ok(res)
    }

    /// The loader's state between the items handed out so far and the next one, as the bytes of
    /// a one-rank checkpoint (the format `energon checkpoint` reads); restoring it re-reads only
    /// the items buffered in the pipeline, never those before.
    fn save_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let Some(state) = &self.state else {
            return Err(LoaderError::new_err("this loader was not started as a savable loader"));
        };
        let bytes = Checkpoint::of_rank(state.clone())
            .to_bytes(Encoding::Binary)
            .map_err(|e| to_py_err(&e))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Which worker process the loader waits for (read while an iteration waits, from another
    /// thread: the watchdog's).
    #[getter]
    fn waiting(&self) -> WaitingOn {
        WaitingOn(std::sync::Arc::clone(&self.waiting))
    }

    /// The rank whose state this loader saves.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// Stops the workers, threads or processes (also done when the loader is garbage
    /// collected).
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.shutdown_sockets();
        self.sockets.clear();
        let pump = self.pump.take();
        // Without the channels the pump's next send, or its wait for the next pass, fails.
        self.receiver = None;
        self.next_pass = None;
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
        if let Some(processes) = self.processes.take()
            && std::process::id() == self.pid
        {
            processes.bind(py).call_method0("close")?;
        }
        Ok(())
    }
}

/// The worker process a loader waits for now, readable while the loader is iterated.
#[pyclass(name = "_WaitingOn", module = "energon_rs._native", frozen)]
pub(crate) struct WaitingOn(crate::workers::Waiting);

#[pymethods]
impl WaitingOn {
    /// The local worker (`None`: the loader waits for none, or its workers are threads).
    #[getter]
    fn worker(&self) -> Option<usize> {
        usize::try_from(self.0.load(std::sync::atomic::Ordering::Relaxed)).ok()
    }
}

impl PyLoader {
    /// Shuts the worker processes' sockets down: the pump's wait on one returns, and the
    /// workers see the end of their socket and stop.
    fn shutdown_sockets(&self) {
        // A forked copy of the loader must leave the sockets, which are its parent's, alone.
        if std::process::id() == self.pid {
            for socket in &self.sockets {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Drop for PyLoader {
    fn drop(&mut self) {
        if self.pump.is_some() || self.processes.is_some() {
            Python::attach(|py| {
                // A loader is often dropped while its own exception propagates (the `for` loop
                // that iterated it lets go of it): closing calls into Python, which must not
                // see, or clear, that pending exception.
                let pending = PyErr::take(py);
                if let Err(err) = self.close(py) {
                    err.write_unraisable(py, None);
                }
                if let Some(err) = pending {
                    err.restore(py);
                }
            });
        }
    }
}

/// A prepared item as a Python object; `None` at the end of a pass.
pub(crate) fn to_python(
    py: Python<'_>,
    prepared: Prepared,
    hooks: &[Arc<Hooks>],
) -> PyResult<Option<Py<PyAny>>> {
    let conv = Converter::new(py, hooks[0].output())?;
    let res = match prepared {
        Prepared::Sample(Keyed { restore_key, value }) => {
            sample_to_py(&conv, value, Some(&restore_key))?
        }
        Prepared::Collated(collated) => collated.into_py(&conv)?,
        Prepared::PySample(Keyed { restore_key, value }) => {
            let obj = value.into_bound(py);
            set_restore_key(&obj, conv.restore_key(&restore_key)?.into_any())?;
            obj
        }
        Prepared::End => return Ok(None),
        Prepared::Failed(err) => {
            let failure = hooks.iter().find_map(|h| h.take_failure());
            return Err(failure.unwrap_or_else(|| to_py_err(&err)));
        }
        Prepared::FailedBatch(message) => return Err(LoaderError::new_err(message)),
    };
    Ok(Some(res.unbind()))
}

/// Makes the item of a loader's restore key (`key`, a tuple as the loader's items carry it)
/// again, as the reference's `loader.restore_sample` does: energon-cook re-runs the worker's
/// stages for it in this thread, the Python batch hooks included.
pub(crate) fn restore_item(
    py: Python<'_>,
    key: &Bound<'_, PyAny>,
    hooks: &[Arc<Hooks>],
    restore: impl FnOnce(&RestoreKey) -> energon_cook::Result<Raw> + Send,
) -> PyResult<Py<PyAny>> {
    let key = key_from_py(key)?;
    let prepared = py.detach(|| prepare(restore(&key)));
    Ok(to_python(py, prepared, hooks)?.expect("an item"))
}

/// The rank, number of ranks and workers per rank a checkpoint's (one rank's) bytes were saved
/// with.
#[pyfunction]
pub(crate) fn checkpoint_topology(bytes: &[u8]) -> PyResult<(usize, usize, usize)> {
    let checkpoint =
        Checkpoint::from_bytes(bytes, Path::new("<loader state>")).map_err(|e| to_py_err(&e))?;
    let state = checkpoint.ranks.first().ok_or_else(|| {
        to_py_err(&energon_cook::Error::BadState { reason: "a state of no rank".to_owned() })
    })?;
    Ok((state.rank, state.world_size, state.num_workers))
}

/// The one-rank checkpoints of every rank of a job, spread over `new_world_size` ranks of
/// `new_num_workers` workers each (`Checkpoint::reshape`): one rank's checkpoint per new rank.
#[pyfunction]
pub(crate) fn reshape_checkpoints<'py>(
    py: Python<'py>,
    states: Vec<Vec<u8>>,
    new_world_size: usize,
    new_num_workers: usize,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let mut ranks = Vec::with_capacity(states.len());
    for bytes in &states {
        let checkpoint = Checkpoint::from_bytes(bytes, Path::new("<loader state>"))
            .map_err(|e| to_py_err(&e))?;
        ranks.extend(checkpoint.ranks);
    }
    let reshaped = Checkpoint { ranks }
        .reshape(new_world_size, Some(new_num_workers))
        .map_err(|e| to_py_err(&e))?;
    reshaped
        .ranks
        .into_iter()
        .map(|state| {
            let bytes = Checkpoint::of_rank(state).to_bytes(Encoding::Binary);
            Ok(PyBytes::new(py, &bytes.map_err(|e| to_py_err(&e))?))
        })
        .collect()
}

/// What a native loader runs: one dataset's pipeline, or datasets combined.
pub(crate) trait LoaderSource: Sync {
    /// The hooks of every dataset in the pipeline (the first one's convert the items).
    fn all_hooks(&self) -> Vec<Arc<Hooks>>;
    /// The worker configuration.
    fn worker_config(&self) -> energon_dist::WorkerConfig;
    /// Starts the rank's loader (or only local worker `worker`'s pipeline), continuing from
    /// `restore` if given.
    fn start(
        &self,
        prefetch_factor: usize,
        worker: Option<usize>,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<RustLoader>;
    /// Starts the rank's loader over worker processes (one per local worker, each serving its
    /// pipeline with [`LoaderSource::serve`]), continuing from `restore` if given.
    fn start_linked(
        &self,
        workers: Vec<ProcessWorker>,
        restore: Option<LoaderState>,
    ) -> energon_cook::Result<RustLoader>;
    /// Starts the rank's loader pulling every worker's pipeline in its own thread, in turn.
    fn start_inline(&self, restore: Option<LoaderState>) -> energon_cook::Result<RustLoader>;
    /// Runs local worker `worker`'s pipeline (restored from `restore` if given), handing its
    /// messages to `send` until it fails or `send` returns `false`.
    fn serve(
        &self,
        worker: usize,
        restore: Option<LoaderState>,
        send: &mut dyn FnMut(WorkerMessage<Raw>) -> bool,
    ) -> energon_cook::Result<()>;
}

/// The loader source a `_DatasetSpec` or `_CombinedSpec` is.
pub(crate) fn source_of<'a>(spec: &'a Bound<'_, PyAny>) -> PyResult<&'a dyn LoaderSource> {
    Ok(match spec.cast::<DatasetSpec>() {
        Ok(spec) => spec.get(),
        Err(_) => spec.cast::<CombinedSpec>()?.get(),
    })
}

/// `message` with its item changed by `f`.
pub(crate) fn map_message<A, B>(
    message: WorkerMessage<A>,
    f: impl FnOnce(A) -> B,
) -> WorkerMessage<B> {
    match message {
        WorkerMessage::Resumed(n) => WorkerMessage::Resumed(n),
        WorkerMessage::Item(item, state) => WorkerMessage::Item(f(item), state),
        WorkerMessage::End(state) => WorkerMessage::End(state),
        WorkerMessage::Failed(err) => WorkerMessage::Failed(err),
    }
}

/// The state of `rank` in a checkpoint's bytes.
pub(crate) fn rank_state(bytes: &[u8], rank: usize) -> PyResult<LoaderState> {
    let checkpoint =
        Checkpoint::from_bytes(bytes, Path::new("<loader state>")).map_err(|e| to_py_err(&e))?;
    let state = checkpoint.rank(rank).cloned().ok_or_else(|| {
        to_py_err(&energon_cook::Error::BadState {
            reason: format!("the state holds no state of rank {rank}"),
        })
    })?;
    Ok(state)
}

/// The pump thread: pulls, prepares and sends items until the loader fails, or nobody listens
/// any more; the end of a pass is sent as such, and the next pass starts when Python iterates
/// again (`next_pass`), so that nothing of it is read before (the error handler would see it).
fn pump(
    mut source: RustLoader,
    prefix: KeyPrefix,
    savable: bool,
    sender: &Sender<Message>,
    next_pass: &Receiver<()>,
) {
    loop {
        let prepared = match source.next(prefix) {
            None => {
                let state = if savable { source.save_state().ok() } else { None };
                if sender.send((Prepared::End, state)).is_err() || next_pass.recv().is_err() {
                    return;
                }
                continue;
            }
            Some(item) => prepare(item),
        };
        let last = matches!(prepared, Prepared::Failed(_) | Prepared::FailedBatch(_));
        let state = if savable && !last {
            match source.save_state() {
                Ok(state) => Some(state),
                Err(err) => {
                    let _ = sender.send((Prepared::Failed(err), None));
                    return;
                }
            }
        } else {
            None
        };
        // A send fails only when the Python loader is gone.
        if sender.send((prepared, state)).is_err() || last {
            return;
        }
    }
}

/// Prepares one item for conversion.
pub(crate) fn prepare(item: energon_cook::Result<Raw>) -> Prepared {
    match item {
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
            // The batch gets the batch stage's restore key, as the reference's batch stage sets
            // it on what its batcher returns.
            WorkerBatch::Py(obj) => Prepared::PySample(Keyed { restore_key, value: obj }),
        },
    }
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
