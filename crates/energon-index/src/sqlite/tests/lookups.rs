//! [`SqliteIndex`] lookups on the reference's `index.sqlite`, checked against the rows of the
//! reference's text dump and against the shard bytes.

use std::{fs, io::Read as _, io::Seek as _, path::Path};

use super::{fixtures_dir, ref_db, ref_small, write_db};
use crate::{
    Error,
    sqlite::{EntryInfo, PartLocation, SampleLocation, SampleRow, SchemaVersion, SqliteIndex},
};

/// The rows of one table in `energon-ref-small.dump.txt`, as string fields.
fn dump_rows(table: &str) -> Vec<Vec<String>> {
    let dump = fs::read_to_string(fixtures_dir().join("energon-ref-small.dump.txt")).unwrap();
    let header = format!("table {table} columns ");
    dump.lines()
        .skip_while(|l| !l.starts_with(&header))
        .skip_while(|l| !l.starts_with("  (ORDER BY"))
        .skip(1)
        .take_while(|l| l.starts_with("  ("))
        .map(|l| {
            let inner = l.trim().trim_start_matches('(').trim_end_matches(')');
            inner.split(", ").map(|f| f.trim_matches('\'').to_owned()).collect()
        })
        .collect()
}

fn expected_samples() -> Vec<SampleRow> {
    let rows: Vec<SampleRow> = dump_rows("samples")
        .into_iter()
        .map(|f| SampleRow {
            tar_file_id: f[0].parse().unwrap(),
            sample_key: f[1].clone(),
            sample_index: f[2].parse().unwrap(),
            byte_offset: f[3].parse().unwrap(),
            byte_size: f[4].parse().unwrap(),
        })
        .collect();
    assert_eq!(rows.len(), 200);
    rows
}

/// `(tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size)`.
fn expected_parts() -> Vec<(u64, u64, String, u64, u64)> {
    let rows: Vec<_> = dump_rows("sample_parts")
        .into_iter()
        .map(|f| {
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].clone(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 600);
    rows
}

fn open_ref() -> SqliteIndex {
    SqliteIndex::open(&ref_db()).unwrap()
}

#[test]
fn fixture_layout_is_detected() {
    let index = open_ref();
    assert_eq!(index.schema_version(), Some(SchemaVersion::V7_3));
    assert!(index.has_sample_parts());
    assert!(!index.has_media_metadata());
    assert_eq!(index.path(), ref_db());
}

#[test]
fn counts_and_total_size_match_the_dump() {
    let index = open_ref();
    let samples = expected_samples();
    assert_eq!(index.sample_count().unwrap(), 200);
    assert_eq!(index.total_size().unwrap(), samples.iter().map(|s| s.byte_size).sum::<u64>());
    assert!(index.duplicate_keys().unwrap().is_empty());
}

#[test]
fn every_sample_is_found_by_key() {
    let index = open_ref();
    for s in expected_samples() {
        let expected = SampleLocation {
            tar_file_id: s.tar_file_id,
            byte_offset: s.byte_offset,
            byte_size: s.byte_size,
        };
        assert_eq!(index.sample_by_key(&s.sample_key).unwrap(), Some(expected), "{}", s.sample_key);
    }
    assert_eq!(index.sample_by_key("99999999").unwrap(), None);
    assert_eq!(index.sample_by_key("").unwrap(), None);
}

#[test]
fn every_part_is_found_by_entry_name() {
    let index = open_ref();
    let samples = expected_samples();
    for (tar, idx, part, offset, size) in expected_parts() {
        let key = &samples
            .iter()
            .find(|s| s.tar_file_id == tar && s.sample_index == idx)
            .unwrap()
            .sample_key;
        let name = format!("{key}.{part}");
        let expected = PartLocation {
            tar_file_id: tar,
            content_byte_offset: offset,
            content_byte_size: size,
            second_copy: None,
        };
        assert_eq!(index.part_by_entry_name(&name).unwrap(), Some(expected), "{name}");
    }
    assert_eq!(index.part_by_entry_name("00000000.png").unwrap(), None);
    assert_eq!(index.part_by_entry_name("00000000").unwrap(), None);
    assert_eq!(index.part_by_entry_name("shards/00000000.jpg").unwrap(), None);
}

#[test]
fn part_locations_point_at_the_member_content() {
    // The json part of every fifth sample, read straight from the shard, is a JSON object.
    let index = open_ref();
    let shards: Vec<_> =
        (0..4).map(|i| ref_small().join(format!("shards/data-{i:06}.tar"))).collect();
    for s in expected_samples().iter().step_by(5) {
        let loc = index.part_by_entry_name(&format!("{}.json", s.sample_key)).unwrap().unwrap();
        let mut file = fs::File::open(&shards[loc.tar_file_id as usize]).unwrap();
        file.seek(std::io::SeekFrom::Start(loc.content_byte_offset)).unwrap();
        let mut buf = vec![0; loc.content_byte_size as usize];
        file.read_exact(&mut buf).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert!(value.is_object(), "{}: {value}", s.sample_key);
        assert!(loc.content_byte_offset > s.byte_offset);
        assert!(loc.content_byte_offset + loc.content_byte_size <= s.byte_offset + s.byte_size);
    }
}

#[test]
fn entries_are_listed_in_tar_order() {
    let index = open_ref();
    let samples = expected_samples();
    let expected: Vec<EntryInfo> = expected_parts()
        .into_iter()
        .map(|(tar, idx, part, _, size)| {
            let key = &samples
                .iter()
                .find(|s| s.tar_file_id == tar && s.sample_index == idx)
                .unwrap()
                .sample_key;
            EntryInfo { name: format!("{key}.{part}"), size, tar_file_id: tar }
        })
        .collect();
    assert_eq!(index.list_entries().unwrap(), expected);
    assert_eq!(
        expected[..3].iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["00000000.jpg", "00000000.txt", "00000000.json"]
    );
}

#[test]
fn entry_walk_stops_at_the_first_callback_error() {
    let index = open_ref();
    let mut seen = 0;
    let res = index.for_each_entry(|_| {
        seen += 1;
        if seen == 5 { Err(Error::Config("stop".into())) } else { Ok(()) }
    });
    assert!(matches!(res, Err(Error::Config(ref m)) if m == "stop"), "{res:?}");
    assert_eq!(seen, 5);
}

#[test]
fn samples_and_parts_of_one_shard_or_key() {
    let index = open_ref();
    let expected: Vec<SampleRow> =
        expected_samples().into_iter().filter(|s| s.tar_file_id == 2).collect();
    assert_eq!(expected.len(), 50);
    assert_eq!(index.samples_of_shard(2).unwrap(), expected);
    assert!(index.samples_of_shard(4).unwrap().is_empty());
    assert!(index.samples_of_shard(u64::MAX).unwrap().is_empty());

    let parts = index.parts_of_sample("00000001").unwrap();
    let names: Vec<_> = parts
        .iter()
        .map(|p| (p.part_name.as_str(), p.content_byte_offset, p.content_byte_size))
        .collect();
    assert_eq!(names, [("jpg", 4096, 1117), ("txt", 6144, 19), ("json", 7168, 123)]);
    assert!(index.parts_of_sample("nope").unwrap().is_empty());
    assert_eq!(index.media_metadata("00000000.jpg").unwrap(), None);
}

#[test]
fn lookups_run_from_several_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SqliteIndex>();
    let index = open_ref();
    let samples = expected_samples();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (index, samples) = (&index, &samples);
            scope.spawn(move || {
                for s in samples.iter().skip(t).step_by(4) {
                    let loc = index.sample_by_key(&s.sample_key).unwrap().unwrap();
                    assert_eq!((loc.tar_file_id, loc.byte_offset), (s.tar_file_id, s.byte_offset));
                    let part = index
                        .part_by_entry_name(&format!("{}.txt", s.sample_key))
                        .unwrap()
                        .unwrap();
                    assert_eq!(part.tar_file_id, s.tar_file_id);
                }
            });
        }
    });
    assert_eq!(index.sample_count().unwrap(), 200);
}

#[test]
fn paths_with_uri_characters_open() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a b?c#d%e&f=g é");
    fs::create_dir(&sub).unwrap();
    let path = sub.join("index.sqlite");
    let scan = super::numbered_scan("k", 3);
    write_db(&path, &[("s.tar", &scan)]).unwrap();
    let index = SqliteIndex::open(&path).unwrap();
    assert_eq!(index.sample_count().unwrap(), 3);
    assert!(crate::sqlite::dump_canonical(&path).unwrap().contains("\"k000002\""));
}

#[test]
fn missing_or_garbage_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sqlite");
    let err = SqliteIndex::open(&missing).unwrap_err();
    assert!(matches!(&err, Error::Io { path, .. } if path == &missing), "{err:?}");
    assert!(!missing.exists(), "opening must not create the file");

    let garbage = dir.path().join("garbage.sqlite");
    fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    let err = SqliteIndex::open(&garbage).unwrap_err();
    assert!(matches!(&err, Error::Sqlite { path, .. } if path == &garbage), "{err:?}");
    assert!(err.to_string().contains("garbage.sqlite"), "{err}");
    assert!(crate::sqlite::dump_canonical(&garbage).is_err());
    assert!(matches!(crate::sqlite::dump_canonical(&missing), Err(Error::Io { .. })));
}

#[test]
fn bad_values_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(crate::sqlite::schema::SAMPLES_DDL).unwrap();
    conn.execute_batch(crate::sqlite::schema::SAMPLE_PARTS_DDL).unwrap();
    conn.execute_batch(
        "INSERT INTO samples VALUES (0, 'neg', 0, -5, 10);
         INSERT INTO samples VALUES (0, 'null', 1, 10, NULL);
         INSERT INTO samples VALUES (-1, 'negtar', 2, 10, 10);
         INSERT INTO samples VALUES (0, 'text', 3, 'abc', 10);",
    )
    .unwrap();
    drop(conn);
    let index = SqliteIndex::open(Path::new(&path)).unwrap();
    for key in ["neg", "null", "negtar", "text"] {
        let err = index.sample_by_key(key).unwrap_err();
        assert!(matches!(&err, Error::Sqlite { path: p, .. } if p == &path), "{key}: {err:?}");
    }
    assert!(index.samples_of_shard(0).is_err());
}
