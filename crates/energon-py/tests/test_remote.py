"""Datasets in an object store through the Python API: the reference fixture uploaded to a local
S3 server (moto's), loaded by `s3://` URL, `EPath` and metadatasets against the same files on
disk; `EPath` on `s3://` URLs.

moto's server is needed (`scripts/s3-deps.sh` installs it, as CI does); where it is missing the
tests fail saying how to install it."""

from __future__ import annotations

import itertools
import os
import pickle
import socket
import subprocess
import sys
import time

import pytest

import energon_rs
from conftest import REF_SMALL
from energon_rs.epath import EPath, UnsupportedPathError
from energon_rs.wrappers import traverse_metadataset

V2 = "__module__: megatron.energon\n__class__: MetadatasetV2\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """`s3://data/ref`: the fixture on a moto server this module's clients are pointed at."""
    try:
        import boto3
        import moto.server  # noqa: F401
    except ImportError:
        pytest.fail(
            f"the object-store tests need moto's server: install it with `{sys.executable} -m "
            "pip install 'moto[server]'` (scripts/s3-deps.sh does this)"
        )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        start = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() - start < 30, "moto's server did not start"
                time.sleep(0.05)
        endpoint = f"http://127.0.0.1:{port}"
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "ENERGON_STORAGE_CACHE_DIR": str(tmp_path_factory.mktemp("cache")),
        }
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="data")
        for root, _dirs, files in os.walk(REF_SMALL):
            for name in files:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, REF_SMALL).replace(os.sep, "/")
                client.upload_file(path, "data", f"ref/{rel}")
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            yield client
    finally:
        server.kill()
        server.wait()


def keys_of(item):
    k = item["__key__"] if isinstance(item, dict) else item.__key__
    return list(k) if isinstance(k, list) else [k]


def loader_keys(path, batches=12, val=False, **kwargs):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=kwargs.pop("nw", 2))
    if val:
        ds = energon_rs.get_val_dataset(path, worker_config=wc, batch_size=4, **kwargs)
    else:
        kwargs = {"shuffle_buffer_size": None, "max_samples_per_sequence": None, **kwargs}
        ds = energon_rs.get_train_dataset(path, worker_config=wc, batch_size=4, **kwargs)
    keys = []
    for i, batch in enumerate(energon_rs.get_savable_loader(ds)):
        keys.extend(keys_of(batch))
        if i + 1 == batches:
            break
    return keys


@pytest.mark.parametrize(
    "settings",
    [{"nw": 0}, {"nw": 2, "shuffle_buffer_size": 16}, {"nw": 1, "max_samples_per_sequence": 3}],
)
def test_train_dataset_by_url_and_epath_gives_the_local_keys(s3, settings):
    want = loader_keys(REF_SMALL, **dict(settings))
    assert len(want) == 48
    assert loader_keys("s3://data/ref", **dict(settings)) == want
    assert loader_keys(EPath("s3://data//ref/"), **dict(settings)) == want


def test_val_dataset_and_jsonl_by_url(s3):
    # The fixture defines only a train split.
    val = {"val": True, "batches": 100, "split_part": "train"}
    want = loader_keys(REF_SMALL, **val)
    assert len(want) == 200 and loader_keys("s3://data/ref", **val) == want
    jsonl = "jsonl/data.jsonl"
    assert loader_keys(f"s3://data/ref/{jsonl}", batches=5) == loader_keys(
        REF_SMALL / jsonl, batches=5
    )


def test_metadatasets_in_the_bucket_and_naming_urls(s3, tmp_path):
    local = tmp_path / "local.yaml"
    local.write_text(f"{V2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: {REF_SMALL}}}\n")
    in_bucket = EPath("s3://data/meta.yaml")
    in_bucket.write_text(f"{V2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: ref}}\n")
    naming = tmp_path / "urls.yaml"
    naming.write_text(f"{V2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: s3://data/ref}}\n")
    want = loader_keys(local)
    assert loader_keys("s3://data/meta.yaml") == want
    assert loader_keys(in_bucket) == want
    assert loader_keys(naming) == want
    refs = traverse_metadataset(in_bucket)
    assert [str(r.path) for r in refs] == ["s3://data/ref"]
    assert refs[0].path.is_remote


def test_epath_of_urls_joins_and_round_trips(s3):
    root = EPath("s3://data/ref")
    assert str(root) == os.fspath(root) == root.url == "s3://data/ref"
    assert str(EPath("s3://data//ref/./shards/../")) == "s3://data/ref"
    assert EPath(str(root)) == root and EPath(root) == root and root == "s3://data/ref/"
    assert repr(root) == "EPath('s3://data/ref')"
    assert pickle.loads(pickle.dumps(root)) == root and hash(EPath("s3://data/ref/")) == hash(root)
    shard = root / "shards" / "data-000000.tar"
    assert str(shard) == "s3://data/ref/shards/data-000000.tar"
    assert (shard.name, shard.stem, shard.suffix) == ("data-000000.tar", "data-000000", ".tar")
    assert str(shard.with_suffix(".idx")) == "s3://data/ref/shards/data-000000.idx"
    assert shard.parent.parent == root and str(EPath("s3://data").parent) == "s3://data"
    assert shard.relative_to(root) == "shards/data-000000.tar" and shard.is_relative_to(root)
    assert not root.is_relative_to(shard) and not shard.is_relative_to(REF_SMALL)
    assert root / "s3://other/x" == EPath("s3://other/x") and root.profile == "s3"
    assert str(EPath("gs://b/a/../c")) == "gs://b/c" and not EPath(REF_SMALL).is_remote
    with pytest.raises(ValueError):
        shard.relative_to("s3://other/ref")
    with pytest.raises(UnsupportedPathError, match="ftp://"):
        EPath("ftp://name/x")
    with pytest.raises(UnsupportedPathError, match="object store"):
        root.local_path()


def test_epath_reads_and_writes_objects(s3):
    root = EPath("s3://data/ref")
    meta = root / ".nv-meta" / "dataset.yaml"
    assert meta.read_text() == (REF_SMALL / ".nv-meta" / "dataset.yaml").read_text()
    assert meta.is_file() and meta.exists() and not meta.is_dir()
    assert root.is_dir() and root.exists() and not root.is_file()
    assert not (root / "missing").exists()
    shards = sorted(str(p.relative_to(root)) for p in root.glob("shards/*.tar"))
    assert shards == [f"shards/data-00000{i}.tar" for i in range(4)]
    assert {p.name for p in root.glob("**/*.idx")} == {f"data-00000{i}.tar.idx" for i in range(4)} | {
        "data.jsonl.idx"
    }
    assert len(list(root.walk())) == sum(len(f) for _, _, f in os.walk(REF_SMALL))
    first = root / "shards" / "data-000000.tar"
    assert first.size() == (REF_SMALL / "shards" / "data-000000.tar").stat().st_size
    with first.open("rb") as f:
        assert f.read(512) == (REF_SMALL / "shards" / "data-000000.tar").read_bytes()[:512]

    out = EPath("s3://data/out/notes.txt")
    out.mkdir()
    assert out.write_text("one\ntwo\n") == 8
    assert out.read_text() == "one\ntwo\n" and out.read_bytes() == b"one\ntwo\n"
    with out.open("w") as f:
        f.write("three")
    assert out.read_text() == "three"
    out.copy("s3://data/out/copy.txt")
    assert EPath("s3://data/out/copy.txt").read_bytes() == b"three"
    with pytest.raises(UnsupportedPathError):
        out.open("a")
    with pytest.raises(UnsupportedPathError):
        out.unlink()
    with pytest.raises(FileNotFoundError):
        (root / "missing").read_bytes()


def remote_batches(worker_type, n=12, dataset="s3://data/ref"):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_train_dataset(
        dataset, worker_config=wc, batch_size=4, shuffle_buffer_size=8, max_samples_per_sequence=None
    )
    with energon_rs.get_loader(ds, worker_type=worker_type) as loader:
        it = iter(loader)
        return [(keys_of(b), b.image.tobytes()) for b in (next(it) for _ in range(n))]


def test_worker_processes_forked_after_remote_reads_read_on(s3):
    """A loader of forked worker processes over `s3://`, after this process read the bucket
    with threads: each child makes its own object-store runtime (the parent's has no threads
    there) and reads what the thread loader read."""
    threads = remote_batches("thread")
    start = time.monotonic()
    assert remote_batches("fork") == threads
    assert remote_batches("spawn") == threads
    assert time.monotonic() - start < 120


def test_a_child_forked_after_remote_reads_reads_the_bucket(s3):
    """A plain fork (not a loader's) after remote reads: the child's next request answers."""
    want = (REF_SMALL / ".nv-meta" / "dataset.yaml").read_bytes()
    assert EPath("s3://data/ref/.nv-meta/dataset.yaml").read_bytes() == want
    remote_batches("thread", n=2)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            got = EPath("s3://data/ref/.nv-meta/dataset.yaml").read_bytes()
            code = 0 if got == want else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's request did not answer in 60 s")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0


def test_torch_dataloader_workers_over_the_bucket(s3):
    """`torch.utils.data.DataLoader(IterableDataset(ds), num_workers=2)` over `s3://`, forked
    after this process read the bucket: the reference's order, no crash, no hang."""
    from conftest import torch_or_skip

    torch = torch_or_skip()
    from energon_rs.torch import IterableDataset

    local = remote_batches("thread", n=10, dataset=str(REF_SMALL))
    remote_batches("thread", n=2)
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_train_dataset(
        "s3://data/ref", worker_config=wc, batch_size=4, shuffle_buffer_size=8, max_samples_per_sequence=None
    )
    loader = torch.utils.data.DataLoader(IterableDataset(ds), batch_size=None, num_workers=2)
    got = []
    for batch in loader:
        got.append((keys_of(batch), batch.image.tobytes()))
        if len(got) == 10:
            break
    del loader
    assert got == local


def test_a_shard_replaced_after_a_prepare_in_the_bucket_stops_the_loader(s3):
    """A dataset prepared in the bucket records each shard's version; a shard replaced since by
    one of the same size (another shard's bytes: valid samples, other keys) stops the loader
    with an error naming the shard, rather than handing out samples of another object."""
    shards = sorted((REF_SMALL / "shards").glob("*.tar"))
    for path in shards:
        s3.upload_file(str(path), "data", f"prep/{path.name}")
    subprocess.run(
        [sys.executable, "-m", "energon_rs", "prepare", "s3://data/prep", "--no-progress",
         "--non-interactive", "--split-ratio", "1,0,0", "--sample-type", "CaptioningSample",
         "--field-map", '{"image": "jpg", "caption": "txt"}'],
        check=True,
        capture_output=True,
    )
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)

    def keys():
        ds = energon_rs.get_train_dataset(
            "s3://data/prep", worker_config=wc, batch_size=4, shuffle_buffer_size=None,
            max_samples_per_sequence=None,
        )
        loader = energon_rs.get_savable_loader(ds)
        return [k for batch in itertools.islice(loader, 12) for k in keys_of(batch)]

    before = keys()
    assert len(before) == 48
    assert os.path.getsize(shards[0]) == os.path.getsize(shards[1])
    s3.upload_file(str(shards[1]), "data", f"prep/{shards[0].name}")
    with pytest.raises(energon_rs.EnergonError) as err:
        keys()
    text = str(err.value)
    assert shards[0].name in text, text
    assert "changed since the dataset was prepared" in text, text
