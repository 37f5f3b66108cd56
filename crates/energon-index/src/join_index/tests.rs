//! Join index tests: the binary layout, and joins of small prepared datasets.

use std::{fs, path::Path};

use super::*;
use crate::{
    prepare::{PrepareOptions, SplitChoice, prepare_dataset},
    tar_idx::TarIndex,
};

fn entry(shard_idx: u64, byte_offset: u64, byte_size: u64) -> Option<JoinEntry> {
    Some(JoinEntry { shard_idx, byte_offset, byte_size })
}

#[test]
fn rows_round_trip_with_the_reference_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("join_index_x.bin");
    let mut writer = JoinIndexWriter::create(&path, 2).unwrap();
    writer.append(&[entry(0, 0, 1536), entry(3, 512, 1024)]).unwrap();
    writer.append(&[entry(1, 1536, 2048), None]).unwrap();
    assert!(writer.append(&[entry(0, 0, 1)]).is_err());
    assert!(!path.exists(), "the file appears only when finished");
    writer.finish().unwrap();
    let bytes = fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 16 + 2 * 2 * 24);
    assert_eq!(&bytes[..8], b"JIDX0001");
    assert_eq!(&bytes[8..16], &2i64.to_le_bytes());
    assert_eq!(&bytes[16..24], &0i64.to_le_bytes());
    assert_eq!(&bytes[40..48], &3i64.to_le_bytes());
    assert_eq!(&bytes[88..112], [[0xff; 8]; 3].concat().as_slice());

    let index = JoinIndex::open(&path).unwrap();
    assert_eq!((index.n_columns(), index.len()), (2, 2));
    assert_eq!(index.row(0).unwrap(), [entry(0, 0, 1536), entry(3, 512, 1024)]);
    assert_eq!(index.row(1).unwrap(), [entry(1, 1536, 2048), None]);
    assert!(index.entry(2, 0).is_err());
    assert!(index.entry(0, 2).is_err());
}

#[test]
fn damaged_and_foreign_files_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        path
    };
    let mut good = b"JIDX0001".to_vec();
    good.extend_from_slice(&1i64.to_le_bytes());
    good.extend_from_slice(&[0u8; 24]);

    let empty = JoinIndex::open(&write("empty.bin", b"")).unwrap();
    assert!(empty.is_empty());
    let short = JoinIndex::open(&write("short.bin", b"JIDX00")).unwrap_err();
    assert!(matches!(short, Error::CorruptIndex { offset: 0, .. }), "{short}");
    let magic = JoinIndex::open(&write("magic.bin", &[b"NOPE".as_slice(), &good[4..]].concat()));
    assert!(matches!(magic, Err(Error::CorruptIndex { .. })));
    let version = JoinIndex::open(&write("v2.bin", &[b"JIDX0002".as_slice(), &good[8..]].concat()));
    assert!(matches!(version, Err(Error::Incompatible { .. })), "{version:?}");
    let torn = JoinIndex::open(&write("torn.bin", &good[..good.len() - 1])).unwrap_err();
    assert!(matches!(torn, Error::CorruptIndex { offset: 16, .. }), "{torn}");
    assert!(torn.to_string().contains("23 bytes of rows"), "{torn}");
    let mut negative = good.clone();
    negative[16..24].copy_from_slice(&(-5i64).to_le_bytes());
    let index = JoinIndex::open(&write("neg.bin", &negative)).unwrap();
    assert!(matches!(index.entry(0, 0), Err(Error::CorruptIndex { offset: 16, .. })));
    // The missing marker in the primary column: a typed error at the entry's offset, never a
    // row without its primary sample.
    let mut no_primary = good.clone();
    no_primary.extend_from_slice(&[0xff; 24]);
    let index = JoinIndex::open(&write("no_primary.bin", &no_primary)).unwrap();
    assert_eq!(index.entry(0, 0).unwrap(), entry(0, 0, 0));
    let err = index.entry(1, 0).unwrap_err();
    assert!(matches!(err, Error::CorruptIndex { offset: 40, .. }), "{err}");
    assert!(err.to_string().contains("primary column"), "{err}");
    assert!(err.to_string().contains("no_primary.bin"), "{err}");
    let mut writer = JoinIndexWriter::create(&dir.path().join("w.bin"), 2).unwrap();
    assert!(matches!(writer.append(&[None, entry(0, 0, 512)]), Err(Error::Config(_))));
    let mut zero_columns = good.clone();
    zero_columns[8..16].copy_from_slice(&0i64.to_le_bytes());
    assert!(JoinIndex::open(&write("zero.bin", &zero_columns)).is_err());
}

/// Writes and prepares a dataset of `txt` samples: `shards[i]` are the keys of shard
/// `parts/data-<i>.tar`. `split` assigns shards to split parts (all to `train` if `None`).
fn dataset(root: &Path, shards: &[&[&str]], split: Option<SplitChoice>) {
    for (i, keys) in shards.iter().enumerate() {
        crate::testutil::write_text_shard(root, i, keys);
    }
    let split = split.unwrap_or(SplitChoice::Ratio([1.0, 0.0, 0.0]));
    let options = PrepareOptions { num_workers: 1, split, ..PrepareOptions::default() };
    prepare_dataset(root, &options, &|_| {}).unwrap();
}

fn input(root: &Path, nonmatch: Nonmatch) -> JoinInput {
    JoinInput::from_dataset(root, "train", None, nonmatch).unwrap().0
}

/// The `.tar.idx` range of sample `i` of shard `shard`.
fn range(root: &Path, shard: usize, i: usize) -> (u64, u64) {
    let idx = TarIndex::open(&root.join(format!("parts/data-{shard}.tar.idx"))).unwrap();
    let (start, end) = idx.sample_range(i).unwrap();
    let start = idx.offsets()[i].min(start);
    (start, end - start)
}

#[test]
fn secondaries_are_found_by_key_in_their_own_shard_layout() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    dataset(&a, &[&["k0", "k1", "k2"], &["k3", "k4"]], None);
    dataset(&b, &[&["k4", "k2"], &["k9"], &["k0", "k3", "k1"]], None);
    let out = dir.path().join("join.bin");
    let summary =
        build_join_index(&[input(&a, Nonmatch::Error), input(&b, Nonmatch::Error)], &out).unwrap();
    assert_eq!(summary, JoinSummary { n_rows: 5, n_primary: 5, n_missing: vec![0, 0] });
    let index = JoinIndex::open(&out).unwrap();
    let at = |root: &Path, shard: u64, i: usize| {
        let (offset, size) = range(root, shard as usize, i);
        entry(shard, offset, size)
    };
    let expected = [
        [at(&a, 0, 0), at(&b, 2, 0)],
        [at(&a, 0, 1), at(&b, 2, 2)],
        [at(&a, 0, 2), at(&b, 0, 1)],
        [at(&a, 1, 0), at(&b, 2, 1)],
        [at(&a, 1, 1), at(&b, 0, 0)],
    ];
    for (row, want) in expected.iter().enumerate() {
        assert_eq!(index.row(row as u64).unwrap(), want, "row {row}");
    }
}

#[test]
fn nonmatch_modes_fail_skip_or_mark_missing_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    dataset(&a, &[&["k0", "k1", "k2", "k3"]], None);
    dataset(&b, &[&["k0", "k2", "k3"]], None);
    dataset(&c, &[&["k3", "k1", "k0"]], None);
    let out = dir.path().join("join.bin");
    let err = build_join_index(&[input(&a, Nonmatch::Error), input(&b, Nonmatch::Error)], &out)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Join { path, reason } if path.starts_with(&b) && reason.contains("\"k1\"")),
        "{err}"
    );
    assert!(!out.exists());

    let summary = build_join_index(
        &[input(&a, Nonmatch::Error), input(&b, Nonmatch::None), input(&c, Nonmatch::Skip)],
        &out,
    )
    .unwrap();
    // k2 is not in c (skipped); k1 is not in b (marked missing).
    assert_eq!(summary, JoinSummary { n_rows: 3, n_primary: 4, n_missing: vec![0, 1, 0] });
    let index = JoinIndex::open(&out).unwrap();
    let shard_of = |row: u64, col: usize| index.entry(row, col).unwrap().map(|e| e.byte_offset);
    assert_eq!(index.len(), 3);
    assert_eq!(index.entry(1, 1).unwrap(), None);
    assert_eq!(shard_of(1, 2), Some(range(&c, 0, 1).0));
    assert_eq!(shard_of(2, 0), Some(range(&a, 0, 3).0));

    let err = build_join_index(&[input(&a, Nonmatch::Skip)], &out).unwrap_err();
    assert!(err.to_string().contains("primary dataset of a join must have nonmatch: error"));
}

#[test]
fn excludes_and_split_order_decide_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    dataset(&a, &[&["k0", "k1"], &["k2", "k3"], &["k4", "k5"]], None);
    dataset(&b, &[&["k0", "k1", "k2", "k3", "k4", "k5"]], None);
    fs::write(
        a.join(".nv-meta/split.yaml"),
        "split_parts:\n  train:\n  - parts/data-2.tar\n  - parts/data-0.tar\n  - parts/data-1.tar\n\
         exclude:\n  - parts/data-0.tar\n  - parts/data-2.tar/k5\n",
    )
    .unwrap();
    fs::write(
        b.join(".nv-meta/split.yaml"),
        "split_parts:\n  train:\n  - parts/data-0.tar\nexclude:\n  - parts/data-0.tar/k3\n",
    )
    .unwrap();
    let (primary, hashed) = JoinInput::from_dataset(&a, "train", None, Nonmatch::Error).unwrap();
    assert_eq!(
        primary.split_part_files,
        ["parts/data-2.tar", "parts/data-0.tar", "parts/data-1.tar"]
    );
    assert_eq!(hashed, ["parts/data-0.tar", "parts/data-2.tar/k5"]);
    let out = dir.path().join("join.bin");
    let summary = build_join_index(&[primary, input(&b, Nonmatch::None)], &out).unwrap();
    assert_eq!(summary.n_rows, 3);
    let index = JoinIndex::open(&out).unwrap();
    // Rows in split order: data-2 (k4; k5 excluded), data-0 excluded, data-1 (k2, k3); the
    // primary's shard_idx is the position in the split list, excludes included.
    let primary: Vec<_> = (0..3).map(|r| index.entry(r, 0).unwrap().unwrap().shard_idx).collect();
    assert_eq!(primary, [0, 2, 2]);
    assert_eq!(index.entry(0, 1).unwrap().unwrap().byte_offset, range(&b, 0, 4).0);
    assert_eq!(index.entry(2, 1).unwrap(), None, "k3 is excluded from b");
}

#[test]
fn secondary_samples_outside_their_split_part_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    dataset(&a, &[&["k0", "k1"]], None);
    let parts = SplitChoice::Parts(vec![
        ("train".into(), "parts/data-0".into()),
        ("val".into(), "parts/data-1".into()),
    ]);
    dataset(&b, &[&["k0"], &["k1"]], Some(parts));
    let err = build_join_index(
        &[input(&a, Nonmatch::Error), input(&b, Nonmatch::Error)],
        &dir.path().join("join.bin"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not in this dataset's split part"), "{err}");
}
