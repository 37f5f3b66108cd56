//! Loaders whose workers run elsewhere: each worker's pipeline from `batch_worker`, served with
//! `serve` from a thread of its own through a channel (as a worker process serves it through a
//! socket), and `build_batches_linked` in front; the same batches, restore keys and states as
//! worker threads, also after a restore and an elastic reshape.

use std::thread;

use energon_cook::{
    Batch, Checkpoint, FailureStats, Keyed, Loader, LoaderBuilder, LoaderState, WorkerLink,
    WorkerMessage,
};
use energon_dist::WorkerConfig;

use crate::util::dataset;

fn builder(num_workers: usize) -> LoaderBuilder<String> {
    let cfg = WorkerConfig::new(0, 1, num_workers).unwrap();
    LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key)))
        .batch_size(Some(3))
        .shuffle_buffer_size(8)
        .max_samples_per_sequence(Some(5))
}

type Item = Keyed<Batch<String>>;

/// The loader with each worker served from a thread, through a channel of one slot.
fn linked(num_workers: usize, restore: Option<&LoaderState>) -> Loader<Item> {
    let with_state = |b: LoaderBuilder<String>| match restore {
        Some(state) => b.restore_state(state.clone()),
        None => b,
    };
    let links = (0..num_workers.max(1))
        .map(|w| {
            let worker =
                with_state(builder(num_workers)).batch_worker(w, &FailureStats::default()).unwrap();
            let (sender, receiver) = crossbeam_channel::bounded::<WorkerMessage<Item>>(1);
            thread::spawn(move || worker.serve(|m| sender.send(m).is_ok()));
            Box::new(receiver) as Box<dyn WorkerLink<Item>>
        })
        .collect();
    with_state(builder(num_workers)).build_batches_linked(links).unwrap()
}

fn threads(num_workers: usize, restore: Option<&LoaderState>) -> Loader<Item> {
    let b = builder(num_workers);
    match restore {
        Some(state) => b.restore_state(state.clone()).build_batches().unwrap(),
        None => b.build_batches().unwrap(),
    }
}

/// Each batch's worker, index and restore key.
fn take(loader: &mut Loader<Item>, n: usize) -> Vec<(usize, u64, String)> {
    (0..n)
        .map(|_| {
            let loaded = loader.next().unwrap().unwrap();
            (loaded.worker, loaded.index, loaded.value.restore_key.to_string())
        })
        .collect()
}

#[test]
fn linked_workers_give_the_batches_and_states_of_threads() {
    for num_workers in [1, 2, 3] {
        let mut a = threads(num_workers, None);
        let mut b = linked(num_workers, None);
        assert_eq!(take(&mut a, 11), take(&mut b, 11), "{num_workers} workers");
        let (sa, sb) = (a.save_state().unwrap(), b.save_state().unwrap());
        assert_eq!(sa, sb);
        let want = take(&mut a, 9);
        assert_eq!(take(&mut b, 9), want);
        // Saved by either, restored by either.
        assert_eq!(take(&mut linked(num_workers, Some(&sa)), 9), want);
        assert_eq!(take(&mut threads(num_workers, Some(&sb)), 9), want);
    }
}

#[test]
fn linked_workers_restore_a_state_reshaped_for_another_number_of_workers() {
    let mut old = threads(3, None);
    take(&mut old, 7);
    let state = old.save_state().unwrap();
    let reshaped = Checkpoint { ranks: vec![state] }.reshape(1, Some(2)).unwrap();
    let state = reshaped.ranks.into_iter().next().unwrap();
    let want = take(&mut threads(2, Some(&state)), 20);
    assert_eq!(take(&mut linked(2, Some(&state)), 20), want);
}

#[test]
fn a_worker_beyond_the_workers_is_refused() {
    let err = builder(2).batch_worker(2, &FailureStats::default()).unwrap_err();
    assert!(err.to_string().contains("worker"), "{err}");
}
