//! Task encoders as a user of energon-rs writes them, for the reference-prepared fixture dataset:
//!
//! - [`captioning`]: resizes images (with a random flip drawn from the per-sample seed, so it
//!   is restorable) and tokenizes captions into padded tensors.
//! - [`text_packing`]: cooks crude JSONL records into text samples and packs their tokens
//!   greedily into sequences of a fixed token budget.
//! - [`crude_cooker`]: cooks crude JSONL records into captioning samples, reading each image
//!   from an auxiliary source declared in the metadataset.
//!
//! Each module has a function that builds the loader; the `examples/` programs run them, the
//! tests check what they yield and that they resume exactly, and the benchmark measures them
//! with two workers.

pub mod captioning;
pub mod crude_cooker;
pub mod text_packing;

use std::path::{Path, PathBuf};

/// The reference-prepared fixture dataset (4 shards of 50 captioned 32x32 images, and a JSONL file).
pub fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

/// This package's data (metadatasets).
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(name)
}

/// A word-level tokenizer with a hashed vocabulary: enough to show padding and packing.
#[derive(Debug, Clone, Copy)]
pub struct Tokenizer {
    /// Token ids are below this.
    pub vocab_size: u32,
}

impl Tokenizer {
    /// Padding.
    pub const PAD: u32 = 0;
    /// The start of a text.
    pub const BOS: u32 = 1;
    /// The end of a text.
    pub const EOS: u32 = 2;

    /// The tokens of `text`: `BOS`, one per word (lower-cased), `EOS`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let words = text.split_whitespace().map(|word| {
            // FNV-1a over the lower-cased word, folded into the ids after the special tokens.
            let hash = word
                .to_lowercase()
                .bytes()
                .fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
            3 + hash % (self.vocab_size - 3)
        });
        std::iter::once(Self::BOS).chain(words).chain(std::iter::once(Self::EOS)).collect()
    }
}

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer { vocab_size: 32_000 }
    }
}
