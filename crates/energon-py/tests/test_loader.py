"""The loader through the Python API: the reference's recorded key orders, save and restore,
GIL release, Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import energon_rs
from conftest import EXPECTED, REF_SMALL

RECORDED = sorted(p.name for p in EXPECTED.glob("keys-*.txt"))


def settings(name):
    """The loader settings a recorded file's name encodes
    (`keys-[jsonl-]ws{W}-r{R}-nw{N}-bs{B}-sb{S}-s{SEED}[-msps{M}].txt`)."""
    res = {"path": REF_SMALL, "msps": None}
    for field in name.removesuffix(".txt").split("-")[1:]:
        if field == "jsonl":
            res["path"] = REF_SMALL / "jsonl" / "data.jsonl"
            continue
        digit = next(i for i, c in enumerate(field) if c.isdigit())
        res[field[:digit]] = int(field[digit:])
    return res


def train_loader(name, **kwargs):
    s = settings(name)
    wc = energon_rs.WorkerConfig(
        rank=s["r"], world_size=s["ws"], num_workers=s["nw"], seed_offset=s["s"]
    )
    ds = energon_rs.get_train_dataset(
        s["path"],
        worker_config=wc,
        batch_size=s["bs"],
        shuffle_buffer_size=s["sb"] or None,
        max_samples_per_sequence=s["msps"],
    )
    return ds, energon_rs.get_savable_loader(ds, **kwargs)


def keys_of(item):
    k = item["__key__"] if isinstance(item, dict) else item.__key__
    return list(k) if isinstance(k, list) else [k]


def take_keys(iterator, n):
    res = []
    for item in iterator:
        res.extend(keys_of(item))
        if len(res) >= n:
            break
    return res[:n]


def test_every_recording_is_present():
    assert len(RECORDED) == 15


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_key_order(name):
    want = (EXPECTED / name).read_text().split()
    _, loader = train_loader(name)
    assert take_keys(loader, len(want)) == want


def test_iterating_again_continues_the_stream():
    name = "keys-ws1-r0-nw2-bs4-sb16-s0.txt"
    want = (EXPECTED / name).read_text().split()
    _, loader = train_loader(name)
    first = take_keys(loader, 40)
    second = take_keys(loader, 40)
    assert first + second == want[:80]


@pytest.mark.parametrize("nw", [0, 2])
def test_save_and_restore_continue_exactly(nw):
    name = f"keys-ws1-r0-nw{nw}-bs4-sb16-s0.txt"
    if not (EXPECTED / name).exists():
        name = "keys-ws1-r0-nw2-bs4-sb16-s0.txt"
    _, loader = train_loader(name)
    it = iter(loader)
    before = take_keys(it, 20)
    state = loader.save_state_rank()
    continued = take_keys(it, 40)
    assert state["format"] == "energon-rs-loader-state" and state["n_items"] == 5

    _, restored = train_loader(name)
    restored.restore_state_rank(state)
    assert take_keys(restored, 40) == continued
    # And the state of a restored loader accumulates.
    assert restored.save_state_rank()["n_items"] == 15
    assert before + continued == take_keys(train_loader(name)[1], 60)


def test_restore_matches_the_reference_resume_recording():
    # The reference saved after 5 batches and restored into a fresh loader.
    text = (EXPECTED / "resume-ws1-r0-nw2-bs4-sb16-s0.txt").read_text()
    lines = [l.split("\t") for l in text.splitlines() if not l.startswith("#")]
    before = [k for tag, _, k in lines if tag == "before"]
    restored_keys = [k for tag, _, k in lines if tag == "restored"]
    _, loader = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    it = iter(loader)
    assert take_keys(it, len(before)) == before
    state = loader.save_state_rank()
    _, fresh = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    fresh.restore_state_rank(state)
    assert take_keys(fresh, len(restored_keys)) == restored_keys


def test_restore_checks_the_state():
    _, loader = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    with pytest.raises(energon_rs.CheckpointError):
        loader.restore_state_rank({"format": "other"})
    with pytest.raises(energon_rs.IncompatibleFormatError):
        loader.restore_state_rank({"format": "energon-rs-loader-state", "version": 99})
    _, other = train_loader("keys-ws1-r0-nw2-bs1-sb0-s0.txt")
    with pytest.raises(energon_rs.CheckpointError, match="batch_size"):
        loader.restore_state_rank(other.save_state_rank())
    take_keys(loader, 1)
    with pytest.raises(energon_rs.CheckpointError, match="before iterating"):
        loader.restore_state_rank(loader.save_state_rank())
    assert loader.save_state_global(0) == [loader.save_state_rank()]


def test_val_dataset_is_one_ordered_pass(ref_small, wc2):
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc2, batch_size=7)
    keys = take_keys(energon_rs.get_loader(ds), 10_000)
    assert sorted(keys) == [f"{i:08d}" for i in range(200)]
    assert len(ds) == 200


def test_waiting_releases_the_gil(ref_small):
    """Another Python thread progresses while `next()` waits for the Rust workers."""
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc, batch_size=100)
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        progressed = 0
        for _ in range(3):
            loader = iter(energon_rs.get_loader(ds))
            before = counter[0]
            next(loader)  # the pipeline has just started: this waits for 100 decoded samples
            progressed += counter[0] - before
    finally:
        stop.set()
        t.join()
    assert progressed > 0


def test_ctrl_c_interrupts_a_blocked_iteration(ref_small):
    release = threading.Event()

    class Blocking(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            release.wait(30)  # blocks the worker (without the GIL) until the test ends
            return sample

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Blocking()
    )
    loader = energon_rs.get_loader(ds)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(iter(loader))
    finally:
        release.set()
        loader.close()
    assert time.monotonic() - start < 5


def test_the_interpreter_exits_with_a_loader_still_running():
    """Worker threads busy in Python hooks at exit must not hang the interpreter's shutdown."""
    import subprocess
    import sys

    code = f"""
import time
import energon_rs

class Slow(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        time.sleep(0.01)
        return sample

wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
ds = energon_rs.get_train_dataset({str(REF_SMALL)!r}, worker_config=wc, batch_size=2,
    shuffle_buffer_size=None, max_samples_per_sequence=None, task_encoder=Slow())
it = iter(energon_rs.get_loader(ds))
next(it)
print("ok")
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout.strip()) == (0, "ok"), res.stderr
