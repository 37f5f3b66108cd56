//! The metadataset file grammar: what a metadataset YAML file says, before any path is looked at.
//!
//! [`parse_metadataset`] reads one file strictly, as the reference's typed converter does: unknown
//! keys and values of the wrong type are errors naming the file and the YAML path of the node.
//!
//! ```yaml
//! __module__: megatron.energon
//! __class__: MetadatasetV2
//! splits:
//!   train:
//!     blend:
//!       - weight: 2
//!         path: ./coco
//!       - weight: 1
//!         path: ./laion.yaml        # a nested metadataset
//!   val:
//!     path: ./coco
//! ```
//!
//! Version 1 files (`__class__: Metadataset`, or no class at all) hold
//! `splits: {<name>: {datasets: [{path, weight, ...}]}}` and are read into the same tree (a
//! [`Node::Blend`] of [`Item::Ref`]s), marked [`Version::V1`] where the versions behave differently.

mod parse;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde_json::{Map, Value};

pub use parse::parse_metadataset;

/// The metadataset classes of the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `Metadataset` (also the default when a file names no class).
    V1,
    /// `MetadatasetV2`.
    V2,
}

/// One parsed metadataset file.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadatasetFile {
    /// The file (absolute, `.` and `..` resolved); relative paths inside are resolved against its
    /// folder.
    pub path: PathBuf,
    /// The class the file names.
    pub version: Version,
    /// The splits in file order: name and root node.
    pub splits: Vec<(String, Node)>,
}

impl MetadatasetFile {
    /// The root node of split `name`.
    pub fn split(&self, name: &str) -> Option<&Node> {
        self.splits.iter().find(|(n, _)| n == name).map(|(_, node)| node)
    }
}

/// A node of the tree: what a split (or a nested position) holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `blend:` items sampled by weight (and a V1 split's `datasets:`).
    Blend(BlendNode),
    /// `blend_epochized:` items repeated a number of times per epoch.
    BlendEpochized(EpochizedNode),
    /// `join:` datasets combined sample by sample.
    Join(JoinNode),
    /// A `path:` reference to a dataset or a nested metadataset.
    Ref(DatasetRef),
}

/// A blend by weights.
#[derive(Debug, Clone, PartialEq)]
pub struct BlendNode {
    /// Where the node is in its file.
    pub yaml_path: String,
    /// The items with their weights.
    pub items: Vec<BlendItem>,
    /// `subset:` applied to every leaf below (ratios only).
    pub subset: Option<Subset>,
    /// Which class read it (a V1 `datasets:` list does not check inherited subsets).
    pub version: Version,
}

/// An item of a blend and its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct BlendItem {
    /// `weight:` (default 1.0), positive and finite.
    pub weight: f64,
    /// The blended item.
    pub item: Item,
}

/// A blend by repetitions (`blend_epochized:`).
#[derive(Debug, Clone, PartialEq)]
pub struct EpochizedNode {
    /// Where the node is in its file.
    pub yaml_path: String,
    /// The items with their repetitions.
    pub items: Vec<EpochItem>,
    /// `subset:` applied to every leaf below (ratios only).
    pub subset: Option<Subset>,
}

/// An item of an epochized blend and its repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochItem {
    /// `repetitions:` (default 1).
    pub repetitions: Repetitions,
    /// The blended item.
    pub item: Item,
}

/// What a blend item is.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A dataset or nested metadataset.
    Ref(DatasetRef),
    /// A join.
    Join(JoinNode),
}

/// A number of repetitions: an integer stays an integer through the products of nested blends, a
/// float makes the product a float (as Python's `int * int` and `int * float`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Repetitions {
    /// Whole repetitions.
    Int(u64),
    /// Repetitions with a possible fraction (`0.5`, `2.25`).
    Float(f64),
}

impl Repetitions {
    /// The value as a double.
    pub fn as_f64(self) -> f64 {
        match self {
            Repetitions::Int(n) => n as f64,
            Repetitions::Float(x) => x,
        }
    }

    /// The product `self * inner`, as Python computes it; `None` if an integer product overflows.
    pub fn times(self, inner: Repetitions) -> Option<Repetitions> {
        Some(match (self, inner) {
            (Repetitions::Int(a), Repetitions::Int(b)) => Repetitions::Int(a.checked_mul(b)?),
            (a, b) => Repetitions::Float(a.as_f64() * b.as_f64()),
        })
    }

    /// Whether the value equals 1 (`1` or `1.0`): such a leaf is not wrapped in a repetition.
    pub fn is_one(self) -> bool {
        self.as_f64() == 1.0
    }
}

/// A `path:` reference.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRef {
    /// Where the node is in its file.
    pub yaml_path: String,
    /// `path:` as written (relative to the metadataset's folder, or absolute).
    pub path: String,
    /// `split_part:` overriding the inherited split part.
    pub split_part: Option<String>,
    /// `subflavors:` (V1's legacy `subflavor: X` is merged in as `__subflavor__: X`).
    pub subflavors: Option<Map<String, Value>>,
    /// `shuffle_over_epochs_multiplier:`: default `Some(1)`, `None` for an explicit `null` (no
    /// shuffling), `-1` for drawing slices with replacement.
    pub shuffle_over_epochs_multiplier: Option<i64>,
    /// `dataset_config:` (a file name inside `.nv-meta/`).
    pub dataset_config: Option<String>,
    /// `split_config:` (a file name inside `.nv-meta/`).
    pub split_config: Option<String>,
    /// `aux:` named auxiliary sources, in file order.
    pub aux: Vec<(String, AuxSpec)>,
    /// `subset:`.
    pub subset: Option<Subset>,
    /// Which class read it.
    pub version: Version,
}

/// An `aux:` value as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuxSpec {
    /// A string: a prepared dataset path, `filesystem://<folder>`, or a URL.
    Str(String),
    /// `{path: ...}`: a prepared dataset.
    Dataset(String),
    /// `{fs_path: ...}`: a plain folder.
    Filesystem(String),
}

/// A join of datasets.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinNode {
    /// Where the node is in its file.
    pub yaml_path: String,
    /// The joined datasets, the primary first; named when `join:` is a mapping.
    pub sources: Vec<JoinSource>,
    /// Whether `join:` was a mapping (the joiner then gets keyword arguments).
    pub named: bool,
    /// `joiner:`, the class or function that combines the samples.
    pub joiner: Joiner,
    /// `split_part:` for the whole join.
    pub split_part: Option<String>,
    /// `subflavors:` for the whole join.
    pub subflavors: Option<Map<String, Value>>,
    /// `shuffle_over_epochs_multiplier:` as written (the reference ignores it for joins).
    pub shuffle_over_epochs_multiplier: Option<i64>,
    /// `subset:`.
    pub subset: Option<Subset>,
}

/// One dataset of a join.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinSource {
    /// The key when `join:` is a mapping.
    pub name: Option<String>,
    /// The dataset (a prepared WebDataset); `aux` and `subset` are not allowed here.
    pub dataset: DatasetRef,
    /// What to do with a primary sample this dataset has no sample for.
    pub nonmatch: Nonmatch,
}

/// `nonmatch:` of a joined dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nonmatch {
    /// `error` (default): a missing sample fails `energon prepare`.
    Error,
    /// `skip`: the primary sample is dropped from the join.
    Skip,
    /// `none`: the joined sample gets no part from this dataset.
    None,
}

impl Nonmatch {
    /// The name as written in YAML and hashed into join index names.
    pub fn as_str(self) -> &'static str {
        match self {
            Nonmatch::Error => "error",
            Nonmatch::Skip => "skip",
            Nonmatch::None => "none",
        }
    }
}

/// `joiner:`: a Python class (`from_joined`) or function, by name. Resolving it is the job of the
/// layer that builds samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joiner {
    /// `{__module__, __class__}`: a sample type whose `from_joined` combines the samples.
    Class {
        /// `__module__`.
        module: String,
        /// `__class__`.
        name: String,
    },
    /// `{__module__, __function__}`: a function called with the samples.
    Function {
        /// `__module__`.
        module: String,
        /// `__function__`.
        name: String,
    },
}

/// `subset: {range: [start, end]}` as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Subset {
    /// Percentages, as ratios in `[0, 1]` (`[25%, 75%]`; an `end` bound is 100%).
    Ratio {
        /// Start ratio.
        start: f64,
        /// End ratio.
        end: f64,
    },
    /// Sample indices (`[100, 200]`, `[100, end]`).
    Absolute {
        /// First sample.
        start: u64,
        /// End (exclusive); `None` for `end`.
        end: Option<u64>,
    },
}
