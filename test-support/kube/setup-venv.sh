#!/usr/bin/env bash
# Creates (or reuses) the Python venv of the Kubernetes API server stand-in, pinned by
# constraints.txt.
#   MAGNUM_KUBE_VENV    venv directory (default /var/tmp/magnum-rs-kube-venv)
#   MAGNUM_TEST_PYTHON  interpreter to build it with (default: first CPython >= 3.11 found)
# Prints nothing but errors when the venv is already complete; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../venv-lib.sh"
# The check insists on libyaml's C loader: the pure-Python one takes ~20 s for the 2.6 MB of
# CRD manifests the server loads at start.
build_venv "$here" "${MAGNUM_KUBE_VENV:-/var/tmp/magnum-rs-kube-venv}" \
    'bin/python -c "import yaml; yaml.CSafeLoader"'
