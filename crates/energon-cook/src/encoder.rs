//! Task encoders: the hooks that turn a dataset's samples into a model's batches (the reference's
//! `TaskEncoder`), and cookers, which turn crude samples into typed ones.
//!
//! A task encoder is generic in its types: `Sample` (what loading and cooking make), `Encoded`
//! (what `encode_sample` makes, and what packing works on), `Batch` (what `batch` makes) and
//! `Output` (what `encode_batch` makes, what the loader hands out). Which optional hooks it
//! implements decides which stages the pipeline has, as "overridden" does in the reference;
//! Rust cannot see overriding, so [`TaskEncoder::hooks`] says it. A hook that is not declared
//! stands for the identity, which is only possible between equal types: building a
//! loader fails with [`Error::MissingHook`](crate::Error::MissingHook) otherwise.

use std::{fmt, path::Path, sync::Arc};

use bytes::Bytes;
use energon_reader::{Decoded, Decoder, FileStore, SampleAt, SourceInfo};
use serde_json::{Map, Value};

use crate::{
    batch::Batch,
    context::SampleContext,
    error::Result,
    hook::{HookError, HookResult, Outputs, cast},
    stage::Keyed,
};

/// The optional hooks a task encoder implements (the reference's "overridden" test): each one
/// adds a stage to the pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hooks {
    /// `encode_sample`: a map stage after the shuffle buffer.
    pub encode_sample: bool,
    /// `preencode_sample`: the map stage after the shuffle buffer instead of `encode_sample`,
    /// with `postencode_sample` after packing.
    pub preencode_sample: bool,
    /// `postencode_sample`: inside packing, or a map stage of its own without packing.
    pub postencode_sample: bool,
    /// `select_samples_to_pack` and `pack_selected_samples`: needed for a packing buffer.
    pub packing: bool,
    /// `batch_group_criterion`: batching by group instead of consecutive batches.
    pub batch_group_criterion: bool,
    /// `encode_batch`: a map stage after batching.
    pub encode_batch: bool,
}

impl Hooks {
    /// The reference's `DefaultTaskEncoder`, which counts as overriding `encode_sample` and
    /// `encode_batch` (their map stages show in the restore keys).
    pub const DEFAULT_TASK_ENCODER: Hooks =
        Hooks { encode_sample: true, encode_batch: true, ..Hooks::NONE };

    /// No optional hook.
    pub const NONE: Hooks = Hooks {
        encode_sample: false,
        preencode_sample: false,
        postencode_sample: false,
        packing: false,
        batch_group_criterion: false,
        encode_batch: false,
    };

    /// The names of the declared hooks, for configurations and messages.
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            (self.encode_sample, "encode_sample"),
            (self.preencode_sample, "preencode_sample"),
            (self.postencode_sample, "postencode_sample"),
            (self.packing, "select_samples_to_pack+pack_selected_samples"),
            (self.batch_group_criterion, "batch_group_criterion"),
            (self.encode_batch, "encode_batch"),
        ];
        all.into_iter().filter(|(on, _)| *on).map(|(_, name)| name).collect()
    }
}

/// Turns samples into batches: the reference's `TaskEncoder`, with its hooks and defaults.
///
/// Every hook gets a [`SampleContext`]: the worker, the call's index
/// ([`SampleContext::current_sample_index`]) and a per-call seed ([`SampleContext::rng`]) that
/// is the same when the call is made again on restore, so randomness drawn from it is
/// restorable. Hooks must be deterministic given their input and context (the reference's
/// `@stateless`): buffered samples are re-created on restore by calling them again.
///
/// A hook fails with [`HookError`]: `Skip` drops the sample quietly, `Failed` drops it and
/// counts it (the loader stops after `failure_tolerance` failures of one hook in a row),
/// `Fatal` stops the loader.
pub trait TaskEncoder: Send + Sync + 'static {
    /// What loading (and cooking) makes of a dataset's samples.
    type Sample: Send + 'static;
    /// What `encode_sample` (or `preencode_sample`, packing) makes.
    type Encoded: Send + 'static;
    /// What `batch` makes.
    type Batch: Send + 'static;
    /// What `encode_batch` makes: the loader's items when batching.
    type Output: Send + 'static;

    /// The optional hooks this encoder implements.
    fn hooks(&self) -> Hooks;

    /// The cookers for crude datasets, tried in order: the first whose subflavors match cooks
    /// all samples of a crude dataset (the reference's `cookers`).
    fn cookers(&self) -> Vec<Cooker<Self::Sample>> {
        Vec::new()
    }

    /// Cooks one crude sample with the matching cooker (default: calls the cooker).
    fn cook_crude_sample(
        &self,
        sample: Self::Sample,
        cooker: &Cooker<Self::Sample>,
        ctx: &CookContext<'_>,
    ) -> HookResult<Self::Sample> {
        cooker.cook(sample, ctx)
    }

    /// Encodes one sample into zero, one or several (default: the sample itself, if `Encoded`
    /// is `Sample`).
    fn encode_sample(
        &self,
        sample: Self::Sample,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Self::Encoded>> {
        let _ = ctx;
        identity("encode_sample", sample)
    }

    /// The part of the encoding before packing (with [`Hooks::preencode_sample`]).
    fn preencode_sample(
        &self,
        sample: Self::Sample,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Self::Encoded>> {
        let _ = (sample, ctx);
        Err(not_implemented("preencode_sample"))
    }

    /// The part of the encoding after packing, per member of a pack (with
    /// [`Hooks::postencode_sample`]).
    fn postencode_sample(
        &self,
        sample: Self::Encoded,
        ctx: &SampleContext,
    ) -> HookResult<Self::Encoded> {
        let _ = (sample, ctx);
        Err(not_implemented("postencode_sample"))
    }

    /// Groups a full packing buffer into packs: positions in `samples`, each at most once;
    /// samples left out are dropped (with [`Hooks::packing`]).
    fn select_samples_to_pack(
        &self,
        samples: &[Keyed<Self::Encoded>],
        ctx: &SampleContext,
    ) -> HookResult<Vec<Vec<usize>>> {
        let _ = (samples, ctx);
        Err(not_implemented("select_samples_to_pack"))
    }

    /// Combines the samples of one pack (with [`Hooks::packing`]).
    fn pack_selected_samples(
        &self,
        samples: Vec<Keyed<Self::Encoded>>,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Self::Encoded>> {
        let _ = (samples, ctx);
        Err(not_implemented("pack_selected_samples"))
    }

    /// The group of a sample and, when the loader has no batch size, the group's batch size
    /// (with [`Hooks::batch_group_criterion`]).
    fn batch_group_criterion(
        &self,
        sample: &Self::Encoded,
        ctx: &SampleContext,
    ) -> HookResult<(String, Option<usize>)> {
        let _ = (sample, ctx);
        Err(not_implemented("batch_group_criterion"))
    }

    /// Makes a batch of samples (default: a [`Batch`] of them, if `Batch` is
    /// `Batch<Encoded>`). A failure drops the whole batch.
    fn batch(
        &self,
        samples: Vec<Keyed<Self::Encoded>>,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Self::Batch>> {
        let _ = ctx;
        match cast::<Batch<Self::Encoded>, Self::Batch>(Batch { samples }) {
            Some(batch) => Ok(Outputs::One(batch)),
            None => Err(HookError::fatal_msg(
                "the task encoder must implement batch: its Batch type is not \
                 energon_cook::Batch<Encoded>",
            )),
        }
    }

    /// Encodes a batch (default: the batch itself, if `Output` is `Batch`).
    fn encode_batch(
        &self,
        batch: Self::Batch,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Self::Output>> {
        let _ = ctx;
        identity("encode_batch", batch)
    }

    /// Entries that describe the encoder in a checkpoint's configuration (its settings), so a
    /// checkpoint of another encoder configuration is refused. Keys starting with `_` are
    /// informative only.
    fn config(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

fn identity<A: 'static, B: 'static>(hook: &'static str, a: A) -> HookResult<Outputs<B>> {
    cast::<A, B>(a).map(Outputs::One).ok_or_else(|| not_implemented(hook))
}

fn not_implemented(hook: &'static str) -> HookError {
    HookError::fatal_msg(format!(
        "{hook} is called but not implemented (declare it in TaskEncoder::hooks only when it is \
         implemented)"
    ))
}

/// A cooking function.
pub type CookFn<T> = Arc<dyn Fn(T, &CookContext<'_>) -> HookResult<T> + Send + Sync>;

/// Cooks the crude samples of datasets whose subflavors match (the reference's `Cooker`).
pub struct Cooker<T> {
    cook: CookFn<T>,
    has_subflavors: Option<Map<String, Value>>,
    need_primary: bool,
}

impl<T> Clone for Cooker<T> {
    fn clone(&self) -> Self {
        Cooker {
            cook: Arc::clone(&self.cook),
            has_subflavors: self.has_subflavors.clone(),
            need_primary: self.need_primary,
        }
    }
}

impl<T> fmt::Debug for Cooker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cooker")
            .field("has_subflavors", &self.has_subflavors)
            .field("need_primary", &self.need_primary)
            .finish_non_exhaustive()
    }
}

impl<T> Cooker<T> {
    /// A cooker for every crude dataset.
    pub fn new<F>(cook: F) -> Self
    where
        F: Fn(T, &CookContext<'_>) -> HookResult<T> + Send + Sync + 'static,
    {
        Cooker { cook: Arc::new(cook), has_subflavors: None, need_primary: false }
    }

    /// A cooker for every crude dataset from a plain function: `Ok(None)` skips the sample, an
    /// error drops it under the error policy.
    pub fn of_fn<F>(cook: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        Cooker::new(move |sample, _| match cook(sample) {
            Ok(Some(sample)) => Ok(sample),
            Ok(None) => Err(HookError::Skip),
            Err(err) => Err(HookError::Failed(Box::new(err))),
        })
    }

    /// Only for datasets whose subflavors have all these entries, with equal values.
    pub fn has_subflavors(mut self, subflavors: Map<String, Value>) -> Self {
        self.has_subflavors = Some(subflavors);
        self
    }

    /// The cook function reads other files of the sample's own dataset
    /// ([`CookContext::primary`]).
    pub fn need_primary(mut self) -> Self {
        self.need_primary = true;
        self
    }

    /// Whether the primary dataset is asked for.
    pub fn needs_primary(&self) -> bool {
        self.need_primary
    }

    /// Whether the cooker applies to a dataset with these subflavors.
    pub fn matches(&self, subflavors: Option<&Map<String, Value>>) -> bool {
        let Some(wanted) = &self.has_subflavors else { return true };
        wanted.iter().all(|(k, v)| subflavors.and_then(|s| s.get(k)) == Some(v))
    }

    /// Cooks one sample.
    pub fn cook(&self, sample: T, ctx: &CookContext<'_>) -> HookResult<T> {
        (self.cook)(sample, ctx)
    }

    /// The subflavors the cooker asks for.
    pub fn subflavors(&self) -> Option<&Map<String, Value>> {
        self.has_subflavors.as_ref()
    }
}

/// What a cooker gets besides the sample: the call's context, the dataset's subflavors, its
/// auxiliary sources and, if asked for, its own files.
#[derive(Debug, Clone, Copy)]
pub struct CookContext<'a> {
    /// The call.
    pub sample: SampleContext,
    /// The dataset's subflavors.
    pub subflavors: Option<&'a Map<String, Value>>,
    /// The auxiliary sources, by name (the metadataset's `aux:`).
    pub aux: &'a [AuxStore],
    /// The dataset's own files (for cookers made with [`Cooker::need_primary`]).
    pub primary: Option<&'a AuxStore>,
}

impl CookContext<'_> {
    /// The auxiliary source `name`.
    pub fn aux(&self, name: &str) -> Option<&AuxStore> {
        self.aux.iter().find(|a| a.name() == name)
    }
}

/// A file store a cooker reads from, decoding files by extension when a decoder is set (the
/// reference wraps auxiliary stores in a `DecodeFileStore`).
#[derive(Clone)]
pub struct AuxStore {
    name: String,
    store: Arc<dyn FileStore>,
    decoder: Option<Decoder>,
}

impl fmt::Debug for AuxStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuxStore")
            .field("name", &self.name)
            .field("path", &self.store.path())
            .field("decoder", &self.decoder)
            .finish()
    }
}

impl AuxStore {
    /// Store `store` under `name`, decoding with `decoder`.
    pub fn new(
        name: impl Into<String>,
        store: Arc<dyn FileStore>,
        decoder: Option<Decoder>,
    ) -> Self {
        AuxStore { name: name.into(), store, decoder }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store's root.
    pub fn path(&self) -> &Path {
        self.store.path()
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn FileStore> {
        &self.store
    }

    /// The bytes of file `name` and where they came from.
    pub fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)> {
        Ok(self.store.get(name)?)
    }

    /// File `name`, decoded by its extension (raw bytes without a decoder).
    pub fn get_decoded(&self, name: &str) -> Result<(Decoded, SourceInfo)> {
        let (data, source) = self.get(name)?;
        let Some(decoder) = &self.decoder else { return Ok((Decoded::Bytes(data), source)) };
        let decoded =
            decoder.decode(name, &data).map_err(|reason| energon_reader::Error::Decode {
                at: Box::new(SampleAt {
                    dataset: source.dataset_path.to_path_buf(),
                    shard: source.shard_name.to_string(),
                    key: Some(name.to_owned()),
                    index: None,
                    offset: 0,
                }),
                part: name.to_owned(),
                reason,
            })?;
        Ok((decoded, source))
    }
}

/// The `encode_sample` function of a [`DefaultTaskEncoder`].
type EncodeFn<T> = Arc<dyn Fn(T) -> Result<Option<T>> + Send + Sync>;

/// The reference's `DefaultTaskEncoder`: samples pass through `encode_sample` unchanged (or
/// through the function given to [`DefaultTaskEncoder::encode_with`]), batches are
/// [`Batch`]es of them, cookers as given.
pub struct DefaultTaskEncoder<T> {
    cookers: Vec<Cooker<T>>,
    encode: Option<EncodeFn<T>>,
    sample_type: Option<for<'a> fn(&'a T) -> &'a str>,
}

impl<T> fmt::Debug for DefaultTaskEncoder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultTaskEncoder")
            .field("cookers", &self.cookers)
            .field("encode", &self.encode.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> Default for DefaultTaskEncoder<T> {
    fn default() -> Self {
        DefaultTaskEncoder { cookers: Vec::new(), encode: None, sample_type: None }
    }
}

impl<T> Clone for DefaultTaskEncoder<T> {
    fn clone(&self) -> Self {
        DefaultTaskEncoder {
            cookers: self.cookers.clone(),
            encode: self.encode.clone(),
            sample_type: self.sample_type,
        }
    }
}

impl<T> DefaultTaskEncoder<T> {
    /// The encoder with these cookers.
    pub fn with_cookers(mut self, cookers: Vec<Cooker<T>>) -> Self {
        self.cookers = cookers;
        self
    }

    /// The encoder with an `encode_sample` function (`Ok(None)` skips the sample).
    pub fn encode_with<F>(mut self, encode: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        self.encode = Some(Arc::new(encode));
        self
    }

    /// `batch` fails on samples of different types, as the reference's does on a blend of
    /// datasets with different sample types (the whole batch is dropped); `type_of` names a
    /// sample's type.
    pub fn checking_sample_types(mut self, type_of: for<'a> fn(&'a T) -> &'a str) -> Self {
        self.sample_type = Some(type_of);
        self
    }
}

impl DefaultTaskEncoder<energon_reader::Sample> {
    /// The default encoder for energon-reader's samples, whose `batch` refuses samples of
    /// different types as the reference's does.
    pub fn samples() -> Self {
        DefaultTaskEncoder::default().checking_sample_types(energon_reader::Sample::type_name)
    }
}

impl<T: Send + 'static> TaskEncoder for DefaultTaskEncoder<T> {
    type Sample = T;
    type Encoded = T;
    type Batch = Batch<T>;
    type Output = Batch<T>;

    fn hooks(&self) -> Hooks {
        Hooks::DEFAULT_TASK_ENCODER
    }

    fn cookers(&self) -> Vec<Cooker<T>> {
        self.cookers.clone()
    }

    fn encode_sample(&self, sample: T, _: &SampleContext) -> HookResult<Outputs<T>> {
        match &self.encode {
            None => Ok(Outputs::One(sample)),
            Some(encode) => match encode(sample) {
                Ok(Some(sample)) => Ok(Outputs::One(sample)),
                Ok(None) => Err(HookError::Skip),
                Err(err) => Err(HookError::Failed(Box::new(err))),
            },
        }
    }

    fn batch(&self, samples: Vec<Keyed<T>>, _: &SampleContext) -> HookResult<Outputs<Batch<T>>> {
        if let Some(type_of) = self.sample_type {
            // COMPAT(energon 7.4.1): task_encoder/base.py:DefaultTaskEncoder.batch cannot batch
            // samples of different dataclasses; the error handler drops the whole batch.
            let mut types = samples.iter().map(|s| type_of(&s.value));
            if let Some(first) = types.next()
                && let Some(other) = types.find(|t| *t != first)
            {
                return Err(HookError::msg(format!(
                    "cannot batch samples of different types ({first} and {other})"
                )));
            }
        }
        Ok(Outputs::One(Batch { samples }))
    }

    fn encode_batch(&self, batch: Batch<T>, _: &SampleContext) -> HookResult<Outputs<Batch<T>>> {
        Ok(Outputs::One(batch))
    }
}
