#!/usr/bin/env bash
# Stops the Keystone that start.sh started from <workdir> (its PID is in <workdir>/keystone.pid).
# The workdir's files are kept for post-mortem reading; start.sh clears them on its next run.
# Exits 0 when nothing is running.
#   usage: stop.sh <workdir>
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 <workdir>" >&2
    exit 2
fi
workdir=$(cd "$1" 2>/dev/null && pwd) || exit 0
pidfile=$workdir/keystone.pid
[[ -f $pidfile ]] || exit 0
pid=$(cat "$pidfile")
[[ $pid =~ ^[0-9]+$ ]] || { echo "stop.sh: $pidfile holds no PID" >&2; exit 1; }

# Guard against a recycled PID: only signal the gunicorn start.sh ran in this workdir.
if kill -0 "$pid" 2>/dev/null && grep -qa gunicorn "/proc/$pid/cmdline" 2>/dev/null &&
    [[ $(readlink "/proc/$pid/cwd") == "$workdir" ]]; then
    # SIGTERM: gunicorn's master stops its worker gracefully (graceful_timeout 5 s).
    kill -TERM "$pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "stop.sh: Keystone (pid $pid) ignored SIGTERM for 10s; killing it" >&2
        pkill -KILL -P "$pid" 2>/dev/null || true # its workers, by parent PID
        kill -KILL "$pid" 2>/dev/null || true
    fi
fi
rm -f "$pidfile"
