//! Runtime tests: the reference's repetition quirks, blend draws, state round trips, and blend
//! frequencies (property test).

use energon_dist::{WorkerConfig, shard_workers};
use energon_reader::leaf::{LeafConfig, LeafIter};
use proptest::prelude::*;

use super::*;
use crate::{
    source::{MixItem, ReadLeaf},
    state::MixState,
};

type IndexLeaf = ReadLeaf<fn(u64) -> crate::Result<Option<u64>>>;

fn keep(index: u64) -> crate::Result<Option<u64>> {
    Ok(Some(index))
}

/// A training leaf of `n` samples in shards of `shard` on a single worker, with its own stream.
fn leaf(id: usize, n: u64, shard: u64, seed_offset: i64) -> IndexLeaf {
    let cfg = WorkerConfig::new(0, 1, 0).unwrap().with_seed_offset(seed_offset);
    let counts: Vec<u64> = (0..n.div_ceil(shard)).map(|i| shard.min(n - i * shard)).collect();
    let slices = shard_workers(&counts, None, &cfg, 0, None).unwrap().remove(0);
    let iter = LeafIter::new(slices, LeafConfig::TRAIN, cfg.worker_rng(0).unwrap()).unwrap();
    ReadLeaf::new(id, iter, keep as fn(u64) -> crate::Result<Option<u64>>)
}

/// The items of the next `n_passes` passes.
fn passes<S: Source>(source: &mut S, n_passes: usize) -> Vec<Vec<S::Item>>
where
    S::Error: std::fmt::Debug,
{
    (0..n_passes)
        .map(|_| {
            let mut pass = Vec::new();
            while let Some(item) = source.next().unwrap() {
                pass.push(item);
            }
            pass
        })
        .collect()
}

fn counts<T>(passes: &[Vec<T>]) -> Vec<usize> {
    passes.iter().map(Vec::len).collect()
}

#[test]
fn fractional_repetitions_resume_the_interrupted_epoch() {
    // Spec 3.4, verified against the reference over 7 blend passes (one worker).
    for (repeats, n, expected) in [
        (0.5, 80, vec![40, 40, 0, 40, 40, 0, 40]),
        (0.7, 50, vec![35, 15, 35, 15, 35, 15, 35]),
        (0.3, 100, vec![30, 30, 30, 10, 30, 30, 30]),
        (2.25, 40, vec![90, 80, 80, 80, 80, 80, 80]),
        (2.0, 40, vec![80; 7]),
    ] {
        let mut repeat = Repeat::times(leaf(0, n, 10, 0), repeats).unwrap();
        let got = passes(&mut repeat, 7);
        assert_eq!(counts(&got), expected, "r = {repeats} on {n}");
        assert_eq!(repeat.len_worker(), (n as f64 * repeats) as u64);
    }
    // The two partial passes of r = 0.5 together read every sample once.
    let mut repeat = Repeat::times(leaf(0, 80, 10, 0), 0.5).unwrap();
    let mut first_two: Vec<u64> =
        passes(&mut repeat, 2).concat().into_iter().map(|item| item.value).collect();
    first_two.sort_unstable();
    assert_eq!(first_two, (0..80).collect::<Vec<_>>());
}

#[test]
fn infinite_repetition_refuses_an_empty_worker() {
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    let slices = shard_workers(&[0], None, &cfg, 0, None).unwrap().remove(0);
    let iter = LeafIter::new(slices, LeafConfig::TRAIN, cfg.worker_rng(0).unwrap()).unwrap();
    let mut repeat = Repeat::forever(ReadLeaf::new(0, iter, keep as fn(u64) -> _));
    assert!(matches!(repeat.next(), Err(crate::Error::NothingToRepeat { len_worker: 0 })));
    assert!(Repeat::times(leaf(0, 5, 5, 0), 0.0).is_err());
    assert!(Repeat::times(leaf(0, 5, 5, 0), f64::NAN).is_err());
}

#[test]
fn a_blend_draws_once_per_step_and_discovers_ends_when_drawn() {
    let children = vec![Mix::Leaf(leaf(0, 1, 1, 0)), Mix::Leaf(leaf(1, 3, 3, 0))];
    let rng = WorkerConfig::new(0, 1, 0).unwrap().worker_rng(0).unwrap();
    let mut blend = Blend::new(children, vec![1.0, 1.0], rng.clone()).unwrap();
    let pass = passes(&mut blend, 1).remove(0);
    assert_eq!(pass.len(), 4);
    assert!(pass.iter().all(|item| item.route == [(Combiner::Blend, item.leaf)]));
    // 4 items and 2 spent draws that found a child's end: 6 draws of one word each.
    let mut expected = rng;
    for _ in 0..6 {
        expected.next_u32();
    }
    assert_eq!(blend.state().rng, expected.state());
    assert_eq!(blend.state().exhausted, [false, false], "flags are cleared after a pass");
    // The next pass starts the children again (each leaf its next epoch).
    assert_eq!(counts(&passes(&mut blend, 2)), [4, 4]);
}

#[test]
fn a_blend_gives_children_without_samples_weight_zero() {
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    let empty = shard_workers(&[0], None, &cfg, 0, None).unwrap().remove(0);
    let iter = LeafIter::new(empty, LeafConfig::TRAIN, cfg.worker_rng(0).unwrap()).unwrap();
    let children =
        vec![Mix::Leaf(ReadLeaf::new(0, iter, keep as fn(u64) -> _)), Mix::Leaf(leaf(1, 5, 5, 0))];
    let mut blend = Blend::new(children, vec![3.0, 1.0], cfg.worker_rng(0).unwrap()).unwrap();
    let pass = passes(&mut blend, 1).remove(0);
    assert_eq!(pass.iter().map(|i| i.leaf).collect::<Vec<_>>(), [1; 5]);

    let rng = || cfg.worker_rng(0).unwrap();
    let two = || vec![Mix::Leaf(leaf(0, 2, 2, 0)), Mix::Leaf(leaf(1, 2, 2, 0))];
    assert!(Blend::new(two(), vec![1.0, 0.0], rng()).is_err());
    assert!(Blend::new(two(), vec![1.0], rng()).is_err());
    assert!(Blend::new(two(), vec![1.0, f32::INFINITY], rng()).is_err());
}

#[test]
fn concat_reads_children_in_order() {
    let children = vec![Mix::Leaf(leaf(0, 3, 3, 0)), Mix::Leaf(leaf(1, 2, 2, 0))];
    let mut concat = Concat::new(children).unwrap();
    let got = passes(&mut concat, 2);
    for pass in &got {
        let leaves: Vec<usize> = pass.iter().map(|i| i.leaf).collect();
        assert_eq!(leaves, [0, 0, 0, 1, 1]);
        assert!(pass.iter().all(|i| i.route == [(Combiner::Concat, i.leaf)]));
    }
    assert!(Concat::<Mix<IndexLeaf>>::new(Vec::new()).is_err());
    assert_eq!(
        got[0][3].restore_key(),
        format!("('ConcatDataset', 1, 'Webdataset', {})", got[0][3].index)
    );
}

/// An epochized blend of three leaves (one fractional), repeated forever.
fn epochized() -> Mix<IndexLeaf> {
    let rng = WorkerConfig::new(0, 1, 0).unwrap().worker_rng(0).unwrap();
    let children = vec![
        Mix::Repeat(Box::new(Repeat::times(Mix::Leaf(leaf(0, 23, 5, 0)), 0.7).unwrap())),
        Mix::Leaf(leaf(1, 11, 4, 1)),
        Mix::Repeat(Box::new(Repeat::times(Mix::Leaf(leaf(2, 7, 7, 2)), 2.0).unwrap())),
    ];
    let blend = Blend::new(children, vec![16.1, 11.0, 14.0], rng).unwrap();
    Mix::Repeat(Box::new(Repeat::forever(Mix::Blend(blend))))
}

/// Saves the tree and its leaves (through JSON, as a checkpoint would).
fn save(mix: &Mix<IndexLeaf>) -> (String, String) {
    let leaves: Vec<_> = mix.leaves().iter().map(|l| l.state()).collect();
    (serde_json::to_string(&mix.state()).unwrap(), serde_json::to_string(&leaves).unwrap())
}

fn restore(mix: &mut Mix<IndexLeaf>, saved: &(String, String)) {
    let state: MixState = serde_json::from_str(&saved.0).unwrap();
    let leaves: Vec<energon_reader::leaf::LeafState> = serde_json::from_str(&saved.1).unwrap();
    mix.restore(&state).unwrap();
    for (leaf, state) in mix.leaves_mut().into_iter().zip(leaves) {
        leaf.restore(state).unwrap();
    }
}

fn take(mix: &mut Mix<IndexLeaf>, n: usize) -> Vec<MixItem<u64>> {
    (0..n).map(|_| mix.next().unwrap().unwrap()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Saving at any step, restoring into a fresh tree and continuing gives the items of an
    /// uninterrupted run.
    #[test]
    fn restoring_a_saved_tree_continues_exactly(cut in 0usize..140) {
        let mut uninterrupted = epochized();
        let reference = take(&mut uninterrupted, cut + 60);
        let mut first = epochized();
        let before = take(&mut first, cut);
        let saved = save(&first);
        let mut resumed = epochized();
        restore(&mut resumed, &saved);
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
        let children: Vec<Mix<IndexLeaf>> = (0..weights.len())
            .map(|i| Mix::Repeat(Box::new(Repeat::forever(Mix::Leaf(leaf(i, 7 + i as u64, 3, seed))))))
            .collect();
        let mut blend = Blend::new(children, weights.clone(), cfg.worker_rng(0).unwrap()).unwrap();
        let n = 40_000;
        let mut seen = vec![0u64; weights.len()];
        for _ in 0..n {
            seen[blend.next().unwrap().unwrap().leaf] += 1;
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

#[test]
fn mismatched_states_are_refused() {
    let mut mix = epochized();
    assert!(mix.restore(&MixState::Leaf).is_err());
    let mut blend_state = match mix.state() {
        MixState::Repeat { inner, .. } => *inner,
        other => panic!("{other:?}"),
    };
    if let MixState::Blend { children, .. } = &mut blend_state {
        children.pop();
    }
    let state = MixState::Repeat {
        state: crate::state::RepeatState { repetition: 0, index: 0 },
        inner: Box::new(blend_state),
    };
    assert!(mix.restore(&state).is_err());
}

#[test]
fn a_fraction_cut_to_nothing_still_has_samples_and_is_drawn() {
    // floor(5 * 0.1) = 0: the repetition yields nothing, but the leaf has samples, so the blend
    // gives it its weight and spends one draw per pass to find it exhausted (as the reference).
    let tiny = Repeat::times(Mix::Leaf(leaf(0, 5, 5, 0)), 0.1).unwrap();
    assert_eq!((tiny.len_worker(), tiny.has_samples()), (0, true));
    let children = vec![Mix::Repeat(Box::new(tiny)), Mix::Leaf(leaf(1, 3, 3, 0))];
    let rng = WorkerConfig::new(0, 1, 0).unwrap().worker_rng(0).unwrap();
    let mut blend = Blend::new(children, vec![1.0, 1.0], rng.clone()).unwrap();
    assert_eq!(counts(&passes(&mut blend, 1)), [3]);
    let mut expected = rng;
    for _ in 0..5 {
        expected.next_u32();
    }
    assert_eq!(blend.state().rng, expected.state());
}
