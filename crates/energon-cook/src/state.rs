//! Savable progress of the pipeline stages, for checkpoints.
//!
//! Each stage exposes its progress as one of these values (the leaf's is energon-reader's
//! `LeafState`); a loader checkpoint composes them. They hold indices, counters, random stream
//! states and restore keys, never sample data, as the reference's savable fields do.

use energon_dist::RngState;
use serde::{Deserialize, Serialize};

use crate::restore_key::RestoreKey;

/// The progress of a [`Repeat`](crate::Repeat) stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatState {
    /// Completed repetitions in the current pass (the reference's `_repetition`).
    pub repetition: u64,
    /// Items yielded in the current repetition (the reference's `_index`).
    pub index: u64,
}

/// The progress of a [`ShuffleBuffer`](crate::ShuffleBuffer) stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleBufferState {
    /// The buffer's random stream.
    pub rng: RngState,
    /// The keys of the buffered items, in buffer order.
    pub restore_keys: Vec<RestoreKey>,
}

/// The progress of a [`Batcher`](crate::Batcher) stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchState {
    /// Batches made so far.
    pub batch_index: u64,
}
