"""Cache pools: `FileStoreCachePool` (fetch ahead, shared references, size limits), `NoCachePool`,
the lazy references, and `DecodeFileStore` over stores with their own decoder."""

from __future__ import annotations

import gc
import pickle

import pytest

import energon_rs
from conftest import REF_SMALL
from energon_rs.cache import DecodeFileStore, FileStore
from energon_rs.cache_pool import DirectLazy, FileCacheLazy, FileStoreCachePool, MockLazy, NoCachePool
from energon_rs.sample import SourceInfo


class DictStore(FileStore):
    def __init__(self, data):
        self.data = data

    def __getitem__(self, key):
        return self.data[key], SourceInfo(dataset_path="dict", index=None, shard_name=None, file_names=(key,))

    def get_path(self):
        return "dict"


class Upper:
    def decode(self, fname, raw):
        return raw.decode().upper()


@pytest.fixture
def pool(tmp_path):
    p = FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=1)
    yield p
    p.close()
    assert not p.cache_dir.exists()


def test_references_share_one_cached_copy(pool):
    store = DictStore({"a": b"alpha"})
    r1, r2 = pool.get_lazy(store, "a"), pool.get_lazy(store, "a")
    assert isinstance(r1, FileCacheLazy) and r1.entry is r2.entry and r1.entry.refcount == 2
    assert r1.entry.send_to_cache_future.result(timeout=5) is True
    assert len(list(pool.cache_dir.iterdir())) == 1
    sample = {"__sources__": ()}
    assert r1.get(sample) == b"alpha" and r1.get() == b"alpha"
    assert sample["__sources__"][0].file_names == ("a",)
    assert len(list(pool.cache_dir.iterdir())) == 1
    assert r2.get() == b"alpha"
    assert list(pool.cache_dir.iterdir()) == [] and pool.current_cache_count == 0


def test_a_full_cache_waits_and_a_dropped_reference_frees_it(tmp_path):
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=1, max_cache_count=1)
    try:
        store = DictStore({"a": b"1" * 10, "b": b"2" * 20})
        ra, rb = pool.get_lazy(store, "a"), pool.get_lazy(store, "b")
        ra.entry.send_to_cache_future.result(timeout=5)
        assert not rb.entry.send_to_cache_future.done()
        assert (pool.current_cache_count, pool.current_cache_size) == (1, 10)
        del ra
        gc.collect()
        assert rb.entry.send_to_cache_future.result(timeout=5) is True
        assert (pool.current_cache_count, pool.current_cache_size) == (1, 20)
        assert rb.get() == b"2" * 20
    finally:
        pool.close()


def test_a_reference_used_before_caching_reads_directly(tmp_path):
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=1, max_cache_count=1)
    try:
        store = DictStore({"a": b"a", "b": b"b"})
        ra = pool.get_lazy(store, "a")
        ra.entry.send_to_cache_future.result(timeout=5)
        rb1, rb2 = pool.get_lazy(store, "b"), pool.get_lazy(store, "b")
        assert rb1.get() == b"b" and rb1.entry.refcount == 1
        assert not rb2.entry.send_to_cache_future.done()
        assert ra.get() == b"a"
        assert rb2.entry.send_to_cache_future.result(timeout=5) is True
        assert rb2.get() == b"b" and pool.current_cache_count == 0
    finally:
        pool.close()


@pytest.mark.parametrize("method", ["raw", "pickle"])
def test_decoded_stores_in_both_methods(tmp_path, method):
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, method=method)
    try:
        store = DecodeFileStore(DictStore({"a": b"text"}), decoder=Upper())
        assert pool.get(store, "a") == "TEXT"
        ref = pool.get_lazy(store, "a")
        ref.entry.send_to_cache_future.result(timeout=5)
        assert ref.get() == "TEXT"
        native = DecodeFileStore(energon_rs.WebdatasetFileStore(REF_SMALL), decoder=energon_rs.SampleDecoder())
        ref = pool.get_lazy(native, "00000000.txt")
        assert isinstance(ref.get(), str)
    finally:
        pool.close()


def test_to_cache_keeps_a_value_until_read(pool):
    ref = pool.to_cache({"x": [1, 2]}, "v")
    path = ref.cache_path
    assert path.parent == pool.cache_dir and pickle.loads(path.read_bytes()) == {"x": [1, 2]}
    assert ref.get() == {"x": [1, 2]} and ref.get() == {"x": [1, 2]}
    assert ref.cache_path is None and not path.exists()
    other = pool.to_cache(3, "w")
    path = other.cache_path
    del other
    gc.collect()
    assert not path.exists()


def test_no_cache_pool_and_simple_references():
    store = DictStore({"a": b"x"})
    pool = NoCachePool()
    ref = pool.get_lazy(store, "a")
    assert isinstance(ref, DirectLazy) and ref.get() == b"x"
    assert pool.to_cache([1], "n").get() == [1]
    assert MockLazy("f", lambda name: name * 2).get() == "ff"
    with pytest.raises(ValueError, match="method"):
        FileStoreCachePool(method="zip")
    with pytest.raises(TypeError, match="decode"):
        DecodeFileStore(DictStore({"a": b""}), decoder=energon_rs.SampleDecoder())["a"]
