//! Typed sample reading: a dataset plus its `dataset.yaml` (sample type, field map, subflavors)
//! and a decoder.

use std::{path::Path, sync::Arc};

use energon_index::{
    DATASET_YAML, NV_META,
    dataset_config::{
        ClassRef, DatasetConfig, FieldMap, PartFilter as ConfigPartFilter, SampleLoading,
    },
    discover::{DatasetKind, classify},
};
use serde_json::{Map, Value};

use crate::{
    Dataset, Error, OpenOptions, Result,
    decode::Decoder,
    field_map::{FieldSource, PartUses},
    raw::{PartFilter, RawSample},
    sample::{CrudeSample, FieldsSample, Sample, SampleMeta},
};

/// How to open a [`SampleReader`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReaderOptions {
    /// The split part (`train`, `val`, ...); ignored for JSONL files.
    pub split_part: String,
    /// The split file inside `.nv-meta/` (`None`: `split.yaml`, else `split.json`).
    pub split_config: Option<String>,
    /// The dataset file inside `.nv-meta/` (`None`: `dataset.yaml`).
    pub dataset_config: Option<String>,
    /// How parts are decoded; `None` keeps every part as raw bytes (the reference's
    /// `decoder=None`).
    pub decoder: Option<Decoder>,
    /// Subflavors given by the caller (a metadataset); `dataset.yaml`'s own `subflavors`, when
    /// present, replace them.
    pub subflavors: Option<Map<String, Value>>,
    /// How many shard maps to keep open at most.
    pub max_open_shards: usize,
    /// Whether a field map may give a built-in type's field a value of another type, as the
    /// reference's Python dataclasses allow (`answers: json[1][value]`, a string where a list
    /// is declared): such a sample is then a [`Sample::Fields`] of the built-in class. Off, it
    /// is an [`Error::Field`].
    pub loose_fields: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            split_part: "train".to_owned(),
            split_config: None,
            dataset_config: None,
            decoder: Some(Decoder::default()),
            subflavors: None,
            max_open_shards: OpenOptions::default().max_open_shards,
            loose_fields: false,
        }
    }
}

/// How samples are built from raw samples.
#[derive(Debug, Clone)]
enum Build {
    /// A built-in sample type filled by a field map; with `loose` a sample whose values do not
    /// fit the type's fields is built as [`Build::Fields`] of the same class.
    Typed { type_name: &'static str, field_map: FieldMap, uses: PartUses, loose: bool },
    /// Another class, filled by a field map: [`Sample::Fields`].
    Fields { class: Arc<ClassRef>, field_map: FieldMap, uses: PartUses },
    /// A crude sample: every part read, decoded.
    Crude,
}

/// Reads typed (or crude) samples of one split part of a dataset.
///
/// Only the parts the field map names (or the crude part filter allows) are read, and each is
/// decoded once, on the thread that calls [`read`](Self::read).
#[derive(Debug)]
pub struct SampleReader {
    dataset: Arc<Dataset>,
    build: Build,
    decoder: Option<Decoder>,
    subflavors: Option<Arc<Map<String, Value>>>,
    config: Option<DatasetConfig>,
    custom_loader: Option<String>,
}

impl SampleReader {
    /// Opens the dataset at `path` (a prepared WebDataset folder or a JSONL file) with its
    /// `dataset.yaml`.
    ///
    /// A `dataset.yaml` may override `split_part` and `split_config`, as in the reference.
    /// JSONL files are always crude. A custom Python `sample_loader` cannot run here: such a
    /// dataset is read as crude samples of its `part_filter` (see
    /// [`custom_loader`](Self::custom_loader)). A sample type from another Python module than
    /// `megatron.energon` with a field map gives [`Sample::Fields`] of that class (see
    /// [`sample_class`](Self::sample_class)).
    pub fn open(path: &Path, options: &ReaderOptions) -> Result<Self> {
        let mut open = OpenOptions {
            split_part: options.split_part.clone(),
            split_config: options.split_config.clone(),
            part_filter: PartFilter::All,
            max_open_shards: options.max_open_shards,
        };
        if classify(path)? != DatasetKind::WebDataset {
            let dataset = Dataset::open(path, &open)?;
            return Ok(Self::crude(Arc::new(dataset), options));
        }
        let config_name = options.dataset_config.as_deref().unwrap_or(DATASET_YAML);
        let config_path = path.join(NV_META).join(config_name);
        if !energon_index::storage::is_file(&config_path) {
            return Err(Error::Unsupported {
                path: config_path,
                reason: "no dataset config: write one (energon prepare asks for it) or read the \
                         raw samples with Dataset::open"
                    .to_owned(),
            });
        }
        let config = energon_index::dataset_config::read_dataset_config(&config_path)?;
        // COMPAT(energon 7.4): dataset_config.py:get_dataset_from_config merges dataset.yaml
        // over the loader's arguments, so it can override the split part and split file.
        if let Some(Value::String(part)) = config.extra().get("split_part") {
            open.split_part.clone_from(part);
        }
        if let Some(Value::String(split)) = config.extra().get("split_config") {
            open.split_config = Some(split.clone());
        }
        open.part_filter = config_part_filter(&config);
        let build = config_build(&config, options.loose_fields);
        // COMPAT(energon 7.4): dataset.yaml's `subflavors` key replaces the caller's.
        let subflavors = config.subflavors().cloned().or_else(|| options.subflavors.clone());
        let custom_loader = custom_loader_of(&config);
        let dataset = Dataset::open(path, &open)?;
        Ok(SampleReader {
            dataset: Arc::new(dataset),
            build,
            decoder: options.decoder,
            subflavors: subflavors.map(Arc::new),
            config: Some(config),
            custom_loader,
        })
    }

    /// Crude samples of an already opened dataset (JSONL files, crude WebDatasets, cookers).
    pub fn crude(dataset: Arc<Dataset>, options: &ReaderOptions) -> Self {
        SampleReader {
            dataset,
            build: Build::Crude,
            decoder: options.decoder,
            subflavors: options.subflavors.clone().map(Arc::new),
            config: None,
            custom_loader: None,
        }
    }

    /// The dataset read.
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }

    /// The parsed `dataset.yaml` (`None` for JSONL files).
    pub fn config(&self) -> Option<&DatasetConfig> {
        self.config.as_ref()
    }

    /// The reference class of the samples (`CaptioningSample`, `CrudeSample`, ...; a user's
    /// class by its name).
    pub fn sample_type(&self) -> &str {
        match &self.build {
            Build::Typed { type_name, .. } => type_name,
            Build::Fields { class, .. } => &class.class,
            Build::Crude => "CrudeSample",
        }
    }

    /// Whether the samples are crude, to be made by Python code or cooked by the task
    /// encoder's cookers in a map stage of their own: a JSONL file, a crude dataset, a custom
    /// `sample_loader` ([`DatasetConfig::yields_crude`]).
    pub fn is_crude(&self) -> bool {
        self.config.as_ref().is_none_or(DatasetConfig::yields_crude)
    }

    /// The class of the samples when it is not a built-in type: the samples are
    /// [`Sample::Fields`], for the caller to build the class from.
    pub fn sample_class(&self) -> Option<&ClassRef> {
        match &self.build {
            Build::Fields { class, .. } => Some(class),
            _ => None,
        }
    }

    /// The custom `sample_loader` of `dataset.yaml`, which energon-rs cannot run: its samples
    /// are read as crude samples instead.
    pub fn custom_loader(&self) -> Option<&str> {
        self.custom_loader.as_deref()
    }

    /// The subflavors attached to every sample.
    pub fn subflavors(&self) -> Option<&Map<String, Value>> {
        self.subflavors.as_deref()
    }

    /// Number of samples, excluded ones included.
    pub fn len(&self) -> u64 {
        self.dataset.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads, decodes and builds sample `index`; `Ok(None)` for an excluded sample.
    pub fn read(&self, index: u64) -> Result<Option<Sample>> {
        match self.dataset.read(index)? {
            Some(raw) => self.build(&raw).map(Some),
            None => Ok(None),
        }
    }

    /// Decodes and builds a raw sample of this dataset.
    ///
    /// Errors: [`Error::Decode`] for a part that cannot be decoded, [`Error::Field`] for a field
    /// the field map cannot fill (a missing part or key, a value of the wrong type).
    pub fn build(&self, raw: &RawSample) -> Result<Sample> {
        let meta = || {
            SampleMeta::new(
                raw.key.clone(),
                raw.index,
                self.subflavors.clone(),
                vec![raw.source_info()],
            )
        };
        match &self.build {
            Build::Typed { type_name, field_map, uses, loose } => {
                let mut src = FieldSource::new(raw, self.decoder.as_ref(), field_map, uses);
                match Sample::build_typed(type_name, meta(), &mut src)
                    .expect("type names come from the built-in sample types")
                {
                    // A value of another type than the field's: the class with the values as
                    // they are (rare: the metadata is made again rather than kept for it).
                    Err(Error::Field { .. }) if *loose && src.mismatched() => {
                        let class = ClassRef {
                            module: "megatron.energon".to_owned(),
                            class: (*type_name).to_owned(),
                        };
                        let mut src = FieldSource::new(raw, self.decoder.as_ref(), field_map, uses);
                        let fields = src.all()?;
                        let class = Arc::new(class);
                        Ok(Sample::Fields(FieldsSample { meta: meta(), class, fields }))
                    }
                    res => res,
                }
            }
            Build::Fields { class, field_map, uses } => {
                let mut src = FieldSource::new(raw, self.decoder.as_ref(), field_map, uses);
                let fields = src.all()?;
                Ok(Sample::Fields(FieldsSample { meta: meta(), class: Arc::clone(class), fields }))
            }
            Build::Crude => {
                let mut parts = Vec::with_capacity(raw.parts.len());
                for part in &raw.parts {
                    let value = match &self.decoder {
                        Some(decoder) => {
                            decoder.try_decode(&part.name, &part.data).map_err(|e| {
                                let at = crate::SampleAt {
                                    dataset: raw.dataset.to_path_buf(),
                                    shard: raw.shard.to_string(),
                                    key: Some(raw.key.clone()),
                                    index: Some(raw.index),
                                    offset: part.offset,
                                };
                                Error::decode(at, &part.name, e)
                            })?
                        }
                        None => crate::Decoded::Bytes(part.data.clone()),
                    };
                    parts.push((part.name.clone(), value));
                }
                Ok(Sample::Crude(CrudeSample { meta: meta(), shard: raw.shard.clone(), parts }))
            }
        }
    }
}

/// How the samples of a dataset config are built: a field map fills a built-in type (typed
/// fields; with `loose`, see [`ReaderOptions::loose_fields`]) or another class
/// ([`Sample::Fields`]); a custom loader's samples, and a crude dataset's, stay crude.
fn config_build(config: &DatasetConfig, loose: bool) -> Build {
    let (loading, builtin, class) = match config {
        DatasetConfig::Standard(c) => {
            (&c.loading, c.sample_type.builtin_sample_type().map(|t| t.name), &c.sample_type)
        }
        DatasetConfig::Legacy(c) => return legacy_build(&c.loading, c.sample_type.name, loose),
        DatasetConfig::Crude(_) => return Build::Crude,
    };
    let SampleLoading::FieldMap(field_map) = loading else { return Build::Crude };
    let (uses, field_map) = (PartUses::of(field_map), field_map.clone());
    match builtin {
        Some(type_name) => Build::Typed { type_name, field_map, uses, loose },
        None => Build::Fields { class: Arc::new(class.clone()), field_map, uses },
    }
}

fn legacy_build(loading: &SampleLoading, type_name: &'static str, loose: bool) -> Build {
    match loading {
        SampleLoading::FieldMap(field_map) => {
            let uses = PartUses::of(field_map);
            Build::Typed { type_name, field_map: field_map.clone(), uses, loose }
        }
        SampleLoading::Custom { .. } => Build::Crude,
    }
}

/// The parts a dataset config reads: those its field map names, or its part filter's names; all
/// where a Python function decides (energon-rs reads every part then). The one rule for every
/// reader of a dataset (metadataset leaves and joins too).
pub fn config_part_filter(config: &DatasetConfig) -> PartFilter {
    let names = |filter: &ConfigPartFilter| match filter {
        ConfigPartFilter::Names(names) => PartFilter::names(names.iter().cloned()),
        ConfigPartFilter::Function(_) => PartFilter::All,
    };
    let loading = match config {
        DatasetConfig::Standard(c) => &c.loading,
        DatasetConfig::Legacy(c) => &c.loading,
        DatasetConfig::Crude(c) => return c.part_filter.as_ref().map_or(PartFilter::All, names),
    };
    match loading {
        SampleLoading::FieldMap(field_map) => PartFilter::Names(field_map.part_filter()),
        SampleLoading::Custom { part_filter, .. } => names(part_filter),
    }
}

/// The Python function of a dataset config that energon-rs cannot run: its `sample_loader`, or
/// a crude dataset's `part_filter` function (see [`SampleReader::custom_loader`]).
fn custom_loader_of(config: &DatasetConfig) -> Option<String> {
    let loading = match config {
        DatasetConfig::Standard(c) => &c.loading,
        DatasetConfig::Legacy(c) => &c.loading,
        DatasetConfig::Crude(c) => {
            return match &c.part_filter {
                Some(ConfigPartFilter::Function(function)) => Some(function.clone()),
                _ => None,
            };
        }
    };
    match loading {
        SampleLoading::Custom { sample_loader, .. } => Some(sample_loader.clone()),
        SampleLoading::FieldMap(_) => None,
    }
}

#[cfg(test)]
mod tests;
