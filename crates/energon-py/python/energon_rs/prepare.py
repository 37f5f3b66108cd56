"""Preparing datasets from Python, as `energon prepare` does: the indexing runs in Rust and
commits all outputs at once (see the `energon prepare` docs).

    BaseWebdatasetFactory.prepare_dataset(root, ["parts/data-{0..9}.tar"],
                                          split_parts_ratio=[("train", 0.9), ("val", 0.1)])
    CrudeJsonlDatasetFactory.prepare_dataset(root / "texts.jsonl")
    prepare_metadataset(root / "joined.yaml")      # builds the join indexes

Neither writes `dataset.yaml`: write it yourself (or use `energon prepare`'s prompts).
"""

from __future__ import annotations

import enum
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Union

from . import _native

__all__ = [
    "BaseWebdatasetFactory",
    "MediaFilterConfig",
    "MediaFilterStrategy",
    "prepare_filesystem_dataset",
    "CrudeJsonlDatasetFactory",
    "INDEX_SQLITE_FILENAME",
    "INDEX_UUID_FILENAME",
    "INFO_JSON_FILENAME",
    "INFO_YAML_FILENAME",
    "JOIN_INDEX_FILENAME",
    "MAIN_FOLDER_NAME",
    "SPLIT_YAML_FILENAME",
    "expand_braces",
    "prepare_metadataset",
]

#: The metadata folder of a prepared dataset.
MAIN_FOLDER_NAME = ".nv-meta"
INDEX_SQLITE_FILENAME = "index.sqlite"
INDEX_UUID_FILENAME = "index.uuid"
INFO_JSON_FILENAME = ".info.json"
INFO_YAML_FILENAME = ".info.yaml"
SPLIT_YAML_FILENAME = "split.yaml"
JOIN_INDEX_FILENAME = "join_index.bin"

_SPLIT_NAMES = ("train", "val", "test")
_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")


def expand_braces(pattern: str) -> list[str]:
    """The names a shard pattern stands for: `{0..12}` (zero-padded when the first bound is, as
    in `{000..012}`) and `{a,b}` alternatives, expanded left to right."""
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    body = match.group(1)
    rng = _RANGE.match(body)
    if rng is not None:
        lo, hi = rng.group(1), rng.group(2)
        if int(hi) < int(lo):
            raise ValueError(f"{pattern!r}: the range {{{body}}} is empty")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        choices = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
    else:
        choices = body.split(",")
    head, tail = pattern[: match.start()], pattern[match.end():]
    return [head + c + rest for c in choices for rest in expand_braces(tail)]


class MediaFilterStrategy(enum.Enum):
    """Which entries are media whose metadata `prepare-media` stores."""

    #: By the file name's extension (images and audio/video extensions).
    EXTENSION = "extension"
    #: By the content's leading bytes, then the extension.
    HEADER = "header"
    #: By glob patterns on the lower-cased name (`MediaFilterConfig.patterns`).
    GLOB = "glob"


@dataclass
class MediaFilterConfig:
    """How `prepare_filesystem_dataset` and `prepare_dataset(media_filter=...)` find media."""

    strategy: MediaFilterStrategy
    patterns: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, glob: Optional[str], header: bool, extension: bool) -> Optional["MediaFilterConfig"]:
        """The filter of the `--media-metadata-by-*` options (`None` without any)."""
        given = [glob is not None, header, extension]
        if sum(given) > 1:
            raise ValueError("give only one of glob, header and extension")
        if glob is not None:
            return cls(MediaFilterStrategy.GLOB, [p for p in glob.split(",") if p])
        if header:
            return cls(MediaFilterStrategy.HEADER)
        if extension:
            return cls(MediaFilterStrategy.EXTENSION)
        return None


def _store_media(root: str, media_filter: MediaFilterConfig, workers: int, replace: bool) -> int:
    strategy = MediaFilterStrategy(media_filter.strategy)
    stored, _skipped = _native.prepare_media(
        root, strategy.value, list(media_filter.patterns),
        num_workers=max(1, min(workers, os.cpu_count() or 1)), replace=replace,
    )
    return stored


def prepare_filesystem_dataset(
    path: Union[str, os.PathLike],
    media_filter: MediaFilterConfig,
    progress: bool = True,
    workers: int = 16,
) -> int:
    """Stores the media metadata of the files of a plain folder in its
    `.nv-meta/index.sqlite` (as `energon prepare-media FOLDER`); returns the rows stored.
    Files that cannot be read as media are skipped."""
    return _store_media(os.fspath(path), media_filter, workers, replace=False)


def _tar_files(root: str) -> list[str]:
    res = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != MAIN_FOLDER_NAME]
        for name in files:
            if name.endswith((".tar", ".tgz", ".tar.gz")):
                res.append(os.path.relpath(os.path.join(folder, name), root))
    return res


class BaseWebdatasetFactory:
    """The reference's factory base of WebDatasets; here it offers `prepare_dataset`."""

    @classmethod
    def prepare_dataset(
        cls,
        parent_path: Union[str, os.PathLike],
        paths: Iterable[str],
        *,
        split_parts_ratio: Optional[list[tuple[str, float]]] = None,
        split_parts_patterns: Optional[list[tuple[str, str]]] = None,
        split_config: str = SPLIT_YAML_FILENAME,
        shuffle_seed: Optional[int] = 42,
        progress_fn: Callable[..., Any] = (lambda x, y: x),
        workers: int = 32,
        tar_index_only: bool = False,
        media_filter: Any = None,
        fix_duplicates: bool = False,
        index_sqlite_tmp_path: Any = None,
        enable_sample_tables: bool = True,
    ) -> tuple[set[str], list[tuple[str, int]]]:
        """Indexes the shards `paths` (relative to `parent_path`, brace patterns allowed) and
        writes the split file: `split_parts_ratio` as `(name, weight)` pairs of `train`, `val`
        and `test`, or `split_parts_patterns` as `(name, regex)` pairs. `shuffle_seed` 42
        shuffles the shards before a ratio split (as `--shuffle-tars`), `None` keeps their
        order; `media_filter` also stores the media metadata; `enable_sample_tables=False`
        writes `index.sqlite` without the per-sample tables (as `--no-sample-tables`). Returns the part names seen (up
        to 50) and `(shard, sample count)` pairs."""
        root = os.fspath(parent_path)
        if shuffle_seed not in (None, 42):
            raise ValueError(f"shuffle_seed must be 42 or None, not {shuffle_seed!r}")
        wanted = {os.path.normpath(name) for p in paths for name in expand_braces(p)}
        present = _tar_files(root)
        missing = wanted - {os.path.normpath(p) for p in present}
        if missing:
            raise _native.MissingFileError(
                f"shards not found under {root}: {', '.join(sorted(missing)[:5])}"
            )
        others = [p for p in present if os.path.normpath(p) not in wanted]
        exclude = "^(?:" + "|".join(re.escape(p) for p in others) + ")$" if others else None
        ratio = None
        if split_parts_ratio is not None:
            weights = dict(split_parts_ratio)
            unknown = sorted(set(weights) - set(_SPLIT_NAMES))
            if unknown:
                raise _native.ConfigError(
                    f"split_parts_ratio names must be train, val or test, not {unknown}"
                )
            ratio = tuple(float(weights.get(name, 0.0)) for name in _SPLIT_NAMES)
        summary = _native.prepare_dataset(
            root,
            split_ratio=ratio,
            split_patterns=None if split_parts_patterns is None else list(split_parts_patterns),
            exclude=exclude,
            tar_index_only=tar_index_only,
            shuffle_tars=shuffle_seed is not None and split_parts_patterns is None,
            num_workers=max(1, min(workers, os.cpu_count() or 1)),
            split_config=split_config,
            fix_duplicates=fix_duplicates,
            sample_tables=enable_sample_tables,
        )
        for shard, problem in summary["warnings"]:
            warnings.warn(f"{shard}: {problem}", RuntimeWarning, stacklevel=2)
        if media_filter is not None:
            # As `energon prepare --media-metadata-by-...`: the media tables are replaced.
            _store_media(root, media_filter, workers, replace=True)
        return set(summary["part_names"]), list(zip(summary["shards"], summary["shard_counts"]))


class CrudeJsonlDatasetFactory:
    """The reference's JSONL dataset factory; here it offers `prepare_dataset`."""

    @classmethod
    def prepare_dataset(cls, path: Union[str, os.PathLike]) -> int:
        """Writes the index of the JSONL file `path` (`<file>.jsonl.idx`); returns the number
        of records."""
        return _native.prepare_jsonl(os.fspath(path))


def prepare_metadataset(path: Union[str, os.PathLike]) -> None:
    """Builds the join indexes the metadataset at `path` needs (those missing) and removes
    stale ones of its cache folder."""
    _native.prepare_metadataset(os.fspath(path))
