//! Assembling a worker's pipeline from the task encoder, in the reference's order:
//!
//! 1. leaf: the worker's slices read, each sample loaded (decoded) and, for a crude dataset,
//!    cooked by the first matching cooker (built by the loader builders);
//! 2. repetition and blending (built by the loader builders);
//! 3. training: the shuffle buffer, if `shuffle_buffer_size > 1`;
//! 4. `preencode_sample` if declared, else `encode_sample` if declared;
//! 5. with a packing buffer: packing (with `postencode_sample` per member if declared); else
//!    `postencode_sample` if declared;
//! 6. `batch_group_criterion` declared: batching by group, then `encode_batch` if declared;
//!    else with a batch size: batching, then `encode_batch` if declared;
//! 7. training: virtual epochs if `virtual_epoch_length > 0`; validation: repeated forever if
//!    asked (`RepeatDataset`), then the limit;
//! 8. the worker's outermost stage, counting its items.

use std::sync::Arc;

use energon_dist::WorkerRng;
use serde_json::{Map, Value};

use crate::{
    apply::{Apply, ApplyFn},
    batch::{BatchFn, BatchStage},
    builder::BoxStage,
    context::StageEnv,
    encoder::{AuxStore, CookContext, Cooker, TaskEncoder},
    epoch::{Epochize, Limit, WorkerTop},
    error::{Error, Result},
    group::{CriterionFn, GroupBatch},
    hook::{Outputs, cast, same_type},
    packing::{Packing, PackingHooks},
    repeat::Repeat,
    shuffle::ShuffleBuffer,
    stage::{Keyed, Stage},
};

/// The settings of the stages after the blend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) training: bool,
    pub(crate) shuffle_buffer_size: usize,
    pub(crate) batch_size: Option<usize>,
    pub(crate) drop_last: bool,
    pub(crate) packing_buffer_size: Option<usize>,
    pub(crate) virtual_epoch_length: u64,
    /// Whether the passes repeat (`None`: the input's default). For validation, `Some(true)`
    /// repeats the whole pipeline, batches included (the reference's `RepeatDataset` around it:
    /// each pass ends with its own short batch).
    pub(crate) repeat: Option<bool>,
    pub(crate) limit: Option<u64>,
}

impl Settings {
    /// Whether the pipeline batches (a batch size, or batching by group).
    pub(crate) fn batches<E: TaskEncoder>(&self, encoder: &E) -> bool {
        self.batch_size.is_some() || encoder.hooks().batch_group_criterion
    }
}

/// Checks that the encoder's hooks fit the settings and the types, before anything is built.
pub(crate) fn check_hooks<E: TaskEncoder>(encoder: &E, settings: &Settings) -> Result<()> {
    let hooks = encoder.hooks();
    if hooks.preencode_sample && hooks.encode_sample {
        return Err(Error::InvalidSetting {
            setting: "hooks",
            value: "encode_sample and preencode_sample".to_owned(),
            reason: "a task encoder has either encode_sample or preencode_sample and \
                     postencode_sample",
        });
    }
    if !hooks.preencode_sample && !hooks.encode_sample && !same_type::<E::Sample, E::Encoded>() {
        return Err(Error::MissingHook {
            hook: "encode_sample",
            reason: "its Encoded type differs from its Sample type",
        });
    }
    if settings.packing_buffer_size.is_some() && !hooks.packing {
        return Err(Error::MissingHook {
            hook: "select_samples_to_pack and pack_selected_samples",
            reason: "the loader has a packing buffer",
        });
    }
    if settings.batches(encoder) && !hooks.encode_batch && !same_type::<E::Batch, E::Output>() {
        return Err(Error::MissingHook {
            hook: "encode_batch",
            reason: "its Output type differs from its Batch type",
        });
    }
    Ok(())
}

/// `stage` as a stage of `B` items, when `A` is `B` (an identity hook).
fn cast_stage<A: 'static, B: 'static>(
    stage: BoxStage<A>,
    hook: &'static str,
) -> Result<BoxStage<B>> {
    cast::<BoxStage<A>, BoxStage<B>>(stage)
        .ok_or(Error::MissingHook { hook, reason: "the types before and after it differ" })
}

/// The first cooker whose subflavors match a crude dataset's.
pub(crate) fn select_cooker<T>(
    cookers: Vec<Cooker<T>>,
    subflavors: Option<&Map<String, Value>>,
    dataset: &str,
) -> Result<Cooker<T>> {
    cookers.into_iter().find(|c| c.matches(subflavors)).ok_or_else(|| Error::NoCooker {
        dataset: dataset.to_owned(),
        subflavors: subflavors
            .map_or_else(|| "{}".to_owned(), |s| Value::Object(s.clone()).to_string()),
    })
}

/// What a crude leaf is cooked with.
#[derive(Debug)]
pub(crate) struct Cooking<T> {
    pub(crate) cooker: Cooker<T>,
    pub(crate) subflavors: Option<Arc<Map<String, Value>>>,
    pub(crate) aux: Arc<[AuxStore]>,
    pub(crate) primary: Option<AuxStore>,
}

impl<T> Clone for Cooking<T> {
    fn clone(&self) -> Self {
        Cooking {
            cooker: self.cooker.clone(),
            subflavors: self.subflavors.clone(),
            aux: Arc::clone(&self.aux),
            primary: self.primary.clone(),
        }
    }
}

/// Step 1's cooking stage.
pub(crate) fn cook_stage<E: TaskEncoder>(
    encoder: &Arc<E>,
    stage: BoxStage<E::Sample>,
    cooking: Cooking<E::Sample>,
    env: &StageEnv,
) -> BoxStage<E::Sample> {
    let encoder = Arc::clone(encoder);
    let f: ApplyFn<E::Sample, E::Sample> = Arc::new(move |sample, ctx| {
        let cook_ctx = CookContext {
            sample: *ctx,
            subflavors: cooking.subflavors.as_deref(),
            aux: &cooking.aux,
            primary: cooking.primary.as_ref(),
        };
        encoder.cook_crude_sample(sample, &cooking.cooker, &cook_ctx).map(Outputs::One)
    });
    Box::new(Apply::new(stage, "cook_crude_sample", f, env.clone()))
}

/// Steps 3 to 5: from the blended samples to the encoded (packed) ones.
pub(crate) fn encode_stages<E: TaskEncoder>(
    encoder: &Arc<E>,
    stage: BoxStage<E::Sample>,
    settings: &Settings,
    env: &StageEnv,
    shuffle_rng: WorkerRng,
) -> Result<BoxStage<E::Encoded>> {
    let hooks = encoder.hooks();
    let mut stage = stage;
    if settings.training && settings.shuffle_buffer_size > 1 {
        stage = Box::new(ShuffleBuffer::new(stage, settings.shuffle_buffer_size, shuffle_rng));
    }
    let mut stage: BoxStage<E::Encoded> = if hooks.preencode_sample || hooks.encode_sample {
        let e = Arc::clone(encoder);
        let (hook, f): (&'static str, ApplyFn<E::Sample, E::Encoded>) = if hooks.preencode_sample {
            ("preencode_sample", Arc::new(move |s, ctx| e.preencode_sample(s, ctx)))
        } else {
            ("encode_sample", Arc::new(move |s, ctx| e.encode_sample(s, ctx)))
        };
        Box::new(Apply::new(stage, hook, f, env.clone()))
    } else {
        cast_stage(stage, "encode_sample")?
    };
    if let Some(buffer_size) = settings.packing_buffer_size {
        let (e1, e2) = (Arc::clone(encoder), Arc::clone(encoder));
        let postencode = hooks.postencode_sample.then(|| {
            let e = Arc::clone(encoder);
            Arc::new(move |s, ctx: &_| e.postencode_sample(s, ctx))
                as crate::packing::PostencodeFn<_>
        });
        let hooks = PackingHooks {
            select: Arc::new(move |samples, ctx| e1.select_samples_to_pack(samples, ctx)),
            postencode,
            pack: Arc::new(move |samples, ctx| e2.pack_selected_samples(samples, ctx)),
        };
        stage = Box::new(Packing::new(stage, buffer_size, hooks, env.clone())?);
    } else if hooks.postencode_sample {
        let e = Arc::clone(encoder);
        let f: ApplyFn<E::Encoded, E::Encoded> =
            Arc::new(move |s, ctx| e.postencode_sample(s, ctx).map(Outputs::One));
        stage = Box::new(Apply::new(stage, "postencode_sample", f, env.clone()));
    }
    Ok(stage)
}

/// Step 6: batching and `encode_batch`.
pub(crate) fn batch_stages<E: TaskEncoder>(
    encoder: &Arc<E>,
    stage: BoxStage<E::Encoded>,
    settings: &Settings,
    env: &StageEnv,
) -> Result<BoxStage<E::Output>> {
    let hooks = encoder.hooks();
    let e = Arc::clone(encoder);
    let batch: BatchFn<E::Encoded, E::Batch> = Arc::new(move |samples, ctx| e.batch(samples, ctx));
    let batches: BoxStage<E::Batch> = if hooks.batch_group_criterion {
        let e = Arc::clone(encoder);
        let criterion: CriterionFn<E::Encoded> =
            Arc::new(move |sample, ctx| e.batch_group_criterion(sample, ctx));
        Box::new(GroupBatch::new(
            stage,
            settings.batch_size,
            settings.drop_last,
            criterion,
            batch,
            env.clone(),
        ))
    } else {
        let batch_size = settings.batch_size.ok_or(Error::InvalidSetting {
            setting: "batch_size",
            value: "None".into(),
            reason: "a loader of batches needs a batch size (or batch_group_criterion)",
        })?;
        Box::new(BatchStage::new(stage, batch_size, settings.drop_last, batch, env.clone())?)
    };
    if hooks.encode_batch {
        let e = Arc::clone(encoder);
        let f: ApplyFn<E::Batch, E::Output> = Arc::new(move |b, ctx| e.encode_batch(b, ctx));
        Ok(Box::new(Apply::new(batches, "encode_batch", f, env.clone())))
    } else {
        cast_stage(batches, "encode_batch")
    }
}

/// Steps 7 and 8.
pub(crate) fn outer_stages<T: Send + 'static>(
    stage: BoxStage<T>,
    settings: &Settings,
    env: &StageEnv,
) -> Result<Box<dyn Stage<Item = Keyed<T>>>> {
    let mut stage = stage;
    if settings.training && settings.virtual_epoch_length > 0 {
        stage = Box::new(Epochize::new(stage, settings.virtual_epoch_length, &env.worker));
    }
    if !settings.training && settings.repeat == Some(true) {
        stage = Box::new(Repeat::forever(stage, env.worker.local));
    }
    if !settings.training
        && let Some(limit) = settings.limit.filter(|&l| l > 0)
    {
        stage = Box::new(Limit::new(stage, limit, &env.worker)?);
    }
    Ok(Box::new(WorkerTop::new(stage, env.items.clone())))
}
