//! The batch stage: groups consecutive items (the reference's `BatchDataset` with the default
//! batcher).

use crate::{
    error::{Error, Result},
    restore_key::RestoreKey,
    stage::{Keyed, Stage},
    state::BatchState,
};

/// A batch as the default batcher makes it: the samples in order, each with its own key.
///
/// (Stacking equal-shape tensors into one, as the reference's `generic_batch` does, belongs to the
/// task encoder that knows the sample type; see `Batch::samples`.)
#[derive(Debug, Clone, PartialEq)]
pub struct Batch<T> {
    /// The samples, in the order they were taken in.
    pub samples: Vec<Keyed<T>>,
}

impl<T> Batch<T> {
    /// The number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the batch is empty (never the case for batches the stage makes).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// Groups `batch_size` consecutive items into a [`Batch`]; at the end of a pass the last, shorter
/// batch is yielded unless `drop_last`. The batch's key is `("BatchDataset", batch_index, *keys of
/// its samples)`, where `batch_index` counts the batches made (across passes).
pub struct Batcher<S, T> {
    inner: S,
    batch_size: usize,
    drop_last: bool,
    batch_index: u64,
    /// The last (short) batch of a pass went out; the next call reports the end of the pass.
    pass_done: bool,
    pending: Vec<Keyed<T>>,
}

impl<S, T> Batcher<S, T> {
    /// Batches of `batch_size` (at least 1) over `inner`.
    pub fn new(inner: S, batch_size: usize, drop_last: bool) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::InvalidSetting {
                setting: "batch_size",
                value: "0".into(),
                reason: "must be at least 1",
            });
        }
        Ok(Batcher {
            inner,
            batch_size,
            drop_last,
            batch_index: 0,
            pass_done: false,
            pending: Vec::with_capacity(batch_size),
        })
    }

    /// The savable progress: the number of batches made (the reference's `_sample_index`). The
    /// partial batch under construction is not part of it: like the reference's, it lives only
    /// while the stage is being pulled.
    pub fn state(&self) -> BatchState {
        BatchState { batch_index: self.batch_index }
    }

    /// The inner stage.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: std::fmt::Debug, T> std::fmt::Debug for Batcher<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("inner", &self.inner)
            .field("batch_size", &self.batch_size)
            .field("drop_last", &self.drop_last)
            .field("batch_index", &self.batch_index)
            .finish_non_exhaustive()
    }
}

impl<S, T> Stage for Batcher<S, T>
where
    S: Stage<Item = Keyed<T>>,
    T: Send,
{
    type Item = Keyed<Batch<T>>;

    fn next(&mut self) -> Result<Option<Keyed<Batch<T>>>> {
        if self.pass_done {
            self.pass_done = false;
            return Ok(None);
        }
        while self.pending.len() < self.batch_size {
            match self.inner.next()? {
                Some(item) => self.pending.push(item),
                None => {
                    if self.pending.is_empty() {
                        return Ok(None);
                    }
                    if self.drop_last {
                        self.pending.clear();
                        return Ok(None);
                    }
                    self.pass_done = true;
                    break;
                }
            }
        }
        let samples = std::mem::replace(&mut self.pending, Vec::with_capacity(self.batch_size));
        let restore_key = RestoreKey::batch(
            "BatchDataset",
            self.batch_index,
            samples.iter().map(|s| &s.restore_key),
        );
        self.batch_index += 1;
        Ok(Some(Keyed { restore_key, value: Batch { samples } }))
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FnStage;

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

    fn pass(stage: &mut impl Stage<Item = Keyed<Batch<u64>>>) -> Vec<Vec<u64>> {
        let mut res = Vec::new();
        while let Some(batch) = stage.next().unwrap() {
            res.push(batch.value.samples.iter().map(|s| s.value).collect());
        }
        res
    }

    #[test]
    fn the_last_short_batch_ends_the_pass() {
        let mut batches = Batcher::new(numbers(7), 3, false).unwrap();
        assert_eq!(pass(&mut batches), [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
        assert_eq!(pass(&mut batches), [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
        assert_eq!(batches.state(), BatchState { batch_index: 6 });
    }

    #[test]
    fn drop_last_drops_it() {
        let mut batches = Batcher::new(numbers(7), 3, true).unwrap();
        assert_eq!(pass(&mut batches), [vec![0, 1, 2], vec![3, 4, 5]]);
        assert_eq!(pass(&mut batches), [vec![0, 1, 2], vec![3, 4, 5]]);
    }

    #[test]
    fn batch_keys_list_their_samples() {
        let mut batches = Batcher::new(numbers(4), 2, false).unwrap();
        batches.next().unwrap();
        let second = batches.next().unwrap().unwrap();
        assert_eq!(
            second.restore_key.to_string(),
            "('BatchDataset', 1, ('Webdataset', 2), ('Webdataset', 3))"
        );
    }

    #[test]
    fn batch_size_zero_is_refused() {
        assert!(Batcher::<_, u64>::new(numbers(4), 0, false).is_err());
    }
}
