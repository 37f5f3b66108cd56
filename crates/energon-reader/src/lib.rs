//! Random-access sample reading from prepared datasets: shards, samples, decoders and sample types.
//!
//! # Overview
//!
//! - [`WebDataset`]: one split part of a prepared WebDataset folder; [`WebDataset::read`] returns
//!   sample `i` as a [`RawSample`] whose parts are zero-copy slices of the shard's memory map.
//! - [`JsonlDataset`]: a JSONL file with its `.jsonl.idx`; record `i` has key `i` and one part
//!   `json`.
//! - [`Dataset`]: either of them, opened by path as the reference classifies paths.
//!
//! ```
//! use std::path::Path;
//! use energon_reader::{Dataset, OpenOptions};
//!
//! let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/energon-ref-small");
//! let dataset = Dataset::open(&root, &OpenOptions::default())?;
//! let sample = dataset.read(0)?.expect("not excluded");
//! assert_eq!(sample.key, "00000000");
//! assert_eq!(sample.parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["jpg", "txt", "json"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod dataset;
pub mod decode;
mod error;
mod field_map;
pub mod file_store;
mod jsonl;
pub mod leaf;
pub mod lint;
mod mapped;
pub mod media;
mod raw;
mod reader;
pub mod sample;
mod webdataset;

pub use dataset::Dataset;
pub use decode::{Decoded, Decoder, ImageDecode, Tensor};
pub use error::{Error, Result, SampleAt};
pub use file_store::{
    DecodeFileStore, FileStore, JsonlFileStore, PrimaryFileStore, SystemFileStore,
    WebdatasetFileStore,
};
pub use jsonl::{JSONL_PART, JsonlDataset};
pub use raw::{Part, PartFilter, RESTORE_KEY_KIND, RawSample, SourceIndex, SourceInfo};
pub use reader::{ReaderOptions, SampleReader};
pub use sample::{CrudeSample, Sample, SampleMeta};
pub use webdataset::{OpenOptions, WebDataset};
