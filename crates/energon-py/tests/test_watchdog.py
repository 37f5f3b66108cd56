"""The loader watchdog: a wait for an item longer than the timeout is reported."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import energon_rs
from conftest import REF_SMALL
from energon_rs.watchdog import Watchdog

WC = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)


class Slow(energon_rs.DefaultTaskEncoder):
    def __init__(self, slow_key):
        super().__init__()
        self.slow_key = slow_key

    def encode_sample(self, sample):
        if sample.__key__ == self.slow_key:
            time.sleep(1.0)
        return sample.__key__


def _val(slow_key):
    return energon_rs.get_val_dataset(REF_SMALL, split_part="train", worker_config=WC,
                                      batch_size=None, task_encoder=Slow(slow_key))


def test_a_slow_item_triggers_the_watchdog(monkeypatch):
    calls = []
    monkeypatch.setattr(Watchdog, "_watchdog_trigger", lambda self: calls.append(time.monotonic()))
    loader = energon_rs.get_loader(_val("00000005"), watchdog_timeout_seconds=0.3)
    items = list(loader)
    assert len(items) == 200 and 1 <= len(calls) <= 4
    loader.close()


def test_a_fast_loader_and_a_slow_consumer_do_not(monkeypatch):
    calls = []
    monkeypatch.setattr(Watchdog, "_watchdog_trigger", lambda self: calls.append(1))
    loader = energon_rs.get_loader(_val(None), watchdog_timeout_seconds=0.5, watchdog_initial_timeout_seconds=30)
    for i, _ in enumerate(loader):
        if i == 3:
            time.sleep(1.0)  # the consumer's time does not count
    assert calls == []
    with pytest.raises(ValueError, match="positive"):
        Watchdog(0)


def test_fail_on_timeout_ends_the_process():
    code = f"""
import time, energon_rs
class Slow(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        time.sleep(5)
        return sample
wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
ds = energon_rs.get_val_dataset({str(REF_SMALL)!r}, split_part="train", worker_config=wc, batch_size=None, task_encoder=Slow())
next(iter(energon_rs.get_loader(ds, watchdog_timeout_seconds=0.5, fail_on_timeout=True)))
print("not stopped")
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "not stopped" not in res.stdout
    assert "waited more than 0.5s" in res.stderr


def test_a_timeout_shows_the_stack_of_the_worker_process_it_waits_on():
    """The watchdog of a loader with worker processes names them and has each write its stack:
    a hook stuck in a worker shows where."""
    script = f"""
import time, energon_rs
class Stuck(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        if sample.__key__ == "00000003":
            time.sleep(3)
        return sample.__key__
wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)
ds = energon_rs.get_val_dataset({str(REF_SMALL)!r}, split_part="train", worker_config=wc,
                                batch_size=None, task_encoder=Stuck())
with energon_rs.get_loader(ds, worker_type="process", watchdog_timeout_seconds=1) as loader:
    assert len(list(loader)) == 200
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "energon_rs worker process 0 (pid" in res.stderr
    assert "the loader waits for an item of worker process 0 (pid" in res.stderr
    # The worker's own stack (faulthandler's), down to the hook that is stuck: the main
    # process's stacks never show the hook, which runs in the worker.
    assert "in encode_sample" in res.stderr
