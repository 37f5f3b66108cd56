//! The shuffle buffer: a window of items from which a random one is handed out (the reference's
//! `ShuffleBufferDataset`).

use energon_dist::WorkerRng;

use crate::{
    error::{Error, Result},
    restore_key::KeyPart,
    stage::{Keyed, Stage},
    state::{StageState, mismatch},
};

/// Keeps up to `size` items and hands out a uniformly drawn one, from its own random stream.
///
/// COMPAT(energon 7.4.1): wrappers/shuffle_buffer_dataset.py. While the buffer holds fewer than
/// `size` items it pulls one more; once full it pops `randbelow(len)` (an order-preserving
/// removal: later items shift down, they are not swapped in). When the inner pass ends the buffer
/// is drained the same way (a draw also for the last item), then the pass ends.
pub struct ShuffleBuffer<S, T> {
    inner: S,
    size: usize,
    buffer: Vec<Keyed<T>>,
    rng: WorkerRng,
    draining: bool,
}

impl<S, T> ShuffleBuffer<S, T> {
    /// A buffer of `size` items (at least 1) over `inner`, drawing from `rng` (a stream of its
    /// own, seeded with the worker seed).
    pub fn new(inner: S, size: usize, rng: WorkerRng) -> Self {
        let size = size.max(1);
        ShuffleBuffer { inner, size, buffer: Vec::with_capacity(size), rng, draining: false }
    }

    /// The inner stage.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: std::fmt::Debug, T> std::fmt::Debug for ShuffleBuffer<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShuffleBuffer")
            .field("inner", &self.inner)
            .field("size", &self.size)
            .field("buffered", &self.buffer.len())
            .finish_non_exhaustive()
    }
}

impl<S, T> Stage for ShuffleBuffer<S, T>
where
    S: Stage<Item = Keyed<T>>,
    T: Send,
{
    type Item = Keyed<T>;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        while !self.draining && self.buffer.len() < self.size {
            match self.inner.next()? {
                Some(item) => self.buffer.push(item),
                None => self.draining = true,
            }
        }
        if self.buffer.is_empty() {
            // Only reachable while draining: the pass is over.
            self.draining = false;
            return Ok(None);
        }
        Ok(Some(self.rng.rand_pop(&mut self.buffer)?))
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }

    /// The stream and the keys of the buffered items (the reference saves keys, never sample
    /// data, and re-reads the samples on restore).
    fn state(&self) -> Result<StageState> {
        Ok(StageState::ShuffleBuffer {
            rng: self.rng.state(),
            restore_keys: self.buffer.iter().map(|item| item.restore_key.clone()).collect(),
            draining: self.draining,
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::ShuffleBuffer { rng, restore_keys, draining, inner } = state else {
            return Err(mismatch("shuffle buffer", state));
        };
        if restore_keys.len() > self.size {
            return Err(Error::BadState {
                reason: format!(
                    "{} buffered items do not fit a shuffle buffer of {}",
                    restore_keys.len(),
                    self.size
                ),
            });
        }
        self.inner.restore(inner)?;
        self.buffer = restore_items(&mut self.inner, restore_keys)?;
        self.rng = WorkerRng::from_state(rng.clone());
        self.draining = *draining;
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<T>> {
        self.inner.restore_item(key)
    }
}

/// Re-creates buffered items from their keys through `inner`.
pub(crate) fn restore_items<S, T>(
    inner: &mut S,
    keys: &[crate::RestoreKey],
) -> Result<Vec<Keyed<T>>>
where
    S: Stage<Item = Keyed<T>>,
{
    keys.iter()
        .map(|key| {
            inner.restore_item(key.parts()).map_err(|err| Error::RestoreItem {
                restore_key: key.to_string(),
                source: Box::new(err),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use energon_dist::WorkerConfig;

    use super::*;
    use crate::{FnStage, RestoreKey};

    fn numbers(n: u64) -> impl Stage<Item = Keyed<u64>> {
        let mut i = 0;
        FnStage::new(n, move || {
            if i == n {
                i = 0;
                return Ok(None);
            }
            i += 1;
            Ok(Some(Keyed { restore_key: RestoreKey::leaf(i - 1), value: i - 1 }))
        })
    }

    fn pass(stage: &mut impl Stage<Item = Keyed<u64>>) -> Vec<u64> {
        let mut res = Vec::new();
        while let Some(item) = stage.next().unwrap() {
            res.push(item.value);
        }
        res
    }

    #[test]
    fn every_item_comes_out_once_per_pass() {
        let rng = WorkerConfig::new(0, 1, 0).unwrap().worker_rng(0).unwrap();
        let mut buffer = ShuffleBuffer::new(numbers(20), 6, rng);
        for _ in 0..3 {
            let got = pass(&mut buffer);
            let mut sorted = got.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..20).collect::<Vec<_>>());
            assert_ne!(got, sorted, "a buffer of 6 shuffles");
        }
    }

    #[test]
    fn pops_preserve_the_order_of_the_rest() {
        // With a buffer as large as the pass, the draws are `randbelow(len)` pops from the whole
        // pass in order; replay them on a plain list.
        let cfg = WorkerConfig::new(0, 1, 0).unwrap();
        let mut buffer = ShuffleBuffer::new(numbers(10), 10, cfg.worker_rng(0).unwrap());
        let got = pass(&mut buffer);
        let mut rng = cfg.worker_rng(0).unwrap();
        let mut list: Vec<u64> = (0..10).collect();
        let want: Vec<u64> = (0..10).map(|_| rng.rand_pop(&mut list).unwrap()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn without_a_savable_inner_stage_there_is_no_state() {
        let rng = WorkerConfig::new(0, 1, 0).unwrap().worker_rng(0).unwrap();
        let mut buffer = ShuffleBuffer::new(numbers(5), 3, rng);
        buffer.next().unwrap();
        assert!(matches!(buffer.state(), Err(Error::NotSavable { .. })));
    }
}
