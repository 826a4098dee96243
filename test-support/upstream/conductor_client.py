"""Upstream Magnum's conductor RPC client as a peer of magnum-rs's conductor.

Usage: conductor_client.py CONFIG_FILE CLUSTER_UUID (run with the venv of setup-venv.sh).

Sets up configuration and the RPC transport exactly as upstream's services do
(magnum.common.service.prepare_service: control_exchange defaults to 'magnum', the config
file's [DEFAULT] control_exchange/transport_url/rpc_response_timeout and [conductor] topic
apply), loads the cluster with magnum.objects.Cluster.get_by_uuid from [database]
connection, then through magnum.conductor.api.API:
  get_ca_certificate(cluster, ca_cert_type=None)      (a call)
  sign_certificate(cluster, Certificate(csr=...))     (a call; the CSR is made here)
  cluster_delete_async(uuid)                          (a cast)
and prints one JSON document:
  {"cluster": {"uuid", "status", "project_id", "user_id"}, "ca_pem", "ca_cert_type",
   "signed_pem", "signed_cluster_uuid", "delete_cast": true}
On failure it prints {"error": "<Class>: <message>", "step": ...} and exits 1.
"""

import json
import sys
import warnings

warnings.simplefilter("ignore")

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from magnum.common import context as magnum_context  # noqa: E402
from magnum.common import rpc  # noqa: E402
from magnum.common import service as magnum_service  # noqa: E402
from magnum.conductor import api as conductor_api  # noqa: E402
import magnum.conf  # noqa: E402
from magnum import objects  # noqa: E402

CONF = magnum.conf.CONF


def make_csr():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "upstream-client"),
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                ]
            )
        )
        .sign(key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM).decode()


def main():
    conf_file, uuid = sys.argv[1], sys.argv[2]
    magnum_service.prepare_service(["conductor_client", "--config-file", conf_file])
    out = {}
    step = "load"
    try:
        admin = magnum_context.make_admin_context(all_tenants=True)
        cluster = objects.Cluster.get_by_uuid(admin, uuid)
        out["cluster"] = {
            "uuid": cluster.uuid,
            "status": cluster.status,
            "project_id": cluster.project_id,
            "user_id": cluster.user_id,
        }
        # A project-scoped context as upstream's API builds one from a token (without the
        # token itself: the conductor's CA handlers never call Keystone).
        ctx = magnum_context.make_context(
            user_id=cluster.user_id,
            user_name=cluster.user_id,
            project_id=cluster.project_id,
            roles=["member", "reader"],
            is_admin=False,
            request_id="req-upstream-conductor-client",
        )
        # The API class binds its default topic when magnum.conductor.api is imported,
        # before the configuration is read: pass the configured one explicitly.
        api = conductor_api.API(context=ctx, topic=CONF.conductor.topic)
        step = "get_ca_certificate"
        ca = api.get_ca_certificate(cluster, ca_cert_type=None)
        out["ca_pem"] = ca.pem
        out["ca_cert_type"] = ca.ca_cert_type if ca.obj_attr_is_set("ca_cert_type") else None
        step = "sign_certificate"
        cert = objects.Certificate.from_object_cluster(cluster)
        cert.csr = make_csr()
        signed = api.sign_certificate(cluster, cert)
        out["signed_pem"] = signed.pem
        out["signed_cluster_uuid"] = signed.cluster_uuid
        step = "cluster_delete_async"
        api.cluster_delete_async(uuid)
        out["delete_cast"] = True
    except Exception as e:  # noqa: BLE001
        out.update({"error": "%s: %s" % (type(e).__name__, e), "step": step})
        print(json.dumps(out))
        sys.stdout.flush()
        rpc.cleanup()
        sys.exit(1)
    rpc.cleanup()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
