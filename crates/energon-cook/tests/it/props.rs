//! Save, restore in a fresh loader, continue: the items equal an uninterrupted run's, for random
//! pipelines (single datasets and blends, shuffle buffers, generators, failures, packing,
//! grouping, virtual epochs, validation limits, 0 to 3 workers, several ranks) and random cut
//! points.

use std::{fmt::Debug, path::Path};

use energon_cook::{
    Cooker, Generator, HookError, HookResult, Hooks, Keyed, Loader, LoaderBuilder, LoaderState,
    Outputs, SampleContext, TaskEncoder,
};
use energon_dist::WorkerConfig;
use energon_mix::{MixOptions, MixPlan, ResolveOptions};
use proptest::prelude::*;

use crate::util::{Trace, dataset, fixture, pull, through_file};

/// What the test encoder does.
#[derive(Debug, Clone, Copy)]
struct Flags {
    /// `encode_sample` makes two outputs at once for every third sample, and up to three one at
    /// a time for every third but one (the third failing for some). Their values depend only
    /// on the call (a buffered sample is made again from its key on restore, at another batch
    /// index).
    generator: bool,
    /// `encode_sample` fails on every `n`-th sample (and skips others on purpose).
    fail_every: Option<u64>,
    /// Packing groups of up to 3 tokens.
    packing: bool,
    /// Batching by group (parity of the first token).
    group: bool,
    /// `encode_batch` splits batches of two or more in halves.
    split_batches: bool,
}

#[derive(Debug)]
struct TestEncoder(Flags);

/// A generator whose values are made when pulled.
struct Yields {
    v: u64,
    made: u64,
    fails: bool,
}

impl Generator<Vec<u64>> for Yields {
    fn next(&mut self, ctx: &SampleContext) -> HookResult<Option<Vec<u64>>> {
        self.made += 1;
        match self.made {
            1 => Ok(Some(vec![self.v + 2])),
            2 => Ok(Some(vec![self.v + 3, ctx.index(), ctx.current_sample_index()])),
            3 if self.fails => Err(HookError::msg("the generator fails")),
            3 => Ok(Some(vec![self.v + 4])),
            _ => Ok(None),
        }
    }
}

impl TaskEncoder for TestEncoder {
    type Sample = String;
    type Encoded = Vec<u64>;
    type Batch = Vec<Vec<u64>>;
    type Output = Vec<Vec<u64>>;

    fn hooks(&self) -> Hooks {
        Hooks {
            encode_sample: true,
            packing: self.0.packing,
            batch_group_criterion: self.0.group,
            encode_batch: true,
            ..Hooks::NONE
        }
    }

    fn cookers(&self) -> Vec<Cooker<String>> {
        vec![Cooker::new(|key: String, _| Ok(format!("j{key}")))]
    }

    fn encode_sample(&self, key: String, ctx: &SampleContext) -> HookResult<Outputs<Vec<u64>>> {
        let n: u64 = key.trim_start_matches('j').parse().map_err(HookError::from)?;
        if let Some(every) = self.0.fail_every {
            if n.is_multiple_of(every) {
                return Err(HookError::msg(format!("sample {n} fails")));
            }
            if n % every == 1 {
                return Err(HookError::Skip);
            }
        }
        // Randomness from the per-sample seed must come out the same on restore.
        let v = n * 1000 + ctx.rng().randbelow(1000).unwrap();
        Ok(if self.0.generator && n.is_multiple_of(3) {
            Outputs::Many(vec![vec![v], vec![v + 1, ctx.current_sample_index()]])
        } else if self.0.generator && n % 3 == 1 {
            Outputs::Lazy(Box::new(Yields { v, made: 0, fails: n % 7 == 1 }))
        } else {
            Outputs::One(vec![v])
        })
    }

    fn select_samples_to_pack(
        &self,
        samples: &[Keyed<Vec<u64>>],
        _: &SampleContext,
    ) -> HookResult<Vec<Vec<usize>>> {
        // Greedy: consecutive samples while the pack has at most 3 tokens; the last sample of
        // an odd buffer is left out (dropped, as the reference drops unselected samples).
        let mut groups = vec![Vec::new()];
        let mut tokens = 0;
        for (i, sample) in samples.iter().enumerate().take(samples.len() - samples.len() % 2) {
            if tokens + sample.value.len() > 3 {
                groups.push(Vec::new());
                tokens = 0;
            }
            tokens += sample.value.len();
            groups.last_mut().unwrap().push(i);
        }
        Ok(groups)
    }

    fn pack_selected_samples(
        &self,
        samples: Vec<Keyed<Vec<u64>>>,
        _: &SampleContext,
    ) -> HookResult<Outputs<Vec<u64>>> {
        Ok(Outputs::One(samples.into_iter().flat_map(|s| s.value).collect()))
    }

    fn batch_group_criterion(
        &self,
        sample: &Vec<u64>,
        _: &SampleContext,
    ) -> HookResult<(String, Option<usize>)> {
        let parity = sample[0] % 2;
        Ok((parity.to_string(), None.or(Some(2 + parity as usize))))
    }

    fn batch(
        &self,
        samples: Vec<Keyed<Vec<u64>>>,
        _: &SampleContext,
    ) -> HookResult<Outputs<Vec<Vec<u64>>>> {
        let batch: Vec<Vec<u64>> = samples.into_iter().map(|s| s.value).collect();
        if batch.iter().flatten().sum::<u64>() % 13 == 0 {
            return Err(HookError::msg("unlucky batch"));
        }
        Ok(Outputs::One(batch))
    }

    fn encode_batch(
        &self,
        batch: Vec<Vec<u64>>,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Vec<Vec<u64>>>> {
        let mut batch = batch;
        batch.push(vec![ctx.current_batch_index()]);
        if self.0.split_batches && batch.len() > 2 {
            let second = batch.split_off(batch.len() / 2);
            return Ok(Outputs::Many(vec![batch, second]));
        }
        Ok(Outputs::One(batch))
    }
}

/// What the loader reads.
#[derive(Debug, Clone)]
enum Source {
    /// The fixture's tar shards.
    Single,
    /// A weighted blend of the tar shards, a subset of them and the JSONL file.
    Blend { weights: [u8; 3] },
    /// An epochized blend with fractional repetitions.
    Epochized { repetitions: [f64; 2] },
}

#[derive(Debug, Clone)]
struct Params {
    source: Source,
    world_size: usize,
    rank: usize,
    num_workers: usize,
    val: bool,
    shuffle_buffer: usize,
    batch_size: Option<usize>,
    packing_buffer: Option<usize>,
    epoch: u64,
    limit: Option<u64>,
    flags: Flags,
    checkpoint_every: u64,
    json: bool,
    cut: usize,
    rest: usize,
}

fn metadataset(dir: &Path, source: &Source) -> std::path::PathBuf {
    let root = fixture();
    let jsonl = root.join("jsonl/data.jsonl");
    let body = match source {
        Source::Single => unreachable!("no metadataset"),
        Source::Blend { weights } => format!(
            "    blend:\n      - {{weight: {}, path: {r}}}\n      - {{weight: {}, path: {r}, \
             subset: {{range: [20%, 70%]}}}}\n      - {{weight: {}, path: {j}}}\n",
            weights[0] + 1,
            weights[1] + 1,
            weights[2] + 1,
            r = root.display(),
            j = jsonl.display(),
        ),
        Source::Epochized { repetitions } => format!(
            "    blend_epochized:\n      - {{repetitions: {}, path: {r}}}\n      - \
             {{repetitions: {}, path: {j}, subset: {{range: [0%, 30%]}}}}\n",
            repetitions[0],
            repetitions[1],
            r = root.display(),
            j = jsonl.display(),
        ),
    };
    let path = dir.join("mds.yaml");
    let text = format!(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n{body}"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Pulls `n` entries from a fresh (or restored) loader, and returns them with the loader.
enum AnyLoader {
    Samples(Loader<Keyed<Vec<u64>>>),
    Batches(Loader<Keyed<Vec<Vec<u64>>>>),
}

impl AnyLoader {
    fn pull(&mut self, n: usize) -> Trace {
        match self {
            AnyLoader::Samples(l) => pull(l, n),
            AnyLoader::Batches(l) => pull(l, n),
        }
    }

    fn save_state(&self) -> LoaderState {
        match self {
            AnyLoader::Samples(l) => l.save_state().unwrap(),
            AnyLoader::Batches(l) => l.save_state().unwrap(),
        }
    }
}

macro_rules! configure {
    ($builder:expr, $p:expr, $restore:expr) => {{
        let p: &Params = $p;
        let mut b = $builder
            .task_encoder(TestEncoder(p.flags))
            .shuffle_buffer_size(p.shuffle_buffer)
            .batch_size(p.batch_size)
            .packing_buffer_size(p.packing_buffer)
            .virtual_epoch_length(p.epoch)
            .limit(p.limit)
            .checkpoint_every(p.checkpoint_every);
        if let Some(state) = $restore {
            b = b.restore_state(state);
        }
        if p.batch_size.is_none() && !p.flags.group {
            AnyLoader::Samples(b.build_samples().unwrap())
        } else {
            AnyLoader::Batches(b.build_batches().unwrap())
        }
    }};
}

fn build(p: &Params, dir: &Path, restore: Option<LoaderState>) -> AnyLoader {
    let cfg = WorkerConfig::new(p.rank, p.world_size, p.num_workers).unwrap();
    match &p.source {
        Source::Single => {
            let builder =
                LoaderBuilder::new(dataset(), cfg, |raw| Ok(Some(raw.key))).training(!p.val);
            configure!(builder, p, restore)
        }
        source => {
            let path = metadataset(dir, source);
            let split =
                energon_mix::resolve_path(&path, "train", &ResolveOptions::default()).unwrap();
            let options = MixOptions::default().training(!p.val);
            let plan = MixPlan::new(split, cfg, options).unwrap();
            let builder = LoaderBuilder::from_plan(plan, |s| Ok(Some(s.key().to_owned())));
            configure!(builder, p, restore)
        }
    }
}

fn params() -> impl Strategy<Value = Params> {
    let source = prop_oneof![
        Just(Source::Single),
        any::<[u8; 3]>().prop_map(|w| Source::Blend { weights: w.map(|x| x % 3) }),
        (0usize..4, 0usize..4).prop_map(|(a, b)| Source::Epochized {
            repetitions: [[0.5, 1.0, 1.5, 2.25][a], [0.3, 1.0, 2.0, 0.7][b]]
        }),
    ];
    let flags =
        (any::<bool>(), prop::option::of(3u64..9), any::<bool>(), any::<bool>(), any::<bool>())
            .prop_map(|(generator, fail_every, packing, group, split_batches)| Flags {
                generator,
                fail_every,
                packing,
                group,
                split_batches,
            });
    (
        source,
        (1usize..=2, 0usize..2, 0usize..=4, prop::bool::weighted(0.2)),
        (
            prop_oneof![Just(0usize), 2usize..12],
            prop::option::of(1usize..=5),
            prop::option::of(3usize..8),
        ),
        (prop_oneof![Just(0u64), 3u64..15], prop::option::of(1u64..12)),
        flags,
        (1u64..4, any::<bool>(), 0usize..30, 1usize..20),
    )
        .prop_map(
            |(
                source,
                (world_size, rank, num_workers, val),
                (shuffle_buffer, batch_size, packing_buffer),
                (epoch, limit),
                flags,
                (checkpoint_every, json, cut, rest),
            )| {
                // With a fixed batch size the criterion returns none (and the other way round).
                let flags = Flags { group: flags.group && batch_size.is_none(), ..flags };
                Params {
                    source,
                    world_size,
                    rank: rank % world_size,
                    num_workers,
                    val,
                    shuffle_buffer,
                    batch_size,
                    packing_buffer: packing_buffer.filter(|_| flags.packing),
                    epoch,
                    limit,
                    flags: Flags { packing: flags.packing && packing_buffer.is_some(), ..flags },
                    checkpoint_every,
                    json,
                    cut,
                    rest,
                }
            },
        )
}

/// The property, also usable for a fixed case.
fn check(p: &Params) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let full = build(p, dir.path(), None).pull(p.cut + p.rest);
    let mut first = build(p, dir.path(), None);
    let mut got = first.pull(p.cut);
    let state = through_file(first.save_state(), p.json);
    drop(first);
    got.extend(build(p, dir.path(), Some(state)).pull(p.rest));
    prop_assert_eq!(got, full, "{:?}", p);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn save_restore_continue_equals_an_uninterrupted_run(p in params()) {
        check(&p)?;
    }
}

#[test]
fn a_packing_pipeline_with_generators_and_failures_resumes() {
    let p = Params {
        source: Source::Blend { weights: [1, 0, 2] },
        world_size: 1,
        rank: 0,
        num_workers: 2,
        val: false,
        shuffle_buffer: 7,
        batch_size: Some(3),
        packing_buffer: Some(5),
        epoch: 6,
        limit: None,
        flags: Flags {
            generator: true,
            fail_every: Some(5),
            packing: true,
            group: false,
            split_batches: true,
        },
        checkpoint_every: 1,
        json: false,
        cut: 0,
        rest: 0,
    };
    for cut in 0..25 {
        check(&Params { cut, rest: 12, ..p.clone() }).unwrap();
    }
}
