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

use crossbeam_channel::{Receiver, Sender};

use crate::{
    error::{Error, Result},
    stage::Stage,
};

/// How the loader runs the worker pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderConfig {
    /// Worker threads; 0 runs the single pipeline in the caller's thread.
    pub num_workers: usize,
    /// How many items each worker may have ready ahead of the consumer (at least 1; torch's
    /// default is 2).
    pub prefetch_factor: usize,
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
    /// The item (a batch, or a sample without batching).
    pub value: I,
}

/// Iterates the items of one pass of every worker pipeline in round-robin order: worker 0's
/// first item, worker 1's first, ..., worker 0's second, and so on, each worker at most
/// `prefetch_factor` items ahead; a worker whose pass has ended is skipped. The order depends on
/// the pipelines only, never on thread timing.
///
/// After an error (from a pipeline, or a worker thread that panicked) the loader yields nothing
/// more. Dropping the loader stops the worker threads.
pub struct Loader<I> {
    mode: Mode<I>,
    next_worker: usize,
    failed: bool,
}

enum Mode<I> {
    InProcess { pipeline: Box<dyn Stage<Item = I>>, done: bool },
    Threads { workers: Vec<WorkerThread<I>> },
}

struct WorkerThread<I> {
    receiver: Option<Receiver<Message<I>>>,
    thread: Option<JoinHandle<()>>,
    exhausted: bool,
}

enum Message<I> {
    Item(I),
    End,
    Failed(Error),
}

impl<I: Send + 'static> Loader<I> {
    /// A loader over one pipeline per worker: exactly one for `num_workers == 0` (run in the
    /// caller's thread), else exactly `num_workers`, pipeline `w` being local worker `w`'s.
    ///
    /// Fails if the number of pipelines does not match, `prefetch_factor` is 0, or a thread cannot
    /// be started.
    pub fn new(pipelines: Vec<Box<dyn Stage<Item = I>>>, config: LoaderConfig) -> Result<Self> {
        if pipelines.len() != config.num_workers.max(1) {
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
        let mut pipelines = pipelines;
        let mode = if config.num_workers == 0 {
            let pipeline = pipelines.pop().ok_or(Error::InvalidSetting {
                setting: "num_workers",
                value: "0".into(),
                reason: "needs one pipeline",
            })?;
            Mode::InProcess { pipeline, done: false }
        } else {
            let mut workers = Vec::with_capacity(pipelines.len());
            for (worker, pipeline) in pipelines.into_iter().enumerate() {
                let (sender, receiver) = crossbeam_channel::bounded(config.prefetch_factor);
                let thread = thread::Builder::new()
                    .name(format!("energon-worker-{worker}"))
                    .spawn(move || run_worker(pipeline, &sender))
                    .map_err(|source| Error::Spawn { worker, source })?;
                workers.push(WorkerThread {
                    receiver: Some(receiver),
                    thread: Some(thread),
                    exhausted: false,
                });
            }
            Mode::Threads { workers }
        };
        Ok(Loader { mode, next_worker: 0, failed: false })
    }
}

impl<I> Loader<I> {
    /// The number of pipelines (`max(1, num_workers)`).
    pub fn n_workers(&self) -> usize {
        match &self.mode {
            Mode::InProcess { .. } => 1,
            Mode::Threads { workers } => workers.len(),
        }
    }
}

/// The body of a worker thread: pull, send, until the pass ends, an error occurs or the loader is
/// gone.
fn run_worker<I>(mut pipeline: Box<dyn Stage<Item = I>>, sender: &Sender<Message<I>>) {
    loop {
        let (message, last) = match pipeline.next() {
            Ok(Some(item)) => (Message::Item(item), false),
            Ok(None) => (Message::End, true),
            Err(err) => (Message::Failed(err), true),
        };
        // A send fails only when the loader was dropped: nobody wants more items.
        if sender.send(message).is_err() || last {
            return;
        }
    }
}

impl<I> Iterator for Loader<I> {
    type Item = Result<Loaded<I>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let res = match &mut self.mode {
            Mode::InProcess { pipeline, done } => {
                if *done {
                    return None;
                }
                match pipeline.next() {
                    Ok(Some(value)) => Ok(Loaded { worker: 0, value }),
                    Ok(None) => {
                        *done = true;
                        return None;
                    }
                    Err(err) => Err(err),
                }
            }
            Mode::Threads { workers } => {
                let n_workers = workers.len();
                loop {
                    if workers.iter().all(|w| w.exhausted) {
                        return None;
                    }
                    let worker = self.next_worker;
                    self.next_worker = (worker + 1) % n_workers;
                    let slot = &mut workers[worker];
                    if slot.exhausted {
                        continue;
                    }
                    let received = match &slot.receiver {
                        Some(receiver) => receiver.recv().ok(),
                        None => None,
                    };
                    match received {
                        Some(Message::Item(value)) => break Ok(Loaded { worker, value }),
                        Some(Message::End) => slot.exhausted = true,
                        Some(Message::Failed(err)) => break Err(err),
                        // The thread is gone without a word: it panicked.
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
        if let Mode::Threads { workers } = &mut self.mode {
            // Closing the channels first makes every blocked `send` fail, so the threads end.
            for worker in workers.iter_mut() {
                worker.receiver = None;
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
