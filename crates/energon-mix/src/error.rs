//! Errors returned by energon-mix.

use std::path::PathBuf;

/// An error loading, resolving, preparing or running a metadataset.
///
/// Errors about a metadataset file name the file and the YAML path of the node at fault
/// (`splits.train.blend[1].weight`), so that a user can find the bad line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An on-disk format could not be read (the metadataset YAML itself, `.info.json`,
    /// `split.yaml`, `dataset.yaml`, `index.sqlite`, a join index, ...).
    #[error(transparent)]
    Index(#[from] energon_index::Error),
    /// A dataset or one of its samples could not be read.
    #[error(transparent)]
    Reader(#[from] energon_reader::Error),
    /// The worker configuration, the slicing or a random draw was invalid.
    #[error(transparent)]
    Dist(#[from] energon_dist::Error),
    /// A node of a metadataset file is malformed: an unknown key, a value of the wrong type, a
    /// missing required key, a value out of range.
    #[error("{file}: {yaml_path}: {reason}")]
    BadNode {
        /// The metadataset file.
        file: PathBuf,
        /// Where in the file, e.g. `splits.train.blend[1].weight`.
        yaml_path: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// A `path` (or `aux` entry) of a metadataset does not name something it can use.
    #[error("{file}: {yaml_path}: {path}: {reason}")]
    BadPath {
        /// The metadataset file.
        file: PathBuf,
        /// Where in the file.
        yaml_path: String,
        /// The path after resolution against the metadataset's folder.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Nested metadataset files reference each other in a cycle.
    #[error("{file}: {yaml_path}: metadataset cycle: {chain}")]
    Cycle {
        /// The file holding the reference that closes the cycle.
        file: PathBuf,
        /// Where in that file.
        yaml_path: String,
        /// The files of the cycle, `a.yaml -> b.yaml -> a.yaml`.
        chain: String,
    },
    /// Nested metadataset files reference each other deeper than
    /// [`MAX_NESTING`](crate::resolve::MAX_NESTING) levels.
    #[error(
        "{file}: {yaml_path}: metadataset files nest more than {limit} levels deep (from {root})"
    )]
    TooDeep {
        /// The deepest file loaded: the one holding the reference past the limit.
        file: PathBuf,
        /// Where in that file.
        yaml_path: String,
        /// The outermost metadataset file of the chain.
        root: PathBuf,
        /// The nesting limit.
        limit: usize,
    },
    /// A metadataset does not define the requested split.
    #[error("{file}: split {split:?} is not defined (defined: {defined})")]
    UnknownSplit {
        /// The metadataset file.
        file: PathBuf,
        /// The requested split.
        split: String,
        /// The splits the file defines, comma-separated.
        defined: String,
    },
    /// A join index is missing, stale or does not fit its datasets.
    #[error("join index {path}: {reason}")]
    JoinIndex {
        /// The join index file.
        path: PathBuf,
        /// What is wrong, with advice.
        reason: String,
    },
    /// Joining the datasets failed (a sample missing from a secondary with `nonmatch: error`,
    /// duplicate keys, a sample outside its split part).
    #[error("cannot join {primary}: {reason}")]
    Join {
        /// The primary dataset of the join.
        primary: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A loader option or a combination of options is invalid for this metadataset.
    #[error("invalid option {option} = {value}: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// What it accepts.
        reason: String,
    },
    /// A worker has no samples in any of the blended datasets (the reference fails the same way:
    /// "There is a worker with no samples in any of the blended datasets").
    #[error(
        "worker {worker} of rank {rank} has no samples in any of the {n_leaves} datasets; use fewer \
         workers or ranks"
    )]
    EmptyWorker {
        /// The rank.
        rank: usize,
        /// The local worker id.
        worker: usize,
        /// The number of leaf datasets.
        n_leaves: usize,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
