"""The global random generators of a worker (Python's `random`, numpy's and torch's), seeded,
saved and restored together, as `megatron.energon.rng.SystemRng` does: hooks marked
`@stateless(restore_seeds=True)` run with them seeded from the worker seed and the sample index,
so that random augmentations are the same when a sample is made again on restore."""

from __future__ import annotations

import hashlib
import random
from typing import Any

__all__ = ["SystemRng"]


def _numpy() -> Any:
    import numpy

    return numpy


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class SystemRng:
    """Seeds, saves and restores the global generators of `random`, numpy and (if installed)
    torch."""

    @staticmethod
    def seed(seed: int) -> None:
        """Seeds every global generator with `seed`."""
        torch = _torch()
        if torch is not None:
            torch.manual_seed(seed)
        _numpy().random.seed(seed)
        random.seed(seed)

    @staticmethod
    def save_state() -> tuple:
        """The state of every global generator."""
        torch = _torch()
        return (
            None if torch is None else torch.get_rng_state(),
            _numpy().random.get_state(),
            random.getstate(),
        )

    @staticmethod
    def restore_state(state: tuple) -> None:
        """Restores a state of `save_state`."""
        torch_state, numpy_state, random_state = state
        torch = _torch()
        if torch is not None and torch_state is not None:
            torch.set_rng_state(torch_state)
        _numpy().random.set_state(numpy_state)
        random.setstate(random_state)

    @staticmethod
    def get_seed_from_args(*args: Any) -> int:
        """A seed from the `str()` of the arguments: the first 4 bytes (big-endian) of the SHA-1
        of their `|`-joined text."""
        digest = hashlib.sha1("|".join(str(a) for a in args).encode("utf-8")).digest()
        return int.from_bytes(digest[:4], byteorder="big")

    @staticmethod
    def seed_args(*args: Any) -> None:
        """Seeds every global generator from the arguments (see `get_seed_from_args`)."""
        SystemRng.seed(SystemRng.get_seed_from_args(*args))
