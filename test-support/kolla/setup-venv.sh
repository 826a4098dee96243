#!/usr/bin/env bash
# Creates (or reuses) the Python venv with ansible-core, kolla-ansible and kolla, pinned by
# constraints.txt.
#   MAGNUM_KOLLA_VENV   venv directory (default /var/tmp/magnum-rs-kolla-venv)
#   MAGNUM_TEST_PYTHON  interpreter to build it with (default: first CPython >= 3.11 found)
# Prints nothing but errors when the venv is already complete; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../venv-lib.sh"
# The role's template and the health-check scripts are package data: check they are there.
build_venv "$here" "${MAGNUM_KOLLA_VENV:-/var/tmp/magnum-rs-kolla-venv}" \
    'test -x bin/ansible-playbook &&
     test -f share/kolla-ansible/ansible/roles/magnum/templates/magnum.conf.j2 &&
     bin/python -c "import kolla, os, sys; d = os.path.join(os.path.dirname(kolla.__file__), \"docker/base\"); sys.exit(not all(os.path.isfile(os.path.join(d, f)) for f in (\"healthcheck_curl\", \"healthcheck_port\")))"'
