//! `.nv-meta/split.yaml` (or `split.json`): which shards make up each split part.
//!
//! ```yaml
//! split_parts:
//!   train:
//!   - shards/data-{000000..000003}.tar
//! exclude: []
//! ```
//!
//! Every list entry is a brace pattern ([`brace_expand`]). Shard order within a split part is the
//! order of the expanded list; it defines global sample indices. `exclude` entries equal to a shard
//! name drop that shard; entries `<shard>/<sample key>` drop single samples at read time (they still
//! count in lengths and slicing). `prepare` writes each list collapsed with [`collapse`].

mod brace;
#[cfg(test)]
mod tests;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use serde_json::{Map, Value};

pub use brace::{brace_expand, collapse};

use crate::{
    Error, NV_META, Result, SPLIT_YAML, fsutil,
    info::{dump_json, kind_of},
    storage,
    yaml::{self, DumpOptions},
};

/// The alternative default split file, tried when the default `split.yaml` is missing.
pub const SPLIT_JSON: &str = "split.json";

/// The content of a split file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SplitConfig {
    /// Split part name and its shard patterns, in file order.
    pub split_parts: Vec<(String, Vec<String>)>,
    /// Exclude patterns: shard names or `<shard>/<sample key>`.
    pub exclude: Vec<String>,
}

/// One shard of a resolved split part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    /// Shard path relative to the dataset root.
    pub name: String,
    /// Number of samples, from the dataset info.
    pub count: u64,
}

/// A split part resolved against the dataset info.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedSplit {
    /// The shards to read, in split order (expanded, excluded shards removed).
    pub shards: Vec<ShardInfo>,
    /// Samples to skip at read time, as `<shard>/<sample key>`.
    pub sample_excludes: BTreeSet<String>,
    /// Every expanded name of the split part, excluded ones included.
    pub split_part_files: Vec<String>,
}

impl SplitConfig {
    /// The patterns of split part `name`, if defined.
    pub fn part(&self, name: &str) -> Option<&[String]> {
        self.split_parts.iter().find(|(n, _)| n == name).map(|(_, p)| p.as_slice())
    }

    /// The split file as Energon writes it (`split_parts`, then `exclude`).
    pub fn to_value(&self) -> Value {
        let parts: Map<String, Value> = self
            .split_parts
            .iter()
            .map(|(name, patterns)| (name.clone(), string_list(patterns)))
            .collect();
        let mut obj = Map::new();
        obj.insert("split_parts".to_owned(), Value::Object(parts));
        obj.insert("exclude".to_owned(), string_list(&self.exclude));
        Value::Object(obj)
    }

    /// Reads a split configuration from a parsed value, strictly (Energon's `WebdatasetSplits`):
    /// `split_parts` (mapping of lists of strings) is required, `exclude` (list of strings) is
    /// optional, and other keys are errors. `path` is named in errors.
    pub fn from_value(value: &Value, path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::BadMetadata { path: path.to_owned(), reason };
        let Value::Object(obj) = value else {
            return Err(bad(format!("expected a mapping, found {}", kind_of(value))));
        };
        let mut res = SplitConfig::default();
        let mut saw_parts = false;
        for (key, value) in obj {
            match key.as_str() {
                "split_parts" => {
                    let Value::Object(parts) = value else {
                        return Err(bad(format!(
                            "split_parts: expected a mapping, found {}",
                            kind_of(value)
                        )));
                    };
                    saw_parts = true;
                    for (name, list) in parts {
                        let patterns =
                            strings(list, &format!("split_parts.{name}")).map_err(bad)?;
                        res.split_parts.push((name.clone(), patterns));
                    }
                }
                "exclude" => res.exclude = strings(value, "exclude").map_err(bad)?,
                other => return Err(bad(format!("unknown key {other:?}"))),
            }
        }
        if !saw_parts {
            return Err(bad("missing key \"split_parts\"".to_owned()));
        }
        Ok(res)
    }

    /// Resolves split part `split_part` against the dataset's shard counts, as Energon's
    /// `WebdatasetMeta.from_config` does: expand the part's patterns and the excludes, drop
    /// excluded shards, look up each remaining shard's count, and collect the sample excludes
    /// (every expanded exclude containing `/` that is not itself a shard name).
    ///
    /// `path` is the split file, named in errors: an undefined split part, a shard missing from
    /// `shard_counts`, a malformed pattern, or nothing left to read.
    pub fn resolve(
        &self,
        path: &Path,
        split_part: &str,
        shard_counts: &[(String, u64)],
    ) -> Result<ResolvedSplit> {
        let Some(patterns) = self.part(split_part) else {
            let defined: Vec<&str> = self.split_parts.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::UnknownSplitPart {
                path: path.to_owned(),
                split_part: split_part.to_owned(),
                defined: defined.join(", "),
            });
        };
        let in_file = |e: Error| match e {
            Error::BadPattern { pattern, reason } => Error::BadMetadata {
                path: path.to_owned(),
                reason: format!("bad brace pattern {pattern:?}: {reason}"),
            },
            other => other,
        };
        let mut excludes = BTreeSet::new();
        for pattern in &self.exclude {
            excludes.extend(brace_expand(pattern).map_err(in_file)?);
        }
        let mut split_part_files = Vec::new();
        for pattern in patterns {
            split_part_files.extend(brace_expand(pattern).map_err(in_file)?);
        }
        let counts: rustc_hash::FxHashMap<&str, u64> =
            shard_counts.iter().map(|(name, n)| (name.as_str(), *n)).collect();
        let mut shards = Vec::new();
        for name in split_part_files.iter().filter(|n| !excludes.contains(*n)) {
            let Some(&count) = counts.get(name.as_str()) else {
                return Err(Error::UnknownShard {
                    path: path.to_owned(),
                    split_part: split_part.to_owned(),
                    shard: name.clone(),
                });
            };
            shards.push(ShardInfo { name: name.clone(), count });
        }
        if shards.is_empty() {
            return Err(Error::EmptySplit {
                path: path.to_owned(),
                split_part: split_part.to_owned(),
            });
        }
        let sample_excludes = excludes
            .into_iter()
            .filter(|e| e.contains('/') && !counts.contains_key(e.as_str()))
            .collect();
        Ok(ResolvedSplit { shards, sample_excludes, split_part_files })
    }
}

/// Reads a split file: YAML for `*.yaml`, JSON for `*.json`.
pub fn read_split_config(path: &Path) -> Result<SplitConfig> {
    let value = yaml::load_yaml_or_json(path)?;
    SplitConfig::from_value(&value, path)
}

/// Finds and reads the split file `name` of the dataset at `root` (`None` means `split.yaml`).
///
/// As in Energon, when the default `split.yaml` is missing, `split.json` is read instead. Returns
/// the path read and its content.
pub fn read_dataset_split(root: &Path, name: Option<&str>) -> Result<(PathBuf, SplitConfig)> {
    let meta = root.join(NV_META);
    let name = name.unwrap_or(SPLIT_YAML);
    let path = meta.join(name);
    if name == SPLIT_YAML && !storage::is_file(&path) {
        let json_path = meta.join(SPLIT_JSON);
        if storage::is_file(&json_path) {
            let config = read_split_config(&json_path)?;
            return Ok((json_path, config));
        }
    }
    let config = read_split_config(&path)?;
    Ok((path, config))
}

/// The bytes Energon's `prepare` writes for `config` into a file called `file_name`: PyYAML
/// `yaml.dump(sort_keys=False)` for `*.yaml`, `json.dump(indent=2)` for `*.json`.
pub fn split_config_bytes(config: &SplitConfig, file_name: &str) -> Result<String> {
    let value = config.to_value();
    if file_name.ends_with(".yaml") {
        Ok(yaml::dump_yaml(&value, DumpOptions { sort_keys: false }))
    } else if file_name.ends_with(".json") {
        Ok(dump_json(&value))
    } else {
        Err(Error::Config(format!("split config name {file_name:?} must end in .yaml or .json")))
    }
}

/// Writes a split file atomically, in the format its extension names.
pub fn write_split_config(path: &Path, config: &SplitConfig) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let text = split_config_bytes(config, &name)?;
    fsutil::atomic_write(path, text.as_bytes())
}

fn string_list(items: &[String]) -> Value {
    Value::Array(items.iter().cloned().map(Value::String).collect())
}

/// Reads a list of strings; `what` names the location in errors.
fn strings(value: &Value, what: &str) -> Result<Vec<String>, String> {
    let Value::Array(items) = value else {
        return Err(format!("{what}: expected a list, found {}", kind_of(value)));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(format!("{what}[{i}]: expected a string, found {}", kind_of(other))),
        })
        .collect()
}
