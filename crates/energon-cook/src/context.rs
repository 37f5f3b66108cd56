//! What a hook knows about the call it is in: the worker, the call's index, and the seed derived
//! from them (the reference's `current_sample_index`, `current_batch_index` and
//! `@stateless(restore_seeds=True)`).

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use energon_dist::{Seed, WorkerConfig, WorkerRng, restore_seed};

use crate::error::Result;

/// The worker a pipeline runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerInfo {
    /// This rank.
    pub rank: usize,
    /// The local worker id.
    pub local: usize,
    /// The workers of this rank (`max(1, num_workers)`).
    pub n_local: usize,
    /// The global worker id (`rank * n_local + local`).
    pub global: usize,
    /// The worker seed, which every random stream of the worker starts from.
    pub seed: Seed,
}

impl WorkerInfo {
    /// Local worker `local` of `worker_config`'s rank.
    pub fn new(worker_config: &WorkerConfig, local: usize) -> Result<Self> {
        Ok(WorkerInfo {
            rank: worker_config.rank(),
            local,
            n_local: worker_config.n_local_workers(),
            global: worker_config.global_worker_id(local)?,
            seed: worker_config.worker_seed(local)?,
        })
    }
}

/// How many items a worker has handed out so far (the reference's outermost sample index,
/// behind `current_batch_index`), shared by the stages of one worker's pipeline.
#[derive(Debug, Clone, Default)]
pub(crate) struct ItemCounter(Arc<AtomicU64>);

impl ItemCounter {
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }
}

/// The call a hook is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleContext {
    worker: WorkerInfo,
    index: u64,
    item_index: u64,
}

impl SampleContext {
    /// The context of call `index` of a stage on `worker`, while the worker prepares its item
    /// `item_index`.
    pub fn new(worker: WorkerInfo, index: u64, item_index: u64) -> Self {
        SampleContext { worker, index, item_index }
    }

    /// The worker.
    pub fn worker(&self) -> &WorkerInfo {
        &self.worker
    }

    /// How many calls this stage made before this one, on this worker (the restore key's
    /// index).
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The index of the worker's item being prepared (see
    /// [`SampleContext::current_batch_index`]).
    pub fn item_index(&self) -> u64 {
        self.item_index
    }

    /// The reference's `current_sample_index`: `index * n_local + local`, unique among the
    /// workers of a rank, and the same when the sample is re-created from its restore key.
    pub fn current_sample_index(&self) -> u64 {
        self.index * self.worker.n_local as u64 + self.worker.local as u64
    }

    /// The reference's `current_batch_index`: the number of items the worker handed out before
    /// the one being prepared, as `item_index * n_local + local`.
    pub fn current_batch_index(&self) -> u64 {
        self.item_index * self.worker.n_local as u64 + self.worker.local as u64
    }

    /// The per-call seed of the reference's `restore_seeds`: SHA-1 of
    /// `"{worker_seed}|{current_sample_index}"`. It depends only on the worker and the call,
    /// so a sample re-created on restore sees the same randomness.
    pub fn seed(&self) -> Seed {
        restore_seed(self.worker.seed, self.current_sample_index())
    }

    /// A random stream seeded with [`SampleContext::seed`], for randomness inside a hook that
    /// must be restorable (augmentations, random crops).
    pub fn rng(&self) -> WorkerRng {
        WorkerRng::new(self.seed())
    }
}

/// What every stage of one worker's pipeline shares.
#[derive(Debug, Clone)]
pub(crate) struct StageEnv {
    pub(crate) worker: WorkerInfo,
    pub(crate) items: ItemCounter,
    pub(crate) stats: crate::policy::FailureStats,
    pub(crate) policy: crate::policy::ErrorPolicy,
}

impl StageEnv {
    pub(crate) fn context(&self, index: u64) -> SampleContext {
        SampleContext::new(self.worker, index, self.items.get())
    }

    /// The context of a call made again on restore for the worker's item `item_index`.
    pub(crate) fn context_at(&self, index: u64, item_index: u64) -> SampleContext {
        SampleContext::new(self.worker, index, item_index)
    }

    pub(crate) fn guard(&self, hook: &'static str) -> crate::policy::Guard {
        crate::policy::Guard::new(hook, &self.policy, self.stats.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_and_seeds_follow_the_reference() {
        let cfg = WorkerConfig::new(1, 2, 3).unwrap();
        let worker = WorkerInfo::new(&cfg, 2).unwrap();
        assert_eq!((worker.global, worker.n_local), (5, 3));
        let ctx = SampleContext::new(worker, 4, 7);
        assert_eq!(ctx.current_sample_index(), 14);
        assert_eq!(ctx.current_batch_index(), 23);
        assert_eq!(ctx.seed(), restore_seed(cfg.worker_seed(2).unwrap(), 14));
        assert_eq!(ctx.rng().next_u32(), WorkerRng::new(ctx.seed()).next_u32());
    }
}
