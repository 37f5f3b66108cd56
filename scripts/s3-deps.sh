#!/usr/bin/env bash
# Installs moto's S3 server (with boto3) for the object-store tests, when it is missing: the tests
# start it on a free port of 127.0.0.1 (energon-tests' `s3` module) and fail, saying how to install
# it, where it is absent. ENERGON_TEST_PYTHON names the interpreter (default python3).
set -euo pipefail
python="${ENERGON_TEST_PYTHON:-python3}"
if ! "$python" -c "import moto.server, boto3" >/dev/null 2>&1; then
  echo "installing moto[server] for $python"
  "$python" -m pip install -q "moto[server]>=5.0,<6"
fi
