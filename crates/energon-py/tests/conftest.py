"""Test fixtures: the reference's small dataset and its recorded orders, vendored in the
repository under `tests/fixtures/`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
REF_SMALL = FIXTURES / "energon-ref-small"
EXPECTED = FIXTURES / "energon-ref-small.expected"


def energon_bin() -> Path:
    """The `energon` command of this repository: `$ENERGON_BIN`, else the one cargo built under
    `target/` (CI builds it before the Python tests), else built now."""
    if os.environ.get("ENERGON_BIN"):
        return Path(os.environ["ENERGON_BIN"])
    for profile in ("debug", "release"):
        candidate = REPO / "target" / profile / "energon"
        if candidate.is_file():
            return candidate
    subprocess.run(["cargo", "build", "-q", "-p", "energon-cli"], cwd=REPO, check=True)
    return REPO / "target" / "debug" / "energon"


def energon_cli(*args) -> str:
    """Runs `energon ARGS...`; fails the test with its output if it fails."""
    res = subprocess.run(
        [str(energon_bin()), *map(str, args)], capture_output=True, text=True, timeout=600
    )
    if res.returncode != 0:
        pytest.fail(f"energon {' '.join(map(str, args))} failed:\n{res.stdout}\n{res.stderr}")
    return res.stdout


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
