"""Worker debug logs: with `WorkerConfig(worker_log_level=1)` a loader records what it hands out,
as JSON lines, and `analyze_debug` summarizes the logs of a run and draws which sample was read
at which step.

The lines are the reference's events: `SavableLoader.__init__` (or `BasicDataLoader.__init__`)
with the dataset's settings under `config`, `SavableDataLoader.iter` when an iteration starts,
`SavableDataLoader.yield` for every item (`worker_id`, `worker_idx`, `idx` and `iter_idx` in this
iteration, `global_idx` over the loader's life, and the item's sample `keys`) and
`SavableDataLoader.StopIteration` when it ends; each worker's file gets a
`SavableDatasetWrapper.yield` line for each item it made (written by the loader as the item is
handed out: the workers are threads of the Rust loader). With `worker_debug_path` (a template
with `{worker_id}` and `{pid}`) the loader's own lines go to worker id `rank * (num_workers + 1)`
and worker `w`'s to that plus `w + 1`, as in the reference; without it they are printed.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from typing import Any, Iterator, Optional

__all__ = ["DebugLog", "batch_keys"]

#: Ids of the loaders of this process, in creation order (the reference's `SavableDataLoader._next_id`).
_IDS = itertools.count()


def batch_keys(item: Any) -> Optional[list]:
    """The sample keys of an item: its `__key__` (or `__keys__`) when that is a list of strings
    or a string, for a dataclass or a dict; `None` when it has none. A list item gives its first
    element's."""
    if isinstance(item, list) and item:
        item = item[0]
    for name in ("__key__", "__keys__", "keys"):
        value = item.get(name) if isinstance(item, dict) else getattr(item, name, None)
        if isinstance(value, str):
            return [value]
        if isinstance(value, (list, tuple)) and all(isinstance(k, str) for k in value):
            return list(value)
    return None


class DebugLog:
    """The debug log of one loader (one per `get_loader` / `get_savable_loader`)."""

    def __init__(self, worker_config: Any, loader_id: int, kind: str, config: dict) -> None:
        self._wc = worker_config
        self.id = loader_id
        self._files: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._global_idx = 0
        self._write(0, {"t": f"{kind}.__init__", "r": worker_config.rank, "w": None,
                        "id": loader_id, "config": config})

    @staticmethod
    def of(worker_config: Any, kind: str, config: dict) -> Optional["DebugLog"]:
        """The log of a new loader, or `None` when `worker_config` does not record level 1."""
        if not worker_config.should_log(level=1):
            return None
        return DebugLog(worker_config, next(_IDS), kind, config)

    def _write(self, slot: int, line: dict) -> None:
        """Writes `line` to the file of `slot` (0: the loader, w + 1: worker w)."""
        text = json.dumps(line) + "\n"
        path = self._wc.worker_debug_path
        with self._lock:
            if path is None:
                print(text, end="", flush=True)
                return
            f = self._files.get(slot)
            if f is None:
                worker_id = self._wc.rank * (self._wc.num_workers + 1) + slot
                name = path.format(worker_id=worker_id, pid=os.getpid())
                os.makedirs(os.path.dirname(os.path.abspath(name)), exist_ok=True)
                f = self._files[slot] = open(name, "a")
            f.write(text)
            f.flush()

    def iterate(self, items: Iterator[Any]) -> Iterator[Any]:
        """`items`, with a line for each and for the iteration's start and end."""
        iter_id = next(_IDS)
        rank = self._wc.rank
        self._write(0, {"t": "SavableDataLoader.iter", "r": rank, "w": None, "id": self.id,
                        "iter_id": iter_id})
        try:
            for idx, item in enumerate(items):
                key = getattr(item, "__restore_key__", None)
                if key is None and isinstance(item, dict):
                    key = item.get("__restore_key__")
                # The loader's wrapper part of the key: (name, global worker id, worker item).
                worker_id, worker_idx = (key[1], key[2]) if key and len(key) > 2 else (0, idx)
                keys = batch_keys(item)
                line = {"t": "SavableDataLoader.yield", "r": rank, "w": None, "id": self.id,
                        "iter_id": iter_id, "worker_id": worker_id, "worker_idx": worker_idx,
                        "idx": idx, "iter_idx": idx, "global_idx": self._global_idx}
                if keys is not None:
                    line["keys"] = keys
                self._write(0, line)
                local = worker_id - rank * self._wc.num_workers if self._wc.num_workers else 0
                worker_line = {"t": "SavableDatasetWrapper.yield", "r": rank, "w": local,
                               "id": self.id, "idx": worker_idx}
                if keys is not None:
                    worker_line["keys"] = keys
                self._write(local + 1, worker_line)
                self._global_idx += 1
                yield item
        finally:
            self._write(0, {"t": "SavableDataLoader.StopIteration", "r": rank, "w": None,
                            "id": self.id, "iter_id": iter_id})

    def close(self) -> None:
        with self._lock:
            for f in self._files.values():
                f.close()
            self._files.clear()


def analyze(
    log_paths: list,
    modalities: Optional[set] = None,
    heatmap_path: Optional[str] = None,
    *,
    heatmap_steps: int = 1000,
    heatmap_samples: int = 1000,
    heatmap_gain: float = 10,
    skip: int = 0,
    colors: bool = True,
) -> list[str]:
    """Summarizes the debug logs in `log_paths` (`*.jsonl` files, or folders of them): the
    items the loaders of the given modalities (`train`, `val`; all without) handed out, in log
    order, after the first `skip`; returns the lines to print. With `heatmap_path`, a PNG with a
    row for each sample key (sorted) and a column for each step, darker where the step read the
    sample (scaled down to at most `heatmap_samples` x `heatmap_steps`, intensity times
    `heatmap_gain`), in one colour per loader (or black without `colors`)."""
    files = []
    for path in map(str, log_paths):
        if os.path.isdir(path):
            files += sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".jsonl"))
        else:
            files.append(path)
    out = [f"Analyzing {len(files)} logs"]
    modality: dict[tuple, str] = {}
    steps: list[tuple[tuple, list]] = []
    for name in files:
        with open(name) as f:
            for text in f:
                line = json.loads(text)
                loader = (name, line.get("id"))
                if line["t"].endswith(".__init__"):
                    training = (line.get("config") or {}).get("training", True)
                    modality[loader] = "train" if training else "val"
                elif line["t"] == "SavableDataLoader.yield":
                    if modalities is None or modality.get(loader, "train") in modalities:
                        steps.append((loader, line.get("keys") or []))
    steps = steps[skip:]
    keys = sorted({k for _, ks in steps for k in ks})
    out.append(f"Found {len(keys)} unique sample keys, {len(steps)} steps")
    if heatmap_path is not None and keys and steps:
        _heatmap(str(heatmap_path), keys, steps, heatmap_samples, heatmap_steps, heatmap_gain, colors)
        out.append(f"Heatmap written to {heatmap_path}")
    return out


def _heatmap(path: str, keys: list, steps: list, max_rows: int, max_cols: int, gain: float,
             colors: bool) -> None:
    import numpy as np
    from PIL import Image

    palette = np.array([[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40],
                        [148, 103, 189], [140, 86, 75], [227, 119, 194], [127, 127, 127]],
                       dtype=np.float64)
    if not colors:
        palette = np.zeros((1, 3))
    row_bin = -(-len(keys) // max(1, max_rows))
    col_bin = -(-len(steps) // max(1, max_cols))
    rows, cols = -(-len(keys) // row_bin), -(-len(steps) // col_bin)
    row = {k: i // row_bin for i, k in enumerate(keys)}
    loaders = {lo: i for i, lo in enumerate(dict.fromkeys(lo for lo, _ in steps))}
    hits = np.zeros((rows, cols))
    colour = np.zeros((rows, cols, 3))
    for col, (loader, ks) in enumerate(steps):
        for k in ks:
            r, c = row[k], col // col_bin
            hits[r, c] += 1
            colour[r, c] += palette[loaders[loader] % len(palette)]
    # Each cell: its loaders' mean colour, blended from white by the share of its area read.
    share = np.clip(hits / (row_bin * col_bin) * gain, 0, 1)[..., None]
    mean = np.divide(colour, np.maximum(hits, 1)[..., None])
    image = (255 * (1 - share) + mean * share).astype(np.uint8)
    scale = max(1, 512 // max(rows, cols))
    Image.fromarray(image).resize((cols * scale, rows * scale), Image.NEAREST).save(path)
