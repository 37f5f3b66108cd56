//! Tests of the slicing: hand-worked splits, the reference's pinned numbers and partition properties.

use proptest::prelude::*;

use super::*;

fn cfg(rank: usize, world_size: usize, num_workers: usize) -> WorkerConfig {
    WorkerConfig::new(rank, world_size, num_workers).unwrap()
}

fn offsets(counts: &[u64], cfg: &WorkerConfig, rotation: u64, msps: Option<u64>) -> Vec<Vec<u64>> {
    shard_workers(counts, None, cfg, rotation, msps)
        .unwrap()
        .into_iter()
        .map(|w| w.offsets().to_vec())
        .collect()
}

/// The bit-reversal sequence straight from its recursive definition.
fn bit_reversal_by_definition(items: &[usize]) -> Vec<usize> {
    if items.len() <= 2 {
        return items.to_vec();
    }
    let (left, right) = items.split_at(items.len() / 2);
    let (left, right) = (bit_reversal_by_definition(left), bit_reversal_by_definition(right));
    let mut res = Vec::with_capacity(items.len());
    for (i, &r) in right.iter().enumerate() {
        res.extend(left.get(i));
        res.push(r);
    }
    res
}

#[test]
fn bit_reversal_matches_its_definition() {
    for n in 0..300 {
        let items: Vec<usize> = (0..n).collect();
        assert_eq!(bit_reversal(n), bit_reversal_by_definition(&items), "n = {n}");
    }
    assert_eq!(bit_reversal(16), [0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15]);
    assert_eq!(bit_reversal(5), [0, 2, 1, 3, 4]);
}

#[test]
fn ten_samples_over_two_ranks_of_three_workers() {
    // base 1, rem 4: linear counts [2, 2, 2, 2, 1, 1]; B(6) = [0, 3, 1, 4, 2, 5] gives workers
    // 0..6 the counts [2, 2, 1, 2, 2, 1].
    assert_eq!(worker_ranges(0..10, &cfg(0, 2, 3), 0), Ok(vec![0, 2, 4, 5]));
    assert_eq!(worker_ranges(0..10, &cfg(1, 2, 3), 0), Ok(vec![5, 7, 9, 10]));
    // Rotated by 1: linear counts [1, 2, 2, 2, 2, 1] -> per worker [1, 2, 2, 2, 2, 1].
    assert_eq!(worker_ranges(0..10, &cfg(0, 2, 3), 1), Ok(vec![0, 1, 3, 5]));
    // Rotations are taken modulo the number of global workers.
    assert_eq!(worker_ranges(0..10, &cfg(0, 2, 3), 7), worker_ranges(0..10, &cfg(0, 2, 3), 1));
    // A subset shifts everything by its start.
    assert_eq!(worker_ranges(100..110, &cfg(1, 2, 3), 0), Ok(vec![105, 107, 109, 110]));
}

#[test]
fn slices_stop_at_shard_boundaries() {
    // Worker 0 of rank 2 of 3 (2 workers) reads [134, 167) across the shard boundary at 150.
    assert_eq!(
        offsets(&[50, 50, 50, 50], &cfg(2, 3, 2), 0, None),
        [vec![134, 150, 167], vec![167, 200]]
    );
    // Empty shards leave no empty slices behind.
    assert_eq!(offsets(&[3, 0, 0, 4, 0], &cfg(0, 1, 0), 0, None), [vec![0, 3, 7]]);
    assert_eq!(offsets(&[0, 0], &cfg(0, 1, 2), 0, None), [vec![0], vec![0]]);
    assert_eq!(offsets(&[], &cfg(0, 1, 0), 0, None), [vec![0]]);
}

#[test]
fn ds1_of_the_reference_config_test() {
    // tests/test_metadataset.py: 55 samples in shards of 10, one worker in total.
    assert_eq!(
        offsets(&[10, 10, 10, 10, 10, 5], &cfg(0, 1, 0), 0, None),
        [vec![0, 10, 20, 30, 40, 50, 55]]
    );
}

#[test]
fn max_samples_per_sequence_divides_first() {
    // A 122-sample piece with msps 9: 14 slices of 8.714..., cut at int(j * q); the 8th cut is
    // at 60 (7 * 8.714285714285714 = 60.99999999999999), not 61.
    let got = offsets(&[122], &cfg(0, 1, 0), 0, Some(9));
    assert_eq!(got, [vec![0, 8, 17, 26, 34, 43, 52, 60, 69, 78, 87, 95, 104, 113, 122]]);
    // Up to 1.5 * msps stays one slice; 14 > 13.5 is cut (round(14 / 9) = 2).
    assert_eq!(offsets(&[13], &cfg(0, 1, 0), 0, Some(9)), [vec![0, 13]]);
    assert_eq!(offsets(&[14], &cfg(0, 1, 0), 0, Some(9)), [vec![0, 7, 14]]);
    // Banker's rounding: 25 / 10 = 2.5 rounds to 2 slices, 35 / 10 = 3.5 to 4.
    assert_eq!(offsets(&[25], &cfg(0, 1, 0), 0, Some(10)), [vec![0, 12, 25]]);
    assert_eq!(offsets(&[35], &cfg(0, 1, 0), 0, Some(10)), [vec![0, 8, 17, 26, 35]]);
    // Each piece is cut on its own: [0, 30) and [30, 50) of the first worker range.
    assert_eq!(offsets(&[30, 30], &cfg(0, 1, 0), 0, Some(10)), [vec![0, 10, 20, 30, 40, 50, 60]]);
}

#[test]
fn bad_arguments_are_errors() {
    let c = cfg(0, 1, 0);
    assert_eq!(shard_workers(&[5], None, &c, 0, Some(0)), Err(Error::ZeroMaxSamplesPerSequence));
    assert_eq!(
        shard_workers(&[5], Some(2..6), &c, 0, None),
        Err(Error::SubsetOutOfRange { start: 2, end: 6, total: 5 })
    );
    #[expect(clippy::reversed_empty_ranges, reason = "the error case under test")]
    let reversed = Some(4..2);
    assert_eq!(
        shard_workers(&[5], reversed, &c, 0, None),
        Err(Error::SubsetOutOfRange { start: 4, end: 2, total: 5 })
    );
    assert!(matches!(
        shard_workers(&[u64::MAX, 1], None, &c, 0, None),
        Err(Error::SampleCountOverflow { .. })
    ));
    // Past 2^53 samples `int(total / G)` is no longer exact, and the split would not add up.
    assert!(matches!(
        worker_ranges(0..(1 << 60) - 1, &cfg(0, 1, 3), 0),
        Err(Error::SampleCountOverflow { .. })
    ));
    assert!(worker_ranges(0..(1 << 60) - 1, &c, 0).is_err());
    assert_eq!(worker_ranges(0..1 << 60, &c, 0), Ok(vec![0, 1 << 60]));
}

#[test]
fn subsets() {
    let abs = |a, b| DatasetSubset { range: None, absolute_range: Some((a, b)) };
    assert_eq!(abs(10, Some(20)).compute(55), Ok(10..20));
    assert_eq!(abs(10, None).compute(55), Ok(10..55));
    assert_eq!(
        abs(10, Some(56)).compute(55),
        Err(Error::SubsetOutOfRange { start: 10, end: 56, total: 55 })
    );
    assert_eq!(
        abs(30, Some(20)).compute(55),
        Err(Error::SubsetOutOfRange { start: 30, end: 20, total: 55 })
    );
    let ratio = |r0, r1| DatasetSubset { range: Some((r0, r1)), absolute_range: None };
    assert_eq!(ratio(0.0, 1.0).compute(55), Ok(0..55));
    // int(55 * 0.1) = 5 and int(55 * 0.3) = 16 (16.5 truncated).
    assert_eq!(ratio(0.1, 0.3).compute(55), Ok(5..16));
    // Ratios apply to what the absolute range left: 10 + int(40 * 0.5).
    let both = DatasetSubset { range: Some((0.5, 1.0)), absolute_range: Some((10, Some(50))) };
    assert_eq!(both.compute(55), Ok(30..50));
    // A slightly negative start truncates to 0, as Python's int() does.
    assert_eq!(ratio(-0.001, 1.0).compute(55), Ok(0..55));
    assert_eq!(
        ratio(-0.1, 1.0).compute(55),
        Err(Error::SubsetOutOfRange { start: -5, end: 55, total: 55 })
    );
    assert_eq!(
        ratio(0.0, 1.5).compute(10),
        Err(Error::SubsetOutOfRange { start: 0, end: 15, total: 10 })
    );
    assert!(matches!(
        ratio(0.0, f64::NAN).compute(10),
        Err(Error::SubsetRatioNotFinite { ratio }) if ratio.is_nan()
    ));
    assert_eq!(
        ratio(f64::INFINITY, 1.0).compute(10),
        Err(Error::SubsetRatioNotFinite { ratio: f64::INFINITY })
    );
    assert_eq!(DatasetSubset::default().compute(7), Ok(0..7));
}

#[test]
fn rotation_offsets_accumulate_modulo_global_workers() {
    // A 50-sample leaf followed by another, 8 global workers: the second has rotation 2.
    assert_eq!(rotation_offsets(&[50, 10], &cfg(0, 2, 4)), [0, 2]);
    assert_eq!(rotation_offsets(&[55, 7, 55], &cfg(0, 100, 0)), [0, 55, 62]);
    assert_eq!(
        rotation_offsets(&[u64::MAX, u64::MAX, 1], &cfg(0, 7, 0)),
        [0, u64::MAX % 7, (2 * (u64::MAX as u128) % 7) as u64]
    );
    assert_eq!(rotation_offsets(&[], &cfg(0, 1, 0)), Vec::<u64>::new());
}

/// The samples of each rank's workers for a blend of leaves (each with its rotation offset).
fn blend_counts(leaves: &[&[u64]], world_size: usize, num_workers: usize) -> Vec<u64> {
    let lens: Vec<u64> = leaves.iter().map(|counts| counts.iter().sum()).collect();
    let mut res = Vec::new();
    for rank in 0..world_size {
        let c = cfg(rank, world_size, num_workers);
        let rotations = rotation_offsets(&lens, &c);
        let mut per_worker = vec![0; c.n_local_workers()];
        for (counts, &rotation) in leaves.iter().zip(&rotations) {
            for (w, slices) in
                shard_workers(counts, None, &c, rotation, None).unwrap().iter().enumerate()
            {
                per_worker[w] += slices.n_samples();
            }
        }
        res.extend(per_worker);
    }
    res
}

const FIFTY_FIVE: &[u64] = &[10, 10, 10, 10, 10, 5];

#[test]
fn reference_test_too_few_samples() {
    // tests/test_metadataset_fewsamp.py: leaves of 55, 7 and 55 samples on 100 ranks without
    // workers; the listed ranks get 2 samples, all others 1.
    let lens = blend_counts(&[FIFTY_FIVE, &[7], FIFTY_FIVE], 100, 0);
    let two = [0, 3, 6, 12, 18, 25, 31, 37, 43, 50, 56, 62, 68, 75, 81, 87, 93];
    let expected: Vec<u64> = (0..100).map(|r| if two.contains(&r) { 2 } else { 1 }).collect();
    assert_eq!(lens, expected);
}

#[test]
fn reference_test_worker_sample_balance() {
    // tests/test_metadataset.py: four leaves of 55 samples, 2 ranks; counts per (rank, worker).
    let leaves = [FIFTY_FIVE; 4];
    assert_eq!(blend_counts(&leaves, 2, 6), [19, 18, 18, 19, 18, 18, 19, 18, 18, 19, 18, 18]);
    let pattern = [4, 4, 4, 4, 3, 4, 3, 4, 4, 4, 3, 4, 3, 4, 3];
    let expected: Vec<u64> = pattern.iter().cycle().take(60).copied().collect();
    assert_eq!(blend_counts(&leaves, 2, 30), expected);
}

fn shard_counts() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![1 => Just(0u64), 9 => 1u64..=80], 1..=8)
}

proptest! {
    /// Over all ranks and workers, the slices cover the (subset) range exactly once, in order;
    /// offsets strictly increase, no slice crosses a shard boundary, no slice exceeds the cut
    /// limit, and worker sample counts differ by at most one.
    #[test]
    fn slices_partition_the_samples(
        counts in shard_counts(),
        world_size in 1usize..=6,
        num_workers in 0usize..=5,
        msps in prop_oneof![Just(None), (1u64..=13).prop_map(Some)],
        rotation in 0u64..1000,
        subset_seed in prop::option::of((0.0f64..1.0, 0.0f64..1.0)),
    ) {
        let total: u64 = counts.iter().sum();
        let subset = subset_seed.map(|(a, b)| {
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            (a * total as f64) as u64..(b * total as f64) as u64
        });
        let range = subset.clone().unwrap_or(0..total);
        let mut boundaries = vec![0u64];
        for c in &counts {
            boundaries.push(boundaries[boundaries.len() - 1] + c);
        }
        let mut next = range.start;
        let mut sizes = Vec::new();
        for rank in 0..world_size {
            let c = cfg(rank, world_size, num_workers);
            let workers = shard_workers(&counts, subset.clone(), &c, rotation, msps).unwrap();
            prop_assert_eq!(workers.len(), c.n_local_workers());
            for w in &workers {
                prop_assert_eq!(w.start(), next);
                prop_assert!(w.offsets().windows(2).all(|p| p[0] < p[1]));
                for slice in w.slices() {
                    // The shard holding the first sample also holds the last one.
                    let shard = boundaries.partition_point(|&b| b <= slice.start);
                    prop_assert!(slice.end <= boundaries[shard]);
                    if let Some(m) = msps {
                        prop_assert!(slice.end - slice.start <= m + m.div_ceil(2));
                    }
                }
                next = w.end();
                sizes.push(w.n_samples());
            }
        }
        prop_assert_eq!(next, range.end);
        let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        prop_assert!(hi - lo <= 1);
    }

    /// The split only depends on the number of global workers: ranks x workers of the same product
    /// give the same ranges in global worker order (reproducible scaling).
    #[test]
    fn split_depends_only_on_global_workers(
        total in 0u64..500,
        rotation in 0u64..100,
        factor in prop::sample::select(vec![(1usize, 12usize), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]),
    ) {
        let (world_size, num_workers) = factor;
        let mut got = vec![0u64];
        for rank in 0..world_size {
            let b = worker_ranges(0..total, &cfg(rank, world_size, num_workers), rotation).unwrap();
            got.extend(&b[1..]);
        }
        let mut reference = vec![0u64];
        reference.extend(&worker_ranges(0..total, &cfg(0, 1, 12), rotation).unwrap()[1..]);
        prop_assert_eq!(got, reference);
    }
}
