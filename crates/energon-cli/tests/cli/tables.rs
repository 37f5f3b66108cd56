//! `energon prepare --no-sample-tables` and `--sample-tables-only`: loading without the per-sample
//! tables, clear errors where they are needed, and the tables built later.

use std::fs;

use energon_index::sqlite::dump_canonical;

use crate::util::{Dir, energon, run_err, run_ok};

const FLAGS: [&str; 7] = [
    "--split-parts",
    "train:shards/.*",
    "--non-interactive",
    "--sample-type",
    "CaptioningSample",
    "--field-map",
    r#"{"image": "jpg", "caption": "txt"}"#,
];

fn prepare(dir: &Dir) -> std::process::Command {
    let mut cmd = energon();
    cmd.arg("prepare").arg(dir.path()).arg("--no-progress");
    cmd
}

#[test]
fn a_dataset_without_sample_tables_loads_and_gets_them_later() {
    let dir = Dir::new().with_fixture_shards();
    run_ok(prepare(&dir).args(FLAGS).arg("--no-sample-tables"));
    let fixture = energon_tests::ref_small_dir();
    // What loading needs is the reference's, byte for byte.
    for i in 0..4 {
        let rel = format!("shards/data-{i:06}.tar.idx");
        assert_eq!(dir.read(&rel), fs::read(fixture.join(&rel)).unwrap(), "{rel}");
    }
    for rel in [".nv-meta/.info.json", ".nv-meta/split.yaml", ".nv-meta/dataset.yaml"] {
        assert_eq!(dir.read_string(rel), fs::read_to_string(fixture.join(rel)).unwrap(), "{rel}");
    }
    let db = dir.join(".nv-meta/index.sqlite");
    assert!(!dump_canonical(&db).unwrap().contains("sample_parts"));

    // The loader and lint need no tables.
    let keys = run_ok(
        energon().args(["trace", "--val", "--split-part", "train", "-n", "4"]).arg(dir.path()),
    );
    assert_eq!(keys.lines().count(), 4, "{keys}");
    run_ok(energon().arg("lint").arg(dir.path()));

    // Mount says how to add them (before it mounts anything).
    let mnt = dir.join("mnt");
    fs::create_dir(&mnt).unwrap();
    let err = run_err(energon().arg("mount").arg(dir.path()).arg(&mnt));
    assert!(err.contains("--no-sample-tables"), "{err}");
    let fix = format!("energon prepare --sample-tables-only {}", dir.path().display());
    assert!(err.contains(&fix), "{err}");

    // Media metadata does not need them.
    run_ok(energon().arg("prepare-media").arg(dir.path()).arg("--media-metadata-by-extension"));

    let dataset_yaml = dir.read(".nv-meta/dataset.yaml");
    let out = run_ok(prepare(&dir).arg("--sample-tables-only"));
    assert!(out.contains("Done"), "{out}");
    assert_eq!(dir.read(".nv-meta/dataset.yaml"), dataset_yaml);
    let theirs = dump_canonical(&fixture.join(".nv-meta/index.sqlite")).unwrap();
    let ours = dump_canonical(&db).unwrap();
    // The reference's rows, and the media tables kept.
    assert!(ours.starts_with("schema:\n"), "{ours}");
    assert!(ours.contains("table media_metadata"), "{ours}");
    for line in theirs.lines().filter(|l| !l.trim().is_empty()) {
        assert!(ours.contains(line), "missing {line:?}");
    }
}

#[test]
fn sample_tables_only_needs_a_prepared_dataset() {
    let dir = Dir::new().with_generated(1, 2);
    let err = run_err(prepare(&dir).arg("--sample-tables-only"));
    assert!(err.contains("--sample-tables-only needs an existing"), "{err}");
}
