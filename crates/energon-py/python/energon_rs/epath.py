"""`EPath`: the path type of `megatron.energon`'s API, for local paths and object stores.

A local `EPath` is always absolute and normalized (`EPath("a/../b")` is `<cwd>/b`), compares and
sorts by its string, and accepts anything `os.fspath` does. Writing to a file creates its
folders. `msc://default/PATH` is the local `/PATH`. Object-store URLs (`s3://BUCKET/KEY`,
`gs://`, `az://`, `msc://PROFILE/PATH`) are kept as URLs, normalized (`s3://b//a/../c` is
`s3://b/c`; an `msc://` profile of type `file` is its local folder), and read and written through
the same storage layer as the datasets (see docs/remote.md); `str()` and `os.fspath()` give the
URL, so a remote `EPath` can be passed wherever a dataset path is taken.
`dss://NAME@VERSION/PATH` names a dataset version in the dataset cache: it keeps its URL and reads
`NVDATASET_CACHE_DIR/NAME/VERSION/PATH` (this module's `NVDATASET_CACHE_DIR`, an `EPath` taken
from the environment variable of that name at import). `rclone://PROFILE/PATH`, deprecated in the
reference, is `msc://PROFILE/PATH` with a `DeprecationWarning`. Other protocols are refused with
`UnsupportedPathError`.
"""

from __future__ import annotations

import fnmatch
import functools
import glob as glob_module
import io
import os
import posixpath
import shutil
import warnings
from pathlib import Path, PurePosixPath
from typing import IO, Any, Callable, Iterator, Optional, Union

from . import _native

__all__ = ["DEFAULT_PROFILE_NAME", "EPath", "NVDATASET_CACHE_DIR", "UnsupportedPathError"]

#: The profile name of local paths.
DEFAULT_PROFILE_NAME = "default"


#: The URL schemes of object stores (as the storage layer reads them), and of dataset versions
#: in the dataset cache (`dss`).
_REMOTE_SCHEMES = ("s3", "gs", "az", "azure", "msc", "dss")


class UnsupportedPathError(ValueError):
    """A path of a storage protocol energon_rs does not read, or an operation an object store
    does not have."""


def _split_url(text: str) -> Optional[tuple[str, str, str]]:
    """`(scheme, bucket or profile, key)` of an object-store URL; `None` for a local path."""
    if "://" not in text:
        return None
    scheme, rest = text.split("://", 1)
    head, _, key = rest.partition("/")
    return scheme, head, key


class _Upload(io.BytesIO):
    """The buffer of a remote file opened for writing: written as one object when closed."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self._url = url

    def close(self) -> None:
        if not self.closed:
            _native.storage_write(self._url, self.getvalue())
        super().close()


def _on_target(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method`, run on a `dss://` path's target (where its bytes are) for such a path."""

    @functools.wraps(method)
    def run(self: "EPath", *args: Any, **kwargs: Any) -> Any:
        resolved = self._resolved()
        if resolved is None:
            return method(self, *args, **kwargs)
        return getattr(resolved, method.__name__)(*args, **kwargs)

    return run


class EPath:
    """An absolute, normalized local path, or a normalized object-store URL."""

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
        if text.startswith("rclone://"):
            warnings.warn(
                "rclone:// protocol is deprecated. Use msc:// instead.", DeprecationWarning, 2
            )
            text = "msc://" + text[len("rclone://"):]
        if "://" in text:
            protocol = text.split("://", 1)[0]
            if protocol not in _REMOTE_SCHEMES:
                raise UnsupportedPathError(
                    f"{text!r}: {protocol}:// paths are not supported; energon_rs reads local "
                    "paths and s3://, gs://, az://, msc:// and dss:// URLs"
                )
            if protocol == "dss":
                self._path = _normalize_dss(text)
                return
            # The storage layer's normal form (an `msc://` profile of type `file` is local).
            text = _native.storage_normalize(text)
            if "://" in text:
                self._path = text
                return
        self._path = os.path.normpath(os.path.abspath(text))

    @property
    def _remote(self) -> Optional[tuple[str, str, str]]:
        return _split_url(self._path)

    def _resolved(self) -> Optional["EPath"]:
        """Where a `dss://` path's bytes are (`None` for other paths)."""
        remote = self._remote
        if remote is None or remote[0] != "dss":
            return None
        cache = NVDATASET_CACHE_DIR
        if cache is None:
            env = os.environ.get("NVDATASET_CACHE_DIR")
            if not env:
                raise UnsupportedPathError(
                    f"{self._path}: NVDATASET_CACHE_DIR is not set (the folder of dss:// datasets)"
                )
            cache = EPath(env)
        name, version = remote[1].rsplit("@", 1)
        res = EPath(cache) / name / version
        return res / remote[2] if remote[2] else res

    def _from_resolved(self, resolved: "EPath", path: "EPath") -> "EPath":
        """`path` (under `resolved`, this `dss://` path's target) as a `dss://` path."""
        rel = path.relative_to(resolved)
        return self if rel in ("", ".") else self / rel

    def _local_only(self, what: str) -> None:
        if self._remote is not None:
            raise UnsupportedPathError(f"{self._path}: {what} is not available in an object store")

    # Names and parts.
    @property
    def profile(self) -> str:
        """The storage profile: `default` for local paths, the profile of an `msc://` URL, else
        the URL's scheme."""
        remote = self._remote
        if remote is None:
            return DEFAULT_PROFILE_NAME
        return remote[1] if remote[0] == "msc" else remote[0]

    @property
    def is_remote(self) -> bool:
        """Whether this is an object-store URL."""
        return self._remote is not None

    @property
    def url(self) -> str:
        """The path as a string: the URL of a remote path."""
        return self._path

    @_on_target
    def local_path(self) -> Path:
        """The path as a `pathlib.Path` (`UnsupportedPathError` for an object-store URL; a
        `dss://` path's folder in the dataset cache)."""
        self._local_only("a local path")
        return Path(self._path)

    @_on_target
    def is_local(self) -> bool:
        """Whether the path is on a local (or mounted) file system."""
        return self._remote is None

    @property
    def display_name(self) -> str:
        """The name to show: a `dss://` path's `NAME@VERSION`, else the file name."""
        remote = self._remote
        return remote[1] if remote is not None and remote[0] == "dss" else self.name

    @property
    def _key(self) -> str:
        """The `/`-separated part that names and suffixes are taken from."""
        remote = self._remote
        return self._path if remote is None else "/" + remote[2]

    @property
    def name(self) -> str:
        return posixpath.basename(self._key)

    @property
    def stem(self) -> str:
        return PurePosixPath(self._key).stem

    @property
    def suffix(self) -> str:
        return PurePosixPath(self._key).suffix

    @property
    def parent(self) -> "EPath":
        return self._with_key(posixpath.dirname(self._key))

    def _with_key(self, key: str) -> "EPath":
        remote = self._remote
        if remote is None:
            return EPath(key)
        return EPath(f"{remote[0]}://{remote[1]}/{key.lstrip('/')}")

    def with_suffix(self, suffix: str) -> "EPath":
        return self._with_key(str(PurePosixPath(self._key).with_suffix(suffix)))

    def __truediv__(self, other: Union[str, os.PathLike, "EPath"]) -> "EPath":
        other_text = other._path if isinstance(other, EPath) else os.fspath(other)
        if isinstance(other_text, bytes):
            other_text = os.fsdecode(other_text)
        if "://" in other_text:
            return EPath(other_text)
        if self._remote is None:
            return EPath(os.path.join(self._path, other_text))
        return self._with_key(posixpath.join(self._key, other_text))

    def relative_to(self, other: Union[str, os.PathLike, "EPath"]) -> str:
        """This path relative to `other`, as a string (`ValueError` if it is not inside it)."""
        base = EPath(other)
        mine, theirs = self._remote, base._remote
        if mine is None and theirs is None:
            return str(Path(self._path).relative_to(base._path))
        if mine is None or theirs is None or mine[:2] != theirs[:2]:
            raise ValueError(f"{self._path} is not inside {base._path}")
        return str(PurePosixPath(self._key).relative_to(base._key))

    # Queries.
    @_on_target
    def is_file(self) -> bool:
        if self._remote is None:
            return os.path.isfile(self._path)
        return _native.storage_is_file(self._path)

    @_on_target
    def is_dir(self) -> bool:
        """Whether this is a folder (remotely: a prefix with objects under it)."""
        if self._remote is None:
            return os.path.isdir(self._path)
        return _native.storage_is_dir(self._path)

    @_on_target
    def exists(self) -> bool:
        if self._remote is None:
            return os.path.exists(self._path)
        return self.is_file() or self.is_dir()

    @_on_target
    def size(self) -> int:
        """The file's size in bytes."""
        if self._remote is None:
            return os.path.getsize(self._path)
        return _native.storage_size(self._path)

    def _objects(self) -> list[tuple[str, int]]:
        """The objects under this remote prefix, relative to it (none when it is missing)."""
        if not _native.storage_is_dir(self._path):
            return []
        return _native.storage_list(self._path)

    def glob(self, pattern: str) -> Iterator["EPath"]:
        """The paths under this folder matching `pattern` (`**` descends, following links;
        remotely, objects only)."""
        resolved = self._resolved()
        if resolved is not None:
            for path in resolved.glob(pattern):
                yield self._from_resolved(resolved, path)
            return
        if self._remote is None:
            base = glob_module.escape(self._path)
            for path in sorted(glob_module.glob(os.path.join(base, pattern), recursive=True)):
                yield EPath(path)
            return
        parts = [p for p in pattern.split("/") if p]
        for name, _size in self._objects():
            if _match_parts(name.split("/"), parts):
                yield self / name

    def walk(self) -> Iterator["EPath"]:
        """Every file below this folder (links to folders followed; remotely, every object
        under the prefix)."""
        resolved = self._resolved()
        if resolved is not None:
            for path in resolved.walk():
                yield self._from_resolved(resolved, path)
            return
        if self._remote is None:
            for root, _dirs, files in os.walk(self._path, followlinks=True):
                for name in files:
                    yield EPath(os.path.join(root, name))
            return
        for name, _size in self._objects():
            yield self / name

    # Reading and writing.
    @_on_target
    def open(self, mode: str = "r", block_size: Any = None, **kwargs: Any) -> IO[Any]:
        """Opens the file; writing modes create its folders first. A remote object is read
        whole when opened for reading, and written as one object when a file opened with `w`
        is closed."""
        if self._remote is not None:
            return self._open_remote(mode, **kwargs)
        if any(c in mode for c in "wax+"):
            os.makedirs(os.path.dirname(self._path), exist_ok=True)
        return open(self._path, mode, **kwargs)

    def _open_remote(self, mode: str, **kwargs: Any) -> IO[Any]:
        if any(c in mode for c in "ax+"):
            raise UnsupportedPathError(f"{self._path}: mode {mode!r} (objects are written whole)")
        binary = "b" in mode
        text_args = {k: kwargs[k] for k in ("encoding", "errors", "newline") if k in kwargs}
        if "w" in mode:
            upload = _Upload(self._path)
            if binary:
                return upload
            return io.TextIOWrapper(upload, **{"encoding": "utf-8", **text_args})
        data = io.BytesIO(_native.storage_read(self._path))
        if binary:
            return data
        return io.TextIOWrapper(data, **{"encoding": "utf-8", **text_args})

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

    @_on_target
    def mkdir(self, exist_ok: bool = True, parents: bool = True) -> None:
        """Makes the folder (nothing to do in an object store, which has no folders)."""
        if self._remote is None:
            Path(self._path).mkdir(exist_ok=exist_ok, parents=parents)

    def unlink(self, missing_ok: bool = False) -> None:
        self._local_only("deleting")
        Path(self._path).unlink(missing_ok=missing_ok)

    def move(self, target: Union[str, os.PathLike, "EPath"]) -> None:
        self._local_only("moving")
        shutil.move(self._path, EPath(target)._path)

    def copy(self, target: Union[str, os.PathLike, "EPath"]) -> None:
        """Copies the file's bytes to `target` (either may be remote)."""
        target = EPath(target)
        if self._remote is None and target._remote is None:
            shutil.copyfile(self._path, target._path)
        else:
            target.write_bytes(self.read_bytes())

    def is_relative_to(self, other: Union[str, os.PathLike, "EPath"]) -> bool:
        try:
            self.relative_to(other)
        except ValueError:
            return False
        return True

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
            except (UnsupportedPathError, OSError):
                return False
        return NotImplemented

    def __lt__(self, other: "EPath") -> bool:
        return self._path < EPath(other)._path

    def __hash__(self) -> int:
        return hash(self._path)

    def __reduce__(self) -> Any:
        return (EPath, (self._path,))


def _normalize_dss(text: str) -> str:
    """The normal form of a `dss://NAME@VERSION/PATH` URL (its path normalized)."""
    head, _, key = text[len("dss://"):].partition("/")
    # COMPAT(energon 7.4.1): epath.py:_split_dss_name_and_version raises AssertionError.
    if "@" not in head:
        raise AssertionError("DSS paths must include a dataset version separated by '@'")
    name, version = head.rsplit("@", 1)
    if not name or not version:
        raise AssertionError("DSS paths must include non-empty dataset name and version")
    parts: list[str] = []
    for part in key.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ValueError(f"{text}: path above the dataset version")
            parts.pop()
        else:
            parts.append(part)
    return "/".join([f"dss://{head}", *parts])


#: The folder of `dss://` datasets (`$NVDATASET_CACHE_DIR` at import; may be reassigned).
NVDATASET_CACHE_DIR: Optional[EPath] = (
    EPath(os.environ["NVDATASET_CACHE_DIR"]) if os.environ.get("NVDATASET_CACHE_DIR") else None
)


def _match_parts(names: list[str], parts: list[str]) -> bool:
    """Whether the `/`-separated `names` match the glob `parts` (`**`: any number of names)."""
    if not parts:
        return not names
    if parts[0] == "**":
        return any(_match_parts(names[i:], parts[1:]) for i in range(len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], parts[0]) and _match_parts(
        names[1:], parts[1:]
    )
