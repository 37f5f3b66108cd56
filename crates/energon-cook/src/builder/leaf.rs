//! The leaves of a plan as pipeline stages: how each leaf loads its samples ([`LeafLoad`]), its
//! cooking for crude leaves, and the combining stages over them ([`combine`]).

use std::sync::Arc;

use energon_dist::WorkerConfig;
use energon_mix::{LeafSample, MixTree, PlannedLeaf};
use energon_reader::{Decoder, FileStore, WebdatasetFileStore};
use serde_json::{Map, Value};

use crate::{
    blend::{Blend, Concat},
    builder::{BoxStage, MapFn},
    encoder::{AuxStore, Cooker, TaskEncoder},
    error::{Error, Result},
    pipeline::{self, Cooking},
    repeat::Repeat,
};

/// How one leaf of a plan turns what it reads into items: its loading function and, for a
/// crude leaf, the subflavors that choose its cooker (or the cooker itself) and auxiliary
/// sources beyond the leaf's own.
pub struct LeafLoad<T> {
    pub(crate) load: MapFn<LeafSample, T>,
    pub(crate) subflavors: Option<Arc<Map<String, Value>>>,
    pub(crate) cooker: Option<Cooker<T>>,
    pub(crate) aux: Vec<(String, Arc<dyn FileStore>)>,
}

impl<T> Clone for LeafLoad<T> {
    fn clone(&self) -> Self {
        LeafLoad {
            load: Arc::clone(&self.load),
            subflavors: self.subflavors.clone(),
            cooker: self.cooker.clone(),
            aux: self.aux.clone(),
        }
    }
}

impl<T> LeafLoad<T> {
    /// A leaf loading its samples (or joined samples) with `load` (`Ok(None)` skips one); a crude
    /// leaf's cooker is the task encoder's first one matching the leaf's subflavors as the
    /// metadataset gives them.
    pub fn new<L>(load: L) -> Self
    where
        L: Fn(LeafSample) -> Result<Option<T>> + Send + Sync + 'static,
    {
        LeafLoad { load: Arc::new(load), subflavors: None, cooker: None, aux: Vec::new() }
    }

    /// The subflavors that choose the cooker of a crude leaf (the reference's: the dataset's own,
    /// updated with the metadataset's).
    pub fn subflavors(mut self, subflavors: Map<String, Value>) -> Self {
        self.subflavors = Some(Arc::new(subflavors));
        self
    }

    /// Cooks a crude leaf's samples with `cooker` instead of the task encoder's (a caller that
    /// chose the cooker itself).
    pub fn cooker(mut self, cooker: Cooker<T>) -> Self {
        self.cooker = Some(cooker);
        self
    }

    /// Adds an auxiliary source for the leaf's cooker, besides the `aux:` of its metadataset
    /// entry.
    pub fn aux(mut self, name: impl Into<String>, store: Arc<dyn FileStore>) -> Self {
        self.aux.push((name.into(), store));
        self
    }

    /// The cooking of `leaf` (`None` unless it is crude): the cooker, the subflavors, and the
    /// auxiliary sources (the leaf's own, then this load's), decoded with `aux_decoder`.
    pub(crate) fn cooking<E: TaskEncoder<Sample = T>>(
        &self,
        leaf: &PlannedLeaf,
        encoder: &E,
        aux_decoder: Option<Decoder>,
    ) -> Result<Option<Cooking<T>>> {
        if !leaf.crude {
            return Ok(None);
        }
        let path = leaf.leaf.path.display().to_string();
        let cooker = match &self.cooker {
            Some(cooker) => cooker.clone(),
            None => pipeline::select_cooker(encoder.cookers(), self.subflavors.as_deref(), &path)?,
        };
        let primary = if cooker.needs_primary() {
            let store: Arc<dyn FileStore> = Arc::new(WebdatasetFileStore::open(&leaf.leaf.path)?);
            Some(AuxStore::new("primary", store, aux_decoder))
        } else {
            None
        };
        let aux: Vec<AuxStore> = leaf
            .aux_stores()?
            .into_iter()
            .chain(self.aux.iter().map(|(name, store)| (name.clone(), Arc::clone(store))))
            .map(|(name, store)| AuxStore::new(name, store, aux_decoder))
            .collect();
        let subflavors = self.subflavors.clone();
        Ok(Some(Cooking { cooker, subflavors, aux: aux.into(), primary }))
    }
}

impl<T> std::fmt::Debug for LeafLoad<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeafLoad")
            .field("subflavors", &self.subflavors)
            .field("cooker", &self.cooker)
            .field("aux", &self.aux.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

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
