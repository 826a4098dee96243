#!/usr/bin/env bash
# Starts Horizon (with magnum-ui) on 127.0.0.1:<port> against the Keystone of <keystone_env.sh>,
# its log and pid in <workdir>. Stop it with stop.sh <workdir>.
#   usage: start.sh <workdir> <keystone_env.sh> <port>
#   MAGNUM_TEST_HORIZON_ROOT   what setup.sh installed (run here; ~0.1 s when complete)
#   MAGNUM_TEST_HORIZON_TIMEOUT seconds Horizon may take to answer its login page (60)
# Django's development server, single process (--noreload): the sessions live in its memory
# (local_settings.py). On failure: exit 1 with the log's tail, nothing left running.
set -euo pipefail
if [[ $# -ne 3 ]]; then
    echo "usage: $0 <workdir> <keystone_env.sh> <port>" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=${MAGNUM_TEST_HORIZON_ROOT:-/var/tmp/magnum-rs-horizon}
port=$3
limit=${MAGNUM_TEST_HORIZON_TIMEOUT:-60}
[[ $port =~ ^[0-9]+$ ]] || { echo "start.sh: port must be a number, got '$port'" >&2; exit 2; }
bash "$here/setup.sh"
mkdir -p "$1"
workdir=$(cd "$1" && pwd)
auth_url=$(. "$2" && echo "$MAGNUM_TEST_AUTH_URL")
py=$root/venv/bin/python

if [[ -f $workdir/horizon.pid ]] && kill -0 "$(cat "$workdir/horizon.pid")" 2>/dev/null; then
    echo "start.sh: a Horizon from $workdir is still running; run stop.sh $workdir first" >&2
    exit 1
fi
if "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null; then
    echo "start.sh: 127.0.0.1:$port is already in use" >&2
    exit 1
fi
log=$workdir/horizon.log
: >"$log"
# setsid: Horizon leads a process group of its own, which stop.sh ends as a whole.
(cd "$workdir" &&
    HORIZON_KEYSTONE_URL=$auth_url HORIZON_STATIC_ROOT=$root/static PYTHONWARNINGS=ignore \
    HORIZON_SECRET_KEY=$("$py" -c 'import secrets; print(secrets.token_hex(32))') \
    exec setsid "$py" "$here/manage.py" runserver --noreload "127.0.0.1:$port") </dev/null >>"$log" 2>&1 &
pid=$!
echo "$pid" >"$workdir/horizon.pid"
trap '[[ -n ${started:-} ]] || bash "$here/stop.sh" "$workdir"' EXIT
deadline=$((SECONDS + limit))
until "$py" -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=5)' "http://127.0.0.1:$port/auth/login/" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
        echo "start.sh: Horizon did not answer on 127.0.0.1:$port within ${limit}s; last lines of $log:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    sleep 0.3
done
started=1
echo "start.sh: Horizon on http://127.0.0.1:$port (pid $pid, Keystone $auth_url); log $log" >&2
