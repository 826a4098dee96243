#!/usr/bin/env bash
# schemathesis against a running magnum-rs API's own OpenAPI document, at one microversion.
#   run.sh BASE_URL VERSION OUT_DIR
# BASE_URL is the API's origin (http://127.0.0.1:9511); VERSION a microversion (1.1, 1.10,
# latest) sent as `OpenStack-API-Version: container-infra VERSION` on every request; OUT_DIR
# receives the config, the reports (junit.xml, events.ndjson) and schemathesis.log.
# Environment:
#   MAGNUM_FUZZ_TOKEN     a Keystone token, sent as X-Auth-Token (required; read by
#                         schemathesis from the environment, never put on a command line)
#   MAGNUM_FUZZ_EXAMPLES  generated cases per operation and phase (default 20)
#   MAGNUM_FUZZ_SEED      hypothesis seed (default 1414): the same seed replays the same cases
#   MAGNUM_FUZZ_WORKERS   concurrent workers (default 1: one worker keeps a seed's run in one order,
#                         and hypothesis 6.170 raced in its lambda-source cache with 2)
#   MAGNUM_FUZZ_VENV      the venv (default /var/tmp/magnum-rs-fuzz-venv; built on first use)
#   MAGNUM_FUZZ_TEMPLATES, MAGNUM_FUZZ_CLUSTERS, MAGNUM_FUZZ_NODEGROUPS, MAGNUM_FUZZ_PROJECTS
#                         optional, space-separated: ids of real objects. Half of the generated
#                         path idents and id fields of bodies are drawn from them, so cases
#                         reach past the lookups into the handlers (random idents only meet 404)
# Prints schemathesis's report, then one line:
#   fuzz: version V: operations N, cases N, failures N, errors N
# Exits with schemathesis's status (0: no check failed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${1:?usage: run.sh BASE_URL VERSION OUT_DIR}
version=${2:?usage: run.sh BASE_URL VERSION OUT_DIR}
out=${3:?usage: run.sh BASE_URL VERSION OUT_DIR}
: "${MAGNUM_FUZZ_TOKEN:?MAGNUM_FUZZ_TOKEN must hold a Keystone token}"
venv=${MAGNUM_FUZZ_VENV:-/var/tmp/magnum-rs-fuzz-venv}
MAGNUM_FUZZ_VENV=$venv bash "$here/setup-venv.sh"
mkdir -p "$out"
export MAGNUM_FUZZ_API_VERSION="container-infra $version"
# Headers come from the environment through schemathesis's ${NAME} placeholders, so the
# token is in no file and on no command line; schemathesis masks X-Auth-Token in its output.
cat >"$out/schemathesis.toml" <<'TOML'
[headers]
X-Auth-Token = "${MAGNUM_FUZZ_TOKEN}"
OpenStack-API-Version = "${MAGNUM_FUZZ_API_VERSION}"

[output.sanitization]
enabled = true
TOML
# Real objects, as schemathesis dictionaries bound to the parameters and body fields that
# name them.
toml_list() { local out="" x; for x in $1; do out+="\"$x\", "; done; echo "[${out%, }]"; }
bind() { # bind DICTIONARY VALUES KEY...
    local name=$1 values=$2
    shift 2
    [[ -n $values ]] || return 0
    printf '\n[dictionaries.%s]\nvalues = %s\n' "$name" "$(toml_list "$values")" >>"$out/dicts.toml"
    local key
    for key in "$@"; do
        printf '"%s" = { dictionary = "%s", probability = 0.5 }\n' "$key" "$name" >>"$out/params.toml"
    done
}
: >"$out/dicts.toml"
echo "[parameters]" >"$out/params.toml"
templates=${MAGNUM_FUZZ_TEMPLATES:-} clusters=${MAGNUM_FUZZ_CLUSTERS:-}
bind objects "$templates $clusters" path.ident
bind templates "$templates" body.cluster_template_id body.cluster_template
bind clusters "$clusters" path.cluster_ident body.cluster_uuid body.hostcluster_id
bind nodegroups "${MAGNUM_FUZZ_NODEGROUPS:-}" path.nodegroup_ident body.nodegroup
bind projects "${MAGNUM_FUZZ_PROJECTS:-}" path.project_id body.project_id query.project_id
bind resources "${MAGNUM_FUZZ_PROJECTS:+Cluster}" path.resource body.resource
cat "$out/params.toml" "$out/dicts.toml" >>"$out/schemathesis.toml"
status=0
(cd "$out" && "$venv/bin/schemathesis" --no-color --config-file "$out/schemathesis.toml" run \
    "$base/v1/openapi.json" --url "$base" \
    --phases examples,coverage,fuzzing \
    --checks not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance \
    --max-examples "${MAGNUM_FUZZ_EXAMPLES:-20}" --seed "${MAGNUM_FUZZ_SEED:-1414}" \
    --workers "${MAGNUM_FUZZ_WORKERS:-1}" --request-timeout 120 --continue-on-failure \
    --suppress-health-check all --warnings off \
    --report junit,ndjson --report-dir "$out" \
    --report-junit-path "$out/junit.xml" --report-ndjson-path "$out/events.ndjson") \
    >"$out/schemathesis.log" 2>&1 || status=$?
cat "$out/schemathesis.log"
"$venv/bin/python" "$here/summary.py" "$version" "$out/junit.xml" "$out/events.ndjson"
exit "$status"
