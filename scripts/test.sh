#!/usr/bin/env bash
# Runs every test of the project: unit, property, golden, integration, CLI end-to-end and doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked -j"${JOBS:-2}" "$@"
