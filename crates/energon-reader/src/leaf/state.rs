//! Savable progress of a [`LeafIter`](super::LeafIter), for checkpoints.
//!
//! The fields mirror the reference's `WebdatasetSampleLoaderDataset` savable fields: the worker
//! stream, the open epoch (how far its slice order got and the open slots) and the counters. The
//! remaining slice order is not stored: like the reference, the state keeps the stream as it was
//! before the order was drawn and redraws it on restore, so a state stays small however many
//! slices a worker has.

use energon_dist::RngState;
use serde::{Deserialize, Serialize};

/// The complete progress of one worker's iteration over one leaf dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafState {
    /// The leaf's random stream (slice orders and slot draws).
    pub rng: RngState,
    /// The sample ranges the open (or next) epoch reads instead of the worker's slices, once
    /// each (the rest of other workers' passes, dealt to this one); `None` for the slices.
    pub ranges: Option<Vec<(u64, u64)>>,
    /// The open epoch, `None` between epochs.
    pub epoch: Option<EpochState>,
    /// Indices yielded in total.
    pub sample_count: u64,
    /// Epochs ended.
    pub epoch_count: u64,
    /// Indices yielded in the open epoch.
    pub epoch_sample_count: u64,
}

/// The progress of an open epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochState {
    /// The stream before the epoch's slice order was drawn; `None` for sequential order, which
    /// draws nothing.
    pub order_rng: Option<RngState>,
    /// How many slices of the order have been opened (the reference's `_pending_slices_offset`).
    pub opened: u64,
    /// The open slice (or range) of each slot, `None` for an empty slot (the reference's
    /// `_active_slice_state`).
    pub active: Vec<Option<SliceCursor>>,
}

/// An open slice and the next sample to read in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceCursor {
    /// The slice number within the worker's slices.
    pub slice: usize,
    /// The global index of the next sample to read.
    pub current: u64,
}
