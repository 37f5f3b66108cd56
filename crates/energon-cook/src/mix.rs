//! Loaders over metadatasets: energon-mix's combining stages (repetition, weighted and epochized
//! blends, concatenation) inside the per-worker pipelines.
//!
//! Each leaf of the plan becomes a leaf pipeline of this crate (slice order, read, load, cook for
//! crude leaves); energon-mix combines them per worker exactly as the reference's
//! `build_train_datasets` / `build_val_datasets` do, and the stages after the blend (shuffle
//! buffer, encode, batch) and the loader are this crate's, as for a single dataset.

use std::sync::Arc;

use energon_mix::{Combiner, LeafSample, Mix, MixPlan, Source, Tag};

use crate::{
    batch::{Batch, Batcher},
    builder::{BoxStage, MapFn},
    error::{Error, Result},
    loader::{Loader, LoaderConfig},
    map::Map,
    shuffle::ShuffleBuffer,
    source::LeafSource,
    stage::{Keyed, Stage},
};

/// A leaf pipeline as a leaf of energon-mix's stages.
pub struct MixLeaf<T>(BoxStage<T>);

impl<T> std::fmt::Debug for MixLeaf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixLeaf").field("len_worker", &self.0.len_worker()).finish()
    }
}

impl<T> Source for MixLeaf<T> {
    type Item = Keyed<T>;
    type Error = Error;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        self.0.next()
    }

    fn len_worker(&self) -> u64 {
        self.0.len_worker()
    }
}

/// Items from a blend or concatenation carry the child they came from in their restore key
/// (`("BlendDataset", child, ...)`), as in the reference.
impl<T> Tag for Keyed<T> {
    fn tag(mut self, combiner: Combiner, child: usize) -> Self {
        self.restore_key.prepend(combiner.name(), child as u64);
        self
    }
}

impl<T> Stage for Mix<MixLeaf<T>> {
    type Item = Keyed<T>;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        Source::next(self)
    }

    fn len_worker(&self) -> u64 {
        Source::len_worker(self)
    }
}

/// Builds the loader of a metadataset split from its [`MixPlan`] (the reference's
/// `get_train_dataset` / `get_val_dataset` on a metadataset, then `get_loader`):
///
/// 1. per leaf: the worker's slices in the leaf order, each sample read and turned into a `T`
///    by `load`, then `cook` for crude leaves (JSONL files, crude WebDatasets);
/// 2. the leaves combined as the plan's blend mode says (repetition, blend, concatenation);
/// 3. training only: the shuffle buffer, if `shuffle_buffer_size > 1`;
/// 4. `encode` (identity unless set);
/// 5. with a batch size: batches, then `encode_batch` (identity).
pub struct MixLoaderBuilder<T> {
    plan: Arc<MixPlan>,
    load: MapFn<LeafSample, T>,
    cook: Option<MapFn<T, T>>,
    encode: Option<MapFn<T, T>>,
    shuffle_buffer_size: usize,
    batch_size: Option<usize>,
    drop_last: bool,
    prefetch_factor: usize,
}

impl<T: Send + 'static> MixLoaderBuilder<T> {
    /// A loader over `plan`, turning each sample (or joined sample) into a `T` with `load`
    /// (`Ok(None)` skips the sample).
    pub fn new<L>(plan: MixPlan, load: L) -> Self
    where
        L: Fn(LeafSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        MixLoaderBuilder {
            plan: Arc::new(plan),
            load: Arc::new(load),
            cook: None,
            encode: None,
            shuffle_buffer_size: 0,
            batch_size: None,
            drop_last: false,
            prefetch_factor: 2,
        }
    }

    /// Adds a cooking stage after `load` on the crude leaves.
    pub fn cook<F>(mut self, cook: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        self.cook = Some(Arc::new(cook));
        self
    }

    /// Sets the per-sample encoding (identity by default).
    pub fn encode<F>(mut self, encode: F) -> Self
    where
        F: Fn(T) -> Result<Option<T>> + Send + Sync + 'static,
    {
        self.encode = Some(Arc::new(encode));
        self
    }

    /// The shuffle buffer size (training only; sizes 0 and 1 mean no buffer).
    pub fn shuffle_buffer_size(mut self, shuffle_buffer_size: usize) -> Self {
        self.shuffle_buffer_size = shuffle_buffer_size;
        self
    }

    /// The batch size (`None`: no batching, for [`MixLoaderBuilder::build_samples`]).
    pub fn batch_size(mut self, batch_size: Option<usize>) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Whether the last, shorter batch of a pass is dropped.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Items each worker may prepare ahead (default 2).
    pub fn prefetch_factor(mut self, prefetch_factor: usize) -> Self {
        self.prefetch_factor = prefetch_factor;
        self
    }

    /// The plan.
    pub fn plan(&self) -> &MixPlan {
        &self.plan
    }

    /// The pipelines of every local worker up to the encode stage (samples, not batched).
    pub fn build_sample_pipelines(&self) -> Result<Vec<BoxStage<T>>> {
        let cfg = self.plan.worker_config;
        let mut res = Vec::with_capacity(cfg.n_local_workers());
        for worker in 0..cfg.n_local_workers() {
            let mix = self.plan.build_worker(worker, |_, leaf, iter| {
                let data = leaf.data.clone();
                let source = LeafSource::new(iter, move |index| Ok(data.read(index)?));
                let load = Arc::clone(&self.load);
                let mut stage: BoxStage<T> = Box::new(Map::new(source, move |s| load(s)));
                if let (true, Some(cook)) = (leaf.crude, &self.cook) {
                    let cook = Arc::clone(cook);
                    stage = Box::new(Map::new(stage, move |x| cook(x)));
                }
                Ok(MixLeaf(stage))
            })?;
            let mut stage: BoxStage<T> = Box::new(mix);
            if self.plan.options.training && self.shuffle_buffer_size > 1 {
                let rng = cfg.worker_rng(worker)?;
                stage = Box::new(ShuffleBuffer::new(stage, self.shuffle_buffer_size, rng));
            }
            // COMPAT(energon 7.4.1): DefaultTaskEncoder overrides encode_sample (a map stage).
            stage = match &self.encode {
                Some(encode) => {
                    let encode = Arc::clone(encode);
                    Box::new(Map::new(stage, move |x| encode(x)))
                }
                None => Box::new(Map::new(stage, |x| Ok(Some(x)))),
            };
            res.push(stage);
        }
        Ok(res)
    }

    /// The loader of samples (no batching; the batch size must be unset).
    pub fn build_samples(self) -> Result<Loader<Keyed<T>>> {
        if let Some(batch_size) = self.batch_size {
            return Err(Error::InvalidSetting {
                setting: "batch_size",
                value: batch_size.to_string(),
                reason: "a loader of samples has no batch size; use build_batches",
            });
        }
        let pipelines = self
            .build_sample_pipelines()?
            .into_iter()
            .map(|stage| Box::new(stage) as Box<dyn Stage<Item = Keyed<T>>>)
            .collect();
        Loader::new(pipelines, self.loader_config())
    }

    /// The loader of batches (the batch size must be set).
    pub fn build_batches(self) -> Result<Loader<Keyed<Batch<T>>>> {
        let batch_size = self.batch_size.ok_or(Error::InvalidSetting {
            setting: "batch_size",
            value: "None".into(),
            reason: "a loader of batches needs a batch size",
        })?;
        let mut pipelines: Vec<Box<dyn Stage<Item = Keyed<Batch<T>>>>> = Vec::new();
        for stage in self.build_sample_pipelines()? {
            let batches = Batcher::new(stage, batch_size, self.drop_last)?;
            // COMPAT(energon 7.4.1): DefaultTaskEncoder overrides encode_batch (a map stage).
            pipelines.push(Box::new(Map::new(batches, |b| Ok(Some(b)))));
        }
        Loader::new(pipelines, self.loader_config())
    }

    fn loader_config(&self) -> LoaderConfig {
        LoaderConfig {
            num_workers: self.plan.worker_config.num_workers(),
            prefetch_factor: self.prefetch_factor,
        }
    }
}

impl<T> std::fmt::Debug for MixLoaderBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixLoaderBuilder")
            .field("mode", &self.plan.mode)
            .field("leaves", &self.plan.leaves.len())
            .field("shuffle_buffer_size", &self.shuffle_buffer_size)
            .field("batch_size", &self.batch_size)
            .field("drop_last", &self.drop_last)
            .field("prefetch_factor", &self.prefetch_factor)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use energon_dist::WorkerConfig;
    use energon_mix::{MixOptions, ResolveOptions, resolve_path};

    use super::*;
    use crate::Loaded;

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/energon-ref-small")
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
        // The same order as energon-mix's own sample sources, interleaved round robin.
        let mut direct: Vec<_> = (0..2).map(|w| plan.sample_worker(w).unwrap()).collect();
        let expected: Vec<String> = (0..40)
            .map(|i| direct[i % 2].next().unwrap().unwrap().value.key().to_owned())
            .collect();
        let loader = MixLoaderBuilder::new(plan, |s| Ok(Some(s.key().to_owned())))
            .cook(|x| Ok(Some(x)))
            .build_samples()
            .unwrap();
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
