#!/usr/bin/env bash
# Stops the Horizon that start.sh <workdir> started: SIGTERM to its process group, SIGKILL
# after 5 s; waits until it is gone. Exits 0 when nothing runs. Keeps the log.
set -euo pipefail
pidfile=${1:?usage: stop.sh <workdir>}/horizon.pid
[[ -f $pidfile ]] || exit 0
pid=$(cat "$pidfile")
# start.sh ran it with setsid: the pid leads its own group.
kill -TERM -- "-$pid" 2>/dev/null || { rm -f "$pidfile"; exit 0; }
for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -KILL -- "-$pid" 2>/dev/null || true
while kill -0 "$pid" 2>/dev/null && [[ $(ps -o stat= -p "$pid") != Z* ]]; do sleep 0.1; done
rm -f "$pidfile"
