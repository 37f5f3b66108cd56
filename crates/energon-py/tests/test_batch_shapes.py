"""The default batches' structure (container types, lengths, sources, subflavors, restore keys)
against the reference's, recorded by tests/fixtures/tools/record_batch_shapes.py."""

from __future__ import annotations

import importlib.util
import json
import shutil

import energon_rs
from conftest import EXPECTED, FIXTURES, REF_SMALL, energon_cli


def recorder():
    path = FIXTURES / "tools" / "record_batch_shapes.py"
    spec = importlib.util.spec_from_file_location("record_batch_shapes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_batches_have_the_reference_structure(tmp_path):
    tools = recorder()
    copy = tmp_path / "ds"
    shutil.copytree(REF_SMALL, copy)
    for p in copy.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    yaml = tmp_path / "join.yaml"
    yaml.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    join:\n"
        f"      - path: {copy}\n      - path: {copy}\n        subflavors: {{side: second}}\n"
        "    joiner:\n      __module__: megatron.energon\n      __class__: CaptioningSample\n"
    )
    energon_cli("prepare", yaml)
    got = tools.shapes(energon_rs, REF_SMALL, yaml)
    want = {}
    for line in (EXPECTED / "batch-shapes.json").read_text().splitlines():
        want.update(json.loads(line))
    got = json.loads(json.dumps(got))
    for case in want:
        for field in want[case]:
            assert got[case][field] == want[case][field], (case, field)


class _Plain(energon_rs.TaskEncoder):
    """A task encoder that is not a DefaultTaskEncoder: the reference batches it with
    `generic_batch`, field by field."""


class _Cook(energon_rs.DefaultTaskEncoder):
    cookers = [energon_rs.Cooker(lambda sample: sample)]


def test_subflavors_of_a_batch_follow_the_task_encoders_batching(tmp_path):
    # The reference (megatron-energon 7.4.1): DefaultTaskEncoder.batch keeps `__subflavors__` one
    # dict per sample; TaskEncoder.batch (generic_batch) makes one dict of lists, as does any
    # batching of crude dicts (a JSONL file's records have none: a list of None).
    yaml = tmp_path / "mds.yaml"
    yaml.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        f"    path: {REF_SMALL}\n    subflavors: {{source: fixture}}\n"
    )
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)

    def first(task_encoder, path=yaml):
        ds = energon_rs.get_val_dataset(path, split_part="train", worker_config=wc, batch_size=3,
                                        task_encoder=task_encoder)
        with energon_rs.get_loader(ds) as loader:
            return next(iter(loader))

    assert first(energon_rs.DefaultTaskEncoder()).__subflavors__ == [{"source": "fixture"}] * 3
    assert first(_Plain()).__subflavors__ == {"source": ["fixture"] * 3}
    crude = first(_Cook(), REF_SMALL / "jsonl" / "data.jsonl")
    assert crude["__subflavors__"] == [None, None, None]


def test_items_of_torch_datasets_pass_through_torchs_default_convert(ref_small):
    # The reference's torch DataLoader (batch_size=None) hands every item through torch's
    # `default_convert`: a mapping's tuples become lists and its numpy arrays tensors (Megatron's
    # dict batches); sample and batch objects pass unchanged. Items made again from their
    # (converted) restore key are the same.
    torch = __import__("pytest").importorskip("torch")
    import numpy as np

    class Enc(energon_rs.DefaultTaskEncoder):
        def encode_batch(self, batch):
            return {"key": batch.__restore_key__, "pair": (1, (2, 3)), "arr": np.arange(3)}

    for nw in (0, 2):
        wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=nw)
        ds = energon_rs.get_train_dataset(str(ref_small), worker_config=wc, batch_size=2,
                                          task_encoder=Enc(), shuffle_buffer_size=None,
                                          max_samples_per_sequence=None, torch=True)
        loader = energon_rs.get_savable_loader(ds)
        item = next(iter(loader))
        assert type(item["pair"]) is list and item["pair"] == [1, [2, 3]]
        assert isinstance(item["arr"], torch.Tensor) and item["arr"].tolist() == [0, 1, 2]
        assert type(item["key"]) is list and type(item["key"][-1]) is list
        loader.close()
    # Without torch tensors, items stay as the task encoder made them.
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_train_dataset(str(ref_small), worker_config=wc, batch_size=2,
                                      task_encoder=Enc(), shuffle_buffer_size=None,
                                      max_samples_per_sequence=None, torch=False)
    item = next(iter(energon_rs.get_loader(ds)))
    assert type(item["pair"]) is tuple and isinstance(item["arr"], np.ndarray)


def test_restore_sample_takes_a_restore_key_converted_to_lists(ref_small):
    # A restore key that went through torch's `default_convert` (inside a mapping item) is made
    # of lists: it restores as the tuple it was.
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_train_dataset(str(ref_small), worker_config=wc, batch_size=2,
                                      shuffle_buffer_size=None, max_samples_per_sequence=None)
    loader = energon_rs.get_savable_loader(ds)
    item = next(iter(loader))

    def as_lists(x):
        return [as_lists(v) for v in x] if isinstance(x, tuple) else x

    again = loader.restore_sample(as_lists(item.__restore_key__))
    assert again.__key__ == item.__key__ and again.__restore_key__ == item.__restore_key__
    loader.close()
