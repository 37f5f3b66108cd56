//! The combining stages of a metadataset: [`Blend`] (children sampled by weight, the reference's
//! `BlendDataset`) and [`Concat`] (children one after the other, its `ConcatDataset`), and the
//! pipelines of datasets built separately combined by them ([`combine_pipelines`], and
//! [`mix_batch_pipelines`]: blended, then grouped by a mixing hook).
//!
//! Both only look at their items' restore keys: an item that came from child `i` has
//! `("BlendDataset", i)` (or `("ConcatDataset", i)`) prepended, as the reference prepends it.

use std::sync::Arc;

use energon_dist::{WorkerConfig, WorkerRng};

use crate::{
    batch::BatchStage,
    builder::BoxStage,
    context::{ItemCounter, SampleContext, StageEnv, WorkerInfo},
    epoch::WorkerTop,
    error::{Error, Result},
    hook::{HookResult, Outputs},
    policy::{ErrorPolicy, FailureStats},
    restore_key::KeyPart,
    stage::{Keyed, Stage, bad_key, split_key},
    state::{StageState, mismatch},
};

/// The reference's class name of a blend, the first element of its restore-key prefix.
pub(crate) const BLEND: &str = "BlendDataset";
/// The reference's class name of a concatenation.
pub(crate) const CONCAT: &str = "ConcatDataset";

/// Samples its children by weight (the reference's `BlendDataset`).
///
/// A pass starts with float32 weights, 0 for a child without samples on this worker. Each step
/// draws `choice_idx` over all the weights, zeros included (one draw per step even when a single
/// child is left), and pulls the drawn child: if the child's pass is over, its weight becomes 0
/// and the draw is spent without yielding; the end of a child is only discovered when it is
/// drawn. When every child is exhausted the pass ends (`None`) and the flags are cleared; the
/// next pass pulls the children again. The stream is never reset between passes.
pub struct Blend<S> {
    children: Vec<S>,
    weights: Vec<f32>,
    rng: WorkerRng,
    exhausted: Vec<bool>,
    /// The weights of the pass under way (`None` between passes).
    active: Option<Vec<f32>>,
}

impl<S: Stage> Blend<S> {
    /// A blend of `children` with `weights` (one per child, finite and positive), drawing from
    /// `rng` (a stream of its own, seeded with the worker seed).
    ///
    /// Fails for mismatched lengths, a weight that is not positive, or children that all have no
    /// samples on this worker.
    pub fn new(children: Vec<S>, weights: Vec<f32>, rng: WorkerRng) -> Result<Self> {
        if children.len() != weights.len() || children.is_empty() {
            return Err(Error::InvalidSetting {
                setting: "blend weights",
                value: format!("{} weights for {} children", weights.len(), children.len()),
                reason: "needs one weight for each child, and at least one child",
            });
        }
        // COMPAT(energon 7.4.1): blend_dataset.py:BlendDataset.__iter__ asserts every weight > 0.
        if let Some(w) = weights.iter().find(|w| !(w.is_finite() && **w > 0.0)) {
            return Err(Error::InvalidSetting {
                setting: "blend weights",
                value: w.to_string(),
                reason: "every weight must be positive and finite",
            });
        }
        if !children.iter().any(Stage::has_samples) {
            return Err(Error::InvalidSetting {
                setting: "blend",
                value: format!("{} children", children.len()),
                reason: "no child has samples on this worker",
            });
        }
        let exhausted = vec![false; children.len()];
        Ok(Blend { children, weights, rng, exhausted, active: None })
    }

    /// The float32 weights, one per child.
    pub fn weights(&self) -> &[f32] {
        &self.weights
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

impl<S> std::fmt::Debug for Blend<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blend")
            .field("weights", &self.weights)
            .field("exhausted", &self.exhausted)
            .finish_non_exhaustive()
    }
}

impl<T, S: Stage<Item = Keyed<T>>> Stage for Blend<S> {
    type Item = Keyed<T>;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        let mut weights = match self.active.take() {
            Some(weights) => weights,
            None => {
                // Every child exhausted: the last pass ended (the flags stay set until the next
                // pass begins, so a saved state tells an ended pass from one not begun).
                if self.exhausted.iter().all(|&e| e) {
                    self.exhausted.fill(false);
                }
                self.start_pass()
            }
        };
        loop {
            if self.exhausted.iter().all(|&e| e) {
                // Only children without samples on this worker.
                return Ok(None);
            }
            let i = self.rng.choice_idx(&weights)?;
            match self.children[i].next() {
                Ok(Some(mut item)) => {
                    self.active = Some(weights);
                    item.restore_key.prepend(BLEND, i as u64);
                    return Ok(Some(item));
                }
                Ok(None) => {
                    weights[i] = 0.0;
                    self.exhausted[i] = true;
                    if self.exhausted.iter().all(|&e| e) {
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
        self.children.iter().map(Stage::len_worker).sum()
    }

    fn has_samples(&self) -> bool {
        self.children.iter().any(Stage::has_samples)
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Blend {
            exhausted: self.exhausted.clone(),
            rng: self.rng.state(),
            children: self.children.iter().map(Stage::state).collect::<Result<_>>()?,
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Blend { exhausted, rng, children } = state else {
            return Err(mismatch("blend", state));
        };
        if exhausted.len() != self.children.len() || children.len() != self.children.len() {
            return Err(Error::BadState {
                reason: format!(
                    "a blend of {} children cannot take the state of one of {}",
                    self.children.len(),
                    children.len()
                ),
            });
        }
        for (child, state) in self.children.iter_mut().zip(children) {
            child.restore(state)?;
        }
        self.exhausted.clone_from(exhausted);
        self.rng = WorkerRng::from_state(rng.clone());
        // As the reference does on restore, the pass continues with fresh weights in which the
        // exhausted children have 0.
        self.active = None;
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<T>> {
        restore_child(&mut self.children, BLEND, key)
    }
}

/// The per-worker pipelines of datasets built separately (each as a whole, batched or not: the
/// reference's `BlendDataset` or `ConcatDataset` around datasets each made by
/// `get_train_dataset`), combined worker by worker: blended by `weights` with the worker's
/// blend stream (`Some`), or one after the other (`None`). Each combined pipeline is the
/// outermost stage of its worker (it counts the worker's items); `children[c][w]` is child `c`'s
/// pipeline of local worker `w`.
pub fn combine_pipelines<T: Send + 'static>(
    children: Vec<Vec<BoxStage<T>>>,
    weights: Option<&[f32]>,
    worker_config: &WorkerConfig,
) -> Result<Vec<BoxStage<T>>> {
    by_worker(children, worker_config)?
        .into_iter()
        .enumerate()
        .map(|(worker, pipelines)| {
            let combined = combined(pipelines, weights, worker_config, worker)?;
            Ok(Box::new(WorkerTop::new(combined, ItemCounter::default())) as BoxStage<T>)
        })
        .collect()
}

/// The hook that mixes consecutive items of blended pipelines into one (the reference's
/// `batch_mix_fn` of `MixBatchDataset`); it gets the call's context as a `batch` hook does.
pub type MixFn<T, B> =
    Arc<dyn Fn(Vec<Keyed<T>>, &SampleContext) -> HookResult<Outputs<B>> + Send + Sync>;

/// How [`mix_batch_pipelines`] groups the blended items.
pub struct MixBatch<T, B> {
    /// Items per call of `mix` (at least 1).
    pub batch_size: usize,
    /// Makes one item (or, as a generator, several) of each group.
    pub mix: MixFn<T, B>,
    /// The error policy of `mix` (a failing call drops its group).
    pub policy: ErrorPolicy,
    /// Where the failures of `mix` are counted.
    pub stats: FailureStats,
}

impl<T, B> std::fmt::Debug for MixBatch<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixBatch")
            .field("batch_size", &self.batch_size)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// The per-worker pipelines of datasets built separately, blended by `weights` as
/// [`combine_pipelines`] blends them, and then grouped `batch_size` at a time by `mix` (the
/// reference's `MixBatchDataset`: a `BlendDataset` under a `BatchDataset`). A group's key is
/// `("BatchDataset", index, *keys of its blended items)`; the batch stage is the worker's
/// outermost stage, so `mix` sees the worker's item index (`current_batch_index`).
pub fn mix_batch_pipelines<T: Send + 'static, B: Send + 'static>(
    children: Vec<Vec<BoxStage<T>>>,
    weights: &[f32],
    mix: MixBatch<T, B>,
    worker_config: &WorkerConfig,
) -> Result<Vec<BoxStage<B>>> {
    by_worker(children, worker_config)?
        .into_iter()
        .enumerate()
        .map(|(worker, pipelines)| {
            let blended = combined(pipelines, Some(weights), worker_config, worker)?;
            let env = StageEnv {
                worker: WorkerInfo::new(worker_config, worker)?,
                items: ItemCounter::default(),
                stats: mix.stats.clone(),
                policy: mix.policy.clone(),
            };
            let f = Arc::clone(&mix.mix);
            let batches = BatchStage::new(blended, mix.batch_size, false, f, env.clone())?;
            Ok(Box::new(WorkerTop::new(Box::new(batches) as BoxStage<B>, env.items)) as BoxStage<B>)
        })
        .collect()
}

/// `children[c][w]` regrouped by worker: `res[w][c]`.
fn by_worker<T>(
    children: Vec<Vec<BoxStage<T>>>,
    worker_config: &WorkerConfig,
) -> Result<Vec<Vec<BoxStage<T>>>> {
    let n_workers = worker_config.n_local_workers();
    let mut per_worker: Vec<Vec<BoxStage<T>>> = (0..n_workers).map(|_| Vec::new()).collect();
    for child in children {
        if child.len() != n_workers {
            return Err(Error::InvalidSetting {
                setting: "worker_config",
                value: format!("{} pipelines for {n_workers} workers", child.len()),
                reason: "every combined dataset needs the same worker configuration",
            });
        }
        for (worker, pipeline) in child.into_iter().enumerate() {
            per_worker[worker].push(pipeline);
        }
    }
    Ok(per_worker)
}

/// One worker's pipelines blended by `weights` with its blend stream, or concatenated.
fn combined<T: Send + 'static>(
    pipelines: Vec<BoxStage<T>>,
    weights: Option<&[f32]>,
    worker_config: &WorkerConfig,
    worker: usize,
) -> Result<BoxStage<T>> {
    Ok(match weights {
        Some(weights) => {
            let rng = worker_config.worker_rng(worker)?;
            Box::new(Blend::new(pipelines, weights.to_vec(), rng)?)
        }
        None => Box::new(Concat::new(pipelines)?),
    })
}

/// Re-creates an item of child `i` from a key `(name, i, rest...)`.
fn restore_child<T, S: Stage<Item = Keyed<T>>>(
    children: &mut [S],
    name: &'static str,
    key: &[KeyPart],
) -> Result<Keyed<T>> {
    let found = split_key(name, key).and_then(|(child, rest)| {
        Some((children.get_mut(usize::try_from(child).ok()?)?, child, rest))
    });
    let Some((stage, child, rest)) = found else { return Err(bad_key(name, key)) };
    let mut item = stage.restore_item(rest)?;
    item.restore_key.prepend(name, child);
    Ok(item)
}

/// Yields the pass of each child in order, then ends its own pass (the reference's
/// `ConcatDataset`, for validation and test splits).
pub struct Concat<S> {
    children: Vec<S>,
    current: usize,
}

impl<S: Stage> Concat<S> {
    /// The concatenation of `children` (at least one).
    pub fn new(children: Vec<S>) -> Result<Self> {
        if children.is_empty() {
            return Err(Error::InvalidSetting {
                setting: "concat",
                value: "0 children".to_owned(),
                reason: "needs at least one child",
            });
        }
        Ok(Concat { children, current: 0 })
    }
}

impl<S> std::fmt::Debug for Concat<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Concat")
            .field("children", &self.children.len())
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl<T, S: Stage<Item = Keyed<T>>> Stage for Concat<S> {
    type Item = Keyed<T>;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        while self.current < self.children.len() {
            if let Some(mut item) = self.children[self.current].next()? {
                item.restore_key.prepend(CONCAT, self.current as u64);
                return Ok(Some(item));
            }
            self.current += 1;
        }
        self.current = 0;
        Ok(None)
    }

    fn len_worker(&self) -> u64 {
        self.children.iter().map(Stage::len_worker).sum()
    }

    fn has_samples(&self) -> bool {
        self.children.iter().any(Stage::has_samples)
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Concat {
            current: self.current as u64,
            children: self.children.iter().map(Stage::state).collect::<Result<_>>()?,
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Concat { current, children } = state else {
            return Err(mismatch("concatenation", state));
        };
        let n = self.children.len();
        let current = usize::try_from(*current).ok().filter(|&c| c < n);
        let (Some(current), true) = (current, children.len() == n) else {
            return Err(Error::BadState {
                reason: format!(
                    "a concatenation of {n} children cannot take the state of one of {} at \
                     child {current:?}",
                    children.len()
                ),
            });
        };
        for (child, state) in self.children.iter_mut().zip(children) {
            child.restore(state)?;
        }
        self.current = current;
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<T>> {
        restore_child(&mut self.children, CONCAT, key)
    }
}

#[cfg(test)]
mod tests {
    use energon_dist::{WorkerConfig, shard_workers};
    use energon_reader::leaf::{LeafConfig, LeafIter};
    use proptest::prelude::*;

    use super::*;
    use crate::{BoxStage, LeafSource, Repeat};

    /// A training leaf of `n` samples in shards of `shard` on a single worker, with its own
    /// stream.
    fn leaf(n: u64, shard: u64, seed_offset: i64) -> BoxStage<u64> {
        let cfg = WorkerConfig::new(0, 1, 0).unwrap().with_seed_offset(seed_offset);
        let counts: Vec<u64> = (0..n.div_ceil(shard)).map(|i| shard.min(n - i * shard)).collect();
        let slices = shard_workers(&counts, None, &cfg, 0, None).unwrap().remove(0);
        let iter = LeafIter::new(slices, LeafConfig::TRAIN, cfg.worker_rng(0).unwrap()).unwrap();
        Box::new(LeafSource::new(iter, |i| Ok(Some(i))))
    }

    fn rng() -> WorkerRng {
        WorkerConfig::new(0, 1, 0).unwrap().worker_rng(0).unwrap()
    }

    /// The items of the next `n_passes` passes.
    fn passes<S: Stage>(stage: &mut S, n_passes: usize) -> Vec<Vec<S::Item>> {
        (0..n_passes)
            .map(|_| {
                let mut pass = Vec::new();
                while let Some(item) = stage.next().unwrap() {
                    pass.push(item);
                }
                pass
            })
            .collect()
    }

    fn counts<T>(passes: &[Vec<T>]) -> Vec<usize> {
        passes.iter().map(Vec::len).collect()
    }

    /// The child of the outermost combining stage an item came from.
    fn child(item: &Keyed<u64>) -> usize {
        match item.restore_key.parts() {
            [_, KeyPart::Index(i), ..] => *i as usize,
            parts => panic!("{parts:?}"),
        }
    }

    #[test]
    fn a_blend_draws_once_per_step_and_discovers_ends_when_drawn() {
        let mut blend =
            Blend::new(vec![leaf(1, 1, 0), leaf(3, 3, 0)], vec![1.0, 1.0], rng()).unwrap();
        let pass = passes(&mut blend, 1).remove(0);
        assert_eq!(pass.len(), 4);
        assert!(pass.iter().all(|item| item.restore_key.starts_with(BLEND)));
        // 4 items and 2 spent draws that found a child's end: 6 draws of one word each.
        let mut expected = rng();
        for _ in 0..6 {
            expected.next_u32();
        }
        let StageState::Blend { exhausted, rng: state, .. } = blend.state().unwrap() else {
            panic!()
        };
        assert_eq!(state, expected.state());
        assert_eq!(exhausted, [true, true], "an ended pass keeps its flags until the next");
        // The next pass starts the children again (each leaf its next epoch).
        assert_eq!(counts(&passes(&mut blend, 2)), [4, 4]);
    }

    #[test]
    fn a_blend_gives_children_without_samples_weight_zero() {
        let children = vec![leaf(0, 1, 0), leaf(5, 5, 0)];
        let mut blend = Blend::new(children, vec![3.0, 1.0], rng()).unwrap();
        let pass = passes(&mut blend, 1).remove(0);
        assert_eq!(pass.iter().map(child).collect::<Vec<_>>(), [1; 5]);

        let two = || vec![leaf(2, 2, 0), leaf(2, 2, 0)];
        assert!(Blend::new(two(), vec![1.0, 0.0], rng()).is_err());
        assert!(Blend::new(two(), vec![1.0], rng()).is_err());
        assert!(Blend::new(two(), vec![1.0, f32::INFINITY], rng()).is_err());
        assert!(Blend::new(vec![leaf(0, 1, 0)], vec![1.0], rng()).is_err());
    }

    #[test]
    fn concat_reads_children_in_order() {
        let mut concat = Concat::new(vec![leaf(3, 3, 0), leaf(2, 2, 0)]).unwrap();
        let got = passes(&mut concat, 2);
        for pass in &got {
            assert_eq!(pass.iter().map(child).collect::<Vec<_>>(), [0, 0, 0, 1, 1]);
        }
        assert_eq!(
            got[0][3].restore_key.to_string(),
            format!("('ConcatDataset', 1, 'Webdataset', {})", got[0][3].value)
        );
        assert!(Concat::<BoxStage<u64>>::new(Vec::new()).is_err());
    }

    #[test]
    fn a_fraction_cut_to_nothing_still_has_samples_and_is_drawn() {
        // floor(5 * 0.1) = 0: the repetition yields nothing, but the leaf has samples, so the
        // blend gives it its weight and spends one draw per pass to find it exhausted (as the
        // reference).
        let tiny = Repeat::times(leaf(5, 5, 0), 0.1, 0).unwrap();
        assert_eq!((tiny.len_worker(), tiny.has_samples()), (0, true));
        let children: Vec<BoxStage<u64>> = vec![Box::new(tiny), leaf(3, 3, 0)];
        let mut blend = Blend::new(children, vec![1.0, 1.0], rng()).unwrap();
        assert_eq!(counts(&passes(&mut blend, 1)), [3]);
        let mut expected = rng();
        for _ in 0..5 {
            expected.next_u32();
        }
        let StageState::Blend { rng: state, .. } = blend.state().unwrap() else { panic!() };
        assert_eq!(state, expected.state());
    }

    /// An epochized blend of three leaves (one fractional), repeated forever.
    fn epochized() -> Repeat<BoxStage<u64>> {
        let children: Vec<BoxStage<u64>> = vec![
            Box::new(Repeat::times(leaf(23, 5, 0), 0.7, 0).unwrap()),
            leaf(11, 4, 1),
            Box::new(Repeat::times(leaf(7, 7, 2), 2.0, 0).unwrap()),
        ];
        let blend = Blend::new(children, vec![16.1, 11.0, 14.0], rng()).unwrap();
        Repeat::forever(Box::new(blend), 0)
    }

    fn take<S: Stage>(stage: &mut S, n: usize) -> Vec<S::Item> {
        (0..n).map(|_| stage.next().unwrap().unwrap()).collect()
    }

    #[test]
    fn mismatched_states_are_refused() {
        let mut stage = epochized();
        let leaf_state = StageState::Worker { index: 0, inner: Box::new(stage.state().unwrap()) };
        assert!(stage.restore(&leaf_state).is_err());
        let StageState::Repeat { repetition, index, dealt, inner } = stage.state().unwrap() else {
            panic!()
        };
        let StageState::Blend { exhausted, rng, mut children } = *inner else { panic!() };
        children.pop();
        let blend = StageState::Blend { exhausted, rng, children };
        let state = StageState::Repeat { repetition, index, dealt, inner: Box::new(blend) };
        let err = stage.restore(&state).unwrap_err();
        assert!(err.to_string().contains("blend of 3 children"), "{err}");
        let mut concat = Concat::new(vec![leaf(3, 3, 0), leaf(2, 2, 0)]).unwrap();
        let state = concat.state().unwrap();
        let StageState::Concat { children, .. } = state else { panic!() };
        assert!(concat.restore(&StageState::Concat { current: 2, children }).is_err());
    }

    #[test]
    fn buffered_items_are_recreated_through_the_combiners() {
        let mut stage = epochized();
        for item in take(&mut stage, 50) {
            assert_eq!(stage.restore_item(item.restore_key.parts()).unwrap(), item);
        }
        let bad = crate::RestoreKey::from_parts(vec![
            KeyPart::Name(BLEND.into()),
            KeyPart::Index(3),
            KeyPart::Name("Webdataset".into()),
            KeyPart::Index(0),
        ]);
        assert!(stage.restore_item(bad.parts()).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Saving at any step, restoring into fresh stages (through JSON, as a checkpoint may)
        /// and continuing gives the items of an uninterrupted run.
        #[test]
        fn restoring_saved_stages_continues_exactly(cut in 0usize..140) {
            let mut uninterrupted = epochized();
            let reference = take(&mut uninterrupted, cut + 60);
            let mut first = epochized();
            let before = take(&mut first, cut);
            let saved = serde_json::to_string(&first.state().unwrap()).unwrap();
            let mut resumed = epochized();
            resumed.restore(&serde_json::from_str(&saved).unwrap()).unwrap();
            let after = take(&mut resumed, 60);
            prop_assert_eq!(&reference[..cut], &before[..]);
            prop_assert_eq!(&reference[cut..], &after[..]);
        }

        /// Weighted blend frequencies converge to the normalized float32 weights.
        #[test]
        fn blend_frequencies_converge_to_the_weights(
            weights in prop::collection::vec(0.05f32..10.0, 2..5),
            seed in 0i64..1000,
        ) {
            let cfg = WorkerConfig::new(0, 1, 0).unwrap().with_seed_offset(seed);
            let children: Vec<BoxStage<u64>> = (0..weights.len())
                .map(|i| -> BoxStage<u64> {
                    Box::new(Repeat::forever(leaf(7 + i as u64, 3, seed), 0))
                })
                .collect();
            let mut blend =
                Blend::new(children, weights.clone(), cfg.worker_rng(0).unwrap()).unwrap();
            let n = 40_000;
            let mut seen = vec![0u64; weights.len()];
            for _ in 0..n {
                seen[child(&blend.next().unwrap().unwrap())] += 1;
            }
            let total: f64 = weights.iter().map(|&w| f64::from(w)).sum();
            for (i, &w) in weights.iter().enumerate() {
                let expected = f64::from(w) / total;
                let got = seen[i] as f64 / n as f64;
                // Five standard deviations of a binomial proportion.
                let tolerance = 5.0 * (expected * (1.0 - expected) / n as f64).sqrt() + 1e-3;
                prop_assert!((got - expected).abs() < tolerance, "child {i}: {got} vs {expected}");
            }
        }
    }
}
