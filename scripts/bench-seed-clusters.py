#!/usr/bin/env python3
"""Print the SQL that seeds the cluster-list benchmark: one cluster template, N clusters in
CREATE_COMPLETE and their two default nodegroups (default-master, default-worker), as
`POST /v1/clusters` and a finished create would leave them. Three multi-row INSERTs.

Usage: bench-seed-clusters.py [CLUSTERS] [PROJECT_ID] [USER_ID] | mariadb DATABASE
Deterministic: the same arguments always give the same rows (uuids from a fixed namespace).
"""
import json
import sys
import uuid

clusters = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
project = sys.argv[2] if len(sys.argv) > 2 else "admin"
user = sys.argv[3] if len(sys.argv) > 3 else "admin"

NS = uuid.UUID("6f1c3a52-7d0e-4b7a-9c55-0b3e5a1d2c40")
NOW = "2025-01-01 00:00:00"


def uid(*parts):
    return str(uuid.uuid5(NS, "/".join(str(p) for p in parts)))


def lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "''") + "'"


def insert(table, rows):
    cols = list(rows[0])
    values = ",\n".join("(" + ", ".join(lit(r[c]) for c in cols) + ")" for r in rows)
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES\n{values};\n"


labels = json.dumps({"kube_tag": "v1.30.4", "boot_volume_size": "20", "availability_zone": "nova"})
template_uuid = uid("template")
template = {
    "created_at": NOW, "updated_at": None, "uuid": template_uuid, "name": "bench-ct",
    "flavor_id": "m1.small", "keypair_id": "bench-key", "image_id": "fedora-coreos-40",
    "external_network_id": "public", "dns_nameserver": "8.8.8.8", "apiserver_port": None,
    "project_id": project, "user_id": user, "docker_volume_size": 10, "fixed_network": None,
    "master_flavor_id": "m1.medium", "cluster_distro": "fedora-coreos", "coe": "kubernetes",
    "http_proxy": None, "https_proxy": None, "no_proxy": None, "registry_enabled": False,
    "network_driver": "calico", "labels": labels, "tls_disabled": False, "public": False,
    "server_type": "vm", "volume_driver": "cinder", "insecure_registry": None,
    "docker_storage_driver": "overlay2", "master_lb_enabled": True, "fixed_subnet": None,
    "floating_ip_enabled": True, "hidden": False, "tags": None, "driver": "simulated",
}

cluster_rows, nodegroup_rows = [], []
for i in range(1, clusters + 1):
    cu = uid("cluster", i)
    stack = uid("stack", i)
    ip = f"10.{i // 250}.{i % 250}"
    cluster_rows.append({
        "created_at": NOW, "updated_at": NOW, "uuid": cu, "name": f"bench-cluster-{i:04d}",
        "cluster_template_id": template_uuid, "api_address": f"https://{ip}.10:6443",
        "stack_id": stack, "project_id": project, "user_id": user, "status": "CREATE_COMPLETE",
        "discovery_url": None, "status_reason": "Stack CREATE completed successfully",
        "ca_cert_ref": uid("ca", i), "magnum_cert_ref": uid("magnum-cert", i),
        "create_timeout": 60, "coe_version": "v1.30.4", "container_version": "1.12.6",
        "keypair": "bench-key", "docker_volume_size": 10, "labels": labels,
        "master_flavor_id": "m1.medium", "flavor_id": "m1.small", "health_status": "HEALTHY",
        "health_status_reason": "{}", "fixed_network": None, "fixed_subnet": None,
        "floating_ip_enabled": True, "master_lb_enabled": True,
        "etcd_ca_cert_ref": uid("etcd-ca", i), "front_proxy_ca_cert_ref": uid("fp-ca", i),
    })
    for role, flavor, count, first in (("master", "m1.medium", 1, 10), ("worker", "m1.small", 2, 20)):
        nodegroup_rows.append({
            "created_at": NOW, "updated_at": NOW, "uuid": uid("nodegroup", i, role),
            "name": f"default-{role}", "cluster_id": cu, "project_id": project,
            "docker_volume_size": 10, "labels": labels, "flavor_id": flavor,
            "image_id": "fedora-coreos-40",
            "node_addresses": json.dumps([f"{ip}.{first + n}" for n in range(count)]),
            "node_count": count, "max_node_count": None, "min_node_count": 0, "role": role,
            "is_default": True, "stack_id": stack, "status": "CREATE_COMPLETE",
            "status_reason": None, "version": None, "node_labels": "{}", "node_taints": "[]",
        })

sys.stdout.write(insert("cluster_template", [template]))
sys.stdout.write(insert("cluster", cluster_rows))
sys.stdout.write(insert("nodegroup", nodegroup_rows))
