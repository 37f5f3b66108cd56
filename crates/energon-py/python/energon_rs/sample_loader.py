"""Datasets whose `dataset.yaml` names a Python `sample_loader` (and `part_filter`): the Rust
core reads them as crude samples, and the Python package turns each into the configured sample
type with the loader function, as the reference does.

    sample_type: {__module__: megatron.energon, __class__: CaptioningSample}
    sample_loader: sample_loader.py:sample_loader     # in .nv-meta/; raw parts -> field dict
    part_filter: sample_loader.py:part_filter         # or a list of part names
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any, Callable, Optional

from . import _native
from .cache import unpickle_part

__all__ = ["sample_loader_of"]


def _function(root: str, ref: str) -> Callable[..., Any]:
    """The function `file.py:name` of the dataset's `.nv-meta/` folder."""
    file, sep, name = ref.partition(":")
    if not sep or not name:
        raise _native.ConfigError(f"{ref!r} is not a file.py:function reference")
    path = os.path.join(root, ".nv-meta", file)
    spec = importlib.util.spec_from_file_location(f"_energon_sample_loader_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise _native.ConfigError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return getattr(module, name)
    except AttributeError:
        raise _native.ConfigError(f"{path} has no function {name!r}") from None


def _sample_class(ref: dict) -> type:
    module = ref.get("__module__")
    module = "energon_rs" if module == "megatron.energon" else module
    return getattr(importlib.import_module(module), ref["__class__"])


def sample_loader_of(root: str, dataset_config: Optional[str]) -> Optional[Callable[[dict], Any]]:
    """The function that makes a sample of the configured type from a crude sample of the
    dataset at `root`, when its dataset config has a `sample_loader`; else `None`."""
    config = _native.dataset_config(root, dataset_config or "dataset.yaml")
    ref = config.get("sample_loader")
    if ref is None:
        return None
    loader = _function(root, ref)
    sample_type = _sample_class(config["sample_type"])
    part_filter = config.get("part_filter")
    if part_filter is None:
        keep: Callable[[str], bool] = lambda part: True  # noqa: E731
    elif isinstance(part_filter, str):
        keep = _function(root, part_filter)
    else:
        names = set(part_filter)
        keep = names.__contains__

    def load(sample: dict) -> Any:
        raw = {
            name: value if name.startswith("__") else unpickle_part(name, value)
            for name, value in sample.items()
            if name.startswith("__") or keep(name)
        }
        fields = loader(raw)
        base = {
            "__key__": sample["__key__"],
            "__restore_key__": sample["__restore_key__"],
            "__subflavors__": sample.get("__subflavors__"),
            "__sources__": sample.get("__sources__"),
        }
        return sample_type(**{**base, **fields})

    return load
