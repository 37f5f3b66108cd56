"""Worker types: threads, processes and one thread in turn give the same items (keys, restore keys,
array bytes) in the same order, save states that restore under each other, and processes end
cleanly: after close(), an exception, a killed worker."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import itertools
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import energon_rs
from conftest import REF_SMALL, REPO
from test_hooks import Packer

MDS = REPO / "crates" / "energon-mix" / "tests" / "data" / "mds"
TYPES = ("thread", "process", "main")


def digest(obj) -> str:
    """A digest of an item: every key, number, string and array byte, in order."""
    h = hashlib.sha256()

    def eat(o):
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            o = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)} | dict(getattr(o, "__dict__", {}))
        if isinstance(o, dict):
            for k in sorted(o, key=str):
                h.update(str(k).encode())
                eat(o[k])
        elif isinstance(o, (list, tuple)):
            h.update(b"[%d" % len(o))
            for v in o:
                eat(v)
        elif hasattr(o, "numpy") and hasattr(o, "dtype"):
            eat(o.numpy())
        elif isinstance(o, np.ndarray):
            h.update(f"{o.dtype}{o.shape}".encode())
            h.update(np.ascontiguousarray(o).tobytes())
        else:
            h.update(repr(o).encode())

    eat(obj)
    return h.hexdigest()


def take(loader, n):
    it = iter(loader)
    return [digest(x) for x in itertools.islice(it, n)]


class Upper(energon_rs.DefaultTaskEncoder):
    """A Python encode_sample (module level, so that spawned workers can unpickle it)."""

    def encode_sample(self, sample):
        sample.caption = sample.caption.upper()
        return sample


class Failing(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        if sample.__key__ == "00000007":
            # Fatal under the reference's policy: it ends the iteration.
            raise MemoryError("no such thing")
        return sample


class ByParity(energon_rs.DefaultTaskEncoder):
    def batch_group_criterion(self, sample):
        odd = int(sample.__key__) % 2
        return ("odd" if odd else "even"), (3 if odd else 2)


class Twice(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        for part in ("a", "b"):
            yield {"__key__": f"{sample.__key__}{part}", "__restore_key__": (), "image": sample.image}


def train(path=REF_SMALL, nw=2, task_encoder=None, **kwargs):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=nw)
    settings = dict(batch_size=4, shuffle_buffer_size=10, max_samples_per_sequence=5)
    settings.update(kwargs)
    return energon_rs.get_train_dataset(
        path, worker_config=wc, task_encoder=task_encoder or Upper(), **settings
    )


SETTINGS = {
    "batches": dict(),
    "samples-3-workers": dict(nw=3, batch_size=None),
    "one-worker": dict(nw=1, batch_size=5, shuffle_buffer_size=None),
    "blend": dict(path=MDS / "blend.yaml", batch_size=3),
    "packing": dict(
        path=REF_SMALL / "jsonl" / "data.jsonl", task_encoder=Packer(), batch_size=None,
        packing_buffer_size=10, shuffle_buffer_size=None, max_samples_per_sequence=None,
    ),
    "group-batching": dict(task_encoder=ByParity(), batch_size=None),
    "generator": dict(task_encoder=Twice(), batch_size=None),
    "torch": dict(torch=True),
}


@pytest.mark.parametrize("name", SETTINGS)
def test_every_worker_type_gives_the_same_items(name):
    if name == "torch":
        pytest.importorskip("torch")
    runs = {}
    for worker_type in TYPES:
        with energon_rs.get_loader(train(**SETTINGS[name]), worker_type=worker_type) as loader:
            assert loader.worker_type == worker_type
            runs[worker_type] = take(loader, 40)
    assert runs["process"] == runs["thread"]
    assert runs["main"] == runs["thread"]


@pytest.mark.parametrize("saved_by,restored_by", list(itertools.product(TYPES, TYPES)))
def test_a_state_saved_under_one_worker_type_restores_under_each(saved_by, restored_by):
    loader = energon_rs.get_savable_loader(train(), worker_type=saved_by)
    it = iter(loader)
    for _ in range(7):
        next(it)
    state = loader.save_state_rank()
    want = [digest(next(it)) for _ in range(9)]
    loader.close()
    restored = energon_rs.get_savable_loader(train(), worker_type=restored_by)
    restored.restore_state_rank(state)
    with restored:
        assert take(restored, 9) == want


def test_process_workers_run_the_hooks_in_other_processes():
    class Where(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            return {"__key__": sample.__key__, "__restore_key__": (), "pid": os.getpid()}

    with energon_rs.get_loader(train(task_encoder=Where(), batch_size=None), worker_type="process") as loader:
        seen = {s["pid"] for s in itertools.islice(iter(loader), 20)}
        children = {p.pid for p in multiprocessing.active_children()}
    assert len(seen) == 2 and seen <= children and os.getpid() not in seen


def test_arrays_arrive_as_writable_arrays_over_shared_memory():
    with energon_rs.get_loader(train(batch_size=8), worker_type="process") as loader:
        batch = next(iter(loader))
        assert batch.image.shape == (8, 3, 32, 32) and batch.image.flags.writeable
        batch.image[0, 0, 0, 0] = 7
        assert batch.image[0, 0, 0, 0] == 7
        with energon_rs.get_loader(train(batch_size=8), worker_type="thread") as threads:
            assert digest(next(iter(threads)).image[1:]) == digest(batch.image[1:])


def test_permuted_tensors_cross_processes_as_the_same_views():
    # Video clips are `(frames, 3, h, w)` views of frame-major RGB: a process worker sends their
    # memory as it is and the view arrives with the same strides (no transposing copy), as
    # under threads.
    torch = pytest.importorskip("torch")
    from energon_rs import workers

    clip = torch.arange(8 * 64 * 96 * 3, dtype=torch.int32).reshape(8, 64, 96, 3).permute(0, 3, 1, 2)
    for tensor in [clip, clip.transpose(2, 3), torch.arange(1 << 16).reshape(256, 256).t()]:
        data, fd = workers.dumps(tensor)
        assert fd >= 0
        got = workers.loads(data, fd)
        assert torch.equal(got, tensor) and got.stride() == tensor.stride()


def memfds() -> int:
    """The shared-memory segments of items this process has mapped or open."""
    n = 0
    for line in Path("/proc/self/maps").read_text().splitlines():
        n += "energon-item" in line
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += "energon-item" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return n


def test_close_ends_the_workers_and_frees_the_shared_memory():
    loader = energon_rs.get_loader(train(batch_size=32), worker_type="process")
    items = take(loader, 5)
    assert len(items) == 5
    pids = [p.pid for p in loader._workers.processes]
    loader.close()
    gc.collect()
    assert memfds() == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    assert list(iter(loader)) == []


def test_a_hook_exception_is_raised_as_it_was_naming_the_worker():
    ds = train(task_encoder=Failing(), batch_size=None, shuffle_buffer_size=None)
    loader = energon_rs.get_loader(ds, worker_type="process")
    with pytest.raises(energon_rs.FatalSampleError, match="no such thing") as info:
        list(itertools.islice(iter(loader), 200))
    assert isinstance(info.value.__cause__, MemoryError)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    # The worker's own traceback, down to the hook that raised.
    assert "raised in energon_rs worker process" in notes and "in encode_sample" in notes
    loader.close()
    assert not multiprocessing.active_children()


def test_a_killed_worker_is_an_error_naming_it_within_seconds():
    loader = energon_rs.get_loader(train(batch_size=None), worker_type="process")
    it = iter(loader)
    next(it)
    victim = loader._workers.processes[1]
    os.kill(victim.pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(energon_rs.LoaderError, match=r"worker 1 was lost: its process \d+ was killed by signal SIGKILL"):
        for _ in range(1000):
            next(it)
    assert time.monotonic() - start < 10
    loader.close()
    assert not multiprocessing.active_children()


def test_spawned_workers_rebuild_the_dataset():
    with energon_rs.get_loader(train(), worker_type="spawn") as spawned:
        got = take(spawned, 10)
    with energon_rs.get_loader(train(), worker_type="thread") as threads:
        assert take(threads, 10) == got


def combined(kind):
    """Datasets built separately and combined (each with its own task encoder and batch size)."""
    from energon_rs.wrappers import BlendDataset, ConcatDataset, MixBatchDataset

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    a = train(batch_size=4)
    b = energon_rs.get_val_dataset(
        REF_SMALL, split_part="train", worker_config=wc, batch_size=3, task_encoder=Upper()
    )
    if kind == "blend":
        return BlendDataset((a, 1.0), (b, 2.0))
    if kind == "concat":
        return ConcatDataset(b, a)
    return MixBatchDataset((train(batch_size=1), 1.0), (train(batch_size=1, nw=2), 3.0), batch_size=5)


@pytest.mark.parametrize("kind", ["blend", "concat", "mix"])
def test_spawned_workers_make_combined_datasets_again(kind):
    with energon_rs.get_loader(combined(kind), worker_type="spawn") as spawned:
        got = take(spawned, 12)
    with energon_rs.get_loader(combined(kind), worker_type="thread") as threads:
        assert take(threads, 12) == got


@pytest.mark.parametrize("kind", ["blend", "concat", "mix"])
@pytest.mark.parametrize("saved_by,restored_by", [("thread", "process"), ("process", "main"), ("main", "thread")])
def test_combined_datasets_restore_exactly_under_each_worker_type(kind, saved_by, restored_by):
    loader = energon_rs.get_savable_loader(combined(kind), worker_type=saved_by)
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.save_state_rank()
    want = [digest(next(it)) for _ in range(8)]
    loader.close()
    restored = energon_rs.get_savable_loader(combined(kind), worker_type=restored_by)
    restored.restore_state_rank(state)
    with restored:
        assert take(restored, 8) == want


def test_a_combined_state_restores_only_into_the_same_combination():
    from energon_rs.wrappers import BlendDataset

    loader = energon_rs.get_savable_loader(combined("blend"))
    next(iter(loader))
    state = loader.save_state_rank()
    loader.close()
    other = BlendDataset((train(batch_size=4), 1.0), (train(batch_size=4), 1.0))
    restored = energon_rs.get_savable_loader(other)
    with pytest.raises(energon_rs.EnergonError, match="combined"):
        restored.restore_state_rank(state)
        next(iter(restored))
    restored.close()


def test_iterating_again_continues_the_same_workers():
    ds = train(path=REF_SMALL, batch_size=None)
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    val = energon_rs.get_val_dataset(REF_SMALL, split_part="train", worker_config=wc, batch_size=10, task_encoder=Upper())
    del ds
    with energon_rs.get_loader(val, worker_type="process") as loader:
        first = [digest(b) for b in loader]
        workers = [p.pid for p in loader._workers.processes]
        second = [digest(b) for b in loader]
        assert [p.pid for p in loader._workers.processes] == workers
    with energon_rs.get_loader(val, worker_type="thread") as threads:
        assert [digest(b) for b in threads] == first
        assert [digest(b) for b in threads] == second
    assert len(first) == 20


def test_unknown_worker_types_are_refused():
    with pytest.raises(ValueError, match="worker_type"):
        energon_rs.get_loader(train(), worker_type="greenlet")


class Slow(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        time.sleep(60)
        return sample


def test_ctrl_c_interrupts_a_wait_on_worker_processes_and_close_ends_them():
    loader = energon_rs.get_loader(train(task_encoder=Slow(), batch_size=None), worker_type="process")
    it = iter(loader)
    pids = [p.pid for p in loader._workers.processes]
    gc.collect()
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(it)
    timer.join()
    loader.close()
    # Interrupted and closed in seconds, although the hooks sleep for a minute.
    assert time.monotonic() - start < 10
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)


def random_settings(seed: int) -> dict:
    """Settings drawn from `seed`: dataset or blend, training or validation, workers, batch
    size, shuffle buffer, sequence cuts, a Python hook or none."""
    import random

    rng = random.Random(seed)
    path = rng.choice([REF_SMALL, MDS / "blend.yaml", REF_SMALL / "jsonl" / "data.jsonl"])
    settings = dict(
        path=path,
        nw=rng.choice([1, 2, 3]),
        batch_size=rng.choice([None, 1, 3, 7]),
        training=rng.random() < 0.7,
        task_encoder=rng.choice([Upper(), Twice(), energon_rs.DefaultTaskEncoder()]),
    )
    if path.suffix == ".jsonl":
        settings["task_encoder"] = Packer()
        settings["batch_size"] = None
    elif path.suffix == ".yaml":
        # The blend holds a crude JSONL dataset beside images: no common batch, no image hook.
        settings["task_encoder"] = energon_rs.DefaultTaskEncoder()
        settings["batch_size"] = None
    if settings["training"]:
        settings["shuffle_buffer_size"] = rng.choice([None, 2, 9])
        settings["max_samples_per_sequence"] = rng.choice([None, 1, 4])
    return settings


def loader_of(settings: dict, worker_type: str):
    s = dict(settings)
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=s.pop("nw"))
    if s.pop("training"):
        s.setdefault("shuffle_buffer_size", None)
        s.setdefault("max_samples_per_sequence", None)
        ds = energon_rs.get_train_dataset(s.pop("path"), worker_config=wc, **s)
    else:
        ds = energon_rs.get_val_dataset(s.pop("path"), split_part="train", worker_config=wc, **s)
    return energon_rs.get_savable_loader(ds, worker_type=worker_type)


@pytest.mark.parametrize("seed", range(12))
def test_random_settings_give_the_same_items_and_states_under_every_worker_type(seed):
    """The property over drawn settings: every worker type yields the same items (digests of
    keys, restore keys and arrays) and saves the same state after each of them."""
    settings = random_settings(seed)
    runs = {}
    for worker_type in TYPES:
        with loader_of(settings, worker_type) as loader:
            it = iter(loader)
            got = []
            for item in itertools.islice(it, 25):
                got.append((digest(item), loader.save_state_rank()["checkpoint"]))
            runs[worker_type] = got
    assert runs["process"] == runs["thread"], settings
    assert runs["main"] == runs["thread"], settings
