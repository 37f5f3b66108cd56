//! The 32-bit Mersenne Twister MT19937, the generator behind both torch's CPU generator and Python's
//! `random` module.
//!
//! Both libraries use the standard algorithm of Matsumoto and Nishimura; they differ only in how a
//! seed becomes the initial state: torch uses `init_genrand(seed)` ([`Mt19937::new`]), Python uses
//! `init_by_array(key)` ([`Mt19937::from_key`]).

use std::fmt;

/// Number of 32-bit words in the state.
pub const STATE_WORDS: usize = 624;
const SHIFT: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// The MT19937 generator: 624 words of state and the position of the next word to output.
///
/// Its output is identical to C++'s `std::mt19937` and to the raw 32-bit stream of a torch CPU
/// generator seeded with `manual_seed(seed)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Mt19937 {
    words: Box<[u32; STATE_WORDS]>,
    /// Index of the next word to temper and return; `STATE_WORDS` means "twist first".
    index: usize,
}

impl fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // 624 words are noise in a debug print; the position tells where the stream is.
        f.debug_struct("Mt19937").field("index", &self.index).finish_non_exhaustive()
    }
}

impl Mt19937 {
    /// The standard `init_genrand(seed)` initialization (what `torch.Generator().manual_seed(seed)`
    /// and `std::mt19937(seed)` do).
    pub fn new(seed: u32) -> Self {
        let mut words = Box::new([0u32; STATE_WORDS]);
        words[0] = seed;
        for i in 1..STATE_WORDS {
            let prev = words[i - 1];
            // `i < 624` always fits in a u32.
            words[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Mt19937 { words, index: STATE_WORDS }
    }

    /// The standard `init_by_array(key)` initialization (what Python's `random.seed(n)` does with
    /// the 32-bit chunks of `n`, least significant first). An empty key is treated as `[0]`.
    pub fn from_key(key: &[u32]) -> Self {
        let key: &[u32] = if key.is_empty() { &[0] } else { key };
        let mut mt = Mt19937::new(19_650_218);
        let words = &mut mt.words;
        let mut i = 1;
        let mut j = 0;
        for _ in 0..STATE_WORDS.max(key.len()) {
            let prev = words[i - 1];
            words[i] = (words[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= STATE_WORDS {
                words[0] = words[STATE_WORDS - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..STATE_WORDS - 1 {
            let prev = words[i - 1];
            words[i] = (words[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= STATE_WORDS {
                words[0] = words[STATE_WORDS - 1];
                i = 1;
            }
        }
        // The most significant bit is set so that the state is never all zero.
        words[0] = 0x8000_0000;
        mt.index = STATE_WORDS;
        mt
    }

    /// The next 32-bit output (tempered).
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= STATE_WORDS {
            self.twist();
        }
        let mut y = self.words[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// The raw state: the 624 words and the index of the next word to output (624: the words are
    /// regenerated before the next output).
    pub fn state(&self) -> (&[u32; STATE_WORDS], usize) {
        (&self.words, self.index)
    }

    /// A generator with the given raw state (see [`Mt19937::state`]); `None` if `index > 624` or
    /// all words are zero (a state no generator can reach, which would output zeros forever).
    pub fn from_state(words: [u32; STATE_WORDS], index: usize) -> Option<Self> {
        if index > STATE_WORDS || words.iter().all(|&w| w == 0) {
            return None;
        }
        Some(Mt19937 { words: Box::new(words), index })
    }

    fn twist(&mut self) {
        let words = &mut self.words;
        for i in 0..STATE_WORDS {
            let y = (words[i] & UPPER_MASK) | (words[(i + 1) % STATE_WORDS] & LOWER_MASK);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            words[i] = words[(i + SHIFT) % STATE_WORDS] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_mt19937_test_vector() {
        // C++11 [rand.predef]: the 10000th output of a default-constructed std::mt19937 (seed
        // 5489) is 4123659995.
        let mut mt = Mt19937::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = mt.next_u32();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn reference_first_outputs() {
        // The first outputs of mt19937ar.c's own test (init_by_array({0x123, 0x234, 0x345, 0x456})).
        let mut mt = Mt19937::from_key(&[0x123, 0x234, 0x345, 0x456]);
        let first: Vec<u32> = (0..5).map(|_| mt.next_u32()).collect();
        assert_eq!(first, [1_067_595_299, 955_945_823, 477_289_528, 4_107_218_783, 4_228_976_476]);
        // mt19937ar.c's test prints 1000 outputs; the last one is 3460025646.
        for _ in 5..999 {
            mt.next_u32();
        }
        assert_eq!(mt.next_u32(), 3_460_025_646);
    }

    #[test]
    fn seed_5489_first_outputs() {
        let mut mt = Mt19937::new(5489);
        let first: Vec<u32> = (0..3).map(|_| mt.next_u32()).collect();
        assert_eq!(first, [3_499_211_612, 581_869_302, 3_890_346_734]);
    }

    #[test]
    fn state_round_trip_continues_the_stream() {
        let mut mt = Mt19937::new(42);
        for _ in 0..700 {
            mt.next_u32();
        }
        let (words, index) = mt.state();
        let words = *words;
        let mut copy = Mt19937::from_state(words, index).unwrap();
        for _ in 0..1000 {
            assert_eq!(mt.next_u32(), copy.next_u32());
        }
        assert!(Mt19937::from_state([0; STATE_WORDS], 0).is_none());
        assert!(Mt19937::from_state(words, STATE_WORDS + 1).is_none());
    }
}
