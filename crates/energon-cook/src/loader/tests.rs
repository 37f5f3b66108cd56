//! Tests of the loader: round-robin order, errors, panics, and independence from thread timing.

use std::{thread, time::Duration};

use proptest::prelude::*;

use super::*;
use crate::FnStage;

/// A pipeline yielding `(worker, 0..n)` once, sleeping before item `i` for `sleeps[i % len]`
/// microseconds.
fn pipeline(worker: usize, n: usize, sleeps: Vec<u64>) -> Box<dyn Stage<Item = (usize, usize)>> {
    let mut i = 0;
    Box::new(FnStage::new(n as u64, move || {
        if i == n {
            return Ok(None);
        }
        if !sleeps.is_empty() {
            thread::sleep(Duration::from_micros(sleeps[i % sleeps.len()]));
        }
        i += 1;
        Ok(Some((worker, i - 1)))
    }))
}

/// The round-robin order over workers with these lengths, computed directly.
fn round_robin(lengths: &[usize]) -> Vec<(usize, usize)> {
    let mut res = Vec::new();
    for i in 0..lengths.iter().copied().max().unwrap_or(0) {
        for (w, &n) in lengths.iter().enumerate() {
            if i < n {
                res.push((w, i));
            }
        }
    }
    res
}

fn collect(loader: Loader<(usize, usize)>) -> Vec<(usize, usize)> {
    loader
        .map(|item| {
            let item = item.unwrap();
            assert_eq!(item.worker, item.value.0);
            item.value
        })
        .collect()
}

fn threads(num_workers: usize) -> LoaderConfig {
    LoaderConfig { num_workers, prefetch_factor: 2 }
}

#[test]
fn exhausted_workers_are_skipped() {
    let lengths = [3, 1, 2];
    let pipelines = lengths.iter().enumerate().map(|(w, &n)| pipeline(w, n, vec![])).collect();
    let got = collect(Loader::new(pipelines, threads(3)).unwrap());
    assert_eq!(got, [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1), (0, 2)]);
    assert_eq!(got, round_robin(&lengths));
}

#[test]
fn without_workers_the_pipeline_runs_in_the_caller() {
    let caller = thread::current().id();
    let mut i: usize = 0;
    let stage = FnStage::new(3, move || {
        assert_eq!(thread::current().id(), caller);
        i += 1;
        Ok((i <= 3).then_some((0usize, i - 1)))
    });
    let loader = Loader::new(vec![Box::new(stage) as Box<dyn Stage<Item = _>>], threads(0));
    assert_eq!(collect(loader.unwrap()), [(0, 0), (0, 1), (0, 2)]);
}

#[test]
fn an_error_is_delivered_in_turn_and_ends_the_loader() {
    let mut i = 0;
    let failing = FnStage::new(5, move || {
        i += 1;
        if i == 2 {
            return Err(Error::InvalidSetting {
                setting: "test",
                value: "2".into(),
                reason: "boom",
            });
        }
        Ok(Some((1, i - 1)))
    });
    let pipelines: Vec<Box<dyn Stage<Item = (usize, usize)>>> =
        vec![pipeline(0, 10, vec![]), Box::new(failing)];
    let mut loader = Loader::new(pipelines, threads(2)).unwrap();
    assert_eq!(loader.next().unwrap().unwrap().value, (0, 0));
    assert_eq!(loader.next().unwrap().unwrap().value, (1, 0));
    assert_eq!(loader.next().unwrap().unwrap().value, (0, 1));
    let err = loader.next().unwrap().unwrap_err();
    assert!(matches!(err, Error::InvalidSetting { setting: "test", .. }), "{err}");
    assert!(loader.next().is_none());
}

#[test]
fn a_panicking_worker_is_reported() {
    let panicking = FnStage::new(1, || -> Result<Option<(usize, usize)>> {
        panic!("worker exploded");
    });
    let pipelines: Vec<Box<dyn Stage<Item = (usize, usize)>>> =
        vec![pipeline(0, 10, vec![]), Box::new(panicking)];
    let mut loader = Loader::new(pipelines, threads(2)).unwrap();
    assert_eq!(loader.next().unwrap().unwrap().value, (0, 0));
    match loader.next().unwrap() {
        Err(Error::WorkerPanicked { worker: 1, message }) => {
            assert_eq!(message, "worker exploded");
        }
        other => panic!("expected a panic report, got {other:?}"),
    }
    assert!(loader.next().is_none());
}

#[test]
fn settings_are_checked() {
    let two = || vec![pipeline(0, 1, vec![]), pipeline(1, 1, vec![])];
    assert!(Loader::new(two(), threads(3)).is_err());
    assert!(Loader::new(two(), threads(0)).is_err());
    assert!(Loader::new(two(), LoaderConfig { num_workers: 2, prefetch_factor: 0 }).is_err());
}

#[test]
fn dropping_a_loader_stops_blocked_workers() {
    // Infinite pipelines: the workers block on full channels; dropping must not hang.
    let forever = |w: usize| -> Box<dyn Stage<Item = (usize, usize)>> {
        let mut i = 0;
        Box::new(FnStage::new(1, move || {
            i += 1;
            Ok(Some((w, i)))
        }))
    };
    let mut loader = Loader::new(vec![forever(0), forever(1)], threads(2)).unwrap();
    assert_eq!(loader.next().unwrap().unwrap().worker, 0);
    drop(loader);
}

/// An endless pipeline of `(worker, i)` that cannot save its state (a closure).
fn endless(worker: usize) -> Box<dyn Stage<Item = (usize, usize)>> {
    let mut i = 0;
    Box::new(FnStage::new(1, move || {
        i += 1;
        Ok(Some((worker, i - 1)))
    }))
}

#[test]
fn pipelines_that_cannot_save_are_restored_by_replaying() {
    for num_workers in [0, 1, 3] {
        let pipelines = || (0..num_workers.max(1)).map(endless).collect::<Vec<_>>();
        let mut loader = Loader::new(pipelines(), threads(num_workers)).unwrap();
        let first: Vec<_> = (&mut loader).take(7).map(|i| i.unwrap().value).collect();
        let state = loader.save_state().unwrap();
        assert!(state.workers.iter().all(|w| w.state.is_none()), "{state:?}");
        let replays: u64 = state.workers.iter().map(|w| w.replay).sum();
        assert_eq!(replays, 7);
        let want: Vec<_> = loader.take(5).map(|i| i.unwrap().value).collect();
        let restored = Loader::restored(pipelines(), threads(num_workers), &state).unwrap();
        let got: Vec<_> = restored.take(5).map(|i| i.unwrap().value).collect();
        assert_eq!(got, want, "{num_workers} workers after {first:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever each worker's timing, the items come out in the same round-robin order.
    #[test]
    fn the_order_never_depends_on_thread_timing(
        workers in prop::collection::vec(
            (0usize..12, prop::collection::vec(0u64..400, 1..6)),
            1..5,
        ),
        prefetch_factor in 1usize..4,
    ) {
        let lengths: Vec<usize> = workers.iter().map(|(n, _)| *n).collect();
        let pipelines = workers
            .into_iter()
            .enumerate()
            .map(|(w, (n, sleeps))| pipeline(w, n, sleeps))
            .collect();
        let config = LoaderConfig { num_workers: lengths.len(), prefetch_factor };
        let got = collect(Loader::new(pipelines, config).unwrap());
        prop_assert_eq!(got, round_robin(&lengths));
    }
}

type Link = Box<dyn WorkerLink<(usize, usize)>>;

/// A linked loader over `pipelines`, each made a link by `link` with its start.
fn linked_by(
    pipelines: Vec<Box<dyn Stage<Item = (usize, usize)>>>,
    options: StartOptions,
    link: impl Fn(Box<dyn Stage<Item = (usize, usize)>>, WorkerStart) -> Link,
) -> Loader<(usize, usize)> {
    let (starts, _) = options.checked_starts(pipelines.len()).unwrap();
    let links = pipelines.into_iter().zip(starts).map(|(p, start)| link(p, start)).collect();
    Loader::linked(links, options).unwrap()
}

/// A linked loader over `pipelines`, each served from a thread of its own through a channel of
/// one slot (as a worker process serves its pipeline through a socket).
fn served(
    pipelines: Vec<Box<dyn Stage<Item = (usize, usize)>>>,
    options: StartOptions,
) -> Loader<(usize, usize)> {
    linked_by(pipelines, options, |pipeline, start| {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        thread::spawn(move || serve_worker(pipeline, &start, 1, |m| sender.send(m).is_ok()));
        Box::new(receiver)
    })
}

/// A linked loader whose pipelines are pulled in line.
fn inline(
    pipelines: Vec<Box<dyn Stage<Item = (usize, usize)>>>,
    options: StartOptions,
) -> Loader<(usize, usize)> {
    linked_by(pipelines, options, |p, start| Box::new(InlineWorker::new(p, start, 1)))
}

#[test]
fn linked_workers_give_the_order_and_indices_of_threads() {
    let lengths = [4, 0, 2, 5];
    let make = || lengths.iter().enumerate().map(|(w, &n)| pipeline(w, n, vec![])).collect();
    let want: Vec<_> = Loader::new(make(), threads(4))
        .unwrap()
        .map(|i| i.map(|l| (l.worker, l.index, l.value)).unwrap())
        .collect();
    for loader in [served(make(), StartOptions::default()), inline(make(), StartOptions::default())]
    {
        let got: Vec<_> =
            loader.map(|i| i.map(|l| (l.worker, l.index, l.value)).unwrap()).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn a_state_saved_by_linked_workers_restores_in_threads_and_back() {
    let make = || (0..3).map(endless).collect::<Vec<_>>();
    let mut linked = served(make(), StartOptions::default());
    let _: Vec<_> = (&mut linked).take(8).collect();
    let state = linked.save_state().unwrap();
    let want: Vec<_> = linked.take(7).map(|i| i.unwrap().value).collect();
    let threaded = Loader::restored(make(), threads(3), &state).unwrap();
    let got: Vec<_> = threaded.take(7).map(|i| i.unwrap().value).collect();
    assert_eq!(got, want);
    for loader in [
        served(make(), StartOptions::of_state(&state)),
        inline(make(), StartOptions::of_state(&state)),
    ] {
        let got: Vec<_> = loader.take(7).map(|i| i.unwrap().value).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn a_link_that_ends_without_a_word_is_an_error_naming_the_worker() {
    let (sender, receiver) = crossbeam_channel::bounded::<WorkerMessage<(usize, usize)>>(1);
    sender.send(WorkerMessage::Resumed(0)).unwrap();
    drop(sender);
    let links: Vec<Box<dyn WorkerLink<(usize, usize)>>> = vec![
        Box::new(InlineWorker::new(endless(0), WorkerStart::default(), 1)),
        Box::new(receiver),
    ];
    let mut loader = Loader::linked(links, StartOptions::default()).unwrap();
    assert_eq!(loader.next().unwrap().unwrap().value, (0, 0));
    let err = loader.next().unwrap().unwrap_err();
    assert!(matches!(err, Error::WorkerPanicked { worker: 1, .. }), "{err}");
    assert!(loader.next().is_none());
}
