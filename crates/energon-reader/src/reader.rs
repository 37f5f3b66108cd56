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
        let mut custom_loader = None;
        let mut build = match &config {
            DatasetConfig::Standard(c) => match (c.sample_type.builtin_sample_type(), &c.loading) {
                (Some(info), loading) => {
                    loading_build(info.name, loading, &mut open, &mut custom_loader)
                }
                (None, SampleLoading::FieldMap(field_map)) => {
                    open.part_filter = PartFilter::Names(field_map.part_filter());
                    Build::Fields {
                        class: Arc::new(c.sample_type.clone()),
                        field_map: field_map.clone(),
                        uses: PartUses::of(field_map),
                    }
                }
                // The class is the custom loader's business (see `custom_loader`).
                (None, loading) => loading_build("", loading, &mut open, &mut custom_loader),
            },
            DatasetConfig::Legacy(c) => {
                loading_build(c.sample_type.name, &c.loading, &mut open, &mut custom_loader)
            }
            DatasetConfig::Crude(c) => {
                open.part_filter = config_part_filter(c.part_filter.as_ref(), &mut custom_loader);
                Build::Crude
            }
        };
        // COMPAT(energon 7.4): dataset.yaml's `subflavors` key replaces the caller's.
        let subflavors = config.subflavors().cloned().or_else(|| options.subflavors.clone());
        if let Build::Typed { loose, .. } = &mut build {
            *loose = options.loose_fields;
        }
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
        let meta = SampleMeta::new(
            raw.key.clone(),
            raw.index,
            self.subflavors.clone(),
            vec![raw.source_info()],
        );
        match &self.build {
            Build::Typed { type_name, field_map, uses, loose } => {
                let mut src = FieldSource::new(raw, self.decoder.as_ref(), field_map, uses);
                let res = Sample::build_typed(type_name, meta.clone(), &mut src)
                    .expect("type names come from the built-in sample types");
                match res {
                    Err(Error::Field { .. }) if *loose && src.mismatched() => {
                        let class = ClassRef {
                            module: "megatron.energon".to_owned(),
                            class: (*type_name).to_owned(),
                        };
                        let mut src = FieldSource::new(raw, self.decoder.as_ref(), field_map, uses);
                        let fields = src.all()?;
                        Ok(Sample::Fields(FieldsSample { meta, class: Arc::new(class), fields }))
                    }
                    res => res,
                }
            }
            Build::Fields { class, field_map, uses } => {
                let mut src = FieldSource::new(raw, self.decoder.as_ref(), field_map, uses);
                let fields = src.all()?;
                Ok(Sample::Fields(FieldsSample { meta, class: Arc::clone(class), fields }))
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
                Ok(Sample::Crude(CrudeSample { meta, shard: raw.shard.clone(), parts }))
            }
        }
    }
}

/// The build for a field map or custom loader of sample type `type_name`; sets the part filter.
fn loading_build(
    type_name: &'static str,
    loading: &SampleLoading,
    open: &mut OpenOptions,
    custom_loader: &mut Option<String>,
) -> Build {
    match loading {
        SampleLoading::FieldMap(field_map) => {
            open.part_filter = PartFilter::Names(field_map.part_filter());
            let uses = PartUses::of(field_map);
            Build::Typed { type_name, field_map: field_map.clone(), uses, loose: false }
        }
        SampleLoading::Custom { sample_loader, part_filter } => {
            *custom_loader = Some(sample_loader.clone());
            open.part_filter = config_part_filter(Some(part_filter), custom_loader);
            Build::Crude
        }
    }
}

/// The part filter of `dataset.yaml`; a Python predicate cannot run here, so every part is read
/// and the predicate is reported through `custom_loader`.
fn config_part_filter(
    filter: Option<&ConfigPartFilter>,
    custom_loader: &mut Option<String>,
) -> PartFilter {
    match filter {
        None => PartFilter::All,
        Some(ConfigPartFilter::Names(names)) => PartFilter::names(names.iter().cloned()),
        Some(ConfigPartFilter::Function(function)) => {
            custom_loader.get_or_insert_with(|| function.clone());
            PartFilter::All
        }
    }
}

#[cfg(test)]
mod tests;
