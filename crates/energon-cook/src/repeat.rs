//! The repeat stage: the passes of its inner stage, forever or a possibly fractional number of
//! times (the reference's `RepeatDataset`), for single datasets and the leaves and blends of
//! metadatasets alike.

use crate::{
    error::{Error, Result},
    restore_key::KeyPart,
    stage::Stage,
    state::{StageState, mismatch},
};

/// Repeats the passes of the inner stage: forever, or `r` times, where a fraction makes a last,
/// partial pass of `floor(len_worker * frac(r))` items.
///
/// COMPAT(energon 7.4.1): wrappers/repeat_dataset.py:RepeatDataset. The partial pass abandons the
/// inner stage in the middle of its pass, and the next pass of this stage continues that pass
/// instead of restarting it: it first finishes the interrupted epoch and counts those items as its
/// first repetition (an epoch cut right after its last item yields nothing and only closes). After
/// the last repetition the counter resets, so the next pass starts from repetition 0.
pub struct Repeat<S> {
    inner: S,
    repeats: Option<f64>,
    repetition: u64,
    index: u64,
    /// The current repetition reads a share of a pass dealt from another number of workers: it
    /// is never cut and is the last of this pass.
    dealt: bool,
    phase: Phase,
    /// Consecutive passes of the inner stage without an item (infinite repetition only).
    empty_passes: u32,
    /// The local worker id, for errors.
    worker: usize,
}

/// Where the reference's generator would be suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// At the top of the repetition loop.
    Top,
    /// Inside a pass of the inner stage, cut after `stop` items if set.
    InPass { stop: Option<u64>, yielded: bool },
    /// Right after the item that reached the cut of a partial pass.
    AfterCut,
}

impl<S: Stage> Repeat<S> {
    /// Repeats `inner` forever.
    ///
    /// `worker` (the local worker id) names the worker in errors. The first pull fails if
    /// `inner` has no samples on this worker (the reference: "cannot repeat an empty dataset
    /// indefinitely"), and any pull fails after two consecutive passes of it yielded nothing,
    /// instead of looping forever.
    pub fn forever(inner: S, worker: usize) -> Self {
        Repeat::with(inner, None, worker)
    }

    /// Repeats `inner` `repeats` times (finite and above 0; the fraction makes a partial last
    /// pass).
    pub fn times(inner: S, repeats: f64, worker: usize) -> Result<Self> {
        if !(repeats.is_finite() && repeats > 0.0) {
            return Err(Error::InvalidSetting {
                setting: "repetitions",
                value: repeats.to_string(),
                reason: "must be a finite number above 0",
            });
        }
        Ok(Repeat::with(inner, Some(repeats), worker))
    }

    fn with(inner: S, repeats: Option<f64>, worker: usize) -> Self {
        Repeat {
            inner,
            repeats,
            repetition: 0,
            index: 0,
            dealt: false,
            phase: Phase::Top,
            empty_passes: 0,
            worker,
        }
    }

    /// The number of repetitions (`None`: forever).
    pub fn repeats(&self) -> Option<f64> {
        self.repeats
    }

    fn end_repetition(&mut self) {
        self.repetition += 1;
        self.index = 0;
        self.dealt = false;
        self.phase = Phase::Top;
    }

    fn nothing_to_repeat(&self) -> Error {
        Error::NothingToRepeat { worker: self.worker, len_worker: self.inner.len_worker() }
    }
}

impl<S> std::fmt::Debug for Repeat<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repeat")
            .field("repeats", &self.repeats)
            .field("repetition", &self.repetition)
            .field("index", &self.index)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl<S: Stage> Stage for Repeat<S> {
    type Item = S::Item;

    fn next(&mut self) -> Result<Option<S::Item>> {
        loop {
            match self.phase {
                Phase::Top => {
                    let mut stop = None;
                    match self.repeats {
                        None => {
                            if !self.inner.has_samples() {
                                return Err(self.nothing_to_repeat());
                            }
                        }
                        Some(repeats) => {
                            if self.repetition as f64 >= repeats {
                                self.repetition = 0;
                                return Ok(None);
                            }
                            if self.repetition as f64 == repeats.floor() && !self.dealt {
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
                                return Err(self.nothing_to_repeat());
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

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Repeat {
            repetition: self.repetition,
            index: self.index,
            dealt: self.dealt,
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Repeat { repetition, index, dealt, inner } = state else {
            return Err(mismatch("repetition", state));
        };
        self.inner.restore(inner)?;
        self.repetition = *repetition;
        self.index = *index;
        self.dealt = *dealt;
        // The reference restarts its generator at the top of the loop, which recomputes the cut
        // and continues the inner stage where its own state says.
        self.phase = Phase::Top;
        self.empty_passes = 0;
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<S::Item> {
        self.inner.restore_item(key)
    }
}

#[cfg(test)]
mod tests {
    use energon_dist::{WorkerConfig, shard_workers};
    use energon_reader::leaf::{LeafConfig, LeafIter};

    use super::*;
    use crate::{BoxStage, Keyed, LeafSource};

    fn leaf_stage(n: u64) -> BoxStage<u64> {
        let cfg = WorkerConfig::new(0, 1, 0).unwrap();
        let slices = shard_workers(&[n], None, &cfg, 0, None).unwrap().remove(0);
        let leaf = LeafIter::new(slices, LeafConfig::TRAIN, cfg.worker_rng(0).unwrap()).unwrap();
        Box::new(LeafSource::new(leaf, |i| Ok(Some(i))))
    }

    fn pass_lengths(stage: &mut impl Stage, passes: usize) -> Vec<usize> {
        (0..passes)
            .map(|_| {
                let mut n = 0;
                while stage.next().unwrap().is_some() {
                    n += 1;
                }
                n
            })
            .collect()
    }

    fn check(repeats: f64, n: u64, want: &[usize]) {
        let mut stage = Repeat::times(leaf_stage(n), repeats, 0).unwrap();
        assert_eq!(pass_lengths(&mut stage, want.len()), want, "r = {repeats} on {n}");
    }

    #[test]
    fn fractional_repetitions_resume_the_abandoned_epoch() {
        // COMPAT(energon 7.4.1): the per-pass counts the reference produces.
        check(0.5, 80, &[40, 40, 0, 40, 40, 0]);
        check(0.7, 50, &[35, 15, 35, 15]);
        check(0.3, 100, &[30, 30, 30, 10, 30]);
        check(2.25, 40, &[90, 80, 80]);
        check(2.0, 10, &[20, 20]);
        // The two partial passes of r = 0.5 together read every sample once.
        let mut stage = Repeat::times(leaf_stage(80), 0.5, 0).unwrap();
        let mut first_two = Vec::new();
        for _ in 0..2 {
            while let Some(item) = stage.next().unwrap() {
                first_two.push(item.value);
            }
        }
        first_two.sort_unstable();
        assert_eq!(first_two, (0..80).collect::<Vec<_>>());
        assert_eq!(stage.len_worker(), 40);
    }

    #[test]
    fn a_dealt_repetition_is_read_whole_and_ends_the_pass() {
        let mut stage = Repeat::times(leaf_stage(10), 2.5, 0).unwrap();
        let StageState::Repeat { inner, .. } = stage.state().unwrap() else { unreachable!() };
        let dealt = StageState::Repeat { repetition: 2, index: 0, dealt: true, inner };
        stage.restore(&dealt).unwrap();
        // Not cut at 5 where the fraction would cut it; the next pass is the usual 10 + 10 + 5.
        assert_eq!(pass_lengths(&mut stage, 2), [10, 25]);
        assert!(matches!(stage.state().unwrap(), StageState::Repeat { dealt: false, .. }));
    }

    #[test]
    fn forever_never_ends_and_counts_repetitions() {
        let mut stage = Repeat::forever(leaf_stage(3), 0);
        let mut sorted: Vec<u64> = (0..9).map(|_| stage.next().unwrap().unwrap().value).collect();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        let state = stage.state().unwrap();
        assert!(matches!(state, StageState::Repeat { repetition: 2, index: 3, .. }), "{state:?}");
    }

    #[test]
    fn forever_over_nothing_fails_instead_of_looping() {
        let stage = crate::FnStage::new(5, || Ok(None::<Keyed<u8>>));
        let mut stage = Repeat::forever(Box::new(stage), 3);
        let err = stage.next().unwrap_err();
        assert!(matches!(err, Error::NothingToRepeat { worker: 3, len_worker: 5 }), "{err}");
        let mut empty = Repeat::forever(leaf_stage(0), 1);
        let err = empty.next().unwrap_err();
        assert!(matches!(err, Error::NothingToRepeat { worker: 1, len_worker: 0 }), "{err}");
    }

    #[test]
    fn invalid_repetitions_are_refused() {
        for bad in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
            assert!(Repeat::times(leaf_stage(3), bad, 0).is_err());
        }
    }
}
