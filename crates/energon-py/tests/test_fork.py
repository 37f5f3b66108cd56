"""Fork safety: torch DataLoader workers are forked processes; each builds its own Rust loader."""

from __future__ import annotations

import multiprocessing

import pytest

import energon_rs
from conftest import EXPECTED, REF_SMALL, torch_or_skip

NAME = "keys-ws1-r0-nw2-bs4-sb16-s0.txt"


def dataset():
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    return energon_rs.get_train_dataset(
        REF_SMALL, worker_config=wc, batch_size=4, shuffle_buffer_size=16, max_samples_per_sequence=None
    )


_PARENT = None


def child(worker):
    """In a forked child: the loader inherited from the parent refuses to run; a new one for
    this worker works."""
    try:
        next(_PARENT)
        inherited_ok = True
    except energon_rs.LoaderError:
        inherited_ok = False
    from energon_rs import _native

    it = _native._Loader(dataset()._spec, worker=worker)
    keys = []
    for _ in range(5):
        keys.extend(next(it).__key__)
    return inherited_ok, keys


def test_forked_children_build_their_own_loaders():
    # The parent starts a loader first, so that threads exist at fork time.
    global _PARENT
    loader = energon_rs.get_loader(dataset())
    parent = iter(loader)
    parent_keys = list(next(parent).__key__)
    _PARENT = loader._native
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map(child, [0, 1])
    assert [ok for ok, _ in results] == [False, False]
    want = (EXPECTED / NAME).read_text().split()
    # Round robin of the two workers' batches gives the reference's order.
    got = [k for b in range(5) for w in range(2) for k in results[w][1][4 * b : 4 * b + 4]]
    assert got == want[:40]
    # The parent's loader is unaffected.
    assert parent_keys == want[:4]
    assert list(next(parent).__key__) == want[4:8]


def test_torch_dataloader_with_two_worker_processes():
    torch = torch_or_skip()
    from energon_rs.torch import IterableDataset

    loader = torch.utils.data.DataLoader(IterableDataset(dataset()), batch_size=None, num_workers=2)
    want = (EXPECTED / NAME).read_text().split()
    keys = []
    for batch in loader:
        keys.extend(batch.__key__)
        if len(keys) >= 80:
            break
    assert keys == want[:80]


def test_torch_dataloader_rejects_a_worker_count_mismatch():
    torch = torch_or_skip()
    from energon_rs.torch import IterableDataset

    loader = torch.utils.data.DataLoader(IterableDataset(dataset()), batch_size=None, num_workers=1)
    with pytest.raises(Exception, match="must match"):
        next(iter(loader))
