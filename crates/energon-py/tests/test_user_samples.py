"""`dataset.yaml` may name a sample class of the user's own module, and a field map fills
whatever the JSON path or part gives (no type checks), as the reference does."""

from __future__ import annotations

import json

import numpy as np
import pytest

import energon_rs
from user_samples import CaptionOnlySample, TaggedImageSample


def with_dataset_yaml(path, text):
    (path / ".nv-meta" / "dataset.yaml").write_text(text)
    return path


def val(path, **kwargs):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=kwargs.pop("nw", 2))
    return energon_rs.get_val_dataset(path, split_part="train", worker_config=wc, **kwargs)


def first_json(ref_small):
    import tarfile

    with tarfile.open(ref_small / "shards" / "data-000000.tar") as tar:
        return json.loads(tar.extractfile("00000000.json").read())


@pytest.mark.parametrize("worker_type", ["thread", "process", "main"])
def test_a_user_class_is_instantiated_from_the_field_map(ref_small_copy, worker_type):
    path = with_dataset_yaml(
        ref_small_copy,
        "sample_type:\n  __module__: user_samples\n  __class__: CaptionOnlySample\n"
        "field_map:\n  caption: txt\n",
    )
    ds = val(path, batch_size=None)
    assert ds.sample_type == "CaptionOnlySample"
    samples = list(energon_rs.get_loader(ds, worker_type=worker_type))
    assert sorted(s.__key__ for s in samples) == [f"{i:08d}" for i in range(200)]
    first = min(samples, key=lambda s: s.__key__)
    assert type(first) is CaptionOnlySample
    assert first.caption == "cat and a large small"
    assert first.__restore_key__[-2:] == ("Webdataset", 0)
    assert first.__subflavors__ == {}
    assert first.__sources__[0].shard_name.endswith("data-000000.tar")


def test_user_class_samples_are_batched_by_the_default_batch(ref_small_copy):
    path = with_dataset_yaml(
        ref_small_copy,
        "sample_type:\n  __module__: user_samples\n  __class__: TaggedImageSample\n"
        "field_map:\n  image: jpg\n  caption: txt\n  tag: json[label]\n",
    )
    want = first_json(ref_small_copy)
    batch = next(iter(energon_rs.get_loader(val(path, batch_size=4, nw=1), worker_type="thread")))
    assert type(batch) is TaggedImageSample
    assert batch.__key__ == [f"{i:08d}" for i in range(4)]
    # Tensors stacked, other fields as lists (the reference's default batch).
    assert np.asarray(batch.image).shape == (4, 3, 32, 32)
    assert batch.caption[0] == "cat and a large small"
    assert batch.tag[0] == want["label"] and isinstance(batch.tag, list)


def test_a_class_that_cannot_be_imported_names_the_module(ref_small_copy):
    path = with_dataset_yaml(
        ref_small_copy,
        "sample_type:\n  __module__: no_such_module\n  __class__: Nothing\n"
        "field_map:\n  caption: txt\n",
    )
    # When the dataset is built, as the reference imports it then.
    with pytest.raises(energon_rs.ConfigError, match="no_such_module.Nothing") as info:
        val(path, batch_size=None, nw=0)
    assert ".nv-meta" in str(info.value)
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_a_field_map_value_of_another_type_is_kept_as_it_is(ref_small_copy):
    """Megatron-LM's LLaVA recipe maps `answers: json[...]` to a string where VQASample declares
    a list: the reference stores the string, and so do we."""
    path = with_dataset_yaml(
        ref_small_copy,
        "sample_type:\n  __module__: megatron.energon\n  __class__: VQASample\n"
        "field_map:\n  image: jpg\n  context: txt\n  answers: txt\n",
    )
    samples = list(energon_rs.get_loader(val(path, batch_size=None, nw=0)))
    assert len(samples) == 200
    first = samples[0]
    assert type(first) is energon_rs.VQASample
    assert first.answers == "cat and a large small" and first.context == first.answers
    assert first.image.shape == (3, 32, 32)
    batch = next(iter(energon_rs.get_loader(val(path, batch_size=3, nw=0))))
    assert batch.answers[0] == "cat and a large small" and len(batch.answers) == 3


def test_a_user_class_with_a_sample_loader(ref_small_copy):
    """mimo's datasets name their own class and fill it with a `sample_loader`."""
    meta = ref_small_copy / ".nv-meta"
    (meta / "loader.py").write_text(
        "def sample_loader(raw):\n"
        "    return dict(caption=raw['txt'].upper())\n"
    )
    path = with_dataset_yaml(
        ref_small_copy,
        "sample_type:\n  __module__: user_samples\n  __class__: CaptionOnlySample\n"
        "sample_loader: loader.py:sample_loader\npart_filter: [txt]\n",
    )
    samples = list(energon_rs.get_loader(val(path, batch_size=None, nw=2), worker_type="thread"))
    assert len(samples) == 200
    assert all(type(s) is CaptionOnlySample and s.caption == s.caption.upper() for s in samples)
