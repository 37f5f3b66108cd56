//! Per-worker pipelines and the loader: from a dataset's samples to the batches of one rank, in
//! exactly the reference's order.
//!
//! # Brief overview
//!
//! A pipeline is a chain of [`Stage`]s, each an explicit state machine pulled one item at a time,
//! mirroring the reference's `get_train_dataset` (spec 6.1):
//!
//! - [`LeafSource`]: a worker's slices in the leaf order (energon-reader's `LeafIter`) read into
//!   samples; excluded samples are skipped.
//! - [`Map`]: a function per item (loading and decoding, cooking, encoding).
//! - [`Repeat`]: passes repeated forever (training) or a possibly fractional number of times.
//! - [`ShuffleBuffer`]: a window drawn from at random, with its own stream.
//! - [`Batcher`]: consecutive items grouped into a [`Batch`].
//!
//! Items travel as [`Keyed`] values carrying the reference's [`RestoreKey`], so no stage needs
//! to know what a sample is. [`Loader`] runs one pipeline per worker, in the caller's thread or on
//! worker threads, and hands out their items in torch's round-robin order, which depends on the
//! pipelines only, never on thread timing. [`LoaderBuilder`] assembles all of it for one dataset.
//! [`MixLoaderBuilder`] does the same for a metadataset (energon-mix's blends between the leaves
//! and the shuffle buffer).
//! Each stage exposes its progress (module [`state`]) for checkpoints.
//!
//! # Example
//!
//! Rank 0 of 1, two workers, batches of 2, keys only:
//!
//! ```
//! use std::{path::Path, sync::Arc};
//! use energon_cook::LoaderBuilder;
//! use energon_dist::WorkerConfig;
//! use energon_reader::{Dataset, OpenOptions};
//!
//! let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/energon-ref-small");
//! let dataset = Arc::new(Dataset::open(&root, &OpenOptions::default())?);
//! let loader = LoaderBuilder::new(dataset, WorkerConfig::new(0, 1, 2)?, |raw| Ok(Some(raw.key)))
//!     .batch_size(Some(2))
//!     .build_batches()?;
//! let mut keys = Vec::new();
//! for batch in loader.take(2) {
//!     let batch = batch?;
//!     keys.extend(batch.value.value.samples.into_iter().map(|s| s.value));
//! }
//! // Worker 0's first batch, then worker 1's (the reference's order for this configuration).
//! assert_eq!(keys, ["00000050", "00000051", "00000150", "00000100"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod apply;
mod batch;
mod builder;
pub mod checkpoint;
mod context;
mod encoder;
mod epoch;
mod error;
mod group;
mod hook;
mod loader;
mod map;
mod mix;
mod packing;
mod pipeline;
mod policy;
mod repeat;
mod restore_key;
mod shuffle;
mod source;
mod stage;
pub mod state;

pub use crate::{
    batch::{Batch, Batcher},
    builder::{BoxStage, LoaderBuilder, MapFn, SampleSource, max_open_shards},
    checkpoint::{Checkpoint, LoaderState},
    context::{SampleContext, WorkerInfo},
    encoder::{AuxStore, CookContext, CookFn, Cooker, DefaultTaskEncoder, Hooks, TaskEncoder},
    error::{ConfigDifference, Error, Result},
    hook::{BoxError, HookError, HookResult, Outputs},
    loader::{Loaded, Loader, LoaderConfig},
    map::Map,
    mix::{MixLeaf, MixLoaderBuilder},
    policy::{ErrorPolicy, FailureStats, HookCounts},
    repeat::Repeat,
    restore_key::{KeyPart, RestoreKey},
    shuffle::ShuffleBuffer,
    source::LeafSource,
    stage::{FnStage, Keyed, Stage},
    state::StageState,
};
