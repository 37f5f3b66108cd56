//! Per-worker pipelines, task encoders and the resumable loader: from a dataset's samples to the
//! batches of one rank, in exactly the reference's order, saved and restored exactly.
//!
//! # Brief overview
//!
//! - [`TaskEncoder`]: the reference's hooks (`encode_sample`, packing, `batch_group_criterion`,
//!   `batch`, `encode_batch`, cookers for crude datasets), generic in the sample and batch
//!   types; [`Hooks`] says which optional ones exist, which decides the pipeline's stages
//!   (the reference's stage order). [`DefaultTaskEncoder`] is the reference's default. Hooks get a
//!   [`SampleContext`] (`current_sample_index`, a restorable per-sample seed) and report failures
//!   as [`HookError`]s, handled by the [`ErrorPolicy`] and counted in [`FailureStats`].
//! - [`LoaderBuilder`] assembles one pipeline per worker over a metadataset's plan or one dataset
//!   (a plan of one leaf), in the reference's order: leaf, loading and cooking, repetition and
//!   blending, shuffle buffer, encoding, packing, batching, virtual epochs or limit.
//! - [`Loader`] runs the pipelines in the caller's thread or on worker threads and hands out
//!   their items in torch's round-robin order. [`Loader::save_state`] returns a [`LoaderState`]
//!   that restores (`LoaderBuilder::restore_state`) into a loader yielding exactly the items
//!   this one would have yielded next; [`Checkpoint`] writes and reads it as a versioned file
//!   (module [`checkpoint`], format in `docs/format/checkpoint.md`).
//! - The stages themselves ([`LeafSource`], map stages with the error policy, [`Repeat`],
//!   [`ShuffleBuffer`], [`Batcher`], ...) are explicit state machines ([`Stage`]) whose progress
//!   is a [`StageState`] (module [`state`]); items travel as [`Keyed`] values carrying the
//!   reference's [`RestoreKey`], from which buffered items are made again on restore.
//!
//! # Example
//!
//! Rank 0 of 1, two workers, batches of 2, keys only; saved after two batches and restored:
//!
//! ```
//! use std::{path::Path, sync::Arc};
//! use energon_cook::LoaderBuilder;
//! use energon_dist::WorkerConfig;
//! use energon_reader::{Dataset, OpenOptions};
//!
//! let root = energon_fixtures::ref_small_dir();
//! let dataset = Arc::new(Dataset::open(&root, &OpenOptions::default())?);
//! let builder = || {
//!     LoaderBuilder::new(Arc::clone(&dataset), WorkerConfig::new(0, 1, 2).unwrap(), |raw| {
//!         Ok(Some(raw.key))
//!     })
//!     .batch_size(Some(2))
//! };
//! let mut loader = builder().build_batches()?;
//! let mut keys = Vec::new();
//! for _ in 0..2 {
//!     let batch = loader.next().expect("training never ends")?;
//!     keys.extend(batch.value.value.samples.into_iter().map(|s| s.value));
//! }
//! // Worker 0's first batch, then worker 1's (the reference's order for this configuration).
//! assert_eq!(keys, ["00000050", "00000051", "00000150", "00000100"]);
//!
//! let state = loader.save_state()?;
//! let next = loader.next().expect("training never ends")?;
//! let restored = builder().restore_state(state).build_batches()?.next().expect("a batch")?;
//! assert_eq!(restored.value.value, next.value.value);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod apply;
mod batch;
mod blend;
mod builder;
pub mod checkpoint;
mod context;
mod elastic;
mod encoder;
mod epoch;
mod error;
mod group;
mod hook;
mod loader;
mod packing;
mod pipeline;
mod policy;
mod repeat;
mod restore_key;
mod shuffle;
mod source;
mod spec;
mod stage;
pub mod state;

pub use crate::{
    batch::{Batch, Batcher},
    blend::{Blend, Concat, MixBatch, MixFn, combine_pipelines, mix_batch_pipelines},
    builder::{
        BoxStage, LeafLoad, LoaderBuilder, MapFn, SampleSource, WorkerPipeline, key_worker,
        restore_in,
    },
    checkpoint::{Checkpoint, LoaderState},
    context::{SampleContext, WorkerInfo},
    elastic::samples_left_in_pass,
    encoder::{AuxStore, CookContext, CookFn, Cooker, DefaultTaskEncoder, Hooks, TaskEncoder},
    error::{ConfigDifference, Error, Result, message_with_causes},
    hook::{BoxError, Generator, HookError, HookResult, Outputs},
    loader::{
        InlineWorker, Loaded, Loader, LoaderConfig, LoaderStart, WorkerLink, WorkerMessage,
        WorkerStart, serve_worker,
    },
    policy::{ErrorPolicy, FailureStats, HookCounts},
    repeat::Repeat,
    restore_key::{KeyPart, LoaderWrapper, RestoreKey, loader_worker_id, split_loader_key},
    shuffle::ShuffleBuffer,
    source::LeafSource,
    spec::{LeafReader, LoaderSpec, Opened, Subflavors, with_subflavors},
    stage::{FnStage, Keyed, Stage},
    state::StageState,
};
