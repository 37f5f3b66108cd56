"""Video and audio decoding with the reference's ``megatron.energon.av`` interface.

``AVDecoder`` wraps the native FFmpeg decoder of energon-reader (the wheel's ``video``
feature): clips come back as torch tensors, video ``(frames, 3, height, width)`` uint8 (a
permuted view of frame-major RGB data, as the reference's), audio ``(channels, samples)`` in
the decoder's sample type, as the reference's (int16 for 16-bit WAV and FLAC, int32 for 24- and
32-bit, float32 for MP3, AAC, Opus and Vorbis). Decoding happens when a method is called.

The loader hands out an ``AVDecoder`` for every audio and video part (``mp4 avi mov webm mkv
flv flac mp3 wav``) with the reference's default ``av_decode="AVDecoder"``; its errors name the
dataset, shard and key of the part.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import warnings
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, Optional, Sequence, Union

import numpy as np

from energon_rs import _native
from energon_rs.media import AVMetadata

__all__ = [
    "AVData",
    "AVDecoder",
    "AVProbeIndex",
    "AVProbeIndexEntry",
    "AVWebdatasetDecoder",
    "get_clips_uniform",
    "get_single_frames_uniform",
]


def _tensor(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(array)


def preload() -> None:
    """Imports torch, which clips are handed out as, on the calling thread, where it is
    installed and not imported yet: the loader calls it as it starts, so that the first clip a
    loader thread or hook decodes does not import torch there (seconds, holding the import lock
    and the GIL)."""
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401


@dataclass
class AVData:
    #: Video clips, each (frames, channels, h, w).
    video_clips: Optional[list[Any]]
    #: (start, end) of each video clip in seconds.
    video_timestamps: Optional[list[tuple[float, float]]]
    #: Audio clips, each (channels, samples).
    audio_clips: Optional[list[Any]]
    #: (start, end) of each audio clip in seconds.
    audio_timestamps: Optional[list[tuple[float, float]]]


@dataclass(slots=True)
class AVProbeIndexEntry:
    """One packet of a probed stream: its presentation timestamp and whether it is a keyframe."""

    timestamp: int
    is_keyframe: bool


class AVProbeIndex:
    """The packets of video stream `stream_idx` of an open PyAV container, in demuxing order,
    found by reading the container once (for containers whose index the demuxer does not give,
    such as AVI); the container is seeked back to its start. The decoders of this module do the
    same in Rust; this is the reference's helper for PyAV code."""

    def __init__(self, container: Any, stream_idx: int = 0) -> None:
        self._entries = [
            AVProbeIndexEntry(timestamp=packet.pts, is_keyframe=bool(packet.is_keyframe))
            for packet in container.demux(video=stream_idx)
            if packet.pts is not None
        ]
        self._keyframes = [i for i, e in enumerate(self._entries) if e.is_keyframe]
        container.seek(0)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, idx: int) -> AVProbeIndexEntry:
        return self._entries[idx]

    def search_timestamp(
        self, timestamp: int, *, backward: bool = True, any_frame: bool = False
    ) -> int:
        """The position of the keyframe (any packet with `any_frame`) nearest `timestamp`: the
        last at or before it (the first entry when there is none), or with `backward=False`
        the first at or after it; -1 when there is none."""
        import bisect

        positions = range(len(self._entries)) if any_frame else self._keyframes
        stamps = [self._entries[i].timestamp for i in positions]
        if not stamps:
            return -1
        if backward:
            at = bisect.bisect_right(stamps, timestamp) - 1
            return positions[max(at, 0)]
        at = bisect.bisect_left(stamps, timestamp)
        return positions[at] if at < len(stamps) else -1


_ALL = [(0, float("inf"))]


def _unpickle(data: bytes, origin: str, suppress_warnings: bool) -> "AVDecoder":
    """An `AVDecoder` made again from what `AVDecoder.__reduce__` kept."""
    self = AVDecoder._from_native(_native.AvDecoder(data, origin))
    self.suppress_warnings = suppress_warnings
    return self


class AVDecoder:
    """Decodes one media part (bytes or a binary stream) on request."""

    def __init__(self, stream: Union[BinaryIO, bytes], suppress_warnings: bool = False) -> None:
        if isinstance(stream, (bytes, bytearray, memoryview)):
            stream = io.BytesIO(bytes(stream))
        assert "t" not in getattr(stream, "mode", "rb") and not isinstance(stream, io.TextIOBase), (
            "Stream must not be opened in text mode"
        )
        self._stream: Optional[BinaryIO] = stream
        self.suppress_warnings = suppress_warnings
        stream.seek(0)
        self._native = _native.AvDecoder(stream.read(), getattr(stream, "name", "") or "")

    @classmethod
    def _from_native(cls, native: "_native.AvDecoder") -> "AVDecoder":
        """A decoder over a part the loader read (the shard's bytes, no copy)."""
        self = cls.__new__(cls)
        self._stream = None
        self.suppress_warnings = False
        self._native = native
        return self

    def __reduce__(self) -> Any:
        # Pickled as the media's bytes and what names them in errors; the decoder is made again
        # on loading.
        return (_unpickle, (bytes(self._native.data()), self._native.origin(), self.suppress_warnings))

    @property
    def stream(self) -> BinaryIO:
        """The media as a binary stream (made on first use for parts the loader read)."""
        if self._stream is None:
            self._stream = io.BytesIO(self._native.data())
        return self._stream

    @stream.setter
    def stream(self, stream: BinaryIO) -> None:
        self._stream = stream

    def _get_extension(self) -> Optional[str]:
        return self._native.extension()

    def get_video_clips(
        self,
        video_clip_ranges: Sequence[tuple[float, float]],
        video_unit: Literal["frames", "seconds"] = "seconds",
        video_out_frame_size: Optional[tuple[int, int]] = None,
    ) -> tuple[list[Any], list[tuple[float, float]]]:
        assert video_unit in ("frames", "seconds")
        mode = self._native.index_mode()
        if not self.suppress_warnings:
            if video_unit == "frames" and mode == "pts":
                warnings.warn(
                    "Video container unit is frames, but seeking in time units. The resulting "
                    "frames may be slightly off.",
                    RuntimeWarning,
                )
            elif video_unit == "seconds" and mode == "frames":
                warnings.warn(
                    "Video container unit is seconds, but seeking only supports frames. The "
                    "resulting frames may be slightly off.",
                    RuntimeWarning,
                )
        ranges = [(float(a), float(b)) for a, b in video_clip_ranges]
        arrays, stamps = self._native.video_clips(ranges, video_unit, video_out_frame_size)
        return [_tensor(a).permute((0, 3, 1, 2)) for a in arrays], list(stamps)

    def get_audio_clips(
        self,
        audio_clip_ranges: Sequence[tuple[float, float]],
        audio_unit: Literal["samples", "seconds"] = "seconds",
    ) -> tuple[list[Any], list[tuple[float, float]]]:
        assert audio_unit in ("samples", "seconds")
        ranges = [(float(a), float(b)) for a, b in audio_clip_ranges]
        arrays, stamps = self._native.audio_clips(ranges, audio_unit)
        return [_tensor(a) for a in arrays], list(stamps)

    def get_clips(
        self,
        video_clip_ranges: Optional[Sequence[tuple[float, float]]] = None,
        audio_clip_ranges: Optional[Sequence[tuple[float, float]]] = None,
        video_unit: Literal["frames", "seconds"] = "seconds",
        audio_unit: Literal["samples", "seconds"] = "seconds",
        video_out_frame_size: Optional[tuple[int, int]] = None,
    ) -> AVData:
        video, video_ts = ([], [])
        if video_clip_ranges is not None:
            video, video_ts = self.get_video_clips(video_clip_ranges, video_unit, video_out_frame_size)
        audio, audio_ts = ([], [])
        if audio_clip_ranges is not None:
            audio, audio_ts = self.get_audio_clips(audio_clip_ranges, audio_unit)
        return AVData(video_clips=video, video_timestamps=video_ts, audio_clips=audio,
                      audio_timestamps=audio_ts)

    def get_video(self) -> AVData:
        return self.get_clips(video_clip_ranges=_ALL)

    def get_audio(self) -> AVData:
        return self.get_clips(audio_clip_ranges=_ALL)

    def get_video_with_audio(self) -> AVData:
        return self.get_clips(video_clip_ranges=_ALL, audio_clip_ranges=_ALL)

    def get_frames(self, video_decode_audio: bool = False) -> Optional[AVData]:
        ext = self._get_extension()
        if ext in ("mov", "mp4", "webm", "mkv", "avi", "m4v"):
            return self.get_video_with_audio() if video_decode_audio else self.get_video()
        if ext in ("flac", "mp3", "wav"):
            return self.get_audio()
        return None

    def get_metadata(
        self,
        get_video: bool = True,
        get_video_duration: bool = True,
        get_video_frame_count: bool = True,
        get_video_frame_size: bool = True,
        get_audio: bool = True,
        get_audio_duration: bool = True,
        get_audio_num_samples: bool = False,
    ) -> AVMetadata:
        fields = self._native.metadata(get_video, get_video_duration, get_video_frame_count,
                                       get_video_frame_size, get_audio, get_audio_duration,
                                       get_audio_num_samples)
        return AVMetadata(**fields)

    def get_video_fps(self) -> float:
        m = self.get_metadata(get_video=True, get_video_duration=False, get_video_frame_count=False,
                              get_video_frame_size=False, get_audio=False)
        assert m.video_fps is not None
        return m.video_fps

    def get_audio_samples_per_second(self) -> int:
        m = self.get_metadata(get_video=False, get_audio=True, get_audio_duration=False)
        assert m.audio_sample_rate is not None
        return m.audio_sample_rate

    def has_audio_stream(self) -> bool:
        return self._native.has_audio_stream()

    def has_video_stream(self) -> bool:
        return self._native.has_video_stream()

    def get_audio_duration(self) -> Optional[float]:
        return self.get_metadata(get_video=False, get_audio=True, get_audio_duration=True).audio_duration

    def get_video_duration(self, get_frame_count: bool = False) -> tuple[Optional[float], Optional[int]]:
        m = self.get_metadata(get_video=True, get_video_duration=True,
                              get_video_frame_count=get_frame_count, get_video_frame_size=False,
                              get_audio=False, get_audio_duration=False)
        return m.video_duration, m.video_num_frames

    def __repr__(self) -> str:
        return f"AVDecoder(stream={self.stream!r})"


def _av_data(
    video: list[np.ndarray],
    video_ts: list[tuple[float, float]],
    audio: list[np.ndarray],
    audio_ts: list[tuple[float, float]],
) -> AVData:
    """The reference's `AVData` of clips decoded on a loader thread (`av_decode="torch"`)."""
    return AVData(
        video_clips=[_tensor(a).permute((0, 3, 1, 2)) for a in video],
        video_timestamps=list(video_ts),
        audio_clips=[_tensor(a) for a in audio],
        audio_timestamps=list(audio_ts),
    )


def _pyav_open(data: memoryview) -> Any:
    """A PyAV input container over a part's bytes (`av_decode="pyav"`)."""
    try:
        import av
    except ImportError as e:
        raise ImportError('av_decode="pyav" needs PyAV: pip install av') from e
    return av.open(io.BytesIO(data))



#: The extensions the reference's AV decoder takes.
_AV_EXTENSIONS = ("mp4", "avi", "mov", "webm", "mkv", "flac", "mp3", "wav", "flv")


class AVWebdatasetDecoder:
    """The reference's webdataset handler for audio and video parts: `(key, data)` to an
    `AVDecoder` (`av_decode="AVDecoder"`), its `get_frames` (`"torch"`) or a PyAV container
    (`"pyav"`); `None` for other extensions."""

    def __init__(self, video_decode_audio: bool, av_decode: str = "AVDecoder") -> None:
        self.video_decode_audio = video_decode_audio
        self.av_decode = av_decode

    def read_av_data(self, data: bytes) -> AVDecoder:
        return AVDecoder(io.BytesIO(data))

    def __call__(self, key: str, data: bytes) -> Any:
        key = key.lower()
        if not any(key == e or key.endswith("." + e) for e in _AV_EXTENSIONS):
            return None
        decoder = self.read_av_data(data)
        if self.av_decode == "AVDecoder":
            return decoder
        if self.av_decode == "pyav":
            return _pyav_open(memoryview(data))
        if self.av_decode == "torch":
            return decoder.get_frames(video_decode_audio=self.video_decode_audio)
        raise ValueError(f"Invalid av_decode value: {self.av_decode}")


def get_clips_uniform(
    av_decoder: AVDecoder,
    clip_duration_seconds: float,
    num_clips: int,
    request_video: bool = False,
    request_audio: bool = False,
    video_out_frame_size: Optional[tuple[int, int]] = None,
) -> AVData:
    """`num_clips` clips of `clip_duration_seconds` each, evenly spread over the media (the
    shorter of the requested streams); a duration of 0 gives single frames, the first and last
    half a frame from the ends."""
    if not (request_video or request_audio):
        raise ValueError("You must request at least one of video or audio")
    total = float("inf")
    if request_video:
        video_duration, _ = av_decoder.get_video_duration()
        if video_duration is None:
            raise ValueError("No video duration found")
        total = min(total, video_duration)
    if request_audio:
        audio_duration = av_decoder.get_audio_duration()
        if audio_duration is None:
            raise ValueError("No audio duration found")
        total = min(total, audio_duration)
    assert total != float("inf")
    if clip_duration_seconds == 0:
        half_frame = 0.5 / av_decoder.get_video_fps()
        first, last = half_frame, total - half_frame
    else:
        first, last = 0, total - clip_duration_seconds
    ranges = [
        (float(start), float(start + clip_duration_seconds))
        for start in np.linspace(first, last, num_clips)
    ]
    return av_decoder.get_clips(
        video_clip_ranges=ranges if request_video else None,
        audio_clip_ranges=ranges if request_audio else None,
        video_unit="seconds",
        audio_unit="seconds",
        video_out_frame_size=video_out_frame_size,
    )


def get_single_frames_uniform(
    av_decoder: AVDecoder,
    num_frames: int,
    *,
    video_out_frame_size: Optional[tuple[int, int]] = None,
    return_timestamps: bool = False,
) -> Any:
    """`num_frames` single frames evenly spread over the video, as one `(frames, 3, h, w)`
    tensor (and their start times with `return_timestamps`)."""
    import torch

    data = get_clips_uniform(
        av_decoder, 0, num_frames, request_video=True, video_out_frame_size=video_out_frame_size
    )
    if not data.video_clips:
        raise ValueError("No video frames found")
    frames = torch.cat(data.video_clips, dim=0)
    if return_timestamps:
        return frames, [start for start, _ in data.video_timestamps or []]
    return frames
