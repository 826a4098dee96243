"""The magnum.conf openstack-helm's magnum chart writes, rendered without helm.

helm is not installed here, so this does what the chart does at render time: start from the
chart's `conf.magnum` defaults, fill the options its configmap-etc.yaml computes from
`endpoints` (Keystone, memcached, the database, the transport, the API port, the trustee),
apply an operator's overrides (the TLS settings openstack-helm's messaging-tls overrides set
for other services) and print the result as helm-toolkit's `utils.to_oslo_conf` does:
sections and keys in sorted order (Go templates range over maps that way), lists joined with
commas, `{type: multistring, values: [...]}` one line per value, nil values left out.

The chart's values are facts read from openstack-helm (commit 0ee5ade, chart 2026.1.0,
appVersion 22.0.0): option names and their values, not the chart's text.

    helm_conf.py --db-url URL --transport-url URL --keystone-url URL --api-port N
                 --memcached HOST:PORT --ssl-dir DIR [--keystone-auth] > magnum.conf
"""

import argparse
import sys

# conf.magnum in the chart's values.yaml (None is YAML's null).
CHART_CONF = {
    "DEFAULT": {"log_config_append": "/etc/magnum/logging.conf", "transport_url": None},
    "cluster": {"temp_cache_dir": "/var/lib/magnum/certificate-cache"},
    "capi-helm": {"kubeconfig_file": "/etc/magnum/kubeconfig.conf"},
    "oslo_messaging_rabbit": {
        "amqp_durable_queues": True,
        "rabbit_quorum_queues": True,
        "rabbit_transient_quorum_queue": True,
        "use_queue_manager": True,
    },
    "oslo_messaging_notifications": {"driver": "messaging"},
    "oslo_concurrency": {"lock_path": "/var/lock"},
    "oslo_policy": {"policy_file": "/etc/magnum/policy.yaml"},
    "certificates": {"cert_manager_type": "barbican"},
    "database": {"max_retries": -1, "connection": ""},
    "trust": {"trustee_domain_name": None},
    "keystone_authtoken": {
        "auth_type": "password",
        "auth_version": "v3",
        "memcache_security_strategy": "ENCRYPT",
        "service_type": "container-infra",
    },
    "api": {"port": None, "host": "0.0.0.0"},
}

# endpoints.identity.auth.magnum and .magnum_stack_user in values.yaml.
MAGNUM_USER = {
    "region_name": "RegionOne",
    "username": "magnum",
    "password": "password",
    "project_name": "service",
    "user_domain_name": "service",
    "project_domain_name": "service",
}
STACK_USER = {"username": "magnum-domain", "password": "password", "domain_name": "magnum"}


def go_str(value):
    """A scalar as Go's template printing writes it."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def to_oslo_conf(conf):
    out = []
    for section in sorted(conf):
        values = conf[section]
        if not isinstance(values, dict):
            continue
        out.append(f"[{section}]")
        for key in sorted(values):
            value = values[key]
            if isinstance(value, list):
                out.append(f"{key} = {','.join(go_str(v) for v in value)}")
            elif isinstance(value, dict):
                if value.get("type") == "multistring":
                    out.extend(f"{key} = {go_str(v)}" for v in value["values"])
                elif value.get("type") == "csv":
                    out.append(f"{key} = {','.join(go_str(v) for v in value['values'])}")
            elif value is None:
                continue
            else:
                out.append(f"{key} = {go_str(value)}")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser()
    for name in ("db-url", "transport-url", "keystone-url", "api-port", "memcached", "ssl-dir"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--memcache-secret-key", default="helm-random-alnum-64")
    # An operator's override: the chart writes no [keystone_auth], which magnumd's Barbican
    # certificate store needs (upstream uses the caller's token there).
    p.add_argument("--keystone-auth", action="store_true")
    a = p.parse_args()
    conf = {k: dict(v) for k, v in CHART_CONF.items()}
    # What configmap-etc.yaml fills in when the value is empty.
    ka = conf["keystone_authtoken"]
    ka["auth_uri"] = a.keystone_url
    ka["auth_url"] = a.keystone_url
    ka.update(MAGNUM_USER)
    ka["memcached_servers"] = a.memcached
    ka["memcache_secret_key"] = a.memcache_secret_key
    conf["database"]["connection"] = a.db_url
    conf["DEFAULT"]["transport_url"] = a.transport_url
    conf["api"]["port"] = int(a.api_port)
    conf["trust"]["trustee_domain_name"] = STACK_USER["domain_name"]
    conf["trust"]["trustee_domain_admin_name"] = STACK_USER["username"]
    conf["trust"]["trustee_domain_admin_password"] = STACK_USER["password"]
    # The operator's TLS override, as openstack-helm's messaging-tls values set it.
    conf["oslo_messaging_rabbit"].update(
        {
            "ssl": True,
            "ssl_ca_file": f"{a.ssl_dir}/ca.pem",
            "ssl_cert_file": f"{a.ssl_dir}/client.pem",
            "ssl_key_file": f"{a.ssl_dir}/client.key",
        }
    )
    if a.keystone_auth:
        conf["keystone_auth"] = {
            "auth_type": "password",
            "auth_url": a.keystone_url,
            "username": MAGNUM_USER["username"],
            "password": MAGNUM_USER["password"],
            "project_name": MAGNUM_USER["project_name"],
            "user_domain_name": MAGNUM_USER["user_domain_name"],
            "project_domain_name": MAGNUM_USER["project_domain_name"],
        }
    sys.stdout.write(to_oslo_conf(conf))


if __name__ == "__main__":
    main()
