//! Energon-compatible distribution arithmetic: worker configuration, sample slicing, seeds and RNG
//! streams.
//!
//! This crate decides which samples each worker of each rank reads, and supplies the random
//! streams that decide in which order; both reproduce megatron-energon 7.4.1 exactly, so a job
//! sees the same samples in the same order as with the Python loader. It is pure: no I/O, no file
//! formats, no other energon crate.
//!
//! # Brief overview
//!
//! - [`WorkerConfig`]: rank, world size, workers per rank, seed offset and worker id offset;
//!   global worker ids and the per-worker [`Seed`] (SHA-1 of `"{global_worker_id},{seed_offset}"`).
//!   [`restore_seed`] derives the per-sample seed of `restore_seeds` stateless functions.
//! - [`shard_workers`] / [`slice_workers`]: split a dataset's samples over all global workers
//!   (float-division base, rotation, generalized [`bit_reversal`], cuts at shard boundaries and by
//!   `max_samples_per_sequence`) and return each local worker's [`WorkerSlices`].
//!   [`rotation_offsets`] gives the rotation of each leaf of a blend, and [`DatasetSubset`] the
//!   sample range of a metadataset `subset:`.
//! - [`WorkerRng`]: one component's random stream, a lazily seeded MT19937 with torch's CPU rules
//!   for `randbelow`, `randperm`, `shuffle`, `rand_pop` and the weighted `choice_idx`. Its
//!   [`RngState`] (module [`state`]) serializes with serde and resumes the stream exactly.
//! - [`PyRandom`]: Python's `random.Random(seed)`, used by `prepare --shuffle-tars`.
//! - [`Mt19937`]: the underlying generator; [`pymath`]: Python's float semantics (`round`, `int`,
//!   true division) that the slicing arithmetic depends on.
//!
//! # Example
//!
//! Rank 2 of 3, with 2 workers per rank, over 4 shards of 50 samples:
//!
//! ```
//! use energon_dist::{WorkerConfig, shard_workers};
//!
//! let cfg = WorkerConfig::new(2, 3, 2)?.with_seed_offset(0);
//! let workers = shard_workers(&[50, 50, 50, 50], None, &cfg, 0, None)?;
//! // Worker 0 of this rank (global worker 4) reads [134, 150) then [150, 167); worker 1 reads
//! // [167, 200).
//! assert_eq!(workers[0].offsets(), [134, 150, 167]);
//! assert_eq!(workers[1].offsets(), [167, 200]);
//! assert_eq!(workers[0].n_samples(), 33);
//!
//! // Each component of a worker draws from its own stream, all seeded with the worker seed.
//! let mut rng = cfg.worker_rng(0)?;
//! let order = rng.shuffle(&workers[0].slices().collect::<Vec<_>>());
//! assert_eq!(order.len(), 2);
//! let saved = rng.state();
//! let next = rng.randbelow(10)?;
//! assert_eq!(energon_dist::WorkerRng::from_state(saved).randbelow(10)?, next);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod error;
mod mt19937;
pub mod pymath;
mod pyrandom;
mod rng;
mod slicing;
pub mod state;
mod worker;

pub use crate::{
    error::{Error, Result},
    mt19937::{Mt19937, STATE_WORDS},
    pyrandom::PyRandom,
    rng::WorkerRng,
    slicing::{
        DatasetSubset, WorkerSlices, bit_reversal, rotation_offsets, shard_workers, slice_workers,
        worker_ranges,
    },
    state::RngState,
    worker::{Seed, WorkerConfig, restore_seed, seed_for_global_worker},
};
