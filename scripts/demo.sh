#!/usr/bin/env bash
# The main job on a built-in demo: generate a small synthetic WebDataset, prepare it, describe it.
# Usage: scripts/demo.sh [OUT_DIR]   (default: a fresh temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d -t energon-demo.XXXXXX)}"
cargo build --release --locked -q -p energon-cli -p energon-tests --bins
./target/release/make-wds "$out" --shards 8 --per-shard 250 --img 64
./target/release/energon prepare "$out" --split-ratio 8,1,1 --non-interactive \
  --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}'
./target/release/energon info "$out"
echo "demo dataset: $out"
