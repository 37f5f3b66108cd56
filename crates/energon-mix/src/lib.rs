//! Metadatasets and blending: resolves metadataset YAML trees into weighted or epochized leaves.
#![deny(missing_docs)]

mod error;
pub mod grammar;
pub mod resolve;

pub use crate::error::{Error, Result};
#[cfg(test)]
mod testutil;
