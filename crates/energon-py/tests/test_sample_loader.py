"""Datasets with a Python `sample_loader` in their dataset config."""

from __future__ import annotations

import pytest

import energon_rs
from energon_rs.wrappers import get_dataset_from_config

WC = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)


@pytest.fixture
def with_loader(ref_small_copy):
    meta = ref_small_copy / ".nv-meta"
    (meta / "loader.py").write_text(
        "def sample_loader(raw):\n"
        "    assert 'json' not in raw\n"
        "    return dict(__key__='k' + raw['__key__'], image=raw['jpg'], caption=raw['txt'].upper())\n"
        "def part_filter(part):\n"
        "    return part in ('jpg', 'txt')\n"
    )
    (meta / "dataset_loader.yaml").write_text(
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\n"
        "sample_loader: loader.py:sample_loader\npart_filter: loader.py:part_filter\n"
    )
    (meta / "dataset_list.yaml").write_text(
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\n"
        "sample_loader: loader.py:sample_loader\npart_filter: [jpg, txt]\n"
    )
    return ref_small_copy


@pytest.mark.parametrize("config", ["dataset_loader.yaml", "dataset_list.yaml"])
def test_samples_are_made_by_the_loader_function(with_loader, config):
    ds = get_dataset_from_config(with_loader, split_part="train", training=False, worker_config=WC,
                                 dataset_config=config, sample_type=energon_rs.CaptioningSample).build()
    samples = list(energon_rs.get_loader(ds))
    assert len(samples) == 200
    assert all(isinstance(s, energon_rs.CaptioningSample) for s in samples)
    assert all(s.__key__.startswith("k") and s.caption == s.caption.upper() for s in samples)
    assert samples[0].image.ndim == 3


def test_a_missing_loader_function_is_a_config_error(with_loader):
    meta = with_loader / ".nv-meta"
    (meta / "dataset_bad.yaml").write_text(
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\n"
        "sample_loader: loader.py:nope\npart_filter: [jpg]\n"
    )
    with pytest.raises(energon_rs.ConfigError, match="no function 'nope'"):
        ds = energon_rs.get_val_dataset(with_loader, split_part="train", worker_config=WC,
                                        batch_size=None, dataset_config="dataset_bad.yaml")
        next(iter(energon_rs.get_loader(ds)))


def test_a_metadataset_leaf_with_a_loader_function_is_made_by_it(with_loader, tmp_path):
    meta = tmp_path / "meta.yaml"
    meta.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        f"    path: {with_loader}\n    dataset_config: dataset_loader.yaml\n"
    )
    ds = energon_rs.get_val_dataset(meta, split_part="train", worker_config=WC, batch_size=None)
    samples = list(energon_rs.get_loader(ds))
    assert len(samples) == 200
    assert all(isinstance(s, energon_rs.CaptioningSample) for s in samples)
    assert all(s.__key__.startswith("k") and s.caption == s.caption.upper() for s in samples)
