"""Task encoders and cookers written in Python, called from the Rust pipeline."""

from __future__ import annotations

import dataclasses
import json
import threading

import numpy as np
import pytest

import energon_rs
from conftest import EXPECTED


def val(path, task_encoder, batch_size=None, nw=2, **kwargs):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=nw, **kwargs)
    split = "train" if path.is_dir() else "val"
    return energon_rs.get_val_dataset(
        path, split_part=split, worker_config=wc, batch_size=batch_size, task_encoder=task_encoder
    )


@dataclasses.dataclass(kw_only=True)
class Encoded(energon_rs.Sample):
    pixels: int
    caption: str


def test_encode_sample_runs_on_worker_threads(ref_small):
    threads = set()

    class Encoder(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            threads.add(threading.get_native_id())
            assert isinstance(sample.image, np.ndarray)
            return Encoded.derive_from(sample, pixels=sample.image.size, caption=sample.caption.upper())

    items = list(energon_rs.get_loader(val(ref_small, Encoder())))
    assert len(items) == 200
    assert all(isinstance(s, Encoded) and s.pixels == 3 * 32 * 32 for s in items)
    assert items[0].caption == "CAT AND A LARGE SMALL"
    # Two worker threads, neither of them the main thread.
    assert len(threads) == 2 and threading.get_native_id() not in threads


def test_batch_and_encode_batch_hooks(ref_small):
    class Encoder(energon_rs.TaskEncoder):
        def batch(self, samples):
            return {"keys": [s.__key__ for s in samples], "images": np.stack([s.image for s in samples])}

        def encode_batch(self, batch):
            batch["n"] = len(batch["keys"])
            return batch

    batches = list(energon_rs.get_loader(val(ref_small, Encoder(), batch_size=8)))
    # Each worker batches its 100 samples: 12 batches of 8 and one of 4.
    assert sorted(b["n"] for b in batches) == [4] * 2 + [8] * 24
    assert batches[0]["images"].shape == (8, 3, 32, 32)
    assert sorted(k for b in batches for k in b["keys"]) == [f"{i:08d}" for i in range(200)]


def test_default_task_encoder_batch_types(ref_small):
    @dataclasses.dataclass
    class MyBatch:
        __key__: list
        __restore_key__: tuple
        __subflavors__: list
        __sources__: list
        image: np.ndarray
        caption: list

    te = energon_rs.DefaultTaskEncoder(batch_type=MyBatch)
    batch = next(iter(energon_rs.get_loader(val(ref_small, te, batch_size=3))))
    assert isinstance(batch, MyBatch) and batch.image.shape == (3, 3, 32, 32)


def test_skip_sample_and_errors_follow_the_reference_policy(ref_small):
    seen = []

    def handler(exc, sample, sources):
        seen.append((type(exc).__name__, sample.__key__))

    class Encoder(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            i = int(sample.__key__)
            if i % 10 == 0:
                raise energon_rs.SkipSample()
            if i % 10 == 1:
                raise KeyError("bad sample")
            return sample

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0, global_error_handler=handler)
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Encoder())
    keys = [s.__key__ for s in energon_rs.get_loader(ds)]
    assert len(keys) == 160 and all(int(k) % 10 > 1 for k in keys)
    assert sorted(seen) == sorted(("KeyError", f"{i:08d}") for i in range(1, 200, 10))


def test_fatal_errors_end_the_iteration_with_the_original_exception(ref_small):
    class Encoder(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            raise MemoryError("out of memory, pretend")

    with pytest.raises(energon_rs.FatalSampleError, match="pretend") as info:
        list(energon_rs.get_loader(val(ref_small, Encoder())))
    assert isinstance(info.value.__cause__, MemoryError)


def test_too_many_failures_in_a_row_are_fatal(ref_small):
    class Encoder(energon_rs.DefaultTaskEncoder):
        @energon_rs.stateless(failure_tolerance=5)
        def encode_sample(self, sample):
            raise ValueError("always")

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0, global_error_handler=lambda *a: None)
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Encoder())
    with pytest.raises(energon_rs.FatalSampleError, match="5 times"):
        list(energon_rs.get_loader(ds))


@energon_rs.stateless
def cook_text(sample):
    return energon_rs.TextSample(**energon_rs.basic_sample_keys(sample), text=json.dumps(sample["json"], sort_keys=True))


def test_cookers_turn_crude_jsonl_records_into_typed_samples(ref_small):
    class Encoder(energon_rs.DefaultTaskEncoder):
        cookers = [energon_rs.Cooker(cook_text)]

    path = ref_small / "jsonl" / "data.jsonl"
    want = (EXPECTED / "keys-jsonl-ws1-r0-nw2-bs1-sb0-s0.txt").read_text().split()
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_train_dataset(path, worker_config=wc, batch_size=1, shuffle_buffer_size=None, max_samples_per_sequence=None, task_encoder=Encoder())
    keys, texts = [], []
    for batch in energon_rs.get_loader(ds):
        assert isinstance(batch, energon_rs.TextSample)
        keys.extend(batch.__key__)
        texts.extend(batch.text)
        if len(keys) == len(want):
            break
    assert keys == want
    lines = path.read_text().splitlines()
    assert texts[0] == json.dumps(json.loads(lines[int(keys[0])]), sort_keys=True)
