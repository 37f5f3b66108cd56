"""energon_rs.av against the reference's recorded AVDecoder results (tests/fixtures/av)."""

import json
import pathlib
import warnings

import pytest

torch = pytest.importorskip("torch")
from energon_rs import _native  # noqa: E402

if not hasattr(_native, "AvDecoder"):
    pytest.skip("wheel built without the video feature", allow_module_level=True)

from energon_rs.av import AVDecoder  # noqa: E402

AV = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "av"
EXPECTED = json.loads((AV / "expected.json").read_text())


def _num(x):
    return float("inf") if x == "inf" else x


@pytest.mark.parametrize("name", sorted(EXPECTED["files"]))
def test_clips_match_the_reference(name):
    rec = EXPECTED["files"][name]
    data = (AV / name).read_bytes()
    warnings.simplefilter("ignore")
    for q in rec["video_requests"]:
        ranges = [(_num(a), _num(b)) for a, b in q["ranges"]]
        size = tuple(q["size"]) if q["size"] else None
        clips, ts = AVDecoder(data).get_video_clips(ranges, q["unit"], size)
        assert [list(c.shape) for c in clips] == [c["shape"] for c in q["clips"]]
        assert [list(t) for t in ts] == [c["timestamps"] for c in q["clips"]]
        for c in clips:
            assert c.dtype == torch.uint8 and c.stride()[1] == 1
    for q in rec["audio_requests"]:
        ranges = [(_num(a), _num(b)) for a, b in q["ranges"]]
        clips, ts = AVDecoder(data).get_audio_clips(ranges, q["unit"])
        assert [list(c.shape) for c in clips] == [c["shape"] for c in q["clips"]]
        assert [list(t) for t in ts] == [c["timestamps"] for c in q["clips"]]
        for c, want in zip(clips, q["clips"]):
            # The decoder's own sample type, unscaled, as the reference hands it out.
            assert str(c.dtype).removeprefix("torch.") == want["dtype"]
            for got, values in [(c[0, : len(want["head"])], want["head"]),
                                (c[-1, c.shape[1] - len(want["tail"]):], want["tail"])]:
                values = torch.tensor(values, dtype=torch.float64)
                assert torch.allclose(got.to(torch.float64), values, atol=1e-3, rtol=0)
    d = AVDecoder(data)
    assert d.has_video_stream() == rec["has_video"]
    if rec["has_video"]:
        assert d.get_video_fps() == rec["fps"]
        assert list(d.get_video_duration(True)) == rec["video_duration"]
    if rec["has_audio"]:
        assert d.get_audio_duration() == rec["audio_duration"]
        got = d.get_metadata(get_audio_num_samples=True)
        assert {k: getattr(got, k) for k in rec["metadata"]} == rec["metadata"]


def test_compat_serves_megatron_energon_av():
    from energon_rs import compat

    compat.install()
    try:
        from megatron.energon.av import AVData, AVDecoder as Ref

        assert Ref is AVDecoder and AVData.__module__ == "energon_rs.av"
    finally:
        compat.uninstall()


def test_a_decoder_pickles_with_its_media():
    import pickle

    name = sorted(n for n, r in EXPECTED["files"].items() if r["has_video"])[0]
    decoder = AVDecoder((AV / name).read_bytes(), suppress_warnings=True)
    again = pickle.loads(pickle.dumps(decoder))
    assert again.suppress_warnings and again.get_video_fps() == decoder.get_video_fps()
    want, _ = decoder.get_video_clips([(0, 2)], "frames")
    got, _ = again.get_video_clips([(0, 2)], "frames")
    assert torch.equal(want[0], got[0])


def test_bad_media_raises():
    with pytest.raises(ValueError, match="cannot decode media"):
        AVDecoder(b"RIFF\0\0\0\0AVI garbage").get_video_clips([(0, 1)], "frames")


def test_probe_index_finds_keyframes_and_searches_them():
    """`AVProbeIndex` over a container's packets (a stand-in for a PyAV container: the demuxer
    yields packets with `pts` and `is_keyframe`, and is seeked back to its start)."""
    from types import SimpleNamespace

    from energon_rs.av import AVProbeIndex

    class Container:
        seeked = None

        def demux(self, video):
            assert video == 0
            for pts in [None, 0, 512, 1024, 1536, 2048, 2560]:
                yield SimpleNamespace(pts=pts, is_keyframe=pts is not None and pts % 1024 == 0)

        def seek(self, offset):
            self.seeked = offset

    container = Container()
    index = AVProbeIndex(container, 0)
    assert container.seeked == 0 and len(index) == 6
    assert [(i, e.timestamp) for i, e in enumerate(index) if e.is_keyframe] == [(0, 0), (2, 1024), (4, 2048)]
    assert [index.search_timestamp(t) for t in (0, 1000, 1024, 3000)] == [0, 0, 2, 4]
    assert [index.search_timestamp(t, backward=False) for t in (1, 1024, 2049)] == [2, 2, -1]
    assert index.search_timestamp(600, any_frame=True) == 1


@pytest.mark.parametrize("name", ["tone.wav", "tone.flac", "tone.mp3"])
def test_cut_audio_is_an_error_not_a_shorter_clip(name):
    """FFmpeg decodes what is left of a cut file without a word; the header says how long it
    is, and a shortfall is an error (the loader's error policy then drops the sample)."""
    data = (AV / name).read_bytes()
    assert AVDecoder(data).get_audio() is not None
    with pytest.raises(Exception, match="corrupt audio|cannot decode"):
        AVDecoder(data[: len(data) // 2]).get_audio()
