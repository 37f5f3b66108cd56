"""Crude datasets with pickled parts and cookers that use the loader's cache pool
(`@cooker(need_cache=True)`, `get_loader(cache_pool=...)`)."""

from __future__ import annotations

import io
import pickle
import tarfile

import energon_rs
from energon_rs.cache_pool import FileCacheLazy, FileStoreCachePool, NoCachePool
from energon_rs.prepare import BaseWebdatasetFactory

WC = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)


def _crude_dataset(root, n=20):
    (root / "parts").mkdir(parents=True)
    with tarfile.open(root / "parts" / "data-0.tar", "w") as tar:
        for i in range(n):
            for part, data in (("txt", str(i).encode()), ("pkl", pickle.dumps({"idx": i * 10}))):
                info = tarfile.TarInfo(f"{i:06d}.{part}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    BaseWebdatasetFactory.prepare_dataset(root, ["parts/data-0.tar"], split_parts_ratio=[("train", 1.0)])
    (root / ".nv-meta" / "dataset.yaml").write_text(
        "__module__: megatron.energon\n__class__: CrudeWebdataset\nsubflavors:\n  kind: crude\n"
    )
    return root


@energon_rs.stateless
@energon_rs.cooker(need_cache=True, need_primary=True)
def cook(sample, primary, cache):
    following = cache.get_lazy(primary, f"{(int(sample['txt']) + 1) % 20:06d}.txt")
    return energon_rs.TextSample(
        **energon_rs.basic_sample_keys(sample),
        text=f"{sample['txt']}|{sample['pkl']['idx']}|{type(cache).__name__}|{following.get()}",
    )


class Encoder(energon_rs.DefaultTaskEncoder):
    cookers = [energon_rs.Cooker(cook, has_subflavors={"kind": "crude"})]


def _texts(ds, cache_pool, n=20):
    loader = energon_rs.get_loader(ds, cache_pool=cache_pool)
    return [s.text for _, s in zip(range(n), loader)]


def test_pickled_parts_are_unpickled_and_cookers_get_the_pool(tmp_path):
    root = _crude_dataset(tmp_path / "ds")
    ds = energon_rs.get_train_dataset(root, worker_config=WC, batch_size=None, shuffle_buffer_size=None,
                                      max_samples_per_sequence=None, task_encoder=Encoder())
    pool = FileStoreCachePool(parent_cache_dir=tmp_path / "cache", num_workers=1)
    try:
        texts = _texts(ds, pool)
    finally:
        pool.close()
    assert len(texts) == 20
    for text in texts:
        i, idx, kind, following = text.split("|")
        assert (int(idx), kind, int(following)) == (int(i) * 10, "FileStoreCachePool", (int(i) + 1) % 20)
    # Without a pool the cookers read directly.
    assert all("|NoCachePool|" in t for t in _texts(ds, None, 5))


def test_a_lazy_reference_of_a_primary_store_reads_through_the_pool(tmp_path):
    root = _crude_dataset(tmp_path / "ds")
    store = energon_rs.DecodeFileStore(energon_rs.WebdatasetFileStore(root), decoder=energon_rs.SampleDecoder())
    primary = energon_rs.PrimaryFileStore(store, current_key="000003")
    assert store["000003.pkl"][0] == {"idx": 30}
    pool = FileStoreCachePool(parent_cache_dir=tmp_path / "cache")
    try:
        ref = pool.get_lazy(primary, ".pkl")
        assert isinstance(ref, FileCacheLazy)
        ref.entry.send_to_cache_future.result(timeout=5)
        assert ref.get() == {"idx": 30}
        assert NoCachePool().get_lazy(primary, ".txt").get() == "3"
    finally:
        pool.close()


def test_files_as_bytes_under_compat(tmp_path):
    import energon_rs.compat

    root = _crude_dataset(tmp_path / "ds")
    store = energon_rs.WebdatasetFileStore(root)
    assert isinstance(store["000001.txt"][0], memoryview)
    energon_rs.compat.install()
    try:
        assert store["000001.txt"][0] == b"1"
        assert isinstance(store.get("000001.txt"), bytes)
    finally:
        energon_rs.compat.uninstall()
