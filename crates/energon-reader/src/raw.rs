//! Raw samples: a key, its shard, its restore key and its parts as zero-copy byte slices.

use std::{collections::BTreeSet, fmt, path::Path, sync::Arc};

use bytes::Bytes;

/// The first element of a core restore key (`("Webdataset", index)`), for WebDataset and JSONL
/// samples alike, as in the reference.
pub const RESTORE_KEY_KIND: &str = "Webdataset";

/// One part of a sample: one tar member (or the record of a JSONL line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The part name: everything after the first dot of the member's basename (`jpg`, `seg.png`).
    pub name: String,
    /// Byte offset of the content in the shard file.
    pub offset: u64,
    /// The content: a slice of the shard's memory map (no copy).
    pub data: Bytes,
}

/// A sample as stored: its parts undecoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSample {
    /// The sample key (`00000042`, or the record number for JSONL).
    pub key: String,
    /// The dataset root (the file, for JSONL).
    pub dataset: Arc<Path>,
    /// The shard name relative to the dataset root (the file name, for JSONL).
    pub shard: Arc<str>,
    /// The global sample index in the split part; the restore key is `("Webdataset", index)`.
    pub index: u64,
    /// Byte offset of the sample's first header in the shard (of the record, for JSONL).
    pub offset: u64,
    /// The parts that passed the part filter, in tar order.
    pub parts: Vec<Part>,
}

impl RawSample {
    /// The content of part `name`, if the sample has it.
    pub fn part(&self, name: &str) -> Option<&Bytes> {
        self.parts.iter().find(|p| p.name == name).map(|p| &p.data)
    }

    /// The restore key of the sample: `("Webdataset", index)`.
    pub fn restore_key(&self) -> (&'static str, u64) {
        (RESTORE_KEY_KIND, self.index)
    }

    /// Where the sample came from, as the reference's `SourceInfo`: file names are the member
    /// names of the parts read (`<key>.<part>`).
    pub fn source_info(&self) -> SourceInfo {
        SourceInfo {
            dataset_path: self.dataset.clone(),
            index: SourceIndex::Index(self.index),
            shard_name: self.shard.clone(),
            file_names: self.parts.iter().map(|p| format!("{}.{}", self.key, p.name)).collect(),
        }
    }
}

/// Where a sample (or a file of an auxiliary store) came from (the reference's `SourceInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceInfo {
    /// The dataset root (the file, for JSONL).
    pub dataset_path: Arc<Path>,
    /// The global sample index in the split part for samples read by index; the name looked up
    /// for files read from a file store.
    pub index: SourceIndex,
    /// The shard name relative to the dataset root.
    pub shard_name: Arc<str>,
    /// The files read (`<key>.<part>` member names).
    pub file_names: Vec<String>,
}

/// The `index` of a [`SourceInfo`] (the reference's `Union[str, int]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceIndex {
    /// A sample index.
    Index(u64),
    /// A file name or key.
    Name(String),
}

impl fmt::Display for SourceIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceIndex::Index(i) => write!(f, "{i}"),
            SourceIndex::Name(n) => f.write_str(n),
        }
    }
}

/// Which parts of each sample are read; the others are never copied or decoded.
#[derive(Clone, Default)]
pub enum PartFilter {
    /// Every part.
    #[default]
    All,
    /// Only the parts with these names.
    Names(BTreeSet<String>),
    /// Only the parts for which the predicate holds.
    Predicate(Arc<dyn Fn(&str) -> bool + Send + Sync>),
}

impl PartFilter {
    /// A filter keeping the named parts.
    pub fn names<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        PartFilter::Names(names.into_iter().map(Into::into).collect())
    }

    /// Whether part `name` is read.
    pub fn accepts(&self, name: &str) -> bool {
        match self {
            PartFilter::All => true,
            PartFilter::Names(names) => names.contains(name),
            PartFilter::Predicate(f) => f(name),
        }
    }
}

impl fmt::Debug for PartFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartFilter::All => f.write_str("All"),
            PartFilter::Names(names) => f.debug_tuple("Names").field(names).finish(),
            PartFilter::Predicate(_) => f.write_str("Predicate(..)"),
        }
    }
}
