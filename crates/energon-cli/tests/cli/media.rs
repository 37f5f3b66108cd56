//! `energon prepare-media` and `prepare --media-metadata-by-...`: the reference's rows for the
//! fixture, every strategy on generated media, re-runs, and bad input.

use std::{fs, path::Path};

use energon_reader::media::synth;
use image::{ColorType, ImageFormat};
use rusqlite::Connection;

use crate::util::{Dir, energon, run, run_err, run_ok};

/// The media rows of a database, by entry key.
fn media_rows(db: &Path) -> Vec<(String, String, String)> {
    let conn = Connection::open(db).unwrap();
    conn.prepare(
        "SELECT entry_key, metadata_type, metadata_json FROM media_metadata ORDER BY entry_key",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn filters(db: &Path) -> Vec<(i64, String, String)> {
    let conn = Connection::open(db).unwrap();
    conn.prepare("SELECT filter_id, strategy, patterns FROM media_filters ORDER BY filter_id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A writable copy of the whole reference fixture (prepared by the reference).
fn fixture_copy() -> Dir {
    let dir = Dir::new();
    energon_tests::copy_dir(&energon_tests::ref_small_dir(), dir.path()).unwrap();
    make_writable(dir.path());
    dir
}

fn make_writable(path: &Path) {
    let mut perms = fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    fs::set_permissions(path, perms).unwrap();
    if path.is_dir() {
        for entry in fs::read_dir(path).unwrap() {
            make_writable(&entry.unwrap().path());
        }
    }
}

fn prepare_media(dir: &Path) -> std::process::Command {
    let mut cmd = energon();
    cmd.arg("prepare-media").arg(dir).arg("--no-progress");
    cmd
}

const FIXTURE_JPEG: &str = r#"{"width":32,"height":32,"format":"JPEG","mode":"RGB"}"#;

/// The reference's dump `prepare-media-by-extension-then-header.index-dump.txt` was made by
/// `prepare-media --media-metadata-by-extension` then `--media-metadata-by-header` on the
/// fixture; the same two runs give the same rows and filters.
#[test]
fn golden_fixture_extension_then_header() {
    let dir = fixture_copy();
    let out = run_ok(prepare_media(dir.path()).arg("--media-metadata-by-extension"));
    assert_eq!(
        out,
        "Preparing webdataset and computing media metadata...\nDone. Stored metadata for 200 files.\n"
    );
    let out = run_ok(
        prepare_media(dir.path()).arg("--media-metadata-by-header").args(["--num-workers", "3"]),
    );
    assert!(out.ends_with("Done. Stored metadata for 200 files.\n"), "{out}");

    let db = dir.join(".nv-meta/index.sqlite");
    let expected = fs::read_to_string(
        energon_tests::ref_small_expected_dir()
            .join("prepare-media-by-extension-then-header.index-dump.txt"),
    )
    .unwrap();
    let rows = media_rows(&db);
    assert_eq!(rows.len(), 200);
    assert!(
        expected.contains("table media_metadata columns") && expected.contains("  rows: 200\n")
    );
    for (i, (key, kind, json)) in rows.iter().enumerate() {
        assert_eq!(key, &format!("{:08}.jpg", i));
        assert_eq!((kind.as_str(), json.as_str()), ("image", FIXTURE_JPEG));
        if i < 5 {
            assert!(expected.contains(&format!("  ('{key}', '{kind}', '{json}')\n")), "{key}");
        }
    }
    assert_eq!(
        filters(&db),
        [(1, "EXTENSION".into(), String::new()), (2, "HEADER".into(), String::new())]
    );
    assert!(
        expected.contains("  (1, 'EXTENSION', '', '") && expected.contains("  (2, 'HEADER', '', '")
    );
    // Same schema text as the reference (collapsed whitespace in the dump).
    let conn = Connection::open(&db).unwrap();
    for table in ["media_metadata", "media_filters"] {
        let sql: String = conn
            .query_row("SELECT sql FROM sqlite_master WHERE name = ?1", [table], |r| r.get(0))
            .unwrap();
        let collapsed = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(expected.contains(&format!("(on {table}): {collapsed}\n")), "{collapsed}");
    }
    // The sample index is untouched and still opens.
    let out = run_ok(energon().arg("info").arg(dir.path()));
    assert!(out.contains("200 samples"), "{out}");
}

#[test]
fn prepare_with_media_flags_replaces_the_tables_and_plain_prepare_keeps_them() {
    let dir = Dir::new().with_fixture_shards();
    let prepare = |extra: &[&str]| {
        let mut cmd = energon();
        cmd.arg("prepare").arg(dir.path()).args([
            "--no-progress",
            "--non-interactive",
            "--split-ratio",
            "1,0,0",
        ]);
        cmd.args(["--force-overwrite", "--skip-dataset-yaml"]).args(extra);
        cmd
    };
    let out = run_ok(&mut prepare(&["--media-metadata-by-extension"]));
    assert!(
        out.contains("Indexed 200 samples") && out.contains("Stored metadata for 200 files."),
        "{out}"
    );
    let db = dir.join(".nv-meta/index.sqlite");
    assert_eq!(media_rows(&db).len(), 200);
    run_ok(&mut prepare(&[]));
    assert_eq!(media_rows(&db).len(), 200, "a plain prepare keeps the media tables");
    assert_eq!(filters(&db), [(1, "EXTENSION".into(), String::new())]);
    run_ok(&mut prepare(&["--media-metadata-by-glob", "*.json"]));
    assert!(media_rows(&db).is_empty(), "json parts are no media");
    assert_eq!(filters(&db), [(1, "GLOB".into(), "*.json".into())], "replaced, ids start at 1");

    let err =
        run_err(&mut prepare(&["--media-metadata-by-extension", "--media-metadata-by-header"]));
    assert!(err.contains("exactly one"), "{err}");
    let err = run_err(
        energon()
            .arg("prepare")
            .arg(dir.path())
            .args(["--tar-index-only", "--media-metadata-by-header"]),
    );
    assert!(err.contains("--tar-index-only"), "{err}");
    let jsonl = dir.join("data.jsonl");
    fs::write(&jsonl, "{\"a\": 1}\n").unwrap();
    let err = run_err(energon().arg("prepare").arg(&jsonl).arg("--media-metadata-by-extension"));
    assert!(err.contains("not a WebDataset"), "{err}");
}

/// A folder of generated media: images, WAV and FLAC audio, text, a broken image, and a
/// `.nv-meta` folder whose files are ignored.
pub(crate) fn media_folder() -> Dir {
    let dir = Dir::new();
    let write = |rel: &str, data: &[u8]| {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, data).unwrap();
    };
    write("images/a.png", &synth::image(ImageFormat::Png, ColorType::Rgba8, 6, 4).unwrap());
    write("images/b.jpeg", &synth::image(ImageFormat::Jpeg, ColorType::Rgb8, 9, 7).unwrap());
    write("images/c.webp", &synth::image(ImageFormat::WebP, ColorType::Rgb8, 3, 3).unwrap());
    write("images/noext", &synth::image(ImageFormat::Bmp, ColorType::Rgb8, 2, 5).unwrap());
    write("audio/s.wav", &synth::wav(2, 48000, 12000));
    write("audio/t.FLAC", &synth::flac(1, 16000, 8000));
    write("readme.txt", b"not media");
    write("broken.jpg", b"\xff\xd8\xff\xe0 truncated");
    write(".nv-meta/old.png", b"ignored");
    dir
}

#[test]
fn folder_by_extension_header_and_glob() {
    let dir = media_folder();
    let db = dir.join(".nv-meta/index.sqlite");
    let (out, stdout, stderr) = run(prepare_media(dir.path()).arg("--media-metadata-by-extension"));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stdout,
        "Preparing filesystem dataset and computing media metadata...\nDone. Stored metadata for 5 files.\n"
    );
    assert!(
        stderr.contains("Skipped 1 media entries") && stderr.contains("broken.jpg: "),
        "{stderr}"
    );
    let rows = media_rows(&db);
    // The FLAC's frames carry no durations and its last frame no timestamp: the reference's
    // FFmpeg ends its audio at the last timestamped frame (0.36 s); symphonia, in a build without
    // FFmpeg, counts every sample (0.5 s).
    let flac = if cfg!(feature = "video") {
        r#"{"audio_duration":0.36,"audio_channels":1,"audio_sample_rate":16000,"audio_num_samples":8000}"#
    } else {
        r#"{"audio_duration":0.5,"audio_channels":1,"audio_sample_rate":16000,"audio_num_samples":8000}"#
    };
    let want = [
        (
            "audio/s.wav",
            "av",
            r#"{"audio_duration":0.25,"audio_channels":2,"audio_sample_rate":48000,"audio_num_samples":12000}"#,
        ),
        ("audio/t.FLAC", "av", flac),
        ("images/a.png", "image", r#"{"width":6,"height":4,"format":"PNG","mode":"RGBA"}"#),
        ("images/b.jpeg", "image", r#"{"width":9,"height":7,"format":"JPEG","mode":"RGB"}"#),
        ("images/c.webp", "image", r#"{"width":3,"height":3,"format":"WEBP","mode":"RGB"}"#),
    ];
    let got: Vec<(&str, &str, &str)> =
        rows.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    assert_eq!(got, want);

    // The header strategy also finds the BMP without an extension; rows are added.
    let out = run_ok(prepare_media(dir.path()).arg("--media-metadata-by-header"));
    assert!(out.ends_with("Stored metadata for 6 files.\n"), "{out}");
    let rows = media_rows(&db);
    assert_eq!(rows.len(), 6);
    assert!(rows.contains(&(
        "images/noext".into(),
        "image".into(),
        r#"{"width":2,"height":5,"format":"BMP","mode":"RGB"}"#.into()
    )));

    // Glob: the patterns match the lower-cased base name; a re-run adds to the tables.
    let out = run_ok(prepare_media(dir.path()).args(["--media-metadata-by-glob", "*.flac,noext"]));
    assert!(out.ends_with("Stored metadata for 2 files.\n"), "{out}");
    assert_eq!(
        filters(&db),
        [
            (1, "EXTENSION".into(), String::new()),
            (2, "HEADER".into(), String::new()),
            (3, "GLOB".into(), "*.flac,noext".into())
        ]
    );
    // The folder is now a filesystem dataset: prepare refuses it, prepare-media takes it again.
    let err = run_err(energon().arg("prepare").arg(dir.path()).arg("--non-interactive"));
    assert!(err.contains("prepare-media"), "{err}");
    run_ok(prepare_media(dir.path()).arg("--media-metadata-by-extension"));
    assert_eq!(filters(&db).len(), 3, "a repeated filter is recorded once");
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = media_folder();
    let err = run_err(&mut prepare_media(dir.path()));
    assert!(err.contains("exactly one"), "{err}");
    let err = run_err(prepare_media(dir.path()).args([
        "--media-metadata-by-header",
        "--media-metadata-by-glob",
        "*",
    ]));
    assert!(err.contains("exactly one"), "{err}");
    let err = run_err(prepare_media(&dir.join("readme.txt")).arg("--media-metadata-by-header"));
    assert!(err.contains("not a folder"), "{err}");
    let err = run_err(prepare_media(&dir.join("missing")).arg("--media-metadata-by-header"));
    assert!(err.contains("not a folder"), "{err}");
    // A damaged index.sqlite is reported and left as it is.
    fs::create_dir_all(dir.join(".nv-meta")).unwrap();
    fs::write(dir.join(".nv-meta/index.sqlite"), b"garbage garbage garbage garbage").unwrap();
    let err = run_err(prepare_media(dir.path()).arg("--media-metadata-by-extension"));
    assert!(err.contains("index.sqlite"), "{err}");
    assert_eq!(
        fs::read(dir.join(".nv-meta/index.sqlite")).unwrap(),
        b"garbage garbage garbage garbage"
    );
}

#[cfg(feature = "video")]
#[test]
fn video_in_a_folder_and_in_a_webdataset() {
    let dir = Dir::new();
    fs::create_dir_all(dir.join("clips")).unwrap();
    synth::video(&dir.join("clips/v.mp4"), 32, 24, 12, 6).unwrap();
    let out = run_ok(prepare_media(dir.path()).arg("--media-metadata-by-extension"));
    assert!(out.ends_with("Stored metadata for 1 files.\n"), "{out}");
    let rows = media_rows(&dir.join(".nv-meta/index.sqlite"));
    assert_eq!(
        rows[0].2,
        r#"{"video_duration":2.0,"video_num_frames":12,"video_fps":6.0,"video_width":32,"video_height":24}"#
    );

    // The same video inside a tar shard is read through its byte range.
    let wds = Dir::new();
    let video = fs::read(dir.join("clips/v.mp4")).unwrap();
    crate::util::write_tar(&wds.join("shards/a.tar"), &[("x.txt", b"hello"), ("x.mp4", &video)]);
    run_ok(energon().arg("prepare").arg(wds.path()).args([
        "--no-progress",
        "--non-interactive",
        "--split-ratio",
        "1,0,0",
        "--media-metadata-by-header",
    ]));
    let rows = media_rows(&wds.join(".nv-meta/index.sqlite"));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].0.as_str(), rows[0].2.as_str()),
        (
            "x.mp4",
            r#"{"video_duration":2.0,"video_num_frames":12,"video_fps":6.0,"video_width":32,"video_height":24}"#
        )
    );
}
