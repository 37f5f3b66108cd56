"""Sample classes of a user's own module, named by the `dataset.yaml`s of the drop-in tests."""

from __future__ import annotations

import dataclasses
from typing import Optional

import energon_rs


@dataclasses.dataclass
class CaptionOnlySample(energon_rs.Sample):
    """A caption without its image (as the joining guide's example class)."""

    caption: str


@dataclasses.dataclass
class TaggedImageSample(energon_rs.Sample):
    """An image with a caption and one value out of the sample's JSON."""

    image: object
    caption: str
    tag: Optional[object] = None
