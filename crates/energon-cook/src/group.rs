//! Batching by group: samples sorted into buckets by the `batch_group_criterion` hook, each bucket
//! batched when full (the reference's `GroupBatchDataset`).

use std::sync::Arc;

use crate::{
    apply::{call_on_restore, group_key, nested_keys, split_call_key},
    batch::BatchFn,
    context::{SampleContext, StageEnv},
    error::{Error, Result},
    hook::{HookResult, Outputs},
    policy::Guard,
    restore_key::{KeyPart, RestoreKey},
    shuffle::restore_items,
    stage::{Keyed, Stage},
    state::{BucketState, StageState, mismatch},
};

/// A `batch_group_criterion` hook: the bucket of a sample and, without a fixed batch size, the
/// bucket's batch size.
pub(crate) type CriterionFn<T> =
    Arc<dyn Fn(&T, &SampleContext) -> HookResult<(String, Option<usize>)> + Send + Sync>;

struct Bucket<T> {
    key: String,
    batch_size: usize,
    items: Vec<Keyed<T>>,
}

/// Sorts items into buckets; a bucket that reaches its batch size is batched by `f`. At the end
/// of a pass the non-empty buckets are batched in the order they were opened, unless
/// `drop_last`. Keys are `("GroupBatchDataset", index, *keys of the samples)`.
pub(crate) struct GroupBatch<S, T, B> {
    inner: S,
    fixed_batch_size: Option<usize>,
    drop_last: bool,
    criterion: CriterionFn<T>,
    f: BatchFn<T, B>,
    env: StageEnv,
    key_guard: Guard,
    batch_guard: Guard,
    key_index: u64,
    batch_index: u64,
    buckets: Vec<Bucket<T>>,
    flushing: bool,
}

impl<S, T, B> GroupBatch<S, T, B> {
    pub(crate) fn new(
        inner: S,
        fixed_batch_size: Option<usize>,
        drop_last: bool,
        criterion: CriterionFn<T>,
        f: BatchFn<T, B>,
        env: StageEnv,
    ) -> Self {
        GroupBatch {
            inner,
            fixed_batch_size,
            drop_last,
            criterion,
            f,
            key_guard: env.guard("batch_group_criterion"),
            batch_guard: env.guard("batch"),
            env,
            key_index: 0,
            batch_index: 0,
            buckets: Vec::new(),
            flushing: false,
        }
    }

    /// Batches the items of a bucket; `None` if `batch` failed (the items are dropped).
    fn flush(&mut self, items: Vec<Keyed<T>>) -> Result<Option<Keyed<B>>> {
        let index = self.batch_index;
        self.batch_index += 1;
        let keys: Vec<RestoreKey> = items.iter().map(|s| s.restore_key.clone()).collect();
        let ctx = self.env.context(index);
        let res = (self.f)(items, &ctx);
        let key = || group_key("GroupBatchDataset", index, None, &keys);
        match self.batch_guard.handle(res, || key().to_string())? {
            None => Ok(None),
            Some(Outputs::One(value)) => Ok(Some(Keyed { restore_key: key(), value })),
            Some(Outputs::Many(_) | Outputs::Lazy(_)) => Err(generator_error()),
        }
    }

    /// The batch size of a bucket, as the criterion's answer and the fixed size say.
    fn batch_size_of(&self, key: &str, returned: Option<usize>) -> Result<usize> {
        let ((Some(size), None) | (None, Some(size))) = (self.fixed_batch_size, returned) else {
            return Err(Error::InvalidSetting {
                setting: "batch_group_criterion",
                value: format!("group {key:?}, batch size {returned:?}"),
                reason: "exactly one of the loader's batch size and the batch size the \
                         criterion returns must be set",
            });
        };
        if size == 0 {
            return Err(Error::InvalidSetting {
                setting: "batch_group_criterion",
                value: format!("group {key:?}, batch size 0"),
                reason: "a batch size must be at least 1",
            });
        }
        Ok(size)
    }
}

fn generator_error() -> Error {
    Error::InvalidSetting {
        setting: "batch",
        value: "several outputs".to_owned(),
        reason: "with batch_group_criterion, batch must make exactly one batch per call",
    }
}

impl<S, T, B> Stage for GroupBatch<S, T, B>
where
    S: Stage<Item = Keyed<T>>,
    T: Send,
    B: Send,
{
    type Item = Keyed<B>;

    fn next(&mut self) -> Result<Option<Keyed<B>>> {
        loop {
            if self.flushing {
                while !self.buckets.is_empty() {
                    let bucket = self.buckets.remove(0);
                    if !bucket.items.is_empty()
                        && let Some(batch) = self.flush(bucket.items)?
                    {
                        return Ok(Some(batch));
                    }
                }
                self.flushing = false;
                return Ok(None);
            }
            let Some(item) = self.inner.next()? else {
                if self.drop_last {
                    self.buckets.clear();
                    return Ok(None);
                }
                self.flushing = true;
                continue;
            };
            let index = self.key_index;
            self.key_index += 1;
            let ctx = self.env.context(index);
            let res = (self.criterion)(&item.value, &ctx);
            let Some((key, returned)) =
                self.key_guard.handle(res, || item.restore_key.to_string())?
            else {
                continue;
            };
            let batch_size = self.batch_size_of(&key, returned)?;
            let position = match self.buckets.iter().position(|b| b.key == key) {
                Some(position) => position,
                None => {
                    self.buckets.push(Bucket { key, batch_size, items: Vec::new() });
                    self.buckets.len() - 1
                }
            };
            let bucket = &mut self.buckets[position];
            if bucket.batch_size != batch_size {
                return Err(Error::InvalidSetting {
                    setting: "batch_group_criterion",
                    value: format!("group {:?}, batch size {batch_size}", bucket.key),
                    reason: "a group must always have the same batch size",
                });
            }
            bucket.items.push(item);
            if bucket.items.len() >= bucket.batch_size {
                let items = std::mem::take(&mut bucket.items);
                if let Some(batch) = self.flush(items)? {
                    return Ok(Some(batch));
                }
            }
        }
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::GroupBatch {
            key_index: self.key_index,
            batch_index: self.batch_index,
            key_failures: self.key_guard.consecutive(),
            batch_failures: self.batch_guard.consecutive(),
            buckets: self
                .buckets
                .iter()
                .map(|b| BucketState {
                    key: b.key.clone(),
                    batch_size: b.batch_size as u64,
                    restore_keys: b.items.iter().map(|i| i.restore_key.clone()).collect(),
                })
                .collect(),
            flushing: self.flushing,
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::GroupBatch {
            key_index,
            batch_index,
            key_failures,
            batch_failures,
            buckets,
            flushing,
            inner,
        } = state
        else {
            return Err(mismatch("group batch stage", state));
        };
        self.inner.restore(inner)?;
        self.key_index = *key_index;
        self.batch_index = *batch_index;
        self.key_guard.set_consecutive(*key_failures);
        self.batch_guard.set_consecutive(*batch_failures);
        self.flushing = *flushing;
        self.buckets = Vec::with_capacity(buckets.len());
        for bucket in buckets {
            let batch_size = usize::try_from(bucket.batch_size).unwrap_or(usize::MAX);
            if let Some(fixed) = self.fixed_batch_size.filter(|&f| f != batch_size) {
                return Err(Error::BadState {
                    reason: format!(
                        "group {:?} was saved with batch size {batch_size}, this loader batches \
                         by {fixed}",
                        bucket.key
                    ),
                });
            }
            let items = restore_items(&mut self.inner, &bucket.restore_keys)?;
            self.buckets.push(Bucket { key: bucket.key.clone(), batch_size, items });
        }
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<B>> {
        let (index, sub, rest) = split_call_key("GroupBatchDataset", key)?;
        if sub.is_some() {
            return Err(generator_error());
        }
        let keys = nested_keys("GroupBatchDataset", rest)?;
        let items = restore_items(&mut self.inner, &keys)?;
        let ctx = self.env.context(index);
        let res = (self.f)(items, &ctx);
        let restore_key = group_key("GroupBatchDataset", index, None, &keys);
        match call_on_restore("batch", res, || restore_key.to_string())? {
            Outputs::One(value) => Ok(Keyed { restore_key, value }),
            Outputs::Many(_) | Outputs::Lazy(_) => Err(generator_error()),
        }
    }
}
