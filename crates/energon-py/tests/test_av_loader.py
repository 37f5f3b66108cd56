"""Audio and video parts through the loader, as the reference's `av_decode` setting gives them:
`AVDecoder` objects (the default), whole files decoded on the loader's threads (`"torch"`) or
PyAV containers (`"pyav"`); `VidQASample` datasets and crude samples with video parts, task
encoders calling the decoder as multimodal training scripts do, and the same through
`energon_rs.compat.install()`. Values are checked against the reference's recording
(tests/fixtures/av/expected.json)."""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys
import tarfile
import warnings

import pytest

torch = pytest.importorskip("torch")
import energon_rs  # noqa: E402
from energon_rs import _native  # noqa: E402

if not hasattr(_native, "AvDecoder"):
    pytest.skip("wheel built without the video feature", allow_module_level=True)

from energon_rs.av import AVData, AVDecoder, get_clips_uniform, get_single_frames_uniform  # noqa: E402
from energon_rs.prepare import BaseWebdatasetFactory  # noqa: E402

AV = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "av"
EXPECTED = json.loads((AV / "expected.json").read_text())["files"]
MP4 = (AV / "h264_aac.mp4").read_bytes()
WAV = (AV / "tone.wav").read_bytes()
WC = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
N = 6
#: Sample 3's video is cut short: it opens, but does not decode.
BROKEN = 3


def _dataset(root: pathlib.Path, yaml: str, parts) -> pathlib.Path:
    (root / "parts").mkdir(parents=True)
    with tarfile.open(root / "parts" / "data-0.tar", "w") as tar:
        for i in range(N):
            for ext, data in parts(i):
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    BaseWebdatasetFactory.prepare_dataset(
        root, ["parts/data-0.tar"], split_parts_ratio=[("train", 1.0)], shuffle_seed=None
    )
    (root / ".nv-meta" / "dataset.yaml").write_text(yaml)
    return root


def _video(i: int) -> bytes:
    return MP4[: len(MP4) // 3] if i == BROKEN else MP4


@pytest.fixture
def vidqa(tmp_path) -> pathlib.Path:
    yaml = (
        "sample_type:\n  __module__: megatron.energon\n  __class__: VidQASample\n"
        "field_map:\n  video: mp4\n  context: txt\n  answers: json[answers]\n"
    )
    return _dataset(
        tmp_path / "vidqa",
        yaml,
        lambda i: [
            ("mp4", _video(i)),
            ("txt", f"question {i}".encode()),
            ("json", json.dumps({"answers": [f"answer {i}"]}).encode()),
        ],
    )


@pytest.fixture
def crude(tmp_path) -> pathlib.Path:
    yaml = "__module__: megatron.energon\n__class__: CrudeWebdataset\nsubflavors:\n  kind: av\n"
    return _dataset(
        tmp_path / "crude",
        yaml,
        lambda i: [("mp4", _video(i)), ("wav", WAV), ("ogg", b"OggS"), ("txt", f"q{i}".encode())],
    )


def _val(path, task_encoder=None, batch_size=None, **decoder):
    if decoder:
        task_encoder = task_encoder or energon_rs.DefaultTaskEncoder()
        task_encoder.decoder = energon_rs.SampleDecoder(**decoder)
    return energon_rs.get_val_dataset(
        path, split_part="train", worker_config=WC, batch_size=batch_size, task_encoder=task_encoder
    )


def _samples(ds, n=N):
    return [s for _, s in zip(range(n), energon_rs.get_loader(ds))]


def test_video_parts_are_av_decoders_that_decode_like_the_reference(vidqa):
    samples = _samples(_val(vidqa))
    assert sorted(s.__key__ for s in samples) == [f"{i:06d}" for i in range(N)]
    rec = EXPECTED["h264_aac.mp4"]
    for s in samples:
        assert isinstance(s, energon_rs.VidQASample) and isinstance(s.video, AVDecoder)
        assert s.context == f"question {int(s.__key__)}"
        assert s.answers == [f"answer {int(s.__key__)}"]
        if int(s.__key__) == BROKEN:
            continue
        assert s.video.get_video_duration(get_frame_count=True) == tuple(rec["video_duration"])
        assert s.video.get_video_fps() == rec["fps"]
        assert s.video.stream.read() == MP4
        # The part decodes as the same bytes decoded directly.
        clips, ts = s.video.get_video_clips([(0, 7), (10, 17)], video_unit="frames")
        own, own_ts = AVDecoder(MP4).get_video_clips([(0, 7), (10, 17)], video_unit="frames")
        assert ts == own_ts and all(torch.equal(a, b) for a, b in zip(clips, own))
        assert [tuple(c.shape) for c in clips] == [(8, 3, 48, 64)] * 2


def test_errors_of_a_broken_video_name_dataset_shard_and_key(vidqa):
    (broken,) = [s for s in _samples(_val(vidqa)) if s.__key__ == f"{BROKEN:06d}"]
    with pytest.raises(ValueError) as e:
        broken.video.get_video()
    message = str(e.value)
    assert str(vidqa) in message and "parts/data-0.tar" in message and f"{BROKEN:06d}" in message


def test_batches_list_the_decoders(vidqa):
    batch = next(iter(energon_rs.get_loader(_val(vidqa, batch_size=2))))
    assert len(batch.video) == 2 and all(isinstance(v, AVDecoder) for v in batch.video)
    assert batch.video[0].get_video_duration() == (2.0, None)


class ClipEncoder(energon_rs.DefaultTaskEncoder):
    """Uniform clips and single frames, as multimodal (audio-video) encoders take them."""

    def encode_sample(self, sample):
        if int(sample.__key__) == BROKEN:
            raise energon_rs.SkipSample()
        clips = get_clips_uniform(
            sample.video, clip_duration_seconds=0.32, num_clips=3, request_video=True,
            request_audio=True, video_out_frame_size=(32, 24),
        )
        frames, starts = get_single_frames_uniform(sample.video, 4, return_timestamps=True)
        return {"key": sample.__key__, "clips": clips, "frames": frames, "starts": starts}


#: What megatron-energon 7.4.1 gives for `ClipEncoder`'s calls on h264_aac.mp4.
REF_UNIFORM = {
    "video_shapes": [(9, 3, 24, 32), (8, 3, 24, 32), (8, 3, 24, 32)],
    "video_timestamps": [(0.0, 0.36), (0.84, 1.16), (1.68, 2.0)],
    "audio_shapes": [(2, 14112)] * 3,
    "audio_timestamps": [(0.0, 0.32), (0.84, 1.16), (1.68, 2.0)],
    "frame_starts": [0.0, 0.64, 1.32, 1.96],
    "frame_means": [120.183, 140.361, 117.638, 140.465],
}


def test_a_task_encoder_takes_uniform_clips_as_the_reference(vidqa):
    out = _samples(_val(vidqa, task_encoder=ClipEncoder()), N - 1)
    assert sorted(o["key"] for o in out) == [f"{i:06d}" for i in range(N) if i != BROKEN]
    for o in out:
        clips = o["clips"]
        assert isinstance(clips, AVData)
        assert [tuple(c.shape) for c in clips.video_clips] == REF_UNIFORM["video_shapes"]
        assert [tuple(c.shape) for c in clips.audio_clips] == REF_UNIFORM["audio_shapes"]
        got = [tuple(round(x, 6) for x in t) for t in clips.video_timestamps]
        assert got == REF_UNIFORM["video_timestamps"]
        got = [tuple(round(x, 6) for x in t) for t in clips.audio_timestamps]
        assert got == REF_UNIFORM["audio_timestamps"]
        assert o["frames"].shape == (4, 3, 48, 64) and o["frames"].dtype == torch.uint8
        assert [round(x, 6) for x in o["starts"]] == REF_UNIFORM["frame_starts"]
        means = [o["frames"][i].float().mean().item() for i in range(4)]
        assert means == pytest.approx(REF_UNIFORM["frame_means"], abs=1.0)


@pytest.mark.parametrize("with_audio", [False, True])
def test_torch_mode_decodes_whole_files_on_the_loader_threads(vidqa, with_audio):
    rec = EXPECTED["h264_aac.mp4"]["frames"]
    ds = _val(vidqa, av_decode="torch", video_decode_audio=with_audio)
    loader = energon_rs.get_loader(ds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = [s for _, s in zip(range(N - 1), loader)]
    # The broken video fails in the worker and the sample is skipped.
    assert sorted(s.__key__ for s in samples) == [f"{i:06d}" for i in range(N) if i != BROKEN]
    for s in samples:
        assert isinstance(s.video, AVData)
        (video,) = s.video.video_clips
        assert list(video.shape) == rec["video"][0]["shape"] and video.dtype == torch.uint8
        assert list(s.video.video_timestamps[0]) == rec["video"][0]["timestamps"]
        means = video.float().mean(dim=(2, 3))
        assert torch.allclose(means, torch.tensor(rec["video"][0]["means"]), atol=1.0)
        if with_audio:
            (audio,) = s.video.audio_clips
            assert list(audio.shape) == rec["audio"][0]["shape"]
            assert list(s.video.audio_timestamps[0]) == rec["audio"][0]["timestamps"]
            assert abs(audio.abs().mean().item() - rec["audio"][0]["abs_mean"]) < 1e-3
        else:
            assert s.video.audio_clips == []


def test_an_unknown_av_decode_is_a_config_error(vidqa):
    with pytest.raises(energon_rs.ConfigError, match="av_decode"):
        _val(vidqa, av_decode="frames")


def test_pyav_mode_gives_pyav_containers(vidqa):
    av = pytest.importorskip("av")
    s = _samples(_val(vidqa, av_decode="pyav"), 1)[0]
    assert isinstance(s.video, av.container.InputContainer)
    assert s.video.streams.video[0].frames == 50


@energon_rs.stateless
def cook_av(sample):
    assert isinstance(sample["wav"], AVDecoder) and isinstance(sample["ogg"], (bytes, memoryview))
    audio = sample["wav"].get_audio()
    return energon_rs.VidQASample(
        **energon_rs.basic_sample_keys(sample),
        video=sample["mp4"],
        context=f"{sample['txt']}|{tuple(audio.audio_clips[0].shape)}",
    )


class CrudeEncoder(energon_rs.DefaultTaskEncoder):
    cookers = [energon_rs.Cooker(cook_av, has_subflavors={"kind": "av"})]


def test_crude_samples_get_decoders_for_video_and_audio_parts(crude):
    samples = _samples(_val(crude, task_encoder=CrudeEncoder()))
    rec = EXPECTED["tone.wav"]["frames"]["audio"][0]
    assert sorted(s.context for s in samples) == [f"q{i}|{tuple(rec['shape'])}" for i in range(N)]
    assert samples[0].video.get_video_duration() == (2.0, None)


def test_through_compat_install(vidqa):
    code = f"""
import energon_rs.compat
energon_rs.compat.install()
from megatron.energon import DefaultTaskEncoder, VidQASample, WorkerConfig, get_loader, get_train_dataset
from megatron.energon.av import AVDecoder, get_clips_uniform

class Encoder(DefaultTaskEncoder):
    def encode_sample(self, sample: VidQASample):
        assert isinstance(sample.video, AVDecoder)
        if sample.__key__ == "{BROKEN:06d}":
            return 0
        clips = get_clips_uniform(sample.video, 0.32, 2, request_video=True)
        return clips.video_clips[1].shape[0]

ds = get_train_dataset({str(vidqa)!r}, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
    batch_size=None, shuffle_buffer_size=None, max_samples_per_sequence=None, task_encoder=Encoder())
loader = get_loader(ds)
print(sorted(n for _, n in zip(range({N}), loader)))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(sorted([0] + [8] * (N - 1)))


def test_torch_is_imported_as_the_loader_starts_not_on_a_loader_thread_at_the_first_clip(vidqa):
    # A fresh interpreter that has not imported torch, and a task encoder that decodes clips in
    # `encode_sample`, on the loader's threads: torch must be imported already, by the thread
    # that started the loader.
    code = f"""
import sys, threading, importlib.abc
seen = []
class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch":
            seen.append(threading.current_thread() is threading.main_thread())
        return None
sys.meta_path.insert(0, Spy())
import energon_rs
assert "torch" not in sys.modules
class Clips(energon_rs.DefaultTaskEncoder):
    @energon_rs.stateless
    def encode_sample(self, sample):
        clips, _ = sample.video.get_video_clips([(0, 2)], "frames")
        return type(clips[0]).__module__
wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
ds = energon_rs.get_val_dataset({str(vidqa)!r}, split_part="train", worker_config=wc,
                                batch_size=None, task_encoder=Clips())
print(next(iter(energon_rs.get_loader(ds))), seen and all(seen))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "torch True"
