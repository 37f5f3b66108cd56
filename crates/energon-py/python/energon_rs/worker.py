"""`WorkerConfig`: which rank and how many loader workers, as in `megatron.energon`."""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import _native

__all__ = ["WorkerConfig", "log_exception", "reraise_exception"]

_log = logging.getLogger("energon_rs")


def log_exception(exc: BaseException, sample: Any = None, sources: Any = None) -> None:
    """The default error handler: logs the exception with the sample's sources, and the
    pipeline goes on without the sample."""
    _log.warning(
        "sample skipped after an error (sources: %s):\n%s",
        sources,
        "".join(traceback.format_exception(exc)),
    )


def reraise_exception(exc: BaseException, sample: Any = None, sources: Any = None) -> None:
    """An error handler that re-raises: the iteration fails."""
    raise exc


@dataclass(eq=False)
class WorkerConfig:
    """The data-parallel rank, the world size and the loader workers per rank.

    `num_workers=0` loads in the calling process (one pipeline); `N > 0` runs N worker pipelines
    (threads of the Rust loader with `get_loader`, or processes of a torch `DataLoader` with
    `energon_rs.torch`). Two configs are equal when rank, world size and number of workers are.
    """

    rank: int
    world_size: int
    num_workers: int
    data_parallel_group: Any = None
    seed_offset: int = 0
    worker_debug_path: Optional[str] = None
    worker_log_level: int = 0
    global_error_handler: Callable[..., None] = field(default=log_exception)
    restore_error_handler: Callable[..., None] = field(default=reraise_exception)

    def __post_init__(self) -> None:
        # Validated by the Rust core (rank below world size, positive world size).
        _native.worker_seed(self.rank, self.world_size, self.num_workers, self.seed_offset, 0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WorkerConfig):
            return NotImplemented
        return (self.rank, self.world_size, self.num_workers) == (
            other.rank,
            other.world_size,
            other.num_workers,
        )

    def __hash__(self) -> int:
        return hash((self.rank, self.world_size, self.num_workers))

    @staticmethod
    def default_worker_config(
        num_workers: int = 4, data_parallel_group: Any = None
    ) -> "WorkerConfig":
        """Rank and world size of `torch.distributed` (relative to `data_parallel_group`) when
        it is initialized, else rank 0 of 1."""
        rank, world_size = 0, 1
        try:
            import torch.distributed as dist
        except ImportError:
            dist = None  # type: ignore[assignment]
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank = dist.get_rank(data_parallel_group)
            world_size = dist.get_world_size(data_parallel_group)
        return WorkerConfig(
            rank=rank,
            world_size=world_size,
            num_workers=num_workers,
            data_parallel_group=data_parallel_group,
        )

    def config(self) -> dict[str, Any]:
        """The settings that define the data order: rank, world size, workers, and the size of
        the data-parallel group (`None` without one)."""
        group = self.data_parallel_group
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "num_workers": self.num_workers,
            "data_parallel_group": group.size() if group else None,
        }

    def should_log(self, level: int) -> bool:
        """Whether worker debug messages of `level` are recorded (`worker_log_level`; level 1:
        every item a loader hands out, see `energon_rs.debug_log`)."""
        return level <= self.worker_log_level

    def worker_seed(self, local_worker_id: int = 0) -> int:
        """The seed of a local worker's random streams (the reference's worker seed)."""
        return _native.worker_seed(
            self.rank, self.world_size, self.num_workers, self.seed_offset, local_worker_id
        )

    def global_worker_id(self, local_worker_id: int = 0) -> int:
        """`rank * num_workers + local_worker_id` (`rank` without workers)."""
        if self.num_workers == 0:
            return self.rank
        return self.rank * self.num_workers + local_worker_id

    def global_rank(self) -> int:
        """The global rank of this data-parallel rank."""
        if self.data_parallel_group is None:
            return self.rank
        import torch.distributed as dist

        return dist.get_global_rank(self.data_parallel_group, self.rank)
