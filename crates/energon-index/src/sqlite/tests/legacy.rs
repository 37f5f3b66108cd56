//! Indexes written by older energon versions (6.x, 7.0-7.2) and media-only indexes.

use std::path::Path;

use rusqlite::Connection;

use crate::{
    Error,
    sqlite::{
        PartLocation, SampleLocation, SampleRow, SchemaVersion, SqliteIndex,
        schema::{MEDIA_FILTERS_DDL, MEDIA_METADATA_DDL},
    },
};

/// Samples of two shards where key `dup` occurs in both; shard 1 is inserted first, so that
/// insertion order and shard order disagree.
const ROWS: &str = "
    (1, 'b0', 0, 0, 2048), (1, 'dup', 1, 2048, 1024),
    (0, 'a0', 0, 0, 1024), (0, 'dup', 1, 1024, 3072), (0, 'a2', 2, 4096, 1024)";

/// Energon 6.x: `id` column, non-unique key index, no `sample_parts`.
fn create_v6(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE samples (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tar_file_id INTEGER,
            sample_key TEXT,
            sample_index INTEGER,
            byte_offset INTEGER,
            byte_size INTEGER
        );
        CREATE INDEX idx_samples_sample_key ON samples(sample_key);
        CREATE INDEX idx_samples_by_tar_and_idx ON samples(tar_file_id, sample_index);
        INSERT INTO samples (tar_file_id, sample_key, sample_index, byte_offset, byte_size) VALUES {ROWS};"
    ))
    .unwrap();
}

/// Energon 7.0-7.2: `sample_parts`, non-unique keys.
fn create_v7_0(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE samples (
            tar_file_id INTEGER,
            sample_key TEXT,
            sample_index INTEGER,
            byte_offset INTEGER,
            byte_size INTEGER
        );
        CREATE TABLE sample_parts (
            tar_file_id INTEGER,
            sample_index INTEGER,
            part_name TEXT,
            content_byte_offset INTEGER,
            content_byte_size INTEGER
        );
        CREATE INDEX idx_samples_sample_key ON samples(sample_key);
        CREATE INDEX idx_samples_by_tar_and_idx ON samples(tar_file_id, sample_index);
        CREATE INDEX idx_sample_parts_seq ON sample_parts(tar_file_id, sample_index, content_byte_offset);
        CREATE INDEX idx_sample_parts_full ON sample_parts(tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size);
        INSERT INTO samples VALUES {ROWS};
        INSERT INTO sample_parts VALUES
            (1, 1, 'txt', 2560, 7), (1, 0, 'txt', 512, 9), (1, 1, 'jpg', 3584, 8),
            (0, 1, 'txt', 1536, 5), (0, 0, 'txt', 512, 4), (0, 2, 'txt', 4608, 6);"
    ))
    .unwrap();
}

fn dup_rows() -> Vec<SampleRow> {
    let row = |tar_file_id, sample_index, byte_offset, byte_size| SampleRow {
        tar_file_id,
        sample_key: "dup".to_owned(),
        sample_index,
        byte_offset,
        byte_size,
    };
    vec![row(0, 1, 1024, 3072), row(1, 1, 2048, 1024)]
}

#[test]
fn energon_6_index_reads_without_parts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    create_v6(&path);
    let index = SqliteIndex::open(&path).unwrap();
    assert_eq!(index.schema_version(), Some(SchemaVersion::V6));
    assert!(!index.has_sample_parts());
    assert_eq!(index.sample_count().unwrap(), 5);
    assert_eq!(index.total_size().unwrap(), 2048 + 1024 + 1024 + 3072 + 1024);
    // The duplicate resolves to the lowest shard id, whatever the insertion order.
    assert_eq!(
        index.sample_by_key("dup").unwrap(),
        Some(SampleLocation { tar_file_id: 0, byte_offset: 1024, byte_size: 3072 })
    );
    assert_eq!(index.duplicate_keys().unwrap(), dup_rows());
    let keys: Vec<_> =
        index.samples_of_shard(0).unwrap().into_iter().map(|s| s.sample_key).collect();
    assert_eq!(keys, ["a0", "dup", "a2"]);
    for err in [index.part_by_entry_name("a0.txt").unwrap_err(), index.list_entries().unwrap_err()]
    {
        assert!(matches!(&err, Error::Incompatible { path: p, .. } if p == &path), "{err:?}");
        assert!(err.to_string().contains("sample_parts"), "{err}");
    }
}

#[test]
fn energon_7_0_index_reads_with_duplicate_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    create_v7_0(&path);
    let index = SqliteIndex::open(&path).unwrap();
    assert_eq!(index.schema_version(), Some(SchemaVersion::V7_0));
    assert!(index.has_sample_parts());
    assert_eq!(index.duplicate_keys().unwrap(), dup_rows());
    assert_eq!(
        index.part_by_entry_name("dup.txt").unwrap(),
        Some(PartLocation {
            tar_file_id: 0,
            content_byte_offset: 1536,
            content_byte_size: 5,
            second_copy: None
        })
    );
    // Only the shard-1 sample of `dup` has a jpg part.
    assert_eq!(
        index.part_by_entry_name("dup.jpg").unwrap(),
        Some(PartLocation {
            tar_file_id: 1,
            content_byte_offset: 3584,
            content_byte_size: 8,
            second_copy: None
        })
    );
    let names: Vec<_> =
        index.list_entries().unwrap().into_iter().map(|e| (e.name, e.tar_file_id)).collect();
    let expected = [
        ("a0.txt", 0),
        ("dup.txt", 0),
        ("a2.txt", 0),
        ("b0.txt", 1),
        ("dup.txt", 1),
        ("dup.jpg", 1),
    ];
    assert_eq!(names, expected.map(|(n, t)| (n.to_owned(), t)));
    let parts: Vec<_> = index
        .parts_of_sample("dup")
        .unwrap()
        .into_iter()
        .map(|p| (p.tar_file_id, p.part_name))
        .collect();
    assert_eq!(parts, [(0, "txt".to_owned()), (1, "txt".to_owned()), (1, "jpg".to_owned())]);
}

#[test]
fn energon_7_3_index_with_the_old_key_index_is_7_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(crate::sqlite::schema::SAMPLES_DDL).unwrap();
    conn.execute_batch(crate::sqlite::schema::SAMPLE_PARTS_DDL).unwrap();
    conn.execute_batch("CREATE INDEX idx_samples_sample_key ON samples(sample_key)").unwrap();
    drop(conn);
    let index = SqliteIndex::open(&path).unwrap();
    assert_eq!(index.schema_version(), Some(SchemaVersion::V7_3));
    assert_eq!(index.sample_count().unwrap(), 0);
    assert_eq!(index.total_size().unwrap(), 0);
    assert!(index.list_entries().unwrap().is_empty());
}

#[test]
fn media_only_index_has_no_sample_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(MEDIA_METADATA_DDL).unwrap();
    conn.execute_batch(MEDIA_FILTERS_DDL).unwrap();
    conn.execute_batch(
        "INSERT INTO media_metadata VALUES ('img/a.png', 'image', '{\"width\":2,\"height\":3,\"format\":\"PNG\",\"mode\":\"RGB\"}')",
    )
    .unwrap();
    drop(conn);
    let index = SqliteIndex::open(&path).unwrap();
    assert_eq!(index.schema_version(), None);
    assert!(index.has_media_metadata());
    assert!(!index.has_sample_parts());
    for err in [index.sample_count().unwrap_err(), index.sample_by_key("a").unwrap_err()] {
        assert!(matches!(err, Error::Incompatible { .. }), "{err:?}");
    }
    assert!(index.part_by_entry_name("a.png").is_err());
    let meta = index.media_metadata("img/a.png").unwrap().unwrap();
    assert_eq!(meta.metadata_type, "image");
    assert_eq!(meta.metadata_json, r#"{"width":2,"height":3,"format":"PNG","mode":"RGB"}"#);
    assert_eq!(index.media_metadata("img/b.png").unwrap(), None);
}
