//! Energon on-disk formats and dataset preparation.
//!
//! Every file that Energon keeps about a dataset is read and written here, byte-compatible with
//! megatron-energon 7.4, for any tool that needs them (the loader, a converter, a checker):
//!
//! - [`tar_scan`]: walks the headers of a tar shard and groups members into samples
//!   ([`ShardScan`]).
//! - [`tar_idx`]: the `<shard>.tar.idx` offset index next to each shard ([`TarIndex`]).
//! - [`tar_patch`]: renaming the members of shards in place (`--fix-duplicates`).
//! - [`jsonl_idx`]: the `<file>.jsonl.idx` offset index of a JSONL dataset ([`JsonlIndex`]).
//! - [`info`]: `.nv-meta/.info.json` (and the legacy `.info.yaml`) ([`DatasetInfo`]).
//! - [`split`]: `.nv-meta/split.yaml` / `split.json`, brace expansion and collapse
//!   ([`SplitConfig`]).
//! - [`dataset_config`]: the `.nv-meta/dataset.yaml` file ([`DatasetConfig`]).
//! - [`discover`]: what a path is ([`classify`]) and which shards a folder has.
//! - [`yaml`]: the YAML dialect of these files (the reference's scalar casting and layout).
//! - [`sqlite`] (feature `sqlite`): `.nv-meta/index.sqlite` ([`SqliteIndex`],
//!   [`SqliteIndexWriter`]) and `.nv-meta/index.uuid`.
//! - [`media`] (feature `sqlite`): the media metadata tables of `index.sqlite`.
//! - [`join_index`] (feature `sqlite`): metadataset join indexes (`join_index_<sha256>.bin`,
//!   [`JoinIndex`]) and the join that builds them.
//! - [`prepare`] (feature `prepare`): the `energon prepare` pipeline that produces all of the
//!   above ([`prepare_dataset`]).
//!
//! # Features
//!
//! `prepare` (default) implies `sqlite`, which links a bundled SQLite. A reader of shards and
//! their offset indexes needs neither: `default-features = false`.
//!
//! # Example
//!
//! Reading what megatron-energon's prepare wrote, and preparing the same shards again:
//!
//! ```
//! use energon_index::{TarIndex, read_dataset_info, read_dataset_split, tar_idx_path};
//!
//! // 4 shards of 50 samples, all in `train`.
//! let root = energon_fixtures::ref_small_dir();
//! let info = read_dataset_info(&root)?;
//! assert_eq!(info.n_samples(), 200);
//! let (_, split) = read_dataset_split(&root, None)?;
//! assert_eq!(split.split_parts[0].0, "train");
//! let first = info.shard_names().next().unwrap();
//! let index = TarIndex::open(&tar_idx_path(&root.join(first)))?;
//! assert_eq!(index.len(), 50);
//!
//! // A copy of the shards, prepared here: the same offsets.
//! # #[cfg(feature = "prepare")] {
//! use energon_index::{PrepareOptions, prepare_dataset};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::create_dir(dir.path().join("shards"))?;
//! for shard in info.shard_names() {
//!     std::fs::copy(root.join(shard), dir.path().join(shard))?;
//! }
//! let summary = prepare_dataset(dir.path(), &PrepareOptions::default(), &|_| {})?;
//! assert_eq!(summary.n_samples(), 200);
//! let copy = TarIndex::open(&tar_idx_path(&dir.path().join(first)))?;
//! assert_eq!(copy.offsets(), index.offsets());
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod dataset_config;
pub mod discover;
mod error;
mod fsutil;
pub mod info;
#[cfg(feature = "sqlite")]
pub mod join_index;
pub mod jsonl_idx;
#[cfg(feature = "sqlite")]
pub mod media;
pub mod object_versions;
#[cfg(feature = "prepare")]
pub mod prepare;
mod shard;
pub mod split;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod storage;
pub mod tar_idx;
pub mod tar_patch;
pub mod tar_scan;
#[cfg(test)]
#[cfg(feature = "prepare")]
mod testutil;
pub mod yaml;

pub use crate::{
    dataset_config::{DatasetConfig, read_dataset_config},
    discover::{DatasetKind, classify},
    fsutil::{AtomicFile, atomic_write},
    info::{DatasetInfo, read_dataset_info},
    jsonl_idx::{JsonlIndex, jsonl_idx_path},
    shard::{PartEntry, SampleEntry, ShardScan, Trailer},
    split::{SplitConfig, read_dataset_split},
    tar_idx::{TarIndex, tar_idx_path, write_tar_idx},
    tar_scan::scan_shard,
};
#[cfg(feature = "prepare")]
pub use crate::{
    fsutil::PrepareLock,
    prepare::{FixedDuplicates, PrepareOptions, PrepareSummary, SplitChoice, prepare_dataset},
};
#[cfg(feature = "sqlite")]
pub use crate::{join_index::JoinIndex, sqlite::SqliteIndex, sqlite::SqliteIndexWriter};
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
/// File name of the shard objects' versions inside [`NV_META`] (see [`object_versions`]).
pub const OBJECT_VERSIONS: &str = "object-versions.json";
/// Default split configuration file name inside [`NV_META`].
pub const SPLIT_YAML: &str = "split.yaml";
/// Default dataset configuration file name inside [`NV_META`].
pub const DATASET_YAML: &str = "dataset.yaml";
/// The Energon version whose formats this crate writes (stored as `energon_version`).
pub const ENERGON_FORMAT_VERSION: &str = "7.4.1";
