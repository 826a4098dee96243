#!/usr/bin/env bash
# Creates (or reuses) the Python venv with PyPI's oslo.messaging for the interop tests.
#   MAGNUM_TEST_OSLO_VENV  venv directory (default /var/tmp/magnum-rs-oslo-venv, outside the
#                          clone so later runs on the same machine reuse it)
#   MAGNUM_TEST_PYTHON     interpreter to build it with (default: first CPython >= 3.11 found)
# Prints the venv's python on success and nothing else on stdout; exits non-zero on failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
venv=${MAGNUM_TEST_OSLO_VENV:-/var/tmp/magnum-rs-oslo-venv}
marker=$venv/.magnum-rs-complete

# pyenv's 3.11 is tried explicitly because a fresh machine's PATH may put an older system
# python3 first.
find_python() {
    local c candidates=(python3.11 /root/.pyenv/versions/3.11*/bin/python3.11 python3.12 python3.13 python3)
    [[ -n ${MAGNUM_TEST_PYTHON:-} ]] && candidates=("$MAGNUM_TEST_PYTHON")
    for c in "${candidates[@]}"; do
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    echo "setup-venv: no CPython >= 3.11 with the venv module found (set MAGNUM_TEST_PYTHON)" >&2
    return 1
}

python=$(find_python)
# The marker records what was installed: both pin files and the interpreter version. Any
# change rebuilds the venv from scratch, so a stale package never survives a re-pin.
want=$({ cat "$here/requirements.txt" "$here/constraints.txt"; "$python" -VV; } | sha256sum | cut -d' ' -f1)
complete() { [[ -f $marker && $(cat "$marker") == "$want" && -x $venv/bin/python ]]; }
if complete; then echo "$venv/bin/python"; exit 0; fi

# Several test threads may call this at once on a fresh machine: one builds, the others
# wait for it and then find the venv complete.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if complete; then echo "$venv/bin/python"; exit 0; fi

echo "setup-venv: building $venv with $("$python" -V 2>&1)" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$venv/bin/pip" install --quiet --no-input -c "$here/constraints.txt" pip >&2
# Wheels only: nothing in the lock needs a compiler.
"$venv/bin/pip" install --quiet --no-input --only-binary=:all: \
    -r "$here/requirements.txt" -c "$here/constraints.txt" >&2
"$venv/bin/python" -W ignore -c 'import oslo_messaging, kombu' ||
    { echo "setup-venv: oslo_messaging not importable" >&2; exit 1; }
echo "$want" >"$marker"
echo "setup-venv: ready: $venv" >&2
echo "$venv/bin/python"
