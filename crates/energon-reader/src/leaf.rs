//! Per-worker iteration over one leaf dataset: which global sample index this worker reads next.
//!
//! A [`LeafIter`] walks the slices that `energon_dist::shard_workers` gave one worker, in the
//! reference's order (its `WebdatasetSampleLoaderDataset._slices_iter`), and yields global sample
//! indices; reading the samples is the caller's job, so the order logic is pure and testable on
//! its own.
//!
//! - [`SliceOrder::Sequential`] (validation): slices in order, one at a time.
//! - [`SliceOrder::Shuffled`] (`shuffle_over_epochs = k`): each epoch draws a permutation of the
//!   slice list repeated `k` times, opens up to `P` slices at once (`parallel_slice_iters`), and
//!   picks the slot of every sample with a weighted draw over the full-length weights of the open
//!   slices.
//! - [`SliceOrder::WithReplacement`] (`shuffle_over_epochs = -1`): slices drawn with replacement,
//!   forever.
//!
//! An *epoch* is one pass over the permuted slice list. [`LeafIter::next_index`] returns `None`
//! once when an epoch ends, and the next call starts a new epoch (as re-iterating the reference's
//! dataset does). All of the epoch's progress lives in the `LeafIter` itself, so a consumer that
//! stops pulling in the middle of an epoch and comes back later resumes that epoch, as the
//! reference does when a fractional `RepeatDataset` abandons its child. The whole progress can
//! be saved as a [`LeafState`] and resumed with [`LeafIter::from_state`].
//!
//! A pass may also be given as explicit sample ranges instead of the worker's slices
//! ([`LeafIter::with_remainder`]): the rest of other workers' passes, dealt to this worker when a
//! checkpoint moves to another number of workers. That pass reads each range once, in an order
//! drawn like a slice order (shuffled unless sequential), and the passes after it read the
//! worker's own slices. [`LeafIter::remaining`] gives the ranges the current pass has still to
//! read.

pub mod state;
#[cfg(test)]
mod tests;

use std::num::{NonZeroU32, NonZeroUsize};

use energon_dist::{RngState, WorkerRng, WorkerSlices};

pub use self::state::{EpochState, LeafState, SliceCursor};

/// How a worker orders its slices (the reference's `shuffle_over_epochs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceOrder {
    /// No shuffling (`shuffle_over_epochs = None`, always the case for validation and test): the
    /// slices in order, one at a time, each read sequentially.
    Sequential,
    /// Shuffled without replacement (`shuffle_over_epochs = k`, default 1 for training): every
    /// epoch reads each slice `epochs` times, in an order drawn from the worker's stream.
    Shuffled {
        /// `k`: how many times each slice occurs in one epoch.
        epochs: NonZeroU32,
    },
    /// Shuffled with replacement (`shuffle_over_epochs = -1`): every exhausted slot takes a
    /// uniformly drawn slice; the epoch never ends.
    WithReplacement,
}

impl SliceOrder {
    /// The order for the reference's `shuffle_over_epochs` value: `None` is
    /// [`SliceOrder::Sequential`], `k >= 1` is [`SliceOrder::Shuffled`], `-1` is
    /// [`SliceOrder::WithReplacement`]; other values (0, below -1, past `u32::MAX`) give `None`.
    pub fn from_shuffle_over_epochs(shuffle_over_epochs: Option<i64>) -> Option<Self> {
        match shuffle_over_epochs {
            None => Some(SliceOrder::Sequential),
            Some(-1) => Some(SliceOrder::WithReplacement),
            Some(k) => {
                let epochs = NonZeroU32::new(u32::try_from(k).ok()?)?;
                Some(SliceOrder::Shuffled { epochs })
            }
        }
    }

    /// The reference's `shuffle_over_epochs` value of this order (inverse of
    /// [`SliceOrder::from_shuffle_over_epochs`]).
    pub fn shuffle_over_epochs(self) -> Option<i64> {
        match self {
            SliceOrder::Sequential => None,
            SliceOrder::Shuffled { epochs } => Some(i64::from(epochs.get())),
            SliceOrder::WithReplacement => Some(-1),
        }
    }
}

/// How one leaf dataset is iterated on every worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafConfig {
    /// The slice order.
    pub order: SliceOrder,
    /// `P`: how many slices are open at once (the reference's `parallel_shard_iters`, 16 for
    /// training). Ignored by [`SliceOrder::Sequential`], which always reads one slice at a time.
    pub parallel_slice_iters: NonZeroUsize,
}

impl LeafConfig {
    /// The reference's training default: one shuffled epoch at a time, 16 open slices.
    pub const TRAIN: LeafConfig = LeafConfig {
        order: SliceOrder::Shuffled { epochs: NonZeroU32::MIN },
        parallel_slice_iters: NonZeroUsize::new(16).expect("16 is not zero"),
    };

    /// The reference's validation default: sequential, one slice at a time.
    pub const VAL: LeafConfig =
        LeafConfig { order: SliceOrder::Sequential, parallel_slice_iters: NonZeroUsize::MIN };

    /// The number of slots actually used: `P`, or 1 for [`SliceOrder::Sequential`].
    pub fn n_slots(&self) -> usize {
        match self.order {
            SliceOrder::Sequential => 1,
            _ => self.parallel_slice_iters.get(),
        }
    }
}

/// One worker's iteration over one leaf dataset: yields global sample indices in the reference's
/// order. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct LeafIter {
    slices: WorkerSlices,
    config: LeafConfig,
    rng: WorkerRng,
    /// Ranges read by the open (or next) epoch instead of the slices, once each; `None` once
    /// that epoch has closed.
    ranges: Option<Vec<(u64, u64)>>,
    epoch: Option<Epoch>,
    sample_count: u64,
    epoch_count: u64,
    epoch_sample_count: u64,
}

/// The progress of the open epoch.
#[derive(Debug, Clone)]
struct Epoch {
    /// The stream as it was before this epoch's slice order was drawn (to redraw it on restore).
    order_rng: Option<RngState>,
    /// Slices of the order not opened yet, the next one last (so `pop` takes it).
    pending: Vec<usize>,
    /// How many slices of the order have been opened.
    opened: u64,
    /// One entry per slot: the open slice and the next sample to read in it.
    active: Vec<Option<SliceCursor>>,
    /// The draw weight of each slot: the full length of its slice, 0 for an empty slot.
    weights: Vec<f32>,
}

impl LeafIter {
    /// A fresh iteration (no epoch started) over `slices`, drawing from `rng`, a stream of its own
    /// seeded with the worker seed (`WorkerConfig::worker_rng`).
    ///
    /// Fails for [`SliceOrder::WithReplacement`] over a worker without slices: there is nothing to
    /// draw from.
    pub fn new(
        slices: WorkerSlices,
        config: LeafConfig,
        rng: WorkerRng,
    ) -> Result<Self, energon_dist::Error> {
        if config.order == SliceOrder::WithReplacement && slices.n_slices() == 0 {
            return Err(energon_dist::Error::EmptyRange);
        }
        Ok(LeafIter {
            slices,
            config,
            rng,
            ranges: None,
            epoch: None,
            sample_count: 0,
            epoch_count: 0,
            epoch_sample_count: 0,
        })
    }

    /// The slices of this worker.
    pub fn slices(&self) -> &WorkerSlices {
        &self.slices
    }

    /// The configuration.
    pub fn config(&self) -> &LeafConfig {
        &self.config
    }

    /// The number of samples of this worker (the reference's `len_worker`).
    pub fn len_worker(&self) -> u64 {
        self.slices.n_samples()
    }

    /// How many indices have been yielded in total.
    pub fn sample_count(&self) -> u64 {
        self.sample_count
    }

    /// How many epochs have ended.
    pub fn epoch_count(&self) -> u64 {
        self.epoch_count
    }

    /// How many indices the open epoch has yielded (0 when none is open).
    pub fn epoch_sample_count(&self) -> u64 {
        self.epoch_sample_count
    }

    /// Whether an epoch is open (started and not yet closed by a `None`).
    pub fn in_epoch(&self) -> bool {
        self.epoch.is_some()
    }

    /// The next global sample index, or `None` at the end of an epoch (the call after it starts
    /// the next epoch).
    ///
    /// An epoch that has handed out its last index stays open until the next call, which closes it
    /// and returns `None`; a worker without samples returns `None` on every call.
    pub fn next_index(&mut self) -> Result<Option<u64>, energon_dist::Error> {
        if self.epoch.is_none() {
            self.epoch = Some(self.start_epoch()?);
        }
        let LeafIter { slices, config, rng, epoch: Some(epoch), ranges, .. } = self else {
            unreachable!("an epoch was opened above");
        };
        let table = Table::of(slices, ranges.as_deref());
        if epoch.weights.iter().all(|&w| w == 0.0) {
            // COMPAT(energon 7.4.1): sample_loader.py:_slices_iter closes the epoch only when its
            // loop finds no open slice, i.e. on the pull after the last sample.
            self.epoch = None;
            self.ranges = None;
            self.epoch_count += 1;
            self.epoch_sample_count = 0;
            return Ok(None);
        }
        let slot = match config.order {
            SliceOrder::Sequential => 0,
            // One draw per sample over all P slots, zeros included (no draw when P == 1).
            _ => rng.choice_idx(&epoch.weights)?,
        };
        let cursor =
            epoch.active[slot].as_mut().expect("choice_idx never picks a slot of weight 0");
        let index = cursor.current;
        cursor.current += 1;
        if cursor.current >= table.bounds(cursor.slice).1 {
            let next = if let Some(next) = epoch.pending.pop() {
                epoch.opened += 1;
                Some(next)
            } else if config.order == SliceOrder::WithReplacement && ranges.is_none() {
                // `new` checked that there is at least one slice.
                Some(rng.randbelow(table.len() as u64)? as usize)
            } else {
                None
            };
            epoch.active[slot] = next.map(|slice| table.cursor_at(slice));
            epoch.weights[slot] = next.map_or(0.0, |slice| table.weight_of(slice));
        }
        self.sample_count += 1;
        self.epoch_sample_count += 1;
        Ok(Some(index))
    }

    /// The ranges of samples the current pass has still to read: the rest of the open slices,
    /// then the slices not opened yet, in the order they would open; all of the worker's slices
    /// (each as often as an epoch reads it) when no pass has started yet; nothing when the last
    /// pass has ended and the next has not begun. `None` for [`SliceOrder::WithReplacement`],
    /// whose pass never ends.
    pub fn remaining(&self) -> Option<Vec<(u64, u64)>> {
        let table = Table::of(&self.slices, self.ranges.as_deref());
        if self.ranges.is_none() && self.config.order == SliceOrder::WithReplacement {
            return None;
        }
        let Some(epoch) = &self.epoch else {
            if let Some(ranges) = &self.ranges {
                return Some(ranges.clone());
            }
            let started = self.sample_count > 0 || self.epoch_count > 0;
            return Some(if started { Vec::new() } else { self.full_pass() });
        };
        let open = epoch.active.iter().flatten().map(|c| (c.current, table.bounds(c.slice).1));
        let pending = epoch.pending.iter().rev().map(|&slice| table.bounds(slice));
        Some(open.chain(pending).filter(|(start, end)| start < end).collect())
    }

    /// Where reads of the open epoch go soon, for prefetching: the next sample of every open
    /// slice when `open` is set, then the first sample of each of the next `ahead` slices to open,
    /// the next one first (nothing outside an epoch; for [`SliceOrder::WithReplacement`] the
    /// next slices are drawn when they open, so none are known).
    pub fn upcoming(&self, open: bool, ahead: usize) -> Vec<u64> {
        let Some(epoch) = &self.epoch else { return Vec::new() };
        let table = Table::of(&self.slices, self.ranges.as_deref());
        let mut res: Vec<u64> = Vec::new();
        if open {
            let cursors = epoch.active.iter().flatten();
            res.extend(cursors.filter(|c| c.current < table.bounds(c.slice).1).map(|c| c.current));
        }
        for &next in epoch.pending.iter().rev().take(ahead) {
            let (start, end) = table.bounds(next);
            if start < end {
                res.push(start);
            }
        }
        res
    }

    /// Whether the open (or next) pass reads a remainder given by
    /// [`LeafIter::with_remainder`] instead of the worker's slices.
    pub fn has_remainder(&self) -> bool {
        self.ranges.is_some()
    }

    /// The ranges of one whole pass over the worker's slices: each slice as often as an epoch
    /// reads it (`shuffle_over_epochs` times), in slice order.
    pub fn full_pass(&self) -> Vec<(u64, u64)> {
        let times = match self.config.order {
            SliceOrder::Shuffled { epochs } => epochs.get() as usize,
            _ => 1,
        };
        let table = Table::of(&self.slices, None);
        let once = (0..table.len()).map(|slice| table.bounds(slice));
        let once: Vec<(u64, u64)> = once.filter(|(start, end)| start < end).collect();
        once.iter().copied().cycle().take(once.len() * times).collect()
    }

    /// The first `n` samples of a fresh pass over the worker's slices (fewer if it has fewer):
    /// whole slices in turn, in the order an epoch would draw them now (from a copy of the
    /// stream; the iteration does not move). Empty for [`SliceOrder::WithReplacement`].
    ///
    /// This is a cut pass that another worker reads in this one's stead: the pass holds the
    /// same number of samples, but the samples are not those the interleaved slots of an epoch
    /// would have handed out first.
    pub fn fresh_pass_prefix(&self, n: u64) -> Vec<(u64, u64)> {
        if self.config.order == SliceOrder::WithReplacement {
            return Vec::new();
        }
        let fresh = LeafIter { ranges: None, epoch: None, ..self.clone() };
        let mut rng = self.rng.clone();
        let order = fresh.slice_order(Some(&mut rng)).unwrap_or_default();
        let table = Table::of(&self.slices, None);
        let mut res = Vec::new();
        let mut left = n;
        for slice in order.into_iter().rev() {
            if left == 0 {
                break;
            }
            let (start, end) = table.bounds(slice);
            let take = (end - start).min(left);
            if take > 0 {
                res.push((start, start + take));
                left -= take;
            }
        }
        res
    }

    /// The same iteration with its next pass reading `ranges` (each once) instead of the
    /// worker's slices; the passes after it read the slices again. Returns `None` while an
    /// epoch is open (the current pass must end first) and for
    /// [`SliceOrder::WithReplacement`].
    pub fn with_remainder(mut self, ranges: Vec<(u64, u64)>) -> Option<Self> {
        if self.epoch.is_some() || self.config.order == SliceOrder::WithReplacement {
            return None;
        }
        self.ranges = Some(ranges.into_iter().filter(|(start, end)| start < end).collect());
        Some(self)
    }

    /// The complete progress, to save in a checkpoint.
    pub fn state(&self) -> LeafState {
        LeafState {
            rng: self.rng.state(),
            ranges: self.ranges.clone(),
            epoch: self.epoch.as_ref().map(|epoch| EpochState {
                order_rng: epoch.order_rng.clone(),
                opened: epoch.opened,
                active: epoch.active.clone(),
            }),
            sample_count: self.sample_count,
            epoch_count: self.epoch_count,
            epoch_sample_count: self.epoch_sample_count,
        }
    }

    /// Resumes the iteration saved as `state` over the same `slices` and `config`; it continues
    /// exactly as the saved one would have.
    ///
    /// Returns `None` if the state cannot belong to these slices and this configuration (a slot
    /// count other than the configuration's, a cursor outside its slice, more slices opened than
    /// the order holds).
    pub fn from_state(slices: WorkerSlices, config: LeafConfig, state: LeafState) -> Option<Self> {
        let mut res = LeafIter::new(slices, config, WorkerRng::from_state(state.rng)).ok()?;
        res.sample_count = state.sample_count;
        res.epoch_count = state.epoch_count;
        res.epoch_sample_count = state.epoch_sample_count;
        if let Some(ranges) = state.ranges {
            if ranges.iter().any(|(start, end)| start >= end) {
                return None;
            }
            res.ranges = Some(ranges);
        }
        if let Some(saved) = state.epoch {
            if saved.active.len() != config.n_slots() {
                return None;
            }
            let table = Table::of(&res.slices, res.ranges.as_deref());
            for cursor in saved.active.iter().flatten() {
                if cursor.slice >= table.len() {
                    return None;
                }
                let (start, end) = table.bounds(cursor.slice);
                if cursor.current < start || cursor.current >= end {
                    return None;
                }
            }
            let mut order_rng = saved.order_rng.clone().map(WorkerRng::from_state);
            let mut pending = res.slice_order(order_rng.as_mut())?;
            let opened = usize::try_from(saved.opened).ok()?;
            pending.truncate(pending.len().checked_sub(opened)?);
            let weights = saved
                .active
                .iter()
                .map(|cursor| cursor.as_ref().map_or(0.0, |c| table.weight_of(c.slice)))
                .collect();
            res.epoch = Some(Epoch {
                order_rng: saved.order_rng,
                pending,
                opened: saved.opened,
                active: saved.active,
                weights,
            });
        }
        Some(res)
    }

    /// Draws the slice order of a new epoch and opens its first slots.
    fn start_epoch(&mut self) -> Result<Epoch, energon_dist::Error> {
        let order_rng = match self.order() {
            SliceOrder::Sequential => None,
            _ => Some(self.rng.state()),
        };
        let mut rng = self.rng.clone();
        let Some(pending) = self.slice_order(Some(&mut rng)) else {
            return Err(energon_dist::Error::EmptyRange);
        };
        self.rng = rng;
        let n_slots = self.config.n_slots();
        let mut epoch = Epoch {
            order_rng,
            pending,
            opened: 0,
            active: vec![None; n_slots],
            weights: vec![0.0; n_slots],
        };
        let table = Table::of(&self.slices, self.ranges.as_deref());
        for slot in 0..n_slots {
            let Some(slice) = epoch.pending.pop() else { break };
            epoch.opened += 1;
            epoch.active[slot] = Some(table.cursor_at(slice));
            epoch.weights[slot] = table.weight_of(slice);
        }
        Ok(epoch)
    }

    /// The order of the open (or next) epoch: a pass over explicit ranges reads each once,
    /// shuffled unless the leaf is sequential.
    fn order(&self) -> SliceOrder {
        match (self.config.order, &self.ranges) {
            (SliceOrder::Sequential, _) | (_, None) => self.config.order,
            (_, Some(_)) => SliceOrder::Shuffled { epochs: NonZeroU32::MIN },
        }
    }

    /// The slice order of an epoch, reversed (the first slice last), drawn from `rng` (unused for
    /// [`SliceOrder::Sequential`]). `None` if a draw is impossible (no slices to draw from).
    fn slice_order(&self, rng: Option<&mut WorkerRng>) -> Option<Vec<usize>> {
        let n_slices = Table::of(&self.slices, self.ranges.as_deref()).len();
        let mut order = match (self.order(), rng) {
            (SliceOrder::Sequential, _) => (0..n_slices).collect(),
            (SliceOrder::Shuffled { epochs }, Some(rng)) => {
                let repeated: Vec<usize> =
                    (0..epochs.get() as usize).flat_map(|_| 0..n_slices).collect();
                rng.shuffle(&repeated)
            }
            (SliceOrder::WithReplacement, Some(rng)) => (0..self.config.n_slots())
                .map(|_| rng.randbelow(n_slices as u64).map(|s| s as usize).ok())
                .collect::<Option<Vec<_>>>()?,
            (_, None) => return None,
        };
        order.reverse();
        Some(order)
    }
}

/// What an epoch's slots index: the worker's slices, or the ranges of a remainder.
#[derive(Clone, Copy)]
enum Table<'a> {
    Slices(&'a [u64]),
    Ranges(&'a [(u64, u64)]),
}

impl<'a> Table<'a> {
    fn of(slices: &'a WorkerSlices, ranges: Option<&'a [(u64, u64)]>) -> Self {
        match ranges {
            Some(ranges) => Table::Ranges(ranges),
            None => Table::Slices(slices.offsets()),
        }
    }

    fn len(self) -> usize {
        match self {
            Table::Slices(offsets) => offsets.len().saturating_sub(1),
            Table::Ranges(ranges) => ranges.len(),
        }
    }

    /// The sample range of slice `slice` (which must exist).
    fn bounds(self, slice: usize) -> (u64, u64) {
        match self {
            Table::Slices(offsets) => (offsets[slice], offsets[slice + 1]),
            Table::Ranges(ranges) => ranges[slice],
        }
    }

    fn cursor_at(self, slice: usize) -> SliceCursor {
        SliceCursor { slice, current: self.bounds(slice).0 }
    }

    fn weight_of(self, slice: usize) -> f32 {
        let (start, end) = self.bounds(slice);
        // COMPAT(energon 7.4.1): sample_loader.py:_slices_iter stores the slice length in a
        // float32 tensor (rounded to nearest for lengths past 2^24).
        (end - start) as f32
    }
}
