"""Loader throughput from Python: samples/s of `energon_rs.get_loader` iteration, reported as the
reference's `ref_load.py throughput` reports its own (one JSON line), for a side-by-side run on
the same data (scripts/bench-python.sh runs both under a peak-memory sampler).

    python throughput.py DATASET --num-workers 2 --batch-size 32 --decode torchrgb --samples 20000

`--hook encode_sample` adds a Python `encode_sample` (the same one `ref_load.py throughput
--hook encode_sample` gives the reference): the caption tokenized into an int64 array and the
image's mean, per sample.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import energon_rs

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "tools"))
import bench_hooks  # noqa: E402 (the hooks the reference's side runs too)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--shuffle-buffer-size", type=int, default=0)
    ap.add_argument("--decode", default="torchrgb", help="image decoder, or none")
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--torch", action="store_true", help="hand out torch tensors")
    ap.add_argument("--hook", choices=list(bench_hooks.HOOKS), default="none", help="Python hook per sample")
    ap.add_argument("--worker-type", default=None, help="get_loader's worker_type (default: its default)")
    args = ap.parse_args()
    if args.torch:
        # As a training script has: torch imported before the loader starts.
        import torch  # noqa: F401

    class Encoder(energon_rs.DefaultTaskEncoder):
        decoder = None if args.decode == "none" else energon_rs.SampleDecoder(image_decode=args.decode)

    hook = bench_hooks.hook(args.hook)
    if hook is not None:

        def encode_sample(self, sample):
            return hook(sample)

        Encoder.encode_sample = encode_sample

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=args.num_workers)
    ds = energon_rs.get_train_dataset(
        args.dataset,
        worker_config=wc,
        batch_size=args.batch_size or None,
        shuffle_buffer_size=args.shuffle_buffer_size or None,
        max_samples_per_sequence=None,
        task_encoder=Encoder(),
        torch=args.torch,
    )
    # Without --worker-type the call is the one every release takes (before/after comparisons).
    options = {} if args.worker_type is None else {"worker_type": args.worker_type}
    loader = energon_rs.get_loader(ds, **options)

    def n_of(item) -> int:
        k = item.__key__
        return len(k) if isinstance(k, list) else 1

    t_start = time.perf_counter()
    it = iter(loader)
    first = next(it)
    t_first = time.perf_counter()
    n = n_of(first)
    while n < args.samples:
        n += n_of(next(it))
    t_end = time.perf_counter()
    img = first.image
    desc = type(img).__name__ + (f" shape={tuple(img.shape)} dtype={img.dtype}" if hasattr(img, "shape") else "")
    print(
        json.dumps(
            dict(
                mode="throughput",
                impl="energon_rs",
                decode=args.decode,
                hook=args.hook,
                worker_type=getattr(loader, "worker_type", "thread"),
                num_workers=args.num_workers,
                batch_size=args.batch_size,
                samples=n,
                first_batch_s=round(t_first - t_start, 3),
                steady_samples_per_s=round((n - n_of(first)) / (t_end - t_first), 1),
                overall_samples_per_s=round(n / (t_end - t_start), 1),
                image_field=desc,
            )
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
