//! The loader: runs one pipeline per worker and hands out their items in a fixed round-robin
//! order (torch's `DataLoader` semantics, which the reference relies on).
//!
//! With `num_workers == 0` the single pipeline runs in the caller's thread. With `N` workers each
//! pipeline runs on a thread of its own, at most `prefetch_factor` items ahead, and the loader
//! takes worker 0's first item, worker 1's first, ..., worker 0's second, and so on, waiting for
//! the worker whose turn it is. So the order is a function of the pipelines alone: threads only
//! change *when* an item is ready, never which item comes next. A worker whose pass has ended is
//! skipped.

use std::{
    any::Any,
    thread::{self, JoinHandle},
};

use crossbeam_channel::Sender;
use energon_dist::WorkerConfig;

mod start;
mod worker;

pub use start::LoaderStart;
use worker::resume;
pub use worker::{InlineWorker, WorkerLink, WorkerMessage, WorkerStart, serve_worker};

use crate::{
    checkpoint::{LoaderState, PipelineConfig, WorkerState},
    error::{Error, Result},
    policy::FailureStats,
    stage::Stage,
    state::StageState,
};

/// How the loader runs the worker pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoaderConfig {
    /// Worker threads; 0 runs the single pipeline in the caller's thread.
    pub num_workers: usize,
    /// How many items each worker may have ready ahead of the consumer (at least 1; torch's
    /// default is 2).
    pub prefetch_factor: usize,
}

impl LoaderConfig {
    /// `num_workers` worker threads (0: the caller's thread), each preparing up to
    /// `prefetch_factor` items ahead.
    pub fn new(num_workers: usize, prefetch_factor: usize) -> Self {
        LoaderConfig { num_workers, prefetch_factor }
    }
}

impl Default for LoaderConfig {
    fn default() -> Self {
        LoaderConfig { num_workers: 0, prefetch_factor: 2 }
    }
}

/// An item as the loader hands it out, with the worker that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded<I> {
    /// The local worker id (0 without worker threads).
    pub worker: usize,
    /// The index of the item among those of its worker, over all passes and restores (the
    /// reference's `SavableDatasetWrapper._sample_index`, in its loader's restore keys).
    pub index: u64,
    /// The item (a batch, or a sample without batching).
    pub value: I,
}

/// Iterates the items of every worker pipeline in round-robin order: worker 0's first item,
/// worker 1's first, ..., worker 0's second, and so on, each worker at most `prefetch_factor`
/// items ahead; a worker whose pass has ended is skipped. The order depends on the pipelines
/// only, never on thread timing.
///
/// When every worker's pass has ended the iterator returns `None`; calling `next` again starts
/// the next pass (a new epoch of a loader with virtual epochs, or of a validation loader), as
/// iterating a torch `DataLoader` again does.
///
/// [`Loader::save_state`] saves the loader's position between two items exactly: each worker
/// reports the state of its pipeline after every item it hands over (every
/// `checkpoint_every`-th with [`LoaderBuilder::checkpoint_every`](crate::LoaderBuilder)), and
/// the state of the last item the consumer took is the worker's state, so a loader restored
/// from it yields exactly the items this one would have yielded next.
///
/// After an error (from a pipeline, or a worker thread that panicked) the loader yields nothing
/// more. Dropping the loader stops the worker threads.
pub struct Loader<I> {
    mode: Mode<I>,
    next_worker: usize,
    failed: bool,
    meta: Meta,
    stats: FailureStats,
}

/// What a checkpoint of the loader says besides the workers' states.
#[derive(Debug, Clone, Default)]
pub(crate) struct Meta {
    pub(crate) worker_config: Option<WorkerConfig>,
    pub(crate) micro_batch_size: Option<usize>,
    pub(crate) config: PipelineConfig,
}

/// Options of [`Loader::start`].
#[derive(Debug, Clone, Default)]
pub(crate) struct StartOptions {
    /// Report the pipeline's state every this many pulls (0: never; saves then replay).
    pub(crate) checkpoint_every: u64,
    /// Where each worker starts (empty: fresh pipelines).
    pub(crate) starts: Vec<WorkerStart>,
    /// The worker whose item comes first.
    pub(crate) next_worker: usize,
    pub(crate) meta: Meta,
    pub(crate) stats: FailureStats,
}

/// A worker's position as the consumer sees it.
#[derive(Debug, Clone, Default)]
struct Progress {
    /// Where the worker started.
    base: WorkerStart,
    /// Messages (items and ends of passes) taken from the worker since.
    consumed: u64,
    /// The newest state the worker reported, and after how many messages.
    snapshot: Option<(u64, StageState)>,
    /// The index of the worker's next item.
    items: u64,
}

impl Progress {
    /// Takes an item: its index.
    fn take_item(&mut self, state: Option<StageState>) -> u64 {
        self.take(state);
        self.items += 1;
        self.items - 1
    }

    fn take(&mut self, state: Option<StageState>) {
        self.consumed += 1;
        if let Some(state) = state {
            self.snapshot = Some((self.consumed, state));
        }
    }

    fn checkpoint(&self) -> (Option<StageState>, u64) {
        match &self.snapshot {
            Some((at, state)) => (Some(state.clone()), self.consumed - at),
            None => (self.base.state.clone(), self.base.replay + self.consumed),
        }
    }
}

enum Mode<I> {
    InProcess { pipeline: Box<dyn Stage<Item = I>>, progress: Box<Progress> },
    Workers { workers: Vec<WorkerSlot<I>> },
}

/// The index of a worker's first item after `start`: the items its saved state had handed out,
/// and those replayed after it.
fn first_item(start: &WorkerStart, replayed_items: u64) -> u64 {
    let saved = match &start.state {
        Some(StageState::Worker { index, .. }) => *index,
        _ => 0,
    };
    saved + replayed_items
}

/// A worker as the loader sees it: where its messages come from (a thread of its own, or a
/// link to a pipeline that runs elsewhere) and its position.
struct WorkerSlot<I> {
    link: Option<Box<dyn WorkerLink<I>>>,
    thread: Option<JoinHandle<()>>,
    exhausted: bool,
    progress: Progress,
}

impl<I: Send + 'static> Loader<I> {
    /// A loader over one pipeline per worker: exactly one for `num_workers == 0` (run in the
    /// caller's thread), else exactly `num_workers`, pipeline `w` being local worker `w`'s.
    ///
    /// Fails if the number of pipelines does not match, `prefetch_factor` is 0, or a thread cannot
    /// be started.
    pub fn new(pipelines: Vec<Box<dyn Stage<Item = I>>>, config: LoaderConfig) -> Result<Self> {
        let options = StartOptions { checkpoint_every: 1, ..StartOptions::default() };
        Loader::start(pipelines, config, options)
    }

    /// A loader over `pipelines` (built as those of the loader that saved `state`) that
    /// continues where `state` says: each pipeline's saved progress is restored and the items
    /// after it replayed, and the round robin continues with the saved next worker.
    ///
    /// The builders' `restore_state` does this after checking that the state was saved by a
    /// loader with the same configuration; this one trusts the caller.
    pub fn restored(
        pipelines: Vec<Box<dyn Stage<Item = I>>>,
        config: LoaderConfig,
        state: &LoaderState,
    ) -> Result<Self> {
        Loader::start(pipelines, config, StartOptions::of_state(state))
    }

    /// A loader whose workers start where `options` says.
    pub(crate) fn start(
        pipelines: Vec<Box<dyn Stage<Item = I>>>,
        config: LoaderConfig,
        options: StartOptions,
    ) -> Result<Self> {
        let n_pipelines = config.num_workers.max(1);
        if pipelines.len() != n_pipelines {
            return Err(Error::InvalidSetting {
                setting: "num_workers",
                value: config.num_workers.to_string(),
                reason: "needs one pipeline per worker (one without workers)",
            });
        }
        if config.prefetch_factor == 0 {
            return Err(Error::InvalidSetting {
                setting: "prefetch_factor",
                value: "0".into(),
                reason: "must be at least 1",
            });
        }
        let checkpoint_every = options.checkpoint_every;
        let (mut starts, next_worker) = options.checked_starts(n_pipelines)?;
        let StartOptions { meta, stats, .. } = options;
        let mut pipelines = pipelines;
        let mode = if config.num_workers == 0 {
            let mut pipeline = pipelines.pop().expect("exactly one pipeline");
            let start = starts.pop().expect("exactly one start");
            let replayed = resume(pipeline.as_mut(), &start)?;
            let items = first_item(&start, replayed);
            let progress = Box::new(Progress { base: start, items, ..Progress::default() });
            Mode::InProcess { pipeline, progress }
        } else {
            let mut workers = Vec::with_capacity(pipelines.len());
            for (worker, (pipeline, start)) in pipelines.into_iter().zip(starts).enumerate() {
                let (sender, receiver) = crossbeam_channel::bounded(config.prefetch_factor);
                let thread_start = start.clone();
                let thread = thread::Builder::new()
                    .name(format!("energon-worker-{worker}"))
                    .spawn(move || run_worker(pipeline, &thread_start, checkpoint_every, &sender))
                    .map_err(|source| Error::Spawn { worker, source })?;
                let mut slot = WorkerSlot::new(Box::new(receiver), start);
                slot.thread = Some(thread);
                workers.push(slot);
            }
            Mode::Workers { workers }
        };
        Ok(Loader { mode, next_worker, failed: false, meta, stats })
    }

    /// A loader whose workers' pipelines run elsewhere: `links[w]` receives local worker `w`'s
    /// messages (from a pipeline that starts where `options` says for `w`, such as one that
    /// [`serve_worker`] runs in another process, or an [`InlineWorker`]). The round robin, the
    /// restore keys' indices and the saved states are those of a loader with worker threads.
    pub(crate) fn linked(
        links: Vec<Box<dyn WorkerLink<I>>>,
        options: StartOptions,
    ) -> Result<Self> {
        if links.is_empty() {
            return Err(Error::InvalidSetting {
                setting: "workers",
                value: "0".into(),
                reason: "a linked loader needs at least one worker",
            });
        }
        let (starts, next_worker) = options.checked_starts(links.len())?;
        let StartOptions { meta, stats, .. } = options;
        let workers =
            links.into_iter().zip(starts).map(|(link, start)| WorkerSlot::new(link, start));
        let mode = Mode::Workers { workers: workers.collect() };
        Ok(Loader { mode, next_worker, failed: false, meta, stats })
    }
}

impl StartOptions {
    /// Where the workers of `state` start, with states after every item (as
    /// [`Loader::restored`] restores them).
    pub(crate) fn of_state(state: &LoaderState) -> Self {
        StartOptions {
            checkpoint_every: 1,
            starts: state
                .workers
                .iter()
                .map(|w| WorkerStart {
                    state: w.state.clone(),
                    replay: w.replay,
                    exhausted: w.exhausted,
                })
                .collect(),
            next_worker: state.next_worker,
            ..StartOptions::default()
        }
    }

    /// Every worker's start (fresh pipelines when none are given) and the first worker, checked
    /// against the number of workers.
    fn checked_starts(&self, n_workers: usize) -> Result<(Vec<WorkerStart>, usize)> {
        let mut starts = self.starts.clone();
        if starts.is_empty() {
            starts = vec![WorkerStart::default(); n_workers];
        }
        if starts.len() != n_workers || self.next_worker >= n_workers {
            return Err(Error::BadState {
                reason: format!(
                    "{} worker states (next worker {}) for {n_workers} workers",
                    starts.len(),
                    self.next_worker
                ),
            });
        }
        Ok((starts, self.next_worker))
    }
}

impl<I> WorkerSlot<I> {
    fn new(link: Box<dyn WorkerLink<I>>, start: WorkerStart) -> Self {
        WorkerSlot {
            link: Some(link),
            thread: None,
            exhausted: start.exhausted,
            progress: Progress { base: start, ..Progress::default() },
        }
    }
}

impl<I> Loader<I> {
    /// The number of pipelines (`max(1, num_workers)`).
    pub fn n_workers(&self) -> usize {
        match &self.mode {
            Mode::InProcess { .. } => 1,
            Mode::Workers { workers } => workers.len(),
        }
    }

    /// The reference's `global_worker_id()` of local worker `worker`, as its loader's restore
    /// keys hold it: `rank * num_workers + worker` (so 0 on every rank without worker threads).
    pub fn global_worker_id(&self, worker: usize) -> u64 {
        self.meta.worker_config.map_or(worker as u64, |c| crate::loader_worker_id(&c, worker))
    }

    /// Failures and skips of the task encoder's hooks so far, over all workers.
    pub fn failures(&self) -> &FailureStats {
        &self.stats
    }

    /// The state of this loader between the items it handed out and the next one (the
    /// reference's `save_state_rank`): a loader built the same way and restored from it
    /// (`LoaderBuilder::restore_state`) yields exactly the items this one yields next.
    ///
    /// Fails only without worker threads, when a stage cannot save its state and the items
    /// since the start cannot be replayed either (never for the builders' pipelines).
    pub fn save_state(&self) -> Result<LoaderState> {
        let workers: Vec<(Option<StageState>, u64, bool)> = match &self.mode {
            Mode::InProcess { pipeline, progress } => {
                let (state, replay) = match pipeline.state() {
                    Ok(state) => (Some(state), 0),
                    Err(_) => progress.checkpoint(),
                };
                vec![(state, replay, false)]
            }
            Mode::Workers { workers } => workers
                .iter()
                .map(|w| {
                    let (state, replay) = w.progress.checkpoint();
                    (state, replay, w.exhausted)
                })
                .collect(),
        };
        let cfg = self.meta.worker_config;
        let rank = cfg.map_or(0, |c| c.rank());
        let n_local = workers.len();
        Ok(LoaderState {
            rank,
            world_size: cfg.map_or(1, |c| c.world_size()),
            num_workers: cfg.map_or(if n_local == 1 { 0 } else { n_local }, |c| c.num_workers()),
            next_worker: self.next_worker,
            micro_batch_size: self.meta.micro_batch_size,
            workers: workers
                .into_iter()
                .enumerate()
                .map(|(local, (state, replay, exhausted))| WorkerState {
                    global_worker_id: rank * n_local + local,
                    state,
                    replay,
                    exhausted,
                })
                .collect(),
            config: self.meta.config.clone(),
            reshaped: None,
        })
    }
}

/// The body of a worker thread: restore, then pull and send (with the pipeline's state every
/// `every` pulls), until an error occurs or the loader is gone. A pass that ends is reported
/// and the next pass follows.
fn run_worker<I>(
    pipeline: Box<dyn Stage<Item = I>>,
    start: &WorkerStart,
    every: u64,
    sender: &Sender<WorkerMessage<I>>,
) {
    // A send fails only when the loader was dropped: nobody wants more items.
    serve_worker(pipeline, start, every, |message| sender.send(message).is_ok());
}

impl<I> Iterator for Loader<I> {
    type Item = Result<Loaded<I>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let res = match &mut self.mode {
            Mode::InProcess { pipeline, progress } => match pipeline.next() {
                Ok(Some(value)) => Ok(Loaded { worker: 0, index: progress.take_item(None), value }),
                Ok(None) => {
                    progress.take(None);
                    return None;
                }
                Err(err) => Err(err),
            },
            Mode::Workers { workers } => {
                let n_workers = workers.len();
                loop {
                    if workers.iter().all(|w| w.exhausted) {
                        // The pass of every worker ended: so does the loader's; the next call
                        // starts the next pass at worker 0.
                        for w in workers.iter_mut() {
                            w.exhausted = false;
                        }
                        self.next_worker = 0;
                        return None;
                    }
                    let worker = self.next_worker;
                    self.next_worker = (worker + 1) % n_workers;
                    let slot = &mut workers[worker];
                    if slot.exhausted {
                        continue;
                    }
                    let mut received = slot.link.as_mut().and_then(|link| link.recv());
                    if let Some(WorkerMessage::Resumed(replayed)) = received {
                        slot.progress.items = first_item(&slot.progress.base, replayed);
                        received = slot.link.as_mut().and_then(|link| link.recv());
                    }
                    match received {
                        Some(WorkerMessage::Item(value, state)) => {
                            let index = slot.progress.take_item(state);
                            break Ok(Loaded { worker, index, value });
                        }
                        Some(WorkerMessage::End(state)) => {
                            slot.progress.take(state);
                            slot.exhausted = true;
                        }
                        Some(WorkerMessage::Failed(err)) => break Err(err),
                        Some(WorkerMessage::Resumed(_)) => {
                            break Err(Error::BadState {
                                reason: format!("worker {worker} resumed twice"),
                            });
                        }
                        // The worker is gone without a word: its thread panicked (a link of
                        // another kind reports its own failures).
                        None => {
                            slot.exhausted = true;
                            let message = slot
                                .thread
                                .take()
                                .and_then(|t| t.join().err())
                                .map_or_else(|| "unknown".to_owned(), |p| panic_message(&*p));
                            break Err(Error::WorkerPanicked { worker, message });
                        }
                    }
                }
            }
        };
        if res.is_err() {
            self.failed = true;
        }
        Some(res)
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

impl<I> Drop for Loader<I> {
    fn drop(&mut self) {
        if let Mode::Workers { workers } = &mut self.mode {
            // Closing the links first makes every blocked `send` fail, so the threads end.
            for worker in workers.iter_mut() {
                worker.link = None;
            }
            for worker in workers.iter_mut() {
                if let Some(thread) = worker.thread.take() {
                    // A panic was already reported (or nobody asked for that worker's item).
                    let _ = thread.join();
                }
            }
        }
    }
}

impl<I> std::fmt::Debug for Loader<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("n_workers", &self.n_workers())
            .field("next_worker", &self.next_worker)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
