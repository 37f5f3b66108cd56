"""Task encoders and cookers, as in `megatron.energon`: subclass `TaskEncoder` (or
`DefaultTaskEncoder`) and override the hooks you need.

The Rust pipeline calls the overridden hooks on the loader's worker threads (cookers,
`encode_sample`, packing, `batch` and `encode_batch`; reading and decoding run in Rust in
parallel, each hook takes the GIL for its call), in the reference's stage order. Hooks that
are not overridden cost nothing: batching is then done in Rust (tensor fields stacked with zero
padding, other fields as lists).

Errors follow the reference: `SkipSample` drops the sample quietly, other exceptions go to
`worker_config.global_error_handler` and drop the sample, system errors (and too many failures
in a row) are fatal.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

from . import _native
from .cache import (
    DecodeFileStore,
    FileStore,
    JsonlFileStore,
    PrimaryFileStore,
    WebdatasetFileStore,
    _of_native,
    unpickle_part,
)
from .rng import SystemRng
from .sample import CrudeSample, Sample, SourceInfo

__all__ = [
    "Cooker",
    "DefaultTaskEncoder",
    "FatalSampleError",
    "SampleDecoder",
    "SkipSample",
    "TaskEncoder",
    "basic_sample_keys",
    "batch_list",
    "batch_pad_stack",
    "batch_stack",
    "cooker",
    "generic_batch",
    "stateless",
]

T = TypeVar("T")

#: Consecutive failures of one hook before the error becomes fatal (the reference's default).
DEFAULT_FAILURE_TOLERANCE = 100


class SkipSample(Exception):
    """Raise in a hook to drop the current sample (or batch) without an error."""


class FatalSampleError(Exception):
    """An error that ends the iteration."""


_SYSTEM_EXCEPTIONS = (
    SystemError,
    SyntaxError,
    ImportError,
    StopIteration,
    StopAsyncIteration,
    MemoryError,
    RecursionError,
    ReferenceError,
    NameError,
    UnboundLocalError,
    FatalSampleError,
)


def stateless(
    fn: Optional[Callable[..., Any]] = None,
    *,
    restore_seeds: bool = False,
    failure_tolerance: Optional[int] = None,
) -> Any:
    """Marks a hook as deterministic (a function of its input only), as the reference requires
    for restoring; usable bare (`@stateless`) or with arguments.

    With `restore_seeds=True` every call of the function (also one from another method, such as
    a subclass's `encode_sample` calling `super().encode_sample(...)`) runs with the global
    random generators seeded from the worker seed and the current sample index of the hook call
    it is part of, and their state is restored afterwards, as the reference does. Outside a
    loader's hook call there is no sample index, and the function runs unseeded."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        if restore_seeds:
            f = _seeded(f)
        f.__stateless__ = True  # type: ignore[attr-defined]
        f.__restore_seeds__ = restore_seeds  # type: ignore[attr-defined]
        if failure_tolerance is not None:
            f.__failure_tolerance__ = failure_tolerance  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


def _seeded(f: Callable[..., Any]) -> Callable[..., Any]:
    """`f` run with the global generators seeded from the current hook call's context (see
    `stateless`). A generator function is seeded when its first sample is pulled; between its
    samples the caller's random state is back, and the generator's own state is set again
    before the next one is made, as the reference does."""

    def run(call: Callable[[], Any]) -> Any:
        seed_args = getattr(_CONTEXT, "seed_args", None)
        if seed_args is None:
            return call()
        # The global generators are the process's, and the workers are threads: seeded calls
        # take turns, so that no other worker reseeds or draws in the middle of one.
        with _SEEDED_CALLS:
            outer = SystemRng.save_state()
            SystemRng.seed_args(*seed_args)
            try:
                return call()
            finally:
                SystemRng.restore_state(outer)

    if inspect.isgeneratorfunction(f):

        @functools.wraps(f)
        def seeded_generator(*args: Any, **kwargs: Any) -> Any:
            seed_args = getattr(_CONTEXT, "seed_args", None)
            if seed_args is None:
                yield from f(*args, **kwargs)
                return
            it = f(*args, **kwargs)
            inner = None
            while True:
                with _SEEDED_CALLS:
                    outer = SystemRng.save_state()
                    if inner is None:
                        SystemRng.seed_args(*seed_args)
                    else:
                        SystemRng.restore_state(inner)
                    try:
                        sample = next(it)
                        inner = SystemRng.save_state()
                    except StopIteration:
                        return
                    finally:
                        SystemRng.restore_state(outer)
                yield sample

        return seeded_generator

    @functools.wraps(f)
    def seeded(*args: Any, **kwargs: Any) -> Any:
        return run(lambda: f(*args, **kwargs))

    return seeded


@dataclass
class SampleDecoder:
    """How parts are decoded: `image_decode` is one of the reference's names (`torchrgb`,
    `rgb8`, `l8`, ...); `guess_content` recognizes media by their bytes. Audio and video parts
    (`mp4 avi mov webm mkv flv flac mp3 wav`) follow `av_decode`, as in the reference:
    `"AVDecoder"` gives an `energon_rs.av.AVDecoder` that decodes when called, `"torch"` the
    whole file decoded on the loader's threads (an `AVData`, with the audio of videos if
    `video_decode_audio`; `None` for an unknown file type), `"pyav"` a PyAV container."""

    image_decode: str = "torchrgb"
    av_decode: str = "AVDecoder"
    video_decode_audio: bool = False
    guess_content: bool = False


@dataclass
class Cooker(Generic[T]):
    """Turns crude samples into typed samples: `cook(crude_sample, **aux)`, used for the datasets
    whose subflavors contain every item of `has_subflavors`. `aux` are the dataset's auxiliary
    file stores by name (a metadataset's `aux:`), plus `primary` (its own files) when the cook
    function is marked `@cooker(need_primary=True)`."""

    cook: Callable[..., T]
    has_subflavors: Optional[dict] = None

    @property
    def need_primary(self) -> bool:
        """Whether the cook function gets the dataset's own files as `primary`."""
        return bool(getattr(self.cook, "__need_primary__", False))

    @property
    def need_cache(self) -> bool:
        """Whether the cook function gets the loader's cache pool as `cache`."""
        return bool(getattr(self.cook, "__need_cache__", False))

    def is_match(self, subflavors: Optional[dict]) -> bool:
        """Whether this cooker applies to a dataset with these subflavors."""
        if not self.has_subflavors:
            return True
        subflavors = subflavors or {}
        return all(k in subflavors and subflavors[k] == v for k, v in self.has_subflavors.items())


def cooker(
    fn: Optional[Callable[..., Any]] = None, *, need_cache: bool = False, need_primary: bool = False
) -> Any:
    """Marks a cook function: `need_primary` gives it the dataset's own files as the file store
    `primary` (names starting with `.` are relative to the sample's key); `need_cache` gives it
    the loader's cache pool as `cache` (`get_loader(..., cache_pool=...)`; a `NoCachePool`
    without one)."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__need_primary__ = need_primary  # type: ignore[attr-defined]
        f.__need_cache__ = need_cache  # type: ignore[attr-defined]
        return stateless(f)

    return mark(fn) if fn is not None else mark


def basic_sample_keys(
    crude_sample: dict, additional_source_info: Sequence[SourceInfo] = ()
) -> dict:
    """The base fields of a crude sample, to build a typed sample from it:
    `TextSample(**basic_sample_keys(crude), text=...)`."""
    sources = crude_sample.get("__sources__")
    if additional_source_info:
        sources = (*(sources or ()), *additional_source_info)
    return {
        "__key__": crude_sample["__key__"],
        "__restore_key__": crude_sample["__restore_key__"],
        "__subflavors__": crude_sample.get("__subflavors__"),
        "__sources__": sources,
    }


def _is_tensor(x: Any) -> bool:
    if type(x).__module__ == "numpy" and type(x).__name__ == "ndarray":
        return True
    return type(x).__module__.startswith("torch") and type(x).__name__ == "Tensor"


def batch_pad_stack(batch: list) -> Any:
    """Stacks numpy arrays (or torch tensors) along a new first axis, zero-padding each axis to
    its largest size."""
    first = batch[0]
    max_size = [max(b.shape[d] for b in batch) for d in range(first.ndim)]
    if type(first).__module__ == "numpy":
        import numpy as np

        out = np.zeros((len(batch), *max_size), dtype=first.dtype)
    else:
        out = first.new_zeros((len(batch), *max_size))
    for i, b in enumerate(batch):
        out[(i, *(slice(0, s) for s in b.shape))] = b
    return out


def batch_stack(batch: list) -> Any:
    """Stacks equally shaped numpy arrays (or torch tensors) along a new first axis."""
    first = batch[0]
    if type(first).__module__ == "numpy":
        import numpy as np

        return np.stack(batch, axis=0)
    import torch

    return torch.stack(batch, dim=0)


def batch_list(batch: list) -> Any:
    """The batch as the list of its values."""
    return batch


def generic_batch(batch: list) -> Any:
    """The reference's generic batching (a plain `TaskEncoder`'s `batch`): tensors padded and
    stacked, dicts and dataclasses field by field (`__subflavors__` too: one dict of lists),
    anything else as a list."""
    return _batch(batch, keep=())


def _default_batch(batch: list) -> Any:
    """`DefaultTaskEncoder`'s batching: `generic_batch`, but the `__subflavors__` of samples
    (instances of `Sample`) stay one dict per sample, as the reference's does."""
    return _batch(batch, keep=("__subflavors__",) if isinstance(batch[0], Sample) else ())


def _batch(batch: list, keep: tuple) -> Any:
    """`generic_batch`, with the dataclass fields named in `keep` listed as they are."""
    first = batch[0]
    if _is_tensor(first):
        return batch_pad_stack(batch)
    if isinstance(first, dict):
        return type(first)({k: generic_batch([s[k] for s in batch]) for k in first.keys()})
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        if hasattr(first, "from_samples"):
            return first.from_samples(batch)  # type: ignore[attr-defined]
        return type(first)(
            **{
                f.name: (
                    [getattr(s, f.name) for s in batch]
                    if f.name in keep
                    else generic_batch([getattr(s, f.name) for s in batch])
                )
                for f in dataclasses.fields(first)
            }
        )
    return list(batch)


#: The call a hook is in, per thread: set from the Rust stage's context before each call.
_CONTEXT = threading.local()


T_sample = TypeVar("T_sample")
T_encoded_sample = TypeVar("T_encoded_sample")
T_raw_batch = TypeVar("T_raw_batch")
T_batch = TypeVar("T_batch")


class TaskEncoder(Generic[T_sample, T_encoded_sample, T_raw_batch, T_batch]):
    """Base class of task encoders: override `encode_sample` (also as a generator yielding
    several samples), `batch_group_criterion`, `batch`, `encode_batch`, or set `cookers` for crude
    datasets. Methods not overridden are not called (the Rust pipeline does their work)."""

    @property
    def current_sample_index(self) -> int:
        """The index of the sample the current hook call works on, unique among the workers of
        a rank and the same when the sample is made again on restore."""
        return getattr(_CONTEXT, "sample_index", 0)

    @property
    def current_batch_index(self) -> int:
        """The index of the item (batch) the worker is preparing."""
        return getattr(_CONTEXT, "batch_index", 0)

    def preencode_sample(self, sample: Any) -> Any:
        """The encoding before packing, instead of `encode_sample` (only called when
        overridden)."""
        raise NotImplementedError

    def postencode_sample(self, sample: Any) -> Any:
        """The encoding after packing, of each sample of a pack (only called when overridden)."""
        raise NotImplementedError

    def select_samples_to_pack(self, samples: list) -> list:
        """Groups a full packing buffer into packs: a list of lists of its samples (each at most
        once; the others are dropped). Needed with `packing_buffer_size`."""
        raise NotImplementedError

    def pack_selected_samples(self, samples: list) -> Any:
        """Combines the samples of one pack into one sample (or yields several)."""
        raise NotImplementedError

    def batch_group_criterion(self, sample: Any) -> tuple:
        """The group of a sample and the group's batch size (`None`: the loader's): samples are
        batched with others of their group. Only called when overridden."""
        raise NotImplementedError

    #: Cookers for crude datasets, the first matching one is used.
    cookers: Sequence[Cooker] = ()
    #: How parts are decoded; `None` keeps every part as raw bytes.
    decoder: Optional[SampleDecoder] = SampleDecoder()

    def encode_sample(self, sample: Any) -> Any:
        """Encodes one sample (identity)."""
        return sample

    def batch(self, samples: list) -> Any:
        """Batches encoded samples (the default batching)."""
        return generic_batch(samples)

    def encode_batch(self, batch: Any) -> Any:
        """Encodes a batch (identity)."""
        return batch

    def cook_crude_sample(
        self, sample: CrudeSample, cooker: Cooker, aux: dict[str, FileStore]
    ) -> Any:
        """Cooks a crude sample with the dataset's cooker and auxiliary file stores."""
        if cooker.need_primary:
            aux = {**aux, "primary": PrimaryFileStore(aux["primary"], current_key=sample["__key__"])}
        return cooker.cook(sample, **aux)


class DefaultTaskEncoder(
    TaskEncoder[T_sample, T_encoded_sample, T_raw_batch, T_batch],
    Generic[T_sample, T_encoded_sample, T_raw_batch, T_batch],
):
    """The default task encoder: samples as read, batched by the default batching. Optional
    target types convert by field names, as in the reference."""

    def __init__(
        self,
        *,
        encoded_sample_type: Optional[type] = None,
        raw_batch_type: Optional[type] = None,
        batch_type: Optional[type] = None,
    ) -> None:
        self._encoded_sample_type = encoded_sample_type
        self._raw_batch_type = raw_batch_type
        self._batch_type = batch_type

    def encode_sample(self, sample: Any) -> Any:
        """Converts to `encoded_sample_type` by field names (identity without one)."""
        if self._encoded_sample_type is None:
            return sample
        return _convert(sample, self._encoded_sample_type)

    def batch(self, samples: list) -> Any:
        """The default batching, then conversion to `raw_batch_type` if set."""
        batch = _default_batch(samples)
        return batch if self._raw_batch_type is None else _convert(batch, self._raw_batch_type)

    def encode_batch(self, batch: Any) -> Any:
        """Converts to `batch_type` by field names (identity without one)."""
        return batch if self._batch_type is None else _convert(batch, self._batch_type)


def _convert(value: Any, target: type) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif isinstance(value, dict):
        fields = dict(value)
    else:
        raise ValueError(f"cannot convert {type(value).__name__} to {target.__name__}")
    if issubclass(target, dict):
        return fields
    return target(**fields)


#: The hooks that run only when overridden, each with its stage.
_HOOKS = (
    "encode_sample",
    "preencode_sample",
    "postencode_sample",
    "select_samples_to_pack",
    "pack_selected_samples",
    "batch_group_criterion",
    "batch",
    "encode_batch",
)


def _overridden(task_encoder: TaskEncoder, name: str) -> bool:
    method = getattr(type(task_encoder), name)
    if name in ("encode_sample", "batch", "encode_batch") and isinstance(
        task_encoder, DefaultTaskEncoder
    ):
        if method is getattr(DefaultTaskEncoder, name):
            targets = {
                "encode_sample": task_encoder._encoded_sample_type,
                "batch": task_encoder._raw_batch_type,
                "encode_batch": task_encoder._batch_type,
            }
            return targets[name] is not None
    return method is not getattr(TaskEncoder, name) and method is not getattr(
        DefaultTaskEncoder, name, None
    )


#: Held by a call that runs with seeded global generators (`restore_seeds`).
_SEEDED_CALLS = threading.RLock()


class _Lazy:
    """The samples a generator hook yields for one input, made one at a time as the loader
    pulls them (the reference iterates generators lazily: each sample sees the
    `current_batch_index` of the moment it is made)."""

    __slots__ = ("pull", "value")

    def __init__(self, pull: Callable[[tuple], Any], value: Any) -> None:
        #: `pull(ctx)`: `(sample,)`, or `None` when the generator is done; it raises what the
        #: generator raises (the loader's error policy decides what that means).
        self.pull = pull
        #: The input of the call that made the generator (what the error handler sees).
        self.value = value


def _set_context(ctx: Optional[tuple]) -> None:
    """Makes `ctx`, `(current_sample_index, current_batch_index, worker_seed)`, the context of
    the hook call on this thread: what the task encoder's `current_sample_index` and
    `current_batch_index` give and from which `@stateless(restore_seeds=True)` functions seed
    the global random generators, as the reference does
    (`SystemRng.seed_args(worker_seed, sample_index)`)."""
    if ctx is not None:
        sample_index, batch_index, worker_seed = ctx
        _CONTEXT.sample_index, _CONTEXT.batch_index = sample_index, batch_index
        _CONTEXT.seed_args = (worker_seed, sample_index)
    else:
        _CONTEXT.seed_args = None


def _hook(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A hook as the loader calls it: in the context of the call (`ctx`), a generator's samples
    as a `_Lazy`. Exceptions go through as they are: the loader classifies them (`SkipSample`,
    fatal, other) and applies the error policy."""

    def call(value: Any, *args: Any, ctx: Optional[tuple] = None) -> Any:
        _set_context(ctx)
        res = fn(value, *args)
        if not inspect.isgenerator(res):
            return res

        def pull(ctx: tuple) -> Optional[tuple]:
            _set_context(ctx)
            try:
                return (next(res),)
            except StopIteration:
                return None

        return _Lazy(pull, value)

    functools.update_wrapper(call, fn)
    return call


def _tolerance(fn: Any, default: int) -> int:
    """The failure tolerance of a hook (`@stateless(failure_tolerance=N)`), as the reference
    reads it: the task encoder's default without one, 0 (never fatal) for `None` or 0."""
    return getattr(fn, "__failure_tolerance__", default) or 0


def _set_restore_key(sample: Any, restore_key: tuple) -> Any:
    if isinstance(sample, dict):
        sample["__restore_key__"] = restore_key
    elif hasattr(sample, "__restore_key__"):
        sample.__restore_key__ = restore_key
    return sample


def _hooks(task_encoder: TaskEncoder, worker_config: Any, torch: bool) -> Any:
    """The hook set the native pipeline runs (`_native._HookSet`)."""
    default_tolerance = getattr(
        task_encoder, "__default_failure_tolerance__", DEFAULT_FAILURE_TOLERANCE
    ) or 0
    #: The failure tolerance of every overridden hook, by the loader's stage name.
    tolerances: dict = {}

    def hook(name: str) -> Optional[Callable[[Any], Any]]:
        if not _overridden(task_encoder, name):
            return None
        fn = getattr(task_encoder, name)
        tolerances[name] = _tolerance(fn, default_tolerance)
        return _hook(fn)

    decoder = task_encoder.decoder
    #: The cache pool of the loader running this pipeline (`set_cache_pool`).
    cache_pool: list = [None]

    def set_cache_pool(pool: Any) -> None:
        cache_pool[0] = pool

    def decoded(store: FileStore) -> FileStore:
        return store if decoder is None else DecodeFileStore(store, decoder=decoder, torch=torch)

    def make_cook(
        subflavors: Optional[dict],
        aux: dict,
        primary_path: str,
        primary_jsonl: bool,
        primary_config: Optional[str] = None,
    ) -> Optional[Callable[..., Any]]:
        """The cooking function of one crude dataset (chosen once, as the reference does when
        it builds the dataset); `None` without cookers: crude samples stay as they are. A
        dataset whose config (`primary_config`, default `dataset.yaml`) has a Python
        `sample_loader` is cooked by it."""
        if not primary_jsonl:
            from .sample_loader import sample_loader_of

            loader = sample_loader_of(primary_path, primary_config)
            if loader is not None:
                return _hook(loader)
        if not task_encoder.cookers:
            return None
        for c in task_encoder.cookers:
            if c.is_match(subflavors):
                break
        else:
            raise ValueError(f"no cooker matches the subflavors {subflavors!r}")
        stores = {name: decoded(_of_native(store)) for name, store in aux.items()}
        if c.need_primary and "primary" not in stores:
            own = JsonlFileStore(primary_path) if primary_jsonl else WebdatasetFileStore(primary_path)
            stores["primary"] = decoded(own)
        if c.need_cache:

            def cook(sample: Any, c: Cooker = c, stores: dict = stores) -> Any:
                from .cache_pool import NoCachePool

                pool = cache_pool[0] if cache_pool[0] is not None else NoCachePool()
                return task_encoder.cook_crude_sample(sample, cooker=c, aux={**stores, "cache": pool})
        else:
            cook = functools.partial(task_encoder.cook_crude_sample, cooker=c, aux=stores)
        if decoder is not None:
            # Pickled parts are decoded here (the Rust core hands them out as bytes).
            def cook_decoded(sample: Any, cook: Callable[..., Any] = cook) -> Any:
                for name, value in list(sample.items()):
                    sample[name] = unpickle_part(name, value)
                return cook(sample)

            run: Callable[..., Any] = cook_decoded
        else:
            run = cook
        return _hook(run)

    def make_joiner(
        kind: str, module: str, name: str, names: Optional[list]
    ) -> Callable[..., Any]:
        """The function combining the samples of a join (`joiner:` of the metadataset): a
        sample class's `from_joined`, or a function; the classes of `megatron.energon` are
        energon_rs's."""
        mod = importlib.import_module("energon_rs" if module == "megatron.energon" else module)
        joiner = getattr(mod, name)
        if kind == "class":
            joiner = joiner.from_joined

        def join(samples: list, restore_key: tuple) -> Any:
            if names is not None:
                out = joiner(**dict(zip(names, samples)))
            else:
                out = joiner(*samples)
            return _set_restore_key(out, restore_key)

        functools.update_wrapper(join, joiner)
        return join

    overridden = [
        name
        for name in _HOOKS
        if _overridden(task_encoder, name)
    ]
    encoder_type = type(task_encoder)
    config = [
        # Informative (the `_`): a state restores into another task encoder class with the same
        # stages (`encoder.hooks`), as in the reference.
        ("_class", f"{encoder_type.__module__}.{encoder_type.__qualname__}"),
        ("_python_hooks", ",".join(overridden)),
        ("_cookers", str(len(task_encoder.cookers))),
    ]
    # A cooker's tolerance is that of the loader's cook stage (the first cooker that sets one).
    for c in task_encoder.cookers:
        if getattr(c.cook, "__failure_tolerance__", None) is not None:
            tolerances["cook_crude_sample"] = _tolerance(c.cook, default_tolerance)
            break
    hooks = {name: hook(name) for name in _HOOKS}
    # The batching a task encoder gets without its own `batch`: `DefaultTaskEncoder`'s, or a
    # plain `TaskEncoder`'s generic one (they differ in `__subflavors__`).
    default = isinstance(task_encoder, DefaultTaskEncoder)
    return _native._HookSet(
        handler=worker_config.global_error_handler,
        skip_error=SkipSample,
        fatal_errors=_SYSTEM_EXCEPTIONS,
        fatal_error=FatalSampleError,
        torch=torch,
        config=config,
        failure_tolerance=default_tolerance,
        hook_tolerances=tolerances,
        # Whether Python runs for every sample or batch (a loader then runs its workers in
        # processes by default: `energon_rs.loader._worker_type`).
        per_sample_python=bool(overridden) or bool(task_encoder.cookers),
        lazy=_Lazy,
        default_batch=_hook(_default_batch if default else generic_batch),
        subflavors_by_key=not default,
        make_cook=make_cook,
        make_joiner=make_joiner,
        set_cache_pool=set_cache_pool,
        **hooks,
    )
