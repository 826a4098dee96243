#!/usr/bin/env bash
# Three controllers on one machine, from Debian packages, with faults under load.
#
#   test-support/ha/run.sh [MAGNUMD]
#
# MAGNUMD (argument, else $MAGNUMD, else the workspace's debug build) is the magnumd binary.
# Installs what is missing (galera-4, mariadb-server, haproxy, rabbitmq-server, openssl,
# rsync), starts in a temporary directory: a three-node Galera cluster, HAProxy in front of
# it (and of the API), a three-node RabbitMQ cluster with TLS, a Keystone, two `magnumd api`
# and three `magnumd conductor` processes; runs ha.py (the fault test); stops everything it
# started and removes the directory. The machine's own MariaDB (:3306) and RabbitMQ (:5672)
# are never touched: other ports, data, node names and Erlang cookie.
#
# Prints one line per check and, as its last line, "ha: N passed, M failed"; exits 1 when a
# check failed. HA_BURST_SECONDS sets the burst's length (96). HA_KEEP=DIR keeps a copy of
# the logs there.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
HA_HERE=$here
export HA_MAGNUMD=${1:-${MAGNUMD:-/var/tmp/magnum-rs-target/debug/magnumd}}
# shellcheck source=lib.sh
. "$here/lib.sh"

CHECKS_NAME=ha
# shellcheck source=../checks.sh
. "$here/../checks.sh"
t_start=$SECONDS
W=
epmd_ours=

finish() {
    local rc=$? f
    trap - EXIT INT TERM
    if [[ -n $W && -d $W ]]; then
        if [[ -f $W/result ]]; then
            read -r p f <"$W/result"
            passed=$((passed + p))
            failed=$((failed + f))
        fi
        if ((failed > 0)); then
            # What the processes said last, for whoever reads the failure.
            for f in "$W"/logs/*.log "$W"/galera/n*/error.log; do
                [[ -s $f ]] || continue
                echo "--- last lines of ${f#"$W"/}:" >&2
                tail -n 8 "$f" >&2
            done
        fi
        checks_failed_again "$W/checks.log"
        if [[ -n ${HA_KEEP:-} ]]; then
            mkdir -p "$HA_KEEP" && cp -r "$W"/logs "$W"/haproxy "$HA_KEEP"/ 2>/dev/null
            for f in "$W"/galera/n*/error.log* "$W"/galera/n*/recover.log; do
                cp "$f" "$HA_KEEP/galera-$(basename "$(dirname "$f")")-$(basename "$f")" 2>/dev/null
            done
            cp -r "$W"/rabbit/n*/log "$HA_KEEP"/ 2>/dev/null
        fi
        local t0=$SECONDS
        [[ -f $W/keystone/keystone.pid ]] && bash "$repo/test-support/keystone/stop.sh" "$W/keystone" >/dev/null 2>&1
        stop_all
        # The Erlang port mapper, if this run had to start it (no RabbitMQ on the machine).
        if [[ -n $epmd_ours ]]; then
            epmd -kill >/dev/null 2>&1
        fi
        local left
        left=$(ps -eo pid=,args= | grep -F -- "$W" | grep -v grep)
        if [[ -n $left ]]; then
            result 1 "stop: processes left behind: $left"
        else
            result 0 "stop: every process the harness started is gone ($((SECONDS - t0)) s)"
        fi
        rm -rf "$W"
    fi
    echo "ha: took $((SECONDS - t_start)) s"
    checks_summary
    if ((failed > 0 || rc != 0 && passed == 0)); then
        exit 1
    fi
    exit 0
}
trap finish EXIT
trap 'exit 130' INT TERM

# --- What the machine needs -------------------------------------------------------------------
[[ -x $HA_MAGNUMD ]] || { result 1 "magnumd binary at $HA_MAGNUMD (build it, or pass its path)"; exit 1; }
need=()
for pkg in mariadb-server mariadb-client galera-4 haproxy rabbitmq-server openssl rsync iproute2 procps; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if ((${#need[@]})); then
    ha_log "installing ${need[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } \
        >/tmp/magnum-ha-apt.log 2>&1
    result $? "Debian packages installed: ${need[*]}"
    rm -f /tmp/magnum-ha-apt.log
fi
bash "$repo/test-support/keystone/setup-venv.sh" || { result 1 "the Keystone/openstacksdk venv"; exit 1; }
venv=${MAGNUM_TEST_VENV:-/var/tmp/magnum-rs-venv}
# oslo.messaging from PyPI, for the notification listener.
OSLO_PYTHON=$(bash "$repo/test-support/oslo/setup-venv.sh") || { result 1 "the oslo.messaging venv"; exit 1; }
export OSLO_PYTHON

# --- The topology ---------------------------------------------------------------------------
W=$(mktemp -d /tmp/magnum-ha.XXXXXX)
ha_layout "$W" || { result 1 "free ports"; exit 1; }
ha_env "$W"
DB_PASSWORD=db-$(head -c 12 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
RABBIT_PASSWORD=mq-$(head -c 12 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
(umask 077 && printf 'DB_PASSWORD=%s\nRABBIT_PASSWORD=%s\nHA_MAGNUMD=%s\n' \
    "$DB_PASSWORD" "$RABBIT_PASSWORD" "$HA_MAGNUMD" >"$W/secrets.env")
if ! port_open 4369; then
    # No port mapper on the machine: start our own, in the foreground of its own session, so
    # the cleanup ends it; the brokers find it there.
    spawn epmd "$W/logs/epmd.log" env ERL_EPMD_ADDRESS=127.0.0.1 epmd
    epmd_ours=1
    wait_until 10 "epmd" port_open 4369
fi
make_certs
result $? "TLS: a CA and a server certificate for localhost made with openssl"

# Galera (then its health checks and HAProxy), RabbitMQ and Keystone start side by side.
(galera_up && clustercheck_up && haproxy_up) >"$W/logs/galera-up.log" 2>&1 &
g=$!
rabbit_up >"$W/logs/rabbit-up.log" 2>&1 &
r=$!
MAGNUM_TEST_KEYSTONE_TIMEOUT=90 bash "$repo/test-support/keystone/start.sh" "$W/keystone" "$KEYSTONE_PORT" \
    "http://127.0.0.1:$HAPROXY_API_PORT" >"$W/logs/keystone-up.log" 2>&1 &
k=$!
wait $g
result $? "Galera: three nodes (mariadb-server + galera-4) synced, HAProxy in front ($((SECONDS - t_start)) s)" ||
    tail -n 20 "$W/logs/galera-up.log" >&2
wait $r
result $? "RabbitMQ: three nodes clustered, AMQPS only ($((SECONDS - t_start)) s)" ||
    tail -n 20 "$W/logs/rabbit-up.log" >&2
wait $k
result $? "Keystone ($((SECONDS - t_start)) s)" || tail -n 20 "$W/logs/keystone-up.log" >&2
((failed == 0)) || exit 1

# --- magnumd ----------------------------------------------------------------------------------
# shellcheck disable=SC1091
. "$W/keystone/env.sh"
mkdir -p "$W/magnum"
hosts=
for n in 1 2 3; do
    eval "p=\$AMQP_PORT$n"
    hosts+="${hosts:+,}magnum:$RABBIT_PASSWORD@localhost:$p"
done
(umask 077 && cat >"$W/magnum/magnum.conf" <<EOF
[DEFAULT]
transport_url = rabbit://$hosts/
rpc_response_timeout = 10
service_down_time = 10

[conductor]
sync_interval = 1
report_interval = 2

[api]
host = 127.0.0.1

[database]
connection = mysql+pymysql://magnum:$DB_PASSWORD@127.0.0.1:$HAPROXY_DB_PORT/magnum?charset=utf8mb4
max_pool_size = 5
max_overflow = 10
pool_timeout = 10

[oslo_messaging_rabbit]
rabbit_quorum_queue = true
ssl = true
ssl_ca_file = $W/tls/ca.pem
heartbeat_timeout_threshold = 15

[oslo_messaging_notifications]
driver = messagingv2

[simulated_driver]
create_delay = 1
update_delay = 0.5
delete_delay = 0.5

[certificates]
cert_manager_type = x509keypair

[quotas]
max_clusters_per_project = 1000

[keystone_authtoken]
www_authenticate_uri = $MAGNUM_TEST_AUTH_URL
auth_url = $MAGNUM_TEST_AUTH_URL
auth_type = password
username = $MAGNUM_TEST_SERVICE_USER
password = $MAGNUM_TEST_SERVICE_PASSWORD
user_domain_name = Default
project_name = service
project_domain_name = Default
EOF
)
for name in api-1 api-2 conductor-1 conductor-2 conductor-3; do
    mkdir -p "$W/magnum/state-$name"
    {
        printf '[DEFAULT]\nhost = %s\nstate_path = %s\n' "$name" "$W/magnum/state-$name"
        case $name in
            api-1) printf '[api]\nport = %s\n' "$API_PORT1" ;;
            api-2) printf '[api]\nport = %s\n' "$API_PORT2" ;;
        esac
    } >"$W/magnum/$name.conf"
done
"$HA_MAGNUMD" --config-file "$W/magnum/magnum.conf" db upgrade >"$W/logs/db-upgrade.log" 2>&1
result $? "magnumd db upgrade through HAProxy" || { tail -n 20 "$W/logs/db-upgrade.log" >&2; exit 1; }
for name in api-1 api-2; do magnumd_start api "$name"; done
for name in conductor-1 conductor-2 conductor-3; do magnumd_start conductor "$name"; done
api_up() { [[ $(haproxy_cmd "show stat" | awk -F, '$1=="magnum_api" && $18=="UP"' | wc -l) == 2 ]]; }
# 90 s: a debug build's first start on a machine busy building is slow.
wait_until 90 "both API processes UP in HAProxy" api_up
result $? "two magnumd api and three magnumd conductor processes, both APIs UP in HAProxy ($((SECONDS - t_start)) s)" || {
    for name in api-1 api-2 conductor-1 conductor-2 conductor-3; do
        alive "$name" && echo "$name: running" >&2 || echo "$name: not running" >&2
    done
    haproxy_cmd "show stat" | awk -F, '$1=="magnum_api" {print $1, $2, $18, $37}' >&2
    tail -n 20 "$W"/logs/api-*.log "$W"/logs/conductor-*.log >&2
    exit 1
}

# --- The fault test ---------------------------------------------------------------------------
"$venv/bin/python" "$here/ha.py" "$W" 2>&1 | tee "$W/checks.log"
