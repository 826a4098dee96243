#!/usr/bin/env bash
# Stops, starts or shows the services of one start.sh workdir, on the ports start.sh picked
# (so the catalogue stays right). Tests use it to take Barbican or Glance away mid-test and
# bring it back; the databases and the Barbican KEK are kept, so old secrets stay readable.
#   usage: ctl.sh <workdir> stop|start|restart|status [svc...]
#          (default: all seven, or those in <workdir>/ports for a workdir of an older start.sh)
#   svc: barbican glance nova neutron cinder octavia manila
#   stop     SIGTERM to the uWSGI master (its workers go with it; SIGKILL to the whole process
#            group after 15 s), waits until all are gone; 0 if it was not running
#   start    launches and waits until it answers HTTP again (MAGNUM_TEST_OS_TIMEOUT, 300 s);
#            on failure prints the tails of its logs, stops it and exits 1
#   status   one line per service: running (pid, port, RSS) or stopped; exit 3 if any is stopped
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 <workdir> stop|start|restart|status [svc...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=${MAGNUM_TEST_OS_ROOT:-/var/tmp/magnum-rs-openstack}
workdir=$(cd "$1" 2>/dev/null && pwd) || { echo "ctl.sh: no workdir $1" >&2; exit 2; }
cmd=$2
shift 2
svcs=("$@")
for s in "${svcs[@]}"; do
    [[ " ${OS_SERVICES[*]} " == *" $s "* ]] || { echo "ctl.sh: unknown service '$s' (one of: ${OS_SERVICES[*]})" >&2; exit 2; }
done
[[ -f $workdir/ports ]] || { echo "ctl.sh: $workdir was not set up by start.sh (no ports file)" >&2; exit 2; }
if ((${#svcs[@]} == 0)); then
    # A workdir that an older start.sh made has no port for a service added since.
    for s in "${OS_SERVICES[@]}"; do [[ -z $(os_port "$workdir" "$s") ]] || svcs+=("$s"); done
fi

stop_all() { # in parallel: each stop may take a few seconds
    local s pids=() rc=0
    for s in "$@"; do
        os_stop "$workdir" "$s" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}
start_all() {
    local s deadline=$((SECONDS + ${MAGNUM_TEST_OS_TIMEOUT:-300})) bad=()
    export PYTHONWARNINGS=ignore
    for s in "$@"; do
        [[ -f $workdir/$s/uwsgi.ini ]] || { echo "ctl.sh: no $workdir/$s/uwsgi.ini" >&2; return 1; }
        os_start "$workdir" "$s" "$root/$s/venv" || bad+=("$s")
    done
    for s in "$@"; do
        [[ " ${bad[*]} " == *" $s "* ]] && continue
        os_wait "$workdir" "$s" "$deadline" || bad+=("$s")
    done
    if ((${#bad[@]})); then
        os_tails "$workdir" "${bad[@]}"
        stop_all "${bad[@]}" || true
        echo "ctl.sh: ${bad[*]} did not start" >&2
        return 1
    fi
}

case $cmd in
stop) stop_all "${svcs[@]}" ;;
start) start_all "${svcs[@]}" ;;
restart) stop_all "${svcs[@]}" && start_all "${svcs[@]}" ;;
status)
    rc=0
    for s in "${svcs[@]}"; do
        if p=$(os_pid "$workdir" "$s"); then
            echo "$s: running, pid $p, http://127.0.0.1:$(os_port "$workdir" "$s"), RSS $(os_rss "$p") MiB"
        else
            echo "$s: stopped (port $(os_port "$workdir" "$s"))"
            rc=3
        fi
    done
    exit $rc
    ;;
*)
    echo "ctl.sh: unknown command '$cmd' (stop, start, restart or status)" >&2
    exit 2
    ;;
esac
