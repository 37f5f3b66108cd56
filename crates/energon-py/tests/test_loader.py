"""The loader through the Python API: the reference's recorded key orders, save and restore,
GIL release, Ctrl-C."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import energon_rs
from conftest import EXPECTED, REF_SMALL, energon_cli, torch_or_skip

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


def train_loader(name, task_encoder=None, packing_buffer_size=None, **kwargs):
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
        **({} if task_encoder is None else {"task_encoder": task_encoder}),
        **({} if packing_buffer_size is None else {"packing_buffer_size": packing_buffer_size}),
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
    assert state["format"] == "energon-rs-loader-state" and state["version"] == 2
    assert isinstance(state["checkpoint"], bytes)

    _, restored = train_loader(name)
    restored.restore_state_rank(state)
    it = iter(restored)
    assert take_keys(it, 20) == continued[:20]
    # A state of a restored loader restores too.
    again = restored.save_state_rank()
    _, twice = train_loader(name)
    twice.restore_state_rank(again)
    assert take_keys(twice, 20) == continued[20:]
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


def test_a_state_restores_into_another_task_encoder_with_the_same_stages():
    """As in the reference, the task encoder's class may change between saving and restoring
    (a fix to `encode_sample`, a renamed class); a task encoder with other stages is refused."""
    name = "keys-ws1-r0-nw2-bs4-sb16-s0.txt"

    class Before(energon_rs.DefaultTaskEncoder):
        pass

    class After(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            return sample

    class Packing(energon_rs.DefaultTaskEncoder):
        def select_samples_to_pack(self, samples):
            return [[s] for s in samples]

        def pack_selected_samples(self, samples):
            return samples[0]

    _, before = train_loader(name, task_encoder=Before())
    it = iter(before)
    take_keys(it, 8)
    state = before.save_state_rank()
    want = take_keys(it, 12)
    _, after = train_loader(name, task_encoder=After())
    after.restore_state_rank(state)
    assert take_keys(after, 12) == want
    _, packing = train_loader(name, task_encoder=Packing(), packing_buffer_size=4)
    with pytest.raises(energon_rs.CheckpointError, match="encoder.hooks"):
        packing.restore_state_rank(state)


def test_restore_checks_the_state():
    _, loader = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    with pytest.raises(energon_rs.CheckpointError):
        loader.restore_state_rank({"format": "other"})
    with pytest.raises(energon_rs.IncompatibleFormatError):
        loader.restore_state_rank({"format": "energon-rs-loader-state", "version": 99})
    _, other = train_loader("keys-ws1-r0-nw2-bs1-sb0-s0.txt")
    with pytest.raises(energon_rs.CheckpointError, match="shuffle_buffer_size is 0"):
        loader.restore_state_rank(other.save_state_rank())
    # A state of another dataset (same settings).
    _, jsonl = train_loader("keys-jsonl-ws1-r0-nw2-bs1-sb0-s0.txt")
    _, fixture = train_loader("keys-ws1-r0-nw2-bs1-sb0-s0.txt")
    with pytest.raises(energon_rs.CheckpointError, match="leaf.0.shards is 1 shards, 200 samples"):
        fixture.restore_state_rank(jsonl.save_state_rank())
    # Damaged bytes.
    state = loader.save_state_rank()
    state["checkpoint"] = state["checkpoint"][:-3]
    with pytest.raises(energon_rs.CheckpointError, match="loader state"):
        train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")[1].restore_state_rank(state)
    take_keys(loader, 1)
    with pytest.raises(energon_rs.CheckpointError, match="before iterating"):
        loader.restore_state_rank(loader.save_state_rank())
    assert loader.save_state_global(0) == [loader.save_state_rank()]
    # The save/restore guide's keyword.
    assert loader.save_state_global(dst_rank=0) == [loader.save_state_rank()]
    with pytest.raises(TypeError):
        loader.save_state_global()


def test_a_state_is_an_energon_checkpoint(tmp_path):
    """The state's bytes are the checkpoint file `energon checkpoint info` reads: after 3 batches
    of 4 with 2 workers and a shuffle buffer of 16, the same positions as `energon trace` saves."""
    _, loader = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    take_keys(loader, 12)
    path = tmp_path / "state.ckpt"
    path.write_bytes(loader.save_state_rank()["checkpoint"])
    out = energon_cli("checkpoint", "info", "--config", path)
    assert "  rank 0 of 1: 2 workers, next worker 1, micro batch size 4\n" in out, out
    assert "    worker 0 (global 0): 2 items handed out, 15 samples buffered\n" in out, out
    assert "    worker 1 (global 1): 1 items handed out, 15 samples buffered\n" in out, out
    assert "    leaf.0.shards = 4 shards, 200 samples, fingerprint " in out, out
    assert "    encoder._class = energon_rs.task_encoder.DefaultTaskEncoder\n" in out, out


def test_a_state_survives_torch_save_and_a_weights_only_load(tmp_path):
    torch = torch_or_skip()
    _, loader = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    it = iter(loader)
    take_keys(it, 8)
    torch.save(loader.save_state_global(0), tmp_path / "data.pt")
    want = take_keys(it, 16)
    states = torch.load(tmp_path / "data.pt", weights_only=True)
    _, restored = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    restored.restore_state_global(states)
    assert take_keys(restored, 16) == want


def test_val_dataset_is_one_ordered_pass(ref_small, wc2):
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc2, batch_size=7)
    loader = energon_rs.get_loader(ds)
    keys = take_keys(loader, 10_000)
    assert sorted(keys) == [f"{i:08d}" for i in range(200)]
    # Items of a pass: the batches of each worker, the last one shorter.
    assert ds.worker_sample_counts() == [100, 100]
    assert len(ds) == len(loader) == 2 * 15
    # Iterating again gives the next pass.
    assert sorted(take_keys(loader, 10_000)) == sorted(keys)


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
    armed = threading.Event()
    interrupted = threading.Event()
    handled_in = []
    this_test = sys._getframe().f_code

    def in_the_wait(frame) -> bool:
        """Whether the main thread runs this test's `next()`: frames of energon_rs's iteration
        (its watchdog's generator), then this test's."""
        while frame is not None and frame.f_code is not this_test:
            if "energon_rs" not in frame.f_code.co_filename:
                return False
            frame = frame.f_back
        return frame is not None

    def on_sigint(signum, frame):
        # As Python's default handler, once, but only in the wait. Elsewhere (the rest of
        # `Event.set`, or a weakref callback or finalizer of an earlier test's loader that the
        # collector runs, where the exception would be printed and lost) the worker sends the
        # signal again.
        handled_in.append(f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "?")
        if in_the_wait(frame) and not interrupted.is_set():
            interrupted.set()
            raise KeyboardInterrupt

    class Blocking(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            # Workers start with the iterator: wait until the main thread is inside
            # `pytest.raises`, about to enter `next()` or in it, then interrupt it, again until
            # the handler has raised in the wait, whatever the machine's load.
            armed.wait(30)
            while not interrupted.is_set() and not release.is_set():
                os.kill(os.getpid(), signal.SIGINT)
                interrupted.wait(0.5)
            release.wait(30)  # blocks the worker (without the GIL) until the test ends
            return sample

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc, batch_size=None, task_encoder=Blocking()
    )
    # The hook shares events with this test: worker threads (processes have their own; the
    # Ctrl-C of process workers is in test_worker_types.py).
    loader = energon_rs.get_loader(ds, worker_type="thread")
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        # Built before the interrupt is armed: building calls Python code, where the
        # KeyboardInterrupt would be raised outside the wait this test is about.
        items = iter(loader)
        gc.collect()
        with pytest.raises(KeyboardInterrupt):
            armed.set()
            next(items)
    except pytest.fail.Exception:
        raise AssertionError(f"the interrupt was handled at {handled_in}, not in next()") from None
    finally:
        signal.signal(signal.SIGINT, previous)
        armed.set()
        release.set()
        loader.close()


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


def test_virtual_epochs_cut_the_stream_into_passes():
    name = "keys-ws1-r0-nw2-bs4-sb16-s0.txt"
    want = (EXPECTED / name).read_text().split()
    ds, loader = train_loader(name)
    s = settings(name)
    ds = energon_rs.get_train_dataset(
        s["path"],
        worker_config=ds.worker_config,
        batch_size=4,
        shuffle_buffer_size=16,
        max_samples_per_sequence=None,
        virtual_epoch_length=3,
    )
    loader = energon_rs.get_savable_loader(ds)
    assert len(loader) == 3
    first = [keys_of(b) for b in loader]
    state = loader.save_state_rank()
    second = [keys_of(b) for b in loader]
    assert (len(first), len(second)) == (3, 3)
    # Each pass is 3 batches of the rank split over its 2 workers (2 and 1), and each pass starts
    # the round robin at worker 0 again, as torch's DataLoader does for a new epoch.
    batches = [want[i : i + 4] for i in range(0, 48, 4)]
    w0, w1 = batches[0::2], batches[1::2]
    assert first == [w0[0], w1[0], w0[1]]
    assert second == [w0[2], w1[1], w0[3]]
    restored = energon_rs.get_savable_loader(ds)
    restored.restore_state_rank(state)
    assert [keys_of(b) for b in restored] == second


def test_val_limit_stops_each_pass(ref_small, wc2):
    ds = energon_rs.get_val_dataset(
        ref_small, split_part="train", worker_config=wc2, batch_size=7, limit=5
    )
    loader = energon_rs.get_loader(ds)
    assert len(ds) == len(loader) == 5
    first = [keys_of(b) for b in loader]
    assert len(first) == 5
    full = [keys_of(b) for b in energon_rs.get_loader(
        energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc2, batch_size=7)
    )]
    assert first == full[:5]


def test_a_training_dataset_without_repeat_ends_after_one_shuffled_pass(ref_small, wc2):
    ds = energon_rs.get_train_dataset(
        ref_small, worker_config=wc2, batch_size=None, shuffle_buffer_size=None,
        max_samples_per_sequence=None, repeat=False,
    )
    loader = energon_rs.get_loader(ds)
    keys = take_keys(loader, 10_000)
    assert sorted(keys) == [f"{i:08d}" for i in range(200)]
    # Shuffled like the repeating loader's first pass.
    name = "keys-ws1-r0-nw2-bs1-sb0-s0.txt"
    assert keys == (EXPECTED / name).read_text().split()[:200]


@pytest.mark.parametrize("nw", [0, 2])
def test_limit_over_repeat_gives_the_references_validation_batches_every_pass(ref_small, nw):
    # Megatron-LM's wrapping of validation data: the repeat is around the batched pipeline, so
    # each worker's pass ends with its own short batch before the next pass begins, as recorded
    # from the reference (tests/fixtures/tools/record_val_repeat.py).
    want = json.loads((EXPECTED / "val-repeat-limit10-bs30.json").read_text())[f"nw{nw}"]
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=nw)
    val = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc, batch_size=30)
    ds = energon_rs.LimitDataset(energon_rs.RepeatDataset(val), 10, reset_after_epoch=True)
    loader = energon_rs.get_loader(ds)
    passes = [[keys_of(b) for b in loader] for _ in range(2)]
    assert passes == want
    assert len(energon_rs.get_loader(val)) == (7 if nw == 0 else 8)


def test_get_val_datasets_gives_one_pipeline_per_dataset(ref_small, wc2):
    mds = Path(__file__).resolve().parents[2] / "energon-mix" / "tests" / "data" / "mds" / "blend.yaml"

    class TextEncoder(energon_rs.DefaultTaskEncoder):
        cookers = [energon_rs.Cooker(lambda s: energon_rs.TextSample(**energon_rs.basic_sample_keys(s), text=""))]

    pairs = energon_rs.get_val_datasets(
        mds, split_part="train", worker_config=wc2, batch_size=None, task_encoder=TextEncoder()
    )
    assert len(pairs) == 3
    counts = [len(take_keys(energon_rs.get_loader(ds), 10_000)) for ds, _ in pairs]
    assert counts == [200, 200, 100]
    assert [source.kind for _, source in pairs] == ["webdataset", "jsonl", "webdataset"]
    single = energon_rs.get_val_datasets(ref_small, split_part="train", worker_config=wc2, batch_size=4)
    assert len(single) == 1 and len(single[0][0]) == 2 * 25


def test_python_and_cli_states_restore_into_each_other(tmp_path, ref_small):
    """A state saved in Python continues in `energon trace --restore`, and the reverse (both
    record the split part the dataset was opened with)."""
    _, loader = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    it = iter(loader)
    take_keys(it, 12)
    path = tmp_path / "python.ckpt"
    path.write_bytes(loader.save_state_rank()["checkpoint"])
    want = take_keys(it, 8)
    args = [
        "trace", ref_small, "--num-workers", "2", "--batch-size", "4",
        "--shuffle-buffer-size", "16", "-n", "8",
    ]
    assert energon_cli(*args, "--restore", path).split() == want
    # The CLI's state after 3 batches restores in Python.
    cli_state = tmp_path / "cli.ckpt"
    energon_cli(*args, "--save-after-batches", "3", "--state-out", cli_state)
    _, restored = train_loader("keys-ws1-r0-nw2-bs4-sb16-s0.txt")
    state = loader.save_state_rank()
    restored.restore_state_rank({**state, "checkpoint": cli_state.read_bytes()})
    assert take_keys(restored, 8) == want


def test_loader_config_has_the_references_keys_and_tells_loaders_apart(ref_small):
    # `loader.config()` as user code reads it (logging it, comparing two loaders' settings): the
    # reference's keys, and the dataset's settings inside.
    def loader(nw, bs):
        wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=nw)
        ds = energon_rs.get_train_dataset(ref_small, worker_config=wc, batch_size=bs,
                                          shuffle_buffer_size=None, max_samples_per_sequence=None)
        return energon_rs.get_savable_loader(ds)

    a, b, c = loader(2, 4), loader(2, 4), loader(0, 8)
    cfg = a.config()
    assert list(cfg) == ["type", "num_workers", "persistent_workers", "pin_memory",
                         "prefetch_factor", "dataset"]
    assert (cfg["type"], cfg["num_workers"], cfg["persistent_workers"]) == ("SavableDataLoader", 2, True)
    assert cfg["prefetch_factor"] == 2 and c.config()["prefetch_factor"] is None
    assert cfg == b.config() and cfg != c.config()
    assert cfg["dataset"] == a.dataset.config()
