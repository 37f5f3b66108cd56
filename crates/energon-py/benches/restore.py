"""Restore time from Python: how long `restore_state_rank` plus the first batch take after a save
at several positions (one JSON line per position), to show that restoring does not depend on how
far the saved loader had got.

    python restore.py DATASET --num-workers 2 --batch-size 32 --after 100,10000,100000
"""

from __future__ import annotations

import argparse
import json
import time

import energon_rs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--shuffle-buffer-size", type=int, default=100)
    ap.add_argument("--decode", default="none", help="image decoder, or none")
    ap.add_argument("--after", default="100,10000,100000", help="batches before each save")
    args = ap.parse_args()

    class Encoder(energon_rs.DefaultTaskEncoder):
        decoder = None if args.decode == "none" else energon_rs.SampleDecoder(image_decode=args.decode)

    wc = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=args.num_workers)

    def loader() -> energon_rs.SavableDataLoader:
        ds = energon_rs.get_train_dataset(
            args.dataset,
            worker_config=wc,
            batch_size=args.batch_size,
            shuffle_buffer_size=args.shuffle_buffer_size or None,
            max_samples_per_sequence=None,
            task_encoder=Encoder(),
        )
        return energon_rs.get_savable_loader(ds)

    for after in (int(n) for n in args.after.split(",")):
        saved = loader()
        it = iter(saved)
        t0 = time.perf_counter()
        for _ in range(after):
            next(it)
        advance_s = time.perf_counter() - t0
        state = saved.save_state_rank()
        want = next(it)
        saved.close()
        t0 = time.perf_counter()
        restored = loader()
        restored.restore_state_rank(state)
        got = next(iter(restored))
        restore_s = time.perf_counter() - t0
        restored.close()
        assert list(got.__key__) == list(want.__key__), "the restored loader continued elsewhere"
        print(
            json.dumps(
                {
                    "batches_before_save": after,
                    "advance_s": round(advance_s, 3),
                    "restore_and_first_batch_s": round(restore_s, 4),
                    "state_bytes": len(state["checkpoint"]),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
