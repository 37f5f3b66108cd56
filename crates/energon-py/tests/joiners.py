"""A joiner function for the join tests (`joiner: {__module__: joiners, __function__: ...}`)."""

from __future__ import annotations


def caption_pair(primary, second):
    """The captions and subflavors of both joined samples, under the primary's key."""
    return {
        "__key__": primary.__key__,
        "captions": [primary.caption, second.caption],
        "subflavors": [primary.__subflavors__, second.__subflavors__],
    }


def every_third(primary, second):
    """Skips keys divisible by 3, fails on those that leave 1, joins the others."""
    from energon_rs import SkipSample

    i = int(primary.__key__)
    if i % 3 == 0:
        raise SkipSample()
    if i % 3 == 1:
        raise ValueError(f"cannot join {primary.__key__}")
    return {"__key__": primary.__key__}
