//! Per-sample cost of the pipeline machinery alone (slice order, map stages, repetition, shuffle
//! buffer, batching, worker threads and round robin, the state reported for exact checkpoints),
//! over an in-memory source that reads nothing, so only the loader's own overhead is measured.
//!
//! Run with `cargo bench -p energon-cook --bench pipeline`.

use std::{hint::black_box, path::Path, sync::Arc};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use energon_cook::{LoaderBuilder, SampleSource};
use energon_dist::WorkerConfig;
use energon_reader::RawSample;

/// 200 shards of 500 empty samples.
struct Empty {
    path: Arc<Path>,
    shard: Arc<str>,
}

impl SampleSource for Empty {
    fn path(&self) -> &Path {
        &self.path
    }

    fn shard_counts(&self) -> Vec<u64> {
        vec![500; 200]
    }

    fn read(&self, index: u64) -> energon_reader::Result<Option<RawSample>> {
        Ok(Some(RawSample {
            key: String::new(),
            dataset: Arc::clone(&self.path),
            shard: Arc::clone(&self.shard),
            index,
            offset: 0,
            parts: Vec::new(),
        }))
    }
}

const SAMPLES: usize = 32 * 1024;

fn pipeline(c: &mut Criterion) {
    let source = Arc::new(Empty { path: Path::new("empty").into(), shard: "empty".into() });
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(SAMPLES as u64));
    group.sample_size(20);
    // `every`: how often the workers report their state (1: after every batch, so saving is
    // exact; 0: never). The difference is the cost of exact checkpoints.
    for (num_workers, shuffle_buffer_size, every) in
        [(0, 0, 1), (0, 100, 1), (2, 0, 1), (2, 100, 1), (2, 100, 0)]
    {
        let name = format!("batch32_workers{num_workers}_buffer{shuffle_buffer_size}_every{every}");
        group.bench_function(name, |b| {
            b.iter(|| {
                let cfg = WorkerConfig::new(0, 1, num_workers).expect("valid config");
                let loader =
                    LoaderBuilder::new(Arc::clone(&source), cfg, |raw| Ok(Some(raw.index)))
                        .shuffle_buffer_size(shuffle_buffer_size)
                        .batch_size(Some(32))
                        .checkpoint_every(every)
                        .build_batches()
                        .expect("valid settings");
                for batch in loader.take(SAMPLES / 32) {
                    black_box(batch.expect("no errors"));
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
