//! Savable progress of the combining stages, for checkpoints.
//!
//! Each stage exposes its progress as one of these values; a loader checkpoint composes them with
//! the progress of the leaf sources (energon-reader's `LeafState`) into its own versioned format.
//! They hold counters, flags and random stream states, never items, as the reference's savable
//! fields do.

use energon_dist::RngState;
use serde::{Deserialize, Serialize};

/// The progress of a [`Repeat`](crate::Repeat) (the reference's `_repetition` and `_index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatState {
    /// Repetitions completed in the current pass.
    pub repetition: u64,
    /// Items yielded in the current repetition.
    pub index: u64,
}

/// The progress of a [`Blend`](crate::Blend) (the reference's `exhausted` and `_worker_rng`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlendState {
    /// Which children have ended their pass in the current pass.
    pub exhausted: Vec<bool>,
    /// The blend's random stream.
    pub rng: RngState,
}

/// The progress of a [`Concat`](crate::Concat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcatState {
    /// The child being read.
    pub current: usize,
}

/// The progress of a whole [`Mix`](crate::Mix) tree; leaves are placeholders, their sources
/// save their own progress (see [`Mix::leaves`](crate::Mix::leaves)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum MixState {
    /// A leaf source.
    Leaf,
    /// A repetition and its child.
    Repeat {
        /// The repetition's progress.
        state: RepeatState,
        /// The child's.
        inner: Box<MixState>,
    },
    /// A blend and its children.
    Blend {
        /// The blend's progress.
        state: BlendState,
        /// The children's, in order.
        children: Vec<MixState>,
    },
    /// A concatenation and its children.
    Concat {
        /// The concatenation's progress.
        state: ConcatState,
        /// The children's, in order.
        children: Vec<MixState>,
    },
}
