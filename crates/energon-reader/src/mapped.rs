//! Memory-mapped data files: a bounded cache of open shard maps, and offset index files.
//!
//! Every byte the reader hands out from a local file is a [`Bytes`] slice of a map, so parts are
//! never copied. A map stays alive as long as any slice of it does, even after the cache has let
//! it go. A shard in an object store is a [`RemoteObject`] instead, read by byte ranges
//! ([`ShardData::sample`]); index files and whole-file reads of remote objects are fetched once
//! into memory.

use std::{
    fs::{self, File},
    io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use bytes::Bytes;
use energon_index::{
    object_versions::ObjectVersions,
    storage::{self, RemoteObject, VersionPin},
};
use rustc_hash::FxHashMap;

mod guard;

use guard::{Region, RegionRef};

/// Index files up to this size are read into memory; larger ones are memory-mapped. Small files
/// are the common case (one per shard), and a map per shard could exhaust the process's map
/// limit (`vm.max_map_count`, 65530 by default) on datasets with many shards.
const READ_LIMIT: u64 = 1 << 20;

/// The smallest page size of the platforms we run on (touching every 4 KiB touches every page).
const PAGE: usize = 4096;

/// Maps the whole file at `path` read-only. An empty file gives empty bytes (it cannot be mapped).
pub(crate) fn map_file(path: &Path) -> io::Result<Bytes> {
    map_guarded(path).map(|(bytes, _)| bytes)
}

/// A map with its registration in the SIGBUS guard (dropped first: see [`Region`]).
struct GuardedMap {
    _region: Region,
    map: memmap2::Mmap,
}

impl AsRef<[u8]> for GuardedMap {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

/// [`map_file`], with the handle that tells whether the file changed underneath.
fn map_guarded(path: &Path) -> io::Result<(Bytes, RegionRef)> {
    if storage::is_remote(path) {
        return Ok((storage::read(path)?, RegionRef::default()));
    }
    let file = File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok((Bytes::new(), RegionRef::default()));
    }
    // SAFETY: the map is only read. A file truncated or rewritten while it is mapped would raise
    // SIGBUS on the next touch of a page past its new end; the map is registered with the guard,
    // whose handler puts zeros there instead and marks it changed, which the readers check.
    let map = unsafe { memmap2::Mmap::map(&file) }?;
    let region = Region::register(map.as_ptr(), map.len());
    let handle = region.handle();
    Ok((Bytes::from_owner(GuardedMap { _region: region, map }), handle))
}

/// Reads a small file into memory, or maps a large one.
pub(crate) fn read_or_map(path: &Path) -> io::Result<Bytes> {
    if storage::is_remote(path) {
        return storage::read(path);
    }
    if fs::metadata(path)?.len() <= READ_LIMIT {
        Ok(Bytes::from(fs::read(path)?))
    } else {
        map_file(path)
    }
}

/// A flat array of little-endian `u64` offsets (`.tar.idx`, `.jsonl.idx`), read or mapped.
#[derive(Debug, Clone)]
pub(crate) struct OffsetIndex {
    data: Bytes,
}

impl OffsetIndex {
    /// Opens the index file; its size is not validated here (see [`OffsetIndex::n_entries`]).
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        Ok(OffsetIndex { data: read_or_map(path)? })
    }

    /// Size of the file in bytes.
    pub(crate) fn byte_len(&self) -> u64 {
        self.data.len() as u64
    }

    /// Number of whole entries.
    pub(crate) fn n_entries(&self) -> u64 {
        self.byte_len() / 8
    }

    /// Entry `i`, or `None` past the end.
    pub(crate) fn get(&self, i: u64) -> Option<u64> {
        let start = usize::try_from(i).ok()?.checked_mul(8)?;
        let bytes = self.data.get(start..start.checked_add(8)?)?;
        Some(u64::from_le_bytes(bytes.try_into().expect("a slice of 8 bytes")))
    }
}

/// The bytes of an open shard: a map of a local file, or an object read by ranges.
#[derive(Debug, Clone)]
pub(crate) enum ShardData {
    /// A memory-mapped local file, with the handle that tells whether it changed underneath.
    Mapped(Bytes, RegionRef),
    /// An object in an object store.
    Remote(Arc<RemoteObject>),
}

impl ShardData {
    /// Opens `path`: maps a local file, or opens the remote object, held to the version `pin`
    /// gives: without a request when its index gives its `size` (its reads check it), else with
    /// one HEAD request.
    pub(crate) fn open(path: &Path, size: Option<u64>, pin: &Arc<VersionPin>) -> io::Result<Self> {
        if !storage::is_remote(path) {
            return map_guarded(path).map(|(bytes, region)| ShardData::Mapped(bytes, region));
        }
        RemoteObject::open_pinned(path, size, pin.clone()).map(ShardData::Remote)
    }

    /// Whether the local file was truncated or rewritten while it was mapped (some of its bytes
    /// then read as zeros: see the `guard` module), or a read of the remote object saw another
    /// version of it.
    pub(crate) fn changed(&self) -> bool {
        match self {
            ShardData::Mapped(_, region) => region.changed(),
            ShardData::Remote(object) => object.changed(),
        }
    }

    /// Whether the data is an object in an object store.
    pub(crate) fn is_remote(&self) -> bool {
        matches!(self, ShardData::Remote(_))
    }

    /// The size of the shard in bytes.
    pub(crate) fn len(&self) -> u64 {
        match self {
            ShardData::Mapped(b, _) => b.len() as u64,
            ShardData::Remote(o) => o.len(),
        }
    }

    /// Bytes `[start, end)` (inside the shard): a slice of the map, or one ranged read.
    pub(crate) fn range(&self, start: u64, end: u64) -> io::Result<Bytes> {
        match self {
            ShardData::Mapped(b, region) => {
                let bytes = b.slice(start as usize..end as usize);
                // Every page is touched now, so that a file changed underneath is noticed
                // before the bytes are handed out (later reads of them see zeros).
                let mut sum = 0u8;
                for i in (0..bytes.len()).step_by(PAGE) {
                    sum ^= bytes[i];
                }
                if let Some(&last) = bytes.last() {
                    sum ^= last;
                }
                std::hint::black_box(sum);
                if region.changed() {
                    return Err(io::Error::other(
                        "the file was truncated or rewritten while it was read (its bytes \
                         from then on read as zeros): open it again",
                    ));
                }
                Ok(bytes)
            }
            ShardData::Remote(_) if start == end => Ok(Bytes::new()),
            ShardData::Remote(o) => o.read(start..end),
        }
    }

    /// Whether the shard starts with the gzip magic bytes.
    pub(crate) fn is_gzip(&self) -> io::Result<bool> {
        let head = self.range(0, self.len().min(2))?;
        Ok(head.starts_with(&[0x1f, 0x8b]))
    }

    /// Bytes `[idx[local], idx[local + 1])` of sample `local` (inside the shard). A remote shard
    /// is read in windows of neighbouring samples of about
    /// [`StorageOptions::window_bytes`](storage::StorageOptions::window_bytes), one request per
    /// window; when the reader moves through a window in order, the next
    /// [`StorageOptions::in_flight`](storage::StorageOptions::in_flight) windows are fetched ahead.
    pub(crate) fn sample(&self, idx: &OffsetIndex, n: u64, local: u64) -> io::Result<Bytes> {
        let (Some(start), Some(end)) = (idx.get(local), idx.get(local + 1)) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "sample past the index"));
        };
        let obj = match self {
            ShardData::Mapped(..) => return self.range(start, end),
            ShardData::Remote(obj) => obj,
        };
        let (current, sequential) = window_of(obj, idx, n, local, true)?;
        if sequential {
            let per = per_window(idx, n);
            for ahead in 1..=storage::options().in_flight as u64 {
                match window_range(idx, n, per, local / per + ahead) {
                    Some(w) => obj.prefetch(w)?,
                    None => break,
                }
            }
        }
        let bytes = obj.read_in(current.clone(), start..end)?;
        if end == current.end {
            // The window's last sample: a reader moving in order is done with it.
            obj.release(current.start);
        }
        Ok(bytes)
    }

    /// Starts fetching, in the background, the window of sample `local` of a remote shard (a hint
    /// that a reader will soon start reading there); nothing for a local file.
    pub(crate) fn prefetch(&self, idx: &OffsetIndex, n: u64, local: u64) -> io::Result<()> {
        match self {
            ShardData::Mapped(..) => Ok(()),
            ShardData::Remote(obj) => window_of(obj, idx, n, local, false).map(drop),
        }
    }
}

/// Samples per window of a shard of `n` samples: about
/// [`StorageOptions::window_bytes`](storage::StorageOptions::window_bytes) of them, at least one.
fn per_window(idx: &OffsetIndex, n: u64) -> u64 {
    let total = idx.get(n).unwrap_or(0).max(1);
    (storage::options().window_bytes.saturating_mul(n) / total).clamp(1, n.max(1))
}

/// The byte range of window `g` (samples `g * per ..`).
fn window_range(idx: &OffsetIndex, n: u64, per: u64, g: u64) -> Option<std::ops::Range<u64>> {
    let first = g.checked_mul(per).filter(|&f| f < n)?;
    Some(idx.get(first)?..idx.get((first + per).min(n))?)
}

/// The window holding sample `local`, its fetch started (unless cached or under way), and whether
/// the reader moves through the shard in order (the window or the one before it was fetched
/// already; only asked when `detect`).
fn window_of(
    obj: &RemoteObject,
    idx: &OffsetIndex,
    n: u64,
    local: u64,
    detect: bool,
) -> io::Result<(std::ops::Range<u64>, bool)> {
    let per = per_window(idx, n);
    let g = local / per;
    let Some(current) = window_range(idx, n, per, g) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "sample past the index"));
    };
    let sequential = detect
        && (obj.has_window(current.start)
            || g.checked_sub(1)
                .and_then(|p| window_range(idx, n, per, p))
                .is_some_and(|w| obj.has_window(w.start)));
    obj.prefetch(current.clone())?;
    Ok((current, sequential))
}

/// The least number of remote shards a [`MapCache`] keeps open.
const REMOTE_MIN_OPEN: usize = 1024;

/// A bounded least-recently-used cache of open shard maps, shared by all readers of a dataset.
///
/// The lock is held only to look up or insert a map, never while a file is opened or parsed.
#[derive(Debug)]
pub(crate) struct MapCache {
    max_open: usize,
    inner: Mutex<CacheInner>,
    /// The version each remote shard is held to, kept when its map is let go (see
    /// [`VersionPin`]).
    pins: Mutex<FxHashMap<usize, Arc<VersionPin>>>,
}

#[derive(Debug, Default)]
struct CacheInner {
    tick: u64,
    maps: FxHashMap<usize, (ShardData, u64)>,
}

impl MapCache {
    /// A cache keeping at most `max_open` maps (at least one).
    pub(crate) fn new(max_open: usize) -> Self {
        MapCache {
            max_open: max_open.max(1),
            inner: Mutex::new(CacheInner::default()),
            pins: Mutex::default(),
        }
    }

    /// Holds the shards of the dataset at `root` (shard `id` is the `id`-th of `names`) to the
    /// versions its prepare recorded, when `root` is remote and has a current record (else each
    /// is held to the first version read).
    pub(crate) fn with_recorded_versions<'a>(
        self,
        root: &Path,
        names: impl Iterator<Item = &'a str>,
    ) -> Self {
        if !storage::is_remote(root) {
            return self;
        }
        if let Some(mut record) = ObjectVersions::read(root) {
            let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
            for (id, name) in names.enumerate() {
                if let Some(version) = record.shards.remove(name) {
                    pins.insert(id, Arc::new(VersionPin::recorded(version)));
                }
            }
        }
        self
    }

    fn pin(&self, id: usize) -> Arc<VersionPin> {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        pins.entry(id).or_default().clone()
    }

    /// The map of shard `id`, opening `path` (of `size` bytes, when known) if it is not cached.
    pub(crate) fn get(&self, id: usize, path: &Path, size: Option<u64>) -> io::Result<ShardData> {
        {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner.tick += 1;
            let tick = inner.tick;
            if let Some((bytes, last_use)) = inner.maps.get_mut(&id) {
                *last_use = tick;
                return Ok(bytes.clone());
            }
        }
        let bytes = ShardData::open(path, size, &self.pin(id))?;
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((cached, last_use)) = inner.maps.get_mut(&id) {
            // Another thread opened it meanwhile; keep one map.
            *last_use = tick;
            return Ok(cached.clone());
        }
        // A remote shard holds no file or map, only the windows its readers have not finished:
        // many stay open, so that the shards of every open slice (of every worker) stay cached.
        let max_open =
            if bytes.is_remote() { self.max_open.max(REMOTE_MIN_OPEN) } else { self.max_open };
        if inner.maps.len() >= max_open
            && let Some(oldest) =
                inner.maps.iter().min_by_key(|(_, (_, last_use))| *last_use).map(|(&k, _)| k)
        {
            inner.maps.remove(&oldest);
        }
        inner.maps.insert(id, (bytes.clone(), tick));
        Ok(bytes)
    }

    /// Lets the map of shard `id` go (a file changed underneath is mapped again on its next use).
    pub(crate) fn forget(&self, id: usize) {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).maps.remove(&id);
    }

    /// Number of maps currently cached.
    #[cfg(test)]
    pub(crate) fn n_open(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).maps.len()
    }
}

/// The store's own words in a failed remote read (without the URL and range, which the
/// caller's error names itself).
pub(crate) fn remote_message(err: &io::Error) -> Option<String> {
    let remote = err.get_ref()?.downcast_ref::<storage::RemoteError>()?;
    Some(remote.message.clone())
}

/// `root` joined with a `/`-separated relative name.
pub(crate) fn join_rel(root: &Path, rel: &str) -> PathBuf {
    rel.split('/').filter(|c| !c.is_empty()).fold(root.to_path_buf(), |p, c| p.join(c))
}
