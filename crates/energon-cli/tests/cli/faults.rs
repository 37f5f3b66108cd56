//! Fault tests of `energon prepare`: a prepare killed (SIGKILL) at seeded random points, or
//! before each rename of its commit, leaves the complete old index, the complete new one, or a
//! set that `energon lint` reports as inconsistent, and the next prepare succeeds.

use std::{
    fs,
    path::Path,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use energon_tests::WdsSpec;

use crate::util::{Dir, energon, run};

/// The two index sets the loop switches between: all shards in train, or shard 1 excluded and
/// the rest split into train and val (other `tar_file_id`s, other split file).
const CONFIGS: [&[&str]; 2] =
    [&["--split-ratio", "1,0,0"], &["--split-ratio", "0.5,0.5,0", "--exclude", "000001"]];

fn prepare(root: &Path, config: usize) -> Command {
    let mut cmd = energon();
    cmd.arg("prepare").arg(root).args([
        "--no-progress",
        "--non-interactive",
        "--force-overwrite",
        "--num-workers",
        "2",
        "--sample-type",
        "CrudeWebdataset",
    ]);
    cmd.args(CONFIGS[config]);
    cmd
}

/// Each index file's name and content.
type IndexState = Vec<(String, Vec<u8>)>;

/// The index files that define the dataset (`index.uuid`, random by design, left out; the
/// database compared by content).
fn index_state(root: &Path) -> IndexState {
    let mut res = Vec::new();
    let mut names: Vec<String> = fs::read_dir(root.join("shards"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tar.idx"))
        .collect();
    names.sort();
    for name in names {
        res.push((name.clone(), fs::read(root.join("shards").join(&name)).unwrap()));
    }
    for name in [".info.json", "split.yaml"] {
        res.push((name.to_owned(), fs::read(root.join(".nv-meta").join(name)).unwrap_or_default()));
    }
    let db = root.join(".nv-meta/index.sqlite");
    let dump =
        energon_index::sqlite::dump_canonical(&db).map(String::into_bytes).unwrap_or_default();
    res.push(("index.sqlite".to_owned(), dump));
    res
}

fn lint_code(root: &Path) -> (Option<i32>, String) {
    let (out, stdout, stderr) = run(energon().args(["lint", "--parallel", "2"]).arg(root));
    (out.status.code(), format!("{stdout}{stderr}"))
}

fn tmp_files(root: &Path) -> Vec<String> {
    crate::util::snapshot(root)
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// xorshift64*: the seeded choice of kill delays.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn prepare_killed_at_random_points_never_leaves_a_silently_mixed_index() {
    let (dir, complete, took) = dataset_with_both_indexes();
    let root = dir.path();
    let mut current = 0;
    let mut seen = [0usize; 3];
    let mut rng = 0x5eed_1234_u64;
    for iteration in 0..20 {
        let target = 1 - current;
        let delay = took.mul_f64((next(&mut rng) % 1000) as f64 / 1000.0 * 1.2);
        let mut child = prepare(root, target)
            .stderr(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        thread::sleep(delay);
        let _ = child.kill(); // SIGKILL; it may have finished already.
        let _ = child.wait().unwrap();

        seen[check_killed(root, &complete, (current, target), iteration)] += 1;

        prepare_again(root, &complete, target, &format!("iteration {iteration}"));
        current = target;
    }
    eprintln!(
        "kill points: {} old, {} new, {} reported as inconsistent",
        seen[0], seen[1], seen[2]
    );
}

/// Checks the index a killed prepare from configuration `current` to `target` left: a complete
/// one (of either) reads cleanly, a mixed one is reported, never read. Returns 0 (the old
/// index), 1 (the new one) or 2 (mixed).
fn check_killed(
    root: &Path,
    complete: &[IndexState; 2],
    (current, target): (usize, usize),
    label: impl std::fmt::Display,
) -> usize {
    let state = index_state(root);
    let (code, output) = lint_code(root);
    assert!(matches!(code, Some(0..=2)), "{label}: lint crashed:\n{output}");
    if state == complete[current] || state == complete[target] {
        assert_eq!(code, Some(0), "{label}: a complete index must read:\n{output}");
        return usize::from(state == complete[target]);
    }
    // A mixed set: never read silently.
    assert_ne!(code, Some(0), "{label}: a mixed index read cleanly:\n{output}");
    assert!(
        output.contains("inconsistent index")
            || output.contains("shard changed after prepare")
            || output.contains("does not match")
            || output.contains("not in the dataset info"),
        "{label}: {output}"
    );
    2
}

/// Prepares configurations 0, 1 and 0 of a new dataset; returns it, the complete index of each
/// configuration, and the longest prepare's time.
fn dataset_with_both_indexes() -> (Dir, [IndexState; 2], Duration) {
    let dir = Dir::new();
    let spec =
        WdsSpec { shards: 6, per_shard: 40, img: 8, subdir: "shards".into(), ..WdsSpec::default() };
    energon_tests::write_wds(dir.path(), &spec).unwrap();
    // (The first run creates every `.tar.idx`; configuration 1 leaves the excluded one as it is.)
    let mut complete = [Vec::new(), Vec::new()];
    let mut took = Duration::ZERO;
    for config in [0, 1, 0] {
        let start = Instant::now();
        let (out, stdout, stderr) = run(&mut prepare(dir.path(), config));
        took = took.max(start.elapsed());
        assert!(out.status.success(), "{stdout}{stderr}");
        complete[config] = index_state(dir.path());
    }
    assert_ne!(complete[0], complete[1]);
    (dir, complete, took)
}

/// The next prepare of `target` succeeds and leaves its complete index, without temporary files.
fn prepare_again(root: &Path, complete: &[IndexState; 2], target: usize, label: &str) {
    let (out, stdout, stderr) = run(&mut prepare(root, target));
    assert!(out.status.success(), "{label}: {stdout}{stderr}");
    assert_eq!(index_state(root), complete[target], "{label}");
    assert_eq!(tmp_files(root), Vec::<String>::new(), "{label}");
}

/// Starts a prepare of `target` that pauses before rename `step` of its commit (the test build's
/// hook); kills it there and returns `true`, or returns `false` when it ends without pausing
/// (its commit has fewer renames).
fn kill_at_commit_step(root: &Path, target: usize, step: usize) -> bool {
    let mut child = prepare(root, target)
        .env("ENERGON_TEST_COMMIT_PAUSE", step.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("commit paused before rename") {
                let _ = tx.send(());
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let paused = loop {
        if rx.recv_timeout(Duration::from_millis(20)).is_ok() {
            break true;
        }
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        assert!(Instant::now() < deadline, "the prepare neither paused nor ended");
    };
    let _ = child.kill();
    let _ = child.wait().unwrap();
    paused
}

/// A prepare killed before each rename of its commit in turn, from either configuration to the
/// other: each leaves the old index, the new one or a reported mix, and the next prepare
/// succeeds.
#[test]
fn prepare_killed_inside_its_commit_window_never_leaves_a_silently_mixed_index() {
    let (dir, complete, _) = dataset_with_both_indexes();
    let root = dir.path();
    let mut current = 0;
    let mut seen = [0usize; 3];
    for target in [1, 0] {
        let mut step = 0;
        while kill_at_commit_step(root, target, step) {
            let label = format!("to configuration {target}, killed before rename {step}");
            seen[check_killed(root, &complete, (current, target), &label)] += 1;
            // Back to where the next kill starts from.
            prepare_again(root, &complete, current, &label);
            step += 1;
        }
        // Past the last rename: the prepare ended with the new index.
        assert!(step > 8, "to configuration {target}: only {step} renames");
        assert_eq!(index_state(root), complete[target]);
        current = target;
    }
    eprintln!(
        "commit kill points: {} old, {} new, {} reported as inconsistent",
        seen[0], seen[1], seen[2]
    );
    assert!(seen[0] > 0 && seen[2] > 0, "{seen:?}");
}
