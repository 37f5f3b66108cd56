#!/usr/bin/env bash
# Loader throughput and peak memory from Python: energon_rs's get_loader against the reference's
# (megatron-energon) on the same generated WebDataset, decoding images: without a Python hook,
# and with Python `encode_sample` hooks (tests/fixtures/tools/bench_hooks.py: the same functions on
# both sides), for each number of workers and each energon_rs worker type.
#
# Usage: scripts/bench-python.sh [REF_PYTHON]
#   REF_PYTHON: a Python with megatron-energon and psutil installed
#   (tests/fixtures/tools/setup_energon_ref.sh makes one); without it only energon_rs is measured.
# Settings (environment): SHARDS (16), PER_SHARD (1000), IMG (128), SAMPLES (20000),
# BATCH_SIZE (32), NUM_WORKERS ("2": a list), DECODE (torchrgb), HOOKS ("none encode_sample";
# also busy1ms, megatron), WORKER_TYPES ("default": a list of get_loader worker types), TORCH
# (1: import torch in the energon_rs process too, as a training script does).
set -euo pipefail
cd "$(dirname "$0")/.."
ref_python="${1:-}"
shards="${SHARDS:-16}" per_shard="${PER_SHARD:-1000}" img="${IMG:-128}"
samples="${SAMPLES:-20000}" batch_size="${BATCH_SIZE:-32}" workers_list="${NUM_WORKERS:-2}"
decode="${DECODE:-torchrgb}" hooks="${HOOKS:-none encode_sample}"
worker_types="${WORKER_TYPES:-default}"
tools=tests/fixtures/tools
venv=target/py-bench-venv
data="target/bench-data/wds-${shards}x${per_shard}-img${img}"

cargo build --release --locked -q -p energon-cli -p energon-tests --bins
if [ ! -e "$data/.nv-meta/dataset.yaml" ]; then
  rm -rf "$data"
  ./target/release/make-wds "$data" --shards "$shards" --per-shard "$per_shard" --img "$img"
  ./target/release/energon prepare "$data" --split-ratio 1,0,0 --non-interactive \
    --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}' >/dev/null
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q maturin numpy psutil
if [ "${TORCH:-0}" = 1 ]; then "$venv/bin/python" -m pip install -q torch; fi
# A release wheel, installed (not editable: the test environment's debug build stays its own).
rm -rf target/bench-wheel
VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" \
  maturin build -q --release --locked --auditwheel skip -m crates/energon-py/Cargo.toml -o target/bench-wheel
"$venv/bin/python" -m pip install -q --no-deps --force-reinstall target/bench-wheel/*.whl

run() {
  local name=$1; shift
  echo "== $name"
  "$@" 2>"target/bench-data/$name.err" | tail -1
  grep -E "peak_tree" "target/bench-data/$name.err" || tail -5 "target/bench-data/$name.err"
}
torch_flag=()
[ "${TORCH:-0}" = 1 ] && torch_flag=(--torch)
for num_workers in $workers_list; do
  common=(--num-workers "$num_workers" --batch-size "$batch_size" --decode "$decode" --samples "$samples")
  for hook in $hooks; do
    for worker_type in $worker_types; do
      wt=()
      [ "$worker_type" != default ] && wt=(--worker-type "$worker_type")
      run "energon_rs-nw$num_workers-$worker_type-hook-$hook" "$venv/bin/python" "$tools/peak_mem.py" -- \
        "$venv/bin/python" crates/energon-py/benches/throughput.py "$data" "${common[@]}" --hook "$hook" \
        "${wt[@]}" "${torch_flag[@]}"
    done
    if [ -n "$ref_python" ]; then
      run "reference-nw$num_workers-hook-$hook" "$ref_python" "$tools/peak_mem.py" -- \
        "$ref_python" "$tools/ref_load.py" throughput "$data" "${common[@]}" --shuffle-buffer-size 0 \
        --hook "$hook"
    fi
  done
done
