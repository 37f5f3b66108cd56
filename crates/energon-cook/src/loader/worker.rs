//! A worker's side of the loader: running one pipeline and reporting its items, wherever the
//! pipeline runs (a thread of the loader, the caller's thread, or another process).
//!
//! The loader only sees [`WorkerMessage`]s through a [`WorkerLink`]: a channel from a worker
//! thread, a pipeline pulled in line, or a link that another process serves with
//! [`serve_worker`]. The round robin and the checkpoint bookkeeping are the loader's, the same
//! for every kind of worker, so the order and the saved states never depend on where the
//! pipelines run.

use crossbeam_channel::Receiver;
use serde::{Deserialize, Serialize};

use crate::{error::Result, stage::Stage, state::StageState};

/// Where a worker's pipeline starts: a saved state, the items to replay after it, and whether
/// its pass had already ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerStart {
    /// The pipeline's saved progress; `None`: a fresh pipeline.
    pub state: Option<StageState>,
    /// Pulls to make and drop after restoring `state`.
    pub replay: u64,
    /// The worker's pass had ended while the other workers' had not.
    pub exhausted: bool,
}

/// What a worker tells the loader.
#[derive(Debug)]
pub enum WorkerMessage<I> {
    /// The items replayed after restoring (the first message of every worker).
    Resumed(u64),
    /// An item, with the pipeline's state after it when the worker reports one.
    Item(I, Option<StageState>),
    /// The end of a pass, with the pipeline's state after it; the next pass follows.
    End(Option<StageState>),
    /// The pipeline failed; nothing follows.
    Failed(crate::Error),
}

/// How the loader receives one worker's messages, in the order the worker made them.
pub trait WorkerLink<I>: Send {
    /// The worker's next message, waiting for it; `None` when the worker is gone without a
    /// word (a thread that panicked).
    fn recv(&mut self) -> Option<WorkerMessage<I>>;
}

impl<I: Send> WorkerLink<I> for Receiver<WorkerMessage<I>> {
    fn recv(&mut self) -> Option<WorkerMessage<I>> {
        Receiver::recv(self).ok()
    }
}

/// Runs one worker's pipeline: restores it, then pulls, reporting the pipeline's state every
/// `every` pulls (0: never; the loader then replays).
pub(crate) struct WorkerRun<I> {
    pipeline: Box<dyn Stage<Item = I>>,
    every: u64,
    pulls: u64,
    savable: bool,
}

impl<I> WorkerRun<I> {
    pub(crate) fn new(pipeline: Box<dyn Stage<Item = I>>, every: u64) -> Self {
        WorkerRun { pipeline, every, pulls: 0, savable: every > 0 }
    }

    /// Restores `start`: the first message.
    pub(crate) fn resume(&mut self, start: &WorkerStart) -> WorkerMessage<I> {
        match resume(self.pipeline.as_mut(), start) {
            Ok(replayed) => WorkerMessage::Resumed(replayed),
            Err(err) => WorkerMessage::Failed(err),
        }
    }

    /// Pulls the next item (or the end of the pass, or the failure).
    pub(crate) fn pull(&mut self) -> WorkerMessage<I> {
        let res = self.pipeline.next();
        self.pulls += 1;
        let state = if self.savable && res.is_ok() && self.pulls.is_multiple_of(self.every) {
            // A stage that cannot save stays so: stop asking, the loader replays instead.
            self.pipeline.state().map_err(|_| self.savable = false).ok()
        } else {
            None
        };
        match res {
            Ok(Some(item)) => WorkerMessage::Item(item, state),
            Ok(None) => WorkerMessage::End(state),
            Err(err) => WorkerMessage::Failed(err),
        }
    }
}

/// Restores a pipeline's state and replays the pulls after it; returns the items among them.
pub(crate) fn resume<I>(pipeline: &mut dyn Stage<Item = I>, start: &WorkerStart) -> Result<u64> {
    if let Some(state) = &start.state {
        pipeline.restore(state)?;
    }
    let mut items = 0;
    for _ in 0..start.replay {
        if pipeline.next()?.is_some() {
            items += 1;
        }
    }
    Ok(items)
}

/// Serves one worker of a loader whose pipelines run elsewhere (another process): restores
/// `pipeline` at `start`, then hands every message to `send` (the pipeline's state after every
/// `every`-th pull), until the pipeline fails or `send` says nobody listens any more (`false`).
/// The loader at the other end receives them through its [`WorkerLink`]; the pipeline and
/// `start` come from the same builder's `batch_worker` or `sample_worker`.
pub fn serve_worker<I>(
    pipeline: Box<dyn Stage<Item = I>>,
    start: &WorkerStart,
    every: u64,
    mut send: impl FnMut(WorkerMessage<I>) -> bool,
) {
    let mut run = WorkerRun::new(pipeline, every);
    let mut message = run.resume(start);
    loop {
        let failed = matches!(message, WorkerMessage::Failed(_));
        if !send(message) || failed {
            return;
        }
        message = run.pull();
    }
}

/// A worker whose pipeline is pulled in the loader's own thread, when its turn comes (the
/// `"main"` worker type): no thread, no prefetch, the same order.
pub struct InlineWorker<I> {
    run: WorkerRun<I>,
    start: Option<WorkerStart>,
    failed: bool,
}

impl<I> std::fmt::Debug for InlineWorker<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineWorker")
            .field("started", &self.start.is_none())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl<I> InlineWorker<I> {
    /// The worker of `pipeline`, starting at `start` (see [`serve_worker`]).
    pub fn new(pipeline: Box<dyn Stage<Item = I>>, start: WorkerStart, every: u64) -> Self {
        InlineWorker { run: WorkerRun::new(pipeline, every), start: Some(start), failed: false }
    }
}

impl<I> WorkerLink<I> for InlineWorker<I> {
    fn recv(&mut self) -> Option<WorkerMessage<I>> {
        if self.failed {
            return None;
        }
        let message = match self.start.take() {
            Some(start) => self.run.resume(&start),
            None => self.run.pull(),
        };
        self.failed = matches!(message, WorkerMessage::Failed(_));
        Some(message)
    }
}
