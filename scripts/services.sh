# Sourced by scripts/test: make sure the database servers the tests use are installed, running,
# and have a test account. Safe to run again; every step checks before it acts.

log() { printf '[services] %s\n' "$*" >&2; }

apt_install() {
    if [ -z "${APT_UPDATED:-}" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    for _ in $(seq 1 "$limit"); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 1
    done
    log "$what did not come up within ${limit}s"
    return 1
}

# The openssl CLI makes and verifies the client test's CSRs and kubeconfig certificates.
ensure_openssl() {
    if ! command -v openssl >/dev/null 2>&1; then
        log "installing openssl"
        apt_install openssl
    fi
}

# curl reads the Kubernetes API stand-in (test-support/kube) with its client certificate in
# the Cluster API driver's tests.
ensure_curl() {
    if ! command -v curl >/dev/null 2>&1; then
        log "installing curl"
        apt_install curl
    fi
}

# The real OpenStack services (test-support/openstack) live in venvs of Debian's python3 and
# build uWSGI (and two other source-only packages) once, with gcc and the Python headers.
ensure_python_build() {
    local missing=()
    [ -x /usr/bin/python3 ] || missing+=(python3)
    /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
    [ -e "/usr/include/python3.$(/usr/bin/python3 -c 'import sys; print(sys.version_info[1])' 2>/dev/null || echo 11)/Python.h" ] || missing+=(python3-dev)
    command -v gcc >/dev/null 2>&1 || missing+=(build-essential)
    command -v mysqldump >/dev/null 2>&1 || missing+=(mariadb-client)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        apt_install "${missing[@]}"
    fi
}

# Debian's Chromium, driven headless by the Horizon browser test (test-support/horizon).
ensure_chromium() {
    if [ ! -x /usr/bin/chromium ]; then
        log "installing chromium"
        apt_install chromium
    fi
}

# A real Prometheus scrapes magnumd's /metrics in a test (Debian's package; the test runs its
# own instance on a free port).
ensure_prometheus() {
    if [ ! -x /usr/bin/prometheus ]; then
        log "installing prometheus"
        apt_install prometheus
    fi
}

# HAProxy in front of the APIs in the cut-over rehearsal (test-support/cutover; it runs its
# own instance on free ports, never the packaged service).
ensure_haproxy() {
    if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
        log "installing haproxy"
        apt_install haproxy
    fi
}

# What test-support/kolla runs beside magnumd: kolla's health-check scripts call ss
# (iproute2), pgrep (procps) and curl; magnumd runs in a mount namespace (util-linux's
# unshare) so kolla's /var/log/kolla paths land in the harness's own folder.
ensure_kolla_tools() {
    local missing=()
    command -v ss >/dev/null 2>&1 || missing+=(iproute2)
    command -v pgrep >/dev/null 2>&1 || missing+=(procps)
    command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        apt_install "${missing[@]}"
    fi
}

# RabbitMQ for the oslo.messaging transport tests (guest/guest on 127.0.0.1:5672).
rabbitmq_port_open() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

# The running broker's node name. The CLI assumes rabbit@<hostname> unless rabbitmq-env.conf
# says otherwise, but a broker may run as e.g. rabbit@localhost: ask each likely name.
rabbitmq_node() {
    local base=${RABBITMQ_MNESIA_BASE:-/var/lib/rabbitmq/mnesia} f node seen=" "
    local candidates=(${RABBITMQ_NODENAME:+"$RABBITMQ_NODENAME"})
    for f in "$base"/*@*.pid "$base"/*@*; do
        [ -e "$f" ] || continue
        f=${f##*/}; f=${f%.pid}
        case $f in *-plugins-expand | *-feature_flags) continue ;; esac
        candidates+=("$f")
    done
    candidates+=(rabbit@localhost "rabbit@$(hostname -s 2>/dev/null)")
    for node in "${candidates[@]}"; do
        case $seen in *" $node "*) continue ;; esac
        seen+="$node "
        # timeout: an unresolvable host part makes the CLI hang for almost a minute.
        if timeout 20 rabbitmq-diagnostics -q -n "$node" ping >/dev/null 2>&1; then
            echo "$node"
            return 0
        fi
    done
    return 1
}

ensure_rabbitmq() {
    local node
    if ! command -v rabbitmq-server >/dev/null 2>&1; then
        log "installing RabbitMQ"
        apt_install rabbitmq-server
    fi
    if ! rabbitmq_port_open; then
        if node=$(rabbitmq_node); then
            # The node is up with its application stopped (e.g. a test's stop_app).
            log "starting RabbitMQ's application on $node"
            rabbitmqctl -n "$node" start_app >/dev/null 2>&1 || true
        else
            log "starting RabbitMQ"
            rabbitmq-server -detached >/dev/null 2>&1 || true
        fi
        wait_for 90 RabbitMQ rabbitmq_port_open || return 1
    fi
    if ! node=$(rabbitmq_node); then
        log "RabbitMQ listens on 5672 but no node name tried answers; set RABBITMQ_NODENAME"
        return 1
    fi
    # The tests' rabbitmqctl calls (stop_app, close_connection) read the node from here.
    export RABBITMQ_NODENAME=$node
}

ensure_mariadb() {
    if ! command -v mariadbd >/dev/null 2>&1; then
        log "installing MariaDB"
        apt_install mariadb-server mariadb-client
    fi
    if ! mariadb-admin ping >/dev/null 2>&1; then
        log "starting MariaDB"
        mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
        wait_for 60 MariaDB mariadb-admin ping
    fi
    # Over the local socket as the system's root, then a password account for TCP tests.
    mariadb -uroot <<'SQL'
CREATE USER IF NOT EXISTS 'magnum_test'@'localhost' IDENTIFIED BY 'magnum_test';
CREATE USER IF NOT EXISTS 'magnum_test'@'127.0.0.1' IDENTIFIED BY 'magnum_test';
GRANT ALL PRIVILEGES ON *.* TO 'magnum_test'@'localhost';
GRANT ALL PRIVILEGES ON *.* TO 'magnum_test'@'127.0.0.1';
-- The suites run side by side (each magnumd with its pool, the OpenStack services, the
-- fault suite's private server aside): Debian's 151 connections ran out in a CI run.
SET GLOBAL max_connections = GREATEST(@@GLOBAL.max_connections, 500);
SQL
}

ensure_postgres() {
    if ! command -v pg_ctlcluster >/dev/null 2>&1; then
        log "installing PostgreSQL"
        apt_install postgresql
    fi
    if ! pg_isready -h 127.0.0.1 -q; then
        log "starting PostgreSQL"
        pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start
        wait_for 60 PostgreSQL pg_isready -h 127.0.0.1 -q
    fi
    su postgres -c "psql -q -v ON_ERROR_STOP=1" <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'magnum_test') THEN
    CREATE ROLE magnum_test LOGIN CREATEDB PASSWORD 'magnum_test';
  END IF;
END $$;
SQL
}

# The benchmarks' helpers.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for_api PID PORT LOG [SECONDS]: until magnumd (PID) answers on PORT (default 10 s);
# prints LOG and fails if it exits first.
wait_for_api() {
    local tries=$(( ${4:-10} * 10 ))
    for _ in $(seq 1 "$tries"); do
        curl -s -o /dev/null "http://127.0.0.1:$2/" && return 0
        if ! kill -0 "$1" 2>/dev/null; then
            echo "magnumd exited before listening:" >&2
            cat "$3" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "magnumd did not listen on port $2 within ${4:-10}s" >&2
    return 1
}

# seed_templates URL [curl options...]: POSTs the benchmarks' 100 cluster templates to URL
# (.../v1/clustertemplates), with the caller's auth and version headers.
seed_templates() {
    local url=$1 i
    shift
    for i in $(seq -w 0 99); do
        curl -sf -o /dev/null -X POST "$url" "$@" -H 'Content-Type: application/json' \
            -d "{\"name\": \"bench-ct-$i\", \"coe\": \"kubernetes\", \"image_id\": \"fedora-coreos-40\", \"flavor_id\": \"m1.small\", \"master_flavor_id\": \"m1.medium\", \"dns_nameserver\": \"8.8.8.8\", \"keypair_id\": \"bench-key\", \"external_network_id\": \"public\", \"network_driver\": \"calico\", \"docker_volume_size\": 10, \"volume_driver\": \"cinder\", \"docker_storage_driver\": \"overlay2\", \"master_lb_enabled\": true, \"labels\": {\"kube_tag\": \"v1.30.4\", \"boot_volume_size\": \"20\", \"availability_zone\": \"nova\"}}"
    done
}

# One benchmark at a time on this machine: they share fixed database and account names,
# flip server-wide settings (userstat, the general log) and would skew each other's
# figures. A second run waits here for the first to end (the lock goes with the process).
bench_lock() {
    exec 9>"${TMPDIR:-/tmp}/magnum-rs-bench.lock"
    if ! flock -n 9; then
        log "another benchmark is running on this machine; waiting for it to end"
        flock 9
    fi
}
