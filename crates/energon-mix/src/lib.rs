//! Metadatasets and blending: resolves metadataset YAML trees into weighted or epochized leaves.
#![deny(missing_docs)]

mod error;
pub mod grammar;
pub mod join;
mod plan;
mod prepare;
pub mod resolve;
mod runtime;
mod source;
pub mod state;
#[cfg(test)]
mod testutil;

pub use crate::{
    error::{Error, Result},
    plan::{LeafData, LeafSample, MixOptions, MixPlan, PlannedLeaf},
    prepare::{PrepareReport, PreparedJoin, prepare_metadataset},
    resolve::{
        AuxSource, BlendMode, LeafKind, Metadataset, ResolveOptions, ResolvedLeaf, ResolvedSplit,
        resolve_path,
    },
    runtime::{Blend, Combiner, Concat, Mix, Repeat, Source, Tag},
    source::{MixItem, ReadLeaf, SampleLeaf},
};
