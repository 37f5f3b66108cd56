"""`loader.restore_sample(restore_key)`: any item made again from the `__restore_key__` the
loader gave it, with the reference's loader prefix `(wrapper, global_worker_id,
worker_item_index)`."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

import energon_rs


@dataclasses.dataclass(kw_only=True)
class Drawn(energon_rs.Sample):
    image: np.ndarray
    batch_index: int
    r: int


class Augment(energon_rs.TaskEncoder):
    @energon_rs.stateless(restore_seeds=True)
    def encode_sample(self, sample):
        return Drawn.derive_from(
            sample, image=sample.image, batch_index=self.current_batch_index, r=random.randint(0, 1000)
        )


class PyBatch(Augment):
    def batch(self, samples):
        return {"__restore_key__": None, "keys": [s.__key__ for s in samples], "r": [s.r for s in samples]}


def dataset(ref_small, rank, world_size, nw, task_encoder, batch_size=3):
    wc = energon_rs.WorkerConfig(rank=rank, world_size=world_size, num_workers=nw)
    return energon_rs.get_train_dataset(
        ref_small, worker_config=wc, batch_size=batch_size, shuffle_buffer_size=10,
        max_samples_per_sequence=5, task_encoder=task_encoder,
    )


@pytest.mark.parametrize("rank,world_size,nw,savable", [(0, 1, 0, False), (1, 2, 2, True), (1, 2, 2, False)])
def test_items_carry_the_loader_prefix_and_are_made_again_from_it(ref_small, rank, world_size, nw, savable):
    ds = dataset(ref_small, rank, world_size, nw, Augment())
    loader = energon_rs.get_savable_loader(ds) if savable else energon_rs.get_loader(ds)
    items = [b for _, b in zip(range(8), loader)]
    wrapper = "SavableDatasetWrapper" if savable and nw else "SimpleSavableDatasetWrapper"
    n_local = max(nw, 1)
    for i, batch in enumerate(items):
        # The reference's global worker id is rank * num_workers + worker (0 without workers).
        worker = rank * nw + i % n_local
        assert batch.__restore_key__[:3] == (wrapper, worker, i // n_local)
        # current_batch_index counts the rank's items: item_index * max(1, nw) + worker.
        assert batch.batch_index == [i] * 3
    assert loader.can_restore_sample()
    # Backwards, so that nothing depends on the loader's position.
    for batch in reversed(items):
        again = loader.restore_sample(batch.__restore_key__)
        assert again.__restore_key__ == batch.__restore_key__
        assert again.__key__ == batch.__key__
        assert again.batch_index == batch.batch_index and again.r == batch.r
        np.testing.assert_array_equal(np.asarray(again.image), np.asarray(batch.image))
    # The loader continues where it was.
    assert next(iter(loader)).__restore_key__[:3][2] == 8 // n_local
    loader.close()


def test_python_batches_get_the_batch_key_and_are_made_again(ref_small):
    loader = energon_rs.get_loader(dataset(ref_small, 0, 1, 2, PyBatch()))
    items = [b for _, b in zip(range(4), loader)]
    for batch in items:
        assert batch["__restore_key__"][3] in ("BatchDataset", "MapDataset")
        assert loader.restore_sample(batch["__restore_key__"]) == batch
    loader.close()


def test_samples_are_made_again_and_restore_after_a_saved_state(ref_small):
    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=2)
    make = lambda: energon_rs.get_savable_loader(  # noqa: E731
        energon_rs.get_train_dataset(
            ref_small, worker_config=wc, batch_size=None, shuffle_buffer_size=10,
            max_samples_per_sequence=None, task_encoder=Augment(),
        )
    )
    first = make()
    it = iter(first)
    [next(it) for _ in range(5)]
    state = first.save_state_rank()
    after = [next(it) for _ in range(6)]
    first.close()
    restored = make()
    restored.restore_state_rank(state)
    again = [s for _, s in zip(range(6), restored)]
    # The worker item indices continue over the restore.
    assert [s.__restore_key__ for s in again] == [s.__restore_key__ for s in after]
    for s in after:
        assert restored.restore_sample(s.__restore_key__).r == s.r
    restored.close()


def test_keys_of_other_workers_or_forms_are_refused(ref_small):
    loader = energon_rs.get_loader(dataset(ref_small, 0, 2, 2, Augment()))
    batch = next(iter(loader))
    key = batch.__restore_key__
    # Global worker 2 is rank 1's.
    with pytest.raises(energon_rs.CheckpointError, match="not one of a loader of rank 0 with 2 workers"):
        loader.restore_sample((key[0], 2, *key[2:]))
    with pytest.raises(energon_rs.CheckpointError, match="not one of a loader"):
        loader.restore_sample(key[3:])
    with pytest.raises(TypeError, match="a restore key is a tuple"):
        loader.restore_sample((key[0], 0, 0, 1.5))
    loader.close()
