"""The task encoders of `megatron_style.py` (written against `megatron.energon`) run through
energon_rs via `energon_rs.compat.install()` and give what megatron-energon 7.4.1 gave with the
same code on the same data (recorded by tests/fixtures/tools/record_encoders.py into
energon-ref-small.expected/encoders/): every batch's keys, tensor dtypes, shapes and the
SHA-256 of their bytes, and after `save_state_rank()` at several points and a restore into a fresh
loader, the same continuation.

The states themselves differ (energon_rs's is its own format); what a restored loader yields must
be what the run yielded after the save point. Where the reference's own restore does not
continue its run (recorded as "continues": false), energon_rs is held to the run.
"""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from conftest import EXPECTED, REF_SMALL, torch_or_skip

RECORDED = EXPECTED / "encoders"
NAMES = sorted(p.stem for p in RECORDED.glob("*.json") if p.stem != "decoded_pixels")
#: The fields computed from decoded pixels (every other field depends only on keys, text and the
#: random draws).
PIXEL_FIELDS = ("imgs", "image")


@pytest.fixture(scope="module")
def style():
    """The encoders module, imported with `megatron.energon` served by energon_rs."""
    torch_or_skip()
    import energon_rs.compat

    was_installed = "megatron.energon" in sys.modules
    energon_rs.compat.install()
    sys.modules.pop("megatron_style", None)
    module = importlib.import_module("megatron_style")
    yield module
    sys.modules.pop("megatron_style", None)
    if not was_installed:
        energon_rs.compat.uninstall()


_RUNS: dict = {}


def run_of(style, name: str) -> dict:
    if name not in _RUNS:
        _RUNS[name] = style.record(style.CONFIGS[name], REF_SMALL)
    return _RUNS[name]


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.json").read_text())


def without_pixels(value):
    if isinstance(value, dict):
        return {k: without_pixels(v) for k, v in value.items() if k not in PIXEL_FIELDS}
    if isinstance(value, list):
        return [without_pixels(v) for v in value]
    return value


def pixels_only(value):
    """The pixel fields of every item, in order."""
    if isinstance(value, dict):
        return [value[k] for k in PIXEL_FIELDS if k in value]
    return [pixels_only(v) for v in value] if isinstance(value, list) else []


def jpeg_like_pillow() -> bool:
    """Whether energon_rs decodes the fixture's JPEGs to Pillow's pixels (docs/compat.md says
    which builds do); the pixel fields are compared separately."""
    if "jpeg" not in _RUNS:
        style = importlib.import_module("megatron_style")
        expected = json.loads((RECORDED / "decoded_pixels.json").read_text())
        _RUNS["jpeg"] = style.decoded_pixels(REF_SMALL, len(expected)) == expected
    return _RUNS["jpeg"]


def first_difference(got: list, want: list) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"item {i}: got {json.dumps(g)[:600]}\nwant {json.dumps(w)[:600]}"
    return f"got {len(got)} items, want {len(want)}"


def test_the_recordings_cover_every_configuration(style):
    assert NAMES == sorted(style.CONFIGS)
    for name in NAMES:
        rec = recorded(name)
        config = style.CONFIGS[name]
        assert [r["after"] for r in rec["restores"]] == list(config.save_at)
        # The run is long enough to hold every continuation.
        assert config.items >= max(config.save_at) + config.after
        assert sum(item != style.END for item in rec["items"]) == config.items


def test_the_decoded_images_have_the_reference_shapes(style):
    expected = json.loads((RECORDED / "decoded_pixels.json").read_text())
    got = style.decoded_pixels(REF_SMALL, len(expected))
    assert list(got) == list(expected)
    assert [(v["dtype"], v["shape"]) for v in got.values()] == [
        (v["dtype"], v["shape"]) for v in expected.values()
    ]


#: Configurations where energon_rs does not (yet) give the reference's items, with the cause.
RUN_XFAIL: dict = {}
#: Restores (configuration, save point) where energon_rs does not continue as the run did.
RESTORE_XFAIL: dict = {}


def _mark(name, xfails):
    reason = xfails.get(name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, marks=marks, id=str(name) if not isinstance(name, tuple) else f"{name[0]}-after{name[1]}")


@pytest.mark.parametrize("name", [_mark(n, RUN_XFAIL) for n in NAMES])
def test_batches_match_the_reference(style, name):
    got = run_of(style, name)["items"]
    want = recorded(name)["items"]
    got, want = without_pixels(got), without_pixels(want)
    assert got == want, first_difference(got, want)


@pytest.mark.parametrize("name", [_mark(n, RUN_XFAIL) for n in NAMES])
def test_pixels_match_the_reference(style, name):
    if not jpeg_like_pillow():
        pytest.xfail("this build decodes the fixture's JPEGs to pixels other than Pillow's (see docs/compat.md)")
    got = pixels_only(run_of(style, name)["items"])
    want = pixels_only(recorded(name)["items"])
    assert got == want, first_difference(got, want)


RESTORE_CASES = [
    (name, point) for name in NAMES for point in (r["after"] for r in recorded(name)["restores"])
]


@pytest.mark.parametrize("case", [_mark(c, RESTORE_XFAIL) for c in RESTORE_CASES])
def test_restores_continue_as_the_reference(style, case):
    name, point = case
    rec = recorded(name)
    config = style.CONFIGS[name]
    (restore,) = [r for r in rec["restores"] if r["after"] == point]
    want = style.continuation(rec, point, config.after)
    if restore["continues"]:
        assert restore["items"] == want
    (got,) = [r["items"] for r in run_of(style, name)["restores"] if r["after"] == point]
    if not jpeg_like_pillow():
        got, want = without_pixels(got), without_pixels(want)
    assert got == want, first_difference(got, want)
