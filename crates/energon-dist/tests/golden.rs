//! Golden tests: slicing, seeds and random streams against outputs of the Python reference.
//!
//! Two sources: the `slices-*.jsonl` files of the reference-prepared fixture (written by megatron-energon 7.4.1
//! while loading `energon-ref-small`), and `tests/golden/reference.jsonl`, written by
//! `tests/golden/generate.py` from megatron-energon 7.4.1 and torch 2.15.0 (random slicing cases,
//! worker and restore seeds, mixed `WorkerRng` workloads, crafted `choice_idx` ties, subsets, and
//! CPython's `random.Random`).

use std::{
    fs,
    ops::Range,
    path::{Path, PathBuf},
};

use energon_dist::{
    DatasetSubset, Mt19937, PyRandom, RngState, WorkerConfig, WorkerRng, restore_seed,
    seed_for_global_worker, shard_workers,
};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    energon_fixtures::fixtures_dir()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

fn us(v: &Value) -> usize {
    usize::try_from(u(v)).expect("a record's index fits in usize")
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().expect("an array in the record").iter().map(u).collect()
}

fn f64_bits(v: &Value) -> f64 {
    f64::from_bits(u(v))
}

/// A stream with the given seed, through the public checkpoint format.
fn stream(seed: u64) -> WorkerRng {
    let state = serde_json::from_value(json!({ "seed": seed, "mt": null }));
    WorkerRng::from_state(state.expect("a lazily seeded state"))
}

/// Parses `ws2-r1-nw2-...-msps10` out of a fixture file name.
fn parse_name(name: &str) -> (usize, usize, usize, Option<u64>) {
    let field = |prefix: &str| {
        name.trim_end_matches(".jsonl")
            .split('-')
            .find_map(|part| part.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok()))
    };
    let n = |prefix: &str| {
        let value = field(prefix).unwrap_or_else(|| panic!("no {prefix} in {name}"));
        usize::try_from(value).expect("a small number")
    };
    (n("ws"), n("r"), n("nw"), field("msps"))
}

#[test]
fn fixture_slices() {
    let dir = fixtures().join("energon-ref-small.expected");
    let mut checked = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("slices-") {
            continue;
        }
        let (world_size, rank, num_workers, msps) = parse_name(&name);
        let text = fs::read_to_string(&path).unwrap();
        let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
        let header = lines.next().unwrap();
        let counts: Vec<u64> =
            header["shards"].as_array().unwrap().iter().map(|s| u(&s[1])).collect();
        let expected: Vec<(usize, Vec<u64>)> =
            lines.map(|l| (us(&l["worker"]), u64s(&l["offsets"]))).collect();
        let cfg = WorkerConfig::new(rank, world_size, num_workers).unwrap();
        let got = shard_workers(&counts, None, &cfg, 0, msps).unwrap();
        assert_eq!(got.len(), expected.len(), "{name}");
        for (worker, offsets) in expected {
            assert_eq!(got[worker].offsets(), offsets, "{name}, worker {worker}");
        }
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} slices-*.jsonl files in {}", dir.display());
}

fn records() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reference.jsonl");
    let text = fs::read_to_string(path).expect("tests/golden/reference.jsonl is readable");
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON record")).collect()
}

fn records_of(kind: &str) -> Vec<Value> {
    let res: Vec<Value> = records().into_iter().filter(|r| r["kind"] == kind).collect();
    assert!(!res.is_empty(), "no {kind} records");
    res
}

#[test]
fn reference_slices() {
    for r in records_of("slices") {
        let cfg =
            WorkerConfig::new(us(&r["rank"]), us(&r["world_size"]), us(&r["num_workers"])).unwrap();
        let subset: Option<Range<u64>> = r["subset"].as_array().map(|s| u(&s[0])..u(&s[1]));
        let got =
            shard_workers(&u64s(&r["counts"]), subset, &cfg, u(&r["rotation"]), r["msps"].as_u64())
                .unwrap();
        let got: Vec<Vec<u64>> = got.iter().map(|w| w.offsets().to_vec()).collect();
        let expected: Vec<Vec<u64>> = r["workers"].as_array().unwrap().iter().map(u64s).collect();
        assert_eq!(got, expected, "{r}");
    }
}

#[test]
fn reference_long_piece() {
    for r in records_of("piece") {
        let (start, end) = (u(&r["start"]), u(&r["end"]));
        let cfg = WorkerConfig::new(0, 1, 0).unwrap();
        let got = shard_workers(&[end], Some(start..end), &cfg, 0, r["msps"].as_u64()).unwrap();
        let head = u64s(&r["head"]);
        assert_eq!(&got[0].offsets()[..head.len()], head, "{r}");
    }
}

#[test]
fn reference_subsets() {
    for r in records_of("subset") {
        let absolute = r["absolute"].as_array().map(|a| (u(&a[0]), a[1].as_u64()));
        let range = (f64_bits(&r["range_bits"][0]), f64_bits(&r["range_bits"][1]));
        let subset = DatasetSubset { range: Some(range), absolute_range: absolute };
        let out = u64s(&r["out"]);
        assert_eq!(subset.compute(u(&r["total"])), Ok(out[0]..out[1]), "{r}");
    }
}

#[test]
fn reference_worker_and_restore_seeds() {
    for r in records_of("worker_seed") {
        let cfg = WorkerConfig::new(us(&r["rank"]), us(&r["world_size"]), us(&r["num_workers"]))
            .unwrap()
            .with_seed_offset(r["seed_offset"].as_i64().unwrap());
        assert_eq!(
            u64::from(cfg.worker_seed(us(&r["local"])).unwrap().get()),
            u(&r["seed"]),
            "{r}"
        );
    }
    for r in records_of("restore_seed") {
        // Any seed value, through the public checkpoint format.
        let state: RngState =
            serde_json::from_value(json!({ "seed": r["worker_seed"], "mt": null })).unwrap();
        let got = restore_seed(state.seed(), u(&r["sample_index"]));
        assert_eq!(u64::from(got.get()), u(&r["seed"]), "{r}");
    }
    // Spot check that the free function agrees with the config.
    let cfg = WorkerConfig::new(1, 3, 2).unwrap().with_seed_offset(5);
    assert_eq!(cfg.worker_seed(1).unwrap(), seed_for_global_worker(3, 5));
}

#[test]
fn reference_rng_streams() {
    for r in records_of("stream") {
        let mut rng = stream(u(&r["seed"]));
        for (i, op) in r["ops"].as_array().unwrap().iter().enumerate() {
            let ctx = || format!("seed {}, op {i}: {op}", r["seed"]);
            match op["op"].as_str().unwrap() {
                "randbelow" => {
                    assert_eq!(rng.randbelow(u(&op["n"])).unwrap(), u(&op["out"]), "{}", ctx());
                }
                "shuffle" => {
                    let items: Vec<u64> = (0..u(&op["n"])).collect();
                    assert_eq!(rng.shuffle(&items), u64s(&op["out"]), "{}", ctx());
                }
                "choice" => {
                    let weights: Vec<f32> = op["weights"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|w| w.as_f64().unwrap() as f32)
                        .collect();
                    assert_eq!(rng.choice_idx(&weights).unwrap(), us(&op["out"]), "{}", ctx());
                }
                "rand_pop" => {
                    let mut items: Vec<u64> = (0..u(&op["n"])).collect();
                    assert_eq!(rng.rand_pop(&mut items).unwrap(), u(&op["out"]), "{}", ctx());
                }
                other => panic!("unknown op {other}"),
            }
        }
    }
}

#[test]
fn reference_long_permutations() {
    for r in records_of("randperm") {
        let mut rng = stream(u(&r["seed"]));
        let n = us(&r["n"]);
        let perm = rng.randperm(n);
        let head = u64s(&r["head"]);
        let tail = u64s(&r["tail"]);
        let as_u64 = |s: &[usize]| s.iter().map(|&x| x as u64).collect::<Vec<_>>();
        assert_eq!(as_u64(&perm[..head.len()]), head, "n = {n}");
        assert_eq!(as_u64(&perm[n - tail.len()..]), tail, "n = {n}");
        let modulus = (1u128 << 61) - 1;
        let checksum =
            perm.iter().enumerate().map(|(i, &v)| i as u128 * v as u128).sum::<u128>() % modulus;
        assert_eq!(checksum as u64, u(&r["checksum"]), "n = {n}");
        assert_eq!(rng.randbelow(1000).unwrap(), u(&r["next"]), "n = {n}");
    }
}

/// Inverts MT19937's output tempering.
fn untemper(y: u32) -> u32 {
    let y = y ^ (y >> 18);
    let y = y ^ ((y << 15) & 0xefc6_0000);
    let mut shifted7 = y;
    for _ in 0..5 {
        shifted7 = y ^ ((shifted7 << 7) & 0x9d2c_5680);
    }
    let mut shifted11 = shifted7;
    for _ in 0..3 {
        shifted11 = shifted7 ^ (shifted11 >> 11);
    }
    shifted11
}

#[test]
fn reference_choice_on_crafted_draws() {
    for r in records_of("choice_crafted") {
        // Same construction as the generator: seed 7, one draw, then the next word replaced so
        // that the next output is `raw`.
        let mut mt = Mt19937::new(7);
        mt.next_u32();
        let (words, index) = mt.state();
        let mut words = words.to_vec();
        words[index] = untemper(u32::try_from(u(&r["raw"])).unwrap());
        let state = json!({ "seed": 7, "mt": { "words": words, "index": index } });
        let mut rng = WorkerRng::from_state(serde_json::from_value(state).unwrap());
        let weights: Vec<f32> =
            r["weights"].as_array().unwrap().iter().map(|w| w.as_f64().unwrap() as f32).collect();
        assert_eq!(rng.choice_idx(&weights).unwrap(), us(&r["out"]), "{r}");
    }
}

#[test]
fn cpython_random() {
    for r in records_of("py_shuffle") {
        let mut items: Vec<u64> = (0..u(&r["n"])).collect();
        PyRandom::new(u(&r["seed"])).shuffle(&mut items);
        assert_eq!(items, u64s(&r["out"]), "{r}");
    }
    for r in records_of("py_random") {
        let mut rng = PyRandom::new(u(&r["seed"]));
        for expected in r["out_bits"].as_array().unwrap() {
            assert_eq!(rng.random().to_bits(), u(expected), "{r}");
        }
    }
}
