//! Bulk-load throughput of `SqliteIndexWriter`: 100,000 samples with 3 parts each, in 200
//! shards, from `create` to a finished, synced `index.sqlite` (indexes built, committed).

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use energon_index::{PartEntry, SampleEntry, ShardScan, SqliteIndexWriter};

const N_SHARDS: usize = 200;
const SAMPLES_PER_SHARD: usize = 500;

/// Deterministic shards shaped like an image-caption WebDataset: keys `00000000`, `00000001`, ...
/// (unique across shards), parts `jpg` (~100 KB), `txt`, `json`, laid out as in a tar file.
fn make_shards() -> Vec<(String, ShardScan)> {
    let mut key_counter = 0u64;
    (0..N_SHARDS)
        .map(|shard| {
            let mut scan = ShardScan::default();
            let mut cursor = 0u64;
            for i in 0..SAMPLES_PER_SHARD as u64 {
                let mut sample = SampleEntry {
                    key: format!("{key_counter:08}"),
                    offset: cursor,
                    parts: Vec::new(),
                };
                key_counter += 1;
                let sizes = [90_000 + (i * 7919) % 20_000, 20 + i % 60, 120 + i % 5];
                for (name, size) in ["jpg", "txt", "json"].into_iter().zip(sizes) {
                    let offset_data = cursor + 512;
                    sample.parts.push(PartEntry { name: name.to_owned(), offset_data, size });
                    cursor = offset_data + size.div_ceil(512) * 512;
                }
                scan.samples.push(sample);
            }
            scan.end_offset = cursor;
            (format!("shards/data-{shard:06}.tar"), scan)
        })
        .collect()
}

fn write_index(path: &Path, shards: &[(String, ShardScan)]) {
    let mut writer = SqliteIndexWriter::create(path).expect("create index");
    for (tar_file_id, (name, scan)) in shards.iter().enumerate() {
        writer.add_shard(tar_file_id as u64, name, scan).expect("add shard");
    }
    writer.finish().expect("finish index");
}

fn sqlite_write(c: &mut Criterion) {
    let shards = make_shards();
    let dir = tempfile::tempdir().expect("temp dir");
    let path: PathBuf = dir.path().join("index.sqlite");
    let mut group = c.benchmark_group("sqlite_write");
    group.sample_size(10);
    group.throughput(Throughput::Elements((N_SHARDS * SAMPLES_PER_SHARD) as u64));
    group.bench_function("100k_samples_3_parts_200_shards", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&path);
            },
            |()| write_index(&path, &shards),
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, sqlite_write);
criterion_main!(benches);
