#!/usr/bin/env bash
# Creates (or reuses) the Python venv with upstream Magnum 23.0.0 (oslo.versionedobjects,
# oslo.messaging, PyMySQL), the peer of the object codec's and the interop tests.
#   MAGNUM_TEST_UPSTREAM_VENV  venv directory (default /var/tmp/magnum-rs-upstream-venv)
#   MAGNUM_TEST_PYTHON         interpreter to build it with (default: first CPython >= 3.11)
# Prints nothing but errors when the venv is already complete; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../venv-lib.sh"
# Wheels only, except simplegeneric (a WSME dependency published only as a pure-Python
# source archive; it builds without a compiler). The object layer must import.
build_venv "$here" "${MAGNUM_TEST_UPSTREAM_VENV:-/var/tmp/magnum-rs-upstream-venv}" \
    'bin/python -W ignore -c "import magnum.objects, oslo_versionedobjects"' \
    --no-binary=simplegeneric
