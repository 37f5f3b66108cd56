//! Golden tests: an index rebuilt through [`SqliteIndexWriter`] from the rows of the reference's
//! `index.sqlite` must equal it, schema text included.

use std::{fs, path::Path};

use rusqlite::Connection;

use super::{fixtures_dir, ref_db, ref_small, write_db};
use crate::{
    shard::{PartEntry, SampleEntry, ShardScan},
    sqlite::dump_canonical,
};

/// Shard names in `.info.json` order (= `tar_file_id` order).
fn shard_names() -> Vec<String> {
    let text = fs::read_to_string(ref_small().join(".nv-meta/.info.json")).unwrap();
    let info: serde_json::Value = serde_json::from_str(&text).unwrap();
    info["shard_counts"].as_object().unwrap().keys().cloned().collect()
}

/// Rebuilds the scans of every shard from the rows of an index, with plain SQL.
fn scans_from_db(path: &Path) -> Vec<ShardScan> {
    let conn = Connection::open(path).unwrap();
    let mut scans: Vec<ShardScan> = Vec::new();
    let mut stmt = conn
        .prepare("SELECT tar_file_id, sample_key, sample_index, byte_offset, byte_size FROM samples ORDER BY tar_file_id, sample_index")
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(row) = rows.next().unwrap() {
        let (tar, key, idx, offset, size): (i64, String, i64, i64, i64) = (
            row.get(0).unwrap(),
            row.get(1).unwrap(),
            row.get(2).unwrap(),
            row.get(3).unwrap(),
            row.get(4).unwrap(),
        );
        let (tar, idx, offset, size) = (tar as usize, idx as usize, offset as u64, size as u64);
        if scans.len() <= tar {
            scans.resize_with(tar + 1, ShardScan::default);
        }
        let scan = &mut scans[tar];
        assert_eq!(scan.samples.len(), idx, "sample indexes are dense");
        scan.samples.push(SampleEntry { key, offset, parts: Vec::new() });
        scan.end_offset = offset + size;
    }
    let mut stmt = conn
        .prepare(
            "SELECT tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size FROM sample_parts \
             ORDER BY tar_file_id, sample_index, content_byte_offset",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(row) = rows.next().unwrap() {
        let (tar, idx, name, offset_data, size): (i64, i64, String, i64, i64) = (
            row.get(0).unwrap(),
            row.get(1).unwrap(),
            row.get(2).unwrap(),
            row.get(3).unwrap(),
            row.get(4).unwrap(),
        );
        let (tar, idx, offset_data, size) =
            (tar as usize, idx as usize, offset_data as u64, size as u64);
        scans[tar].samples[idx].parts.push(PartEntry { name, offset_data, size });
    }
    scans
}

fn rebuild_fixture(dir: &Path) -> std::path::PathBuf {
    let names = shard_names();
    let scans = scans_from_db(&ref_db());
    assert_eq!(names.len(), scans.len());
    let shards: Vec<(&str, &ShardScan)> = names.iter().map(String::as_str).zip(&scans).collect();
    let path = dir.join("index.sqlite");
    write_db(&path, &shards).unwrap();
    path
}

/// `(type, name, tbl_name, sql)` of every schema object, in creation (rowid) order.
fn schema_rows(path: &Path) -> Vec<(String, String, String, Option<String>)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt =
        conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid").unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn rebuilt_fixture_index_dumps_identically_to_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let ours = rebuild_fixture(dir.path());
    let expected = dump_canonical(&ref_db()).unwrap();
    let actual = dump_canonical(&ours).unwrap();
    assert!(expected.contains("table samples: 200 rows"), "{expected}");
    assert!(expected.contains("table sample_parts: 600 rows"));
    assert_eq!(actual, expected);
}

#[test]
fn schema_text_equals_the_reference_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let ours = rebuild_fixture(dir.path());
    let expected = schema_rows(&ref_db());
    assert_eq!(expected.len(), 6);
    assert_eq!(schema_rows(&ours), expected);
}

#[test]
fn schema_matches_the_reference_text_dump() {
    // The reference dump shows `sqlite_master` sorted by type (descending) and name, with the SQL
    // whitespace-collapsed; an independent check of the stored text.
    let dump = fs::read_to_string(fixtures_dir().join("energon-ref-small.dump.txt")).unwrap();
    let expected: Vec<&str> = dump
        .lines()
        .skip_while(|l| *l != "--- sqlite schema and rows")
        .skip(1)
        .take_while(|l| {
            l.starts_with("table ") && !l.contains(" columns ") || l.starts_with("index ")
        })
        .collect();
    assert_eq!(expected.len(), 6, "{expected:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut ours = schema_rows(&rebuild_fixture(dir.path()));
    ours.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let ours: Vec<String> = ours
        .into_iter()
        .map(|(kind, name, tbl, sql)| {
            let sql = sql.map_or_else(
                || "None".to_owned(),
                |s| s.split_whitespace().collect::<Vec<_>>().join(" "),
            );
            format!("{kind} {name} (on {tbl}): {sql}")
        })
        .collect();
    assert_eq!(ours, expected);
}

#[test]
fn written_file_is_an_ordinary_database() {
    let dir = tempfile::tempdir().unwrap();
    let ours = rebuild_fixture(dir.path());
    let header = fs::read(&ours).unwrap();
    // Page size 4096 (bytes 16-17) and file format 1/1 (legacy rollback journal, bytes 18-19), as
    // in the reference's file.
    assert_eq!(&header[16..20], &[0x10, 0x00, 0x01, 0x01]);
    let reference = fs::read(ref_db()).unwrap();
    assert_eq!(&header[16..20], &reference[16..20]);
    let leftovers: Vec<_> =
        fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(
        leftovers,
        vec![std::ffi::OsString::from("index.sqlite")],
        "no journal is left behind"
    );
    let conn = Connection::open(&ours).unwrap();
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(journal, "delete");
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let freelist: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)).unwrap();
    assert_eq!(freelist, 0);
}

#[test]
fn dump_ignores_insertion_order() {
    let dir = tempfile::tempdir().unwrap();
    let names = shard_names();
    let scans = scans_from_db(&ref_db());
    // The same rows, shards added last to first (tar_file_ids unchanged).
    let path = dir.path().join("reversed.sqlite");
    let mut writer = crate::sqlite::SqliteIndexWriter::create(&path).unwrap();
    for (i, (name, scan)) in names.iter().zip(&scans).enumerate().rev() {
        writer.add_shard(i as u64, name, scan).unwrap();
    }
    writer.finish().unwrap();
    assert_eq!(dump_canonical(&path).unwrap(), dump_canonical(&ref_db()).unwrap());
}

#[test]
fn dump_shows_a_changed_value() {
    let dir = tempfile::tempdir().unwrap();
    let names = shard_names();
    let mut scans = scans_from_db(&ref_db());
    scans[3].samples[49].parts[2].size += 1;
    let shards: Vec<(&str, &ShardScan)> = names.iter().map(String::as_str).zip(&scans).collect();
    let path = dir.path().join("changed.sqlite");
    write_db(&path, &shards).unwrap();
    let (ours, reference) = (dump_canonical(&path).unwrap(), dump_canonical(&ref_db()).unwrap());
    let diff: Vec<_> = ours.lines().zip(reference.lines()).filter(|(a, b)| a != b).collect();
    assert_eq!(
        diff,
        vec![("  (3, 49, \"json\", 188416, 125)", "  (3, 49, \"json\", 188416, 124)")]
    );
}
