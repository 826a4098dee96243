"""Writes a cluster's four certificates with upstream Magnum 23.0.0's own code and Barbican
store, as upstream's conductor does at cluster create, and prints the references.

    barbican_certs.py CONF NAME

CONF is a magnum.conf with [keystone_auth] (the service user), [barbican_client]
region_name and [certificates] cert_manager_type = barbican. Prints one JSON line:
{"ca_cert_ref", "etcd_ca_cert_ref", "front_proxy_ca_cert_ref", "magnum_cert_ref"}; on failure
{"error"} and exit 1.
"""
import json
import sys
import types
import warnings

warnings.simplefilter("ignore")


def main(conf, name):
    from magnum.common import context
    from magnum.conductor.handlers.common import cert_manager
    import magnum.conf

    magnum.conf.CONF(["--config-file", conf], project="magnum")
    # Upstream's handler takes a Cluster object; it reads name and uuid and sets the refs.
    cluster = types.SimpleNamespace(name=name, uuid=None)
    cert_manager.generate_certificates_to_cluster(cluster, context=context.make_admin_context())
    print(json.dumps({k: getattr(cluster, k) for k in (
        "ca_cert_ref", "etcd_ca_cert_ref", "front_proxy_ca_cert_ref", "magnum_cert_ref")}))


if __name__ == "__main__":
    try:
        main(*sys.argv[1:3])
    except Exception as e:  # one line for the test to show
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
        sys.exit(1)
