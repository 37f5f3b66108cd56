"""Datasets and loaders: `get_train_dataset`, `get_val_dataset`, `get_loader`,
`get_savable_loader`, with the reference's names and defaults.

A dataset is cheap: it holds the opened dataset and the pipeline settings. A loader runs the
Rust pipeline (with `worker_config.num_workers` workers: threads, or processes of their own, see
`energon_rs.workers`) and yields samples or batches in exactly the reference's order. Iterating never holds the GIL while waiting, and Ctrl-C
interrupts a wait.
"""

from __future__ import annotations

import atexit
import os
import sys
import warnings
import weakref
from typing import Any, Iterator, Optional, Union

from . import _native
from . import av as _av
from .debug_log import DebugLog
from .load import _LeafDataset, _LoadedMetadataset, load_dataset
from .sample import _pin_memory
from .task_encoder import DefaultTaskEncoder, TaskEncoder, _hooks
from .worker import WorkerConfig
from .workers import ProcessWorkers, start_method

__all__ = [
    "BasicDataLoader",
    "Dataset",
    "LoadedDataset",
    "LoadedDatasetList",
    "SavableDataLoader",
    "SavableDataset",
    "get_loader",
    "get_savable_loader",
    "get_train_dataset",
    "get_val_dataset",
    "get_val_datasets",
    "LimitDataset",
    "RepeatDataset",
    "load_dataset",
]

_STATE_FORMAT = "energon-rs-loader-state"

#: The native loaders alive in this process, stopped at exit: their worker threads may be inside
#: Python hooks, which must not run while the interpreter shuts down.
_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _start_loader(spec: Any, **kwargs: Any) -> Any:
    """Starts a native loader (its threads), registered to be stopped at exit."""
    _av.preload()
    loader = _native._Loader(spec, **kwargs)
    _LIVE.add(loader)
    return loader


@atexit.register
def _stop_all() -> None:
    for loader in list(_LIVE):
        loader.close()

_STATE_VERSION = 2

#: Whether datasets hand tensors out as torch tensors when `torch` is not given (`False`:
#: numpy arrays). `energon_rs.compat.install()` sets it, as the reference gives torch tensors.
DEFAULT_TORCH = False


class SavableDataset:
    """Base of the datasets whose loader can save and restore its position: every energon_rs
    pipeline."""


class Dataset(SavableDataset):
    """A dataset with its pipeline settings, as `get_train_dataset` / `get_val_dataset` make it.

    Iterating it directly runs a loader in this process; `get_loader` is the usual way."""

    def __init__(self, spec: Any, worker_config: WorkerConfig, config: dict) -> None:
        self._spec = spec
        self.worker_config = worker_config
        self._config = config
        self._arguments: dict = {}
        self._hooks: Any = None

    def _recipe(self) -> tuple:
        """How a worker process that did not fork (spawn, forkserver) makes this dataset again:
        a picklable function and its argument."""
        if not self._arguments:
            raise ValueError(
                f"a worker process that does not fork cannot make this {type(self).__name__} "
                "again: use worker_type='fork'"
            )
        return (_dataset_of, self._arguments)

    def _with(self, **changes: Any) -> "Dataset":
        """The same dataset with some of its settings changed (a new pipeline)."""
        arguments = {**self._arguments, **changes}
        arguments["kwargs"] = dict(arguments["kwargs"])
        return _dataset(**arguments)

    @property
    def sample_type(self) -> Optional[str]:
        """The reference's class name of the samples (`CaptioningSample`, ...); `None` for a
        metadataset whose datasets yield different types."""
        return self._spec.sample_type

    @property
    def is_metadataset(self) -> bool:
        """Whether the dataset is a metadataset (a blend, an epochized blend or a join)."""
        return self._spec.is_metadataset

    def worker_sample_counts(self) -> list[int]:
        """Samples each local worker of this rank reads in one pass."""
        return self._spec.worker_sample_counts()

    def __len__(self) -> int:
        """The items of one pass of this rank: batches when batching, else samples."""
        return self.items_per_pass()

    def items_per_pass(self) -> int:
        """The items one pass of this rank yields: per worker, its samples in batches of
        `batch_size` (the last one shorter unless `batch_drop_last`), else its samples."""
        if self._config.get("virtual_epoch_length"):
            return self._config["virtual_epoch_length"]
        counts = self.worker_sample_counts()
        batch_size = self._config.get("batch_size")
        if not batch_size:
            items = sum(counts)
        elif self._config.get("batch_drop_last"):
            items = sum(n // batch_size for n in counts)
        else:
            items = sum(-(-n // batch_size) for n in counts)
        limit = self._config.get("limit")
        return items if limit is None else min(items, limit)

    def config(self) -> dict:
        """The settings the dataset was built with."""
        return dict(self._config)

    def __iter__(self) -> Iterator[Any]:
        return iter(_start_loader(self._spec))

    def __repr__(self) -> str:
        return f"Dataset({self._config!r})"


def _dataset_of(arguments: dict) -> "Dataset":
    """The dataset of `get_train_dataset` / `get_val_dataset` arguments (`Dataset._recipe`)."""
    return _dataset(**arguments)


def _dataset(
    path: Union[str, os.PathLike],
    *,
    split_part: str,
    worker_config: WorkerConfig,
    training: bool,
    batch_size: Optional[int],
    batch_drop_last: bool,
    packing_buffer_size: Optional[int],
    shuffle_buffer_size: Optional[int],
    max_samples_per_sequence: Optional[int],
    virtual_epoch_length: int,
    limit: Optional[int],
    shuffle_over_epochs_multiplier: Optional[int],
    task_encoder: TaskEncoder,
    torch: Optional[bool],
    kwargs: dict,
    repeat: Optional[bool] = None,
    leaf: Optional[int] = None,
) -> Dataset:
    if worker_config is None:
        raise ValueError("worker_config is required")
    if torch is None:
        torch = DEFAULT_TORCH
    arguments = dict(locals())
    arguments["kwargs"] = dict(kwargs)
    decoder = task_encoder.decoder
    for name in ("auto_decode", "image_decode", "av_decode", "video_decode_audio", "handler"):
        if name in kwargs:
            warnings.warn(f"{name} is deprecated; set task_encoder.decoder", DeprecationWarning)
    legacy = {n: kwargs.pop(n) for n in ("image_decode", "av_decode", "video_decode_audio") if n in kwargs}
    if legacy:
        import dataclasses

        from .task_encoder import SampleDecoder

        decoder = dataclasses.replace(decoder or SampleDecoder(), **legacy)
    if kwargs.pop("auto_decode", True) is False:
        decoder = None
    kwargs.pop("handler", None)
    split_config = kwargs.pop("split_config", None)
    dataset_config = kwargs.pop("dataset_config", None)
    parallel_shard_iters = kwargs.pop("parallel_shard_iters", None)
    shuffle_over_epochs = kwargs.pop("shuffle_over_epochs", None)
    kwargs.pop("sample_type", None)
    if kwargs:
        raise TypeError(f"unexpected keyword arguments: {sorted(kwargs)}")
    if shuffle_over_epochs is None:
        shuffle_over_epochs = shuffle_over_epochs_multiplier if training else 1
    hooks = _hooks(task_encoder, worker_config, torch)
    spec = _native._DatasetSpec(
        os.fspath(path),
        split_part=split_part,
        rank=worker_config.rank,
        world_size=worker_config.world_size,
        num_workers=worker_config.num_workers,
        seed_offset=worker_config.seed_offset,
        training=training,
        batch_size=batch_size,
        drop_last=batch_drop_last,
        shuffle_buffer_size=shuffle_buffer_size,
        max_samples_per_sequence=max_samples_per_sequence,
        parallel_shard_iters=parallel_shard_iters,
        shuffle_over_epochs=shuffle_over_epochs,
        virtual_epoch_length=virtual_epoch_length,
        limit=limit,
        packing_buffer_size=packing_buffer_size,
        repeat=repeat,
        leaf=leaf,
        image_decode=None if decoder is None else decoder.image_decode,
        guess_content=False if decoder is None else decoder.guess_content,
        av_decode="AVDecoder" if decoder is None else decoder.av_decode,
        video_decode_audio=False if decoder is None else decoder.video_decode_audio,
        split_config=split_config,
        dataset_config=dataset_config,
        hooks=hooks,
    )
    config = {
        "path": os.fspath(path),
        "split_part": split_part,
        "training": training,
        "batch_size": batch_size,
        "batch_drop_last": batch_drop_last,
        "shuffle_buffer_size": shuffle_buffer_size,
        "max_samples_per_sequence": max_samples_per_sequence,
        "parallel_shard_iters": parallel_shard_iters,
        "shuffle_over_epochs": shuffle_over_epochs,
        "virtual_epoch_length": virtual_epoch_length,
        "limit": limit,
        "packing_buffer_size": packing_buffer_size,
        "repeat": training if repeat is None else repeat,
        "leaf": leaf,
        "rank": worker_config.rank,
        "world_size": worker_config.world_size,
        "num_workers": worker_config.num_workers,
        "seed_offset": worker_config.seed_offset,
        "torch": torch,
    }
    res = Dataset(spec, worker_config, config)
    res._arguments = arguments
    res._hooks = hooks
    return res


def get_train_dataset(
    path: Union[str, os.PathLike],
    *,
    split_part: str = "train",
    worker_config: WorkerConfig,
    batch_size: Optional[int],
    batch_drop_last: bool = False,
    packing_buffer_size: Optional[int] = None,
    shuffle_buffer_size: Optional[int],
    max_samples_per_sequence: Optional[int],
    virtual_epoch_length: int = 0,
    shuffle_over_epochs_multiplier: Optional[int] = 1,
    task_encoder: Optional[TaskEncoder] = None,
    repeat: bool = True,
    torch: Optional[bool] = None,
    **kwargs: Any,
) -> Dataset:
    """The training pipeline of a prepared dataset, a JSONL file or a metadataset: shuffled
    slices repeated forever (a metadataset's datasets blended by weight or by repetitions, as
    its `blend` / `blend_epochized` say), the shuffle buffer, the task encoder, batches.

    `torch=True` hands tensors out as `torch.Tensor`s (sharing the Rust buffers) instead of
    numpy arrays (`None`: `energon_rs.loader.DEFAULT_TORCH`)."""
    return _dataset(
        path,
        split_part=split_part,
        worker_config=worker_config,
        training=True,
        batch_size=batch_size,
        batch_drop_last=batch_drop_last,
        packing_buffer_size=packing_buffer_size,
        shuffle_buffer_size=shuffle_buffer_size,
        max_samples_per_sequence=max_samples_per_sequence,
        virtual_epoch_length=virtual_epoch_length,
        limit=None,
        shuffle_over_epochs_multiplier=shuffle_over_epochs_multiplier,
        task_encoder=task_encoder if task_encoder is not None else DefaultTaskEncoder(),
        torch=torch,
        kwargs=kwargs,
        repeat=repeat,
    )


def get_val_dataset(
    path: Union[str, os.PathLike],
    *,
    split_part: str = "val",
    worker_config: WorkerConfig,
    batch_size: Optional[int],
    batch_drop_last: bool = False,
    packing_buffer_size: Optional[int] = None,
    limit: Optional[int] = None,
    task_encoder: Optional[TaskEncoder] = None,
    torch: Optional[bool] = None,
    **kwargs: Any,
) -> Dataset:
    """The validation pipeline: slices in order, one pass, no shuffling (a metadataset's
    datasets one after the other)."""
    return _dataset(
        path,
        split_part=split_part,
        worker_config=worker_config,
        training=False,
        batch_size=batch_size,
        batch_drop_last=batch_drop_last,
        packing_buffer_size=packing_buffer_size,
        shuffle_buffer_size=None,
        max_samples_per_sequence=kwargs.pop("max_samples_per_sequence", None),
        virtual_epoch_length=0,
        limit=limit,
        shuffle_over_epochs_multiplier=None,
        task_encoder=task_encoder if task_encoder is not None else DefaultTaskEncoder(),
        torch=torch,
        kwargs=kwargs,
    )


def get_val_datasets(
    path: Union[str, os.PathLike],
    *,
    split_part: str = "val",
    worker_config: WorkerConfig,
    batch_size: Optional[int],
    batch_drop_last: bool = False,
    packing_buffer_size: Optional[int] = None,
    limit: Optional[int] = None,
    task_encoder: Optional[TaskEncoder] = None,
    torch: Optional[bool] = None,
    **kwargs: Any,
) -> list[tuple[Dataset, "_LeafDataset"]]:
    """One validation pipeline per dataset of the split (for per-dataset metrics): a list of
    `(dataset, source)`, where `source` describes the dataset as `load_dataset(...).get_datasets`
    lists it. A metadataset's datasets keep their subflavors, auxiliary sources and joins."""
    loaded = load_dataset(path)
    listed = loaded.get_datasets(training=False, split_part=split_part)
    whole = get_val_dataset(
        path,
        split_part=split_part,
        worker_config=worker_config,
        batch_size=batch_size,
        batch_drop_last=batch_drop_last,
        packing_buffer_size=packing_buffer_size,
        limit=limit,
        task_encoder=task_encoder,
        torch=torch,
        **kwargs,
    )
    if not isinstance(loaded, _LoadedMetadataset):
        return [(whole, listed.datasets[0].dataset)]
    return [(whole._with(leaf=i), entry.dataset) for i, entry in enumerate(listed.datasets)]


def RepeatDataset(  # noqa: N802 (the reference's class name)
    dataset: Dataset, repeats: Optional[float] = None, *, worker_config: Any = None, **kwargs: Any
) -> Dataset:
    """The dataset repeated forever, as the reference's `RepeatDataset` around a pipeline (a
    validation dataset then never ends a pass unless a `LimitDataset` cuts it); a validation
    metadataset (or one dataset of it, from `get_val_datasets`) repeats its datasets one after
    the other."""
    if repeats is not None:
        raise NotImplementedError("RepeatDataset with a number of repeats is not supported by energon_rs yet")
    return dataset._with(repeat=True)


def LimitDataset(  # noqa: N802 (the reference's class name)
    dataset: Dataset,
    length: int,
    *,
    worker_config: Any = None,
    reset_after_epoch: bool = False,
    **kwargs: Any,
) -> Dataset:
    """At most `length` items of the rank per pass (validation datasets), as the reference's
    `LimitDataset`; each pass starts the dataset again from its beginning."""
    if dataset._config["training"]:
        raise NotImplementedError("LimitDataset around a training dataset is not supported by energon_rs yet (use virtual_epoch_length)")
    if not reset_after_epoch:
        raise NotImplementedError("LimitDataset(reset_after_epoch=False) is not supported by energon_rs yet: each pass starts the dataset again")
    return dataset._with(limit=length)


def _hands_out_torch(dataset: Dataset) -> bool:
    """Whether `dataset` (every part of a combined one) hands out torch tensors."""
    parts = getattr(dataset, "datasets", None) or [dataset]
    return all(d._config.get("torch") for d in parts)


def _torch_convert(dataset: Dataset) -> Any:
    """torch's `default_convert` where `dataset` hands out torch tensors, else None: the
    reference's torch DataLoader (batch_size=None) passes every item through it, so a mapping's
    tuples become lists and numpy arrays tensors; sample and batch objects pass unchanged."""
    if not _hands_out_torch(dataset):
        return None
    from torch.utils.data import default_convert

    return default_convert


def _pins_memory(dataset: Dataset) -> bool:
    """Whether a loader of `dataset` pins its items' memory: they hold torch tensors and torch
    sees a CUDA device (torch's DataLoader pins only then)."""
    if not _hands_out_torch(dataset):
        return False
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_available()


class BasicDataLoader:
    """Iterates a dataset with `worker_config.num_workers` workers: threads of this process,
    processes of their own, or in turn in one thread (`worker_type`, see `energon_rs.workers`).
    Whatever the worker type, the items, their order and restore keys, and the saved states are
    the same.

    The loader starts at the first iteration; later `iter()` calls continue the same stream (as
    the reference's persistent workers do): a training loader never ends, a validation loader
    (or one with `virtual_epoch_length`) ends each pass, and iterating again gives the next."""

    _savable = False

    def __init__(
        self,
        dataset: Dataset,
        prefetch_factor: int = 2,
        watchdog: Any = None,
        worker_type: Optional[str] = None,
    ) -> None:
        self.dataset = dataset
        self.worker_config = dataset.worker_config
        self.worker_type = _worker_type(dataset, worker_type)
        self._prefetch_factor = prefetch_factor
        self._native: Any = None
        self._workers: Optional[ProcessWorkers] = None
        self._waiting: Any = None
        self._restore: Optional[bytes] = None
        self._watchdog = watchdog
        #: Whether items come out with their torch tensors in pinned memory: torch tensors and
        #: CUDA at hand, as the reference's torch DataLoader (`pin_memory=True`) pins them.
        self.pin_memory = _pins_memory(dataset)
        self._convert = _torch_convert(dataset)
        kind = "SavableLoader" if self._savable else "BasicDataLoader"
        self._debug = DebugLog.of(self.worker_config, kind, dataset.config())

    def _loader(self) -> Any:
        if self._native is None:
            options: dict = {}
            method = start_method(self.worker_type)
            if method is not None:
                # The native loader keeps them (also when only its iterator is held) and ends them.
                self._workers = ProcessWorkers(self.dataset, method, self._prefetch_factor, self._restore)
                options["processes"] = self._workers
            elif self.worker_type == "main":
                options["inline"] = True
            try:
                self._native = _start_loader(
                    self.dataset._spec,
                    prefetch_factor=self._prefetch_factor,
                    savable=self._savable,
                    restore=self._restore,
                    **options,
                )
            except BaseException:
                self._close_workers()
                raise
            # Taken now: the loader cannot be read while an iteration waits in it.
            self._waiting = self._native.waiting
        return self._native

    def _close_workers(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    def __iter__(self) -> Iterator[Any]:
        items = iter(self._loader())
        if self._convert is not None:
            items = map(self._convert, items)
        if self.pin_memory:
            items = map(_pin_memory, items)
        if self._watchdog is not None:
            self._watchdog.workers = self._workers
            self._watchdog.waiting = self._waiting
        if self._debug is not None:
            items = self._debug.iterate(items)
        return items if self._watchdog is None else self._watchdog.watch(items)

    def __len__(self) -> int:
        """The items of one pass of this rank: batches when batching, else samples."""
        return self.dataset.items_per_pass()

    def config(self) -> dict:
        """The loader's settings with the reference's keys (`type`, `num_workers`,
        `persistent_workers`, `pin_memory`, `prefetch_factor`), and its dataset's
        (`dataset.config()`): equal for loaders that give the same items. The inner `dataset` dict
        describes energon-rs's pipeline, not the reference's wrapper classes."""
        num_workers = self.worker_config.num_workers
        return {
            "type": type(self).__qualname__,
            "num_workers": num_workers,
            "persistent_workers": num_workers > 0,
            "pin_memory": True,
            "prefetch_factor": None if num_workers == 0 else self._prefetch_factor,
            "dataset": self.dataset.config(),
        }

    def can_restore_sample(self) -> bool:
        """Whether `restore_sample` can make items again: always, every stage of an energon_rs
        pipeline can (hooks that are not `@stateless` are called again as they are)."""
        return True

    def restore_sample(self, restore_key: tuple) -> Any:
        """The item (sample or batch) of `restore_key` made again, as the loader handed it out
        with that `__restore_key__`: re-read and re-run through the worker's stages with the same
        indices (so the same per-sample seeds), in this thread, without changing the loader's
        position."""
        return self.dataset._spec.restore_item(tuple(restore_key))

    def close(self) -> None:
        """Stops the workers, threads or processes (also done when the loader is garbage
        collected, and at exit); iterating again after it yields nothing."""
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._native is not None:
            self._native.close()
        self._close_workers()
        if self._debug is not None:
            self._debug.close()

    def __enter__(self) -> "BasicDataLoader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class SavableDataLoader(BasicDataLoader):
    """A loader whose position can be saved and restored exactly, in constant time.

    `save_state_rank()` returns a small dict (`torch.save` and `torch.load(weights_only=True)`
    handle it): `state["checkpoint"]` holds the bytes of the Rust loader's checkpoint, the file
    format `energon checkpoint info` and `redist` read, with every worker's position, the items
    in its buffers as restore keys, and the dataset and settings it was saved with. Restoring
    re-reads only the buffered items, never the samples before them, and refuses a state of
    another dataset or other settings."""

    _savable = True

    def save_state_rank(self) -> dict:
        """This rank's state, between the items handed out so far and the next one."""
        return {
            "format": _STATE_FORMAT,
            "version": _STATE_VERSION,
            "rank": self.worker_config.rank,
            "checkpoint": self._loader().save_state(),
        }

    def restore_state_rank(self, state: Optional[dict]) -> None:
        """Restores a state of `save_state_rank`; must be called before iterating."""
        if state is None:
            return
        if self._native is not None:
            raise _native.CheckpointError("restore_state_rank must be called before iterating")
        checkpoint = _checkpoint_of(state)
        _, world_size, num_workers = _native.checkpoint_topology(checkpoint)
        wc = self.worker_config
        if (world_size, num_workers) != (wc.world_size, wc.num_workers):
            raise _native.CheckpointError(
                f"this state was saved by a job of {world_size} ranks x {num_workers} workers, "
                f"this loader runs {wc.world_size} x {wc.num_workers}: pass the states of all "
                "ranks to restore_state_global, which redistributes them, or redistribute them "
                "with `energon checkpoint redist --new-world-size N --new-num-workers W`"
            )
        self._restore = checkpoint
        # Builds the loader now, so that a state of another dataset or other settings is refused
        # here, not at the first iteration.
        try:
            self._loader()
        except BaseException:
            self._restore = None
            self._close_workers()
            raise

    def save_state_global(
        self, global_dst_rank: Optional[int] = None, *, dst_rank: Optional[int] = None
    ) -> Optional[list]:
        """Gathers every data-parallel rank's state on `global_dst_rank` (a list indexed by rank
        there, `None` elsewhere); without `torch.distributed`, this rank's state in a list.
        `dst_rank` is another name of `global_dst_rank`, as the save/restore guide calls it."""
        if (global_dst_rank is None) == (dst_rank is None):
            raise TypeError("save_state_global takes global_dst_rank (or dst_rank), once")
        if global_dst_rank is None:
            global_dst_rank = dst_rank
        state = self.save_state_rank()
        dist = _distributed()
        if dist is None:
            return [state]
        group = self.worker_config.data_parallel_group
        states: Optional[list] = None
        if dist.get_rank() == global_dst_rank:
            states = [None] * dist.get_world_size(group)
        dist.gather_object(state, states, dst=global_dst_rank, group=group)
        return states

    def restore_state_global(self, state: Optional[list], src_rank: Optional[int] = None) -> None:
        """Restores from the list of `save_state_global`: every rank passes it, or only
        `src_rank` does and it is scattered.

        A list saved by a job with other numbers of ranks or workers is redistributed first:
        the rest of every old worker's pass is dealt to this job's workers (each sample of it
        read once), and later passes are this job's own."""
        dist = _distributed()
        rank = self.worker_config.rank
        if src_rank is None or dist is None:
            if state is None:
                raise _native.CheckpointError("restore_state_global needs the list of states")
            self.restore_state_rank(self._for_this_job(state)[rank])
            return
        group = self.worker_config.data_parallel_group
        out: list = [None]
        states = None if state is None else self._for_this_job(state)
        dist.scatter_object_list(out, states, src=src_rank, group=group)
        self.restore_state_rank(out[0])

    def _for_this_job(self, states: list) -> list:
        """The states of every rank of a job, redistributed over this job's ranks and workers
        when they were saved with others."""
        checkpoints = [_checkpoint_of(s) for s in states]
        wc = self.worker_config
        topologies = {_native.checkpoint_topology(c)[1:] for c in checkpoints}
        if topologies == {(wc.world_size, wc.num_workers)} and len(states) == wc.world_size:
            return states
        reshaped = _native.reshape_checkpoints(checkpoints, wc.world_size, wc.num_workers)
        return [
            {"format": _STATE_FORMAT, "version": _STATE_VERSION, "rank": r, "checkpoint": c}
            for r, c in enumerate(reshaped)
        ]

    # Deprecated aliases of the reference.
    def save_state(self, dst_rank: int) -> Optional[list]:
        """Deprecated alias of `save_state_global`."""
        return self.save_state_global(dst_rank)

    def restore_state(self, state: Optional[list]) -> None:
        """Deprecated alias of `restore_state_global`."""
        self.restore_state_global(state)


def _checkpoint_of(state: Any) -> bytes:
    """The checkpoint bytes of a state of `save_state_rank`, checked."""
    if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
        raise _native.CheckpointError("not an energon_rs loader state")
    if state.get("version") != _STATE_VERSION:
        raise _native.IncompatibleFormatError(
            f"loader state version {state.get('version')} is not supported "
            f"(this energon_rs reads version {_STATE_VERSION}; version 1 states of older "
            "releases counted items and cannot be restored)"
        )
    checkpoint = state.get("checkpoint")
    if not isinstance(checkpoint, (bytes, bytearray)):
        raise _native.CheckpointError("the loader state has no checkpoint bytes")
    return bytes(checkpoint)


def _distributed() -> Any:
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist
    return None


def get_loader(
    dataset: Dataset,
    *,
    worker_config: Optional[WorkerConfig] = None,
    prefetch_factor: int = 2,
    cache_pool: Any = None,
    watchdog_timeout_seconds: Optional[float] = 60,
    watchdog_initial_timeout_seconds: Optional[float] = None,
    fail_on_timeout: bool = False,
    worker_type: Optional[str] = None,
) -> BasicDataLoader:
    """A loader over the dataset's pipeline with `worker_config.num_workers` workers (0: in one
    background thread), watched by a `Watchdog` (`watchdog_timeout_seconds` `None`: none);
    `worker_type` says where the workers run (`"thread"`, `"process"`, `"fork"`, `"spawn"`,
    `"forkserver"`, `"main"`; `None`: the default, see `energon_rs.workers`); `worker_config`
    (deprecated, as in the reference) must be the dataset's."""
    if worker_config is not None:
        warnings.warn("get_loader's worker_config is deprecated", DeprecationWarning, stacklevel=2)
        if worker_config != dataset.worker_config:
            raise ValueError("worker_config must equal the dataset's")
    dataset = _with_cache_pool(dataset, cache_pool)
    return BasicDataLoader(
        dataset,
        prefetch_factor=prefetch_factor,
        watchdog=_watchdog(watchdog_timeout_seconds, watchdog_initial_timeout_seconds, fail_on_timeout),
        worker_type=worker_type,
    )


def _with_cache_pool(dataset: Dataset, cache_pool: Any) -> Dataset:
    """The dataset's pipeline whose cookers get `cache_pool` (a pipeline of its own, so that
    loaders of one dataset keep their pools apart)."""
    if cache_pool is None:
        return dataset
    res = dataset._with()
    res._hooks.set_cache_pool(cache_pool)
    return res


#: The worker type of loaders that do not name one (`None`: chosen per dataset, see
#: `_worker_type`). The environment variable `ENERGON_RS_WORKER_TYPE` sets it too.
DEFAULT_WORKER_TYPE: Optional[str] = os.environ.get("ENERGON_RS_WORKER_TYPE") or None


def _worker_type(dataset: Dataset, worker_type: Optional[str]) -> str:
    """The worker type of a loader: the one given, else the default; without a default,
    processes when the task encoder runs Python for every sample and there are workers, else
    threads (Rust stages alone run fastest on threads)."""
    chosen = worker_type or DEFAULT_WORKER_TYPE
    if chosen is None:
        python = bool(dataset._hooks is not None and getattr(dataset._hooks, "per_sample_python", False))
        chosen = "process" if python and dataset.worker_config.num_workers >= 1 else "thread"
    start_method(chosen)  # checks the name
    if dataset.worker_config.num_workers == 0 and chosen != "main":
        # No workers: the one pipeline runs on a background thread, as before.
        return "thread"
    return chosen


def _watchdog(timeout: Optional[float], initial: Optional[float], fail: bool) -> Any:
    from .watchdog import Watchdog

    return None if timeout is None else Watchdog(timeout, initial, fail)


def get_savable_loader(
    dataset: Dataset,
    *,
    worker_config: Optional[WorkerConfig] = None,
    checkpoint_every_sec: float = 60,
    checkpoint_every_min_n_samples: Optional[int] = None,
    n_checkpoints: Optional[int] = None,
    gc_collect_every_n_steps: int = 10,
    prefetch_factor: int = 2,
    cache_pool: Any = None,
    watchdog_timeout_seconds: Optional[float] = 60,
    watchdog_initial_timeout_seconds: Optional[float] = None,
    fail_on_timeout: bool = False,
    worker_type: Optional[str] = None,
) -> SavableDataLoader:
    """A loader whose state can be saved and restored (see `SavableDataLoader`); `worker_type`
    as for `get_loader` (a state saved under one worker type restores under any other)."""
    if worker_config is not None and worker_config != dataset.worker_config:
        raise ValueError("worker_config must equal the dataset's")
    dataset = _with_cache_pool(dataset, cache_pool)
    return SavableDataLoader(
        dataset,
        prefetch_factor=prefetch_factor,
        watchdog=_watchdog(watchdog_timeout_seconds, watchdog_initial_timeout_seconds, fail_on_timeout),
        worker_type=worker_type,
    )
