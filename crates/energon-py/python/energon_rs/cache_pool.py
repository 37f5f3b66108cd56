"""Cache pools: files of file stores fetched ahead into a local cache folder, and lazy
references to them that samples carry until they are used.

    pool = FileStoreCachePool(parent_cache_dir="/scratch", max_cache_size_gbytes=16)
    lazy = pool.get_lazy(store, "0042.jpg")      # a background thread starts fetching it
    ...
    data = lazy.get(sample)                      # the cached copy (or a direct read)

A pool fetches the requested files in the order they were requested, with `num_workers`
threads, as long as the cache has room (`max_cache_size_gbytes`, `max_cache_count`); a fetch
that does not fit waits until used files free space. References to the same file share one
cached copy, which is removed when the last reference is used or dropped. A reference used
before its file is cached reads the file directly, and the fetch moves to the end of the queue
for the other references. `method="raw"` caches the file's bytes (decoded when used),
`method="pickle"` caches the decoded value.
"""

from __future__ import annotations

import collections
import os
import pickle
import shutil
import threading
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Generic, Optional, TypeVar, Union

from .cache import FileStore, add_source_info

__all__ = [
    "CacheFileLazy",
    "CachePool",
    "DirectLazy",
    "FileCacheLazy",
    "FileStoreCachePool",
    "Lazy",
    "MockLazy",
    "NoCachePool",
]

T = TypeVar("T")

_UNSET: Any = object()


class Lazy(Generic[T]):
    """A reference to data read when `get()` is called (its source info is added to the
    sample given)."""

    def get(self, sample: Any = None) -> T:
        raise NotImplementedError


class MockLazy(Lazy[T]):
    """A reference whose data comes from `get_fn(fname)` (for tests and previews)."""

    def __init__(self, fname: str, get_fn: Callable[[str], T]) -> None:
        self.fname = fname
        self.get_fn = get_fn

    def get(self, sample: Any = None) -> T:
        return self.get_fn(self.fname)

    def __repr__(self) -> str:
        return f"MockLazy(fname={self.fname!r})"


class DirectLazy(Lazy[T]):
    """A reference read directly from its file store when used (no cache)."""

    def __init__(self, ds: FileStore, fname: str) -> None:
        self.ds = ds
        self.fname = fname
        self._data: Any = _UNSET
        self._source_info: Any = None

    def get(self, sample: Any = None) -> T:
        if self._data is _UNSET:
            self._data, self._source_info = self.ds[self.fname]
        add_source_info(sample, self._source_info)
        return self._data

    def __repr__(self) -> str:
        return f"DirectLazy(fname={self.fname!r}, ds={self.ds!r})"


class _Value(Lazy[T]):
    """A reference to a value already in memory."""

    def __init__(self, data: T) -> None:
        self._data = data

    def get(self, sample: Any = None) -> T:
        return self._data


class CachePool:
    """Base of the cache pools: `get` reads now, `get_lazy` a reference fetched ahead,
    `to_cache` keeps a value aside until it is used."""

    def get(self, ds: FileStore, fname: str, sample: Any = None) -> Any:
        """The data of `fname` in `ds`, read now; its source info is added to `sample`."""
        return ds.get(fname, sample)

    def get_lazy(self, ds: FileStore, fname: str) -> Lazy:
        raise NotImplementedError

    def to_cache(self, data: Any, name: str) -> Lazy:
        raise NotImplementedError

    def close(self) -> None:
        """Stops the pool's threads and removes its files."""


class NoCachePool(CachePool):
    """A pool without a cache: references read their file when used."""

    def get_lazy(self, ds: FileStore, fname: str) -> DirectLazy:
        return DirectLazy(ds, fname)

    def to_cache(self, data: Any, name: str) -> Lazy:
        return _Value(data)


class _Entry:
    """One file of one store, shared by the references to it."""

    def __init__(self, ds: FileStore, fname: str) -> None:
        self.ds = ds
        self.fname = fname
        self.refcount = 0
        self.send_to_cache_future: Future = Future()
        self.data_size: Optional[int] = None
        self.cache_path: Optional[Path] = None
        self.source_info: Any = None
        self.pickled = False
        self.state = "pending"  # pending, cached, gone

    def __repr__(self) -> str:
        return f"_Entry({self.fname!r}, {self.state}, refcount={self.refcount})"


class FileCacheLazy(Lazy[T]):
    """A reference to a file of a `FileStoreCachePool`."""

    def __init__(self, pool: "FileStoreCachePool", ds: FileStore, fname: str, entry: _Entry) -> None:
        self.pool = pool
        self.ds = ds
        self.fname = fname
        self.entry = entry
        self._data: Any = None
        self._source_info: Any = None
        self._used = False

    def get(self, sample: Any = None) -> T:
        """The file's data (read once; later calls give the same value)."""
        if not self._used:
            self._data, self._source_info = self.pool._use(self.entry)
            self._used = True
        add_source_info(sample, self._source_info)
        return self._data

    def __del__(self) -> None:
        if not getattr(self, "_used", True):
            self._used = True
            self.pool._release(self.entry)

    def __repr__(self) -> str:
        return f"FileCacheLazy(fname={self.fname!r}, entry={self.entry!r})"


class CacheFileLazy(Lazy[T]):
    """A value kept aside in a cache file (`FileStoreCachePool.to_cache`); the file is removed
    when the value is first read or the reference is dropped."""

    def __init__(self, cache_path: Path) -> None:
        self.cache_path: Optional[Path] = cache_path
        self._data: Any = _UNSET

    def get(self, sample: Any = None) -> T:
        if self._data is _UNSET:
            assert self.cache_path is not None
            with open(self.cache_path, "rb") as f:
                self._data = pickle.load(f)
            self._remove()
        return self._data

    def _remove(self) -> None:
        if self.cache_path is not None:
            self.cache_path.unlink(missing_ok=True)
            self.cache_path = None

    def __del__(self) -> None:
        self._remove()


class FileStoreCachePool(CachePool):
    """A pool that fetches files ahead into `parent_cache_dir/cache_<random>/` (see the
    module's documentation)."""

    def __init__(
        self,
        *,
        parent_cache_dir: Optional[Union[str, os.PathLike]] = None,
        num_workers: int = 8,
        max_cache_size_gbytes: float = 1024,
        max_cache_count: int = 10_000_000,
        method: str = "raw",
    ) -> None:
        if method not in ("raw", "pickle"):
            raise ValueError(f"method must be 'raw' or 'pickle', not {method!r}")
        if num_workers < 1:
            raise ValueError("num_workers must be at least 1")
        parent = Path(parent_cache_dir) if parent_cache_dir is not None else Path(
            os.environ.get("TMPDIR", "/tmp")
        )
        self.parent_cache_dir = parent
        self.cache_dir = (parent / f"cache_{uuid.uuid4().hex}").resolve()
        self.cache_dir.mkdir(parents=True)
        self.num_workers = num_workers
        self.method = method
        self.max_cache_size = int(max_cache_size_gbytes * 1024**3)
        self.max_cache_count = max_cache_count
        self.current_cache_size = 0
        self.current_cache_count = 0
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._queue: collections.deque[_Entry] = collections.deque()
        self._entries: dict[tuple[int, str], _Entry] = {}
        self._claimed: set[int] = set()
        self._closing = False
        self._threads = [
            threading.Thread(target=self._work, name=f"cache-pool-{i}", daemon=True)
            for i in range(num_workers)
        ]
        for t in self._threads:
            t.start()

    # References.
    def get_lazy(self, ds: FileStore, fname: str) -> FileCacheLazy:
        """A reference to `fname` of `ds`, fetched into the cache in the background."""
        key = (id(ds), fname)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.state == "gone":
                entry = _Entry(ds, fname)
                self._entries[key] = entry
                self._queue.append(entry)
                self._changed.notify_all()
            entry.refcount += 1
        return FileCacheLazy(self, ds, fname, entry)

    def to_cache(self, data: Any, name: str) -> CacheFileLazy:
        """`data` pickled into a cache file until it is read."""
        path = self.cache_dir / f"{uuid.uuid4().hex}.pkl"
        with open(path, "wb") as f:
            pickle.dump(data, f)
        return CacheFileLazy(path)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            self._changed.notify_all()
        for t in self._threads:
            t.join()
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    # Reading.
    def _read(self, ds: FileStore, fname: str) -> tuple[Any, Any]:
        """What the cache stores for a file: its raw bytes or its pickled value, and its source
        info."""
        if self.method == "raw":
            data, source_info = ds._get_raw(fname)
            if isinstance(data, (bytes, bytearray, memoryview)):
                return (False, bytes(data)), source_info
            # A store whose stored form is a decoded value (decoded in Rust): pickled.
            return (True, pickle.dumps(data)), source_info
        data, source_info = ds[fname]
        return (True, pickle.dumps(data)), source_info

    def _decode(self, ds: FileStore, fname: str, pickled: bool, stored: bytes) -> Any:
        value = pickle.loads(stored) if pickled else stored
        if self.method == "raw":
            return ds._decode_raw(value, fname=fname)
        return value

    def _use(self, entry: _Entry) -> tuple[Any, Any]:
        """The data of one reference being used; the entry loses that reference."""
        with self._lock:
            if entry.state == "cached":
                assert entry.cache_path is not None
                stored = entry.cache_path.read_bytes()
                source_info = entry.source_info
                self._drop_reference(entry)
                return self._decode(entry.ds, entry.fname, entry.pickled, stored), source_info
            entry.refcount -= 1
            if entry.refcount <= 0:
                self._forget(entry)
            elif entry in self._queue:
                # Read directly below; the fetch waits behind the others now.
                self._queue.remove(entry)
                self._queue.append(entry)
                self._changed.notify_all()
        return entry.ds[entry.fname]

    def _release(self, entry: _Entry) -> None:
        """A reference dropped unused."""
        with self._lock:
            self._drop_reference(entry)

    def _drop_reference(self, entry: _Entry) -> None:
        entry.refcount -= 1
        if entry.refcount > 0:
            return
        if entry.state == "cached":
            assert entry.cache_path is not None
            entry.cache_path.unlink(missing_ok=True)
            entry.cache_path = None
            self.current_cache_count -= 1
            self.current_cache_size -= entry.data_size or 0
        self._forget(entry)

    def _forget(self, entry: _Entry) -> None:
        entry.state = "gone"
        if entry in self._queue:
            self._queue.remove(entry)
        key = (id(entry.ds), entry.fname)
        if self._entries.get(key) is entry:
            del self._entries[key]
        if not entry.send_to_cache_future.done():
            entry.send_to_cache_future.set_result(False)
        self._changed.notify_all()

    # The fetching threads.
    def _next(self) -> Optional[_Entry]:
        for entry in self._queue:
            if id(entry) not in self._claimed:
                return entry
        return None

    def _fits(self, size: int) -> bool:
        return (
            self.current_cache_count + 1 <= self.max_cache_count
            and self.current_cache_size + size <= self.max_cache_size
        )

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._closing and self._next() is None:
                    self._changed.wait()
                if self._closing:
                    return
                entry = self._next()
                assert entry is not None
                self._claimed.add(id(entry))
            try:
                self._fetch(entry)
            except BaseException as exc:  # noqa: BLE001 (the reference reads directly then)
                with self._lock:
                    if entry in self._queue:
                        self._queue.remove(entry)
                    if not entry.send_to_cache_future.done():
                        entry.send_to_cache_future.set_exception(exc)
            finally:
                with self._lock:
                    self._claimed.discard(id(entry))
                    self._changed.notify_all()

    def _fetch(self, entry: _Entry) -> None:
        (pickled, stored), source_info = self._read(entry.ds, entry.fname)
        size = len(stored)
        with self._lock:
            while True:
                if self._closing or entry.state != "pending":
                    return
                if self._queue and self._queue[0] is not entry and self.num_workers == 1:
                    return  # moved behind others: fetched again in its turn
                if self._fits(size):
                    break
                if self.current_cache_count == 0:
                    # Larger than the whole cache: its references read it directly.
                    self._queue.remove(entry)
                    entry.send_to_cache_future.set_result(False)
                    return
                self._changed.wait()
            path = self.cache_dir / uuid.uuid4().hex
            with open(path, "wb") as f:
                f.write(stored)
            entry.cache_path = path
            entry.data_size = size
            entry.source_info = source_info
            entry.pickled = pickled
            entry.state = "cached"
            self.current_cache_count += 1
            self.current_cache_size += size
            self._queue.remove(entry)
            entry.send_to_cache_future.set_result(True)

    def __repr__(self) -> str:
        return (
            f"FileStoreCachePool(cache_dir={str(self.cache_dir)!r}, "
            f"count={self.current_cache_count}, size={self.current_cache_size})"
        )
