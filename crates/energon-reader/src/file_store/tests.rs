//! Tests of the file stores against the reference fixture and plain folders.

use std::{fs, io::Read};

use super::*;
use crate::decode::Decoded;

fn fixture() -> PathBuf {
    energon_tests::ref_small_dir()
}

fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    energon_tests::copy_dir(&fixture(), dir.path()).unwrap();
    dir
}

/// The member `name` of a shard, read with the `tar` crate.
fn tar_member(shard: &Path, name: &str) -> Vec<u8> {
    let mut archive = tar::Archive::new(fs::File::open(shard).unwrap());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_str() == Some(name) {
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            return data;
        }
    }
    panic!("no member {name}");
}

#[test]
fn webdataset_entries_are_the_tar_members() {
    let store = WebdatasetFileStore::open(&fixture()).unwrap();
    for (i, part) in [(0, "jpg"), (51, "txt"), (120, "json"), (199, "jpg")] {
        let name = format!("{i:08}.{part}");
        let (data, source) = store.get(&name).unwrap();
        let shard = format!("shards/data-{:06}.tar", i / 50);
        assert_eq!(data.to_vec(), tar_member(&fixture().join(&shard), &name), "{name}");
        assert_eq!(&*source.shard_name, shard);
        assert_eq!(source.index, SourceIndex::Name(name.clone()));
        assert_eq!(source.file_names, [name]);
    }
    assert_eq!(store.path(), fixture());
}

#[test]
fn webdataset_samples_by_key() {
    let store = WebdatasetFileStore::open(&fixture()).unwrap();
    let (parts, source) = store.get_sample("00000077").unwrap();
    let names: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["jpg", "txt", "json"]);
    assert_eq!(
        parts[1].1.to_vec(),
        tar_member(&fixture().join("shards/data-000001.tar"), "00000077.txt")
    );
    assert_eq!(source.file_names, ["00000077.jpg", "00000077.txt", "00000077.json"]);
}

#[test]
fn unknown_entries_are_not_found() {
    let store = WebdatasetFileStore::open(&fixture()).unwrap();
    for name in ["00000000.png", "99999999.jpg", "noext", ".jpg"] {
        assert!(matches!(store.get(name), Err(Error::NotFound { .. })), "{name}");
    }
    assert!(matches!(store.get_sample("nope"), Err(Error::NotFound { .. })));
    assert!(store.media_metadata("00000000.jpg").unwrap().is_none());
}

#[test]
fn lookups_from_several_threads_agree() {
    let store = Arc::new(WebdatasetFileStore::open(&fixture()).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..200u64 {
                    let i = (i * 7 + t * 13) % 200;
                    let (data, _) = store.get(&format!("{i:08}.json")).unwrap();
                    let v: serde_json::Value = serde_json::from_slice(&data).unwrap();
                    assert_eq!(v["key"], format!("{i:08}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn indexes_without_sample_parts_parse_the_sample() {
    let dir = fixture_copy();
    let db = dir.path().join(".nv-meta/index.sqlite");
    rusqlite::Connection::open(&db).unwrap().execute_batch("DROP TABLE sample_parts;").unwrap();
    let store = WebdatasetFileStore::open(dir.path()).unwrap();
    let (data, source) = store.get("00000133.txt").unwrap();
    assert_eq!(
        data.to_vec(),
        tar_member(&fixture().join("shards/data-000002.tar"), "00000133.txt")
    );
    assert_eq!(&*source.shard_name, "shards/data-000002.tar");
    assert!(matches!(store.get("00000133.png"), Err(Error::NotFound { .. })));
}

#[test]
fn truncated_shard_is_a_typed_error() {
    let dir = fixture_copy();
    let shard = dir.path().join("shards/data-000003.tar");
    let bytes = fs::read(&shard).unwrap();
    fs::write(&shard, &bytes[..50_000]).unwrap();
    let store = WebdatasetFileStore::open(dir.path()).unwrap();
    assert!(store.get("00000150.jpg").is_ok());
    let err = store.get("00000199.jpg").unwrap_err();
    let Error::CorruptSample { at, reason } = &err else { panic!("{err}") };
    assert_eq!(
        (at.shard.as_str(), at.key.as_deref()),
        ("shards/data-000003.tar", Some("00000199"))
    );
    assert!(reason.contains("truncated"), "{err}");
    fs::remove_file(&shard).unwrap();
    let store = WebdatasetFileStore::open(dir.path()).unwrap();
    assert!(matches!(store.get("00000199.jpg"), Err(Error::MissingShard { .. })));
}

#[test]
fn media_metadata_is_read_from_index_sqlite() {
    let dir = fixture_copy();
    let db = dir.path().join(".nv-meta/index.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE media_metadata (entry_key TEXT PRIMARY KEY, metadata_type TEXT NOT NULL, \
             metadata_json TEXT NOT NULL);
             INSERT INTO media_metadata VALUES ('00000003.jpg', 'image', \
             '{\"width\":32,\"height\":32,\"format\":\"JPEG\",\"mode\":\"RGB\"}');",
        )
        .unwrap();
    let store = WebdatasetFileStore::open(dir.path()).unwrap();
    let meta = store.media_metadata("00000003.jpg").unwrap().unwrap();
    assert_eq!(meta.metadata_type, "image");
    assert!(meta.metadata_json.contains("\"width\":32"));
    let primary = PrimaryFileStore::new(&store, "00000003");
    assert!(primary.media_metadata(".jpg").unwrap().is_some());
}

impl FileStore for &WebdatasetFileStore {
    fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)> {
        (**self).get(name)
    }

    fn path(&self) -> &Path {
        (**self).path()
    }

    fn media_metadata(&self, name: &str) -> Result<Option<MediaMetadata>> {
        (**self).media_metadata(name)
    }
}

#[test]
fn system_store_reads_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("audio")).unwrap();
    fs::write(dir.path().join("audio/a.txt"), "hello").unwrap();
    let store = SystemFileStore::new(dir.path());
    let (data, source) = store.get("audio/a.txt").unwrap();
    assert_eq!(&data[..], b"hello");
    assert_eq!(source.file_names, ["audio/a.txt"]);
    assert_eq!(&*source.shard_name, dir.path().to_str().unwrap());
    assert!(matches!(store.get("audio/b.txt"), Err(Error::NotFound { .. })));
    assert!(store.media_metadata("audio/a.txt").unwrap().is_none());
    let decoded = DecodeFileStore::new(store, Decoder::default());
    assert_eq!(decoded.get_decoded("audio/a.txt").unwrap().0, Decoded::Text("hello".into()));
}

#[test]
fn jsonl_store_reads_records_by_number() {
    let store = JsonlFileStore::open(&fixture().join("jsonl/data.jsonl")).unwrap();
    let (a, source) = store.get("5.json").unwrap();
    let (b, _) = store.get("5").unwrap();
    assert_eq!(a, b);
    assert_eq!(&*source.shard_name, "data.jsonl");
    for bad in ["05", "200", "-1", "x.json", ""] {
        assert!(matches!(store.get(bad), Err(Error::NotFound { .. })), "{bad}");
    }
    let decoded = DecodeFileStore::new(store, Decoder::default());
    let (Decoded::Json(v), _) = decoded.get_decoded("7.json").unwrap() else { panic!() };
    assert_eq!(v["key"], "00000007");
}

#[test]
fn decode_and_primary_stores_compose() {
    let store =
        DecodeFileStore::new(WebdatasetFileStore::open(&fixture()).unwrap(), Decoder::default());
    let (Decoded::Image(t), _) = store.get_decoded("00000009.jpg").unwrap() else { panic!() };
    assert_eq!(t.shape, [32, 32, 3]);
    let primary = PrimaryFileStore::new(store.inner(), "00000009");
    assert_eq!(primary.resolve(".txt"), "00000009.txt");
    assert_eq!(primary.resolve("00000001.txt"), "00000001.txt");
    let (data, _) = primary.get(".txt").unwrap();
    assert_eq!(data, store.inner().get("00000009.txt").unwrap().0);
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("bad.json"), "{").unwrap();
    let err = DecodeFileStore::new(SystemFileStore::new(dir.path()), Decoder::default())
        .get_decoded("bad.json")
        .unwrap_err();
    assert!(matches!(&err, Error::Decode { part, .. } if part == "json"), "{err}");
}

#[test]
fn an_index_row_that_points_elsewhere_is_an_error_not_other_bytes() {
    // An edited (or stale) index.sqlite: the content of 00000001.txt given at the offset of
    // 00000001.json's content, with the same size. Lint's row checks do not look at part rows.
    let dir = fixture_copy();
    let db = dir.path().join(".nv-meta/index.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let json_offset: i64 = conn
        .query_row(
            "SELECT sp.content_byte_offset FROM sample_parts sp JOIN samples s \
             ON sp.tar_file_id = s.tar_file_id AND sp.sample_index = s.sample_index \
             WHERE s.sample_key = '00000001' AND sp.part_name = 'json'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE sample_parts SET content_byte_offset = ?1 WHERE part_name = 'txt' AND \
         sample_index = 1 AND tar_file_id = 0",
        [json_offset],
    )
    .unwrap();
    drop(conn);
    let store = WebdatasetFileStore::open(dir.path()).unwrap();
    let err = store.get("00000001.txt").unwrap_err();
    let Error::CorruptSample { at, reason } = &err else { panic!("{err}") };
    assert_eq!((at.key.as_deref(), at.offset), (Some("00000001"), json_offset as u64));
    assert!(reason.contains("member \"00000001.json\"") && reason.contains("prepare"), "{err}");
    // The other entries read as before.
    assert!(store.get("00000001.jpg").is_ok() && store.get("00000002.txt").is_ok());
}
