//! Errors returned by energon-index.

use std::{io, path::PathBuf};

/// An error reading or writing an Energon on-disk format.
///
/// Every variant names the file it concerns; corruption variants also carry the byte offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder could not be opened, read or written.
    #[error("{op} {path}")]
    Io {
        /// What was being done (`"cannot open"`, `"cannot write"`, ...).
        op: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A tar shard is damaged or truncated.
    #[error("corrupt tar {path} at byte offset {offset}: {reason}")]
    CorruptTar {
        /// The shard.
        path: PathBuf,
        /// Byte offset of the header or data block at fault.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A shard is compressed; only uncompressed tar shards can be read by random access.
    #[error("{path} is gzip-compressed; energon needs uncompressed tar shards (gunzip it first)")]
    CompressedTar {
        /// The shard.
        path: PathBuf,
    },
    /// A shard path is not a regular file (a FIFO, a device).
    #[error("shard {path} is not a regular file")]
    NotAFile {
        /// The shard.
        path: PathBuf,
    },
    /// A shard holds no sample.
    #[error("{path} contains no samples")]
    EmptyShard {
        /// The shard.
        path: PathBuf,
    },
    /// An offset index (`.tar.idx`, `.jsonl.idx`) is damaged or does not fit its data file.
    #[error("corrupt index {path} at byte offset {offset}: {reason}")]
    CorruptIndex {
        /// The index file.
        path: PathBuf,
        /// Byte offset inside the index file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A JSONL file is malformed.
    #[error("bad JSONL {path} at byte offset {offset}: {reason}")]
    BadJsonl {
        /// The JSONL file.
        path: PathBuf,
        /// Byte offset of the bad line.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A metadata file (YAML or JSON) could not be parsed or has the wrong structure.
    #[error("bad metadata file {path}: {reason}")]
    BadMetadata {
        /// The metadata file.
        path: PathBuf,
        /// What is wrong, including the location inside the file where known.
        reason: String,
    },
    /// A YAML file is not well-formed (or uses a YAML feature Energon does not read).
    #[error("bad yaml {path} at line {line}, column {column}: {reason}")]
    BadYaml {
        /// The YAML file.
        path: PathBuf,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column (in characters) of the fault.
        column: usize,
        /// What is wrong.
        reason: String,
    },
    /// A split configuration does not define the requested split part.
    #[error("{path}: split part {split_part:?} is not defined (defined: {defined})")]
    UnknownSplitPart {
        /// The split configuration file.
        path: PathBuf,
        /// The requested split part.
        split_part: String,
        /// The split parts the file defines, comma-separated.
        defined: String,
    },
    /// A split part names a shard that the dataset info does not list.
    #[error(
        "{path}: split part {split_part:?} names shard {shard:?}, which is not in the dataset info"
    )]
    UnknownShard {
        /// The split configuration file.
        path: PathBuf,
        /// The split part.
        split_part: String,
        /// The shard name (after brace expansion).
        shard: String,
    },
    /// A split part has no shard left once excludes are applied.
    #[error("{path}: no shards found in split part {split_part:?}")]
    EmptySplit {
        /// The split configuration file.
        path: PathBuf,
        /// The split part.
        split_part: String,
    },
    /// A brace-expansion pattern is malformed.
    #[error("bad brace pattern {pattern:?}: {reason}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// What is wrong.
        reason: String,
    },
    /// The same sample key occurs more than once in a dataset.
    #[error(
        "duplicate sample key {key:?}: in {first} and {second}; sample keys must be unique across all shards (`energon prepare --fix-duplicates` moves each shard's members into a folder named after the shard)"
    )]
    DuplicateKey {
        /// The key.
        key: String,
        /// Where it was seen first (shard path).
        first: String,
        /// Where it was seen again (shard path).
        second: String,
    },
    /// A shard's members cannot be renamed in place (`--fix-duplicates`).
    #[error("cannot rename the members of {path} in place (member at byte {offset}): {reason}")]
    CannotRename {
        /// The shard.
        path: PathBuf,
        /// The member's header.
        offset: u64,
        /// Why.
        reason: String,
    },
    /// A SQLite operation failed.
    #[cfg(feature = "sqlite")]
    #[error("sqlite error on {path}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// The path is not a dataset this crate can handle.
    #[error("{path} is not an energon dataset: {reason}")]
    NotADataset {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Invalid user-supplied configuration (flags, patterns, ratios).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Joining the datasets of a metadataset failed (a duplicate or missing key, a shard outside
    /// the split part, an exclude that names no shard).
    #[error("cannot join {path}: {reason}")]
    Join {
        /// The `index.sqlite` concerned.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// Another process is preparing the same dataset (it holds the prepare lock).
    #[error(
        "another `energon prepare` of {dataset} is running (it holds the lock {lock}); wait for it \
         to finish and try again"
    )]
    Busy {
        /// The dataset root.
        dataset: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// Two index files of one dataset disagree: the index is a mix of two prepares, or a shard
    /// changed after prepare.
    #[error(
        "inconsistent index: {first} and {second} do not match: {reason}; run `energon prepare` again"
    )]
    Inconsistent {
        /// One file.
        first: PathBuf,
        /// The file it disagrees with.
        second: PathBuf,
        /// What does not match, with both numbers.
        reason: String,
    },
    /// The dataset was prepared without the per-sample tables of `index.sqlite`
    /// (`energon prepare --no-sample-tables`), and something needs them: lookups by key, `mount`,
    /// aux file stores, joins, media metadata of a WebDataset.
    #[error(
        "{path} has no samples tables (the dataset was prepared with `energon prepare --no-sample-tables`, which writes only what loading needs); lookups by key, mount, aux file stores, joins and media metadata need them: add them with `energon prepare --sample-tables-only {dataset}`"
    )]
    NoSampleTables {
        /// The `index.sqlite` file.
        path: PathBuf,
        /// The dataset folder.
        dataset: String,
    },
    /// The index was written by a version of Energon that this crate does not read.
    #[error("{path}: unsupported index format ({found}); {advice}")]
    Incompatible {
        /// The file.
        path: PathBuf,
        /// What was found.
        found: String,
        /// What to do about it.
        advice: &'static str,
    },
}

/// Result alias for energon-index.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the operation and path it concerns.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io { op, path: path.into(), source }
    }

    /// Wraps a SQLite error with the database path.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(path: impl Into<PathBuf>, source: rusqlite::Error) -> Self {
        Error::Sqlite { path: path.into(), source }
    }
}
