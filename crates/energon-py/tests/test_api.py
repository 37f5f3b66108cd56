"""API shapes: the reference's names, parameters and defaults, and WorkerConfig."""

from __future__ import annotations

import hashlib
import inspect

import pytest

import energon_rs

REFERENCE_NAMES = [
    "WorkerConfig",
    "get_train_dataset",
    "get_val_dataset",
    "get_loader",
    "get_savable_loader",
    "load_dataset",
    "Cooker",
    "basic_sample_keys",
    "stateless",
    "TaskEncoder",
    "DefaultTaskEncoder",
    "SkipSample",
    "Sample",
    "SourceInfo",
    "CaptioningSample",
    "ImageSample",
    "ImageClassificationSample",
    "InterleavedSample",
    "MultiChoiceVQASample",
    "OCRSample",
    "SimilarityInterleavedSample",
    "TextSample",
    "VQASample",
    "VQAOCRSample",
    "VidQASample",
    "CrudeSample",
]


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_reference_names_are_exported(name):
    assert name in energon_rs.__all__
    assert getattr(energon_rs, name) is not None


def defaults(fn):
    return {
        name: (p.default if p.default is not inspect.Parameter.empty else "required", p.kind.name)
        for name, p in inspect.signature(fn).parameters.items()
    }


def test_get_train_dataset_signature_matches_the_reference():
    d = defaults(energon_rs.get_train_dataset)
    assert d["split_part"] == ("train", "KEYWORD_ONLY")
    for required in ("worker_config", "batch_size", "shuffle_buffer_size", "max_samples_per_sequence"):
        assert d[required] == ("required", "KEYWORD_ONLY"), required
    assert d["batch_drop_last"][0] is False
    assert d["packing_buffer_size"][0] is None
    assert d["virtual_epoch_length"][0] == 0
    assert d["shuffle_over_epochs_multiplier"][0] == 1
    assert d["repeat"][0] is True


def test_get_val_dataset_and_loader_signatures():
    d = defaults(energon_rs.get_val_dataset)
    assert d["split_part"][0] == "val"
    assert d["limit"][0] is None
    d = defaults(energon_rs.get_loader)
    assert d["prefetch_factor"][0] == 2
    assert d["watchdog_timeout_seconds"][0] == 60
    d = defaults(energon_rs.get_savable_loader)
    assert d["checkpoint_every_sec"][0] == 60
    assert d["gc_collect_every_n_steps"][0] == 10


def test_sample_types_have_the_reference_fields():
    import dataclasses

    names = [f.name for f in dataclasses.fields(energon_rs.CaptioningSample)]
    assert names == ["__key__", "__restore_key__", "__subflavors__", "__sources__", "image", "caption"]
    names = [f.name for f in dataclasses.fields(energon_rs.VQASample)][4:]
    assert names == ["image", "context", "answers", "answer_weights"]
    names = [f.name for f in dataclasses.fields(energon_rs.SourceInfo)]
    assert names == ["dataset_path", "index", "shard_name", "file_names"]


def test_worker_config_equality_and_defaults():
    a = energon_rs.WorkerConfig(rank=0, world_size=2, num_workers=3, seed_offset=5)
    b = energon_rs.WorkerConfig(rank=0, world_size=2, num_workers=3)
    assert a == b  # only rank, world size and workers count
    assert a != energon_rs.WorkerConfig(rank=1, world_size=2, num_workers=3)
    d = energon_rs.WorkerConfig.default_worker_config()
    assert (d.rank, d.world_size, d.num_workers) == (0, 1, 4)
    assert energon_rs.WorkerConfig.default_worker_config(0).num_workers == 0


@pytest.mark.parametrize("rank,nw,local,offset", [(0, 0, 0, 0), (1, 2, 1, 0), (3, 4, 2, 7)])
def test_worker_seed_is_the_reference_sha1(rank, nw, local, offset):
    wc = energon_rs.WorkerConfig(rank=rank, world_size=4, num_workers=nw, seed_offset=offset)
    global_id = wc.global_worker_id(local)
    digest = hashlib.sha1(f"{global_id},{offset}".encode()).digest()
    assert wc.worker_seed(local) == int.from_bytes(digest[-4:], "big")


def test_worker_config_is_validated():
    with pytest.raises(ValueError, match="rank 2 is not below world size 2"):
        energon_rs.WorkerConfig(rank=2, world_size=2, num_workers=0)
    with pytest.raises(energon_rs.EnergonError):
        energon_rs.WorkerConfig(rank=0, world_size=0, num_workers=0)


def test_stateless_and_cooker_decorators_keep_the_function():
    @energon_rs.stateless
    def f(x):
        return x + 1

    @energon_rs.stateless(restore_seeds=True)
    def g(x):
        return x

    assert f(1) == 2 and f.__stateless__ and g.__restore_seeds__
    c = energon_rs.Cooker(f, has_subflavors={"a": 1})
    assert c.is_match({"a": 1, "b": 2}) and not c.is_match({"a": 2}) and not c.is_match(None)


def test_basic_sample_keys():
    crude = energon_rs.CrudeSample(
        {"__key__": "k", "__restore_key__": ("Webdataset", 3), "__sources__": (), "txt": "x"}
    )
    keys = energon_rs.basic_sample_keys(crude)
    sample = energon_rs.TextSample(**keys, text="x")
    assert (sample.__key__, sample.__restore_key__, sample.__subflavors__) == ("k", ("Webdataset", 3), None)


def test_native_stub_lists_every_native_name():
    from pathlib import Path

    stub = (Path(energon_rs.__file__).parent / "_native.pyi").read_text()
    public = [n for n in dir(energon_rs._native) if not n.startswith("__")]
    missing = [n for n in public if n not in stub]
    assert not missing, f"_native.pyi lacks {missing}"
    assert (Path(energon_rs.__file__).parent / "py.typed").exists()


def test_task_encoders_are_generic_and_samples_extend_and_batch():
    import dataclasses

    import numpy as np

    class Encoder(energon_rs.DefaultTaskEncoder[energon_rs.CaptioningSample, dict, dict, dict]):
        pass

    assert isinstance(Encoder(), energon_rs.TaskEncoder)
    assert energon_rs.TaskEncoder[int, int, int, int] is not None

    @dataclasses.dataclass(kw_only=True)
    class Tagged(energon_rs.TextSample):
        tag: str

    base = energon_rs.TextSample(__key__="k", __restore_key__=("Webdataset", 3), text="hi")
    tagged = Tagged.extend(base, tag="t")
    assert (tagged.__key__, tagged.text, tagged.tag) == ("k", "hi", "t")

    @dataclasses.dataclass(kw_only=True)
    class Pixels(energon_rs.Sample):
        pixels: np.ndarray
        name: str

    @dataclasses.dataclass(kw_only=True)
    class PixelBatch(energon_rs.Batch):
        pixels: list
        name: list

    samples = [
        Pixels(__key__=str(i), __restore_key__=(), pixels=np.ones((i + 1, 2)), name=f"n{i}")
        for i in range(3)
    ]
    # Samples have no from_samples (the reference's neither): batches do.
    assert not hasattr(Pixels, "from_samples")
    batch = PixelBatch.from_samples(samples, name=["x"])
    assert batch.__key__ == ["0", "1", "2"] and batch.name == ["x"]
    # A list of arrays, as the reference's from_samples gives (it never stacks).
    assert [p.shape for p in batch.pixels] == [(1, 2), (2, 2), (3, 2)]
    assert batch.__subflavors__ is None and batch.__sources__ is None
    # The default batch of samples: arrays padded and stacked, sources one tuple per sample.
    samples = [Pixels.derive_from(s, pixels=s.pixels, name=s.name) for s in samples]
    for s in samples:
        s.__sources__ = (energon_rs.SourceInfo("d", int(s.__key__), "shard", ("x",)),)
        s.__subflavors__ = {}
    batched = energon_rs.generic_batch(samples)
    assert type(batched) is Pixels and batched.pixels.shape == (3, 3, 2)
    assert batched.pixels[0, 1:].sum() == 0
    assert batched.__sources__ == [s.__sources__ for s in samples]
    # As the reference's generic_batch: field by field, so one dict of lists (empty here).
    assert batched.__subflavors__ == {}
    assert PixelBatch.derive_from(batch, pixels=[], name=[]).__key__ == ["0", "1", "2"]
    assert batch.pin_memory().__key__ == batch.__key__
    assert energon_rs.batch_stack([np.ones(2), np.zeros(2)]).shape == (2, 2)
    assert energon_rs.batch_list([1, 2]) == [1, 2]


def test_get_loader_takes_the_deprecated_worker_config(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc, batch_size=4)
    with pytest.warns(DeprecationWarning):
        loader = energon_rs.get_loader(ds, worker_config=wc)
    assert len(next(iter(loader)).__key__) == 4
    with pytest.raises(ValueError), pytest.warns(DeprecationWarning):
        energon_rs.get_loader(ds, worker_config=energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2))


def test_worker_config_config_and_log_level():
    wc = energon_rs.WorkerConfig(rank=1, world_size=2, num_workers=3, worker_log_level=1)
    assert wc.config() == {"rank": 1, "world_size": 2, "num_workers": 3, "data_parallel_group": None}
    assert wc.should_log(1) and not wc.should_log(2)
