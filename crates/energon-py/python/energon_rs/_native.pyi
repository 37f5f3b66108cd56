# Stubs of the compiled module energon_rs._native (crates/energon-py/src).
from typing import Any, Iterator, Optional, Union, final

__version__: str
__all__ = [
    "AvDecoder",
    "CheckpointError",
    "ConfigError",
    "CorruptDatasetError",
    "EnergonError",
    "EnergonIOError",
    "IncompatibleFormatError",
    "LoaderError",
    "MissingFileError",
    "_Buffer",
    "_DatasetSpec",
    "_CombinedSpec",
    "_FileStore",
    "_HookSet",
    "_Loader",
    "_Reader",
    "_WaitingOn",
    "__version__",
    "checkpoint_topology",
    "dataset_config",
    "dataset_kind",
    "prepare_dataset",
    "prepare_jsonl",
    "prepare_media",
    "prepare_metadataset",
    "reshape_checkpoints",
    "run_cli",
    "resolve_metadataset",
    "serve_worker",
    "storage_is_dir",
    "storage_is_file",
    "storage_list",
    "storage_normalize",
    "storage_read",
    "storage_size",
    "storage_write",
    "traverse_metadataset",
    "worker_seed",
]

class EnergonError(Exception): ...
class CorruptDatasetError(EnergonError): ...
class IncompatibleFormatError(EnergonError): ...
class CheckpointError(EnergonError): ...
class LoaderError(EnergonError): ...
class MissingFileError(EnergonError, FileNotFoundError): ...
class ConfigError(EnergonError, ValueError): ...
class EnergonIOError(EnergonError, OSError): ...

@final
class AvDecoder:
    def __new__(cls, data: bytes, origin: str = ...) -> AvDecoder: ...
    def data(self) -> memoryview: ...
    def origin(self) -> str: ...
    def extension(self) -> Optional[str]: ...
    def index_mode(self) -> str: ...
    def video_clips(
        self,
        ranges: list[tuple[float, float]],
        unit: str,
        out_size: Optional[tuple[int, int]] = None,
    ) -> tuple[list[Any], list[list[tuple[float, float]]]]: ...
    def audio_clips(
        self, ranges: list[tuple[float, float]], unit: str
    ) -> tuple[list[Any], list[list[tuple[float, float]]]]: ...
    def has_video_stream(self) -> bool: ...
    def has_audio_stream(self) -> bool: ...
    def metadata(
        self,
        video: bool,
        video_duration: bool,
        video_frame_count: bool,
        video_frame_size: bool,
        audio: bool,
        audio_duration: bool,
        audio_num_samples: bool,
    ) -> dict[str, Any]: ...

@final
class _Buffer:
    def __len__(self) -> int: ...

@final
class _Reader:
    def __new__(
        cls,
        path: str,
        split_part: str = "train",
        image_decode: Optional[str] = ...,
        guess_content: bool = False,
        split_config: Optional[str] = None,
        dataset_config: Optional[str] = None,
        av_decode: str = "AVDecoder",
        video_decode_audio: bool = False,
    ) -> _Reader: ...
    def __len__(self) -> int: ...
    @property
    def sample_type(self) -> str: ...
    def read(self, index: int, torch: bool = False) -> Optional[Any]: ...

@final
class _DatasetSpec:
    def __new__(
        cls,
        path: str,
        *,
        split_part: str,
        rank: int,
        world_size: int,
        num_workers: int,
        seed_offset: int = 0,
        training: bool = True,
        batch_size: Optional[int] = None,
        drop_last: bool = False,
        shuffle_buffer_size: Optional[int] = None,
        max_samples_per_sequence: Optional[int] = None,
        parallel_shard_iters: Optional[int] = None,
        shuffle_over_epochs: Optional[int] = ...,
        virtual_epoch_length: int = 0,
        limit: Optional[int] = None,
        packing_buffer_size: Optional[int] = None,
        repeat: Optional[bool] = None,
        leaf: Optional[int] = None,
        image_decode: Optional[str] = ...,
        guess_content: bool = False,
        split_config: Optional[str] = None,
        dataset_config: Optional[str] = None,
        hooks: Optional[_HookSet] = None,
        av_decode: str = "AVDecoder",
        video_decode_audio: bool = False,
    ) -> _DatasetSpec: ...
    @property
    def sample_type(self) -> Optional[str]: ...
    @property
    def n_samples(self) -> int: ...
    @property
    def is_metadataset(self) -> bool: ...
    def worker_sample_counts(self) -> list[int]: ...
    def restore_item(self, key: Any) -> Any: ...

@final
class _CombinedSpec:
    def __new__(
        cls,
        children: list[_DatasetSpec],
        weights: Optional[list[float]] = None,
        mix_batch_size: Optional[int] = None,
        mix_hooks: Optional[_HookSet] = None,
    ) -> _CombinedSpec: ...
    def restore_item(self, key: Any) -> Any: ...

@final
class _Loader:
    def __new__(
        cls,
        spec: Union[_DatasetSpec, _CombinedSpec],
        *,
        prefetch_factor: int = 2,
        worker: Optional[int] = None,
        savable: bool = False,
        restore: Optional[bytes] = None,
        processes: Optional[Any] = None,
        inline: bool = False,
    ) -> _Loader: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __next__(self) -> Any: ...
    def save_state(self) -> bytes: ...
    @property
    def waiting(self) -> _WaitingOn: ...
    @property
    def rank(self) -> int: ...
    def close(self) -> None: ...

@final
class _HookSet:
    def __new__(
        cls,
        *,
        handler: Any,
        skip_error: type,
        fatal_errors: tuple,
        fatal_error: type,
        torch: bool,
        config: list[tuple[str, str]],
        failure_tolerance: int,
        hook_tolerances: dict[str, int],
        per_sample_python: bool,
        subflavors_by_key: bool = False,
        lazy: Optional[type] = None,
        encode_sample: Any = None,
        preencode_sample: Any = None,
        postencode_sample: Any = None,
        select_samples_to_pack: Any = None,
        pack_selected_samples: Any = None,
        batch_group_criterion: Any = None,
        batch: Any = None,
        default_batch: Any = None,
        encode_batch: Any = None,
        make_cook: Any = None,
        make_joiner: Any = None,
        set_cache_pool: Any = None,
    ) -> _HookSet: ...
    @property
    def set_cache_pool(self) -> Any: ...
    @property
    def torch(self) -> bool: ...
    @property
    def per_sample_python(self) -> bool: ...
    @property
    def policy(self) -> tuple[int, dict[str, int]]: ...

@final
class _WaitingOn:
    @property
    def worker(self) -> Optional[int]: ...

@final
class _FileStore:
    @staticmethod
    def webdataset(path: str) -> _FileStore: ...
    @staticmethod
    def system(path: str) -> _FileStore: ...
    @staticmethod
    def jsonl(path: str) -> _FileStore: ...
    @property
    def kind(self) -> str: ...
    @property
    def path(self) -> str: ...
    def get(self, name: str) -> Optional[tuple[memoryview, Any]]: ...
    def get_decoded(
        self,
        name: str,
        image_decode: Optional[str] = ...,
        guess_content: bool = False,
        torch: bool = False,
        av_decode: str = "AVDecoder",
        video_decode_audio: bool = False,
    ) -> Optional[tuple[Any, Any]]: ...
    def media_metadata(self, name: str) -> Optional[Any]: ...
    def media_table_missing(self) -> Optional[str]: ...

def dataset_kind(path: str) -> str: ...
def storage_normalize(path: str) -> str: ...
def storage_read(path: str) -> bytes: ...
def storage_write(path: str, data: bytes) -> None: ...
def storage_size(path: str) -> int: ...
def storage_is_file(path: str) -> bool: ...
def storage_is_dir(path: str) -> bool: ...
def storage_list(path: str) -> list[tuple[str, int]]: ...
def dataset_config(path: str, dataset_config: str = ...) -> dict[str, Any]: ...
def prepare_dataset(
    path: str,
    *,
    split_ratio: Optional[tuple[float, float, float]] = None,
    split_patterns: Optional[list[tuple[str, str]]] = None,
    exclude: Optional[str] = None,
    tar_index_only: bool = False,
    shuffle_tars: bool = False,
    num_workers: int = 4,
    split_config: str = ...,
    fix_duplicates: bool = False,
    sample_tables: bool = True,
    sample_tables_only: bool = False,
) -> dict[str, Any]: ...
def prepare_jsonl(path: str) -> int: ...
def prepare_media(
    path: str,
    strategy: str,
    patterns: list[str] = ...,
    num_workers: int = 4,
    replace: bool = False,
) -> tuple[int, int]: ...
def prepare_metadataset(path: str) -> tuple[list[str], list[str]]: ...
def resolve_metadataset(
    path: str,
    split_part: str,
    shuffle_over_epochs_multiplier: Optional[int] = ...,
    subflavors: Optional[dict[str, Any]] = None,
) -> tuple[str, list[dict[str, Any]]]: ...
def traverse_metadataset(path: str, split_part: str) -> list[dict[str, Any]]: ...
def worker_seed(
    rank: int, world_size: int, num_workers: int, seed_offset: int = 0, local_worker_id: int = 0
) -> int: ...
def checkpoint_topology(bytes: bytes) -> tuple[int, int, int]: ...
def run_cli(args: list[str]) -> int: ...
def reshape_checkpoints(
    states: list[bytes], new_world_size: int, new_num_workers: int
) -> list[bytes]: ...
def serve_worker(
    spec: Union[_DatasetSpec, _CombinedSpec],
    worker: int,
    fd: int,
    *,
    prefetch: int = 2,
    restore: Optional[bytes] = None,
) -> None: ...
