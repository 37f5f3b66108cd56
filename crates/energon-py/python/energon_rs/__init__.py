"""energon_rs: Megatron-Energon's data loading API on a Rust core.

Replace `from megatron.energon import ...` with `from energon_rs import ...`: the datasets on disk,
the function names, their defaults and the sample order are the same. Reading, decoding,
shuffling and batching run in Rust worker threads without the GIL; images arrive as numpy arrays
that own the Rust buffers (no copy; `torch.from_numpy` shares them), or as torch tensors with
`torch=True`.

    from energon_rs import WorkerConfig, get_train_dataset, get_loader

    ds = get_train_dataset(path, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
                           batch_size=32, shuffle_buffer_size=100, max_samples_per_sequence=100)
    for batch in get_loader(ds):
        ...

`path` may be a prepared dataset, a JSONL file or a metadataset YAML (blends, epochized blends,
joins); `WebdatasetFileStore` / `SystemFileStore` read files by name and their media metadata.
"""

from __future__ import annotations

from ._native import (
    CheckpointError,
    ConfigError,
    CorruptDatasetError,
    EnergonError,
    EnergonIOError,
    IncompatibleFormatError,
    LoaderError,
    MissingFileError,
    __version__,
)
from .cache import (
    DecodeFileStore,
    FileStore,
    JsonlFileStore,
    PrimaryFileStore,
    SystemFileStore,
    WebdatasetFileStore,
)
from .load import LoadedDataset, LoadedDatasetList, load_dataset
from .loader import (
    BasicDataLoader,
    Dataset,
    SavableDataLoader,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    get_val_dataset,
    get_val_datasets,
    LimitDataset,
    RepeatDataset,
)
from .rng import SystemRng
from .media import AVMetadata, ImageMetadata, MediaMetadataBase, MediaMetadataType
from .sample import (
    AudioData,
    Batch,
    CaptioningSample,
    CrudeSample,
    ImageClassificationSample,
    ImageSample,
    InterleavedSample,
    MultiChoiceVQASample,
    OCRSample,
    RawVideo,
    Sample,
    SimilarityInterleavedSample,
    SourceInfo,
    TextSample,
    VidQASample,
    VQAOCRSample,
    VQASample,
    edataclass,
)
from .task_encoder import (
    Cooker,
    DefaultTaskEncoder,
    FatalSampleError,
    SampleDecoder,
    SkipSample,
    TaskEncoder,
    basic_sample_keys,
    batch_list,
    batch_pad_stack,
    batch_stack,
    cooker,
    generic_batch,
    stateless,
)
from .worker import WorkerConfig, log_exception, reraise_exception

__all__ = [
    "AVMetadata",
    "AudioData",
    "BasicDataLoader",
    "Batch",
    "CaptioningSample",
    "CheckpointError",
    "ConfigError",
    "Cooker",
    "CorruptDatasetError",
    "CrudeSample",
    "Dataset",
    "DecodeFileStore",
    "DefaultTaskEncoder",
    "EnergonError",
    "EnergonIOError",
    "FatalSampleError",
    "FileStore",
    "ImageClassificationSample",
    "ImageMetadata",
    "ImageSample",
    "IncompatibleFormatError",
    "InterleavedSample",
    "JsonlFileStore",
    "LoadedDataset",
    "LoadedDatasetList",
    "LoaderError",
    "MediaMetadataBase",
    "MediaMetadataType",
    "MissingFileError",
    "MultiChoiceVQASample",
    "OCRSample",
    "PrimaryFileStore",
    "RawVideo",
    "Sample",
    "SampleDecoder",
    "SavableDataLoader",
    "SimilarityInterleavedSample",
    "SkipSample",
    "SourceInfo",
    "SystemFileStore",
    "TaskEncoder",
    "TextSample",
    "VQAOCRSample",
    "VQASample",
    "VidQASample",
    "WebdatasetFileStore",
    "WorkerConfig",
    "__version__",
    "basic_sample_keys",
    "batch_list",
    "batch_pad_stack",
    "batch_stack",
    "cooker",
    "edataclass",
    "generic_batch",
    "get_loader",
    "get_savable_loader",
    "get_train_dataset",
    "get_val_dataset",
    "get_val_datasets",
    "LimitDataset",
    "RepeatDataset",
    "load_dataset",
    "log_exception",
    "reraise_exception",
    "stateless",
    "SystemRng",
]
