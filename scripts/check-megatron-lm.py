"""Runs Megatron-LM's data code, unchanged, on energon_rs (through `energon_rs.compat.install()`)
or on the reference megatron-energon, reads batches as a training run does, saves the loader state
with `torch.save`, and checks that a second run, restoring it as `dataloader_provider` does,
continues with exactly the next batches. With `--digest` it writes a canonical digest of every
batch (keys, types, shapes, dtypes, exact small values and SHA-256 of every tensor, `__key__`s and
`__restore_key__`s), and `--compare` runs each path with energon_rs and with the reference and
diffs the digests batch for batch.

The original check (the multimodal example on a CaptioningSample fixture):

    python scripts/check-megatron-lm.py MEGATRON_LM_CHECKOUT [DATASET]

One path, one implementation (the interpreter decides: energon_rs if it can import `energon_rs`,
else the reference; `--reference` forces the reference even where energon_rs is installed):

    python scripts/check-megatron-lm.py MEGATRON_LM_CHECKOUT --path PATH --fixtures DIR \
        [--num-workers 2] [--batches 8] [--digest OUT.jsonl] [--save-batches DIR] [--reference]

Both implementations, all paths, 0 and 2 workers, diffed (run it with energon_rs's python; it
makes the fixtures in WORK/fixtures first, with tests/fixtures/tools/make_mlm_fixtures.py, unless
they exist there, then runs this script per path and worker count with each interpreter, keeping
WORK/<path>-w<N>-<side>.{jsonl,log}, and prints a summary; exit status 1 if any differ):

    python scripts/check-megatron-lm.py MEGATRON_LM_CHECKOUT --compare --ref-python REF_PY \
        [--work WORK] [--paths a,b] [--workers 0,2] [--batches 8]

Two digests diffed (energon_rs's first):  python scripts/check-megatron-lm.py - --diff OURS REF

A run reads `--batches` train batches, saves the state, reads 4 more ("after-save"), 3 validation
batches, then restores in a new provider call and reads 4 ("resumed"), which must equal the
"after-save" ones. A failure is recorded in the digest as an "error" record (where and what), so
a diff shows where each side stopped. The diff reports the first differing batch and field, and
again ignoring tuple-vs-list (the reference's torch DataLoader runs every item through torch's
`default_convert`, which turns the tuples of a mapping batch into lists and numpy arrays into
tensors). Except in the original check, runs set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, as
Megatron-LM's README advises, since dataloader_provider's plain `torch.load` (weights_only by
default since torch 2.6) refuses the reference's saved SavableDataLoaderState
(`--strict-torch-load` keeps torch's default). The original check does so only on the reference.
tests/fixtures/tools/repro_mlm_diffs.py reproduces, without Megatron-LM, the differences found.

Paths (what runs, unchanged, from the checkout):
  multimodal      examples/multimodal `dataloader_provider.train_valid_test_dataloaders_provider`
                  with its `dataset_helpers.TaskEncoder`, on DATASET (default: the repository's
                  CaptioningSample fixture) through a MetadatasetV2 (train, and val = train split).
  llava-pretrain  the pretraining recipe of examples/multimodal/README.md: the fixtures' VQASample
                  WebDataset (field_map image: jpg, context: json[0][value], answers: json[1][value],
                  so `answers` is a string), through the checkout's own pretrain_dataset.yaml
                  (a Metadataset; its path placeholders replaced) and manual_prompts.json, loaded by
                  the same multimodal provider.
  mimo-vlm        examples/mimo/data/energon_vlm_task_encoder.py: `llava_vlm_dataloader_provider`
                  (as examples/mimo/train.py calls it, max_seq_length = total_seq_length = 256), i.e.
                  `VLMTaskEncoder` (`encode_sample`, `batch`, `encode_batch`) on the VQASample
                  dataset, micro batch 4.
  mimo-vlm-packed the same with `--packing-buffer-size 8` (micro batch 1, as its
                  `PackingKwargsProcessor` requires): `select_samples_to_pack` and
                  `pack_selected_samples` run too.
  mimo-avlm       examples/mimo/data/energon_avlm_task_encoder.py: `llava_avlm_dataloader_provider`
                  (with `hf_assign_unused_tokens` = ['<audio>,ID'] as run_avlm_train.sh sets it, ID
                  being <audio>'s id in the stand-in tokenizer) on the fixtures' image + JSON + FLAC
                  WebDataset, whose dataset.yaml names Megatron's avlm_sample_loader.py as
                  sample_loader and examples.mimo.data.VisionAudioQASample as sample type.
                  (megatron-energon 7.4 hands the `.wav.flac` parts to the sample loader as
                  AVDecoder objects, its default av_decode, but the encoder wants bytes: every
                  sample fails, on both implementations.)
  mimo-avlm-raw   the same on a copy whose FLAC parts are named `*.wav.flac.bin`, which no decoder
                  claims, so the encoder gets the FLAC bytes it expects and batches come out.

What stands in for what:
  - megatron.training (`get_args`, `get_tokenizer`, `global_vars.get_tokenizer`,
    `checkpointing.get_checkpoint_name`): module stand-ins made here (megatron.training itself needs
    a model and Python 3.12; the data code only asks it for these). `get_args()` is an
    argparse.Namespace with the fields the data code reads. `get_tokenizer()` is, for the
    multimodal paths, a tiny byte-level tokenizer with `tokenize_conversation`; for mimo-avlm, a
    stand-in for Megatron's HuggingFaceTokenizer wrapper whose `_tokenizer` is
    `AutoTokenizer.from_pretrained(args.tokenizer_model)`, as that wrapper builds it.
  - The Hugging Face Hub (unreachable here): the fixtures' `hf-cache`, a hub cache holding, under
    "llava-hf/llava-1.5-7b-hf" and "openai/whisper-base", a real LlavaProcessor (CLIPImageProcessor +
    a word-level PreTrainedTokenizerFast trained on the fixtures' text, LLaVA-1.5 chat template) and
    a WhisperFeatureExtractor with its default parameters, made by make_mlm_fixtures.py.
    HF_HUB_OFFLINE=1 and HF_HUB_CACHE make the providers' own `AutoProcessor.from_pretrained(<hub
    id>)` calls load them, so the providers run unchanged. (The hub's whisper-base would give a
    WhisperProcessor; the AVLM encoder only calls it on audio, which a WhisperProcessor forwards to
    the same feature extractor.)
  - torch.distributed: a one-rank gloo process group; megatron.core's parallel_state and
    num-microbatches calculator are the real ones.
Needs torch, torchvision, transformers, tokenizers, soundfile, scipy beside the implementation.
"""
import argparse
import atexit
import collections.abc
import dataclasses
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PATHS = ("multimodal", "llava-pretrain", "mimo-vlm", "mimo-vlm-packed", "mimo-avlm", "mimo-avlm-raw")
LLAVA_ID = "llava-hf/llava-1.5-7b-hf"
WHISPER_ID = "openai/whisper-base"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("megatron_lm", help="Megatron-LM checkout (with examples/ and megatron/core)")
    ap.add_argument("dataset", nargs="?", help="multimodal path only: a CaptioningSample dataset")
    ap.add_argument("--path", choices=PATHS, default="multimodal")
    ap.add_argument("--fixtures", help="directory made by tests/fixtures/tools/make_mlm_fixtures.py")
    ap.add_argument("--reference", action="store_true", help="use the installed megatron-energon")
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--batches", type=int, default=None, help="train batches before the save (8)")
    ap.add_argument("--digest", help="write the batch digest (JSON lines) here")
    ap.add_argument("--save-batches", help="also torch.save every batch into this directory")
    ap.add_argument("--compare", action="store_true", help="run both implementations and diff")
    ap.add_argument("--ref-python", help="--compare: the reference's python")
    ap.add_argument("--work", help="--compare: work directory (default: a new temp directory)")
    ap.add_argument("--paths", default=",".join(PATHS), help="--compare: comma-separated paths")
    ap.add_argument("--workers", default="0,2", help="--compare: comma-separated worker counts")
    ap.add_argument("--diff", nargs=2, metavar=("OURS", "REF"), help="diff two digest files")
    ap.add_argument("--strict-torch-load", action="store_true",
                    help="keep torch.load's weights_only default (else TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1)")
    return ap.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# Canonical digest of a batch
# ----------------------------------------------------------------------------------------------


def digest(x):
    """A JSON-able, implementation-neutral description of `x` (exact values, or hashes of big
    tensors/arrays together with a few values to show where they differ)."""
    import numpy as np
    import torch

    def arr(kind, dtype, shape, raw, values, numel, total):
        d = {"T": kind, "dtype": dtype, "shape": list(shape),
             "sha256": hashlib.sha256(raw).hexdigest()[:24]}
        if numel <= 32:
            d["values"] = values
        else:
            d["head"], d["tail"], d["sum"] = values[:6], values[-6:], total
        return d

    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        flat = t.reshape(-1)
        raw = flat.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        small = t.numel() <= 32
        values = (flat if small else torch.cat([flat[:6], flat[-6:]])).tolist()
        total = None if small else float(flat.double().sum())
        return arr("tensor", str(t.dtype), t.shape, raw, values, t.numel(), total)
    if isinstance(x, np.ndarray):
        a = np.ascontiguousarray(x)
        if a.dtype == object:
            return {"T": "ndarray", "dtype": "object", "shape": list(a.shape),
                    "items": [digest(v) for v in a.reshape(-1)]}
        flat = a.reshape(-1)
        small = a.size <= 32
        values = (flat if small else np.concatenate([flat[:6], flat[-6:]])).tolist()
        total = None if small else float(flat.astype(np.float64).sum())
        return arr("ndarray", str(a.dtype), a.shape, a.tobytes(), values, a.size, total)
    if isinstance(x, np.generic):
        return {"T": "np." + type(x).__name__, "v": x.item()}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, bytes):
        return {"T": "bytes", "len": len(x), "sha256": hashlib.sha256(x).hexdigest()[:24]}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"T": "dataclass:" + type(x).__name__,
                "fields": [[f.name, digest(getattr(x, f.name))] for f in dataclasses.fields(x)]}
    if isinstance(x, collections.abc.Mapping):
        return {"T": "mapping" if isinstance(x, dict) else "mapping:" + type(x).__name__,
                "items": [[str(k), digest(v)] for k, v in x.items()]}
    if isinstance(x, (list, tuple)):
        return {"T": type(x).__name__, "items": [digest(v) for v in x]}
    try:
        from PIL import Image

        if isinstance(x, Image.Image):
            return {"T": "PIL", "mode": x.mode, "size": list(x.size),
                    "sha256": hashlib.sha256(x.tobytes()).hexdigest()[:24]}
    except ImportError:
        pass
    return {"T": "other:" + type(x).__name__, "str": str(x)[:300]}


def first_difference(a, b, where=""):
    """(where, a_part, b_part) of the first difference between two digests, or None."""
    if type(a) is not type(b):
        return where or "<root>", a, b
    if isinstance(a, dict):
        if a.get("T") != b.get("T"):
            return f"{where} (type)", a.get("T"), b.get("T")
        for key in ("dtype", "shape", "mode", "size", "len"):
            if a.get(key) != b.get(key):
                return f"{where}.{key}", a.get(key), b.get(key)
        for key in ("items", "fields"):
            if key in a or key in b:
                ia, ib = a.get(key) or [], b.get(key) or []
                for n, (va, vb) in enumerate(zip(ia, ib)):
                    if isinstance(va, list) and len(va) == 2 and isinstance(va[0], str):
                        if va[0] != vb[0]:
                            return f"{where}[#{n} name]", va[0], vb[0]
                        d = first_difference(va[1], vb[1], f"{where}.{va[0]}")
                    else:
                        d = first_difference(va, vb, f"{where}[{n}]")
                    if d:
                        return d
                if len(ia) != len(ib):
                    names = lambda i: [v[0] if isinstance(v, list) else "…" for v in i]  # noqa: E731
                    return f"{where} (length)", names(ia), names(ib)
        if a != b:
            short = {k: v for k, v in a.items() if k not in ("items", "fields")}
            shortb = {k: v for k, v in b.items() if k not in ("items", "fields")}
            return where, short, shortb
        return None
    if isinstance(a, list):
        for n, (va, vb) in enumerate(zip(a, b)):
            d = first_difference(va, vb, f"{where}[{n}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{where} (length)", len(a), len(b)
        return None
    return None if a == b else (where or "<root>", a, b)


def keys_of(batch):
    """The `__key__`s of a batch (or None where the batch carries none)."""
    if isinstance(batch, collections.abc.Mapping) and "__key__" in batch:
        return list(batch["__key__"])
    if hasattr(batch, "__key__"):
        return list(batch.__key__)
    return None


# ----------------------------------------------------------------------------------------------
# One path on one implementation
# ----------------------------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(a):
    mlm = os.path.abspath(a.megatron_lm)
    path = a.path
    legacy = path == "multimodal" and a.digest is None and a.batches is None
    batches = a.batches or (5 if legacy else 8)
    fixtures = os.path.abspath(a.fixtures) if a.fixtures else None
    if path != "multimodal" and not fixtures:
        sys.exit(f"--path {path} needs --fixtures (make them with tests/fixtures/tools/make_mlm_fixtures.py)")
    out = tempfile.mkdtemp(prefix="megatron-lm-check.")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    if fixtures:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ["HF_HUB_CACHE"] = os.path.join(fixtures, "hf-cache")
        os.environ.setdefault("HF_HOME", os.path.join(out, "hf-home"))
    sys.path[:0] = [os.path.join(mlm, "examples", "multimodal"), mlm]

    impl = "reference megatron-energon"
    if not a.reference:
        try:
            import energon_rs.compat
        except ImportError:
            a.reference = True
            print("energon_rs is not importable: running the reference megatron-energon")
        else:
            energon_rs.compat.install()
            impl = "energon_rs"
    import megatron.energon

    if (not legacy or a.reference) and not a.strict_torch_load:
        # dataloader_provider restores with a plain torch.load; since torch 2.6 that defaults to
        # weights_only=True, which refuses the reference's SavableDataLoaderState (it prints
        # "loading dataset state failed. Skipping."). Megatron-LM's README advises this variable.
        # (The original check, on energon_rs, keeps torch's default: its state loads either way.)
        os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    version = getattr(megatron.energon, "__version__", "?")
    print(f"implementation: {impl} ({megatron.energon.__file__}, {version}); path {path}, "
          f"num_workers {a.num_workers}")

    import numpy as np
    import torch
    import torch.distributed as dist

    # The training run's arguments (megatron.training's get_args()).
    args = argparse.Namespace(
        prompt_path=os.path.join(out, "prompts.json"), dataloader_seq_length=None,
        packing_seq_length=0, packing_buffer_size=None, img_h=56, img_w=56, patch_dim=14,
        vision_model_type="clip", disable_vision_class_token=False, pixel_shuffle=False,
        use_tile_tags=False, max_num_tiles=1, tokenizer_prompt_format="chatml",
        use_area_weighted_aspect_ratio=False, use_tiling=False, use_thumbnail=False, freeze_LM=False,
        decoder_seq_length=256, num_frames=1, context_parallel_size=1, tensor_model_parallel_size=1,
        pipeline_model_parallel_size=1, sequence_parallel=False, fp8=None, fp8_recipe=None,
        micro_batch_size=4, num_workers=a.num_workers, data_path=None, eval_iters=3, load=None,
        dataloader_save=None, iteration=0, tokenizer_model=None, audio_encoder_model=None,
        hf_assign_unused_tokens=None, total_seq_length=None,
    )

    class ByteTokenizer:
        """Stand-in for the multimodal tokenizer: bytes -> ids, <image> -> 1."""
        pad = 0

        def convert_tokens_to_ids(self, token):
            return 1

        def tokenize_conversation(self, conv, return_target, add_generation_prompt):
            ids = []
            for turn in conv:
                text = turn["content"].replace("<image>", "\x01")
                ids += [b % 250 + 2 if b != 1 else 1 for b in text.encode()]
            ids = np.array(ids, dtype=np.int64)
            return ids, ids.copy()

    class HFTokenizer:
        """Stand-in for megatron.training's HuggingFaceTokenizer: it keeps the HF tokenizer of
        args.tokenizer_model in `_tokenizer`."""

        def __init__(self, model):
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(model)

    if path == "multimodal":
        dataset = a.dataset or str(REPO / "tests/fixtures/energon-ref-small")
        data = os.path.join(out, "meta.yaml")
        with open(data, "w") as f:
            f.write("__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
                    f"  train:\n    path: {dataset}\n  val:\n    path: {dataset}\n    split_part: train\n")
        args.data_path = [data]
        with open(args.prompt_path, "w") as f:
            json.dump({"CaptioningPretraining": {"raw": ["Describe.", "What is shown?", "Caption it."]}}, f)
        tokenizer = ByteTokenizer()
    elif path == "llava-pretrain":
        # examples/multimodal/README.md, "Pretraining": pretrain_dataset.yaml with both paths set.
        text = Path(mlm, "examples/multimodal/pretrain_dataset.yaml").read_text()
        data = os.path.join(out, "pretrain_dataset.yaml")
        Path(data).write_text(text.replace("<path_to_pretraining_dataset_in_energon_format>",
                                           os.path.join(fixtures, "vqa")))
        args.data_path = [data]
        args.prompt_path = os.path.join(mlm, "examples/multimodal/manual_prompts.json")
        args.tokenizer_prompt_format = "mistral"
        args.decoder_seq_length = 1024
        tokenizer = ByteTokenizer()
    else:
        args.tokenizer_model = LLAVA_ID
        args.micro_batch_size = 4
        args.data_path = [os.path.join(fixtures, {"mimo-avlm": "avlm", "mimo-avlm-raw": "avlm-raw"}.get(path, "vqa"))]
        args.total_seq_length = 256
        if path == "mimo-vlm-packed":
            args.packing_buffer_size = 8
            args.micro_batch_size = 1
        tokenizer = None
        if path.startswith("mimo-avlm"):
            args.audio_encoder_model = WHISPER_ID
            tokenizer = HFTokenizer(args.tokenizer_model)
            args.hf_assign_unused_tokens = [f"<audio>,{tokenizer._tokenizer.convert_tokens_to_ids('<audio>')}"]

    training = types.ModuleType("megatron.training")
    training.get_args = lambda: args
    training.get_tokenizer = lambda: tokenizer
    checkpointing = types.ModuleType("megatron.training.checkpointing")
    checkpointing.get_checkpoint_name = lambda *x, **k: os.path.join(out, "ckpt.pt")
    global_vars = types.ModuleType("megatron.training.global_vars")
    global_vars.get_args = training.get_args
    global_vars.get_tokenizer = training.get_tokenizer
    training.checkpointing = checkpointing
    training.global_vars = global_vars
    sys.modules["megatron.training"] = training
    sys.modules["megatron.training.checkpointing"] = checkpointing
    sys.modules["megatron.training.global_vars"] = global_vars

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel()
    from megatron.core.num_microbatches_calculator import init_num_microbatches_calculator

    init_num_microbatches_calculator(0, None, args.micro_batch_size, args.micro_batch_size, 1)

    if path in ("multimodal", "llava-pretrain"):
        import dataloader_provider  # Megatron-LM's examples/multimodal/dataloader_provider.py

        def provider():
            return dataloader_provider.train_valid_test_dataloaders_provider([0, 0, 0])
    elif path.startswith("mimo-avlm"):
        from examples.mimo.data.energon_avlm_task_encoder import llava_avlm_dataloader_provider

        def provider():
            return llava_avlm_dataloader_provider([0, 0, 0])
    else:
        from examples.mimo.data.energon_vlm_task_encoder import llava_vlm_dataloader_provider

        def provider():
            # examples/mimo/train.py: provider_kwargs['max_seq_length'] = args.total_seq_length
            return llava_vlm_dataloader_provider([0, 0, 0], max_seq_length=args.total_seq_length)

    records = []
    sink = open(a.digest, "w") if a.digest else None
    t0 = time.time()
    if sink:
        sink.write(json.dumps({"impl": impl, "version": version, "path": path,
                               "num_workers": a.num_workers}) + "\n")
    phase = "setup"

    def record(i, batch):
        records.append({"phase": phase, "i": i, "keys": keys_of(batch), "digest": digest(batch)})
        if sink:
            sink.write(json.dumps(records[-1]) + "\n")
            sink.flush()
        if a.save_batches:
            os.makedirs(a.save_batches, exist_ok=True)
            torch.save(batch, os.path.join(a.save_batches, f"{phase}-{i:03d}.pt"))
        return records[-1]

    try:
        train, valid, _ = provider()
        it = iter(train)
        phase = "train"
        first = [record(i, next(it)) for i in range(batches)]
        if legacy:
            batch = next(it)
            print("batch fields:", sorted(batch))
            print("tokens", tuple(batch["tokens"].shape), batch["tokens"].dtype, "imgs", tuple(batch["imgs"].shape))
        else:
            print("batch:", describe(records[-1]["digest"]))
        phase = "save"
        state = train.save_state()
        torch.save({"dataloader_state_dict": state}, os.path.join(out, "ckpt.pt"))
        phase = "after-save"
        after = [record(i, next(it)) for i in range(4)]
        phase = "val"
        val = [record(i, b) for i, b in zip(range(3), valid[0])]
        print("val batches", [v["keys"] for v in val])

        # A new run restores the saved state the way dataloader_provider does (args.load set).
        phase = "restore"
        args.load = out
        args.dataloader_save = out
        args.iteration = batches + (1 if legacy else 0)
        train2 = provider()[0]
        it2 = iter(train2)
        phase = "resumed"
        resumed = [record(i, next(it2)) for i in range(4)]
    except Exception as e:  # recorded, so that a diff shows where each side stopped
        import traceback

        traceback.print_exc()
        err = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        if sink:
            sink.write(json.dumps({"phase": "error", "i": 0, "keys": None,
                                   "digest": {"T": "error", "during": phase, "error": err}}) + "\n")
            sink.close()
        print(f"FAILED during {phase}: {err}")
        sys.exit(1)
    if sink:
        sink.close()
        print(f"digest of {len(records)} batches -> {a.digest} ({time.time() - t0:.1f}s)")
    print("first", first[0]["keys"])
    print("after save", after[0]["keys"], "resumed", resumed[0]["keys"])
    if [r["digest"] for r in resumed] != [r["digest"] for r in after]:
        n = next(i for i, (x, y) in enumerate(zip(resumed, after)) if x["digest"] != y["digest"])
        print(f"MISMATCH: resumed batch {n} differs from the batch read after the save:",
              first_difference(after[n]["digest"], resumed[n]["digest"]))
        sys.exit(1)
    if legacy:
        print("OK: Megatron-LM's dataloader_provider ran, saved and resumed exactly")
    else:
        print(f"OK: {path} ran, saved and resumed exactly ({impl}, num_workers {a.num_workers})")


def describe(d, depth=0):
    """A short one-line outline of a digest (field names, shapes, dtypes)."""
    if isinstance(d, dict):
        if "items" in d and d["T"].startswith("mapping"):
            return "{" + ", ".join(f"{k}: {describe(v, depth + 1)}" for k, v in d["items"]) + "}"
        if "fields" in d:
            return "{" + ", ".join(f"{k}: {describe(v, depth + 1)}" for k, v in d["fields"]) + "}"
        if "shape" in d:
            return f"{d['dtype']}{d['shape']}"
        if "items" in d:
            return f"{d['T']}[{len(d['items'])}]"
        return d.get("T", "?")
    return repr(d)[:40]


# ----------------------------------------------------------------------------------------------
# Both implementations, diffed
# ----------------------------------------------------------------------------------------------


def compare(a):
    if not a.ref_python:
        sys.exit("--compare needs --ref-python (the reference megatron-energon's python)")
    work = Path(a.work or tempfile.mkdtemp(prefix="megatron-lm-compare."))
    work.mkdir(parents=True, exist_ok=True)
    fixtures = work / "fixtures"
    paths = [p for p in a.paths.split(",") if p]
    if any(p != "multimodal" for p in paths) and not (fixtures / "hf-cache").exists():
        subprocess.run([sys.executable, str(REPO / "tests/fixtures/tools/make_mlm_fixtures.py"),
                        str(fixtures), "--megatron-lm", os.path.abspath(a.megatron_lm)], check=True)
    results = []
    for path in paths:
        for workers in [int(w) for w in a.workers.split(",")]:
            digests = {}
            for side, py, extra in (("energon_rs", sys.executable, []),
                                    ("reference", a.ref_python, ["--reference"])):
                dig = work / f"{path}-w{workers}-{side}.jsonl"
                dig.unlink(missing_ok=True)
                cmd = [py, os.path.abspath(__file__), os.path.abspath(a.megatron_lm), "--path", path, "--num-workers", str(workers),
                       "--digest", str(dig), "--fixtures", str(fixtures), *extra]
                if a.dataset:
                    cmd.insert(3, a.dataset)
                if a.batches:
                    cmd += ["--batches", str(a.batches)]
                t = time.time()
                p = subprocess.run(cmd, capture_output=True, text=True)
                log = work / f"{path}-w{workers}-{side}.log"
                log.write_text(p.stdout + p.stderr)
                status = "ok" if p.returncode == 0 else f"exit {p.returncode}"
                print(f"[{path} w{workers}] {side}: {status} in {time.time() - t:.0f}s (log {log})", flush=True)
                if p.returncode and not dig.exists():
                    print("    " + "\n    ".join((p.stdout + p.stderr).strip().splitlines()[-8:]))
                digests[side] = dig if dig.exists() else None
            results.append((path, workers, diff_digests(digests["energon_rs"], digests["reference"])))
    print("\nSummary (energon_rs vs reference megatron-energon, batch for batch):")
    bad = 0
    for path, workers, verdict in results:
        print(f"  {path:16s} num_workers={workers}: {verdict}")
        bad += not verdict.startswith("same")
    sys.exit(1 if bad else 0)


def load_digest(p):
    lines = Path(p).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def tuples_as_lists(d):
    """The digest with every tuple shown as a list (torch's DataLoader, through its default
    `default_convert`, turns the tuples of a mapping batch into lists)."""
    if isinstance(d, list):
        return [tuples_as_lists(v) for v in d]
    if isinstance(d, dict):
        d = {k: tuples_as_lists(v) for k, v in d.items()}
        if d.get("T") == "tuple":
            d["T"] = "list"
        return d
    return d


def diff_digests(ours, ref):
    if ours is None or ref is None:
        return "not compared: " + ", ".join(n for n, d in (("energon_rs", ours), ("reference", ref)) if d is None) + " failed"
    (_, ra), (_, rb) = load_digest(ours), load_digest(ref)

    def first(ra, rb):
        for x, y in zip(ra, rb):
            if (x["phase"], x["i"]) != (y["phase"], y["i"]) and "error" not in (x["phase"], y["phase"]):
                return f"energon_rs's record {x['phase']} {x['i']} stands against the reference's {y['phase']} {y['i']}"
            if x["digest"] != y["digest"]:
                where, va, vb = first_difference(x["digest"], y["digest"])
                if "error" in (x["phase"], y["phase"]):
                    side = lambda r: r["digest"] if r["phase"] == "error" else f"batch {r['phase']} {r['i']}"  # noqa: E731
                    return f"energon_rs: {json.dumps(side(x))} | reference: {json.dumps(side(y))}"
                return (f"at {x['phase']} batch {x['i']} (keys energon_rs {x['keys']}, reference "
                        f"{y['keys']}): field {where}: energon_rs {json.dumps(va)[:400]} | reference "
                        f"{json.dumps(vb)[:400]}")
        if len(ra) != len(rb):
            return f"energon_rs gave {len(ra)} batches, the reference {len(rb)}"
        return None

    strict = first(ra, rb)
    if strict is None:
        return f"same batch for batch ({len(ra)} batches: train, after-save, val, resumed)"
    norm = lambda rs: [dict(r, digest=tuples_as_lists(r["digest"])) for r in rs]  # noqa: E731
    loose = first(norm(ra), norm(rb))
    return (f"DIFFER {strict}\n      ignoring tuple-vs-list: "
            + (f"DIFFER {loose}" if loose else f"same batch for batch ({len(ra)} batches)"))


if __name__ == "__main__":
    opts = parse_args()
    if opts.diff:
        verdict = diff_digests(*opts.diff)
        print(verdict)
        sys.exit(0 if verdict.startswith("same") else 1)
    compare(opts) if opts.compare else run_one(opts)
