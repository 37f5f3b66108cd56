//! Walking one split of a loaded metadataset into its leaves.

use std::path::Path;

use energon_dist::DatasetSubset;
use energon_index::discover::{DatasetKind, classify};
use serde_json::{Map, Value};

use super::{
    BlendMode, JoinSourceSpec, JoinSpec, LeafKind, Metadataset, Origin, ResolveOptions,
    ResolvedLeaf, ResolvedSplit,
    load::{Target, resolve_aux, target_kind, target_path},
    resolve_written,
};
use crate::{
    error::{Error, Result},
    grammar::{DatasetRef, Item, JoinNode, MetadatasetFile, Node, Repetitions, Subset, Version},
};

/// What a node receives from the levels above it (the arguments of the reference's
/// `get_datasets`).
#[derive(Debug, Clone)]
struct Inherited {
    split_part: String,
    subflavors: Option<Map<String, Value>>,
    multiplier: Option<i64>,
    /// The subset, and the node that set it (named if it cannot apply further down).
    subset: Option<(DatasetSubset, Origin)>,
}

type Leaves = (BlendMode, Vec<ResolvedLeaf>);

pub(super) fn resolve(
    mds: &Metadataset,
    split_part: &str,
    options: &ResolveOptions,
) -> Result<ResolvedSplit> {
    let file = &mds.root;
    let node = split_of(file, split_part)?;
    let inherited = Inherited {
        split_part: split_part.to_owned(),
        subflavors: options.subflavors.clone(),
        multiplier: options.shuffle_over_epochs_multiplier,
        subset: None,
    };
    let (mode, leaves) = resolve_node(mds, file, node, &inherited)?;
    Ok(ResolvedSplit { mode, leaves })
}

pub(super) fn resolve_path(
    path: &Path,
    split_part: &str,
    options: &ResolveOptions,
) -> Result<ResolvedSplit> {
    let kind = match classify(path)? {
        DatasetKind::Metadataset => {
            return Metadataset::load(path)?.resolve(split_part, options);
        }
        DatasetKind::WebDataset => LeafKind::WebDataset,
        DatasetKind::Jsonl => LeafKind::Jsonl,
        DatasetKind::Filesystem | DatasetKind::Folder => {
            return Err(Error::Index(energon_index::Error::NotADataset {
                path: path.to_owned(),
                reason: "not a prepared dataset, JSONL file or metadataset".to_owned(),
            }));
        }
    };
    let leaf = ResolvedLeaf {
        path: path.to_owned(),
        kind,
        split_part: split_part.to_owned(),
        dataset_config: None,
        split_config: None,
        weight: None,
        repetitions: None,
        subflavors: options.subflavors.clone(),
        shuffle_over_epochs: options.shuffle_over_epochs_multiplier,
        subset: None,
        aux: Vec::new(),
        origin: Origin { file: path.to_owned(), yaml_path: String::new() },
    };
    Ok(ResolvedSplit { mode: BlendMode::None, leaves: vec![leaf] })
}

pub(super) fn split_of<'a>(file: &'a MetadatasetFile, split_part: &str) -> Result<&'a Node> {
    file.split(split_part).ok_or_else(|| Error::UnknownSplit {
        file: file.path.clone(),
        split: split_part.to_owned(),
        defined: file.splits.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
    })
}

fn resolve_node(
    mds: &Metadataset,
    file: &MetadatasetFile,
    node: &Node,
    inherited: &Inherited,
) -> Result<Leaves> {
    match node {
        Node::Ref(dataset) => resolve_ref(mds, file, dataset, inherited),
        Node::Join(join) => resolve_join(file, join, inherited),
        Node::Blend(blend) => {
            let subset = match blend.version {
                Version::V2 => {
                    own_subset(file, blend.subset, &blend.yaml_path, inherited.subset.clone())?
                }
                // A V1 split passes the subset on unchecked.
                Version::V1 => inherited.subset.clone(),
            };
            let inner = Inherited { subset, ..inherited.clone() };
            // Python's `sum` of the weights, left to right.
            let mut sum_weight: f64 = 0.0;
            for item in &blend.items {
                sum_weight += item.weight;
                if !sum_weight.is_finite() {
                    return Err(Error::BadNode {
                        file: file.path.clone(),
                        yaml_path: format!("{}.weight", item_yaml_path(&item.item)),
                        reason: format!(
                            "weight {} makes the blend's weights sum past the largest double \
                             ({:e}); use smaller weights (only their ratios matter)",
                            item.weight,
                            f64::MAX
                        ),
                    });
                }
            }
            let mut res = Vec::new();
            for item in &blend.items {
                let (mode, leaves) = resolve_item(mds, file, &item.item, &inner)?;
                if mode == BlendMode::SampleRepetitions {
                    return Err(mixed_modes(file, &item.item));
                }
                for mut leaf in leaves {
                    // COMPAT(energon 7.4.1): metadataset_v2.py:MetadatasetBlend.get_datasets
                    // (`leaf * weight / sum`, in this order, in doubles).
                    let below = leaf.weight.unwrap_or(1.0);
                    leaf.weight = Some(below * item.weight / sum_weight);
                    res.push(leaf);
                }
            }
            Ok((BlendMode::DatasetWeight, res))
        }
        Node::BlendEpochized(blend) => {
            let subset =
                own_subset(file, blend.subset, &blend.yaml_path, inherited.subset.clone())?;
            let inner = Inherited { subset, ..inherited.clone() };
            let mut res = Vec::new();
            for item in &blend.items {
                let (mode, leaves) = resolve_item(mds, file, &item.item, &inner)?;
                if mode == BlendMode::DatasetWeight {
                    return Err(mixed_modes(file, &item.item));
                }
                for mut leaf in leaves {
                    let below = leaf.repetitions.unwrap_or(Repetitions::Int(1));
                    let reps = item.repetitions.times(below).ok_or_else(|| Error::BadNode {
                        file: file.path.clone(),
                        yaml_path: format!("{}.repetitions", item_yaml_path(&item.item)),
                        reason: "the product of nested repetitions overflows".to_owned(),
                    })?;
                    leaf.repetitions = Some(reps);
                    res.push(leaf);
                }
            }
            Ok((BlendMode::SampleRepetitions, res))
        }
    }
}

fn resolve_item(
    mds: &Metadataset,
    file: &MetadatasetFile,
    item: &Item,
    inherited: &Inherited,
) -> Result<Leaves> {
    match item {
        Item::Ref(dataset) => resolve_ref(mds, file, dataset, inherited),
        Item::Join(join) => resolve_join(file, join, inherited),
    }
}

fn item_yaml_path(item: &Item) -> &str {
    match item {
        Item::Ref(dataset) => &dataset.yaml_path,
        Item::Join(join) => &join.yaml_path,
    }
}

fn mixed_modes(file: &MetadatasetFile, item: &Item) -> Error {
    Error::BadNode {
        file: file.path.clone(),
        yaml_path: item_yaml_path(item).to_owned(),
        reason: "cannot mix blend and blend_epochized: this item resolves to the other kind of \
                 blend"
            .to_owned(),
    }
}

fn resolve_ref(
    mds: &Metadataset,
    file: &MetadatasetFile,
    dataset: &DatasetRef,
    inherited: &Inherited,
) -> Result<Leaves> {
    let origin = Origin { file: file.path.clone(), yaml_path: dataset.yaml_path.clone() };
    let subflavors = merge_subflavors(dataset.subflavors.as_ref(), inherited.subflavors.as_ref());
    let multiplier =
        compose_multiplier(inherited.multiplier, dataset.shuffle_over_epochs_multiplier)
            .ok_or_else(|| Error::BadNode {
                file: file.path.clone(),
                yaml_path: format!("{}.shuffle_over_epochs_multiplier", dataset.yaml_path),
                reason: "the product of nested multipliers overflows".to_owned(),
            })?;
    let subset = match dataset.version {
        Version::V2 => {
            own_subset(file, dataset.subset, &dataset.yaml_path, inherited.subset.clone())?
        }
        // COMPAT(energon 7.4.1): metadataset.py:DatasetReference.get_datasets passes the subset
        // on as it is.
        Version::V1 => inherited.subset.clone(),
    };
    let split_part = dataset.split_part.clone().unwrap_or_else(|| inherited.split_part.clone());
    let path = target_path(file, dataset)?;
    let kind = match target_kind(file, dataset, &path)? {
        Target::Metadataset => {
            let nested = mds.nested(&path, &origin)?;
            let node = split_of(nested, &split_part)?;
            let inner = Inherited { split_part, subflavors, multiplier, subset };
            return resolve_node(mds, nested, node, &inner);
        }
        Target::WebDataset => LeafKind::WebDataset,
        Target::Jsonl => LeafKind::Jsonl,
    };
    let leaf = ResolvedLeaf {
        path,
        kind,
        split_part,
        dataset_config: dataset.dataset_config.clone(),
        split_config: dataset.split_config.clone(),
        weight: None,
        repetitions: None,
        subflavors,
        shuffle_over_epochs: multiplier,
        subset: subset.map(|(s, _)| s),
        aux: resolve_aux(file, dataset)?,
        origin,
    };
    Ok((BlendMode::None, vec![leaf]))
}

fn resolve_join(file: &MetadatasetFile, join: &JoinNode, inherited: &Inherited) -> Result<Leaves> {
    let subset = own_subset(file, join.subset, &join.yaml_path, inherited.subset.clone())?;
    let join_split = join.split_part.clone().unwrap_or_else(|| inherited.split_part.clone());
    let join_subflavors = merge_subflavors(join.subflavors.as_ref(), inherited.subflavors.as_ref());
    if join.shuffle_over_epochs_multiplier != Some(1)
        || join.sources.iter().any(|s| s.dataset.shuffle_over_epochs_multiplier != Some(1))
    {
        tracing::warn!(
            file = %file.path.display(),
            yaml_path = %join.yaml_path,
            "shuffle_over_epochs_multiplier on a join or a joined dataset has no effect (as in \
             megatron-energon); set it on an enclosing reference"
        );
    }
    let base = super::folder_of(&file.path);
    let mut sources = Vec::with_capacity(join.sources.len());
    for source in &join.sources {
        let path =
            resolve_written(base, &source.dataset.path).map_err(|reason| Error::BadPath {
                file: file.path.clone(),
                yaml_path: format!("{}.path", source.dataset.yaml_path),
                path: source.dataset.path.clone().into(),
                reason,
            })?;
        sources.push(JoinSourceSpec {
            name: source.name.clone(),
            path,
            // COMPAT(energon 7.4.1): join_dataset_loader.py:JoinDatasetLoader._get_joined_meta
            // (a joined dataset's own split part, then the join's, then the inherited one).
            split_part: source.dataset.split_part.clone().unwrap_or_else(|| join_split.clone()),
            split_config: source.dataset.split_config.clone(),
            dataset_config: source.dataset.dataset_config.clone(),
            subflavors: merge_subflavors(
                source.dataset.subflavors.as_ref(),
                join_subflavors.as_ref(),
            ),
            nonmatch: source.nonmatch,
        });
    }
    let primary = &sources[0];
    let leaf = ResolvedLeaf {
        path: primary.path.clone(),
        split_part: primary.split_part.clone(),
        dataset_config: primary.dataset_config.clone(),
        split_config: primary.split_config.clone(),
        kind: LeafKind::Joined(JoinSpec {
            metadataset: file.path.clone(),
            sources,
            named: join.named,
            joiner: join.joiner.clone(),
        }),
        weight: None,
        repetitions: None,
        subflavors: join_subflavors,
        // COMPAT(energon 7.4.1): metadataset_v2.py:MetadatasetJoin.get_datasets passes the
        // inherited multiplier on and ignores its own.
        shuffle_over_epochs: inherited.multiplier,
        subset: subset.map(|(s, _)| s),
        aux: Vec::new(),
        origin: Origin { file: file.path.clone(), yaml_path: join.yaml_path.clone() },
    };
    Ok((BlendMode::None, vec![leaf]))
}

/// `{**own, **outer}`: the node's own subflavors are the base, outer values override them.
pub(super) fn merge_subflavors(
    own: Option<&Map<String, Value>>,
    outer: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    match own {
        None => outer.cloned(),
        Some(own) => {
            let mut res = own.clone();
            for (key, value) in outer.into_iter().flatten() {
                res.insert(key.clone(), value.clone());
            }
            Some(res)
        }
    }
}

/// Composes the inherited multiplier with a node's own: `None` (no shuffling) wins, then `-1`
/// (with replacement), else the product. `None` in the outer option means an overflow.
fn compose_multiplier(outer: Option<i64>, own: Option<i64>) -> Option<Option<i64>> {
    match (outer, own) {
        (None, _) | (_, None) => Some(None),
        (Some(-1), _) | (_, Some(-1)) => Some(Some(-1)),
        (Some(a), Some(b)) => a.checked_mul(b).map(Some),
    }
}

/// A V2 node's subset given its parent's (the reference's `SubsetRatioMixin._get_subset`).
fn own_subset(
    file: &MetadatasetFile,
    own: Option<Subset>,
    yaml_path: &str,
    parent: Option<(DatasetSubset, Origin)>,
) -> Result<Option<(DatasetSubset, Origin)>> {
    let origin = Origin { file: file.path.clone(), yaml_path: format!("{yaml_path}.subset") };
    match (own, parent) {
        (_, Some((parent, parent_origin))) if parent.absolute_range.is_some() => {
            Err(Error::BadNode {
                file: parent_origin.file,
                yaml_path: parent_origin.yaml_path,
                reason: format!(
                    "absolute subset ranges (sample indices) are only allowed for a leaf \
                     dataset (a dataset reference), but this one would be passed on to the node \
                     at {}: {yaml_path}; use percentages here",
                    file.path.display()
                ),
            })
        }
        (Some(own), Some((parent, _))) => Ok(Some((merge_subset(own, &parent), origin))),
        (None, parent) => Ok(parent),
        (Some(own), None) => Ok(Some((as_dataset_subset(own), origin))),
    }
}

fn as_dataset_subset(subset: Subset) -> DatasetSubset {
    match subset {
        Subset::Ratio { start, end } => {
            DatasetSubset { range: Some((start, end)), absolute_range: None }
        }
        Subset::Absolute { start, end } => {
            DatasetSubset { range: Some((0.0, 1.0)), absolute_range: Some((start, end)) }
        }
    }
}

/// The child's range with the parent's ratios applied inside it (the reference's
/// `Subset.merge`): `[c0 + p0 * (c1 - c0), c0 + p1 * (c1 - c0)]`.
fn merge_subset(own: Subset, parent: &DatasetSubset) -> DatasetSubset {
    let mine = as_dataset_subset(own);
    let (Some((p0, p1)), Some((c0, c1))) = (parent.range, mine.range) else {
        return mine;
    };
    let total = c1 - c0;
    DatasetSubset {
        range: Some((c0 + p0 * total, c0 + p1 * total)),
        absolute_range: mine.absolute_range,
    }
}
