//! Metadataset sample orders recorded from the reference loader (energon-mix's
//! `tests/data/traces/`, written by its `tests/data/make_traces.sh`): the first keys of one rank,
//! batch size 1, no shuffle buffer, workers interleaved round robin as torch's DataLoader does.

use std::{fs, path::Path};

use energon_cook::Stage;
use energon_dist::WorkerConfig;
use energon_mix::{MixOptions, MixPlan, ResolveOptions, prepare_metadataset, resolve_path};

use crate::{
    plans::keys,
    util::{fixture, generated, mix_data as data},
};

/// One recorded trace: the metadataset and the loader settings from its file name
/// (`<mds>-ws<W>-r<R>-nw<N>-s<S>[-msps<M>].txt`).
#[derive(Debug)]
struct Case {
    mds: String,
    world_size: usize,
    rank: usize,
    num_workers: usize,
    seed: i64,
    msps: Option<u64>,
    keys: Vec<String>,
}

fn cases() -> Vec<Case> {
    let mut res = Vec::new();
    for entry in fs::read_dir(data("traces")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let mut fields = stem.split('-');
        let mds = fields.next().unwrap().to_owned();
        let mut case = Case {
            mds,
            world_size: 1,
            rank: 0,
            num_workers: 0,
            seed: 0,
            msps: None,
            keys: fs::read_to_string(&path).unwrap().lines().map(str::to_owned).collect(),
        };
        for field in fields {
            let number =
                |prefix: &str| field.strip_prefix(prefix).and_then(|v| v.parse::<i64>().ok());
            if let Some(v) = number("msps") {
                case.msps = Some(v as u64);
            } else if let Some(v) = number("ws") {
                case.world_size = v as usize;
            } else if let Some(v) = number("nw") {
                case.num_workers = v as usize;
            } else if let Some(v) = number("r") {
                case.rank = v as usize;
            } else if let Some(v) = number("s") {
                case.seed = v;
            } else {
                panic!("bad trace name {stem}");
            }
        }
        res.push(case);
    }
    res.sort_by(|a, b| (&a.mds, a.world_size, a.rank).cmp(&(&b.mds, b.world_size, b.rank)));
    res
}

/// The first `n` keys of the rank's loader, workers interleaved round robin.
fn trace(path: &Path, case: &Case, n: usize) -> Vec<String> {
    let split = resolve_path(path, "train", &ResolveOptions::default()).unwrap();
    let cfg = WorkerConfig::new(case.rank, case.world_size, case.num_workers)
        .unwrap()
        .with_seed_offset(case.seed);
    let options = MixOptions::default().max_samples_per_sequence(case.msps);
    let plan = MixPlan::new(split, cfg, options).unwrap();
    let mut workers: Vec<_> = (0..cfg.n_local_workers()).map(|w| keys(&plan, w).unwrap()).collect();
    let mut res = Vec::with_capacity(n);
    'outer: loop {
        for worker in &mut workers {
            if res.len() == n {
                break 'outer;
            }
            let item = worker.next().unwrap().expect("training pipelines never end");
            res.push(item.value);
        }
    }
    res
}

#[test]
fn blends_yield_the_reference_order() {
    let cases: Vec<Case> = cases().into_iter().filter(|c| c.mds != "join").collect();
    assert_eq!(cases.len(), 17);
    for case in &cases {
        let path = data("mds").join(format!("{}.yaml", case.mds));
        let got = trace(&path, case, case.keys.len());
        assert!(case.keys.len() >= 300, "{case:?}");
        if let Some(i) = got.iter().zip(&case.keys).position(|(a, b)| a != b) {
            panic!(
                "{case:?} differs at {i}: got {:?}, expected {:?}",
                &got[i..i + 5],
                &case.keys[i..i + 5]
            );
        }
    }
}

#[test]
fn joins_yield_the_reference_order() {
    let dir = tempfile::tempdir().unwrap();
    energon_tests::copy_dir(&fixture(), &dir.path().join("ref")).unwrap();
    generated(&dir.path().join("b"), 5, 40, 7);
    fs::write(
        dir.path().join("join.yaml"),
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    join:\n      \
         - path: ref\n      - path: b\n    joiner:\n      __module__: megatron.energon\n      \
         __class__: CaptioningSample\n",
    )
    .unwrap();
    prepare_metadataset(&dir.path().join("join.yaml")).unwrap();
    let cases: Vec<Case> = cases().into_iter().filter(|c| c.mds == "join").collect();
    assert_eq!(cases.len(), 2);
    for case in &cases {
        let got = trace(&dir.path().join("join.yaml"), case, case.keys.len());
        assert_eq!(got, case.keys, "{case:?}");
    }
}
