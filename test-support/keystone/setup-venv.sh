#!/usr/bin/env bash
# Creates (or reuses) the Python venv with real Keystone, the OpenStack clients and gunicorn.
#   MAGNUM_TEST_VENV    venv directory (default /var/tmp/magnum-rs-venv)
#   MAGNUM_TEST_PYTHON  interpreter to build it with (default: first CPython >= 3.11 found)
# Prints nothing but errors when the venv is already complete; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../venv-lib.sh"
# The WSGI entry point and the CLIs must be there.
build_venv "$here" "${MAGNUM_TEST_VENV:-/var/tmp/magnum-rs-venv}" \
    'test -x bin/keystone-manage && test -x bin/gunicorn && test -x bin/openstack &&
     bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec(\"keystone.wsgi.api\") is None)"'
