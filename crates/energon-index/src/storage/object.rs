//! Reading one remote object by byte ranges: windows of neighbouring samples, each fetched with
//! one ranged request, kept in a small cache, and prefetched ahead of a sequential reader.
//!
//! The caller (the shard reader) chooses the windows, from the sample offsets it knows; this type
//! fetches each window once, lets every reader of it wait for the same request, and keeps at most
//! [`StorageOptions::in_flight`](super::StorageOptions::in_flight) + 4 windows per object.
//!
//! An object opened with the size its index gives ([`RemoteObject::open_sized`]) costs no request
//! to open; every ranged answer carries the object's size, which must be at least that, so a
//! truncated object is still an error, on its first read. Every answer's version (size and
//! entity tag) is checked against the object's [`VersionPin`]: an object replaced while it is
//! read, or since the version its reader was given, is an error, never a mix of two objects.

use std::{
    collections::BTreeMap,
    io,
    ops::Range,
    path::Path,
    sync::{Arc, Mutex, PoisonError, atomic::Ordering},
};

use bytes::Bytes;
use object_store::{GetOptions, ObjectStore, path::Path as ObjectPath};
use tokio::sync::{Notify, watch};

use super::{
    Location, ObjectVersion, RemoteError, RemoteTarget, VersionPin,
    remote::{self, client, finish, version_of},
};

type Fetched = Option<Result<Bytes, RemoteError>>;

/// A remote object read by ranges (see the [module](super) documentation).
pub struct RemoteObject {
    target: RemoteTarget,
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    size: u64,
    /// The version every answer must come from.
    pin: Arc<VersionPin>,
    /// Requests a thread may have in flight.
    in_flight: usize,
    max_windows: usize,
    windows: Mutex<Windows>,
    /// The fork generation that opened the object: a forked process reads through its own
    /// client.
    generation: u64,
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
    /// The fork generation whose windows these are, once a forked process cleared the
    /// inherited ones (0 until then).
    forked_in: u64,
}

struct Slot {
    end: u64,
    last_use: u64,
    rx: watch::Receiver<Fetched>,
    /// Wakes the window's request when it still waits for a permit: a reader needs it now.
    urgent: Arc<Notify>,
}

impl RemoteObject {
    /// Opens the object at the remote path `path` (one HEAD request for its size).
    pub fn open(path: &Path) -> io::Result<Arc<RemoteObject>> {
        Self::open_inner(path, None, Arc::default())
    }

    /// Opens the object at the remote path `path` whose index says it holds at least `size`
    /// bytes, without a request; each read checks that the size the store reports is not less.
    pub fn open_sized(path: &Path, size: u64) -> io::Result<Arc<RemoteObject>> {
        Self::open_inner(path, Some(size), Arc::default())
    }

    /// [`RemoteObject::open_sized`] (or [`RemoteObject::open`] without a `size`), with the
    /// version its reads must see (shared with other opens of the object: see [`VersionPin`]).
    pub fn open_pinned(
        path: &Path,
        size: Option<u64>,
        pin: Arc<VersionPin>,
    ) -> io::Result<Arc<RemoteObject>> {
        Self::open_inner(path, size, pin)
    }

    fn open_inner(
        path: &Path,
        size: Option<u64>,
        pin: Arc<VersionPin>,
    ) -> io::Result<Arc<RemoteObject>> {
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
        let size = match size {
            Some(size) => size,
            None => {
                let version = version_of(&remote::meta(&target)?);
                pin.check(&version).map_err(|message| {
                    io::Error::from(RemoteError {
                        url: target.url.clone(),
                        range: None,
                        message,
                        not_found: false,
                        timed_out: false,
                    })
                })?;
                version.size
            }
        };
        Ok(Arc::new(RemoteObject {
            store: client.store(&target)?,
            path: ObjectPath::from(target.key.as_str()),
            target,
            size,
            pin,
            in_flight: client.options.in_flight,
            max_windows: client.options.in_flight + 4,
            windows: Mutex::new(Windows::default()),
            generation: remote::generation(),
        }))
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// The object's size in bytes when it was opened (for [`RemoteObject::open_sized`], the size
    /// its index gives).
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Whether a read saw another version of the object than the pinned one.
    pub fn changed(&self) -> bool {
        self.pin.changed()
    }

    /// Reads `range` with one request, bypassing the window cache.
    pub fn read(&self, range: Range<u64>) -> io::Result<Bytes> {
        let client = client()?;
        let (store, path, r) = (self.store()?, self.path.clone(), range.clone());
        let (version, bytes) =
            client.run(&self.target, "GET", Some(range.clone()), async move {
                get_range(&*store, &path, r).await
            })?;
        self.range_check(range).check(&version, bytes).map_err(io::Error::from)
    }

    fn range_check(&self, window: Range<u64>) -> RangeCheck {
        RangeCheck { url: self.target.url.clone(), window, size: self.size, pin: self.pin.clone() }
    }

    /// The client of the object's store in this process (a forked process has its own).
    fn store(&self) -> io::Result<Arc<dyn ObjectStore>> {
        if self.generation == remote::generation() {
            return Ok(self.store.clone());
        }
        client()?.store(&self.target)
    }

    /// The windows; in a forked process, without the parent's (whose requests ran in the
    /// parent's runtime, which is not there).
    fn windows(&self) -> std::sync::MutexGuard<'_, Windows> {
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = remote::generation();
        if self.generation != generation && windows.forked_in != generation {
            windows.slots.clear();
            windows.forked_in = generation;
        }
        windows
    }

    /// Whether the window starting at `start` is fetched or being fetched.
    pub fn has_window(&self, start: u64) -> bool {
        self.windows().slots.contains_key(&start)
    }

    /// Forgets the window starting at `start` (its reader is done with it); a later read fetches
    /// it again.
    pub fn release(&self, start: u64) {
        self.windows().slots.remove(&start);
    }

    /// Starts fetching `window` in the background unless it is cached or under way. The request
    /// takes one of the calling thread's permits, unless a reader needs the window first (then it
    /// goes at once: a read never waits behind read-ahead).
    ///
    /// When as many of the thread's requests are started and not finished as it may have in
    /// flight, a read-ahead is left out (a reader moving on asks again).
    pub fn prefetch(&self, window: Range<u64>) -> io::Result<()> {
        let busy = remote::started().load(Ordering::Relaxed) >= self.in_flight;
        if busy && !self.has_window(window.start) {
            return Ok(());
        }
        self.slot(window).map(drop)
    }

    /// Bytes `want` (inside `window`), from the window's request: fetched now, or waited for when
    /// under way, or taken from the cache.
    pub fn read_in(&self, window: Range<u64>, want: Range<u64>) -> io::Result<Bytes> {
        debug_assert!(window.start <= want.start && want.end <= window.end);
        let client = client()?;
        let (mut rx, urgent) = self.slot(window.clone())?;
        // A window already fetched needs no trip through the runtime.
        let ready = rx.borrow().clone();
        let fetched = match ready {
            Some(fetched) => fetched,
            None => {
                // This thread waits for it now: its request no longer waits for a permit.
                urgent.notify_one();
                let wait = client.options.deadline * 2;
                let res = client.runtime.block_on(async {
                    tokio::time::timeout(wait, rx.wait_for(Option::is_some))
                        .await
                        .map(|r| r.map(|v| v.clone()))
                });
                match res {
                    Ok(Ok(Some(fetched))) => fetched,
                    Ok(_) => Err(self.error(&window, "the request was dropped".to_owned())),
                    Err(_) => Err(self.error(&window, "no answer in time".to_owned())),
                }
            }
        };
        match fetched {
            Ok(bytes) => {
                let from = (want.start - window.start) as usize;
                let to = (want.end - window.start) as usize;
                Ok(bytes.slice(from..to))
            }
            Err(err) => {
                // Forget the failed window, so a later read asks again.
                let mut windows = self.windows();
                if windows.slots.get(&window.start).is_some_and(|s| s.end == window.end) {
                    windows.slots.remove(&window.start);
                }
                Err(err.into())
            }
        }
    }

    /// The window's slot (its result, and the signal that makes its request urgent), started if
    /// new.
    fn slot(&self, window: Range<u64>) -> io::Result<(watch::Receiver<Fetched>, Arc<Notify>)> {
        let client = client()?;
        let mut windows = self.windows();
        windows.tick += 1;
        let tick = windows.tick;
        if let Some(slot) = windows.slots.get_mut(&window.start)
            && slot.end == window.end
        {
            slot.last_use = tick;
            return Ok((slot.rx.clone(), slot.urgent.clone()));
        }
        if windows.slots.len() >= self.max_windows
            && let Some(oldest) =
                windows.slots.iter().min_by_key(|(_, s)| s.last_use).map(|(&k, _)| k)
        {
            windows.slots.remove(&oldest);
        }
        let (tx, rx) = watch::channel(None);
        let urgent = Arc::new(Notify::new());
        let slot = Slot { end: window.end, last_use: tick, rx: rx.clone(), urgent: urgent.clone() };
        windows.slots.insert(window.start, slot);
        drop(windows);
        let permits = remote::permits();
        let started = remote::started();
        started.fetch_add(1, Ordering::Relaxed);
        let (store, path, url) = (self.store()?, self.path.clone(), self.target.url.clone());
        let deadline = client.options.deadline;
        let this = self.range_check(window.clone());
        let signal = urgent.clone();
        client.runtime.spawn(async move {
            // A permit, or none once a reader waits for this window.
            let _permit = tokio::select! {
                biased;
                () = signal.notified() => None,
                permit = permits.acquire_owned() => permit.ok(),
            };
            let res =
                tokio::time::timeout(deadline, get_range(&*store, &path, window.clone())).await;
            let fetched = finish(&url, "GET", Some(window), deadline, res)
                .map_err(|e| this.explain(e))
                .and_then(|(version, bytes)| this.check(&version, bytes));
            started.fetch_sub(1, Ordering::Relaxed);
            let _ = tx.send(Some(fetched));
        });
        Ok((rx, urgent))
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

/// One ranged GET: the object's version (its size from the answer's `Content-Range`) and the
/// bytes.
async fn get_range(
    store: &dyn ObjectStore,
    path: &ObjectPath,
    range: Range<u64>,
) -> object_store::Result<(ObjectVersion, Bytes)> {
    let got = store.get_opts(path, GetOptions::new().with_range(Some(range))).await?;
    let version = version_of(&got.meta);
    Ok((version, got.bytes().await?))
}

/// Checks that a ranged read returned the whole range of the pinned version of an object at least
/// as large as when it was opened (an object cut short reports a smaller size, and returns less).
struct RangeCheck {
    url: String,
    window: Range<u64>,
    size: u64,
    pin: Arc<VersionPin>,
}

impl RangeCheck {
    fn check(&self, version: &ObjectVersion, bytes: Bytes) -> Result<Bytes, RemoteError> {
        let want = self.window.end - self.window.start;
        let size = version.size;
        let message = if let Err(changed) = self.pin.check(version) {
            changed
        } else if size < self.size {
            format!(
                "the object is {size} bytes, shorter than the {} bytes it was opened with \
                 (truncated or replaced?)",
                self.size
            )
        } else if bytes.len() as u64 != want {
            format!(
                "got {} of {want} bytes: the object ends at byte offset {} (truncated?)",
                bytes.len(),
                self.window.start + bytes.len() as u64
            )
        } else {
            return Ok(bytes);
        };
        Err(RemoteError {
            url: self.url.clone(),
            range: Some(self.window.clone()),
            message,
            not_found: false,
            timed_out: false,
        })
    }

    /// A range the store refuses (it starts past the object's end) means the object is shorter
    /// than it was when opened.
    fn explain(&self, mut err: RemoteError) -> RemoteError {
        let text = err.message.to_ascii_lowercase();
        if !err.not_found && !err.timed_out && (text.contains("416") || text.contains("range")) {
            err.message.push_str(" (the object is shorter than expected: truncated or replaced?)");
        }
        err
    }
}
