#!/usr/bin/env bash
# The cut-over rehearsal: upstream Magnum 23.0.0 replaced by magnumd, then rolled back, under
# a client's load, on one MariaDB database and one RabbitMQ vhost.
#
#   test-support/cutover/run.sh [MAGNUMD]
#
# MAGNUMD (argument, else $MAGNUMD, else the workspace's debug build) is the magnumd binary.
# Installs what is missing (haproxy; MariaDB and RabbitMQ through scripts/services.sh), builds
# the venvs on first use (Keystone + openstacksdk, upstream Magnum, the six OpenStack API
# services), starts in a temporary directory a Keystone, Glance/Nova/Neutron/... (upstream's
# API validates images and networks), HAProxy, upstream's magnum-api and magnum-conductor, and
# runs cutover.py (the steps and the checks); stops everything it started and removes the
# directory, the database and the vhost. Prints one line per check and, as its last line,
# "cutover: N passed, M failed"; exits 1 when a check failed. CUTOVER_KEEP=DIR keeps the logs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
MAGNUMD=${1:-${MAGNUMD:-/var/tmp/magnum-rs-target/debug/magnumd}}

CHECKS_NAME=cutover
# shellcheck source=../checks.sh
. "$here/../checks.sh"
say() { printf 'cutover: %s\n' "$*" >&2; }
t_start=$SECONDS
W=
DB=
VHOST=

# Every process started here or by cutover.py is in a session of its own, its id in pids/.
stop_group() {
    local f=$1 pid deadline
    pid=$(cat "$f" 2>/dev/null) || return 0
    [[ -n $pid ]] || return 0
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    deadline=$((SECONDS + 10))
    while pgrep -g "$pid" >/dev/null 2>&1 || kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            kill -KILL -- "-$pid" 2>/dev/null
            sleep 0.5
            break
        fi
        sleep 0.1
    done
    rm -f "$f"
}

finish() {
    local rc=$? f p left
    trap - EXIT INT TERM
    if [[ -n $W && -d $W ]]; then
        if [[ -f $W/result ]]; then
            read -r p f <"$W/result"
            passed=$((passed + p))
            failed=$((failed + f))
        fi
        if [[ -n ${CUTOVER_KEEP:-} ]]; then
            mkdir -p "$CUTOVER_KEEP" && cp -r "$W"/logs "$W"/*.conf "$W"/haproxy.cfg "$CUTOVER_KEEP"/ 2>/dev/null
            cp "$W"/keystone/*.log "$W"/openstack/log/*.log "$CUTOVER_KEEP"/ 2>/dev/null
        elif ((failed > 0)); then
            for f in "$W"/logs/*.log; do
                [[ -s $f ]] || continue
                echo "--- last lines of ${f#"$W"/}:" >&2
                tail -n 6 "$f" >&2
            done
        fi
        checks_failed_again "$W/checks.log"
        for f in "$W"/pids/*.pid; do
            [[ -f $f ]] && stop_group "$f" &
        done
        wait
        [[ -f $W/openstack/env.sh ]] && bash "$repo/test-support/openstack/stop.sh" "$W/openstack" >/dev/null 2>&1
        [[ -f $W/keystone/keystone.pid ]] && bash "$repo/test-support/keystone/stop.sh" "$W/keystone" >/dev/null 2>&1
        [[ -n $DB ]] && mariadb -uroot -e "DROP DATABASE IF EXISTS \`$DB\`" 2>/dev/null
        [[ -n $VHOST ]] && rabbitmqctl -q delete_vhost "$VHOST" >/dev/null 2>&1
        left=$(ps -eo pid=,args= | grep -F -- "$W" | grep -v grep)
        if [[ -n $left ]]; then
            result 1 "stop: processes left behind: $left"
        else
            result 0 "stop: every process the rehearsal started is gone; database and vhost removed"
        fi
        rm -rf "$W"
    fi
    echo "cutover: took $((SECONDS - t_start)) s"
    checks_summary
    if ((failed > 0 || (rc != 0 && passed == 0))); then
        exit 1
    fi
    exit 0
}
trap finish EXIT
trap 'exit 130' INT TERM

# --- What the machine needs -------------------------------------------------------------------
[[ -x $MAGNUMD ]] || { result 1 "magnumd binary at $MAGNUMD (build it, or pass its path)"; exit 1; }
# shellcheck source=../../scripts/services.sh
. "$repo/scripts/services.sh"
{ ensure_mariadb && ensure_rabbitmq && ensure_python_build && ensure_haproxy; } >/dev/null 2>&1 ||
    { result 1 "MariaDB, RabbitMQ, haproxy and the Python build tools (scripts/services.sh)"; exit 1; }
bash "$repo/test-support/keystone/setup-venv.sh" >/dev/null || { result 1 "the Keystone/openstacksdk venv"; exit 1; }
bash "$repo/test-support/upstream/setup-venv.sh" >/dev/null || { result 1 "the upstream Magnum venv"; exit 1; }
bash "$repo/test-support/openstack/setup.sh" >/dev/null || { result 1 "the OpenStack services' venvs"; exit 1; }
venv=${MAGNUM_TEST_VENV:-/var/tmp/magnum-rs-venv}
upstream=${MAGNUM_TEST_UPSTREAM_VENV:-/var/tmp/magnum-rs-upstream-venv}

# --- The cloud --------------------------------------------------------------------------------
W=$(mktemp -d /tmp/magnum-cutover.XXXXXX)
mkdir -p "$W/pids" "$W/logs" "$W/state"
TAG=$(basename "$W" | tr -cd 'a-zA-Z0-9' | tr 'A-Z' 'a-z' | tail -c 7)
# Four free ports at random in 10000-19999: below the kernel's ephemeral range (32768-60999),
# where any outgoing connection may take a port between its pick and its use (CI once saw
# magnumd api's port taken so), and below the OpenStack services' 20000-32767.
read -r KEYSTONE_PORT FRONT_PORT UPSTREAM_PORT RUST_PORT < <(python3 - <<'EOF'
import random, socket
picked = []
while len(picked) < 4:
    p = random.randint(10000, 19999)
    if p in picked:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        picked.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(*picked)
EOF
)
DB=magnum_cutover_$TAG
VHOST=magnum-cutover-$TAG
mariadb -uroot -e "CREATE DATABASE \`$DB\`" && result 0 "MariaDB: a fresh database $DB" ||
    { result 1 "MariaDB: create database $DB"; DB=; exit 1; }
{ rabbitmqctl -q add_vhost "$VHOST" && rabbitmqctl -q set_permissions -p "$VHOST" guest '.*' '.*' '.*'; } >/dev/null 2>&1 &&
    result 0 "RabbitMQ: a vhost of its own, $VHOST" || { result 1 "RabbitMQ: vhost $VHOST"; exit 1; }

MAGNUM_TEST_KEYSTONE_TIMEOUT=90 bash "$repo/test-support/keystone/start.sh" "$W/keystone" "$KEYSTONE_PORT" \
    "http://127.0.0.1:$FRONT_PORT" >"$W/logs/keystone-up.log" 2>&1
result $? "Keystone on :$KEYSTONE_PORT, Magnum's endpoint = HAProxy :$FRONT_PORT ($((SECONDS - t_start)) s)" ||
    { tail -n 20 "$W/logs/keystone-up.log" >&2; exit 1; }
bash "$repo/test-support/openstack/start.sh" "$W/openstack" "$W/keystone/env.sh" RealOne >"$W/logs/openstack-up.log" 2>&1
result $? "Glance, Nova, Neutron, Cinder, Octavia, Barbican, Manila in region RealOne ($((SECONDS - t_start)) s)" ||
    { tail -n 20 "$W/logs/openstack-up.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$W/keystone/env.sh"

# --- One magnum.conf for both implementations ---------------------------------------------------
(umask 077 && cat >"$W/magnum.conf" <<EOF
[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:5672/$VHOST
state_path = $W/state
rpc_response_timeout = 30

[api]
host = 127.0.0.1
workers = 1
api_paste_config = $upstream/etc/magnum/api-paste.ini

[conductor]
workers = 1

[database]
connection = mysql+pymysql://root@127.0.0.1:3306/$DB?charset=utf8mb4

[oslo_concurrency]
lock_path = $W/state

[certificates]
cert_manager_type = x509keypair

[quotas]
max_clusters_per_project = 1000

[simulated_driver]
create_delay = 2
update_delay = 2
delete_delay = 2

[keystone_authtoken]
www_authenticate_uri = $MAGNUM_TEST_AUTH_URL
auth_url = $MAGNUM_TEST_AUTH_URL
auth_type = password
username = $MAGNUM_TEST_SERVICE_USER
password = $MAGNUM_TEST_SERVICE_PASSWORD
user_domain_name = Default
project_name = service
project_domain_name = Default

[keystone_auth]
auth_url = $MAGNUM_TEST_AUTH_URL
auth_type = password
username = $MAGNUM_TEST_SERVICE_USER
password = $MAGNUM_TEST_SERVICE_PASSWORD
user_domain_name = Default
project_name = service
project_domain_name = Default

[glance_client]
region_name = RealOne

[nova_client]
region_name = RealOne

[neutron_client]
region_name = RealOne

[cinder_client]
region_name = RealOne

[octavia_client]
region_name = RealOne

[barbican_client]
region_name = RealOne
EOF
)
# Per process: its host name and, for the APIs, its port.
printf '[DEFAULT]\nhost = upstream-api-%s\n\n[api]\nport = %s\n' "$TAG" "$UPSTREAM_PORT" >"$W/upstream-api.conf"
printf '[DEFAULT]\nhost = upstream-conductor-%s\n' "$TAG" >"$W/upstream-conductor.conf"
printf '[DEFAULT]\nhost = magnumd-api-%s\n\n[api]\nport = %s\n' "$TAG" "$RUST_PORT" >"$W/magnumd-api.conf"
printf '[DEFAULT]\nhost = magnumd-conductor-%s\n' "$TAG" >"$W/magnumd-conductor.conf"

"$upstream/bin/magnum-db-manage" --config-file "$W/magnum.conf" upgrade >"$W/logs/db-manage.log" 2>&1
result $? "schema by upstream's magnum-db-manage upgrade" || { tail -n 20 "$W/logs/db-manage.log" >&2; exit 1; }

cat >"$W/ports.env" <<EOF
W=$W
TAG=$TAG
DB=$DB
VHOST=$VHOST
FRONT_PORT=$FRONT_PORT
UPSTREAM_PORT=$UPSTREAM_PORT
RUST_PORT=$RUST_PORT
MAGNUMD=$MAGNUMD
UPSTREAM_VENV=$upstream
STANDIN=$here/standin
EOF

# --- The rehearsal ----------------------------------------------------------------------------
"$venv/bin/python" "$here/cutover.py" "$W" 2>&1 | tee "$W/checks.log"
