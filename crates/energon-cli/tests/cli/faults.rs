//! Fault tests of `energon prepare`: a prepare killed (SIGKILL) at seeded random points leaves the
//! complete old index, the complete new one, or a set that `energon lint` reports as
//! inconsistent, and the next prepare succeeds.

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

/// The index files that define the dataset (`index.uuid`, random by design, left out; the
/// database compared by content).
fn index_state(root: &Path) -> Vec<(String, Vec<u8>)> {
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
    let dir = Dir::new();
    let spec =
        WdsSpec { shards: 6, per_shard: 40, img: 8, subdir: "shards".into(), ..WdsSpec::default() };
    energon_tests::write_wds(dir.path(), &spec).unwrap();
    let root = dir.path();

    // The complete index of each configuration, and how long a prepare takes here (only to
    // spread the kill points over a whole run).
    // (The first run creates every `.tar.idx`; configuration 1 leaves the excluded one as it is.)
    let mut complete = [Vec::new(), Vec::new()];
    let mut took = Duration::ZERO;
    for config in [0, 1, 0] {
        let start = Instant::now();
        let (out, stdout, stderr) = run(&mut prepare(root, config));
        took = took.max(start.elapsed());
        assert!(out.status.success(), "{stdout}{stderr}");
        complete[config] = index_state(root);
    }
    assert_ne!(complete[0], complete[1]);
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

        let state = index_state(root);
        let (code, output) = lint_code(root);
        assert!(matches!(code, Some(0..=2)), "iteration {iteration}: lint crashed:\n{output}");
        if state == complete[current] || state == complete[target] {
            assert_eq!(
                code,
                Some(0),
                "iteration {iteration}: a complete index must read:\n{output}"
            );
            seen[usize::from(state == complete[target])] += 1;
        } else {
            // A mixed set: never read silently.
            assert_ne!(
                code,
                Some(0),
                "iteration {iteration}: a mixed index read cleanly:\n{output}"
            );
            assert!(
                output.contains("inconsistent index")
                    || output.contains("shard changed after prepare")
                    || output.contains("does not match")
                    || output.contains("not in the dataset info"),
                "iteration {iteration}: {output}"
            );
            seen[2] += 1;
        }

        // The next prepare succeeds and leaves the complete new index, without temporary files.
        let (out, stdout, stderr) = run(&mut prepare(root, target));
        assert!(out.status.success(), "iteration {iteration}: {stdout}{stderr}");
        assert_eq!(index_state(root), complete[target], "iteration {iteration}");
        assert_eq!(tmp_files(root), Vec::<String>::new(), "iteration {iteration}");
        current = target;
    }
    eprintln!(
        "kill points: {} old, {} new, {} reported as inconsistent",
        seen[0], seen[1], seen[2]
    );
}
