#!/usr/bin/env bash
# The main job on a built-in demo: generate a synthetic WebDataset, prepare it, describe it, then load it
# the way a training job would (the exact sample order of rank 0, and the loader's throughput).
# Usage: scripts/demo.sh [OUT_DIR]   (default: a fresh temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d -t energon-demo.XXXXXX)}"
cargo build --release --locked -q -p energon-cli -p energon-tests --bins
energon=./target/release/energon
./target/release/make-wds "$out" --shards 8 --per-shard 250 --img 64
echo "== energon prepare"
$energon prepare "$out" --split-ratio 8,1,1 --non-interactive --no-progress \
  --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}'
echo "== energon info"
$energon info "$out"
echo "== energon trace: the first 12 samples rank 0 of 2 sees (2 workers, batches of 4, shuffle buffer 16)"
$energon trace "$out" --world-size 2 --rank 0 --num-workers 2 --batch-size 4 \
  --shuffle-buffer-size 16 -n 12 --json
echo "== energon benchmark: 2 workers, batches of 32, JPEG decode"
$energon benchmark "$out" --num-workers 2 --batch-size 32 --samples 4000
echo "demo dataset: $out"
