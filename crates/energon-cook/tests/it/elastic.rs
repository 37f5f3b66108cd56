//! Resuming on other numbers of ranks and workers: the items before the cut and the rest of the
//! pass after redistribution hold every sample exactly as often as an uninterrupted pass does,
//! for random datasets, topologies, cut points and pipelines.

use std::{collections::BTreeMap, path::Path};

use energon_cook::{
    Checkpoint, Cooker, HookResult, Hooks, KeyPart, Keyed, Loader, LoaderBuilder, LoaderState,
    Outputs, RestoreKey, SampleContext, TaskEncoder,
};
use energon_dist::WorkerConfig;
use energon_mix::{MixOptions, MixPlan, ResolveOptions};
use proptest::prelude::*;

use crate::util::{fixture, through_file, write};

/// Cooks crude samples into their keys; with `.0`, splits every fifth sample in two outputs (a
/// generator); batches into lists.
#[derive(Debug)]
struct Splitting(bool);

impl TaskEncoder for Splitting {
    type Sample = String;
    type Encoded = String;
    type Batch = Vec<String>;
    type Output = Vec<String>;

    fn hooks(&self) -> Hooks {
        Hooks { encode_sample: true, ..Hooks::NONE }
    }

    fn cookers(&self) -> Vec<Cooker<String>> {
        vec![Cooker::new(|key: String, _| Ok(key))]
    }

    fn encode_sample(&self, key: String, _: &SampleContext) -> HookResult<Outputs<String>> {
        Ok(if self.0 && (key.ends_with('5') || key.ends_with('0')) {
            Outputs::Many(vec![format!("{key}a"), format!("{key}b")])
        } else {
            Outputs::One(key)
        })
    }

    fn batch(
        &self,
        samples: Vec<Keyed<String>>,
        _: &SampleContext,
    ) -> HookResult<Outputs<Vec<String>>> {
        Ok(Outputs::One(samples.into_iter().map(|s| s.value).collect()))
    }
}

/// What is read.
#[derive(Debug, Clone)]
enum Source {
    /// The fixture's shards, one training pass (no repetition) or validation.
    Single { val: bool, msps: Option<u64> },
    /// A generated dataset of `samples` samples in shards of `per_shard`, one training pass;
    /// `excludes` names samples (by index) and `exclude_shard` a shard its split leaves out.
    Generated {
        samples: u64,
        per_shard: usize,
        msps: Option<u64>,
        excludes: Vec<u64>,
        exclude_shard: Option<usize>,
    },
    /// An epochized blend of the shards (with a subset), the JSONL file and, with a third
    /// count, the shards again (another subset), whole or fractional repetitions, one pass.
    Epochized { repetitions: Vec<f64> },
    /// Validation over two leaves one after the other.
    Concat,
}

#[derive(Debug, Clone)]
struct Params {
    source: Source,
    before: (usize, usize),
    after: (usize, usize),
    shuffle_buffer: usize,
    batch_size: Option<usize>,
    generator: bool,
    /// Items pulled from each old rank before saving.
    cuts: Vec<usize>,
    json: bool,
}

fn metadataset(dir: &Path, source: &Source) -> std::path::PathBuf {
    let root = fixture();
    let (split, body) = match source {
        Source::Single { .. } | Source::Generated { .. } => unreachable!("no metadataset"),
        Source::Epochized { repetitions } => {
            let jsonl = root.join("jsonl/data.jsonl");
            let (r, j) = (root.display(), jsonl.display());
            let leaves = [
                format!("path: {r}\n        subset: {{range: [10%, 90%]}}"),
                format!("path: {j}"),
                format!("path: {r}\n        subset: {{range: [0%, 40%]}}"),
            ];
            let body: String = repetitions
                .iter()
                .zip(leaves)
                .map(|(n, leaf)| format!("      - repetitions: {n}\n        {leaf}\n"))
                .collect();
            ("train", format!("    blend_epochized:\n{body}"))
        }
        Source::Concat => (
            "val",
            format!(
                "    blend:\n      - path: {r}\n        split_part: train\n      - path: {j}\n",
                r = root.display(),
                j = root.join("jsonl/data.jsonl").display(),
            ),
        ),
    };
    write(
        dir,
        "elastic.yaml",
        &format!(
            "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  {split}:\n{body}"
        ),
    )
}

enum AnyLoader {
    Samples(Loader<Keyed<String>>),
    Batches(Loader<Keyed<Vec<String>>>),
}

impl AnyLoader {
    /// The restore keys of up to `n` items of the current pass (fewer if it ends).
    fn pull(&mut self, n: usize) -> Vec<RestoreKey> {
        fn keys<T>(loader: &mut Loader<Keyed<T>>, n: usize) -> Vec<RestoreKey> {
            let mut res = Vec::new();
            while res.len() < n {
                match loader.next() {
                    Some(item) => res.push(item.unwrap().value.restore_key),
                    None => break,
                }
            }
            res
        }
        match self {
            AnyLoader::Samples(l) => keys(l, n),
            AnyLoader::Batches(l) => keys(l, n),
        }
    }

    fn save_state(&self) -> LoaderState {
        match self {
            AnyLoader::Samples(l) => l.save_state().unwrap(),
            AnyLoader::Batches(l) => l.save_state().unwrap(),
        }
    }
}

fn build(
    p: &Params,
    dir: &Path,
    (world, workers): (usize, usize),
    rank: usize,
    restore: Option<LoaderState>,
) -> AnyLoader {
    let cfg = WorkerConfig::new(rank, world, workers).unwrap();
    macro_rules! finish {
        ($builder:expr) => {{
            let mut b = $builder.shuffle_buffer_size(p.shuffle_buffer).batch_size(p.batch_size);
            if let Some(state) = restore {
                b = b.restore_state(state);
            }
            let b = b.task_encoder(Splitting(p.generator));
            match p.batch_size {
                None => AnyLoader::Samples(b.build_samples().unwrap()),
                Some(_) => AnyLoader::Batches(b.build_batches().unwrap()),
            }
        }};
    }
    match &p.source {
        Source::Single { val, msps } => {
            let b = LoaderBuilder::new(crate::util::dataset(), cfg, |raw| Ok(Some(raw.key)))
                .training(!val)
                .repeat(false)
                .max_samples_per_sequence(*msps);
            finish!(b)
        }
        Source::Generated { samples, per_shard, msps, excludes, exclude_shard } => {
            let root = dir.join("generated");
            if !root.exists() {
                crate::util::text_dataset(&root, 0..*samples, *per_shard);
                exclude(&root, *samples, *per_shard, excludes, *exclude_shard);
            }
            let opened = energon_reader::Dataset::open(&root, &Default::default()).unwrap();
            let b = LoaderBuilder::new(std::sync::Arc::new(opened), cfg, |raw| Ok(Some(raw.key)))
                .repeat(false)
                .max_samples_per_sequence(*msps);
            finish!(b)
        }
        source => {
            let path = metadataset(dir, source);
            let (split, training) = match source {
                Source::Concat => ("val", false),
                _ => ("train", true),
            };
            let split =
                energon_mix::resolve_path(&path, split, &ResolveOptions::default()).unwrap();
            let options = MixOptions::default().training(training).repeat(!training);
            let plan = MixPlan::new(split, cfg, options).unwrap();
            finish!(LoaderBuilder::from_plan(plan, |s| Ok(Some(s.key().to_owned()))))
        }
    }
}

/// Rewrites the split of a generated dataset to leave out the samples `excludes` (indices) and
/// the shard `shard` (taken modulo the shard count; none that would leave fewer than 20 samples,
/// one per worker of the largest topology).
fn exclude(root: &Path, samples: u64, per_shard: usize, excludes: &[u64], shard: Option<usize>) {
    let shards = (samples as usize).div_ceil(per_shard);
    let len = |s: usize| per_shard.min(samples as usize - s * per_shard);
    let mut lines = String::new();
    if let Some(s) = shard.map(|s| s % shards).filter(|&s| samples as usize - len(s) >= 20) {
        lines.push_str(&format!("- parts/data-{s}.tar\n"));
    }
    for &i in excludes {
        let i = i % samples;
        lines.push_str(&format!("- parts/data-{}.tar/{i:06}\n", i as usize / per_shard));
    }
    let train: String = (0..shards).map(|s| format!("  - parts/data-{s}.tar\n")).collect();
    let split = format!("split_parts:\n  train:\n{train}exclude:\n{lines}");
    let split = if lines.is_empty() { split.replace("exclude:\n", "exclude: []\n") } else { split };
    std::fs::write(root.join(".nv-meta/split.yaml"), split).unwrap();
}

/// Every sample a key names, as `leaf/index` (the leaf from the blend or concatenation part).
fn samples(key: &[KeyPart], leaf: u64, out: &mut Vec<String>) {
    let mut leaf = leaf;
    let mut i = 0;
    while i < key.len() {
        match &key[i] {
            KeyPart::Name(n) if n == "BlendDataset" || n == "ConcatDataset" => {
                let KeyPart::Index(c) = key[i + 1] else { panic!("{key:?}") };
                leaf = c;
                i += 2;
            }
            KeyPart::Name(n) if n == "Webdataset" => {
                let KeyPart::Index(s) = key[i + 1] else { panic!("{key:?}") };
                out.push(format!("{leaf}/{s}"));
                return;
            }
            KeyPart::Key(k) => {
                samples(k.parts(), leaf, out);
                i += 1;
            }
            _ => i += 1,
        }
    }
}

fn count(keys: &[RestoreKey], counts: &mut BTreeMap<String, usize>) {
    for key in keys {
        let mut s = Vec::new();
        samples(key.parts(), 0, &mut s);
        for s in s {
            *counts.entry(s).or_default() += 1;
        }
    }
}

fn check(p: &Params) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let (world, workers) = p.before;
    let mut want = BTreeMap::new();
    let mut lens = Vec::new();
    for rank in 0..world {
        let pass = build(p, dir.path(), p.before, rank, None).pull(usize::MAX);
        count(&pass, &mut want);
        lens.push(pass.len());
    }
    let mut got = BTreeMap::new();
    let mut states = Vec::new();
    for (rank, len) in lens.into_iter().enumerate() {
        let mut loader = build(p, dir.path(), p.before, rank, None);
        // Cut inside the pass: a loader saved after its pass ended continues with the next.
        let cut = p.cuts[rank % p.cuts.len()].min(len);
        count(&loader.pull(cut), &mut got);
        states.push(loader.save_state());
    }
    let (new_world, new_workers) = p.after;
    let reshaped = Checkpoint { ranks: states }.reshape(new_world, Some(new_workers)).unwrap();
    prop_assert_eq!(reshaped.ranks.len(), new_world);
    for state in reshaped.ranks {
        let rank = state.rank;
        let state = through_file(state, p.json);
        let mut loader = build(p, dir.path(), p.after, rank, Some(state));
        count(&loader.pull(usize::MAX), &mut got);
    }
    // A generator call cut between its outputs continues on a new worker, unless there are
    // fewer new workers than old ones with such a call in the same stage (then its other
    // outputs are dropped: at most one per old worker).
    let fewer = new_world * new_workers.max(1) < world * workers.max(1);
    if let Source::Epochized { repetitions } = &p.source
        && repetitions.iter().any(|r| r.fract() != 0.0)
    {
        // A partial repetition not begun reads other samples than the old workers would have
        // (docs/elastic.md): the per-leaf counts are kept, each sample is read as often as a
        // whole number of repetitions around the fraction allows.
        prop_assert!(!p.generator, "fractions are tested without generators");
        for (leaf, r) in repetitions.iter().enumerate() {
            let of_leaf = |m: &BTreeMap<String, usize>| -> BTreeMap<String, usize> {
                m.iter()
                    .filter(|(s, _)| s.starts_with(&format!("{leaf}/")))
                    .map(|(s, n)| (s.clone(), *n))
                    .collect()
            };
            let (w, g) = (of_leaf(&want), of_leaf(&got));
            prop_assert_eq!(w.values().sum::<usize>(), g.values().sum::<usize>(), "{:?}", p);
            let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
            for (sample, n) in w.iter().chain(&g) {
                prop_assert!((lo..=hi).contains(n), "{sample}: {n} reads, {p:?}");
            }
            if lo >= 1 {
                prop_assert!(w.keys().eq(g.keys()), "{:?}", p);
            }
        }
    } else if p.generator && fewer {
        for (sample, n) in &want {
            let g = got.get(sample).copied().unwrap_or(0);
            prop_assert!(g == *n || (g + 1 == *n && n % 2 == 0), "{sample}: {g} of {n}, {p:?}");
        }
        prop_assert_eq!(got.len(), want.len(), "{:?}", p);
    } else {
        prop_assert_eq!(got, want, "{:?}", p);
    }
    Ok(())
}

fn params() -> impl Strategy<Value = Params> {
    let repetitions = prop::sample::select(vec![0.3, 0.5, 1.0, 1.5, 2.0, 2.25]);
    let source = prop_oneof![
        (any::<bool>(), prop::option::of(3u64..30))
            .prop_map(|(val, msps)| Source::Single { val, msps }),
        prop::collection::vec(1u8..4, 2..=3).prop_map(|r| Source::Epochized {
            repetitions: r.into_iter().map(f64::from).collect()
        }),
        prop::collection::vec(repetitions, 2..=3)
            .prop_map(|repetitions| Source::Epochized { repetitions }),
        (
            20u64..300,
            1usize..80,
            prop::option::of(2u64..20),
            prop::collection::vec(any::<u64>(), 0..6),
            prop::option::of(any::<usize>())
        )
            .prop_map(|(samples, per_shard, msps, excludes, exclude_shard)| {
                Source::Generated { samples, per_shard, msps, excludes, exclude_shard }
            }),
        Just(Source::Concat),
    ];
    let topology = (1usize..=5, 0usize..=4);
    (
        source,
        topology.clone(),
        topology,
        prop_oneof![Just(0usize), 2usize..20],
        prop::option::of(1usize..6),
        any::<bool>(),
        prop::collection::vec(0usize..120, 1..4),
        any::<bool>(),
    )
        .prop_map(
            |(source, before, after, shuffle_buffer, batch_size, generator, cuts, json)| {
                // A generator's outputs would count twice against a fraction's bounds.
                let fractional = matches!(&source, Source::Epochized { repetitions }
                    if repetitions.iter().any(|r| r.fract() != 0.0));
                Params {
                    source,
                    before,
                    after,
                    shuffle_buffer,
                    batch_size,
                    generator: generator && !fractional,
                    cuts,
                    json,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_rest_of_the_pass_on_a_new_topology_reads_every_sample_once(p in params()) {
        check(&p)?;
    }
}

#[test]
fn two_ranks_of_two_workers_continue_on_three_ranks_of_one() {
    for cut in [0, 7, 40, 90] {
        let p = Params {
            source: Source::Epochized { repetitions: vec![2.0, 1.0] },
            before: (2, 2),
            after: (3, 1),
            shuffle_buffer: 10,
            batch_size: Some(3),
            generator: true,
            cuts: vec![cut, cut / 2],
            json: false,
        };
        check(&p).unwrap();
    }
}

#[test]
fn fractional_repetitions_continue_on_another_number_of_workers() {
    let cases: [(&[f64], usize); 3] =
        [(&[1.5, 0.5], 30), (&[0.3, 2.25, 1.0], 5), (&[2.25, 1.0, 0.5], 70)];
    for (repetitions, cut) in cases {
        let p = Params {
            source: Source::Epochized { repetitions: repetitions.to_vec() },
            before: (2, 2),
            after: (3, 1),
            shuffle_buffer: 6,
            batch_size: Some(2),
            generator: false,
            cuts: vec![cut, cut / 3],
            json: true,
        };
        check(&p).unwrap();
    }
}
