#!/usr/bin/env bash
# Creates (or reuses) the Python venv with schemathesis, pinned by constraints.txt.
#   MAGNUM_FUZZ_VENV    venv directory (default /var/tmp/magnum-rs-fuzz-venv)
#   MAGNUM_TEST_PYTHON  interpreter to build it with (default: first CPython >= 3.11 found)
# Prints nothing but errors when the venv is already complete; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../venv-lib.sh"
build_venv "$here" "${MAGNUM_FUZZ_VENV:-/var/tmp/magnum-rs-fuzz-venv}" \
    'test -x bin/schemathesis && bin/schemathesis --version'
