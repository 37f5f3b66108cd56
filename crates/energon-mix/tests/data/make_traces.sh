#!/usr/bin/env bash
# Regenerates the reference sample orders in traces/ with the Python reference loader
# (megatron-energon 7.4.1, installed by tests/fixtures/tools/setup_energon_ref.sh) through
# tests/fixtures/tools/ref_load.py: training pipeline, batch size 1, no shuffle buffer, the first K keys of
# this rank in loader order.
# Usage (from the repository root, after `cargo build -p energon-cli -p energon-tests`):
#   crates/energon-mix/tests/data/make_traces.sh [PYTHON]
set -euo pipefail
py="${1:-${ENERGON_VENV:-$HOME/.energon-ref}/bin/python}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
tools="$root/tests/fixtures/tools"
"$py" -c 'import importlib.metadata as m; v = m.version("megatron-energon"); assert v == "7.4.1", v'
out="$here/traces"
mkdir -p "$out"
K=700

trace() { # name path ws rank nw seed [msps]
  local name="$1" path="$2" ws="$3" rank="$4" nw="$5" seed="$6" msps="${7:-}"
  local file="$out/$name-ws$ws-r$rank-nw$nw-s$seed${msps:+-msps$msps}.txt"
  "$py" "$tools/ref_load.py" keys "$path" --world-size "$ws" --rank "$rank" --num-workers "$nw" \
    --seed "$seed" --batch-size 1 --shuffle-buffer-size 0 -k "$K" \
    ${msps:+--max-samples-per-sequence "$msps"} 2>/dev/null > "$file"
  echo "$file: $(wc -l < "$file") keys"
}

for mds in blend epochized nested v1; do
  trace "$mds" "$here/mds/$mds.yaml" 1 0 0 0
  trace "$mds" "$here/mds/$mds.yaml" 1 0 2 0
  trace "$mds" "$here/mds/$mds.yaml" 2 1 3 5
  trace "$mds" "$here/mds/$mds.yaml" 3 2 2 1 10
done

# A fractional repetition whose cut rounds down to 0 samples on some workers: such a leaf still
# has samples, so the blend draws it once per pass to find it exhausted.
K=300 trace tiny "$here/mds/tiny.yaml" 2 0 2 4

# A join of the fixture with a generated dataset of the same keys (5 shards of 40), prepared by
# energon-rs and joined by the reference (the golden test rebuilds the same datasets).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/tests/fixtures/energon-ref-small" "$tmp/ref"
chmod -R u+w "$tmp/ref"
"$root/target/debug/make-wds" "$tmp/b" --shards 5 --per-shard 40 --seed 7 > /dev/null
"$root/target/debug/energon" prepare "$tmp/b" --non-interactive --split-ratio 1,0,0 \
  --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}' \
  --num-workers 1 > /dev/null
cat > "$tmp/join.yaml" <<'YAML'
__module__: megatron.energon
__class__: MetadatasetV2
splits:
  train:
    join:
      - path: ref
      - path: b
    joiner:
      __module__: megatron.energon
      __class__: CaptioningSample
YAML
"$(dirname "$py")/energon" prepare "$tmp/join.yaml" > /dev/null
trace join "$tmp/join.yaml" 1 0 0 0
trace join "$tmp/join.yaml" 2 0 2 3
