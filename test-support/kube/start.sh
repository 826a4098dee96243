#!/usr/bin/env bash
# Starts the Kubernetes API server stand-in (apiserver.py) and, unless told not to, the
# simulated Cluster API controller (capi_sim.py), in the background. README.md beside this file.
#
#   start.sh DIR [--no-controller] [-- CAPI_SIM_ARGS...]
#
# DIR (made if missing) receives: ca.crt/ca.key, server.crt/server.key (127.0.0.1 and
# localhost), client.crt/client.key (CN=magnum-rs, O=system:masters), token (a bearer token
# the server also accepts), port, apiserver.pid, apiserver.log, capi_sim.pid, capi_sim.log,
# kubeconfig and env.sh. Certificates already in DIR are reused. Prints the kubeconfig path on
# stdout (progress and errors go to stderr). Stop with stop.sh DIR.
#
#   MAGNUM_TEST_CAPI_CRDS  CRD folder (default: ../shared/fixtures/capi-crds beside the
#                          repository, when present); a missing folder = no schema validation
#   MAGNUM_KUBE_VENV       the venv setup-venv.sh builds (default /var/tmp/magnum-rs-kube-venv)
#   MAGNUM_TEST_KUBE_BOOKMARK_SECONDS  watch bookmark interval (default 5)
#   CAPI_SIM_*             reach capi_sim.py through the environment unchanged
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

usage() {
    echo "usage: start.sh DIR [--no-controller] [-- CAPI_SIM_ARGS...]" >&2
    exit 2
}
(($# >= 1)) || usage
dir=$1
shift
controller=1
sim_args=()
while (($#)); do
    case $1 in
    --no-controller) controller=0 ;;
    --) shift; sim_args=("$@"); break ;;
    *) usage ;;
    esac
    shift
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

alive() { # pidfile script-name
    local pid
    [[ -f $1 ]] || return 1
    pid=$(cat "$1")
    [[ -n $pid && -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$2"
}
# running() asks only whether a pid we just started still lives: right after the fork the child
# is still a copy of this script, so its command line does not name the program yet.
running() {
    kill -0 "$1" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}
if alive "$dir/apiserver.pid" apiserver.py; then
    echo "start.sh: a stand-in already runs for $dir (pid $(cat "$dir/apiserver.pid")); stop.sh $dir first" >&2
    exit 1
fi

bash "$here/setup-venv.sh"
py=${MAGNUM_KUBE_VENV:-/var/tmp/magnum-rs-kube-venv}/bin/python

# ---- certificates (openssl CLI): a CA, a server certificate, a client certificate
if [[ ! -s $dir/ca.crt || ! -s $dir/server.crt || ! -s $dir/client.crt ]]; then
    (
        cd "$dir"
        umask 077
        cat >openssl.cnf <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
        q() { "$@" >/dev/null 2>openssl.err || { cat openssl.err >&2; exit 1; }; }
        for k in ca server client; do
            q openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out $k.key
        done
        q openssl req -config openssl.cnf -new -x509 -key ca.key -subj "/CN=magnum-rs-test-kube-ca" \
            -days 3650 -extensions ca -out ca.crt
        q openssl req -config openssl.cnf -new -key server.key -subj "/CN=kube-apiserver-stand-in" -out server.csr
        q openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 15)" \
            -days 3650 -extfile openssl.cnf -extensions server -out server.crt
        q openssl req -config openssl.cnf -new -key client.key -subj "/O=system:masters/CN=magnum-rs" -out client.csr
        q openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 15)" \
            -days 3650 -extfile openssl.cnf -extensions client -out client.crt
        rm -f server.csr client.csr openssl.err
        printf '%s,magnum-rs-token\n' "$(openssl rand -hex 24)" >token
        chmod 600 ./*.key token
        chmod 644 ./*.crt
    )
fi

# ---- the server
crds=${MAGNUM_TEST_CAPI_CRDS:-}
if [[ -z $crds && -d $repo/../shared/fixtures/capi-crds ]]; then
    crds=$(cd "$repo/../shared/fixtures/capi-crds" && pwd)
fi
args=(--dir "$dir")
[[ -n $crds ]] && args+=(--crds "$crds")
rm -f "$dir/port"
# setsid: the server gets its own session, so the caller's terminal or process group signals
# do not reach it; stop.sh ends it by its pid.
setsid "$py" "$here/apiserver.py" "${args[@]}" </dev/null >>"$dir/apiserver.log" 2>&1 &
server_pid=$!
echo $server_pid >"$dir/apiserver.pid"

fail() {
    echo "start.sh: $1; the end of $dir/apiserver.log:" >&2
    tail -n 20 "$dir/apiserver.log" >&2 || true
    bash "$here/stop.sh" "$dir" >&2 || true
    exit 1
}
curl_k() {
    curl -s --max-time 5 --cacert "$dir/ca.crt" --cert "$dir/client.crt" --key "$dir/client.key" "$@"
}
port=
for _ in $(seq 1 300); do
    running "$server_pid" || fail "the server exited"
    if [[ -z $port && -s $dir/port ]]; then port=$(cat "$dir/port"); fi
    if [[ -n $port ]] && [[ $(curl_k -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/readyz") == 200 ]]; then
        break
    fi
    sleep 0.1
done
[[ -n $port ]] || fail "the server did not listen within 30 s"
url=https://127.0.0.1:$port

code=$(curl_k -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"magnum-system"}}' "$url/api/v1/namespaces")
[[ $code == 201 || $code == 409 ]] || fail "creating namespace magnum-system answered $code"

b64() { base64 -w0 <"$1"; }
umask 077
cat >"$dir/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: magnum-test
  cluster:
    server: $url
    certificate-authority-data: $(b64 "$dir/ca.crt")
users:
- name: magnum-rs
  user:
    client-certificate-data: $(b64 "$dir/client.crt")
    client-key-data: $(b64 "$dir/client.key")
contexts:
- name: magnum-test
  context:
    cluster: magnum-test
    user: magnum-rs
    namespace: magnum-system
current-context: magnum-test
preferences: {}
EOF
mv "$dir/kubeconfig.tmp" "$dir/kubeconfig"
cat >"$dir/env.sh" <<EOF
# Written by test-support/kube/start.sh: source it to reach the stand-in.
export KUBECONFIG=$dir/kubeconfig
export MAGNUM_TEST_KUBE_URL=$url
export MAGNUM_TEST_KUBE_DIR=$dir
export MAGNUM_TEST_KUBE_CA=$dir/ca.crt
export MAGNUM_TEST_KUBE_CERT=$dir/client.crt
export MAGNUM_TEST_KUBE_KEY=$dir/client.key
export MAGNUM_TEST_KUBE_TOKEN=$(cut -d, -f1 "$dir/token")
EOF

# ---- the simulated Cluster API controller
if ((controller)) && [[ -f $here/capi_sim.py ]]; then
    setsid "$py" "$here/capi_sim.py" --kubeconfig "$dir/kubeconfig" --namespace magnum-system \
        ${sim_args[@]+"${sim_args[@]}"} </dev/null >>"$dir/capi_sim.log" 2>&1 &
    sim_pid=$!
    echo $sim_pid >"$dir/capi_sim.pid"
    sleep 0.5
    if ! running "$sim_pid"; then
        echo "start.sh: capi_sim.py exited; the end of $dir/capi_sim.log:" >&2
        tail -n 20 "$dir/capi_sim.log" >&2 || true
        bash "$here/stop.sh" "$dir" >&2 || true
        exit 1
    fi
    echo "start.sh: capi_sim.py runs (pid $(cat "$dir/capi_sim.pid"), log $dir/capi_sim.log)" >&2
elif ((controller)); then
    echo "start.sh: no capi_sim.py beside start.sh; no controller started" >&2
fi
echo "start.sh: stand-in on $url (pid $(cat "$dir/apiserver.pid"), log $dir/apiserver.log)" >&2
echo "$dir/kubeconfig"
