"""Conversions: samples as dataclasses, images as numpy arrays that own Rust buffers, raw parts
as memoryviews, batches stacked."""

from __future__ import annotations

import json

import numpy as np
import pytest

import energon_rs


def test_a_sample_is_its_dataclass_with_the_reference_fields(ref_small):
    reader = energon_rs.load_dataset(ref_small).reader("train")
    assert len(reader) == 200 and reader.sample_type == "CaptioningSample"
    s = reader[0]
    assert isinstance(s, energon_rs.CaptioningSample)
    assert s.__key__ == "00000000"
    assert s.__restore_key__ == ("Webdataset", 0)
    assert s.caption == "cat and a large small"
    (source,) = s.__sources__
    assert source == energon_rs.SourceInfo(
        dataset_path=str(ref_small),
        index=0,
        shard_name="shards/data-000000.tar",
        file_names=("00000000.jpg", "00000000.txt"),
    )
    # The reference's default decoder: torchrgb, float32 CHW in [0, 1].
    assert s.image.shape == (3, 32, 32) and s.image.dtype == np.float32
    assert 0.0 <= s.image.min() and s.image.max() <= 1.0
    assert reader[-1].__key__ == reader[199].__key__


def test_image_layouts(ref_small):
    rgb8 = energon_rs.load_dataset(ref_small, image_decode="rgb8").reader("train")[0].image
    assert rgb8.shape == (32, 32, 3) and rgb8.dtype == np.uint8
    chw = energon_rs.load_dataset(ref_small).reader("train")[0].image
    np.testing.assert_allclose(chw, rgb8.transpose(2, 0, 1) / 255.0, atol=1e-6)


def test_arrays_take_over_the_rust_buffer_without_a_copy(ref_small):
    image = energon_rs.load_dataset(ref_small).reader("train")[0].image
    # The array is a view whose memory belongs to a Rust-owned base (no numpy allocation).
    assert not image.flags.owndata
    base = image.base
    while isinstance(base, np.ndarray):
        base = base.base
    assert base is not None and type(base).__name__ == "PySliceContainer"
    assert image.flags.c_contiguous and image.flags.writeable


def test_raw_parts_are_memoryviews_over_rust_bytes(ref_small):
    path = ref_small / "jsonl" / "data.jsonl"
    reader = energon_rs.load_dataset(path, image_decode=None).reader()
    s = reader[3]
    view = s["json"]
    assert isinstance(view, memoryview) and view.readonly
    # The view does not own the bytes: its object is the Rust buffer (a slice of the file's map).
    assert type(view.obj).__name__ == "_Buffer"
    want = path.read_bytes().splitlines(keepends=True)[3]
    assert view.tobytes() == want and len(view.obj) == len(want)
    # numpy and the view share the memory: still no copy.
    arr = np.frombuffer(view, dtype=np.uint8)
    assert not arr.flags.owndata and arr.tobytes() == want
    with pytest.raises(TypeError):
        view[0] = 0
    # The bytes outlive the sample and the reader.
    del s, reader, arr
    assert view.tobytes() == want


def test_undecoded_tar_members_are_the_shard_bytes(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)

    class Raw(energon_rs.DefaultTaskEncoder):
        decoder = None

    # Without decoding, a typed sample's fields hold the parts' bytes (the reference's sample
    # classes do not check types).
    sample = energon_rs.load_dataset(ref_small, image_decode=None).reader("train")[3]
    assert isinstance(sample, energon_rs.CaptioningSample)
    assert bytes(sample.image[:2]) == b"\xff\xd8" and bytes(sample.caption[:3]) == b"tab"
    ds = energon_rs.get_val_dataset(
        ref_small / "jsonl" / "data.jsonl", worker_config=wc, batch_size=None, task_encoder=Raw()
    )
    first = next(iter(energon_rs.get_loader(ds)))
    assert isinstance(first["json"], memoryview)


def test_jsonl_records_are_crude_dicts_with_json_values(ref_small):
    path = ref_small / "jsonl" / "data.jsonl"
    reader = energon_rs.load_dataset(path).reader()
    assert reader.sample_type == "CrudeSample"
    s = reader[1]
    assert isinstance(s, energon_rs.CrudeSample)
    line = (path.read_bytes().splitlines())[1]
    assert s["json"] == json.loads(line)
    assert s["__key__"] == "1" and s["__restore_key__"] == ("Webdataset", 1)
    assert s["__shard__"] == "data.jsonl"


def test_batches_stack_tensor_fields_and_list_the_others(ref_small, wc2):
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc2, batch_size=5)
    batch = next(iter(energon_rs.get_loader(ds)))
    assert isinstance(batch, energon_rs.CaptioningSample)
    assert batch.image.shape == (5, 3, 32, 32) and batch.image.dtype == np.float32
    assert not batch.image.flags.owndata
    assert isinstance(batch.caption, list) and len(batch.caption) == 5
    assert batch.__key__ == [f"{i:08d}" for i in range(5)]
    # As in the reference: a dict of the dataset's subflavors, empty when it sets none.
    assert batch.__subflavors__ == [{}] * 5
    assert len(batch.__sources__) == 5
    # The loader's wrapper (global worker 0, its first item), then the batch's stages.
    assert batch.__restore_key__[:6] == ("SimpleSavableDatasetWrapper", 0, 0, "MapDataset", 0, "BatchDataset")
    reader = energon_rs.load_dataset(ref_small).reader("train")
    for i in range(5):
        np.testing.assert_array_equal(batch.image[i], reader[i].image)
        assert batch.caption[i] == reader[i].caption


def test_samples_without_batching_carry_the_loader_restore_key(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_val_dataset(ref_small, split_part="train", worker_config=wc, batch_size=None)
    s = next(iter(energon_rs.get_loader(ds)))
    assert s.__key__ == "00000000"
    # Each map stage (loading, encoding) prepends itself, and the loader's wrapper comes first,
    # as in the reference.
    assert s.__restore_key__[:4] == ("SimpleSavableDatasetWrapper", 0, 0, "MapDataset")
    assert s.__restore_key__[-2:] == ("Webdataset", 0)


def test_torch_option_returns_tensors_sharing_memory(ref_small, wc2):
    from conftest import torch_or_skip

    torch = torch_or_skip()
    ds = energon_rs.get_train_dataset(
        ref_small,
        worker_config=wc2,
        batch_size=4,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        torch=True,
    )
    batch = next(iter(energon_rs.get_loader(ds)))
    assert isinstance(batch.image, torch.Tensor)
    assert batch.image.shape == (4, 3, 32, 32) and batch.image.dtype == torch.float32
    # torch.from_numpy of a numpy array never copies.
    image = energon_rs.load_dataset(ref_small).reader("train")[0].image
    t = torch.from_numpy(image)
    assert t.data_ptr() == image.ctypes.data


def test_items_come_pinned_where_cuda_is_as_the_references_loader_pins_them(ref_small, wc2, monkeypatch):
    from conftest import torch_or_skip

    torch = torch_or_skip()

    def dataset(**kwargs):
        return energon_rs.get_train_dataset(
            ref_small, worker_config=wc2, batch_size=4, shuffle_buffer_size=None,
            max_samples_per_sequence=None, **kwargs,
        )

    pinned = []

    def pin(self, *args):
        pinned.append(tuple(self.shape))
        return self

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    # No CUDA device: nothing is pinned (torch's DataLoader pins only with one).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with energon_rs.get_loader(dataset(torch=True)) as loader:
        assert not loader.pin_memory
        next(iter(loader))
    assert pinned == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for worker_type in ("thread", "process"):
        pinned.clear()
        with energon_rs.get_savable_loader(dataset(torch=True), worker_type=worker_type) as loader:
            assert loader.pin_memory
            batch = next(iter(loader))
        assert isinstance(batch, energon_rs.CaptioningSample)
        assert pinned == [(4, 3, 32, 32)], worker_type
    # numpy arrays are not torch's to pin.
    with energon_rs.get_loader(dataset()) as loader:
        assert not loader.pin_memory


def test_plain_dataclass_subclasses_redeclare_the_base_fields():
    # Task samples written for the reference (Megatron-LM's among them) redeclare the base fields
    # without defaults under a plain `@dataclass` and add more after them. The base's slots keep
    # its defaults off the class, so the redeclared fields have none, as with the reference.
    import dataclasses
    import pickle

    @dataclasses.dataclass
    class TaskSample(energon_rs.Sample):
        __key__: str
        __restore_key__: tuple
        __subflavor__: dict
        __subflavors__: dict
        tokens: list
        labels: list = None

    s = TaskSample(
        __key__="k", __restore_key__=("Webdataset", 1), __subflavor__=None,
        __subflavors__={"a": 1}, tokens=[1, 2])
    assert (s.__key__, s.__subflavors__, s.tokens, s.labels, s.__sources__) == (
        "k", {"a": 1}, [1, 2], None, None)
    with pytest.raises(TypeError):
        # `__subflavors__` has no default here.
        TaskSample(__key__="k", __restore_key__=(), __subflavor__=None, tokens=[])
    for cls in (energon_rs.Sample, energon_rs.CaptioningSample, energon_rs.VQASample):
        assert "__slots__" in vars(cls), cls
    sample = energon_rs.TextSample(__key__="a", __restore_key__=("Webdataset", 3), text="hi")
    assert pickle.loads(pickle.dumps(sample)) == sample
    with pytest.raises(AttributeError):
        sample.other = 1
