//! Opening a dataset by path: a prepared WebDataset folder or a JSONL file.

use std::{path::Path, sync::Arc};

use energon_index::discover::{DatasetKind, classify};

use crate::{Error, JsonlDataset, OpenOptions, RawSample, Result, WebDataset};

/// A dataset opened by path, whatever its kind (spec: `get_dataset_type`).
#[derive(Debug)]
pub enum Dataset {
    /// A prepared WebDataset folder (one split part of it).
    WebDataset(Box<WebDataset>),
    /// A JSONL file.
    Jsonl(JsonlDataset),
}

impl Dataset {
    /// Opens `path`, classified as the reference does: a `*.jsonl` file is a JSONL dataset, a
    /// folder with `.nv-meta/.info.json` a WebDataset. Metadatasets (`*.yaml`), auxiliary media
    /// folders and unprepared folders are [`Error::Unsupported`] here.
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Self> {
        let unsupported =
            |reason: &str| Err(Error::Unsupported { path: path.to_owned(), reason: reason.into() });
        match classify(path)? {
            DatasetKind::WebDataset => {
                Ok(Dataset::WebDataset(Box::new(WebDataset::open(path, options)?)))
            }
            DatasetKind::Jsonl => {
                Ok(Dataset::Jsonl(JsonlDataset::open(path, &options.part_filter)?))
            }
            DatasetKind::Metadataset => {
                unsupported("a metadataset; open it with the metadataset loader (energon-mix)")
            }
            DatasetKind::Filesystem => unsupported(
                "an auxiliary media folder (index.sqlite without .info.json); read it through a \
                 SystemFileStore",
            ),
            DatasetKind::Folder => unsupported(
                "not a prepared dataset (no .nv-meta/.info.json); did you forget to run \
                 `energon prepare`?",
            ),
        }
    }

    /// The dataset root (the file, for JSONL).
    pub fn path(&self) -> &Path {
        match self {
            Dataset::WebDataset(d) => d.path(),
            Dataset::Jsonl(d) => d.path(),
        }
    }

    /// Sample counts per shard in split order (one virtual shard for JSONL).
    pub fn shard_counts(&self) -> Vec<u64> {
        match self {
            Dataset::WebDataset(d) => d.shard_counts(),
            Dataset::Jsonl(d) => d.shard_counts(),
        }
    }

    /// Shard names in split order (the file name for JSONL).
    pub fn shard_names(&self) -> Vec<Arc<str>> {
        match self {
            Dataset::WebDataset(d) => d.shard_names(),
            Dataset::Jsonl(d) => vec![d.shard_name().clone()],
        }
    }

    /// Number of samples, excluded ones included.
    pub fn len(&self) -> u64 {
        match self {
            Dataset::WebDataset(d) => d.len(),
            Dataset::Jsonl(d) => d.len(),
        }
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the dataset is in an object store.
    pub fn is_remote(&self) -> bool {
        energon_index::storage::is_remote(self.path())
    }

    /// A hint that sample `index` will be read soon: a dataset in an object store fetches it in
    /// the background (see [`WebDataset::prefetch`]); nothing for local datasets.
    pub fn prefetch(&self, index: u64) {
        match self {
            Dataset::WebDataset(d) => d.prefetch(index),
            Dataset::Jsonl(d) => d.prefetch(index),
        }
    }

    /// Reads sample `index`; `Ok(None)` for an excluded sample.
    pub fn read(&self, index: u64) -> Result<Option<RawSample>> {
        match self {
            Dataset::WebDataset(d) => d.read(index),
            Dataset::Jsonl(d) => d.read(index),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_classified_as_the_reference_does() {
        let root = energon_tests::ref_small_dir();
        let ds = Dataset::open(&root, &OpenOptions::default()).unwrap();
        assert!(matches!(ds, Dataset::WebDataset(_)));
        assert_eq!(ds.shard_counts(), [50; 4]);
        assert_eq!(ds.shard_names().len(), 4);
        assert_eq!(ds.path(), root);

        let dir = tempfile::tempdir().unwrap();
        let err = Dataset::open(dir.path(), &OpenOptions::default()).unwrap_err();
        assert!(err.to_string().contains("energon prepare"), "{err}");
        let yaml = dir.path().join("mds.yaml");
        std::fs::write(&yaml, "__module__: x\n").unwrap();
        let err = Dataset::open(&yaml, &OpenOptions::default()).unwrap_err();
        assert!(err.to_string().contains("metadataset"), "{err}");
        std::fs::create_dir(dir.path().join(".nv-meta")).unwrap();
        std::fs::write(dir.path().join(".nv-meta/index.sqlite"), b"").unwrap();
        let err = Dataset::open(dir.path(), &OpenOptions::default()).unwrap_err();
        assert!(err.to_string().contains("SystemFileStore"), "{err}");
        let err = Dataset::open(&dir.path().join("nope"), &OpenOptions::default()).unwrap_err();
        assert!(matches!(err, Error::Index(_)), "{err}");
    }
}
