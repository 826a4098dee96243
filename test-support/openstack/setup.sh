#!/usr/bin/env bash
# Installs (or reuses) one venv per real OpenStack API service, pinned, under
# ${MAGNUM_TEST_OS_ROOT:-/var/tmp/magnum-rs-openstack}/<svc>/venv, and makes sure the
# shared infrastructure exists: MariaDB user realos/realos (rights on `realos\_%`), the
# default databases realos_*, RabbitMQ vhost realos. Idempotent; well under a second when
# everything is in place (a marker per venv holds a hash of its pins, its lock and the
# interpreter; a change rebuilds that venv from scratch). Concurrent callers wait on a lock.
#   usage: setup.sh [--relock] [svc...]      svc: barbican glance nova neutron cinder octavia manila
#   --relock                 install the pins WITHOUT the locks, then rewrite
#                            constraints/<svc>.txt from `pip freeze` (to re-pin)
#   MAGNUM_TEST_OS_ROOT      where the venvs live (outside the clone; reused across runs)
#   MAGNUM_TEST_OS_PYTHON    interpreter for the venvs (/usr/bin/python3, Debian's 3.11)
#   MAGNUM_TEST_OS_JOBS      parallel installs (3: downloads overlap, 2 cores stay usable)
#   RABBITMQ_NODENAME        node for rabbitmqctl (rabbit@localhost)
# Prints progress on stderr only; exits non-zero on failure with the tail of the install log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=${MAGNUM_TEST_OS_ROOT:-/var/tmp/magnum-rs-openstack}
python=${MAGNUM_TEST_OS_PYTHON:-/usr/bin/python3}
jobs_max=${MAGNUM_TEST_OS_JOBS:-3}
node=${RABBITMQ_NODENAME:-rabbit@localhost}

# The pins. Every other package is locked by constraints/<svc>.txt.
ALL=(barbican glance nova neutron cinder octavia manila)
declare -A PIN=([barbican]=barbican==23.0.0 [glance]=glance==33.0.0 [nova]=nova==34.0.0
    [neutron]=neutron==29.0.0 [cinder]=cinder==29.0.0 [octavia]=octavia==19.0.0 [manila]=manila==23.0.1)
COMMON=(uWSGI==2.0.31 PyMySQL==1.2.4)
# pip itself (not in `pip freeze`): a current pip installs a lock much faster than 3.11's 23.0.
PIP_PIN=pip==26.3
# Locked packages PyPI has only as source: built once into $root/wheels and installed from
# there by all venvs (uWSGI's C build takes ~30 s; parallel builds of it would take minutes).
SOURCE_ONLY=(uWSGI ovs simplegeneric)
# What each venv must provide (checked after the install, so a broken venv fails here).
declare -A CHECK=([barbican]="barbican-manage barbican.api.app" [glance]="glance-manage glance.wsgi.api"
    [nova]="nova-manage nova.wsgi.osapi_compute" [neutron]="neutron-db-manage neutron.wsgi.api"
    [cinder]="cinder-manage cinder.wsgi.api" [octavia]="octavia-db-manage octavia.wsgi.api"
    [manila]="manila-manage manila.wsgi.api")
# The default databases (slot 0), made with the user. start.sh (re)creates its slot's
# databases at each start, so a machine set up before one was added needs nothing.
DEFAULT_DBS=(barbican glance nova_api nova nova_cell0 neutron cinder octavia manila)

relock=
if [[ ${1:-} == --relock ]]; then relock=1; shift; fi
svcs=("$@")
((${#svcs[@]})) || svcs=("${ALL[@]}")
for s in "${svcs[@]}"; do
    [[ -n ${PIN[$s]:-} ]] || { echo "setup.sh: unknown service '$s' (one of: ${ALL[*]})" >&2; exit 2; }
done

log() { echo "setup.sh: $*" >&2; }
[[ -x $python ]] && "$python" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
    { log "$python is not a CPython >= 3.11 with the venv module (set MAGNUM_TEST_OS_PYTHON)"; exit 1; }
pyver=$("$python" -VV)

want_hash() { # what the marker of $1's venv must hold
    { echo "${PIN[$1]} ${COMMON[*]} $PIP_PIN"; cat "$here/constraints/$1.txt" 2>/dev/null; echo "$pyver"; } |
        sha256sum | cut -d' ' -f1
}
venv_ok() {
    local m=$root/$1/venv/.magnum-rs-complete
    [[ -f $m && $(cat "$m") == "$(want_hash "$1")" && -x $root/$1/venv/bin/uwsgi ]]
}
rabbit_ok() { # the services' transport URL works: an AMQP login (70 ms) beats rabbitmqctl (350 ms)
    local py
    for py in "$root"/*/venv/bin/python; do
        [[ -x $py ]] || continue
        "$py" -c 'import amqp, sys
c = amqp.Connection("127.0.0.1:5672", userid="guest", password="guest", virtual_host="realos", connect_timeout=5)
c.connect()
c.close()' 2>/dev/null
        return
    done
    rabbitmqctl -n "$node" -q list_vhosts 2>/dev/null | grep -qx realos
}
infra_ok() {
    [[ $(mysql -uroot -N -e "SELECT COUNT(*) FROM mysql.user WHERE user='realos'" 2>/dev/null) == 2 ]] && rabbit_ok
}
all_ok() {
    local s
    for s in "${svcs[@]}"; do venv_ok "$s" || return 1; done
    infra_ok
}

if [[ -z $relock ]] && all_ok; then exit 0; fi
mkdir -p "$root"
exec 9>"$root/.setup.lock"
if ! flock -n 9; then
    log "another setup.sh is installing into $root; waiting for it"
    flock 9
fi
if [[ -z $relock ]] && all_ok; then exit 0; fi
t0=$SECONDS

# ------------------------------------------------------------------ shared infrastructure
if ! infra_ok; then
    log "MariaDB user realos, databases realos_*, RabbitMQ vhost realos"
    # The project's test cleanup drops databases named magnum_%: these are realos_* on purpose.
    for db in "${DEFAULT_DBS[@]}"; do
        mysql -uroot -e "CREATE DATABASE IF NOT EXISTS realos_$db CHARACTER SET utf8mb4"
    done
    mysql -uroot -e "CREATE USER IF NOT EXISTS 'realos'@'localhost' IDENTIFIED BY 'realos';
        CREATE USER IF NOT EXISTS 'realos'@'127.0.0.1' IDENTIFIED BY 'realos';
        GRANT ALL PRIVILEGES ON \`realos\\_%\`.* TO 'realos'@'localhost';
        GRANT ALL PRIVILEGES ON \`realos\\_%\`.* TO 'realos'@'127.0.0.1'; FLUSH PRIVILEGES;" ||
        { log "cannot create the MariaDB user realos (is MariaDB up, root over the socket?)"; exit 1; }
    rabbitmqctl -n "$node" -q list_vhosts | grep -qx realos || rabbitmqctl -n "$node" -q add_vhost realos >/dev/null ||
        { log "cannot add the RabbitMQ vhost realos on node $node (set RABBITMQ_NODENAME)"; exit 1; }
    rabbitmqctl -n "$node" -q set_permissions -p realos guest '.*' '.*' '.*' >/dev/null
fi

# ------------------------------------------------------------------ venvs
todo=()
for s in "${svcs[@]}"; do
    if [[ -n $relock ]] || ! venv_ok "$s"; then todo+=("$s"); fi
done
((${#todo[@]})) || exit 0
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
mkdir -p "$root/wheels" "$root/log"

# The version a lock gives a package (first lock that has it), or nothing.
locked_version() {
    local v s
    for s in "${ALL[@]}"; do
        v=$(sed -n "s/^$1==//Ip" "$here/constraints/$s.txt" 2>/dev/null | head -n1)
        [[ -n $v ]] && { echo "$v"; return; }
    done
    printf '%s\n' "${COMMON[@]}" | sed -n "s/^$1==//Ip"
}

# Source-only packages: one wheel each, built once per machine (the pip cache keeps nothing
# for a parallel install that races for the same build). A build venv with the pinned pip.
bvenv=$root/.build-venv
if [[ ! -x $bvenv/bin/pip ]] || ! "$bvenv/bin/pip" --version | grep -q "^pip ${PIP_PIN#pip==} "; then
    rm -rf "$bvenv"
    "$python" -m venv "$bvenv"
    "$bvenv/bin/pip" install -q "$PIP_PIN" >&2
fi
for p in "${SOURCE_ONLY[@]}"; do
    v=$(locked_version "$p")
    [[ -n $v ]] || continue
    compgen -G "$root/wheels/$(echo "$p" | tr 'A-Z-' 'a-z_')-$v-*.whl" >/dev/null && continue
    log "building the $p $v wheel from source (once per machine)"
    "$bvenv/bin/pip" wheel -q --no-deps --no-binary "$p" -w "$root/wheels" "$p==$v" \
        >"$root/log/wheel-$p.log" 2>&1 || { tail -n 30 "$root/log/wheel-$p.log" >&2; log "building $p $v failed"; exit 1; }
done

install_one() { # runs in a subshell; all output to the install log
    local s=$1 venv=$root/$1/venv cons=$here/constraints/$1.txt lg=$root/log/install-$1.log
    local t=$SECONDS w m
    exec >"$lg" 2>&1
    rm -rf "$venv"
    "$python" -m venv "$venv"
    if [[ -n $relock ]]; then
        "$venv/bin/pip" install -q "$PIP_PIN"
        # Prebuilt wheels are still used for the source-only packages; anything else new
        # shows up as "Building wheel for" in the log: add it to SOURCE_ONLY.
        "$venv/bin/pip" install --find-links "$root/wheels" "${PIN[$s]}" "${COMMON[@]}"
    else
        [[ -f $cons ]] || { echo "no lock $cons: run setup.sh --relock $s"; return 1; }
        "$venv/bin/pip" install -q -c "$cons" "$PIP_PIN"
        # Wheels only: what PyPI has only as source is in $root/wheels already.
        "$venv/bin/pip" install --only-binary=:all: --find-links "$root/wheels" \
            -c "$cons" "${PIN[$s]}" "${COMMON[@]}"
    fi
    read -r w m <<<"${CHECK[$s]}"
    test -x "$venv/bin/$w" && test -x "$venv/bin/uwsgi" &&
        "$venv/bin/python" -W ignore -c "import importlib.util as u, sys; sys.exit(u.find_spec('$m') is None)" ||
        { echo "the venv lacks $w, uwsgi or the module $m"; return 1; }
    if [[ -n $relock ]]; then
        {
            echo "# Full lock of the $s venv (setup.sh installs its pins with -c from this file),"
            echo "# tested with $pyver. Regenerate with: setup.sh --relock $s"
            echo "$PIP_PIN"
            "$venv/bin/pip" freeze
        } >"$cons.new"
        mv "$cons.new" "$cons"
    fi
    want_hash "$s" >"$venv/.magnum-rs-complete"
    echo "installed in $((SECONDS - t)) s"
}

log "installing ${todo[*]} into $root (${jobs_max} at a time; logs $root/log/install-<svc>.log)"
for s in "${todo[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
    (install_one "$s") &
done
wait
failed=()
for s in "${todo[@]}"; do
    if venv_ok "$s"; then log "$s: $(tail -n1 "$root/log/install-$s.log")"; else failed+=("$s"); fi
done
if ((${#failed[@]})); then
    for s in "${failed[@]}"; do
        echo "--- last lines of $root/log/install-$s.log:" >&2
        tail -n 25 "$root/log/install-$s.log" >&2
    done
    log "installing ${failed[*]} failed"
    exit 1
fi
log "ready in $((SECONDS - t0)) s: ${todo[*]}"
