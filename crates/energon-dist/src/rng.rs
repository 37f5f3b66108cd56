//! Per-component random streams with torch's CPU sampling rules.
//!
//! In the reference, every component that draws (each leaf's sample loader, each blend, the
//! shuffle buffer) owns a `WorkerRng`: a torch CPU generator (MT19937) seeded with the worker
//! seed on first use. [`WorkerRng`] reproduces it draw for draw, including how torch turns raw
//! 32-bit words into integers, permutations and floats.

#[cfg(test)]
mod tests;

use crate::{
    error::{Error, Result},
    mt19937::Mt19937,
    state::RngState,
    worker::Seed,
};

/// Below this bound torch's `randint` uses one 32-bit draw (`x % n`); from it on, one 64-bit value
/// made of two draws.
const RANDINT_64BIT_FROM: u64 = 1 << 28;

/// From this length on torch's `randperm` switches to an inside-out Fisher–Yates with 64-bit draws
/// (`u32::MAX / 20`).
const RANDPERM_64BIT_FROM: usize = (u32::MAX / 20) as usize;

/// A random stream as one component of one worker owns it (the reference's `WorkerRng`).
///
/// It is seeded lazily: the MT19937 state is built from the seed on the first draw. Create one with
/// [`WorkerConfig::worker_rng`](crate::WorkerConfig::worker_rng) or [`WorkerRng::new`]; save and
/// resume it with [`WorkerRng::state`] and [`WorkerRng::from_state`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRng {
    seed: Seed,
    mt: Option<Mt19937>,
}

impl WorkerRng {
    /// A stream that will be seeded with `seed` on its first draw.
    pub fn new(seed: Seed) -> Self {
        WorkerRng { seed, mt: None }
    }

    /// The stream's seed.
    pub fn seed(&self) -> Seed {
        self.seed
    }

    /// Whether the stream has drawn at least once.
    pub fn is_seeded(&self) -> bool {
        self.mt.is_some()
    }

    /// The next raw 32-bit output of the generator (torch's `random()`).
    pub fn next_u32(&mut self) -> u32 {
        let seed = self.seed;
        self.mt.get_or_insert_with(|| Mt19937::new(seed.get())).next_u32()
    }

    /// Two raw outputs as one 64-bit value, the first in the high half (torch's `random64()`).
    pub fn next_u64(&mut self) -> u64 {
        let high = u64::from(self.next_u32());
        let low = u64::from(self.next_u32());
        (high << 32) | low
    }

    /// A uniform integer in `[0, n)`, as `torch.randint(0, n, ())`: `next_u32() % n` for
    /// `n < 2^28`, `next_u64() % n` from `2^28` on. `n == 1` still consumes a draw.
    ///
    /// Fails for `n == 0` without drawing.
    pub fn randbelow(&mut self, n: u64) -> Result<u64> {
        if n == 0 {
            return Err(Error::EmptyRange);
        }
        if n < RANDINT_64BIT_FROM {
            Ok(u64::from(self.next_u32()) % n)
        } else {
            Ok(self.next_u64() % n)
        }
    }

    /// A uniform float in `[0, 1)`, as `torch.rand(1)` (float32): the low 24 bits of one draw
    /// divided by 2^24.
    pub fn rand_f32(&mut self) -> f32 {
        // Exact: a 24-bit integer and a power of two.
        (self.next_u32() & 0x00ff_ffff) as f32 / 16_777_216.0
    }

    /// A random permutation of `0..n`, as `torch.randperm(n)`.
    ///
    /// For `n < 2^32 / 20`: start from the identity, then for `i` in `0..n-1` swap `p[i]` and
    /// `p[i + z]` with `z = next_u32() % (n - i)`; `n <= 1` draws nothing. Longer permutations use
    /// torch's inside-out variant with 64-bit draws (`z = next_u64() % (i + 1)`).
    pub fn randperm(&mut self, n: usize) -> Vec<usize> {
        if n < RANDPERM_64BIT_FROM {
            self.randperm_swapping(n)
        } else {
            self.randperm_inside_out(n)
        }
    }

    fn randperm_swapping(&mut self, n: usize) -> Vec<usize> {
        let mut perm: Vec<usize> = (0..n).collect();
        for i in 0..n.saturating_sub(1) {
            // Below the switch `n - i` fits in a u32, and so does the remainder.
            let z = (self.next_u32() % (n - i) as u32) as usize;
            perm.swap(i, i + z);
        }
        perm
    }

    fn randperm_inside_out(&mut self, n: usize) -> Vec<usize> {
        let mut perm = vec![0; n];
        for i in 0..n {
            // The remainder is at most `i < n`, a usize.
            let z = (self.next_u64() % (i as u64 + 1)) as usize;
            perm[i] = perm[z];
            perm[z] = i;
        }
        perm
    }

    /// A shuffled copy of `items`, as the reference's `WorkerRng.shuffle`: `out[i] = items[p[i]]`
    /// with `p = randperm(len)`.
    pub fn shuffle<T: Clone>(&mut self, items: &[T]) -> Vec<T> {
        self.randperm(items.len()).into_iter().map(|i| items[i].clone()).collect()
    }

    /// Removes and returns a uniformly chosen element, keeping the order of the rest (the
    /// reference's `rand_pop`: `list.pop(randbelow(len))`).
    ///
    /// Fails for an empty vector without drawing.
    pub fn rand_pop<T>(&mut self, items: &mut Vec<T>) -> Result<T> {
        let index = self.randbelow(items.len() as u64)?;
        // `index < len`, so it fits in a usize and is in bounds.
        Ok(items.remove(index as usize))
    }

    /// An index drawn with probability proportional to `weights`, as the reference's
    /// `WorkerRng.choice_idx`.
    ///
    /// A single weight gives 0 without drawing (whatever its value). Otherwise: the cumulative sums
    /// of the weights are accumulated in `f64` and stored as `f32`, `u = rand_f32()`,
    /// `v = u * total` in `f32`, and the result is the first index whose cumulative sum is
    /// greater than `v`; so a zero weight is never chosen, not even on ties.
    ///
    /// Fails without drawing for an empty vector, a negative or non-finite weight, or weights that
    /// are all zero.
    pub fn choice_idx(&mut self, weights: &[f32]) -> Result<usize> {
        match weights.len() {
            0 => return Err(Error::EmptyWeights),
            1 => return Ok(0),
            _ => {}
        }
        let mut cdf = Vec::with_capacity(weights.len());
        let mut sum = 0f64;
        for (index, &weight) in weights.iter().enumerate() {
            if !weight.is_finite() || weight < 0.0 {
                return Err(Error::InvalidWeight { index, weight });
            }
            sum += f64::from(weight);
            // COMPAT(energon 7.4.1): rng.py:WorkerRng.choice_idx (torch.cumsum of float32
            // accumulates in double and stores float32).
            cdf.push(sum as f32);
        }
        let total = cdf.last().copied().unwrap_or(0.0);
        if total <= 0.0 {
            return Err(Error::AllWeightsZero { len: weights.len() });
        }
        let value = self.rand_f32() * total;
        // `value < total` because `u <= 1 - 2^-24`, so some cumulative sum is greater.
        let index = cdf.partition_point(|&c| c <= value);
        if index >= cdf.len() {
            return Err(Error::AllWeightsZero { len: weights.len() });
        }
        Ok(index)
    }

    /// The stream's complete state, to save in a checkpoint.
    pub fn state(&self) -> RngState {
        RngState { seed: self.seed, mt: self.mt.clone() }
    }

    /// Resumes a stream from a saved state; it continues exactly where the saved one stood (a
    /// never-used stream stays lazily seeded).
    pub fn from_state(state: RngState) -> Self {
        WorkerRng { seed: state.seed, mt: state.mt }
    }
}
