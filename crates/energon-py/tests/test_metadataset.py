"""Metadatasets through the Python API: the reference's recorded blend orders key for key,
subflavors, cookers per dataset, validation, `load_dataset`, auxiliary file stores and joins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import energon_rs
from conftest import REF_SMALL, REPO, energon_cli

MIX_DATA = REPO / "crates" / "energon-mix" / "tests" / "data"
MDS = MIX_DATA / "mds"
TRACES = sorted(
    p.name for p in (MIX_DATA / "traces").glob("*.txt") if not p.name.startswith("join-")
)


@energon_rs.stateless
def cook_text(sample):
    """The cooker the traces were recorded with: a JSONL record as a `TextSample`."""
    payload = sample.get("json", sample.get("txt", ""))
    if isinstance(payload, (bytes, bytearray, memoryview)):
        payload = bytes(payload).decode("utf-8", "replace")
    if not isinstance(payload, str):
        payload = json.dumps(payload, sort_keys=True)
    return energon_rs.TextSample(**energon_rs.basic_sample_keys(sample), text=payload)


class TextEncoder(energon_rs.DefaultTaskEncoder):
    cookers = [energon_rs.Cooker(cook_text)]


def trace_settings(name):
    """The metadataset and loader settings of a recorded trace
    (`<mds>-ws<W>-r<R>-nw<N>-s<S>[-msps<M>].txt`)."""
    mds, *fields = name.removesuffix(".txt").split("-")
    res = {"mds": MDS / f"{mds}.yaml", "msps": None}
    for field in fields:
        digit = next(i for i, c in enumerate(field) if c.isdigit())
        res[field[:digit]] = int(field[digit:])
    return res


def keys_of(item):
    k = item["__key__"] if isinstance(item, dict) else item.__key__
    return list(k) if isinstance(k, list) else [k]


def take_keys(loader, n):
    res = []
    for item in loader:
        res.extend(keys_of(item))
        if len(res) >= n:
            break
    return res[:n]


def test_the_blend_and_epochized_recordings_are_all_there():
    names = {trace_settings(n)["mds"].stem for n in TRACES}
    assert {"blend", "epochized"} <= names
    assert len([n for n in TRACES if n.startswith(("blend-", "epochized-"))]) == 8


@pytest.mark.parametrize("name", TRACES)
def test_recorded_metadataset_order(name):
    """The reference's training order (batch size 1, no shuffle buffer), key for key."""
    s = trace_settings(name)
    want = (MIX_DATA / "traces" / name).read_text().split()
    wc = energon_rs.WorkerConfig(
        rank=s["r"], world_size=s["ws"], num_workers=s["nw"], seed_offset=s["s"]
    )
    ds = energon_rs.get_train_dataset(
        s["mds"],
        worker_config=wc,
        batch_size=1,
        shuffle_buffer_size=None,
        max_samples_per_sequence=s["msps"],
        task_encoder=TextEncoder(),
    )
    assert ds.is_metadataset
    loader = energon_rs.get_loader(ds)
    try:
        assert take_keys(loader, len(want)) == want
    finally:
        loader.close()


def test_samples_carry_their_dataset_subflavors_and_blend_restore_keys():
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_train_dataset(
        MDS / "blend.yaml",
        worker_config=wc,
        batch_size=None,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=TextEncoder(),
    )
    assert ds.sample_type is None  # captioning samples and cooked text samples
    seen = {}
    for n, sample in enumerate(energon_rs.get_loader(ds)):
        key = sample.__restore_key__
        # The loader's key, also on the samples the cooker made: the loader's wrapper (the
        # global worker, the worker's item index), the encode stage, the blend and the dataset it
        # came from, ..., the sample index.
        assert key[:3] == ("SimpleSavableDatasetWrapper", 0, n), key
        key = key[3:]
        assert (key[0], key[2], key[-2]) == ("MapDataset", "BlendDataset", "Webdataset"), key
        seen.setdefault(key[3], (type(sample).__name__, sample.__subflavors__))
        if len(seen) == 3:
            break
    # blend.yaml: the fixture with subflavors {source: fixture}, its JSONL file, the fixture again
    # (a subset) without subflavors; a dataset's samples carry a dict, empty when none is set.
    assert seen == {
        0: ("CaptioningSample", {"source": "fixture"}),
        1: ("TextSample", {}),
        2: ("CaptioningSample", {}),
    }


def test_cookers_are_chosen_per_dataset_by_subflavors(tmp_path):
    mds = tmp_path / "mds.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    blend:\n"
        f"      - {{weight: 1, path: {REF_SMALL / 'jsonl' / 'data.jsonl'}, subflavors: {{lang: a}}}}\n"
        f"      - {{weight: 1, path: {REF_SMALL / 'jsonl' / 'data.jsonl'}, subflavors: {{lang: b}}}}\n"
    )

    @energon_rs.stateless
    def cook_a(sample):
        return energon_rs.TextSample(**energon_rs.basic_sample_keys(sample), text="a")

    @energon_rs.stateless
    def cook_b(sample):
        return energon_rs.TextSample(**energon_rs.basic_sample_keys(sample), text="b")

    class Encoder(energon_rs.DefaultTaskEncoder):
        cookers = [
            energon_rs.Cooker(cook_a, has_subflavors={"lang": "a"}),
            energon_rs.Cooker(cook_b, has_subflavors={"lang": "b"}),
        ]

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_train_dataset(
        mds, worker_config=wc, batch_size=None, shuffle_buffer_size=None,
        max_samples_per_sequence=None, task_encoder=Encoder(),
    )
    got = set()
    for i, sample in enumerate(energon_rs.get_loader(ds)):
        got.add((sample.__subflavors__["lang"], sample.text))
        if i == 60:
            break
    assert got == {("a", "a"), ("b", "b")}

    class OnlyA(energon_rs.DefaultTaskEncoder):
        cookers = [energon_rs.Cooker(cook_a, has_subflavors={"lang": "a"})]

    with pytest.raises(ValueError, match="no cooker matches"):
        energon_rs.get_train_dataset(
            mds, worker_config=wc, batch_size=None, shuffle_buffer_size=None,
            max_samples_per_sequence=None, task_encoder=OnlyA(),
        )


def test_validation_concatenates_the_datasets_in_order():
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_val_dataset(
        MDS / "blend.yaml", split_part="train", worker_config=wc, batch_size=4,
        task_encoder=TextEncoder(),
    )
    keys = take_keys(energon_rs.get_loader(ds), 10_000)
    # The fixture's train split in order, every JSONL record, then the fixture's middle half.
    train = [f"{i:08d}" for i in range(200)]
    n_jsonl = len((REF_SMALL / "jsonl" / "data.jsonl").read_text().splitlines())
    # Batches never mix the datasets' sample types here: each length is a multiple of 4.
    assert keys == train + [str(i) for i in range(n_jsonl)] + train[50:150]
    assert len(ds) == (200 + n_jsonl + 100) // 4


def test_wrong_settings_are_reported_when_the_dataset_is_built(tmp_path):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    with pytest.raises(ValueError, match="metadataset"):
        energon_rs.get_train_dataset(
            MDS / "blend.yaml", worker_config=wc, batch_size=1, shuffle_buffer_size=None,
            max_samples_per_sequence=None, split_config="other.yaml",
        )
    with pytest.raises(energon_rs.ConfigError):
        energon_rs.get_train_dataset(
            MDS / "blend.yaml", split_part="nope", worker_config=wc, batch_size=1,
            shuffle_buffer_size=None, max_samples_per_sequence=None,
        )
    missing = tmp_path / "missing.yaml"
    missing.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        f"    path: {tmp_path / 'nowhere'}\n"
    )
    with pytest.raises(energon_rs.EnergonError, match="nowhere"):
        energon_rs.get_train_dataset(
            missing, worker_config=wc, batch_size=1, shuffle_buffer_size=None,
            max_samples_per_sequence=None,
        )


def test_load_dataset_resolves_a_metadataset_split():
    blend = energon_rs.load_dataset(MDS / "blend.yaml").get_datasets(
        training=True, split_part="train"
    )
    assert blend.blend_mode == "dataset_weight"
    assert [d.weight for d in blend.datasets] == [2 / 4.5, 1 / 4.5, 1.5 / 4.5]
    assert [d.dataset.kind for d in blend.datasets] == ["webdataset", "jsonl", "webdataset"]
    assert [d.dataset.subflavors for d in blend.datasets] == [{"source": "fixture"}, None, None]
    assert Path(blend.datasets[0].dataset.path).resolve() == REF_SMALL.resolve()
    reader = blend.datasets[0].dataset.reader(image_decode=None)
    assert reader.sample_type == "CaptioningSample" and len(reader) == 200

    epochized = energon_rs.load_dataset(MDS / "epochized.yaml").get_datasets(
        training=True, split_part="train", shuffle_over_epochs_multiplier=None
    )
    assert epochized.blend_mode == "sample_repetitions"
    assert [d.repetitions for d in epochized.datasets] == [0.5, 2, 1.5]
    assert [d.dataset.shuffle_over_epochs for d in epochized.datasets] == [None] * 3

    single = energon_rs.load_dataset(REF_SMALL).get_datasets(training=True, split_part="train")
    assert single.blend_mode == "none" and len(single.datasets) == 1
    with pytest.raises(ValueError, match="not a prepared dataset"):
        energon_rs.load_dataset(REPO / "crates")


# --- joins (the join index is built by `energon prepare` on the metadataset) -----------------


def join_yaml(tmp_path, ref_copy, joiner):
    mds = tmp_path / "join.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        f"    join:\n      - path: {ref_copy}\n      - path: {ref_copy}\n"
        f"        subflavors: {{side: second}}\n    joiner:\n{joiner}"
    )
    energon_cli("prepare", mds)
    return mds


def test_joins_combine_the_samples_with_the_joiner(tmp_path, ref_small_copy):
    mds = join_yaml(
        tmp_path,
        ref_small_copy,
        "      __module__: megatron.energon\n      __class__: CaptioningSample\n",
    )
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_val_dataset(mds, split_part="train", worker_config=wc, batch_size=None)
    samples = list(energon_rs.get_loader(ds))
    assert sorted(s.__key__ for s in samples) == [f"{i:08d}" for i in range(200)]
    first = samples[0]
    assert isinstance(first, energon_rs.CaptioningSample)
    # Marked as a joined sample, as the reference marks it.
    assert first.__restore_key__[-3:] == ("JoinedWebdatasetFactory", "Webdataset", 0)
    # from_joined: the primary's key and subflavors, the sources of both datasets.
    assert first.__subflavors__ == {}
    # (The primary's sources twice, as the reference lists them; only the field map's parts.)
    assert [s.shard_name for s in first.__sources__] == [first.__sources__[0].shard_name] * 3
    assert first.__sources__[0].file_names == ("00000000.jpg", "00000000.txt")
    assert first.image.shape == (3, 32, 32)


def test_joins_call_a_joiner_function(tmp_path, ref_small_copy):
    mds = join_yaml(
        tmp_path, ref_small_copy, "      __module__: joiners\n      __function__: caption_pair\n"
    )
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = energon_rs.get_val_dataset(mds, split_part="train", worker_config=wc, batch_size=None)
    first = next(iter(energon_rs.get_loader(ds)))
    assert first == {
        "__key__": "00000000",
        "captions": [first["captions"][0]] * 2,
        "subflavors": [{}, {"side": "second"}],
        "__restore_key__": (
            "SimpleSavableDatasetWrapper", 0, 0, "MapDataset", 0, "MapDataset", 0,
            "JoinedWebdatasetFactory", "Webdataset", 0,
        ),
    }


def test_a_join_restores_its_marked_keys(tmp_path, ref_small_copy):
    """Buffered joined samples are made again from their keys (with the join's mark)."""
    mds = join_yaml(
        tmp_path, ref_small_copy, "      __module__: joiners\n      __function__: caption_pair\n"
    )
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)

    def loader():
        ds = energon_rs.get_train_dataset(
            mds, worker_config=wc, batch_size=None, shuffle_buffer_size=20,
            max_samples_per_sequence=10,
        )
        return energon_rs.get_savable_loader(ds, worker_type="thread")

    first = loader()
    it = iter(first)
    [next(it) for _ in range(15)]
    state = first.save_state_rank()
    want = [next(it)["__key__"] for _ in range(30)]
    first.close()
    restored = loader()
    restored.restore_state_rank(state)
    it = iter(restored)
    assert [next(it)["__key__"] for _ in range(30)] == want
