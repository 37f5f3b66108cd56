//! `energon lint` and `energon prepare` on datasets changed after prepare: replaced, rewritten and
//! truncated shards are reported naming the shard; a second prepare of a locked dataset fails.

use std::fs;

use crate::util::{Dir, energon, run, run_ok, write_tar};

/// Two prepared shards of the same size: keys `a0000..a0009` and `b0000..b0009`.
fn dataset() -> Dir {
    let dir = Dir::new();
    for (i, prefix) in ["a", "b"].iter().enumerate() {
        let names: Vec<String> = (0..10).map(|k| format!("{prefix}{k:04}.txt")).collect();
        let members: Vec<(&str, &[u8])> =
            names.iter().map(|n| (n.as_str(), &b"0123456789"[..])).collect();
        write_tar(&dir.join(&format!("shards/s-{i}.tar")), &members);
    }
    let mut cmd = energon();
    cmd.arg("prepare").arg(dir.path()).args([
        "--no-progress",
        "--non-interactive",
        "--split-ratio",
        "1,0,0",
        "--sample-type",
        "CrudeWebdataset",
    ]);
    run_ok(&mut cmd);
    dir
}

fn lint_fails(dir: &Dir) -> String {
    let (out, stdout, stderr) = run(energon().arg("lint").arg(dir.path()));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    stderr
}

#[test]
fn lint_reports_a_shard_replaced_by_one_of_the_same_size() {
    let dir = dataset();
    fs::copy(dir.join("shards/s-1.tar"), dir.join("shards/s-0.tar")).unwrap();
    let stderr = lint_fails(&dir);
    assert!(
        stderr.contains("Error in shard shards/s-0.tar: shard changed after prepare"),
        "{stderr}"
    );
    assert!(stderr.contains("expects key \"a0000\"") && stderr.contains("\"b0000\""), "{stderr}");
    assert!(!stderr.contains("shards/s-1.tar:"), "{stderr}");
}

#[test]
fn lint_reports_a_shard_rewritten_with_other_keys() {
    let dir = dataset();
    let names: Vec<String> = (0..10).map(|k| format!("c{k:04}.txt")).collect();
    let members: Vec<(&str, &[u8])> =
        names.iter().map(|n| (n.as_str(), &b"9876543210"[..])).collect();
    write_tar(&dir.join("shards/s-1.tar"), &members);
    let stderr = lint_fails(&dir);
    assert!(stderr.contains("Error in shard shards/s-1.tar"), "{stderr}");
    assert!(stderr.contains("expects key \"b0000\"") && stderr.contains("\"c0000\""), "{stderr}");
}

#[test]
fn lint_reports_a_truncated_shard_with_both_sizes() {
    let dir = dataset();
    let bytes = fs::read(dir.join("shards/s-1.tar")).unwrap();
    fs::write(dir.join("shards/s-1.tar"), &bytes[..5000]).unwrap();
    let stderr = lint_fails(&dir);
    assert!(
        stderr.contains("Error in shard shards/s-1.tar")
            && stderr
                .contains("the shard is 5000 bytes but its .tar.idx ends at byte offset 10240"),
        "{stderr}"
    );
}

#[test]
fn a_second_prepare_of_a_locked_dataset_fails_at_once() {
    let dir = dataset();
    let meta = dir.join(".nv-meta");
    let lock = energon_index::PrepareLock::acquire(dir.path(), &meta).unwrap();
    let before = fs::read(meta.join(".info.json")).unwrap();
    let (out, stdout, stderr) = run(energon().arg("prepare").arg(dir.path()).args([
        "--no-progress",
        "--non-interactive",
        "--force-overwrite",
        "--split-ratio",
        "1,0,0",
        "--skip-dataset-yaml",
    ]));
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("another `energon prepare` of")
            && stderr.contains(&dir.path().display().to_string())
            && stderr.contains("is running"),
        "{stderr}"
    );
    assert_eq!(fs::read(meta.join(".info.json")).unwrap(), before);
    drop(lock);
}
