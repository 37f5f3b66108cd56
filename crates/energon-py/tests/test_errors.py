"""Rust errors as Python exceptions: the class hierarchy and the messages."""

from __future__ import annotations

import pytest

import energon_rs


def test_hierarchy():
    for name in ("CorruptDatasetError", "IncompatibleFormatError", "CheckpointError", "LoaderError"):
        assert issubclass(getattr(energon_rs, name), energon_rs.EnergonError)
    assert issubclass(energon_rs.MissingFileError, FileNotFoundError)
    assert issubclass(energon_rs.MissingFileError, energon_rs.EnergonError)
    assert issubclass(energon_rs.ConfigError, ValueError)
    assert issubclass(energon_rs.EnergonIOError, OSError)


def train(path, wc=None, **kwargs):
    wc = wc or energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=0)
    args = dict(batch_size=None, shuffle_buffer_size=None, max_samples_per_sequence=None)
    args.update(kwargs)
    return energon_rs.get_train_dataset(path, worker_config=wc, **args)


def test_a_missing_dataset_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        train(tmp_path / "nope")
    with pytest.raises(energon_rs.EnergonError):
        energon_rs.load_dataset(tmp_path / "nope").reader()


def test_a_missing_shard_is_file_not_found(ref_small_copy):
    (ref_small_copy / "shards" / "data-000002.tar").unlink()
    with pytest.raises(FileNotFoundError, match="data-000002.tar"):
        reader = energon_rs.load_dataset(ref_small_copy).reader("train")
        reader[120]


def test_bad_settings_are_value_errors(ref_small, tmp_path):
    with pytest.raises(ValueError, match="split part"):
        train(ref_small, split_part="nope")
    with pytest.raises(ValueError, match="shuffle_over_epochs"):
        train(ref_small, shuffle_over_epochs=0)
    with pytest.raises(ValueError, match="torchrgb9"):
        train(ref_small, image_decode="torchrgb9")
    (tmp_path / ".nv-meta").mkdir()
    with pytest.raises(ValueError, match="energon prepare"):
        train(tmp_path)
    with pytest.raises(TypeError, match="bogus"):
        train(ref_small, bogus=1)


def test_a_damaged_shard_is_corrupt_with_its_offset(ref_small_copy):
    shard = ref_small_copy / "shards" / "data-000001.tar"
    data = bytearray(shard.read_bytes())
    # Overwrite the first header of the shard's third sample with garbage.
    import struct

    idx = (ref_small_copy / "shards" / "data-000001.tar.idx").read_bytes()
    offset = struct.unpack_from("<Q", idx, 8 * 2)[0]
    data[offset : offset + 512] = b"\xff" * 512
    shard.write_bytes(bytes(data))
    reader = energon_rs.load_dataset(ref_small_copy).reader("train")
    assert reader[51].__key__ == "00000051"
    with pytest.raises(energon_rs.CorruptDatasetError, match=f"offset {offset}"):
        reader[52]


def test_a_loader_error_surfaces_from_the_workers(ref_small_copy):
    jpg_offset = None
    shard = ref_small_copy / "shards" / "data-000000.tar"
    import tarfile

    with tarfile.open(shard) as tar:
        for m in tar.getmembers():
            if m.name.endswith(".jpg"):
                jpg_offset = m.offset_data
                break
    data = bytearray(shard.read_bytes())
    data[jpg_offset : jpg_offset + 64] = b"\x00" * 64
    shard.write_bytes(bytes(data))
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_val_dataset(ref_small_copy, split_part="train", worker_config=wc, batch_size=2)
    with pytest.raises(energon_rs.CorruptDatasetError, match="cannot decode part"):
        for _ in energon_rs.get_loader(ds):
            pass
