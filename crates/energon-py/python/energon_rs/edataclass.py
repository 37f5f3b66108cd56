"""`edataclass`: the dataclass decorator of sample types, `@dataclass(kw_only=True, slots=True)`.

    @edataclass
    class CaptionedWithScore(CaptioningSample):
        score: float

Keyword-only fields let a subclass add fields without defaults after the base's fields with
defaults; slots keep the instances small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

__all__ = ["edataclass"]

T = TypeVar("T", bound=type)


def edataclass(cls: T) -> T:
    """`cls` as a keyword-only dataclass with slots."""
    return dataclass(kw_only=True, slots=True)(cls)  # type: ignore[return-value]
