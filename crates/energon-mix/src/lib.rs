//! Metadatasets: training mixtures of datasets described in YAML, resolved and blended exactly as
//! megatron-energon 7.4.1 does it, so a mixture yields the same samples in the same order.
//!
//! # Brief overview
//!
//! - [`grammar`]: the file format (`MetadatasetV2` with `blend`, `blend_epochized`, `join` and
//!   `path` nodes; the V1 `Metadataset`), read strictly: a mistake is an error naming the file and
//!   the YAML path of the node (`splits.train.blend[1].weight`).
//! - [`Metadataset`] / [`resolve_path`]: load a file and its nested files (paths checked, cycles
//!   refused) and resolve one split into a flat list of [`ResolvedLeaf`]s with their effective
//!   split part, weight or repetitions, subflavors, `shuffle_over_epochs`, subset and aux sources.
//! - [`join`]: join indexes (`<file>.cache/join_index_<sha256>.bin`), built by
//!   [`prepare_metadataset`] (`energon prepare META.yaml`), and [`join::JoinedDataset`], which
//!   reads the samples of every joined dataset for one key.
//! - [`MixPlan`]: the leaves opened and sliced over the workers of one rank (rotation offsets,
//!   subsets, float32 blend weights), and how each worker combines them ([`MixTree`]: repetitions,
//!   blends, concatenation). The loader (energon-cook) runs the plan as stages of its pipelines.
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use energon_dist::WorkerConfig;
//! use energon_mix::{Metadataset, MixOptions, MixPlan, MixTree, ResolveOptions};
//!
//! // A blend of the reference-prepared fixture (weights 2 and 1.5, one with a subset) and its JSONL file (1).
//! let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mds/blend.yaml");
//! let split = Metadataset::load(&path)?.resolve("train", &ResolveOptions::default())?;
//! let weights: Vec<f64> = split.leaves.iter().map(|l| l.weight.unwrap()).collect();
//! assert_eq!(weights, [2.0 / 4.5, 1.0 / 4.5, 1.5 / 4.5]);
//!
//! // Rank 0 of 1 without worker processes: every leaf repeated forever, blended by weight.
//! let plan = MixPlan::new(split, WorkerConfig::new(0, 1, 0)?, MixOptions::default())?;
//! let MixTree::Blend { weights: blend, children } = plan.tree() else { unreachable!() };
//! assert_eq!(blend, weights.iter().map(|&w| w as f32).collect::<Vec<_>>());
//! assert!(matches!(&children[0], MixTree::Repeat { repeats: None, .. }));
//! // The worker's slices of each leaf: the whole fixture, the JSONL file, half the fixture.
//! let leaves = plan.worker_leaves(0)?;
//! assert_eq!(leaves.iter().map(|l| l.len_worker()).collect::<Vec<_>>(), [200, 200, 100]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod error;
pub mod grammar;
pub mod join;
mod plan;
mod prepare;
pub mod resolve;
#[cfg(test)]
mod testutil;

pub use crate::{
    error::{Error, Result},
    plan::{
        LeafData, LeafSample, MixOptions, MixPlan, MixTree, PlannedLeaf, SampleSource, SingleLeaf,
    },
    prepare::{PrepareReport, PreparedJoin, prepare_metadataset},
    resolve::{
        AuxSource, BlendMode, LeafKind, Metadataset, ResolveOptions, ResolvedLeaf, ResolvedSplit,
        TraversedLeaf, resolve_path, traverse,
    },
};
