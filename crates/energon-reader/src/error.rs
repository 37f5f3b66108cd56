//! Errors returned by energon-reader.

use std::{fmt, io, path::PathBuf};

/// An error opening a dataset or reading, decoding or building one of its samples.
///
/// Every variant about data names the dataset, the shard (or file), the sample key where it is
/// known and the byte offset in the shard, so that a bad sample can be found with `tar` or `dd`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An on-disk metadata format could not be read (`.info.json`, `split.yaml`, `dataset.yaml`,
    /// `.tar.idx`, `index.sqlite`, ...).
    #[error(transparent)]
    Index(#[from] energon_index::Error),
    /// A file could not be opened, mapped or read.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`"cannot open"`, `"cannot map"`, ...).
        op: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A shard that the split part names is not on disk.
    #[error("dataset {dataset}: shard {shard} is missing ({path}: {source})")]
    MissingShard {
        /// The dataset root.
        dataset: PathBuf,
        /// The shard name, relative to the dataset root.
        shard: String,
        /// The file that was looked for (the shard or its `.tar.idx`).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A `.tar.idx` (or `.jsonl.idx`) does not hold the number of samples `.info.json` gives its
    /// shard, or does not fit its data file.
    #[error(
        "dataset {dataset}: index {path} of shard {shard} does not match: {reason}; regenerate it \
         with `energon prepare`"
    )]
    IndexMismatch {
        /// The dataset root (or JSONL file).
        dataset: PathBuf,
        /// The shard name.
        shard: String,
        /// The index file.
        path: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// A shard does not match its index files: it was replaced, rewritten or truncated after
    /// prepare, or its index files come from different prepares. Reported when the shard is
    /// first used (its size against the `.tar.idx` end offset, the keys of `index.sqlite`) and
    /// when a sample's offset does not hold a tar header.
    #[error(
        "shard changed after prepare: {at}: {reason} (index {index}); run `energon prepare` again"
    )]
    ShardChanged {
        /// Where: dataset, shard, the key expected there (when known), the sample index and the
        /// byte offset at fault.
        at: Box<SampleAt>,
        /// The index file the shard disagrees with (`.tar.idx` or `index.sqlite`).
        index: PathBuf,
        /// What does not match, with both values.
        reason: String,
    },
    /// A sample's bytes are not what the index promised: a damaged or truncated tar member, a
    /// member whose key differs from the sample's, a range past the end of the shard.
    #[error("corrupt sample: {at}: {reason}")]
    CorruptSample {
        /// Where: dataset, shard, key (when it could be read), index and the byte offset of the
        /// header or data at fault.
        at: Box<SampleAt>,
        /// What is wrong.
        reason: String,
    },
    /// A part could not be decoded (an image that is not one, invalid JSON, bad UTF-8, ...).
    #[error("cannot decode part {part:?}: {at}: {reason}")]
    Decode {
        /// Where: dataset, shard, key, index and the byte offset of the part's content.
        at: Box<SampleAt>,
        /// The part name (`jpg`, `json`, ...).
        part: String,
        /// What went wrong.
        reason: String,
    },
    /// A part would decode to more than a decoder limit allows ([`crate::DecodeLimits`]: an
    /// image over Pillow's pixel limit, a gzip part inflating past its limit); refused before
    /// the memory is allocated.
    #[error("cannot decode part {part:?}: {at}: {reason}")]
    TooLarge {
        /// Where: dataset, shard, key, index and the byte offset of the part's content.
        at: Box<SampleAt>,
        /// The part name (`png`, `npy.gz`, ...).
        part: String,
        /// The limit.
        limit: crate::Limit,
        /// What was found, against which limit.
        reason: String,
    },
    /// A field of the sample type could not be filled: no alternative of its `field_map` spec
    /// names a part the sample has (or an accessor key is missing), or the value has the wrong
    /// type for the field.
    #[error("cannot fill field {field:?} from {spec:?}: {at}: {reason}")]
    Field {
        /// Where: dataset, shard, key, index and the byte offset of the sample.
        at: Box<SampleAt>,
        /// The sample field.
        field: String,
        /// The `field_map` spec of the field.
        spec: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// A sample index past the end of the dataset.
    #[error("dataset {dataset}: sample index {index} is out of range ({len} samples)")]
    OutOfRange {
        /// The dataset root (or JSONL file).
        dataset: PathBuf,
        /// The requested index.
        index: u64,
        /// The number of samples.
        len: u64,
    },
    /// The path is a dataset kind this call cannot open, or its configuration asks for
    /// something energon-rs does not do (such as a Python `sample_loader`).
    #[error("{path}: {reason}")]
    Unsupported {
        /// The dataset path or configuration file.
        path: PathBuf,
        /// What is not supported, and what to do instead.
        reason: String,
    },
    /// A file store has no entry of that name.
    #[error("{store}: no entry {name:?}")]
    NotFound {
        /// The store (dataset root or folder).
        store: PathBuf,
        /// The name looked up.
        name: String,
    },
}

/// Where in a dataset a sample (or one of its parts) lies, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleAt {
    /// The dataset root (the file, for JSONL).
    pub dataset: PathBuf,
    /// The shard name relative to the root (the file name, for JSONL).
    pub shard: String,
    /// The sample key, when known.
    pub key: Option<String>,
    /// The global sample index in the split part, when known.
    pub index: Option<u64>,
    /// Byte offset in the shard.
    pub offset: u64,
}

impl fmt::Display for SampleAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dataset {}, shard {}", self.dataset.display(), self.shard)?;
        match &self.key {
            Some(key) => write!(f, ", key {key}")?,
            None => f.write_str(", key unknown")?,
        }
        if let Some(index) = self.index {
            write!(f, " (sample {index})")?;
        }
        write!(f, ", byte offset {}", self.offset)
    }
}

/// Result alias for energon-reader.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Where in the dataset the error lies, for errors about one sample or part.
    pub fn sample_at(&self) -> Option<&SampleAt> {
        match self {
            Error::CorruptSample { at, .. }
            | Error::ShardChanged { at, .. }
            | Error::Decode { at, .. }
            | Error::TooLarge { at, .. }
            | Error::Field { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The shard the error is about, if it is about one.
    pub fn shard(&self) -> Option<&str> {
        match self {
            Error::MissingShard { shard, .. } | Error::IndexMismatch { shard, .. } => Some(shard),
            other => other.sample_at().map(|at| at.shard.as_str()),
        }
    }

    /// The error for part `part` at `at` that [`crate::Decoder::try_decode`] refused.
    pub fn decode(at: SampleAt, part: &str, error: crate::DecodeError) -> Self {
        let (at, part) = (Box::new(at), part.to_owned());
        match error {
            crate::DecodeError::TooLarge { limit, reason } => {
                Error::TooLarge { at, part, limit, reason }
            }
            crate::DecodeError::Invalid(reason) => Error::Decode { at, part, reason },
        }
    }

    /// Wraps an I/O error with the operation and path it concerns.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io { op, path: path.into(), source }
    }
}
