#!/usr/bin/env python3
"""Print the SQL that seeds the scale benchmark (scripts/bench-scale): one cluster template of
the simulated driver and N clusters in CREATE_IN_PROGRESS that never finish (label
`simulated_hang=create`, no create_timeout, a stack id so the sweep does not resume them),
each with its two default nodegroups (default-master, default-worker) also in
CREATE_IN_PROGRESS. Multi-row INSERTs of at most 1000 rows, to stay under max_allowed_packet.

Usage: bench-seed-scale.py CLUSTERS PROJECT_ID USER_ID | mariadb DATABASE
Deterministic: the same arguments always give the same rows (uuids from a fixed namespace).
The template's uuid is printed on stderr ("template <uuid>"), for creating more clusters of
it through the API.
"""
import json
import sys
import uuid

clusters = int(sys.argv[1])
project = sys.argv[2]
user = sys.argv[3]

NS = uuid.UUID("0c2a4e1b-5d3f-4a6e-8b7c-9d0e1f2a3b4c")
NOW = "UTC_TIMESTAMP()"  # an expression, written unquoted
CHUNK = 1000


def uid(*parts):
    return str(uuid.uuid5(NS, "/".join(str(p) for p in parts)))


def lit(v):
    if v is None:
        return "NULL"
    if v is NOW:
        return NOW
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "''") + "'"


def insert(table, rows):
    cols = list(rows[0])
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start:start + CHUNK]
        values = ",\n".join("(" + ", ".join(lit(r[c]) for c in cols) + ")" for r in chunk)
        sys.stdout.write(f"INSERT INTO {table} ({', '.join(cols)}) VALUES\n{values};\n")


template_labels = {"kube_tag": "v1.30.4", "boot_volume_size": "20", "availability_zone": "nova"}
hung_labels = json.dumps(dict(template_labels, simulated_hang="create"))
template_uuid = uid("template")
template = {
    "created_at": NOW, "updated_at": None, "uuid": template_uuid, "name": "bench-scale-ct",
    "flavor_id": "m1.small", "keypair_id": "bench-key", "image_id": "fedora-coreos-40",
    "external_network_id": "public", "dns_nameserver": "8.8.8.8", "apiserver_port": None,
    "project_id": project, "user_id": user, "docker_volume_size": 10, "fixed_network": None,
    "master_flavor_id": "m1.medium", "cluster_distro": "fedora-coreos", "coe": "kubernetes",
    "http_proxy": None, "https_proxy": None, "no_proxy": None, "registry_enabled": False,
    "network_driver": "calico", "labels": json.dumps(template_labels), "tls_disabled": False,
    "public": False, "server_type": "vm", "volume_driver": "cinder", "insecure_registry": None,
    "docker_storage_driver": "overlay2", "master_lb_enabled": True, "fixed_subnet": None,
    "floating_ip_enabled": True, "hidden": False, "tags": None, "driver": "simulated",
}

cluster_rows, nodegroup_rows = [], []
for i in range(1, clusters + 1):
    cu = uid("cluster", i)
    stack = f"sim-{cu[:8]}"
    cluster_rows.append({
        "created_at": NOW, "updated_at": NOW, "uuid": cu, "name": f"scale-{i:05d}",
        "cluster_template_id": template_uuid, "api_address": None, "stack_id": stack,
        "project_id": project, "user_id": user, "status": "CREATE_IN_PROGRESS",
        "discovery_url": None, "status_reason": None, "ca_cert_ref": uid("ca", i),
        "magnum_cert_ref": uid("magnum-cert", i), "create_timeout": None,
        "coe_version": None, "container_version": None, "keypair": "bench-key",
        "docker_volume_size": 10, "labels": hung_labels, "master_flavor_id": "m1.medium",
        "flavor_id": "m1.small", "health_status": None, "health_status_reason": None,
        "fixed_network": None, "fixed_subnet": None, "floating_ip_enabled": True,
        "master_lb_enabled": True, "etcd_ca_cert_ref": uid("etcd-ca", i),
        "front_proxy_ca_cert_ref": uid("fp-ca", i),
    })
    for role, flavor, count in (("master", "m1.medium", 1), ("worker", "m1.small", 2)):
        nodegroup_rows.append({
            "created_at": NOW, "updated_at": NOW, "uuid": uid("nodegroup", i, role),
            "name": f"default-{role}", "cluster_id": cu, "project_id": project,
            "docker_volume_size": 10, "labels": hung_labels, "flavor_id": flavor,
            "image_id": "fedora-coreos-40", "node_addresses": "[]", "node_count": count,
            "max_node_count": None, "min_node_count": 0, "role": role, "is_default": True,
            "stack_id": stack, "status": "CREATE_IN_PROGRESS", "status_reason": None,
            "version": None, "node_labels": "{}", "node_taints": "[]",
        })

insert("cluster_template", [template])
insert("cluster", cluster_rows)
insert("nodegroup", nodegroup_rows)
print(f"template {template_uuid}", file=sys.stderr)
