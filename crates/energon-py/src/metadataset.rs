//! `load_dataset` on a metadataset: what path a file is, and one split resolved into its leaf
//! datasets (energon-mix's resolution: effective split parts, weights, repetitions,
//! subflavors, `shuffle_over_epochs` and auxiliary sources).

use std::path::PathBuf;

use energon_index::discover::{DatasetKind, classify};
use energon_mix::{BlendMode, LeafKind, ResolveOptions, grammar::Repetitions, resolve_path};
use pyo3::{
    prelude::*,
    types::{PyDict, PyList},
};
use serde_json::Value;

use crate::{
    convert::{Converter, Output},
    errors::{config_error, to_py_err},
    file_store::PyFileStore,
};

/// What `path` is: `webdataset`, `jsonl`, `metadataset`, `filesystem` (a folder with media
/// metadata only) or `folder` (not prepared).
#[pyfunction]
pub(crate) fn dataset_kind(py: Python<'_>, path: PathBuf) -> PyResult<&'static str> {
    let kind = py.detach(|| classify(&path)).map_err(|e| to_py_err(&e))?;
    Ok(match kind {
        DatasetKind::WebDataset => "webdataset",
        DatasetKind::Jsonl => "jsonl",
        DatasetKind::Metadataset => "metadataset",
        DatasetKind::Filesystem => "filesystem",
        _ => "folder",
    })
}

/// The leaves of split `split_part` of the metadataset at `path`, without opening them
/// (energon-mix's `traverse`): one dict per leaf with `path`, `split_part`, `aux` (paths by
/// name) and `subflavors`.
#[pyfunction]
pub(crate) fn traverse_metadataset<'py>(
    py: Python<'py>,
    path: PathBuf,
    split_part: &str,
) -> PyResult<Bound<'py, PyList>> {
    let leaves =
        py.detach(|| energon_mix::traverse(&path, split_part)).map_err(|e| to_py_err(&e))?;
    let conv = Converter::new(py, Output::default())?;
    let res = PyList::empty(py);
    for leaf in leaves {
        let d = PyDict::new(py);
        d.set_item("path", leaf.path.to_string_lossy().as_ref())?;
        d.set_item("split_part", &leaf.split_part)?;
        let aux = PyDict::new(py);
        for (name, aux_path) in &leaf.aux {
            aux.set_item(name, aux_path.to_string_lossy().as_ref())?;
        }
        d.set_item("aux", aux)?;
        d.set_item("subflavors", conv.json(Value::Object(leaf.subflavors))?)?;
        res.append(d)?;
    }
    Ok(res)
}

/// Split `split_part` of the metadataset at `path`, resolved: the blend mode (`none`,
/// `dataset_weight` or `sample_repetitions`) and one dict per leaf dataset, in tree order, with
/// `path`, `kind` (`webdataset`, `jsonl` or `join`), `split_part`, `split_config`,
/// `dataset_config`, `weight`, `repetitions`, `subflavors`, `shuffle_over_epochs` and `aux`
/// (file stores by name).
#[pyfunction]
#[pyo3(signature = (path, split_part, shuffle_over_epochs_multiplier = Some(1), subflavors = None))]
pub(crate) fn resolve_metadataset<'py>(
    py: Python<'py>,
    path: PathBuf,
    split_part: &str,
    shuffle_over_epochs_multiplier: Option<i64>,
    subflavors: Option<Bound<'py, PyDict>>,
) -> PyResult<(&'static str, Bound<'py, PyList>)> {
    let subflavors = match subflavors {
        None => None,
        Some(dict) => {
            let text: String = py.import("json")?.call_method1("dumps", (dict,))?.extract()?;
            match serde_json::from_str(&text) {
                Ok(Value::Object(map)) => Some(map),
                _ => return Err(config_error("subflavors must be a dict of JSON values")),
            }
        }
    };
    let mut options = ResolveOptions::default();
    options.shuffle_over_epochs_multiplier = shuffle_over_epochs_multiplier;
    options.subflavors = subflavors;
    let split =
        py.detach(|| resolve_path(&path, split_part, &options)).map_err(|e| to_py_err(&e))?;
    let mode = match split.mode {
        BlendMode::DatasetWeight => "dataset_weight",
        BlendMode::SampleRepetitions => "sample_repetitions",
        _ => "none",
    };
    let conv = Converter::new(py, Output::default())?;
    let leaves = PyList::empty(py);
    for leaf in split.leaves {
        let d = PyDict::new(py);
        d.set_item("path", leaf.path.to_string_lossy().as_ref())?;
        let kind = match &leaf.kind {
            LeafKind::WebDataset => "webdataset",
            LeafKind::Jsonl => "jsonl",
            LeafKind::Joined(_) => "join",
        };
        d.set_item("kind", kind)?;
        d.set_item("split_part", &leaf.split_part)?;
        d.set_item("split_config", &leaf.split_config)?;
        d.set_item("dataset_config", &leaf.dataset_config)?;
        d.set_item("weight", leaf.weight)?;
        let repetitions = match leaf.repetitions {
            None => py.None().into_bound(py),
            Some(Repetitions::Int(n)) => n.into_pyobject(py)?.into_any(),
            Some(Repetitions::Float(x)) => x.into_pyobject(py)?.into_any(),
        };
        d.set_item("repetitions", repetitions)?;
        let subflavors = match leaf.subflavors {
            Some(map) => conv.json(Value::Object(map))?,
            None => py.None().into_bound(py),
        };
        d.set_item("subflavors", subflavors)?;
        d.set_item("shuffle_over_epochs", leaf.shuffle_over_epochs)?;
        let aux = PyDict::new(py);
        for (name, source) in &leaf.aux {
            aux.set_item(name, Bound::new(py, PyFileStore::of_aux(source)?)?)?;
        }
        d.set_item("aux", aux)?;
        leaves.append(d)?;
    }
    Ok((mode, leaves))
}
