//! Errors returned by energon-cook.

/// An error building or running a loader pipeline.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading, decoding or building a sample failed.
    #[error(transparent)]
    Reader(#[from] energon_reader::Error),
    /// The worker configuration, the slicing or a random draw was invalid.
    #[error(transparent)]
    Dist(#[from] energon_dist::Error),
    /// A metadataset could not be resolved or combined.
    #[error(transparent)]
    Mix(#[from] energon_mix::Error),
    /// A loader setting is out of range.
    #[error("invalid loader setting {setting} = {value}: {reason}")]
    InvalidSetting {
        /// The setting (`batch_size`, `shuffle_over_epochs`, ...).
        setting: &'static str,
        /// The value that was given.
        value: String,
        /// What the setting accepts.
        reason: &'static str,
    },
    /// A worker has no samples, so an infinitely repeating pipeline would never yield anything
    /// (the reference fails the same way: "Cannot repeat empty dataset indefinitely").
    #[error(
        "{dataset}: worker {worker} of rank {rank} has no samples and cannot repeat them \
         indefinitely; use fewer workers or ranks, or a validation pipeline"
    )]
    EmptyWorker {
        /// The dataset path.
        dataset: String,
        /// The rank.
        rank: usize,
        /// The local worker id.
        worker: usize,
    },
    /// Two consecutive passes over a worker's samples yielded nothing (every sample of the worker
    /// was excluded or skipped); repeating would loop forever.
    #[error(
        "worker {worker}: two passes over its {len_worker} samples yielded nothing (all excluded \
         or skipped); cannot repeat indefinitely"
    )]
    NothingToRepeat {
        /// The local worker id.
        worker: usize,
        /// The worker's samples.
        len_worker: u64,
    },
    /// A worker thread panicked; the loader cannot continue.
    #[error("loader worker {worker} panicked: {message}")]
    WorkerPanicked {
        /// The local worker id.
        worker: usize,
        /// The panic message, when it was a string.
        message: String,
    },
    /// A worker thread could not be started.
    #[error("cannot start loader worker {worker}: {source}")]
    Spawn {
        /// The local worker id.
        worker: usize,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
