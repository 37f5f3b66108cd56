"""File stores and media metadata: `WebdatasetFileStore` / `SystemFileStore` reading files by name
and returning what `energon prepare-media` stored, as the reference's classes do; auxiliary
sources of a metadataset handed to cookers."""

from __future__ import annotations

import ast
import json
import pickle
import tarfile
import wave
from pathlib import Path

import numpy as np
import pytest

import energon_rs
from energon_rs.media import deserialize_media_metadata, serialize_media_metadata
from conftest import EXPECTED, REF_SMALL, energon_cli


def tar_members(dataset: Path) -> dict[str, bytes]:
    res = {}
    for shard in sorted((dataset / "shards").glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar.getmembers():
                res[member.name] = tar.extractfile(member).read()
    return res


def reference_media_rows() -> list[tuple[str, str, str]]:
    """The `media_metadata` rows the reference's dump shows (prepare-media by extension, then by
    header, on the fixture)."""
    lines = (EXPECTED / "prepare-media-by-extension-then-header.index-dump.txt").read_text()
    rows, in_table = [], False
    for line in lines.splitlines():
        if line.startswith("table "):
            in_table = line.startswith("table media_metadata columns")
        elif in_table and line.startswith("  ('") and "'entry_key'" not in line:
            rows.append(ast.literal_eval(line.strip()))
    return rows


@pytest.fixture
def prepared(ref_small_copy: Path) -> Path:
    """A copy of the fixture after `energon prepare-media --media-metadata-by-extension`."""
    out = energon_cli("prepare-media", ref_small_copy, "--media-metadata-by-extension")
    assert "200" in out
    return ref_small_copy


@pytest.fixture
def media_folder(tmp_path: Path) -> Path:
    """A plain folder with an image, a WAV file and a text file, after `energon prepare-media`."""
    folder = tmp_path / "media"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.jpg").write_bytes(tar_members(REF_SMALL)["00000000.jpg"])
    with wave.open(str(folder / "sub" / "tone.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0\0\0" * 8000)
    (folder / "notes.txt").write_text("hello")
    out = energon_cli("prepare-media", folder, "--media-metadata-by-extension")
    assert "2 files" in out
    return folder


def test_webdataset_media_metadata_matches_the_reference_and_the_images(prepared):
    store = energon_rs.WebdatasetFileStore(prepared)
    rows = reference_media_rows()
    assert len(rows) == 5  # the dump shows the first rows of 200
    for entry_key, metadata_type, metadata_json in rows:
        meta = store.get_media_metadata(entry_key)
        assert isinstance(meta, energon_rs.ImageMetadata)
        assert serialize_media_metadata(meta) == (metadata_type, metadata_json)
    decoded = energon_rs.DecodeFileStore(store, decoder=energon_rs.SampleDecoder())
    for i in range(200):
        meta = store.get_media_metadata(f"{i:08d}.jpg")
        image, _ = decoded[f"{i:08d}.jpg"]
        assert (meta.format, meta.mode) == ("JPEG", "RGB")
        assert image.shape == (3, meta.height, meta.width)
    with pytest.raises(KeyError):
        store.get_media_metadata("00000003.txt")
    with pytest.raises(KeyError):
        store.get_media_metadata("99999999.jpg")


def test_a_store_without_media_metadata_says_so(ref_small):
    store = energon_rs.WebdatasetFileStore(ref_small)
    with pytest.raises(RuntimeError, match="prepare-media"):
        store.get_media_metadata("00000000.jpg")
    assert energon_rs.load_dataset(ref_small).as_file_store().get_path() == str(ref_small)


def test_webdataset_store_reads_the_tar_members(ref_small):
    store = energon_rs.WebdatasetFileStore(ref_small)
    members = tar_members(ref_small)
    for name in ("00000000.jpg", "00000042.txt", "00000199.json"):
        data, source = store[name]
        assert isinstance(data, memoryview) and data.readonly
        assert bytes(data) == members[name]
        assert source.file_names == (name,) and source.index == name
        assert source.shard_name.startswith("shards/data-")
    sample = energon_rs.TextSample(__key__="k", __restore_key__=(), text="")
    assert bytes(store.get("00000001.txt", sample)) == members["00000001.txt"]
    assert [s.file_names for s in sample.__sources__] == [("00000001.txt",)]
    with pytest.raises(KeyError):
        store["00000000.png"]
    primary = energon_rs.PrimaryFileStore(store, current_key="00000007")
    assert bytes(primary[".txt"][0]) == members["00000007.txt"]
    assert pickle.loads(pickle.dumps(store)).get_path() == store.get_path()


def test_decoded_stores_decode_by_part_name(ref_small):
    store = energon_rs.DecodeFileStore(
        energon_rs.WebdatasetFileStore(ref_small),
        decoder=energon_rs.SampleDecoder(image_decode="rgb8"),
    )
    image, _ = store["00000000.jpg"]
    assert image.dtype == np.uint8 and image.shape == (32, 32, 3)
    record, _ = store["00000000.json"]
    assert record["key"] == "00000000"
    text, _ = store["00000000.txt"]
    assert isinstance(text, str) and text


def test_jsonl_store_reads_records(ref_small):
    path = ref_small / "jsonl" / "data.jsonl"
    store = energon_rs.load_dataset(path).as_file_store()
    assert isinstance(store, energon_rs.JsonlFileStore)
    lines = path.read_bytes().splitlines()
    assert bytes(store["3.json"][0]).rstrip(b"\n") == lines[3]
    with pytest.raises(KeyError):
        store["200.json"]
    with pytest.raises(RuntimeError):
        store.get_media_metadata("3.json")


def test_system_store_media_metadata(media_folder):
    store = energon_rs.SystemFileStore(media_folder)
    assert store.get_media_metadata("sub/tone.wav") == energon_rs.AVMetadata(
        audio_duration=0.5, audio_channels=2, audio_sample_rate=16000, audio_num_samples=8000
    )
    assert store.get_media_metadata("a.jpg") == energon_rs.ImageMetadata(
        width=32, height=32, format="JPEG", mode="RGB"
    )
    with pytest.raises(KeyError, match="prepare-media"):
        store.get_media_metadata("notes.txt")
    with pytest.raises(KeyError, match="not found"):
        store.get_media_metadata("nope.wav")
    data, source = store["notes.txt"]
    assert bytes(data) == b"hello"
    assert (source.dataset_path, source.index, source.file_names) == (
        str(media_folder),
        "notes.txt",
        ("notes.txt",),
    )
    with pytest.raises(FileNotFoundError):
        store["nope.txt"]
    with pytest.raises(RuntimeError, match="base_dir"):
        energon_rs.SystemFileStore().get_media_metadata(str(media_folder / "a.jpg"))
    with pytest.raises(RuntimeError, match="prepare-media"):
        energon_rs.SystemFileStore(media_folder / "sub").get_media_metadata("tone.wav")


def test_media_metadata_objects_have_the_reference_fields():
    image = energon_rs.ImageMetadata(width=4, height=3, format="PNG", mode="L")
    assert list(image.to_dict()) == ["width", "height", "format", "mode"]
    assert image.metadata_type == energon_rs.MediaMetadataType.IMAGE == "image"
    av = energon_rs.AVMetadata(video_duration=1.5, video_fps=24.0)
    assert av.to_dict() == {"video_duration": 1.5, "video_fps": 24.0}
    assert serialize_media_metadata(av) == ("av", '{"video_duration":1.5,"video_fps":24.0}')
    assert deserialize_media_metadata("av", '{"video_duration":1.5,"video_fps":24.0}') == av
    with pytest.raises(ValueError):
        deserialize_media_metadata("text", "{}")


def test_cookers_get_the_aux_stores_of_their_dataset(tmp_path, prepared, media_folder):
    mds = tmp_path / "aux.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        f"    path: {REF_SMALL / 'jsonl' / 'data.jsonl'}\n"
        f"    aux:\n      media: filesystem://{media_folder}\n      images: {prepared}\n"
    )
    calls = []

    @energon_rs.cooker(need_primary=True)
    def cook(sample, media, images, primary):
        key = sample["json"]["key"]
        image = images.get(f"{key}.jpg", sample)
        calls.append(
            (
                type(media).__name__,
                media.get_media_metadata("sub/tone.wav").audio_num_samples,
                images.get_media_metadata(f"{key}.jpg").width,
                primary[".json"][0]["key"],
            )
        )
        return energon_rs.ImageSample(**energon_rs.basic_sample_keys(sample), image=image)

    class Encoder(energon_rs.DefaultTaskEncoder):
        cookers = [energon_rs.Cooker(cook)]

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_val_dataset(
        mds, split_part="train", worker_config=wc, batch_size=None, task_encoder=Encoder()
    )
    # The cooker records its calls in this process: worker threads.
    samples = list(energon_rs.get_loader(ds, worker_type="thread"))
    assert len(samples) == 200
    first = next(s for s in samples if s.__key__ == "0")
    assert first.image.shape == (3, 32, 32)
    # The image's source was appended to the crude sample's.
    assert [s.file_names for s in first.__sources__][-1] == ("00000000.jpg",)
    assert sorted(calls)[0] == ("DecodeFileStore", 8000, 32, "00000000")
    assert {c[3] for c in calls} == {f"{i:08d}" for i in range(200)}
