//! `energon trace --save-after-batches/--state-out/--restore` and `energon checkpoint
//! info|redist`: the reference's resume traces, redistribution over ranks, damaged and foreign
//! checkpoints.

use std::{collections::BTreeMap, fs, process::Command};

use energon_tests::{ref_small_dir, ref_small_expected_dir};

use crate::util::{Dir, energon, run_err, run_ok};

/// `energon trace` over the fixture with these flags.
fn trace(flags: &[&str]) -> Command {
    let mut cmd = energon();
    cmd.arg("trace").args(flags).arg(ref_small_dir());
    cmd
}

#[test]
fn saving_and_restoring_reproduces_the_reference_resume_traces() {
    for (workers, state) in [("0", "state.ckpt"), ("2", "state.ckpt"), ("2", "state.json")] {
        let dir = Dir::new();
        let state = dir.join(state);
        let state = state.to_str().unwrap();
        let flags = ["--num-workers", workers, "--batch-size", "4", "--shuffle-buffer-size", "16"];
        let want = fs::read_to_string(
            ref_small_expected_dir().join(format!("resume-ws1-r0-nw{workers}-bs4-sb16-s0.txt")),
        )
        .unwrap();
        let part = |prefix: &str| -> String {
            want.lines()
                .filter(|l| l.starts_with(prefix))
                .map(|l| format!("{}\n", l.rsplit('\t').next().unwrap()))
                .collect()
        };
        let before =
            run_ok(trace(&flags).args(["--save-after-batches", "5", "--state-out", state]));
        assert_eq!(before, part("before\t"), "{workers} workers");
        let restored = run_ok(trace(&flags).args(["--restore", state, "-n", "20"]));
        assert_eq!(restored, part("restored\t"), "{workers} workers, {state}");
        // The batch numbers continue.
        let json = run_ok(trace(&flags).args(["--restore", state, "-n", "1", "--json"]));
        let line: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(line["batch"], 5, "{line}");
    }
}

#[test]
fn checkpoint_info_tells_what_a_checkpoint_holds() {
    let dir = Dir::new();
    let state = dir.join("s.ckpt");
    let flags = ["--num-workers", "2", "--batch-size", "4", "--shuffle-buffer-size", "16"];
    run_ok(trace(&flags).args([
        "--save-after-batches",
        "3",
        "--state-out",
        state.to_str().unwrap(),
    ]));
    let out = run_ok(energon().args(["checkpoint", "info", "--config"]).arg(&state));
    let want_start = format!(
        "{}: per-rank checkpoint, 1 rank\n  rank 0 of 1: 2 workers, next worker 1, micro batch size 4\n    worker 0 (global 0): 2 items handed out, 15 samples buffered\n    worker 1 (global 1): 1 items handed out, 15 samples buffered\n",
        state.display()
    );
    assert!(out.starts_with(&want_start), "{out}");
    assert!(out.contains("    shuffle_buffer_size = 16\n"), "{out}");
    assert!(out.contains("    leaf.0.shards = 4 shards, 200 samples, fingerprint "), "{out}");
    let json = run_ok(energon().args(["checkpoint", "info", "--json"]).arg(&state));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["format"], "energon-rs-checkpoint");
    assert_eq!(value["ranks"][0]["next_worker"], 1);
}

/// Per global worker, the sample keys of a rank's trace (`--json` lines).
fn by_global_worker(
    json: &str,
    rank: usize,
    workers_per_rank: usize,
) -> BTreeMap<usize, Vec<String>> {
    let mut res: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for line in json.lines() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        let global = rank * workers_per_rank + line["worker"].as_u64().unwrap() as usize;
        res.entry(global).or_default().push(line["key"].as_str().unwrap().to_owned());
    }
    res
}

#[test]
fn redistributed_checkpoints_continue_every_worker_on_its_new_rank() {
    let dir = Dir::new();
    fs::create_dir(dir.join("in")).unwrap();
    let common = ["--batch-size", "2", "--shuffle-buffer-size", "5"];
    let mut inputs = Vec::new();
    let mut continuations = BTreeMap::new();
    for rank in ["0", "1"] {
        let rank_flags = ["--world-size", "2", "--rank", rank, "--num-workers", "2"];
        let state = dir.join(&format!("in/state-r{rank}.ckpt"));
        // 4 batches: both workers had 2 turns, worker 0 is next.
        run_ok(
            trace(&common)
                .args(rank_flags)
                .arg("--save-after-batches")
                .arg("4")
                .arg("--state-out")
                .arg(&state),
        );
        inputs.push(state);
        let full = run_ok(trace(&common).args(rank_flags).args(["--json", "-n", "40"]));
        let rank: usize = rank.parse().unwrap();
        for (global, keys) in by_global_worker(&full, rank, 2) {
            // Each worker's first 2 batches (4 samples) came before the save.
            continuations.insert(global, keys[4..16].to_vec());
        }
    }
    let out = dir.join("out");
    let written = run_ok(
        energon().args(["checkpoint", "redist", "--new-world-size", "4"]).args(&inputs).arg(&out),
    );
    assert_eq!(written.lines().count(), 4, "{written}");
    for rank in 0..4 {
        let state = out.join(format!("state-r{rank}.ckpt"));
        assert!(written.contains(state.to_str().unwrap()), "{written}");
        let r = rank.to_string();
        let flags = ["--world-size", "4", "--rank", &r, "--num-workers", "1"];
        let json = run_ok(
            trace(&common).args(flags).arg("--restore").arg(&state).args(["--json", "-n", "12"]),
        );
        let got = by_global_worker(&json, rank, 1);
        assert_eq!(got.keys().copied().collect::<Vec<_>>(), [rank]);
        assert_eq!(got[&rank], continuations[&rank], "global worker {rank}");
    }
    // All workers on one rank.
    run_ok(
        energon()
            .args(["checkpoint", "redist", "--new-world-size", "1"])
            .args(&inputs)
            .arg(dir.join("one")),
    );
    let one = dir.join("one/state-r0.ckpt");
    let info = run_ok(energon().args(["checkpoint", "info"]).arg(&one));
    assert!(info.contains("rank 0 of 1: 4 workers, next worker 0"), "{info}");
}

#[test]
fn two_ranks_of_two_workers_resume_on_three_ranks_of_one_without_losing_a_sample() {
    let dir = Dir::new();
    fs::create_dir(dir.join("in")).unwrap();
    let common = ["--batch-size", "3"];
    let mut inputs = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut count = |out: &str| {
        for key in out.lines() {
            *seen.entry(key.to_owned()).or_default() += 1;
        }
    };
    for (rank, batches) in [("0", "7"), ("1", "12")] {
        let flags = ["--world-size", "2", "--rank", rank, "--num-workers", "2"];
        let state = dir.join(&format!("in/state-r{rank}.ckpt"));
        let before = run_ok(
            trace(&common)
                .args(flags)
                .args(["--save-after-batches", batches, "--state-out"])
                .arg(&state),
        );
        count(&before);
        inputs.push(state);
    }
    let out = dir.join("out");
    let written = run_ok(
        energon()
            .args(["checkpoint", "redist", "--new-world-size", "3", "--new-num-workers", "1"])
            .args(&inputs)
            .arg(&out),
    );
    assert_eq!(written.lines().count(), 3, "{written}");
    let info = run_ok(energon().args(["checkpoint", "info"]).arg(out.join("state-r2.ckpt")));
    assert!(info.contains("continues a job of 2 ranks x 2 workers"), "{info}");
    for rank in 0..3 {
        let state = out.join(format!("state-r{rank}.ckpt"));
        let r = rank.to_string();
        let flags = ["--world-size", "3", "--rank", &r, "--num-workers", "1"];
        // Without -n: the rest of the pass this rank continues.
        count(&run_ok(trace(&common).args(flags).arg("--restore").arg(&state)));
    }
    // The fixture's 200 samples, each once: the pass before the cut and its rest after.
    assert_eq!(seen.len(), 200, "{seen:?}");
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
    // Without --new-num-workers the number of workers in all must stay.
    let err = run_err(
        energon()
            .args(["checkpoint", "redist", "--new-world-size", "3"])
            .args(&inputs)
            .arg(dir.join("bad")),
    );
    assert!(err.contains("give the number of workers per rank"), "{err}");
}

#[test]
fn redistribution_refuses_a_turned_round_robin_and_missing_ranks() {
    let dir = Dir::new();
    let mut inputs = Vec::new();
    for rank in ["0", "1"] {
        let state = dir.join(&format!("s{rank}.ckpt"));
        let flags =
            ["--world-size", "2", "--rank", rank, "--num-workers", "2", "--batch-size", "2"];
        run_ok(trace(&flags).arg("--save-after-batches").arg("3").arg("--state-out").arg(&state));
        inputs.push(state);
    }
    let err = run_err(
        energon()
            .args(["checkpoint", "redist", "--new-world-size", "4"])
            .args(&inputs)
            .arg(dir.join("out")),
    );
    assert!(err.contains("worker 1 next"), "{err}");
    let err = run_err(
        energon()
            .args(["checkpoint", "redist", "--new-world-size", "4"])
            .arg(&inputs[0])
            .arg(dir.join("out")),
    );
    assert!(err.contains("need the states of ranks 0..2"), "{err}");
}

#[test]
fn damaged_newer_and_foreign_checkpoints_are_refused() {
    let dir = Dir::new();
    let state = dir.join("s.ckpt");
    let flags = ["--batch-size", "4", "--shuffle-buffer-size", "16"];
    run_ok(trace(&flags).args([
        "--save-after-batches",
        "2",
        "--state-out",
        state.to_str().unwrap(),
    ]));
    let bytes = fs::read(&state).unwrap();

    let cut = dir.join("cut.ckpt");
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = run_err(trace(&flags).arg("--restore").arg(&cut));
    assert!(err.contains(&format!("corrupt checkpoint {}", cut.display())), "{err}");
    assert!(err.contains("truncated"), "{err}");
    let err = run_err(energon().args(["checkpoint", "info"]).arg(&cut));
    assert!(err.contains("truncated"), "{err}");

    let newer = dir.join("newer.json");
    fs::write(&newer, r#"{"format": "energon-rs-checkpoint", "version": 99, "ranks": []}"#)
        .unwrap();
    let err = run_err(trace(&flags).arg("--restore").arg(&newer));
    assert!(err.contains("format version 99"), "{err}");

    // A checkpoint of the tar shards restored into the JSONL file.
    let err = run_err(
        energon()
            .arg("trace")
            .args(flags)
            .arg("--restore")
            .arg(&state)
            .arg(ref_small_dir().join("jsonl/data.jsonl")),
    );
    assert!(err.contains("saved by a different loader"), "{err}");
    assert!(err.contains("leaf.0.shards is 4 shards, 200 samples"), "{err}");
    // The same dataset with another shuffle buffer.
    let err = run_err(
        energon()
            .args(["trace", "--batch-size", "4", "--shuffle-buffer-size", "8", "--restore"])
            .arg(&state)
            .arg(ref_small_dir()),
    );
    assert!(err.contains("shuffle_buffer_size is 16 in the checkpoint but 8"), "{err}");
    // Another rank.
    let err = run_err(trace(&["--world-size", "2", "--rank", "1"]).arg("--restore").arg(&state));
    assert!(err.contains("no state of rank 1"), "{err}");
}
