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

    # Threads by name: with Python hooks the default worker type is processes.
    items = list(energon_rs.get_loader(val(ref_small, Encoder()), worker_type="thread"))
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
    # A class local to a function does not pickle: worker processes could not send its batches
    # (nor could the reference's).
    batch = next(iter(energon_rs.get_loader(val(ref_small, te, batch_size=3), worker_type="thread")))
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


def test_a_generator_encode_sample_yields_several_samples(ref_small):
    class Twice(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            for part in ("a", "b"):
                yield {"__key__": f"{sample.__key__}{part}", "__restore_key__": ()}

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Twice()
    )
    keys = [s["__key__"] for s in energon_rs.get_loader(ds)]
    assert sorted(keys) == sorted(f"{i:08d}{p}" for i in range(200) for p in "ab")
    # Each sample's outputs come one after the other from its worker.
    assert keys[0][:-1] == keys[2][:-1] and (keys[0][-1], keys[2][-1]) == ("a", "b")


def test_a_generator_is_pulled_lazily_in_the_context_of_each_batch(ref_small):
    """Each sample a generator yields is made when the loader pulls it: it sees the batch index
    of the batch it goes into, and between its samples the caller's random state is back (with
    the generator's own restored before it goes on), as in the reference."""
    import random

    class Twice(energon_rs.DefaultTaskEncoder):
        @energon_rs.stateless(restore_seeds=True)
        def encode_sample(self, sample):
            for part in range(2):
                yield {
                    "__key__": f"{sample.__key__}/{part}",
                    "__restore_key__": (),
                    "sample_index": self.current_sample_index,
                    "batch_index": self.current_batch_index,
                    "r": random.randint(0, 1000),
                }

        def batch(self, samples):
            return samples

    def load(start=None, n=12):
        wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
        ds = energon_rs.get_train_dataset(
            ref_small, worker_config=wc, batch_size=3, task_encoder=Twice(),
            shuffle_buffer_size=None, max_samples_per_sequence=None,
        )
        loader = energon_rs.get_savable_loader(ds)
        if start is not None:
            loader.restore_state_rank(start)
        it = iter(loader)
        return loader, [next(it) for _ in range(n)]

    loader, batches = load()
    for batch_index, batch in enumerate(batches):
        assert [s["batch_index"] for s in batch] == [batch_index] * 3
        assert [s["sample_index"] for s in batch] == [(batch_index * 3 + i) // 2 for i in range(3)]
    # The second sample of a call draws on from the first one's random state.
    for index in range(4):
        first, second = [s for b in batches for s in b if s["sample_index"] == index]
        random.seed(energon_rs.SystemRng.get_seed_from_args(
            energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0).worker_seed(0), index))
        assert (first["r"], second["r"]) == (random.randint(0, 1000), random.randint(0, 1000))
    # Saved in the middle of a call's samples, restored: the same samples follow.
    first, _ = load(n=5)
    state = first.save_state_rank()
    _, rest = load(state, n=7)
    assert rest == batches[5:]


def test_a_seeded_method_called_from_an_override_is_seeded(ref_small):
    """An `encode_sample` override without the decorator that calls the base class's
    `@stateless(restore_seeds=True)` method gets the base's seeding, as in the reference."""
    import random

    class Base(energon_rs.DefaultTaskEncoder):
        @energon_rs.stateless(restore_seeds=True)
        def encode_sample(self, sample):
            return {"__key__": sample.__key__, "__restore_key__": (), "index": self.current_sample_index, "r": random.random()}

    class Override(Base):
        def encode_sample(self, sample):
            return super().encode_sample(sample)

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Override()
    )
    out = [s for s, _ in zip(energon_rs.get_loader(ds), range(12))]
    for s in out:
        random.seed(energon_rs.SystemRng.get_seed_from_args(wc.worker_seed(s["index"] % 2), s["index"]))
        assert s["r"] == random.random()


def test_batch_hooks_see_the_index_of_the_batch_they_make(ref_small):
    """`batch` and `encode_batch` run on the loader's pump thread but see the reference's
    indices of their worker's stage: `current_batch_index` counts the rank's batches across its
    workers (item * workers + worker), so does `current_sample_index` for these stages."""

    class Indexed(energon_rs.DefaultTaskEncoder):
        def batch(self, samples):
            return {"__key__": [s.__key__ for s in samples], "batch": (self.current_sample_index, self.current_batch_index)}

        def encode_batch(self, batch):
            return {**batch, "encode": (self.current_sample_index, self.current_batch_index)}

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=4, task_encoder=Indexed()
    )
    out = [b for b, _ in zip(energon_rs.get_loader(ds), range(8))]
    assert [b["batch"] for b in out] == [(i, i) for i in range(8)]
    assert [b["encode"] for b in out] == [(i, i) for i in range(8)]


def test_restore_seeds_make_random_augmentations_restorable(ref_small):
    import random

    import numpy as np

    class Augment(energon_rs.DefaultTaskEncoder):
        @energon_rs.stateless(restore_seeds=True)
        def encode_sample(self, sample):
            return {
                "__key__": sample.__key__,
                "__restore_key__": (),
                "index": self.current_sample_index,
                "r": random.random(),
                "n": float(np.random.rand()),
            }

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)

    def loader():
        ds = energon_rs.get_train_dataset(
            ref_small, worker_config=wc, batch_size=None, shuffle_buffer_size=8,
            max_samples_per_sequence=None, task_encoder=Augment(),
        )
        return energon_rs.get_savable_loader(ds)

    first = loader()
    it = iter(first)
    before = [next(it) for _ in range(10)]
    state = first.save_state_rank()
    after = [next(it) for _ in range(20)]
    # The seed of each call is the reference's: SHA-1 of "{worker_seed}|{current_sample_index}".
    for s in before + after:
        worker = s["index"] % 2
        seed = energon_rs.SystemRng.get_seed_from_args(wc.worker_seed(worker), s["index"])
        random.seed(seed)
        assert s["r"] == random.random()
    first.close()
    # The outer generators are untouched by the hook (once the loader's threads are stopped:
    # while they run, the process's global generators are shared with them).
    random.seed(5)
    want = random.random()
    random.seed(5)
    other = loader()
    next(iter(other))
    other.close()
    assert random.random() == want
    # Restored samples, re-encoded from the shuffle buffer, draw the same numbers.
    restored = loader()
    restored.restore_state_rank(state)
    again = [next(iter(restored)) for _ in range(20)]
    assert [(s["__key__"], s["r"], s["n"]) for s in again] == [
        (s["__key__"], s["r"], s["n"]) for s in after
    ]


def test_batch_group_criterion_batches_by_group(ref_small):
    class ByParity(energon_rs.DefaultTaskEncoder):
        def batch_group_criterion(self, sample):
            odd = int(sample.__key__) % 2
            return ("odd" if odd else "even"), (3 if odd else 2)

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=ByParity()
    )
    batches = [list(b.__key__) for b in energon_rs.get_loader(ds)]
    assert all(len({int(k) % 2 for k in b}) == 1 for b in batches)
    assert {len(b) for b in batches if int(b[0]) % 2} <= {1, 2, 3}
    assert max(len(b) for b in batches if int(b[0]) % 2 == 0) == 2
    assert sorted(k for b in batches for k in b) == [f"{i:08d}" for i in range(200)]


class Packer(energon_rs.DefaultTaskEncoder):
    """Text packing as users write it: records to token counts, greedy packs of at most 12
    tokens from a buffer, each pack's keys joined."""

    cookers = [energon_rs.Cooker(lambda s: {"__key__": s["__key__"], "__restore_key__": (), "n": 1 + int(s["__key__"]) % 7})]

    def select_samples_to_pack(self, samples):
        packs, current, size = [], [], 0
        for s in sorted(samples, key=lambda s: -s["n"]):
            if size + s["n"] > 12:
                packs.append(current)
                current, size = [], 0
            current.append(s)
            size += s["n"]
        return packs + [current]

    def pack_selected_samples(self, samples):
        return {
            "__key__": "+".join(s["__key__"] for s in samples),
            "__restore_key__": (),
            "n": sum(s["n"] for s in samples),
        }


def test_packing_fills_packs_from_the_buffer_and_restores_mid_stream(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)

    def loader():
        ds = energon_rs.get_train_dataset(
            ref_small / "jsonl" / "data.jsonl", worker_config=wc, batch_size=None,
            packing_buffer_size=10, shuffle_buffer_size=None, max_samples_per_sequence=None,
            task_encoder=Packer(),
        )
        return energon_rs.get_savable_loader(ds)

    first = loader()
    it = iter(first)
    packs = [next(it) for _ in range(7)]
    assert all(p["n"] <= 12 for p in packs)
    # Every pack comes from one worker's buffer of 10: packs of one buffer cover it exactly.
    state = first.save_state_rank()
    rest = [next(it)["__key__"] for _ in range(12)]
    first.close()
    restored = loader()
    restored.restore_state_rank(state)
    it = iter(restored)
    assert [next(it)["__key__"] for _ in range(12)] == rest


def test_batch_hooks_run_on_worker_threads(ref_small):
    threads = set()

    class Encoder(energon_rs.TaskEncoder):
        def batch(self, samples):
            threads.add(threading.get_native_id())
            return [s.__key__ for s in samples]

        def encode_batch(self, batch):
            threads.add(threading.get_native_id())
            return {"keys": batch}

    batches = list(energon_rs.get_loader(val(ref_small, Encoder(), batch_size=10), worker_type="thread"))
    assert sorted(k for b in batches for k in b["keys"]) == [f"{i:08d}" for i in range(200)]
    # Both hooks of each batch ran on the two worker threads, not on the main thread.
    assert len(threads) == 2 and threading.get_native_id() not in threads


class GuidePacker(Packer):
    """`select_samples_to_pack` as the packing guide writes it: it sorts the buffer it gets in
    place and pops the samples off it."""

    def select_samples_to_pack(self, samples):
        samples.sort(key=lambda s: s["n"])
        groups = []
        while samples:
            group, size = [], 0
            while samples and size + samples[0]["n"] <= 12:
                sample = samples.pop(0)
                group.append(sample)
                size += sample["n"]
            groups.append(group)
        return groups


def test_select_samples_to_pack_may_change_the_list_it_gets(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)
    ds = energon_rs.get_val_dataset(
        ref_small / "jsonl" / "data.jsonl", worker_config=wc, batch_size=None,
        packing_buffer_size=10, task_encoder=GuidePacker(),
    )
    packs = list(energon_rs.get_loader(ds, worker_type="thread"))
    keys = sorted(k for p in packs for k in p["__key__"].split("+"))
    assert keys == sorted(str(i) for i in range(len(keys))) and len(keys) >= 10
    assert all(p["n"] <= 12 for p in packs)
