//! Scanning throughput: the raw header walk, the full shard scan (with sample grouping), the
//! same from a memory-mapped file, and the JSONL offset computation.
//!
//! The shard is generated with the `tar` crate: 10,000 samples with parts `jpg` (0.2–3 KB),
//! `txt` and `json`, GNU headers, plus a directory and a `__meta__` member every 100 samples.

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use energon_index::{jsonl_idx, tar_scan};

const N_SAMPLES: u64 = 10_000;

/// A deterministic shard and its member count.
fn make_shard() -> (Vec<u8>, u64) {
    let mut builder = tar::Builder::new(Vec::new());
    let mut n_members = 0;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    let mut append = |name: &str, size: u64, entry_type: tar::EntryType| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(entry_type);
        header.set_size(size);
        header.set_mode(0o644);
        let data = vec![0x5a; size as usize];
        builder.append_data(&mut header, name, data.as_slice()).expect("append to a Vec");
    };
    for i in 0..N_SAMPLES {
        if i % 100 == 0 {
            append(&format!("dir{i}/"), 0, tar::EntryType::Directory);
            append(&format!("__meta__/{i}.json"), 40, tar::EntryType::Regular);
            n_members += 2;
        }
        let key = format!("{i:08}");
        append(&format!("{key}.jpg"), 200 + next() % 2800, tar::EntryType::Regular);
        append(&format!("{key}.txt"), 10 + next() % 100, tar::EntryType::Regular);
        append(&format!("{key}.json"), 100 + next() % 50, tar::EntryType::Regular);
        n_members += 3;
    }
    (builder.into_inner().expect("finish a Vec"), n_members)
}

fn make_jsonl() -> Vec<u8> {
    let mut res = Vec::new();
    for i in 0..100_000 {
        res.extend_from_slice(
            format!("{{\"key\": \"{i:08}\", \"caption\": \"a photo of thing number {i}\"}}\n")
                .as_bytes(),
        );
    }
    res
}

fn bench(c: &mut Criterion) {
    let (shard, n_members) = make_shard();
    let mut group = c.benchmark_group("tar_scan");
    group.throughput(Throughput::Elements(n_members));
    group.bench_function("members_walk", |b| {
        b.iter(|| {
            let mut n = 0;
            for member in tar_scan::members(&shard, 0) {
                std::hint::black_box(member.expect("valid shard").size);
                n += 1;
            }
            assert_eq!(n, n_members);
        });
    });
    group.bench_function("scan_bytes", |b| {
        b.iter(|| {
            let scan = tar_scan::scan_bytes(Path::new("bench.tar"), &shard).expect("valid shard");
            assert_eq!(scan.samples.len() as u64, N_SAMPLES);
        });
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.tar");
    std::fs::write(&path, &shard).expect("write shard");
    group.bench_function("scan_shard_mmap", |b| {
        b.iter(|| tar_scan::scan_shard(&path).expect("valid shard"));
    });
    group.finish();

    let jsonl = make_jsonl();
    let mut group = c.benchmark_group("jsonl_offsets");
    group.throughput(Throughput::Bytes(jsonl.len() as u64));
    group.bench_function("jsonl_offsets", |b| {
        b.iter(|| jsonl_idx::jsonl_offsets(Path::new("bench.jsonl"), &jsonl).expect("valid"));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
