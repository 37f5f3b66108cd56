//! Metadatasets in the Python pipeline: energon-mix's plan (leaves, slicing, blend weights and
//! repetitions) with one way per leaf from a read sample to a pipeline item.
//!
//! Each leaf builds its samples with its own [`SampleReader`] (its `dataset.yaml`, the decoder,
//! the subflavors the metadataset gives it) and, for crude leaves, cooks them with the cooker the
//! task encoder picks for the leaf's subflavors and auxiliary sources. Joins build every joined
//! dataset's sample and combine them with the metadataset's joiner, in Python.
//!
//! The pipeline itself is energon-cook's (`LoaderBuilder::with_leaves`): this module only
//! gives it each leaf's way to items ([`MixSource::leaf_loads`]).

use std::sync::Arc;

use energon_cook::{HookError, LeafLoad as CookLeafLoad};
use energon_mix::{
    LeafKind, LeafSample, MixPlan, PlannedLeaf, grammar::Joiner, join::JoinedSample,
};
use energon_reader::{Decoder, ReaderOptions, Sample, SampleMeta, SampleReader};
use pyo3::{prelude::*, types::PyList};
use serde_json::{Map as JsonMap, Value};

use crate::{
    convert::Converter,
    dataset::check_sample_class,
    encoder::PyEncoder,
    errors::to_py_err,
    file_store::PyFileStore,
    hooks::{Hooks, Item},
    sample::sample_to_py,
};

/// How many shard maps a leaf's own reader keeps open: it only builds samples (the plan's
/// datasets read them), so it never maps a shard.
const BUILD_ONLY_OPEN_SHARDS: usize = 1;

/// A metadataset split planned for one rank, with each leaf's way to items.
pub(crate) struct MixSource {
    plan: MixPlan,
    leaves: Vec<Arc<LeafLoad>>,
}

/// How one leaf turns what it reads into items.
struct LeafLoad {
    build: LeafBuild,
    /// Whether the leaf yields crude samples (cooked in a map stage of their own).
    crude: bool,
    /// The cooker chosen for the leaf (crude leaves with cookers only).
    cook: Option<Arc<Py<PyAny>>>,
    hooks: Arc<Hooks>,
}

enum LeafBuild {
    /// A WebDataset or JSONL leaf; `subflavors` replaces what the reader sets when they differ.
    Sample { reader: Box<SampleReader>, subflavors: Subflavors },
    /// A join: one reader (and subflavors) per joined dataset, and the joiner.
    Join { readers: Vec<(SampleReader, Subflavors)>, joiner: Py<PyAny> },
}

impl MixSource {
    /// Opens every leaf's sample builder, and asks the task encoder (`hooks`) for each crude
    /// leaf's cooker and each join's joiner.
    pub(crate) fn new(
        py: Python<'_>,
        plan: MixPlan,
        decoder: Option<Decoder>,
        hooks: &Arc<Hooks>,
    ) -> PyResult<Self> {
        let mut leaves = Vec::with_capacity(plan.leaves.len());
        for planned in &plan.leaves {
            let build = py.detach(|| leaf_build(planned, decoder)).map_err(|e| to_py_err(&e))?;
            let build = match build {
                Built::Sample(reader, subflavors) => {
                    check_sample_class(py, &reader)?;
                    LeafBuild::Sample { reader, subflavors }
                }
                Built::Join(readers, joiner) => {
                    for (reader, _) in &readers {
                        check_sample_class(py, reader)?;
                    }
                    let joiner = hooks.make_joiner(py, joiner, names_of(planned))?;
                    LeafBuild::Join { readers, joiner }
                }
            };
            let cook = match (&build, planned.crude) {
                (LeafBuild::Sample { reader, subflavors }, true) => {
                    let subflavors = subflavors.as_deref().or(reader.subflavors());
                    let aux = planned
                        .leaf
                        .aux
                        .iter()
                        .map(|(name, source)| Ok((name.clone(), PyFileStore::of_aux(source)?)))
                        .collect::<PyResult<Vec<_>>>()?;
                    let jsonl = matches!(planned.leaf.kind, LeafKind::Jsonl);
                    let primary = (planned.leaf.path.clone(), jsonl);
                    hooks.make_cook(py, subflavors, aux, primary)?.map(Arc::new)
                }
                _ => None,
            };
            let crude = planned.crude;
            leaves.push(Arc::new(LeafLoad { build, crude, cook, hooks: Arc::clone(hooks) }));
        }
        Ok(MixSource { plan, leaves })
    }

    /// The plan.
    pub(crate) fn plan(&self) -> &MixPlan {
        &self.plan
    }

    /// The reference's class name of the samples, if every leaf yields the same type.
    pub(crate) fn sample_type(&self) -> Option<&str> {
        let mut types = self.leaves.iter().map(|l| match &l.build {
            LeafBuild::Sample { reader, .. } => Some(reader.sample_type()),
            LeafBuild::Join { .. } => None,
        });
        let first = types.next().flatten()?;
        types.all(|t| t == Some(first)).then_some(first)
    }

    /// How each leaf turns what it reads into items, in the plan's order, for energon-cook's
    /// builder: the leaf's own sample builder (its `dataset.yaml`, the decoder, its
    /// subflavors) or join, and for crude leaves the cooker the task encoder chose.
    pub(crate) fn leaf_loads(&self, encoder: &PyEncoder) -> Vec<CookLeafLoad<Item>> {
        self.leaves
            .iter()
            .map(|leaf| {
                let load = Arc::clone(leaf);
                let res = CookLeafLoad::new(move |sample| load.load(sample));
                if leaf.crude { res.cooker(encoder.cooker(leaf.cook.clone())) } else { res }
            })
            .collect()
    }
}

/// The names of a join's datasets, when the join is a mapping.
fn names_of(planned: &PlannedLeaf) -> Option<Vec<String>> {
    match &planned.leaf.kind {
        LeafKind::Joined(spec) if spec.named => {
            Some(spec.sources.iter().map(|s| s.name.clone().unwrap_or_default()).collect())
        }
        _ => None,
    }
}

type Subflavors = Option<Arc<JsonMap<String, Value>>>;

/// A leaf's sample builders, opened without the GIL.
enum Built {
    Sample(Box<SampleReader>, Subflavors),
    Join(Vec<(SampleReader, Subflavors)>, Joiner),
}

fn leaf_build(planned: &PlannedLeaf, decoder: Option<Decoder>) -> energon_reader::Result<Built> {
    let leaf = &planned.leaf;
    let options = |split_part: &str, split_config: &Option<String>, dataset_config| ReaderOptions {
        split_part: split_part.to_owned(),
        split_config: split_config.clone(),
        dataset_config,
        decoder,
        subflavors: None,
        max_open_shards: BUILD_ONLY_OPEN_SHARDS,
        // Python's sample classes take what a field map gives, as the reference's do.
        loose_fields: true,
    };
    Ok(match (&leaf.kind, planned.data.dataset()) {
        (LeafKind::Jsonl, Some(dataset)) => {
            let reader = SampleReader::crude(dataset, &options("", &None, None));
            // COMPAT(energon 7.4.1): a leaf's samples carry a dict of subflavors, empty if none.
            Built::Sample(Box::new(reader), Some(Arc::new(leaf.sample_subflavors(None))))
        }
        (LeafKind::Joined(spec), _) => {
            let mut readers = Vec::with_capacity(spec.sources.len());
            for source in &spec.sources {
                let opts = options(
                    &source.split_part,
                    &source.split_config,
                    source.dataset_config.clone(),
                );
                let reader = SampleReader::open(&source.path, &opts)?;
                let mut subflavors = dataset_subflavors(&reader);
                for (k, v) in source.subflavors.iter().flatten() {
                    subflavors.insert(k.clone(), v.clone());
                }
                readers.push((reader, Some(Arc::new(subflavors))));
            }
            Built::Join(readers, spec.joiner.clone())
        }
        _ => {
            let opts = options(&leaf.split_part, &leaf.split_config, leaf.dataset_config.clone());
            let reader = SampleReader::open(&leaf.path, &opts)?;
            // COMPAT(energon 7.4.1): dataset_config.py:get_dataset_from_config updates the
            // dataset's own subflavors with the metadataset's.
            let subflavors = leaf.sample_subflavors(Some(&dataset_subflavors(&reader)));
            Built::Sample(Box::new(reader), Some(Arc::new(subflavors)))
        }
    })
}

/// The subflavors of a dataset's own `dataset.yaml` (empty if none).
fn dataset_subflavors(reader: &SampleReader) -> JsonMap<String, Value> {
    reader.config().and_then(|c| c.subflavors()).cloned().unwrap_or_default()
}

impl LeafLoad {
    /// Builds the item of a sample read from this leaf; `None` when the joiner skipped it. A
    /// sample that cannot be built goes to the error handler first, then energon-cook's error
    /// policy drops it (the reference's `load_sample` stage), or stops after too many in a row.
    fn load(&self, sample: LeafSample) -> energon_cook::Result<Option<Item>> {
        let res = match (&self.build, &sample) {
            (LeafBuild::Sample { reader, subflavors }, LeafSample::Raw(raw)) => reader
                .build(raw)
                .and_then(|s| with_subflavors(s, subflavors))
                .map(|s| Some(Item::Rust(s)))
                .map_err(energon_cook::Error::from),
            (LeafBuild::Join { readers, joiner }, LeafSample::Joined(joined)) => {
                self.join(readers, joiner, joined)
            }
            (_, sample) => Err(energon_reader::Error::Unsupported {
                path: sample_path(sample),
                reason: "a joined sample from a leaf that is not a join, or the reverse".to_owned(),
            }
            .into()),
        };
        // (A joiner's own failure has been reported when it was classified.)
        if let Err(err) = &res
            && err.is_sample_error()
            && !matches!(err, energon_cook::Error::Hook { .. })
        {
            let source = match &sample {
                LeafSample::Raw(raw) => raw.source_info(),
                LeafSample::Joined(joined) => joined.primary().source_info(),
            };
            self.hooks.report_sample_error(err, source)?;
        }
        res
    }

    /// The joiner applied to the samples of every joined dataset (`None` where a dataset has
    /// none for the key); `None` when the joiner skipped the sample.
    fn join(
        &self,
        readers: &[(SampleReader, Subflavors)],
        joiner: &Py<PyAny>,
        joined: &JoinedSample,
    ) -> energon_cook::Result<Option<Item>> {
        let mut samples = Vec::with_capacity(readers.len());
        for ((reader, subflavors), raw) in readers.iter().zip(joined.samples()) {
            samples.push(match raw {
                Some(raw) => Some(with_subflavors(reader.build(raw)?, subflavors)?),
                None => None,
            });
        }
        let row = joined.row;
        Python::attach(|py| -> PyResult<energon_cook::Result<Option<Item>>> {
            let conv = Converter::new(py, self.hooks.output())?;
            let list = PyList::empty(py);
            for sample in samples {
                match sample {
                    Some(s) => list.append(sample_to_py(&conv, s, None)?)?,
                    None => list.append(py.None())?,
                }
            }
            let key = (energon_reader::RESTORE_KEY_KIND, row).into_pyobject(py)?;
            let joiner = joiner.bind(py);
            Ok(match joiner.call1((&list, key)) {
                Ok(out) => Ok(Some(Item::Py(out.unbind()))),
                Err(err) => {
                    match self.hooks.errors().classify(py, err, joiner, Some(list.as_any())) {
                        HookError::Skip => Ok(None),
                        // The error handler has seen it: the error policy counts it.
                        HookError::Failed(source) => Err(energon_cook::Error::Hook {
                            hook: "join",
                            sample: row_key(row),
                            source,
                        }),
                        HookError::Fatal(source) => Err(energon_cook::Error::Fatal {
                            hook: "join",
                            sample: row_key(row),
                            source,
                        }),
                    }
                }
            })
        })
        .map_err(|err| self.hooks.fail(err))?
    }
}

/// A joined row as the error policy names it.
fn row_key(row: u64) -> String {
    format!("({:?}, {row})", energon_reader::RESTORE_KEY_KIND)
}

fn sample_path(sample: &LeafSample) -> std::path::PathBuf {
    match sample {
        LeafSample::Raw(raw) => raw.dataset.to_path_buf(),
        LeafSample::Joined(joined) => joined.primary().dataset.to_path_buf(),
    }
}

/// The sample with these subflavors, when given.
fn with_subflavors(mut sample: Sample, subflavors: &Subflavors) -> energon_reader::Result<Sample> {
    let Some(subflavors) = subflavors else { return Ok(sample) };
    if sample.meta().subflavors.as_ref() == Some(subflavors) {
        return Ok(sample);
    }
    let type_name = sample.type_name().to_owned();
    let path = sample.meta().sources.first().map(|s| s.dataset_path.to_path_buf());
    match meta_mut(&mut sample) {
        Some(meta) => {
            meta.subflavors = Some(Arc::clone(subflavors));
            Ok(sample)
        }
        None => Err(energon_reader::Error::Unsupported {
            path: path.unwrap_or_default(),
            reason: format!("energon_rs cannot set the subflavors of a {type_name}"),
        }),
    }
}

/// The base fields of a sample, to change them.
fn meta_mut(sample: &mut Sample) -> Option<&mut SampleMeta> {
    macro_rules! variants {
        ($($variant:ident),*) => {
            match sample {
                $( Sample::$variant(s) => Some(&mut s.meta), )*
                _ => None,
            }
        };
    }
    variants!(
        Plain,
        Captioning,
        Image,
        ImageClassification,
        Interleaved,
        MultiChoiceVqa,
        Ocr,
        SimilarityInterleaved,
        Text,
        Vqa,
        VqaOcr,
        VidQa,
        Crude
    )
}
