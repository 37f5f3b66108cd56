"""A torch `IterableDataset` over an energon_rs dataset, for `torch.utils.data.DataLoader`.

    from torch.utils.data import DataLoader
    from energon_rs.torch import IterableDataset

    ds = get_train_dataset(..., worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2), ...)
    loader = DataLoader(IterableDataset(ds), batch_size=None, num_workers=2)

Each DataLoader worker process runs the pipeline of its own worker id, so with
`num_workers == worker_config.num_workers` the DataLoader's round robin yields exactly the
reference's order. Worker processes are forked: each builds its own Rust loader (threads never
cross a fork). `get_loader` runs the same pipelines in its own workers (processes or threads,
`worker_type`), with exact save and restore and arrays over shared memory instead of pickles.

torch is imported when this module is.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch.utils.data

from .loader import Dataset, _start_loader

__all__ = ["IterableDataset"]


class IterableDataset(torch.utils.data.IterableDataset):
    """Wraps an energon_rs `Dataset` for a torch `DataLoader` (use `batch_size=None`: the
    dataset batches)."""

    def __init__(self, dataset: Dataset, prefetch_factor: int = 2) -> None:
        super().__init__()
        self.dataset = dataset
        self.prefetch_factor = prefetch_factor

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        num_workers = self.dataset.worker_config.num_workers
        if info is None:
            # In the main process: the whole rank's pipeline(s), on Rust threads.
            return iter(_start_loader(self.dataset._spec, prefetch_factor=self.prefetch_factor))
        if info.num_workers != num_workers:
            raise ValueError(
                f"the DataLoader has {info.num_workers} workers but the dataset's worker_config "
                f"has num_workers={num_workers}; they must match"
            )
        return iter(
            _start_loader(self.dataset._spec, prefetch_factor=self.prefetch_factor, worker=info.id)
        )

    def __len__(self) -> int:
        return len(self.dataset)
