#!/usr/bin/env bash
# Runs every test of the project: unit, property, golden, integration, CLI end-to-end and doc tests,
# then the Python package's (scripts/test-python.sh; ENERGON_SKIP_PYTHON=1 leaves them out).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/system-deps.sh
scripts/s3-deps.sh
cargo test --locked -j"${JOBS:-2}" "$@"
if [ "${ENERGON_SKIP_PYTHON:-0}" != 1 ]; then
  scripts/test-python.sh
fi
