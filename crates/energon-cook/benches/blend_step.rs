//! Per-step cost of the combining stages, without reading samples: a weighted blend of 8 leaves
//! (each repeated forever) and an epochized blend of 8 leaves with fractional repetitions, each
//! leaf 10,000 samples in 100 slices of one worker with 16 open slices, items carrying their
//! sample index and restore key only.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use energon_cook::{Blend, BoxStage, LeafSource, Repeat, Stage};
use energon_dist::{WorkerConfig, shard_workers};
use energon_reader::leaf::{LeafConfig, LeafIter};

const N_LEAVES: usize = 8;
const STEPS: u64 = 100_000;

fn leaf(id: usize) -> BoxStage<u64> {
    let cfg = WorkerConfig::new(0, 1, 0).expect("valid config").with_seed_offset(id as i64);
    let slices = shard_workers(&[100; 100], None, &cfg, 0, None).expect("slices").remove(0);
    let rng = cfg.worker_rng(0).expect("worker 0");
    let iter = LeafIter::new(slices, LeafConfig::TRAIN, rng).expect("leaf");
    Box::new(LeafSource::new(iter, |index| Ok(Some(index))))
}

fn rng() -> energon_dist::WorkerRng {
    WorkerConfig::new(0, 1, 0).expect("valid config").worker_rng(0).expect("worker 0")
}

fn weighted() -> BoxStage<u64> {
    let children: Vec<BoxStage<u64>> =
        (0..N_LEAVES).map(|i| -> BoxStage<u64> { Box::new(Repeat::forever(leaf(i), 0)) }).collect();
    let weights = (0..N_LEAVES).map(|i| 1.0 + i as f32).collect();
    Box::new(Blend::new(children, weights, rng()).expect("blend"))
}

fn epochized() -> BoxStage<u64> {
    let children: Vec<BoxStage<u64>> = (0..N_LEAVES)
        .map(|i| -> BoxStage<u64> {
            let repeats = 0.3 + 0.7 * i as f64;
            Box::new(Repeat::times(leaf(i), repeats, 0).expect("repeats"))
        })
        .collect();
    let weights = (0..N_LEAVES).map(|i| 10_000.0 * (0.3 + 0.7 * i as f32)).collect();
    let blend: BoxStage<u64> = Box::new(Blend::new(children, weights, rng()).expect("blend"));
    Box::new(Repeat::forever(blend, 0))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("blend_step");
    group.throughput(Throughput::Elements(STEPS));
    group.sample_size(20);
    for (name, make) in [("weighted", weighted as fn() -> BoxStage<u64>), ("epochized", epochized)]
    {
        group.bench_function(name, |b| {
            b.iter_batched(
                make,
                |mut stage| {
                    for _ in 0..STEPS {
                        black_box(stage.next().expect("no error").expect("never ends"));
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
