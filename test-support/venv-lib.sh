# Sourced by the test-support/*/setup-venv.sh scripts: builds (or reuses) one pinned venv.
#   build_venv DIR VENV CHECK [PIP_ARGS...]
# DIR holds requirements.txt and constraints.txt; VENV is the venv directory (outside the
# clone, so later runs on the same machine reuse it); CHECK is a shell command run after the
# install that must succeed (an import, an executable) so a broken venv fails here, not in
# the first test; PIP_ARGS go to the main install (e.g. --no-binary=simplegeneric).
# MAGNUM_TEST_PYTHON picks the interpreter (default: first CPython >= 3.11 found).
# Prints nothing on stdout; exits non-zero on failure.

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

build_venv() {
    local dir=$1 venv=$2 check=$3
    shift 3
    local marker=$venv/.magnum-rs-complete python want
    python=$(find_python)
    # The marker records what was installed: both pin files and the interpreter version. Any
    # change rebuilds the venv from scratch, so a stale package never survives a re-pin.
    want=$({ cat "$dir/requirements.txt" "$dir/constraints.txt"; "$python" -VV; } | sha256sum | cut -d' ' -f1)
    if [[ -f $marker && $(cat "$marker") == "$want" && -x $venv/bin/python ]]; then
        return 0
    fi
    # Several tests may ask at once on a fresh machine: one builds, the others wait for it and
    # then find the venv complete.
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9
    if [[ -f $marker && $(cat "$marker") == "$want" && -x $venv/bin/python ]]; then
        return 0
    fi
    echo "setup-venv: building $venv with $("$python" -V 2>&1)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    export PIP_DISABLE_PIP_VERSION_CHECK=1
    # The pinned pip first: it installs a lock much faster than Python 3.11's bundled 23.2.
    "$venv/bin/pip" install --quiet --no-input -c "$dir/constraints.txt" pip >&2
    # Wheels only (unless told otherwise): nothing needs a compiler, and a source build would
    # be slow and need build headers a fresh machine lacks.
    "$venv/bin/pip" install --quiet --no-input --only-binary=:all: "$@" \
        -r "$dir/requirements.txt" -c "$dir/constraints.txt" >&2
    (cd "$venv" && eval "$check") >&2 || { echo "setup-venv: $venv fails its check: $check" >&2; return 1; }
    echo "$want" >"$marker"
    echo "setup-venv: ready: $venv" >&2
}
