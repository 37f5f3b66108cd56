//! Where a dataset's files live: a local path, or an object in an object store.
//!
//! A remote location is written as its URL wherever a path is taken: `s3://BUCKET/PREFIX`
//! (S3 and S3-compatible servers), `gs://BUCKET/PREFIX`, `az://CONTAINER/PREFIX` and
//! `msc://PROFILE/PATH` (a profile of a multi-storage-client configuration file, see
//! [`msc`](self#msc-profiles)). Joining names onto such a path (`Path::join`) gives the URLs of the
//! objects under it, so every layer above keeps passing `Path`s; the functions of this module look
//! at the path and either use the file system or the object store. `..` and `.` components and
//! repeated slashes in a remote path are normalized away.
//!
//! Local files keep their fast paths (callers memory-map them); for remote objects this module
//! offers whole reads, ranged reads, listing, sizes, atomic puts (an object PUT replaces the object
//! at once) and a local copy in a size-limited cache folder (for `index.sqlite`, which SQLite needs
//! as a file). [`RemoteObject`] reads an object by byte ranges through a small cache of windows
//! with prefetch.
//!
//! The object-store clients need the `remote` feature; without it a remote path is an
//! [`io::ErrorKind::Unsupported`] error saying so.
//!
//! # Requests, retries and timeouts
//!
//! Requests run on a small runtime owned by this module; the calling thread blocks. Every thread
//! has its own bound on the read-ahead it has in flight ([`StorageOptions::in_flight`]); a request
//! the thread waits for (a read, or read-ahead it now needs) goes at once, never behind
//! read-ahead, so a thread has at most one request more. Throttling (HTTP 429, 503) and transient errors (5xx, broken
//! connections, request timeouts) are retried with exponential backoff; a request that still
//! fails, or that has no answer after [`StorageOptions::deadline`], is an error naming the object
//! and the byte range ([`RemoteError`]).
//!
//! # MSC profiles
//!
//! `msc://PROFILE/PATH` is resolved through the configuration file of the multi-storage client:
//! the file named by `MSC_CONFIG`, else the first of `$XDG_CONFIG_HOME/msc/config.{yaml,json}`,
//! `~/.msc_config.{yaml,json}`, `~/.config/msc/config.{yaml,json}`,
//! `$XDG_CONFIG_DIRS/msc/config.{yaml,json}` (default `/etc/xdg`) and `/etc/msc_config.{yaml,json}`
//! that exists. The profile's `storage_provider` (`type` `s3`, `s8k`, `gcs`, `azure` or `file`, and
//! `options.base_path`, `endpoint_url`, `region_name`) and an `S3Credentials` /
//! `AzureCredentials` credentials provider are read; `${VAR}` in values is taken from the
//! environment.

use std::{
    io,
    ops::Range,
    path::{Path, PathBuf},
    time::Duration,
};

use bytes::Bytes;

mod location;
mod msc;
#[cfg(feature = "remote")]
mod object;
mod rclone;
#[cfg(feature = "remote")]
mod remote;
mod version;

pub use location::{Location, RemoteTarget, Scheme};
#[cfg(feature = "remote")]
pub use object::RemoteObject;
#[cfg(not(feature = "remote"))]
pub use object_stub::RemoteObject;
pub use version::{ObjectVersion, VersionPin};

/// Why a request to an object store failed, naming the object and the byte range.
///
/// Returned inside an [`io::Error`] (of kind `NotFound`, `TimedOut` or `Other`), so callers that
/// handle file errors handle it too; `io::Error::get_ref` and `downcast_ref` give it back.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{url}{}: {message}", range_text(.range))]
pub struct RemoteError {
    /// The object's URL.
    pub url: String,
    /// The byte range requested, for ranged reads.
    pub range: Option<Range<u64>>,
    /// What went wrong, after retries.
    pub message: String,
    /// Whether the object does not exist.
    pub not_found: bool,
    /// Whether no answer came within the deadline.
    pub timed_out: bool,
}

fn range_text(range: &Option<Range<u64>>) -> String {
    match range {
        Some(r) => format!(" at byte offset {} (bytes {}..{})", r.start, r.start, r.end),
        None => String::new(),
    }
}

impl From<RemoteError> for io::Error {
    fn from(err: RemoteError) -> Self {
        let kind = if err.not_found {
            io::ErrorKind::NotFound
        } else if err.timed_out {
            io::ErrorKind::TimedOut
        } else {
            io::ErrorKind::Other
        };
        io::Error::new(kind, err)
    }
}

/// How remote objects are read. [`StorageOptions::from_env`] gives the defaults, each changed by
/// an environment variable; [`configure`] sets them before the first remote request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StorageOptions {
    /// Time allowed for one HTTP request (`ENERGON_STORAGE_REQUEST_TIMEOUT_S`, default 30).
    pub request_timeout: Duration,
    /// Time allowed to connect (`ENERGON_STORAGE_CONNECT_TIMEOUT_S`, default 5).
    pub connect_timeout: Duration,
    /// Retries of a throttled or failed request (`ENERGON_STORAGE_RETRIES`, default 8).
    pub retries: usize,
    /// Time after which a request, retries included, fails (`ENERGON_STORAGE_DEADLINE_S`,
    /// default 120). A loader whose storage stops answering errors after at most this long.
    pub deadline: Duration,
    /// Read-ahead requests in flight per thread (`ENERGON_STORAGE_IN_FLIGHT`, default 8; the
    /// request the thread waits for comes on top); also how many windows ahead a sequential
    /// reader prefetches.
    pub in_flight: usize,
    /// Bytes of neighbouring samples read in one request (`ENERGON_STORAGE_WINDOW_BYTES`,
    /// default 1 MiB); a larger sample is read alone.
    pub window_bytes: u64,
    /// Folder for local copies of index files (`ENERGON_STORAGE_CACHE_DIR`, default
    /// `$XDG_CACHE_HOME/energon-rs` or `~/.cache/energon-rs`).
    pub cache_dir: PathBuf,
    /// Size limit of the cache folder in bytes (`ENERGON_STORAGE_CACHE_BYTES`, default 16 GiB);
    /// the least recently used copies are removed past it.
    pub cache_bytes: u64,
}

impl StorageOptions {
    /// The defaults, each overridden by its environment variable when set and valid.
    pub fn from_env() -> Self {
        let num = |name: &str, default: u64| -> u64 {
            std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
        };
        let secs = |name: &str, default: f64| -> Duration {
            let v = std::env::var(name).ok().and_then(|v| v.trim().parse::<f64>().ok());
            Duration::from_secs_f64(v.filter(|v| v.is_finite() && *v > 0.0).unwrap_or(default))
        };
        let cache_dir = std::env::var_os("ENERGON_STORAGE_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("energon-rs"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/energon-rs"))
            })
            .unwrap_or_else(|| std::env::temp_dir().join("energon-rs-cache"));
        StorageOptions {
            request_timeout: secs("ENERGON_STORAGE_REQUEST_TIMEOUT_S", 30.0),
            connect_timeout: secs("ENERGON_STORAGE_CONNECT_TIMEOUT_S", 5.0),
            retries: num("ENERGON_STORAGE_RETRIES", 8) as usize,
            deadline: secs("ENERGON_STORAGE_DEADLINE_S", 120.0),
            in_flight: (num("ENERGON_STORAGE_IN_FLIGHT", 8) as usize).max(1),
            window_bytes: num("ENERGON_STORAGE_WINDOW_BYTES", 1 << 20).max(1),
            cache_dir,
            cache_bytes: num("ENERGON_STORAGE_CACHE_BYTES", 16 << 30),
        }
    }
}

/// Sets the options of remote reading; only before the first remote request (returns `false`,
/// changing nothing, after it). Without the `remote` feature it only returns `false`.
pub fn configure(options: StorageOptions) -> bool {
    #[cfg(feature = "remote")]
    {
        remote::configure(options)
    }
    #[cfg(not(feature = "remote"))]
    {
        let _ = options;
        false
    }
}

/// The options in force (those of [`configure`], else [`StorageOptions::from_env`]).
pub fn options() -> StorageOptions {
    #[cfg(feature = "remote")]
    {
        remote::options().clone()
    }
    #[cfg(not(feature = "remote"))]
    {
        StorageOptions::from_env()
    }
}

/// The normal form of a remote path (`s3://bucket//a/../b` → `s3://bucket/b`; an `msc://`
/// profile of type `file` gives its local path); a local path is returned as it is.
pub fn normalize(path: &Path) -> io::Result<PathBuf> {
    if !is_remote(path) {
        return Ok(path.to_path_buf());
    }
    Ok(match Location::of(path)? {
        Location::Local(p) => p,
        Location::Remote(t) => PathBuf::from(t.url),
    })
}

/// Whether `path` is written as a remote URL (whether or not it can be reached).
pub fn is_remote(path: &Path) -> bool {
    location::remote_scheme(path).is_some()
}

/// Reads a whole file or object.
pub fn read(path: &Path) -> io::Result<Bytes> {
    match Location::of(path)? {
        Location::Local(p) => std::fs::read(p).map(Bytes::from),
        Location::Remote(t) => remote::read(&t),
    }
}

/// Reads a whole file or object, and for an object the version it read (see [`ObjectVersion`]).
pub fn read_versioned(path: &Path) -> io::Result<(Bytes, Option<ObjectVersion>)> {
    match Location::of(path)? {
        Location::Local(p) => Ok((std::fs::read(p).map(Bytes::from)?, None)),
        Location::Remote(t) => remote::read_versioned(&t).map(|(b, v)| (b, Some(v))),
    }
}

/// Reads bytes `range` of a file or object; fewer bytes only where the file ends first.
pub fn read_range(path: &Path, range: Range<u64>) -> io::Result<Bytes> {
    match Location::of(path)? {
        Location::Local(p) => {
            use std::os::unix::fs::FileExt as _;
            let file = std::fs::File::open(p)?;
            let len = file.metadata()?.len();
            let end = range.end.min(len);
            let mut buf = vec![0; end.saturating_sub(range.start) as usize];
            file.read_exact_at(&mut buf, range.start)?;
            Ok(Bytes::from(buf))
        }
        Location::Remote(t) => remote::read_range(&t, range),
    }
}

/// The size of a file or object in bytes.
pub fn size(path: &Path) -> io::Result<u64> {
    match Location::of(path)? {
        Location::Local(p) => std::fs::metadata(p).map(|m| m.len()),
        Location::Remote(t) => remote::head(&t),
    }
}

/// Whether `path` is a regular file or an object (any error counts as no).
pub fn is_file(path: &Path) -> bool {
    try_is_file(path).unwrap_or(false)
}

/// Whether `path` is a folder, or a prefix with objects under it (any error counts as no).
pub fn is_dir(path: &Path) -> bool {
    try_is_dir(path).unwrap_or(false)
}

/// [`is_file`], with the errors of a store that cannot be reached (a missing object is
/// `Ok(false)`).
pub fn try_is_file(path: &Path) -> io::Result<bool> {
    match Location::of(path)? {
        Location::Local(p) => Ok(p.is_file()),
        Location::Remote(t) => match remote::head(&t) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        },
    }
}

/// [`is_dir`], with the errors of a store that cannot be reached.
pub fn try_is_dir(path: &Path) -> io::Result<bool> {
    match Location::of(path)? {
        Location::Local(p) => Ok(p.is_dir()),
        Location::Remote(t) => remote::has_children(&t),
    }
}

/// A file or object found by [`list_files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// `/`-separated path relative to the listed folder.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
}

/// Every object under the remote prefix `path`, at any depth, sorted by name. Local folders are
/// walked by their callers (which keep their own rules for symlinks and unreadable folders), so
/// this lists remote prefixes only; a local path is an error.
pub fn list_files(path: &Path) -> io::Result<Vec<Listed>> {
    match Location::of(path)? {
        Location::Local(p) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a local folder, not an object-store prefix", p.display()),
        )),
        Location::Remote(t) => remote::list(&t),
    }
}

/// Writes `bytes` to `path` so that readers see the old content or the new one: locally through a
/// synced temporary file renamed into place, remotely as one PUT.
pub fn write_atomic(path: &Path, bytes: Bytes) -> io::Result<()> {
    match Location::of(path)? {
        Location::Local(p) => crate::fsutil::atomic_write(&p, &bytes).map_err(io::Error::other),
        Location::Remote(t) => remote::put(&t, bytes),
    }
}

/// Uploads the local file `src` to `dst` (a remote path; a local `dst` gets a copy), replacing
/// the destination at once.
pub fn upload(src: &Path, dst: &Path) -> io::Result<()> {
    match Location::of(dst)? {
        Location::Local(p) => std::fs::copy(src, p).map(drop),
        Location::Remote(t) => remote::put_file(&t, src),
    }
}

/// A local file with the content of `path`: the path itself when it is local, else a copy in the
/// cache folder (downloaded once per object version, kept within the cache's size limit).
pub fn local_file(path: &Path) -> io::Result<PathBuf> {
    match Location::of(path)? {
        Location::Local(p) => Ok(p),
        Location::Remote(t) => remote::local_copy(&t),
    }
}

#[cfg(not(feature = "remote"))]
mod remote {
    //! Without the `remote` feature every remote operation is refused.
    use super::*;

    fn unsupported<T>(t: &RemoteTarget) -> io::Result<T> {
        Err(location::unsupported(&t.url))
    }
    pub(super) fn read(t: &RemoteTarget) -> io::Result<Bytes> {
        unsupported(t)
    }
    pub(super) fn read_versioned(t: &RemoteTarget) -> io::Result<(Bytes, ObjectVersion)> {
        unsupported(t)
    }
    pub(super) fn read_range(t: &RemoteTarget, _: Range<u64>) -> io::Result<Bytes> {
        unsupported(t)
    }
    pub(super) fn head(t: &RemoteTarget) -> io::Result<u64> {
        unsupported(t)
    }
    pub(super) fn has_children(t: &RemoteTarget) -> io::Result<bool> {
        unsupported(t)
    }
    pub(super) fn list(t: &RemoteTarget) -> io::Result<Vec<Listed>> {
        unsupported(t)
    }
    pub(super) fn put(t: &RemoteTarget, _: Bytes) -> io::Result<()> {
        unsupported(t)
    }
    pub(super) fn put_file(t: &RemoteTarget, _: &Path) -> io::Result<()> {
        unsupported(t)
    }
    pub(super) fn local_copy(t: &RemoteTarget) -> io::Result<PathBuf> {
        unsupported(t)
    }
}

#[cfg(not(feature = "remote"))]
mod object_stub {
    //! Without the `remote` feature no [`RemoteObject`] can be opened; the type exists so that
    //! readers compile the same either way.
    use std::{convert::Infallible, io, ops::Range, path::Path, sync::Arc};

    use bytes::Bytes;

    use super::{Location, location::unsupported};

    /// A remote object read by ranges; this build cannot open one.
    #[derive(Debug)]
    pub struct RemoteObject {
        never: Infallible,
    }

    #[allow(missing_docs, clippy::missing_errors_doc)]
    impl RemoteObject {
        pub fn open(path: &Path) -> io::Result<Arc<RemoteObject>> {
            match Location::of(path)? {
                Location::Remote(t) => Err(unsupported(&t.url)),
                Location::Local(p) => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is a local path, not an object", p.display()),
                )),
            }
        }
        pub fn open_sized(path: &Path, _: u64) -> io::Result<Arc<RemoteObject>> {
            Self::open(path)
        }
        pub fn open_pinned(
            path: &Path,
            _: Option<u64>,
            _: Arc<super::VersionPin>,
        ) -> io::Result<Arc<RemoteObject>> {
            Self::open(path)
        }
        pub fn url(&self) -> &str {
            match self.never {}
        }
        pub fn len(&self) -> u64 {
            match self.never {}
        }
        pub fn is_empty(&self) -> bool {
            match self.never {}
        }
        pub fn changed(&self) -> bool {
            match self.never {}
        }
        pub fn read(&self, _: Range<u64>) -> io::Result<Bytes> {
            match self.never {}
        }
        pub fn has_window(&self, _: u64) -> bool {
            match self.never {}
        }
        pub fn prefetch(&self, _: Range<u64>) -> io::Result<()> {
            match self.never {}
        }
        pub fn release(&self, _: u64) {
            match self.never {}
        }
        pub fn read_in(&self, _: Range<u64>, _: Range<u64>) -> io::Result<Bytes> {
            match self.never {}
        }
    }
}

#[cfg(test)]
mod tests;
