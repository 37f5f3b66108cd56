//! The reference's resume traces: save after 5 batches, restore in a fresh loader, the next 5
//! batches are the reference's.

use energon_cook::{Batch, Keyed, LoaderBuilder, LoaderStart, LoaderWrapper, RestoreKey};
use energon_dist::WorkerConfig;

use crate::util::{dataset, expected, through_file};

fn builder(num_workers: usize) -> LoaderBuilder<String> {
    let cfg = WorkerConfig::new(0, 1, num_workers).unwrap();
    LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
        .batch_size(Some(4))
        .shuffle_buffer_size(16)
}

fn keys(batch: &Keyed<Batch<String>>) -> Vec<String> {
    batch.value.samples.iter().map(|s| s.value.clone()).collect()
}

fn check(num_workers: usize, json: bool) {
    let want = expected(&format!("resume-ws1-r0-nw{num_workers}-bs4-sb16-s0.txt"));
    let mut loader = builder(num_workers).build_batches().unwrap();
    let mut got = Vec::new();
    for batch in 0..5 {
        let item = loader.next().unwrap().unwrap();
        got.extend(keys(&item.value).into_iter().map(|k| format!("before\t{batch}\t{k}")));
    }
    let state = through_file(loader.save_state().unwrap(), json);
    drop(loader);
    let mut restored = builder(num_workers).restore_state(state).build_batches().unwrap();
    for batch in 5..10 {
        let item = restored.next().unwrap().unwrap();
        got.extend(keys(&item.value).into_iter().map(|k| format!("restored\t{batch}\t{k}")));
    }
    let want: Vec<&str> = want.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(got, want, "{num_workers} workers");
}

#[test]
fn the_reference_resume_traces_are_reproduced_without_workers() {
    check(0, false);
    check(0, true);
}

#[test]
fn the_reference_resume_traces_are_reproduced_with_two_workers() {
    check(2, false);
    check(2, true);
}

#[test]
fn the_saved_state_has_what_the_reference_saves() {
    // resume-state-structure-*.txt: after 5 batches of 4 from a buffer of 16, 35 samples were
    // read, 15 are buffered (their keys), 4 slices are open.
    let mut loader = builder(0).build_batches().unwrap();
    for _ in 0..5 {
        loader.next().unwrap().unwrap();
    }
    let state = loader.save_state().unwrap();
    let json = serde_json::to_value(&state).unwrap();
    let text = json.to_string();
    assert_eq!(state.micro_batch_size, Some(4));
    assert_eq!(state.next_worker, 0);
    let worker = &json["workers"][0]["state"];
    let buffer = &worker["Worker"]["inner"]["Map"]["inner"]["Batch"]["inner"]["Map"]["inner"]["ShuffleBuffer"];
    let keys = buffer["restore_keys"].as_array().unwrap();
    assert_eq!(keys.len(), 15, "{text}");
    assert_eq!(keys[0], serde_json::json!(["MapDataset", 4, "Webdataset", 100]));
    assert_eq!(keys[14], serde_json::json!(["MapDataset", 34, "Webdataset", 57]));
    let leaf = &buffer["inner"]["Repeat"]["inner"]["Map"]["inner"]["Leaf"]["leaf"];
    assert_eq!(leaf["sample_count"], 35);
    assert_eq!(leaf["epoch"]["opened"], 4);
    let active: Vec<_> =
        leaf["epoch"]["active"].as_array().unwrap().iter().filter(|a| !a.is_null()).collect();
    assert_eq!(
        active,
        [
            &serde_json::json!({"slice": 2, "current": 105}),
            &serde_json::json!({"slice": 1, "current": 58}),
            &serde_json::json!({"slice": 3, "current": 159}),
            &serde_json::json!({"slice": 0, "current": 13}),
        ]
    );
}

/// Every item of `loader` for `n` pulls: (worker, its item index, the loader's restore key,
/// the sample keys).
fn loader_items(
    loader: &mut energon_cook::Loader<Keyed<Batch<String>>>,
    n: usize,
) -> Vec<(usize, u64, RestoreKey, Vec<String>)> {
    (0..n)
        .map(|_| {
            let item = loader.next().unwrap().unwrap();
            let global = loader.global_worker_id(item.worker);
            let key = item.value.restore_key.of_loader(LoaderWrapper::Savable, global, item.index);
            (item.worker, item.index, key, keys(&item.value))
        })
        .collect()
}

#[test]
fn worker_item_indices_continue_over_restores_and_keys_make_the_items_again() {
    for num_workers in [0, 3] {
        for checkpoint_every in [1, 4] {
            let mut loader =
                builder(num_workers).checkpoint_every(checkpoint_every).build_batches().unwrap();
            let first = loader_items(&mut loader, 7);
            let state = loader.save_state().unwrap();
            let next = loader_items(&mut loader, 5);
            let n_local = num_workers.max(1);
            let indices: Vec<(usize, u64)> =
                first.iter().chain(&next).map(|(w, i, _, _)| (*w, *i)).collect();
            let want: Vec<(usize, u64)> =
                (0..12).map(|i| (i % n_local, (i / n_local) as u64)).collect();
            assert_eq!(indices, want, "{num_workers} workers");
            let mut restored = builder(num_workers).restore_state(state).build_batches().unwrap();
            assert_eq!(loader_items(&mut restored, 5), next, "{num_workers} workers");
            // Any item, from its key alone, without a running loader.
            let maker = builder(num_workers);
            for (_, _, key, samples) in first.iter().chain(&next) {
                let item = maker.restore_batch(key).unwrap();
                assert_eq!(&item.restore_key, key);
                assert_eq!(&keys(&item), samples);
            }
        }
    }
}

#[test]
fn restore_keys_of_another_worker_or_form_are_refused() {
    let maker = builder(2);
    let inner = RestoreKey::leaf(3);
    // Rank 0 with 2 workers has the global workers 0 and 1.
    let err = maker.restore_batch(&inner.of_loader(LoaderWrapper::Savable, 2, 0)).unwrap_err();
    assert!(err.to_string().contains("rank 0 with 2 workers"), "{err}");
    let err = maker.restore_batch(&inner).unwrap_err();
    assert!(err.to_string().contains("wrapper"), "{err}");
    // A key of the right worker, but not of an item of its pipeline.
    let err = maker.restore_batch(&inner.of_loader(LoaderWrapper::Savable, 1, 0)).unwrap_err();
    assert!(err.to_string().contains("('Webdataset', 3) is not one of a"), "{err}");
}

/// The worker pipelines of a dataset built on its own (keys in batches of `batch_size`), to
/// combine with others.
fn child_batches(
    cfg: WorkerConfig,
    batch_size: usize,
) -> Vec<energon_cook::BoxStage<Batch<String>>> {
    LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
        .batch_size(Some(batch_size))
        .shuffle_buffer_size(16)
        .batch_worker_pipelines(&Default::default())
        .unwrap()
}

#[test]
fn separately_built_pipelines_blend_and_concatenate_with_loader_keys() {
    use energon_cook::{combine_pipelines, key_worker, restore_in};
    let cfg = WorkerConfig::new(1, 2, 2).unwrap();
    let child = |batch_size| child_batches(cfg, batch_size);
    for weights in [Some(&[2.0f32, 8.0][..]), None] {
        let pipelines = combine_pipelines(vec![child(2), child(5)], weights, &cfg).unwrap();
        let mut loader = LoaderStart::new(cfg).start(pipelines).unwrap();
        let items = loader_items(&mut loader, 60);
        let sizes: Vec<usize> = items.iter().map(|(_, _, _, s)| s.len()).collect();
        match weights {
            // Both children are drawn, the second about 4 times as often.
            Some(_) => {
                let fives = sizes.iter().filter(|&&n| n == 5).count();
                assert!((36..=56).contains(&fives), "{sizes:?}");
            }
            // The first child's pass comes first: batches of 2 only, this early.
            None => assert!(sizes.iter().all(|&n| n == 2), "{sizes:?}"),
        }
        let mut again = combine_pipelines(vec![child(2), child(5)], weights, &cfg).unwrap();
        for (worker, index, key, samples) in &items {
            assert_eq!(key.parts()[1], energon_cook::KeyPart::Index(2 + *worker as u64));
            assert_eq!(key.parts()[2], energon_cook::KeyPart::Index(*index));
            let local = key_worker(key, &cfg).unwrap();
            let item = restore_in(&mut again[local], key).unwrap();
            assert_eq!((&item.restore_key, &keys(&item)), (key, samples));
        }
    }
}

#[test]
fn separately_built_pipelines_restore_exactly_under_the_same_configuration() {
    use energon_cook::{
        Checkpoint, Error, InlineWorker, WorkerLink, checkpoint::PipelineConfig, combine_pipelines,
    };
    let cfg = WorkerConfig::new(0, 1, 2).unwrap();
    let child = |batch_size| child_batches(cfg, batch_size);
    let make = || combine_pipelines(vec![child(2), child(5)], Some(&[2.0, 8.0]), &cfg).unwrap();
    let mut config = PipelineConfig::default();
    config.insert("combined.weights", "[2.0, 8.0]");
    let mut start = LoaderStart::new(cfg);
    start.config = config.clone();
    let mut loader = start.start(make()).unwrap();
    loader_items(&mut loader, 13);
    let state = through_file(loader.save_state().unwrap(), false);
    let want = loader_items(&mut loader, 20);
    let mut restored = start;
    restored.restore = Some(state.clone());
    // In worker threads, and in workers that run elsewhere (here: pulled inline).
    assert_eq!(loader_items(&mut restored.start(make()).unwrap(), 20), want);
    let links = make()
        .into_iter()
        .enumerate()
        .map(|(w, p)| {
            let start = restored.worker_start(w).unwrap();
            Box::new(InlineWorker::new(p, start, 1)) as Box<dyn WorkerLink<_>>
        })
        .collect();
    assert_eq!(loader_items(&mut restored.start_linked(links).unwrap(), 20), want);
    // Another combination (other weights) or another rank refuses the state.
    let mut other = restored.clone();
    config.insert("combined.weights", "[1.0, 1.0]");
    other.config = config;
    let err = other.start(make()).err().unwrap();
    assert!(matches!(err, Error::ConfigMismatch { .. }), "{err}");
    let mut other = restored.clone();
    other.worker_config = WorkerConfig::new(1, 2, 2).unwrap();
    assert!(matches!(other.start(make()).err().unwrap(), Error::BadState { .. }));
    // A state reshaped for other workers cannot be dealt over combined pipelines.
    let mut reshaped = restored;
    let checkpoint = Checkpoint { ranks: vec![state] };
    reshaped.restore = Some(checkpoint.reshape(1, Some(3)).unwrap().ranks.swap_remove(0));
    reshaped.worker_config = WorkerConfig::new(0, 1, 3).unwrap();
    assert!(reshaped.start(make()).is_err());
}

#[test]
fn separately_built_pipelines_mix_into_batches_that_keys_make_again() {
    use std::sync::Arc;

    use energon_cook::{
        FailureStats, MixBatch, MixFn, Outputs, key_worker, mix_batch_pipelines, restore_in,
    };
    let cfg = WorkerConfig::new(0, 1, 2).unwrap();
    let child = |tag: &'static str| {
        LoaderBuilder::new(dataset(), cfg, move |raw| Ok(Some(format!("{tag}{}", raw.key))))
            .batch_size(Some(1))
            .batch_worker_pipelines(&Default::default())
            .unwrap()
    };
    // Each mixed item: the worker's item index as the hook saw it, and the blended keys.
    let mix: MixFn<Batch<String>, (u64, Vec<String>)> = Arc::new(|batches, ctx| {
        let keys = batches.iter().flat_map(keys).collect();
        Ok(Outputs::One((ctx.current_batch_index(), keys)))
    });
    let make = || {
        let mix = MixBatch {
            batch_size: 10,
            mix: Arc::clone(&mix),
            policy: Default::default(),
            stats: FailureStats::default(),
        };
        mix_batch_pipelines(vec![child("a"), child("b")], &[2.0, 8.0], mix, &cfg).unwrap()
    };
    let mut loader = LoaderStart::new(cfg).start(make()).unwrap();
    let mut again = make();
    let mut from_a = 0;
    for step in 0..40u64 {
        let item = loader.next().unwrap().unwrap();
        let (batch_index, samples) = &item.value.value;
        assert_eq!(samples.len(), 10);
        // current_batch_index is the rank's item index: workers take turns.
        assert_eq!(*batch_index, step);
        from_a += samples.iter().filter(|k| k.starts_with('a')).count();
        let global = loader.global_worker_id(item.worker);
        let key = item.value.restore_key.of_loader(LoaderWrapper::Savable, global, item.index);
        assert_eq!(key.parts()[3], energon_cook::KeyPart::Name("BatchDataset".into()));
        let restored = restore_in(&mut again[key_worker(&key, &cfg).unwrap()], &key).unwrap();
        assert_eq!(&restored.value.1, samples);
    }
    // About 2 of 10 blended batches come from the first dataset.
    assert!((50..=110).contains(&from_a), "{from_a} of 400");
}
