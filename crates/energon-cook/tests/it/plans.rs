//! Metadataset plans run by the loader's stages: the reference's pinned numbers at the metadataset
//! level (worker sample balance, too few samples for 100 ranks, `blend_epochized` counts with
//! integer and fractional repetitions and subsets), and plan errors.

use std::{collections::BTreeMap, path::Path};

use energon_dist::WorkerConfig;

use energon_cook::{BoxStage, LoaderBuilder, Stage};
use energon_mix::{Error, Metadataset, MixOptions, MixPlan, ResolveOptions, Result};

use crate::util::{text_dataset, write};

const V2: &str = "__module__: megatron.energon\n__class__: MetadatasetV2\n";

fn plan(mds: &Path, cfg: WorkerConfig, resolve: &ResolveOptions, options: MixOptions) -> MixPlan {
    let split = Metadataset::load(mds).unwrap().resolve("train", resolve).unwrap();
    MixPlan::new(split, cfg, options).unwrap()
}

/// The stages of local worker `worker` of `plan`, yielding sample keys.
pub(crate) fn keys(plan: &MixPlan, worker: usize) -> energon_cook::Result<BoxStage<String>> {
    let builder = LoaderBuilder::from_plan(plan.clone(), |s| Ok(Some(s.key().to_owned())))
        .cook(|x| Ok(Some(x)));
    let mut pipelines = builder.build_sample_pipelines()?;
    Ok(pipelines.swap_remove(worker))
}

/// The key numbers of one pass of local worker `worker`.
fn pass(plan: &MixPlan, worker: usize) -> Vec<u64> {
    let mut mix = keys(plan, worker).unwrap();
    let mut res = Vec::new();
    while let Some(item) = mix.next().unwrap() {
        res.push(item.value.parse::<u64>().unwrap());
    }
    res
}

fn histogram(keys: &[u64]) -> BTreeMap<u64, usize> {
    let mut res = BTreeMap::new();
    for &k in keys {
        *res.entry(k).or_default() += 1;
    }
    res
}

/// The reference's test options for epoch counts: no shuffling, one slice at a time, one pass.
fn fixed_epochs() -> (ResolveOptions, MixOptions) {
    let resolve = ResolveOptions::default().shuffle_over_epochs_multiplier(None);
    let options = MixOptions::default().repeat(false).parallel_shard_iters(Some(1));
    (resolve, options)
}

#[test]
fn worker_sample_balance_matches_the_reference_pins() {
    // test_metadataset.py::test_worker_sample_balance: the nested V1 metadataset (4 leaves of 55
    // samples), 2 ranks.
    let dir = tempfile::tempdir().unwrap();
    text_dataset(&dir.path().join("ds1"), 0..55, 10);
    text_dataset(&dir.path().join("ds2"), 100..155, 10);
    write(
        dir.path(),
        "metadataset.yaml",
        "splits:\n  train:\n    datasets:\n      - {path: ds1}\n      - {path: ds2}\n  val:\n    \
         datasets:\n      - {path: ds1, split_part: train}\n      - {path: ds2, split_part: train}\n",
    );
    let nested = write(
        dir.path(),
        "nested.yaml",
        "splits:\n  train:\n    datasets:\n      - {weight: 4, path: metadataset.yaml, split_part: \
         train}\n      - {path: metadataset.yaml, split_part: val}\n",
    );
    let counts = |num_workers: usize| -> Vec<u64> {
        let mut res = Vec::new();
        for rank in 0..2 {
            let cfg = WorkerConfig::new(rank, 2, num_workers).unwrap();
            let plan = plan(&nested, cfg, &ResolveOptions::default(), MixOptions::default());
            assert_eq!(plan.leaves.len(), 4);
            for worker in 0..num_workers {
                res.push(plan.leaves.iter().map(|l| l.workers[worker].n_samples()).sum());
            }
        }
        res
    };
    assert_eq!(counts(6), [19, 18, 18, 19, 18, 18, 19, 18, 18, 19, 18, 18]);
    let thirty: Vec<u64> = [4u64, 4, 4, 4, 3, 4, 3, 4, 4, 4, 3, 4, 3, 4, 3]
        .iter()
        .chain(&[4, 4, 4, 4, 3, 4, 3, 4, 4, 4, 3, 4, 3, 4, 3])
        .chain(&[4, 4, 4, 4, 3, 4, 3, 4, 4, 4, 3, 4, 3, 4, 3])
        .chain(&[4, 4, 4, 4, 3, 4, 3, 4, 4, 4, 3, 4, 3, 4, 3])
        .copied()
        .collect();
    assert_eq!(counts(30), thirty);
}

#[test]
fn too_few_samples_for_100_ranks_matches_the_reference_pins() {
    // test_metadataset_fewsamp.py::test_too_few_samples: blend of 55, 7 and 55 samples.
    let dir = tempfile::tempdir().unwrap();
    text_dataset(&dir.path().join("ds1"), 0..55, 10);
    text_dataset(&dir.path().join("ds2"), 100..107, 10);
    text_dataset(&dir.path().join("ds3"), 200..255, 10);
    let mds = write(
        dir.path(),
        "mds.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: ds1}}\n      - \
             {{weight: 1, path: ds2}}\n      - {{weight: 1, path: ds3}}\n"
        ),
    );
    let two = [0, 3, 6, 12, 18, 25, 31, 37, 43, 50, 56, 62, 68, 75, 81, 87, 93];
    let split =
        Metadataset::load(&mds).unwrap().resolve("train", &ResolveOptions::default()).unwrap();
    for rank in 0..100 {
        let cfg = WorkerConfig::new(rank, 100, 0).unwrap();
        let plan = MixPlan::new(split.clone(), cfg, MixOptions::default()).unwrap();
        let len = plan.len_worker(0);
        assert_eq!(len, if two.contains(&rank) { 2 } else { 1 }, "rank {rank}");
        // Ten draws of the blend show exactly this rank's samples.
        let mut mix = keys(&plan, 0).unwrap();
        let mut seen: Vec<String> = (0..10).map(|_| mix.next().unwrap().unwrap().value).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len() as u64, len, "rank {rank}: {seen:?}");
    }
}

fn two_datasets() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    text_dataset(&dir.path().join("ds1"), 0..55, 10);
    text_dataset(&dir.path().join("ds2"), 100..155, 10);
    dir
}

#[test]
fn integer_repetitions_give_exact_epochs() {
    // test_metadataset_v2.py::test_metadataset_fixed_epochs: repetitions 2 and 3.
    let dir = two_datasets();
    let mds = write(
        dir.path(),
        "mds.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend_epochized:\n      - {{repetitions: 2, path: ds1}}\n      \
             - {{repetitions: 3, path: ds2}}\n"
        ),
    );
    let options = MixOptions::default().repeat(false);
    let cfg = WorkerConfig::new(0, 1, 0).unwrap().with_seed_offset(42);
    let plan = plan(&mds, cfg, &ResolveOptions::default(), options);
    assert_eq!(plan.len_worker(0), 5 * 55);
    assert_eq!(plan.leaves.iter().map(|l| l.blend_weight).collect::<Vec<_>>(), [110.0, 165.0]);
    let mut mix = keys(&plan, 0).unwrap();
    for epoch in 0..2 {
        let mut keys = Vec::new();
        while let Some(item) = mix.next().unwrap() {
            keys.push(item.value.parse::<u64>().unwrap());
        }
        assert_eq!(keys.len(), 5 * 55, "epoch {epoch}");
        let counts = histogram(&keys);
        assert!((0..55).all(|k| counts[&k] == 2), "epoch {epoch}");
        assert!((100..155).all(|k| counts[&k] == 3), "epoch {epoch}");
    }
}

#[test]
fn fractional_repetitions_give_exact_counts() {
    // test_metadataset_v2.py::test_metadataset_fixed_epochs_fractional: 0.7 and 1.5 of 55.
    let dir = two_datasets();
    let mds = write(
        dir.path(),
        "mds.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend_epochized:\n      - {{repetitions: 0.7, path: ds1}}\n      \
             - {{repetitions: 1.5, path: ds2}}\n"
        ),
    );
    let (resolve, options) = fixed_epochs();
    let cfg = WorkerConfig::new(0, 1, 0).unwrap().with_seed_offset(42);
    let one = plan(&mds, cfg, &resolve, options);
    assert_eq!(one.len_worker(0), 38 + 55 + 27);
    // Weights `len * repetitions` in doubles: 38.5 and 82.5.
    assert_eq!(one.leaves.iter().map(|l| l.blend_weight).collect::<Vec<_>>(), [38.5, 82.5]);
    let keys = pass(&one, 0);
    assert_eq!(keys.len(), 38 + 55 + 27);
    let counts = histogram(&keys);
    assert!((0..38).all(|k| counts[&k] == 1));
    assert!((38..55).all(|k| !counts.contains_key(&k)));
    assert!((100..127).all(|k| counts[&k] == 2));
    assert!((127..155).all(|k| counts[&k] == 1));

    // Two ranks of two workers: rank 0 gets 58 (the reference's test notes it "should be" 60).
    let cfg = WorkerConfig::new(0, 2, 2).unwrap().with_seed_offset(42);
    let two = plan(&mds, cfg, &resolve, options);
    assert_eq!(two.len_worker(0) + two.len_worker(1), 58);
    assert_eq!(pass(&two, 0).len() + pass(&two, 1).len(), 58);
}

#[test]
fn subsets_of_epochized_blends_give_exact_counts() {
    // test_metadataset_v2.py::test_dataset_with_subset_ratio.
    let dir = two_datasets();
    text_dataset(&dir.path().join("ds3"), 200..255, 10);
    let (resolve, options) = fixed_epochs();
    let cfg = || WorkerConfig::new(0, 1, 0).unwrap().with_seed_offset(42);
    let ratio = write(
        dir.path(),
        "ratio.yaml",
        &format!(
            "{V2}splits:\n  train:\n    subset: {{range: [20%, 80%]}}\n    blend_epochized:\n      - \
             path: ds1\n      - repetitions: 2\n        path: ds2\n"
        ),
    );
    let counts = histogram(&pass(&plan(&ratio, cfg(), &resolve, options), 0));
    let expected: BTreeMap<u64, usize> =
        (11..44).map(|k| (k, 1)).chain((111..144).map(|k| (k, 2))).collect();
    assert_eq!(counts, expected);

    let ratio2 = write(
        dir.path(),
        "ratio2.yaml",
        &format!(
            "{V2}splits:\n  train:\n    subset: {{range: [20%, 80%]}}\n    blend_epochized:\n      - \
             path: ds1\n        subset: {{range: [10, 30]}}\n      - repetitions: 2\n        subset: \
             {{range: [20, 40]}}\n        path: ds2\n"
        ),
    );
    let counts = histogram(&pass(&plan(&ratio2, cfg(), &resolve, options), 0));
    let expected: BTreeMap<u64, usize> =
        (14..26).map(|k| (k, 1)).chain((124..136).map(|k| (k, 2))).collect();
    assert_eq!(counts, expected);

    let nested = write(
        dir.path(),
        "nested.yaml",
        &format!(
            "{V2}splits:\n  train:\n    subset: {{range: [0%, 50%]}}\n    blend_epochized:\n      - \
             path: ds3\n        subset: {{range: [30, 50]}}\n      - repetitions: 2\n        subset: \
             {{range: [25%, 75%]}}\n        path: ratio2.yaml\n"
        ),
    );
    let counts = histogram(&pass(&plan(&nested, cfg(), &resolve, options), 0));
    let expected: BTreeMap<u64, usize> = (17..20)
        .map(|k| (k, 2))
        .chain((127..130).map(|k| (k, 4)))
        .chain((230..240).map(|k| (k, 1)))
        .collect();
    assert_eq!(counts, expected);

    let end = write(
        dir.path(),
        "end.yaml",
        &format!("{V2}splits:\n  train:\n    subset: {{range: [50, end]}}\n    path: ds1\n"),
    );
    assert_eq!(pass(&plan(&end, cfg(), &resolve, options), 0), [50, 51, 52, 53, 54]);
}

#[test]
fn rotation_offsets_spread_remainders_over_workers() {
    // A 50-sample leaf before another: with 8 global workers the second is rotated by 2.
    let dir = tempfile::tempdir().unwrap();
    text_dataset(&dir.path().join("a"), 0..50, 25);
    text_dataset(&dir.path().join("b"), 100..113, 25);
    let mds = write(
        dir.path(),
        "mds.yaml",
        &format!("{V2}splits:\n  train:\n    blend:\n      - path: a\n      - path: b\n"),
    );
    let plan = plan(
        &mds,
        WorkerConfig::new(0, 2, 4).unwrap(),
        &ResolveOptions::default(),
        MixOptions::default(),
    );
    assert_eq!(plan.leaves.iter().map(|l| l.rotation_offset).collect::<Vec<_>>(), [0, 2]);
    assert_eq!(plan.leaves.iter().map(|l| l.len).collect::<Vec<_>>(), [50, 13]);
    assert_eq!(plan.leaves.iter().map(|l| l.blend_weight).collect::<Vec<_>>(), [0.5, 0.5]);
}

#[test]
fn validation_concatenates_and_blends_refuse_to_stop() {
    let dir = two_datasets();
    let mds = write(
        dir.path(),
        "mds.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{weight: 3, path: ds1}}\n      - {{path: \
             ds2}}\n"
        ),
    );
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    let val = MixOptions::default().training(false);
    let keys = pass(&plan(&mds, cfg, &ResolveOptions::default(), val), 0);
    let expected: Vec<u64> = (0..55).chain(100..155).collect();
    assert_eq!(keys, expected);

    let split =
        Metadataset::load(&mds).unwrap().resolve("train", &ResolveOptions::default()).unwrap();
    let no_repeat = MixOptions::default().repeat(false);
    let err = MixPlan::new(split, cfg, no_repeat).unwrap_err();
    assert!(err.to_string().contains("only blend_epochized or a single dataset"), "{err}");
}

#[test]
fn a_worker_without_samples_cannot_train() {
    let dir = tempfile::tempdir().unwrap();
    text_dataset(&dir.path().join("tiny"), 0..3, 10);
    let mds = write(dir.path(), "mds.yaml", &format!("{V2}splits:\n  train:\n    path: tiny\n"));
    let plan = plan(
        &mds,
        WorkerConfig::new(0, 1, 4).unwrap(),
        &ResolveOptions::default(),
        MixOptions::default(),
    );
    let empty = (0..4).find(|&w| plan.leaves[0].workers[w].n_samples() == 0).unwrap();
    let Err(err) = keys(&plan, empty) else { panic!("worker {empty} has no samples") };
    assert!(
        matches!(err, energon_cook::Error::Mix(Error::EmptyWorker { worker, .. }) if worker == empty),
        "{err}"
    );
}

#[test]
fn blend_weights_out_of_float_range_name_their_file_and_entry() {
    let dir = tempfile::tempdir().unwrap();
    text_dataset(&dir.path().join("ds1"), 0..10, 10);
    text_dataset(&dir.path().join("ds2"), 100..110, 10);
    let blend = |name: &str, w1: &str, w2: &str| {
        let text = format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{weight: {w1}, path: ds1}}\n      - \
             {{weight: {w2}, path: ds2}}\n"
        );
        write(dir.path(), name, &text)
    };
    let cfg = || WorkerConfig::new(0, 1, 1).unwrap();
    let open = |mds: &Path| -> Result<MixPlan> {
        let split = Metadataset::load(mds)?.resolve("train", &ResolveOptions::default())?;
        MixPlan::new(split, cfg(), MixOptions::default())
    };
    // The sum overflows doubles: the item that makes it overflow is named.
    let sum = blend("sum.yaml", "1e308", "1e308");
    let err = open(&sum).unwrap_err();
    let Error::BadNode { file, yaml_path, reason } = &err else { panic!("{err:?}") };
    assert_eq!((file, yaml_path.as_str()), (&sum, "splits.train.blend[1].weight"));
    assert!(reason.contains("largest double"), "{reason}");
    // A normalized weight float32 rounds to 0: the dataset entry is named.
    let tiny = blend("tiny.yaml", "1.0e308", "1");
    let err = open(&tiny).unwrap_err();
    let Error::BadNode { file, yaml_path, reason } = &err else { panic!("{err:?}") };
    assert_eq!((file, yaml_path.as_str()), (&tiny, "splits.train.blend[1]"));
    assert!(reason.contains("float32 rounds to 0"), "{reason}");
    // Large weights within range still blend.
    let plan = open(&blend("ok.yaml", "1.0e300", "3.0e300")).unwrap();
    let weights: Vec<f32> = plan.leaves.iter().map(|l| l.blend_weight).collect();
    assert_eq!(weights, [0.25, 0.75]);
    // Repetitions whose blend weight float32 rounds to 0: the dataset entry is named.
    let reps = write(
        dir.path(),
        "reps.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend_epochized:\n      - {{repetitions: 1e-300, path: \
             ds1}}\n"
        ),
    );
    let err = open(&reps).unwrap_err();
    let Error::BadNode { file, yaml_path, reason } = &err else { panic!("{err:?}") };
    assert_eq!((file, yaml_path.as_str()), (&reps, "splits.train.blend_epochized[0]"));
    assert!(reason.contains("repetitions 1e-300"), "{reason}");
}

#[test]
fn a_dataset_is_a_plan_of_one_leaf() {
    // The same dataset through the builder of one dataset and as a resolved plan of one leaf:
    // the same items with the same restore keys, on every worker.
    let fixture = crate::util::fixture();
    let cfg = WorkerConfig::new(0, 2, 2).unwrap().with_seed_offset(3);
    let direct = LoaderBuilder::new(crate::util::dataset(), cfg, |raw| Ok(Some(raw.key)))
        .shuffle_buffer_size(8)
        .build_sample_pipelines()
        .unwrap();
    let split = energon_mix::resolve_path(&fixture, "train", &ResolveOptions::default()).unwrap();
    let plan = MixPlan::new(split, cfg, MixOptions::default()).unwrap();
    assert_eq!(plan.leaves.len(), 1);
    let planned = LoaderBuilder::from_plan(plan, |s| Ok(Some(s.key().to_owned())))
        .shuffle_buffer_size(8)
        .build_sample_pipelines()
        .unwrap();
    for (mut a, mut b) in direct.into_iter().zip(planned) {
        for _ in 0..250 {
            assert_eq!(a.next().unwrap().unwrap(), b.next().unwrap().unwrap());
        }
        assert_eq!(a.state().unwrap(), b.state().unwrap());
    }
}

#[test]
fn settings_of_one_dataset_are_refused_for_a_plan() {
    let fixture = crate::util::fixture();
    let split = energon_mix::resolve_path(&fixture, "train", &ResolveOptions::default()).unwrap();
    let cfg = WorkerConfig::new(0, 1, 1).unwrap();
    let plan = MixPlan::new(split, cfg, MixOptions::default()).unwrap();
    let Err(err) = LoaderBuilder::from_plan(plan.clone(), |s| Ok(Some(s.key().to_owned())))
        .shuffle_over_epochs(2)
        .build_sample_pipelines()
    else {
        panic!("a plan's shuffle_over_epochs is its own")
    };
    assert!(err.to_string().contains("shuffle_over_epochs"), "{err}");
    let Err(err) = LoaderBuilder::from_plan(plan, |s| Ok(Some(s.key().to_owned())))
        .repeat(false)
        .build_sample_pipelines()
    else {
        panic!("a training plan repeats as its options say")
    };
    assert!(err.to_string().contains("repeat"), "{err}");
}
