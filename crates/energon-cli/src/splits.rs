//! Walking the split parts of a dataset, shared by the commands that read every sample.

use std::path::Path;

use energon_reader::{ReaderOptions, SampleReader};

/// The split parts to walk: the whole file for a JSONL dataset, else the comma-separated list.
pub(crate) fn split_parts(is_jsonl: bool, list: &str) -> Vec<&str> {
    if is_jsonl {
        vec!["train"]
    } else {
        list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect()
    }
}

/// Opens the sample reader of one split part; `None` when the dataset has no such split part or it
/// is empty.
pub(crate) fn open_split(
    path: &Path,
    split_part: &str,
    split_config: &str,
    dataset_config: &str,
) -> anyhow::Result<Option<SampleReader>> {
    let mut options = ReaderOptions::default();
    options.split_part = split_part.to_owned();
    options.split_config = Some(split_config.to_owned());
    options.dataset_config = Some(dataset_config.to_owned());
    match SampleReader::open(path, &options) {
        Ok(reader) => Ok(Some(reader)),
        Err(energon_reader::Error::Index(
            energon_index::Error::UnknownSplitPart { .. } | energon_index::Error::EmptySplit { .. },
        )) => Ok(None),
        Err(err) => Err(err.into()),
    }
}
