//! `energon trace` and `energon benchmark`: the reference's recorded orders, output formats,
//! defaults and errors.

use std::{
    fs,
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use energon_tests::{ref_small_dir, ref_small_expected_dir};

use crate::util::{energon, run_err, run_ok};

/// `energon trace` with the settings a recorded file's name encodes
/// (`keys-[jsonl-]ws{W}-r{R}-nw{N}-bs{B}-sb{S}-s{SEED}[-msps{M}].txt`).
fn trace_for(name: &str) -> Command {
    let stem = name.strip_suffix(".txt").unwrap();
    let mut path = ref_small_dir();
    let mut cmd = energon();
    cmd.arg("trace");
    for field in stem.split('-').skip(1) {
        let digit = field.find(|c: char| c.is_ascii_digit()).unwrap_or(field.len());
        let (flag, value) = field.split_at(digit);
        let flag = match flag {
            "jsonl" => {
                path = path.join("jsonl/data.jsonl");
                continue;
            }
            "ws" => "--world-size",
            "r" => "--rank",
            "nw" => "--num-workers",
            "bs" => "--batch-size",
            "sb" => "--shuffle-buffer-size",
            "s" => "--seed-offset",
            "msps" => "--max-samples-per-sequence",
            other => panic!("unknown field {other:?} in {name}"),
        };
        cmd.args([flag, value]);
    }
    cmd.arg(path);
    cmd
}

#[test]
fn every_recorded_key_order_is_reproduced() {
    let mut names: Vec<String> = fs::read_dir(ref_small_expected_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("keys-"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 15);
    for name in names {
        let want = fs::read_to_string(ref_small_expected_dir().join(&name)).unwrap();
        let n = want.lines().count().to_string();
        let got = run_ok(trace_for(&name).args(["-n", &n]));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn json_lines_carry_worker_batch_and_restore_key() {
    let got = run_ok(trace_for("keys-ws1-r0-nw2-bs4-sb16-s0.txt").args(["-n", "6", "--json"]));
    let lines: Vec<serde_json::Value> =
        got.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 6);
    let want_keys =
        fs::read_to_string(ref_small_expected_dir().join("keys-ws1-r0-nw2-bs4-sb16-s0.txt"))
            .unwrap();
    for (line, key) in lines.iter().zip(want_keys.lines()) {
        assert_eq!(line["key"], key);
        let index: u64 = key.parse().unwrap();
        let restore_key = line["restore_key"].as_array().unwrap();
        // ("MapDataset", encode index, "MapDataset", load index, "Webdataset", global index)
        assert_eq!(restore_key.len(), 6, "{line}");
        assert_eq!(restore_key[0], "MapDataset");
        assert_eq!(restore_key[4], "Webdataset");
        assert_eq!(restore_key[5], index);
    }
    // Batches of 4 from worker 0, then worker 1.
    let batch_worker: Vec<(u64, u64)> = lines
        .iter()
        .map(|l| (l["batch"].as_u64().unwrap(), l["worker"].as_u64().unwrap()))
        .collect();
    assert_eq!(batch_worker, [(0, 0), (0, 0), (0, 0), (0, 0), (1, 1), (1, 1)]);
    // The encode index counts the samples of each worker.
    assert_eq!(lines[4]["restore_key"][1], 0);
    assert_eq!(lines[5]["restore_key"][1], 1);
}

#[test]
fn json_restore_keys_match_the_reference_for_jsonl() {
    // From tests/golden/restore-keys/jsonl-ws1-r0-nw0-bs0-sb0-s0.txt (recorded with the reference):
    // sample i is ('SimpleSavableDatasetWrapper', 0, i, 'MapDataset', i, 'MapDataset', i,
    // 'MapDataset', i, 'Webdataset', i); the sample's own key is everything after the wrapper.
    let got = run_ok(
        energon()
            .args(["trace", "--batch-size", "0", "-n", "3", "--json"])
            .arg(ref_small_dir().join("jsonl/data.jsonl")),
    );
    for (i, line) in got.lines().enumerate() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            line["restore_key"],
            serde_json::json!(["MapDataset", i, "MapDataset", i, "MapDataset", i, "Webdataset", i])
        );
        assert_eq!(line["batch"], i);
        assert_eq!(line["key"], i.to_string());
    }
}

#[test]
fn training_prints_one_epoch_of_the_rank_by_default() {
    let all = run_ok(energon().arg("trace").arg(ref_small_dir()));
    assert_eq!(all.lines().count(), 200);
    let rank1 =
        run_ok(energon().args(["trace", "--world-size", "2", "--rank", "1"]).arg(ref_small_dir()));
    assert_eq!(rank1.lines().count(), 100);
    let want = fs::read_to_string(ref_small_expected_dir().join("keys-ws2-r1-nw0-bs1-sb0-s0.txt"))
        .unwrap();
    assert!(want.starts_with(&rank1));
}

#[test]
fn validation_reads_every_sample_once_in_order() {
    let val = |workers: &str, batch: &str| {
        run_ok(
            energon()
                .args(["trace", "--val", "--split-part", "train", "--num-workers", workers])
                .args(["--batch-size", batch])
                .arg(ref_small_dir()),
        )
    };
    let sequential: String = (0..200).map(|i| format!("{i:08}\n")).collect();
    assert_eq!(val("0", "1"), sequential);
    assert_eq!(val("0", "7"), sequential);
    // Two workers: [0, 100) and [100, 200), handed out in turn.
    let interleaved: String =
        (0..100).flat_map(|i| [i, i + 100]).map(|i| format!("{i:08}\n")).collect();
    assert_eq!(val("2", "1"), interleaved);
}

#[test]
fn bad_settings_are_reported() {
    let err = run_err(energon().args(["trace", "--shuffle-over-epochs", "0"]).arg(ref_small_dir()));
    assert!(err.contains("shuffle_over_epochs"), "{err}");
    let err =
        run_err(energon().args(["trace", "--rank", "2", "--world-size", "2"]).arg(ref_small_dir()));
    assert!(err.contains("rank 2"), "{err}");
    // 300 ranks for 200 samples: some workers have nothing to repeat.
    let err = run_err(
        energon().args(["trace", "--world-size", "300", "--rank", "250"]).arg(ref_small_dir()),
    );
    assert!(err.contains("has no samples"), "{err}");
    let err =
        run_err(energon().args(["trace", "--parallel-shard-iters", "0"]).arg(ref_small_dir()));
    assert!(err.contains("parallel_shard_iters"), "{err}");
    let err = run_err(energon().args(["trace", "/nonexistent/dataset"]));
    assert!(err.contains("/nonexistent/dataset"), "{err}");
}

#[test]
fn a_closed_pipe_ends_the_trace_quietly() {
    let mut child = energon()
        .args(["trace", "-n", "100000000"])
        .arg(ref_small_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first, "00000150\n");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn benchmark_reports_throughput_as_json() {
    for (workers, decode) in [("0", true), ("2", true), ("0", false), ("2", false)] {
        let mut cmd = energon();
        cmd.args(["benchmark", "--json", "--samples", "100", "--batch-size", "32"]);
        cmd.args(["--num-workers", workers]).arg(ref_small_dir());
        if !decode {
            cmd.arg("--no-decode");
        }
        let out = run_ok(&mut cmd);
        let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(line["samples"], 128, "{line}");
        assert_eq!(line["decode"].is_string(), decode, "{line}");
        for field in ["samples_per_s", "mb_per_s", "first_batch_s", "peak_rss_mb"] {
            assert!(line[field].as_f64().is_some_and(|x| x >= 0.0), "{field} in {line}");
        }
        assert!(line["mb_read"].as_f64().unwrap() > 0.0, "{line}");
    }
    let table = run_ok(energon().args(["benchmark", "--samples", "10"]).arg(ref_small_dir()));
    for label in ["samples/s", "MB/s read", "first batch", "peak RSS"] {
        assert!(table.contains(label), "{label} missing in\n{table}");
    }
}
