//! Reading one remote object by byte ranges: windows of neighbouring samples, each fetched with
//! one ranged request, kept in a small cache, and prefetched ahead of a sequential reader.
//!
//! The caller (the shard reader) chooses the windows, from the sample offsets it knows; this type
//! fetches each window once, lets every reader of it wait for the same request, and keeps at most
//! [`StorageOptions::in_flight`](super::StorageOptions::in_flight) + 4 windows per object.

use std::{
    collections::BTreeMap,
    io,
    ops::Range,
    path::Path,
    sync::{Arc, Mutex, PoisonError},
};

use bytes::Bytes;
use object_store::{ObjectStore, ObjectStoreExt as _, path::Path as ObjectPath};
use tokio::sync::watch;

use super::{
    Location, RemoteError, RemoteTarget,
    remote::{self, client, finish},
};

type Fetched = Option<Result<Bytes, RemoteError>>;

/// A remote object read by ranges (see the [module](super) documentation).
pub struct RemoteObject {
    target: RemoteTarget,
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    size: u64,
    max_windows: usize,
    windows: Mutex<Windows>,
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteObject")
            .field("url", &self.target.url)
            .field("size", &self.size)
            .finish()
    }
}

#[derive(Default)]
struct Windows {
    tick: u64,
    /// Window start → the window.
    slots: BTreeMap<u64, Slot>,
}

struct Slot {
    end: u64,
    last_use: u64,
    rx: watch::Receiver<Fetched>,
}

impl RemoteObject {
    /// Opens the object at the remote path `path` (one HEAD request for its size).
    pub fn open(path: &Path) -> io::Result<Arc<RemoteObject>> {
        let target = match Location::of(path)? {
            Location::Remote(t) => t,
            Location::Local(p) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is a local path, not an object", p.display()),
                ));
            }
        };
        let client = client()?;
        let size = remote::head(&target)?;
        Ok(Arc::new(RemoteObject {
            store: client.store(&target)?,
            path: ObjectPath::from(target.key.as_str()),
            target,
            size,
            max_windows: client.options.in_flight + 4,
            windows: Mutex::new(Windows::default()),
        }))
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// The object's size in bytes (when it was opened).
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Reads `range` with one request, bypassing the window cache.
    pub fn read(&self, range: Range<u64>) -> io::Result<Bytes> {
        let client = client()?;
        let (store, path, r) = (self.store.clone(), self.path.clone(), range.clone());
        let bytes = client.run(&self.target, "GET", Some(range.clone()), async move {
            store.get_range(&path, r).await
        })?;
        self.check_len(&range, &bytes).map_err(io::Error::from)?;
        Ok(bytes)
    }

    /// Whether the window starting at `start` is fetched or being fetched.
    pub fn has_window(&self, start: u64) -> bool {
        self.windows.lock().unwrap_or_else(PoisonError::into_inner).slots.contains_key(&start)
    }

    /// Starts fetching `window` in the background unless it is cached or under way. The request
    /// takes one of the calling thread's permits.
    pub fn prefetch(&self, window: Range<u64>) -> io::Result<()> {
        self.slot(window).map(drop)
    }

    /// Bytes `want` (inside `window`), from the window's request: fetched now, or waited for when
    /// under way, or taken from the cache.
    pub fn read_in(&self, window: Range<u64>, want: Range<u64>) -> io::Result<Bytes> {
        debug_assert!(window.start <= want.start && want.end <= window.end);
        let client = client()?;
        let mut rx = self.slot(window.clone())?;
        let wait = client.options.deadline * 2;
        let res = client.runtime.block_on(async {
            tokio::time::timeout(wait, async {
                rx.wait_for(Option::is_some).await.map(|v| v.clone())
            })
            .await
        });
        let fetched = match res {
            Ok(Ok(Some(fetched))) => fetched,
            Ok(_) => Err(self.error(&window, "the request was dropped".to_owned())),
            Err(_) => Err(self.error(&window, "no answer in time".to_owned())),
        };
        match fetched {
            Ok(bytes) => {
                let from = (want.start - window.start) as usize;
                let to = (want.end - window.start) as usize;
                Ok(bytes.slice(from..to))
            }
            Err(err) => {
                // Forget the failed window, so a later read asks again.
                let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
                if windows.slots.get(&window.start).is_some_and(|s| s.end == window.end) {
                    windows.slots.remove(&window.start);
                }
                Err(err.into())
            }
        }
    }

    /// The window's slot, started if new.
    fn slot(&self, window: Range<u64>) -> io::Result<watch::Receiver<Fetched>> {
        let client = client()?;
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        windows.tick += 1;
        let tick = windows.tick;
        if let Some(slot) = windows.slots.get_mut(&window.start)
            && slot.end == window.end
        {
            slot.last_use = tick;
            return Ok(slot.rx.clone());
        }
        if windows.slots.len() >= self.max_windows
            && let Some(oldest) =
                windows.slots.iter().min_by_key(|(_, s)| s.last_use).map(|(&k, _)| k)
        {
            windows.slots.remove(&oldest);
        }
        let (tx, rx) = watch::channel(None);
        windows
            .slots
            .insert(window.start, Slot { end: window.end, last_use: tick, rx: rx.clone() });
        drop(windows);
        let permits = remote::permits();
        let (store, path, url) = (self.store.clone(), self.path.clone(), self.target.url.clone());
        let deadline = client.options.deadline;
        let this = RangeCheck { url: url.clone(), window: window.clone() };
        client.runtime.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let res = tokio::time::timeout(deadline, store.get_range(&path, window.clone())).await;
            let fetched =
                finish(&url, "GET", Some(window), deadline, res).and_then(|b| this.check(b));
            let _ = tx.send(Some(fetched));
        });
        Ok(rx)
    }

    fn check_len(&self, range: &Range<u64>, bytes: &Bytes) -> Result<(), RemoteError> {
        RangeCheck { url: self.target.url.clone(), window: range.clone() }
            .check(bytes.clone())
            .map(drop)
    }

    fn error(&self, range: &Range<u64>, message: String) -> RemoteError {
        RemoteError {
            url: self.target.url.clone(),
            range: Some(range.clone()),
            message,
            not_found: false,
            timed_out: true,
        }
    }
}

/// Checks that a ranged read returned the whole range (an object cut short returns less).
struct RangeCheck {
    url: String,
    window: Range<u64>,
}

impl RangeCheck {
    fn check(&self, bytes: Bytes) -> Result<Bytes, RemoteError> {
        let want = self.window.end - self.window.start;
        if bytes.len() as u64 == want {
            return Ok(bytes);
        }
        Err(RemoteError {
            url: self.url.clone(),
            range: Some(self.window.clone()),
            message: format!(
                "got {} of {want} bytes: the object ends at byte offset {} (truncated?)",
                bytes.len(),
                self.window.start + bytes.len() as u64
            ),
            not_found: false,
            timed_out: false,
        })
    }
}
