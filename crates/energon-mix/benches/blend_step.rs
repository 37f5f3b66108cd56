//! Per-step cost of the combining stages, without reading samples: a weighted blend of 8 leaves
//! (each repeated forever) and an epochized blend of 8 leaves with fractional repetitions, each
//! leaf 10,000 samples in 100 slices of one worker with 16 open slices, items carrying their leaf
//! index only.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use energon_dist::{WorkerConfig, shard_workers};
use energon_mix::{Blend, Mix, ReadLeaf, Repeat, Source};
use energon_reader::leaf::{LeafConfig, LeafIter};

type Leaf = ReadLeaf<fn(u64) -> energon_mix::Result<Option<u64>>>;

const N_LEAVES: usize = 8;
const STEPS: u64 = 100_000;

fn keep(index: u64) -> energon_mix::Result<Option<u64>> {
    Ok(Some(index))
}

fn leaf(id: usize) -> Mix<Leaf> {
    let cfg = WorkerConfig::new(0, 1, 0).expect("valid config").with_seed_offset(id as i64);
    let slices = shard_workers(&[100; 100], None, &cfg, 0, None).expect("slices").remove(0);
    let rng = cfg.worker_rng(0).expect("worker 0");
    let iter = LeafIter::new(slices, LeafConfig::TRAIN, rng).expect("leaf");
    Mix::Leaf(ReadLeaf::new(id, iter, keep as fn(u64) -> _))
}

fn weighted() -> Mix<Leaf> {
    let children = (0..N_LEAVES).map(|i| Mix::Repeat(Box::new(Repeat::forever(leaf(i))))).collect();
    let weights = (0..N_LEAVES).map(|i| 1.0 + i as f32).collect();
    let rng = WorkerConfig::new(0, 1, 0).expect("valid config").worker_rng(0).expect("worker 0");
    Mix::Blend(Blend::new(children, weights, rng).expect("blend"))
}

fn epochized() -> Mix<Leaf> {
    let children = (0..N_LEAVES)
        .map(|i| {
            let repeats = 0.3 + 0.7 * i as f64;
            Mix::Repeat(Box::new(Repeat::times(leaf(i), repeats).expect("repeats")))
        })
        .collect();
    let weights = (0..N_LEAVES).map(|i| 10_000.0 * (0.3 + 0.7 * i as f32)).collect();
    let rng = WorkerConfig::new(0, 1, 0).expect("valid config").worker_rng(0).expect("worker 0");
    let blend = Mix::Blend(Blend::new(children, weights, rng).expect("blend"));
    Mix::Repeat(Box::new(Repeat::forever(blend)))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("blend_step");
    group.throughput(Throughput::Elements(STEPS));
    group.sample_size(20);
    for (name, make) in [("weighted", weighted as fn() -> Mix<Leaf>), ("epochized", epochized)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                make,
                |mut mix| {
                    for _ in 0..STEPS {
                        black_box(mix.next().expect("no error").expect("never ends"));
                    }
                },
                criterion::BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
