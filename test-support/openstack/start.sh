#!/usr/bin/env bash
# Starts the seven real OpenStack API services (Barbican, Glance, Nova, Neutron, Cinder,
# Octavia, Manila; API processes only) on free loopback ports next to a running test Keystone,
# registers them in its catalogue in one region, seeds test data, and writes
# <workdir>/env.sh. Stop them with stop.sh <workdir>; stop/start one with ctl.sh.
#   usage: start.sh <workdir> <keystone_env.sh> [region]     (region: RealOne)
#   <keystone_env.sh>        the env.sh of test-support/keystone/start.sh (that Keystone must run)
#   MAGNUM_TEST_OS_ROOT      where setup.sh keeps the venvs (run here; quick when complete)
#   MAGNUM_TEST_OS_TIMEOUT   seconds all of startup may take, installs excluded (300)
# Every start begins from empty databases and an empty <workdir>. Two runs may share a
# machine: each gets its own ports and its own set of databases.
# On failure: exit 1 with the tails of the failing service's logs, nothing left running.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 <workdir> <keystone_env.sh> [region]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=${MAGNUM_TEST_OS_ROOT:-/var/tmp/magnum-rs-openstack}
region=${3:-RealOne}
limit=${MAGNUM_TEST_OS_TIMEOUT:-300}
[[ -f $2 ]] || { echo "start.sh: no Keystone env file $2" >&2; exit 2; }
ksenv=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
[[ $region =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "start.sh: region '$region' must be [A-Za-z0-9_.-]+" >&2; exit 2; }
export MAGNUM_TEST_OS_ROOT=$root

bash "$here/setup.sh"
mkdir -p "$1"
workdir=$(cd "$1" && pwd)
# env.sh single-quotes its values.
[[ $workdir != *"'"* && $workdir =~ ^[^[:space:]]+$ ]] || { echo "start.sh: workdir path must have no quote or space" >&2; exit 2; }
t_start=$SECONDS
deadline=$((SECONDS + limit))
left() { echo $((deadline > SECONDS ? deadline - SECONDS : 1)); }

# --- the Keystone: read its env.sh in a subshell, so none of it reaches the services
ks_vars=(MAGNUM_TEST_AUTH_URL MAGNUM_TEST_SERVICE_USER MAGNUM_TEST_SERVICE_PASSWORD
    MAGNUM_TEST_SERVICE_PROJECT MAGNUM_TEST_ADMIN_PASSWORD MAGNUM_TEST_DEMO_MEMBER_PASSWORD
    MAGNUM_TEST_VENV OS_CLIENT_CONFIG_FILE)
eval "$(
    set +u
    . "$ksenv"
    for v in "${ks_vars[@]}"; do printf 'ks_%s=%q\n' "$v" "${!v:-}"; done
)"
for v in "${ks_vars[@]}"; do
    n=ks_$v
    [[ $v == OS_CLIENT_CONFIG_FILE ]] && continue
    [[ -n ${!n} ]] || { echo "start.sh: $ksenv sets no $v" >&2; exit 2; }
done
auth_url=${ks_MAGNUM_TEST_AUTH_URL%/}
kspy=$ks_MAGNUM_TEST_VENV/bin/python
[[ -x $kspy ]] || { echo "start.sh: the Keystone venv's python $kspy is missing" >&2; exit 2; }
# keystonemiddleware and the seeding trust this CA when the Keystone serves HTTPS.
cafile=${KEYSTONE_TLS_CA:-${KEYSTONE_TLS_CERT:-}}
[[ -z $cafile ]] || export REQUESTS_CA_BUNDLE=$cafile SSL_CERT_FILE=$cafile
"$kspy" -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=5)' "$auth_url" 2>/dev/null ||
    { echo "start.sh: the Keystone at $auth_url does not answer (start it with test-support/keystone/start.sh)" >&2; exit 1; }

for s in "${OS_SERVICES[@]}"; do
    if p=$(os_pid "$workdir" "$s"); then
        echo "start.sh: $s from $workdir is still running (pid $p); run stop.sh $workdir first" >&2
        exit 1
    fi
done

# --- a clean workdir
rm -rf "${OS_SERVICES[@]/#/$workdir/}" "$workdir"/{log,run,ports,env.sh,clouds.yaml,demo-key,demo-key.pub}
mkdir -p "$workdir/log" "$workdir/run"

# --- a database slot and ports, chosen under one lock so concurrent starts differ.
# Slot 0 uses the databases realos_<db>, slot N realos_s<N>_<db>. A slot is taken while the
# start.sh that claimed it runs or any service of its workdir does.
mkdir -p "$root/slots"
exec 8>"$root/slots/.lock"
flock 8
slot= taken_ports=()
for n in $(seq 0 31); do
    f=$root/slots/$n
    if [[ -f $f ]]; then
        read -r owner owner_pid <"$f" || true
        if [[ $owner != "$workdir" ]]; then
            busy=
            kill -0 "${owner_pid:-0}" 2>/dev/null && busy=1
            for s in "${OS_SERVICES[@]}"; do os_pid "$owner" "$s" >/dev/null && busy=1; done
            if [[ -n $busy ]]; then
                [[ -f $owner/ports ]] && taken_ports+=($(awk '{ print $2 }' "$owner/ports"))
                continue
            fi
        fi
    fi
    [[ -z $slot ]] && slot=$n
done
[[ -n $slot ]] || { echo "start.sh: all 32 database slots are in use (stop some runs)" >&2; exit 1; }
echo "$workdir $$" >"$root/slots/$slot"
if ((slot == 0)); then prefix=realos_; else prefix=realos_s${slot}_; fi
# Ports from 20000-32767: below Linux's ephemeral range, so no outgoing connection takes one
# while a service is stopped by ctl.sh. Free now, and not used by another live run.
OS_SERVICE_NAMES="${OS_SERVICES[*]}" /usr/bin/python3 - "${taken_ports[@]}" >"$workdir/ports" <<'EOF'
import os, random, socket, sys
services = os.environ["OS_SERVICE_NAMES"].split()
taken = set(int(p) for p in sys.argv[1:])
picked = []
for port in random.sample(range(20000, 32768), 400):
    if port in taken:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    picked.append(port)
    if len(picked) == len(services):
        break
for svc, port in zip(services, picked):
    print(svc, port)
EOF
exec 8>&-
declare -A port
for s in "${OS_SERVICES[@]}"; do port[$s]=$(os_port "$workdir" "$s"); done

fail() {
    echo "start.sh: $1" >&2
    os_tails "$workdir" "${@:2}"
    exit 1
}
kill_tree() { # a pid and all its descendants
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
    kill -TERM "$1" 2>/dev/null || true
}
# From here on a failure must not leave anything behind.
bg_jobs=()
cleanup() {
    local rc=$?
    [[ -n ${started:-} ]] && return
    for j in "${bg_jobs[@]}"; do kill_tree "$j"; done
    wait 2>/dev/null || true
    bash "$here/stop.sh" "$workdir" || true
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- configuration
db() { echo "mysql+pymysql://realos:realos@127.0.0.1/$prefix$1?charset=utf8mb4"; }
rabbit=rabbit://guest:guest@127.0.0.1:5672/realos
url() { echo "http://127.0.0.1:${port[$1]}"; }
keystone_section() { # [keystone_authtoken] (or $1) with the Keystone's service user
    cat <<EOF
[${1:-keystone_authtoken}]
www_authenticate_uri = $auth_url
auth_url = $auth_url
auth_type = password
username = $ks_MAGNUM_TEST_SERVICE_USER
password = $ks_MAGNUM_TEST_SERVICE_PASSWORD
user_domain_name = Default
project_name = $ks_MAGNUM_TEST_SERVICE_PROJECT
project_domain_name = Default
EOF
    [[ -z $cafile ]] || echo "cafile = $cafile"
    if [[ -z ${1:-} ]]; then
        # The token cache stays in the process: there is no memcached.
        printf 'memcached_servers =\nservice_token_roles_required = true\n'
    fi
    echo
}
common_tail() { # shared by every service config
    keystone_section
    cat <<EOF
[oslo_policy]
enforce_scope = false
enforce_new_defaults = true

[oslo_messaging_notifications]
driver = noop
EOF
}
uwsgi_ini() { # uwsgi_ini SVC "module = ..." EXTRA_LINES...
    local s=$1 app=$2
    shift 2
    {
        echo "[uwsgi]"
        echo "http-socket = 127.0.0.1:${port[$s]}"
        echo "$app"
        echo "home = $root/$s/venv"
        printf '%s\n' "$@"
        # One worker, one thread: what the research measured. lazy-apps: the app is imported
        # in the worker, not in a master that forks afterwards. need-app: a failing import
        # ends uWSGI instead of leaving it answering 500.
        cat <<EOF
env = PYTHONWARNINGS=ignore
master = true
processes = 1
threads = 1
enable-threads = true
lazy-apps = true
need-app = true
single-interpreter = true
die-on-term = true
no-orphans = true
hook-master-start = unix_signal:15 gracefully_kill_them_all
reload-mercy = 10
worker-reload-mercy = 10
buffer-size = 65535
add-header = Connection: close
pidfile = $workdir/run/$s.pid
EOF
    } >"$workdir/$s/uwsgi.ini"
}

# Barbican parses its config while being imported, from oslo.config's default search path
# only, whose first entry is ~/.barbican/barbican.conf: so HOME is its directory. Its own
# WSGI entry point hard-codes /etc/barbican/barbican-api-paste.ini, so it gets a wsgi.py.
d=$workdir/barbican
mkdir -p "$d/.barbican" "$d/etc"
kek=$(/usr/bin/python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')
cat >"$d/.barbican/barbican.conf" <<EOF
[DEFAULT]
host_href = $(url barbican)
log_file = $workdir/log/barbican-api.log

[database]
connection = $(db barbican)

[secretstore]
enabled_secretstore_plugins = store_crypto

[crypto]
enabled_crypto_plugins = simple_crypto

[simple_crypto_plugin]
# Stored secrets are encrypted with it: it lives as long as this workdir.
kek = $kek

$(common_tail)
EOF
sed -e "s#/etc/barbican/#$d/etc/#g" "$root/barbican/venv/etc/barbican/barbican-api-paste.ini" >"$d/etc/barbican-api-paste.ini"
printf 'from paste import deploy\napplication = deploy.loadapp("config:%s")\n' "$d/etc/barbican-api-paste.ini" >"$d/wsgi.py"
uwsgi_ini barbican "wsgi-file = $d/wsgi.py" "env = HOME=$d"

# Glance reads $OS_GLANCE_CONFIG_DIR/glance-api.conf.
d=$workdir/glance
mkdir -p "$d/etc" "$d/images" "$d/staging" "$d/tasks"
cp "$root/glance/venv/etc/glance/glance-api-paste.ini" "$d/etc/"
cat >"$d/etc/glance-api.conf" <<EOF
[DEFAULT]
log_file = $workdir/log/glance-api.log
enabled_backends = fs:file
worker_self_reference_url = $(url glance)

[database]
connection = $(db glance)

[glance_store]
default_backend = fs

[fs]
filesystem_store_datadir = $d/images/

[os_glance_staging_store]
filesystem_store_datadir = $d/staging/

[os_glance_tasks_store]
filesystem_store_datadir = $d/tasks/

[paste_deploy]
flavor = keystone
config_file = $d/etc/glance-api-paste.ini

$(common_tail)
EOF
uwsgi_ini glance "module = glance.wsgi.api:application" "env = OS_GLANCE_CONFIG_DIR=$d/etc"

# Nova: the API only; reads $OS_NOVA_CONFIG_DIR/{nova.conf,api-paste.ini}.
d=$workdir/nova
mkdir -p "$d/etc" "$d/state" "$d/lock"
cp "$root/nova/venv/etc/nova/api-paste.ini" "$d/etc/"
cat >"$d/etc/nova.conf" <<EOF
[DEFAULT]
log_file = $workdir/log/nova-api.log
state_path = $d/state
my_ip = 127.0.0.1
host = magnum-rs-nova
transport_url = $rabbit

[api]
auth_strategy = keystone

[api_database]
connection = $(db nova_api)

[database]
connection = $(db nova)

[oslo_concurrency]
lock_path = $d/lock

[wsgi]
api_paste_config = $d/etc/api-paste.ini

$(common_tail)
EOF
# Only for nova-manage: syncs the cell0 schema as a "local cell", in parallel with cell1.
printf '[database]\nconnection = %s\n' "$(db nova_cell0)" >"$d/cell0-sync.conf"
uwsgi_ini nova "module = nova.wsgi.osapi_compute:application" "env = OS_NOVA_CONFIG_DIR=$d/etc"

# Neutron: the API with ML2 and no mechanism driver, no agents; neutron 29 has no
# neutron-server script. Reads $OS_NEUTRON_CONFIG_DIR/{neutron.conf,plugins/ml2/ml2_conf.ini}.
d=$workdir/neutron
mkdir -p "$d/etc/plugins/ml2" "$d/state" "$d/lock"
cp "$root/neutron/venv/etc/neutron/api-paste.ini" "$d/etc/"
cat >"$d/etc/neutron.conf" <<EOF
[DEFAULT]
core_plugin = ml2
service_plugins =
auth_strategy = keystone
transport_url = $rabbit
api_paste_config = $d/etc/api-paste.ini
state_path = $d/state
log_file = $workdir/log/neutron-api.log
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
host = magnum-rs-neutron

[database]
connection = $(db neutron)

[oslo_concurrency]
lock_path = $d/lock

$(common_tail)
EOF
cat >"$d/etc/plugins/ml2/ml2_conf.ini" <<EOF
[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vxlan
mechanism_drivers =
extension_drivers = port_security

[ml2_type_flat]
flat_networks = *

[ml2_type_vlan]
network_vlan_ranges = physnet1:100:200

[ml2_type_vxlan]
vni_ranges = 1:1000
EOF
uwsgi_ini neutron "module = neutron.wsgi.api:application" "env = OS_NEUTRON_CONFIG_DIR=$d/etc"

# Cinder: the API only; its WSGI module parses sys.argv, which uWSGI's pyargv fills.
d=$workdir/cinder
mkdir -p "$d/etc" "$d/state" "$d/lock"
cp "$root/cinder/venv/etc/cinder/api-paste.ini" "$root/cinder/venv/etc/cinder/resource_filters.json" "$d/etc/"
cat >"$d/etc/cinder.conf" <<EOF
[DEFAULT]
auth_strategy = keystone
transport_url = $rabbit
api_paste_config = $d/etc/api-paste.ini
resource_query_filters_file = $d/etc/resource_filters.json
state_path = $d/state
log_file = $workdir/log/cinder-api.log
my_ip = 127.0.0.1
host = magnum-rs-cinder

[database]
connection = $(db cinder)

[oslo_concurrency]
lock_path = $d/lock

$(common_tail)
EOF
uwsgi_ini cinder "module = cinder.wsgi.api:application" "pyargv = --config-file $d/etc/cinder.conf"

# Octavia: the API only (no worker, health manager or housekeeping); pyargv as Cinder.
d=$workdir/octavia
mkdir -p "$d/etc" "$d/lock"
cat >"$d/etc/octavia.conf" <<EOF
[DEFAULT]
transport_url = $rabbit
log_file = $workdir/log/octavia-api.log
host = magnum-rs-octavia

[api_settings]
auth_strategy = keystone
enabled_provider_drivers = amphora:The Octavia Amphora driver.,noop_driver:The No-Op driver.
default_provider_driver = amphora

[database]
connection = $(db octavia)

$(keystone_section service_auth)
[oslo_concurrency]
lock_path = $d/lock

$(common_tail)
EOF
uwsgi_ini octavia "module = octavia.wsgi.api:application" "pyargv = --config-file $d/etc/octavia.conf"

# Manila: the API only (no share, scheduler or data service, so no share can be made; share
# types and share networks work). Its WSGI module parses sys.argv like Cinder's. The paste
# file's healthcheck names /etc/manila/; that path is rewritten into the workdir.
d=$workdir/manila
mkdir -p "$d/etc" "$d/state" "$d/lock"
sed -e "s#/etc/manila/#$d/etc/#g" "$root/manila/venv/etc/manila/api-paste.ini" >"$d/etc/api-paste.ini"
cat >"$d/etc/manila.conf" <<EOF
[DEFAULT]
auth_strategy = keystone
transport_url = $rabbit
api_paste_config = $d/etc/api-paste.ini
state_path = $d/state
log_file = $workdir/log/manila-api.log
my_ip = 127.0.0.1
host = magnum-rs-manila
enabled_share_protocols = NFS
enabled_share_backends =
default_share_type = default

[database]
connection = $(db manila)

[oslo_concurrency]
lock_path = $d/lock

$(common_tail)
EOF
uwsgi_ini manila "module = manila.wsgi.api:application" "pyargv = --config-file $d/etc/manila.conf"

# --- empty databases, schemas, then the server: one chain per service, all in parallel
export PYTHONWARNINGS=ignore
reset_db() { # drop and create databases (names without the prefix), in parallel
    local n p pids=()
    for n; do
        timeout "$(left)" mysql -uroot -e "DROP DATABASE IF EXISTS \`$prefix$n\`; CREATE DATABASE \`$prefix$n\` CHARACTER SET utf8mb4" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || return 1; done
}
venv_of() { echo "$root/$1/venv"; }
sync_barbican() {
    reset_db barbican &&
    (cd "$workdir/barbican" && HOME=$workdir/barbican timeout "$(left)" "$(venv_of barbican)/bin/barbican-manage" db upgrade)
}
sync_glance() {
    reset_db glance &&
    timeout "$(left)" "$(venv_of glance)/bin/glance-manage" --config-file "$workdir/glance/etc/glance-api.conf" db_sync
}
sync_nova() {
    local nm=("$(venv_of nova)/bin/nova-manage" --config-file "$workdir/nova/etc/nova.conf") a b c
    reset_db nova_api nova nova_cell0 || return 1
    # The API database and the cell mappings; the two cell schemas meanwhile.
    { timeout "$(left)" "${nm[@]}" api_db sync &&
        timeout "$(left)" "${nm[@]}" cell_v2 map_cell0 --database_connection "$(db nova_cell0)" &&
        timeout "$(left)" "${nm[@]}" cell_v2 create_cell --name cell1; } &
    a=$!
    timeout "$(left)" "${nm[@]}" db sync --local_cell &
    b=$!
    timeout "$(left)" "${nm[@]}" --config-file "$workdir/nova/cell0-sync.conf" db sync --local_cell &
    c=$!
    wait "$a" && wait "$b" && wait "$c"
}
sync_neutron() {
    reset_db neutron &&
    timeout "$(left)" "$(venv_of neutron)/bin/neutron-db-manage" --config-file "$workdir/neutron/etc/neutron.conf" \
        --config-file "$workdir/neutron/etc/plugins/ml2/ml2_conf.ini" upgrade heads
}
sync_cinder() {
    reset_db cinder &&
    timeout "$(left)" "$(venv_of cinder)/bin/cinder-manage" --config-file "$workdir/cinder/etc/cinder.conf" db sync
}
sync_octavia() {
    reset_db octavia &&
    timeout "$(left)" "$(venv_of octavia)/bin/octavia-db-manage" --config-file "$workdir/octavia/etc/octavia.conf" upgrade head
}
sync_manila() {
    reset_db manila &&
    timeout "$(left)" "$(venv_of manila)/bin/manila-manage" --config-file "$workdir/manila/etc/manila.conf" db sync
}
# The schemas as the real syncs leave them are kept as a mysqldump per service and slot; a
# later start loads that instead (~1 s instead of ~30 s). The key covers everything the
# result depends on: the venv's pins and lock, the database names, the MariaDB version and
# this script. MAGNUM_TEST_OS_DB_SNAPSHOT=0 always runs the syncs (and keeps no dump).
declare -A DBS=([barbican]=barbican [glance]=glance [nova]="nova_api nova nova_cell0"
    [neutron]=neutron [cinder]=cinder [octavia]=octavia [manila]=manila)
snap_dir=$root/db-snapshots
snap_on=${MAGNUM_TEST_OS_DB_SNAPSHOT:-1}
mkdir -p "$snap_dir"
server_version=$(mysql -uroot -N -e 'SELECT VERSION()')
script_hash=$(sha256sum <"$here/start.sh" | cut -c1-16)
chain() { # in a subshell: schema, then launch; the times go to run/<svc>.times
    local s=$1 t0=$SECONDS key n p ok=1 pids=() how=sync
    exec >>"$workdir/log/$s-db.log" 2>&1
    key=$({ cat "$root/$s/venv/.magnum-rs-complete"; echo "$prefix $server_version $script_hash"; } | sha256sum | cut -c1-16)
    snap() { echo "$snap_dir/$prefix$1-$key.sql"; }
    for n in ${DBS[$s]}; do [[ -s $(snap "$n") ]] || ok=; done
    if [[ $snap_on != 0 && -n $ok ]]; then
        # Each dump drops and creates its database itself; in parallel, as dropping a database
        # of 100+ tables takes ~2 s of mostly waiting.
        for n in ${DBS[$s]}; do
            timeout "$(left)" mysql -uroot <"$(snap "$n")" &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || { echo "start.sh: loading a $s snapshot failed"; return 1; }; done
        how=snapshot
    else
        "sync_$s" || { echo "start.sh: the $s database setup failed"; return 1; }
        if [[ $snap_on != 0 ]]; then
            for n in ${DBS[$s]}; do
                rm -f "$snap_dir/$prefix$n-"*.sql
                mysqldump -uroot --single-transaction --skip-comments --skip-dump-date --add-drop-database \
                    --databases "$prefix$n" >"$(snap "$n").$$" && mv "$(snap "$n").$$" "$(snap "$n")" ||
                    rm -f "$(snap "$n").$$"
            done
        fi
    fi
    echo "db $((SECONDS - t0)) $how" >"$workdir/run/$s.times"
    os_start "$workdir" "$s" "$(venv_of "$s")"
}
declare -A chain_pid
for s in "${OS_SERVICES[@]}"; do
    chain "$s" &
    chain_pid[$s]=$!
    bg_jobs+=($!)
done

# The catalogue meanwhile (it needs only Keystone).
cinder_base=$(url cinder)/v3
catalog=(key-manager=barbican=$(url barbican) image=glance=$(url glance) compute=nova=$(url nova)/v2.1
    network=neutron=$(url neutron) "block-storage=cinderv3=$cinder_base/\$(project_id)s"
    load-balancer=octavia=$(url octavia) sharev2=manilav2=$(url manila)/v2 identity=keystone=$auth_url)
timeout "$(left)" "$kspy" "$here/register.py" "$auth_url" "$ks_MAGNUM_TEST_ADMIN_PASSWORD" "$region" \
    "${catalog[@]}" >"$workdir/log/register.log" 2>&1 &
reg_pid=$!
bg_jobs+=($reg_pid)

failed=()
for s in "${OS_SERVICES[@]}"; do wait "${chain_pid[$s]}" || failed+=("$s"); done
((${#failed[@]} == 0)) || fail "database setup or launch of ${failed[*]} failed (or took over ${limit}s)" "${failed[@]}"
t_db=$SECONDS
for s in "${OS_SERVICES[@]}"; do
    os_wait "$workdir" "$s" "$deadline" || failed+=("$s")
done
((${#failed[@]} == 0)) || fail "${failed[*]} did not come up within ${limit}s" "${failed[@]}"
t_up=$SECONDS
wait "$reg_pid" || {
    echo "--- $workdir/log/register.log:" >&2
    tail -n 25 "$workdir/log/register.log" >&2
    fail "registering the catalogue in region $region failed"
}

# --- test data (as admin, and demo-member's keypair), then what demo-member sees
ssh-keygen -q -t ed25519 -N '' -C demo-key -f "$workdir/demo-key"
timeout "$(left)" "$kspy" "$here/seed.py" "$auth_url" "$region" "$ks_MAGNUM_TEST_ADMIN_PASSWORD" \
    "$ks_MAGNUM_TEST_DEMO_MEMBER_PASSWORD" "$workdir/demo-key" "$ks_MAGNUM_TEST_SERVICE_USER" \
    "$ks_MAGNUM_TEST_SERVICE_PASSWORD" "$ks_MAGNUM_TEST_SERVICE_PROJECT" >"$workdir/run/seed.env" 2>"$workdir/log/seed.log" || {
    echo "--- $workdir/log/seed.log:" >&2
    tail -n 30 "$workdir/log/seed.log" >&2
    # seed.py names the service that failed; without a name (a timeout, say), show them all.
    bad=$(sed -n 's/^seed.py: failed at \([a-z]*\):.*/\1/p' "$workdir/log/seed.log" | head -n1)
    fail "seeding the test data failed (or took over ${limit}s)" ${bad:-"${OS_SERVICES[@]}"}
}
t_seed=$SECONDS
# The Keystone's clouds.yaml pins each cloud to its region, and the openstack CLI refuses any
# other: the same clouds in this region.
if [[ -f $ks_OS_CLIENT_CONFIG_FILE ]]; then
    "$kspy" - "$ks_OS_CLIENT_CONFIG_FILE" "$region" >"$workdir/clouds.yaml" <<'EOF'
import json, sys, yaml
with open(sys.argv[1]) as f:
    conf = yaml.safe_load(f)
for cloud in conf["clouds"].values():
    cloud["region_name"] = sys.argv[2]
    cloud.pop("regions", None)
print(json.dumps(conf, indent=2))
EOF
fi

# --- env.sh: only export NAME='value' lines
{
    emit() { printf "export %s='%s'\n" "$1" "$2"; }
    emit MAGNUM_TEST_OS_REGION "$region"
    emit MAGNUM_TEST_OS_WORKDIR "$workdir"
    emit MAGNUM_TEST_OS_ROOT "$root"
    emit MAGNUM_TEST_OS_CTL "$here/ctl.sh"
    emit MAGNUM_TEST_OS_DB_PREFIX "$prefix"
    [[ ! -f $workdir/clouds.yaml ]] || emit MAGNUM_TEST_OS_CLOUDS_YAML "$workdir/clouds.yaml"
    emit MAGNUM_TEST_OS_BARBICAN_URL "$(url barbican)"
    emit MAGNUM_TEST_OS_GLANCE_URL "$(url glance)"
    emit MAGNUM_TEST_OS_NOVA_URL "$(url nova)/v2.1"
    emit MAGNUM_TEST_OS_NEUTRON_URL "$(url neutron)"
    emit MAGNUM_TEST_OS_CINDER_URL "$cinder_base/\$(project_id)s"
    emit MAGNUM_TEST_OS_CINDER_BASE_URL "$cinder_base"
    emit MAGNUM_TEST_OS_OCTAVIA_URL "$(url octavia)"
    emit MAGNUM_TEST_OS_MANILA_URL "$(url manila)/v2"
    emit MAGNUM_TEST_OS_KEYPAIR_DEMO_KEY_PRIVATE_KEY "$workdir/demo-key"
    emit MAGNUM_TEST_OS_KEYPAIR_DEMO_KEY_PUBLIC_KEY "$workdir/demo-key.pub"
    while IFS='=' read -r k v; do [[ $k =~ ^MAGNUM_TEST_OS_[A-Z0-9_]+$ ]] && emit "$k" "$v"; done <"$workdir/run/seed.env"
} >"$workdir/env.sh"
started=1
{
    printf 'start.sh: db reset + schemas:'
    for s in "${OS_SERVICES[@]}"; do printf ' %s %s' "$s" "$(awk '$1 == "db" { print $2 "s (" $3 ")" }' "$workdir/run/$s.times")"; done
    echo
    echo "start.sh: all answered after $((t_up - t_start)) s (schemas done at $((t_db - t_start)) s), seeded at $((t_seed - t_start)) s"
    grep '^seed.py:' "$workdir/log/seed.log" || true
    echo "start.sh: region $region, databases ${prefix}*; source $workdir/env.sh"
} >&2
