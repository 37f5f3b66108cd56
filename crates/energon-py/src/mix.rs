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

use energon_cook::{HookError, LeafLoad as CookLeafLoad, LeafReader, Subflavors, with_subflavors};
use energon_mix::{LeafKind, LeafSample, MixPlan, join::JoinedSample};
use energon_reader::SampleReader;
use pyo3::{prelude::*, types::PyList};

use crate::{
    convert::Converter,
    dataset::check_sample_class,
    encoder::PyEncoder,
    file_store::PyFileStore,
    hooks::{Hooks, Item, Primary},
    sample::sample_to_py,
};

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
    /// A WebDataset or JSONL leaf; `subflavors` replaces what the reader sets.
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
        readers: Vec<LeafReader>,
        hooks: &Arc<Hooks>,
    ) -> PyResult<Self> {
        let mut leaves = Vec::with_capacity(plan.leaves.len());
        for (planned, reader) in plan.leaves.iter().zip(readers) {
            let build = match reader {
                LeafReader::Dataset { reader, subflavors } => {
                    check_sample_class(py, &reader)?;
                    LeafBuild::Sample { reader, subflavors }
                }
                LeafReader::Join { readers, joiner, names } => {
                    for (reader, _) in &readers {
                        check_sample_class(py, reader)?;
                    }
                    let joiner = hooks.make_joiner(py, joiner, names)?;
                    LeafBuild::Join { readers, joiner }
                }
            };
            let cook = match (&build, planned.crude) {
                (LeafBuild::Sample { subflavors, .. }, true) => {
                    let aux = planned
                        .leaf
                        .aux
                        .iter()
                        .map(|(name, source)| Ok((name.clone(), PyFileStore::of_aux(source)?)))
                        .collect::<PyResult<Vec<_>>>()?;
                    let primary = Primary {
                        path: planned.leaf.path.clone(),
                        jsonl: matches!(planned.leaf.kind, LeafKind::Jsonl),
                        dataset_config: planned.leaf.dataset_config.clone(),
                    };
                    hooks.make_cook(py, Some(subflavors), aux, primary)?.map(Arc::new)
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

impl LeafLoad {
    /// Builds the item of a sample read from this leaf; `None` when the joiner skipped it. A
    /// sample that cannot be built goes to the error handler first, then energon-cook's error
    /// policy drops it (the reference's `load_sample` stage), or stops after too many in a row.
    fn load(&self, sample: LeafSample) -> energon_cook::Result<Option<Item>> {
        let res = match (&self.build, &sample) {
            (LeafBuild::Sample { reader, subflavors }, LeafSample::Raw(raw)) => reader
                .build(raw)
                .map(|s| Some(Item::Rust(with_subflavors(s, subflavors))))
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
                Some(raw) => Some(with_subflavors(reader.build(raw)?, subflavors)),
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
