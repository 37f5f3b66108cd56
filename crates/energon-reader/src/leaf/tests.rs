//! Tests of the leaf iteration: the reference's recorded orders, epoch and resume semantics, and
//! properties of the order.

use std::{fs, num::NonZeroUsize, path::PathBuf};

use energon_dist::{WorkerConfig, WorkerSlices, shard_workers, slice_workers};
use proptest::prelude::*;

use super::*;

fn expected_dir() -> PathBuf {
    energon_fixtures::ref_small_expected_dir()
}

/// The recorded keys of a fixture file; the fixture's keys are the global sample indices (the
/// WebDataset keys are zero-padded, the JSONL keys are line numbers).
fn expected_indices(name: &str) -> Vec<u64> {
    let text = fs::read_to_string(expected_dir().join(name)).unwrap();
    text.lines().map(|l| l.parse().unwrap()).collect()
}

fn leaf(slices: WorkerSlices, config: LeafConfig, cfg: &WorkerConfig, worker: usize) -> LeafIter {
    LeafIter::new(slices, config, cfg.worker_rng(worker).unwrap()).unwrap()
}

/// The first `n` indices of an infinitely repeated leaf (what a training pipeline without shuffle
/// buffer and with batches of 1 yields).
fn repeated(leaf: &mut LeafIter, n: usize) -> Vec<u64> {
    let mut res = Vec::with_capacity(n);
    let mut empty_epochs = 0;
    while res.len() < n {
        match leaf.next_index().unwrap() {
            Some(i) => {
                res.push(i);
                empty_epochs = 0;
            }
            None => {
                empty_epochs += 1;
                assert!(empty_epochs < 2, "the leaf has no samples");
            }
        }
    }
    res
}

/// One whole epoch (starting a new one).
fn epoch(leaf: &mut LeafIter) -> Vec<u64> {
    let mut res = Vec::new();
    while let Some(i) = leaf.next_index().unwrap() {
        res.push(i);
    }
    res
}

/// Runs the reference's training order for one rank: each local worker's repeated leaf, handed out
/// round robin (batches of one), as the recorded fixtures were made.
fn check_rank(
    name: &str,
    rank: usize,
    world_size: usize,
    num_workers: usize,
    seed_offset: i64,
    msps: Option<u64>,
    jsonl: bool,
) {
    let want = expected_indices(name);
    let cfg =
        WorkerConfig::new(rank, world_size, num_workers).unwrap().with_seed_offset(seed_offset);
    let workers = if jsonl {
        slice_workers(200, None, &cfg, 0, msps).unwrap()
    } else {
        shard_workers(&[50; 4], None, &cfg, 0, msps).unwrap()
    };
    let mut leaves: Vec<LeafIter> = workers
        .into_iter()
        .enumerate()
        .map(|(w, slices)| leaf(slices, LeafConfig::TRAIN, &cfg, w))
        .collect();
    let mut got = Vec::with_capacity(want.len());
    for turn in 0.. {
        if got.len() == want.len() {
            break;
        }
        let n_leaves = leaves.len();
        got.extend(repeated(&mut leaves[turn % n_leaves], 1));
    }
    assert_eq!(got, want, "{name}");
}

#[test]
fn reference_orders_single_worker() {
    check_rank("keys-ws1-r0-nw0-bs1-sb0-s0.txt", 0, 1, 0, 0, None, false);
    check_rank("keys-ws1-r0-nw0-bs1-sb0-s1.txt", 0, 1, 0, 1, None, false);
    check_rank("keys-ws1-r0-nw0-bs1-sb0-s0-msps10.txt", 0, 1, 0, 0, Some(10), false);
    check_rank("keys-ws2-r0-nw0-bs1-sb0-s0.txt", 0, 2, 0, 0, None, false);
    check_rank("keys-ws2-r1-nw0-bs1-sb0-s0.txt", 1, 2, 0, 0, None, false);
}

#[test]
fn reference_orders_two_workers() {
    check_rank("keys-ws1-r0-nw2-bs1-sb0-s0.txt", 0, 1, 2, 0, None, false);
    check_rank("keys-ws2-r0-nw2-bs1-sb0-s0.txt", 0, 2, 2, 0, None, false);
    check_rank("keys-ws2-r1-nw2-bs1-sb0-s0.txt", 1, 2, 2, 0, None, false);
    check_rank("keys-ws3-r2-nw2-bs1-sb0-s0.txt", 2, 3, 2, 0, None, false);
}

#[test]
fn reference_orders_jsonl() {
    check_rank("keys-jsonl-ws1-r0-nw0-bs1-sb0-s0.txt", 0, 1, 0, 0, None, true);
    check_rank("keys-jsonl-ws1-r0-nw0-bs1-sb0-s0-msps10.txt", 0, 1, 0, 0, Some(10), true);
    check_rank("keys-jsonl-ws1-r0-nw2-bs1-sb0-s0.txt", 0, 1, 2, 0, None, true);
}

fn cfg1() -> WorkerConfig {
    WorkerConfig::new(0, 1, 0).unwrap()
}

fn slices_of(counts: &[u64], msps: Option<u64>) -> WorkerSlices {
    shard_workers(counts, None, &cfg1(), 0, msps).unwrap().remove(0)
}

fn config(order: SliceOrder, p: usize) -> LeafConfig {
    LeafConfig { order, parallel_slice_iters: NonZeroUsize::new(p).unwrap() }
}

fn shuffled(k: u32, p: usize) -> LeafConfig {
    config(SliceOrder::Shuffled { epochs: NonZeroU32::new(k).unwrap() }, p)
}

#[test]
fn sequential_reads_slices_in_order_and_repeats() {
    let mut it = leaf(slices_of(&[3, 2], None), LeafConfig::VAL, &cfg1(), 0);
    assert_eq!(epoch(&mut it), [0, 1, 2, 3, 4]);
    assert_eq!(it.epoch_count(), 1);
    assert_eq!(epoch(&mut it), [0, 1, 2, 3, 4]);
    assert_eq!(it.sample_count(), 10);
    // Sequential order never draws, whatever P says.
    let mut it = leaf(slices_of(&[3, 2], None), config(SliceOrder::Sequential, 4), &cfg1(), 0);
    assert_eq!(epoch(&mut it), [0, 1, 2, 3, 4]);
    assert!(!it.state().rng.is_seeded());
}

#[test]
fn an_epoch_ends_with_exactly_one_none() {
    let mut it = leaf(slices_of(&[4, 4], None), LeafConfig::TRAIN, &cfg1(), 0);
    let first = epoch(&mut it);
    assert_eq!(first.len(), 8);
    assert_eq!(it.epoch_count(), 1);
    assert!(!it.in_epoch());
    let second = epoch(&mut it);
    assert_eq!(second.len(), 8);
    assert_eq!(it.epoch_count(), 2);
}

#[test]
fn a_worker_without_samples_yields_nothing_each_epoch() {
    let cfg = WorkerConfig::new(0, 1, 3).unwrap();
    let workers = shard_workers(&[2], None, &cfg, 0, None).unwrap();
    let empty = workers.into_iter().find(|w| w.n_slices() == 0).unwrap();
    let mut it = leaf(empty.clone(), LeafConfig::TRAIN, &cfg, 2);
    assert_eq!(it.next_index().unwrap(), None);
    assert_eq!(it.next_index().unwrap(), None);
    assert_eq!(it.epoch_count(), 2);
    // With replacement there is nothing to draw from.
    let rng = cfg.worker_rng(2).unwrap();
    assert_eq!(
        LeafIter::new(empty, config(SliceOrder::WithReplacement, 2), rng).unwrap_err(),
        energon_dist::Error::EmptyRange
    );
}

#[test]
fn one_slice_and_one_slot_draw_nothing() {
    let mut it = leaf(slices_of(&[5], None), shuffled(1, 1), &cfg1(), 0);
    assert_eq!(epoch(&mut it), [0, 1, 2, 3, 4]);
    assert!(!it.state().rng.is_seeded());
    // With 16 slots every sample costs a draw, although only one slot is ever open.
    let mut it = leaf(slices_of(&[5], None), shuffled(1, 16), &cfg1(), 0);
    assert_eq!(epoch(&mut it), [0, 1, 2, 3, 4]);
    assert!(it.state().rng.is_seeded());
}

#[test]
fn shuffle_over_epochs_reads_every_sample_k_times() {
    let mut it = leaf(slices_of(&[7, 5, 3], Some(2)), shuffled(3, 4), &cfg1(), 0);
    let mut got = epoch(&mut it);
    got.sort_unstable();
    let want: Vec<u64> = (0..15).flat_map(|i| [i, i, i]).collect();
    assert_eq!(got, want);
}

#[test]
fn with_replacement_never_ends() {
    let mut it =
        leaf(slices_of(&[3, 3], Some(1)), config(SliceOrder::WithReplacement, 2), &cfg1(), 0);
    let got: Vec<u64> = (0..500).map(|_| it.next_index().unwrap().unwrap()).collect();
    assert!(got.iter().all(|&i| i < 6));
    for i in 0..6 {
        assert!(got.contains(&i), "{i} never drawn");
    }
}

#[test]
fn an_interrupted_epoch_is_resumed() {
    // COMPAT(energon 7.4.1): a consumer that stops mid-epoch and pulls again continues the
    // epoch; one that stopped right after the last sample gets an empty epoch first.
    let mut whole = leaf(slices_of(&[10, 10], None), LeafConfig::TRAIN, &cfg1(), 0);
    let first = epoch(&mut whole);
    let second = epoch(&mut whole);
    let mut it = leaf(slices_of(&[10, 10], None), LeafConfig::TRAIN, &cfg1(), 0);
    let head: Vec<u64> = (0..20).map(|_| it.next_index().unwrap().unwrap()).collect();
    assert_eq!(head, first);
    assert!(it.in_epoch(), "the epoch stays open after its last sample");
    assert_eq!(it.next_index().unwrap(), None);
    assert_eq!(epoch(&mut it), second);
}

#[test]
fn state_serializes_and_resumes() {
    let slices = slices_of(&[9, 4, 11], Some(3));
    let mut it = leaf(slices.clone(), shuffled(2, 3), &cfg1(), 0);
    for _ in 0..17 {
        it.next_index().unwrap();
    }
    let json = serde_json::to_string(&it.state()).unwrap();
    let state: LeafState = serde_json::from_str(&json).unwrap();
    let mut resumed = LeafIter::from_state(slices.clone(), shuffled(2, 3), state.clone()).unwrap();
    assert_eq!(resumed.state(), it.state());
    for _ in 0..200 {
        assert_eq!(resumed.next_index().unwrap(), it.next_index().unwrap());
    }
    // A state of another configuration is refused.
    assert!(LeafIter::from_state(slices, shuffled(2, 4), state.clone()).is_none());
    assert!(LeafIter::from_state(slices_of(&[2], None), shuffled(2, 3), state).is_none());
}

#[test]
fn slice_order_round_trips_shuffle_over_epochs() {
    for soe in [None, Some(-1), Some(1), Some(6)] {
        let order = SliceOrder::from_shuffle_over_epochs(soe).unwrap();
        assert_eq!(order.shuffle_over_epochs(), soe);
    }
    for bad in [Some(0), Some(-2), Some(i64::MAX)] {
        assert_eq!(SliceOrder::from_shuffle_over_epochs(bad), None);
    }
}

proptest! {
    #[test]
    fn one_epoch_reads_each_sample_of_the_worker_once(
        counts in prop::collection::vec(0u64..40, 1..6),
        world_size in 1usize..4,
        num_workers in 0usize..4,
        msps in prop::option::of(1u64..12),
        p in 1usize..20,
        seed_offset in 0i64..3,
    ) {
        for rank in 0..world_size {
            let cfg = WorkerConfig::new(rank, world_size, num_workers)
                .unwrap()
                .with_seed_offset(seed_offset);
            for (w, slices) in shard_workers(&counts, None, &cfg, 0, msps).unwrap().into_iter().enumerate() {
                let want: Vec<u64> = (slices.start()..slices.end()).collect();
                let mut it = leaf(slices, shuffled(1, p), &cfg, w);
                for _ in 0..2 {
                    let mut got = epoch(&mut it);
                    got.sort_unstable();
                    prop_assert_eq!(&got, &want);
                }
            }
        }
    }

    #[test]
    fn resuming_from_any_state_continues_identically(
        counts in prop::collection::vec(1u64..30, 1..5),
        msps in prop::option::of(1u64..8),
        p in 1usize..6,
        soe in prop::sample::select(vec![None, Some(-1), Some(1), Some(2)]),
        cut in 0usize..120,
    ) {
        let slices = slices_of(&counts, msps);
        let config = config(SliceOrder::from_shuffle_over_epochs(soe).unwrap(), p);
        let mut it = leaf(slices.clone(), config, &cfg1(), 0);
        for _ in 0..cut {
            it.next_index().unwrap();
        }
        let bytes = serde_json::to_vec(&it.state()).unwrap();
        let mut resumed =
            LeafIter::from_state(slices, config, serde_json::from_slice(&bytes).unwrap()).unwrap();
        for _ in 0..150 {
            prop_assert_eq!(resumed.next_index().unwrap(), it.next_index().unwrap());
        }
    }
}

/// The samples of `ranges`, sorted.
fn samples_of(ranges: &[(u64, u64)]) -> Vec<u64> {
    let mut res: Vec<u64> = ranges.iter().flat_map(|&(s, e)| s..e).collect();
    res.sort_unstable();
    res
}

#[test]
fn a_remainder_is_read_once_then_the_slices_again() {
    let slices = slices_of(&[5, 7, 3], Some(2));
    let it = leaf(slices, shuffled(1, 3), &cfg1(), 0);
    let ranges = vec![(100, 103), (7, 9), (50, 50), (40, 41)];
    let mut it = it.with_remainder(ranges.clone()).unwrap();
    assert_eq!(it.remaining().unwrap(), vec![(100, 103), (7, 9), (40, 41)]);
    let mut first = epoch(&mut it);
    first.sort_unstable();
    assert_eq!(first, samples_of(&ranges));
    assert_eq!(it.epoch_count(), 1);
    assert_eq!(it.remaining().unwrap(), Vec::new());
    let mut second = epoch(&mut it);
    second.sort_unstable();
    assert_eq!(second, (0..15).collect::<Vec<_>>());
    // Not while an epoch is open, and never for a pass that does not end.
    it.next_index().unwrap();
    assert!(it.clone().with_remainder(vec![(0, 1)]).is_none());
    let forever = leaf(slices_of(&[4], None), config(SliceOrder::WithReplacement, 2), &cfg1(), 0);
    assert!(forever.remaining().is_none());
    assert!(forever.with_remainder(vec![(0, 1)]).is_none());
}

#[test]
fn a_sequential_remainder_keeps_its_order() {
    let it = leaf(slices_of(&[3, 2], None), LeafConfig::VAL, &cfg1(), 0);
    let mut it = it.with_remainder(vec![(9, 11), (2, 3)]).unwrap();
    assert_eq!(epoch(&mut it), [9, 10, 2]);
    assert_eq!(epoch(&mut it), [0, 1, 2, 3, 4]);
}

#[test]
fn a_fresh_pass_prefix_takes_whole_slices_in_a_drawn_order() {
    let slices = slices_of(&[5, 7, 3], Some(2));
    let mut it = leaf(slices, shuffled(1, 3), &cfg1(), 0);
    let all = it.fresh_pass_prefix(u64::MAX);
    assert_eq!(samples_of(&all), (0..15).collect::<Vec<_>>());
    // Not in slice order, and the same draw each time: the iteration does not move.
    assert_ne!(all, it.full_pass());
    assert_eq!(it.fresh_pass_prefix(u64::MAX), all);
    let prefix = it.fresh_pass_prefix(6);
    assert_eq!(samples_of(&prefix).len(), 6);
    assert_eq!(prefix[..prefix.len() - 1], all[..prefix.len() - 1]);
    assert_eq!(it.fresh_pass_prefix(0), Vec::new());
    // An open epoch or a remainder does not change what a fresh pass is.
    it.next_index().unwrap();
    assert_eq!(samples_of(&it.fresh_pass_prefix(u64::MAX)).len(), 15);
    let seq = leaf(slices_of(&[3, 2], None), LeafConfig::VAL, &cfg1(), 0);
    assert_eq!(seq.fresh_pass_prefix(4), [(0, 3), (3, 4)]);
    let forever = leaf(slices_of(&[4], None), config(SliceOrder::WithReplacement, 2), &cfg1(), 0);
    assert_eq!(forever.fresh_pass_prefix(3), Vec::new());
}

proptest! {
    #[test]
    fn what_was_read_and_what_remains_make_the_pass(
        counts in prop::collection::vec(0u64..30, 1..5),
        msps in prop::option::of(1u64..8),
        p in 1usize..6,
        soe in prop::sample::select(vec![None, Some(1), Some(2)]),
        cut in 0usize..150,
    ) {
        let slices = slices_of(&counts, msps);
        let config = config(SliceOrder::from_shuffle_over_epochs(soe).unwrap(), p);
        let mut it = leaf(slices, config, &cfg1(), 0);
        let full = samples_of(&it.full_pass());
        let mut read = Vec::new();
        for _ in 0..cut {
            match it.next_index().unwrap() {
                Some(i) => read.push(i),
                None => read.clear(),
            }
        }
        let remaining = it.remaining().unwrap();
        if it.in_epoch() || it.epoch_count() == 0 {
            read.extend(samples_of(&remaining));
            read.sort_unstable();
            prop_assert_eq!(read, full);
        } else {
            prop_assert!(remaining.is_empty());
        }
    }

    #[test]
    fn a_remainder_resumes_from_any_state(
        ranges in prop::collection::vec((0u64..100, 0u64..6), 0..8),
        p in 1usize..5,
        cut in 0usize..40,
    ) {
        let ranges: Vec<(u64, u64)> = ranges.into_iter().map(|(s, n)| (s, s + n)).collect();
        let slices = slices_of(&[4, 4], None);
        let it = leaf(slices.clone(), shuffled(1, p), &cfg1(), 0);
        let mut it = it.with_remainder(ranges.clone()).unwrap();
        let mut read = Vec::new();
        for _ in 0..cut {
            if let Some(i) = it.next_index().unwrap() {
                read.push(i);
            }
            if it.epoch_count() > 0 {
                break;
            }
        }
        let state = serde_json::to_vec(&it.state()).unwrap();
        let mut resumed =
            LeafIter::from_state(slices, shuffled(1, p), serde_json::from_slice(&state).unwrap())
                .unwrap();
        if resumed.epoch_count() == 0 {
            read.extend(samples_of(&resumed.remaining().unwrap()));
            read.sort_unstable();
            prop_assert_eq!(read, samples_of(&ranges));
        }
        for _ in 0..60 {
            prop_assert_eq!(resumed.next_index().unwrap(), it.next_index().unwrap());
        }
    }
}
