//! Tests of the media JSON encodings and the media table writer.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rusqlite::Connection;

use super::*;
use crate::sqlite::{SqliteIndex, SqliteIndexWriter, dump_canonical};

fn fixture_db() -> PathBuf {
    energon_fixtures::ref_small_dir().join(".nv-meta/index.sqlite")
}

fn jpeg(width: u32, height: u32, mode: &str) -> Metadata {
    Metadata::Image(ImageMetadata { width, height, format: "JPEG".into(), mode: mode.into() })
}

fn rows(path: &Path, sql: &str) -> Vec<Vec<String>> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |row| {
        (0..n)
            .map(|i| {
                let v: rusqlite::types::Value = row.get(i)?;
                Ok(match v {
                    rusqlite::types::Value::Null => "NULL".to_owned(),
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Real(f) => f.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    rusqlite::types::Value::Blob(b) => format!("{b:?}"),
                })
            })
            .collect()
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn table_names(path: &Path) -> Vec<String> {
    rows(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .into_iter()
        .map(|mut r| r.remove(0))
        .collect()
}

#[test]
fn image_json_is_the_reference_row() {
    // Row `00000000.jpg` of the reference's media dump.
    assert_eq!(
        jpeg(32, 32, "RGB").to_json(),
        r#"{"width":32,"height":32,"format":"JPEG","mode":"RGB"}"#
    );
    assert_eq!(jpeg(1, 2, "I;16").metadata_type(), "image");
}

#[test]
fn av_json_keeps_field_order_floats_and_leaves_out_none() {
    let audio = AvMetadata {
        audio_duration: Some(1.0),
        audio_channels: Some(2),
        audio_sample_rate: Some(16000),
        audio_num_samples: Some(16000),
        ..AvMetadata::default()
    };
    assert_eq!(
        Metadata::Av(audio).to_json(),
        r#"{"audio_duration":1.0,"audio_channels":2,"audio_sample_rate":16000,"audio_num_samples":16000}"#
    );
    let video = AvMetadata {
        video_duration: Some(0.00001),
        video_num_frames: Some(25),
        video_fps: Some(29.97),
        video_width: Some(64),
        video_height: Some(48),
        audio_duration: Some(1e16),
        audio_channels: None,
        audio_sample_rate: Some(8000),
        audio_num_samples: None,
    };
    assert_eq!(
        Metadata::Av(video).to_json(),
        r#"{"video_duration":1e-05,"video_num_frames":25,"video_fps":29.97,"video_width":64,"video_height":48,"audio_duration":1e+16,"audio_sample_rate":8000}"#
    );
    assert_eq!(Metadata::Av(AvMetadata::default()).to_json(), "{}");
    let odd = AvMetadata {
        video_fps: Some(f64::NAN),
        audio_duration: Some(f64::NEG_INFINITY),
        ..AvMetadata::default()
    };
    assert_eq!(Metadata::Av(odd).to_json(), r#"{"video_fps":NaN,"audio_duration":-Infinity}"#);
}

#[test]
fn strings_are_escaped_like_python_json() {
    let m = Metadata::Image(ImageMetadata {
        width: 1,
        height: 1,
        format: "a\"b\\c\n\u{e9}\u{1f600}".into(),
        mode: "\u{1}".into(),
    });
    assert_eq!(
        m.to_json(),
        r#"{"width":1,"height":1,"format":"a\"b\\c\n\u00e9\ud83d\ude00","mode":"\u0001"}"#
    );
}

#[test]
fn bad_rows_are_typed_errors_naming_the_database() {
    let path = Path::new("db.sqlite");
    let row = |t: &str, j: &str| MediaMetadata { metadata_type: t.into(), metadata_json: j.into() };
    for (t, j, want) in [
        ("image", "not json", "not JSON"),
        ("image", "[1]", "not a JSON object"),
        ("image", r#"{"width":1,"height":2,"format":"PNG"}"#, "mode"),
        ("image", r#"{"width":-1,"height":2,"format":"PNG","mode":"L"}"#, "width"),
        ("image", r#"{"width":4294967296,"height":2,"format":"PNG","mode":"L"}"#, "out of range"),
        ("av", r#"{"video_fps":"x"}"#, "video_fps"),
        ("video", "{}", "unknown metadata_type"),
    ] {
        let err = Metadata::from_row(path, "k.jpg", &row(t, j)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("db.sqlite") && msg.contains("k.jpg") && msg.contains(want), "{msg}");
    }
    // Unknown fields are ignored.
    let m =
        Metadata::from_row(path, "k", &row("av", r#"{"audio_channels":1,"new_field":3}"#)).unwrap();
    assert_eq!(m, Metadata::Av(AvMetadata { audio_channels: Some(1), ..AvMetadata::default() }));
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    proptest::option::of(s)
}

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![any::<f64>().prop_filter("finite", |f| f.is_finite()), 0.0..1e4f64]
}

proptest! {
    #[test]
    fn json_round_trips(
        v in (opt(finite()), opt(any::<u64>()), opt(finite()), opt(any::<u32>()), opt(any::<u32>())),
        a in (opt(finite()), opt(any::<u32>()), opt(any::<u32>()), opt(any::<u64>())),
        w in any::<u32>(), h in any::<u32>(), mode in "[A-Za-z0-9;]{0,6}",
    ) {
        let av = Metadata::Av(AvMetadata {
            video_duration: v.0, video_num_frames: v.1, video_fps: v.2, video_width: v.3,
            video_height: v.4, audio_duration: a.0, audio_channels: a.1, audio_sample_rate: a.2,
            audio_num_samples: a.3,
        });
        let image = Metadata::Image(ImageMetadata { width: w, height: h, format: "PNG".into(), mode });
        for m in [av, image] {
            let row = MediaMetadata { metadata_type: m.metadata_type().into(), metadata_json: m.to_json() };
            prop_assert_eq!(Metadata::from_row(Path::new("x"), "k", &row).unwrap(), m);
        }
    }
}

#[test]
fn a_plain_folder_gets_a_media_only_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    let mut writer = MediaIndexWriter::open(&path, TableMode::Add).unwrap();
    assert_eq!(writer.path(), path);
    writer.add("a/x.png", &jpeg(3, 4, "L")).unwrap();
    writer
        .add(
            "b.wav",
            &Metadata::Av(AvMetadata { audio_channels: Some(1), ..AvMetadata::default() }),
        )
        .unwrap();
    assert_eq!(writer.n_rows(), 2);
    assert!(!path.exists(), "nothing is visible before finish");
    assert_eq!(writer.finish(MediaStrategy::Header, "").unwrap(), 2);
    assert!(!dir.path().join("index.sqlite.tmp").exists());
    assert_eq!(table_names(&path), ["media_filters", "media_metadata", "sqlite_sequence"]);
    let ddl = rows(
        &path,
        "SELECT sql FROM sqlite_master WHERE name IN ('media_filters', 'media_metadata') ORDER BY name",
    );
    assert_eq!(ddl, [vec![MEDIA_FILTERS_DDL.to_owned()], vec![MEDIA_METADATA_DDL.to_owned()]]);
    assert_eq!(
        rows(&path, "SELECT filter_id, strategy, patterns FROM media_filters"),
        [["1", "HEADER", ""]]
    );
    let index = SqliteIndex::open(&path).unwrap();
    assert!(index.schema_version().is_none());
    let row = index.media_metadata("a/x.png").unwrap().unwrap();
    assert_eq!(Metadata::from_row(&path, "a/x.png", &row).unwrap(), jpeg(3, 4, "L"));
    // The journal mode is back to the default, so readers need no `-wal` or hot journal.
    assert!(!dir.path().join("index.sqlite-journal").exists());
}

#[test]
fn add_mode_keeps_samples_and_old_rows_and_ignores_a_repeated_filter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    std::fs::copy(fixture_db(), &path).unwrap();
    let before = dump_canonical(&path).unwrap();

    let mut writer = MediaIndexWriter::open(&path, TableMode::Add).unwrap();
    writer.add("00000000.jpg", &jpeg(32, 32, "RGB")).unwrap();
    writer.add("00000001.jpg", &jpeg(1, 1, "L")).unwrap();
    writer.finish(MediaStrategy::Extension, "").unwrap();
    let mut writer = MediaIndexWriter::open(&path, TableMode::Add).unwrap();
    writer.add("00000001.jpg", &jpeg(32, 32, "RGB")).unwrap();
    writer.finish(MediaStrategy::Glob, "*.jpg,*.png").unwrap();
    let mut writer = MediaIndexWriter::open(&path, TableMode::Add).unwrap();
    writer.add("00000002.jpg", &jpeg(32, 32, "RGB")).unwrap();
    writer.finish(MediaStrategy::Extension, "").unwrap();

    let after = dump_canonical(&path).unwrap();
    // The sample tables are untouched: every line of the old dump is still there.
    for line in before.lines() {
        assert!(after.contains(line), "{line}");
    }
    assert_eq!(
        rows(&path, "SELECT entry_key, metadata_json FROM media_metadata ORDER BY entry_key"),
        [
            ["00000000.jpg", r#"{"width":32,"height":32,"format":"JPEG","mode":"RGB"}"#],
            ["00000001.jpg", r#"{"width":32,"height":32,"format":"JPEG","mode":"RGB"}"#],
            ["00000002.jpg", r#"{"width":32,"height":32,"format":"JPEG","mode":"RGB"}"#],
        ]
    );
    // The third run's EXTENSION filter is ignored; its failed insert does not use up an id.
    assert_eq!(
        rows(&path, "SELECT filter_id, strategy, patterns FROM media_filters ORDER BY filter_id"),
        [["1", "EXTENSION", ""], ["2", "GLOB", "*.jpg,*.png"]]
    );
    let index = SqliteIndex::open(&path).unwrap();
    assert_eq!(index.sample_count().unwrap(), 200);
}

#[test]
fn replace_mode_starts_the_media_tables_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    let mut writer = SqliteIndexWriter::create(&path).unwrap();
    writer.create_media_tables().unwrap();
    writer.add_media_metadata("old.jpg", "image", "{}").unwrap();
    writer.add_media_filter("HEADER", Some("")).unwrap();
    writer.add_media_filter("GLOB", Some("*.x")).unwrap();
    writer.finish().unwrap();

    let mut writer = MediaIndexWriter::open(&path, TableMode::Replace).unwrap();
    writer.add("new.jpg", &jpeg(1, 1, "L")).unwrap();
    writer.finish(MediaStrategy::Extension, "").unwrap();
    assert_eq!(rows(&path, "SELECT entry_key FROM media_metadata"), [["new.jpg"]]);
    assert_eq!(rows(&path, "SELECT filter_id, strategy FROM media_filters"), [["1", "EXTENSION"]]);
    assert_eq!(
        table_names(&path),
        ["media_filters", "media_metadata", "sample_parts", "samples", "sqlite_sequence"]
    );
}

#[test]
fn an_unfinished_writer_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    std::fs::copy(fixture_db(), &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let mut writer = MediaIndexWriter::open(&path, TableMode::Replace).unwrap();
    writer.add("x.jpg", &jpeg(1, 1, "L")).unwrap();
    drop(writer);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the copy is removed");

    let missing = dir.path().join("new.sqlite");
    drop(MediaIndexWriter::open(&missing, TableMode::Add).unwrap());
    assert!(!missing.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_damaged_database_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    std::fs::write(&path, b"this is not a database, not at all, nothing like one").unwrap();
    let err = MediaIndexWriter::open(&path, TableMode::Add).unwrap_err();
    assert!(matches!(&err, Error::Sqlite { path: p, .. } if p == &path), "{err:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the copy is removed");

    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let err = MediaIndexWriter::open(&path, TableMode::Add).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[test]
fn strategy_names_are_the_reference_enum_names() {
    assert_eq!(MediaStrategy::Extension.as_str(), "EXTENSION");
    assert_eq!(MediaStrategy::Header.as_str(), "HEADER");
    assert_eq!(MediaStrategy::Glob.as_str(), "GLOB");
}
