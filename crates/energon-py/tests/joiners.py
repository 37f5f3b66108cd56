"""A joiner function for the join tests (`joiner: {__module__: joiners, __function__: ...}`)."""

from __future__ import annotations


def caption_pair(primary, second):
    """The captions and subflavors of both joined samples, under the primary's key."""
    return {
        "__key__": primary.__key__,
        "captions": [primary.caption, second.caption],
        "subflavors": [primary.__subflavors__, second.__subflavors__],
    }
