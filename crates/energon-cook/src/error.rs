//! Errors returned by energon-cook.

use std::{fmt, ops::RangeInclusive, path::PathBuf};

use crate::hook::BoxError;

/// An error building or running a loader pipeline, or reading or writing a checkpoint.
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
    /// A hook dropped every sample of two passes over a worker's samples in a row (skipped them,
    /// yielded nothing for them, or failed on them where failures in a row are not limited; a
    /// limit ends such a loader with [`Error::TooManyFailures`]); with samples repeated forever,
    /// the loader would wait forever.
    #[error(
        "worker {worker}: {hook} dropped all of {dropped} samples in a row (two passes over its \
         {len_worker} samples; every sample skipped, failed or yielding nothing): nothing to load"
    )]
    AllDropped {
        /// The hook.
        hook: &'static str,
        /// The local worker id.
        worker: usize,
        /// Consecutive samples without an output.
        dropped: u64,
        /// The worker's samples in one pass.
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
    /// A hook written in another language raised an exception that ends the loader; the caller
    /// that called the hook keeps the exception itself, to raise it again where the loader is
    /// iterated.
    #[error("a hook raised {message}")]
    Raised {
        /// The exception, as text.
        message: String,
    },
    /// A worker whose pipeline runs elsewhere (a worker process) ended or broke its link
    /// before its pipeline did; the loader cannot continue.
    #[error("loader worker {worker} was lost: {reason}")]
    WorkerLost {
        /// The local worker id.
        worker: usize,
        /// What happened to it (how the process ended, when known).
        reason: String,
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
    /// A task encoder hook or cooker failed on a sample; under the error policy the sample was
    /// dropped (this error is what the policy logs, and the last one of
    /// [`Error::TooManyFailures`]).
    #[error("{hook} failed on {sample}: {source}")]
    Hook {
        /// The hook (`encode_sample`, `batch`, `cook_crude_sample`, ...).
        hook: &'static str,
        /// The restore key of the input.
        sample: String,
        /// What the hook reported.
        #[source]
        source: BoxError,
    },
    /// A hook reported a fatal error (the reference's `FatalSampleError`).
    #[error("{hook} failed fatally on {sample}: {source}")]
    Fatal {
        /// The hook.
        hook: &'static str,
        /// The restore key of the input.
        sample: String,
        /// What the hook reported.
        #[source]
        source: BoxError,
    },
    /// A hook failed on too many consecutive samples (the failure tolerance of the error
    /// policy); likely the code or the dataset is broken.
    #[error(
        "{hook} failed {count} times in a row (failure tolerance {tolerance}); likely the code \
         or the dataset is broken; last error: {last}"
    )]
    TooManyFailures {
        /// The hook.
        hook: &'static str,
        /// Consecutive failures.
        count: u64,
        /// The tolerance.
        tolerance: u64,
        /// The last failure.
        #[source]
        last: Box<Error>,
    },
    /// A setting needs a hook the task encoder does not declare (in `TaskEncoder::hooks`), or a
    /// hook that is not implemented would have to convert between different types.
    #[error("the task encoder must implement {hook}: {reason}")]
    MissingHook {
        /// The hook.
        hook: &'static str,
        /// Why it is needed.
        reason: &'static str,
    },
    /// No cooker of the task encoder matches a crude dataset's subflavors.
    #[error("no cooker of the task encoder matches the subflavors {subflavors} of {dataset}")]
    NoCooker {
        /// The dataset path.
        dataset: String,
        /// The subflavors (JSON).
        subflavors: String,
    },
    /// A stage of the pipeline cannot save or restore its progress.
    #[error("{stage} cannot save or restore its progress")]
    NotSavable {
        /// The stage.
        stage: &'static str,
    },
    /// A saved state does not fit the pipeline it is restored into.
    #[error("the saved state does not fit this loader: {reason}")]
    BadState {
        /// What does not fit.
        reason: String,
    },
    /// A buffered item could not be re-created from its restore key on restore.
    #[error("cannot re-create {restore_key} on restore: {source}")]
    RestoreItem {
        /// The restore key.
        restore_key: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A checkpoint file could not be read or written.
    #[error("cannot {action} checkpoint {path}: {source}")]
    CheckpointIo {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint file is damaged (truncated, altered, not a checkpoint).
    #[error("corrupt checkpoint {path} at byte {offset}: {reason}")]
    CorruptCheckpoint {
        /// The file.
        path: PathBuf,
        /// Where the damage was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A checkpoint file of a format version this build does not read.
    #[error(
        "checkpoint {path} has format version {found}, this build reads versions \
         {}..={}; {}",
        supported.start(), supported.end(), version_advice(*found, supported)
    )]
    IncompatibleCheckpoint {
        /// The file.
        path: PathBuf,
        /// The file's version.
        found: u32,
        /// The versions this build reads.
        supported: RangeInclusive<u32>,
    },
    /// A checkpoint was saved by a loader with another dataset or configuration (the
    /// reference's `loader.config()` comparison).
    #[error("the checkpoint was saved by a different loader: {}", Differences(differences))]
    ConfigMismatch {
        /// What differs.
        differences: Vec<ConfigDifference>,
    },
}

/// One entry of a loader configuration that differs between a checkpoint and a loader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDifference {
    /// The entry (`batch_size`, `dataset.shards`, `worker_config.num_workers`, ...).
    pub key: String,
    /// The checkpoint's value (`None`: the checkpoint has no such entry).
    pub checkpoint: Option<String>,
    /// The loader's value (`None`: the loader has no such entry).
    pub loader: Option<String>,
}

impl fmt::Display for ConfigDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
        write!(
            f,
            "{} is {} in the checkpoint but {} in this loader",
            self.key,
            show(&self.checkpoint),
            show(&self.loader)
        )
    }
}

struct Differences<'a>(&'a [ConfigDifference]);

impl fmt::Display for Differences<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl Error {
    /// Whether the error is a sample's fault (a part that cannot be decoded, a field that
    /// cannot be filled, a hook's failure), which the error policy drops, rather than the
    /// loader's (a shard that cannot be read), which stops it.
    pub fn is_sample_error(&self) -> bool {
        use energon_reader::Error as R;
        match self {
            Error::Hook { .. } => true,
            Error::Reader(err) => matches!(
                err,
                R::Decode { .. }
                    // A decompression bomb is one hostile sample, not a broken loader (the
                    // reference's Pillow error goes to the error handler too).
                    | R::TooLarge { .. }
                    | R::Field { .. }
                    | R::NotFound { .. }
                    | R::CorruptSample { .. }
                    | R::Unsupported { .. }
            ),
            _ => false,
        }
    }
}

/// The message of `err` followed by those of its causes (`source()` chain), each left out where
/// the text so far already holds it (many errors show their cause in their own message): what
/// the command line and the Python package print.
pub fn message_with_causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut res = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !res.contains(&text) {
            res.push_str(": ");
            res.push_str(&text);
        }
        source = cause.source();
    }
    res
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What to do about a checkpoint of a version this build does not read.
fn version_advice(found: u32, supported: &RangeInclusive<u32>) -> &'static str {
    if found < *supported.start() {
        "it was written by an older energon-rs; resume it with the release that wrote it"
    } else {
        "use a newer energon-rs to read it"
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;

    #[test]
    fn a_cause_the_message_already_shows_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let shown = energon_reader::Error::MissingShard {
            dataset: "/d".into(),
            shard: "s.tar".into(),
            path: "/d/s.tar".into(),
            source: io,
        };
        let text = message_with_causes(&shown);
        assert_eq!(text, "dataset /d: shard s.tar is missing (/d/s.tar: gone)");
        let hidden = energon_reader::Error::Index(energon_index::Error::io(
            "cannot open",
            "/d/x",
            std::io::Error::other("denied"),
        ));
        assert_eq!(message_with_causes(&hidden), "cannot open /d/x: denied");
    }
}
