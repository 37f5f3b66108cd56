//! The batch stage: groups consecutive items and hands them to the `batch` hook (the reference's
//! `BatchDataset`).

use std::sync::Arc;

use crate::{
    apply::{Pending, Started, call_on_restore, group_key, nested_keys, pick, split_call_key},
    context::{SampleContext, StageEnv, WorkerInfo},
    error::{Error, Result},
    hook::{HookResult, Outputs},
    policy::{ErrorPolicy, FailureStats, Guard},
    restore_key::{KeyPart, RestoreKey},
    shuffle::restore_items,
    stage::{Keyed, Stage},
    state::{StageState, mismatch},
};

/// A batch as the default `batch` hook makes it: the samples in order, each with its own key.
///
/// (Stacking equal-shape tensors into one, as the reference's `generic_batch` does, belongs to
/// the task encoder that knows the sample type; see `Batch::samples`.)
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

/// A `batch` hook.
pub(crate) type BatchFn<T, B> =
    Arc<dyn Fn(Vec<Keyed<T>>, &SampleContext) -> HookResult<Outputs<B>> + Send + Sync>;

/// Groups `batch_size` consecutive items and calls `f` on them; at the end of a pass the last,
/// shorter group is batched unless `drop_last`. A batch's key is `("BatchDataset", index[, sub],
/// *keys of its samples)`, where `index` counts the calls (across passes, failed ones
/// included). A failing call drops its samples and the stage goes on with the next group.
pub(crate) struct BatchStage<S, T, B> {
    inner: S,
    batch_size: usize,
    drop_last: bool,
    f: BatchFn<T, B>,
    env: StageEnv,
    guard: Guard,
    index: u64,
    /// The last (short) batch of a pass went out; the next call reports the end of the pass.
    pass_done: bool,
    pending: Option<Pending<B>>,
}

impl<S, T, B> BatchStage<S, T, B> {
    pub(crate) fn new(
        inner: S,
        batch_size: usize,
        drop_last: bool,
        f: BatchFn<T, B>,
        env: StageEnv,
    ) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::InvalidSetting {
                setting: "batch_size",
                value: "0".into(),
                reason: "must be at least 1",
            });
        }
        let guard = env.guard("batch");
        Ok(BatchStage {
            inner,
            batch_size,
            drop_last,
            f,
            env,
            guard,
            index: 0,
            pass_done: false,
            pending: None,
        })
    }
}

impl<S, T, B> Stage for BatchStage<S, T, B>
where
    S: Stage<Item = Keyed<T>>,
    T: Send,
    B: Send,
{
    type Item = Keyed<B>;

    fn next(&mut self) -> Result<Option<Keyed<B>>> {
        loop {
            let key =
                |index, sub, inputs: &[RestoreKey]| group_key("BatchDataset", index, sub, inputs);
            if let Some(item) =
                Pending::next_from(&mut self.pending, &self.env, &mut self.guard, key)?
            {
                return Ok(Some(item));
            }
            if self.pass_done {
                self.pass_done = false;
                return Ok(None);
            }
            let mut samples = Vec::with_capacity(self.batch_size);
            while samples.len() < self.batch_size {
                match self.inner.next()? {
                    Some(item) => samples.push(item),
                    None if samples.is_empty() || self.drop_last => return Ok(None),
                    None => {
                        self.pass_done = true;
                        break;
                    }
                }
            }
            let index = self.index;
            self.index += 1;
            let keys: Vec<RestoreKey> = samples.iter().map(|s| s.restore_key.clone()).collect();
            let ctx = self.env.context(index);
            let res = (self.f)(samples, &ctx);
            let what = || group_key("BatchDataset", index, None, &keys).to_string();
            // A dropped batch: the next group takes its turn.
            let Some(outputs) = self.guard.handle(res, what)? else { continue };
            match Pending::start(outputs, keys, index, ctx.item_index()) {
                Started::One(value, keys) => {
                    let restore_key = group_key("BatchDataset", index, None, &keys);
                    return Ok(Some(Keyed { restore_key, value }));
                }
                Started::Many(pending) => self.pending = Some(pending),
            }
        }
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Batch {
            index: self.index,
            batch_size: self.batch_size as u64,
            failures: self.guard.consecutive(),
            pass_done: self.pass_done,
            pending: self.pending.as_ref().map(Pending::state),
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Batch { index, batch_size, failures, pass_done, pending, inner } = state
        else {
            return Err(mismatch("batch stage", state));
        };
        if *batch_size != self.batch_size as u64 && pending.is_some() {
            return Err(Error::BadState {
                reason: format!(
                    "the batch size changed from {batch_size} to {} in the middle of the outputs \
                     of one batch",
                    self.batch_size
                ),
            });
        }
        self.inner.restore(inner)?;
        self.index = *index;
        self.guard.set_consecutive(*failures);
        self.pass_done = *pass_done;
        self.pending = match pending {
            None => None,
            Some(call) => {
                let samples = restore_items(&mut self.inner, &call.inputs)?;
                let ctx = self.env.context_at(call.index, call.item_index);
                let res = (self.f)(samples, &ctx);
                let outputs = call_on_restore("batch", res, || {
                    group_key("BatchDataset", call.index, None, &call.inputs).to_string()
                })?;
                Some(Pending::resume(call, outputs, &self.env)?)
            }
        };
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<B>> {
        let (index, sub, rest) = split_call_key("BatchDataset", key)?;
        let keys = nested_keys("BatchDataset", rest)?;
        let samples = restore_items(&mut self.inner, &keys)?;
        let ctx = self.env.context(index);
        let res = (self.f)(samples, &ctx);
        let outputs =
            call_on_restore("batch", res, || RestoreKey::from_parts(key.to_vec()).to_string())?;
        let value = pick(outputs, sub, key, &ctx)?;
        Ok(Keyed { restore_key: group_key("BatchDataset", index, sub, &keys), value })
    }
}

/// Groups `batch_size` consecutive items into a [`Batch`]; at the end of a pass the last, shorter
/// batch is yielded unless `drop_last`. The batch's key is `("BatchDataset", batch_index, *keys of
/// its samples)`, where `batch_index` counts the batches made (across passes).
pub struct Batcher<S, T> {
    stage: BatchStage<S, T, Batch<T>>,
}

impl<S, T: 'static> Batcher<S, T> {
    /// Batches of `batch_size` (at least 1) over `inner`.
    pub fn new(inner: S, batch_size: usize, drop_last: bool) -> Result<Self> {
        let worker = WorkerInfo {
            rank: 0,
            local: 0,
            n_local: 1,
            global: 0,
            seed: energon_dist::seed_for_global_worker(0, 0),
        };
        let env = StageEnv {
            worker,
            items: Default::default(),
            stats: FailureStats::default(),
            policy: ErrorPolicy::default(),
        };
        let f: BatchFn<T, Batch<T>> = Arc::new(|samples, _| Ok(Outputs::One(Batch { samples })));
        Ok(Batcher { stage: BatchStage::new(inner, batch_size, drop_last, f, env)? })
    }
}

impl<S: std::fmt::Debug, T> std::fmt::Debug for Batcher<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("inner", &self.stage.inner)
            .field("batch_size", &self.stage.batch_size)
            .field("drop_last", &self.stage.drop_last)
            .field("batch_index", &self.stage.index)
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
        self.stage.next()
    }

    fn len_worker(&self) -> u64 {
        self.stage.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        self.stage.state()
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        self.stage.restore(state)
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<Batch<T>>> {
        self.stage.restore_item(key)
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
        assert_eq!(batches.stage.index, 6);
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
