"""Rust errors as Python exceptions: the class hierarchy and the messages."""

from __future__ import annotations

import pytest

import energon_rs
from conftest import energon_cli


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


def corrupt_first_jpeg(dataset):
    """Zeroes the start of sample 00000000's JPEG (its tar structure stays intact)."""
    import tarfile

    shard = dataset / "shards" / "data-000000.tar"
    with tarfile.open(shard) as tar:
        offset = next(m.offset_data for m in tar.getmembers() if m.name.endswith(".jpg"))
    data = bytearray(shard.read_bytes())
    data[offset : offset + 64] = b"\x00" * 64
    shard.write_bytes(bytes(data))


def handled_keys(path, handler, **kwargs):
    """The keys of a validation pass over `path`, with `handler` as the error handler."""
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2, global_error_handler=handler)
    ds = energon_rs.get_val_dataset(
        path, split_part="train", worker_config=wc, batch_size=2, **kwargs
    )
    return [k for batch in energon_rs.get_loader(ds) for k in batch.__key__]


@pytest.mark.parametrize("metadataset", [False, True])
def test_a_sample_that_cannot_be_decoded_goes_to_the_error_handler(
    ref_small_copy, tmp_path, metadataset
):
    """As in the reference: the error handler sees the error and the sample's sources, the
    sample is dropped, and the pass goes on; a handler that re-raises stops the loader."""
    corrupt_first_jpeg(ref_small_copy)
    path = ref_small_copy
    if metadataset:
        path = tmp_path / "mds.yaml"
        path.write_text(
            "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
            f"    path: {ref_small_copy}\n"
        )
    calls = []
    keys = handled_keys(path, lambda exc, sample, sources: calls.append((exc, sources)))
    assert sorted(keys) == [f"{i:08d}" for i in range(1, 200)]
    # (Worker threads may already read into the next pass, and report the sample again.)
    assert calls
    for exc, sources in calls:
        assert isinstance(exc, energon_rs.CorruptDatasetError)
        assert "cannot decode part" in str(exc)
        assert [(s.shard_name, s.index) for s in sources] == [("shards/data-000000.tar", 0)]
    with pytest.raises(energon_rs.CorruptDatasetError, match="cannot decode part"):
        handled_keys(path, energon_rs.reraise_exception)


def test_a_loader_error_surfaces_from_the_workers(ref_small_copy):
    """A shard that cannot be read is not a sample's fault: the loader stops with the error."""
    import struct

    shard = ref_small_copy / "shards" / "data-000001.tar"
    data = bytearray(shard.read_bytes())
    idx = (ref_small_copy / "shards" / "data-000001.tar.idx").read_bytes()
    offset = struct.unpack_from("<Q", idx, 8 * 2)[0]
    data[offset : offset + 512] = b"\xff" * 512
    shard.write_bytes(bytes(data))
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_val_dataset(ref_small_copy, split_part="train", worker_config=wc, batch_size=2)
    with pytest.raises(energon_rs.CorruptDatasetError, match=f"offset {offset}"):
        for _ in energon_rs.get_loader(ds):
            pass


def png_header(width, height):
    """A PNG of `width` x `height` pixels without its pixel data (its size is all a
    decompression-bomb check reads)."""
    import struct
    import zlib

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def test_an_image_over_the_pixel_limit_is_a_sample_error(tmp_path):
    """One decompression bomb is dropped under the error policy; the loader goes on."""
    import io
    import tarfile

    import numpy as np
    from PIL import Image

    root = tmp_path / "bombs"
    (root / "shards").mkdir(parents=True)
    with tarfile.open(root / "shards" / "data-0.tar", "w") as tar:
        for i in range(6):
            if i == 2:
                png = png_header(20_000, 20_000)
            else:
                buf = io.BytesIO()
                Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(buf, format="PNG")
                png = buf.getvalue()
            for name, data in ((f"{i:04d}.png", png), (f"{i:04d}.txt", f"caption {i}".encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    energon_cli(
        "prepare", root, "--non-interactive", "--split-ratio", "1,0,0", "--no-progress",
        "--sample-type", "CaptioningSample", "--field-map", '{"image": "png", "caption": "txt"}',
    )
    calls = []
    keys = handled_keys(root, lambda exc, sample, sources: calls.append((exc, sources)))
    assert sorted(keys) == ["0000", "0001", "0003", "0004", "0005"]
    exc, sources = calls[0]
    assert isinstance(exc, energon_rs.CorruptDatasetError) and "pixels" in str(exc)
    assert sources[0].index == 2


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_a_shard_truncated_under_a_running_loader_is_an_error_not_a_crash(ref_small_copy, worker_type):
    """A dataset re-synced under a running job: the shard shrinks while it is mapped. Reads past
    its new end are a CorruptDatasetError naming the shard, never SIGBUS."""
    shard = ref_small_copy / "shards" / "data-000000.tar"
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1)
    ds = energon_rs.get_val_dataset(ref_small_copy, split_part="train", worker_config=wc, batch_size=None)
    it = iter(energon_rs.get_loader(ds, worker_type=worker_type))
    assert next(it).__key__ == "00000000"
    with open(shard, "r+b") as f:
        f.truncate(16 * 1024)
    with pytest.raises(energon_rs.CorruptDatasetError, match="data-000000.tar") as info:
        for _ in range(300):
            next(it)
    assert "truncated or rewritten while it was read" in str(info.value)
