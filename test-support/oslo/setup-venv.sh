#!/usr/bin/env bash
# Creates (or reuses) the Python venv with PyPI's oslo.messaging for the interop tests.
#   MAGNUM_TEST_OSLO_VENV  venv directory (default /var/tmp/magnum-rs-oslo-venv)
#   MAGNUM_TEST_PYTHON     interpreter to build it with (default: first CPython >= 3.11 found)
# Prints the venv's python on success and nothing else on stdout; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../venv-lib.sh"
venv=${MAGNUM_TEST_OSLO_VENV:-/var/tmp/magnum-rs-oslo-venv}
build_venv "$here" "$venv" 'bin/python -W ignore -c "import oslo_messaging, kombu"'
echo "$venv/bin/python"
