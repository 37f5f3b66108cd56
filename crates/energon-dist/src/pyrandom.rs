//! Python's `random.Random`, for the places where the reference uses Python's own generator.
//!
//! `energon prepare --shuffle-tars` shuffles the shard list with `random.Random(42).shuffle` before
//! cutting it into train/val/test; reproducing that needs Python's seeding (`init_by_array`),
//! `getrandbits` and its rejection-sampling `randbelow`, which all differ from torch's.

use std::num::NonZeroU64;

use crate::{
    error::{Error, Result},
    mt19937::Mt19937,
};

/// Python's `random.Random` seeded with a non-negative integer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyRandom {
    mt: Mt19937,
}

impl PyRandom {
    /// `random.Random(seed)`: MT19937 `init_by_array` with the seed's 32-bit chunks, least
    /// significant first, without leading zero chunks (`[0]` for seed 0).
    ///
    /// ```
    /// let mut rng = energon_dist::PyRandom::new(42);
    /// assert_eq!(rng.random(), 0.6394267984578837);
    /// ```
    pub fn new(seed: u64) -> Self {
        // Truncation to the low and high chunks is the point.
        let low = seed as u32;
        let high = (seed >> 32) as u32;
        let mt =
            if high == 0 { Mt19937::from_key(&[low]) } else { Mt19937::from_key(&[low, high]) };
        PyRandom { mt }
    }

    /// `random()`: a float in `[0, 1)` with 53 random bits, from two draws.
    pub fn random(&mut self) -> f64 {
        let a = self.mt.next_u32() >> 5;
        let b = self.mt.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `getrandbits(k)` for `k <= 64`: `k` random bits. Up to 32 bits take the top bits of one
    /// draw; above, the first draw gives the low 32 bits and the second the rest (its top bits).
    /// `k == 0` gives 0 without drawing.
    ///
    /// Fails for `k > 64` (which Python supports but no caller here needs).
    pub fn getrandbits(&mut self, k: u32) -> Result<u64> {
        if k > 64 {
            return Err(Error::TooManyBits { k });
        }
        Ok(self.bits(k))
    }

    /// `_randbelow(n)` (`_randbelow_with_getrandbits`): draw `n.bit_length()` bits until the value
    /// is below `n`. `n == 1` still draws (until it gets a 0).
    ///
    /// Fails for `n == 0` without drawing.
    pub fn randbelow(&mut self, n: u64) -> Result<u64> {
        let n = NonZeroU64::new(n).ok_or(Error::EmptyRange)?;
        Ok(self.below(n))
    }

    /// `shuffle(items)` in place: for `i` from `len - 1` down to 1, swap `items[i]` with
    /// `items[randbelow(i + 1)]`.
    ///
    /// ```
    /// let mut items: Vec<u32> = (0..10).collect();
    /// energon_dist::PyRandom::new(42).shuffle(&mut items);
    /// assert_eq!(items, [7, 3, 2, 8, 5, 6, 9, 4, 0, 1]);
    /// ```
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(NonZeroU64::MIN.saturating_add(i as u64));
            // `j <= i`, an index into `items`.
            items.swap(i, j as usize);
        }
    }

    /// `k <= 64` random bits.
    fn bits(&mut self, k: u32) -> u64 {
        debug_assert!(k <= 64);
        match k {
            0 => 0,
            1..=32 => u64::from(self.mt.next_u32() >> (32 - k)),
            _ => {
                let low = u64::from(self.mt.next_u32());
                let high = u64::from(self.mt.next_u32() >> (64 - k));
                (high << 32) | low
            }
        }
    }

    fn below(&mut self, n: NonZeroU64) -> u64 {
        let k = u64::BITS - n.leading_zeros();
        loop {
            let r = self.bits(k);
            if r < n.get() {
                return r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values printed by CPython 3.11's `random` module.

    #[test]
    fn random_42() {
        assert_eq!(PyRandom::new(42).random(), 0.6394267984578837);
        let mut rng = PyRandom::new(123);
        let values: Vec<f64> = (0..3).map(|_| rng.random()).collect();
        assert_eq!(values, [0.052363598850944326, 0.08718667752263232, 0.4072417636703983]);
    }

    #[test]
    fn seeding_uses_32_bit_chunks() {
        let words = |seed: u64, n: usize| -> Vec<u64> {
            let mut rng = PyRandom::new(seed);
            (0..n).map(|_| rng.getrandbits(32).unwrap()).collect()
        };
        assert_eq!(words(0, 3), [3_626_764_237, 1_654_615_998, 3_255_389_356]);
        assert_eq!(words((1 << 40) + 5, 3), [2_166_296_868, 2_220_160_828, 1_153_647_273]);
        assert_eq!(words(u64::MAX, 2), [93_740_670, 1_068_495_656]);
    }

    #[test]
    fn getrandbits_widths() {
        let mut rng = PyRandom::new(7);
        let got: Vec<u64> =
            [1, 5, 31, 32, 33, 48, 64].iter().map(|&k| rng.getrandbits(k).unwrap()).collect();
        assert_eq!(
            got,
            [
                0,
                30,
                323_946_139,
                1_695_753_998,
                2_795_742_288,
                231_168_335_884_083,
                1_736_392_818_365_009_963
            ]
        );
        assert_eq!(rng.getrandbits(0), Ok(0));
        assert_eq!(rng.getrandbits(65), Err(Error::TooManyBits { k: 65 }));
    }

    #[test]
    fn randbelow_rejection_sampling() {
        let mut rng = PyRandom::new(7);
        let bounds = [1, 2, 3, 10, 1000, (1 << 31) + 1, 1 << 32, (1 << 40) + 3, u64::MAX];
        let got: Vec<u64> = bounds.iter().map(|&n| rng.randbelow(n).unwrap()).collect();
        assert_eq!(
            got,
            [
                0,
                0,
                1,
                0,
                74,
                404_285_457,
                2_179_419_893,
                189_139_603_672,
                7_713_914_763_314_685_786
            ]
        );
        assert_eq!(rng.randbelow(0), Err(Error::EmptyRange));
    }

    #[test]
    fn shuffle_matches_python() {
        let mut items: Vec<u32> = (0..10).collect();
        PyRandom::new(42).shuffle(&mut items);
        assert_eq!(items, [7, 3, 2, 8, 5, 6, 9, 4, 0, 1]);
        let mut items: Vec<u32> = (0..25).collect();
        PyRandom::new(3).shuffle(&mut items);
        assert_eq!(
            items,
            [
                6, 16, 22, 14, 1, 5, 20, 10, 9, 13, 24, 12, 3, 8, 21, 23, 0, 2, 15, 19, 11, 4, 17,
                18, 7
            ]
        );
        let mut one = ["only"];
        PyRandom::new(3).shuffle(&mut one);
        assert_eq!(one, ["only"]);
        let mut none: [u8; 0] = [];
        PyRandom::new(3).shuffle(&mut none);
    }
}
