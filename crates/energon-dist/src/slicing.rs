//! Splitting a dataset's samples over the global workers of a job (the reference's `Sharder`).
//!
//! A dataset is a sequence of samples numbered `0..total` across its shards (the *global sample
//! index*). Every global worker gets one contiguous range of it:
//!
//! 1. `base = int(total / G)` (float division, then truncation) and `rem = total % G`, where `G` is
//!    the number of global workers; the worker at linear position `i` gets `base + 1` samples if
//!    `(i - rotation_offset) mod G < rem`, else `base` ([`rotation_offsets`] spreads the remainders
//!    of consecutive datasets of a blend over different workers).
//! 2. The counts are permuted by the generalized bit-reversal sequence ([`bit_reversal`]): worker
//!    `B[i]` gets the count of linear position `i`, so the remainders are spread over ranks.
//! 3. Prefix sums (from the subset's start) give each worker its range, in global worker order.
//! 4. Each range is cut into *slices* (read sequentially by the worker) at shard boundaries, and
//!    pieces longer than 1.5 × `max_samples_per_sequence` are cut further.
//!
//! Every step copies the reference's arithmetic, float quirks included; the result is checked
//! against the reference's own output in this crate's golden tests.

#[cfg(test)]
mod tests;

use std::ops::Range;

use crate::{
    error::{Error, Result},
    pymath::{py_int, round_half_even, true_div},
    worker::WorkerConfig,
};

/// The slices of one worker: strictly increasing offsets `[o0, o1, ..., om]`, where slice `j` is
/// the global sample range `[o[j], o[j+1])`.
///
/// A worker without samples has the single offset `[o0]` (no slices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSlices {
    offsets: Vec<u64>,
}

impl WorkerSlices {
    /// The slice offsets (what the reference keeps as `workers_slice_offsets[worker]`).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The number of samples of this worker (last offset minus first).
    pub fn n_samples(&self) -> u64 {
        self.end() - self.start()
    }

    /// The number of slices.
    pub fn n_slices(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The first sample of this worker's range.
    pub fn start(&self) -> u64 {
        self.offsets[0]
    }

    /// The end (exclusive) of this worker's range.
    pub fn end(&self) -> u64 {
        self.offsets[self.offsets.len() - 1]
    }

    /// Slice `j` as a range of global sample indices, `None` if there is no such slice.
    pub fn slice(&self, j: usize) -> Option<Range<u64>> {
        Some(*self.offsets.get(j)?..*self.offsets.get(j + 1)?)
    }

    /// The slices in order.
    pub fn slices(&self) -> impl ExactSizeIterator<Item = Range<u64>> + '_ {
        self.offsets.windows(2).map(|w| w[0]..w[1])
    }
}

/// Splits a dataset of shards over the workers and returns the slices of each local worker of
/// `cfg`'s rank (the reference's `Sharder.shard_workers`).
///
/// - `shard_counts`: the samples of each shard, in split order (shards may be empty).
/// - `subset`: the part of the global sample range to use (see [`DatasetSubset::compute`]); the
///   whole dataset if `None`.
/// - `rotation_offset`: where the remainder samples start (see [`rotation_offsets`]; 0 for a
///   dataset on its own).
/// - `max_samples_per_sequence`: if set, pieces longer than 1.5 times it are cut into
///   `max(round(len / msps), 1)` slices.
///
/// Fails if the counts overflow, the subset does not fit, or `max_samples_per_sequence == Some(0)`.
pub fn shard_workers(
    shard_counts: &[u64],
    subset: Option<Range<u64>>,
    cfg: &WorkerConfig,
    rotation_offset: u64,
    max_samples_per_sequence: Option<u64>,
) -> Result<Vec<WorkerSlices>> {
    if max_samples_per_sequence == Some(0) {
        return Err(Error::ZeroMaxSamplesPerSequence);
    }
    let mut shard_starts = Vec::with_capacity(shard_counts.len() + 1);
    let mut total = 0u64;
    shard_starts.push(0);
    for &count in shard_counts {
        total = total
            .checked_add(count)
            .ok_or(Error::SampleCountOverflow { reason: "the shard counts add up past u64" })?;
        shard_starts.push(total);
    }
    let samples = match subset {
        None => 0..total,
        Some(range) => {
            if range.start > range.end || range.end > total {
                return Err(Error::SubsetOutOfRange {
                    start: i128::from(range.start),
                    end: i128::from(range.end),
                    total,
                });
            }
            range
        }
    };
    let bounds = worker_ranges(samples, cfg, rotation_offset)?;
    Ok(bounds
        .windows(2)
        .map(|w| WorkerSlices {
            offsets: cut_range(&shard_starts, w[0], w[1], max_samples_per_sequence),
        })
        .collect())
}

/// [`shard_workers`] for a dataset without shard boundaries (a JSONL file, the rows of a join
/// index): one virtual shard of `total` samples (the reference's `Sharder.slice_workers`).
pub fn slice_workers(
    total: u64,
    subset: Option<Range<u64>>,
    cfg: &WorkerConfig,
    rotation_offset: u64,
    max_samples_per_sequence: Option<u64>,
) -> Result<Vec<WorkerSlices>> {
    shard_workers(&[total], subset, cfg, rotation_offset, max_samples_per_sequence)
}

/// The ranges of the local workers of `cfg`'s rank before cutting into slices: the
/// `max(1, num_workers) + 1` boundaries of this rank's workers within `samples` (steps 1 to 3 of the
/// module docs). Local worker `w` gets `[b[w], b[w+1])`.
///
/// Fails if `samples` ends before it starts, or if the sample count is beyond what the reference's
/// float division splits exactly (about 2^53 samples).
pub fn worker_ranges(
    samples: Range<u64>,
    cfg: &WorkerConfig,
    rotation_offset: u64,
) -> Result<Vec<u64>> {
    let total = samples.end.checked_sub(samples.start).ok_or(Error::SubsetOutOfRange {
        start: i128::from(samples.start),
        end: i128::from(samples.end),
        total: samples.end,
    })?;
    let n_global = cfg.n_global_workers();
    let g = n_global as u64;
    // COMPAT(energon 7.4.1): sharder.py:Sharder.split_samples_to_workers (`int(total / G)`).
    let base = true_div(total, g).map_or(0, |q| q as u64);
    let rem = total % g;
    if base.checked_mul(g).and_then(|x| x.checked_add(rem)) != Some(total) {
        return Err(Error::SampleCountOverflow {
            reason: "the float division of the sample count by the number of workers is inexact",
        });
    }
    let rotation = rotation_offset % g;
    let mut counts = vec![0u64; n_global];
    for (linear, worker) in bit_reversal(n_global).into_iter().enumerate() {
        let extra = (linear as u64 + g - rotation) % g < rem;
        counts[worker] = base + u64::from(extra);
    }
    let n_local = cfg.n_local_workers();
    let first = cfg.rank() * n_local;
    // The counts add up to `total`, so no partial sum passes `samples.end`.
    let mut offset = samples.start + counts[..first].iter().sum::<u64>();
    let mut bounds = Vec::with_capacity(n_local + 1);
    bounds.push(offset);
    for &count in &counts[first..first + n_local] {
        offset += count;
        bounds.push(offset);
    }
    Ok(bounds)
}

/// The generalized bit-reversal permutation of `0..n`: `B(list)` is `list` if it has at most two
/// elements, else the interleaving of `B(first half)` and `B(second half)`, where the first half
/// has `len / 2` elements and the longer tail comes last.
///
/// ```
/// assert_eq!(
///     energon_dist::bit_reversal(16),
///     [0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15]
/// );
/// assert_eq!(energon_dist::bit_reversal(6), [0, 3, 1, 4, 2, 5]);
/// ```
pub fn bit_reversal(n: usize) -> Vec<usize> {
    (0..n).map(|position| bit_reversed(n, position)).collect()
}

/// Element `position` of [`bit_reversal`]`(n)`, without building the sequence.
fn bit_reversed(n: usize, position: usize) -> usize {
    let (mut lo, mut len, mut p) = (0, n, position);
    loop {
        if len <= 2 {
            return lo + p;
        }
        let half = len / 2;
        if p < 2 * half {
            // Even positions come from the first half, odd ones from the second.
            if p % 2 == 1 {
                lo += half;
                len -= half;
            } else {
                len = half;
            }
            p /= 2;
        } else {
            // The one element past the interleaving: the last of the longer second half.
            lo += half;
            len -= half;
            p = half;
        }
    }
}

/// The rotation offset of each leaf of a blend: `(sum of the lengths of the leaves before it) mod
/// G`, as the reference's `build_train_datasets` computes it, so that the remainder samples of
/// consecutive small datasets land on different global workers.
///
/// `leaf_lens` are the full split lengths of the leaves (ignoring subsets).
///
/// ```
/// let cfg = energon_dist::WorkerConfig::new(0, 2, 4)?;
/// assert_eq!(energon_dist::rotation_offsets(&[50, 30, 7], &cfg), [0, 2, 0]);
/// # Ok::<(), energon_dist::Error>(())
/// ```
pub fn rotation_offsets(leaf_lens: &[u64], cfg: &WorkerConfig) -> Vec<u64> {
    // COMPAT(energon 7.4.1): task_encoder/base.py:TaskEncoder.build_train_datasets.
    let g = cfg.n_global_workers() as u64;
    let mut acc = 0u64;
    leaf_lens
        .iter()
        .map(|&len| {
            let rotation = acc;
            // Summing residues keeps the exact value of the sum mod G without overflow.
            acc = (acc + len % g) % g;
            rotation
        })
        .collect()
}

/// A subset of a dataset's samples, as a metadataset's `subset:` gives it (the reference's
/// `DatasetSubset`).
///
/// `absolute_range` (sample indices, `None` end meaning "to the end") is applied first, then
/// `range` (ratios of what is left, `(0.0, 1.0)` being all of it).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DatasetSubset {
    /// Start and end as ratios of the samples left after `absolute_range`.
    pub range: Option<(f64, f64)>,
    /// Start and end (exclusive; `None` for the total) as sample indices.
    pub absolute_range: Option<(u64, Option<u64>)>,
}

impl DatasetSubset {
    /// The range of global sample indices selected out of `total` samples.
    ///
    /// Ratios are applied as `start + int((end - start) * ratio)` in doubles, as the reference does.
    /// Fails if the result is not inside `[0, total]` or ends before it starts.
    ///
    /// ```
    /// let half = energon_dist::DatasetSubset { range: Some((0.25, 0.75)), absolute_range: None };
    /// assert_eq!(half.compute(55)?, 13..41);
    /// # Ok::<(), energon_dist::Error>(())
    /// ```
    pub fn compute(&self, total: u64) -> Result<Range<u64>> {
        let total_i = i128::from(total);
        let mut start = 0i128;
        let mut end = total_i;
        let check = |start: i128, end: i128| {
            if start < 0 || start > end || end > total_i {
                Err(Error::SubsetOutOfRange { start, end, total })
            } else {
                Ok(())
            }
        };
        if let Some((abs_start, abs_end)) = self.absolute_range {
            start = i128::from(abs_start);
            end = abs_end.map_or(total_i, i128::from);
            check(start, end)?;
        }
        if let Some((r0, r1)) = self.range {
            // Python's `int * float` converts the int to the nearest double first.
            let len = (end - start) as f64;
            let end_offset = py_int(len * r1).ok_or(Error::SubsetRatioNotFinite { ratio: r1 })?;
            let start_offset = py_int(len * r0).ok_or(Error::SubsetRatioNotFinite { ratio: r0 })?;
            end = start + end_offset;
            start += start_offset;
            check(start, end)?;
        }
        // Checked: 0 <= start <= end <= total.
        Ok(start as u64..end as u64)
    }
}

/// Cuts the worker range `[start, end)` into slices at the shard boundaries `shard_starts` (the
/// cumulative counts, starting with 0) and by `max_samples_per_sequence`; returns the offsets.
fn cut_range(
    shard_starts: &[u64],
    start: u64,
    end: u64,
    max_samples_per_sequence: Option<u64>,
) -> Vec<u64> {
    let mut offsets = Vec::new();
    // The first shard that ends after `start`.
    let mut shard = shard_starts[1..].partition_point(|&shard_end| shard_end <= start);
    while shard + 1 < shard_starts.len() && shard_starts[shard] < end {
        let lo = start.max(shard_starts[shard]);
        let hi = end.min(shard_starts[shard + 1]);
        if lo < hi {
            cut_piece(&mut offsets, lo, hi, max_samples_per_sequence);
        }
        shard += 1;
    }
    offsets.push(end);
    // Empty slices are dropped (the reference's `_clean_offsets`).
    offsets.dedup();
    offsets
}

/// Pushes the slice starts of the piece `[start, end)` (the reference's `Sharder._split_shard`).
fn cut_piece(offsets: &mut Vec<u64>, start: u64, end: u64, max_samples_per_sequence: Option<u64>) {
    let len = end - start;
    let Some(msps) = max_samples_per_sequence.filter(|&msps| exceeds_one_and_a_half(len, msps))
    else {
        offsets.push(start);
        return;
    };
    // COMPAT(energon 7.4.1): sharder.py:Sharder._split_shard. The slice length is divided first
    // (a double) and each cut truncated: for 122 samples and msps 9 the 8th cut is at 60, not 61.
    let n_slices = true_div(len, msps).map_or(1.0, round_half_even).max(1.0) as u64;
    let slice_len = true_div(len, n_slices).unwrap_or(0.0);
    for j in 0..n_slices {
        // In `[0, len)`: the saturating cast truncates like Python's `int`.
        offsets.push(start + (j as f64 * slice_len) as u64);
    }
}

/// Python's `len > msps * 1.5` (an exact comparison of an int with a double).
fn exceeds_one_and_a_half(len: u64, msps: u64) -> bool {
    let limit = msps as f64 * 1.5;
    // For an integer `x` and a double `f >= 0`, `x > f` exactly when `x > floor(f)`; the cast
    // truncates, and saturates where `f` is past every u64.
    len > limit as u64
}
