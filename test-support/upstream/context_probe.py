"""Serves the conductor topic of CONF with upstream Magnum 23.0.0's own RPC server setup
(magnum.common.rpc, its context serializer and MagnumObjectSerializer) and answers the first
`cluster_create` cast by acting for the user as upstream's conductor does: it builds
upstream's KeystoneClientV3 from the received context (auth_token + auth_token_info) and reads
the caller's own user from Keystone with it. Writes one JSON line to OUT and exits.

    context_probe.py CONF OUT

OUT gets {"ready": true} once the server listens, then
{"method", "user_id", "token_sent", "token_info_sent", "keystone_user_name"} or {"error"}.
"""
import json
import sys
import threading
import warnings

warnings.simplefilter("ignore")


def main(conf, out):
    import oslo_messaging as messaging

    import magnum.conf
    from magnum.common import keystone, rpc
    from magnum import objects  # noqa: F401  (registers the object classes)
    from magnum.objects import base as objects_base

    CONF = magnum.conf.CONF
    CONF(["--config-file", conf], project="magnum")
    rpc.init(CONF)
    done = threading.Event()

    def write(doc):
        with open(out, "a") as f:
            f.write(json.dumps(doc) + "\n")

    class Probe:
        target = messaging.Target(version="1.9")

        def cluster_create(self, context, **kwargs):
            try:
                client = keystone.KeystoneClientV3(context)
                user = client.client.get_user(context.user_id)
                write({"method": "cluster_create", "user_id": context.user_id,
                       "token_sent": bool(context.auth_token),
                       "token_info_sent": bool(context.auth_token_info),
                       "keystone_user_name": user.name})
            except Exception as e:
                write({"error": "%s: %s" % (type(e).__name__, e)})
            done.set()

    target = messaging.Target(topic=CONF.conductor.topic, server=CONF.host)
    server = rpc.get_server(target, [Probe()],
                            serializer=objects_base.MagnumObjectSerializer())
    server.start()
    write({"ready": True})
    done.wait(120)
    server.stop()


if __name__ == "__main__":
    try:
        main(*sys.argv[1:3])
    except Exception as e:
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}) + "\n")
        sys.exit(1)
