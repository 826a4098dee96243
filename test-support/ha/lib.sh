#!/usr/bin/env bash
# The three-controller topology's building blocks, for run.sh (which sources this file) and
# for ha.py (which runs it as `lib.sh WORKDIR COMMAND ARGS...` to kill and restart things).
#
# Every process is started by `spawn` in a session of its own (setsid), its id (= its process
# group) in WORKDIR/pids/NAME.pid, so `stop NAME` ends it with everything it started (an SST
# script, rsync, Erlang's port programs) and `stop_all` ends exactly what this harness
# started. All state lives under WORKDIR; everything listens on 127.0.0.1 only.

# Ports: one block of PORT_SPAN consecutive free ports from a random base (run.sh picks it,
# WORKDIR/ports.env keeps it). The layout inside the block:
#   +0..2   Galera nodes' SQL ports          +3..5   their gcomm (group) ports
#   +6..8   their IST receive ports          +9..11  their SST (rsync) receive ports
#   +12..14 clustercheck (HTTP) per node     +15     HAProxy: the database front end
#   +16     HAProxy: the Magnum API front    +17     Keystone
#   +18..20 RabbitMQ nodes' AMQPS ports      +21..23 their Erlang distribution ports
#   +24..25 the two magnumd api processes
PORT_SPAN=26

ha_log() { printf 'ha: %s\n' "$*" >&2; }

# Loads WORKDIR's ports and names (set by ha_layout).
ha_env() {
    W=$1
    # shellcheck disable=SC1091
    . "$W/ports.env"
}

# Picks a free block of ports and writes WORKDIR/ports.env. 10000-19999 stays clear of the
# kernel's ephemeral range (32768-60999), where an outgoing connection may take a port
# between its pick and its use, of the OpenStack services' 20000-32767 and of the ports the
# machine's own services use.
ha_layout() {
    local w=$1 base tries=0
    while :; do
        base=$((10000 + (RANDOM % 99) * 100))
        if python3 - "$base" "$PORT_SPAN" <<'EOF'; then break; fi
import socket, sys
base, span = int(sys.argv[1]), int(sys.argv[2])
for p in range(base, base + span):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
EOF
        tries=$((tries + 1))
        ((tries < 20)) || { ha_log "no free block of $PORT_SPAN ports found"; return 1; }
    done
    # A tag in every name this run makes: node names, cluster names.
    local tag
    tag=$(basename "$w" | tr -cd 'a-zA-Z0-9' | tr 'A-Z' 'a-z' | tail -c 7)
    cat >"$w/ports.env" <<EOF
W=$w
TAG=$tag
BASE=$base
DB_PORT1=$base
DB_PORT2=$((base + 1))
DB_PORT3=$((base + 2))
GCOMM_PORT1=$((base + 3))
GCOMM_PORT2=$((base + 4))
GCOMM_PORT3=$((base + 5))
IST_PORT1=$((base + 6))
IST_PORT2=$((base + 7))
IST_PORT3=$((base + 8))
SST_PORT1=$((base + 9))
SST_PORT2=$((base + 10))
SST_PORT3=$((base + 11))
CHECK_PORT1=$((base + 12))
CHECK_PORT2=$((base + 13))
CHECK_PORT3=$((base + 14))
HAPROXY_DB_PORT=$((base + 15))
HAPROXY_API_PORT=$((base + 16))
KEYSTONE_PORT=$((base + 17))
AMQP_PORT1=$((base + 18))
AMQP_PORT2=$((base + 19))
AMQP_PORT3=$((base + 20))
DIST_PORT1=$((base + 21))
DIST_PORT2=$((base + 22))
DIST_PORT3=$((base + 23))
API_PORT1=$((base + 24))
API_PORT2=$((base + 25))
RABBIT_NODE1=ha${tag}1@localhost
RABBIT_NODE2=ha${tag}2@localhost
RABBIT_NODE3=ha${tag}3@localhost
EOF
    mkdir -p "$w/pids" "$w/logs"
}

# ---------------------------------------------------------------------------------------------
# Processes

# spawn NAME LOG CMD...: CMD in a new session, in the background; its pid in pids/NAME.pid.
spawn() {
    local name=$1 log=$2
    shift 2
    setsid "$@" </dev/null >>"$log" 2>&1 &
    echo $! >"$W/pids/$name.pid"
    # Its end (a SIGKILL of the fault test) is no news for this shell to print.
    disown $!
}

pid_of() { cat "$W/pids/$1.pid" 2>/dev/null; }

alive() {
    local pid
    pid=$(pid_of "$1") || return 1
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

# stop NAME [SIGNAL [GRACE]]: signals NAME's process group (default TERM; KILL after GRACE
# seconds, default 15) and waits until every process of the group is gone.
stop() {
    local name=$1 sig=${2:-TERM} grace=${3:-15} pid deadline
    pid=$(pid_of "$name") || return 0
    [[ -n $pid ]] || return 0
    kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null
    deadline=$((SECONDS + grace))
    while pgrep -g "$pid" >/dev/null 2>&1 || kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            if [[ $sig == KILL ]]; then
                ha_log "$name (process group $pid) is still there after SIGKILL"
                return 1
            fi
            ha_log "$name did not stop within $grace s of SIG$sig; killing it"
            kill -KILL -- "-$pid" 2>/dev/null
            sig=KILL
            deadline=$((SECONDS + 5))
        fi
        sleep 0.1
    done
    rm -f "$W/pids/$name.pid"
}

# Every process this harness started, the magnumd processes first (they hold connections to
# the rest), then HAProxy, the brokers and the databases, in parallel within each tier.
stop_all() {
    local tier name f
    for tier in 'api-* conductor-* burst* listener*' 'haproxy* clustercheck* keystone*' 'rabbit*' 'galera*' '*'; do
        for name in $tier; do
            for f in "$W"/pids/$name.pid; do
                [[ -f $f ]] || continue
                stop "$(basename "$f" .pid)" TERM 5 &
            done
        done
        wait
    done
}

# wait_until SECONDS WHAT CMD...: runs CMD every 0.2 s until it succeeds; fails after SECONDS.
wait_until() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            ha_log "timed out after ${limit}s waiting for $what"
            return 1
        fi
        sleep 0.2
    done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# TLS: a CA and one server certificate for localhost/127.0.0.1, made at every start.

make_certs() {
    local d=$W/tls
    mkdir -p "$d"
    (
        cd "$d" || exit 1
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=magnum-ha-test-ca" \
            -keyout ca.key -out ca.pem -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null &&
            openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key \
                -out server.csr 2>/dev/null &&
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >server.ext &&
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                -extfile server.ext -out server.pem 2>/dev/null
    ) || { ha_log "openssl failed"; return 1; }
    chmod 600 "$d"/*.key
}

# ---------------------------------------------------------------------------------------------
# Galera: three mariadbd processes from the Debian packages, each with its data directory,
# socket and ports. SST by rsync (the packages' wsrep_sst_rsync), IST for a node that comes
# back with its data.

galera_dir() { echo "$W/galera/n$1"; }
galera_sql() { local n=$1; shift; mariadb --no-defaults -S "$(galera_dir "$n")/mysqld.sock" -uroot -N -B "$@"; }

galera_conf() {
    local n=$1 d port gcomm ist sst
    d=$(galera_dir "$n")
    mkdir -p "$d/data" "$d/tmp"
    eval "port=\$DB_PORT$n gcomm=\$GCOMM_PORT$n ist=\$IST_PORT$n sst=\$SST_PORT$n"
    cat >"$d/my.cnf" <<EOF
[mariadbd]
user = mysql
datadir = $d/data
tmpdir = $d/tmp
socket = $d/mysqld.sock
port = $port
bind-address = 127.0.0.1
pid-file = $d/mariadbd.pid
log-error = $d/error.log
skip-name-resolve
performance_schema = OFF
max_connections = 600
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
# What Galera needs of InnoDB and the binlog format.
default-storage-engine = InnoDB
binlog_format = ROW
innodb_autoinc_lock_mode = 2
innodb_buffer_pool_size = 48M
innodb_log_file_size = 32M
innodb_flush_log_at_trx_commit = 2
wsrep_on = ON
wsrep_provider = /usr/lib/galera/libgalera_smm.so
wsrep_cluster_name = magnum_ha_$TAG
wsrep_cluster_address = gcomm://127.0.0.1:$GCOMM_PORT1,127.0.0.1:$GCOMM_PORT2,127.0.0.1:$GCOMM_PORT3
wsrep_node_name = galera$n
wsrep_node_address = 127.0.0.1
wsrep_provider_options = "gmcast.listen_addr=tcp://127.0.0.1:$gcomm;ist.recv_addr=127.0.0.1:$ist;gcache.size=64M"
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:$sst
wsrep_slave_threads = 2
EOF
    # A rejoining node 1 takes its state (IST, or SST if it must) from galera3, else any node:
    # an rsync SST blocks its donor's writes, and galera2 is the one serving while 1 is away.
    [[ $n == 1 ]] && echo "wsrep_sst_donor = galera3," >>"$d/my.cnf"
    # HA_SYNC_WAIT=N: Galera's causality checks for every session (wsrep_sync_wait), what
    # oslo.db's [database] mysql_wsrep_sync_wait sets per connection.
    if [[ -n ${HA_SYNC_WAIT:-} ]]; then
        echo "wsrep_sync_wait = $HA_SYNC_WAIT" >>"$d/my.cnf"
    fi
}

# galera_start N [bootstrap]: starts node N (bootstrap: as a new cluster). A node killed
# earlier first recovers its position from InnoDB (what the packages' galera_recovery does
# under systemd), so it rejoins by IST rather than a full SST.
galera_start() {
    local n=$1 mode=${2:-} d extra=()
    d=$(galera_dir "$n")
    if [[ $mode == bootstrap ]]; then
        extra+=(--wsrep-new-cluster)
    elif [[ -f $d/data/grastate.dat ]] && grep -q '^seqno: *-1' "$d/data/grastate.dat"; then
        local pos
        rm -f "$d/recover.log"
        mariadbd --defaults-file="$d/my.cnf" --wsrep-recover --log-error="$d/recover.log" >/dev/null 2>&1
        pos=$(sed -n 's/.*WSREP: Recovered position: *\([^ ]*\).*/\1/p' "$d/recover.log" | tail -n1)
        if [[ -n $pos ]]; then
            extra+=("--wsrep-start-position=$pos")
        else
            ha_log "galera node $n: no position recovered (a full SST follows): $(tail -n 3 "$d/recover.log" 2>/dev/null)"
        fi
    fi
    spawn "galera$n" "$d/stdout.log" mariadbd --defaults-file="$d/my.cnf" "${extra[@]}"
}

galera_size_below() {
    local size
    size=$(galera_sql "$1" -e "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'" 2>/dev/null | cut -f2)
    [[ -n $size ]] && ((size < $2))
}

galera_synced() {
    [[ $(galera_sql "$1" -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2) == Synced ]]
}

# galera_join N: starts node N and waits (90 s at most) until it is Synced. galera-4 26.4
# sometimes aborts a node at once ("Failed to set thread schedparams ... No such process",
# a race in its gcomm thread start); such a node is started again, twice at most.
galera_join() {
    local n=$1 try deadline m d state
    d=$(galera_dir "$n")
    # Rejoining: first until the others have evicted the killed incarnation (evs timeouts),
    # so the new one does not join a view that still lists the old one.
    for m in 1 2 3; do
        if [[ $m != "$n" ]] && alive "galera$m"; then
            wait_until 30 "galera node $m to count the cluster without node $n" galera_size_below "$m" 3
            break
        fi
    done
    for try in 1 2 3; do
        galera_start "$n"
        # IST takes seconds; an SST (when IST cannot serve) on a loaded 2-core machine longer.
        deadline=$((SECONDS + 120))
        while ((SECONDS < deadline)); do
            galera_synced "$n" && return 0
            alive "galera$n" || break
            sleep 0.3
        done
        if alive "galera$n"; then
            # Stuck joining: killed and started again, as an operator would (the next start
            # recovers its position again).
            state=$(galera_sql "$n" -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2)
            ha_log "galera node $n not Synced within 120 s (try $try, state '${state:-no answer}'); its log ends:"
            tail -n 30 "$d/error.log" >&2
            stop "galera$n" KILL 5
        else
            ha_log "galera node $n exited while starting (try $try): $(grep -m1 ERROR "$d/error.log")"
            stop "galera$n" KILL 5
            # A SIGKILL can leave the transaction coordinator log unreadable, and then every
            # start stops at it; it holds nothing Galera's recovery needs.
            if grep -E "ERROR" "$d/error.log" | grep -qE "tc\.log|tc log|Bad magic header"; then
                ha_log "galera node $n: moving its tc.log aside"
                mv "$d/data/tc.log" "$d/data/tc.log.bad.$try" 2>/dev/null
            fi
        fi
        mv "$d/error.log" "$d/error.log.$try" 2>/dev/null
    done
    return 1
}

# Node 1 from an empty data directory as a new cluster, the magnum database and user made
# there, then nodes 2 and 3 join it (each by SST from a synced node).
galera_up() {
    local n
    for n in 1 2 3; do galera_conf "$n"; done
    # mariadbd runs as the packages' mysql user, as in production: the rsync SST daemon it
    # starts only works so. It must reach its directories through WORKDIR.
    chmod 755 "$W"
    chown -R mysql:mysql "$W/galera"
    mariadb-install-db --no-defaults --datadir="$(galera_dir 1)/data" --user=mysql \
        --auth-root-authentication-method=socket --skip-test-db \
        >"$(galera_dir 1)/install.log" 2>&1 || { ha_log "mariadb-install-db failed"; cat "$(galera_dir 1)/install.log" >&2; return 1; }
    galera_start 1 bootstrap
    wait_until 60 "galera node 1 to bootstrap" galera_synced 1 || { tail -n 30 "$(galera_dir 1)/error.log" >&2; return 1; }
    galera_sql 1 -e "CREATE DATABASE magnum CHARACTER SET utf8mb4;
        CREATE USER 'magnum'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
        GRANT ALL PRIVILEGES ON magnum.* TO 'magnum'@'127.0.0.1';" || return 1
    galera_join 2 || return 1
    galera_join 3 || return 1
    [[ $(galera_sql 1 -e "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'" | cut -f2) == 3 ]] ||
        { ha_log "galera cluster size is not 3"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# HAProxy: the database the way kolla-ansible fronts Galera (one active server, the others
# `backup`, an HTTP check of each node's Galera state), and the two API processes behind one
# front end (round robin, HTTP check).

haproxy_up() {
    local d=$W/haproxy failback=
    mkdir -p "$d"
    # HA_FAILBACK_CLOSE=1: when galera1 is back, close the sessions still open on the backup,
    # so no client keeps writing to one node while its new connections go to another.
    [[ ${HA_FAILBACK_CLOSE:-0} == 1 ]] && failback=" on-marked-up shutdown-backup-sessions"
    cat >"$d/haproxy.cfg" <<EOF
global
    maxconn 4000
    stats socket $d/admin.sock mode 600 level admin
    log stdout format raw local0 notice

defaults
    log global
    retries 3
    option redispatch
    timeout connect 2s
    timeout check 2s
    timeout client 60s
    timeout server 60s

listen mariadb
    bind 127.0.0.1:$HAPROXY_DB_PORT
    mode tcp
    option clitcpka
    timeout client 3600s
    option srvtcpka
    timeout server 3600s
    option httpchk
    server galera1 127.0.0.1:$DB_PORT1 check port $CHECK_PORT1 inter 2000 rise 2 fall 5$failback
    server galera2 127.0.0.1:$DB_PORT2 check port $CHECK_PORT2 inter 2000 rise 2 fall 5 backup
    server galera3 127.0.0.1:$DB_PORT3 check port $CHECK_PORT3 inter 2000 rise 2 fall 5 backup

listen magnum_api
    bind 127.0.0.1:$HAPROXY_API_PORT
    mode http
    balance roundrobin
    option forwardfor
    option httpchk GET /
    http-check expect status 200
    server api1 127.0.0.1:$API_PORT1 check inter 2000 rise 2 fall 5
    server api2 127.0.0.1:$API_PORT2 check inter 2000 rise 2 fall 5
EOF
    haproxy -c -q -f "$d/haproxy.cfg" || { ha_log "haproxy.cfg does not validate"; return 1; }
    spawn haproxy "$d/haproxy.log" haproxy -db -f "$d/haproxy.cfg"
    wait_until 10 "haproxy" port_open "$HAPROXY_DB_PORT"
}

# haproxy_cmd COMMAND: a line to HAProxy's admin socket, its answer on stdout.
haproxy_cmd() {
    python3 - "$W/haproxy/admin.sock" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
sys.stdout.write(out.decode())
EOF
}

# The clustercheck responders (one Python process, one port per Galera node).
clustercheck_up() {
    spawn clustercheck "$W/logs/clustercheck.log" python3 "$HA_HERE/clustercheck.py" \
        "$CHECK_PORT1=$(galera_dir 1)/mysqld.sock" "$CHECK_PORT2=$(galera_dir 2)/mysqld.sock" \
        "$CHECK_PORT3=$(galera_dir 3)/mysqld.sock"
    wait_until 10 "clustercheck" port_open "$CHECK_PORT3"
}

# ---------------------------------------------------------------------------------------------
# RabbitMQ: three nodes of the Debian package's broker, run from its scripts directly with
# their own node names, ports, data, logs and Erlang cookie (in their own HOME), never the
# machine's rabbit node, whose cookie, data and config stay untouched.

RABBIT_BIN=/usr/lib/rabbitmq/bin

rabbit_dir() { echo "$W/rabbit/n$1"; }

rabbit_env() {
    local n=$1 d dist node
    d=$(rabbit_dir "$n")
    eval "dist=\$DIST_PORT$n node=\$RABBIT_NODE$n"
    # Nothing of the machine's broker settings (scripts/services.sh exports its node name).
    local v
    for v in $(compgen -e | grep -E '^(RABBITMQ_|ERL_)'); do unset "$v"; done
    export HOME=$W/rabbit/home
    export RABBITMQ_NODENAME=$node RABBITMQ_USE_LONGNAME=false
    export RABBITMQ_CONF_ENV_FILE=$W/rabbit/rabbitmq-env.conf
    export RABBITMQ_CONFIG_FILE=$d/rabbitmq.conf
    export RABBITMQ_ADVANCED_CONFIG_FILE=$d/advanced.config
    export RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_LOG_BASE=$d/log
    export RABBITMQ_PID_FILE=$d/rabbit.pid
    export RABBITMQ_ENABLED_PLUGINS_FILE=$W/rabbit/enabled_plugins
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_DIST_PORT=$dist
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

# rabbitctl N ARGS...: rabbitmqctl against node N with this harness's cookie.
rabbitctl() {
    local n=$1
    shift
    (rabbit_env "$n" && "$RABBIT_BIN/rabbitmqctl" -q -n "$RABBITMQ_NODENAME" "$@")
}

rabbit_conf() {
    local n=$1 d port
    d=$(rabbit_dir "$n")
    eval "port=\$AMQP_PORT$n"
    mkdir -p "$d/mnesia" "$d/log"
    cat >"$d/rabbitmq.conf" <<EOF
listeners.tcp = none
listeners.ssl.default = 127.0.0.1:$port
ssl_options.cacertfile = $W/tls/ca.pem
ssl_options.certfile = $W/tls/server.pem
ssl_options.keyfile = $W/tls/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
default_user = magnum
default_pass = $RABBIT_PASSWORD
default_vhost = /
loopback_users = none
cluster_partition_handling = pause_minority
cluster_formation.peer_discovery_backend = classic_config
cluster_formation.classic_config.nodes.1 = $RABBIT_NODE1
cluster_formation.classic_config.nodes.2 = $RABBIT_NODE2
cluster_formation.classic_config.nodes.3 = $RABBIT_NODE3
log.console = false
log.file.level = info
disk_free_limit.absolute = 50MB
EOF
}

rabbit_start() {
    local n=$1
    (rabbit_env "$n" && spawn "rabbit$n" "$(rabbit_dir "$n")/stdout.log" "$RABBIT_BIN/rabbitmq-server")
}

rabbit_running() { rabbitctl "$1" await_startup --timeout 1; }

rabbit_up() {
    local n
    mkdir -p "$W/rabbit/home"
    # The cookie is this run's own: the machine's node never accepts these nodes' CLI calls.
    head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$W/rabbit/home/.erlang.cookie"
    chmod 400 "$W/rabbit/home/.erlang.cookie"
    : >"$W/rabbit/rabbitmq-env.conf"
    echo '[].' >"$W/rabbit/enabled_plugins"
    for n in 1 2 3; do rabbit_conf "$n"; done
    # Node 1 first, so 2 and 3 find it and join it as they boot.
    rabbit_start 1
    wait_until 90 "rabbit node 1" rabbit_running 1 || { tail -n 30 "$(rabbit_dir 1)"/log/*.log >&2; return 1; }
    rabbit_start 2
    rabbit_start 3
    wait_until 90 "rabbit node 2" rabbit_running 2 || { tail -n 30 "$(rabbit_dir 2)"/log/*.log >&2; return 1; }
    wait_until 90 "rabbit node 3" rabbit_running 3 || { tail -n 30 "$(rabbit_dir 3)"/log/*.log >&2; return 1; }
    rabbitctl 1 await_online_nodes 3 --timeout 30 >/dev/null || { ha_log "rabbit cluster has not 3 nodes"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# magnumd

# magnumd_start ROLE NAME: `magnumd ROLE` with the shared magnum.conf and NAME's own.
magnumd_start() {
    local role=$1 name=$2
    spawn "$name" "$W/logs/$name.log" "$HA_MAGNUMD" --config-file "$W/magnum/magnum.conf" \
        --config-file "$W/magnum/$name.conf" "$role"
}

# When run as a program: lib.sh WORKDIR COMMAND ARGS...
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -uo pipefail
    HA_HERE=$(cd "$(dirname "$0")" && pwd)
    ha_env "$1"
    shift
    # shellcheck disable=SC1091
    [[ -f $W/secrets.env ]] && . "$W/secrets.env"
    "$@"
fi
