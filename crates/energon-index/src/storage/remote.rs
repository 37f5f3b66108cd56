//! The object-store clients (`object_store`), the runtime they run on, and the blocking calls the
//! rest of the crate makes.

use std::{
    cell::RefCell,
    collections::BTreeMap,
    future::Future,
    io,
    ops::Range,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, Once, OnceLock, PoisonError,
        atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt as _, RetryConfig,
    aws::{AmazonS3Builder, AmazonS3ConfigKey},
    azure::{AzureConfigKey, MicrosoftAzureBuilder},
    gcp::{GoogleCloudStorageBuilder, GoogleConfigKey},
    path::Path as ObjectPath,
};
use tokio::sync::Semaphore;

use super::{Listed, ObjectVersion, RemoteError, RemoteTarget, Scheme, StorageOptions};

/// The runtime, the clients (one per bucket or MSC profile) and the options.
pub(super) struct Client {
    pub(super) runtime: tokio::runtime::Runtime,
    stores: Mutex<BTreeMap<String, Arc<dyn ObjectStore>>>,
    pub(super) options: StorageOptions,
}

static OPTIONS: OnceLock<StorageOptions> = OnceLock::new();

/// This process's client, and the fork generation it belongs to (`UNSET`: none yet). A
/// process forked from one with a client inherits it without the runtime's threads (a request
/// on it would wait forever), so each process makes its own at its first request; an inherited
/// one is left as it is (never dropped: dropping would wait for threads that are not there).
static CLIENT: AtomicPtr<Client> = AtomicPtr::new(std::ptr::null_mut());
static CLIENT_GENERATION: AtomicU64 = AtomicU64::new(UNSET);
static CLIENT_INIT: Mutex<()> = Mutex::new(());
const UNSET: u64 = u64::MAX;

/// Forks this process descends through since the storage was first used: a `pthread_atfork`
/// handler adds one in each child, so telling a forked process is a load, not a system call.
static FORKS: AtomicU64 = AtomicU64::new(0);
static ATFORK: Once = Once::new();

extern "C" fn forked() {
    FORKS.fetch_add(1, Ordering::Release);
}

/// This process's fork generation (see [`FORKS`]).
pub(super) fn generation() -> u64 {
    ATFORK.call_once(|| {
        // SAFETY: the handler only adds to an atomic, which is safe in a child after fork.
        unsafe { libc::pthread_atfork(None, None, Some(forked)) };
    });
    FORKS.load(Ordering::Acquire)
}

thread_local! {
    /// This thread's bound on read-ahead in flight (a request the thread waits for takes no
    /// permit, so a thread has at most one more), and the fork generation it belongs to.
    static PERMITS: RefCell<(u64, Arc<Semaphore>)> =
        RefCell::new((UNSET, Arc::new(Semaphore::new(0))));
    /// This thread's window requests started and not finished (in flight or waiting for a
    /// permit), and the fork generation it belongs to.
    static STARTED: RefCell<(u64, Arc<AtomicUsize>)> = RefCell::new((UNSET, Arc::default()));
}

pub(super) fn configure(options: StorageOptions) -> bool {
    CLIENT.load(Ordering::Acquire).is_null() && OPTIONS.set(options).is_ok()
}

pub(super) fn options() -> &'static StorageOptions {
    OPTIONS.get_or_init(StorageOptions::from_env)
}

/// The calling thread's request bound (made anew in a forked process: the parent's requests
/// that held its permits are not there).
pub(super) fn permits() -> Arc<Semaphore> {
    let generation = generation();
    PERMITS.with_borrow_mut(|(owner, permits)| {
        if *owner != generation {
            *owner = generation;
            *permits = Arc::new(Semaphore::new(options().in_flight));
        }
        Arc::clone(permits)
    })
}

/// The count of the calling thread's window requests started and not finished.
pub(super) fn started() -> Arc<AtomicUsize> {
    let generation = generation();
    STARTED.with_borrow_mut(|(owner, started)| {
        if *owner != generation {
            *owner = generation;
            *started = Arc::default();
        }
        Arc::clone(started)
    })
}

/// This process's client (see [`CLIENT`]), made at its first request.
pub(super) fn client() -> io::Result<&'static Client> {
    let generation = generation();
    if let Some(client) = current(generation) {
        return Ok(client);
    }
    let _init = CLIENT_INIT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(client) = current(generation) {
        return Ok(client);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("energon-storage")
        .enable_all()
        .build()?;
    let client =
        Client { runtime, stores: Mutex::new(BTreeMap::new()), options: options().clone() };
    CLIENT.store(Box::into_raw(Box::new(client)), Ordering::Release);
    CLIENT_GENERATION.store(generation, Ordering::Release);
    Ok(current(generation).expect("set above"))
}

/// The client, if it is fork generation `generation`'s.
fn current(generation: u64) -> Option<&'static Client> {
    if CLIENT_GENERATION.load(Ordering::Acquire) != generation {
        return None;
    }
    // SAFETY: a client is stored before its generation and never freed.
    unsafe { CLIENT.load(Ordering::Acquire).as_ref() }
}

impl Client {
    /// The client of `target`'s bucket (or profile), built on first use.
    pub(super) fn store(&self, target: &RemoteTarget) -> io::Result<Arc<dyn ObjectStore>> {
        let mut stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = stores.get(&target.store_id) {
            return Ok(store.clone());
        }
        let store = build_store(target, &self.options).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: cannot set up the object-store client: {e}", target.url),
            )
        })?;
        stores.insert(target.store_id.clone(), store.clone());
        Ok(store)
    }

    /// Runs `fut` on the runtime, failing after the deadline. The calling thread waits for it, so
    /// it is a request of its own beside the thread's read-ahead and takes none of its permits: a
    /// read the thread needs now never queues behind requests for later.
    pub(super) fn run<T>(
        &self,
        target: &RemoteTarget,
        op: &'static str,
        range: Option<Range<u64>>,
        fut: impl Future<Output = object_store::Result<T>>,
    ) -> io::Result<T> {
        let deadline = self.options.deadline;
        // The timer is made inside the runtime (it needs its clock).
        let res = self.runtime.block_on(async { tokio::time::timeout(deadline, fut).await });
        finish(&target.url, op, range, deadline, res).map_err(io::Error::from)
    }
}

/// Maps the outcome of request `op` (`GET`, `HEAD`, `LIST`, `PUT`) into the crate's error.
pub(super) fn finish<T>(
    url: &str,
    op: &str,
    range: Option<Range<u64>>,
    deadline: Duration,
    res: Result<object_store::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, RemoteError> {
    let err = |message: String, not_found: bool, timed_out: bool| RemoteError {
        url: url.to_owned(),
        range: range.clone(),
        message,
        not_found,
        timed_out,
    };
    match res {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(object_store::Error::NotFound { .. })) => {
            Err(err("no such object".to_owned(), true, false))
        }
        Ok(Err(e)) => Err(err(format!("request failed: {e}"), false, false)),
        Err(_) => Err(err(
            format!(
                "no answer to {op} within {:.1} s (the storage deadline)",
                deadline.as_secs_f64()
            ),
            false,
            true,
        )),
    }
}

fn retry_config(options: &StorageOptions) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: options.retries,
        retry_timeout: options.deadline,
    }
}

/// The client settings, plain HTTP allowed when the store's `endpoint` (an S3-compatible server,
/// an emulator) is an `http://` URL.
fn client_options(options: &StorageOptions, endpoint: Option<String>) -> ClientOptions {
    let allow_http = endpoint.is_some_and(|e| e.starts_with("http://"));
    ClientOptions::new()
        .with_timeout(options.request_timeout)
        .with_connect_timeout(options.connect_timeout)
        .with_allow_http(allow_http)
        .with_pool_max_idle_per_host(64)
}

fn build_store(
    target: &RemoteTarget,
    options: &StorageOptions,
) -> object_store::Result<Arc<dyn ObjectStore>> {
    Ok(match target.scheme {
        Scheme::S3 => {
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(&target.bucket);
            for (key, value) in aws_shared_files() {
                let key: AmazonS3ConfigKey = key.parse()?;
                if builder.get_config_value(&key).is_none() {
                    builder = builder.with_config(key, value);
                }
            }
            for (key, value) in &target.config {
                builder = builder.with_config(key.parse()?, value);
            }
            let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
            Arc::new(
                builder
                    .with_retry(retry_config(options))
                    .with_client_options(client_options(options, endpoint))
                    .build()?,
            )
        }
        Scheme::Gcs => {
            let mut builder =
                GoogleCloudStorageBuilder::from_env().with_bucket_name(&target.bucket);
            for (key, value) in &target.config {
                builder = builder.with_config(key.parse::<GoogleConfigKey>()?, value);
            }
            // An emulator's (`GOOGLE_BASE_URL`).
            let endpoint = builder.get_config_value(&GoogleConfigKey::BaseUrl);
            Arc::new(
                builder
                    .with_retry(retry_config(options))
                    .with_client_options(client_options(options, endpoint))
                    .build()?,
            )
        }
        Scheme::Azure => {
            let mut builder = MicrosoftAzureBuilder::from_env().with_container_name(&target.bucket);
            for (key, value) in &target.config {
                builder = builder.with_config(key.parse::<AzureConfigKey>()?, value);
            }
            // Azurite's (`AZURE_STORAGE_ENDPOINT`, or a profile's).
            let endpoint = builder.get_config_value(&AzureConfigKey::Endpoint);
            Arc::new(
                builder
                    .with_retry(retry_config(options))
                    .with_client_options(client_options(options, endpoint))
                    .build()?,
            )
        }
    })
}

/// Settings from the AWS shared files (`AWS_SHARED_CREDENTIALS_FILE`, default
/// `~/.aws/credentials`, and `AWS_CONFIG_FILE`, default `~/.aws/config`) for the profile
/// `AWS_PROFILE` (default `default`): keys, session token, region and endpoint, as object-store
/// configuration keys. The environment's variables win over them.
fn aws_shared_files() -> Vec<(String, String)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var: &str, default: &str| {
        std::env::var_os(var).map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(default)))
    };
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".to_owned());
    let mut out = Vec::new();
    let sources = [
        (file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"), profile.clone()),
        (
            file("AWS_CONFIG_FILE", ".aws/config"),
            if profile == "default" { profile } else { format!("profile {profile}") },
        ),
    ];
    for (path, section) in sources {
        let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else { continue };
        let mut in_section = false;
        for line in text.lines().map(str::trim) {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                in_section = name.trim() == section;
            } else if in_section && let Some((key, value)) = line.split_once('=') {
                let key = match key.trim() {
                    "aws_access_key_id" => "aws_access_key_id",
                    "aws_secret_access_key" => "aws_secret_access_key",
                    "aws_session_token" => "aws_session_token",
                    "region" => "aws_region",
                    "endpoint_url" => "aws_endpoint",
                    _ => continue,
                };
                if !out.iter().any(|(k, _): &(String, String)| k == key) {
                    out.push((key.to_owned(), value.trim().to_owned()));
                }
            }
        }
    }
    out
}

fn object_path(target: &RemoteTarget) -> ObjectPath {
    ObjectPath::from(target.key.as_str())
}

pub(super) fn read(target: &RemoteTarget) -> io::Result<Bytes> {
    read_versioned(target).map(|(bytes, _)| bytes)
}

/// The whole object, and the version the answer came from.
pub(super) fn read_versioned(target: &RemoteTarget) -> io::Result<(Bytes, ObjectVersion)> {
    let client = client()?;
    let store = client.store(target)?;
    let path = object_path(target);
    client.run(target, "GET", None, async move {
        let got = store.get(&path).await?;
        let version = version_of(&got.meta);
        Ok((got.bytes().await?, version))
    })
}

/// The version an answer's metadata describes.
pub(super) fn version_of(meta: &object_store::ObjectMeta) -> ObjectVersion {
    ObjectVersion {
        size: meta.size,
        e_tag: meta.e_tag.clone(),
        last_modified: Some(meta.last_modified.to_rfc3339()),
    }
}

pub(super) fn read_range(target: &RemoteTarget, range: Range<u64>) -> io::Result<Bytes> {
    let client = client()?;
    let store = client.store(target)?;
    let path = object_path(target);
    let size = head(target)?;
    let clipped = range.start.min(size)..range.end.min(size);
    if clipped.is_empty() {
        return Ok(Bytes::new());
    }
    let r = clipped.clone();
    client.run(target, "GET", Some(clipped), async move { store.get_range(&path, r).await })
}

pub(super) fn head(target: &RemoteTarget) -> io::Result<u64> {
    meta(target).map(|m| m.size)
}

pub(super) fn meta(target: &RemoteTarget) -> io::Result<object_store::ObjectMeta> {
    let client = client()?;
    let store = client.store(target)?;
    let path = object_path(target);
    client.run(target, "HEAD", None, async move { store.head(&path).await })
}

pub(super) fn has_children(target: &RemoteTarget) -> io::Result<bool> {
    let client = client()?;
    let store = client.store(target)?;
    let prefix = (!target.key.is_empty()).then(|| object_path(target));
    let listed = client.run(target, "LIST", None, async move {
        store.list_with_delimiter(prefix.as_ref()).await
    })?;
    Ok(!listed.objects.is_empty() || !listed.common_prefixes.is_empty())
}

pub(super) fn list(target: &RemoteTarget) -> io::Result<Vec<Listed>> {
    let client = client()?;
    let store = client.store(target)?;
    let strip = if target.key.is_empty() { String::new() } else { format!("{}/", target.key) };
    let mut out: Vec<Listed> = Vec::new();
    // Folder by folder (a delimited listing each), as a file-system walk would.
    let mut pending: Vec<Option<ObjectPath>> =
        vec![(!target.key.is_empty()).then(|| object_path(target))];
    while let Some(prefix) = pending.pop() {
        let store = store.clone();
        let listed = client.run(target, "LIST", None, async move {
            store.list_with_delimiter(prefix.as_ref()).await
        })?;
        for meta in listed.objects {
            if let Some(name) = meta.location.as_ref().strip_prefix(strip.as_str()) {
                out.push(Listed { name: name.to_owned(), size: meta.size });
            }
        }
        pending.extend(listed.common_prefixes.into_iter().map(Some));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

pub(super) fn put(target: &RemoteTarget, bytes: Bytes) -> io::Result<()> {
    let client = client()?;
    let store = client.store(target)?;
    let path = object_path(target);
    client.run(target, "PUT", None, async move { store.put(&path, bytes.into()).await.map(drop) })
}

pub(super) fn put_file(target: &RemoteTarget, src: &Path) -> io::Result<()> {
    // Index files fit in memory; one PUT replaces the object at once.
    let bytes = std::fs::read(src)?;
    put(target, Bytes::from(bytes))
}

/// The cache file for `target`'s current version (named by a hash of URL, size and entity tag).
pub(super) fn local_copy(target: &RemoteTarget) -> io::Result<PathBuf> {
    let meta = meta(target)?;
    let options = options();
    let mut hasher = rustc_hash::FxHasher::default();
    std::hash::Hash::hash(&(&target.url, meta.size, &meta.e_tag), &mut hasher);
    let digest = std::hash::Hasher::finish(&hasher);
    let base = target.key.rsplit('/').next().unwrap_or("object");
    let dir = options.cache_dir.clone();
    let path = dir.join(format!("{digest:016x}-{base}"));
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == meta.size) {
        touch(&path);
        return Ok(path);
    }
    std::fs::create_dir_all(&dir)?;
    let bytes = read(target)?;
    if bytes.len() as u64 != meta.size {
        return Err(RemoteError {
            url: target.url.clone(),
            range: Some(0..meta.size),
            message: format!("read {} bytes of an object of {} bytes", bytes.len(), meta.size),
            not_found: false,
            timed_out: false,
        }
        .into());
    }
    crate::fsutil::atomic_write(&path, &bytes).map_err(io::Error::other)?;
    trim_cache(&dir, options.cache_bytes, &path);
    Ok(path)
}

/// Marks a cache file as used (its modification time orders the eviction).
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        // The clock only orders the eviction of cache files, never data.
        #[allow(clippy::disallowed_methods)]
        let _ = file.set_modified(std::time::SystemTime::now());
    }
}

/// Removes the least recently used files of the cache folder until it is within `limit` bytes
/// (never `keep`, the file just written).
fn trim_cache(dir: &Path, limit: u64, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            let modified = meta.modified().ok()?;
            meta.is_file().then(|| (modified, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= limit {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read as _, Write as _},
        net::TcpListener,
    };

    use super::*;

    /// Reads `bucket/a.txt` of `scheme` from a one-request HTTP server on 127.0.0.1, configured
    /// by `config(base_url)`; returns the bytes and the request line.
    fn read_over_http(
        scheme: Scheme,
        config: impl Fn(&str) -> Vec<(&str, &str)>,
    ) -> (Bytes, String) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = conn.read(&mut buf).unwrap();
            conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/octet-stream\r\n\
                  ETag: \"e1\"\r\nLast-Modified: Sun, 06 Dec 2026 20:00:00 GMT\r\n\
                  x-goog-generation: 1\r\nConnection: close\r\n\r\nhello",
            )
            .unwrap();
            let request = String::from_utf8_lossy(&buf[..n]).into_owned();
            request.lines().next().unwrap_or_default().to_owned()
        });
        let target = RemoteTarget {
            url: "x://data/a.txt".to_owned(),
            scheme,
            store_id: format!("{scheme:?} {base}"),
            bucket: "data".to_owned(),
            key: "a.txt".to_owned(),
            config: config(&base).into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
        };
        let bytes = read(&target).unwrap();
        (bytes, server.join().unwrap())
    }

    /// A Google Cloud Storage emulator named by its base URL (`GOOGLE_BASE_URL`) or Azurite (an
    /// `http://` storage endpoint) may speak plain HTTP, as S3-compatible servers may.
    #[test]
    fn emulators_may_speak_http() {
        let (bytes, request) = read_over_http(Scheme::Gcs, |base| {
            vec![("google_base_url", base), ("google_skip_signature", "true")]
        });
        assert_eq!(bytes, Bytes::from_static(b"hello"));
        // The bucket, then the key (which the client percent-encodes).
        assert!(request.starts_with("GET /data/a"), "{request}");
        let (bytes, request) = read_over_http(Scheme::Azure, |base| {
            vec![
                ("azure_storage_endpoint", base),
                ("azure_storage_account_name", "devstoreaccount1"),
                ("azure_skip_signature", "true"),
            ]
        });
        assert_eq!(bytes, Bytes::from_static(b"hello"));
        assert!(request.starts_with("GET /data/a"), "{request}");
    }
}
