//! File stores: files looked up by name, for cookers and auxiliary data sources.
//!
//! - [`WebdatasetFileStore`]: members of a prepared WebDataset by entry name `<key>.<part>`,
//!   located through `index.sqlite` (or, for indexes without `sample_parts`, by parsing the
//!   sample's tar headers), read from the shard's memory map without a copy.
//! - [`SystemFileStore`]: files of a plain folder, by path relative to it.
//! - [`JsonlFileStore`]: records of a JSONL file, by `<i>.json` or `<i>`.
//! - [`DecodeFileStore`]: any store, with files decoded by their extension.
//! - [`PrimaryFileStore`]: any store, with names starting with `.` taken relative to the
//!   current sample's key (`.wav` → `<key>.wav`).
//!
//! Every store is safe to share between threads.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::{Arc, OnceLock},
};

use bytes::Bytes;
use energon_index::{
    INDEX_SQLITE, NV_META,
    info::read_dataset_info,
    sqlite::{MediaMetadata, SqliteIndex},
    tar_scan::{PaxGlobals, split_key_part},
};

use crate::{
    Error, JsonlDataset, Result,
    decode::{Decoded, Decoder},
    error::SampleAt,
    mapped::{MapCache, ShardData, join_rel, read_or_map},
    raw::{PartFilter, SourceIndex, SourceInfo},
    webdataset::{parse_sample, verify::leading_globals},
};

/// Files looked up by name (the reference's `FileStore`).
pub trait FileStore: fmt::Debug + Send + Sync {
    /// The content of file `name`, and where it came from.
    fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)>;

    /// The store's root (dataset folder or file).
    fn path(&self) -> &Path;

    /// The media metadata `prepare --media-metadata-by-...` stored for `name`; `None` when
    /// there is none.
    fn media_metadata(&self, name: &str) -> Result<Option<MediaMetadata>>;
}

/// A shard's name and path.
type StoreShard = (Arc<str>, PathBuf);

/// The members of a prepared WebDataset, by entry name `<key>.<part>`.
#[derive(Debug)]
pub struct WebdatasetFileStore {
    root: Arc<Path>,
    index: SqliteIndex,
    /// Shard names and paths by `tar_file_id`.
    shards: Vec<StoreShard>,
    /// The PAX global values before each shard's first sample, read at its first use.
    globals: Vec<OnceLock<PaxGlobals>>,
    maps: MapCache,
}

impl WebdatasetFileStore {
    /// Opens the store of the dataset at `root` (its `.info.json` and `index.sqlite`).
    pub fn open(root: &Path) -> Result<Self> {
        let info = read_dataset_info(root)?;
        let index = SqliteIndex::open(&root.join(NV_META).join(INDEX_SQLITE))?;
        // Fails at once, saying how to add them, for a dataset prepared without sample tables.
        index.require_samples()?;
        let shards: Vec<_> =
            info.shard_names().map(|name| (Arc::from(name), join_rel(root, name))).collect();
        let globals = shards.iter().map(|_| OnceLock::new()).collect();
        let maps = MapCache::new(16).with_recorded_versions(root, info.shard_names());
        Ok(WebdatasetFileStore { root: Arc::from(root), index, shards, globals, maps })
    }

    /// The parts of the sample with key `key`, in tar order, as (part name, content).
    pub fn get_sample(&self, key: &str) -> Result<(Vec<(String, Bytes)>, SourceInfo)> {
        let Some(loc) = self.index.sample_by_key(key)? else {
            return Err(self.not_found(key));
        };
        let (shard, data, globals) = self.shard(loc.tar_file_id, key)?;
        let (start, end) = (loc.byte_offset, loc.byte_offset.saturating_add(loc.byte_size));
        let range = self.range(&data, start, end, shard, key)?;
        let parsed = parse_sample(
            &range,
            start,
            globals,
            &PartFilter::All,
            |_| false,
            |o, k, r| self.corrupt(shard, k.or(Some(key)), o, r),
        )?;
        let (found, parts) = parsed.expect("nothing is excluded");
        if found != key {
            return Err(self.corrupt(
                shard,
                Some(key),
                start,
                format!("index.sqlite points to sample {found:?} instead"),
            ));
        }
        let source = SourceInfo {
            dataset_path: self.root.clone(),
            index: SourceIndex::Name(key.to_owned()),
            shard_name: shard.0.clone(),
            file_names: parts.iter().map(|p| format!("{key}.{}", p.name)).collect(),
        };
        Ok((parts.into_iter().map(|p| (p.name, p.data)).collect(), source))
    }

    /// The shard `tar_file_id` (where entry `name` is), its data and the PAX global values its
    /// members are read with (see [`leading_globals`]).
    fn shard(&self, tar_file_id: u64, name: &str) -> Result<(&StoreShard, ShardData, &PaxGlobals)> {
        let id = usize::try_from(tar_file_id).unwrap_or(usize::MAX);
        let shard = self.shards.get(id).ok_or_else(|| Error::IndexMismatch {
            dataset: self.root.to_path_buf(),
            shard: format!("#{tar_file_id}"),
            path: self.index.path().to_owned(),
            reason: format!("entry {name:?} is in tar_file_id {tar_file_id}, not in .info.json"),
        })?;
        let data = self.maps.get(id, &shard.1, None).map_err(|source| Error::MissingShard {
            dataset: self.root.to_path_buf(),
            shard: shard.0.to_string(),
            path: shard.1.clone(),
            source,
        })?;
        let globals = match self.globals[id].get() {
            Some(globals) => globals,
            None => {
                let first = self.index.sample_at(tar_file_id, 0)?.map_or(0, |row| row.byte_offset);
                let globals = leading_globals(&data, first)
                    .map_err(|e| Error::io("cannot read", &shard.1, e))?;
                self.globals[id].get_or_init(|| globals)
            }
        };
        Ok((shard, data, globals))
    }

    fn range(
        &self,
        data: &ShardData,
        start: u64,
        end: u64,
        shard: &StoreShard,
        name: &str,
    ) -> Result<Bytes> {
        if start > end || end > data.len() {
            return Err(self.corrupt(
                shard,
                Some(name),
                start,
                format!(
                    "index.sqlite gives bytes [{start}, {end}) in a shard of {} bytes: the shard \
                     is truncated or the index is stale",
                    data.len()
                ),
            ));
        }
        data.range(start, end).map_err(|e| Error::io("cannot read", &shard.1, e))
    }

    /// Content `[start, end)` of member `name`, after checking that the tar header just before it
    /// is that member's, of that size: an `index.sqlite` row that points elsewhere (a stale or
    /// edited index) is an error, not other bytes.
    fn checked_member(
        &self,
        data: &ShardData,
        (start, end): (u64, u64),
        (key, name): (&str, &str),
        shard: &StoreShard,
        globals: &PaxGlobals,
    ) -> Result<Bytes> {
        const BLOCK: u64 = 512;
        let size = end.saturating_sub(start);
        let bad = |reason: String| Err(self.corrupt(shard, Some(key), start, reason));
        if start < BLOCK || end < start {
            return bad(format!(
                "index.sqlite gives bytes [{start}, {end}) for {name:?}, which cannot follow a \
                 member header"
            ));
        }
        let padded_end =
            start.saturating_add(size.div_ceil(BLOCK) * BLOCK).min(data.len()).max(end);
        let window = self.range(data, start - BLOCK, padded_end, shard, key)?;
        match energon_index::tar_scan::members(&window, start - BLOCK)
            .in_range()
            .with_globals(globals)
            .next()
        {
            Some(Ok(member))
                if member.offset_data == start
                    && member.size == size
                    && (member.name == name
                        || (name.len() >= 100 && name.starts_with(member.name.as_ref()))) =>
            {
                Ok(window.slice(BLOCK as usize..(BLOCK + size) as usize))
            }
            Some(Ok(member)) => bad(format!(
                "index.sqlite gives {name:?} at byte {start} ({size} bytes), where the shard has \
                 member {:?} of {} bytes: the index is stale or damaged (run `energon prepare` \
                 again)",
                member.name, member.size
            )),
            _ => bad(format!(
                "index.sqlite gives {name:?} at byte {start}, where the shard has no member \
                 header: the index is stale or damaged (run `energon prepare` again)"
            )),
        }
    }

    fn corrupt(&self, shard: &StoreShard, key: Option<&str>, offset: u64, reason: String) -> Error {
        Error::CorruptSample {
            at: Box::new(SampleAt {
                dataset: self.root.to_path_buf(),
                shard: shard.0.to_string(),
                key: key.map(str::to_owned),
                index: None,
                offset,
            }),
            reason,
        }
    }

    fn not_found(&self, name: &str) -> Error {
        Error::NotFound { store: self.root.to_path_buf(), name: name.to_owned() }
    }
}

impl FileStore for WebdatasetFileStore {
    fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)> {
        let Some((key, part)) = split_key_part(name) else {
            return Err(self.not_found(name));
        };
        let source = |shard: &Arc<str>| SourceInfo {
            dataset_path: self.root.clone(),
            index: SourceIndex::Name(name.to_owned()),
            shard_name: shard.clone(),
            file_names: vec![name.to_owned()],
        };
        if !self.index.has_sample_parts() {
            // Energon 6.x indexes: find the sample, then its member.
            let (parts, sample_source) = self.get_sample(key)?;
            let data = parts.into_iter().find(|(p, _)| p == part).map(|(_, d)| d);
            return data
                .map(|d| (d, source(&sample_source.shard_name)))
                .ok_or_else(|| self.not_found(name));
        }
        let Some(loc) = self.index.part_by_entry_name(name)? else {
            return Err(self.not_found(name));
        };
        let (shard, data, globals) = self.shard(loc.tar_file_id, name)?;
        let start = loc.content_byte_offset;
        let end = start.saturating_add(loc.content_byte_size);
        if let Some(second) = loc.second_copy {
            // As the loader refuses the sample: serving either copy would hide the other.
            return Err(self.corrupt(
                shard,
                Some(key),
                second,
                format!(
                    "member {name:?} appears twice in the sample: part {part:?} has data at \
                     byte offsets {start} and {second}"
                ),
            ));
        }
        // Checked against its own header first (read together: one request for a remote shard).
        let bytes = self.checked_member(&data, (start, end), (key, name), shard, globals)?;
        Ok((bytes, source(&shard.0)))
    }

    fn path(&self) -> &Path {
        &self.root
    }

    fn media_metadata(&self, name: &str) -> Result<Option<MediaMetadata>> {
        Ok(self.index.media_metadata(name)?)
    }
}

/// The files of a plain folder, by path relative to it (the reference's `SystemFileStore`).
///
/// Names are joined to the folder as the reference does (an absolute name is used as is).
/// Media metadata comes from the folder's `.nv-meta/index.sqlite`, if `prepare-media` wrote one.
#[derive(Debug)]
pub struct SystemFileStore {
    base_dir: Arc<Path>,
    shard_name: Arc<str>,
    media: OnceLock<Option<SqliteIndex>>,
}

impl SystemFileStore {
    /// A store over the folder `base_dir`.
    pub fn new(base_dir: &Path) -> Self {
        SystemFileStore {
            base_dir: Arc::from(base_dir),
            shard_name: Arc::from(base_dir.to_string_lossy().as_ref()),
            media: OnceLock::new(),
        }
    }
}

impl FileStore for SystemFileStore {
    fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)> {
        let path = self.base_dir.join(name);
        let data = read_or_map(&path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                Error::NotFound { store: self.base_dir.to_path_buf(), name: name.to_owned() }
            } else {
                Error::io("cannot read", &path, source)
            }
        })?;
        let source = SourceInfo {
            dataset_path: self.base_dir.clone(),
            index: SourceIndex::Name(name.to_owned()),
            shard_name: self.shard_name.clone(),
            file_names: vec![name.to_owned()],
        };
        Ok((data, source))
    }

    fn path(&self) -> &Path {
        &self.base_dir
    }

    fn media_metadata(&self, name: &str) -> Result<Option<MediaMetadata>> {
        let index = self.media.get_or_init(|| {
            let path = self.base_dir.join(NV_META).join(INDEX_SQLITE);
            energon_index::storage::is_file(&path).then(|| SqliteIndex::open(&path).ok()).flatten()
        });
        match index {
            Some(index) => Ok(index.media_metadata(name)?),
            None => Ok(None),
        }
    }
}

/// The records of a JSONL file, by `<i>.json` or `<i>` (the reference's `JsonlFileStore`).
#[derive(Debug)]
pub struct JsonlFileStore {
    dataset: JsonlDataset,
}

impl JsonlFileStore {
    /// Opens the JSONL file at `path` and its index.
    pub fn open(path: &Path) -> Result<Self> {
        Ok(JsonlFileStore { dataset: JsonlDataset::open(path, &PartFilter::All)? })
    }
}

impl FileStore for JsonlFileStore {
    fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)> {
        let not_found =
            || Error::NotFound { store: self.dataset.path().to_owned(), name: name.to_owned() };
        let number = name.strip_suffix(".json").unwrap_or(name);
        // Only canonical decimal numbers, as `str(i)` writes them.
        let index: u64 = number.parse().map_err(|_| not_found())?;
        if index.to_string() != number || index >= self.dataset.len() {
            return Err(not_found());
        }
        let raw = self.dataset.read(index)?.ok_or_else(not_found)?;
        let data = raw.parts.into_iter().next().map(|p| p.data).ok_or_else(not_found)?;
        let source = SourceInfo {
            dataset_path: raw.dataset,
            index: SourceIndex::Name(name.to_owned()),
            shard_name: raw.shard,
            file_names: vec![name.to_owned()],
        };
        Ok((data, source))
    }

    fn path(&self) -> &Path {
        self.dataset.path()
    }

    fn media_metadata(&self, _name: &str) -> Result<Option<MediaMetadata>> {
        Ok(None)
    }
}

/// A store whose files are decoded by their part name (the reference's `DecodeFileStore`).
#[derive(Debug, Clone)]
pub struct DecodeFileStore<S> {
    inner: S,
    decoder: Decoder,
}

impl<S: FileStore> DecodeFileStore<S> {
    /// Wraps `inner`, decoding with `decoder`.
    pub fn new(inner: S, decoder: Decoder) -> Self {
        DecodeFileStore { inner, decoder }
    }

    /// The undecoding store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Reads and decodes file `name`: the part name is what follows the key (the first dot of
    /// the base name), as for tar members.
    pub fn get_decoded(&self, name: &str) -> Result<(Decoded, SourceInfo)> {
        let (data, source) = self.inner.get(name)?;
        let part = split_key_part(name).map_or(name, |(_, part)| part);
        let value = self.decoder.try_decode(part, &data).map_err(|e| {
            let at = SampleAt {
                dataset: source.dataset_path.to_path_buf(),
                shard: source.shard_name.to_string(),
                key: Some(name.to_owned()),
                index: None,
                offset: 0,
            };
            Error::decode(at, part, e)
        })?;
        Ok((value, source))
    }
}

/// A store seen from one sample: names starting with `.` are relative to its key (the
/// reference's `PrimaryFileStore`).
#[derive(Debug, Clone)]
pub struct PrimaryFileStore<S> {
    inner: S,
    key: String,
}

impl<S: FileStore> PrimaryFileStore<S> {
    /// `inner` seen from the sample with key `key`.
    pub fn new(inner: S, key: impl Into<String>) -> Self {
        PrimaryFileStore { inner, key: key.into() }
    }

    /// The full name of `name`: `<key><name>` when `name` starts with `.`.
    pub fn resolve(&self, name: &str) -> String {
        if name.starts_with('.') { format!("{}{name}", self.key) } else { name.to_owned() }
    }
}

impl<S: FileStore> FileStore for PrimaryFileStore<S> {
    fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)> {
        self.inner.get(&self.resolve(name))
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn media_metadata(&self, name: &str) -> Result<Option<MediaMetadata>> {
        self.inner.media_metadata(&self.resolve(name))
    }
}

impl<S: FileStore + ?Sized> FileStore for Arc<S> {
    fn get(&self, name: &str) -> Result<(Bytes, SourceInfo)> {
        (**self).get(name)
    }

    fn path(&self) -> &Path {
        (**self).path()
    }

    fn media_metadata(&self, name: &str) -> Result<Option<MediaMetadata>> {
        (**self).media_metadata(name)
    }
}

#[cfg(test)]
mod tests;
