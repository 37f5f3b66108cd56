//! The example task encoders end to end, with two workers: samples per second including reading,
//! decoding, encoding (resizing, tokenizing, packing) and batching.
//!
//! Run with `cargo bench -p energon-examples --bench encoders`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use energon_examples::{captioning, text_packing};

const BATCHES: usize = 64;

fn encoders(c: &mut Criterion) {
    let mut group = c.benchmark_group("encoders");
    group.sample_size(10);
    group.throughput(Throughput::Elements((BATCHES * 8) as u64));
    group.bench_function("captioning_2_workers_batch8", |b| {
        b.iter(|| {
            for batch in captioning::loader(2, 8).expect("loader").take(BATCHES) {
                black_box(batch.expect("batch"));
            }
        });
    });
    // Batches of 4 packs of several texts each: count the texts.
    group.throughput(Throughput::Elements(count_texts()));
    group.bench_function("text_packing_2_workers_batch4", |b| {
        b.iter(|| {
            for batch in text_packing::loader(2).expect("loader").take(BATCHES) {
                black_box(batch.expect("batch"));
            }
        });
    });
    group.finish();
}

/// The texts in the first batches of the packing loader.
fn count_texts() -> u64 {
    text_packing::loader(2)
        .expect("loader")
        .take(BATCHES)
        .map(|b| b.expect("batch").value.value.keys.iter().map(Vec::len).sum::<usize>() as u64)
        .sum()
}

criterion_group!(benches, encoders);
criterion_main!(benches);
