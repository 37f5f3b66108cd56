"""Datasets loaded by path (`load_dataset`): random access to a dataset's samples, its files as
a file store, and the datasets of a metadataset with their weights and settings."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _native
from .cache import FileStore, JsonlFileStore, WebdatasetFileStore, _of_native
from .worker import WorkerConfig


class _LoadedDataset:
    """A dataset loaded by path (`load_dataset`): random access to its samples, its files as a
    file store."""

    def __init__(self, path: str, kwargs: dict, kind: str = "webdataset") -> None:
        self.path = path
        self._kwargs = kwargs
        self._kind = kind

    def reader(self, split_part: str = "train", *, torch: bool = False, **kwargs: Any) -> Any:
        """Random access to the samples of one split part (`len()`, `read(i)`)."""
        return _Reader(self.path, split_part=split_part, torch=torch, **{**self._kwargs, **kwargs})

    def as_file_store(self) -> FileStore:
        """The dataset's files by name (`<key>.<part>`; `<i>.json` for a JSONL file)."""
        if self._kind == "jsonl":
            return JsonlFileStore(self.path)
        return WebdatasetFileStore(self.path)

    def get_datasets(
        self,
        *,
        training: bool,
        split_part: str,
        worker_config: Optional[WorkerConfig] = None,
        subflavors: Optional[dict] = None,
        shuffle_over_epochs_multiplier: Optional[int] = 1,
        **kwargs: Any,
    ) -> "LoadedDatasetList":
        """The dataset as the only entry of a dataset list (no blending)."""
        leaf = LoadedDataset(
            dataset=_LeafDataset(
                path=self.path,
                kind=self._kind,
                split_part=split_part,
                split_config=self._kwargs.get("split_config"),
                dataset_config=self._kwargs.get("dataset_config"),
                subflavors=subflavors,
                shuffle_over_epochs=shuffle_over_epochs_multiplier,
            ),
            weight=None,
        )
        return LoadedDatasetList(blend_mode="none", datasets=[leaf])


@dataclass
class _LeafDataset:
    """One dataset of a (meta)dataset split, with its effective settings."""

    path: str
    kind: str
    split_part: str
    split_config: Optional[str] = None
    dataset_config: Optional[str] = None
    subflavors: Optional[dict] = None
    shuffle_over_epochs: Optional[int] = 1

    @property
    def paths(self) -> list:
        """The dataset's path as a list of `EPath` (the reference's factories list theirs)."""
        from .epath import EPath

        return [EPath(self.path)]

    def reader(self, *, torch: bool = False, **kwargs: Any) -> Any:
        """Random access to the dataset's samples (not for joins)."""
        if self.kind == "join":
            raise ValueError("a join has no reader of its own; read its datasets")
        options = {"split_config": self.split_config, "dataset_config": self.dataset_config}
        return _Reader(self.path, split_part=self.split_part, torch=torch, **{**options, **kwargs})

    def as_file_store(self) -> FileStore:
        """The dataset's files by name (the primary dataset's, for a join)."""
        if self.kind == "jsonl":
            return JsonlFileStore(self.path)
        return WebdatasetFileStore(self.path)


@dataclass
class LoadedDataset:
    """One dataset of a split with its blend weight (`blend`), repetitions (`blend_epochized`)
    and auxiliary file stores (`aux:`)."""

    dataset: _LeafDataset
    weight: Optional[float] = None
    repetitions: Optional[Union[int, float]] = None
    aux: Optional[dict[str, FileStore]] = None


@dataclass
class LoadedDatasetList:
    """The datasets of a split and how they combine: `blend_mode` is `none`, `dataset_weight`
    (`blend`) or `sample_repetitions` (`blend_epochized`)."""

    blend_mode: str
    datasets: list[LoadedDataset] = field(default_factory=list)


class _LoadedMetadataset:
    """A metadataset loaded by path (`load_dataset`)."""

    def __init__(self, path: str, kwargs: dict) -> None:
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for a metadataset: {sorted(kwargs)}")
        self.path = path

    def get_datasets(
        self,
        *,
        training: bool,
        split_part: str,
        worker_config: Optional[WorkerConfig] = None,
        subflavors: Optional[dict] = None,
        shuffle_over_epochs_multiplier: Optional[int] = 1,
        **kwargs: Any,
    ) -> LoadedDatasetList:
        """Split `split_part` resolved into its datasets (nested metadatasets flattened), with
        the effective split parts, subflavors, weights or repetitions, and aux stores."""
        mode, leaves = _native.resolve_metadataset(
            self.path,
            split_part,
            shuffle_over_epochs_multiplier=shuffle_over_epochs_multiplier,
            subflavors=subflavors,
        )
        datasets = []
        for leaf in leaves:
            aux = {name: _of_native(store) for name, store in leaf["aux"].items()}
            dataset = _LeafDataset(
                path=leaf["path"],
                kind=leaf["kind"],
                split_part=leaf["split_part"],
                split_config=leaf["split_config"],
                dataset_config=leaf["dataset_config"],
                subflavors=_with_config_subflavors(leaf),
                shuffle_over_epochs=leaf["shuffle_over_epochs"],
            )
            datasets.append(
                LoadedDataset(
                    dataset=dataset,
                    weight=leaf["weight"],
                    repetitions=leaf["repetitions"],
                    aux=aux or None,
                )
            )
        return LoadedDatasetList(blend_mode=mode, datasets=datasets)


def _with_config_subflavors(leaf: dict) -> Optional[dict]:
    """A leaf's subflavors as the reference lists them: those of its `dataset.yaml`, updated
    by the metadataset's."""
    subflavors = leaf["subflavors"]
    if leaf["kind"] != "webdataset":
        return subflavors
    own = _native.dataset_config(leaf["path"], leaf["dataset_config"] or "dataset.yaml").get(
        "subflavors"
    )
    if not own:
        return subflavors
    return {**own, **(subflavors or {})}


class _Reader:
    def __init__(self, path: str, *, split_part: str, torch: bool, **kwargs: Any) -> None:
        self._native = _native._Reader(path, split_part=split_part, **kwargs)
        self._torch = torch

    @property
    def sample_type(self) -> str:
        return self._native.sample_type

    def __len__(self) -> int:
        return len(self._native)

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += len(self)
        return self._native.read(index, torch=self._torch)


def load_dataset(
    path: Union[str, os.PathLike], **kwargs: Any
) -> Union[_LoadedDataset, _LoadedMetadataset]:
    """Loads a prepared dataset, a JSONL file or a metadataset by path: `get_datasets(...)`
    lists its datasets; a dataset also gives random access (`reader()`) and its files
    (`as_file_store()`)."""
    path = os.fspath(path)
    kind = _native.dataset_kind(path)
    if kind == "metadataset":
        return _LoadedMetadataset(path, kwargs)
    if kind == "filesystem":
        raise ValueError(f"{path} is a folder of files: use it as an auxiliary source (aux:)")
    if kind == "folder":
        raise ValueError(f"{path} is not a prepared dataset (run `energon prepare` on it)")
    return _LoadedDataset(path, kwargs, kind)
