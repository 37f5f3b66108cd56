//! `.nv-meta/dataset.yaml`: how the samples of a WebDataset are built.
//!
//! Three forms are accepted, as in Energon 7.4:
//!
//! ```yaml
//! # Standard: a sample type plus a field map (or a custom loader with a part filter)
//! sample_type: {__module__: megatron.energon, __class__: CaptioningSample}
//! field_map: {image: jpg, caption: txt}
//! ---
//! # Crude: raw parts for cookers
//! __module__: megatron.energon
//! __class__: CrudeWebdataset
//! ---
//! # Legacy: a deprecated per-type class
//! __module__: megatron.energon
//! __class__: CaptioningWebdataset
//! field_map: {image: jpg, caption: txt}
//! ```
//!
//! Any form may also set `subflavors` and override loader arguments (`split_config`,
//! `shuffle_over_epochs`, ...), which are kept in `extra`. Energon's rules are enforced: exactly one
//! of `field_map` and `sample_loader`; `part_filter` required with `sample_loader` and forbidden
//! with `field_map`; no `sample_loader` or `field_map` for crude datasets; `field_map` keys must be
//! fields of a built-in sample type.

mod field_spec;
mod sample_types;
#[cfg(test)]
mod tests;

use std::path::Path;

use serde_json::{Map, Value};

pub use field_spec::{FieldAccess, FieldMap, FieldSpec, list_index};
pub use sample_types::{
    BASE_FIELDS, CRUDE_CLASS, CRUDE_MENU_LABEL, ENERGON_MODULE, LEGACY_CLASSES, SAMPLE_TYPES,
    SampleField, SampleTypeInfo, sample_type_info,
};

use crate::{
    Error, Result, fsutil,
    info::kind_of,
    yaml::{self, DumpOptions},
};

/// The loader arguments a `dataset.yaml` may override besides the keys this module interprets.
pub const LOADER_KEYS: &[&str] = &[
    "path",
    "split_part",
    "split_config",
    "training",
    "worker_config",
    "shuffle_over_epochs",
    "parallel_shard_iters",
    "max_samples_per_sequence",
    "subset",
    "decoder",
];

/// A parsed `dataset.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub enum DatasetConfig {
    /// `sample_type` plus a field map or a custom loader (`StandardWebdatasetFactory`).
    Standard(StandardConfig),
    /// `CrudeWebdataset`: samples are dicts of raw parts, for cookers.
    Crude(CrudeConfig),
    /// A deprecated per-type class such as `CaptioningWebdataset`.
    Legacy(LegacyConfig),
}

/// A `{__module__, __class__}` reference to a Python class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassRef {
    /// The module (`megatron.energon`).
    pub module: String,
    /// The class name (`CaptioningSample`).
    pub class: String,
}

impl ClassRef {
    /// The built-in sample type this names, if the module is Energon's.
    pub fn builtin_sample_type(&self) -> Option<&'static SampleTypeInfo> {
        is_energon_module(&self.module).then(|| sample_type_info(&self.class)).flatten()
    }
}

/// How samples are built from tar parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SampleLoading {
    /// `field_map`: each field from a part (or a key inside a decoded part).
    FieldMap(FieldMap),
    /// `sample_loader` (a `file.py:function` reference, relative to `.nv-meta/`) and the
    /// `part_filter` that goes with it.
    Custom {
        /// The loader function reference.
        sample_loader: String,
        /// Which parts to read.
        part_filter: PartFilter,
    },
}

/// Which tar parts to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartFilter {
    /// Only these part names.
    Names(Vec<String>),
    /// A Python predicate, as a `file.py:function` reference relative to `.nv-meta/`.
    Function(String),
}

/// The standard form.
#[derive(Debug, Clone, PartialEq)]
pub struct StandardConfig {
    /// The sample class.
    pub sample_type: ClassRef,
    /// Field map or custom loader.
    pub loading: SampleLoading,
    /// `subflavors`, attached to every sample.
    pub subflavors: Option<Map<String, Value>>,
    /// Other keys (loader argument overrides, see [`LOADER_KEYS`]), in file order.
    pub extra: Map<String, Value>,
}

/// The crude form.
#[derive(Debug, Clone, PartialEq)]
pub struct CrudeConfig {
    /// `part_filter` (all parts when absent).
    pub part_filter: Option<PartFilter>,
    /// `subflavors`, attached to every sample.
    pub subflavors: Option<Map<String, Value>>,
    /// Other keys (loader argument overrides), in file order.
    pub extra: Map<String, Value>,
}

/// The legacy form.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyConfig {
    /// The deprecated class name (one of [`LEGACY_CLASSES`]).
    pub class: String,
    /// The sample type that class produces.
    pub sample_type: &'static SampleTypeInfo,
    /// Field map or custom loader.
    pub loading: SampleLoading,
    /// `subflavors`, attached to every sample.
    pub subflavors: Option<Map<String, Value>>,
    /// Other keys (loader argument overrides), in file order.
    pub extra: Map<String, Value>,
}

/// Reads and validates a `dataset.yaml` file.
pub fn read_dataset_config(path: &Path) -> Result<DatasetConfig> {
    let value = yaml::load_yaml(path)?;
    DatasetConfig::from_value(&value, path)
}

/// Writes a `dataset.yaml` atomically, as prepare does.
pub fn write_dataset_config(path: &Path, config: &DatasetConfig) -> Result<()> {
    fsutil::atomic_write(path, dataset_config_bytes(config).as_bytes())
}

/// Writes the crude `dataset.yaml` prepare writes for `--sample-type CrudeWebdataset`.
pub fn write_crude_dataset_yaml(path: &Path) -> Result<()> {
    write_dataset_config(path, &DatasetConfig::crude())
}

/// Writes the standard `dataset.yaml` prepare writes for a built-in sample type and a field map
/// (`--sample-type` with `--field-map`, or the prompts), field order kept.
pub fn write_standard_dataset_yaml(
    path: &Path,
    sample_type: &str,
    field_map: &[(String, String)],
) -> Result<()> {
    let field_map = FieldMap::from_pairs(field_map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    write_dataset_config(
        path,
        &DatasetConfig::standard(sample_type, SampleLoading::FieldMap(field_map)),
    )
}

/// The file name of the sample loader prepare writes for a sample type without a field map.
pub const SAMPLE_LOADER_FILE: &str = "sample_loader.py";

/// A `sample_loader.py` to edit: a `sample_loader` returning `sample`'s fields (each to be
/// taken from a part) and a `part_filter` keeping the parts found.
fn sample_loader_template(sample: &SampleTypeInfo, part_names: &[String]) -> String {
    let mut text = format!(
        "# Written by `energon prepare` for {name}: edit it to build the samples.\n\
         #\n\
         # `sample_loader` gets the parts of one sample by name (decoded: images as tensors,\n\
         # text as str) and returns the fields of a {name}.\n\n\n\
         def sample_loader(raw: dict) -> dict:\n    return dict(\n",
        name = sample.name
    );
    for field in sample.fields {
        let default = match field.default {
            Some(default) if field.optional => format!(" (default: {default})"),
            _ => String::new(),
        };
        text.push_str(&format!(
            "        {}=raw[\"TODO\"],  # {}{default}\n",
            field.name, field.type_name
        ));
    }
    let parts: Vec<String> = part_names.iter().map(|p| format!("{p:?}")).collect();
    let parts = match parts.len() {
        1 => format!("({},)", parts[0]),
        _ => format!("({})", parts.join(", ")),
    };
    text.push_str(&format!(
        "    )\n\n\ndef part_filter(part: str) -> bool:\n    \
         # The parts `sample_loader` reads (the others are not decoded).\n    \
         return part in {parts}\n"
    ));
    text
}

/// Writes a `sample_loader.py` to edit at `path`: a `sample_loader` returning `sample`'s fields
/// (each to be taken from a part) and a `part_filter` keeping `part_names`.
pub fn write_sample_loader_template(
    path: &Path,
    sample: &SampleTypeInfo,
    part_names: &[String],
) -> Result<()> {
    fsutil::atomic_write(path, sample_loader_template(sample, part_names).as_bytes())
}

/// Writes the `dataset.yaml` of a built-in sample type whose samples the `sample_loader.py`
/// beside it builds.
pub fn write_sample_loader_dataset_yaml(path: &Path, sample_type: &str) -> Result<()> {
    let loading = SampleLoading::Custom {
        sample_loader: format!("{SAMPLE_LOADER_FILE}:sample_loader"),
        part_filter: PartFilter::Function(format!("{SAMPLE_LOADER_FILE}:part_filter")),
    };
    write_dataset_config(path, &DatasetConfig::standard(sample_type, loading))
}

/// The YAML text of `config` as Energon's prepare writes it (`yaml.dump(sort_keys=False)`).
pub fn dataset_config_bytes(config: &DatasetConfig) -> String {
    yaml::dump_yaml(&config.to_value(), DumpOptions { sort_keys: false })
}

impl DatasetConfig {
    /// The crude form prepare writes for `--sample-type CrudeWebdataset`.
    pub fn crude() -> Self {
        DatasetConfig::Crude(CrudeConfig { part_filter: None, subflavors: None, extra: Map::new() })
    }

    /// The standard form prepare writes: a built-in sample type and its loading.
    pub fn standard(sample_type: &str, loading: SampleLoading) -> Self {
        DatasetConfig::Standard(StandardConfig {
            sample_type: ClassRef {
                module: ENERGON_MODULE.to_owned(),
                class: sample_type.to_owned(),
            },
            loading,
            subflavors: None,
            extra: Map::new(),
        })
    }

    /// Whether the samples are crude: made by Python code in a map stage of their own (a crude
    /// dataset's by the task encoder's cookers, a custom `sample_loader`'s by that function),
    /// not by a field map. The one rule for a dataset and a metadataset's leaf (a JSONL file,
    /// which has no config, is crude too).
    pub fn yields_crude(&self) -> bool {
        match self {
            DatasetConfig::Crude(_) => true,
            DatasetConfig::Standard(c) => matches!(c.loading, SampleLoading::Custom { .. }),
            DatasetConfig::Legacy(c) => matches!(c.loading, SampleLoading::Custom { .. }),
        }
    }

    /// `subflavors`, whatever the form.
    pub fn subflavors(&self) -> Option<&Map<String, Value>> {
        match self {
            DatasetConfig::Standard(c) => c.subflavors.as_ref(),
            DatasetConfig::Crude(c) => c.subflavors.as_ref(),
            DatasetConfig::Legacy(c) => c.subflavors.as_ref(),
        }
    }

    /// Loader argument overrides, whatever the form.
    pub fn extra(&self) -> &Map<String, Value> {
        match self {
            DatasetConfig::Standard(c) => &c.extra,
            DatasetConfig::Crude(c) => &c.extra,
            DatasetConfig::Legacy(c) => &c.extra,
        }
    }

    /// The mapping written to YAML, keys in the order prepare writes them.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        let class_ref = |module: &str, class: &str| {
            let mut m = Map::new();
            m.insert("__module__".to_owned(), Value::String(module.to_owned()));
            m.insert("__class__".to_owned(), Value::String(class.to_owned()));
            m
        };
        let (subflavors, extra) = match self {
            DatasetConfig::Standard(c) => {
                obj.insert(
                    "sample_type".to_owned(),
                    Value::Object(class_ref(&c.sample_type.module, &c.sample_type.class)),
                );
                insert_loading(&mut obj, &c.loading);
                (&c.subflavors, &c.extra)
            }
            DatasetConfig::Crude(c) => {
                obj = class_ref(ENERGON_MODULE, CRUDE_CLASS);
                if let Some(filter) = &c.part_filter {
                    obj.insert("part_filter".to_owned(), part_filter_value(filter));
                }
                (&c.subflavors, &c.extra)
            }
            DatasetConfig::Legacy(c) => {
                obj = class_ref(ENERGON_MODULE, &c.class);
                insert_loading(&mut obj, &c.loading);
                (&c.subflavors, &c.extra)
            }
        };
        if let Some(subflavors) = subflavors {
            obj.insert("subflavors".to_owned(), Value::Object(subflavors.clone()));
        }
        for (key, value) in extra {
            obj.insert(key.clone(), value.clone());
        }
        Value::Object(obj)
    }

    /// Reads and validates a parsed `dataset.yaml`; `path` is named in errors.
    pub fn from_value(value: &Value, path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::BadMetadata { path: path.to_owned(), reason };
        let Value::Object(obj) = value else {
            return Err(bad(format!("expected a mapping, found {}", kind_of(value))));
        };
        let mut obj = obj.clone();
        let module = take_string(&mut obj, "__module__").map_err(bad)?;
        let class = take_string(&mut obj, "__class__").map_err(bad)?;
        let class = match (module, class) {
            (None, None) => None,
            (Some(module), Some(class)) if is_energon_module(&module) => Some(class),
            (Some(module), Some(class)) => {
                return Err(bad(format!("unsupported dataset class {module}.{class}")));
            }
            _ => return Err(bad("__module__ and __class__ must be given together".to_owned())),
        };
        let subflavors = match obj.shift_remove("subflavors") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => {
                return Err(bad(format!(
                    "subflavors: expected a mapping, found {}",
                    kind_of(&other)
                )));
            }
        };
        let part_filter = match obj.shift_remove("part_filter") {
            None | Some(Value::Null) => None,
            Some(v) => Some(parse_part_filter(&v).map_err(bad)?),
        };
        let config = match class.as_deref() {
            None | Some("StandardWebdatasetFactory") => {
                let sample_type =
                    parse_sample_type(obj.shift_remove("sample_type")).map_err(bad)?;
                let loading =
                    parse_loading(&mut obj, part_filter, sample_type.builtin_sample_type())
                        .map_err(bad)?;
                check_extra(&obj).map_err(bad)?;
                DatasetConfig::Standard(StandardConfig {
                    sample_type,
                    loading,
                    subflavors,
                    extra: obj,
                })
            }
            Some(CRUDE_CLASS) => {
                for forbidden in ["sample_loader", "field_map"] {
                    if obj.contains_key(forbidden) {
                        return Err(bad(format!("{forbidden} is not allowed with {CRUDE_CLASS}")));
                    }
                }
                check_extra(&obj).map_err(bad)?;
                DatasetConfig::Crude(CrudeConfig { part_filter, subflavors, extra: obj })
            }
            Some(legacy) => {
                let Some(&(class, type_name)) = LEGACY_CLASSES.iter().find(|(c, _)| *c == legacy)
                else {
                    return Err(bad(format!("unsupported dataset class {legacy:?}")));
                };
                let sample_type =
                    sample_type_info(type_name).expect("every legacy class names a known type");
                let loading =
                    parse_loading(&mut obj, part_filter, Some(sample_type)).map_err(bad)?;
                check_extra(&obj).map_err(bad)?;
                DatasetConfig::Legacy(LegacyConfig {
                    class: class.to_owned(),
                    sample_type,
                    loading,
                    subflavors,
                    extra: obj,
                })
            }
        };
        Ok(config)
    }
}

fn is_energon_module(module: &str) -> bool {
    module == ENERGON_MODULE || module.starts_with("megatron.energon.")
}

fn insert_loading(obj: &mut Map<String, Value>, loading: &SampleLoading) {
    match loading {
        SampleLoading::FieldMap(map) => {
            let fields: Map<String, Value> = map
                .0
                .iter()
                .map(|(k, spec)| (k.clone(), Value::String(spec.raw.clone())))
                .collect();
            obj.insert("field_map".to_owned(), Value::Object(fields));
        }
        SampleLoading::Custom { sample_loader, part_filter } => {
            obj.insert("sample_loader".to_owned(), Value::String(sample_loader.clone()));
            obj.insert("part_filter".to_owned(), part_filter_value(part_filter));
        }
    }
}

fn part_filter_value(filter: &PartFilter) -> Value {
    match filter {
        PartFilter::Names(names) => {
            Value::Array(names.iter().cloned().map(Value::String).collect())
        }
        PartFilter::Function(f) => Value::String(f.clone()),
    }
}

/// Removes `key` and returns it as a string (`None` when absent).
fn take_string(obj: &mut Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.shift_remove(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("{key}: expected a string, found {}", kind_of(&other))),
    }
}

fn parse_sample_type(value: Option<Value>) -> Result<ClassRef, String> {
    let Some(value) = value else {
        return Err("missing sample_type (or __module__/__class__ of a dataset class)".to_owned());
    };
    let Value::Object(mut obj) = value else {
        return Err(format!("sample_type: expected a mapping, found {}", kind_of(&value)));
    };
    let module = take_string(&mut obj, "__module__").map_err(|e| format!("sample_type.{e}"))?;
    let class = take_string(&mut obj, "__class__").map_err(|e| format!("sample_type.{e}"))?;
    if let Some(key) = obj.keys().next() {
        return Err(format!("sample_type: unknown key {key:?}"));
    }
    match (module, class) {
        (Some(module), Some(class)) => {
            let res = ClassRef { module, class };
            if is_energon_module(&res.module) && res.builtin_sample_type().is_none() {
                return Err(format!("sample_type: unknown sample class {:?}", res.class));
            }
            Ok(res)
        }
        _ => Err("sample_type needs __module__ and __class__".to_owned()),
    }
}

fn parse_part_filter(value: &Value) -> Result<PartFilter, String> {
    match value {
        Value::String(s) => Ok(PartFilter::Function(s.clone())),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!("part_filter: expected part names, found {}", kind_of(other))),
            })
            .collect::<Result<_, _>>()
            .map(PartFilter::Names),
        other => Err(format!("part_filter: expected a string or a list, found {}", kind_of(other))),
    }
}

/// Reads `field_map` or `sample_loader` (+ `part_filter`) and enforces Energon's rules.
fn parse_loading(
    obj: &mut Map<String, Value>,
    part_filter: Option<PartFilter>,
    sample_type: Option<&SampleTypeInfo>,
) -> Result<SampleLoading, String> {
    let field_map = obj.shift_remove("field_map").filter(|v| !v.is_null());
    let sample_loader = take_string(obj, "sample_loader")?;
    match (field_map, sample_loader) {
        (Some(_), Some(_)) | (None, None) => {
            Err("exactly one of field_map and sample_loader must be given".to_owned())
        }
        (Some(map), None) => {
            if part_filter.is_some() {
                return Err("part_filter is not allowed with field_map".to_owned());
            }
            let Value::Object(map) = map else {
                return Err(format!("field_map: expected a mapping, found {}", kind_of(&map)));
            };
            let mut pairs = Vec::with_capacity(map.len());
            for (field, spec) in map {
                let Value::String(spec) = spec else {
                    return Err(format!(
                        "field_map.{field}: expected a string, found {}",
                        kind_of(&spec)
                    ));
                };
                if let Some(t) = sample_type
                    && !t.has_field(&field)
                {
                    return Err(format!(
                        "field_map does not map to type {} fields: {field:?}",
                        t.name
                    ));
                }
                pairs.push((field, spec));
            }
            Ok(SampleLoading::FieldMap(FieldMap::from_pairs(pairs)))
        }
        (None, Some(sample_loader)) => {
            let part_filter =
                part_filter.ok_or("part_filter must be given with sample_loader".to_owned())?;
            Ok(SampleLoading::Custom { sample_loader, part_filter })
        }
    }
}

/// Rejects keys that no loader accepts (Energon's strict parser fails on them too).
fn check_extra(obj: &Map<String, Value>) -> Result<(), String> {
    match obj.keys().find(|k| !LOADER_KEYS.contains(&k.as_str())) {
        Some(key) => Err(format!("unknown key {key:?}")),
        None => Ok(()),
    }
}
