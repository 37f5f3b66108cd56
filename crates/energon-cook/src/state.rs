//! Savable progress of the pipeline stages, for checkpoints.
//!
//! Every stage describes its progress as a [`StageState`] node holding its inner stage's node,
//! so one worker's whole pipeline is one tree. Nodes hold indices, counters, random stream
//! states and restore keys, never sample data, as the reference's savable fields do: buffered
//! items are re-created from their keys on restore.
//!
//! The types are serde types in serde's default (externally tagged) enum form, so that both the
//! compact binary encoding and the JSON form of a checkpoint can hold them.

use energon_dist::RngState;
use energon_reader::leaf::LeafState;
use serde::{Deserialize, Serialize};

use crate::restore_key::RestoreKey;

/// The progress of one stage and, inside it, of the stages it reads from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum StageState {
    /// A leaf: a worker's slice iteration over one dataset.
    Leaf {
        /// The slice iteration.
        leaf: LeafState,
    },
    /// A map stage (loading, cooking, encoding; the reference's `MapDataset`).
    Map {
        /// Inputs taken so far (the reference's `_sample_index`).
        index: u64,
        /// Consecutive failures of its hook.
        failures: u64,
        /// The call whose outputs are not all handed out yet (a generator).
        pending: Option<PendingCall>,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// A repetition (the reference's `RepeatDataset`): of a dataset, of a leaf of an epochized
    /// blend, or of a whole blend.
    Repeat {
        /// Repetitions completed in the current pass (`_repetition`).
        repetition: u64,
        /// Items yielded in the current repetition (`_index`).
        index: u64,
        /// The current repetition reads a share of a pass dealt from a job with another number
        /// of workers (`docs/elastic.md`): it is not cut and ends this pass. Always false in
        /// the reference's terms.
        #[serde(default)]
        dealt: bool,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// A blend of the leaves (or sub-blends) of a metadataset (the reference's `BlendDataset`).
    Blend {
        /// Which children ended their pass in the current pass (`exhausted`).
        exhausted: Vec<bool>,
        /// The blend's random stream (`_worker_rng`).
        rng: RngState,
        /// The children's progress, in order.
        children: Vec<StageState>,
    },
    /// The leaves of a validation metadataset one after the other (the reference's
    /// `ConcatDataset`).
    Concat {
        /// The child being read.
        current: u64,
        /// The children's progress, in order.
        children: Vec<StageState>,
    },
    /// A shuffle buffer.
    ShuffleBuffer {
        /// The buffer's random stream.
        rng: RngState,
        /// The keys of the buffered items, in buffer order.
        restore_keys: Vec<RestoreKey>,
        /// Whether the inner pass ended and the buffer is being drained.
        draining: bool,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// Batching (the reference's `BatchDataset`).
    Batch {
        /// Batches made (or attempted) so far (`_sample_index`).
        index: u64,
        /// The batch size it was saved with.
        batch_size: u64,
        /// Consecutive failures of `batch`.
        failures: u64,
        /// The last, short batch of a pass went out; the next pull ends the pass.
        pass_done: bool,
        /// The call whose outputs are not all handed out yet (a generator).
        pending: Option<PendingCall>,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// Batching by group (the reference's `GroupBatchDataset`).
    GroupBatch {
        /// Samples grouped so far (`bucket_sample_index`).
        key_index: u64,
        /// Batches made (or attempted) so far (`batch_sample_index`).
        batch_index: u64,
        /// Consecutive failures of `batch_group_criterion`.
        key_failures: u64,
        /// Consecutive failures of `batch`.
        batch_failures: u64,
        /// The open buckets, in the order they were opened.
        buckets: Vec<BucketState>,
        /// The inner pass ended; the remaining buckets are being flushed.
        flushing: bool,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// Packing (the reference's `PackingDataset`).
    Packing {
        /// Keys of the samples read but not yet given to `select_samples_to_pack`.
        reading: Vec<RestoreKey>,
        /// Keys of the samples selected into packs not yet made, pack after pack.
        pre_packed: Vec<RestoreKey>,
        /// The number of samples of each selected pack.
        lengths: Vec<u64>,
        /// Calls of `select_samples_to_pack` so far.
        select_index: u64,
        /// Calls of `postencode_sample` so far.
        encode_index: u64,
        /// Calls of `pack_selected_samples` so far.
        pack_index: u64,
        /// Consecutive failures of the three hooks.
        failures: [u64; 3],
        /// Consecutive selections without a pack.
        empty_rounds: u64,
        /// The inner pass ended; the rest is being packed.
        draining: bool,
        /// The call whose outputs are not all handed out yet (a generator).
        pending: Option<PendingCall>,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// Virtual epochs (the reference's `EpochizeDataset`).
    Epochize {
        /// Items of the current epoch handed out (`_offset`).
        offset: u64,
        /// The epoch's last item went out; the next pull ends the epoch.
        at_end: bool,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// A limit per pass (the reference's `LimitDataset`).
    Limit {
        /// Items of the current pass handed out (`current_offset`).
        offset: u64,
        /// The inner stage.
        inner: Box<StageState>,
    },
    /// The outermost stage of a worker: counts the items it handed out (the reference's
    /// `SavableDatasetWrapper._sample_index`).
    Worker {
        /// Items handed out.
        index: u64,
        /// The inner stage.
        inner: Box<StageState>,
    },
}

/// A hook call whose outputs (a generator's) are not all handed out yet. On restore the inputs
/// are re-created from their keys, the hook is called again and the first `emitted` outputs
/// are dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The keys of the call's inputs.
    pub inputs: Vec<RestoreKey>,
    /// The call's index.
    pub index: u64,
    /// The worker's item the call was made for (its `current_batch_index`).
    pub item_index: u64,
    /// Outputs already handed out.
    pub emitted: u64,
}

/// A bucket of a group batch stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketState {
    /// The group key.
    pub key: String,
    /// The bucket's batch size.
    pub batch_size: u64,
    /// The keys of the samples in the bucket.
    pub restore_keys: Vec<RestoreKey>,
}

impl StageState {
    /// The reference's class name of the stage.
    pub fn stage_name(&self) -> &'static str {
        match self {
            StageState::Leaf { .. } => "WebdatasetSampleLoaderDataset",
            StageState::Map { .. } => "MapDataset",
            StageState::Repeat { .. } => "RepeatDataset",
            StageState::Blend { .. } => "BlendDataset",
            StageState::Concat { .. } => "ConcatDataset",
            StageState::ShuffleBuffer { .. } => "ShuffleBufferDataset",
            StageState::Batch { .. } => "BatchDataset",
            StageState::GroupBatch { .. } => "GroupBatchDataset",
            StageState::Packing { .. } => "PackingDataset",
            StageState::Epochize { .. } => "EpochizeDataset",
            StageState::Limit { .. } => "LimitDataset",
            StageState::Worker { .. } => "SavableDatasetWrapper",
        }
    }

    /// The states of the stages this one reads from: its inner stage, a blend's or a
    /// concatenation's children, nothing for a leaf.
    pub fn children(&self) -> &[StageState] {
        match self {
            StageState::Leaf { .. } => &[],
            StageState::Blend { children, .. } | StageState::Concat { children, .. } => children,
            StageState::Map { inner, .. }
            | StageState::Repeat { inner, .. }
            | StageState::ShuffleBuffer { inner, .. }
            | StageState::Batch { inner, .. }
            | StageState::GroupBatch { inner, .. }
            | StageState::Packing { inner, .. }
            | StageState::Epochize { inner, .. }
            | StageState::Limit { inner, .. }
            | StageState::Worker { inner, .. } => std::slice::from_ref(&**inner),
        }
    }

    /// The states of the stages this one reads from, to change them.
    pub fn children_mut(&mut self) -> &mut [StageState] {
        match self {
            StageState::Leaf { .. } => &mut [],
            StageState::Blend { children, .. } | StageState::Concat { children, .. } => children,
            StageState::Map { inner, .. }
            | StageState::Repeat { inner, .. }
            | StageState::ShuffleBuffer { inner, .. }
            | StageState::Batch { inner, .. }
            | StageState::GroupBatch { inner, .. }
            | StageState::Packing { inner, .. }
            | StageState::Epochize { inner, .. }
            | StageState::Limit { inner, .. }
            | StageState::Worker { inner, .. } => std::slice::from_mut(&mut **inner),
        }
    }
}

/// The error for a state node of the wrong kind.
pub(crate) fn mismatch(want: &'static str, got: &StageState) -> crate::Error {
    crate::Error::BadState {
        reason: format!("expected the state of a {want}, found one of a {}", got.stage_name()),
    }
}
