//! Properties of the whole loader over synthetic datasets: every epoch covers each sample once
//! across ranks and workers, the seed offset changes the order, and thread timing never does.

use std::{collections::BTreeSet, path::Path, sync::Arc, thread, time::Duration};

use energon_cook::{Batcher, Keyed, LoaderBuilder, SampleSource, Stage};
use energon_dist::WorkerConfig;
use energon_reader::RawSample;
use proptest::prelude::*;

/// Shards of `counts` samples; sample `i` has key `i`, is excluded if in `excluded`, and takes
/// `sleeps[i % len]` microseconds to read.
#[derive(Debug)]
struct Synthetic {
    counts: Vec<u64>,
    excluded: BTreeSet<u64>,
    sleeps: Vec<u64>,
    path: Arc<Path>,
}

impl Synthetic {
    fn new(counts: Vec<u64>) -> Self {
        Synthetic {
            counts,
            excluded: BTreeSet::new(),
            sleeps: Vec::new(),
            path: Path::new("synthetic").into(),
        }
    }

    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl SampleSource for Synthetic {
    fn path(&self) -> &Path {
        &self.path
    }

    fn shard_counts(&self) -> Vec<u64> {
        self.counts.clone()
    }

    fn read(&self, index: u64) -> energon_reader::Result<Option<RawSample>> {
        if !self.sleeps.is_empty() {
            let sleep = self.sleeps[(index as usize) % self.sleeps.len()];
            thread::sleep(Duration::from_micros(sleep));
        }
        if self.excluded.contains(&index) {
            return Ok(None);
        }
        Ok(Some(RawSample {
            key: index.to_string(),
            dataset: Arc::clone(&self.path),
            shard: "synthetic".into(),
            index,
            offset: 0,
            parts: Vec::new(),
        }))
    }
}

fn builder(source: &Arc<Synthetic>, cfg: WorkerConfig) -> LoaderBuilder<u64> {
    LoaderBuilder::new(Arc::clone(source), cfg, |raw| Ok(Some(raw.index)))
}

fn config(rank: usize, world_size: usize, num_workers: usize, seed_offset: i64) -> WorkerConfig {
    WorkerConfig::new(rank, world_size, num_workers).unwrap().with_seed_offset(seed_offset)
}

/// Counts of 1..40 per shard, excluded samples drawn from them.
fn dataset() -> impl Strategy<Value = (Vec<u64>, BTreeSet<u64>)> {
    prop::collection::vec(1u64..40, 1..7).prop_flat_map(|counts| {
        let total: u64 = counts.iter().sum();
        (Just(counts), prop::collection::btree_set(0..total, 0..(total as usize / 3 + 1)))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// One training epoch of every worker of every rank (shuffled slices, P slots) reads every
    /// sample that is not excluded exactly once.
    #[test]
    fn a_training_epoch_covers_every_sample_once(
        (counts, excluded) in dataset(),
        world_size in 1usize..4,
        num_workers in 0usize..4,
        msps in prop::option::of(1u64..12),
        parallel_shard_iters in 1usize..20,
        seed_offset in -3i64..3,
    ) {
        let mut source = Synthetic::new(counts);
        source.excluded = excluded;
        let source = Arc::new(source);
        let mut seen = Vec::new();
        for rank in 0..world_size {
            let b = builder(&source, config(rank, world_size, num_workers, seed_offset))
                .max_samples_per_sequence(msps)
                .parallel_shard_iters(parallel_shard_iters);
            let slices = b.worker_slices().unwrap();
            let pipelines = match b.build_sample_pipelines() {
                Ok(pipelines) => pipelines,
                // More workers than samples: training refuses workers without samples.
                Err(energon_cook::Error::Mix(energon_mix::Error::EmptyWorker { .. })) => {
                    prop_assert!(slices.iter().any(|s| s.n_samples() == 0));
                    return Ok(());
                }
                Err(err) => panic!("{err}"),
            };
            for (mut pipeline, slices) in pipelines.into_iter().zip(slices) {
                let n = (slices.start()..slices.end()).filter(|i| !source.excluded.contains(i)).count();
                for _ in 0..n {
                    seen.push(pipeline.next().unwrap().unwrap().value);
                }
            }
        }
        seen.sort_unstable();
        let want: Vec<u64> = (0..source.total()).filter(|i| !source.excluded.contains(i)).collect();
        prop_assert_eq!(seen, want);
    }

    /// A validation pass over all ranks (the loader itself, with worker threads) reads every
    /// sample that is not excluded exactly once, and then ends.
    #[test]
    fn a_validation_pass_covers_every_sample_once(
        (counts, excluded) in dataset(),
        world_size in 1usize..4,
        num_workers in 0usize..4,
        msps in prop::option::of(1u64..12),
        batch_size in 1usize..6,
    ) {
        let mut source = Synthetic::new(counts);
        source.excluded = excluded;
        let source = Arc::new(source);
        let mut seen = Vec::new();
        for rank in 0..world_size {
            let loader = builder(&source, config(rank, world_size, num_workers, 0))
                .training(false)
                .max_samples_per_sequence(msps)
                .batch_size(Some(batch_size))
                .build_batches()
                .unwrap();
            for batch in loader {
                let batch = batch.unwrap().value.value;
                prop_assert!(!batch.is_empty() && batch.len() <= batch_size);
                seen.extend(batch.samples.into_iter().map(|s| s.value));
            }
        }
        seen.sort_unstable();
        let want: Vec<u64> = (0..source.total()).filter(|i| !source.excluded.contains(i)).collect();
        prop_assert_eq!(seen, want);
    }

    /// Changing only the seed offset changes every rank's order. The datasets are built so that
    /// every worker has at least two slices of at least 15 samples, so an equal order by chance
    /// has a probability below 1e-8.
    #[test]
    fn the_seed_offset_changes_the_order(
        world_size in 1usize..4,
        num_workers in 0usize..4,
        extra_shards in 0usize..3,
        counts in prop::collection::vec(30u64..61, 64),
        other_offset in 1i64..1000,
        shuffle_buffer_size in prop::sample::select(vec![0usize, 8]),
    ) {
        let n_global = world_size * num_workers.max(1);
        let source = Arc::new(Synthetic::new(counts[..4 * n_global + extra_shards].to_vec()));
        for rank in 0..world_size {
            let order = |seed_offset| -> Vec<u64> {
                let loader = builder(&source, config(rank, world_size, num_workers, seed_offset))
                    .shuffle_buffer_size(shuffle_buffer_size)
                    .build_samples()
                    .unwrap();
                loader.take(300).map(|item| item.unwrap().value.value).collect()
            };
            prop_assert_ne!(order(0), order(other_offset), "rank {}", rank);
        }
    }

    /// Workers that take random times per sample deliver the same batches in the same order as
    /// the pipelines pulled in turn in one thread.
    #[test]
    fn the_order_never_depends_on_thread_timing(
        counts in prop::collection::vec(1u64..30, 1..6),
        sleeps in prop::collection::vec(0u64..300, 1..8),
        num_workers in 1usize..4,
        batch_size in 1usize..5,
        shuffle_buffer_size in prop::sample::select(vec![0usize, 5]),
        prefetch_factor in 1usize..4,
    ) {
        let total: u64 = counts.iter().sum();
        prop_assume!(total >= num_workers as u64);
        let quiet = Arc::new(Synthetic::new(counts.clone()));
        let mut sleepy = Synthetic::new(counts);
        sleepy.sleeps = sleeps;
        let sleepy = Arc::new(sleepy);
        let n_batches = 40;
        // In one thread: pipeline w's batches, taken in turn.
        let pipelines = builder(&quiet, config(0, 1, num_workers, 0))
            .shuffle_buffer_size(shuffle_buffer_size)
            .build_sample_pipelines()
            .unwrap();
        let mut batchers: Vec<_> = pipelines
            .into_iter()
            .map(|p| Batcher::new(p, batch_size, false).unwrap())
            .collect();
        let mut want = Vec::new();
        for turn in 0..n_batches {
            let batch = batchers[turn % num_workers].next().unwrap().unwrap();
            want.push(batch.value.samples.into_iter().map(|s: Keyed<u64>| s.value).collect::<Vec<_>>());
        }
        // On worker threads that sleep randomly while reading.
        let got: Vec<Vec<u64>> = builder(&sleepy, config(0, 1, num_workers, 0))
            .shuffle_buffer_size(shuffle_buffer_size)
            .batch_size(Some(batch_size))
            .prefetch_factor(prefetch_factor)
            .build_batches()
            .unwrap()
            .take(n_batches)
            .map(|item| item.unwrap().value.value.samples.into_iter().map(|s| s.value).collect())
            .collect();
        prop_assert_eq!(got, want);
    }
}
