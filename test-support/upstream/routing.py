"""Routing answers of upstream Magnum 23.0.0's API against magnum-rs's, request by request.

Upstream's own WSGI application (pecan, WSME, its hooks and error middleware, as
`magnum.api.app.setup_app` builds it) runs in this process on the same SQLite database as the
magnumd under test, without Keystone: both trust the X-Roles/X-Project-Id/X-User-Id headers
(magnumd with `auth_strategy = noauth`). Every method on a set of paths (collections, items,
details, actions, nodegroups, unknown resources, paths one segment too deep), at three
microversions and with and without a JSON Accept header, must give the same status and the
same body (request ids aside).

    routing.py <magnumd base URL> <sqlite file>

Prints one line per difference and `routing: N compared, M differ` last; exits 1 if any
difference is not one of KNOWN below.
"""

import io
import json
import re
import sys
import urllib.error
import urllib.request

# Differences kept on purpose (docs/compatibility.md): pecan hands a POST's extra path segment
# to the controller as its body argument, and WSME then fails to convert it.
KNOWN = [
    ("POST", re.compile(r"^/v1/(clusters|quotas|clustertemplates)/[^/]+$")),
    # Extra segments on a write: pecan passes them as arguments to whichever handler
    # takes the method, with answers (400, 404, 405, 500) that depend on its signature.
    ("PATCH", re.compile(r"^/v1/[^/]+/[^/]+/.+$")),
    ("POST", re.compile(r"^/v1/certificates/[^/]+/.+$")),
]

HEADERS = {"X-Roles": "admin", "X-Project-Id": "p", "X-User-Id": "u"}


def upstream_app(sqlite):
    from magnum.common import service

    service.prepare_service(["magnum-api"])
    from magnum import conf

    conf.CONF.set_override("connection", f"sqlite:///{sqlite}", group="database")
    conf.CONF.set_override("transport_url", "fake:/")
    from magnum.common import rpc

    rpc.init(conf.CONF)
    from magnum.api import app

    return app.setup_app()


def call_upstream(app, method, path, version, accept, body):
    env = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "9511",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "wsgi.errors": io.StringIO(),
    }
    for k, v in HEADERS.items():
        env["HTTP_" + k.upper().replace("-", "_")] = v
    if version:
        env["HTTP_OPENSTACK_API_VERSION"] = version
    if accept:
        env["HTTP_ACCEPT"] = accept
    status = []
    out = b"".join(app(env, lambda s, h, *a: status.append(s)))
    return int(status[0].split()[0]), out


def call_ours(base, method, path, version, accept, body):
    req = urllib.request.Request(
        base + path, data=body if method != "GET" else None, method=method
    )
    req.add_header("Content-Type", "application/json")
    for k, v in HEADERS.items():
        req.add_header(k, v)
    if version:
        req.add_header("OpenStack-API-Version", version)
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def normalised(raw):
    try:
        v = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
    if isinstance(v, dict):
        for e in v.get("errors", []):
            e.pop("request_id", None)
    return v


PATHS = [
    "/v1/clusters", "/v1/clusters/x", "/v1/clusters/detail", "/v1/clusters/x/detail",
    "/v1/clusters/6b4c3d1e-8f7a-4b2c-9d0e-1f2a3b4c5d6e/detail", "/v1/clusters/x/y/z",
    "/v1/clusters/x/actions/resize", "/v1/clusters/x/actions/upgrade",
    "/v1/clusters/x/actions/nope", "/v1/clusters/x/nodegroups",
    "/v1/clusters/x/nodegroups/y", "/v1/clusters/x/nodegroups/y/z",
    "/v1/clustertemplates", "/v1/clustertemplates/x", "/v1/clustertemplates/detail",
    "/v1/clustertemplates/x/detail", "/v1/federations", "/v1/federations/x",
    "/v1/certificates", "/v1/certificates/x/y", "/v1/credentials", "/v1/credentials/x",
    "/v1/quotas", "/v1/quotas/demo", "/v1/quotas/demo/Cluster", "/v1/quotas/a/b/c",
    "/v1/stats", "/v1/stats/x", "/v1/mservices", "/v1/mservices/x", "/v1/nope", "/nope",
    "/v1/bays", "/v1/baymodels",
]


def main():
    base, sqlite = sys.argv[1], sys.argv[2]
    app = upstream_app(sqlite)
    compared = differ = 0
    for method in ["GET", "PUT", "POST", "PATCH", "DELETE"]:
        for path in PATHS:
            # Writes that would reach a handler need bodies of their own; those are the
            # API tests' business, not routing's.
            if method in ("POST", "PATCH", "DELETE") and path in (
                "/v1/clusters", "/v1/clustertemplates", "/v1/federations",
                "/v1/certificates", "/v1/quotas", "/v1/clusters/x/nodegroups",
                "/v1/clusters/x", "/v1/clustertemplates/x", "/v1/federations/x",
                "/v1/quotas/demo/Cluster", "/v1/clusters/x/nodegroups/y",
                "/v1/clusters/x/actions/resize", "/v1/clusters/x/actions/upgrade",
                "/v1/credentials/x",
            ):
                continue
            body = b"{}" if method != "GET" else b""
            for version in ["container-infra latest", "container-infra 1.8", None]:
                for accept in ["application/json", None]:
                    a = call_upstream(app, method, path, version, accept, body)
                    b = call_ours(base, method, path, version, accept, body)
                    compared += 1
                    if a[0] == b[0] and normalised(a[1]) == normalised(b[1]):
                        continue
                    if any(m == method and p.match(path) for m, p in KNOWN):
                        continue
                    differ += 1
                    print(f"{method} {path} [{version}] Accept={accept}\n"
                          f"  upstream {a[0]} {a[1][:300]!r}\n  ours     {b[0]} {b[1][:300]!r}")
    print(f"routing: {compared} compared, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
