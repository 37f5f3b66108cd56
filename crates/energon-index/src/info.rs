//! `.nv-meta/.info.json` (and the legacy `.info.yaml`): the shard list and sample counts.
//!
//! The order of `shard_counts` matters: a shard's position in it is its `tar_file_id` in
//! `index.sqlite`. Energon reads `.info.json` when present and falls back to `.info.yaml` (written
//! by Energon <= 7.2). `prepare` writes `.info.json` with Python's `json.dump(indent=2)` (no trailing
//! newline, non-ASCII escaped) and, if a `.info.yaml` exists, rewrites it with `yaml.dump` (keys
//! sorted).

use std::path::Path;

use serde_json::{Map, Value};

use crate::{
    Error, INFO_JSON, INFO_YAML, NV_META, Result, fsutil, storage,
    yaml::{self, DumpOptions, pynum::py_float_repr},
};

/// The content of `.info.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DatasetInfo {
    /// The Energon version that prepared the dataset (missing in old files).
    pub energon_version: Option<String>,
    /// Shard path (relative to the dataset root, `/`-separated) and its number of samples, in
    /// prepare input order; the position is the shard's `tar_file_id`.
    pub shard_counts: Vec<(String, u64)>,
}

impl DatasetInfo {
    /// The shard names, in `tar_file_id` order.
    pub fn shard_names(&self) -> impl Iterator<Item = &str> {
        self.shard_counts.iter().map(|(name, _)| name.as_str())
    }

    /// The sample count of `shard`, if the info lists it.
    pub fn count_of(&self, shard: &str) -> Option<u64> {
        self.shard_counts.iter().find(|(name, _)| name == shard).map(|&(_, n)| n)
    }

    /// Total number of samples.
    pub fn n_samples(&self) -> u64 {
        self.shard_counts.iter().map(|&(_, n)| n).sum()
    }

    /// The info as the JSON object Energon writes (`energon_version` first, when known).
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        if let Some(version) = &self.energon_version {
            obj.insert("energon_version".to_owned(), Value::String(version.clone()));
        }
        let counts: Map<String, Value> =
            self.shard_counts.iter().map(|(name, n)| (name.clone(), Value::from(*n))).collect();
        obj.insert("shard_counts".to_owned(), Value::Object(counts));
        Value::Object(obj)
    }

    /// Reads the info from a parsed JSON/YAML value, strictly: an object with `shard_counts`
    /// (object of non-negative integers) and optional `energon_version` (string or null); other
    /// keys are errors, as in Energon's strict parser. `path` is named in errors.
    pub fn from_value(value: &Value, path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::BadMetadata { path: path.to_owned(), reason };
        let Value::Object(obj) = value else {
            return Err(bad(format!("expected a mapping, found {}", kind_of(value))));
        };
        let mut res = DatasetInfo::default();
        let mut saw_counts = false;
        for (key, value) in obj {
            match key.as_str() {
                "energon_version" => {
                    res.energon_version = match value {
                        Value::Null => None,
                        Value::String(s) => Some(s.clone()),
                        other => {
                            return Err(bad(format!(
                                "energon_version: expected a string, found {}",
                                kind_of(other)
                            )));
                        }
                    };
                }
                "shard_counts" => {
                    let Value::Object(counts) = value else {
                        return Err(bad(format!(
                            "shard_counts: expected a mapping, found {}",
                            kind_of(value)
                        )));
                    };
                    saw_counts = true;
                    for (shard, count) in counts {
                        let n = count.as_u64().ok_or_else(|| {
                            bad(format!(
                                "shard_counts[{shard:?}]: expected a non-negative integer, found {count}"
                            ))
                        })?;
                        res.shard_counts.push((shard.clone(), n));
                    }
                }
                other => return Err(bad(format!("unknown key {other:?}"))),
            }
        }
        if !saw_counts {
            return Err(bad("missing key \"shard_counts\"".to_owned()));
        }
        Ok(res)
    }
}

/// Reads the info of the dataset at `root`: `.nv-meta/.info.json`, else `.nv-meta/.info.yaml`.
pub fn read_dataset_info(root: &Path) -> Result<DatasetInfo> {
    let meta = root.join(NV_META);
    let json_path = meta.join(INFO_JSON);
    let yaml_path = meta.join(INFO_YAML);
    // A store that cannot be reached is its own error, not a missing file.
    let exists = |p: &Path| storage::try_is_file(p).map_err(|e| Error::io("cannot reach", p, e));
    if exists(&json_path)? {
        read_info_json(&json_path)
    } else if exists(&yaml_path)? {
        let value = yaml::load_yaml(&yaml_path)?;
        DatasetInfo::from_value(&value, &yaml_path)
    } else {
        Err(Error::NotADataset {
            path: root.to_owned(),
            reason: format!("no {NV_META}/{INFO_JSON} or {NV_META}/{INFO_YAML} (prepare it first)"),
        })
    }
}

/// Reads one `.info.json` file.
pub fn read_info_json(path: &Path) -> Result<DatasetInfo> {
    let text = yaml::read_text(path)?;
    let value = yaml::parse_json(&text, path)?;
    DatasetInfo::from_value(&value, path)
}

/// The bytes of `.info.json` as Energon writes them (`json.dump(indent=2)`, no final newline).
pub fn info_json_bytes(info: &DatasetInfo) -> String {
    dump_json(&info.to_value())
}

/// Writes `.info.json` atomically.
pub fn write_info_json(path: &Path, info: &DatasetInfo) -> Result<()> {
    fsutil::atomic_write(path, info_json_bytes(info).as_bytes())
}

/// Writes the legacy `.info.yaml` atomically, as Energon keeps it in sync (`yaml.dump`, sorted
/// keys).
pub fn write_info_yaml(path: &Path, info: &DatasetInfo) -> Result<()> {
    fsutil::atomic_write(path, info_yaml_bytes(info).as_bytes())
}

/// The bytes of the legacy `.info.yaml` as Energon writes them (`yaml.dump`, sorted keys).
pub fn info_yaml_bytes(info: &DatasetInfo) -> String {
    yaml::dump_yaml(&info.to_value(), DumpOptions { sort_keys: true })
}

/// A short name of a value's type for error messages.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Serializes `value` as Python's `json.dumps(value, indent=2)` (default `ensure_ascii=True`,
/// separators `,` and `: `, no trailing newline).
pub fn dump_json(value: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value, 0);
    out
}

fn write_json(out: &mut String, value: &Value, depth: usize) {
    const INDENT: usize = 2;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                let f = n.as_f64().unwrap_or(f64::NAN);
                // Python writes non-finite floats as bare words; a serde value never holds them.
                out.push_str(&py_float_repr(f));
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => write_json_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&" ".repeat((depth + 1) * INDENT));
                write_json(out, item, depth + 1);
            }
            out.push('\n');
            out.push_str(&" ".repeat(depth * INDENT));
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&" ".repeat((depth + 1) * INDENT));
                write_json_string(out, key);
                out.push_str(": ");
                write_json(out, item, depth + 1);
            }
            out.push('\n');
            out.push_str(&" ".repeat(depth * INDENT));
            out.push('}');
        }
    }
}

/// A JSON string literal with Python's `ensure_ascii` escaping (lowercase `\uXXXX`, surrogate
/// pairs above U+FFFF).
fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests;
