//! [`Blend`]: children sampled by weight, one draw per step.

use energon_dist::WorkerRng;

use super::{Combiner, Source, Tag};
use crate::{error::Error, state::BlendState};

/// Samples its children by weight (the reference's `BlendDataset`).
///
/// A pass starts with float32 weights, 0 for a child without samples on this worker. Each step
/// draws `choice_idx` over all the weights, zeros included (one draw per step even when a single
/// child is left), and pulls the drawn child: if the child's pass is over, its weight becomes 0
/// and the draw is spent without yielding; the end of a child is only discovered when it is
/// drawn. When every child is exhausted the pass ends (`None`) and the flags are cleared; the
/// next pass pulls the children again. The stream is never reset between passes.
#[derive(Debug, Clone)]
pub struct Blend<S> {
    children: Vec<S>,
    weights: Vec<f32>,
    rng: WorkerRng,
    exhausted: Vec<bool>,
    /// The weights of the pass under way (`None` between passes).
    active: Option<Vec<f32>>,
}

impl<S: Source> Blend<S>
where
    S::Item: Tag,
{
    /// A blend of `children` with `weights` (one per child, finite and positive), drawing from
    /// `rng` (a stream of its own, seeded with the worker seed).
    ///
    /// Fails for mismatched lengths, a weight that is not positive, or children that all have no
    /// samples on this worker.
    pub fn new(children: Vec<S>, weights: Vec<f32>, rng: WorkerRng) -> Result<Self, Error> {
        if children.len() != weights.len() || children.is_empty() {
            return Err(Error::InvalidOption {
                option: "blend weights",
                value: format!("{} weights", weights.len()),
                reason: format!("need one weight for each of the {} children", children.len()),
            });
        }
        // COMPAT(energon 7.4.1): blend_dataset.py:BlendDataset.__iter__ asserts every weight > 0.
        if let Some(w) = weights.iter().find(|w| !(w.is_finite() && **w > 0.0)) {
            return Err(Error::InvalidOption {
                option: "blend weights",
                value: w.to_string(),
                reason: "every weight must be positive and finite".to_owned(),
            });
        }
        if !children.iter().any(Source::has_samples) {
            return Err(Error::InvalidOption {
                option: "blend",
                value: format!("{} children", children.len()),
                reason: "no child has samples on this worker".to_owned(),
            });
        }
        let exhausted = vec![false; children.len()];
        Ok(Blend { children, weights, rng, exhausted, active: None })
    }

    /// The children.
    pub fn children(&self) -> &[S] {
        &self.children
    }

    /// The children, mutably (to save or restore their states).
    pub fn children_mut(&mut self) -> &mut [S] {
        &mut self.children
    }

    /// The float32 weights, one per child.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// The savable progress (the reference's `exhausted` and `_worker_rng`).
    pub fn state(&self) -> BlendState {
        BlendState { exhausted: self.exhausted.clone(), rng: self.rng.state() }
    }

    /// Continues from a saved progress; the children's states are restored separately.
    pub fn restore(&mut self, state: &BlendState) -> Result<(), Error> {
        if state.exhausted.len() != self.children.len() {
            return Err(Error::BadState {
                reason: format!(
                    "a blend of {} children cannot take the state of {}",
                    self.children.len(),
                    state.exhausted.len()
                ),
            });
        }
        self.exhausted.clone_from(&state.exhausted);
        self.rng = WorkerRng::from_state(state.rng.clone());
        // As the reference does on restore, the pass continues with fresh weights in which the
        // exhausted children have 0.
        self.active = None;
        Ok(())
    }

    /// The weights at the start of a pass: 0 for children without samples (marked exhausted)
    /// and for children already exhausted (a restored pass).
    fn start_pass(&mut self) -> Vec<f32> {
        let mut weights = self.weights.clone();
        for (i, child) in self.children.iter().enumerate() {
            if !child.has_samples() {
                self.exhausted[i] = true;
            }
            if self.exhausted[i] {
                weights[i] = 0.0;
            }
        }
        weights
    }
}

impl<S: Source> Source for Blend<S>
where
    S::Item: Tag,
{
    type Item = S::Item;
    type Error = S::Error;

    fn next(&mut self) -> Result<Option<S::Item>, S::Error> {
        let mut weights = match self.active.take() {
            Some(weights) => weights,
            None => self.start_pass(),
        };
        loop {
            if self.exhausted.iter().all(|&e| e) {
                // Only reachable when a restored pass had every child exhausted already.
                self.exhausted.fill(false);
                return Ok(None);
            }
            let i = self.rng.choice_idx(&weights).map_err(Error::from)?;
            match self.children[i].next() {
                Ok(Some(item)) => {
                    self.active = Some(weights);
                    return Ok(Some(item.tag(Combiner::Blend, i)));
                }
                Ok(None) => {
                    weights[i] = 0.0;
                    self.exhausted[i] = true;
                    if self.exhausted.iter().all(|&e| e) {
                        self.exhausted.fill(false);
                        return Ok(None);
                    }
                }
                Err(err) => {
                    self.active = Some(weights);
                    return Err(err);
                }
            }
        }
    }

    fn len_worker(&self) -> u64 {
        self.children.iter().map(Source::len_worker).sum()
    }

    fn has_samples(&self) -> bool {
        self.children.iter().any(Source::has_samples)
    }
}
