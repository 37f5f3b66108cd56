"""Saving and restoring the state of every rank over `torch.distributed` (gloo), with `torchrun`
on this machine: `save_state_global` gathers the ranks' states on rank 0, `restore_state_global`
scatters them from there into fresh loaders, which continue exactly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import energon_rs

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


# One pass (no repetition) over the fixture on the shape the arguments give.
ONE_PASS = """
import json, sys
import torch, torch.distributed as dist
import energon_rs

dist.init_process_group("gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
wc = energon_rs.WorkerConfig(rank=rank, world_size=world_size, num_workers=int(sys.argv[3]))
ds = energon_rs.get_train_dataset(sys.argv[1], worker_config=wc, batch_size=4,
    shuffle_buffer_size=8, max_samples_per_sequence=None, repeat=False)
loader = energon_rs.get_savable_loader(ds)
"""

SAVE = ONE_PASS + """it = iter(loader)
keys = [k for _ in range(3 + 4 * rank) for k in next(it).__key__]
states = loader.save_state_global(0)
if rank == 0:
    torch.save(states, f"{sys.argv[2]}/states.pt")
loader.close()
with open(f"{sys.argv[2]}/before{rank}.json", "w") as f:
    json.dump(keys, f)
dist.destroy_process_group()
"""

RESUME = ONE_PASS + """states = torch.load(f"{sys.argv[2]}/states.pt", weights_only=True) if rank == 0 else None
loader.restore_state_global(states, src_rank=0)
keys = [k for batch in loader for k in batch.__key__]
loader.close()
with open(f"{sys.argv[2]}/after{rank}.json", "w") as f:
    json.dump(keys, f)
dist.destroy_process_group()
"""


def _torchrun(tmp_path, script: str, name: str, nproc: int, num_workers: int) -> None:
    path = tmp_path / name
    path.write_text(script)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", str(path), str(REF_SMALL), str(tmp_path),
           str(num_workers)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]


def test_torchrun_resumes_two_ranks_of_two_workers_on_three_ranks_of_one(tmp_path):
    torch_or_skip()
    _torchrun(tmp_path, SAVE, "save.py", 2, 2)
    _torchrun(tmp_path, RESUME, "resume.py", 3, 1)
    seen = []
    for name in ["before0", "before1", "after0", "after1", "after2"]:
        seen += json.loads((tmp_path / f"{name}.json").read_text())
    # One pass over the 200 samples: those before the save and the rest of the pass after it,
    # each once.
    assert len(seen) == 200 and len(set(seen)) == 200
    assert all(json.loads((tmp_path / f"after{r}.json").read_text()) for r in range(3))


def test_a_state_of_another_job_is_refused_by_restore_state_rank():
    torch_or_skip()
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = energon_rs.get_train_dataset(str(REF_SMALL), worker_config=wc, batch_size=4,
                                      shuffle_buffer_size=None, max_samples_per_sequence=None)
    loader = energon_rs.get_savable_loader(ds)
    next(iter(loader))
    state = loader.save_state_rank()
    loader.close()
    other = energon_rs.get_savable_loader(energon_rs.get_train_dataset(
        str(REF_SMALL), worker_config=energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=1),
        batch_size=4, shuffle_buffer_size=None, max_samples_per_sequence=None))
    with pytest.raises(energon_rs.CheckpointError, match="restore_state_global"):
        other.restore_state_rank(state)
    # restore_state_global redistributes the list of all ranks' states.
    other.restore_state_global([state])
    assert len(next(iter(other)).__key__) == 4
    other.close()
