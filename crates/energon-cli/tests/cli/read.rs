//! `energon info`, `energon lint` and `energon preview`: output formats (info byte-for-byte as
//! the reference prints it), exit codes, and the bad inputs lint must report.

use std::{fs, path::PathBuf};

use energon_tests::{copy_dir, ref_small_dir};

use crate::util::{Dir, energon, run, run_ok};

/// A writable copy of the whole reference fixture.
fn fixture_copy() -> Dir {
    let dir = Dir::new();
    copy_dir(&ref_small_dir(), dir.path()).unwrap();
    dir
}

/// How `energon info` prints a path: absolute, with `..` resolved.
fn shown(path: &std::path::Path) -> PathBuf {
    fs::canonicalize(path).unwrap()
}

#[test]
fn info_on_the_fixture_is_what_the_reference_prints() {
    let root = ref_small_dir();
    let got = run_ok(energon().arg("info").arg(&root));
    let want = format!(
        "\n* energon-ref-small: `{}` (200 samples, 760.00 KiB in 4 shards)\n  * Created with energon \
         version: 7.4.1\n  * Sample Type: {{py:class}}`CaptioningSample \
         <megatron.energon.CaptioningSample>`  \n  * Default Splits:\n    * `train`: 100%, 200 \
         samples in 4 shards\n\n\n",
        shown(&root).display()
    );
    assert_eq!(got, want);
}

#[test]
fn info_orders_splits_as_the_reference() {
    // Recorded from megatron-energon 7.4.1 on the same split file.
    let dir = fixture_copy();
    fs::write(
        dir.join(".nv-meta/split.yaml"),
        "split_parts:\n  zeta:\n  - shards/data-000000.tar\n  val:\n  - shards/data-000001.tar\n  \
         train:\n  - shards/data-000002.tar\n  - shards/data-000003.tar\n  alpha:\n  - \
         shards/data-000003.tar\nexclude: []\n",
    )
    .unwrap();
    let got = run_ok(energon().arg("info").arg(dir.path()));
    let name = dir.path().file_name().unwrap().to_str().unwrap();
    let want = format!(
        "\n* {name}: `{}` (200 samples, 760.00 KiB in 4 shards)\n  * Created with energon version: \
         7.4.1\n  * Sample Type: {{py:class}}`CaptioningSample \
         <megatron.energon.CaptioningSample>`  \n  * Default Splits:\n    * `train`: 50%, 100 \
         samples in 2 shards\n    * `val`: 25%, 50 samples in 1 shards\n    * `zeta`: 25%, 50 \
         samples in 1 shards\n    * `alpha`: 25%, 50 samples in 1 shards\n\n\n",
        shown(dir.path()).display()
    );
    assert_eq!(got, want);
}

#[test]
fn info_describes_crude_datasets_old_infos_and_jsonl_files() {
    let dir = fixture_copy();
    fs::write(
        dir.join(".nv-meta/dataset.yaml"),
        "__module__: megatron.energon\n__class__: CrudeWebdataset\n",
    )
    .unwrap();
    fs::write(
        dir.join(".nv-meta/.info.json"),
        r#"{"shard_counts": {"shards/data-000000.tar": 50, "shards/data-000001.tar": 50, "shards/data-000002.tar": 50, "shards/data-000003.tar": 50}}"#,
    )
    .unwrap();
    let got = run_ok(energon().arg("info").arg(dir.path()));
    assert!(got.contains("`CrudeWebdataset <megatron.energon.CrudeWebdataset>`"), "{got}");
    assert!(got.contains("Created with energon version: unknown"), "{got}");
    let got = run_ok(energon().arg("info").arg(ref_small_dir().join("jsonl/data.jsonl")));
    assert!(
        got.contains("* data.jsonl: `") && got.contains("(200 samples, 45.67 KiB in 1 file)"),
        "{got}"
    );
}

#[test]
fn info_on_what_prepare_writes() {
    let dir = Dir::new().with_generated(3, 1000);
    run_ok(energon().arg("prepare").arg(dir.path()).args([
        "--non-interactive",
        "--split-ratio",
        "2,1,0",
        "--sample-type",
        "CaptioningSample",
        "--field-map",
        r#"{"image": "jpg", "caption": "txt"}"#,
    ]));
    let got = run_ok(energon().arg("info").arg(dir.path()));
    assert!(got.contains("(3,000 samples, "), "{got}");
    assert!(got.contains("    * `train`: 67%, 2,000 samples in 2 shards\n"), "{got}");
    assert!(got.contains("    * `val`: 33%, 1,000 samples in 1 shards\n"), "{got}");
    assert!(got.contains("    * `test`: 0%, 0 samples in 0 shards\n"), "{got}");
    let lint = run_ok(energon().arg("lint").arg(dir.path()));
    assert!(lint.contains("OK: 3000 samples read and decoded without error"), "{lint}");
}

#[test]
fn info_rejects_what_is_not_a_dataset() {
    let dir = Dir::new();
    let (out, _, stderr) = run(energon().arg("info").arg(dir.path()));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("energon prepare"), "{stderr}");
}

#[test]
fn lint_passes_the_fixture_and_its_jsonl() {
    let got = run_ok(energon().arg("lint").arg(ref_small_dir()));
    assert_eq!(
        got,
        "Checking the index files...\nChecking the shards against their index files...\n\
         Checking split part train (200 samples)...\ntrain: 200 \
         samples read, 0 excluded, 0 failed\nSkipping empty split part val\nSkipping empty split \
         part test\nOK: 200 samples read and decoded without error\n"
    );
    let got = run_ok(
        energon().args(["lint", "--parallel", "1"]).arg(ref_small_dir().join("jsonl/data.jsonl")),
    );
    assert!(got.contains("OK: 200 samples"), "{got}");
}

#[test]
fn lint_reports_index_files_that_do_not_match_the_info() {
    let dir = fixture_copy();
    let idx = dir.join("shards/data-000002.tar.idx");
    let bytes = fs::read(&idx).unwrap();
    fs::write(&idx, &bytes[..bytes.len() - 8]).unwrap();
    let (out, stdout, stderr) = run(energon().arg("lint").arg(dir.path()));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "Error in shard shards/data-000002.tar: Shard length in Info file 50 != 49 (length in index)"
        ),
        "{stderr}"
    );
}

#[test]
fn lint_reports_each_bad_sample_with_shard_key_and_reason() {
    let dir = fixture_copy();
    let shard = dir.join("shards/data-000001.tar");
    let mut bytes = fs::read(&shard).unwrap();
    // Sample 0 of shard 1 (key 00000050): its jpg data starts at 512; its txt header at 1536.
    bytes[512..1000].fill(0);
    fs::write(&shard, &bytes).unwrap();
    let shard3 = dir.join("shards/data-000003.tar");
    let bytes3 = fs::read(&shard3).unwrap();
    fs::write(&shard3, &bytes3[..bytes3.len() / 2]).unwrap();
    let (out, stdout, stderr) = run(energon().args(["lint", "--parallel", "2"]).arg(dir.path()));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("bad sample 50 of train: shard shards/data-000001.tar, key 00000050"),
        "{stderr}"
    );
    assert!(stderr.contains("cannot decode part \"jpg\""), "{stderr}");
    assert!(stderr.contains("- shards/data-000001.tar/00000050\n"), "{stderr}");
    assert!(stdout.contains("train: "), "{stdout}");
    // The truncated shard 3 is refused as a whole, naming both sizes, and listed once.
    assert!(
        stderr.contains("Error in shard shards/data-000003.tar: shard changed after prepare")
            && stderr.contains("the shard is 97280 bytes but its .tar.idx ends at byte offset"),
        "{stderr}"
    );
    let truncated = stderr.lines().filter(|l| l.starts_with("- shards/data-000003.tar/")).count();
    assert_eq!(truncated, 1, "{stderr}");
}

#[test]
fn lint_reports_a_missing_shard_once() {
    let dir = fixture_copy();
    fs::remove_file(dir.join("shards/data-000000.tar")).unwrap();
    let (out, _, stderr) = run(energon().arg("lint").arg(dir.path()));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("bad sample")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("shard shards/data-000000.tar, key *") && lines[0].contains("missing"),
        "{stderr}"
    );
}

#[test]
fn preview_prints_fields_and_images_non_interactively() {
    let got = run_ok(energon().args(["preview", "-n", "2", "--width", "16"]).arg(ref_small_dir()));
    let mut lines = got.lines();
    assert_eq!(lines.next(), Some("Split part train: 200 samples of CaptioningSample"));
    assert_eq!(lines.next(), Some("Sample 0"));
    // Field types as Python prints the sample class's annotations.
    assert_eq!(lines.next(), Some(" - __key__ (<class 'str'>): '00000000'"));
    assert_eq!(
        lines.next(),
        Some(" - image (<class 'torch.Tensor'>): Tensor(shape=[32, 32, 3], dtype=uint8):")
    );
    // A 16x8 rendering.
    let art: Vec<&str> = lines.by_ref().take_while(|l| !l.is_empty()).collect();
    assert_eq!(art.len(), 8, "{got}");
    assert!(art.iter().all(|l| l.len() == 3 + 16 && l.starts_with("   ")), "{got}");
    assert_eq!(lines.next(), Some(" - caption (<class 'str'>): 'cat and a large small'"));
    assert!(got.contains("Sample 1\n") && !got.contains("Sample 2\n"), "{got}");
    assert!(got.contains("Dataset val is empty. Skipping.\n"), "{got}");
    assert!(!got.contains("Continue?"));
}

#[test]
fn preview_without_a_terminal_never_asks() {
    let got = run_ok(energon().args(["preview", "--split-parts", "train"]).arg(ref_small_dir()));
    assert_eq!(got.matches("\nSample ").count(), 10, "{got}");
    let got =
        run_ok(energon().args(["preview", "--non-interactive", "-n", "3"]).arg(ref_small_dir()));
    assert_eq!(got.matches("\nSample ").count(), 3, "{got}");
}

#[test]
fn preview_shows_crude_parts_and_jsonl_records() {
    let dir = fixture_copy();
    fs::write(
        dir.join(".nv-meta/dataset.yaml"),
        "__module__: megatron.energon\n__class__: CrudeWebdataset\n",
    )
    .unwrap();
    let got = run_ok(energon().args(["preview", "-n", "1"]).arg(dir.path()));
    assert!(got.contains("200 samples of CrudeSample"), "{got}");
    assert!(got.contains(" - jpg (image): Tensor(shape=[32, 32, 3], dtype=uint8):"), "{got}");
    assert!(got.contains(" - txt (str): 'cat and a large small'"), "{got}");
    assert!(got.contains(" - json (json): {\"caption_words\":5,"), "{got}");
    let got = run_ok(
        energon().args(["preview", "-n", "1"]).arg(ref_small_dir().join("jsonl/data.jsonl")),
    );
    assert!(got.starts_with("Sample 0\n - __key__ (str): '0'\n - json (json): {"), "{got}");
}

/// Runs `cmd` with its stdout closed at once (as `| head -c 0` does): its status and stderr.
fn with_closed_stdout(cmd: &mut std::process::Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    // `energon preview ... | head -c 10`: the reader goes away after a few bytes.
    for args in [vec!["preview", "--num-samples", "200"], vec!["info"], vec!["lint"]] {
        let (status, stderr) =
            with_closed_stdout(energon().args(&args[..1]).arg(ref_small_dir()).args(&args[1..]));
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(status, Some(0), "{args:?}: {stderr}");
    }
    // A prepare into a closed pipe still writes dataset.yaml after its commit.
    let dir = fixture_copy();
    fs::remove_file(dir.path().join(".nv-meta/dataset.yaml")).unwrap();
    let (status, stderr) = with_closed_stdout(
        energon()
            .arg("prepare")
            .arg(dir.path())
            .args([
                "--non-interactive",
                "--force-overwrite",
                "--no-progress",
                "--split-ratio",
                "1,0,0",
            ])
            .args([
                "--sample-type",
                "CaptioningSample",
                "--field-map",
                r#"{"image": "jpg", "caption": "txt"}"#,
            ]),
    );
    assert_eq!(status, Some(0), "{stderr}");
    let yaml = fs::read_to_string(dir.path().join(".nv-meta/dataset.yaml")).unwrap();
    assert!(yaml.contains("CaptioningSample"), "{yaml}");
}

/// `members` as a ustar tar after a PAX global header that sets `path` (as `tarfile` writes one
/// for `pax_headers=`): Python's `tarfile` names every later member by it.
fn tar_after_global_path(path: &std::path::Path, global_path: &str, members: &[(&str, &[u8])]) {
    let record = |key: &str, value: &str| {
        // "<len> <key>=<value>\n", where <len> counts itself.
        let body = format!(" {key}={value}\n");
        let mut len = body.len() + 1;
        while format!("{len}{body}").len() != len {
            len += 1;
        }
        format!("{len}{body}")
    };
    let data = record("path", global_path).into_bytes();
    let mut header = [0u8; 512];
    header[..17].copy_from_slice(b"pax_global_header");
    header[100..107].copy_from_slice(b"0000644");
    header[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
    header[136..147].copy_from_slice(b"00000000000");
    header[156] = b'g';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header[148..156].fill(b' ');
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(&data);
    bytes.resize(1024, 0);
    crate::util::write_tar(path, members);
    bytes.extend(fs::read(path).unwrap());
    fs::write(path, bytes).unwrap();
}

/// A PAX global `path` header at the start of a shard names the members after it, in prepare and
/// in every read (as Python's `tarfile`, which reads it when it opens the shard, names them): a
/// sample is read under the key the index has, and a part it repeats is reported as such.
#[test]
fn a_leading_global_pax_path_names_the_members_as_in_the_index() {
    let dir = Dir::new();
    tar_after_global_path(&dir.join("shards/s-0.tar"), "glob.txt", &[("k0.txt", b"first")]);
    tar_after_global_path(
        &dir.join("shards/s-1.tar"),
        "other.txt",
        &[("k1.txt", b"second"), ("k2.txt", b"third")],
    );
    run_ok(energon().arg("prepare").arg(dir.path()).args([
        "--no-progress",
        "--non-interactive",
        "--split-ratio",
        "1,0,0",
        "--sample-type",
        "CrudeWebdataset",
    ]));
    let (out, stdout, stderr) = run(energon().arg("lint").arg(dir.path()));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    // Shard 0's one sample reads under its indexed key; shard 1's repeats its part.
    assert!(!stderr.contains("s-0.tar"), "{stderr}");
    assert!(!stderr.contains("run `energon prepare` again"), "{stderr}");
    assert!(
        stderr.contains("member \"other.txt\" appears twice in the sample: part \"txt\""),
        "{stderr}"
    );
    let preview = run_ok(energon().arg("preview").arg(dir.path()).args(["-n", "1"]));
    assert!(preview.contains("__key__ (str): 'glob'") && preview.contains("'first'"), "{preview}");
}
