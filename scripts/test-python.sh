#!/usr/bin/env bash
# The Python package's tests: builds the energon_rs wheel into a virtual environment under
# target/ (created on first use, reused after), then runs pytest on crates/energon-py/tests, the
# stub check and the example training loop. The object-store tests run moto's S3 server from
# this environment (scripts/s3-deps.sh installs it).
# torch comes from PyPI and is large (about 5 GB with its CUDA libraries; installing it took about
# 70 s here): it is installed once per environment. ENERGON_PY_NO_TORCH=1 skips it (the torch
# tests are then skipped, unless ENERGON_REQUIRE_TORCH=1).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${ENERGON_PY_VENV:-target/py-venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
export VIRTUAL_ENV="$(cd "$venv" && pwd)"
export PATH="$VIRTUAL_ENV/bin:$PATH"
packages=(maturin numpy pytest mypy click pillow)
if [ "${ENERGON_PY_NO_TORCH:-0}" != 1 ]; then
  packages+=(torch)
  export ENERGON_REQUIRE_TORCH="${ENERGON_REQUIRE_TORCH:-1}"
fi
t0=$(date +%s)
# A download cut off midway (torch's wheels are large) is retried from the start, three times.
for attempt in 1 2 3; do
  if python -m pip install -q --progress-bar off --retries 10 --timeout 60 "${packages[@]}"; then
    break
  fi
  if [ "$attempt" = 3 ]; then
    echo "installing ${packages[*]} failed three times" >&2
    exit 1
  fi
  echo "installing ${packages[*]} failed (attempt $attempt); retrying" >&2
  sleep 5
done
echo "python packages (${packages[*]}): $(( $(date +%s) - t0 ))s"
# moto's S3 server for the object-store tests, in this environment.
ENERGON_TEST_PYTHON=python scripts/s3-deps.sh
maturin develop -q --locked -m crates/energon-py/Cargo.toml
python -m mypy.stubtest energon_rs._native
python -m pytest -q -p no:cacheprovider crates/energon-py/tests
if [ "${ENERGON_PY_NO_TORCH:-0}" != 1 ]; then
  python examples/train_tiny.py --steps 40
fi
