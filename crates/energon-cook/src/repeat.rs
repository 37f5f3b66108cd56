//! The repeat stage: iterates its inner stage several times, or forever (the reference's
//! `RepeatDataset`), as a stage of this crate over energon-mix's [`energon_mix::Repeat`], the one
//! implementation of the repetition state machine.

use energon_mix::{Source, state::RepeatState};

use crate::{
    builder::BoxStage,
    error::{Error, Result},
    mix::MixLeaf,
    restore_key::KeyPart,
    stage::{Keyed, Stage},
    state::{StageState, mismatch},
};

/// Repeats the passes of the inner stage: forever (training), or `r` times, where a fractional
/// `r` ends with a partial pass of `floor(len_worker * frac(r))` items.
///
/// COMPAT(energon 7.4.1): wrappers/repeat_dataset.py:RepeatDataset; see
/// [`energon_mix::Repeat`] for how a partial pass continues the abandoned inner pass.
pub struct Repeat<T> {
    inner: energon_mix::Repeat<MixLeaf<T>>,
    worker: usize,
}

impl<T> Repeat<T> {
    /// Repeats `inner` forever.
    ///
    /// `worker` (the local worker id) names the worker in errors. If `inner` has no samples, or
    /// two consecutive passes of it yield nothing, [`Stage::next`] fails instead of looping
    /// forever.
    pub fn forever(inner: BoxStage<T>, worker: usize) -> Self {
        Repeat { inner: energon_mix::Repeat::forever(MixLeaf::new(inner)), worker }
    }

    /// Repeats `inner` `repeats` times (finite and above 0; the fraction makes a partial last
    /// pass).
    pub fn times(inner: BoxStage<T>, repeats: f64, worker: usize) -> Result<Self> {
        Ok(Repeat { inner: energon_mix::Repeat::times(MixLeaf::new(inner), repeats)?, worker })
    }
}

impl<T> std::fmt::Debug for Repeat<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repeat")
            .field("repeats", &self.inner.repeats())
            .field("state", &self.inner.state())
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl<T> Stage for Repeat<T> {
    type Item = Keyed<T>;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        self.inner.next().map_err(|err| match err {
            Error::Mix(energon_mix::Error::NothingToRepeat { len_worker }) => {
                Error::NothingToRepeat { worker: self.worker, len_worker }
            }
            err => err,
        })
    }

    fn len_worker(&self) -> u64 {
        Source::len_worker(&self.inner)
    }

    fn state(&self) -> Result<StageState> {
        let RepeatState { repetition, index } = self.inner.state();
        Ok(StageState::Repeat {
            repetition,
            index,
            inner: Box::new(self.inner.inner().stage().state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Repeat { repetition, index, inner } = state else {
            return Err(mismatch("repetition", state));
        };
        self.inner.inner_mut().stage_mut().restore(inner)?;
        self.inner.restore(&RepeatState { repetition: *repetition, index: *index });
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<T>> {
        self.inner.inner_mut().stage_mut().restore_item(key)
    }
}

#[cfg(test)]
mod tests {
    use energon_dist::{WorkerConfig, shard_workers};
    use energon_reader::leaf::{LeafConfig, LeafIter};

    use super::*;
    use crate::LeafSource;

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
    }

    #[test]
    fn invalid_repetitions_are_refused() {
        for bad in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
            assert!(Repeat::times(leaf_stage(3), bad, 0).is_err());
        }
    }
}
