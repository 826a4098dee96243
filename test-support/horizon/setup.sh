#!/usr/bin/env bash
# Installs (or reuses) everything the Horizon browser test needs, under
# ${MAGNUM_TEST_HORIZON_ROOT:-/var/tmp/magnum-rs-horizon} (outside the clone, so later runs on
# the machine reuse it):
#   venv/          Horizon 27.0.0 + magnum-ui 19.0.0 (requirements.txt, locked by constraints.txt,
#                  wheels only), with local_settings.py and magnum-ui's panels enabled
#   static/        collectstatic's output
#   node/          playwright-core from the npm registry (package.json + package-lock.json,
#                  `npm ci`, no browser download: the test drives Debian's chromium)
# Idempotent: each part has a marker holding a hash of what it was made from, and a change
# remakes that part. Concurrent callers wait on a lock. Needs a CPython >= 3.11 with venv,
# node + npm, and /usr/bin/chromium (scripts/services.sh: ensure_chromium). Prints nothing
# on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../venv-lib.sh"
root=${MAGNUM_TEST_HORIZON_ROOT:-/var/tmp/magnum-rs-horizon}
mkdir -p "$root"
exec 8>"$root/setup.lock"
flock 8

build_venv "$here" "$root/venv" \
    'bin/python -c "import openstack_dashboard, magnum_ui, magnumclient; assert magnumclient.__version__.startswith(\"4.11\")"'

# Settings, panels and static files: remade when the venv, the settings or manage.py change.
sp=$("$root/venv/bin/python" -c 'import openstack_dashboard, os; print(os.path.dirname(os.path.dirname(openstack_dashboard.__file__)))')
want=$(cat "$root/venv/.magnum-rs-complete" "$here/local_settings.py" "$here/manage.py" | sha256sum | cut -d' ' -f1)
if [[ $(cat "$root/static.done" 2>/dev/null) != "$want" ]]; then
    echo "setup.sh: settings, magnum-ui panels, collectstatic into $root/static" >&2
    rm -f "$root/static.done"
    cp "$here/local_settings.py" "$sp/openstack_dashboard/local/local_settings.py"
    # magnum-ui's panel group and panels (Project > Container Infra; Admin > Quotas)
    cp "$sp"/magnum_ui/enabled/_[12]*.py "$sp/openstack_dashboard/local/enabled/"
    rm -rf "$root/static"
    HORIZON_STATIC_ROOT=$root/static PYTHONWARNINGS=ignore \
        "$root/venv/bin/python" "$here/manage.py" collectstatic --noinput -v0 >&2
    echo "$want" >"$root/static.done"
fi

# playwright-core, exactly as locked.
want=$(cat "$here/package.json" "$here/package-lock.json" <(node --version) | sha256sum | cut -d' ' -f1)
if [[ $(cat "$root/node.done" 2>/dev/null) != "$want" || ! -d $root/node/node_modules/playwright-core ]]; then
    echo "setup.sh: npm ci (playwright-core) in $root/node" >&2
    rm -rf "$root/node" "$root/node.done"
    mkdir -p "$root/node"
    cp "$here/package.json" "$here/package-lock.json" "$root/node/"
    # --ignore-scripts: no install script may fetch a browser
    (cd "$root/node" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
    echo "$want" >"$root/node.done"
fi

chromium=${CHROMIUM:-/usr/bin/chromium}
if [[ ! -x $chromium ]]; then
    echo "setup.sh: $chromium is missing: apt-get install -y chromium (scripts/services.sh: ensure_chromium)" >&2
    exit 1
fi
