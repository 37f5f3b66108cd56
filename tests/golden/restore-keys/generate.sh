#!/usr/bin/env bash
# Regenerates the restore-key traces in this folder with the Python reference (megatron-energon
# 7.4.1): the loader's batches as `ref_load.py keys --verbose` prints them (batch index, position,
# key, and the batch's restore key on its first line).
#
# Usage: tests/golden/restore-keys/generate.sh PYTHON
#   PYTHON: the interpreter of a venv with megatron-energon 7.4.1 and torch
#           (tests/fixtures/tools/setup_energon_ref.sh makes one).
set -euo pipefail
python=${1:?usage: generate.sh PYTHON}
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$(cd "$here/../../fixtures" && pwd)
version=$("$python" -c 'import importlib.metadata as m; print(m.version("megatron-energon"))')
if [ "$version" != "7.4.1" ]; then
    echo "expected megatron-energon 7.4.1, found $version" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$fixtures/energon-ref-small" "$work/"
chmod -R u+w "$work"
ds="$work/energon-ref-small"
run() {
    local name=$1
    shift
    "$python" "$fixtures/tools/ref_load.py" keys "$@" -v 2>/dev/null >"$here/$name.txt"
}
run ws1-r0-nw0-bs4-sb16-s0 "$ds" --batch-size 4 --shuffle-buffer-size 16 -k 48
run ws1-r0-nw2-bs1-sb0-s0 "$ds" --num-workers 2 --batch-size 1 -k 24
run ws2-r1-nw2-bs3-sb8-s5-msps7 "$ds" --world-size 2 --rank 1 --num-workers 2 --batch-size 3 \
    --shuffle-buffer-size 8 --seed 5 --max-samples-per-sequence 7 -k 60
run ws3-r1-nw3-bs2-sb0-s2-msps4 "$ds" --world-size 3 --rank 1 --num-workers 3 --batch-size 2 \
    --seed 2 --max-samples-per-sequence 4 -k 60
run jsonl-ws1-r0-nw0-bs0-sb0-s0 "$ds/jsonl/data.jsonl" --batch-size 0 -k 24
run jsonl-ws2-r0-nw2-bs5-sb4-s3-msps9 "$ds/jsonl/data.jsonl" --world-size 2 --num-workers 2 \
    --batch-size 5 --shuffle-buffer-size 4 --seed 3 --max-samples-per-sequence 9 -k 60
