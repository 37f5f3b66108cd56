//! A JSONL dataset (`<name>.jsonl` + `<name>.jsonl.idx`), read by random access.
//!
//! As in the reference, record `i` is the bytes `[idx[i], idx[i+1])` of the file (its newline
//! included), its key is `i` in decimal, its only part is `json`, its shard is the file name,
//! and the whole file is one split part whatever split part is asked for.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use energon_index::jsonl_idx::jsonl_idx_path;

use crate::{
    Error, Result,
    mapped::{OffsetIndex, ShardData},
    raw::{Part, PartFilter, RawSample},
};

/// The part name of a JSONL record.
pub const JSONL_PART: &str = "json";

/// A JSONL file with its `.jsonl.idx`.
#[derive(Debug)]
pub struct JsonlDataset {
    path: Arc<Path>,
    name: Arc<str>,
    idx_path: PathBuf,
    /// The file: mapped, or (in an object store) read by byte ranges as a tar shard is.
    data: ShardData,
    idx: OffsetIndex,
    read_json: bool,
}

impl JsonlDataset {
    /// Opens the JSONL file at `path` and its index, and checks that the index ends at the file
    /// size (else it is stale: regenerate it with `energon prepare`).
    ///
    /// A part filter without `json` gives samples without parts.
    pub fn open(path: &Path, part_filter: &PartFilter) -> Result<Self> {
        // A `dss://` (or `msc://` file profile) path is read where it resolves to.
        let path: &Path = &energon_index::storage::normalize(path)
            .map_err(|e| Error::io("cannot resolve", path, e))?;
        let pin = Arc::default();
        let open =
            |size| ShardData::open(path, size, &pin).map_err(|e| Error::io("cannot map", path, e));
        let local = if energon_index::storage::is_remote(path) { None } else { Some(open(None)?) };
        let idx_path = jsonl_idx_path(path);
        let idx = OffsetIndex::open(&idx_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Unsupported {
                    path: path.to_owned(),
                    reason: format!(
                        "no index {} (prepare the file with `energon prepare`)",
                        idx_path.display()
                    ),
                }
            } else {
                Error::io("cannot read", &idx_path, e)
            }
        })?;
        // A remote file is opened with the size its index gives (its reads check it).
        let data = match local {
            Some(data) => data,
            None => open(idx.get(idx.n_entries().saturating_sub(1)))?,
        };
        let name: Arc<str> =
            Arc::from(path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default().as_ref());
        let res = JsonlDataset {
            path: Arc::from(path),
            name,
            idx_path,
            data,
            idx,
            read_json: part_filter.accepts(JSONL_PART),
        };
        let last = res.idx.get(res.idx.n_entries().saturating_sub(1));
        if !res.idx.byte_len().is_multiple_of(8) || res.idx.n_entries() < 2 {
            return Err(res.mismatch(format!(
                "its size ({} bytes) is not a multiple of 8 holding at least two entries",
                res.idx.byte_len()
            )));
        }
        if last != Some(res.data.len()) {
            return Err(res.mismatch(format!(
                "its last entry ({}) is not the file size ({} bytes)",
                last.unwrap_or(0),
                res.data.len()
            )));
        }
        Ok(res)
    }

    /// The JSONL file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The "shard" name of every record: the file name.
    pub fn shard_name(&self) -> &Arc<str> {
        &self.name
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.idx.n_entries() - 1
    }

    /// Whether there is no record (never true for a valid index).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file as one virtual shard: `[len]`.
    pub fn shard_counts(&self) -> Vec<u64> {
        vec![self.len()]
    }

    /// A hint that record `index` will be read soon: a file in an object store fetches the
    /// window of records around it in the background; nothing for a local file.
    pub fn prefetch(&self, index: u64) {
        if index < self.len() {
            let _ = self.data.prefetch(&self.idx, self.len(), index);
        }
    }

    /// Reads record `index` (never excluded, so always `Some`). The `json` part holds the raw
    /// record bytes; decoding parses them.
    pub fn read(&self, index: u64) -> Result<Option<RawSample>> {
        if index >= self.len() {
            return Err(Error::OutOfRange {
                dataset: self.path.to_path_buf(),
                index,
                len: self.len(),
            });
        }
        let start = self.idx.get(index).unwrap_or(u64::MAX);
        let end = self.idx.get(index + 1).unwrap_or(0);
        if end < start || end > self.data.len() {
            return Err(self.mismatch(format!(
                "record {index} has bytes [{start}, {end}) in a file of {} bytes",
                self.data.len()
            )));
        }
        let parts = if self.read_json {
            vec![Part {
                name: JSONL_PART.to_owned(),
                offset: start,
                data: self
                    .data
                    .sample(&self.idx, self.len(), index)
                    .map_err(|e| Error::io("cannot read", &*self.path, e))?,
            }]
        } else {
            Vec::new()
        };
        Ok(Some(RawSample {
            key: index.to_string(),
            dataset: self.path.clone(),
            shard: self.name.clone(),
            index,
            offset: start,
            parts,
        }))
    }

    fn mismatch(&self, reason: String) -> Error {
        Error::IndexMismatch {
            dataset: self.path.to_path_buf(),
            shard: self.name.to_string(),
            path: self.idx_path.clone(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::{Dataset, OpenOptions};

    fn fixture() -> PathBuf {
        energon_tests::ref_small_dir().join("jsonl/data.jsonl")
    }

    #[test]
    fn every_fixture_record_is_its_line() {
        let ds = JsonlDataset::open(&fixture(), &PartFilter::All).unwrap();
        let text = fs::read_to_string(fixture()).unwrap();
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        assert_eq!(ds.len(), lines.len() as u64);
        assert_eq!(ds.shard_counts(), [200]);
        for (i, line) in lines.iter().enumerate() {
            let sample = ds.read(i as u64).unwrap().unwrap();
            assert_eq!(sample.key, i.to_string());
            assert_eq!(&*sample.shard, "data.jsonl");
            assert_eq!(sample.parts.len(), 1);
            assert_eq!(sample.parts[0].name, "json");
            assert_eq!(&sample.parts[0].data[..], line.as_bytes());
            let value: serde_json::Value = serde_json::from_slice(&sample.parts[0].data).unwrap();
            assert_eq!(value["key"], format!("{i:08}"));
        }
        assert!(matches!(ds.read(200), Err(Error::OutOfRange { .. })));
    }

    #[test]
    fn opened_as_a_dataset_by_path_whatever_the_split_part() {
        let options = OpenOptions { split_part: "val".into(), ..Default::default() };
        let ds = Dataset::open(&fixture(), &options).unwrap();
        assert!(matches!(ds, Dataset::Jsonl(_)));
        assert_eq!(ds.len(), 200);
        assert_eq!(ds.read(5).unwrap().unwrap().source_info().file_names, ["5.json"]);
        let filtered = OpenOptions { part_filter: PartFilter::names(["txt"]), ..options };
        let ds = Dataset::open(&fixture(), &filtered).unwrap();
        assert!(ds.read(5).unwrap().unwrap().parts.is_empty());
    }

    #[test]
    fn stale_or_missing_index_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.jsonl");
        fs::copy(fixture(), &path).unwrap();
        let err = JsonlDataset::open(&path, &PartFilter::All).unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        fs::copy(
            energon_tests::ref_small_dir().join("jsonl/data.jsonl.idx"),
            jsonl_idx_path(&path),
        )
        .unwrap();
        let mut data = fs::read(&path).unwrap();
        data.extend_from_slice(b"{\"extra\": 1}\n");
        fs::write(&path, &data).unwrap();
        let err = JsonlDataset::open(&path, &PartFilter::All).unwrap_err();
        assert!(
            matches!(&err, Error::IndexMismatch { reason, .. } if reason.contains("file size"))
        );
        let mut idx = fs::read(jsonl_idx_path(&path)).unwrap();
        idx.pop();
        fs::write(jsonl_idx_path(&path), &idx).unwrap();
        let err = JsonlDataset::open(&path, &PartFilter::All).unwrap_err();
        assert!(
            matches!(&err, Error::IndexMismatch { reason, .. } if reason.contains("multiple of 8"))
        );
    }
}
