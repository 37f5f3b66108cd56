"""Shared fixtures: the reference's small dataset and its recorded orders, reached relative to
the repository (CI clones the repository with `shared/` beside it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO.parent / "shared" / "fixtures"
REF_SMALL = FIXTURES / "energon-ref-small"
EXPECTED = FIXTURES / "energon-ref-small.expected"


def torch_or_skip():
    """torch, or a skip where it is not installed; CI sets ENERGON_REQUIRE_TORCH=1 so that a
    missing torch fails instead."""
    try:
        import torch
    except ImportError:
        if os.environ.get("ENERGON_REQUIRE_TORCH") == "1":
            raise
        pytest.skip("torch is not installed")
    return torch


@pytest.fixture
def ref_small() -> Path:
    return REF_SMALL


@pytest.fixture
def ref_small_copy(tmp_path: Path) -> Path:
    """A writable copy of the reference dataset."""
    dst = tmp_path / "energon-ref-small"
    shutil.copytree(REF_SMALL, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@pytest.fixture
def wc2():
    import energon_rs

    return energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
