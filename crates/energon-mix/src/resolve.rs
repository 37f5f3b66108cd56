//! Resolution: from a metadataset tree to the flat list of leaf datasets one split reads.
//!
//! [`Metadataset::load`] reads a metadataset file and every nested file it references, checks
//! every path of every split (as the reference's `post_initialize` does) and detects cycles
//! between files and chains of files nested deeper than [`MAX_NESTING`] levels. [`Metadataset::resolve`] then walks one split and returns a [`ResolvedSplit`]:
//! the leaves in tree order with their effective settings, computed as the reference's
//! `get_datasets` computes them:
//!
//! - `split_part`: a node's own value overrides the inherited one (the requested split at the
//!   top); in a join, a joined dataset's own value, then the join's, then the inherited one.
//! - `subflavors`: the node's own mapping is the base and values from outer levels override it.
//! - `shuffle_over_epochs_multiplier`: composed outer to inner: `null` wins, then `-1`, else the
//!   product.
//! - weights: each blend item's weight divided by the sum of its level, multiplied into the leaves
//!   below it, in doubles, in the reference's order of operations.
//! - repetitions: multiplied down the tree; an integer stays an integer.
//! - subsets: percentages merged into the parent's range; absolute ranges only on a leaf.
//!
//! Paths are resolved against the folder of the file that names them and normalized lexically.

mod load;
#[cfg(test)]
mod tests;
mod traverse;
mod tree;

use std::{
    collections::BTreeMap,
    path::{Component, Path, PathBuf},
    sync::Arc,
};

use energon_dist::DatasetSubset;
use energon_index::storage;
use serde_json::{Map, Value};

use crate::{
    error::{Error, Result},
    grammar::{Joiner, MetadatasetFile, Nonmatch, Repetitions},
};

pub use self::{load::AuxSource, traverse::traverse};

/// How many metadataset files one chain of nested references may hold, the root included.
/// Loading and resolving recurse once per level; the bound keeps them far from the end of the
/// stack.
pub const MAX_NESTING: usize = 100;

/// How the leaves of a split are combined (the reference's `DatasetBlendMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlendMode {
    /// A single dataset or join: no weights, no repetitions.
    None,
    /// `blend`: leaves sampled by weight, each repeated forever.
    DatasetWeight,
    /// `blend_epochized`: each leaf contributes its repetitions per epoch.
    SampleRepetitions,
}

/// The leaves of one split.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSplit {
    /// How they combine.
    pub mode: BlendMode,
    /// The leaves in tree order (which is also the order of their rotation offsets).
    pub leaves: Vec<ResolvedLeaf>,
}

/// What a leaf reads.
#[derive(Debug, Clone, PartialEq)]
pub enum LeafKind {
    /// A prepared WebDataset folder.
    WebDataset,
    /// A JSONL file (its split part is ignored: the whole file).
    Jsonl,
    /// A join of WebDatasets, read through a join index.
    Joined(JoinSpec),
}

/// One dataset a split reads, with its effective settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedLeaf {
    /// The dataset folder, the JSONL file, or the primary dataset of a join.
    pub path: PathBuf,
    /// What kind of dataset it is.
    pub kind: LeafKind,
    /// The split part to read.
    pub split_part: String,
    /// `dataset_config:` (file name inside `.nv-meta/`; `None` for `dataset.yaml`).
    pub dataset_config: Option<String>,
    /// `split_config:` (file name inside `.nv-meta/`; `None` for `split.yaml`).
    pub split_config: Option<String>,
    /// The normalized blend weight ([`BlendMode::DatasetWeight`] only), a double as the
    /// reference keeps it until the blend rounds it to float32.
    pub weight: Option<f64>,
    /// The repetitions per epoch ([`BlendMode::SampleRepetitions`] only).
    pub repetitions: Option<Repetitions>,
    /// The metadataset's subflavors for this leaf; the dataset's own `dataset.yaml` subflavors
    /// are updated with these (see [`ResolvedLeaf::sample_subflavors`]).
    pub subflavors: Option<Map<String, Value>>,
    /// The leaf's `shuffle_over_epochs`: `None` for no shuffling, `-1` for drawing slices with
    /// replacement, else the number of epochs a slice order spans.
    pub shuffle_over_epochs: Option<i64>,
    /// The part of the leaf's samples to read.
    pub subset: Option<DatasetSubset>,
    /// Named auxiliary sources for cookers, in file order.
    pub aux: Vec<(String, AuxSource)>,
    /// The metadataset file and YAML path of the node that made this leaf.
    pub origin: Origin,
}

/// Where in which file a leaf (or setting) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The metadataset file.
    pub file: PathBuf,
    /// The YAML path of the node.
    pub yaml_path: String,
}

/// A join leaf: the datasets joined and how.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinSpec {
    /// The metadataset file that holds the join; its join indexes live in `<file>.cache/`.
    pub metadataset: PathBuf,
    /// The joined datasets, the primary first.
    pub sources: Vec<JoinSourceSpec>,
    /// Whether the sources are named (the joiner gets keyword arguments).
    pub named: bool,
    /// The class or function that combines the samples.
    pub joiner: Joiner,
}

/// One dataset of a join.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinSourceSpec {
    /// The name when the join is a mapping.
    pub name: Option<String>,
    /// The prepared WebDataset folder.
    pub path: PathBuf,
    /// The split part read from it.
    pub split_part: String,
    /// `split_config:` (`None` for `split.yaml`).
    pub split_config: Option<String>,
    /// `dataset_config:` (`None` for `dataset.yaml`).
    pub dataset_config: Option<String>,
    /// The subflavors of this dataset's samples (metadataset level).
    pub subflavors: Option<Map<String, Value>>,
    /// What happens to a primary sample this dataset lacks.
    pub nonmatch: Nonmatch,
}

/// The outermost settings a resolution starts from (the loader's arguments).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResolveOptions {
    /// `shuffle_over_epochs_multiplier` of `get_train_dataset` (default 1; `None` for no
    /// shuffling).
    pub shuffle_over_epochs_multiplier: Option<i64>,
    /// Subflavors for every leaf (outermost, so they override the metadataset's).
    pub subflavors: Option<Map<String, Value>>,
}

impl ResolveOptions {
    /// With `shuffle_over_epochs_multiplier` set.
    pub fn shuffle_over_epochs_multiplier(mut self, multiplier: Option<i64>) -> Self {
        self.shuffle_over_epochs_multiplier = multiplier;
        self
    }
}

impl Default for ResolveOptions {
    fn default() -> Self {
        ResolveOptions { shuffle_over_epochs_multiplier: Some(1), subflavors: None }
    }
}

impl ResolvedLeaf {
    /// The subflavors the leaf's samples carry: the dataset's own (from `dataset.yaml`), updated
    /// with the metadataset's (the reference's `dataset.subflavors.update(subflavors)`).
    pub fn sample_subflavors(
        &self,
        dataset_yaml: Option<&Map<String, Value>>,
    ) -> Map<String, Value> {
        let mut res = dataset_yaml.cloned().unwrap_or_default();
        if let Some(own) = &self.subflavors {
            for (key, value) in own {
                res.insert(key.clone(), value.clone());
            }
        }
        res
    }
}

/// A loaded metadataset: the root file and every file nested in it, checked.
#[derive(Debug, Clone)]
pub struct Metadataset {
    root: Arc<MetadatasetFile>,
    files: FileMap,
}

impl Metadataset {
    /// Loads the metadataset at `path` and every nested metadataset file it references.
    ///
    /// As the reference does on loading, every split of every file is checked: the grammar, that
    /// every `path` names a prepared dataset, JSONL file or metadataset of the right kind, that
    /// `aux` entries name prepared datasets or folders; and cycles between files are errors.
    pub fn load(path: &Path) -> Result<Self> {
        load::load(&absolute(path))
    }

    /// The root file (absolute, normalized).
    pub fn path(&self) -> &Path {
        &self.root.path
    }

    /// The parsed root file.
    pub fn file(&self) -> &MetadatasetFile {
        &self.root
    }

    /// The names of the root file's splits, in file order.
    pub fn split_names(&self) -> impl Iterator<Item = &str> {
        self.root.splits.iter().map(|(name, _)| name.as_str())
    }

    /// Resolves split `split_part` into its leaves (see the [module docs](self)).
    pub fn resolve(&self, split_part: &str, options: &ResolveOptions) -> Result<ResolvedSplit> {
        tree::resolve(self, split_part, options)
    }
}

/// A leaf as [`traverse`] lists it (the reference's `TraversedDatasetReference`).
#[derive(Debug, Clone, PartialEq)]
pub struct TraversedLeaf {
    /// The dataset folder or JSONL file.
    pub path: PathBuf,
    /// The split part read from it.
    pub split_part: String,
    /// Auxiliary sources by name: dataset or folder paths.
    pub aux: Vec<(String, PathBuf)>,
    /// The effective metadataset subflavors.
    pub subflavors: Map<String, Value>,
}

/// Resolves `path` for split `split_part`, whatever it is: a metadataset (see
/// [`Metadataset::resolve`]), or a single prepared dataset or JSONL file (one leaf, as the
/// reference's `load_dataset` treats a plain dataset path).
pub fn resolve_path(
    path: &Path,
    split_part: &str,
    options: &ResolveOptions,
) -> Result<ResolvedSplit> {
    tree::resolve_path(&absolute(path), split_part, options)
}

/// `path` made absolute (against the current folder) and normalized lexically; a remote URL in
/// its normal form.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    if storage::is_remote(path) {
        return storage::normalize(path).unwrap_or_else(|_| path.to_owned());
    }
    if path.is_absolute() {
        normalize(path)
    } else {
        let cwd = std::env::current_dir().unwrap_or_default();
        normalize(&cwd.join(path))
    }
}

/// Resolves `.` and `..` components without touching the file system (`..` above the root stays
/// at the root), as the reference's `EPath` does.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut res = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let at_root = !res.pop() || res.as_os_str().is_empty();
                if at_root && path.is_absolute() {
                    res = PathBuf::from(Component::RootDir.as_os_str());
                }
            }
            other => res.push(other.as_os_str()),
        }
    }
    res
}

/// Resolves `written` (a path from a metadataset file) against `base_dir`: an object-store URL
/// (`s3://`, `gs://`, `az://`, `msc://`) stands for itself, a relative path below a remote
/// metadataset is a URL too; URLs of other schemes are rejected.
pub(crate) fn resolve_written(base_dir: &Path, written: &str) -> Result<PathBuf, String> {
    let remote = |path: &Path| storage::normalize(path).map_err(|e| e.to_string());
    if storage::is_remote(Path::new(written)) {
        return remote(Path::new(written));
    }
    if storage::is_remote(base_dir) && !Path::new(written).is_absolute() {
        return remote(&base_dir.join(written));
    }
    if let Some((scheme, _)) = written.split_once("://")
        && !scheme.is_empty()
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    {
        return Err(format!(
            "{scheme}:// paths are not supported (object stores: s3://, gs://, az://, msc://; \
             dataset versions: dss://)"
        ));
    }
    Ok(normalize(&base_dir.join(written)))
}

/// The folder of a metadataset file.
pub(crate) fn folder_of(file: &Path) -> &Path {
    file.parent().unwrap_or_else(|| Path::new("/"))
}

/// Every loaded file, by its normalized absolute path.
type FileMap = BTreeMap<PathBuf, Arc<MetadatasetFile>>;

impl Metadataset {
    /// A nested file loaded by [`Metadataset::load`] (its references were checked there).
    pub(crate) fn nested(&self, path: &Path, origin: &Origin) -> Result<&Arc<MetadatasetFile>> {
        self.files.get(path).ok_or_else(|| Error::BadPath {
            file: origin.file.clone(),
            yaml_path: origin.yaml_path.clone(),
            path: path.to_owned(),
            reason: "the nested metadataset changed since it was loaded".to_owned(),
        })
    }
}
