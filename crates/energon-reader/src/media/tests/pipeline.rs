//! The media pass over WebDatasets and plain folders.

use std::{
    fs,
    path::Path,
    sync::atomic::{AtomicUsize, Ordering},
};

use energon_index::{
    media::TableMode,
    sqlite::{SqliteIndex, dump_canonical},
};
use image::{ColorType, ImageFormat};

use crate::media::{
    MediaFilter,
    prepare::{MediaSourceKind, PrepareMediaOptions, Progress, prepare_media},
    synth,
};

fn options(filter: MediaFilter, num_workers: usize, tables: TableMode) -> PrepareMediaOptions {
    PrepareMediaOptions { filter, num_workers, tables, tmp_path: None }
}

fn ext() -> MediaFilter {
    MediaFilter::from_flags(None, false, true).unwrap()
}

fn header() -> MediaFilter {
    MediaFilter::from_flags(None, true, false).unwrap()
}

/// A writable copy of the reference fixture.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    energon_tests::copy_dir(&energon_tests::ref_small_dir(), dir.path()).unwrap();
    for entry in walk(dir.path()) {
        let mut perms = fs::metadata(&entry).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        fs::set_permissions(&entry, perms).unwrap();
    }
    dir
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut res = vec![dir.to_owned()];
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { res.extend(walk(&path)) } else { res.push(path) }
    }
    res
}

/// Lines of a canonical dump that belong to table `name`.
fn table_lines(dump: &str, name: &str) -> Vec<String> {
    let mut keep = false;
    let mut res = Vec::new();
    for line in dump.lines() {
        if let Some(rest) = line.strip_prefix("table ") {
            keep = rest.starts_with(&format!("{name}:"));
        } else if !line.starts_with("  (") {
            keep = false;
        }
        if keep {
            res.push(line.to_owned());
        }
    }
    res
}

#[test]
fn fixture_by_extension_then_header_matches_the_reference() {
    let dir = fixture_copy();
    let root = dir.path();
    let before = dump_canonical(&root.join(".nv-meta/index.sqlite")).unwrap();
    let events = AtomicUsize::new(0);
    let progress = |p: Progress| {
        if let Progress::Start { kind, n_tasks } = p {
            assert_eq!((kind, n_tasks), (MediaSourceKind::WebDataset, 4));
        }
        events.fetch_add(1, Ordering::Relaxed);
    };
    let summary = prepare_media(root, &options(ext(), 3, TableMode::Add), &progress).unwrap();
    assert_eq!((summary.n_stored, summary.n_media, summary.n_skipped), (200, 200, 0));
    assert_eq!(events.load(Ordering::Relaxed), 5);
    let summary = prepare_media(root, &options(header(), 2, TableMode::Add), &|_| {}).unwrap();
    assert_eq!((summary.n_stored, summary.n_skipped), (200, 0), "txt and json are not media");

    let db = root.join(".nv-meta/index.sqlite");
    let index = SqliteIndex::open(&db).unwrap();
    assert_eq!(index.sample_count().unwrap(), 200);
    let after = dump_canonical(&db).unwrap();
    for table in ["samples", "sample_parts"] {
        assert_eq!(table_lines(&after, table), table_lines(&before, table));
    }
    // The reference's dump after the same two runs.
    let expected = fs::read_to_string(
        energon_tests::ref_small_expected_dir()
            .join("prepare-media-by-extension-then-header.index-dump.txt"),
    )
    .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<(String, String, String)> = conn
        .prepare(
            "SELECT entry_key, metadata_type, metadata_json FROM media_metadata ORDER BY entry_key",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 200);
    assert!(expected.contains("  rows: 200\n  ('entry_key', 'metadata_type', 'metadata_json')"));
    for (key, kind, json) in &rows {
        assert_eq!(
            (kind.as_str(), json.as_str()),
            ("image", r#"{"width":32,"height":32,"format":"JPEG","mode":"RGB"}"#),
            "{key}"
        );
    }
    for (key, kind, json) in rows.iter().take(5) {
        let line = format!("  ('{key}', '{kind}', '{json}')");
        assert!(expected.contains(&line), "{line}");
    }
    let filters: Vec<(i64, String, String)> = conn
        .prepare("SELECT filter_id, strategy, patterns FROM media_filters ORDER BY filter_id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        filters,
        [(1, "EXTENSION".into(), String::new()), (2, "HEADER".into(), String::new())]
    );
    for (id, strategy, _) in &filters {
        assert!(expected.contains(&format!("  ({id}, '{strategy}', '', '")), "{strategy}");
    }
}

/// A plain folder with images, audio, text, a broken image, a nested folder and a `.nv-meta`
/// folder whose files must be ignored.
fn media_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, data: &[u8]| {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, data).unwrap();
    };
    write("img/a.png", &synth::image(ImageFormat::Png, ColorType::Rgb8, 4, 2).unwrap());
    write("img/b.JPG", &synth::image(ImageFormat::Jpeg, ColorType::L8, 8, 8).unwrap());
    write("img/c.dat", &synth::image(ImageFormat::Gif, ColorType::Rgba8, 3, 3).unwrap());
    write("audio/x.wav", &synth::wav(1, 8000, 4000));
    write("audio/y.flac", &synth::flac(2, 22050, 2205));
    write("notes.txt", b"just text");
    write("broken.png", b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR");
    write(".nv-meta/ignored.png", &synth::image(ImageFormat::Png, ColorType::L8, 1, 1).unwrap());
    write("deep/.nv-meta/also.png", b"x");
    dir
}

fn media_rows(db: &Path) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.prepare("SELECT entry_key, metadata_json FROM media_metadata ORDER BY entry_key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn folder_by_extension_header_and_glob() {
    let dir = media_folder();
    let root = dir.path();
    let db = root.join(".nv-meta/index.sqlite");
    let summary = prepare_media(root, &options(ext(), 4, TableMode::Add), &|_| {}).unwrap();
    assert_eq!(summary.kind, MediaSourceKind::Folder);
    assert_eq!((summary.n_tasks, summary.n_stored, summary.n_skipped), (5, 4, 1));
    assert_eq!(summary.skipped[0].entry_key, "broken.png");
    assert!(summary.skipped[0].reason.contains("PNG"), "{}", summary.skipped[0].reason);
    let rows = media_rows(&db);
    // The FLAC's last frame has no timestamp: 0.0 s from the reference's FFmpeg, which ends at
    // the last timestamped frame (see `probes::wav_and_flac_audio`), 0.1 s from symphonia.
    let flac = if cfg!(feature = "video") {
        r#"{"audio_duration":0.0,"audio_channels":2,"audio_sample_rate":22050,"audio_num_samples":2205}"#
    } else {
        r#"{"audio_duration":0.1,"audio_channels":2,"audio_sample_rate":22050,"audio_num_samples":2205}"#
    };
    assert_eq!(
        rows,
        [
            ("audio/x.wav".into(), r#"{"audio_duration":0.5,"audio_channels":1,"audio_sample_rate":8000,"audio_num_samples":4000}"#.into()),
            ("audio/y.flac".into(), flac.into()),
            ("img/a.png".into(), r#"{"width":4,"height":2,"format":"PNG","mode":"RGB"}"#.into()),
            ("img/b.JPG".into(), r#"{"width":8,"height":8,"format":"JPEG","mode":"L"}"#.into()),
        ]
    );
    // A media-only index: no sample tables, so the folder is a "filesystem" dataset.
    let index = SqliteIndex::open(&db).unwrap();
    assert!(index.schema_version().is_none());
    assert_eq!(
        energon_index::discover::classify(root).unwrap(),
        energon_index::discover::DatasetKind::Filesystem
    );

    // The header strategy also finds the GIF named .dat, and adds to the tables.
    let summary = prepare_media(root, &options(header(), 1, TableMode::Add), &|_| {}).unwrap();
    assert_eq!((summary.n_tasks, summary.n_stored, summary.n_skipped), (7, 5, 1));
    let rows = media_rows(&db);
    assert_eq!(rows.len(), 5);
    assert_eq!(
        rows[2],
        ("img/a.png".into(), r#"{"width":4,"height":2,"format":"PNG","mode":"RGB"}"#.into())
    );
    assert!(
        rows.iter().any(|(k, j)| k == "img/c.dat" && j.contains(r#""format":"GIF","mode":"P""#))
    );

    // Glob patterns match the lower-cased base name.
    let glob = MediaFilter::from_flags(Some("*.jpg,*.flac"), false, false).unwrap();
    let summary = prepare_media(root, &options(glob, 2, TableMode::Replace), &|_| {}).unwrap();
    assert_eq!((summary.n_tasks, summary.n_stored), (2, 2));
    let keys: Vec<String> = media_rows(&db).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["audio/y.flac", "img/b.JPG"]);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let filters: Vec<(i64, String, String)> = conn
        .prepare("SELECT filter_id, strategy, patterns FROM media_filters")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(filters, [(1, "GLOB".into(), "*.jpg,*.flac".into())]);
}

#[test]
fn results_do_not_depend_on_the_number_of_workers() {
    let a = media_folder();
    let b = media_folder();
    prepare_media(a.path(), &options(header(), 1, TableMode::Add), &|_| {}).unwrap();
    prepare_media(b.path(), &options(header(), 8, TableMode::Add), &|_| {}).unwrap();
    let dump =
        |d: &tempfile::TempDir| dump_canonical(&d.path().join(".nv-meta/index.sqlite")).unwrap();
    assert_eq!(dump(&a), dump(&b));
    // Rows are inserted in walk order, so even the row ids agree.
    let rowids = |d: &tempfile::TempDir| -> Vec<(i64, String)> {
        let conn = rusqlite::Connection::open(d.path().join(".nv-meta/index.sqlite")).unwrap();
        conn.prepare("SELECT rowid, entry_key FROM media_metadata ORDER BY rowid")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(rowids(&a), rowids(&b));
}

#[test]
fn failures_leave_the_index_untouched() {
    let dir = fixture_copy();
    let root = dir.path();
    let db = root.join(".nv-meta/index.sqlite");
    let before = fs::read(&db).unwrap();
    // A damaged shard: a bad header checksum in the middle.
    let shard = root.join("shards/data-000002.tar");
    let mut data = fs::read(&shard).unwrap();
    data[512 * 20 + 148] ^= 0x55;
    fs::write(&shard, data).unwrap();
    let err = prepare_media(root, &options(ext(), 2, TableMode::Add), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("data-000002.tar"), "{err}");
    assert_eq!(fs::read(&db).unwrap(), before);
    assert!(!root.join(".nv-meta/index.sqlite.tmp").exists());

    fs::remove_file(&shard).unwrap();
    let err = prepare_media(root, &options(ext(), 2, TableMode::Add), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("data-000002.tar"), "{err}");
    assert_eq!(fs::read(&db).unwrap(), before);

    let jsonl = root.join("jsonl/data.jsonl");
    let err = prepare_media(&jsonl, &options(ext(), 2, TableMode::Add), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("JSONL"), "{err}");

    fs::remove_file(&db).unwrap();
    let err = prepare_media(root, &options(ext(), 2, TableMode::Add), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("energon prepare"), "{err}");
}

#[test]
fn a_running_prepare_makes_the_media_pass_wait_its_turn() {
    let dir = fixture_copy();
    let root = dir.path();
    let db = root.join(".nv-meta/index.sqlite");
    let before = fs::read(&db).unwrap();
    let lock = energon_index::PrepareLock::acquire(root, &root.join(".nv-meta")).unwrap();
    let err = prepare_media(root, &options(ext(), 1, TableMode::Add), &|_| {}).unwrap_err();
    assert!(matches!(err, crate::Error::Index(energon_index::Error::Busy { .. })), "{err}");
    assert_eq!(fs::read(&db).unwrap(), before);
    drop(lock);
    prepare_media(root, &options(ext(), 1, TableMode::Add), &|_| {}).unwrap();
}

#[test]
fn an_empty_folder_gets_empty_tables() {
    let dir = tempfile::tempdir().unwrap();
    let summary = prepare_media(dir.path(), &options(ext(), 2, TableMode::Add), &|_| {}).unwrap();
    assert_eq!((summary.n_tasks, summary.n_stored), (0, 0));
    assert!(media_rows(&dir.path().join(".nv-meta/index.sqlite")).is_empty());
}

#[cfg(feature = "video")]
#[test]
fn video_and_ffmpeg_audio() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    synth::video(&root.join("clip.mp4"), 64, 48, 25, 25).unwrap();
    synth::video(&root.join("clip.mkv"), 32, 16, 10, 5).unwrap();
    let summary = prepare_media(root, &options(ext(), 2, TableMode::Add), &|_| {}).unwrap();
    assert_eq!((summary.n_stored, summary.n_skipped), (2, 0), "{:?}", summary.skipped);
    let rows = media_rows(&root.join(".nv-meta/index.sqlite"));
    assert_eq!(rows[0].0, "clip.mkv");
    assert!(
        rows[0].1.contains(
            r#""video_num_frames":10,"video_fps":5.0,"video_width":32,"video_height":16"#
        ),
        "{}",
        rows[0].1
    );
    assert_eq!(rows[1].0, "clip.mp4");
    assert_eq!(
        rows[1].1,
        r#"{"video_duration":1.0,"video_num_frames":25,"video_fps":25.0,"video_width":64,"video_height":48}"#
    );

    // FFmpeg reads audio as symphonia (the build without FFmpeg) does: same numbers for WAV,
    // from the file in place and from the bytes.
    let wav = synth::wav(2, 16000, 24000);
    fs::write(root.join("a.wav"), &wav).unwrap();
    let source = crate::media::AvSource { data: &wav, file: Some((&root.join("a.wav"), 0)) };
    let ffmpeg = crate::media::probe_av("a.wav", source).unwrap();
    let symphonia = crate::media::audio::probe_audio("a.wav", &wav).unwrap();
    assert_eq!(ffmpeg, symphonia);
    let in_memory = crate::media::AvSource { data: &wav, file: None };
    assert_eq!(crate::media::probe_av("a.wav", in_memory).unwrap(), ffmpeg);
}
