# Sourced by start.sh, ctl.sh and stop.sh: start, stop and probe the uWSGI of one service of a
# workdir. Layout of a workdir (made by start.sh):
#   <workdir>/ports             "svc port" lines, picked by start.sh and kept by ctl.sh
#   <workdir>/<svc>/uwsgi.ini   the service's uWSGI config (its venv is under MAGNUM_TEST_OS_ROOT)
#   <workdir>/run/<svc>.pid     the uWSGI master's pid (written by uWSGI itself)
#   <workdir>/log/<svc>-uwsgi.log, <svc>-api.log, <svc>-db.log
OS_SERVICES=(barbican glance nova neutron cinder octavia manila)

os_port() { # os_port WORKDIR SVC -> the port start.sh picked
    awk -v s="$2" '$1 == s { print $2 }' "$1/ports" 2>/dev/null
}

# The master's pid if that service of that workdir runs (the pid file alone could name a
# recycled pid: the command line must name this workdir's uwsgi.ini).
os_pid() { # os_pid WORKDIR SVC
    local p
    p=$(cat "$1/run/$2.pid" 2>/dev/null) || return 1
    [[ $p =~ ^[0-9]+$ ]] && kill -0 "$p" 2>/dev/null &&
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$1/$2/uwsgi.ini" || return 1
    echo "$p"
}

# Pids of the live (non-zombie) processes in process group $1. Each uWSGI is started in a
# session of its own, so its master and workers form one group whose id is the master's pid.
os_group() {
    ps -o pid=,stat= -g "$1" 2>/dev/null | awk '$2 !~ /^Z/ { print $1 }'
}

os_tails() { # os_tails WORKDIR SVC... : the last lines of those services' logs, on stderr
    local s f
    for s in "${@:2}"; do
        for f in "$1/log/$s-db.log" "$1/log/$s-uwsgi.log" "$1/log/$s-api.log"; do
            [[ -s $f ]] && { echo "--- last lines of $f:" >&2; tail -n 25 "$f" >&2; }
        done
    done
    return 0
}

os_start() { # os_start WORKDIR SVC VENV : launch (does not wait for it to answer)
    local w=$1 s=$2 venv=$3 port
    port=$(os_port "$w" "$s")
    [[ -n $port ]] || { echo "no port recorded for $s in $w/ports" >&2; return 1; }
    if os_pid "$w" "$s" >/dev/null; then return 0; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "$s: 127.0.0.1:$port is already in use by something else" >&2
        return 1
    fi
    rm -f "$w/run/$s.pid"
    # setsid: a group of its own (see os_group); output to a file, so a caller reading our
    # stdout through a pipe is not held open by the server.
    (cd "$w/$s" && exec setsid "$venv/bin/uwsgi" --ini "$w/$s/uwsgi.ini") \
        </dev/null >>"$w/log/$s-uwsgi.log" 2>&1 &
}

# Waits until the service answers GET / with a status below 500 (uWSGI without its app
# answers 500). Fails early if the master is gone.
os_wait() { # os_wait WORKDIR SVC DEADLINE(in $SECONDS)
    local w=$1 s=$2 deadline=$3 port code= seen= t0=$SECONDS
    port=$(os_port "$w" "$s")
    while :; do
        if os_pid "$w" "$s" >/dev/null; then
            seen=1
            code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "http://127.0.0.1:$port/" 2>/dev/null) || true
            [[ $code =~ ^[1-4][0-9][0-9]$ ]] && return 0
        elif [[ -n $seen ]]; then
            echo "$s: uWSGI exited during startup" >&2
            return 1
        elif ((SECONDS - t0 > 15)); then
            echo "$s: uWSGI did not start (no live master after 15 s)" >&2
            return 1
        fi
        ((SECONDS < deadline)) || {
            echo "$s: no answer on http://127.0.0.1:$port/ in time (last status ${code:-none})" >&2
            return 1
        }
        sleep 0.2
    done
}

# Stops the master and its workers and waits until all are gone (SIGTERM; SIGKILL to the whole
# group after 15 s). Returns 0 if it was not running.
os_stop() { # os_stop WORKDIR SVC
    local w=$1 s=$2 p i q
    if ! p=$(os_pid "$w" "$s"); then
        # A master killed from outside may have left its worker (same group) behind.
        p=$(cat "$w/run/$s.pid" 2>/dev/null) || true
        if [[ $p =~ ^[0-9]+$ ]]; then
            for q in $(os_group "$p"); do
                tr '\0' ' ' <"/proc/$q/cmdline" 2>/dev/null | grep -qF -- "$w/$s/uwsgi.ini" && kill -KILL "$q" 2>/dev/null
            done
        fi
        rm -f "$w/run/$s.pid"
        return 0
    fi
    kill -TERM "$p" 2>/dev/null || true
    for i in $(seq 150); do
        [[ -z $(os_group "$p") ]] && break
        sleep 0.1
    done
    if [[ -n $(os_group "$p") ]]; then
        echo "$s: uWSGI (group $p) ignored SIGTERM for 15 s; killing it" >&2
        kill -KILL -- "-$p" 2>/dev/null || true
        for i in $(seq 50); do
            [[ -z $(os_group "$p") ]] && break
            sleep 0.1
        done
    fi
    rm -f "$w/run/$s.pid"
    [[ -z $(os_group "$p") ]] || { echo "$s: processes of group $p survive SIGKILL" >&2; return 1; }
}

os_rss() { # os_rss PID : RSS of the group (master + workers) in MiB
    ps -o rss= -g "$1" 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s / 1024 }'
}
