//! [`SqliteIndexWriter`]: duplicate keys, bad scans, round trips (proptest).

use std::{collections::BTreeSet, path::Path};

use proptest::prelude::*;

use super::{numbered_scan, scan_of, write_db};
use crate::{
    Error,
    shard::ShardScan,
    sqlite::{EntryInfo, SampleLocation, SqliteIndex, SqliteIndexWriter},
};

fn expect_duplicate(res: crate::Result<()>, key: &str, first: &str, second: &str) {
    match res {
        Err(Error::DuplicateKey { key: k, first: f, second: s }) => {
            assert_eq!((k.as_str(), f.as_str(), s.as_str()), (key, first, second));
        }
        other => panic!("expected a duplicate key error, got {other:?}"),
    }
}

#[test]
fn duplicate_key_across_shards_names_both_shards() {
    let dir = tempfile::tempdir().unwrap();
    let a = scan_of(&[("a", &["jpg"]), ("b", &["jpg"]), ("c", &["jpg"])]);
    let b = scan_of(&[("d", &["jpg"]), ("b", &["txt"])]);
    let res = write_db(&dir.path().join("x.sqlite"), &[("parts/a.tar", &a), ("parts/b.tar", &b)]);
    let err = res.as_ref().unwrap_err().to_string();
    assert!(
        err.contains("\"b\"") && err.contains("parts/a.tar") && err.contains("parts/b.tar"),
        "{err}"
    );
    expect_duplicate(res, "b", "parts/a.tar", "parts/b.tar");
}

#[test]
fn duplicate_key_within_a_shard_names_it_twice() {
    let dir = tempfile::tempdir().unwrap();
    let a = scan_of(&[("x", &["jpg"]), ("y", &["jpg"]), ("x", &["txt"])]);
    expect_duplicate(
        write_db(&dir.path().join("x.sqlite"), &[("a.tar", &a)]),
        "x",
        "a.tar",
        "a.tar",
    );
}

#[test]
fn duplicate_keys_in_multi_row_statements_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let a = numbered_scan("k", 300);
    // In a full 64-row statement of the second shard, clashing with the first shard.
    let mut b = numbered_scan("m", 300);
    b.samples[150].key = "k000007".to_owned();
    expect_duplicate(
        write_db(&dir.path().join("1.sqlite"), &[("a.tar", &a), ("b.tar", &b)]),
        "k000007",
        "a.tar",
        "b.tar",
    );
    // Twice within one statement.
    let mut c = numbered_scan("m", 300);
    c.samples[20].key = c.samples[10].key.clone();
    expect_duplicate(
        write_db(&dir.path().join("2.sqlite"), &[("a.tar", &a), ("c.tar", &c)]),
        "m000010",
        "c.tar",
        "c.tar",
    );
    // In two statements of the same shard.
    let mut d = numbered_scan("m", 300);
    d.samples[100].key = d.samples[5].key.clone();
    expect_duplicate(
        write_db(&dir.path().join("3.sqlite"), &[("a.tar", &a), ("d.tar", &d)]),
        "m000005",
        "d.tar",
        "d.tar",
    );
    // In the single-row tail.
    let mut e = numbered_scan("m", 300);
    e.samples[299].key = "k000299".to_owned();
    expect_duplicate(
        write_db(&dir.path().join("4.sqlite"), &[("a.tar", &a), ("e.tar", &e)]),
        "k000299",
        "a.tar",
        "e.tar",
    );
}

#[test]
fn shard_ids_need_not_arrive_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.sqlite");
    let mut writer = SqliteIndexWriter::create(&path).unwrap();
    writer.add_shard(1, "b.tar", &numbered_scan("b", 3)).unwrap();
    writer.add_shard(0, "a.tar", &numbered_scan("a", 2)).unwrap();
    expect_duplicate(
        writer.add_shard(2, "c.tar", &numbered_scan("a", 1)),
        "a000000",
        "a.tar",
        "c.tar",
    );
    assert_eq!((writer.n_samples(), writer.n_parts()), (5, 15));
    assert_eq!(writer.path(), path);
}

#[test]
fn the_same_shard_id_twice_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = SqliteIndexWriter::create(&dir.path().join("x.sqlite")).unwrap();
    writer.add_shard(0, "a.tar", &numbered_scan("a", 2)).unwrap();
    let err = writer.add_shard(0, "b.tar", &numbered_scan("b", 2)).unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("a.tar") && m.contains("b.tar")),
        "{err:?}"
    );
}

#[test]
fn inconsistent_scan_offsets_are_corrupt_tar_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut scan = numbered_scan("a", 3);
    scan.end_offset = scan.samples[2].offset - 1;
    let err = write_db(&dir.path().join("x.sqlite"), &[("shards/a.tar", &scan)]).unwrap_err();
    match err {
        Error::CorruptTar { path, offset, reason } => {
            assert_eq!((path.to_str().unwrap(), offset), ("shards/a.tar", 2048 * 3));
            assert!(reason.contains("a000002"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let mut scan = numbered_scan("a", 1);
    scan.samples[0].parts[0].size = u64::MAX;
    let err = write_db(&dir.path().join("y.sqlite"), &[("a.tar", &scan)]).unwrap_err();
    assert!(matches!(err, Error::Sqlite { .. }), "{err:?}");
}

#[test]
fn keys_with_folders_dots_and_unicode_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.sqlite");
    let scan =
        scan_of(&[("a/b/0001", &["seg.png", "jpg"]), ("./ü 2", &["txt"]), ("x.y/abc", &["d"])]);
    write_db(&path, &[("s.tar", &scan), ("empty.tar", &ShardScan::default())]).unwrap();
    let index = SqliteIndex::open(&path).unwrap();
    let loc = index.part_by_entry_name("a/b/0001.seg.png").unwrap().unwrap();
    assert_eq!((loc.content_byte_offset, loc.content_byte_size), (512, 100));
    assert!(index.part_by_entry_name("./ü 2.txt").unwrap().is_some());
    assert!(index.part_by_entry_name("x.y/abc.d").unwrap().is_some());
    assert!(index.samples_of_shard(1).unwrap().is_empty());
    assert_eq!(index.total_size().unwrap(), scan.end_offset);
}

#[test]
fn an_existing_database_is_reset_but_keeps_other_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.sqlite");
    write_db(&path, &[("old.tar", &numbered_scan("old", 5))]).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE keep_me (x); INSERT INTO keep_me VALUES (1);")
        .unwrap();
    write_db(&path, &[("new.tar", &numbered_scan("new", 2))]).unwrap();
    let index = SqliteIndex::open(&path).unwrap();
    assert_eq!(index.sample_count().unwrap(), 2);
    assert_eq!(index.sample_by_key("old000000").unwrap(), None);
    let dump = crate::sqlite::dump_canonical(&path).unwrap();
    assert!(dump.contains("table keep_me: 1 rows"), "{dump}");
}

#[test]
fn a_dropped_writer_leaves_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.sqlite");
    let mut writer = SqliteIndexWriter::create(&path).unwrap();
    writer.add_shard(0, "a.tar", &numbered_scan("a", 100)).unwrap();
    drop(writer);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'samples'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0, "the uncommitted transaction is rolled back");
}

/// Shards of random samples; keys are made unique by a per-sample counter.
fn shards_strategy() -> impl Strategy<Value = Vec<ShardScan>> {
    let sample = (
        "[a-z]{0,3}(/[a-z]{1,3})?",
        prop::collection::vec(("[a-z]{1,4}(\\.[a-z]{1,3})?", 0u64..5000), 0..4),
        0u64..3,
    );
    prop::collection::vec(prop::collection::vec(sample, 0..150), 1..5).prop_map(|shards| {
        let mut counter = 0;
        shards
            .into_iter()
            .map(|samples| {
                let mut scan = ShardScan::default();
                let mut cursor = 0;
                for (prefix, parts, gap) in samples {
                    counter += 1;
                    let key = format!("{prefix}{counter}");
                    let start = cursor;
                    let mut entry =
                        crate::shard::SampleEntry { key, offset: start, parts: Vec::new() };
                    for (name, size) in parts {
                        let offset_data = cursor + 512;
                        cursor = offset_data + size.div_ceil(512) * 512;
                        entry.parts.push(crate::shard::PartEntry { name, offset_data, size });
                    }
                    cursor += gap * 512;
                    scan.samples.push(entry);
                }
                scan.end_offset = cursor;
                scan
            })
            .collect()
    })
}

fn round_trip(dir: &Path, shards: &[ShardScan]) {
    let names: Vec<String> = (0..shards.len()).map(|i| format!("s{i}.tar")).collect();
    let path = dir.join("p.sqlite");
    let _ = std::fs::remove_file(&path);
    let list: Vec<(&str, &ShardScan)> = names.iter().map(String::as_str).zip(shards).collect();
    write_db(&path, &list).unwrap();
    let index = SqliteIndex::open(&path).unwrap();
    let mut expected_entries = Vec::new();
    let mut n_samples = 0;
    for (tar, scan) in shards.iter().enumerate() {
        let rows = index.samples_of_shard(tar as u64).unwrap();
        assert_eq!(rows.len(), scan.samples.len());
        for (i, (row, sample)) in rows.iter().zip(&scan.samples).enumerate() {
            assert_eq!(
                (&row.sample_key, row.sample_index, row.byte_offset),
                (&sample.key, i as u64, sample.offset)
            );
            assert_eq!(row.byte_size, scan.byte_size(i));
            let loc = SampleLocation {
                tar_file_id: tar as u64,
                byte_offset: sample.offset,
                byte_size: scan.byte_size(i),
            };
            assert_eq!(index.sample_by_key(&sample.key).unwrap(), Some(loc));
            // Entry order is by content offset within a sample, which is tar order here.
            for part in &sample.parts {
                let name = format!("{}.{}", sample.key, part.name);
                expected_entries.push(EntryInfo { name, size: part.size, tar_file_id: tar as u64 });
            }
        }
        n_samples += scan.samples.len() as u64;
    }
    assert_eq!(index.sample_count().unwrap(), n_samples);
    assert_eq!(index.list_entries().unwrap(), expected_entries);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn written_rows_read_back(shards in shards_strategy()) {
        let dir = tempfile::tempdir().unwrap();
        round_trip(dir.path(), &shards);
    }

    #[test]
    fn a_planted_duplicate_names_both_shards(
        shards in shards_strategy(),
        pick in (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
    ) {
        // Copy the key of one sample onto a later sample (in shard order).
        let positions: Vec<(usize, usize)> = shards
            .iter()
            .enumerate()
            .flat_map(|(s, scan)| (0..scan.samples.len()).map(move |i| (s, i)))
            .collect();
        prop_assume!(positions.len() >= 2);
        let (mut a, mut b) = (pick.0.index(positions.len()), pick.1.index(positions.len()));
        prop_assume!(a != b);
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        let ((sa, ia), (sb, ib)) = (positions[a], positions[b]);
        let mut shards = shards;
        let key = shards[sa].samples[ia].key.clone();
        shards[sb].samples[ib].key = key.clone();
        let keys: BTreeSet<_> = shards.iter().flat_map(|s| s.samples.iter().map(|x| x.key.clone())).collect();
        prop_assert_eq!(keys.len(), positions.len() - 1);
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..shards.len()).map(|i| format!("s{i}.tar")).collect();
        let list: Vec<(&str, &ShardScan)> = names.iter().map(String::as_str).zip(&shards).collect();
        expect_duplicate(write_db(&dir.path().join("d.sqlite"), &list), &key, &names[sa], &names[sb]);
    }
}
