#!/usr/bin/env bash
# Video clip throughput and peak memory from Python: random 8-frame clips from 10 s 224p H.264
# videos through a task encoder's `encode_sample` (crates/energon-py/benches/clips.py), energon_rs
# against the reference (megatron-energon, its AVDecoder on PyAV) on the same generated dataset,
# each side RUNS times, alternating. One JSON line per run: clips/s and the peak memory of the
# process tree (tests/fixtures/tools/peak_mem.py).
#
# Usage: scripts/bench-clips.sh [REF_PYTHON]
#   REF_PYTHON: a Python with megatron-energon, PyAV and psutil installed
#   (tests/fixtures/tools/setup_energon_ref.sh, then `pip install av psutil`); without it only
#   energon_rs is measured.
# The videos are generated with the ffmpeg command-line tool (libx264) where `ffmpeg` is on PATH,
# otherwise with PyAV (installed into the bench venv; its wheel has libx264), which runs the same
# lavfi sources (testsrc2 with seeded noise, a sine tone) into the same encoders and settings;
# either way the output is deterministic for a given FFmpeg/x264 build (bench.json in DATA names
# the encoder). The wheel's video feature needs FFmpeg's development libraries
# (scripts/system-deps.sh --features).
# Settings (environment): VIDEOS (32), SECONDS_PER_VIDEO (10), FPS (25), SIZE (398x224), GOP (50),
# CLIPS (1000), NUM_WORKERS (2), RUNS (3), DATA (target/bench-data/clips-...).
set -euo pipefail
cd "$(dirname "$0")/.."
ref_python="${1:-}"
videos="${VIDEOS:-32}" seconds="${SECONDS_PER_VIDEO:-10}" fps="${FPS:-25}" size="${SIZE:-398x224}"
gop="${GOP:-50}" clips="${CLIPS:-1000}" num_workers="${NUM_WORKERS:-2}" runs="${RUNS:-3}"
data="${DATA:-target/bench-data/clips-${videos}x${seconds}s-${size}-g${gop}}"
tools=tests/fixtures/tools
bench=crates/energon-py/benches/clips.py
venv="${ENERGON_PY_VENV:-target/py-bench-venv}"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q maturin numpy psutil torch
VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" \
  maturin develop -q --release --locked -m crates/energon-py/Cargo.toml
if [ ! -e "$data/bench.json" ]; then
  rm -rf "$data"
  if ! command -v ffmpeg >/dev/null; then
    "$venv/bin/python" -c 'import av' 2>/dev/null || "$venv/bin/python" -m pip install -q av
  fi
  "$venv/bin/python" "$bench" generate "$data" --videos "$videos" --seconds "$seconds" \
    --fps "$fps" --size "$size" --gop "$gop"
fi

# One measured run: the benchmark's JSON line with the sampler's peak memory added.
measure() {
  local python=$1 impl=$2 err
  err=$(mktemp)
  "$python" "$tools/peak_mem.py" -- "$python" "$bench" run "$data" --impl "$impl" \
    --clips "$clips" --num-workers "$num_workers" 2>"$err" | tail -1 |
    "$python" -c '
import json, re, sys
line = json.loads(sys.stdin.read())
peak = re.search(r"peak_tree_rss_mb[=: ]+([0-9.]+).*peak_tree_pss_mb[=: ]+([0-9.]+)", open(sys.argv[1]).read())
if peak:
    line.update(peak_tree_rss_mb=float(peak[1]), peak_tree_pss_mb=float(peak[2]))
line["load_avg_1m"] = round(__import__("os").getloadavg()[0], 2)
print(json.dumps(line))
' "$err" || { tail -20 "$err" >&2; rm -f "$err"; return 1; }
  rm -f "$err"
}

for _ in $(seq "$runs"); do
  measure "$venv/bin/python" energon_rs
  if [ -n "$ref_python" ]; then
    measure "$ref_python" reference
  fi
done
