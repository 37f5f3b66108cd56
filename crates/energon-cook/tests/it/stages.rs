//! The task encoder's stages through the loader: the reference's whole-batch drop on mixed
//! sample types, failure tolerance, fatal errors, virtual epochs, validation limits, group
//! batching, packing, micro batch changes and refused restores.

use std::sync::Arc;

use energon_cook::{
    Batch, Cooker, DefaultTaskEncoder, Error, ErrorPolicy, HookError, HookResult, Hooks, Keyed,
    LoaderBuilder, Outputs, SampleContext, TaskEncoder,
};
use energon_dist::WorkerConfig;
use energon_mix::{LeafSample, MixOptions, MixPlan, ResolveOptions};

use crate::util::{data, dataset, pull};

/// A sample as the mixed-type test sees it: its key and its type.
type Typed = (String, &'static str);

fn mixed_loader(num_workers: usize) -> energon_cook::Loader<Keyed<Batch<Typed>>> {
    let split = energon_mix::resolve_path(
        &data("blend-mixed-types.yaml"),
        "train",
        &ResolveOptions::default(),
    )
    .unwrap();
    let cfg = WorkerConfig::new(0, 1, num_workers).unwrap();
    let plan = MixPlan::new(split, cfg, MixOptions::default()).unwrap();
    let load = |s: LeafSample| {
        let LeafSample::Raw(raw) = s else { unreachable!("no join") };
        let typed = if raw.parts.iter().any(|p| p.name == "jpg") {
            "CaptioningSample"
        } else {
            "CrudeSample"
        };
        Ok(Some((raw.key, typed)))
    };
    let encoder = DefaultTaskEncoder::default()
        .with_cookers(vec![Cooker::new(|(key, _): Typed, _| Ok((key, "TextSample")))])
        .checking_sample_types(|s: &Typed| s.1);
    LoaderBuilder::from_plan(plan, load)
        .task_encoder(encoder)
        .batch_size(Some(4))
        .build_batches()
        .unwrap()
}

#[test]
fn mixed_sample_types_drop_whole_batches_as_the_reference_does() {
    for num_workers in [0, 2] {
        let want = std::fs::read_to_string(data(&format!(
            "reference-blend-mixed-types-bs4-nw{num_workers}.txt"
        )))
        .unwrap();
        let mut loader = mixed_loader(num_workers);
        let mut got = Vec::new();
        while got.len() < 80 {
            let batch = loader.next().unwrap().unwrap();
            let types: Vec<&str> = batch.value.value.samples.iter().map(|s| s.value.1).collect();
            assert!(types.iter().all(|t| *t == types[0]), "{types:?}");
            got.extend(batch.value.value.samples.iter().map(|s| s.value.0.clone()));
        }
        assert_eq!(got, want.lines().collect::<Vec<_>>(), "{num_workers} workers");
        let failures = loader.failures().by_hook();
        assert!(failures["batch"].failed > 10, "{failures:?}");
    }
}

/// An encoder whose `encode_sample` fails as `fail` says.
struct Failing(fn(u64) -> HookResult<u64>);

impl TaskEncoder for Failing {
    type Sample = String;
    type Encoded = u64;
    type Batch = Batch<u64>;
    type Output = Batch<u64>;

    fn hooks(&self) -> Hooks {
        Hooks { encode_sample: true, ..Hooks::NONE }
    }

    fn encode_sample(&self, key: String, _: &SampleContext) -> HookResult<Outputs<u64>> {
        (self.0)(key.parse()?).map(Outputs::One)
    }
}

/// A validation loader (the samples come sequentially, so failures of even samples alternate)
/// whose `encode_sample` fails as `fail` says.
fn failing(fail: fn(u64) -> HookResult<u64>, tolerance: u64) -> energon_cook::Loader<Keyed<u64>> {
    failing_in(false, fail, tolerance)
}

fn failing_in(
    training: bool,
    fail: fn(u64) -> HookResult<u64>,
    tolerance: u64,
) -> energon_cook::Loader<Keyed<u64>> {
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
        .training(training)
        .task_encoder(Failing(fail))
        .error_policy(ErrorPolicy::with_tolerance(tolerance))
        .build_samples()
        .unwrap()
}

/// An encoder whose `encode_sample` gives no value for any sample (a generator that yields
/// nothing), or for all but one key.
struct Nothing(Option<&'static str>);

impl TaskEncoder for Nothing {
    type Sample = String;
    type Encoded = String;
    type Batch = Batch<String>;
    type Output = Batch<String>;

    fn hooks(&self) -> Hooks {
        Hooks { encode_sample: true, ..Hooks::NONE }
    }

    fn encode_sample(&self, key: String, _: &SampleContext) -> HookResult<Outputs<String>> {
        Ok(Outputs::Many(if Some(key.as_str()) == self.0 { vec![key] } else { Vec::new() }))
    }
}

#[test]
fn hooks_that_give_nothing_for_two_passes_end_the_loader_instead_of_looping() {
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    let loader = |encoder| {
        LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
            .task_encoder(encoder)
            .build_samples()
            .unwrap()
    };
    let err = loader(Nothing(None)).next().unwrap().unwrap_err();
    assert!(
        matches!(
            err,
            Error::AllDropped { hook: "encode_sample", dropped: 400, len_worker: 200, .. }
        ),
        "{err}"
    );
    // One sample of the 200 gives a value: the loader goes on, pass after pass.
    let mut loader = loader(Nothing(Some("00000123")));
    for _ in 0..5 {
        assert_eq!(loader.next().unwrap().unwrap().value.value, "00000123");
    }
}

#[test]
fn failures_are_dropped_counted_and_stop_the_loader_at_the_tolerance() {
    // Every other sample fails: never 3 in a row.
    let mut loader = failing(|n| if n % 2 == 0 { Err(HookError::msg("even")) } else { Ok(n) }, 3);
    let items: Vec<u64> = (0..50).map(|_| loader.next().unwrap().unwrap().value.value).collect();
    assert!(items.iter().all(|n| n % 2 == 1));
    let failed = loader.failures().failed();
    assert!((40..=60).contains(&failed), "{failed}");
    // Everything fails: the third failure in a row stops the loader.
    let mut loader = failing(|_| Err(HookError::msg("broken")), 3);
    let err = loader.next().unwrap().unwrap_err();
    assert!(matches!(err, Error::TooManyFailures { hook: "encode_sample", count: 3, .. }), "{err}");
    assert!(err.to_string().contains("broken"), "{err}");
    assert!(loader.next().is_none());
    // A tolerance beyond two passes over the worker's 200 samples: the tolerance ends it, with
    // the failure error, as the reference ends it (not as a loader of nothing to load).
    let mut loader = failing_in(true, |_| Err(HookError::msg("broken")), 500);
    let err = loader.next().unwrap().unwrap_err();
    assert!(matches!(err, Error::TooManyFailures { count: 500, .. }), "{err}");
    // Skips are counted, not failures.
    let mut loader = failing(|n| if n % 3 == 0 { Err(HookError::Skip) } else { Ok(n) }, 1);
    for _ in 0..30 {
        loader.next().unwrap().unwrap();
    }
    assert!(loader.failures().skipped() >= 10);
    assert_eq!(loader.failures().failed(), 0);
    // A fatal error stops at once.
    let mut loader = failing(|n| if n == 7 { Err(HookError::fatal_msg("no")) } else { Ok(n) }, 0);
    let err = loop {
        match loader.next().unwrap() {
            Ok(_) => {}
            Err(err) => break err,
        }
    };
    assert!(matches!(err, Error::Fatal { hook: "encode_sample", .. }), "{err}");
}

fn keys_loader(num_workers: usize) -> LoaderBuilder<String> {
    let cfg = WorkerConfig::new(0, 1, num_workers).unwrap();
    LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
}

#[test]
fn virtual_epochs_split_over_the_workers_and_continue_the_stream() {
    let by_worker = |loader: &mut energon_cook::Loader<Keyed<String>>, n: usize| {
        let mut res = vec![Vec::new(), Vec::new()];
        for _ in 0..n {
            let item = loader.next().unwrap().unwrap();
            res[item.worker].push(item.value.value);
        }
        res
    };
    let mut loader = keys_loader(2).virtual_epoch_length(7).build_samples().unwrap();
    let first = by_worker(&mut loader, 7);
    assert!(loader.next().is_none(), "an epoch is 7 items");
    let second = by_worker(&mut loader, 7);
    assert!(loader.next().is_none());
    // Worker 0 has 4 items per epoch, worker 1 has 3.
    assert_eq!((first[0].len(), first[1].len()), (4, 3));
    // Each epoch continues the workers' streams.
    let mut plain = keys_loader(2).build_samples().unwrap();
    let plain = by_worker(&mut plain, 16);
    for w in 0..2 {
        let epochs: Vec<&String> = first[w].iter().chain(&second[w]).collect();
        assert_eq!(epochs, plain[w].iter().take(epochs.len()).collect::<Vec<_>>());
    }
}

#[test]
fn validation_limits_restart_every_pass() {
    let loader = || keys_loader(2).training(false).limit(Some(5)).build_samples().unwrap();
    let mut loader = loader();
    let first = pull(&mut loader, 6);
    let second = pull(&mut loader, 6);
    assert_eq!(first, second);
    assert_eq!(first[5], "END");
    // Worker 0 reads 3 of its samples (100..), worker 1 two of its own, in turn.
    let keys: Vec<&str> = first[..5].iter().map(|k| k.rsplit(' ').next().unwrap()).collect();
    assert_eq!(
        keys,
        ["\"00000000\"", "\"00000100\"", "\"00000001\"", "\"00000101\"", "\"00000002\""]
    );
}

/// Groups samples by the parity of their index: buckets of 2 (even) and 3 (odd).
struct Parity;

impl TaskEncoder for Parity {
    type Sample = String;
    type Encoded = String;
    type Batch = Batch<String>;
    type Output = Batch<String>;

    fn hooks(&self) -> Hooks {
        Hooks { batch_group_criterion: true, ..Hooks::NONE }
    }

    fn batch_group_criterion(
        &self,
        key: &String,
        _: &SampleContext,
    ) -> HookResult<(String, Option<usize>)> {
        let odd = key.parse::<u64>()? % 2;
        Ok((if odd == 1 { "odd" } else { "even" }.to_owned(), Some(2 + odd as usize)))
    }
}

#[test]
fn group_batches_have_their_bucket_sizes_and_flush_in_opening_order() {
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    let loader = |drop_last| {
        LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
            .training(false)
            .task_encoder(Parity)
            .drop_last(drop_last)
            .build_batches()
            .unwrap()
    };
    let batches: Vec<Vec<String>> = loader(false)
        .map(|b| b.unwrap().value.value.samples.into_iter().map(|s| s.value).collect())
        .collect();
    assert_eq!(batches[0], ["00000000", "00000002"]);
    assert_eq!(batches[1], ["00000001", "00000003", "00000005"]);
    // 100 even samples in 50 batches, 100 odd ones in 33 batches and a last one of 1.
    assert_eq!(batches.len(), 50 + 34);
    assert_eq!(batches.last().unwrap(), &["00000199"]);
    assert_eq!(loader(true).count(), 50 + 33);
    // A criterion's size together with the loader's is refused.
    let err = LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
        .task_encoder(Parity)
        .batch_size(Some(4))
        .build_batches()
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidSetting { setting: "batch_group_criterion", .. }), "{err}");
}

/// Packs consecutive samples in pairs; the odd one out of a buffer is dropped.
struct Pairs;

impl TaskEncoder for Pairs {
    type Sample = String;
    type Encoded = String;
    type Batch = Batch<String>;
    type Output = Batch<String>;

    fn hooks(&self) -> Hooks {
        Hooks { packing: true, ..Hooks::NONE }
    }

    fn select_samples_to_pack(
        &self,
        samples: &[Keyed<String>],
        _: &SampleContext,
    ) -> HookResult<Vec<Vec<usize>>> {
        Ok((0..samples.len() / 2).map(|i| vec![2 * i, 2 * i + 1]).collect())
    }

    fn pack_selected_samples(
        &self,
        samples: Vec<Keyed<String>>,
        _: &SampleContext,
    ) -> HookResult<Outputs<String>> {
        Ok(Outputs::One(samples.into_iter().map(|s| s.value).collect::<Vec<_>>().join("+")))
    }
}

#[test]
fn packing_fills_the_buffer_selects_and_packs() {
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    let packs: Vec<String> = LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
        .training(false)
        .task_encoder(Pairs)
        .packing_buffer_size(Some(5))
        .build_samples()
        .unwrap()
        .map(|p| p.unwrap().value.value)
        .collect();
    // Buffers of 5: two pairs each, the fifth sample dropped; then refilled.
    assert_eq!(&packs[..3], ["00000000+00000001", "00000002+00000003", "00000005+00000006"]);
    assert_eq!(packs.len(), 80);
    // Without the packing hooks, a packing buffer is refused.
    let err = keys_loader(0).packing_buffer_size(Some(5)).build_samples().unwrap_err();
    assert!(matches!(err, Error::MissingHook { .. }), "{err}");
}

#[test]
fn a_smaller_micro_batch_continues_with_the_same_samples() {
    for num_workers in [0, 2] {
        let builder = |bs| keys_loader(num_workers).shuffle_buffer_size(10).batch_size(Some(bs));
        let mut loader = builder(4).build_batches().unwrap();
        for _ in 0..6 {
            loader.next().unwrap().unwrap();
        }
        let state = loader.save_state().unwrap();
        let samples = |batches: Vec<Keyed<Batch<String>>>| -> Vec<String> {
            batches.into_iter().flat_map(|b| b.value.samples.into_iter().map(|s| s.value)).collect()
        };
        // Per worker, the continuation holds the same samples in the same order.
        let per_worker = |loader: energon_cook::Loader<Keyed<Batch<String>>>, n| {
            let mut res = vec![Vec::new(); num_workers.max(1)];
            for item in loader.take(n) {
                let item = item.unwrap();
                res[item.worker].push(item.value);
            }
            res.into_iter().map(samples).collect::<Vec<_>>()
        };
        let want = per_worker(loader, 8);
        let got = per_worker(builder(2).restore_state(state.clone()).build_batches().unwrap(), 16);
        assert_eq!(got, want, "{num_workers} workers");
        for bad in [3, 8] {
            let err = builder(bad).restore_state(state.clone()).build_batches().unwrap_err();
            assert!(matches!(err, Error::ConfigMismatch { .. }), "{bad}: {err}");
        }
    }
}

#[test]
fn a_checkpoint_of_another_loader_is_refused_with_what_differs() {
    let mut loader =
        keys_loader(2).shuffle_buffer_size(10).batch_size(Some(4)).build_batches().unwrap();
    loader.next().unwrap().unwrap();
    let state = loader.save_state().unwrap();
    let other =
        keys_loader(2).shuffle_buffer_size(20).batch_size(Some(4)).restore_state(state.clone());
    let err = other.build_batches().unwrap_err();
    assert!(
        err.to_string().contains("shuffle_buffer_size is 10 in the checkpoint but 20"),
        "{err}"
    );
    let fewer =
        keys_loader(1).shuffle_buffer_size(10).batch_size(Some(4)).restore_state(state.clone());
    let err = fewer.build_batches().unwrap_err();
    assert!(err.to_string().contains("worker_config.num_workers is 2"), "{err}");
    // Another dataset: the fixture's JSONL file.
    let jsonl = Arc::new(
        energon_reader::Dataset::open(
            &crate::util::fixture().join("jsonl/data.jsonl"),
            &energon_reader::OpenOptions::default(),
        )
        .unwrap(),
    );
    let cfg = WorkerConfig::new(0, 1, 2).unwrap();
    let err = LoaderBuilder::new(jsonl, cfg, |raw| Ok(Some(raw.key)))
        .shuffle_buffer_size(10)
        .batch_size(Some(4))
        .restore_state(state)
        .build_batches()
        .unwrap_err();
    assert!(err.to_string().contains("leaf.0.shards is 4 shards, 200 samples"), "{err}");
}

#[test]
fn crude_datasets_need_a_matching_cooker() {
    let mut subflavors = serde_json::Map::new();
    subflavors.insert("source".to_owned(), "web".into());
    let cooker = Cooker::new(|s: String, _| Ok(s)).has_subflavors(subflavors.clone());
    let encoder = DefaultTaskEncoder::default().with_cookers(vec![cooker]);
    let cfg = WorkerConfig::new(0, 1, 0).unwrap();
    let build = |flavors| {
        LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
            .task_encoder(encoder.clone())
            .crude(true)
            .subflavors(flavors)
            .build_samples()
    };
    let err = build(None).unwrap_err();
    assert!(matches!(err, Error::NoCooker { .. }), "{err}");
    let mut loader = build(Some(subflavors)).unwrap();
    let key = loader.next().unwrap().unwrap().value.restore_key.to_string();
    // encode_sample, cook_crude_sample, load_sample, leaf.
    assert!(
        key.starts_with("('MapDataset', 0, 'MapDataset', 0, 'MapDataset', 0, 'Webdataset', "),
        "{key}"
    );
}
