//! Savable state of this crate's random streams, for checkpoints.
//!
//! This is the only module whose types derive `Serialize`/`Deserialize`. A loader embeds
//! [`RngState`] in its own versioned checkpoint format; deserialization validates the state, so an
//! `RngState` value is always one that [`crate::WorkerRng::from_state`] can resume from.

use serde::{Deserialize, Serialize};

use crate::{
    error::Error,
    mt19937::{Mt19937, STATE_WORDS},
    worker::Seed,
};

/// The complete state of a [`crate::WorkerRng`]: its seed and, once it has drawn, the MT19937
/// state.
///
/// A stream that never drew has no MT19937 state yet (the reference seeds on first use); it
/// serializes as `{"seed": S, "mt": null}` and resumes as the same lazily seeded stream.
/// Otherwise it serializes as `{"seed": S, "mt": {"words": [624 numbers], "index": I}}`, where
/// `index` (0 to 624) is the position of the next word to output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RngStateRepr", into = "RngStateRepr")]
pub struct RngState {
    pub(crate) seed: Seed,
    pub(crate) mt: Option<Mt19937>,
}

impl RngState {
    /// The seed the stream was (or will be) seeded with.
    pub fn seed(&self) -> Seed {
        self.seed
    }

    /// Whether the stream has drawn at least once (and so carries an MT19937 state).
    pub fn is_seeded(&self) -> bool {
        self.mt.is_some()
    }
}

/// The serialized form of [`RngState`].
#[derive(Serialize, Deserialize)]
struct RngStateRepr {
    seed: u32,
    mt: Option<MtRepr>,
}

#[derive(Serialize, Deserialize)]
struct MtRepr {
    words: Vec<u32>,
    index: u32,
}

impl TryFrom<RngStateRepr> for RngState {
    type Error = Error;

    fn try_from(repr: RngStateRepr) -> Result<Self, Error> {
        let mt =
            match repr.mt {
                None => None,
                Some(MtRepr { words, index }) => {
                    let words: [u32; STATE_WORDS] = words.try_into().map_err(|_| {
                        Error::InvalidRngState { reason: "the state must have exactly 624 words" }
                    })?;
                    let index = usize::try_from(index).unwrap_or(usize::MAX);
                    Some(Mt19937::from_state(words, index).ok_or(Error::InvalidRngState {
                        reason: "index past 624 or all words zero",
                    })?)
                }
            };
        Ok(RngState { seed: Seed(repr.seed), mt })
    }
}

impl From<RngState> for RngStateRepr {
    fn from(state: RngState) -> Self {
        RngStateRepr {
            seed: state.seed.get(),
            mt: state.mt.map(|mt| {
                let (words, index) = mt.state();
                MtRepr {
                    words: words.to_vec(),
                    // At most 624.
                    index: index as u32,
                }
            }),
        }
    }
}
