//! Cost of resuming on another number of ranks and workers, for a 10M-sample dataset of 10,000
//! shards that reads nothing (a synthetic source): a job of 8 ranks x 4 workers, shuffle buffer
//! 100, batches of 32, saved after 50 batches per rank, resumed on 6 ranks x 3 workers.
//! `reshape` is the rewrite of the states, `restore` a new rank's build with the dealing (the
//! loader's start included); the state sizes are printed once.

use std::{
    hint::black_box,
    path::{Path, PathBuf},
    sync::Arc,
};

use criterion::{Criterion, criterion_group, criterion_main};
use energon_cook::{Checkpoint, LoaderBuilder, LoaderState, checkpoint::Encoding};
use energon_dist::WorkerConfig;
use energon_reader::RawSample;

const SHARDS: usize = 10_000;
const PER_SHARD: u64 = 1_000;

/// Ten million samples of nothing.
#[derive(Debug)]
struct Synthetic {
    path: PathBuf,
    root: Arc<Path>,
    shard: Arc<str>,
}

impl energon_cook::SampleSource for Synthetic {
    fn path(&self) -> &Path {
        &self.path
    }

    fn shard_counts(&self) -> Vec<u64> {
        vec![PER_SHARD; SHARDS]
    }

    fn read(&self, index: u64) -> energon_reader::Result<Option<RawSample>> {
        Ok(Some(RawSample {
            key: index.to_string(),
            dataset: Arc::clone(&self.root),
            shard: Arc::clone(&self.shard),
            index,
            offset: 0,
            parts: Vec::new(),
        }))
    }
}

fn builder(
    source: &Arc<Synthetic>,
    rank: usize,
    world: usize,
    workers: usize,
) -> LoaderBuilder<u64> {
    let cfg = WorkerConfig::new(rank, world, workers).expect("valid config");
    LoaderBuilder::new(Arc::clone(source), cfg, |raw| Ok(Some(raw.index)))
        .shuffle_buffer_size(100)
        .batch_size(Some(32))
}

fn saved(source: &Arc<Synthetic>) -> Checkpoint {
    let ranks: Vec<LoaderState> = (0..8)
        .map(|rank| {
            let mut loader = builder(source, rank, 8, 4).build_batches().expect("loader");
            for _ in 0..50 {
                black_box(loader.next().expect("never ends").expect("no error"));
            }
            loader.save_state().expect("state")
        })
        .collect();
    Checkpoint { ranks }
}

#[allow(clippy::print_stdout)]
fn bench(c: &mut Criterion) {
    let path = PathBuf::from("synthetic");
    let source = Arc::new(Synthetic {
        root: Arc::from(path.as_path()),
        path,
        shard: Arc::from("synthetic.tar"),
    });
    let old = saved(&source);
    let reshaped = old.reshape(6, Some(3)).expect("reshape");
    let size = |c: Checkpoint| c.to_bytes(Encoding::Binary).expect("bytes").len();
    println!(
        "state bytes: old job {} (8 ranks), one new rank {} before restoring, {} after",
        size(old.clone()),
        size(Checkpoint::of_rank(reshaped.ranks[0].clone())),
        {
            let mut loader = builder(&source, 0, 6, 3)
                .restore_state(reshaped.ranks[0].clone())
                .build_batches()
                .expect("restored");
            black_box(loader.next());
            size(Checkpoint::of_rank(loader.save_state().expect("state")))
        }
    );
    let mut group = c.benchmark_group("reshape_10m");
    group.sample_size(10);
    group.bench_function("reshape", |b| {
        b.iter(|| black_box(old.reshape(6, Some(3)).expect("reshape")));
    });
    group.bench_function("restore", |b| {
        b.iter(|| {
            let loader = builder(&source, 0, 6, 3)
                .restore_state(reshaped.ranks[0].clone())
                .build_batches()
                .expect("restored");
            black_box(loader)
        });
    });
    group.bench_function("fresh", |b| {
        b.iter(|| black_box(builder(&source, 0, 6, 3).build_batches().expect("fresh")));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
