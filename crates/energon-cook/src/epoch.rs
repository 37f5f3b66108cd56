//! Stages that shape passes: virtual epochs of a fixed length (the reference's
//! `EpochizeDataset`), a limit per validation pass (`LimitDataset`), and the outermost stage of
//! a worker, which counts the items it hands out (`SavableDatasetWrapper`).

use crate::{
    context::{ItemCounter, WorkerInfo},
    error::Result,
    restore_key::{KeyPart, split_loader_key},
    stage::Stage,
    state::{StageState, mismatch},
};

/// This worker's share of `length` items: `length / n` plus one for the first `length % n`
/// workers (the reference's per-worker split of `virtual_epoch_length` and `limit`).
pub(crate) fn worker_share(length: u64, worker: &WorkerInfo) -> u64 {
    let n = worker.n_local as u64;
    length / n + u64::from((worker.local as u64) < length % n)
}

/// Ends a pass after this worker's share of `length` items and keeps the inner stage where it
/// is, so the next pass continues it.
///
/// COMPAT(energon 7.4.1): wrappers/epochize_dataset.py. If the inner pass ends first (a finite
/// inner pipeline), the epoch ends there and the next one starts the inner stage's next pass
/// (the reference's documented intent; its code keeps the exhausted iterator, so every later
/// epoch would be empty).
pub(crate) struct Epochize<S> {
    inner: S,
    local_length: u64,
    offset: u64,
    at_end: bool,
}

impl<S> Epochize<S> {
    pub(crate) fn new(inner: S, length: u64, worker: &WorkerInfo) -> Self {
        Epochize { inner, local_length: worker_share(length, worker), offset: 0, at_end: false }
    }
}

impl<S: Stage> Stage for Epochize<S> {
    type Item = S::Item;

    fn next(&mut self) -> Result<Option<S::Item>> {
        if self.at_end || self.local_length == 0 {
            self.at_end = false;
            return Ok(None);
        }
        match self.inner.next()? {
            Some(item) => {
                self.offset += 1;
                if self.offset >= self.local_length {
                    self.offset = 0;
                    self.at_end = true;
                }
                Ok(Some(item))
            }
            None => {
                self.offset = 0;
                Ok(None)
            }
        }
    }

    fn len_worker(&self) -> u64 {
        self.local_length
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Epochize {
            offset: self.offset,
            at_end: self.at_end,
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Epochize { offset, at_end, inner } = state else {
            return Err(mismatch("virtual epoch stage", state));
        };
        self.inner.restore(inner)?;
        // A loader with another number of workers has other shares; an offset past the share
        // ends the epoch at the next pull.
        self.offset = *offset;
        self.at_end = *at_end || (*offset >= self.local_length && self.local_length > 0);
        if self.at_end {
            self.offset = 0;
        }
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<S::Item> {
        self.inner.restore_item(key)
    }
}

/// Ends a pass after this worker's share of `limit` items, and starts every pass of the inner
/// stage from its beginning (the reference resets the inner dataset after each pass).
pub(crate) struct Limit<S> {
    inner: S,
    local_limit: u64,
    offset: u64,
    initial: StageState,
}

impl<S: Stage> Limit<S> {
    pub(crate) fn new(inner: S, limit: u64, worker: &WorkerInfo) -> Result<Self> {
        let initial = inner.state()?;
        Ok(Limit { inner, local_limit: worker_share(limit, worker), offset: 0, initial })
    }

    fn end_pass(&mut self) -> Result<Option<S::Item>> {
        self.inner.restore(&self.initial)?;
        self.offset = 0;
        Ok(None)
    }
}

impl<S: Stage> Stage for Limit<S> {
    type Item = S::Item;

    fn next(&mut self) -> Result<Option<S::Item>> {
        if self.offset >= self.local_limit {
            return self.end_pass();
        }
        match self.inner.next()? {
            Some(item) => {
                self.offset += 1;
                Ok(Some(item))
            }
            None => self.end_pass(),
        }
    }

    fn len_worker(&self) -> u64 {
        self.local_limit.min(self.inner.len_worker())
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Limit { offset: self.offset, inner: Box::new(self.inner.state()?) })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Limit { offset, inner } = state else {
            return Err(mismatch("limit stage", state));
        };
        self.inner.restore(inner)?;
        self.offset = *offset;
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<S::Item> {
        self.inner.restore_item(key)
    }
}

/// The outermost stage of a worker: counts the items (and ends of passes) it hands out, and
/// tells the hooks which item is being prepared (`current_batch_index`).
pub(crate) struct WorkerTop<S> {
    inner: S,
    index: u64,
    items: ItemCounter,
}

impl<S> WorkerTop<S> {
    pub(crate) fn new(inner: S, items: ItemCounter) -> Self {
        WorkerTop { inner, index: 0, items }
    }
}

impl<S: Stage> Stage for WorkerTop<S> {
    type Item = S::Item;

    fn next(&mut self) -> Result<Option<S::Item>> {
        self.items.set(self.index);
        let res = self.inner.next()?;
        if res.is_some() {
            self.index += 1;
        }
        Ok(res)
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Worker { index: self.index, inner: Box::new(self.inner.state()?) })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Worker { index, inner } = state else {
            return Err(mismatch("worker", state));
        };
        self.index = *index;
        self.items.set(*index);
        self.inner.restore(inner)
    }

    /// Takes a key as the reference's loader hands it out, with its loader wrapper's
    /// `(name, global_worker_id, worker_item_index)` first (the caller picked the worker's
    /// pipeline): the item is made again as the worker's item of that index. A key without it
    /// is one of a whole pipeline inside a combination of pipelines (see
    /// [`combine_pipelines`](crate::combine_pipelines)), made again as it is.
    fn restore_item(&mut self, key: &[KeyPart]) -> Result<S::Item> {
        let Some((_, _, index, rest)) = split_loader_key(key) else {
            return self.inner.restore_item(key);
        };
        self.items.set(index);
        let res = self.inner.restore_item(rest);
        self.items.set(self.index);
        res
    }
}
