"""The sample types of `megatron.energon` as dataclasses with the same field names.

Samples coming out of energon_rs are instances of these classes (crude samples are
`CrudeSample` dicts). Images and arrays are numpy arrays that own Rust buffers (no copy was
made; `torch.from_numpy` shares them), or torch tensors when the dataset was built with
`torch=True`. Undecoded parts are read-only `memoryview`s over the shard's bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Sequence, TypeVar, Union

__all__ = [
    "AudioData",
    "Batch",
    "CaptioningSample",
    "CrudeSample",
    "ExtendableDataclassMixin",
    "ImageClassificationSample",
    "ImageSample",
    "InterleavedSample",
    "MultiChoiceVQASample",
    "PinMemoryMixin",
    "OCRSample",
    "RawVideo",
    "Sample",
    "SimilarityInterleavedSample",
    "SourceInfo",
    "TextSample",
    "VQAOCRSample",
    "VQASample",
    "VidQASample",
    "edataclass",
]

T = TypeVar("T", bound="Sample")
B = TypeVar("B", bound="Batch")
C = TypeVar("C", bound=type)


def edataclass(cls: C) -> C:
    """The dataclass decorator of sample types: `@dataclass(kw_only=True, slots=True)`.
    Keyword-only fields let a subclass add fields without defaults after the base's fields
    with defaults; slots keep the instances small."""
    return dataclass(kw_only=True, slots=True)(cls)  # type: ignore[return-value]


@dataclass(frozen=True)
class SourceInfo:
    """Where a sample came from: the dataset, the sample index (or the file name looked up), the
    shard and the member names read."""

    dataset_path: str
    index: Union[str, int]
    shard_name: str
    file_names: tuple[str, ...]


@dataclass(frozen=True)
class AudioData:
    """Decoded audio: float32 samples in [-1, 1] of shape (channels, frames), and the rate."""

    samples: Any
    sample_rate: int


@dataclass(frozen=True)
class RawVideo:
    """A video part, not decoded: its container format and its bytes (a memoryview); what a
    wheel built without video decoding gives for audio and video parts."""

    format: str
    data: memoryview


def _pin_memory(value: Any) -> Any:
    """`value` with its torch tensors in pinned memory (dicts, dataclasses, named tuples, lists
    and tuples walked through), as the reference's `PinMemoryMixin` does."""
    if type(value).__module__.startswith("torch") and hasattr(value, "pin_memory"):
        return value.pin_memory()
    if isinstance(value, dict):
        return {key: _pin_memory(v) for key, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value)(
            **{f.name: _pin_memory(getattr(value, f.name)) for f in dataclasses.fields(value)}
        )
    if isinstance(value, (tuple, list)):
        if hasattr(value, "_fields"):
            return type(value)(*[_pin_memory(v) for v in value])
        return type(value)(_pin_memory(v) for v in value)
    return value


E = TypeVar("E", bound="ExtendableDataclassMixin")


class ExtendableDataclassMixin:
    """`extend(src, **new_fields)`: an instance of a derived dataclass from one of its base (the
    reference's mixin of the same name)."""

    __slots__ = ()

    @classmethod
    def extend(cls: type[E], src: Any, **kwargs: Any) -> E:
        """An instance of this (derived) class with the fields of `src` and `kwargs` for the new
        ones."""
        base = {f.name: getattr(src, f.name) for f in dataclasses.fields(src) if f.init}
        return cls(**{**base, **kwargs})


class PinMemoryMixin:
    """`pin_memory()`: the sample (or batch) with its torch tensors in pinned memory, for fast
    copies to a GPU (needs a CUDA build of torch and a device)."""

    __slots__ = ()

    def pin_memory(self: Any) -> Any:
        return _pin_memory(self)


@edataclass
class Sample(PinMemoryMixin, ExtendableDataclassMixin):
    """Base of every sample type (the reference's `Sample`)."""

    #: Uniquely identifies the sample in its dataset.
    __key__: str
    #: How to read the sample again: `("Webdataset", index)`, wrapped by the pipeline stages.
    __restore_key__: tuple[Union[str, int, tuple], ...]
    #: The dataset's subflavors, if any.
    __subflavors__: Optional[dict[str, Any]] = None
    #: Where the sample's parts came from.
    __sources__: Optional[tuple[SourceInfo, ...]] = None

    @classmethod
    def derive_from(cls: type[T], base_sample: "Sample", **kwargs: Any) -> T:
        """A new sample of this class with the base fields of `base_sample` and `kwargs`."""
        base = {f.name: getattr(base_sample, f.name) for f in dataclasses.fields(Sample)}
        return cls(**base, **kwargs)

    @classmethod
    def from_joined(cls: type[T], *args: Optional["Sample"], **kwargs: Any) -> T:
        """A sample of this class from joined samples: the primary's base fields, later samples'
        own fields overriding earlier ones, sources merged: the primary's, then every sample's
        (the primary's again, as the reference lists them)."""
        samples = [s for s in args if s is not None]
        if not samples:
            raise ValueError("from_joined needs at least one sample")
        base_names = {f.name for f in dataclasses.fields(Sample)}
        fields: dict[str, Any] = {}
        sources: list[SourceInfo] = list(samples[0].__sources__ or ())
        for s in samples:
            for f in dataclasses.fields(s):
                if f.name not in base_names:
                    fields[f.name] = getattr(s, f.name)
            sources.extend(s.__sources__ or ())
        primary = samples[0]
        fields.update(kwargs)
        return cls(
            __key__=primary.__key__,
            __restore_key__=primary.__restore_key__,
            __subflavors__=primary.__subflavors__,
            __sources__=tuple(sources),
            **fields,
        )


@edataclass
class Batch(PinMemoryMixin, ExtendableDataclassMixin):
    """Base of batch dataclasses (the reference's `Batch`): the samples' keys, the batch's
    restore key, their subflavors and sources."""

    #: The keys of the batch's samples.
    __key__: list[str]
    #: How to make the batch again (the loader sets it).
    __restore_key__: tuple[Union[str, int, tuple], ...]
    #: The samples' subflavors (those that have some).
    __subflavors__: Optional[list[Optional[dict[str, Any]]]] = None
    #: The samples' sources, one tuple for all.
    __sources__: Optional[tuple[SourceInfo, ...]] = None

    @classmethod
    def derive_from(cls: type[B], base_batch: "Batch", **kwargs: Any) -> B:
        """A new batch of this class with the base fields of `base_batch` and `kwargs`."""
        base = {f.name: getattr(base_batch, f.name) for f in dataclasses.fields(Batch)}
        return cls(**base, **kwargs)

    @classmethod
    def from_samples(cls: type[B], samples: Sequence[Any], **kwargs: Any) -> B:
        """A batch of this class from samples: each field the list of the samples' values,
        `__sources__` flattened into one tuple, `__subflavors__` the samples' non-empty ones;
        `kwargs` override fields. Tensors stay a list, as in the reference (whose padding and
        stacking here never applies)."""
        args: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in kwargs:
                args[f.name] = kwargs[f.name]
            elif f.name == "__sources__":
                if any(s.__sources__ is not None for s in samples):
                    args[f.name] = tuple(src for s in samples if s.__sources__ for src in s.__sources__)
            elif f.name == "__subflavors__":
                if any(s.__subflavors__ is not None for s in samples):
                    args[f.name] = [s.__subflavors__ for s in samples if s.__subflavors__]
            else:
                args[f.name] = [getattr(s, f.name) for s in samples]
        return cls(**args)

"""Batches are samples of the same type whose fields hold lists or stacked arrays."""


class CrudeSample(dict):
    """A crude sample: a dict of the decoded parts plus `__key__`, `__shard__`,
    `__restore_key__`, `__subflavors__` and `__sources__`, for cookers to turn into a typed
    sample."""


@edataclass
class CaptioningSample(Sample):
    """An image with a caption."""

    image: Any
    caption: Any


@edataclass
class ImageSample(Sample):
    """An image."""

    image: Any


@edataclass
class ImageClassificationSample(Sample):
    """An image with a class label."""

    image: Any
    label: Optional[Any] = None
    label_name: Optional[Any] = None


@edataclass
class InterleavedSample(Sample):
    """A sequence of images and texts."""

    sequence: list[Any]


@edataclass
class MultiChoiceVQASample(Sample):
    """A multiple-choice question about an image."""

    image: Any
    context: Any
    choices: Optional[Any] = None
    correct_choice_idx: Any = 0


@edataclass
class OCRSample(Sample):
    """An image with OCR annotations."""

    image: Any
    text: Any
    block_boxes: Optional[Any] = None
    block_classes: Optional[Any] = None
    block_text: Optional[Any] = None
    lines_boxes: Optional[Any] = None
    lines_text: Optional[Any] = None
    words_boxes: Optional[Any] = None
    words_text: Optional[Any] = None
    chars_boxes: Optional[Any] = None
    chars_text: Optional[Any] = None


@edataclass
class SimilarityInterleavedSample(Sample):
    """Images and texts with their similarities."""

    images: Any
    texts: Any
    audio: Optional[Any] = None
    video: Optional[Any] = None
    similarity_matrix: Optional[Any] = None
    matched_text_indices: Optional[Any] = None


@edataclass
class TextSample(Sample):
    """A text."""

    text: Any


@edataclass
class VQASample(Sample):
    """A question about an image, with answers."""

    image: Any
    context: Any
    answers: Optional[Any] = None
    answer_weights: Optional[Any] = None


@edataclass
class VQAOCRSample(Sample):
    """A question about an image with text, with answers and word annotations."""

    image: Any
    context: Any
    text: Any
    answers: Optional[Any] = None
    answer_weights: Optional[Any] = None
    words_boxes: Optional[Any] = None
    words_text: Optional[Any] = None


@edataclass
class VidQASample(Sample):
    """A question about a video (an `energon_rs.av.AVDecoder` with the default `av_decode`),
    with answers."""

    video: Any
    context: Any
    answers: Optional[Any] = None
    answer_weights: Optional[Any] = None

