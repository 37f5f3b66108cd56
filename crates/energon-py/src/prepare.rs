//! `energon prepare` from Python: index a folder of tar shards (energon-index's prepare, all
//! outputs committed at once), a JSONL file or the joins of a metadataset; store media metadata.

use std::path::PathBuf;

use energon_index::{
    media::TableMode,
    prepare::{self, PrepareOptions, SplitChoice},
};
use energon_reader::media::{MediaFilter, MediaStrategy, prepare::PrepareMediaOptions};
use pyo3::{prelude::*, types::PyDict};

use crate::errors::{config_error, to_py_err};

/// Prepares the WebDataset in folder `path` (writes every `.tar.idx` and `.nv-meta/`, not
/// `dataset.yaml`). The split is `split_ratio` (train, val, test weights) or `split_patterns`
/// (`(name, regex)` pairs, in order); `exclude` drops shards whose relative path matches.
/// `fix_duplicates` moves every shard's members into a folder named after the shard when keys
/// repeat across shards. `sample_tables = False` writes `index.sqlite` without the per-sample
/// tables (`--no-sample-tables`); `sample_tables_only` adds them to a prepared dataset
/// (`--sample-tables-only`). Returns a dict with `shards`, `shard_counts`, `split_parts`,
/// `part_names`, `fixed_duplicates` (the number of renamed members, `None` when nothing was
/// renamed) and `warnings` (`(shard, what is wrong)` for shards that lose samples to their tar
/// trailer: no end-of-archive marker, or data after it).
#[pyfunction]
#[pyo3(signature = (
    path, *, split_ratio = None, split_patterns = None, exclude = None, tar_index_only = false,
    shuffle_tars = false, num_workers = 4, split_config = "split.yaml".to_owned(),
    fix_duplicates = false, sample_tables = true, sample_tables_only = false,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_dataset<'py>(
    py: Python<'py>,
    path: PathBuf,
    split_ratio: Option<(f64, f64, f64)>,
    split_patterns: Option<Vec<(String, String)>>,
    exclude: Option<String>,
    tar_index_only: bool,
    shuffle_tars: bool,
    num_workers: usize,
    split_config: String,
    fix_duplicates: bool,
    sample_tables: bool,
    sample_tables_only: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let split = match (split_ratio, split_patterns) {
        (Some(_), Some(_)) => {
            return Err(config_error("give split_ratio or split_patterns, not both"));
        }
        (Some((train, val, test)), None) => SplitChoice::Ratio([train, val, test]),
        (None, Some(patterns)) => SplitChoice::Parts(patterns),
        (None, None) => SplitChoice::Ratio([1.0, 0.0, 0.0]),
    };
    if num_workers == 0 {
        return Err(config_error("num_workers must be at least 1"));
    }
    let options = PrepareOptions::default()
        .split(split)
        .exclude(exclude)
        .num_workers(num_workers)
        .tar_index_only(tar_index_only)
        .shuffle_tars(shuffle_tars)
        .split_config(split_config)
        .fix_duplicates(fix_duplicates)
        .sample_tables(sample_tables)
        .sample_tables_only(sample_tables_only);
    let summary = py
        .detach(|| prepare::prepare_dataset(&path, &options, &|_| {}))
        .map_err(|e| to_py_err(&e))?;
    let res = PyDict::new(py);
    res.set_item("shards", &summary.shards)?;
    res.set_item("shard_counts", &summary.shard_counts)?;
    res.set_item("split_parts", &summary.split_parts)?;
    res.set_item("part_names", &summary.part_names)?;
    res.set_item("fixed_duplicates", summary.fixed_duplicates.map(|f| f.members_renamed))?;
    let warnings: Vec<(&str, String)> = summary
        .trailers
        .iter()
        .filter_map(|(shard, trailer)| Some((shard.as_str(), trailer.problem()?)))
        .collect();
    res.set_item("warnings", warnings)?;
    Ok(res)
}

/// Prepares the JSONL file at `path` (writes `<file>.jsonl.idx`); returns its record count.
#[pyfunction]
pub(crate) fn prepare_jsonl(py: Python<'_>, path: PathBuf) -> PyResult<u64> {
    py.detach(|| prepare::prepare_jsonl(&path)).map_err(|e| to_py_err(&e))
}

/// Prepares the metadataset at `path`: builds the join index of each of its joins that has
/// none yet and removes stale ones. Returns the join index paths built or found and the paths
/// removed.
#[pyfunction]
pub(crate) fn prepare_metadataset(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<(Vec<PathBuf>, Vec<PathBuf>)> {
    let report =
        py.detach(|| energon_mix::prepare_metadataset(&path)).map_err(|e| to_py_err(&e))?;
    Ok((report.joins.into_iter().map(|j| j.path).collect(), report.removed))
}

/// Stores the media metadata of the prepared WebDataset or plain folder at `path` in its
/// `.nv-meta/index.sqlite` (as `energon prepare-media`): `strategy` is `extension`, `header` or
/// `glob` (with `patterns`); `replace` drops the existing media tables first. Returns the
/// number of rows stored and of media entries that could not be read.
#[pyfunction]
#[pyo3(signature = (path, strategy, patterns = Vec::new(), num_workers = 4, replace = false))]
pub(crate) fn prepare_media(
    py: Python<'_>,
    path: PathBuf,
    strategy: &str,
    patterns: Vec<String>,
    num_workers: usize,
    replace: bool,
) -> PyResult<(u64, u64)> {
    let strategy = match strategy {
        "extension" => MediaStrategy::Extension,
        "header" => MediaStrategy::Header,
        "glob" => MediaStrategy::Glob,
        other => {
            return Err(config_error(format!(
                "unknown media strategy {other:?} (extension, header or glob)"
            )));
        }
    };
    if num_workers == 0 {
        return Err(config_error("num_workers must be at least 1"));
    }
    let filter = MediaFilter::new(strategy, patterns).map_err(|e| to_py_err(&e))?;
    let tables = if replace { TableMode::Replace } else { TableMode::Add };
    let mut options = PrepareMediaOptions::new(filter, tables);
    options.num_workers = num_workers;
    let summary = py
        .detach(|| energon_reader::media::prepare::prepare_media(&path, &options, &|_| {}))
        .map_err(|e| to_py_err(&e))?;
    Ok((summary.n_stored, summary.n_skipped))
}

/// The dataset config `dataset_config` (in `.nv-meta/`) of the prepared dataset at `path`,
/// validated, as a dict of its keys (`sample_type`, `field_map` or `sample_loader` and
/// `part_filter`, `subflavors`, ...).
#[pyfunction]
#[pyo3(signature = (path, dataset_config = "dataset.yaml".to_owned()))]
pub(crate) fn dataset_config<'py>(
    py: Python<'py>,
    path: PathBuf,
    dataset_config: String,
) -> PyResult<Bound<'py, PyAny>> {
    let file = path.join(energon_index::NV_META).join(&dataset_config);
    let config = py
        .detach(|| energon_index::dataset_config::read_dataset_config(&file))
        .map_err(|e| to_py_err(&e))?;
    let text = config.to_value().to_string();
    py.import("json")?.call_method1("loads", (text,))
}
