"""Worker debug logs (`worker_debug_path`, `worker_log_level`) and `analyze-debug`."""

from __future__ import annotations

import json

import pytest

import energon_rs
from energon_rs.cli import analyze_debug_command

click_testing = pytest.importorskip("click.testing")


def test_a_loader_logs_what_it_hands_out_and_analyze_debug_summarizes_it(ref_small, tmp_path):
    logs = tmp_path / "logs"
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2, worker_log_level=1,
                                 worker_debug_path=str(logs / "{worker_id}.jsonl"))
    loader = energon_rs.get_savable_loader(
        energon_rs.get_val_dataset(ref_small, split_part="train", batch_size=20, worker_config=wc)
    )
    passes = [[list(batch.__key__) for batch in loader] for _ in range(2)]
    loader.close()
    assert sorted(p.name for p in logs.iterdir()) == ["0.jsonl", "1.jsonl", "2.jsonl"]
    lines = [json.loads(line) for line in (logs / "0.jsonl").read_text().splitlines()]
    assert lines[0]["t"] == "SavableLoader.__init__" and lines[0]["config"]["training"] is False
    yields = [line for line in lines if line["t"] == "SavableDataLoader.yield"]
    assert [y["keys"] for y in yields] == passes[0] + passes[1]
    assert [y["idx"] for y in yields] == list(range(10)) * 2
    assert [y["global_idx"] for y in yields] == list(range(20))
    assert [y["worker_id"] for y in yields[:4]] == [0, 1, 0, 1]
    assert [line["t"] for line in lines].count("SavableDataLoader.StopIteration") == 2
    worker1 = [json.loads(line) for line in (logs / "2.jsonl").read_text().splitlines()]
    assert [w["keys"] for w in worker1] == [y["keys"] for y in yields if y["worker_id"] == 1]

    heatmap = tmp_path / "heatmap.png"
    res = click_testing.CliRunner().invoke(
        analyze_debug_command,
        [str(logs), "--include-modality", "train,val", "--heatmap-path", str(heatmap)],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    assert "Analyzing 3 logs" in res.stdout
    assert "Found 200 unique sample keys, 20 steps" in res.stdout
    from PIL import Image

    image = Image.open(heatmap)
    assert image.size[0] * 10 == image.size[1]  # 20 steps by 200 keys, scaled alike
    res = click_testing.CliRunner().invoke(analyze_debug_command, [str(logs), "--heatmap-path",
                                                                    str(heatmap)])
    assert "Found 0 unique sample keys, 0 steps" in res.stdout  # only train loaders by default


def test_batch_keys_as_the_reference_finds_them():
    from dataclasses import dataclass

    from energon_rs.sample_utils import default_get_batch_keys

    @dataclass
    class B:
        __key__: list

    assert default_get_batch_keys(B(["a", "b"])) == ["a", "b"]
    assert default_get_batch_keys([{"__key__": "k"}]) == ["k"]
    assert default_get_batch_keys({"keys": ["x"]}) == ["x"]
    assert default_get_batch_keys({"other": 1}) is None
