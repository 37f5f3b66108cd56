"""`get_dataset_from_config` and the wrapper datasets (`MapDataset`, `BatchDataset`),
`AugmentTaskEncoder`, `traverse_metadataset`, `generic_concat`."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import energon_rs
from conftest import REF_SMALL, REPO
from energon_rs.wrappers import (
    AugmentTaskEncoder,
    BatchDataset,
    BlendDataset,
    DatasetBlendMode,
    MapDataset,
    SavableDataset,
    generic_concat,
    get_dataset_from_config,
    traverse_metadataset,
)

MDS = REPO / "crates" / "energon-mix" / "tests" / "data" / "mds"
WC = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)


def _val_keys(ds):
    return [s.__key__ for s in energon_rs.get_loader(ds)]


def test_get_dataset_from_config_builds_the_plain_split():
    factory = get_dataset_from_config(
        REF_SMALL, split_part="train", training=False, worker_config=WC,
        sample_type=energon_rs.CaptioningSample,
    )
    ds = factory.build()
    assert isinstance(ds, SavableDataset) and len(ds) == 200 == len(factory)
    keys = _val_keys(ds)
    assert keys == sorted(keys) and len(set(keys)) == 200
    with pytest.raises(energon_rs.ConfigError, match="not TextSample"):
        get_dataset_from_config(REF_SMALL, training=False, worker_config=WC, sample_type=energon_rs.TextSample)


def test_map_then_batch_then_map():
    ds = get_dataset_from_config(REF_SMALL, training=False, worker_config=WC).build()
    mapped = MapDataset(ds, lambda s: dataclasses.replace(s, caption=s.caption.upper()), worker_config=WC)
    batched = BatchDataset(mapped, batch_size=64, batcher=lambda samples: [s.caption for s in samples], worker_config=WC)
    counted = MapDataset(batched, lambda captions: len(captions), worker_config=WC)
    assert list(energon_rs.get_loader(counted)) == [64, 64, 64, 8]
    captions = [c for b in energon_rs.get_loader(batched) for c in b]
    assert len(captions) == 200 and all(c == c.upper() for c in captions)
    with pytest.raises(NotImplementedError, match="batches of batches"):
        BatchDataset(batched, batch_size=2, batcher=list, worker_config=WC)
    with pytest.raises(NotImplementedError, match="metadataset"):
        BlendDataset((ds, 1.0), (ds, 2.0), worker_config=WC)
    with pytest.raises(TypeError, match="energon_rs dataset"):
        MapDataset([1, 2], lambda x: x)  # type: ignore[arg-type]


def test_augment_task_encoder_delegates_to_the_inner_encoder():
    class Inner(energon_rs.DefaultTaskEncoder):
        def encode_sample(self, sample):
            return sample.__key__

    class Augment(AugmentTaskEncoder):
        def encode_sample(self, sample):
            return "aug-" + super().encode_sample(sample)

    ds = energon_rs.get_val_dataset(REF_SMALL, split_part="train", worker_config=WC, batch_size=None,
                                    task_encoder=Augment(Inner()))
    items = list(energon_rs.get_loader(ds))
    assert len(items) == 200 and all(i.startswith("aug-") for i in items)


def test_traverse_metadataset_lists_the_leaves():
    refs = traverse_metadataset(MDS / "blend.yaml", split_part="train")
    assert [r.path.name for r in refs] == [REF_SMALL.name, "data.jsonl", REF_SMALL.name]
    assert [r.weight for r in refs] == [2 / 4.5, 1 / 4.5, 1.5 / 4.5]
    assert refs[0].subflavors == {"source": "fixture"} and refs[0].aux == {}
    assert all(r.split_part == "train" for r in refs)
    listed = energon_rs.load_dataset(MDS / "blend.yaml").get_datasets(training=True, split_part="train")
    assert listed.blend_mode == DatasetBlendMode.DATASET_WEIGHT
    assert [str(r.path) for r in refs] == [str(d.dataset.paths[0]) for d in listed.datasets]


def test_generic_concat():
    @dataclasses.dataclass
    class B:
        x: np.ndarray
        names: list
        kind: str

    out = generic_concat([B(np.zeros((2, 3)), ["a", "b"], "k"), B(np.ones((1, 3)), ["c"], "k")])
    assert out.x.shape == (3, 3) and out.names == ["a", "b", "c"] and out.kind == "k"
    with pytest.raises(ValueError, match="differing"):
        generic_concat([1, 2])


def test_listed_datasets_carry_their_dataset_yaml_subflavors(ref_small_copy, tmp_path):
    yaml = ref_small_copy / ".nv-meta" / "dataset.yaml"
    yaml.write_text(yaml.read_text() + "subflavors:\n  origin: yaml\n  number: 1\n")
    mds = tmp_path / "mds.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"
        f"      - {{weight: 1, path: {ref_small_copy}, subflavors: {{number: 2}}}}\n"
        f"      - {{weight: 1, path: {ref_small_copy / 'jsonl' / 'data.jsonl'}}}\n"
    )
    listed = energon_rs.load_dataset(mds).get_datasets(training=True, split_part="train")
    assert [d.dataset.subflavors for d in listed.datasets] == [{"origin": "yaml", "number": 2}, None]
    assert "subflavors" not in energon_rs._native.dataset_config(str(REF_SMALL))
    assert energon_rs._native.dataset_config(str(ref_small_copy))["subflavors"] == {"origin": "yaml", "number": 1}
