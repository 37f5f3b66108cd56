//! Loaders over metadatasets: energon-mix's combining stages (repetition, weighted and epochized
//! blends, concatenation) inside the per-worker pipelines.
//!
//! Each leaf of the plan becomes a leaf pipeline of this crate (slice order, read, load, cook for
//! crude leaves); energon-mix combines them per worker exactly as the reference's
//! `build_train_datasets` / `build_val_datasets` do, and the stages after the blend (shuffle
//! buffer, encode, batch) and the loader are this crate's, as for a single dataset.

use std::sync::Arc;

use energon_dist::WorkerConfig;
use energon_mix::{LeafData, LeafSample, MixPlan, MixTree};
use energon_reader::{Decoder, FileStore, WebdatasetFileStore};

use crate::{
    apply::Apply,
    blend::{Blend, Concat},
    builder::{BoxStage, Common, MapFn, fingerprint, load_fn},
    checkpoint::PipelineConfig,
    context::StageEnv,
    encoder::{AuxStore, Cooker, DefaultTaskEncoder, TaskEncoder},
    error::{Error, Result},
    loader::Loader,
    pipeline::{self, Cooking},
    policy::FailureStats,
    repeat::Repeat,
    source::LeafSource,
    stage::Keyed,
};

/// The stages of `tree` over the leaf pipelines of one worker (each leaf taken once, in tree
/// order); every blend draws from a stream of its own, seeded with the worker seed.
pub(crate) fn combine<T: Send + 'static>(
    tree: &MixTree,
    leaves: &mut [Option<BoxStage<T>>],
    worker_config: &WorkerConfig,
    worker: usize,
) -> Result<BoxStage<T>> {
    let mut children = |children: &[MixTree]| -> Result<Vec<BoxStage<T>>> {
        children.iter().map(|child| combine(child, leaves, worker_config, worker)).collect()
    };
    Ok(match tree {
        MixTree::Leaf(i) => leaves.get_mut(*i).and_then(Option::take).ok_or_else(|| {
            Error::BadState { reason: format!("leaf {i} of the plan is not there or used twice") }
        })?,
        MixTree::Repeat { repeats: None, inner } => {
            Box::new(Repeat::forever(combine(inner, leaves, worker_config, worker)?, worker))
        }
        MixTree::Repeat { repeats: Some(repeats), inner } => Box::new(Repeat::times(
            combine(inner, leaves, worker_config, worker)?,
            *repeats,
            worker,
        )?),
        MixTree::Blend { weights, children: trees } => Box::new(Blend::new(
            children(trees)?,
            weights.clone(),
            worker_config.worker_rng(worker)?,
        )?),
        MixTree::Concat(trees) => Box::new(Concat::new(children(trees)?)?),
    })
}

/// Builds the loader of a metadataset split from its [`MixPlan`] (the reference's
/// `get_train_dataset` / `get_val_dataset` on a metadataset, then `get_savable_loader`):
///
/// 1. per leaf: the worker's slices in the leaf order, each sample read and turned into a `T`
///    by `load`, then, for crude leaves (JSONL files, crude WebDatasets), cooked by the task
///    encoder's first cooker matching the leaf's subflavors, with the leaf's auxiliary sources;
/// 2. the leaves combined as the plan's blend mode says (repetition, blend, concatenation);
/// 3. training only: the shuffle buffer, if `shuffle_buffer_size > 1`;
/// 4. to 7. the task encoder's stages, batching, virtual epochs or limit, as
///    [`LoaderBuilder`](crate::LoaderBuilder) has them.
pub struct MixLoaderBuilder<T, E = DefaultTaskEncoder<T>> {
    plan: Arc<MixPlan>,
    leaves: Vec<MixLeafLoad<T>>,
    encoder: Arc<E>,
    aux_decoder: Option<Decoder>,
    common: Common,
}

/// How one leaf of a plan turns what it reads into items: its loading function and, for a
/// crude leaf, the subflavors that choose its cooker (or the cooker itself).
pub struct MixLeafLoad<T> {
    load: MapFn<LeafSample, T>,
    subflavors: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
    cooker: Option<Cooker<T>>,
}

impl<T> Clone for MixLeafLoad<T> {
    fn clone(&self) -> Self {
        MixLeafLoad {
            load: Arc::clone(&self.load),
            subflavors: self.subflavors.clone(),
            cooker: self.cooker.clone(),
        }
    }
}

impl<T> MixLeafLoad<T> {
    /// A leaf loading its samples (or joined samples) with `load` (`Ok(None)` skips one); a crude
    /// leaf's cooker is the task encoder's first one matching the leaf's subflavors as the
    /// metadataset gives them.
    pub fn new<L>(load: L) -> Self
    where
        L: Fn(LeafSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        MixLeafLoad { load: Arc::new(load), subflavors: None, cooker: None }
    }

    /// The subflavors that choose the cooker of a crude leaf (the reference's: the dataset's own,
    /// updated with the metadataset's).
    pub fn subflavors(mut self, subflavors: serde_json::Map<String, serde_json::Value>) -> Self {
        self.subflavors = Some(Arc::new(subflavors));
        self
    }

    /// Cooks a crude leaf's samples with `cooker` instead of the task encoder's (a caller that
    /// chose the cooker itself).
    pub fn cooker(mut self, cooker: Cooker<T>) -> Self {
        self.cooker = Some(cooker);
        self
    }
}

impl<T> std::fmt::Debug for MixLeafLoad<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixLeafLoad")
            .field("subflavors", &self.subflavors)
            .field("cooker", &self.cooker)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> MixLoaderBuilder<T> {
    /// A loader over `plan`, turning each sample (or joined sample) of every leaf into a `T`
    /// with `load` (`Ok(None)` skips the sample).
    pub fn new<L>(plan: MixPlan, load: L) -> Self
    where
        L: Fn(LeafSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        let leaf = MixLeafLoad::new(load);
        let leaves = plan
            .leaves
            .iter()
            .map(|planned| match &planned.leaf.subflavors {
                Some(subflavors) => leaf.clone().subflavors(subflavors.clone()),
                None => leaf.clone(),
            })
            .collect();
        MixLoaderBuilder::with_leaves(plan, leaves)
    }

    /// A loader over `plan` with a way to items for each of its leaves, in the plan's order
    /// (fails later, when building, unless there is one per leaf).
    pub fn with_leaves(plan: MixPlan, leaves: Vec<MixLeafLoad<T>>) -> Self {
        let mut common = Common::default();
        common.settings.training = plan.options.training;
        MixLoaderBuilder {
            plan: Arc::new(plan),
            leaves,
            encoder: Arc::new(DefaultTaskEncoder::default()),
            aux_decoder: Some(Decoder::default()),
            common,
        }
    }

    /// Cooks the samples of every crude leaf with `cook` after `load` (a catch-all cooker of the
    /// default task encoder).
    pub fn cook<F>(mut self, cook: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        let cooker = Cooker::of_fn(cook);
        let encoder = Arc::make_mut(&mut self.encoder);
        *encoder = encoder.clone().with_cookers(vec![cooker]);
        self
    }

    /// Sets the per-sample encoding of the default task encoder (identity by default).
    pub fn encode<F>(mut self, encode: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        let encoder = Arc::make_mut(&mut self.encoder);
        *encoder = encoder.clone().encode_with(encode);
        self
    }
}

impl<T: Send + 'static, E: TaskEncoder<Sample = T>> MixLoaderBuilder<T, E> {
    /// The same loader with another task encoder.
    pub fn task_encoder<E2: TaskEncoder<Sample = T>>(self, encoder: E2) -> MixLoaderBuilder<T, E2> {
        MixLoaderBuilder {
            plan: self.plan,
            leaves: self.leaves,
            encoder: Arc::new(encoder),
            aux_decoder: self.aux_decoder,
            common: self.common,
        }
    }

    /// How files read from auxiliary sources are decoded (default: the default decoder; `None`
    /// keeps raw bytes).
    pub fn aux_decoder(mut self, decoder: Option<Decoder>) -> Self {
        self.aux_decoder = decoder;
        self
    }

    crate::builder::common_setters!();

    /// The plan.
    pub fn plan(&self) -> &MixPlan {
        &self.plan
    }

    /// The configuration a checkpoint of this loader records (and a restore compares).
    pub fn config(&self) -> PipelineConfig {
        let plan = &self.plan;
        let mut config = self.common.config(&plan.worker_config, &*self.encoder);
        config.insert("dataset.kind", "metadataset");
        config.insert("dataset.mode", format!("{:?}", plan.mode));
        config.insert("dataset.repeat", plan.options.repeat);
        config.insert(
            "dataset.max_samples_per_sequence",
            format!("{:?}", plan.options.max_samples_per_sequence),
        );
        for (i, leaf) in plan.leaves.iter().enumerate() {
            config.insert(format!("_leaf.{i}.path"), leaf.leaf.path.display());
            config.insert(format!("leaf.{i}.split_part"), &leaf.split_part);
            let shards = match &leaf.data {
                LeafData::Dataset(dataset) => {
                    fingerprint(&dataset.shard_names(), &dataset.shard_counts())
                }
                LeafData::Joined(joined) => format!("join of {} rows", joined.n_rows()),
            };
            config.insert(format!("leaf.{i}.shards"), shards);
            config.insert(format!("leaf.{i}.weight"), leaf.blend_weight);
            config.insert(format!("leaf.{i}.repeats"), format!("{:?}", leaf.repeats));
            config.insert(format!("leaf.{i}.subset"), format!("{:?}", leaf.leaf.subset));
            config.insert(format!("leaf.{i}.slices"), format!("{:?}", leaf.leaf_config));
            config.insert(format!("leaf.{i}.crude"), leaf.crude);
            if let Some(subflavors) = &leaf.leaf.subflavors {
                config.insert(
                    format!("leaf.{i}.subflavors"),
                    serde_json::Value::Object(subflavors.clone()),
                );
            }
        }
        config
    }

    /// The cooking of each leaf (`None` for leaves that are not crude).
    fn cookings(&self) -> Result<Vec<Option<Cooking<T>>>> {
        let mut res = Vec::with_capacity(self.plan.leaves.len());
        for (leaf, load) in self.plan.leaves.iter().zip(&self.leaves) {
            if !leaf.crude {
                res.push(None);
                continue;
            }
            let path = leaf.leaf.path.display().to_string();
            let subflavors = load.subflavors.clone();
            let cooker = match &load.cooker {
                Some(cooker) => cooker.clone(),
                None => {
                    pipeline::select_cooker(self.encoder.cookers(), subflavors.as_deref(), &path)?
                }
            };
            let primary = if cooker.needs_primary() {
                let store: Arc<dyn FileStore> =
                    Arc::new(WebdatasetFileStore::open(&leaf.leaf.path)?);
                Some(AuxStore::new("primary", store, self.aux_decoder))
            } else {
                None
            };
            let aux: Vec<AuxStore> = leaf
                .aux_stores()?
                .into_iter()
                .map(|(name, store)| AuxStore::new(name, store, self.aux_decoder))
                .collect();
            res.push(Some(Cooking { cooker, subflavors, aux: aux.into(), primary }));
        }
        Ok(res)
    }

    /// The pipelines of every local worker up to the task encoder's sample stages (encoded,
    /// packed, not batched).
    pub fn build_sample_pipelines(&self) -> Result<Vec<BoxStage<E::Encoded>>> {
        Ok(self.encoded_pipelines(&FailureStats::default())?.into_iter().map(|(s, _)| s).collect())
    }

    fn encoded_pipelines(
        &self,
        stats: &FailureStats,
    ) -> Result<Vec<(BoxStage<E::Encoded>, StageEnv)>> {
        pipeline::check_hooks(&*self.encoder, &self.common.settings)?;
        if self.leaves.len() != self.plan.leaves.len() {
            return Err(Error::InvalidSetting {
                setting: "leaves",
                value: self.leaves.len().to_string(),
                reason: "needs one way to items per leaf of the plan",
            });
        }
        let cfg = self.plan.worker_config;
        let cookings = self.cookings()?;
        let mut res = Vec::with_capacity(cfg.n_local_workers());
        for worker in 0..cfg.n_local_workers() {
            let env = self.common.env(&cfg, worker, stats)?;
            let iters = self.plan.worker_leaves(worker)?;
            let mut leaves = Vec::with_capacity(iters.len());
            for (i, (iter, leaf)) in iters.into_iter().zip(&self.plan.leaves).enumerate() {
                let data = leaf.data.clone();
                let source = LeafSource::new(iter, move |index| Ok(data.read(index)?));
                let load = load_fn(&self.leaves[i].load);
                let mut stage: BoxStage<T> =
                    Box::new(Apply::new(source, "load_sample", load, env.clone()));
                if let Some(cooking) = &cookings[i] {
                    stage = pipeline::cook_stage(&self.encoder, stage, cooking.clone(), &env);
                }
                leaves.push(Some(stage));
            }
            let mix = combine(&self.plan.tree(), &mut leaves, &cfg, worker)?;
            let stage = pipeline::encode_stages(
                &self.encoder,
                mix,
                &self.common.settings,
                &env,
                cfg.worker_rng(worker)?,
            )?;
            res.push((stage, env));
        }
        Ok(res)
    }

    /// Every local worker's whole pipeline of encoded samples, as
    /// [`MixLoaderBuilder::build_samples`] runs them; failures are counted in `stats`.
    pub fn sample_worker_pipelines(
        &self,
        stats: &FailureStats,
    ) -> Result<Vec<BoxStage<E::Encoded>>> {
        self.common.sample_pipelines(&*self.encoder, self.encoded_pipelines(stats)?)
    }

    /// Every local worker's whole pipeline of batches, as [`MixLoaderBuilder::build_batches`]
    /// runs them; failures are counted in `stats`.
    pub fn batch_worker_pipelines(&self, stats: &FailureStats) -> Result<Vec<BoxStage<E::Output>>> {
        self.common.batch_pipelines(&self.encoder, self.encoded_pipelines(stats)?)
    }

    /// The loader of encoded samples (no batching).
    pub fn build_samples(self) -> Result<Loader<Keyed<E::Encoded>>> {
        let stats = FailureStats::default();
        let pipelines = self.sample_worker_pipelines(&stats)?;
        self.common.start(pipelines, &self.plan.worker_config, self.config(), stats, false)
    }

    /// The loader of batches (a batch size, or batching by group).
    pub fn build_batches(self) -> Result<Loader<Keyed<E::Output>>> {
        let stats = FailureStats::default();
        let pipelines = self.batch_worker_pipelines(&stats)?;
        self.common.start(pipelines, &self.plan.worker_config, self.config(), stats, true)
    }
}

impl<T, E> std::fmt::Debug for MixLoaderBuilder<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixLoaderBuilder")
            .field("mode", &self.plan.mode)
            .field("leaves", &self.plan.leaves.len())
            .field("common", &self.common)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use energon_dist::WorkerConfig;
    use energon_mix::{MixOptions, ResolveOptions, resolve_path};

    use super::*;
    use crate::Loaded;

    fn fixture() -> std::path::PathBuf {
        energon_fixtures::ref_small_dir()
    }

    #[test]
    fn a_blend_runs_in_the_loader_with_blend_restore_keys() {
        let mds =
            std::env::temp_dir().join(format!("energon-cook-mix-{}.yaml", std::process::id()));
        std::fs::write(
            &mds,
            format!(
                "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    \
                 blend:\n      - {{weight: 2, path: {0}}}\n      - {{weight: 1, path: \
                 {0}/jsonl/data.jsonl}}\n",
                fixture().display()
            ),
        )
        .unwrap();
        let split = resolve_path(&mds, "train", &ResolveOptions::default());
        std::fs::remove_file(&mds).unwrap();
        let split = split.unwrap();
        let plan = MixPlan::new(split, WorkerConfig::new(0, 1, 2).unwrap(), MixOptions::default())
            .unwrap();
        let builder =
            MixLoaderBuilder::new(plan, |s| Ok(Some(s.key().to_owned()))).cook(|x| Ok(Some(x)));
        // The loader interleaves the workers' pipelines round robin.
        let mut direct = builder.build_sample_pipelines().unwrap();
        let expected: Vec<String> =
            (0..40).map(|i| direct[i % 2].next().unwrap().unwrap().value).collect();
        let loader = builder.build_samples().unwrap();
        let items: Vec<Loaded<Keyed<String>>> = loader.take(40).map(Result::unwrap).collect();
        let keys: Vec<String> = items.iter().map(|i| i.value.value.clone()).collect();
        assert_eq!(keys, expected);
        let key = items[0].value.restore_key.to_string();
        assert!(key.starts_with("('MapDataset', 0, 'BlendDataset', "), "{key}");
        let jsonl = items.iter().find(|i| !i.value.value.starts_with("000")).unwrap();
        let key = jsonl.value.restore_key.to_string();
        assert!(key.contains("'BlendDataset', 1, 'MapDataset', "), "{key}");
        assert!(key.ends_with(&format!("'Webdataset', {})", jsonl.value.value)), "{key}");
    }
}
