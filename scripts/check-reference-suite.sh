#!/usr/bin/env bash
# Runs megatron-energon's own test suite (its `tests/` folder, release 7.4) against energon_rs:
# `energon_rs.compat.install()` runs when each interpreter starts, so every
# `import megatron.energon...` in them resolves to energon_rs. The tests that need the
# reference's S3 emulator are left out (the object-store tests of energon_rs use moto instead).
#
# Usage: scripts/check-reference-suite.sh MEGATRON_ENERGON_CHECKOUT [PYTEST_ARGS...]
#   MEGATRON_ENERGON_CHECKOUT: a checkout of megatron-energon at 7.4.0 (only its tests/ is read)
# The wheel is built into target/py-venv as scripts/test-python.sh builds it (run that once
# first); the tests' own dependencies (webdataset, torchvision, pyyaml, multi-storage-client,
# PyAV) are added there. SKIP_BUILD=1 uses the package already installed there.
# Prints pytest's summary; the exit status is pytest's.
set -euo pipefail
checkout="${1:?usage: scripts/check-reference-suite.sh MEGATRON_ENERGON_CHECKOUT [PYTEST_ARGS...]}"
shift
cd "$(dirname "$0")/.."
venv="${ENERGON_PY_VENV:-target/py-venv}"
[ -x "$venv/bin/python" ] || { echo "no $venv: run scripts/test-python.sh first" >&2; exit 2; }
export VIRTUAL_ENV="$(cd "$venv" && pwd)"
export PATH="$VIRTUAL_ENV/bin:$PATH"
python -m pip install -q webdataset torchvision pyyaml multi-storage-client av
[ -n "${SKIP_BUILD:-}" ] || maturin develop -q --release --locked -m crates/energon-py/Cargo.toml
# The suite's CLI tests run the package's own `energon` command, as after a plain pip install.
unset ENERGON_BIN
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$checkout/tests" "$work/tests"
# energon_rs stands in for megatron.energon in every interpreter of the run, also the processes the
# tests spawn: a sitecustomize module on the path installs it at start-up.
mkdir "$work/site"
cat > "$work/site/sitecustomize.py" <<'EOF'
import energon_rs.compat

energon_rs.compat.install()
EOF
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
cd "$work"
# The tests that start the reference's S3 emulator are named after it.
python -m pytest -q -p no:cacheprovider -rfE --continue-on-collection-errors -k "not s3" tests "$@"
