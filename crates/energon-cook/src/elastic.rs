//! Resuming on another number of ranks or workers: the rest of every old worker's pass, dealt
//! to the new workers (documented in `docs/elastic.md`).
//!
//! [`Checkpoint::reshape`] keeps the states of every old worker in each new rank's state
//! ([`Reshaped`]); the builder deals them out when it restores ([`deal`]), because only the plan
//! knows the old workers' slices. Per leaf, the samples an old worker has still to read in its
//! current pass are collected: the items buffered in its stages (shuffle buffer, packing, group
//! buckets, generator calls that have handed out nothing yet) and the unread ranges of its slice
//! iteration, plus the whole passes (and the partial one of a fractional count) left in a
//! `blend_epochized` repetition. Those pieces, old
//! worker after old worker, are cut into equal shares, one per new global worker, which reads
//! its share as the first pass of that leaf (`LeafIter::with_remainder`); later passes read the
//! new worker's own slices. A generator call that handed out some of its outputs continues on a
//! new worker, in the same stage.

use energon_dist::WorkerConfig;
use energon_mix::{MixPlan, MixTree};
use energon_reader::leaf::{LeafIter, LeafState};
use serde::{Deserialize, Serialize};

use crate::{
    blend::{BLEND, CONCAT},
    checkpoint::{
        BATCH_SIZE_KEY, Checkpoint, LoaderState, NUM_WORKERS_KEY, RANK_KEY, WORLD_SIZE_KEY,
        WorkerState,
    },
    error::{Error, Result},
    restore_key::{KeyPart, RestoreKey},
    state::{PendingCall, StageState},
};

/// The saved states of every worker of a job that ran with another number of ranks or workers,
/// held by each rank's state after [`Checkpoint::reshape`] until it is restored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reshaped {
    /// The old number of ranks.
    pub world_size: usize,
    /// The old number of workers per rank (0: loading in the main thread).
    pub num_workers: usize,
    /// Every old worker's state, in global worker order.
    pub workers: Vec<WorkerState>,
}

impl Checkpoint {
    /// Spreads the states of every rank of a job over `new_world_size` ranks with
    /// `new_num_workers` workers each (`None`: as many workers in all as before).
    ///
    /// With as many workers in all as before, and every rank saved with its first worker next,
    /// this is [`Checkpoint::redistribute`]: every worker keeps its slices and seeds. Otherwise
    /// each new rank's state holds the old workers' states, and restoring it deals the rest of
    /// their passes to the new workers (see the module docs).
    pub fn reshape(&self, new_world_size: usize, new_num_workers: Option<usize>) -> Result<Self> {
        let bad = |reason: String| Err(Error::BadState { reason });
        let ranks = self.checked_ranks()?;
        let first = ranks[0];
        let total = first.world_size * first.num_workers.max(1);
        if new_world_size == 0 {
            return bad("cannot redistribute over 0 ranks".to_owned());
        }
        if new_world_size == first.world_size
            && new_num_workers.is_none_or(|n| n == first.num_workers)
        {
            // The same job: every rank continues as it was.
            return Ok(Checkpoint { ranks: ranks.into_iter().cloned().collect() });
        }
        let same_total = match new_num_workers {
            None => true,
            Some(n) => new_world_size * n.max(1) == total,
        };
        // Workers keep their slices and seeds where they can: the same number of workers in
        // all, and every rank saved at a multiple of its workers' items.
        let aligned = ranks.iter().all(|s| s.next_worker == 0);
        if same_total
            && total.is_multiple_of(new_world_size)
            && (aligned || new_num_workers.is_none())
        {
            let mut res = self.redistribute(new_world_size)?;
            if let Some(n) = new_num_workers {
                // The count as asked: 0 (the main thread) and 1 both run one worker per rank.
                for state in &mut res.ranks {
                    state.num_workers = n;
                    state.config.insert(NUM_WORKERS_KEY, n);
                }
            }
            return Ok(res);
        }
        let Some(num_workers) = new_num_workers else {
            return bad(format!(
                "{total} workers in all cannot be spread evenly over {new_world_size} ranks; \
                 give the number of workers per rank to continue on another number of workers"
            ));
        };
        let mut workers = Vec::with_capacity(total);
        for state in &ranks {
            for worker in &state.workers {
                if worker.replay > 0 {
                    return bad(format!(
                        "worker {} of rank {} was saved {} items before its position (a loader \
                         with checkpoint_every above 1); only exact states can move to another \
                         number of workers",
                        worker.global_worker_id, state.rank, worker.replay
                    ));
                }
            }
            workers.extend(state.workers.iter().cloned());
        }
        let reshaped = Box::new(Reshaped {
            world_size: first.world_size,
            num_workers: first.num_workers,
            workers,
        });
        let n_local = num_workers.max(1);
        let res = (0..new_world_size)
            .map(|rank| {
                let mut config = first.config.clone();
                config.insert(RANK_KEY, rank);
                config.insert(WORLD_SIZE_KEY, new_world_size);
                config.insert(NUM_WORKERS_KEY, num_workers);
                let workers = (0..n_local)
                    .map(|w| WorkerState {
                        global_worker_id: rank * n_local + w,
                        state: None,
                        replay: 0,
                        exhausted: false,
                    })
                    .collect();
                LoaderState {
                    rank,
                    world_size: new_world_size,
                    num_workers,
                    next_worker: 0,
                    micro_batch_size: first.micro_batch_size,
                    workers,
                    config,
                    reshaped: Some(reshaped.clone()),
                }
            })
            .collect();
        Ok(Checkpoint { ranks: res })
    }

    /// The states of ranks `0..world_size`, in rank order, checked to come from one job: one
    /// worker configuration, one micro batch size, one configuration apart from the rank.
    pub(crate) fn checked_ranks(&self) -> Result<Vec<&LoaderState>> {
        let bad = |reason: String| Err(Error::BadState { reason });
        let mut ranks: Vec<&LoaderState> = self.ranks.iter().collect();
        ranks.sort_by_key(|s| s.rank);
        let Some(first) = ranks.first() else { return bad("no rank states given".to_owned()) };
        let world_size = first.world_size;
        let n_local = first.num_workers.max(1);
        if ranks.len() != world_size || ranks.iter().enumerate().any(|(i, s)| s.rank != i) {
            let have: Vec<usize> = ranks.iter().map(|s| s.rank).collect();
            return bad(format!("need the states of ranks 0..{world_size}, got ranks {have:?}"));
        }
        for state in &ranks {
            if state.world_size != world_size || state.num_workers.max(1) != n_local {
                return bad(format!("rank {} has another worker configuration", state.rank));
            }
            if state.micro_batch_size != first.micro_batch_size {
                let size = |s: &LoaderState| {
                    s.micro_batch_size.map_or_else(|| "none".to_owned(), |m| m.to_string())
                };
                return bad(format!(
                    "rank {} was saved with micro batch size {} but rank {} with {}; \
                     redistribution needs one micro batch size on every rank",
                    state.rank,
                    size(state),
                    first.rank,
                    size(first)
                ));
            }
            let differences = first.config.differences(&state.config, &[RANK_KEY, BATCH_SIZE_KEY]);
            if !differences.is_empty() {
                return Err(Error::ConfigMismatch { differences });
            }
            if state.reshaped.is_some() {
                return bad(format!(
                    "rank {} holds a redistributed state that was never restored; restore it \
                     before redistributing again",
                    state.rank
                ));
            }
            let local = state.workers.iter().map(|w| w.global_worker_id);
            if local.ne(state.rank * n_local..(state.rank + 1) * n_local) {
                return bad(format!("the worker states of rank {} are not in order", state.rank));
            }
        }
        Ok(ranks)
    }
}

/// What the tree says of one leaf, whatever the progress.
#[derive(Debug, Clone, Copy, Default)]
struct LeafShape {
    /// The repetitions of a `blend_epochized` leaf (`Repeat` node over it), possibly
    /// fractional.
    repeats: Option<f64>,
    /// The leaf's pass is part of a pass of its blend (an epochized blend), not of its own.
    bounded: bool,
}

/// What one old worker's state says of its leaves.
#[derive(Debug, Default)]
struct Found {
    /// Per leaf: its iteration's state.
    leaves: Vec<Option<LeafState>>,
    /// Per leaf: where its `Repeat` is in the current pass of an epochized blend.
    progress: Vec<Progress>,
    /// Per leaf: whether its blend is done with it in the current pass.
    exhausted: Vec<bool>,
    /// Keys of items buffered in stages, not handed out in any form.
    keys: Vec<RestoreKey>,
    /// Calls that handed out some of their outputs, by the path of their stage.
    pending: Vec<(Vec<usize>, PendingCall)>,
}

impl Found {
    fn new(n_leaves: usize) -> Self {
        Found {
            leaves: vec![None; n_leaves],
            progress: vec![Progress::default(); n_leaves],
            exhausted: vec![false; n_leaves],
            ..Found::default()
        }
    }
}

/// What is left of the current passes of some workers of a job of `world_size` ranks x
/// `num_workers`: per leaf, the pieces of sample ranges, worker after worker (in global order),
/// and the generator calls cut between their outputs, by the path of their stage.
struct Leftovers {
    /// What the plan's tree says of each leaf.
    shapes: Vec<LeafShape>,
    pieces: Vec<Vec<(u64, u64)>>,
    pending: Vec<(Vec<usize>, PendingCall)>,
}

impl Leftovers {
    /// Collects the leftovers of the workers of `ranks`; `worker(rank, local)` is a worker's
    /// saved state (`None`: a fresh pipeline).
    fn of<'a>(
        plan: &MixPlan,
        (world_size, num_workers): (usize, usize),
        ranks: impl IntoIterator<Item = usize>,
        worker: impl Fn(usize, usize) -> Option<&'a WorkerState>,
    ) -> Result<Self> {
        let tree = plan.tree();
        let n_leaves = plan.leaves.len();
        let mut shapes = vec![LeafShape::default(); n_leaves];
        leaf_shapes(&tree, LeafShape::default(), &mut shapes);
        let mut res = Leftovers { shapes, pieces: vec![Vec::new(); n_leaves], pending: Vec::new() };
        for rank in ranks {
            let cfg = WorkerConfig::new(rank, world_size, num_workers)?
                .with_seed_offset(plan.worker_config.seed_offset());
            let rank_plan = plan.for_worker_config(cfg)?;
            for local in 0..num_workers.max(1) {
                let saved = worker(rank, local);
                let mut found = Found::new(n_leaves);
                if let Some(state) = saved.and_then(|w| w.state.as_ref()) {
                    walk(state, Some(&tree), false, &mut Vec::new(), &mut found)?;
                }
                for key in &found.keys {
                    let mut samples = Vec::new();
                    key_samples(key.parts(), &tree, &mut samples)?;
                    for (leaf, index) in samples {
                        res.pieces[leaf].push((index, index + 1));
                    }
                }
                res.pending.extend(found.pending);
                for (leaf, planned) in rank_plan.leaves.iter().enumerate() {
                    let slices = planned.workers[local].clone();
                    let iter = match found.leaves[leaf].take() {
                        Some(state) => LeafIter::from_state(slices, planned.leaf_config, state)
                            .ok_or_else(|| Error::BadState {
                                reason: format!(
                                    "the saved iteration of leaf {leaf} does not fit the slices \
                                     of worker {local} of rank {rank}"
                                ),
                            })?,
                        None => LeafIter::new(slices, planned.leaf_config, cfg.worker_rng(local)?)?,
                    };
                    if !found.exhausted[leaf] {
                        let left = left_of(&iter, found.progress[leaf], res.shapes[leaf]);
                        res.pieces[leaf].extend(left);
                    }
                }
            }
        }
        Ok(res)
    }

    /// The leftovers of every old worker of a state of [`Checkpoint::reshape`].
    fn of_reshaped(plan: &MixPlan, reshaped: &Reshaped) -> Result<Self> {
        let old_local = reshaped.num_workers.max(1);
        if reshaped.workers.len() != reshaped.world_size * old_local {
            return Err(Error::BadState {
                reason: format!(
                    "a redistributed state holds {} old workers instead of {} x {old_local}",
                    reshaped.workers.len(),
                    reshaped.world_size
                ),
            });
        }
        let topology = (reshaped.world_size, reshaped.num_workers);
        Leftovers::of(plan, topology, 0..reshaped.world_size, |rank, local| {
            reshaped.workers.get(rank * old_local + local)
        })
    }
}

/// How many samples are left of the current pass of the rank `state` restores (`plan` is the
/// loader's): what its workers' leaves have still to read and what their stages buffer, or for
/// a state of [`Checkpoint::reshape`], the rank's shares of the old workers' passes. (Samples
/// whose generator calls handed out some outputs are not counted.)
pub fn samples_left_in_pass(plan: &MixPlan, state: &LoaderState) -> Result<u64> {
    let len = |pieces: &[(u64, u64)]| pieces.iter().map(|(s, e)| e - s).sum::<u64>();
    let cfg = plan.worker_config;
    match &state.reshaped {
        None => {
            let topology = (state.world_size, state.num_workers);
            let left =
                Leftovers::of(plan, topology, [state.rank], |_, local| state.workers.get(local))?;
            Ok(left.pieces.iter().map(|p| len(p)).sum())
        }
        Some(reshaped) => {
            let left = Leftovers::of_reshaped(plan, reshaped)?;
            let total = (cfg.world_size() * cfg.n_local_workers()) as u64;
            let first = (cfg.rank() * cfg.n_local_workers()) as u64;
            let shares = first..first + cfg.n_local_workers() as u64;
            Ok(shares.flat_map(|g| left.pieces.iter().map(move |p| len(&share(p, g, total)))).sum())
        }
    }
}

/// The states of this rank's new local workers for a `state` of [`Checkpoint::reshape`]: each
/// worker's fresh state (`fresh`, as the new pipeline reports it) with its share of the old
/// workers' remaining passes installed.
pub(crate) fn deal(
    plan: &MixPlan,
    reshaped: &Reshaped,
    fresh: Vec<StageState>,
) -> Result<Vec<WorkerState>> {
    let tree = plan.tree();
    let new_cfg = plan.worker_config;
    let Leftovers { shapes, pieces, pending } = Leftovers::of_reshaped(plan, reshaped)?;
    let total = new_cfg.world_size() * new_cfg.n_local_workers();
    // Generator calls go round robin over all new workers, one per stage and worker (every
    // rank places them the same way and keeps its own); a call that finds no free worker is
    // dropped with a warning (its sample has been handed out).
    let mut taken: Vec<Vec<Vec<usize>>> = vec![Vec::new(); total];
    let mut calls: Vec<Vec<(Vec<usize>, PendingCall)>> = vec![Vec::new(); total];
    for (n, (path, call)) in pending.into_iter().enumerate() {
        match (0..total).map(|k| (n + k) % total).find(|&g| !taken[g].contains(&path)) {
            Some(g) => {
                taken[g].push(path.clone());
                calls[g].push((path, call));
            }
            None => tracing::warn!(
                "a generator call with {} outputs handed out has no new worker to continue on; \
                 its other outputs are dropped",
                call.emitted
            ),
        }
    }
    let mut res = Vec::with_capacity(fresh.len());
    for (local, mut state) in fresh.into_iter().enumerate() {
        let global = new_cfg.global_worker_id(local)?;
        let shares: Vec<Vec<(u64, u64)>> =
            pieces.iter().map(|p| share(p, global as u64, total as u64)).collect();
        install(&mut state, Some(&tree), &shares, &shapes, false)?;
        for (path, call) in std::mem::take(&mut calls[global]) {
            set_pending(&mut state, &path, call)?;
        }
        res.push(WorkerState {
            global_worker_id: global,
            state: Some(state),
            replay: 0,
            exhausted: false,
        });
    }
    Ok(res)
}

/// Where an old worker's `Repeat` over a leaf of an epochized blend is in its pass.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Repetitions completed in the pass.
    repetition: u64,
    /// Items handed out in the current repetition.
    index: u64,
    /// The current repetition is a dealt share (the last of the pass).
    dealt: bool,
}

/// The pieces left of one old worker's current pass of a leaf: its iteration's remaining
/// ranges and, in an epochized blend, the whole passes of the repetitions not begun and the
/// partial repetition of a fractional count.
///
/// The partial repetition reads `floor(len_worker * frac(r))` items (the cut `Repeat` makes):
/// once begun, the next items of its epoch up to the cut; not begun yet, as many samples of a
/// fresh pass ([`LeafIter::fresh_pass_prefix`]).
fn left_of(iter: &LeafIter, at: Progress, shape: LeafShape) -> Vec<(u64, u64)> {
    if !shape.bounded || at.dealt {
        return iter.remaining().unwrap_or_default();
    }
    let open = iter.in_epoch() || iter.has_remainder();
    let rest = if open { iter.remaining().unwrap_or_default() } else { Vec::new() };
    let repeats = shape.repeats.unwrap_or(1.0);
    let whole = repeats.floor() as u64;
    let fraction = repeats - repeats.floor();
    let cut = (iter.len_worker() as f64 * fraction).floor() as u64;
    if at.repetition >= whole {
        // In the partial repetition (the pass ends after it).
        return match (fraction > 0.0 && at.repetition == whole, open) {
            (false, _) => Vec::new(),
            (true, true) => positions(&rest, 0, cut.saturating_sub(at.index)),
            (true, false) if at.index == 0 => iter.fresh_pass_prefix(cut),
            (true, false) => Vec::new(),
        };
    }
    let mut res = rest;
    let full = iter.full_pass();
    for _ in 0..whole.saturating_sub(at.repetition + u64::from(open)) {
        res.extend_from_slice(&full);
    }
    if fraction > 0.0 {
        res.extend(iter.fresh_pass_prefix(cut));
    }
    res
}

/// The samples at positions `[from, to)` of `pieces` (in order).
fn positions(pieces: &[(u64, u64)], from: u64, to: u64) -> Vec<(u64, u64)> {
    let mut res = Vec::new();
    let mut at = 0;
    for &(start, end) in pieces {
        if at >= to {
            break;
        }
        let n = end - start;
        let (lo, hi) = (from.max(at), to.min(at + n));
        if lo < hi {
            res.push((start + (lo - at), start + (hi - at)));
        }
        at += n;
    }
    res
}

/// Share `j` of `of` of the samples of `pieces` (in order): the samples at positions
/// `[len * j / of, len * (j + 1) / of)`.
fn share(pieces: &[(u64, u64)], j: u64, of: u64) -> Vec<(u64, u64)> {
    let len: u64 = pieces.iter().map(|(s, e)| e - s).sum();
    let cut = |k: u64| (u128::from(len) * u128::from(k) / u128::from(of)) as u64;
    positions(pieces, cut(j), cut(j + 1))
}

/// The static shape of every leaf under `tree`.
fn leaf_shapes(tree: &MixTree, shape: LeafShape, out: &mut [LeafShape]) {
    match tree {
        MixTree::Leaf(i) => out[*i] = shape,
        MixTree::Repeat { repeats: None, inner } => leaf_shapes(inner, shape, out),
        MixTree::Repeat { repeats: Some(r), inner } => {
            leaf_shapes(inner, LeafShape { repeats: Some(*r), bounded: true }, out);
        }
        MixTree::Blend { children, .. } => {
            for child in children {
                let bounded = !matches!(child, MixTree::Repeat { repeats: None, .. });
                leaf_shapes(child, LeafShape { bounded, ..shape }, out);
            }
        }
        MixTree::Concat(children) => {
            for child in children {
                leaf_shapes(child, shape, out);
            }
        }
    }
}

fn tree_mismatch(state: &StageState) -> Error {
    Error::BadState {
        reason: format!(
            "the saved state's {} does not fit the plan's combination of its datasets",
            state.stage_name()
        ),
    }
}

/// Collects what an old worker's state holds: leaf iterations, buffered keys, pending calls.
/// `tree` is the plan's node at this stage (`None` above it does not matter: outer stages keep
/// the node of the combined leaves).
fn walk(
    state: &StageState,
    tree: Option<&MixTree>,
    exhausted: bool,
    path: &mut Vec<usize>,
    found: &mut Found,
) -> Result<()> {
    let pending = |call: &Option<PendingCall>, found: &mut Found, path: &[usize]| {
        if let Some(call) = call {
            if call.emitted == 0 {
                found.keys.extend(call.inputs.iter().cloned());
            } else {
                found.pending.push((path.to_vec(), call.clone()));
            }
        }
    };
    let inner = |inner: &StageState, tree, found: &mut Found, path: &mut Vec<usize>| {
        path.push(0);
        let res = walk(inner, tree, exhausted, path, found);
        path.pop();
        res
    };
    match state {
        StageState::Leaf { leaf } => {
            let Some(MixTree::Leaf(i)) = tree else { return Err(tree_mismatch(state)) };
            found.leaves[*i] = Some(leaf.clone());
            found.exhausted[*i] = exhausted;
        }
        StageState::Repeat { repetition, index, dealt, inner: stage } => match tree {
            Some(MixTree::Repeat { repeats, inner: t }) => {
                if repeats.is_some() {
                    let MixTree::Leaf(i) = **t else { return Err(tree_mismatch(state)) };
                    found.progress[i] =
                        Progress { repetition: *repetition, index: *index, dealt: *dealt };
                }
                inner(stage, Some(t), found, path)?;
            }
            // A repetition the plan does not have (of a validation loader that repeats).
            _ => inner(stage, tree, found, path)?,
        },
        StageState::Blend { exhausted: done, children, .. } => {
            let Some(MixTree::Blend { children: trees, .. }) = tree else {
                return Err(tree_mismatch(state));
            };
            if children.len() != trees.len() || done.len() != trees.len() {
                return Err(tree_mismatch(state));
            }
            for (i, (child, t)) in children.iter().zip(trees).enumerate() {
                path.push(i);
                walk(child, Some(t), exhausted || done[i], path, found)?;
                path.pop();
            }
        }
        StageState::Concat { children, .. } => {
            let Some(MixTree::Concat(trees)) = tree else { return Err(tree_mismatch(state)) };
            if children.len() != trees.len() {
                return Err(tree_mismatch(state));
            }
            for (i, (child, t)) in children.iter().zip(trees).enumerate() {
                path.push(i);
                walk(child, Some(t), exhausted, path, found)?;
                path.pop();
            }
        }
        StageState::ShuffleBuffer { restore_keys, inner: stage, .. } => {
            found.keys.extend(restore_keys.iter().cloned());
            inner(stage, tree, found, path)?;
        }
        StageState::Packing { reading, pre_packed, pending: call, inner: stage, .. } => {
            found.keys.extend(reading.iter().chain(pre_packed).cloned());
            pending(call, found, path);
            inner(stage, tree, found, path)?;
        }
        StageState::GroupBatch { buckets, inner: stage, .. } => {
            found.keys.extend(buckets.iter().flat_map(|b| b.restore_keys.iter().cloned()));
            inner(stage, tree, found, path)?;
        }
        StageState::Map { pending: call, inner: stage, .. }
        | StageState::Batch { pending: call, inner: stage, .. } => {
            pending(call, found, path);
            inner(stage, tree, found, path)?;
        }
        StageState::Epochize { inner: stage, .. }
        | StageState::Limit { inner: stage, .. }
        | StageState::Worker { inner: stage, .. } => inner(stage, tree, found, path)?,
    }
    Ok(())
}

/// The samples a restore key names, as (leaf, global sample index): one for a sample, several
/// for a batch or a pack (nested keys).
fn key_samples(parts: &[KeyPart], tree: &MixTree, out: &mut Vec<(usize, u64)>) -> Result<()> {
    let bad = || Error::BadState {
        reason: format!(
            "restore key {} does not name samples of the plan",
            RestoreKey::from_parts(parts.to_vec())
        ),
    };
    let mut tree = unrepeat(tree);
    let mut i = 0;
    while i < parts.len() {
        match &parts[i] {
            KeyPart::Name(name) if name == BLEND || name == CONCAT => {
                let Some(KeyPart::Index(child)) = parts.get(i + 1) else { return Err(bad()) };
                let (MixTree::Blend { children, .. } | MixTree::Concat(children)) = tree else {
                    return Err(bad());
                };
                let child = usize::try_from(*child).ok().and_then(|c| children.get(c));
                tree = unrepeat(child.ok_or_else(bad)?);
                i += 2;
            }
            KeyPart::Name(name) if name == energon_reader::RESTORE_KEY_KIND => {
                let (Some(KeyPart::Index(index)), MixTree::Leaf(leaf)) = (parts.get(i + 1), tree)
                else {
                    return Err(bad());
                };
                out.push((*leaf, *index));
                return Ok(());
            }
            KeyPart::Key(nested) => {
                key_samples(nested.parts(), tree, out)?;
                i += 1;
            }
            KeyPart::Name(_) | KeyPart::Index(_) => i += 1,
        }
    }
    Ok(())
}

fn unrepeat(mut tree: &MixTree) -> &MixTree {
    while let MixTree::Repeat { inner, .. } = tree {
        tree = inner;
    }
    tree
}

/// Installs the shares of every leaf in a new worker's fresh state.
fn install(
    state: &mut StageState,
    tree: Option<&MixTree>,
    shares: &[Vec<(u64, u64)>],
    shapes: &[LeafShape],
    repeated: bool,
) -> Result<()> {
    match state {
        StageState::Leaf { leaf } => {
            let Some(MixTree::Leaf(i)) = tree else { return Err(tree_mismatch(state)) };
            let share = &shares[*i];
            // Under a repetition an empty share leaves the leaf as it is (repeated forever: its
            // next pass is its own; a number of times: the `Repeat` node above decides).
            if !share.is_empty() || !repeated {
                leaf.ranges = Some(share.clone());
            }
        }
        StageState::Repeat { repetition, dealt, inner, .. } => match tree {
            Some(MixTree::Repeat { repeats, inner: t }) => match repeats {
                None => install(inner, Some(t), shares, shapes, true)?,
                Some(_) => {
                    let MixTree::Leaf(i) = **t else { return Err(tree_mismatch(state)) };
                    let times = shapes[i].repeats.map_or(1, |r| r.ceil() as u64);
                    // The share is the last repetition of this pass, read whole (not cut where
                    // this worker would cut a fraction); nothing left: all done.
                    *dealt = !shares[i].is_empty();
                    *repetition = if *dealt { times - 1 } else { times };
                    install(inner, Some(t), shares, shapes, true)?;
                }
            },
            _ => install(inner, tree, shares, shapes, repeated)?,
        },
        StageState::Blend { children, .. } => {
            let Some(MixTree::Blend { children: trees, .. }) = tree else {
                return Err(tree_mismatch(state));
            };
            // A child's own repetition (if any) decides; a child without one ends its pass
            // with its share, even an empty one.
            for (child, t) in children.iter_mut().zip(trees) {
                install(child, Some(t), shares, shapes, false)?;
            }
        }
        StageState::Concat { children, .. } => {
            let Some(MixTree::Concat(trees)) = tree else { return Err(tree_mismatch(state)) };
            for (child, t) in children.iter_mut().zip(trees) {
                install(child, Some(t), shares, shapes, false)?;
            }
        }
        StageState::Map { inner, .. }
        | StageState::Batch { inner, .. }
        | StageState::Packing { inner, .. }
        | StageState::GroupBatch { inner, .. }
        | StageState::ShuffleBuffer { inner, .. }
        | StageState::Epochize { inner, .. }
        | StageState::Limit { inner, .. }
        | StageState::Worker { inner, .. } => install(inner, tree, shares, shapes, repeated)?,
    }
    Ok(())
}

/// Sets the pending call of the stage at `path` (child positions from the worker's stage).
fn set_pending(state: &mut StageState, path: &[usize], call: PendingCall) -> Result<()> {
    let Some((&first, rest)) = path.split_first() else {
        return match state {
            StageState::Map { pending, .. }
            | StageState::Batch { pending, .. }
            | StageState::Packing { pending, .. } => {
                *pending = Some(call);
                Ok(())
            }
            other => Err(tree_mismatch(other)),
        };
    };
    let child = state.children_mut().get_mut(first);
    let Some(child) = child else {
        return Err(Error::BadState {
            reason: "a saved generator call's stage is not in the new pipeline".to_owned(),
        });
    };
    set_pending(child, rest, call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cut_the_pieces_into_equal_counts_in_order() {
        let pieces = [(10, 13), (0, 1), (20, 26)];
        let shares: Vec<_> = (0..3).map(|j| share(&pieces, j, 3)).collect();
        assert_eq!(shares, [vec![(10, 13)], vec![(0, 1), (20, 22)], vec![(22, 26)]]);
        assert_eq!(share(&pieces, 0, 1), pieces);
        assert_eq!(share(&[], 2, 4), []);
        // More shares than samples: some are empty, none is lost.
        let many: Vec<_> = (0..5).flat_map(|j| share(&[(7, 9)], j, 5)).collect();
        assert_eq!(many, [(7, 8), (8, 9)]);
    }

    #[test]
    fn keys_name_their_leaf_through_blends_and_batches() {
        let tree = MixTree::Repeat {
            repeats: None,
            inner: Box::new(MixTree::Blend {
                weights: vec![1.0, 1.0],
                children: vec![
                    MixTree::Leaf(0),
                    MixTree::Repeat { repeats: Some(2.0), inner: Box::new(MixTree::Leaf(1)) },
                ],
            }),
        };
        let mut a = RestoreKey::leaf(5);
        a.prepend(BLEND, 1);
        a.prepend("MapDataset", 3);
        let mut b = RestoreKey::leaf(9);
        b.prepend(BLEND, 0);
        let batch = RestoreKey::batch("BatchDataset", 0, [&a, &b]);
        let mut out = Vec::new();
        key_samples(batch.parts(), &tree, &mut out).unwrap();
        assert_eq!(out, [(1, 5), (0, 9)]);
        let mut bad = RestoreKey::leaf(1);
        bad.prepend(BLEND, 7);
        assert!(key_samples(bad.parts(), &tree, &mut out).is_err());
        assert!(key_samples(RestoreKey::leaf(1).parts(), &tree, &mut out).is_err());
    }
}
