"""The default batches' structure (container types, lengths, sources, subflavors, restore keys)
against the reference's, recorded by tests/fixtures/tools/record_batch_shapes.py."""

from __future__ import annotations

import importlib.util
import json
import shutil

import energon_rs
from conftest import EXPECTED, FIXTURES, REF_SMALL, energon_cli


def recorder():
    path = FIXTURES / "tools" / "record_batch_shapes.py"
    spec = importlib.util.spec_from_file_location("record_batch_shapes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_batches_have_the_reference_structure(tmp_path):
    tools = recorder()
    copy = tmp_path / "ds"
    shutil.copytree(REF_SMALL, copy)
    for p in copy.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    yaml = tmp_path / "join.yaml"
    yaml.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    join:\n"
        f"      - path: {copy}\n      - path: {copy}\n        subflavors: {{side: second}}\n"
        "    joiner:\n      __module__: megatron.energon\n      __class__: CaptioningSample\n"
    )
    energon_cli("prepare", yaml)
    got = tools.shapes(energon_rs, REF_SMALL, yaml)
    want = {}
    for line in (EXPECTED / "batch-shapes.json").read_text().splitlines():
        want.update(json.loads(line))
    got = json.loads(json.dumps(got))
    for case in want:
        for field in want[case]:
            assert got[case][field] == want[case][field], (case, field)
