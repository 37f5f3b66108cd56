//! The Python task encoder as energon-cook's [`TaskEncoder`]: the one pipeline of energon-cook
//! runs every stage, and the Python hooks are called from its stages.
//!
//! Items are [`Item`]s (a Rust sample until a Python hook made something else of it). Batching
//! leaves a [`WorkerBatch`]: collated in Rust on the worker thread when every item is a Rust
//! sample and no batch hook is overridden, else the items for the Python batch hooks, which the
//! loader's pump thread calls.

use std::sync::Arc;

use energon_cook::{
    Batch, Cooker, HookError, HookResult, Keyed, Outputs, SampleContext, TaskEncoder,
};

use crate::{
    hooks::{Hooks, Item},
    sample::Collated,
};

/// A batch as a worker thread leaves it: collated in Rust (in parallel across workers), or its
/// items for the Python batch hooks, with the contexts of the batch and encode-batch stages that
/// the hooks are called in.
#[derive(Debug)]
pub(crate) enum WorkerBatch {
    Collated(Collated),
    Items(Batch<Item>, BatchContexts),
    Failed(String),
}

/// A hook call's context as the Python side takes it: `(current_sample_index,
/// current_batch_index, worker_seed)`.
pub(crate) type CallContext = (u64, u64, u32);

/// The contexts of the Python `batch` and `encode_batch` calls of one batch: the stages run on
/// the worker thread, the calls happen on the loader's pump thread, and the hooks see the
/// indices (and seeds) of the stage that made the batch, as in the reference.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchContexts {
    pub(crate) batch: CallContext,
    pub(crate) encode_batch: Option<CallContext>,
}

/// The context of a hook call at `ctx`.
pub(crate) fn call_context(ctx: &SampleContext) -> CallContext {
    (ctx.current_sample_index(), ctx.current_batch_index(), ctx.worker().seed.get())
}

impl WorkerBatch {
    fn new(batch: Batch<Item>, hooks: &Hooks, ctx: &SampleContext) -> Self {
        let all_rust = batch.samples.iter().all(|s| matches!(s.value, Item::Rust(_)));
        if !all_rust || hooks.has_batch_hooks() {
            let contexts = BatchContexts { batch: call_context(ctx), encode_batch: None };
            return WorkerBatch::Items(batch, contexts);
        }
        let samples = batch
            .samples
            .into_iter()
            .filter_map(|k| match k.value {
                Item::Rust(s) => Some(Keyed { restore_key: k.restore_key, value: s }),
                Item::Py(_) => None,
            })
            .collect();
        match Collated::new(Batch { samples }, hooks.output()) {
            Ok(collated) => WorkerBatch::Collated(collated),
            Err(message) => WorkerBatch::Failed(message),
        }
    }
}

/// The task encoder of a Python pipeline: the Python `encode_sample` (when overridden) and the
/// batching above; cookers are chosen by the Python side for each dataset (see
/// [`PyEncoder::cooker`]).
#[derive(Debug, Clone)]
pub(crate) struct PyEncoder {
    hooks: Arc<Hooks>,
}

impl PyEncoder {
    pub(crate) fn new(hooks: Arc<Hooks>) -> Self {
        PyEncoder { hooks }
    }

    /// The cooker of a crude dataset: the Python cook function chosen for it (`None`: the task
    /// encoder has no cookers, and crude samples stay as they are).
    pub(crate) fn cooker(&self, cook: Option<Arc<pyo3::Py<pyo3::PyAny>>>) -> Cooker<Item> {
        let hooks = Arc::clone(&self.hooks);
        Cooker::new(move |item, ctx| {
            match hooks.call_sample_hook(cook.as_deref(), item, &ctx.sample)? {
                Outputs::One(item) => Ok(item),
                Outputs::Many(_) => Err(HookError::fatal_msg("a cooker cannot be a generator")),
            }
        })
    }
}

impl TaskEncoder for PyEncoder {
    type Sample = Item;
    type Encoded = Item;
    type Batch = WorkerBatch;
    type Output = WorkerBatch;

    fn hooks(&self) -> energon_cook::Hooks {
        // COMPAT(energon 7.4.1): DefaultTaskEncoder overrides encode_sample and encode_batch
        // (their map stages show in the restore keys).
        self.hooks.declared()
    }

    fn encode_sample(&self, item: Item, ctx: &SampleContext) -> HookResult<Outputs<Item>> {
        self.hooks.encode_sample(item, ctx)
    }

    fn preencode_sample(&self, item: Item, ctx: &SampleContext) -> HookResult<Outputs<Item>> {
        self.hooks.encode_sample(item, ctx)
    }

    fn postencode_sample(&self, item: Item, ctx: &SampleContext) -> HookResult<Item> {
        self.hooks.postencode_sample(item, ctx)
    }

    fn select_samples_to_pack(
        &self,
        items: &[Keyed<Item>],
        ctx: &SampleContext,
    ) -> HookResult<Vec<Vec<usize>>> {
        self.hooks.select_samples_to_pack(items, ctx)
    }

    fn pack_selected_samples(
        &self,
        items: Vec<Keyed<Item>>,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Item>> {
        self.hooks.pack_selected_samples(items, ctx)
    }

    fn batch_group_criterion(
        &self,
        item: &Item,
        ctx: &SampleContext,
    ) -> HookResult<(String, Option<usize>)> {
        self.hooks.batch_group_criterion(item, ctx)
    }

    fn batch(
        &self,
        samples: Vec<Keyed<Item>>,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<WorkerBatch>> {
        Ok(Outputs::One(WorkerBatch::new(Batch { samples }, &self.hooks, ctx)))
    }

    fn encode_batch(
        &self,
        batch: WorkerBatch,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<WorkerBatch>> {
        Ok(Outputs::One(match batch {
            WorkerBatch::Items(items, contexts) => WorkerBatch::Items(
                items,
                BatchContexts { encode_batch: Some(call_context(ctx)), ..contexts },
            ),
            other => other,
        }))
    }

    fn config(&self) -> Vec<(String, String)> {
        self.hooks.config()
    }
}
