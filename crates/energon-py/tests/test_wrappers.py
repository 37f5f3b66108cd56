"""`get_dataset_from_config` and the wrapper datasets (`MapDataset`, `BatchDataset`),
`AugmentTaskEncoder`, `traverse_metadataset`, `generic_concat`, and datasets built separately
combined (`BlendDataset`, `ConcatDataset`, `MixBatchDataset`)."""

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
    ConcatDataset,
    DatasetBlendMode,
    MapDataset,
    MixBatchDataset,
    SavableDataset,
    concat_pad,
    generic_concat,
    get_dataset_from_config,
    homogeneous_concat_mix,
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
    with pytest.raises(energon_rs.ConfigError, match="datasets that batch"):
        MixBatchDataset((ds, 1.0), (ds, 2.0), batch_size=2, worker_config=WC)
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
    assert refs[0].subflavors == {"source": "fixture"} and refs[0].aux == {}
    assert all(r.split_part == "train" for r in refs)
    listed = energon_rs.load_dataset(MDS / "blend.yaml").get_datasets(training=True, split_part="train")
    assert listed.blend_mode == DatasetBlendMode.DATASET_WEIGHT
    assert [str(r.path) for r in refs] == [str(d.dataset.paths[0]) for d in listed.datasets]


def test_traverse_metadataset_lists_missing_leaves(tmp_path):
    """Traversal does not open the datasets: a missing one (and its aux sources) is listed."""
    mds = tmp_path / "missing.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    path: missing_ds\n    aux:\n      labels: missing_aux\n"
        "      media: filesystem://media\n"
    )
    (ref,) = traverse_metadataset(mds, split_part="train")
    assert ref.path == tmp_path / "missing_ds" and ref.split_part == "train"
    assert ref.aux == {"labels": tmp_path / "missing_aux", "media": tmp_path / "media"}
    assert ref.subflavors == {}


def test_generic_concat():
    @dataclasses.dataclass
    class B:
        x: np.ndarray
        names: list
        kind: str

    out = generic_concat([B(np.zeros((2, 3)), ["a", "b"], "k"), B(np.ones((1, 4)), ["c"], "l")])
    # Arrays along the first dimension, zero-padded to the widest; other values listed.
    assert out.x.shape == (3, 4) and out.x[2].tolist() == [1, 1, 1, 1]
    assert out.x[:2].sum() == 0
    assert out.names == [["a", "b"], ["c"]] and out.kind == ["k", "l"]
    assert generic_concat([{"n": 1}, {"n": 2}]) == {"n": [1, 2]}
    assert concat_pad([np.ones((1, 2)), np.ones((2, 1))]).tolist() == [[1, 1], [1, 0], [1, 0]]
    with pytest.raises(TypeError, match="one type"):
        homogeneous_concat_mix([{"n": 1}, B(np.zeros(1), [], "")])


def _train(task_encoder, wc=WC):
    return energon_rs.get_train_dataset(
        REF_SMALL, worker_config=wc, batch_size=1, task_encoder=task_encoder,
        shuffle_buffer_size=None, max_samples_per_sequence=None,
    )


@pytest.mark.parametrize("nw", [0, 2])
def test_mix_batch_dataset_groups_blended_batches(nw):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=nw)
    a, b = _train(_Tagged("a"), wc), _train(_Tagged("b"), wc)
    # The default mix: the list of the blended batches.
    mixed = MixBatchDataset((a, 2), (b, 8), batch_size=10, worker_config=wc)
    loader = energon_rs.get_loader(mixed)
    items = [x for _, x in zip(range(100), loader)]
    assert all(len(x) == 10 for x in items)
    tags = [batch["tag"] for x in items for batch in x]
    assert 100 <= tags.count("a") <= 300, tags.count("a")
    # Concatenated batches of one type, each made again from its restore key.
    concat = MixBatchDataset((a, 2), (b, 8), batch_size=10, batch_mix_fn=homogeneous_concat_mix,
                             worker_config=wc)
    loader = energon_rs.get_loader(concat)
    items = [x for _, x in zip(range(30), loader)]
    assert [x["tag"] for x in items[:10]] == [[batch["tag"] for batch in x] for x in mixed_first(mixed)]
    for x in items[::7]:
        assert len(x["keys"]) == 10 and x["__restore_key__"][3] == "BatchDataset"
        assert loader.restore_sample(x["__restore_key__"]) == x


def mixed_first(mixed):
    return [x for _, x in zip(range(10), energon_rs.get_loader(mixed))]


def test_mix_batch_functions_may_skip_and_generate():
    a, b = _train(_Tagged("a")), _train(_Tagged("b"))

    def b_first(batches):
        if batches[0]["tag"] != "b":
            raise energon_rs.SkipSample()
        return [x["tag"] for x in batches]

    skipping = MixBatchDataset((a, 1), (b, 1), batch_size=4, batch_mix_fn=b_first, worker_config=WC)
    assert all(x[0] == "b" for _, x in zip(range(20), energon_rs.get_loader(skipping)))

    def halves(batches):
        yield [x["tag"] for x in batches[:2]]
        yield [x["tag"] for x in batches[2:]]

    generating = MixBatchDataset((a, 1), (b, 1), batch_size=4, batch_mix_fn=halves, worker_config=WC)
    loader = energon_rs.get_loader(generating)
    items = [x for _, x in zip(range(20), loader)]
    assert all(len(x) == 2 for x in items)
    plain = MixBatchDataset((a, 1), (b, 1), batch_size=4, batch_mix_fn=lambda bs: [x["tag"] for x in bs],
                            worker_config=WC)
    whole = [x for _, x in zip(range(10), energon_rs.get_loader(plain))]
    assert [t for x in items for t in x] == [t for x in whole for t in x]


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


def _val(batch_size, task_encoder=None, wc=WC):
    return energon_rs.get_val_dataset(
        REF_SMALL, split_part="train", worker_config=wc, batch_size=batch_size,
        task_encoder=task_encoder,
    )


class _Tagged(energon_rs.TaskEncoder):
    def __init__(self, tag):
        self.tag = tag

    def encode_batch(self, batch):
        return {"tag": self.tag, "keys": list(batch.__key__), "__restore_key__": None}


@pytest.mark.parametrize("nw", [0, 2])
def test_separately_built_datasets_blend_and_concatenate(nw):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=nw)
    a, b = _val(4, _Tagged("a"), wc), _val(10, _Tagged("b"), wc)
    # One after the other on each worker: all of a worker's first dataset, then its second.
    concat = list(energon_rs.get_loader(ConcatDataset(a, b, worker_config=wc)))
    assert len(concat) == 50 + 20 == len(ConcatDataset(a, b, worker_config=wc))
    if nw == 0:
        assert [x["tag"] for x in concat] == ["a"] * 50 + ["b"] * 20
    # Blended by weight, each dataset with its own task encoder and batch size: every sample of
    # both one pass, in batches of 4 ("a") and 10 ("b"), the heavier one drawn more often early.
    blend = BlendDataset((a, 1.0), (b, 3.0), worker_config=wc)
    loader = energon_rs.get_loader(blend)
    items = list(loader)
    for tag, size in [("a", 4), ("b", 10)]:
        keys = [k for x in items if x["tag"] == tag for k in x["keys"]]
        assert sorted(keys) == [f"{i:08d}" for i in range(200)]
        assert all(len(x["keys"]) == size for x in items if x["tag"] == tag)
    first = [x["tag"] for x in items[:10]]
    assert first.count("b") > first.count("a"), first
    # The same order every time; any item made again from its restore key.
    assert [x["keys"] for x in energon_rs.get_loader(blend)] == [x["keys"] for x in items]
    wrapper = "SimpleSavableDatasetWrapper"
    for x in items[::7]:
        # The loader's wrapper, the blend and the child, then the child's own stages.
        assert x["__restore_key__"][0] == wrapper and x["__restore_key__"][3] == "BlendDataset"
        assert loader.restore_sample(x["__restore_key__"]) == x


def test_combined_datasets_need_one_worker_config_and_batching():
    with pytest.raises(energon_rs.ConfigError, match="worker_config"):
        BlendDataset((_val(4), 1.0), (_val(4, wc=energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)), 1.0))
    with pytest.raises(energon_rs.ConfigError, match="all batch"):
        ConcatDataset(_val(4), _val(None))
