#!/usr/bin/env bash
# Starts again a Keystone that stop.sh stopped, with the state start.sh made (same port,
# database, fernet keys: tokens issued before the stop stay valid). Tests use it to take
# Keystone away for a while and bring it back.
#   usage: resume.sh <workdir>
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 <workdir>" >&2
    exit 2
fi
workdir=$(cd "$1" && pwd)
[[ -f $workdir/gunicorn.conf.py && -f $workdir/env.sh ]] || {
    echo "resume.sh: $workdir was not set up by start.sh" >&2
    exit 2
}
if [[ -f $workdir/keystone.pid ]] && kill -0 "$(cat "$workdir/keystone.pid")" 2>/dev/null; then
    echo "resume.sh: Keystone from $workdir is running already" >&2
    exit 0
fi
# shellcheck disable=SC1091
. "$workdir/env.sh"
venv=$MAGNUM_TEST_VENV
export PYTHONWARNINGS=ignore
(cd "$workdir" && exec "$venv/bin/gunicorn") </dev/null >>"$workdir/gunicorn.log" 2>&1 &
pid=$!
echo "$pid" >"$workdir/keystone.pid"
for _ in $(seq 300); do
    if "$venv/bin/python" -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)' \
        "$MAGNUM_TEST_AUTH_URL" 2>/dev/null; then
        echo "resume.sh: Keystone on $MAGNUM_TEST_AUTH_URL again (pid $pid)" >&2
        exit 0
    fi
    kill -0 "$pid" 2>/dev/null || { echo "resume.sh: Keystone exited; see $workdir/gunicorn.log" >&2; exit 1; }
    sleep 0.2
done
echo "resume.sh: Keystone did not answer within 60 s" >&2
exit 1
