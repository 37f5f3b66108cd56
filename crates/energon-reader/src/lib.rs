//! Random-access sample reading from prepared datasets: shards, samples, decoders and sample types.
//!
//! # Overview
//!
//! - [`WebDataset`]: one split part of a prepared WebDataset folder; [`WebDataset::read`] returns
//!   sample `i` as a [`RawSample`] whose parts are zero-copy slices of the shard's memory map.
//! - [`JsonlDataset`]: a JSONL file with its `.jsonl.idx`; record `i` has key `i` and one part
//!   `json`.
//! - [`Dataset`]: either of them, opened by path as the reference classifies paths.
//! - [`Decoder`] ([`decode`]): parts decoded by extension, as the reference's default decoder.
//! - [`SampleReader`]: a dataset with its `dataset.yaml`: typed samples ([`sample`]: the
//!   reference's sample types, same field names) filled by the field map, or crude samples.
//! - [`file_store`]: files by name (`<key>.<part>` through `index.sqlite`, plain folders, JSONL).
//! - [`lint`]: the checks behind `energon lint`.
//!
//! Sample `i` of a split part is always read by the thread that asks for it, and only the parts
//! the field map (or part filter) needs are copied out of the shard and decoded.
//!
//! ```
//! use std::path::Path;
//! use energon_reader::{Dataset, OpenOptions, ReaderOptions, Sample, SampleReader};
//!
//! let root = energon_fixtures::ref_small_dir();
//! let dataset = Dataset::open(&root, &OpenOptions::default())?;
//! let sample = dataset.read(0)?.expect("not excluded");
//! assert_eq!(sample.key, "00000000");
//! assert_eq!(sample.parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["jpg", "txt", "json"]);
//!
//! let reader = SampleReader::open(&root, &ReaderOptions::default())?;
//! let Some(Sample::Captioning(sample)) = reader.read(0)? else { panic!("a captioning sample") };
//! assert_eq!(sample.image.shape, [32, 32, 3]);
//! assert_eq!(sample.caption, "cat and a large small");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

#[cfg(feature = "video")]
pub mod av;
mod dataset;
pub mod decode;
mod error;
mod field_map;
pub mod file_store;
mod filetype;
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
pub use decode::{DecodeError, DecodeLimits, Decoded, Decoder, ImageDecode, Limit, Tensor};
pub use error::{Error, Result, SampleAt};
pub use file_store::{
    DecodeFileStore, FileStore, JsonlFileStore, PrimaryFileStore, SystemFileStore,
    WebdatasetFileStore,
};
pub use jsonl::{JSONL_PART, JsonlDataset};
pub use raw::{Part, PartFilter, RESTORE_KEY_KIND, RawSample, SourceIndex, SourceInfo};
pub use reader::{ReaderOptions, SampleReader, config_part_filter};
pub use sample::{CrudeSample, FieldsSample, Sample, SampleMeta};
pub use webdataset::{OpenOptions, WebDataset};
