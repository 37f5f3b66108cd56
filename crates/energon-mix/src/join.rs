//! Joins: preparing their join indexes, and reading joined samples.
//!
//! A join index lives in `<metadataset file>.cache/join_index_<sha256>.bin`, where the hash covers,
//! for every joined dataset in order, its `index.uuid`, its sample excludes and its `nonmatch`
//! mode: re-preparing a dataset or changing its excludes gives a new name, so a stale index is
//! never read.
//!
//! [`JoinedDataset`] reads row `i` of the index: for each joined dataset, the sample whose byte
//! range the row gives, found in that dataset's split part through its `.tar.idx`.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
};

use energon_index::{
    NV_META,
    join_index::{JoinIndex, JoinInput, JoinSummary, Nonmatch as IndexNonmatch, build_join_index},
    sqlite::read_index_uuid,
    tar_idx::{TarIndex, tar_idx_path},
};
use energon_reader::{OpenOptions, RawSample, WebDataset};
use sha2::{Digest, Sha256};

use crate::{
    error::{Error, Result},
    grammar::Nonmatch,
    resolve::JoinSpec,
};

/// The cache folder of a metadataset file: `<file>.cache` next to it.
pub fn cache_dir(metadataset: &Path) -> PathBuf {
    let mut name = metadataset.file_name().unwrap_or_default().to_os_string();
    name.push(".cache");
    metadataset.with_file_name(name)
}

/// Where the join index of `spec` lives, and the inputs that build it.
pub fn join_index_location(spec: &JoinSpec) -> Result<(PathBuf, Vec<JoinInput>)> {
    let mut hash = Sha256::new();
    let mut inputs = Vec::with_capacity(spec.sources.len());
    for source in &spec.sources {
        let nonmatch = match source.nonmatch {
            Nonmatch::Error => IndexNonmatch::Error,
            Nonmatch::Skip => IndexNonmatch::Skip,
            Nonmatch::None => IndexNonmatch::None,
        };
        let (input, excludes) = JoinInput::from_dataset(
            &source.path,
            &source.split_part,
            source.split_config.as_deref(),
            nonmatch,
        )?;
        let uuid = read_index_uuid(&source.path.join(NV_META)).map_err(|e| match e {
            energon_index::Error::Io { path, .. } => Error::JoinIndex {
                path,
                reason: "missing; prepare the dataset with a recent energon (`energon prepare \
                         --tar-index-only` is enough for an already prepared one)"
                    .to_owned(),
            },
            other => other.into(),
        })?;
        // COMPAT(energon 7.4.1): join_dataset_loader.py:JoinDatasetLoader._get_joined_meta. The
        // reference iterates the excludes of a Python set, whose order varies between processes
        // when there are two or more; they are hashed sorted here.
        hash.update(b"\0uuid=");
        hash.update(uuid.as_bytes());
        hash.update(b"\0excludes=");
        for exclude in &excludes {
            hash.update(exclude.as_bytes());
            hash.update(b"\0");
        }
        hash.update(format!("\0nonmatch={}\0", source.nonmatch.as_str()).as_bytes());
        inputs.push(input);
    }
    let digest = hash.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok((cache_dir(&spec.metadataset).join(format!("join_index_{hex}.bin")), inputs))
}

/// What preparing one join did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinStatus {
    /// The index was built.
    Built(JoinSummary),
    /// An index with this name existed already (its datasets did not change).
    UpToDate,
}

/// Builds the join index of `spec` unless it exists; returns its path and what was done.
pub fn prepare_join(spec: &JoinSpec) -> Result<(PathBuf, JoinStatus)> {
    let (path, inputs) = join_index_location(spec)?;
    if energon_index::storage::is_file(&path) {
        return Ok((path, JoinStatus::UpToDate));
    }
    let dir = cache_dir(&spec.metadataset);
    if energon_index::storage::is_remote(&dir) {
        // Next to a metadataset in an object store: built locally, then uploaded in one PUT.
        let work = tempfile::tempdir()
            .map_err(|e| energon_index::Error::io("cannot create", std::env::temp_dir(), e))?;
        let local = work.path().join(path.file_name().unwrap_or_default());
        let summary = build_join_index(&inputs, &local)?;
        energon_index::storage::upload(&local, &path)
            .map_err(|e| energon_index::Error::io("cannot upload", &path, e))?;
        return Ok((path, JoinStatus::Built(summary)));
    }
    fs::create_dir_all(&dir).map_err(|e| energon_index::Error::io("cannot create", &dir, e))?;
    let summary = build_join_index(&inputs, &path)?;
    Ok((path, JoinStatus::Built(summary)))
}

/// A join read through its join index.
#[derive(Debug)]
pub struct JoinedDataset {
    index: JoinIndex,
    columns: Vec<Column>,
    names: Arc<[Option<String>]>,
}

/// One joined dataset.
#[derive(Debug)]
struct Column {
    dataset: WebDataset,
    /// Per position of the expanded split-part list: where its samples start in the dataset
    /// (`None` for a shard excluded from the split part) and its `.tar.idx`, loaded on use.
    shards: Vec<Option<ShardLookup>>,
}

#[derive(Debug)]
struct ShardLookup {
    start: u64,
    idx_path: PathBuf,
    offsets: OnceLock<TarIndex>,
}

/// The samples of one join row: one per joined dataset, the primary first.
#[derive(Debug, Clone)]
pub struct JoinedSample {
    /// The row of the join index.
    pub row: u64,
    /// The primary dataset's sample.
    primary: RawSample,
    /// One sample per later joined dataset; `None` for a dataset without a sample for this key
    /// (`nonmatch: none`).
    others: Vec<Option<RawSample>>,
    /// The names of the joined datasets when the join is a mapping.
    pub names: Arc<[Option<String>]>,
}

impl JoinedSample {
    /// The primary sample.
    pub fn primary(&self) -> &RawSample {
        &self.primary
    }

    /// One sample per joined dataset, the primary first; `None` for a dataset without a sample
    /// for this key.
    pub fn samples(&self) -> impl Iterator<Item = Option<&RawSample>> {
        std::iter::once(Some(&self.primary)).chain(self.others.iter().map(Option::as_ref))
    }

    /// The key (the primary's; every joined sample has this key).
    pub fn key(&self) -> &str {
        &self.primary().key
    }

    /// One raw sample with the parts of every joined sample: the primary's sample (key, shard,
    /// index) with the parts of each later sample added in join order, a later part replacing an
    /// earlier one of the same name (as `from_joined` lets later samples override fields). A
    /// field map can then build a typed sample from parts of several datasets.
    pub fn merged(&self) -> RawSample {
        let mut res = self.primary().clone();
        for sample in self.others.iter().flatten() {
            for part in &sample.parts {
                match res.parts.iter_mut().find(|p| p.name == part.name) {
                    Some(existing) => *existing = part.clone(),
                    None => res.parts.push(part.clone()),
                }
            }
        }
        res
    }
}

impl JoinedDataset {
    /// Opens the join of `spec`: its join index (which `energon prepare` must have built) and
    /// every joined dataset's split part.
    pub fn open(spec: &JoinSpec) -> Result<Self> {
        let (path, inputs) = join_index_location(spec)?;
        if !energon_index::storage::is_file(&path) {
            return Err(Error::JoinIndex {
                path,
                reason: format!(
                    "missing: run `energon prepare {}` (again if its datasets were re-prepared \
                     or their excludes changed)",
                    spec.metadataset.display()
                ),
            });
        }
        let index = JoinIndex::open(&path)?;
        if index.n_columns() != spec.sources.len() && !index.is_empty() {
            return Err(Error::JoinIndex {
                path,
                reason: format!(
                    "{} columns for a join of {} datasets; re-run `energon prepare`",
                    index.n_columns(),
                    spec.sources.len()
                ),
            });
        }
        let mut columns = Vec::with_capacity(spec.sources.len());
        for (source, input) in spec.sources.iter().zip(&inputs) {
            let mut options = OpenOptions::default();
            options.split_part.clone_from(&source.split_part);
            options.split_config.clone_from(&source.split_config);
            // The parts each dataset's samples are made of, as the reference reads them.
            options.part_filter =
                crate::plan::dataset_part_filter(&source.path, source.dataset_config.as_deref())?;
            let dataset = WebDataset::open(&source.path, &options)?;
            let mut starts = BTreeMap::new();
            let mut start = 0u64;
            for (name, count) in dataset.shard_names().iter().zip(dataset.shard_counts()) {
                starts.entry(name.to_string()).or_insert(start);
                start += count;
            }
            let shards = input
                .split_part_files
                .iter()
                .map(|name| {
                    starts.get(name).map(|&start| ShardLookup {
                        start,
                        idx_path: tar_idx_path(&source.path.join(name)),
                        offsets: OnceLock::new(),
                    })
                })
                .collect();
            columns.push(Column { dataset, shards });
        }
        let names = spec.sources.iter().map(|s| s.name.clone()).collect();
        Ok(JoinedDataset { index, columns, names })
    }

    /// The join index file.
    pub fn index_path(&self) -> &Path {
        self.index.path()
    }

    /// Rows of the join index (the samples the join yields; slicing splits these).
    pub fn n_rows(&self) -> u64 {
        self.index.len()
    }

    /// Samples of the primary's split part (the reference's `len()` of a join: the unit of
    /// rotation offsets and epochized weights, even where rows were skipped).
    pub fn primary_len(&self) -> u64 {
        self.columns[0].dataset.len()
    }

    /// The joined datasets' split parts, the primary first.
    pub fn datasets(&self) -> impl Iterator<Item = &WebDataset> {
        self.columns.iter().map(|c| &c.dataset)
    }

    /// Reads row `row`: the sample of every joined dataset. `Ok(None)` if the primary sample is
    /// excluded.
    pub fn read(&self, row: u64) -> Result<Option<JoinedSample>> {
        let mut samples = Vec::with_capacity(self.columns.len());
        for (column, data) in self.columns.iter().enumerate() {
            let Some(entry) = self.index.entry(row, column)? else {
                if column == 0 {
                    return Err(Error::JoinIndex {
                        path: self.index.path().to_owned(),
                        reason: format!("row {row} has no sample of the primary dataset"),
                    });
                }
                samples.push(None);
                continue;
            };
            let stale = |reason: String| Error::JoinIndex {
                path: self.index.path().to_owned(),
                reason: format!(
                    "row {row}, dataset {}: {reason}; re-run `energon prepare`",
                    data.dataset.path().display()
                ),
            };
            let lookup = usize::try_from(entry.shard_idx)
                .ok()
                .and_then(|i| data.shards.get(i))
                .and_then(Option::as_ref)
                .ok_or_else(|| {
                    stale(format!("shard {} is not in the split part", entry.shard_idx))
                })?;
            let offsets = match lookup.offsets.get() {
                Some(offsets) => offsets,
                None => {
                    let loaded = TarIndex::open(&lookup.idx_path)?;
                    lookup.offsets.get_or_init(|| loaded)
                }
            };
            let entries = offsets.offsets();
            let local = entries.partition_point(|&o| o < entry.byte_offset);
            let end = entries.get(local + 1).copied();
            if entries.get(local) != Some(&entry.byte_offset)
                || end != entry.byte_offset.checked_add(entry.byte_size)
            {
                return Err(stale(format!(
                    "no sample at byte offset {} ({} bytes) of {}",
                    entry.byte_offset,
                    entry.byte_size,
                    lookup.idx_path.display()
                )));
            }
            let sample = data.dataset.read(lookup.start + local as u64)?;
            if column == 0 && sample.is_none() {
                // An excluded primary sample excludes the row: the others are not read.
                return Ok(None);
            }
            samples.push(sample);
        }
        let mut samples = samples.into_iter();
        let Some(Some(primary)) = samples.next() else { return Ok(None) };
        let others = samples.collect();
        Ok(Some(JoinedSample { row, primary, others, names: Arc::clone(&self.names) }))
    }
}
