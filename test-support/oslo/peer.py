"""Python oslo.messaging peers for magnum-rs's interop tests.

    peer.py client URL EXCHANGE TOPIC     ops (JSON list) on stdin, one JSON line per op out
    peer.py server URL EXCHANGE TOPIC ID  RPC server; one JSON line per request received
    peer.py listen URL EXCHANGE TOPIC     notification listener; one JSON line per event

Servers print "READY" once consuming and run until stdin closes. Everything goes through
the public oslo.messaging API exactly as a Python Magnum process uses it (rabbit driver,
JSON serialization, context as a dict). Run with test-support/oslo/stub on PYTHONPATH so
failures from module magnum.common.exception can be rebuilt.
"""

import json
import logging
import os
import sys
import threading

from oslo_config import cfg
import oslo_messaging as messaging

from magnum.common import exception

OUT = threading.Lock()


def emit(obj):
    with OUT:
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
        sys.stdout.flush()


def context():
    """The 25 keys a Python magnum-api sends (spec section 9.1), with a token."""
    return {
        "user": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "project_id": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
        "system_scope": None,
        "project": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
        "domain": None,
        "user_domain": "default",
        "project_domain": None,
        "is_admin": False,
        "read_only": False,
        "show_deleted": False,
        "auth_token": "gAAAAAB-python-token",
        "request_id": "req-11111111-2222-3333-4444-555555555555",
        "global_request_id": None,
        "resource_uuid": None,
        "roles": ["member", "reader"],
        "user_identity": "0f1e2d3c4b5a69788796a5b4c3d2e1f0 "
                         "a1b2c3d4e5f60718293a4b5c6d7e8f90 - default -",
        "is_admin_project": True,
        "auth_url": "https://keystone.example.org/v3",
        "user_domain_id": "default",
        "user_domain_name": "Default",
        "user_name": "alice",
        "user_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "project_name": "team-a",
        "auth_token_info": None,
        "all_tenants": False,
    }


def conf():
    # The global CONF, as Magnum uses it: oslo.messaging registers some options only there.
    cfg.CONF([], project="magnum-rs-interop")
    return cfg.CONF


def describe(e):
    return {
        "type": type(e).__name__,
        "module": type(e).__module__,
        "first_line": str(e).split("\n")[0],
        "is_magnum": isinstance(e, exception.MagnumException),
        "is_cluster_not_found": isinstance(e, exception.ClusterNotFound),
        "code": getattr(e, "code", None),
        "kwargs": getattr(e, "kwargs", None),
        "exc_type": getattr(e, "exc_type", None),
        "value": getattr(e, "value", None),
    }


def client(url, exchange, topic):
    transport = messaging.get_rpc_transport(
        conf(), url=url, allowed_remote_exmods=["magnum.common.exception"])
    rpc = messaging.get_rpc_client(
        transport, messaging.Target(exchange=exchange, topic=topic))
    for op in json.load(sys.stdin):
        prepare = {"timeout": op.get("timeout", 10)}
        for key in ("version", "server", "call_monitor_timeout"):
            if op.get(key):
                prepare[key] = op[key]
        cctx = rpc.prepare(**prepare)
        try:
            if op["kind"] == "cast":
                cctx.cast(context(), op["method"], **op.get("args", {}))
                emit({"ok": None})
            else:
                emit({"ok": cctx.call(context(), op["method"], **op.get("args", {}))})
        except Exception as e:  # noqa: BLE001 - every failure is reported to the test
            emit({"error": describe(e)})
    transport.cleanup()


class Conductor:
    """Answers like a conductor would, and reports every request."""

    def _seen(self, ctxt, method, kwargs):
        emit({"method": method, "args": kwargs, "context": ctxt})

    def cluster_delete(self, ctxt, **kwargs):
        self._seen(ctxt, "cluster_delete", kwargs)

    def sign_certificate(self, ctxt, **kwargs):
        self._seen(ctxt, "sign_certificate", kwargs)
        return {"pem": "py:" + kwargs.get("csr", "")}

    def get_ca_certificate(self, ctxt, **kwargs):
        self._seen(ctxt, "get_ca_certificate", kwargs)
        raise exception.ClusterNotFound(cluster=kwargs.get("cluster_uuid"))

    def ping_conductor(self, ctxt, **kwargs):
        self._seen(ctxt, "ping_conductor", kwargs)
        return True


def wait_for_stdin_eof():
    for _ in sys.stdin:
        pass


def server(url, exchange, topic, server_id):
    transport = messaging.get_rpc_transport(conf(), url=url)
    target = messaging.Target(exchange=exchange, topic=topic, server=server_id)
    srv = messaging.get_rpc_server(
        transport, target, [Conductor()], executor="threading")
    srv.start()
    emit("READY")
    wait_for_stdin_eof()
    srv.stop()
    srv.wait()
    transport.cleanup()


class Events:
    def _seen(self, priority, ctxt, publisher_id, event_type, payload, metadata):
        emit({"priority": priority, "context": ctxt, "publisher_id": publisher_id,
              "event_type": event_type, "payload": payload, "metadata": metadata})

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._seen("info", ctxt, publisher_id, event_type, payload, metadata)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._seen("error", ctxt, publisher_id, event_type, payload, metadata)


def listen(url, exchange, topic):
    transport = messaging.get_notification_transport(conf(), url=url)
    listener = messaging.get_notification_listener(
        transport, [messaging.Target(exchange=exchange, topic=topic)], [Events()],
        executor="threading")
    listener.start()
    emit("READY")
    wait_for_stdin_eof()
    listener.stop()
    listener.wait()
    transport.cleanup()


def main():
    # oslo logs every failure it sends back, which the tests provoke on purpose.
    level = logging.DEBUG if os.environ.get("MAGNUM_TEST_OSLO_DEBUG") else logging.CRITICAL
    logging.basicConfig(level=level, stream=sys.stderr)
    mode, args = sys.argv[1], sys.argv[2:]
    {"client": client, "server": server, "listen": listen}[mode](*args)


if __name__ == "__main__":
    main()
