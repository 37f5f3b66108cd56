"""`edataclass` and `format_sample_detailed`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from energon_rs import CaptioningSample
from energon_rs import edataclass
from energon_rs.sample_utils import format_sample_detailed


def test_edataclass_is_keyword_only_with_slots():
    @edataclass
    class Scored(CaptioningSample):
        score: float

    s = Scored(__key__="k", __restore_key__=(), image=None, caption="c", score=0.5)
    assert s.score == 0.5 and "score" in Scored.__slots__
    with pytest.raises(TypeError):
        Scored("k", (), None, "c", 0.5)  # type: ignore[misc]


def test_format_sample_detailed():
    @dataclass
    class Inner:
        n: int

    text = format_sample_detailed(
        {
            "flag": True,
            "none": None,
            "text": "two\nlines",
            "odd": "yes",
            "seq": [1, {"k": "v"}],
            "arr": np.arange(3, dtype=np.int32),
            "big": np.zeros(100),
            "dc": Inner(n=3),
        }
    )
    assert text == "\n".join(
        [
            "flag: true",
            "none: null",
            "text: 'two",
            "",
            "  lines'",
            "odd: 'yes'",
            "seq:",
            "- 1",
            "- k: v",
            "arr: np.ndarray(shape=(3,), dtype=int32, min=0, max=2, values="
            + repr(list(np.arange(3, dtype=np.int32)))
            + ")",
            "big: np.ndarray(shape=(100,), dtype=float64, min=0.0, max=0.0)",
            "dc:",
            "  Inner:",
            "    n: 3",
        ]
    )
