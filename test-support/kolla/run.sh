#!/usr/bin/env bash
# magnumd started as kolla-ansible and openstack-helm start Magnum, with the magnum.conf
# each writes, unchanged, against a RabbitMQ node of this run's own with a TLS listener;
# then kolla's own container health checks against it. README.md says what is covered.
#   MAGNUM_KOLLA_MAGNUMD  the magnumd binary (default: cargo build -p magnumd, debug)
#   MAGNUM_KOLLA_VENV     the venv (default /var/tmp/magnum-rs-kolla-venv; built on first use)
#   MAGNUM_KOLLA_KEEP=1   keep the work folder (configs, logs) for a look afterwards
# Last line: `kolla: N passed, M failed`; exits 1 if any check failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/scripts/services.sh"

CHECKS_NAME=kolla
# shellcheck source=../checks.sh
. "$here/../checks.sh"
ok() { result 0 "$@"; }
bad() { result 1 "$@" || true; }
check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
finish() {
    checks_summary
    [[ $failed == 0 ]]
    exit
}
say() { echo "kolla: [$SECONDS s] $*" >&2; }

ensure_kolla_tools
ensure_mariadb >/dev/null
ensure_rabbitmq # for its package: this run's node is its own, the machine's is only read

venv=${MAGNUM_KOLLA_VENV:-/var/tmp/magnum-rs-kolla-venv}
MAGNUM_KOLLA_VENV=$venv bash "$here/setup-venv.sh" || { bad "venv $venv"; finish; }
kolla_ansible=$venv/share/kolla-ansible/ansible
healthchecks=$("$venv/bin/python" -c 'import kolla, os; print(os.path.join(os.path.dirname(kolla.__file__), "docker", "base"))')

magnumd=${MAGNUM_KOLLA_MAGNUMD:-}
if [[ -z $magnumd ]]; then
    (cd "$root" && cargo build -q -p magnumd) || { bad "cargo build -p magnumd"; finish; }
    magnumd=$(cd "$root" && cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/magnumd
fi

W=$(mktemp -d /tmp/magnum-rs-kolla.XXXXXX)
chmod 700 "$W"
pids=()
db=kolla_$(basename "$W" | tr -dc 'a-zA-Z0-9' | tr 'A-Z' 'a-z')
sql() { mariadb --no-defaults -h127.0.0.1 -umagnum_test -pmagnum_test -N -B -e "$1"; }

# ---------------------------------------------------------------------------------------------
# A RabbitMQ node of this run's own (the technique of test-support/ha/lib.sh): the Debian
# package's scripts with their own node name, ports, data, HOME and Erlang cookie; a TLS
# listener only.
RABBIT_BIN=/usr/lib/rabbitmq/bin
rabbit_node=kolla$$@localhost
amqp_port=$(free_port)
dist_port=$(free_port)
rabbit_env() {
    local v
    for v in $(compgen -e | grep -E '^(RABBITMQ_|ERL_)'); do unset "$v"; done
    export HOME=$W/rabbit/home
    export RABBITMQ_NODENAME=$rabbit_node RABBITMQ_USE_LONGNAME=false
    export RABBITMQ_CONF_ENV_FILE=$W/rabbit/rabbitmq-env.conf
    export RABBITMQ_CONFIG_FILE=$W/rabbit/rabbitmq.conf
    export RABBITMQ_ADVANCED_CONFIG_FILE=$W/rabbit/advanced.config
    export RABBITMQ_MNESIA_BASE=$W/rabbit/mnesia RABBITMQ_LOG_BASE=$W/rabbit/log
    export RABBITMQ_PID_FILE=$W/rabbit/rabbit.pid
    export RABBITMQ_ENABLED_PLUGINS_FILE=$W/rabbit/enabled_plugins
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_DIST_PORT=$dist_port
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}
rabbitctl() { (rabbit_env && timeout 60 "$RABBIT_BIN/rabbitmqctl" -q -n "$rabbit_node" "$@"); }

cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
    done
    if [[ -f $W/rabbit/rabbit.pid ]]; then
        rabbitctl stop >/dev/null 2>&1 || kill -9 "$(cat "$W/rabbit/rabbit.pid")" 2>/dev/null
    fi
    sql "DROP DATABASE IF EXISTS $db; DROP DATABASE IF EXISTS ${db}_helm" >/dev/null 2>&1
    if [[ ${MAGNUM_KOLLA_KEEP:-0} == 1 ]]; then say "kept $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT

mkdir -p "$W/tls" "$W/rabbit/home" "$W/rabbit/mnesia" "$W/rabbit/log" "$W/bin" "$W/kolla" "$W/helm"
(
    cd "$W/tls" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=magnum-kolla-test-ca" \
        -keyout ca.key -out ca.pem -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" &&
        for who in server client; do
            openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout $who.key -out $who.csr &&
                printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=%s\n' \
                    "$([[ $who == server ]] && echo serverAuth || echo clientAuth)" >$who.ext &&
                openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                    -extfile $who.ext -out $who.pem || exit 1
        done
) >/dev/null 2>&1 || { bad "TLS certificates (openssl)"; finish; }
chmod 600 "$W"/tls/*.key

rabbit_password=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$W/rabbit/home/.erlang.cookie"
chmod 400 "$W/rabbit/home/.erlang.cookie"
: >"$W/rabbit/rabbitmq-env.conf"
echo '[].' >"$W/rabbit/enabled_plugins"
cat >"$W/rabbit/rabbitmq.conf" <<EOF
listeners.tcp = none
listeners.ssl.default = 127.0.0.1:$amqp_port
ssl_options.cacertfile = $W/tls/ca.pem
ssl_options.certfile = $W/tls/server.pem
ssl_options.keyfile = $W/tls/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
default_user = openstack
default_pass = $rabbit_password
loopback_users = none
log.console = false
log.file.level = warning
disk_free_limit.absolute = 50MB
EOF
say "starting RabbitMQ node $rabbit_node (TLS on 127.0.0.1:$amqp_port)"
(rabbit_env && exec setsid "$RABBIT_BIN/rabbitmq-server" >"$W/rabbit/stdout.log" 2>&1) &
pids+=($!)
rabbit_up=0
for _ in $(seq 90); do
    if rabbitctl await_startup --timeout 1 >/dev/null 2>&1; then rabbit_up=1; break; fi
    sleep 1
done
if [[ $rabbit_up != 1 ]]; then
    tail -n 20 "$W"/rabbit/log/*.log "$W/rabbit/stdout.log" >&2
    bad "RabbitMQ node with a TLS listener"
    finish
fi
ok "RabbitMQ node $rabbit_node up, TLS listener only, on $amqp_port"

# ---------------------------------------------------------------------------------------------
# magnumd under upstream's command names, in a mount namespace of its own whose /var/log and
# /var/lib are folders of this run: kolla's file logs to /var/log/kolla/magnum and keeps its
# state in /var/lib/magnum, as in kolla's containers, and nothing lands on the machine.
for name in magnum-api magnum-conductor magnum-db-manage; do ln -s "$magnumd" "$W/bin/$name"; done
in_ns() { # in_ns ROOT COMMAND...: COMMAND with ROOT/var/log, ROOT/var/lib and ROOT/etc over /etc
    local r=$1
    shift
    mkdir -p "$r/var/log/kolla/magnum" "$r/var/lib/magnum" "$r/etc" "$r/.etc-work"
    # exec: in start's subshell the recorded pid becomes magnumd's own.
    exec unshare --mount --propagation private -- sh -c \
        'mount --bind "$0/var/log" /var/log && mount --bind "$0/var/lib" /var/lib &&
         mount -t overlay overlay -o "lowerdir=/etc,upperdir=$0/etc,workdir=$0/.etc-work" /etc &&
         shift && exec "$@"' "$r" - "$@"
}
# start NAME LOG COMMAND...: in the background, recorded for the cleanup.
start() {
    local name=$1 log=$2
    shift 2
    (in_ns "$W/$name-root" "$@" >"$log" 2>&1) &
    pids+=($!)
    eval "pid_$(echo "$name" | tr -c 'a-z0-9\n' '_')=$!"
}
alive() { kill -0 "$1" 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# kolla-ansible: the magnum role's magnum.conf.j2 rendered by ansible with the role's defaults
# and kolla-ansible's group_vars/all, for magnum-api and magnum-conductor.
api_port=$(free_port)
keystone_port=$(free_port) # nothing listens: Keystone is only called for a user's request
sql "CREATE DATABASE $db" || { bad "create database $db"; finish; }
ln -s "$kolla_ansible/group_vars" "$W/kolla/group_vars"
cat >"$W/kolla/inventory.ini" <<EOF
[control]
localhost ansible_connection=local ansible_python_interpreter=$venv/bin/python
[rabbitmq:children]
control
[memcached:children]
control
[magnum-api:children]
control
[magnum-conductor:children]
control
EOF
cat >"$W/kolla/render.yml" <<EOF
- hosts: localhost
  gather_facts: true
  gather_subset: [network]
  vars_files:
    - $kolla_ansible/roles/magnum/defaults/main.yml
  tasks:
    - template:
        src: $kolla_ansible/roles/magnum/templates/magnum.conf.j2
        dest: "$W/kolla/{{ item }}.conf"
        mode: "0600"
      vars:
        service_name: "{{ item }}"
      loop: [magnum-api, magnum-conductor]
    - copy:
        dest: "$W/kolla/healthchecks"
        mode: "0600"
        content: |
          {{ magnum_api_healthcheck_test[1] }}
          {{ magnum_conductor_healthcheck_test[1] }}
EOF
# What a deployment's globals.yml, passwords.yml and inventory give; the rest is kolla's.
cat >"$W/kolla/extra.yml" <<EOF
api_interface: lo
kolla_internal_vip_address: 127.0.0.1
kolla_same_external_internal_vip: true
openstack_service_workers: 1
rabbitmq_enable_tls: true
om_enable_rabbitmq_tls: true
rabbitmq_port: "$amqp_port"
rabbitmq_cacert: $W/tls/ca.pem
rabbitmq_password: $rabbit_password
magnum_database_user: magnum_test
magnum_database_password: magnum_test
magnum_database_name: $db
keystone_internal_port: $keystone_port
keystone_public_port: $keystone_port
magnum_api_port: $api_port
magnum_api_listen_port: $api_port
magnum_keystone_password: $(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
memcache_secret_key: $(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
EOF
chmod 600 "$W/kolla/extra.yml"
if (cd "$W/kolla" && ANSIBLE_FILTER_PLUGINS=$kolla_ansible/filter_plugins ANSIBLE_LOCALHOST_WARNING=False \
    ANSIBLE_NOCOLOR=1 ANSIBLE_HOME=$W/kolla/.ansible ANSIBLE_LOCAL_TEMP=$W/kolla/.ansible/tmp \
    "$venv/bin/ansible-playbook" -i inventory.ini render.yml -e @extra.yml >render.log 2>&1); then
    ok "kolla-ansible $("$venv/bin/pip" show kolla-ansible 2>/dev/null | sed -n 's/^Version: //p') renders magnum.conf for magnum-api and magnum-conductor"
else
    tail -n 20 "$W/kolla/render.log"
    bad "kolla-ansible renders magnum.conf"
    finish
fi
api_check=$(sed -n 1p "$W/kolla/healthchecks")
conductor_check=$(sed -n 2p "$W/kolla/healthchecks")
kolla_api_conf=$W/kolla/magnum-api.conf
kolla_conductor_conf=$W/kolla/magnum-conductor.conf

# The options a file sets, as `[section] key` lines.
set_options() { awk '/^\[/ { s = $0; next } /^[A-Za-z_]/ { k = $0; sub(/[ \t]*=.*/, "", k); print s " " k }' "$1" | sort -u; }
# The one warning line naming ignored options, from a log.
ignored_line() { grep 'configuration options ignored' "$1"; }
# conf_report NAME CONF LOG: the start logged no error, the options not honoured are in one
# warning line; prints both lists.
conf_report() {
    local name=$1 conf=$2 log=$3 lines named honoured
    lines=$(grep -c 'configuration options ignored' "$log")
    check "$name: one warning line names the options magnumd ignores ($lines found)" test "$lines" = 1
    check "$name: no ERROR logged at start" bash -c "! grep -E ' (ERROR|CRITICAL) ' '$log'"
    named=$(ignored_line "$log" | grep -o '\[[^]]*\] [A-Za-z_0-9-]*' | sort -u)
    honoured=$(comm -23 <(set_options "$conf") <(echo "$named"))
    echo "kolla: $name: ignored: $(ignored_line "$log" | sed 's/.*configuration options ignored: //')"
    echo "kolla: $name: honoured: $(echo "$honoured" | paste -sd, - | sed 's/,/, /g')"
}

# The schema, as kolla's bootstrap container makes it.
if (in_ns "$W/dbmanage-root" "$W/bin/magnum-db-manage" --config-file "$kolla_api_conf" upgrade) >"$W/dbmanage.log" 2>&1; then
    ok "kolla: magnum-db-manage --config-file magnum.conf upgrade"
else
    cat "$W/dbmanage-root/var/log/kolla/magnum/"*.log "$W/dbmanage.log" 2>/dev/null | tail -n 20
    bad "kolla: magnum-db-manage upgrade"
fi

say "starting magnum-api and magnum-conductor with kolla's files"
start conductor "$W/conductor.out" "$W/bin/magnum-conductor" --config-file "$kolla_conductor_conf"
start api "$W/api.out" "$W/bin/magnum-api" --config-file "$kolla_api_conf"
api_log=$W/api-root/var/log/kolla/magnum/magnum-api.log
conductor_log=$W/conductor-root/var/log/kolla/magnum/magnum-conductor.log

# kolla's health checks, as the container engine runs them: the command from the role's
# defaults, the scripts from the kolla package, retried (docker: start period, then retries).
healthcheck() { # healthcheck COMMAND_LINE: kolla's script named first, found in the package
    local script=${1%% *} args=${1#* }
    # shellcheck disable=SC2086
    bash "$healthchecks/$script" $args >/dev/null 2>&1
}
until_healthy() {
    for _ in $(seq 60); do
        healthcheck "$1" && return 0
        sleep 0.5
    done
    return 1
}
check "kolla healthcheck: $api_check" until_healthy "$api_check"
check "kolla healthcheck: $conductor_check" until_healthy "$conductor_check"
check "magnum-api still running" alive "$pid_api"
check "magnum-conductor still running" alive "$pid_conductor"
check "magnum-api: GET / answers 200" bash -c "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$api_port/ | grep -qx 200"
# Let the conductor's queues and the API's connection settle before reading the broker.
sleep 2
conf_report "kolla magnum-api" "$kolla_api_conf" "$api_log"
conf_report "kolla magnum-conductor" "$kolla_conductor_conf" "$conductor_log"

# The broker: magnumd's RPC queues are quorum queues, each connection is TLS.
rabbitctl list_queues name type --no-table-headers >"$W/queues" 2>&1
rabbitctl list_connections vhost ssl ssl_protocol --no-table-headers >"$W/connections" 2>&1
echo "kolla: queues: $(awk '{ print $1 "=" $2 }' "$W/queues" | sort | paste -sd' ' -)"
check "broker: queue magnum-conductor is quorum" grep -qxE 'magnum-conductor[[:space:]]+quorum' "$W/queues"
check "broker: the conductor's own queue magnum-conductor.<server> is quorum" \
    grep -qxE 'magnum-conductor\.[^[:space:]]+[[:space:]]+quorum' "$W/queues"
n_conn=$(grep -c . "$W/connections")
n_tls=$(grep -cE '^/[[:space:]]+true[[:space:]]+tlsv1\.[23]' "$W/connections")
check "broker: every connection is TLS ($n_tls of $n_conn)" test "$n_conn" -gt 0 -a "$n_tls" = "$n_conn"

# The checks can fail: with the processes stopped they do.
kill "$pid_api" "$pid_conductor" 2>/dev/null
for _ in $(seq 100); do alive "$pid_api" || alive "$pid_conductor" || break; sleep 0.1; done
unhealthy() { ! healthcheck "$1"; }
check "kolla healthcheck fails with magnum-api stopped" unhealthy "$api_check"
check "kolla healthcheck fails with magnum-conductor stopped" unhealthy "$conductor_check"

# ---------------------------------------------------------------------------------------------
# openstack-helm: the chart's conf.magnum rendered into ini (helm_conf.py says how), the
# chart's user and vhost made as its rabbit-init job makes them, the conductor started with
# the pod's second file (its host name), as the chart's statefulset starts it.
helm_port=$(free_port)
helm_password=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
sql "CREATE DATABASE ${db}_helm" || bad "create database ${db}_helm"
rabbitctl add_vhost magnum >/dev/null &&
    rabbitctl add_user magnum "$helm_password" >/dev/null &&
    rabbitctl set_permissions -p magnum magnum '.*' '.*' '.*' >/dev/null ||
    bad "helm: broker user and vhost magnum"
helm_render() {
    python3 "$here/helm_conf.py" --db-url "mysql+pymysql://magnum_test:magnum_test@127.0.0.1:3306/${db}_helm" \
        --transport-url "rabbit://magnum:$helm_password@127.0.0.1:$amqp_port/magnum" \
        --keystone-url "http://127.0.0.1:$keystone_port/v3" --api-port "$helm_port" \
        --memcached 127.0.0.1:11211 --ssl-dir "$W/tls" "$@"
}
# The chart mounts its policy.yaml (conf.policy, {} by default) at /etc/magnum.
for r in helm_api helm_conductor helm_plain; do
    mkdir -p "$W/$r-root/etc/magnum" && echo '{}' >"$W/$r-root/etc/magnum/policy.yaml"
done
helm_render >"$W/helm/magnum.conf" && chmod 600 "$W/helm/magnum.conf" &&
    ok "openstack-helm: conf.magnum rendered into magnum.conf" ||
    bad "openstack-helm: render conf.magnum"
printf '[DEFAULT]\nhost = magnum-conductor-0\n' >"$W/helm/pod-shared.conf"
helm_conf=$W/helm/magnum.conf
if (in_ns "$W/helm-dbmanage-root" "$W/bin/magnum-db-manage" --config-file "$helm_conf" upgrade) >"$W/helm-dbmanage.log" 2>&1; then
    ok "helm: magnum-db-manage --config-file magnum.conf upgrade"
else
    tail -n 20 "$W/helm-dbmanage.log"
    bad "helm: magnum-db-manage upgrade"
fi
# The chart's file has no [keystone_auth]: magnumd takes Magnum's service user from
# [keystone_authtoken] (Barbican needs one) and says so in one line.
start helm_conductor "$W/helm-conductor.log" "$W/bin/magnum-conductor" --config-file "$helm_conf" \
    --config-file "$W/helm/pod-shared.conf"
start helm_api "$W/helm-api.log" "$W/bin/magnum-api" --config-file "$helm_conf"
check "helm magnum-api: GET /healthcheck answers 200" until_healthy "healthcheck_curl http://127.0.0.1:$helm_port/healthcheck"
check "helm magnum-conductor: connected to the broker" until_healthy "healthcheck_port magnum-conductor $amqp_port"
check "helm magnum-api still running" alive "$pid_helm_api"
check "helm magnum-conductor still running" alive "$pid_helm_conductor"
check "helm: the service user comes from [keystone_authtoken], said once" \
    test "$(grep -c "using \[keystone_authtoken\]'s service user" "$W/helm-conductor.log")" = 1
sleep 2
conf_report "helm magnum-api" "$helm_conf" "$W/helm-api.log"
conf_report "helm magnum-conductor" "$helm_conf" "$W/helm-conductor.log"
rabbitctl list_queues -p magnum name type durable --no-table-headers >"$W/helm-queues" 2>&1
rabbitctl list_connections vhost ssl peer_cert_subject --no-table-headers >"$W/connections" 2>&1
echo "kolla: helm queues: $(awk '{ print $1 "=" $2 "/durable:" $3 }' "$W/helm-queues" | sort | paste -sd' ' -)"
# The chart spells the option rabbit_quorum_queues, which oslo does not know either: its
# queues are classic, and durable (amqp_durable_queues), as upstream's would be.
check "helm: queue magnum-conductor is classic and durable, as upstream's with this file" \
    grep -qxE 'magnum-conductor[[:space:]]+classic[[:space:]]+true' "$W/helm-queues"
n_conn=$(grep -c '^magnum[[:space:]]' "$W/connections")
n_tls=$(grep -cE '^magnum[[:space:]]+true[[:space:]]+CN=localhost' "$W/connections")
check "helm: every connection is TLS with a client certificate ($n_tls of $n_conn)" test "$n_conn" -gt 0 -a "$n_tls" = "$n_conn"

finish
