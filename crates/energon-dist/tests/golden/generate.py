#!/usr/bin/env python3
"""Writes reference.jsonl: outputs of megatron-energon 7.4.1 (and torch 2.15.0) for the golden tests
of energon-dist.

Run it with the reference venv (`tests/fixtures/tools/setup_energon_ref.sh`):
    $VENV/bin/python crates/energon-dist/tests/golden/generate.py [N_SLICING_CASES]
Every record is one JSON object per line with a "kind" field; the Rust test replays each record.
"""

import json
import random
import struct
import sys
from pathlib import Path

import torch
from megatron.energon import __version__ as energon_version
from megatron.energon.flavors.webdataset.sharder import Sharder
from megatron.energon.flavors.webdataset.structs import DatasetSubset, ShardInfo
from megatron.energon.rng import SystemRng, WorkerRng
from megatron.energon.worker import WorkerConfig

assert energon_version == "7.4.1", energon_version
assert torch.__version__.split("+")[0] == "2.15.0", torch.__version__

OUT = Path(__file__).with_name("reference.jsonl")
N_SLICING = int(sys.argv[1]) if len(sys.argv) > 1 else 250
gen = random.Random(20240607)
records = []


def bits(x):
    """A double as its IEEE bit pattern (JSON float parsing need not be correctly rounded)."""
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def emit(kind, **fields):
    records.append({"kind": kind, **fields})


# Worker seeds and restore seeds.
for _ in range(40):
    ws = gen.randint(1, 6)
    nw = gen.randint(0, 5)
    rank = gen.randrange(ws)
    seed_offset = gen.choice([0, 1, 42, -3, gen.randrange(-(2**40), 2**40)])
    wc = WorkerConfig(rank=rank, world_size=ws, num_workers=nw, seed_offset=seed_offset)
    local = gen.randrange(max(nw, 1))
    seed = wc.worker_seed(local) if nw > 0 else wc.worker_seed()
    emit("worker_seed", rank=rank, world_size=ws, num_workers=nw, seed_offset=seed_offset,
         local=local, seed=seed)
    idx = gen.choice([0, 1, gen.randrange(10**6), gen.randrange(2**40)])
    emit("restore_seed", worker_seed=seed, sample_index=idx,
         seed=SystemRng.get_seed_from_args(seed, idx))


def stream(rank, world_size, seed_offset):
    wc = WorkerConfig(rank=rank, world_size=world_size, num_workers=0, seed_offset=seed_offset)
    return wc.worker_seed(), WorkerRng(wc)


def random_weights():
    n = gen.randint(1, 12)
    kind = gen.choice(["int", "frac", "zeros", "tiny"])
    if kind == "int":
        return [float(gen.randint(0, 80)) for _ in range(n)]
    if kind == "frac":
        return [gen.random() * 10 for _ in range(n)]
    if kind == "zeros":
        w = [0.0] * n
        w[gen.randrange(n)] = float(gen.randint(1, 5))
        return w
    return [gen.choice([1e8, 1.0, 3e-8, 0.5]) for _ in range(n)]


# Mixed operation streams on the reference's WorkerRng.
for case in range(30):
    seed, rng = stream(case % 7, 7, case)
    ops = []
    for _ in range(60):
        op = gen.choice(["randbelow", "randbelow_big", "shuffle", "choice", "rand_pop"])
        if op == "randbelow":
            n = gen.choice([1, 2, 3, 10, 55, 1000, 2**28 - 1])
            ops.append({"op": "randbelow", "n": n, "out": rng.randbelow(n)})
        elif op == "randbelow_big":
            n = gen.choice([2**28, 2**28 + 1, 2**31 - 1, 2**32 - 1, 2**32, 2**40 + 7, 2**63 - 1])
            ops.append({"op": "randbelow", "n": n, "out": rng.randbelow(n)})
        elif op == "shuffle":
            n = gen.randint(0, 40)
            ops.append({"op": "shuffle", "n": n, "out": rng.shuffle(list(range(n)))})
        elif op == "choice":
            w = random_weights()
            t = torch.tensor(w, dtype=torch.float32)
            ops.append({"op": "choice", "weights": t.tolist(), "out": rng.choice_idx(t)})
        else:
            n = gen.randint(1, 20)
            items = list(range(n))
            out = rng.rand_pop(items)
            ops.append({"op": "rand_pop", "n": n, "out": out})
    emit("stream", seed=seed, ops=ops)

# Long permutations: a few entries and the next draw (which tells how many draws were used).
for n in [700, 5000, 2**20]:
    seed, rng = stream(1, 3, n)
    p = rng.shuffle(list(range(n)))
    emit("randperm", seed=seed, n=n, head=p[:16], tail=p[-16:], checksum=sum(i * v for i, v in enumerate(p)) % (2**61 - 1),
         next=rng.randbelow(1000))


def untemper(y):
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    r = y
    for _ in range(5):
        r = y ^ ((r << 7) & 0x9D2C5680)
    y = r & 0xFFFFFFFF
    r = y
    for _ in range(3):
        r = y ^ (r >> 11)
    return r & 0xFFFFFFFF


def generator_with_next(raw):
    # A generator after one draw (left=624, next=1) whose next output is `raw`: the state is
    # torch's legacy struct {u64 seed; i32 left; i32 seeded; u64 next; u64 state[624]; ...}.
    g = torch.Generator()
    g.manual_seed(7)
    torch.randint(0, 10, (), generator=g)
    st = bytearray(g.get_state().numpy().tobytes())
    _, _, _, nxt = struct.unpack_from("<QiiQ", st, 0)
    assert nxt == 1
    struct.pack_into("<Q", st, 24 + 8 * nxt, untemper(raw))
    g2 = torch.Generator()
    g2.set_state(torch.frombuffer(st, dtype=torch.uint8).clone())
    return g2


# choice_idx on crafted draws: ties between v and a cumulative sum, zero weights, f32 rounding.
crafted = [
    (0x800000, [1.0, 1.0]),
    (0x7FFFFF, [1.0, 1.0]),
    (0xFFFFFF, [1.0, 1.0]),
    (0x000000, [0.0, 1.0]),
    (0xFF000000, [0.0, 0.0, 1.0]),
    (0x800000, [1.0, 0.0, 1.0]),
    (0x800000, [1.0, 0.0, 0.0, 1.0, 0.0]),
    (0xFFFFFE, [1.0, 2.0**-23]),
    (0xFFFFFF, [1.0, 2.0**-23]),
    (0xFFFFFF, [1e8] + [1.0] * 8),
    (0x555555, [1.0, 1.0, 1.0]),
    (0xAAAAAA, [1.0, 1.0, 1.0]),
    (0x400000, [0.25, 0.25, 0.5]),
    (0xC00000, [0.25, 0.25, 0.5, 0.0]),
]
wc0 = WorkerConfig(rank=0, world_size=1, num_workers=0)
for raw, weights in crafted:
    r = WorkerRng(wc0)
    r._rng = generator_with_next(raw)
    out = r.choice_idx(torch.tensor(weights, dtype=torch.float32))
    emit("choice_crafted", raw=raw, weights=weights, out=out)


def shards(counts):
    return [ShardInfo(name=f"s{i}", path=None, count=c) for i, c in enumerate(counts)]


# Slicing: all ranks of random configurations.
for case in range(N_SLICING):
    counts = [gen.randint(1, 80) for _ in range(gen.randint(1, 8))]
    if gen.random() < 0.15:
        counts[gen.randrange(len(counts))] = 0
    ws = gen.randint(1, 6)
    nw = gen.randint(0, 5)
    msps = gen.choice([None, None, None] + list(range(1, 14)))
    g = max(nw, 1) * ws
    rotation = gen.choice([0, 0, gen.randrange(g), gen.randrange(10**6)])
    total = sum(counts)
    subset = None
    if gen.random() < 0.25:
        a = gen.randint(0, total)
        b = gen.randint(a, total)
        subset = [a, b]
    for rank in range(ws):
        wc = WorkerConfig(rank=rank, world_size=ws, num_workers=nw)
        res = Sharder.shard_workers(
            shards(counts), wc, max_samples_per_sequence=msps,
            subset=None if subset is None else DatasetSubset(absolute_range=tuple(subset)),
            rotation_offset=rotation,
        )
        emit("slices", counts=counts, world_size=ws, rank=rank, num_workers=nw, msps=msps,
             rotation=rotation, subset=subset, workers=[[int(o) for o in w] for w in res])

# Long pieces with float-sensitive cuts.
for length, msps in [(122, 9), (1000, 7), (999, 13), (100003, 11), (2**40 + 12345, 999983)]:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
    if length > 10**6:
        res = [Sharder._split_shard(5, 5 + length, msps)[:64]]
        emit("piece", start=5, end=5 + length, msps=msps, head=[int(o) for o in res[0]])
        continue
    res = Sharder.shard_workers(shards([length]), wc, max_samples_per_sequence=msps)
    emit("slices", counts=[length], world_size=1, rank=0, num_workers=0, msps=msps, rotation=0,
         subset=None, workers=[[int(o) for o in w] for w in res])

# Subsets with ratios (applied after absolute ranges).
for _ in range(40):
    total = gen.randint(0, 10**6)
    absolute = None
    if gen.random() < 0.5:
        a = gen.randint(0, total)
        absolute = (a, gen.choice([None, gen.randint(a, total)]))
    r0 = gen.choice([0.0, 0.1, 0.25, 1 / 3, gen.random() / 2])
    r1 = gen.choice([1.0, 0.9, 0.75, 2 / 3, 0.5 + gen.random() / 2])
    res = DatasetSubset(range=(r0, r1), absolute_range=absolute).compute_subset(total)
    emit("subset", total=total, absolute=absolute, range_bits=[bits(r0), bits(r1)], out=list(res))

# Python's random.Random (CPython; used by prepare --shuffle-tars).
for seed in [0, 1, 42, 2**32 - 1, 2**32, 2**40 + 5, 2**64 - 1]:
    for n in [0, 1, 2, 10, 37, 200]:
        items = list(range(n))
        random.Random(seed).shuffle(items)
        emit("py_shuffle", seed=seed, n=n, out=items)
    r = random.Random(seed)
    emit("py_random", seed=seed, out_bits=[bits(r.random()) for _ in range(5)])

with OUT.open("w") as f:
    for rec in records:
        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
print(f"wrote {len(records)} records to {OUT}")
