"""Media metadata, as `energon prepare-media` (or `prepare --media-metadata-by-...`) stores it
and `FileStore.get_media_metadata(key)` returns it: the classes of `megatron.energon.media`
with the same field names.

Images carry their size, Pillow format name and Pillow mode; audio and video (`AVMetadata`)
their durations in seconds, frame count, frame rate, frame size, channels, sample rate and
sample count, each `None` where it does not apply.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, ClassVar, Mapping, Optional, TypeVar, Union

__all__ = [
    "AVMetadata",
    "ImageMetadata",
    "MediaMetadataBase",
    "MediaMetadataType",
    "deserialize_media_metadata",
    "serialize_media_metadata",
]


class MediaMetadataType(str, Enum):
    """The kinds of media metadata (the stored `metadata_type`)."""

    AV = "av"
    IMAGE = "image"


M = TypeVar("M", bound="MediaMetadataBase")


@dataclass
class MediaMetadataBase:
    """Base of the media metadata classes."""

    metadata_type: ClassVar[MediaMetadataType]

    def to_dict(self) -> dict[str, Any]:
        """The fields that are not `None`, in declaration order (the stored JSON object)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls: type[M], payload: Mapping[str, Any]) -> M:
        """The metadata of a stored JSON object."""
        return cls(**payload)


@dataclass
class AVMetadata(MediaMetadataBase):
    """Audio and/or video: the first video stream's and the first audio stream's properties."""

    metadata_type: ClassVar[MediaMetadataType] = MediaMetadataType.AV

    video_duration: Optional[float] = None
    video_num_frames: Optional[int] = None
    video_fps: Optional[float] = None
    video_width: Optional[int] = None
    video_height: Optional[int] = None
    audio_duration: Optional[float] = None
    audio_channels: Optional[int] = None
    audio_sample_rate: Optional[int] = None
    audio_num_samples: Optional[int] = None


@dataclass
class ImageMetadata(MediaMetadataBase):
    """An image: its size in pixels, Pillow format name (`JPEG`, `PNG`, ...) and Pillow mode
    (`RGB`, `L`, ...)."""

    metadata_type: ClassVar[MediaMetadataType] = MediaMetadataType.IMAGE

    width: int
    height: int
    format: str
    mode: str


_CLASSES: dict[MediaMetadataType, type[MediaMetadataBase]] = {
    MediaMetadataType.AV: AVMetadata,
    MediaMetadataType.IMAGE: ImageMetadata,
}


def serialize_media_metadata(metadata: MediaMetadataBase) -> tuple[MediaMetadataType, str]:
    """The stored form: `(metadata_type, compact JSON)`."""
    return metadata.metadata_type, json.dumps(metadata.to_dict(), separators=(",", ":"))


def deserialize_media_metadata(
    metadata_type: Union[str, MediaMetadataType], metadata_json: str
) -> MediaMetadataBase:
    """The metadata of a stored row."""
    try:
        cls = _CLASSES[MediaMetadataType(metadata_type)]
    except ValueError:
        raise ValueError(f"unsupported media metadata type: {metadata_type!r}") from None
    return cls.from_dict(json.loads(metadata_json) if metadata_json else {})
