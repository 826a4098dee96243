#!/usr/bin/env bash
# Stops what start.sh DIR started: the processes whose pids it wrote (capi_sim.pid, then
# apiserver.pid), each only if that pid still runs the expected script. SIGTERM, then SIGKILL
# after 10 s. Never kills by name.
#   stop.sh DIR
set -uo pipefail
(($# == 1)) || { echo "usage: stop.sh DIR" >&2; exit 2; }
dir=$1
status=0
for name in capi_sim apiserver; do
    pidf=$dir/$name.pid
    [[ -f $pidf ]] || continue
    pid=$(cat "$pidf")
    if [[ -n $pid && -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$name.py"; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 1 100); do
            [[ -d /proc/$pid ]] || break
            # a zombie is gone for our purposes
            [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
            sleep 0.1
        done
        if [[ -d /proc/$pid ]] && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
            echo "stop.sh: $name (pid $pid) ignored SIGTERM; SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || status=1
        fi
    fi
    rm -f "$pidf"
done
rm -f "$dir/port"
exit $status
