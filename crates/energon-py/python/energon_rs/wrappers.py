"""The reference's dataset-building API over energon_rs pipelines: `get_dataset_from_config`
(one dataset without batching) and the wrapper datasets that add a stage to it.

    ds = get_dataset_from_config(path, split_part="train", training=False,
                                 worker_config=wc).build()
    ds = MapDataset(ds, lambda s: s.caption, worker_config=wc)       # a map after the samples
    ds = BatchDataset(ds, batch_size=8, batcher=my_batch, worker_config=wc)
    for batch in get_loader(ds): ...

A wrapper does not iterate anything itself: it describes its stage, and the result is a new
pipeline of the Rust core with the stage in place (a map before batching runs as the sample
hook, a batcher as the batch hook, a map after batching as the batch encoding). Stages that
the core's fixed stage order cannot express (a second batching, a map between two stages it
does not separate) raise `NotImplementedError`. `BlendDataset`, `ConcatDataset` and
`MixBatchDataset` combine complete pipelines worker by worker in the Rust core.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import os
from typing import Any, Callable, Optional, Union

from . import _native
from .loader import Dataset, SavableDataset, _dataset
from .task_encoder import TaskEncoder
from .worker import WorkerConfig

__all__ = [
    "AugmentTaskEncoder",
    "BatchDataset",
    "BlendDataset",
    "ConcatDataset",
    "DatasetBlendMode",
    "DatasetFactory",
    "MapDataset",
    "MixBatchDataset",
    "SavableDataset",
    "TraversedDatasetReference",
    "concat_pad",
    "get_dataset_from_config",
    "generic_concat",
    "homogeneous_concat_mix",
    "traverse_metadataset",
]


class DatasetBlendMode(enum.Enum):
    """How the datasets of a split combine (`LoadedDatasetList.blend_mode`)."""

    NONE = "none"
    DATASET_WEIGHT = "dataset_weight"
    SAMPLE_REPETITIONS = "sample_repetitions"

    def __eq__(self, other: object) -> bool:
        # `LoadedDatasetList.blend_mode` is the mode's value.
        if isinstance(other, str):
            return self.value == other
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash(self.value)


class DatasetFactory:
    """One split of a prepared dataset or JSONL file, with its settings; `build()` makes its
    pipeline (samples in order for validation, shuffled slices repeated for training), without
    shuffle buffer or batching."""

    def __init__(self, path: str, split_part: str, training: bool, worker_config: WorkerConfig,
                 kwargs: dict) -> None:
        self.path = path
        self.split_part = split_part
        self.training = training
        self.worker_config = worker_config
        self._kwargs = kwargs

    def build(self, worker_rotation_offset: int = 0) -> Dataset:
        if worker_rotation_offset:
            raise NotImplementedError("worker_rotation_offset is chosen by the Rust core")
        kwargs = dict(self._kwargs)
        task_encoder = kwargs.pop("task_encoder", None) or TaskEncoder()
        return _dataset(
            self.path,
            split_part=self.split_part,
            worker_config=self.worker_config,
            training=self.training,
            batch_size=None,
            batch_drop_last=False,
            packing_buffer_size=None,
            shuffle_buffer_size=None,
            max_samples_per_sequence=kwargs.pop("max_samples_per_sequence", None),
            virtual_epoch_length=0,
            limit=None,
            shuffle_over_epochs_multiplier=kwargs.pop("shuffle_over_epochs_multiplier", 1),
            task_encoder=task_encoder,
            torch=kwargs.pop("torch", None),
            kwargs=kwargs,
        )

    def __len__(self) -> int:
        return len(self.build())

    def __repr__(self) -> str:
        return f"DatasetFactory({self.path!r}, split_part={self.split_part!r})"


def get_dataset_from_config(
    path: Union[str, os.PathLike],
    *,
    dataset_config: str = "dataset.yaml",
    split_config: Optional[str] = None,
    split_part: str = "train",
    training: bool = True,
    subflavors: Optional[dict] = None,
    worker_config: WorkerConfig,
    sample_type: Optional[type] = None,
    **kwargs: Any,
) -> DatasetFactory:
    """The factory of split `split_part` of the prepared dataset (or JSONL file) at `path`,
    as `dataset_config` (in `.nv-meta/`) describes it. `sample_type`, when given, must be the
    class the dataset yields (or a base of it)."""
    if subflavors:
        raise NotImplementedError("subflavors of a single dataset: use a metadataset")
    path = os.fspath(path)
    factory = DatasetFactory(
        path, split_part, training, worker_config,
        {**kwargs, "dataset_config": dataset_config, "split_config": split_config},
    )
    if sample_type is not None:
        built = factory.build()
        name = built.sample_type
        if name == "CrudeSample" and _native.dataset_kind(path) == "webdataset":
            # A Python sample_loader makes the configured type from the crude samples.
            config = _native.dataset_config(path, dataset_config)
            if "sample_loader" in config:
                name = config["sample_type"]["__class__"]
        if name is not None and name != sample_type.__name__ and not any(
            base.__name__ == name for base in sample_type.__mro__
        ) and not _is_subclass_named(name, sample_type):
            raise _native.ConfigError(
                f"{path} yields {name} samples, not {sample_type.__name__}"
            )
    return factory


def _is_subclass_named(name: str, cls: type) -> bool:
    import energon_rs

    own = getattr(energon_rs, name, None)
    return isinstance(own, type) and issubclass(own, cls)


def _encoder_of(dataset: Dataset) -> TaskEncoder:
    return dataset._arguments["task_encoder"]


def _with_encoder(dataset: Dataset, methods: dict[str, Callable[..., Any]], **changes: Any) -> Dataset:
    """The dataset's pipeline with its task encoder's `methods` replaced."""
    inner = _encoder_of(dataset)
    cls = type(f"Wrapped{type(inner).__name__}", (type(inner),), methods)
    encoder = copy.copy(inner)
    encoder.__class__ = cls
    return dataset._with(task_encoder=encoder, **changes)


def _check(dataset: Any, wrapper: str) -> Dataset:
    if not isinstance(dataset, Dataset):
        raise TypeError(f"{wrapper} wraps an energon_rs dataset, not {type(dataset).__name__}")
    return dataset


def MapDataset(  # noqa: N802 (the reference's class name)
    dataset: Dataset,
    map_fn: Callable[[Any], Any],
    *,
    len_map_fn: Callable[[int], int] = lambda x: x,
    error_handler: Any = None,
    stateless_map_fn: bool = False,
    map_fn_config: Any = None,
    failure_tolerance: Optional[int] = None,
    worker_config: Optional[WorkerConfig] = None,
) -> Dataset:
    """`map_fn` applied to each item: to each sample before batching (after the sample
    encoding), or to each batch after batching (after the batch encoding)."""
    dataset = _check(dataset, "MapDataset")
    if len_map_fn(7) != 7:
        raise NotImplementedError("MapDataset with a len_map_fn that changes the length")
    inner = type(_encoder_of(dataset))
    if dataset._config.get("batch_size"):
        def encode_batch(self: Any, batch: Any) -> Any:
            return map_fn(inner.encode_batch(self, batch))

        return _with_encoder(dataset, {"encode_batch": encode_batch})

    def encode_sample(self: Any, sample: Any) -> Any:
        return map_fn(inner.encode_sample(self, sample))

    return _with_encoder(dataset, {"encode_sample": encode_sample})


def BatchDataset(  # noqa: N802 (the reference's class name)
    dataset: Dataset,
    batch_size: int,
    batcher: Callable[[list], Any],
    *,
    batcher_stateless: bool = False,
    batcher_config: Any = None,
    drop_last: bool = False,
    error_handler: Any = None,
    failure_tolerance: Optional[int] = None,
    worker_config: Optional[WorkerConfig] = None,
) -> Dataset:
    """Batches of `batch_size` items made by `batcher` (the last one shorter unless
    `drop_last`)."""
    dataset = _check(dataset, "BatchDataset")
    if dataset._config.get("batch_size"):
        raise NotImplementedError("BatchDataset over a batched dataset (batches of batches)")
    if batch_size < 1:
        raise _native.ConfigError(f"batch_size must be at least 1, not {batch_size}")

    def batch(self: Any, samples: list) -> Any:
        return batcher(samples)

    return _with_encoder(dataset, {"batch": batch}, batch_size=batch_size, batch_drop_last=drop_last)


class _Combined(Dataset):
    """Datasets built separately (each by `get_train_dataset` or `get_val_dataset`, with its own
    task encoder and batch size) combined worker by worker in the Rust pipeline."""

    def __init__(
        self, datasets: list, weights: Optional[list], worker_config: Any, mix: Optional[tuple] = None
    ) -> None:
        if not datasets:
            raise ValueError("combining datasets needs at least one dataset")
        if any(not isinstance(d, Dataset) or isinstance(d, _Combined) for d in datasets):
            raise NotImplementedError(
                "only datasets of get_train_dataset / get_val_dataset can be combined by energon_rs"
            )
        wc = datasets[0].worker_config
        if worker_config is not None and worker_config != wc:
            raise ValueError("worker_config must equal the datasets'")
        config = {"combined": [d.config() for d in datasets], "weights": weights}
        if mix is None:
            spec = _native._CombinedSpec([d._spec for d in datasets], weights)
        else:
            batch_size, hooks = mix
            config["mix_batch_size"] = batch_size
            spec = _native._CombinedSpec(
                [d._spec for d in datasets], weights, mix_batch_size=batch_size, mix_hooks=hooks
            )
        super().__init__(spec, wc, config)
        self.datasets = datasets
        self._hooks = datasets[0]._hooks
        #: What `_recipe` needs beyond the datasets: set by each combination.
        self._combination: Any = None

    def _recipe(self) -> tuple:
        parts = [d._recipe() for d in self.datasets]
        return (_combined_of, (type(self), parts, self._combination))

    def _with(self, **changes: Any) -> "Dataset":
        raise NotImplementedError("combined datasets cannot be changed by energon_rs yet")

    @property
    def sample_type(self) -> Optional[str]:
        types = {d.sample_type for d in self.datasets}
        return types.pop() if len(types) == 1 else None

    @property
    def is_metadataset(self) -> bool:
        return False

    def worker_sample_counts(self) -> list[int]:
        counts = [d.worker_sample_counts() for d in self.datasets]
        return [sum(c) for c in zip(*counts)]

    def items_per_pass(self) -> int:
        return sum(d.items_per_pass() for d in self.datasets)


def _combined_of(argument: tuple) -> Dataset:
    """Datasets combined again from their recipes (`_Combined._recipe`), in a worker process
    that did not fork."""
    kind, parts, combination = argument
    datasets = [make(part) for make, part in parts]
    if kind is ConcatDataset:
        return ConcatDataset(*datasets)
    if kind is MixBatchDataset:
        weights, batch_size, batch_mix_fn = combination
        return MixBatchDataset(
            *zip(datasets, weights), batch_size=batch_size, batch_mix_fn=batch_mix_fn
        )
    return kind(*zip(datasets, combination))


def _as_list(batches: list) -> list:
    """The default `batch_mix_fn`: the list of the blended batches."""
    return batches


class BlendDataset(_Combined):
    """Datasets built separately, blended: each item is drawn from a dataset chosen by weight
    with the worker's blend stream, as the reference's `BlendDataset` (a dataset whose pass ends
    is left out until every one has ended)."""

    def __init__(self, *dataset_weights: tuple, worker_config: Any = None) -> None:
        self.dataset_weights = list(dataset_weights)
        super().__init__(
            [d for d, _ in dataset_weights], [float(w) for _, w in dataset_weights], worker_config
        )
        self._combination = [w for _, w in dataset_weights]


class ConcatDataset(_Combined):
    """Datasets built separately, one after the other on each worker (the reference's
    `ConcatDataset`)."""

    def __init__(self, *datasets: Dataset, worker_config: Any = None) -> None:
        super().__init__(list(datasets), None, worker_config)


class MixBatchDataset(_Combined):
    """Datasets built separately (usually with `batch_size=1`), blended as `BlendDataset`
    blends them, and their items grouped `batch_size` at a time by `batch_mix_fn` (by default
    the list of the items; `homogeneous_concat_mix` concatenates batches of one type). The mix
    function may raise `SkipSample` or be a generator; it sees the worker's
    `current_batch_index` as a `batch` hook does."""

    def __init__(
        self,
        *dataset_weights: tuple,
        batch_size: int,
        batch_mix_fn: Callable[[list], Any] = _as_list,
        worker_config: Any = None,
    ) -> None:
        from .task_encoder import _hooks

        if batch_size < 1:
            raise _native.ConfigError(f"batch_size must be at least 1, not {batch_size}")
        self.dataset_weights = list(dataset_weights)
        datasets = [d for d, _ in dataset_weights]
        if not all(isinstance(d, Dataset) and d._config.get("batch_size") for d in datasets):
            raise _native.ConfigError(
                "MixBatchDataset mixes datasets that batch (get_train_dataset(batch_size=1, ...))"
            )

        class _Mix(TaskEncoder):
            def batch(self, samples: list) -> Any:
                return batch_mix_fn(samples)

        _Mix.batch.__qualname__ = getattr(batch_mix_fn, "__qualname__", "batch_mix_fn")
        wc = worker_config if worker_config is not None else datasets[0].worker_config
        hooks = _hooks(_Mix(), wc, bool(datasets[0]._config.get("torch")))
        super().__init__(
            datasets, [float(w) for _, w in dataset_weights], worker_config, (batch_size, hooks)
        )
        self._combination = ([w for _, w in dataset_weights], batch_size, batch_mix_fn)



def _is_array(value: Any) -> bool:
    module = type(value).__module__
    return module.startswith("torch") or (module == "numpy" and type(value).__name__ == "ndarray")


def concat_pad(batch: list) -> Any:
    """Tensors (torch or numpy) concatenated along the first dimension, each zero-padded at the
    end of the other dimensions to their largest size."""
    first = batch[0]
    total = sum(b.shape[0] for b in batch)
    size = [max(b.shape[d] for b in batch) for d in range(1, first.ndim)]
    if type(first).__module__.startswith("torch"):
        out = first.new_zeros((total, *size))
    else:
        import numpy as np

        out = np.zeros((total, *size), dtype=first.dtype)
    row = 0
    for b in batch:
        out[(slice(row, row + b.shape[0]), *(slice(0, s) for s in b.shape[1:]))] = b
        row += b.shape[0]
    return out


def generic_concat(batches: list) -> Any:
    """Concatenates batches: tensors and arrays along the first dimension (`concat_pad`),
    dicts, dataclasses and named tuples field by field; any other value becomes the list of the
    batches' values."""
    first = batches[0]
    if _is_array(first):
        return concat_pad(batches)
    if isinstance(first, dict):
        return {k: generic_concat([b[k] for b in batches]) for k in first}
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        return type(first)(**{
            f.name: generic_concat([getattr(b, f.name) for b in batches])
            for f in dataclasses.fields(first) if f.init
        })
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(**{
            name: generic_concat([getattr(b, name) for b in batches]) for name in first._fields
        })
    return batches


def homogeneous_concat_mix(samples: list) -> Any:
    """The `batch_mix_fn` that concatenates batches of one type (`generic_concat`)."""
    if any(type(s) is not type(samples[0]) for s in samples):
        raise TypeError("homogeneous_concat_mix needs batches of one type")
    return generic_concat(samples)


class AugmentTaskEncoder(TaskEncoder):
    """A task encoder around another one: every hook and setting is the inner encoder's, and a
    subclass overrides the hooks it augments (calling `super()` for the inner one)."""

    def __init__(self, task_encoder: TaskEncoder) -> None:
        self._task_encoder = task_encoder

    @property
    def decoder(self) -> Any:  # type: ignore[override]
        return self._task_encoder.decoder

    @property
    def cookers(self) -> Any:  # type: ignore[override]
        return self._task_encoder.cookers

    def encode_sample(self, sample: Any) -> Any:
        return self._task_encoder.encode_sample(sample)

    def batch(self, samples: list) -> Any:
        return self._task_encoder.batch(samples)

    def encode_batch(self, batch: Any) -> Any:
        return self._task_encoder.encode_batch(batch)

    def cook_crude_sample(self, sample: Any, cooker: Any, aux: dict) -> Any:
        return self._task_encoder.cook_crude_sample(sample, cooker, aux)


@dataclasses.dataclass
class TraversedDatasetReference:
    """One dataset of a metadataset split, as `traverse_metadataset` lists it: its path, the
    split part it reads, its auxiliary sources by name and its effective subflavors."""

    path: Any
    split_part: str
    aux: dict
    subflavors: dict


def traverse_metadataset(
    path: Union[str, os.PathLike], split_part: str = "train", **kwargs: Any
) -> list[TraversedDatasetReference]:
    """The datasets of split `split_part` of the metadataset at `path`, nested metadatasets
    flattened, in tree order, without opening them: a dataset or aux source that does not
    exist is listed too. Joins are not supported (`ConfigError`), as in the reference."""
    from .epath import EPath

    if kwargs:
        raise TypeError(f"unexpected keyword arguments: {sorted(kwargs)}")
    return [
        TraversedDatasetReference(
            path=EPath(leaf["path"]),
            split_part=leaf["split_part"],
            aux={name: EPath(aux_path) for name, aux_path in leaf["aux"].items()},
            subflavors=leaf["subflavors"],
        )
        for leaf in _native.traverse_metadataset(os.fspath(path), split_part)
    ]
