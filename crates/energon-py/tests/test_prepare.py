"""Preparing datasets from Python: `BaseWebdatasetFactory.prepare_dataset`,
`CrudeJsonlDatasetFactory.prepare_dataset`, `expand_braces`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import energon_rs
from energon_rs.prepare import (
    INFO_JSON_FILENAME,
    MAIN_FOLDER_NAME,
    BaseWebdatasetFactory,
    CrudeJsonlDatasetFactory,
    expand_braces,
)


def _shards_only(src: Path, dst: Path) -> Path:
    """The fixture's tar shards without any index, in a new folder."""
    (dst / "shards").mkdir(parents=True)
    for tar in sorted((src / "shards").glob("*.tar")):
        shutil.copyfile(tar, dst / "shards" / tar.name)
    return dst


def test_expand_braces():
    assert expand_braces("a-{0..2}.tar") == ["a-0.tar", "a-1.tar", "a-2.tar"]
    assert expand_braces("d-{008..010}.tar") == ["d-008.tar", "d-009.tar", "d-010.tar"]
    assert expand_braces("{x,y}/{1..2}") == ["x/1", "x/2", "y/1", "y/2"]
    with pytest.raises(ValueError, match="empty"):
        expand_braces("{3..1}")


def test_prepare_dataset_indexes_the_listed_shards(ref_small, tmp_path):
    root = _shards_only(ref_small, tmp_path / "ds")
    parts, counts = BaseWebdatasetFactory.prepare_dataset(
        root, ["shards/data-{000000..000002}.tar"], split_parts_ratio=[("train", 1.0)], shuffle_seed=None
    )
    assert [name for name, _ in counts] == [f"shards/data-00000{i}.tar" for i in range(3)]
    assert all(n > 0 for _, n in counts)
    assert {"jpg", "txt"} <= parts
    info = json.loads((root / MAIN_FOLDER_NAME / INFO_JSON_FILENAME).read_text())
    assert sorted(info["shard_counts"]) == [name for name, _ in counts]
    assert (root / "shards" / "data-000000.tar.idx").is_file()
    assert not (root / "shards" / "data-000003.tar.idx").exists()
    (root / MAIN_FOLDER_NAME / "dataset.yaml").write_text(
        (ref_small / MAIN_FOLDER_NAME / "dataset.yaml").read_text()
    )
    reader = energon_rs.load_dataset(root).reader("train")
    assert len(reader) == sum(n for _, n in counts)


def test_prepare_dataset_fix_duplicates(ref_small, tmp_path):
    # The same shard twice: every key repeats.
    root = tmp_path / "dup"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    shard = ref_small / "shards" / "data-000000.tar"
    shutil.copyfile(shard, root / "a" / "s.tar")
    shutil.copyfile(shard, root / "b" / "s.tar")
    with pytest.raises(energon_rs.EnergonError, match="fix-duplicates"):
        BaseWebdatasetFactory.prepare_dataset(root, ["a/s.tar", "b/s.tar"], split_parts_ratio=[("train", 1.0)])
    _, counts = BaseWebdatasetFactory.prepare_dataset(
        root, ["a/s.tar", "b/s.tar"], split_parts_ratio=[("train", 1.0)], fix_duplicates=True
    )
    assert counts == [("a/s.tar", 50), ("b/s.tar", 50)]
    (root / MAIN_FOLDER_NAME / "dataset.yaml").write_text(
        (ref_small / MAIN_FOLDER_NAME / "dataset.yaml").read_text()
    )
    reader = energon_rs.load_dataset(root).reader("train")
    keys = sorted(reader[i].__key__ for i in range(len(reader)))
    assert keys[0] == "a/s.tar/00000000" and keys[-1] == "b/s.tar/00000049"


def test_prepare_dataset_ratio_and_patterns(ref_small, tmp_path):
    root = _shards_only(ref_small, tmp_path / "ds")
    BaseWebdatasetFactory.prepare_dataset(
        root, ["shards/data-{000000..000003}.tar"], split_parts_patterns=[("train", "0000[01]"), ("val", "0000[23]")]
    )
    split = (root / MAIN_FOLDER_NAME / "split.yaml").read_text()
    assert "train" in split and "val" in split
    with pytest.raises(energon_rs.ConfigError, match="train, val or test"):
        BaseWebdatasetFactory.prepare_dataset(root, ["shards/data-000000.tar"], split_parts_ratio=[("dev", 1.0)])
    with pytest.raises(energon_rs.MissingFileError, match="data-000009"):
        BaseWebdatasetFactory.prepare_dataset(root, ["shards/data-000009.tar"])
    with pytest.raises(ValueError, match="shuffle_seed"):
        BaseWebdatasetFactory.prepare_dataset(root, ["shards/data-000000.tar"], shuffle_seed=7)


def test_prepare_dataset_of_a_file_is_a_typed_error(tmp_path):
    (tmp_path / "x.tar").write_bytes(b"")
    with pytest.raises(energon_rs.EnergonError):
        BaseWebdatasetFactory.prepare_dataset(tmp_path / "x.tar", [])


def test_prepare_jsonl(ref_small, tmp_path):
    path = tmp_path / "data.jsonl"
    shutil.copyfile(ref_small / "jsonl" / "data.jsonl", path)
    n = CrudeJsonlDatasetFactory.prepare_dataset(path)
    assert n == len([line for line in path.read_text().splitlines() if line.strip()])
    assert path.with_suffix(".jsonl.idx").read_bytes() == (ref_small / "jsonl" / "data.jsonl.idx").read_bytes()


def test_media_metadata_of_a_folder_and_of_a_prepared_dataset(ref_small, tmp_path):
    from energon_rs.prepare import MediaFilterConfig, MediaFilterStrategy, prepare_filesystem_dataset

    folder = tmp_path / "media"
    folder.mkdir()
    jpg = energon_rs.WebdatasetFileStore(ref_small)["00000000.jpg"][0]
    (folder / "a.jpg").write_bytes(bytes(jpg))
    (folder / "notes.txt").write_text("hello")
    n = prepare_filesystem_dataset(folder, MediaFilterConfig(strategy=MediaFilterStrategy.EXTENSION), progress=False)
    assert n == 1
    meta = energon_rs.SystemFileStore(folder).get_media_metadata("a.jpg")
    assert isinstance(meta, energon_rs.ImageMetadata) and meta.width > 0
    with pytest.raises(KeyError):
        energon_rs.SystemFileStore(folder).get_media_metadata("notes.txt")
    with pytest.raises(energon_rs.ConfigError):
        prepare_filesystem_dataset(folder, MediaFilterConfig(strategy=MediaFilterStrategy.GLOB))

    root = _shards_only(ref_small, tmp_path / "ds")
    BaseWebdatasetFactory.prepare_dataset(
        root, ["shards/data-{000000..000003}.tar"], split_parts_ratio=[("train", 1.0)],
        media_filter=MediaFilterConfig(strategy=MediaFilterStrategy.HEADER),
    )
    store = energon_rs.WebdatasetFileStore(root)
    assert store.get_media_metadata("00000001.jpg").height == meta.height


def test_a_shard_without_its_end_of_archive_marker_is_a_warning(ref_small, tmp_path):
    """Cut at a member boundary, a shard loses samples silently to every tar reader: prepare
    indexes what is there, as the reference does, and says so."""
    import tarfile

    root = _shards_only(ref_small, tmp_path / "ds")
    shard = root / "shards" / "data-000001.tar"
    with tarfile.open(shard) as tar:
        members = tar.getmembers()
    # Cut where a sample starts: the first member of the key of the middle member.
    key = members[len(members) // 2].name.split(".")[0]
    cut = min(m.offset for m in members if m.name.split(".")[0] == key)
    shard.write_bytes(shard.read_bytes()[:cut])
    with pytest.warns(RuntimeWarning, match="data-000001.tar: the shard has no end-of-archive marker"):
        BaseWebdatasetFactory.prepare_dataset(
            root, ["shards/data-{000000..000003}.tar"], split_parts_ratio=[("train", 1.0)],
            shuffle_seed=None,
        )
