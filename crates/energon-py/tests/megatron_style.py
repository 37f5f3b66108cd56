"""Task encoders in the style of a vision-language training script, written against
`megatron.energon` only, so that the same code runs under megatron-energon and (after
`energon_rs.compat.install()`) under energon_rs.

What they do, as such scripts do:
- `encode_sample` per sample type: captioning samples get a random crop and flip, dynamic tiling
  into fixed-size tiles plus a thumbnail, and a random prompt; text samples (cooked from a JSONL
  dataset) get a random prompt and no image. Randomness comes from `random`, numpy and torch under
  `@stateless(restore_seeds=True)`, so that a sample made again after a restore is the same.
- a byte-level tokenizer, token budgets, labels with an ignore index;
- packing to a token budget (`select_samples_to_pack` by first-fit decreasing,
  `pack_selected_samples` concatenating with sequence boundaries);
- group batching (`batch_group_criterion`), a generator `encode_sample`, custom `batch` and
  `encode_batch` giving dicts of tensors.

The configurations (`CONFIGS`), the driver that iterates a loader, saves its state at given
points and restores it into fresh loaders (`record`), and the canonical form of a batch (keys,
shapes, dtypes and SHA-256 digests of tensor bytes, `canon`) are here too, so that the recorder
(`tests/fixtures/tools/record_encoders.py`) and the test (`test_reference_encoders.py`) share them.

Pixels are computed with integer indexing and IEEE float32 element-wise arithmetic in numpy
(exactly rounded on every machine); torch only draws random numbers and concatenates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
from megatron.energon import (
    CaptioningSample,
    Cooker,
    DefaultTaskEncoder,
    LimitDataset,
    RepeatDataset,
    SampleDecoder,
    SkipSample,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    get_val_dataset,
    get_val_datasets,
    stateless,
)

#: Edge of a square image tile, in pixels.
TILE = 8
#: Most tiles per image (the thumbnail comes on top).
MAX_TILES = 4
#: Per-channel normalisation (of values in [0, 1]).
MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32).reshape(1, 3, 1, 1)
#: Token ids: padding, begin, end, one image placeholder per tile; bytes are offset by 4.
PAD, BOS, EOS, IMAGE = 0, 1, 2, 3
IGNORE_INDEX = -100
#: Longest encoded sample, in tokens.
SEQ_LEN = 128
#: Token budget of one pack.
PACK_LEN = 200

CAPTION_PROMPTS = (
    "Describe the image.",
    "What is shown here?",
    "Write a short caption.",
    "Give a one-line description of the picture.",
    "What do you see?",
)
TEXT_PROMPTS = ("Continue:", "Summarize:", "Repeat after me:")


def tokenize(text: str) -> list[int]:
    """A byte-level tokenizer: UTF-8 bytes offset past the special ids."""
    return [b + 4 for b in text.encode("utf-8")]


def nearest_resize(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resize of an HWC image by integer index arithmetic."""
    h, w = img.shape[:2]
    rows = (np.arange(height) * h) // height
    cols = (np.arange(width) * w) // width
    return img[rows][:, cols]


def tile_grid(width: int, height: int) -> tuple[int, int]:
    """The grid (columns, rows) of at most MAX_TILES tiles whose aspect ratio is closest to the
    image's; ties go to the larger grid when the image has enough pixels for it."""
    aspect = width / height
    grids = sorted(
        {(c, r) for c in range(1, MAX_TILES + 1) for r in range(1, MAX_TILES + 1) if c * r <= MAX_TILES},
        key=lambda g: (g[0] * g[1], g),
    )
    best, best_diff = (1, 1), float("inf")
    for c, r in grids:
        diff = abs(aspect - c / r)
        if diff < best_diff:
            best, best_diff = (c, r), diff
        elif diff == best_diff and width * height > 0.5 * TILE * TILE * c * r:
            best = (c, r)
    return best


def tiles_of(img: np.ndarray) -> np.ndarray:
    """Dynamic tiling: the image resized to its grid and cut into TILE x TILE tiles, plus a
    thumbnail when there is more than one tile; normalised float32, shape (n, 3, TILE, TILE)."""
    h, w = img.shape[:2]
    cols, rows = tile_grid(w, h)
    resized = nearest_resize(img, rows * TILE, cols * TILE)
    tiles = [
        resized[r * TILE : (r + 1) * TILE, c * TILE : (c + 1) * TILE]
        for r in range(rows)
        for c in range(cols)
    ]
    if len(tiles) > 1:
        tiles.append(nearest_resize(img, TILE, TILE))
    arr = np.stack(tiles).transpose(0, 3, 1, 2).astype(np.float32)
    return ((arr / np.float32(255.0)) - MEAN) / STD


def random_view(img: np.ndarray) -> np.ndarray:
    """A random crop (numpy draws the size, torch the offset) and a random flip (`random`)."""
    h, w = img.shape[:2]
    ch = int(np.random.randint(h // 3, h + 1))
    cw = int(np.random.randint(w // 3, w + 1))
    y0 = int(torch.randint(0, h - ch + 1, (1,)).item())
    x0 = int(torch.randint(0, w - cw + 1, (1,)).item())
    view = img[y0 : y0 + ch, x0 : x0 + cw]
    if random.random() < 0.5:
        view = view[:, ::-1]
    return np.ascontiguousarray(view)


@dataclass
class VLSample:
    """One encoded sample: image tiles, tokens and labels."""

    __key__: str
    __restore_key__: tuple
    __subflavors__: Optional[dict]
    imgs: torch.Tensor
    num_tiles: list
    tokens: torch.Tensor
    labels: torch.Tensor
    total_len: int
    #: `current_sample_index` of each encoded sample (several after packing).
    sample_index: list = field(default_factory=list)
    cu_lengths: Optional[torch.Tensor] = None


@dataclass
class VLBatch:
    """A batch of encoded samples, padded."""

    __keys__: list
    __restore_key__: tuple
    imgs: torch.Tensor
    num_tiles: torch.Tensor
    tokens: torch.Tensor
    labels: torch.Tensor
    sample_index: torch.Tensor
    #: `current_sample_index` and `current_batch_index` while batching.
    batch_call: tuple = ()
    cu_lengths: list = field(default_factory=list)


def _conversation(prompt: str, answer: str, n_tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    prefix = [BOS] + [IMAGE] * n_tiles + tokenize(prompt)
    answer_tokens = tokenize(" " + answer) + [EOS]
    tokens = (prefix + answer_tokens)[:SEQ_LEN]
    labels = ([IGNORE_INDEX] * len(prefix) + answer_tokens)[:SEQ_LEN]
    return torch.tensor(tokens, dtype=torch.int64), torch.tensor(labels, dtype=torch.int64)


def _text_of(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8")
    return value


class VLTaskEncoder(DefaultTaskEncoder):
    """Per-sample-type encoding with tiling and random prompts, custom batching."""

    decoder = SampleDecoder(image_decode="rgb8")

    def encode_captioning(self, sample: Any) -> VLSample:
        view = random_view(np.asarray(sample.image))
        tiles = tiles_of(view)
        tokens, labels = _conversation(random.choice(CAPTION_PROMPTS), _text_of(sample.caption), len(tiles))
        return VLSample(
            __key__=sample.__key__,
            __restore_key__=sample.__restore_key__,
            __subflavors__=sample.__subflavors__,
            imgs=torch.from_numpy(tiles),
            num_tiles=[len(tiles)],
            tokens=tokens,
            labels=labels,
            total_len=len(tokens),
            sample_index=[self.current_sample_index],
        )

    def encode_text(self, sample: Any) -> VLSample:
        words = _text_of(sample.text).split()
        keep = int(np.random.randint(1, len(words) + 1))
        tokens, labels = _conversation(random.choice(TEXT_PROMPTS), " ".join(words[:keep]), 0)
        return VLSample(
            __key__=sample.__key__,
            __restore_key__=sample.__restore_key__,
            __subflavors__=sample.__subflavors__,
            imgs=torch.zeros((0, 3, TILE, TILE), dtype=torch.float32),
            num_tiles=[],
            tokens=tokens,
            labels=labels,
            total_len=len(tokens),
            sample_index=[self.current_sample_index],
        )

    @stateless(restore_seeds=True)
    def encode_sample(self, sample: Any) -> VLSample:
        if isinstance(sample, CaptioningSample):
            return self.encode_captioning(sample)
        if isinstance(sample, TextSample):
            return self.encode_text(sample)
        raise NotImplementedError(f"no encoding for {type(sample).__name__}")

    def batch(self, samples: list) -> VLBatch:
        width = max(s.total_len for s in samples)
        tokens = torch.full((len(samples), width), PAD, dtype=torch.int64)
        labels = torch.full((len(samples), width), IGNORE_INDEX, dtype=torch.int64)
        for i, s in enumerate(samples):
            tokens[i, : s.total_len] = s.tokens
            labels[i, : s.total_len] = s.labels
        return VLBatch(
            __keys__=[s.__key__ for s in samples],
            __restore_key__=(),
            imgs=torch.cat([s.imgs for s in samples]),
            num_tiles=torch.tensor([n for s in samples for n in s.num_tiles], dtype=torch.int32),
            tokens=tokens,
            labels=labels,
            sample_index=torch.tensor([i for s in samples for i in s.sample_index], dtype=torch.int64),
            batch_call=(self.current_sample_index, self.current_batch_index),
            cu_lengths=[s.cu_lengths for s in samples if s.cu_lengths is not None],
        )

    def encode_batch(self, batch: VLBatch) -> dict:
        loss_mask = (batch.labels != IGNORE_INDEX).to(torch.float32)
        out = {
            "__keys__": batch.__keys__,
            "__restore_key__": batch.__restore_key__,
            "imgs": batch.imgs,
            "num_tiles": batch.num_tiles,
            "tokens": batch.tokens,
            "labels": batch.labels,
            "loss_mask": loss_mask,
            "sample_index": batch.sample_index,
            "batch_call": list(batch.batch_call),
            "encode_batch_call": [self.current_sample_index, self.current_batch_index],
            "position_ids": torch.arange(batch.tokens.shape[1], dtype=torch.int64).expand_as(batch.tokens).contiguous(),
        }
        if batch.cu_lengths:
            out["cu_lengths"] = batch.cu_lengths
        return out


class PackingTaskEncoder(VLTaskEncoder):
    """Packs encoded samples to PACK_LEN tokens: first-fit over the buffer sorted by length."""

    def select_samples_to_pack(self, samples: list) -> list:
        order = sorted(samples, key=lambda s: (-s.total_len, s.__key__))
        packs: list[list] = []
        room: list[int] = []
        for s in order:
            for i, free in enumerate(room):
                if s.total_len <= free:
                    packs[i].append(s)
                    room[i] -= s.total_len
                    break
            else:
                packs.append([s])
                room.append(PACK_LEN - s.total_len)
        return packs

    @stateless
    def pack_selected_samples(self, samples: list) -> VLSample:
        lengths = [s.total_len for s in samples]
        return VLSample(
            __key__="+".join(s.__key__ for s in samples),
            __restore_key__=(),
            __subflavors__=samples[0].__subflavors__,
            imgs=torch.cat([s.imgs for s in samples]),
            num_tiles=[n for s in samples for n in s.num_tiles],
            tokens=torch.cat([s.tokens for s in samples]),
            labels=torch.cat([s.labels for s in samples]),
            total_len=sum(lengths),
            sample_index=[i for s in samples for i in s.sample_index],
            cu_lengths=torch.tensor([0, *np.cumsum(lengths).tolist()], dtype=torch.int32),
        )


class GroupingTaskEncoder(VLTaskEncoder):
    """Batches long samples two at a time, short ones three at a time (the loader's batch size
    is `None`: the criterion gives each group's)."""

    def batch_group_criterion(self, sample: VLSample) -> tuple:
        if sample.total_len > 80:
            return "long", 2
        return "short", 3


class MultiViewTaskEncoder(VLTaskEncoder):
    """A generator `encode_sample`: one to three random views of each image."""

    @stateless(restore_seeds=True)
    def encode_sample(self, sample: Any):
        for view in range(random.randint(1, 3)):
            out = self.encode_captioning(sample)
            out.__key__ = f"{sample.__key__}#{view}"
            yield out


class FilteringTaskEncoder(VLTaskEncoder):
    """Skips long captions, then encodes as its base class does: an override without its own
    decorator, calling the base's `@stateless(restore_seeds=True)` method."""

    def encode_sample(self, sample: Any) -> VLSample:
        if len(_text_of(sample.caption).split()) > 9:
            raise SkipSample()
        return super().encode_sample(sample)


class PrePostPackingTaskEncoder(DefaultTaskEncoder):
    """Packing with the work split around it: `preencode_sample` tokenizes (random prompt),
    `postencode_sample` tiles the images of each packed sample (random views). No
    `encode_sample` (the reference refuses it beside `preencode_sample`); packing and batching as
    `PackingTaskEncoder`'s."""

    decoder = VLTaskEncoder.decoder
    select_samples_to_pack = PackingTaskEncoder.select_samples_to_pack
    pack_selected_samples = PackingTaskEncoder.pack_selected_samples
    batch = VLTaskEncoder.batch
    encode_batch = VLTaskEncoder.encode_batch

    @stateless(restore_seeds=True)
    def preencode_sample(self, sample: Any) -> VLSample:
        tokens, labels = _conversation(random.choice(CAPTION_PROMPTS), _text_of(sample.caption), 0)
        return VLSample(
            __key__=sample.__key__,
            __restore_key__=sample.__restore_key__,
            __subflavors__=sample.__subflavors__,
            imgs=torch.from_numpy(np.ascontiguousarray(np.asarray(sample.image))),
            num_tiles=[],
            tokens=tokens,
            labels=labels,
            total_len=len(tokens),
            sample_index=[self.current_sample_index],
        )

    @stateless(restore_seeds=True)
    def postencode_sample(self, sample: VLSample) -> VLSample:
        tiles = tiles_of(random_view(sample.imgs.numpy()))
        sample.imgs = torch.from_numpy(tiles)
        sample.num_tiles = [len(tiles)]
        sample.sample_index = [*sample.sample_index, self.current_sample_index]
        return sample


class RandomBatchTaskEncoder(VLTaskEncoder):
    """Randomness in the batch hooks: `batch` shuffles the samples (`random`), `encode_batch` drops
    a random tenth of the loss (torch), both `@stateless(restore_seeds=True)`."""

    @stateless(restore_seeds=True)
    def batch(self, samples: list) -> VLBatch:
        samples = list(samples)
        random.shuffle(samples)
        return super().batch(samples)

    @stateless(restore_seeds=True)
    def encode_batch(self, batch: VLBatch) -> dict:
        out = super().encode_batch(batch)
        out["loss_mask"] = out["loss_mask"] * (torch.rand(out["loss_mask"].shape) >= 0.1).to(torch.float32)
        out["noise"] = torch.from_numpy(np.random.standard_normal(4).astype(np.float32))
        return out


class PilTaskEncoder(VLTaskEncoder):
    """Images decoded to PIL images (`pil`), as vision-language training scripts often ask."""

    decoder = SampleDecoder(image_decode="pil")


class DefaultBatchingTaskEncoder(DefaultTaskEncoder):
    """No hooks at all: the default batching of the sample type, images as float CHW tensors."""

    decoder = SampleDecoder(image_decode="torchrgb")


@stateless
def cook_text(sample: dict) -> Any:
    payload = sample["json"]
    if isinstance(payload, (bytes, bytearray, memoryview)):
        payload = json.loads(bytes(payload))
    return TextSample(**basic_sample_keys(sample), text=payload["caption"])


class TextPackingTaskEncoder(PackingTaskEncoder):
    """Text samples cooked from a JSONL dataset, packed."""

    cookers = [Cooker(cook_text)]


class BlendTaskEncoder(VLTaskEncoder):
    """A blend of captioning samples and text samples cooked from JSONL, batched together."""

    cookers = [Cooker(cook_text)]


def blend_yaml(root: Path) -> Path:
    """A metadataset blending the fixture's WebDataset (weight 3) with its JSONL part (weight 1),
    written with absolute paths into the temporary directory, so that the fixture stays as it was
    vendored."""
    import tempfile

    text = (
        "__module__: megatron.energon\n"
        "__class__: MetadatasetV2\n"
        "splits:\n"
        "  train:\n"
        "    blend:\n"
        f"      - weight: 3\n        path: {root}\n"
        f"      - weight: 1\n        path: {root / 'jsonl' / 'data.jsonl'}\n"
    )
    path = Path(tempfile.gettempdir()) / f"energon-encoders-blend-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{id(text)}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


@dataclass(frozen=True)
class Config:
    """One recorded configuration: how to build the loader and how to drive it."""

    name: str
    build: Callable[[Path], Any]
    #: Items (batches) to take in the first run.
    items: int
    #: Save the state after this many items of the first run; each is restored in a fresh loader.
    save_at: tuple
    #: Items to take after each restore.
    after: int


def _train(
    encoder: type,
    *,
    nw: int,
    bs: Optional[int],
    sb: Optional[int],
    seed: int = 0,
    msps: Optional[int] = 10,
    sub: str = "",
    rank: int = 0,
    world_size: int = 1,
    blend: bool = False,
    **kw: Any,
) -> Callable[[Path], Any]:
    def build(root: Path) -> Any:
        wc = WorkerConfig(rank=rank, world_size=world_size, num_workers=nw, seed_offset=seed)
        path = blend_yaml(root) if blend else root / sub if sub else root
        ds = get_train_dataset(
            str(path),
            worker_config=wc,
            batch_size=bs,
            shuffle_buffer_size=sb,
            max_samples_per_sequence=msps,
            task_encoder=encoder(),
            **kw,
        )
        return get_savable_loader(ds)

    return build


def _val_limit(*, nw: int, bs: int, limit: int) -> Callable[[Path], Any]:
    def build(root: Path) -> Any:
        wc = WorkerConfig(rank=0, world_size=1, num_workers=nw)
        ds = get_val_dataset(str(root), split_part="train", worker_config=wc, batch_size=bs, task_encoder=VLTaskEncoder())
        ds = LimitDataset(RepeatDataset(ds, worker_config=wc), length=limit, worker_config=wc, reset_after_epoch=True)
        return get_savable_loader(ds)

    return build


def _val_blend(*, nw: int, bs: int, limit: int, leaf: Optional[int]) -> Callable[[Path], Any]:
    """Validation over the blend's metadataset as training scripts do it: `get_val_datasets`
    (one dataset of it, `leaf`) or `get_val_dataset` (all, one after the other), repeated and
    limited."""

    def build(root: Path) -> Any:
        wc = WorkerConfig(rank=0, world_size=1, num_workers=nw)
        path = str(blend_yaml(root))
        if leaf is None:
            ds = get_val_dataset(path, split_part="train", worker_config=wc, batch_size=bs, task_encoder=BlendTaskEncoder())
        else:
            ds, _ = get_val_datasets(path, split_part="train", worker_config=wc, batch_size=bs, task_encoder=BlendTaskEncoder())[leaf]
        ds = LimitDataset(RepeatDataset(ds, worker_config=wc), length=limit, worker_config=wc, reset_after_epoch=True)
        return get_savable_loader(ds)

    return build


CONFIGS = {
    c.name: c
    for c in (
        Config("caption_tiles", _train(VLTaskEncoder, nw=2, bs=4, sb=16), 12, (0, 3, 8), 4),
        Config("caption_tiles_nw0", _train(VLTaskEncoder, nw=0, bs=3, sb=8, seed=1, msps=None), 10, (0, 4, 7), 3),
        Config("packing", _train(PackingTaskEncoder, nw=2, bs=2, sb=16, packing_buffer_size=6), 10, (0, 2, 5), 4),
        Config("group_batch", _train(GroupingTaskEncoder, nw=2, bs=None, sb=16), 10, (0, 3, 6), 4),
        Config("generator", _train(MultiViewTaskEncoder, nw=2, bs=3, sb=None), 10, (0, 3, 6), 4),
        Config("virtual_epoch", _train(VLTaskEncoder, nw=2, bs=4, sb=16, virtual_epoch_length=5), 14, (0, 4, 7, 10), 4),
        Config("val_limit", _val_limit(nw=2, bs=4, limit=5), 12, (0, 3, 7), 4),
        Config("caption_tiles_ws2_r1", _train(VLTaskEncoder, nw=2, bs=3, sb=16, rank=1, world_size=2), 10, (0, 3, 6), 4),
        Config("blend", _train(BlendTaskEncoder, nw=2, bs=4, sb=8, blend=True), 12, (0, 3, 8), 4),
        Config("skip_long", _train(FilteringTaskEncoder, nw=2, bs=3, sb=16), 10, (0, 3, 6), 4),
        Config("pre_post_packing", _train(PrePostPackingTaskEncoder, nw=2, bs=2, sb=16, packing_buffer_size=6), 10, (0, 2, 5), 4),
        Config("random_batch", _train(RandomBatchTaskEncoder, nw=2, bs=4, sb=16), 10, (0, 3, 6), 4),
        Config("caption_tiles_pil", _train(PilTaskEncoder, nw=2, bs=4, sb=16), 6, (0, 3), 3),
        Config("val_blend", _val_blend(nw=2, bs=16, limit=16, leaf=None), 20, (0, 7, 14), 4),
        Config("val_blend_jsonl", _val_blend(nw=2, bs=4, limit=5, leaf=1), 12, (0, 3, 7), 4),
        Config("default_batching", _train(DefaultBatchingTaskEncoder, nw=2, bs=4, sb=16), 8, (0, 3, 5), 3),
        Config("jsonl_text_packing", _train(TextPackingTaskEncoder, nw=1, bs=2, sb=8, sub="jsonl/data.jsonl", packing_buffer_size=8), 10, (0, 3, 6), 4),
    )
}


class PixelProbe(DefaultTaskEncoder):
    """Samples as decoded for the encoders (`rgb8`), not encoded."""

    decoder = SampleDecoder(image_decode="rgb8")


def decoded_pixels(root: Path, n: int = 8) -> dict:
    """Digests of the first `n` images of the dataset (in order, no shuffling) as the encoders
    get them: whether the JPEG decoder gives the reference's pixels."""
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = get_val_dataset(str(root), split_part="train", worker_config=wc, batch_size=None, task_encoder=PixelProbe())
    out = {}
    for sample in get_loader(ds):
        img = np.asarray(sample.image)
        out[sample.__key__] = {"dtype": str(img.dtype), "shape": list(img.shape), "sha256": digest(img)}
        if len(out) == n:
            break
    return out


def digest(arr: np.ndarray) -> str:
    """The SHA-256 of an array's bytes (C order), first 24 hex digits."""
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()[:24]


#: Fields left out of the canonical form: restore keys (their form is the loader's own) and
#: sources (they name the dataset's absolute path).
_NOT_CANON = ("__restore_key__", "__sources__")


def canon(value: Any) -> Any:
    """A JSON form of a batch: tensors (torch or numpy) as dtype, shape and digest; dicts and
    dataclasses by field (without `_NOT_CANON`); sequences as lists."""
    if isinstance(value, torch.Tensor):
        arr = value.detach().cpu().contiguous().numpy()
        return {"dtype": str(arr.dtype), "shape": list(arr.shape), "sha256": digest(arr)}
    if isinstance(value, np.ndarray):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "sha256": digest(value)}
    if isinstance(value, dict):
        return {str(k): canon(v) for k, v in sorted(value.items()) if k not in _NOT_CANON}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__class__": type(value).__name__, **canon({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})}
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": hashlib.sha256(bytes(value)).hexdigest()[:24]}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise TypeError(f"no canonical form for {type(value).__name__}")


#: Marks the end of a pass (the loader's iterator stopped and was started again).
END = "END"


class Driver:
    """Takes items from a loader, starting a new pass when one ends."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.it: Any = None

    def take(self, n: int) -> list:
        out: list = []
        taken = 0
        ends = 0
        while taken < n:
            if self.it is None:
                self.it = iter(self.loader)
            try:
                item = next(self.it)
            except StopIteration:
                self.it = None
                out.append(END)
                ends += 1
                if ends > 2:
                    raise RuntimeError("the loader yields nothing")
                continue
            ends = 0
            out.append(canon(item))
            taken += 1
        return out


def record(config: Config, root: Path, save_state: Callable[[Any], Any] = lambda loader: loader.save_state_rank()) -> dict:
    """The items of one run of `config`, and what each state saved on the way gives after it is
    restored into a fresh loader."""
    loader = config.build(root)
    driver = Driver(loader)
    items: list = []
    states = []
    done = 0
    for point in config.save_at:
        chunk = driver.take(point - done)
        items.extend(chunk)
        done = point
        states.append((point, save_state(loader)))
    items.extend(driver.take(config.items - done))
    del driver, loader
    restores = []
    for point, state in states:
        fresh = config.build(root)
        fresh.restore_state_rank(state)
        restores.append({"after": point, "items": Driver(fresh).take(config.after)})
        del fresh
    return {"name": config.name, "items": items, "restores": restores}


def continuation(run: dict, point: int, n: int) -> list:
    """The items of a run after its first `point` items: `n` items and the pass ends between them
    (an end right at the save point comes after it)."""
    seen = 0
    start = None
    for i, item in enumerate(run["items"]):
        if seen == point and start is None:
            start = i
        if item != END:
            seen += 1
    if start is None:
        start = len(run["items"])
    out, count = [], 0
    for item in run["items"][start:]:
        if count == n:
            break
        out.append(item)
        if item != END:
            count += 1
    return out
