//! Errors returned by energon-dist.

/// Everything that can go wrong in worker configuration, slicing and random draws.
///
/// Every variant is caused by an argument (a configuration, a sample count, a weight vector or a
/// saved state); none is an internal failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `world_size` was 0.
    #[error("invalid worker config: world size must be at least 1")]
    ZeroWorldSize,
    /// `rank` is not below `world_size`.
    #[error("invalid worker config: rank {rank} is not below world size {world_size}")]
    RankOutOfRange {
        /// The rank that was given.
        rank: usize,
        /// The world size that was given.
        world_size: usize,
    },
    /// `worker_id_offset` is not below the number of local workers (`max(1, num_workers)`).
    #[error(
        "invalid worker config: worker id offset {worker_id_offset} is not below the {n_local_workers} local workers"
    )]
    WorkerIdOffsetOutOfRange {
        /// The offset that was given.
        worker_id_offset: usize,
        /// `max(1, num_workers)`.
        n_local_workers: usize,
    },
    /// `max(1, num_workers) * world_size` does not fit in `usize`.
    #[error("invalid worker config: {num_workers} workers times world size {world_size} overflows")]
    TooManyWorkers {
        /// The number of workers per rank that was given.
        num_workers: usize,
        /// The world size that was given.
        world_size: usize,
    },
    /// A local (or physical) worker id is not below the number of local workers.
    #[error("worker id {worker_id} is not below the {n_local_workers} local workers")]
    WorkerOutOfRange {
        /// The id that was given.
        worker_id: usize,
        /// `max(1, num_workers)`.
        n_local_workers: usize,
    },
    /// The shard sample counts (or a sample range) add up to more than `u64::MAX`, or to more than
    /// the reference's float arithmetic can split exactly.
    #[error("sample count overflows: {reason}")]
    SampleCountOverflow {
        /// Which sum overflowed.
        reason: &'static str,
    },
    /// A subset range lies outside `[0, total]` or ends before it starts.
    #[error("subset [{start}, {end}) is not inside the {total} samples of the dataset")]
    SubsetOutOfRange {
        /// First sample of the subset (may be negative after ratio arithmetic).
        start: i128,
        /// End (exclusive) of the subset.
        end: i128,
        /// Total number of samples the subset applies to.
        total: u64,
    },
    /// A subset ratio times the sample count is not a finite number.
    #[error("subset ratio {ratio} is not a finite number of samples")]
    SubsetRatioNotFinite {
        /// The offending ratio.
        ratio: f64,
    },
    /// `max_samples_per_sequence` was `Some(0)`.
    #[error("max samples per sequence must be at least 1")]
    ZeroMaxSamplesPerSequence,
    /// `randbelow(0)`: there is no integer in an empty range.
    #[error("cannot draw below 0: the range is empty")]
    EmptyRange,
    /// `getrandbits(k)` with more bits than fit in a `u64`.
    #[error("cannot draw {k} random bits into 64")]
    TooManyBits {
        /// The number of bits asked for.
        k: u32,
    },
    /// `choice_idx` of an empty weight vector.
    #[error("cannot choose from an empty weight vector")]
    EmptyWeights,
    /// A weight is negative or not finite.
    #[error("weight {weight} at index {index} is negative or not finite")]
    InvalidWeight {
        /// Index of the weight in the vector.
        index: usize,
        /// The offending weight.
        weight: f32,
    },
    /// All weights are zero, so nothing can be chosen.
    #[error("all {len} weights are zero")]
    AllWeightsZero {
        /// Length of the weight vector.
        len: usize,
    },
    /// A saved random generator state is malformed.
    #[error("invalid rng state: {reason}")]
    InvalidRngState {
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
