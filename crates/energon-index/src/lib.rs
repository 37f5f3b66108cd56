//! Energon on-disk formats and dataset preparation.
//!
//! Every file that Energon keeps about a dataset is read and written here, byte-compatible with
//! megatron-energon 7.4:
//!
//! - [`tar_scan`]: walks the headers of a tar shard and groups members into samples.
//! - [`tar_idx`]: the `<shard>.tar.idx` offset index next to each shard.
//! - [`jsonl_idx`]: the `<file>.jsonl.idx` offset index of a JSONL dataset.
//! - [`join_index`]: metadataset join indexes (`join_index_<sha256>.bin`) and the join that
//!   builds them.
//! - [`info`]: `.nv-meta/.info.json` (and the legacy `.info.yaml`).
//! - [`split`]: `.nv-meta/split.yaml` / `split.json`, brace expansion and collapse.
//! - [`dataset_config`]: the `.nv-meta/dataset.yaml` file.
//! - [`sqlite`]: `.nv-meta/index.sqlite` and `.nv-meta/index.uuid`.
//! - [`media`]: the media metadata tables of `index.sqlite` (`prepare-media`).
//! - [`prepare`]: the `energon prepare` pipeline that produces all of the above.
#![deny(missing_docs)]

pub mod dataset_config;
pub mod discover;
mod error;
pub mod fsutil;
pub mod info;
pub mod join_index;
pub mod jsonl_idx;
pub mod media;
pub mod prepare;
pub mod shard;
pub mod split;
pub mod sqlite;
pub mod tar_idx;
pub mod tar_scan;
#[cfg(test)]
mod testutil;
pub mod yaml;

pub use error::{Error, Result};

/// Name of the metadata folder inside a prepared dataset.
pub const NV_META: &str = ".nv-meta";
/// File name of the info file inside [`NV_META`].
pub const INFO_JSON: &str = ".info.json";
/// Legacy (Energon <= 7.2) file name of the info file inside [`NV_META`].
pub const INFO_YAML: &str = ".info.yaml";
/// File name of the SQLite sample index inside [`NV_META`].
pub const INDEX_SQLITE: &str = "index.sqlite";
/// File name of the index UUID inside [`NV_META`].
pub const INDEX_UUID: &str = "index.uuid";
/// Default split configuration file name inside [`NV_META`].
pub const SPLIT_YAML: &str = "split.yaml";
/// Default dataset configuration file name inside [`NV_META`].
pub const DATASET_YAML: &str = "dataset.yaml";
/// The Energon version whose formats this crate writes (stored as `energon_version`).
pub const ENERGON_FORMAT_VERSION: &str = "7.4.1";
