//! Strict reading of a metadataset file into the [`grammar`](super) tree.
//!
//! Every check names the file and the YAML path of the node (`splits.train.blend[1].weight`).
//! Values are typed as the reference's typed converter types them, with two deliberate
//! tightenings: booleans are not numbers (Python's `True` is an `int`), and weights and
//! repetitions must be positive (the reference accepts them here and fails when it blends).

use std::path::Path;

use serde_json::{Map, Value};

use super::{
    AuxSpec, BlendItem, BlendNode, DatasetRef, EpochItem, EpochizedNode, Item, JoinNode,
    JoinSource, Joiner, MetadatasetFile, Node, Nonmatch, Repetitions, Subset, Version,
};
use crate::error::{Error, Result};

/// The module the metadataset classes live in.
const ENERGON_MODULE: &str = "megatron.energon";

const TOP_KEYS: &[&str] = &["__module__", "__class__", "splits"];
const V1_SPLIT_KEYS: &[&str] = &["datasets"];
const V1_REF_KEYS: &[&str] = &[
    "path",
    "split_part",
    "subflavor",
    "subflavors",
    "shuffle_over_epochs_multiplier",
    "dataset_config",
    "split_config",
    "weight",
];
const REF_KEYS: &[&str] = &[
    "path",
    "split_part",
    "subflavors",
    "shuffle_over_epochs_multiplier",
    "dataset_config",
    "split_config",
    "aux",
    "subset",
];
const JOIN_KEYS: &[&str] = &[
    "join",
    "joiner",
    "split_part",
    "subflavors",
    "shuffle_over_epochs_multiplier",
    "dataset_config",
    "split_config",
    "subset",
];
const JOIN_REF_KEYS: &[&str] = &[
    "path",
    "split_part",
    "subflavors",
    "shuffle_over_epochs_multiplier",
    "dataset_config",
    "split_config",
    "nonmatch",
];
const BLEND_KEYS: &[&str] = &["blend", "subset"];
const EPOCHIZED_KEYS: &[&str] = &["blend_epochized", "subset"];
const SUBSET_KEYS: &[&str] = &["range"];

/// Reads and parses the metadataset file at `path` (see the [module docs](super)).
///
/// `path` is kept as given in the result and in errors; callers pass an absolute path.
pub fn parse_metadataset(path: &Path) -> Result<MetadatasetFile> {
    let value = energon_index::yaml::load_yaml(path)?;
    parse_value(&value, path)
}

/// Parses an already loaded YAML tree (the content of `file`).
pub(crate) fn parse_value(value: &Value, file: &Path) -> Result<MetadatasetFile> {
    let p = Parser { file };
    let top = p.fields(value, "", "a metadataset (a mapping with splits)", TOP_KEYS)?;
    let version = match (top.get("__module__"), top.get("__class__")) {
        (None, None) => Version::V1,
        (Some(module), Some(class)) => {
            let module = p.string(module, &top.at("__module__"))?;
            let class = p.string(class, &top.at("__class__"))?;
            if module != ENERGON_MODULE && !module.starts_with("megatron.energon.") {
                return Err(p.bad(
                    &top.at("__module__"),
                    format!("expected {ENERGON_MODULE:?}, found {module:?}"),
                ));
            }
            match class.as_str() {
                "Metadataset" => Version::V1,
                "MetadatasetV2" => Version::V2,
                other => {
                    return Err(p.bad(
                        &top.at("__class__"),
                        format!(
                            "expected a metadataset class (MetadatasetV2 or Metadataset), found \
                             {other:?}"
                        ),
                    ));
                }
            }
        }
        (Some(_), None) => {
            return Err(p.bad("__module__", "__module__ without __class__".to_owned()));
        }
        (None, Some(_)) => {
            return Err(p.bad("__class__", "__class__ without __module__".to_owned()));
        }
    };
    let Some(splits_value) = top.get("splits") else {
        return Err(p.bad("splits", "missing key \"splits\"".to_owned()));
    };
    let Value::Object(splits_map) = splits_value else {
        return Err(p.bad(
            "splits",
            format!("expected a mapping of split names to nodes, found {}", describe(splits_value)),
        ));
    };
    let mut splits = Vec::with_capacity(splits_map.len());
    for (name, node) in splits_map {
        let at = format!("splits.{name}");
        let node = match version {
            Version::V1 => p.v1_split(node, &at)?,
            Version::V2 => p.node(node, &at)?,
        };
        splits.push((name.clone(), node));
    }
    Ok(MetadatasetFile { path: file.to_owned(), version, splits })
}

/// The keys of one mapping node, with the YAML path for errors.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    yaml_path: String,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// The value of `key`, `None` when absent or `null`.
    fn non_null(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// The YAML path of `key`.
    fn at(&self, key: &str) -> String {
        join_path(&self.yaml_path, key)
    }
}

fn join_path(parent: &str, key: &str) -> String {
    if parent.is_empty() { key.to_owned() } else { format!("{parent}.{key}") }
}

struct Parser<'a> {
    file: &'a Path,
}

impl Parser<'_> {
    fn bad(&self, yaml_path: &str, reason: String) -> Error {
        Error::BadNode {
            file: self.file.to_owned(),
            yaml_path: if yaml_path.is_empty() { "<root>".to_owned() } else { yaml_path.into() },
            reason,
        }
    }

    /// Checks that `value` is a mapping whose keys are all in `allowed`.
    fn fields<'v>(
        &self,
        value: &'v Value,
        yaml_path: &str,
        what: &str,
        allowed: &[&str],
    ) -> Result<Fields<'v>> {
        let Value::Object(map) = value else {
            return Err(self.bad(yaml_path, format!("expected {what}, found {}", describe(value))));
        };
        if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(self.bad(
                &join_path(yaml_path, key),
                format!("unknown key {key:?} (expected one of: {})", allowed.join(", ")),
            ));
        }
        Ok(Fields { map, yaml_path: yaml_path.to_owned() })
    }

    fn string(&self, value: &Value, yaml_path: &str) -> Result<String> {
        match value {
            Value::String(s) => Ok(s.clone()),
            other => {
                Err(self.bad(yaml_path, format!("expected a string, found {}", describe(other))))
            }
        }
    }

    fn opt_string(&self, fields: &Fields<'_>, key: &str) -> Result<Option<String>> {
        fields.non_null(key).map(|v| self.string(v, &fields.at(key))).transpose()
    }

    fn required_string(&self, fields: &Fields<'_>, key: &str) -> Result<String> {
        match fields.get(key) {
            None => Err(self.bad(&fields.at(key), format!("missing key {key:?}"))),
            Some(v) => self.string(v, &fields.at(key)),
        }
    }

    fn opt_mapping(&self, fields: &Fields<'_>, key: &str) -> Result<Option<Map<String, Value>>> {
        match fields.non_null(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map.clone())),
            Some(other) => {
                Err(self
                    .bad(&fields.at(key), format!("expected a mapping, found {}", describe(other))))
            }
        }
    }

    /// A positive, finite number (`weight:`), default `default`.
    fn positive_number(&self, fields: &Fields<'_>, key: &str, default: f64) -> Result<f64> {
        let Some(value) = fields.get(key) else { return Ok(default) };
        let at = fields.at(key);
        let x = match value {
            Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
            other => {
                return Err(self.bad(&at, format!("expected a number, found {}", describe(other))));
            }
        };
        if !(x.is_finite() && x > 0.0) {
            return Err(self.bad(&at, format!("must be a positive number, found {value}")));
        }
        Ok(x)
    }

    /// `shuffle_over_epochs_multiplier:`: default 1, `null` for no shuffling, `-1` or a positive
    /// integer.
    fn multiplier(&self, fields: &Fields<'_>) -> Result<Option<i64>> {
        const KEY: &str = "shuffle_over_epochs_multiplier";
        let Some(value) = fields.get(KEY) else { return Ok(Some(1)) };
        let at = fields.at(KEY);
        match value {
            Value::Null => Ok(None),
            Value::Number(n) if n.as_i64().is_some_and(|k| k == -1 || k >= 1) => Ok(n.as_i64()),
            other => Err(self.bad(
                &at,
                format!(
                    "expected a positive integer, -1 (drawing with replacement) or null (no \
                     shuffling), found {}",
                    describe(other)
                ),
            )),
        }
    }

    fn repetitions(&self, fields: &Fields<'_>) -> Result<Repetitions> {
        let Some(value) = fields.get("repetitions") else { return Ok(Repetitions::Int(1)) };
        let at = fields.at("repetitions");
        let reps = match value {
            Value::Number(n) => match n.as_u64() {
                Some(k) => Repetitions::Int(k),
                None => Repetitions::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            other => {
                return Err(self.bad(&at, format!("expected a number, found {}", describe(other))));
            }
        };
        let x = reps.as_f64();
        if !(x.is_finite() && x > 0.0) {
            return Err(self.bad(&at, format!("must be a positive number, found {value}")));
        }
        Ok(reps)
    }

    /// A V2 node: blend, blend_epochized, join or dataset reference (the reference tries the
    /// classes in this order; each distinguishing key selects one).
    fn node(&self, value: &Value, at: &str) -> Result<Node> {
        let Value::Object(map) = value else {
            return Err(self.bad(
                at,
                format!(
                    "expected a mapping with blend, blend_epochized, join or path, found {}",
                    describe(value)
                ),
            ));
        };
        if map.contains_key("blend") {
            self.blend(value, at).map(Node::Blend)
        } else if map.contains_key("blend_epochized") {
            self.epochized(value, at).map(Node::BlendEpochized)
        } else if map.contains_key("join") {
            self.join(value, at, &[]).map(Node::Join)
        } else if map.contains_key("path") {
            self.dataset_ref(value, at, &[]).map(Node::Ref)
        } else {
            Err(self.bad(
                at,
                "expected one of the keys blend, blend_epochized, join or path".to_owned(),
            ))
        }
    }

    fn blend(&self, value: &Value, at: &str) -> Result<BlendNode> {
        let fields = self.fields(value, at, "a blend", BLEND_KEYS)?;
        let items_at = fields.at("blend");
        let items = self.list(fields.get("blend"), &items_at)?;
        let mut res = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_at = format!("{items_at}[{i}]");
            let Value::Object(map) = item else {
                return Err(self.bad(
                    &item_at,
                    format!("expected a blend item (a mapping), found {}", describe(item)),
                ));
            };
            let weight =
                self.positive_number(&Fields { map, yaml_path: item_at.clone() }, "weight", 1.0)?;
            res.push(BlendItem { weight, item: self.item(item, &item_at, &["weight"])? });
        }
        let subset = self.subset(&fields)?;
        Ok(BlendNode { yaml_path: at.to_owned(), items: res, subset, version: Version::V2 })
    }

    fn epochized(&self, value: &Value, at: &str) -> Result<EpochizedNode> {
        let fields = self.fields(value, at, "a blend_epochized", EPOCHIZED_KEYS)?;
        let items_at = fields.at("blend_epochized");
        let items = self.list(fields.get("blend_epochized"), &items_at)?;
        let mut res = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_at = format!("{items_at}[{i}]");
            let Value::Object(map) = item else {
                return Err(self.bad(
                    &item_at,
                    format!(
                        "expected a blend_epochized item (a mapping), found {}",
                        describe(item)
                    ),
                ));
            };
            let repetitions = self.repetitions(&Fields { map, yaml_path: item_at.clone() })?;
            res.push(EpochItem { repetitions, item: self.item(item, &item_at, &["repetitions"])? });
        }
        let subset = self.subset(&fields)?;
        Ok(EpochizedNode { yaml_path: at.to_owned(), items: res, subset })
    }

    /// A non-empty list.
    fn list<'v>(&self, value: Option<&'v Value>, at: &str) -> Result<&'v [Value]> {
        match value {
            Some(Value::Array(items)) if !items.is_empty() => Ok(items),
            Some(Value::Array(_)) => Err(self.bad(at, "expected at least one item".to_owned())),
            Some(other) => Err(self.bad(at, format!("expected a list, found {}", describe(other)))),
            None => Err(self.bad(at, "missing".to_owned())),
        }
    }

    /// A blend item: a join (when it has `join:`) or a dataset reference, plus `extra` keys.
    fn item(&self, value: &Value, at: &str, extra: &[&str]) -> Result<Item> {
        let is_join = matches!(value, Value::Object(map) if map.contains_key("join"));
        if is_join {
            self.join(value, at, extra).map(Item::Join)
        } else {
            self.dataset_ref(value, at, extra).map(Item::Ref)
        }
    }

    fn dataset_ref(&self, value: &Value, at: &str, extra: &[&str]) -> Result<DatasetRef> {
        let allowed: Vec<&str> = REF_KEYS.iter().chain(extra).copied().collect();
        let fields =
            self.fields(value, at, "a dataset reference (a mapping with path)", &allowed)?;
        let aux = match fields.non_null("aux") {
            None => Vec::new(),
            Some(Value::Object(map)) => {
                let mut res = Vec::with_capacity(map.len());
                for (name, spec) in map {
                    res.push((
                        name.clone(),
                        self.aux_spec(spec, &join_path(&fields.at("aux"), name))?,
                    ));
                }
                res
            }
            Some(other) => {
                return Err(self.bad(
                    &fields.at("aux"),
                    format!(
                        "expected a mapping of names to dataset paths, found {}",
                        describe(other)
                    ),
                ));
            }
        };
        Ok(DatasetRef {
            yaml_path: at.to_owned(),
            path: self.required_string(&fields, "path")?,
            split_part: self.opt_string(&fields, "split_part")?,
            subflavors: self.opt_mapping(&fields, "subflavors")?,
            shuffle_over_epochs_multiplier: self.multiplier(&fields)?,
            dataset_config: self.opt_string(&fields, "dataset_config")?,
            split_config: self.opt_string(&fields, "split_config")?,
            aux,
            subset: self.subset(&fields)?,
            version: Version::V2,
        })
    }

    fn aux_spec(&self, value: &Value, at: &str) -> Result<AuxSpec> {
        match value {
            Value::String(s) => Ok(AuxSpec::Str(s.clone())),
            Value::Object(map) if map.len() == 1 && map.contains_key("path") => {
                Ok(AuxSpec::Dataset(self.string(&map["path"], &join_path(at, "path"))?))
            }
            Value::Object(map) if map.len() == 1 && map.contains_key("fs_path") => {
                Ok(AuxSpec::Filesystem(self.string(&map["fs_path"], &join_path(at, "fs_path"))?))
            }
            other => Err(self.bad(
                at,
                format!(
                    "expected a dataset path, filesystem://<folder>, {{path: ...}} or {{fs_path: \
                     ...}}, found {}",
                    describe(other)
                ),
            )),
        }
    }

    fn join(&self, value: &Value, at: &str, extra: &[&str]) -> Result<JoinNode> {
        let allowed: Vec<&str> = JOIN_KEYS.iter().chain(extra).copied().collect();
        let fields = self.fields(value, at, "a join", &allowed)?;
        for key in ["dataset_config", "split_config"] {
            if fields.non_null(key).is_some() {
                return Err(self.bad(
                    &fields.at(key),
                    format!("{key} cannot be set for a whole join; set it on the joined datasets"),
                ));
            }
        }
        let join_at = fields.at("join");
        let (sources, named) = match fields.get("join") {
            Some(Value::Array(items)) if !items.is_empty() => {
                let mut res = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    res.push(self.join_source(item, &format!("{join_at}[{i}]"), None)?);
                }
                (res, false)
            }
            Some(Value::Object(map)) if !map.is_empty() => {
                let mut res = Vec::with_capacity(map.len());
                for (name, item) in map {
                    let item_at = join_path(&join_at, name);
                    res.push(self.join_source(item, &item_at, Some(name.clone()))?);
                }
                (res, true)
            }
            Some(Value::Array(_) | Value::Object(_)) => {
                return Err(self.bad(&join_at, "expected at least one dataset".to_owned()));
            }
            Some(other) => {
                return Err(self.bad(
                    &join_at,
                    format!("expected a list or a mapping of datasets, found {}", describe(other)),
                ));
            }
            None => return Err(self.bad(&join_at, "missing".to_owned())),
        };
        if sources[0].nonmatch != Nonmatch::Error {
            return Err(self.bad(
                &sources[0].dataset.yaml_path,
                "the primary (first) dataset of a join must have nonmatch: error (the default)"
                    .to_owned(),
            ));
        }
        let joiner = match fields.get("joiner") {
            None => return Err(self.bad(&fields.at("joiner"), "missing key \"joiner\"".to_owned())),
            Some(v) => self.joiner(v, &fields.at("joiner"))?,
        };
        Ok(JoinNode {
            yaml_path: at.to_owned(),
            sources,
            named,
            joiner,
            split_part: self.opt_string(&fields, "split_part")?,
            subflavors: self.opt_mapping(&fields, "subflavors")?,
            shuffle_over_epochs_multiplier: self.multiplier(&fields)?,
            subset: self.subset(&fields)?,
        })
    }

    fn join_source(&self, value: &Value, at: &str, name: Option<String>) -> Result<JoinSource> {
        if let Value::Object(map) = value {
            for key in ["aux", "subset"] {
                if map.contains_key(key) {
                    return Err(self.bad(
                        &join_path(at, key),
                        format!("{key} is not supported on a joined dataset"),
                    ));
                }
            }
        }
        let fields =
            self.fields(value, at, "a joined dataset (a mapping with path)", JOIN_REF_KEYS)?;
        let nonmatch = match fields.get("nonmatch") {
            None => Nonmatch::Error,
            Some(Value::String(s)) if s == "error" => Nonmatch::Error,
            Some(Value::String(s)) if s == "skip" => Nonmatch::Skip,
            Some(Value::String(s)) if s == "none" => Nonmatch::None,
            Some(other) => {
                return Err(self.bad(
                    &fields.at("nonmatch"),
                    format!("expected one of error, skip, none; found {}", describe(other)),
                ));
            }
        };
        let mut without_nonmatch = fields.map.clone();
        without_nonmatch.remove("nonmatch");
        let dataset = self.dataset_ref(&Value::Object(without_nonmatch), at, &[])?;
        Ok(JoinSource { name, dataset, nonmatch })
    }

    fn joiner(&self, value: &Value, at: &str) -> Result<Joiner> {
        let expected = "expected {__module__: ..., __class__: ...} (a sample type) or \
                        {__module__: ..., __function__: ...}";
        let Value::Object(map) = value else {
            return Err(self.bad(at, format!("{expected}, found {}", describe(value))));
        };
        let string = |key: &str| -> Result<Option<String>> {
            map.get(key).map(|v| self.string(v, &join_path(at, key))).transpose()
        };
        let unknown =
            map.keys().find(|k| !["__module__", "__class__", "__function__"].contains(&k.as_str()));
        if let Some(key) = unknown {
            return Err(self.bad(&join_path(at, key), format!("unknown key {key:?} ({expected})")));
        }
        match (string("__module__")?, string("__class__")?, string("__function__")?) {
            (Some(module), Some(name), None) => Ok(Joiner::Class { module, name }),
            (Some(module), None, Some(name)) => Ok(Joiner::Function { module, name }),
            _ => Err(self.bad(at, expected.to_owned())),
        }
    }

    fn subset(&self, fields: &Fields<'_>) -> Result<Option<Subset>> {
        let Some(value) = fields.non_null("subset") else { return Ok(None) };
        let at = fields.at("subset");
        let subset = self.fields(value, &at, "a subset ({range: [start, end]})", SUBSET_KEYS)?;
        let range_at = subset.at("range");
        let bounds = match subset.get("range") {
            Some(Value::Array(items)) if items.len() == 2 => items,
            Some(other) => {
                return Err(self.bad(
                    &range_at,
                    format!("expected a list [start, end], found {}", describe(other)),
                ));
            }
            None => return Err(self.bad(&range_at, "missing key \"range\"".to_owned())),
        };
        let start = self.bound(&bounds[0], &format!("{range_at}[0]"))?;
        let end = self.bound(&bounds[1], &format!("{range_at}[1]"))?;
        let res = match (start, end) {
            (Bound::Index(start), Bound::Index(end)) => {
                if start > end {
                    return Err(self.bad(&range_at, format!("start {start} is after end {end}")));
                }
                Subset::Absolute { start, end: Some(end) }
            }
            (Bound::Index(start), Bound::End) => Subset::Absolute { start, end: None },
            (Bound::Ratio(start), Bound::Ratio(end)) => {
                if start > end {
                    return Err(self.bad(&range_at, "start percentage is after end".to_owned()));
                }
                Subset::Ratio { start, end }
            }
            // COMPAT(energon 7.4.1): metadataset_v2.py:Subset.as_dataset_subset fails with a
            // TypeError for a percentage start and `end`; `end` is 100% here.
            (Bound::Ratio(start), Bound::End) => Subset::Ratio { start, end: 1.0 },
            (Bound::End, _) => {
                return Err(self.bad(&format!("{range_at}[0]"), "start cannot be end".to_owned()));
            }
            (Bound::Index(_), Bound::Ratio(_)) | (Bound::Ratio(_), Bound::Index(_)) => {
                return Err(self.bad(
                    &range_at,
                    "start and end must both be sample indices or both percentages".to_owned(),
                ));
            }
        };
        Ok(Some(res))
    }

    fn bound(&self, value: &Value, at: &str) -> Result<Bound> {
        let expected =
            "expected a sample index (an integer >= 0), a percentage like \"25%\" or end";
        match value {
            Value::Number(n) if n.as_u64().is_some() => Ok(Bound::Index(n.as_u64().unwrap_or(0))),
            Value::String(s) if s.trim() == "end" => Ok(Bound::End),
            Value::String(s) if s.ends_with('%') => {
                let number = s[..s.len() - 1].trim();
                match number.parse::<f64>() {
                    Ok(pct) if (0.0..=100.0).contains(&pct) => Ok(Bound::Ratio(pct / 100.0)),
                    _ => Err(self.bad(at, format!("percentage {s:?} is not between 0% and 100%"))),
                }
            }
            other => Err(self.bad(at, format!("{expected}, found {}", describe(other)))),
        }
    }

    /// A V1 split: `{datasets: [...]}`, a blend by weights.
    fn v1_split(&self, value: &Value, at: &str) -> Result<Node> {
        let fields = self.fields(value, at, "a V1 split ({datasets: [...]})", V1_SPLIT_KEYS)?;
        let items_at = fields.at("datasets");
        let items = self.list(fields.get("datasets"), &items_at)?;
        let mut res = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_at = format!("{items_at}[{i}]");
            let f = self.fields(
                item,
                &item_at,
                "a dataset reference (a mapping with path)",
                V1_REF_KEYS,
            )?;
            let weight = self.positive_number(&f, "weight", 1.0)?;
            let mut subflavors = self.opt_mapping(&f, "subflavors")?;
            // COMPAT(energon 7.4.1): metadataset.py:DatasetReference.__post_init__ (the legacy
            // `subflavor` becomes `__subflavor__`, first, unless `subflavors` already has one).
            if let Some(subflavor) = self.opt_string(&f, "subflavor")? {
                let merged = match subflavors.take() {
                    None => {
                        Map::from_iter([("__subflavor__".to_owned(), Value::String(subflavor))])
                    }
                    Some(map) if map.contains_key("__subflavor__") => map,
                    Some(map) => {
                        let mut merged = Map::from_iter([(
                            "__subflavor__".to_owned(),
                            Value::String(subflavor),
                        )]);
                        merged.extend(map);
                        merged
                    }
                };
                subflavors = Some(merged);
            }
            let dataset = DatasetRef {
                yaml_path: item_at.clone(),
                path: self.required_string(&f, "path")?,
                split_part: self.opt_string(&f, "split_part")?,
                subflavors,
                shuffle_over_epochs_multiplier: self.multiplier(&f)?,
                dataset_config: self.opt_string(&f, "dataset_config")?,
                split_config: self.opt_string(&f, "split_config")?,
                aux: Vec::new(),
                subset: None,
                version: Version::V1,
            };
            res.push(BlendItem { weight, item: Item::Ref(dataset) });
        }
        Ok(Node::Blend(BlendNode {
            yaml_path: at.to_owned(),
            items: res,
            subset: None,
            version: Version::V1,
        }))
    }
}

/// One bound of a subset range.
enum Bound {
    Index(u64),
    Ratio(f64),
    End,
}

/// A short description of a value for error messages: its kind and, for scalars, the value.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({s:?})"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a mapping".to_owned(),
    }
}
