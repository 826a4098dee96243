#!/usr/bin/env bash
# Starts a throwaway real Keystone on 127.0.0.1:<port> with its state in <workdir>, provisions
# the test personas and the container-infra catalog entry, and writes <workdir>/env.sh,
# <workdir>/clouds.yaml and <workdir>/keystone.pid. Stop it with stop.sh <workdir>.
#   usage: start.sh <workdir> <port> <magnum_url>     e.g. start.sh /tmp/ks 15000 http://127.0.0.1:9511
#   MAGNUM_TEST_VENV              venv made by setup-venv.sh (run here; quick when complete)
#   MAGNUM_TEST_KEYSTONE_TIMEOUT  seconds all of startup may take, venv excluded (120; ~15 s
#                                 is usual)
#   MAGNUM_TEST_KEYSTONE_DEBUG    true: debug logging in keystone.log (false)
#   KEYSTONE_TOKEN_EXPIRATION     seconds a token lives (Keystone's default, 3600)
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: $0 <workdir> <port> <magnum_url>" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
port=$2
magnum_url=${3%/}
venv=${MAGNUM_TEST_VENV:-/var/tmp/magnum-rs-venv}
limit=${MAGNUM_TEST_KEYSTONE_TIMEOUT:-120}
[[ $port =~ ^[0-9]+$ ]] || { echo "start.sh: port must be a number, got '$port'" >&2; exit 2; }

bash "$here/setup-venv.sh"
mkdir -p "$1"
workdir=$(cd "$1" && pwd)
py=$venv/bin/python
# KEYSTONE_TLS_CERT/KEYSTONE_TLS_KEY (PEM): serve HTTPS with them. KEYSTONE_TLS_CA (default:
# the certificate itself) is what the readiness check, provisioning and clouds.yaml trust.
tls_cert=${KEYSTONE_TLS_CERT:-}
tls_key=${KEYSTONE_TLS_KEY:-}
tls_ca=${KEYSTONE_TLS_CA:-$tls_cert}
if [ -n "$tls_cert" ]; then
    auth_url=https://127.0.0.1:$port/v3
    export REQUESTS_CA_BUNDLE=$tls_ca SSL_CERT_FILE=$tls_ca
else
    auth_url=http://127.0.0.1:$port/v3
fi
log=$workdir/keystone.log

fail() {
    echo "start.sh: $*" >&2
    for f in "$workdir/setup.log" "$workdir/gunicorn.log" "$log"; do
        [[ -s $f ]] && { echo "--- last lines of $f:" >&2; tail -n 30 "$f" >&2; }
    done
    exit 1
}

if [[ -f $workdir/keystone.pid ]] && kill -0 "$(cat "$workdir/keystone.pid")" 2>/dev/null; then
    echo "start.sh: a Keystone from $workdir is still running (pid $(cat "$workdir/keystone.pid")); run stop.sh $workdir first" >&2
    exit 1
fi
# Something else on the port would answer our readiness probe and fool the provisioning.
if "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null; then
    echo "start.sh: 127.0.0.1:$port is already in use" >&2
    exit 1
fi

# Each start is from a clean state, so a test never sees a previous run's users or tokens.
rm -rf "$workdir"/{keystone.conf,keystone.db,fernet-keys,credential-keys,keystone.log,setup.log,gunicorn.log,gunicorn.conf.py,env.sh,clouds.yaml,keystone.pid}
conf=$workdir/keystone.conf
cat >"$conf" <<EOF
[DEFAULT]
log_file = $log
use_stderr = false
debug = ${MAGNUM_TEST_KEYSTONE_DEBUG:-false}

[database]
connection = sqlite:///$workdir/keystone.db

[token]
provider = fernet
expiration = ${KEYSTONE_TOKEN_EXPIRATION:-3600}

[fernet_tokens]
key_repository = $workdir/fernet-keys

[fernet_receipts]
# Receipts (MFA) default to /etc/keystone; keep everything inside the workdir.
key_repository = $workdir/fernet-keys

[credential]
key_repository = $workdir/credential-keys

[cache]
# No memcache: an in-process cache. Without any cache each request runs ~300 SQL queries
# (0.5 s); with it ~20 ms. Correct only with one worker process (see gunicorn.conf.py).
enabled = true
backend = dogpile.cache.memory

[identity]
# bcrypt's minimum cost: tests authenticate often and the default (12) costs ~0.25 s each.
password_hash_rounds = 4
# bcrypt uses 72 bytes at most; the default (4096) logs a truncation warning on every login.
max_password_length = 72
EOF

# Eventlet (pulled in by oslo.service) warns on every import; that noise would bury real
# errors in the logs.
export PYTHONWARNINGS=ignore
# Every step gets only what is left of one overall deadline, so start.sh as a whole is bounded.
deadline=$((SECONDS + limit))
left() { echo $((deadline > SECONDS ? deadline - SECONDS : 1)); }
manage() {
    timeout "$(left)" "$venv/bin/keystone-manage" --config-file "$conf" "$@" >>"$workdir/setup.log" 2>&1 ||
        fail "keystone-manage $1 failed or startup took over ${limit}s"
}
# keystone-manage spends ~4 s importing Keystone, so the independent steps run side by side.
# Key files must belong to the user Keystone runs as: us.
manage db_sync &
jobs_=($!)
manage fernet_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)" &
jobs_+=($!)
manage credential_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)" &
jobs_+=($!)
for j in "${jobs_[@]}"; do wait "$j" || { kill "${jobs_[@]}" 2>/dev/null; exit 1; }; done

# Keystone 30 ships no keystone-wsgi-public script: the app is keystone.wsgi.api:application,
# which reads $OS_KEYSTONE_CONFIG_DIR/keystone.conf. It also parses sys.argv with oslo.config
# and dies on gunicorn's options, so every setting lives in ./gunicorn.conf.py (read by
# default from the cwd) and gunicorn runs with no arguments.
cat >"$workdir/gunicorn.conf.py" <<EOF
wsgi_app = "keystone.wsgi.api:application"
bind = ["127.0.0.1:$port"]  # loopback only
# One process: Keystone invalidates its in-process cache only in the process that made a
# change, so a second worker could serve stale role assignments.
workers = 1
threads = 8
timeout = 60
graceful_timeout = 5
# gunicorn 27 opens a control socket in \$HOME by default; two test Keystones would fight
# over it.
control_socket_disable = True
raw_env = ["OS_KEYSTONE_CONFIG_DIR=$workdir"]
EOF
if [ -n "$tls_cert" ]; then
    printf 'certfile = "%s"\nkeyfile = "%s"\n' "$tls_cert" "$tls_key" >>"$workdir/gunicorn.conf.py"
fi
# Output goes to a file so a caller reading our stdout through a pipe is not held open by the
# server.
(cd "$workdir" && exec "$venv/bin/gunicorn") </dev/null >>"$workdir/gunicorn.log" 2>&1 &
pid=$!
echo "$pid" >"$workdir/keystone.pid"
# From here on a failure must not leave the server behind; stop.sh also waits until it is gone,
# so the port is free again when we exit.
trap '[[ -n ${started:-} ]] || bash "$here/stop.sh" "$workdir"' EXIT

# Bootstrap while the server imports Keystone (~5 s): nothing reaches the database until the
# readiness probe below, which waits for bootstrap.
manage bootstrap --bootstrap-username admin --bootstrap-password secret-admin \
    --bootstrap-project-name admin --bootstrap-role-name admin \
    --bootstrap-service-name keystone --bootstrap-region-id RegionOne \
    --bootstrap-public-url "$auth_url" --bootstrap-internal-url "$auth_url" \
    --bootstrap-admin-url "$auth_url"

until "$py" -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)' "$auth_url" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail "Keystone (gunicorn pid $pid) exited during startup"
    ((SECONDS < deadline)) || fail "Keystone did not answer on $auth_url within ${limit}s of starting"
    sleep 0.3
done

timeout "$(left)" "$py" "$here/provision.py" "$workdir" "$auth_url" "$magnum_url" >>"$workdir/setup.log" 2>&1 ||
    fail "provisioning failed or startup took over ${limit}s"
printf 'export %s=%q\n' MAGNUM_TEST_KEYSTONE_WORKDIR "$workdir" MAGNUM_TEST_KEYSTONE_PID "$pid" \
    MAGNUM_TEST_KEYSTONE_LOG "$log" MAGNUM_TEST_VENV "$venv" \
    MAGNUM_TEST_OPENSTACK "$venv/bin/openstack" >>"$workdir/env.sh"
started=1
echo "start.sh: Keystone on $auth_url (pid $pid); source $workdir/env.sh" >&2
