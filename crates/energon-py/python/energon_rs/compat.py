"""Running code written for `megatron.energon` on energon_rs unchanged.

    import energon_rs.compat
    energon_rs.compat.install()

    from megatron.energon import get_train_dataset              # energon_rs's
    from megatron.energon.task_encoder.base import stateless     # energon_rs's

After `install()`, `megatron.energon` and the submodule paths of megatron-energon 7.4
(`megatron.energon.task_encoder.base`, `.flavors`, `.loader`, `.dataset_config`, `.epathlib`,
`.av`, `.transforms`, ...) import as modules whose names are energon_rs's. A name energon_rs does
not provide raises an `AttributeError` (an `ImportError` for `from ... import`) that says so,
listed by `missing_names()`. A `megatron` package that is installed (Megatron-LM's own
`megatron.core`, ...) stays as it is: only `megatron.energon` is served by energon_rs.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Optional, Sequence

__all__ = ["REFERENCE_MODULES", "REFERENCE_NAMES", "install", "missing_names", "uninstall"]

#: The public names of `megatron.energon` 7.4 (its `__all__`).
REFERENCE_NAMES = (
    "AugmentTaskEncoder BaseCoreDatasetFactory BaseWebdatasetFactory basic_sample_keys batch_list "
    "batch_pad_stack batch_stack Batch BatchDataset BlendDataset CachePool CaptioningSample "
    "CaptioningWebdataset concat_pad ConcatDataset cooker Cooker CrudeJsonlDatasetFactory "
    "CrudeSample CrudeWebdataset DatasetLoader DatasetLoaderInterface DecodeFileStore "
    "DefaultCrudeJsonlDatasetFactory DefaultDecoderWebdatasetFactory "
    "DefaultGenericWebdatasetFactory DefaultTaskEncoder DirectLazy edataclass EpochizeDataset "
    "FileCacheLazy FileStore FileStoreCachePool FileStoreDecoder FilterDataset GcDataset "
    "generic_batch generic_concat get_loader get_savable_loader get_train_dataset "
    "get_val_dataset get_val_datasets GroupBatchDataset homogeneous_concat_mix "
    "ImageClassificationSample ImageClassificationWebdataset ImageSample ImageWebdataset "
    "InterleavedSample InterleavedWebdataset IterMapDataset JoinedWebdatasetFactory Lazy "
    "LimitDataset load_dataset log_exception LogSampleDataset MapDataset Metadataset "
    "MetadatasetV2 MixBatchDataset MockLazy MultiChoiceVQASample MultiChoiceVQAWebdataset "
    "NoCachePool OCRSample OCRWebdataset PackingDataset PrimaryFileStore prepare_metadataset "
    "RepeatDataset reraise_exception Sample SampleDecoder SavableDataLoader SavableDataset "
    "traverse_metadataset ShuffleBufferDataset SimilarityInterleavedSample "
    "SimilarityInterleavedWebdataset SkipSample SourceInfo StandardWebdatasetFactory stateless "
    "SystemFileStore TaskEncoder TextSample TextWebdataset VidQASample VidQAWebdataset "
    "VQAOCRWebdataset VQASample VQAWebdataset WorkerConfig"
).split()

#: The modules of the `megatron.energon` 7.4 package, relative to it.
REFERENCE_MODULES = (
    "av av.av_data av.av_decoder av.av_init av.av_reader av.utils bracecollapse cache cache.base "
    "cache.file_cache_pool cache.file_store cache.no_cache dataset_config deprecation edataclass "
    "epathlib epathlib.epath epathlib.rclone_config errors eyaml flavors flavors.base_dataset "
    "flavors.captioning flavors.crude flavors.image flavors.image_classification "
    "flavors.interleaved flavors.jsonl flavors.jsonl.crude_jsonl_dataset flavors.jsonl.ijsonl "
    "flavors.jsonl.ijsonl_reader flavors.jsonl.jsonl_prepare flavors.multichoice_vqa flavors.ocr "
    "flavors.similarity_interleaved flavors.text flavors.vid_qa flavors.vqa flavors.vqa_and_ocr "
    "flavors.webdataset flavors.webdataset.base_webdataset flavors.webdataset.config "
    "flavors.webdataset.default_decoder_webdataset flavors.webdataset.default_generic_webdataset "
    "flavors.webdataset.empty_dataset_error flavors.webdataset.field_access "
    "flavors.webdataset.indexing flavors.webdataset.itar flavors.webdataset.itar_reader "
    "flavors.webdataset.joined_webdataset flavors.webdataset.metadata flavors.webdataset.prepare "
    "flavors.webdataset.sample_decoder flavors.webdataset.sample_loader "
    "flavors.webdataset.sharder flavors.webdataset.standard_webdataset flavors.webdataset.structs "
    "loader local_copy media media.extractor media.filesystem_prepare media.metadata metadataset "
    "metadataset.dataset_loader metadataset.join_dataset_loader metadataset.loader "
    "metadataset.loader_interface metadataset.metadataset metadataset.metadataset_v2 "
    "module_loader retry_stream rng sample_utils savable savable_loader source_info state "
    "task_encoder task_encoder.base task_encoder.cooking task_encoder.loader transforms "
    "transforms.common worker wrappers "
    "cli cli.main flavors.webdataset.aggregator_pool flavors.webdataset.tar_patcher "
    "flavors.webdataset.thread_local_sqlite fork_hook tools tools.analyze_debug tools.checkpoint "
    "tools.info tools.lint tools.mount tools.prepare tools.prepare_media tools.preview "
    "transforms.custom transforms.mappers transforms.merge typed_converter watchdog "
    "wrappers.base wrappers.batch_dataset wrappers.blend_dataset wrappers.buffer "
    "wrappers.concat_dataset wrappers.epochize_dataset wrappers.filter_dataset "
    "wrappers.gc_dataset wrappers.group_batch_dataset wrappers.iter_map_dataset "
    "wrappers.limit_dataset wrappers.log_sample_dataset wrappers.map_dataset "
    "wrappers.mix_batch_dataset wrappers.packing_dataset wrappers.repeat_dataset "
    "wrappers.shuffle_buffer_dataset wrappers.skip wrappers.watchdog_dataset"
).split()

_PACKAGE = "megatron.energon"
_MODULES = frozenset(REFERENCE_MODULES)
_NAMES = frozenset(REFERENCE_NAMES)

#: energon_rs modules whose names the aliases also offer (after the package's own).
_SOURCES = ("energon_rs", "energon_rs.rng", "energon_rs.task_encoder", "energon_rs.loader",
            "energon_rs.sample", "energon_rs.cache", "energon_rs.worker", "energon_rs.av", "energon_rs.media",
            "energon_rs.sample_utils", "energon_rs.fork_hook", "energon_rs.epath",
            "energon_rs.prepare", "energon_rs.wrappers",
            "energon_rs.cache_pool", "energon_rs.watchdog", "energon_rs.transforms")


#: Names that mean different things in different modules: (module, name) -> (source, name).
_MODULE_NAMES = {
    ("tools.prepare", "command"): ("energon_rs.cli", "prepare_command"),
    ("tools.prepare_media", "command"): ("energon_rs.cli", "prepare_media_command"),
    ("tools.info", "command"): ("energon_rs.cli", "info_command"),
    ("tools.lint", "command"): ("energon_rs.cli", "lint_command"),
    ("tools.preview", "command"): ("energon_rs.cli", "preview_command"),
    ("tools.checkpoint", "command"): ("energon_rs.cli", "checkpoint_command"),
    ("tools.checkpoint", "command_redist"): ("energon_rs.cli", "command_redist"),
    ("tools.analyze_debug", "command"): ("energon_rs.cli", "analyze_debug_command"),
    ("cli.main", "prepare_media_command"): ("energon_rs.cli", "prepare_media_command"),
}


def _lookup(module: str, name: str) -> Any:
    special = _MODULE_NAMES.get((module.removeprefix(_PACKAGE + "."), name))
    if special is not None:
        return getattr(importlib.import_module(special[0]), special[1])
    for source in _SOURCES:
        mod = importlib.import_module(source)
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(_missing_message(module, name))


def _missing_message(module: str, name: str) -> str:
    return (
        f"module {module!r} has no attribute {name!r}: energon_rs does not provide "
        f"megatron.energon's {name} (see energon_rs.compat.missing_names())"
    )


class _Package(types.ModuleType):
    """The alias of `megatron.energon`: importing its submodule `edataclass` does not hide the
    function of that name (the reference's package binds the function after the import)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _NAMES:
            return
        super().__setattr__(name, value)


def _alias(fullname: str) -> types.ModuleType:
    cls = _Package if fullname == _PACKAGE else types.ModuleType
    module = cls(fullname, f"energon_rs serving {fullname}")
    module.__path__ = []  # a package: its submodules import through the finder too
    module.__getattr__ = lambda name: _lookup(fullname, name)  # type: ignore[method-assign]
    if fullname == _PACKAGE:
        module.__all__ = [n for n in REFERENCE_NAMES if n not in _missing()]
        module.__version__ = importlib.import_module("energon_rs").__version__
    return module


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _alias(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """Serves `megatron.energon` and its submodules (and `megatron` where none is installed)."""

    def __init__(self, own_megatron: bool) -> None:
        self.own_megatron = own_megatron

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Any = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != _PACKAGE and not fullname.startswith(_PACKAGE + "."):
            # Only `megatron.energon...` (and `megatron` itself) is served: a top-level module
            # named like one of its submodules (PyAV's `av`, a project's `tools`) stays its own.
            if self.own_megatron and fullname == "megatron":
                return importlib.util.spec_from_loader(fullname, _Loader(), is_package=True)
            return None
        sub = fullname.removeprefix(_PACKAGE + ".")
        if sub in _NAMES and sub in _missing():
            # `from megatron.energon import X` looks for a submodule X when the package has no
            # name X: say why there is none.
            raise ImportError(_missing_message(_PACKAGE, sub), name=fullname)
        if fullname != _PACKAGE and sub not in _MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, _Loader(), is_package=True)


_installed: Optional[_Finder] = None


def install(torch: bool = True) -> None:
    """Makes `import megatron.energon...` import energon_rs (idempotent). With `torch` (the
    default), datasets hand tensors out as torch tensors, as the reference does
    (`energon_rs.loader.DEFAULT_TORCH`); file stores hand out files as `bytes`
    (`energon_rs.cache.FILES_AS_BYTES`)."""
    global _installed
    importlib.import_module("energon_rs.loader").DEFAULT_TORCH = torch
    importlib.import_module("energon_rs.cache").FILES_AS_BYTES = True
    if _installed is not None:
        return
    for name in [n for n in sys.modules if n == _PACKAGE or n.startswith(_PACKAGE + ".")]:
        del sys.modules[name]
    own_megatron = importlib.util.find_spec("megatron") is None
    _installed = _Finder(own_megatron)
    sys.meta_path.insert(0, _installed)


def uninstall() -> None:
    """Undoes `install()` (the modules it made are forgotten)."""
    global _installed
    if _installed is None:
        return
    importlib.import_module("energon_rs.loader").DEFAULT_TORCH = False
    importlib.import_module("energon_rs.cache").FILES_AS_BYTES = False
    sys.meta_path.remove(_installed)
    own_megatron = _installed.own_megatron
    _installed = None
    for name in list(sys.modules):
        if name == _PACKAGE or name.startswith(_PACKAGE + ".") or (own_megatron and name == "megatron"):
            del sys.modules[name]


def missing_names() -> list[str]:
    """The names of `megatron.energon` 7.4 that energon_rs does not provide yet."""
    return list(_missing())


@functools.lru_cache(maxsize=1)
def _missing() -> tuple[str, ...]:
    res = []
    for name in REFERENCE_NAMES:
        try:
            _lookup(_PACKAGE, name)
        except AttributeError:
            res.append(name)
    return tuple(res)
