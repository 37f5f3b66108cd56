//! `energon prepare`: golden comparison with the reference, every flag, every bad input.

use std::{fs, io::Write, process::Stdio};

use energon_index::sqlite::dump_canonical;

use crate::util::{Dir, energon, run, run_err, run_ok, snapshot, write_tar};

const FIELD_MAP: &str = r#"{"image": "jpg", "caption": "txt"}"#;

fn prepare(dir: &Dir) -> std::process::Command {
    let mut cmd = energon();
    cmd.arg("prepare").arg(dir.path()).arg("--no-progress");
    cmd
}

/// Our prepare of the fixture's tars, with the flags the reference used, reproduces the reference's
/// files: identical `.tar.idx` bytes, `.info.json`, `split.yaml` and `dataset.yaml`, and the same SQLite
/// schema and rows.
#[test]
fn golden_fixture_prepare() {
    let dir = Dir::new().with_fixture_shards();
    run_ok(prepare(&dir).args([
        "--split-parts",
        "train:shards/.*",
        "--non-interactive",
        "--sample-type",
        "CaptioningSample",
        "--field-map",
        FIELD_MAP,
    ]));
    let fixture = energon_tests::ref_small_dir();
    for i in 0..4 {
        let rel = format!("shards/data-{i:06}.tar.idx");
        assert_eq!(dir.read(&rel), fs::read(fixture.join(&rel)).unwrap(), "{rel}");
    }
    for rel in [".nv-meta/.info.json", ".nv-meta/split.yaml", ".nv-meta/dataset.yaml"] {
        assert_eq!(dir.read_string(rel), fs::read_to_string(fixture.join(rel)).unwrap(), "{rel}");
    }
    let ours = dump_canonical(&dir.join(".nv-meta/index.sqlite")).unwrap();
    let theirs = dump_canonical(&fixture.join(".nv-meta/index.sqlite")).unwrap();
    assert_eq!(ours, theirs);
    let uuid = dir.read_string(".nv-meta/index.uuid");
    assert_eq!(uuid.len(), 36, "{uuid:?}");
}

#[test]
fn jsonl_prepare_matches_reference_index() {
    let dir = Dir::new();
    let src = energon_tests::ref_small_dir().join("jsonl/data.jsonl");
    fs::copy(&src, dir.join("data.jsonl")).unwrap();
    let out = run_ok(energon().arg("prepare").arg(dir.join("data.jsonl")));
    assert!(out.contains("200 samples"), "{out}");
    let theirs = fs::read(energon_tests::ref_small_dir().join("jsonl/data.jsonl.idx")).unwrap();
    assert_eq!(dir.read("data.jsonl.idx"), theirs);
}

#[test]
fn jsonl_bad_line_names_file_and_offset() {
    let dir = Dir::new();
    fs::write(dir.join("bad.jsonl"), "{\"a\": 1}\nnot json\n").unwrap();
    let err = run_err(energon().arg("prepare").arg(dir.join("bad.jsonl")));
    assert!(err.contains("bad.jsonl") && err.contains("offset 9"), "{err}");
    assert!(!dir.join("bad.jsonl.idx").exists());
}

#[test]
fn split_ratio_with_shuffle_matches_python_random_42() {
    let dir = Dir::new().with_generated(10, 2);
    run_ok(prepare(&dir).args(["--split-ratio", "8,1,1", "--shuffle-tars", "--non-interactive"]));
    // Python: l = list(range(10)); random.Random(42).shuffle(l) gives [7, 3, 2, 8, 5, 6, 9, 4, 0, 1].
    let split = dir.read_string(".nv-meta/split.yaml");
    // Shards 5 and 6 are adjacent in the shuffled order, so they collapse into one brace range.
    let expected = "split_parts:\n  train:\n  - shards/data-000007.tar\n  - shards/data-000003.tar\n  \
                    - shards/data-000002.tar\n  - shards/data-000008.tar\n  \
                    - shards/data-{000005..000006}.tar\n  - shards/data-000009.tar\n  \
                    - shards/data-000004.tar\n  val:\n  - shards/data-000000.tar\n  test:\n  \
                    - shards/data-000001.tar\nexclude: []\n";
    assert_eq!(split, expected);
    // Without the shuffle, shards stay in discovery order and runs collapse into brace ranges.
    run_ok(prepare(&dir).args([
        "--split-ratio",
        "0.8, 0.1, 0.1",
        "--non-interactive",
        "--force-overwrite",
    ]));
    assert_eq!(
        dir.read_string(".nv-meta/split.yaml"),
        "split_parts:\n  train:\n  - shards/data-{000000..000007}.tar\n  val:\n  - shards/data-000008.tar\n  \
         test:\n  - shards/data-000009.tar\nexclude: []\n"
    );
}

#[test]
fn split_parts_and_exclude() {
    let dir = Dir::new().with_generated(6, 2);
    run_ok(prepare(&dir).args([
        "--split-parts",
        "train:shards/data-00000[0-3]",
        "--split-parts",
        "val:shards/data-00000{4,5}",
        "--exclude",
        "000003",
        "--non-interactive",
    ]));
    assert_eq!(
        dir.read_string(".nv-meta/split.yaml"),
        "split_parts:\n  train:\n  - shards/data-{000000..000002}.tar\n  val:\n  \
         - shards/data-{000004..000005}.tar\nexclude: []\n"
    );
    let info = dir.read_string(".nv-meta/.info.json");
    assert!(!info.contains("000003"), "{info}");
    assert!(!dir.join("shards/data-000003.tar.idx").exists());
}

#[test]
fn already_prepared_needs_force_overwrite() {
    let dir = Dir::new().with_generated(2, 3);
    run_ok(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive"]));
    let err = run_err(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive"]));
    assert!(err.contains("already prepared") && err.contains("--force-overwrite"), "{err}");
    // Without --non-interactive and without a terminal, it refuses instead of waiting for input.
    let err = run_err(prepare(&dir).args(["--split-ratio", "1,0,0"]));
    assert!(err.contains("already prepared"), "{err}");
    run_ok(prepare(&dir).args([
        "--split-ratio",
        "1,0,0",
        "--force-overwrite",
        "--non-interactive",
    ]));
}

#[test]
fn missing_split_is_an_error_without_a_terminal() {
    let dir = Dir::new().with_generated(2, 3);
    let err = run_err(prepare(&dir).arg("--non-interactive"));
    assert!(err.contains("--split-ratio"), "{err}");
    let err = run_err(&mut prepare(&dir));
    assert!(err.contains("--split-ratio"), "{err}");
    assert!(!dir.join(".nv-meta").exists());
}

#[test]
fn tar_index_only_rebuilds_indexes_and_keeps_splits() {
    let dir = Dir::new().with_generated(3, 4);
    run_ok(prepare(&dir).args(["--split-ratio", "2,1,0", "--non-interactive"]));
    let idx_before = dir.read("shards/data-000001.tar.idx");
    let split_before = dir.read(".nv-meta/split.yaml");
    let uuid_before = dir.read(".nv-meta/index.uuid");
    fs::remove_file(dir.join("shards/data-000001.tar.idx")).unwrap();
    fs::remove_file(dir.join(".nv-meta/index.sqlite")).unwrap();
    fs::write(
        dir.join(".nv-meta/split.yaml"),
        "split_parts:\n  train:\n  - shards/data-000000.tar\n",
    )
    .unwrap();
    run_ok(prepare(&dir).args(["--tar-index-only"]));
    assert_eq!(dir.read("shards/data-000001.tar.idx"), idx_before);
    assert!(dir.join(".nv-meta/index.sqlite").is_file());
    assert_ne!(dir.read(".nv-meta/index.uuid"), uuid_before);
    assert_ne!(dir.read(".nv-meta/split.yaml"), split_before, "split.yaml must be left alone");
    assert_eq!(
        dir.read_string(".nv-meta/split.yaml"),
        "split_parts:\n  train:\n  - shards/data-000000.tar\n"
    );
}

#[test]
fn tar_index_only_needs_a_prepared_dataset() {
    let dir = Dir::new().with_generated(1, 2);
    let err = run_err(prepare(&dir).arg("--tar-index-only"));
    assert!(err.contains("--tar-index-only"), "{err}");
}

#[test]
fn dataset_yaml_options() {
    let dir = Dir::new().with_generated(1, 2);
    run_ok(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive"]));
    assert!(!dir.join(".nv-meta/dataset.yaml").exists(), "non-interactive without --sample-type");

    run_ok(prepare(&dir).args([
        "--split-ratio",
        "1,0,0",
        "--non-interactive",
        "--force-overwrite",
        "--sample-type",
        "CrudeWebdataset",
        "--dataset-yaml-name",
        "crude.yaml",
    ]));
    assert_eq!(
        dir.read_string(".nv-meta/crude.yaml"),
        "__module__: megatron.energon\n__class__: CrudeWebdataset\n"
    );

    run_ok(prepare(&dir).args([
        "--split-ratio",
        "1,0,0",
        "--non-interactive",
        "--force-overwrite",
        "--sample-type",
        "CaptioningSample",
        "--field-map",
        FIELD_MAP,
        "--skip-dataset-yaml",
    ]));
    assert!(!dir.join(".nv-meta/dataset.yaml").exists(), "--skip-dataset-yaml");

    // A field map the sample type refuses fails before anything is written: the index of the
    // prepare before stays as it was (the dataset.yaml is part of the index's one commit).
    let before = snapshot(dir.path());
    let err = run_err(prepare(&dir).args([
        "--split-ratio",
        "0.5,0.5,0",
        "--non-interactive",
        "--force-overwrite",
        "--sample-type",
        "CaptioningSample",
        "--field-map",
        r#"{"picture": "jpg"}"#,
    ]));
    assert!(err.contains("picture"), "{err}");
    assert!(snapshot(dir.path()) == before, "the failed prepare changed files");
    let err = run_err(prepare(&dir).args([
        "--split-ratio",
        "1,0,0",
        "--non-interactive",
        "--force-overwrite",
        "--sample-type",
        "NoSuchSample",
    ]));
    assert!(err.contains("NoSuchSample"), "{err}");
}

#[test]
fn worker_count_and_progress_do_not_change_the_output() {
    let a = Dir::new().with_generated(7, 5);
    let b = Dir::new().with_generated(7, 5);
    run_ok(prepare(&a).args(["--split-ratio", "5,1,1", "--non-interactive", "--num-workers", "1"]));
    let mut cmd = energon();
    cmd.arg("prepare").arg(b.path()).args([
        "--split-ratio",
        "5,1,1",
        "--non-interactive",
        "--num-workers",
        "4",
        "--progress",
    ]);
    run_ok(&mut cmd);
    let strip = |dir: &Dir| {
        snapshot(dir.path())
            .into_iter()
            .filter(|(p, _)| !p.ends_with("index.uuid") && !p.ends_with("index.sqlite"))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&a), strip(&b));
    assert_eq!(
        dump_canonical(&a.join(".nv-meta/index.sqlite")).unwrap(),
        dump_canonical(&b.join(".nv-meta/index.sqlite")).unwrap()
    );
}

/// Runs `cmd` with `answers` on its standard input.
fn answered(cmd: &mut std::process::Command, answers: &[u8]) -> std::process::Output {
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(answers).unwrap();
    child.wait_with_output().unwrap()
}

/// Answers the interactive prompts through a pseudo terminal, as a user would.
#[test]
fn interactive_prompts() {
    let dir = Dir::new().with_generated(4, 2);
    let command =
        format!("{} prepare {} --no-progress", env!("CARGO_BIN_EXE_energon"), dir.path().display());
    // Split ratio, create dataset.yaml, CaptioningSample (entry 0), a field map, then the two
    // fields.
    let out = answered(
        std::process::Command::new("script").args(["-qec", &command, "/dev/null"]),
        b"3,1,0\ny\n0\ny\njpg\ntxt\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("Please enter a desired train/val/test split"), "{stdout}");
    assert_eq!(
        dir.read_string(".nv-meta/dataset.yaml"),
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\nfield_map:\n  \
         image: jpg\n  caption: txt\n"
    );
    assert!(dir.read_string(".nv-meta/split.yaml").contains("val:"));
}

/// Answers piped in with `ENERGON_INTERACTIVE=1` (as `click.testing` feeds them to the
/// reference's prompts): overwrite, split, a dataset.yaml, CaptioningSample, and a sample loader
/// instead of a field map.
#[test]
fn scripted_answers_and_a_sample_loader() {
    let dir = Dir::new().with_generated(4, 2);
    run_ok(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive"]));
    let out = answered(prepare(&dir).env("ENERGON_INTERACTIVE", "1"), b"y\n1,0,0\ny\n0\nn\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Done"), "{stdout}");
    assert_eq!(
        dir.read_string(".nv-meta/dataset.yaml"),
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\n\
         sample_loader: sample_loader.py:sample_loader\npart_filter: sample_loader.py:part_filter\n"
    );
    let loader = dir.read_string(".nv-meta/sample_loader.py");
    assert!(loader.contains("        image=raw[\"TODO\"],  # torch.Tensor\n"), "{loader}");
    assert!(loader.contains("    return part in (\"jpg\", \"txt\", \"json\")\n"), "{loader}");
    // Without a terminal or the variable, a missing answer is an error, not a wait.
    let err = run_err(prepare(&dir).arg("--force-overwrite").stdin(Stdio::null()));
    assert!(err.contains("no split given"), "{err}");
    // Non-interactive without a field map: the same sample loader, kept when it exists.
    fs::write(dir.path().join(".nv-meta/sample_loader.py"), "# edited\n").unwrap();
    run_ok(prepare(&dir).args([
        "--non-interactive",
        "--force-overwrite",
        "--split-ratio",
        "1,0,0",
        "--sample-type",
        "CaptioningSample",
    ]));
    assert_eq!(dir.read_string(".nv-meta/sample_loader.py"), "# edited\n");
    assert!(dir.read_string(".nv-meta/dataset.yaml").contains("sample_loader.py:sample_loader"));
}

// ---- Bad input: a clear error naming the file, exit code 2, and the previous index left intact.

fn prepared_snapshot(dir: &Dir) -> Vec<(String, Vec<u8>)> {
    snapshot(dir.path()).into_iter().filter(|(p, _)| !p.ends_with(".tar")).collect()
}

/// Prepares a good dataset, breaks it with `damage`, re-prepares, and checks the error and that
/// nothing of the previous index changed (and no temporary file is left behind).
fn check_failed_prepare_keeps_old_index(damage: impl FnOnce(&Dir), expect: &[&str]) {
    let dir = Dir::new().with_generated(3, 4);
    run_ok(prepare(&dir).args(["--split-ratio", "1,1,1", "--non-interactive"]));
    let before = prepared_snapshot(&dir);
    damage(&dir);
    let err = run_err(prepare(&dir).args([
        "--split-ratio",
        "1,1,1",
        "--non-interactive",
        "--force-overwrite",
    ]));
    for needle in expect {
        assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    }
    let after: Vec<_> = prepared_snapshot(&dir);
    let leftovers: Vec<_> =
        after.iter().filter(|(p, _)| p.ends_with(".tmp")).map(|(p, _)| p).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert_eq!(
        before,
        after.into_iter().filter(|(p, _)| before.iter().any(|(q, _)| q == p)).collect::<Vec<_>>()
    );
}

#[test]
fn truncated_tar_is_reported_with_offset() {
    check_failed_prepare_keeps_old_index(
        |dir| {
            let path = dir.join("shards/data-000001.tar");
            let data = fs::read(&path).unwrap();
            fs::write(&path, &data[..data.len() / 2 + 100]).unwrap();
        },
        &["data-000001.tar", "offset"],
    );
}

#[test]
fn corrupt_header_is_reported_with_offset() {
    check_failed_prepare_keeps_old_index(
        |dir| {
            let path = dir.join("shards/data-000002.tar");
            let mut data = fs::read(&path).unwrap();
            // Damage the name of the second member's header: its checksum no longer matches.
            let second = 512
                + (u64::from_str_radix(
                    std::str::from_utf8(&data[124..135])
                        .unwrap()
                        .trim_matches(char::from(0))
                        .trim(),
                    8,
                )
                .unwrap() as usize)
                    .div_ceil(512)
                    * 512;
            data[second] ^= 0x55;
            fs::write(&path, data).unwrap();
        },
        &["data-000002.tar", "offset"],
    );
}

#[test]
fn gzip_shard_is_rejected() {
    check_failed_prepare_keeps_old_index(
        |dir| {
            let mut data = vec![0x1f, 0x8b, 0x08, 0x00];
            data.extend_from_slice(&[0; 60]);
            fs::write(dir.join("shards/data-000003.tgz"), data).unwrap();
        },
        &["data-000003.tgz", "gzip"],
    );
}

#[test]
fn empty_shard_is_rejected() {
    check_failed_prepare_keeps_old_index(
        |dir| write_tar(&dir.join("shards/data-000009.tar"), &[("README", b"no samples here")]),
        &["data-000009.tar", "no samples"],
    );
}

#[test]
fn duplicate_keys_across_shards_are_rejected() {
    check_failed_prepare_keeps_old_index(
        |dir| write_tar(&dir.join("shards/extra.tar"), &[("00000005.txt", b"again")]),
        &["00000005", "shards/data-000001.tar", "shards/extra.tar"],
    );
}

#[test]
fn not_a_dataset() {
    let dir = Dir::new();
    let err = run_err(energon().args(["prepare", "--non-interactive"]).arg(dir.join("missing")));
    assert!(err.contains("missing"), "{err}");
    fs::write(dir.join("notes.txt"), "hello").unwrap();
    let err = run_err(energon().args(["prepare", "--non-interactive"]).arg(dir.join("notes.txt")));
    assert!(err.contains("notes.txt"), "{err}");
    let empty = Dir::new();
    let err = run_err(
        energon()
            .args(["prepare", "--non-interactive", "--split-ratio", "1,0,0"])
            .arg(empty.path()),
    );
    assert!(err.contains("no *.tar"), "{err}");
}

#[test]
fn bad_flags() {
    let dir = Dir::new().with_generated(1, 2);
    let err = run_err(prepare(&dir).args(["--split-ratio", "1,2", "--non-interactive"]));
    assert!(err.contains("1,2") || err.contains("3"), "{err}");
    let err = run_err(prepare(&dir).args(["--split-parts", "no-colon", "--non-interactive"]));
    assert!(err.contains("NAME:REGEX"), "{err}");
    let err = run_err(prepare(&dir).args([
        "--split-ratio",
        "1,0,0",
        "--exclude",
        "(",
        "--non-interactive",
    ]));
    assert!(err.contains("("), "{err}");
    let (out, _, _) = run(energon().args(["prepare", "--no-such-flag"]));
    assert!(!out.status.success());
}

#[test]
fn unreadable_shards_are_reported() {
    // A dangling symlink named like a shard.
    let dir = Dir::new().with_generated(2, 2);
    std::os::unix::fs::symlink(dir.join("nowhere.tar"), dir.join("shards/zz.tar")).unwrap();
    let err = run_err(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive"]));
    assert!(err.contains("zz.tar") && err.contains("No such file"), "{err}");
    // A FIFO would block a reader forever: refused up front.
    let dir = Dir::new().with_generated(2, 2);
    let status =
        std::process::Command::new("mkfifo").arg(dir.join("shards/fifo.tar")).status().unwrap();
    assert!(status.success());
    let err = run_err(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive"]));
    assert!(err.contains("fifo.tar") && err.contains("not a regular file"), "{err}");
}

/// `--fix-duplicates` on the recorded example (`tests/fixtures/fix-duplicates/`) rewrites the shards
/// to the reference's bytes and writes its `.tar.idx`, `.info.json`, `split.yaml` and rows.
#[test]
fn fix_duplicates_gives_the_reference_result() {
    let recorded = energon_tests::fixtures_dir().join("fix-duplicates");
    let dir = Dir::new();
    fs::create_dir_all(dir.join("shards")).unwrap();
    for shard in ["a.tar", "b.tar"] {
        fs::copy(recorded.join("before/shards").join(shard), dir.join("shards").join(shard))
            .unwrap();
    }
    run_ok(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive", "--fix-duplicates"]));
    let after = recorded.join("after");
    for rel in [
        "shards/a.tar",
        "shards/b.tar",
        "shards/a.tar.idx",
        "shards/b.tar.idx",
        ".nv-meta/.info.json",
        ".nv-meta/split.yaml",
    ] {
        assert!(dir.read(rel) == fs::read(after.join(rel)).unwrap(), "{rel} differs");
    }
    assert_eq!(
        dump_canonical(&dir.join(".nv-meta/index.sqlite")).unwrap(),
        dump_canonical(&after.join(".nv-meta/index.sqlite")).unwrap()
    );
}

#[test]
fn fix_duplicates_renames_members_into_shard_folders() {
    let dir = Dir::new();
    fs::create_dir_all(dir.join("shards")).unwrap();
    for shard in ["a", "b"] {
        write_tar(
            &dir.join(&format!("shards/{shard}.tar")),
            &[("0001.txt", b"one"), ("0002.txt", b"two")],
        );
    }
    let err = run_err(prepare(&dir).args(["--split-ratio", "1,0,0", "--non-interactive"]));
    assert!(err.contains("duplicate sample key \"0001\""), "{err}");
    assert!(err.contains("--fix-duplicates"), "{err}");
    let out = run_ok(prepare(&dir).args([
        "--split-ratio",
        "1,0,0",
        "--non-interactive",
        "--fix-duplicates",
    ]));
    assert!(out.contains("Fixed duplicate keys"), "{out}");
    assert!(out.contains("renamed 4 members"), "{out}");
    assert!(
        out.contains("Sample keys of the first shard: shards/a.tar/0001, shards/a.tar/0002"),
        "{out}"
    );
    let keys = run_ok(
        energon().args(["trace", "--val", "--split-part", "train", "-n", "4"]).arg(dir.path()),
    );
    let mut keys: Vec<&str> = keys.lines().collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["shards/a.tar/0001", "shards/a.tar/0002", "shards/b.tar/0001", "shards/b.tar/0002"]
    );
}

#[test]
fn a_cut_shard_and_an_appended_archive_are_reported() {
    // Shard 0 ends at a member boundary (no end-of-archive marker); shard 1 has a second archive
    // after its marker. Tar readers lose the samples past both without an error.
    let dir = Dir::new();
    let members = |prefix: &str| -> Vec<(String, Vec<u8>)> {
        (0..3).map(|i| (format!("{prefix}{i}.txt"), vec![b'x'; 10])).collect()
    };
    let tar = |name: &str, prefix: &str| {
        let m = members(prefix);
        let refs: Vec<(&str, &[u8])> = m.iter().map(|(n, d)| (n.as_str(), d.as_slice())).collect();
        write_tar(&dir.join(name), &refs);
        fs::read(dir.join(name)).unwrap()
    };
    let first = tar("shards/a.tar", "a");
    fs::write(dir.join("shards/a.tar"), &first[..3 * 1024]).unwrap();
    let mut second = tar("shards/b.tar", "b");
    let appended_at = second.len();
    second.extend(tar("shards/c.tar", "c"));
    fs::write(dir.join("shards/b.tar"), &second).unwrap();
    fs::remove_file(dir.join("shards/c.tar")).unwrap();
    let (out, _, stderr) = run(prepare(&dir).args([
        "--non-interactive",
        "--split-ratio",
        "1,0,0",
        "--sample-type",
        "TextSample",
        "--field-map",
        r#"{"text": "txt"}"#,
    ]));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: shards/a.tar: the shard has no end-of-archive marker"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "warning: shards/b.tar: the shard has data after its end-of-archive marker, at byte \
             offset {appended_at}"
        )),
        "{stderr}"
    );
    let (out, stdout, stderr) = run(energon().arg("lint").arg(dir.path()));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let report = format!("{stdout}{stderr}");
    assert!(report.contains("a.tar") && report.contains("no end-of-archive marker"), "{report}");
    assert!(report.contains("b.tar") && report.contains(&format!("{appended_at}")), "{report}");
}
