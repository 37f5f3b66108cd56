"""`EPath`: the path type of `megatron.energon`'s API, for local paths.

An `EPath` is always absolute and normalized (`EPath("a/../b")` is `<cwd>/b`), compares and
sorts by its string, and accepts anything `os.fspath` does. Writing to a file creates its
folders. `msc://default/PATH` is the local `/PATH`; remote paths (other `msc://` profiles,
`s3://`, `dss://`, ...) are refused with `UnsupportedPathError`: energon_rs reads local datasets
only.
"""

from __future__ import annotations

import fnmatch
import glob as glob_module
import os
import shutil
from pathlib import Path
from typing import IO, Any, Iterator, Union

__all__ = ["DEFAULT_PROFILE_NAME", "EPath", "UnsupportedPathError"]

#: The profile name of local paths.
DEFAULT_PROFILE_NAME = "default"


class UnsupportedPathError(ValueError):
    """A path of a remote storage protocol, which energon_rs does not read."""


class EPath:
    """An absolute, normalized local path."""

    __slots__ = ("_path",)

    def __init__(self, path: Union[str, os.PathLike, "EPath"]) -> None:
        if isinstance(path, EPath):
            self._path: str = path._path
            return
        text = os.fspath(path)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        local = f"msc://{DEFAULT_PROFILE_NAME}/"
        if text.startswith(local):
            # The default storage profile is the local file system.
            text = "/" + text[len(local):]
        if "://" in text:
            protocol = text.split("://", 1)[0]
            raise UnsupportedPathError(
                f"{text!r}: {protocol}:// paths are not supported; energon_rs reads local paths"
            )
        self._path = os.path.normpath(os.path.abspath(text))

    # Names and parts.
    @property
    def profile(self) -> str:
        """The storage profile: `default` for local paths."""
        return DEFAULT_PROFILE_NAME

    @property
    def local_path(self) -> Path:
        """The path as a `pathlib.Path`."""
        return Path(self._path)

    @property
    def name(self) -> str:
        return os.path.basename(self._path)

    @property
    def stem(self) -> str:
        return Path(self._path).stem

    @property
    def suffix(self) -> str:
        return Path(self._path).suffix

    @property
    def parent(self) -> "EPath":
        return EPath(os.path.dirname(self._path))

    def with_suffix(self, suffix: str) -> "EPath":
        return EPath(Path(self._path).with_suffix(suffix))

    def __truediv__(self, other: Union[str, os.PathLike, "EPath"]) -> "EPath":
        other_text = other._path if isinstance(other, EPath) else os.fspath(other)
        return EPath(os.path.join(self._path, other_text))

    def relative_to(self, other: Union[str, os.PathLike, "EPath"]) -> str:
        """This path relative to `other`, as a string (`ValueError` if it is not inside it)."""
        return str(Path(self._path).relative_to(EPath(other)._path))

    # Queries.
    def is_file(self) -> bool:
        return os.path.isfile(self._path)

    def is_dir(self) -> bool:
        return os.path.isdir(self._path)

    def exists(self) -> bool:
        return os.path.exists(self._path)

    def size(self) -> int:
        """The file's size in bytes."""
        return os.path.getsize(self._path)

    def glob(self, pattern: str) -> Iterator["EPath"]:
        """The paths under this folder matching `pattern` (`**` descends, following links)."""
        base = glob_module.escape(self._path)
        for path in sorted(glob_module.glob(os.path.join(base, pattern), recursive=True)):
            yield EPath(path)

    def walk(self) -> Iterator["EPath"]:
        """Every file below this folder (links to folders followed)."""
        for root, _dirs, files in os.walk(self._path, followlinks=True):
            for name in files:
                yield EPath(os.path.join(root, name))

    # Reading and writing.
    def open(self, mode: str = "r", block_size: Any = None, **kwargs: Any) -> IO[Any]:
        """Opens the file; writing modes create its folders first."""
        if any(c in mode for c in "wax+"):
            os.makedirs(os.path.dirname(self._path), exist_ok=True)
        return open(self._path, mode, **kwargs)

    def read_text(self, encoding: str = "utf-8") -> str:
        with self.open("r", encoding=encoding) as f:
            return f.read()

    def read_bytes(self) -> bytes:
        with self.open("rb") as f:
            return f.read()

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        with self.open("w", encoding=encoding) as f:
            return f.write(text)

    def write_bytes(self, data: bytes) -> int:
        with self.open("wb") as f:
            return f.write(data)

    def mkdir(self, exist_ok: bool = True, parents: bool = True) -> None:
        Path(self._path).mkdir(exist_ok=exist_ok, parents=parents)

    def unlink(self, missing_ok: bool = False) -> None:
        Path(self._path).unlink(missing_ok=missing_ok)

    def move(self, target: Union[str, os.PathLike, "EPath"]) -> None:
        shutil.move(self._path, EPath(target)._path)

    def copy(self, target: Union[str, os.PathLike, "EPath"]) -> None:
        shutil.copyfile(self._path, EPath(target)._path)

    def is_relative_to(self, other: Union[str, os.PathLike, "EPath"]) -> bool:
        return Path(self._path).is_relative_to(EPath(other)._path)

    def match(self, pattern: str) -> bool:
        return fnmatch.fnmatch(self._path, pattern)

    # Values.
    def __fspath__(self) -> str:
        return self._path

    def __str__(self) -> str:
        return self._path

    def __repr__(self) -> str:
        return f"EPath({self._path!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EPath):
            return self._path == other._path
        if isinstance(other, (str, os.PathLike)):
            try:
                return self._path == EPath(other)._path
            except UnsupportedPathError:
                return False
        return NotImplemented

    def __lt__(self, other: "EPath") -> bool:
        return self._path < EPath(other)._path

    def __hash__(self) -> int:
        return hash(self._path)

    def __reduce__(self) -> Any:
        return (EPath, (self._path,))
