//! [`Repeat`]: the passes of a child, forever or a possibly fractional number of times.

use super::Source;
use crate::{error::Error, state::RepeatState};

/// Repeats the passes of its child: forever (`repeats = None`), or `r` times, where a fraction
/// makes a last, partial pass of `floor(len_worker * frac(r))` items (the reference's
/// `RepeatDataset`).
///
/// COMPAT(energon 7.4.1): wrappers/repeat_dataset.py:RepeatDataset. The partial pass abandons the
/// child in the middle of its pass, and the next pass of this stage continues the child's pass
/// instead of restarting it: it first finishes the interrupted epoch and counts those items as its
/// first repetition (an epoch cut right after its last item yields nothing and only closes). After
/// the last repetition the counter resets, so the next pass starts from repetition 0.
#[derive(Debug, Clone)]
pub struct Repeat<S> {
    inner: S,
    repeats: Option<f64>,
    repetition: u64,
    index: u64,
    phase: Phase,
    /// Consecutive passes of the child without an item (infinite repetition only).
    empty_passes: u32,
}

/// Where the reference's generator would be suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// At the top of the repetition loop.
    Top,
    /// Inside a pass of the child, cut after `stop` items if set.
    InPass { stop: Option<u64>, yielded: bool },
    /// Right after the item that reached the cut of a partial pass.
    AfterCut,
}

impl<S: Source> Repeat<S> {
    /// Repeats `inner` forever. The first pull fails if the child has no samples on this worker
    /// ("cannot repeat an empty dataset indefinitely"), and any pull fails after two consecutive
    /// passes of the child yielded nothing.
    pub fn forever(inner: S) -> Self {
        Repeat::with(inner, None)
    }

    /// Repeats `inner` `repeats` times (finite and positive; a fraction makes a partial last
    /// pass).
    pub fn times(inner: S, repeats: f64) -> Result<Self, Error> {
        if !(repeats.is_finite() && repeats > 0.0) {
            return Err(Error::InvalidOption {
                option: "repetitions",
                value: repeats.to_string(),
                reason: "must be a finite number above 0".to_owned(),
            });
        }
        Ok(Repeat::with(inner, Some(repeats)))
    }

    fn with(inner: S, repeats: Option<f64>) -> Self {
        Repeat { inner, repeats, repetition: 0, index: 0, phase: Phase::Top, empty_passes: 0 }
    }

    /// The number of repetitions (`None`: forever).
    pub fn repeats(&self) -> Option<f64> {
        self.repeats
    }

    /// The child.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The child, mutably (to save or restore its state).
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The savable progress (the reference's `_repetition` and `_index`).
    pub fn state(&self) -> RepeatState {
        RepeatState { repetition: self.repetition, index: self.index }
    }

    /// Continues from a saved progress; the child's own state is restored separately.
    pub fn restore(&mut self, state: &RepeatState) {
        self.repetition = state.repetition;
        self.index = state.index;
        // The reference restarts its generator at the top of the loop, which recomputes the cut
        // and continues the child where its own state says.
        self.phase = Phase::Top;
        self.empty_passes = 0;
    }

    fn end_repetition(&mut self) {
        self.repetition += 1;
        self.index = 0;
        self.phase = Phase::Top;
    }
}

impl<S: Source> Source for Repeat<S> {
    type Item = S::Item;
    type Error = S::Error;

    fn next(&mut self) -> Result<Option<S::Item>, S::Error> {
        loop {
            match self.phase {
                Phase::Top => {
                    let mut stop = None;
                    match self.repeats {
                        None => {
                            if !self.inner.has_samples() {
                                return Err(Error::NothingToRepeat { len_worker: 0 }.into());
                            }
                        }
                        Some(repeats) => {
                            if self.repetition as f64 >= repeats {
                                self.repetition = 0;
                                return Ok(None);
                            }
                            if self.repetition as f64 == repeats.floor() {
                                let fraction = repeats - repeats.floor();
                                let cut =
                                    (self.inner.len_worker() as f64 * fraction).floor() as u64;
                                if self.index >= cut {
                                    // A restored index already past the cut.
                                    self.repetition = 0;
                                    self.index = 0;
                                    return Ok(None);
                                }
                                stop = Some(cut);
                            }
                        }
                    }
                    self.phase = Phase::InPass { stop, yielded: false };
                }
                Phase::InPass { stop, yielded } => match self.inner.next()? {
                    Some(item) => {
                        self.index += 1;
                        self.empty_passes = 0;
                        self.phase = if stop.is_some_and(|stop| self.index >= stop) {
                            Phase::AfterCut
                        } else {
                            Phase::InPass { stop, yielded: true }
                        };
                        return Ok(Some(item));
                    }
                    None => {
                        if self.repeats.is_none() && !yielded {
                            self.empty_passes += 1;
                            // One empty pass is legitimate (an epoch interrupted right after its
                            // last item closes empty); two in a row means nothing is left.
                            if self.empty_passes >= 2 {
                                return Err(Error::NothingToRepeat {
                                    len_worker: self.inner.len_worker(),
                                }
                                .into());
                            }
                        }
                        self.end_repetition();
                    }
                },
                Phase::AfterCut => self.end_repetition(),
            }
        }
    }

    fn len_worker(&self) -> u64 {
        match self.repeats {
            None => self.inner.len_worker(),
            // The reference's `int(len_worker * repeats)`.
            Some(repeats) => (self.inner.len_worker() as f64 * repeats) as u64,
        }
    }

    fn has_samples(&self) -> bool {
        self.inner.has_samples()
    }
}
