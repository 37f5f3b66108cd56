//! One split part of a prepared WebDataset, read by random access.
//!
//! Sample `i` of the split part lives in the shard found by a binary search over the cumulative
//! shard counts (split order, excluded shards removed); its bytes are `[idx[j], idx[j+1])` of
//! that shard, from the shard's `.tar.idx`. Only the tar members inside that range are parsed.
//! Shards and index files are opened on first use; a bounded number of shard maps is kept.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
};

use bytes::Bytes;
use energon_index::{
    INDEX_SQLITE, NV_META,
    info::{DatasetInfo, read_dataset_info},
    split::read_dataset_split,
    sqlite::SqliteIndex,
    tar_idx::tar_idx_path,
    tar_scan::{PaxGlobals, is_skipped, members, split_key_part},
};
use rustc_hash::FxHashSet;

use crate::{
    Error, Result,
    error::SampleAt,
    mapped::{MapCache, OffsetIndex, ShardData, join_rel},
    raw::{Part, PartFilter, RawSample},
};

/// How to open a dataset.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenOptions {
    /// The split part to read (`train`, `val`, `test`, ...). Ignored for JSONL files.
    pub split_part: String,
    /// The split file inside `.nv-meta/`; `None` reads `split.yaml` (or `split.json` if that is
    /// missing), as the reference does.
    pub split_config: Option<String>,
    /// Which parts to read.
    pub part_filter: PartFilter,
    /// How many shard maps to keep open at most.
    pub max_open_shards: usize,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            split_part: "train".to_owned(),
            split_config: None,
            part_filter: PartFilter::All,
            max_open_shards: 64,
        }
    }
}

/// One split part of a prepared WebDataset (a folder with `.nv-meta/.info.json`).
///
/// Cheap to share between threads behind an [`Arc`]: [`read`](Self::read) takes `&self`.
#[derive(Debug)]
pub struct WebDataset {
    root: Arc<Path>,
    split_part: String,
    info: DatasetInfo,
    shards: Vec<Shard>,
    /// `starts[s]` is the global index of shard `s`'s first sample; the last entry is the total.
    starts: Vec<u64>,
    part_filter: PartFilter,
    maps: MapCache,
    /// `.nv-meta/index.sqlite`, opened on first use; `None` when the dataset has no readable one
    /// (the sequential reader does not need it, it only cross-checks keys with it).
    sqlite: OnceLock<Option<SqliteIndex>>,
}

#[derive(Debug)]
struct Shard {
    name: Arc<str>,
    path: PathBuf,
    count: u64,
    /// Position in `.info.json` (`tar_file_id` in `index.sqlite`).
    tar_file_id: u64,
    idx: OnceLock<OffsetIndex>,
    /// Set once the shard passed [`verify::check_shard`]: the PAX global values before its
    /// first sample, which every sample read applies (see [`verify::leading_globals`]).
    verified: OnceLock<PaxGlobals>,
    /// Keys excluded by `<shard>/<key>` entries of the split file's `exclude` list.
    excluded_keys: FxHashSet<String>,
}

impl WebDataset {
    /// Opens split part `options.split_part` of the prepared dataset at `root`.
    ///
    /// Reads `.nv-meta/.info.json` (or `.info.yaml`) and the split file; shards and their
    /// `.tar.idx` files are opened on first read. Errors: the metadata errors of energon-index
    /// (an undefined or empty split part, a shard not in the info, ...).
    pub fn open(root: &Path, options: &OpenOptions) -> Result<Self> {
        // A `dss://` (or `msc://` file profile) path is read where it resolves to.
        let root: &Path = &energon_index::storage::normalize(root)
            .map_err(|e| Error::io("cannot resolve", root, e))?;
        let info = read_dataset_info(root)?;
        let (split_path, split) = read_dataset_split(root, options.split_config.as_deref())?;
        let resolved = split.resolve(&split_path, &options.split_part, &info.shard_counts)?;
        let tar_file_ids: rustc_hash::FxHashMap<&str, u64> =
            info.shard_names().enumerate().map(|(i, name)| (name, i as u64)).collect();
        let shards: Vec<Shard> = resolved
            .shards
            .iter()
            .map(|shard| Shard {
                name: Arc::from(shard.name.as_str()),
                path: join_rel(root, &shard.name),
                count: shard.count,
                tar_file_id: tar_file_ids.get(shard.name.as_str()).copied().unwrap_or(u64::MAX),
                idx: OnceLock::new(),
                verified: OnceLock::new(),
                excluded_keys: excluded_keys(&resolved.sample_excludes, &shard.name),
            })
            .collect();
        let mut starts = Vec::with_capacity(shards.len() + 1);
        let mut total = 0u64;
        starts.push(0);
        for shard in &shards {
            total += shard.count;
            starts.push(total);
        }
        // Shard `id` of the cache is the `id`-th shard of the split part.
        let maps = MapCache::new(options.max_open_shards)
            .with_recorded_versions(root, shards.iter().map(|s| &*s.name));
        Ok(WebDataset {
            root: Arc::from(root),
            split_part: options.split_part.clone(),
            info,
            shards,
            starts,
            part_filter: options.part_filter.clone(),
            maps,
            sqlite: OnceLock::new(),
        })
    }

    /// The dataset root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The split part read.
    pub fn split_part(&self) -> &str {
        &self.split_part
    }

    /// The dataset info (`.info.json`): every shard of the dataset, in `tar_file_id` order.
    pub fn info(&self) -> &DatasetInfo {
        &self.info
    }

    /// Sample counts of the split part's shards, in split order after shard excludes (what
    /// worker slicing takes).
    pub fn shard_counts(&self) -> Vec<u64> {
        self.shards.iter().map(|s| s.count).collect()
    }

    /// Names of the split part's shards (relative to the root), in split order.
    pub fn shard_names(&self) -> Vec<Arc<str>> {
        self.shards.iter().map(|s| s.name.clone()).collect()
    }

    /// Number of samples in the split part, excluded samples included (they count in lengths and
    /// slicing, as in the reference).
    pub fn len(&self) -> u64 {
        *self.starts.last().expect("starts has one entry more than shards")
    }

    /// Whether the split part has no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads sample `index` of the split part; `Ok(None)` for a sample excluded by the split
    /// file (skipped, but still counted).
    ///
    /// Errors name the dataset, shard, key and byte offset: a missing shard or `.tar.idx`, an
    /// index whose length differs from `.info.json`, a range past the end of the shard (a
    /// truncated shard or a stale index), a damaged tar header, or members of another sample
    /// inside the range (an index that does not match its tar).
    pub fn read(&self, index: u64) -> Result<Option<RawSample>> {
        let (shard_id, local) = self.locate(index)?;
        let shard = &self.shards[shard_id];
        let idx = self.shard_index(shard)?;
        let corrupt = |offset: u64, key: Option<&str>, reason: String| Error::CorruptSample {
            at: Box::new(SampleAt {
                dataset: self.root.to_path_buf(),
                shard: shard.name.to_string(),
                key: key.map(str::to_owned),
                index: Some(index),
                offset,
            }),
            reason,
        };
        let (Some(start), Some(end)) = (idx.get(local), idx.get(local + 1)) else {
            return Err(corrupt(0, None, "sample is past the end of the .tar.idx".to_owned()));
        };
        if end < start {
            return Err(self.idx_mismatch(
                shard,
                format!("sample {local} ends at {end}, before its start {start}"),
            ));
        }
        let data =
            self.maps.get(shard_id, &shard.path, idx.get(shard.count)).map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    self.missing_shard(shard, source)
                } else {
                    Error::io("cannot open", &shard.path, source)
                }
            })?;
        let globals = self.verify(shard, idx, &data)?;
        if end > data.len() {
            return Err(corrupt(
                start,
                None,
                format!(
                    "sample bytes [{start}, {end}) run past the end of the shard ({} bytes): the \
                     shard is truncated or its .tar.idx is stale",
                    data.len()
                ),
            ));
        }
        let idx_path = tar_idx_path(&shard.path);
        // The shard changed under the read: what it gave cannot be trusted.
        let changed = |source: Option<&std::io::Error>| {
            let reason = match source.and_then(crate::mapped::remote_message) {
                // A remote shard stays held to its version: every read of it fails alike.
                Some(message) => message,
                None => {
                    // Mapped again at the next use: the file may be whole again by then.
                    self.maps.forget(shard_id);
                    "the shard was truncated or rewritten while it was read".to_owned()
                }
            };
            self.shard_ref(shard, &idx_path, globals).changed(
                &shard.path,
                None,
                Some(index),
                start,
                reason,
            )
        };
        let range = data.sample(idx, shard.count, local).map_err(|source| {
            if data.changed() {
                return changed(Some(&source));
            }
            Error::io("cannot read", &shard.path, source)
        })?;
        let excluded =
            |key: &str| !shard.excluded_keys.is_empty() && shard.excluded_keys.contains(key);
        let parsed = parse_sample(
            &range,
            start,
            globals,
            &self.part_filter,
            excluded,
            |offset, key, reason| {
                // Headers that turned to zeros while they were parsed.
                if data.changed() {
                    return changed(None);
                }
                // A remote shard is not checked for gzip before its first read (one request
                // less per shard): a parse failure anywhere asks.
                if (offset == 0 || data.is_remote()) && data.is_gzip().unwrap_or(false) {
                    return Error::Index(energon_index::Error::CompressedTar {
                        path: shard.path.clone(),
                    });
                }
                if offset == start && key.is_none() {
                    // The offset the index gives holds no header of a sample member.
                    return self.shard_ref(shard, &idx_path, globals).changed(
                        &idx_path,
                        None,
                        Some(index),
                        offset,
                        format!("the .tar.idx points to sample {local} here, but {reason}"),
                    );
                }
                corrupt(offset, key, reason)
            },
        )?;
        if data.changed() {
            return Err(changed(None));
        }
        Ok(parsed.map(|(key, parts)| RawSample {
            key,
            dataset: self.root.clone(),
            shard: shard.name.clone(),
            index,
            offset: start,
            parts,
        }))
    }

    /// A hint that sample `index` will be read soon: for a shard in an object store, the window
    /// of samples around it is fetched in the background (the shard opened without a request);
    /// nothing for local shards. Never blocks on storage; problems show when the sample is read.
    pub fn prefetch(&self, index: u64) {
        if !energon_index::storage::is_remote(&self.root) {
            return;
        }
        let Ok((shard_id, local)) = self.locate(index) else { return };
        let shard = &self.shards[shard_id];
        let Ok(idx) = self.shard_index(shard) else { return };
        if let Ok(data) = self.maps.get(shard_id, &shard.path, idx.get(shard.count)) {
            let _ = data.prefetch(idx, shard.count, local);
        }
    }

    /// Checks every shard of the split part without reading samples: the shard exists, its
    /// `.tar.idx` holds as many samples as `.info.json` says, and its offsets are increasing
    /// and end inside the shard. Returns every problem found.
    pub fn check_shards(&self) -> Vec<Error> {
        let mut res = Vec::new();
        for (shard_id, shard) in self.shards.iter().enumerate() {
            let idx = match self.shard_index(shard) {
                Ok(idx) => idx,
                Err(err) => {
                    res.push(err);
                    continue;
                }
            };
            let data = match self.maps.get(shard_id, &shard.path, None) {
                Ok(data) => data,
                Err(source) => {
                    res.push(Error::MissingShard {
                        dataset: self.root.to_path_buf(),
                        shard: shard.name.to_string(),
                        path: shard.path.clone(),
                        source,
                    });
                    continue;
                }
            };
            if let Err(err) = self.verify(shard, idx, &data) {
                res.push(err);
                continue;
            }
            let shard_len = data.len();
            let mut prev = 0;
            for i in 0..idx.n_entries() {
                let offset = idx.get(i).expect("i < n_entries");
                if offset < prev || offset > shard_len {
                    res.push(self.idx_mismatch(
                        shard,
                        format!(
                            "entry {i} ({offset}) is before the previous one or past the end \
                             of the shard ({shard_len} bytes)"
                        ),
                    ));
                    break;
                }
                prev = offset;
            }
        }
        res
    }

    /// Finds the shard and the index within it of global sample `index`.
    fn locate(&self, index: u64) -> Result<(usize, u64)> {
        if index >= self.len() {
            return Err(Error::OutOfRange {
                dataset: self.root.to_path_buf(),
                index,
                len: self.len(),
            });
        }
        // The last shard whose start is <= index (empty shards are skipped over).
        let shard_id = self.starts.partition_point(|&s| s <= index) - 1;
        Ok((shard_id, index - self.starts[shard_id]))
    }

    /// The shard's `.tar.idx`, loaded and size-checked against `.info.json` on first use.
    fn shard_index<'a>(&self, shard: &'a Shard) -> Result<&'a OffsetIndex> {
        if let Some(idx) = shard.idx.get() {
            return Ok(idx);
        }
        let path = tar_idx_path(&shard.path);
        let idx = OffsetIndex::open(&path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                if energon_index::storage::is_file(&shard.path) {
                    self.idx_mismatch(shard, "the index file is missing".to_owned())
                } else {
                    self.missing_shard(shard, source)
                }
            } else {
                Error::io("cannot read", &path, source)
            }
        })?;
        if !idx.byte_len().is_multiple_of(8) || idx.n_entries() != shard.count + 1 {
            return Err(self.idx_mismatch(
                shard,
                format!(
                    "it holds {} bytes ({} samples) but .info.json gives the shard {} samples \
                     ({} bytes expected)",
                    idx.byte_len(),
                    idx.n_entries().saturating_sub(1),
                    shard.count,
                    8 * (shard.count + 1)
                ),
            ));
        }
        Ok(shard.idx.get_or_init(|| idx))
    }

    fn shard_ref<'a>(
        &'a self,
        shard: &'a Shard,
        idx_path: &'a Path,
        globals: &'a PaxGlobals,
    ) -> verify::ShardRef<'a> {
        verify::ShardRef {
            dataset: &self.root,
            name: &shard.name,
            idx_path,
            tar_file_id: shard.tar_file_id,
            globals,
        }
    }

    /// The first-use check of a shard (see [`verify::check_shard`]), giving the PAX global
    /// values its samples are read with; a shard that fails it is checked again on the next
    /// read, so every read of it fails the same way.
    fn verify<'a>(
        &self,
        shard: &'a Shard,
        idx: &OffsetIndex,
        data: &ShardData,
    ) -> Result<&'a PaxGlobals> {
        if let Some(globals) = shard.verified.get() {
            return Ok(globals);
        }
        if !data.is_remote()
            && data.is_gzip().map_err(|e| Error::io("cannot read", &shard.path, e))?
        {
            return Err(Error::Index(energon_index::Error::CompressedTar {
                path: shard.path.clone(),
            }));
        }
        let idx_path = tar_idx_path(&shard.path);
        let globals = verify::leading_globals(data, idx.get(0).unwrap_or(0))
            .map_err(|e| Error::io("cannot read", &shard.path, e))?;
        verify::check_shard(&self.shard_ref(shard, &idx_path, &globals), idx, data, self.sqlite())?;
        Ok(shard.verified.get_or_init(|| globals))
    }

    fn sqlite(&self) -> Option<&SqliteIndex> {
        self.sqlite
            .get_or_init(|| {
                let path = self.root.join(NV_META).join(INDEX_SQLITE);
                // A remote dataset skips the key check rather than fetch the whole database
                // before its first sample (the size check still runs).
                if energon_index::storage::is_remote(&path)
                    || !energon_index::storage::is_file(&path)
                {
                    return None;
                }
                SqliteIndex::open(&path)
                    .map_err(|err| tracing::debug!("not checking keys against index.sqlite: {err}"))
                    .ok()
                    // Prepared with `--no-sample-tables`: no keys to check against.
                    .filter(|db| db.schema_version().is_some())
            })
            .as_ref()
    }

    fn missing_shard(&self, shard: &Shard, source: std::io::Error) -> Error {
        Error::MissingShard {
            dataset: self.root.to_path_buf(),
            shard: shard.name.to_string(),
            path: shard.path.clone(),
            source,
        }
    }

    fn idx_mismatch(&self, shard: &Shard, reason: String) -> Error {
        Error::IndexMismatch {
            dataset: self.root.to_path_buf(),
            shard: shard.name.to_string(),
            path: tar_idx_path(&shard.path),
            reason,
        }
    }
}

/// The keys of `shard` excluded by `<shard>/<key>` entries.
fn excluded_keys(sample_excludes: &BTreeSet<String>, shard: &str) -> FxHashSet<String> {
    let prefix = format!("{shard}/");
    sample_excludes
        .range(prefix.clone()..)
        .take_while(|e| e.starts_with(&prefix))
        .map(|e| e[prefix.len()..].to_owned())
        .collect()
}

/// Parses the tar members in `range` (the bytes `[start, ..)` of a shard, read with the PAX
/// `globals` in effect there) into a key and the parts that pass `filter` (zero-copy slices of
/// `range`). Every matching member must share the key of the first, and no part may appear twice
/// (whether or not `filter` reads it).
///
/// `Ok(None)` when `excluded(key)` holds for the key of the first member: as in the reference,
/// the rest of an excluded sample is not parsed, so excluding a damaged sample skips it.
/// `corrupt(offset, key, reason)` builds the error for damage at a shard offset.
pub(crate) fn parse_sample(
    range: &Bytes,
    start: u64,
    globals: &PaxGlobals,
    filter: &PartFilter,
    excluded: impl Fn(&str) -> bool,
    corrupt: impl Fn(u64, Option<&str>, String) -> Error,
) -> Result<Option<(String, Vec<Part>)>> {
    let mut key: Option<String> = None;
    let mut parts: Vec<Part> = Vec::new();
    // Parts the filter leaves out, with their data offsets, to find repeated parts among them.
    let mut filtered_out: Vec<(String, u64)> = Vec::new();
    for member in members(range, start).in_range().with_globals(globals) {
        let member = member.map_err(|e| corrupt(e.offset, key.as_deref(), e.reason))?;
        if !member.is_regular() || is_skipped(&member.name) {
            continue;
        }
        let Some((member_key, part)) = split_key_part(&member.name) else {
            continue;
        };
        match &key {
            None => {
                // COMPAT(energon 7.4): itar_reader.py checks the excludes at the first member.
                if excluded(member_key) {
                    return Ok(None);
                }
                key = Some(member_key.to_owned());
            }
            Some(k) if k == member_key => {}
            Some(k) => {
                return Err(corrupt(
                    member.offset,
                    Some(k),
                    format!(
                        "member {:?} belongs to another sample (key {member_key:?}): the .tar.idx \
                         does not match the tar",
                        member.name
                    ),
                ));
            }
        }
        // A part stored twice would leave one of its copies unread.
        let earlier = parts
            .iter()
            .find(|p| p.name == part)
            .map(|p| p.offset)
            .or_else(|| filtered_out.iter().find(|(p, _)| p == part).map(|&(_, o)| o));
        if let Some(earlier) = earlier {
            return Err(corrupt(
                member.offset,
                key.as_deref(),
                format!(
                    "member {:?} appears twice in the sample: part {part:?} has data at byte \
                     offsets {earlier} and {}",
                    member.name, member.offset_data
                ),
            ));
        }
        if filter.accepts(part) {
            let offset = member.offset_data;
            let from = (offset - start) as usize;
            let data = range.slice(from..from + member.data.len());
            parts.push(Part { name: part.to_owned(), offset, data });
        } else {
            filtered_out.push((part.to_owned(), member.offset_data));
        }
    }
    match key {
        Some(key) => Ok(Some((key, parts))),
        None => Err(corrupt(
            start,
            None,
            format!(
                "no sample member in bytes [{start}, {}): the .tar.idx does not match the tar",
                start + range.len() as u64
            ),
        )),
    }
}

#[cfg(test)]
mod changed_tests;
#[cfg(test)]
mod flip_tests;
#[cfg(test)]
mod tests;
pub(crate) mod verify;
