"""The one error policy: Python hooks raise, the Rust core classifies the exception, calls the
worker config's error handler in the worker, and counts consecutive failures per worker and
stage (energon-cook's error policy, whose counts are part of each stage's saved state)."""

from __future__ import annotations


import pytest

import energon_rs

TOLERANCE = 12


@energon_rs.stateless(failure_tolerance=TOLERANCE)
def cook_never(sample):
    raise ValueError(f"cannot cook record {sample['__key__']}")


class NeverCooks(energon_rs.DefaultTaskEncoder):
    cookers = [energon_rs.Cooker(cook_never)]


class FirstEightFail(energon_rs.DefaultTaskEncoder):
    """Fails on the first 8 samples of each hundred (each worker's first 8 of a validation pass
    over 200 samples with 2 workers)."""

    @energon_rs.stateless(failure_tolerance=TOLERANCE)
    def encode_sample(self, sample):
        if int(sample.__key__) % 100 < 8:
            raise ValueError(f"bad sample {sample.__key__}")
        return sample


@pytest.mark.parametrize("worker_type", ["thread", "process", "main"])
def test_failures_in_a_row_are_counted_per_worker(ref_small, worker_type):
    """Each worker's stage counts its own failures (the reference's `ErrorContext` lives in each
    worker): 8 in a row on each of two workers stay below a tolerance of 12, whichever way the
    workers interleave."""
    seen = []
    wc = energon_rs.WorkerConfig(
        rank=0,
        world_size=1,
        num_workers=2,
        global_error_handler=lambda exc, sample, sources: seen.append(sample.__key__),
    )
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=FirstEightFail()
    )
    keys = sorted(s.__key__ for s in energon_rs.get_loader(ds, worker_type=worker_type))
    assert keys == [f"{i:08d}" for i in range(200) if i % 100 >= 8]
    if worker_type != "process":
        # (A worker process's handler runs in that process. Worker threads may read on into the
        # next pass and report a sample again.)
        assert sorted(set(seen)) == [f"{i:08d}" for i in range(200) if i % 100 < 8]


def test_the_error_handler_runs_in_the_worker_with_the_sample_and_its_sources(ref_small):
    seen = []

    def handler(exc, sample, sources):
        seen.append((type(exc).__name__, str(exc), sample["__key__"], sources))

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0, global_error_handler=handler)
    ds = energon_rs.get_val_dataset(
        ref_small / "jsonl" / "data.jsonl",
        split_part="val",
        worker_config=wc,
        batch_size=None,
        task_encoder=NeverCooks(),
    )
    with pytest.raises(energon_rs.FatalSampleError, match=f"{TOLERANCE} times in a row") as info:
        list(energon_rs.get_loader(ds))
    assert isinstance(info.value.__cause__, ValueError)
    assert len(seen) == TOLERANCE
    name, message, key, sources = seen[0]
    assert (name, message) == ("ValueError", f"cannot cook record {key}")
    assert sources is not None and sources[0].dataset_path.endswith("data.jsonl")


def test_a_handler_that_raises_ends_the_loader_with_its_exception(ref_small):
    def reraise(exc, sample, sources):
        raise RuntimeError("handler gave up") from exc

    class Encoder(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            raise KeyError("bad sample")

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2, global_error_handler=reraise)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Encoder()
    )
    for worker_type in ("thread", "process"):
        with pytest.raises(RuntimeError, match="handler gave up") as info:
            list(energon_rs.get_loader(ds, worker_type=worker_type))
        assert isinstance(info.value.__cause__, KeyError)


def test_a_skip_neither_counts_nor_resets_and_a_success_resets(ref_small):
    """`SkipSample` is quiet; failures count only in a row (the reference's `ErrorContext`)."""

    class Encoder(energon_rs.DefaultTaskEncoder):
        @energon_rs.stateless(failure_tolerance=3)
        def encode_sample(self, sample):
            i = int(sample.__key__)
            # Two failures, a skip, then a success: never three failures in a row.
            if i % 4 in (0, 1):
                raise ValueError("bad")
            if i % 4 == 2:
                raise energon_rs.SkipSample()
            return sample

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0, global_error_handler=lambda *a: None)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Encoder()
    )
    keys = [s.__key__ for s in energon_rs.get_loader(ds)]
    assert keys == [f"{i:08d}" for i in range(3, 200, 4)]


def test_the_hook_set_is_a_typed_contract(ref_small):
    class Encoder(energon_rs.DefaultTaskEncoder):
        __default_failure_tolerance__ = 7

        @energon_rs.stateless(failure_tolerance=0)
        def encode_sample(self, sample):
            return sample

        def batch(self, samples):
            return samples

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=2, task_encoder=Encoder()
    )
    hooks = ds._hooks
    assert isinstance(hooks, energon_rs._native._HookSet)
    # The task encoder's default, and a hook's own (0: never fatal).
    assert hooks.policy == (7, {"encode_sample": 0, "batch": 7})
    assert hooks.per_sample_python
    with pytest.raises(TypeError):
        energon_rs._native._HookSet(handler=print)  # the error rules are required


def test_a_joiner_goes_through_the_same_policy(tmp_path, ref_small_copy):
    from test_metadataset import join_yaml

    mds = join_yaml(
        tmp_path, ref_small_copy, "      __module__: joiners\n      __function__: every_third\n"
    )
    seen = []
    wc = energon_rs.WorkerConfig(
        rank=0,
        world_size=1,
        num_workers=2,
        global_error_handler=lambda exc, sample, sources: seen.append((str(exc), len(sample))),
    )
    ds = energon_rs.get_val_dataset(mds, split_part="train", worker_config=wc, batch_size=None)
    keys = sorted(s["__key__"] for s in energon_rs.get_loader(ds, worker_type="thread"))
    assert keys == [f"{i:08d}" for i in range(2, 200, 3)]
    # The handler saw each failure, with the joined samples (worker threads may read on into
    # the next pass and report a sample again).
    assert sorted(set(seen)) == sorted((f"cannot join {i:08d}", 2) for i in range(1, 200, 3))


class _SkipAll(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        raise energon_rs.SkipSample()


class _YieldNothing(energon_rs.DefaultTaskEncoder):
    def encode_sample(self, sample):
        return
        yield sample


@pytest.mark.parametrize("worker_type", ["thread", "process"])
@pytest.mark.parametrize("encoder", [_SkipAll, _YieldNothing])
def test_a_hook_that_gives_nothing_for_every_sample_is_an_error(ref_small, worker_type, encoder):
    """Samples repeat forever in training: a hook that skips all of them, or a generator that
    yields nothing for any, would loop forever (the reference's does); two passes without an
    output are a clear error."""
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_train_dataset(
        ref_small, worker_config=wc, batch_size=2, shuffle_buffer_size=None,
        max_samples_per_sequence=None, task_encoder=encoder(),
    )
    with pytest.raises(energon_rs.LoaderError, match="encode_sample dropped all of 200 samples"):
        next(iter(energon_rs.get_loader(ds, worker_type=worker_type)))
