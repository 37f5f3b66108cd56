"""Saving and restoring the state of every rank over `torch.distributed` (gloo), with `torchrun`
on this machine: `save_state_global` gathers the ranks' states on rank 0, `restore_state_global`
scatters them from there into fresh loaders, which continue exactly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REF_SMALL, torch_or_skip

SCRIPT = """
import json, sys
import torch.distributed as dist
import energon_rs

dist.init_process_group("gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
wc = energon_rs.WorkerConfig(rank=rank, world_size=world_size, num_workers=2)

def loader():
    ds = energon_rs.get_train_dataset(sys.argv[1], worker_config=wc, batch_size=4,
        shuffle_buffer_size=16, max_samples_per_sequence=None)
    return energon_rs.get_savable_loader(ds)

def keys(it, n):
    return [list(next(it).__key__) for _ in range(n)]

first = loader()
it = iter(first)
before = keys(it, 3)
states = first.save_state_global(0)
after = keys(it, 5)
first.close()
restored = loader()
restored.restore_state_global(states if rank == 0 else None, src_rank=0)
again = keys(iter(restored), 5)
restored.close()
with open(f"{sys.argv[2]}/rank{rank}.json", "w") as f:
    json.dump({"before": before, "after": after, "again": again,
               "gathered": None if states is None else len(states)}, f)
dist.destroy_process_group()
"""


@pytest.mark.parametrize("world_size", [2, 4])
def test_torchrun_ranks_save_and_restore_globally(tmp_path, world_size):
    torch_or_skip()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={world_size}", str(script), str(REF_SMALL), str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]
    for rank, r in enumerate(results):
        assert r["again"] == r["after"], f"rank {rank} did not continue exactly"
        assert r["gathered"] == (world_size if rank == 0 else None)
    # The ranks read different samples.
    firsts = [tuple(r["before"][0]) for r in results]
    assert len(set(firsts)) == world_size
