//! The Python task encoder as energon-cook's [`TaskEncoder`]: the one pipeline of energon-cook
//! runs every stage, and the Python hooks are called from its stages.
//!
//! Items are [`Item`]s (a Rust sample until a Python hook made something else of it). Batching
//! leaves a [`WorkerBatch`]: collated in Rust on the worker thread when every item is a Rust
//! sample of a built-in class and no batch hook is overridden, else what the Python batch hooks
//! made of the items, called on the same worker thread.

use std::sync::Arc;

use energon_cook::{
    Batch, Cooker, HookError, HookResult, Keyed, Outputs, SampleContext, TaskEncoder,
};

use energon_reader::Sample;

use crate::{
    hooks::{Hooks, Item},
    sample::Collated,
};

/// A batch as a worker thread leaves it: collated in Rust (in parallel across workers), or what
/// the Python batch hooks made of its items (on the worker thread, in the context of the batch
/// and encode-batch stages, as in the reference).
#[derive(Debug)]
pub(crate) enum WorkerBatch {
    Collated(Collated),
    Py(pyo3::Py<pyo3::PyAny>),
    Failed(String),
}

/// A hook call's context as the Python side takes it: `(current_sample_index,
/// current_batch_index, worker_seed)`.
pub(crate) type CallContext = (u64, u64, u32);

/// The context of a hook call at `ctx`.
pub(crate) fn call_context(ctx: &SampleContext) -> CallContext {
    (ctx.current_sample_index(), ctx.current_batch_index(), ctx.worker().seed.get())
}

impl WorkerBatch {
    fn new(batch: Batch<Item>, hooks: &Hooks, ctx: &SampleContext) -> HookResult<Self> {
        // Samples of classes that only Python builds are batched by Python too.
        let all_rust = batch.samples.iter().all(
            |s| matches!(&s.value, Item::Rust(sample) if !matches!(sample, Sample::Fields(_))),
        );
        if !all_rust || hooks.has_batch_hooks() {
            return Ok(WorkerBatch::Py(hooks.batch(batch, ctx)?));
        }
        let samples = batch
            .samples
            .into_iter()
            .filter_map(|k| match k.value {
                Item::Rust(s) => Some(Keyed { restore_key: k.restore_key, value: s }),
                Item::Py(_) => None,
            })
            .collect();
        Ok(match Collated::new(Batch { samples }, hooks.output()) {
            Ok(collated) => WorkerBatch::Collated(collated),
            Err(message) => WorkerBatch::Failed(message),
        })
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
                Outputs::Many(_) | Outputs::Lazy(_) => {
                    Err(HookError::fatal_msg("a cooker cannot be a generator"))
                }
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
        Ok(Outputs::One(WorkerBatch::new(Batch { samples }, &self.hooks, ctx)?))
    }

    fn encode_batch(
        &self,
        batch: WorkerBatch,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<WorkerBatch>> {
        Ok(Outputs::One(match batch {
            WorkerBatch::Py(obj) => WorkerBatch::Py(self.hooks.encode_batch(obj, ctx)?),
            other => other,
        }))
    }

    fn config(&self) -> Vec<(String, String)> {
        self.hooks.config()
    }
}
