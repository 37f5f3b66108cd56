"""File stores, as in `megatron.energon`: files looked up by name, for cookers (a metadataset's
`aux:` sources, a crude dataset's own files) and for direct access.

    store = WebdatasetFileStore("/data/my-wds")     # members by entry name `<key>.<part>`
    data, source = store["00000042.jpg"]             # a read-only memoryview and its SourceInfo
    store.get_media_metadata("00000042.jpg")        # ImageMetadata(width=..., height=..., ...)

    folder = SystemFileStore("/data/audio")          # files by path relative to the folder

Reads run in Rust: a WebDataset member is a view of the shard's memory map (no copy), found
through the dataset's `index.sqlite`. Media metadata is what `energon prepare-media` stored.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Optional, Union

from . import _native
from .media import MediaMetadataBase
from .sample import SourceInfo

__all__ = [
    "DecodeFileStore",
    "FileStore",
    "JsonlFileStore",
    "PrimaryFileStore",
    "SystemFileStore",
    "WebdatasetFileStore",
    "add_source_info",
]


#: Whether the stores of this module hand out undecoded files as `bytes` (a copy) instead of
#: read-only `memoryview`s of the shard. `energon_rs.compat.install()` sets it, as the
#: reference's stores return bytes.
FILES_AS_BYTES = False


def _files_as_bytes(res: Any) -> Any:
    if FILES_AS_BYTES and isinstance(res[0], memoryview):
        return bytes(res[0]), res[1]
    return res


#: Part names (extensions) whose bytes are pickles, unpickled when parts are decoded.
PICKLE_PARTS = ("pkl", "pickle")


def unpickle_part(name: str, value: Any) -> Any:
    """`value` unpickled when `name` (a part name or a file name) says it is a pickle and it is
    still bytes; else `value` as it is."""
    part = name.rsplit(".", 1)[-1].lower()
    if part in PICKLE_PARTS and isinstance(value, (bytes, bytearray, memoryview)):
        return pickle.loads(value)
    return value


def add_source_info(sample: Any, *source_infos: SourceInfo) -> Any:
    """Appends `source_infos` to the `__sources__` of a sample (a dataclass or a dict)."""
    if isinstance(sample, dict):
        sources = sample.get("__sources__")
        sample["__sources__"] = source_infos if sources is None else (*sources, *source_infos)
    elif hasattr(sample, "__sources__"):
        sources = sample.__sources__
        sample.__sources__ = source_infos if sources is None else (*sources, *source_infos)
    return sample


class FileStore:
    """Base of the file stores: `store[name]` is `(data, SourceInfo)`."""

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        raise NotImplementedError

    def get(self, key: str, sample: Any = None) -> Any:
        """The data of file `key`; its `SourceInfo` is appended to `sample`'s `__sources__`."""
        data, source_info = self[key]
        add_source_info(sample, source_info)
        return data

    def get_path(self) -> str:
        """The dataset, folder or file the store reads."""
        raise NotImplementedError

    def _get_raw(self, key: str) -> tuple[Any, SourceInfo]:
        """The stored form of file `key` (what a cache keeps) and its `SourceInfo`."""
        return self[key]

    def _decode_raw(self, data: Any, **kwargs: Any) -> Any:
        """The data of a file from its stored form (`_get_raw`)."""
        return data

    def get_media_metadata(self, key: str) -> MediaMetadataBase:
        """The media metadata stored for file `key`."""
        raise NotImplementedError(f"{type(self).__name__} does not support media metadata")


class _NativeStore(FileStore):
    """A store read by the Rust core."""

    _native: Any

    def _missing(self, key: str) -> Exception:
        return KeyError(f"{key!r} is not in {self._native.path}")

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        res = self._native.get(key)
        if res is None:
            raise self._missing(key)
        return _files_as_bytes(res)

    def get_path(self) -> str:
        return self._native.path

    def get_media_metadata(self, key: str) -> MediaMetadataBase:
        """The media metadata stored for file `key` (`ImageMetadata` or `AVMetadata`).

        Raises `KeyError` when none is stored for `key`, and `RuntimeError` when the store has
        no media metadata at all (run `energon prepare-media` on it)."""
        res = self._native.media_metadata(key)
        if res is not None:
            return res
        missing = self._native.media_table_missing()
        if missing is not None:
            raise RuntimeError(
                f"media metadata is not available: {missing}; run `energon prepare-media "
                "--media-metadata-by-...` on it"
            )
        raise self._missing_metadata(key)

    def _missing_metadata(self, key: str) -> Exception:
        return KeyError(f"no media metadata for {key!r} in {self._native.path}")

    def _decoded(
        self,
        key: str,
        image_decode: Optional[str],
        guess_content: bool,
        torch: bool,
        av_decode: str = "AVDecoder",
        video_decode_audio: bool = False,
    ) -> tuple[Any, SourceInfo]:
        res = self._native.get_decoded(
            key,
            image_decode=image_decode,
            guess_content=guess_content,
            torch=torch,
            av_decode=av_decode,
            video_decode_audio=video_decode_audio,
        )
        if res is None:
            raise self._missing(key)
        return _files_as_bytes(res)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._native.path!r})"

    def __reduce__(self) -> Any:
        return (type(self), (self._native.path,))


class WebdatasetFileStore(_NativeStore):
    """The members of a prepared WebDataset, by entry name `<key>.<part>` (the tar member
    name). Data comes as read-only `memoryview`s over the shard (no copy)."""

    def __init__(self, dataset_path: Union[str, os.PathLike]) -> None:
        self._native = _native._FileStore.webdataset(os.fspath(dataset_path))


class JsonlFileStore(_NativeStore):
    """The records of a JSONL file, by `<i>.json` or `<i>` (the line number)."""

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        self._native = _native._FileStore.jsonl(os.fspath(path))


class SystemFileStore(_NativeStore):
    """The files of a folder, by path relative to it (`base_dir=None`: paths as given).

    Media metadata comes from the folder's `.nv-meta/index.sqlite`, which
    `energon prepare-media FOLDER` writes."""

    def __init__(self, base_dir: Optional[Union[str, os.PathLike]] = None) -> None:
        self.base_dir = None if base_dir is None else os.fspath(base_dir)
        self._native = _native._FileStore.system(self.base_dir or "")

    def _missing(self, key: str) -> Exception:
        path = key if self.base_dir is None else os.path.join(self.base_dir, key)
        return FileNotFoundError(2, "No such file or directory", path)

    def _missing_metadata(self, key: str) -> Exception:
        if self.base_dir is not None and os.path.isfile(os.path.join(self.base_dir, key)):
            return KeyError(
                f"no media metadata for {key!r}; run `energon prepare-media "
                "--media-metadata-by-...` to make it"
            )
        return KeyError(f"file {key!r} not found in {self.base_dir}")

    def get_media_metadata(self, key: str) -> MediaMetadataBase:
        if self.base_dir is None:
            raise RuntimeError("media metadata needs a SystemFileStore with a base_dir")
        return super().get_media_metadata(key)

    def get_path(self) -> str:
        return str(self.base_dir)

    def __reduce__(self) -> Any:
        return (type(self), (self.base_dir,))


class _Wrapper(FileStore):
    """A store over another one."""

    def __init__(self, inner: FileStore) -> None:
        self._inner = inner

    def get_path(self) -> str:
        return self._inner.get_path()

    def get_media_metadata(self, key: str) -> MediaMetadataBase:
        return self._inner.get_media_metadata(key)

    def _get_raw(self, key: str) -> tuple[Any, SourceInfo]:
        return self._inner._get_raw(key)

    def _decode_raw(self, data: Any, **kwargs: Any) -> Any:
        return self._inner._decode_raw(data, **kwargs)


class DecodeFileStore(_Wrapper):
    """A store whose files are decoded by their part name (what follows the key), as sample
    parts are: `decoder` is a `SampleDecoder` (images as arrays, `.txt` as str, `.json` as
    Python values, ...). Decoding runs in Rust for the stores of this module."""

    def __init__(self, inner: FileStore, *, decoder: Any, torch: bool = False) -> None:
        super().__init__(inner)
        self.decoder = decoder
        self._torch = torch

    def _custom_decode(self) -> Any:
        """The decoder's own `decode(fname, raw)` method, if it has one."""
        return getattr(self.decoder, "decode", None)

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        inner = self._inner
        if isinstance(inner, _NativeStore) and self._custom_decode() is None:
            data, source_info = inner._decoded(
                key,
                self.decoder.image_decode,
                self.decoder.guess_content,
                self._torch,
                getattr(self.decoder, "av_decode", "AVDecoder"),
                getattr(self.decoder, "video_decode_audio", False),
            )
            return unpickle_part(key, data), source_info
        raw, source_info = inner[key]
        return self._decode_raw(raw, fname=key), source_info

    def _get_raw(self, key: str) -> tuple[Any, SourceInfo]:
        if isinstance(self._inner, _NativeStore) and self._custom_decode() is None:
            return self[key]  # decoded in Rust; kept as the value
        return self._inner._get_raw(key)

    def _decode_raw(self, data: Any, **kwargs: Any) -> Any:
        decode = self._custom_decode()
        if decode is None and isinstance(self._inner, _NativeStore):
            return data  # `_get_raw` gave the decoded value
        if decode is None:
            raise TypeError(
                f"DecodeFileStore decodes the stores of energon_rs, or others with a decoder "
                f"that has a decode(fname, raw) method; not {type(self._inner).__name__} with "
                f"{type(self.decoder).__name__}"
            )
        return decode(kwargs["fname"], self._inner._decode_raw(data, **kwargs))

    def __repr__(self) -> str:
        return f"DecodeFileStore(inner={self._inner!r}, decoder={self.decoder!r})"


class PrimaryFileStore(_Wrapper):
    """A store seen from one sample: names starting with `.` are relative to its key
    (`.wav` is `<key>.wav`)."""

    def __init__(self, inner: FileStore, current_key: str) -> None:
        super().__init__(inner)
        self._current_key = current_key

    def _resolve(self, key: str) -> str:
        return f"{self._current_key}{key}" if key.startswith(".") else key

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        return self._inner[self._resolve(key)]

    def get(self, key: str, sample: Any = None) -> Any:
        return self._inner.get(self._resolve(key), sample)

    def _get_raw(self, key: str) -> tuple[Any, SourceInfo]:
        return self._inner._get_raw(self._resolve(key))

    def get_media_metadata(self, key: str) -> MediaMetadataBase:
        return self._inner.get_media_metadata(self._resolve(key))


def _of_native(native: Any) -> _NativeStore:
    """The Python store of a native one (the aux sources the Rust core opened)."""
    cls = {
        "webdataset": WebdatasetFileStore,
        "system": SystemFileStore,
        "jsonl": JsonlFileStore,
    }[native.kind]
    store = cls.__new__(cls)
    store._native = native
    if isinstance(store, SystemFileStore):
        store.base_dir = native.path
    return store
