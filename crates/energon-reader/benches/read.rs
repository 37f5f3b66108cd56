//! Reader throughput on generated data: raw random reads (no decode), decoded samples of 64x64
//! and 256x256 JPEGs, and the JPEG decoders on the same images: the part decoder
//! ([`Decoder::decode`], libjpeg with Pillow's settings) against zune-jpeg (the `image` crate's
//! JPEG decoder, which the workspace's test helpers enable), for comparison.
//!
//! Run with `cargo bench -p energon-reader --bench read`. The datasets are generated once per
//! run in a temporary folder (deterministic content, see `energon_tests::WdsSpec`) and read from
//! the page cache.

use std::{hint::black_box, path::Path, time::Duration};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use energon_index::prepare::{PrepareOptions, prepare_dataset};
use energon_reader::{Decoder, OpenOptions, ReaderOptions, SampleReader, WebDataset};
use energon_tests::WdsSpec;

/// Writes and prepares a CaptioningSample dataset of `n_shards` x `per_shard` samples.
fn make_dataset(root: &Path, n_shards: usize, per_shard: usize, img: u32) {
    let spec = WdsSpec { shards: n_shards, per_shard, img, ..WdsSpec::default() };
    energon_tests::write_wds(root, &spec).expect("generating the dataset");
    let options = PrepareOptions::default().num_workers(2);
    prepare_dataset(root, &options, &|_| {}).expect("preparing the dataset");
    std::fs::write(
        root.join(".nv-meta/dataset.yaml"),
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\n\
         field_map:\n  image: jpg\n  caption: txt\n",
    )
    .expect("writing dataset.yaml");
}

/// A fixed pseudo-random visiting order (a full-period LCG over `0..n`, n a power of two).
fn random_order(n: u64, count: usize) -> Vec<u64> {
    let mut x = 12345u64;
    (0..count)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 20) % n
        })
        .collect()
}

fn raw_reads(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    make_dataset(dir.path(), 8, 2048, 16);
    let ds = WebDataset::open(dir.path(), &OpenOptions::default()).expect("open");
    let order = random_order(ds.len(), 1 << 16);
    // Warm the page cache and the shard maps.
    for &i in &order {
        black_box(ds.read(i).expect("read"));
    }
    let mut group = c.benchmark_group("raw");
    group.throughput(Throughput::Elements(order.len() as u64));
    group.bench_function("random_read", |b| {
        b.iter(|| {
            for &i in &order {
                black_box(ds.read(i).expect("read"));
            }
        });
    });
    group.finish();
}

fn decoded(c: &mut Criterion) {
    for img in [64u32, 256] {
        let dir = tempfile::tempdir().expect("temp dir");
        make_dataset(dir.path(), 2, 256, img);
        let reader = SampleReader::open(dir.path(), &ReaderOptions::default()).expect("open");
        let n = reader.len();
        let jpegs: Vec<bytes::Bytes> = (0..n)
            .map(|i| {
                let raw = reader.dataset().read(i).expect("read").expect("not excluded");
                raw.part("jpg").expect("jpg part").clone()
            })
            .collect();
        let mut group = c.benchmark_group(format!("jpeg_{img}x{img}"));
        group.throughput(Throughput::Elements(n));
        group.bench_function("zune_jpeg", |b| {
            b.iter(|| {
                for jpg in &jpegs {
                    let img = image::load_from_memory_with_format(jpg, image::ImageFormat::Jpeg)
                        .expect("decode");
                    black_box(img.into_rgb8());
                }
            });
        });
        let decoder = Decoder::default();
        group.bench_function("part_decoder", |b| {
            b.iter(|| {
                for jpg in &jpegs {
                    black_box(decoder.decode("jpg", jpg).expect("decode"));
                }
            });
        });
        group.bench_function("sample_reader", |b| {
            b.iter(|| {
                for i in 0..n {
                    black_box(reader.read(i).expect("read"));
                }
            });
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = raw_reads, decoded
}
criterion_main!(benches);
