//! Media tables: created only on request, exact DDL, carried over from a previous index.

use std::path::Path;

use rusqlite::Connection;

use super::{numbered_scan, write_db};
use crate::sqlite::{
    SqliteIndex, SqliteIndexWriter, dump_canonical,
    schema::{MEDIA_FILTERS_DDL, MEDIA_METADATA_DDL},
};

fn table_sql(path: &Path, name: &str) -> Option<String> {
    let conn = Connection::open(path).unwrap();
    conn.query_row("SELECT sql FROM sqlite_master WHERE name = ?1", [name], |r| r.get(0)).ok()
}

/// The table sections of a canonical dump whose name is one of `tables`.
fn dump_sections(dump: &str, tables: &[&str]) -> String {
    let mut res = String::new();
    let mut keep = false;
    for line in dump.lines() {
        if let Some(rest) = line.strip_prefix("table ") {
            keep = tables.iter().any(|t| rest.starts_with(&format!("{t}:")));
        } else if !line.starts_with("  (") {
            keep = false;
        }
        if keep {
            res.push_str(line);
            res.push('\n');
        }
    }
    res
}

/// An index with media tables: three metadata rows, two filters, and a third filter deleted so
/// that `sqlite_sequence` is ahead of the rows.
fn old_index_with_media(path: &Path) {
    let mut writer = SqliteIndexWriter::create(path).unwrap();
    writer.add_shard(0, "a.tar", &numbered_scan("a", 3)).unwrap();
    writer.create_media_tables().unwrap();
    writer
        .add_media_metadata(
            "a000000.jpg",
            "image",
            r#"{"width":32,"height":32,"format":"JPEG","mode":"RGB"}"#,
        )
        .unwrap();
    writer
        .add_media_metadata(
            "a000001.jpg",
            "image",
            r#"{"width":1,"height":1,"format":"JPEG","mode":"L"}"#,
        )
        .unwrap();
    writer
        .add_media_metadata(
            "a000001.jpg",
            "image",
            r#"{"width":2,"height":2,"format":"JPEG","mode":"L"}"#,
        )
        .unwrap();
    writer.add_media_metadata("a000002.wav", "av", r#"{"audio_duration":1.5}"#).unwrap();
    writer.add_media_filter("EXTENSION", Some("")).unwrap();
    writer.add_media_filter("EXTENSION", Some("")).unwrap();
    writer.add_media_filter("GLOB", Some("*.jpg,*.png")).unwrap();
    writer.add_media_filter("HEADER", None).unwrap();
    writer.finish().unwrap();
    Connection::open(path)
        .unwrap()
        .execute("DELETE FROM media_filters WHERE strategy = 'HEADER'", [])
        .unwrap();
}

#[test]
fn plain_prepare_creates_no_media_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.sqlite");
    write_db(&path, &[("a.tar", &numbered_scan("a", 2))]).unwrap();
    assert_eq!(table_sql(&path, "media_metadata"), None);
    assert_eq!(table_sql(&path, "media_filters"), None);
    assert_eq!(table_sql(&path, "sqlite_sequence"), None);
}

#[test]
fn media_tables_have_the_reference_ddl_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.sqlite");
    old_index_with_media(&path);
    assert_eq!(table_sql(&path, "media_metadata").as_deref(), Some(MEDIA_METADATA_DDL));
    assert_eq!(table_sql(&path, "media_filters").as_deref(), Some(MEDIA_FILTERS_DDL));
    // Collapsed as in the reference's dump of a media-prepared dataset.
    let expected =
        std::fs::read_to_string(super::fixtures_dir().join(
            "energon-ref-small.expected/prepare-media-by-extension-then-header.index-dump.txt",
        ))
        .unwrap();
    for ddl in [MEDIA_METADATA_DDL, MEDIA_FILTERS_DDL] {
        let collapsed = ddl.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(expected.contains(&format!("): {collapsed}\n")), "{collapsed}");
    }

    let index = SqliteIndex::open(&path).unwrap();
    assert!(index.has_media_metadata());
    let meta = index.media_metadata("a000001.jpg").unwrap().unwrap();
    assert_eq!(
        meta.metadata_json, r#"{"width":2,"height":2,"format":"JPEG","mode":"L"}"#,
        "INSERT OR REPLACE"
    );
    let dump = dump_canonical(&path).unwrap();
    let filters = dump_sections(&dump, &["media_filters", "sqlite_sequence"]);
    // The ignored second EXTENSION insert used up id 2; the deleted HEADER row had id 4.
    assert_eq!(
        filters,
        "table media_filters: 2 rows ORDER BY strategy, patterns, filter_id, created_at_utc\n\
         \x20 (filter_id, strategy, patterns, created_at_utc)\n\
         \x20 (1, \"EXTENSION\", \"\", <volatile>)\n\
         \x20 (3, \"GLOB\", \"*.jpg,*.png\", <volatile>)\n\
         table sqlite_sequence: 1 rows ORDER BY name, seq\n\
         \x20 (name, seq)\n\
         \x20 (\"media_filters\", 4)\n"
    );
}

#[test]
fn media_tables_are_carried_over_from_the_old_index() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.sqlite");
    old_index_with_media(&old);
    let new = dir.path().join("new.sqlite");
    let mut writer = SqliteIndexWriter::create(&new).unwrap();
    writer.add_shard(0, "b.tar", &numbered_scan("b", 4)).unwrap();
    assert!(writer.copy_media_tables_from(&old).unwrap());
    writer.finish().unwrap();

    let tables = ["media_metadata", "media_filters", "sqlite_sequence"];
    let (old_dump, new_dump) = (dump_canonical(&old).unwrap(), dump_canonical(&new).unwrap());
    assert_eq!(dump_sections(&new_dump, &tables), dump_sections(&old_dump, &tables));
    assert!(dump_sections(&new_dump, &tables).contains("a000002.wav"));
    // Timestamps are copied, not re-stamped.
    let stamps = |p: &Path| -> Vec<String> {
        let conn = Connection::open(p).unwrap();
        let mut stmt =
            conn.prepare("SELECT created_at_utc FROM media_filters ORDER BY filter_id").unwrap();
        stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(stamps(&new), stamps(&old));
    for table in [
        "media_metadata",
        "media_filters",
        "sqlite_autoindex_media_metadata_1",
        "sqlite_autoindex_media_filters_1",
    ] {
        assert_eq!(table_sql(&new, table), table_sql(&old, table), "{table}");
    }
    // New filters continue the old id sequence.
    Connection::open(&new)
        .unwrap()
        .execute("INSERT INTO media_filters (strategy, patterns) VALUES ('X', '')", [])
        .unwrap();
    let id: i64 = Connection::open(&new)
        .unwrap()
        .query_row("SELECT filter_id FROM media_filters WHERE strategy = 'X'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(id, 5);
    let index = SqliteIndex::open(&new).unwrap();
    assert_eq!(index.sample_count().unwrap(), 4);
}

#[test]
fn nothing_is_copied_from_a_missing_or_media_less_index() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.sqlite");
    write_db(&plain, &[("a.tar", &numbered_scan("a", 2))]).unwrap();
    let new = dir.path().join("new.sqlite");
    let mut writer = SqliteIndexWriter::create(&new).unwrap();
    assert!(!writer.copy_media_tables_from(&dir.path().join("missing.sqlite")).unwrap());
    assert!(!writer.copy_media_tables_from(&plain).unwrap());
    assert!(!writer.copy_media_tables_from(&super::ref_db()).unwrap());
    writer.finish().unwrap();
    assert_eq!(table_sql(&new, "media_metadata"), None);

    let garbage = dir.path().join("garbage.sqlite");
    std::fs::write(&garbage, b"not a database, not at all, really not").unwrap();
    let mut writer = SqliteIndexWriter::create(&dir.path().join("new2.sqlite")).unwrap();
    let err = writer.copy_media_tables_from(&garbage).unwrap_err();
    assert!(matches!(&err, crate::Error::Sqlite { path, .. } if path == &garbage), "{err:?}");
}

#[test]
fn media_tables_of_this_run_win_over_the_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.sqlite");
    old_index_with_media(&old);
    let new = dir.path().join("new.sqlite");
    let mut writer = SqliteIndexWriter::create(&new).unwrap();
    writer.create_media_tables().unwrap();
    writer.add_media_metadata("b.jpg", "image", "{}").unwrap();
    assert!(!writer.copy_media_tables_from(&old).unwrap());
    writer.finish().unwrap();
    let index = SqliteIndex::open(&new).unwrap();
    assert!(index.media_metadata("a000000.jpg").unwrap().is_none());
    assert!(index.media_metadata("b.jpg").unwrap().is_some());
}
