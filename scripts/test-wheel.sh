#!/usr/bin/env bash
# Checks a binary wheel of energon_rs (scripts/build-wheel.sh) as a user gets it: installed by pip
# alone into a fresh virtual environment (no maturin, no Rust), it must load FFmpeg from inside the
# wheel (never the machine's), run the `energon` command, and pass a slice of the Python tests
# (video and audio decoding, worker types, combined datasets, user sample classes).
#
# Usage: scripts/test-wheel.sh WHEEL
set -euo pipefail
wheel="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
cd "$(dirname "$0")/.."
repo="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q "$wheel" pytest
# From a folder outside the repository, so that only the installed package can be imported.
cd "$work"
native="$("$py" -c 'import energon_rs._native as m; print(m.__file__)')"
libs="$(dirname "$native")/../energon_rs.libs"
[ -d "$libs" ] || { echo "no energon_rs.libs beside $native: the wheel bundles no libraries" >&2; exit 1; }
libs="$(cd "$libs" && pwd)"
# Where the dynamic loader finds each FFmpeg library the extension needs.
ffmpeg="$(ldd "$native" | awk '/lib(avcodec|avformat|avutil|swscale)/ { print $3 }' | xargs -r readlink -f)"
if [ "$(echo "$ffmpeg" | grep -c -F "$libs/")" != 4 ]; then
  echo "FFmpeg does not come from the wheel ($libs):" >&2
  ldd "$native" >&2
  exit 1
fi
echo "FFmpeg from the wheel: $(ls "$libs" | wc -l) libraries in energon_rs.libs"
"$work/venv/bin/energon" --version
"$py" -m pytest -q -p no:cacheprovider --rootdir "$repo/crates/energon-py" \
  "$repo/crates/energon-py/tests/test_av.py" \
  "$repo/crates/energon-py/tests/test_av_loader.py" \
  "$repo/crates/energon-py/tests/test_worker_types.py" \
  "$repo/crates/energon-py/tests/test_wrappers.py" \
  "$repo/crates/energon-py/tests/test_user_samples.py" \
  "$repo/crates/energon-py/tests/test_sample_loader.py"
