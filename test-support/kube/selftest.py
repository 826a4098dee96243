#!/usr/bin/env python3
"""Self-test of the Kubernetes API server stand-in (apiserver.py).

Starts a server through `start.sh DIR --no-controller` in a temporary folder, checks every
behaviour README.md promises over real HTTPS with the client certificate, prints one line per
check and then "selftest: N checks passed", and stops the server. Exits non-zero when any check
fails. The mode follows MAGNUM_TEST_CAPI_CRDS as start.sh does: with the CRD folder the schema
checks run, with MAGNUM_TEST_CAPI_CRDS=/nonexistent the schema-less mode is checked instead.

    selftest.py [--keep] [--bench SECONDS]

--bench also measures requests/s (GET of one object; list of 100 objects with a label
selector) with two client processes on keep-alive connections.
"""

import argparse
import base64
import http.client
import json
import multiprocessing
import os
import queue
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
NS = "magnum-system"
CAPI = "/apis/cluster.x-k8s.io"
CL2 = "%s/v1beta2/namespaces/%s/clusters" % (CAPI, NS)
CL1 = "%s/v1beta1/namespaces/%s/clusters" % (CAPI, NS)
MD2 = "%s/v1beta2/namespaces/%s/machinedeployments" % (CAPI, NS)
CM = "/api/v1/namespaces/%s/configmaps" % NS
SEC = "/api/v1/namespaces/%s/secrets" % NS
MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


# ---------------------------------------------------------------------------------------------
# a small HTTPS client


class Resp:
    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers
        self.raw = raw
        try:
            self.json = json.loads(raw) if raw else None
        except ValueError:
            self.json = None

    @property
    def warnings(self):
        return self.headers.get_all("Warning") or []

    def __repr__(self):
        return "%d %s" % (self.status, self.raw[:600].decode(errors="replace"))


class Client:
    def __init__(self, url, ca, cert=None, key=None, token=None):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=ca)
        if cert:
            self.ctx.load_cert_chain(cert, key)
        self.token = token
        self.conn = None
        self.connects = 0

    def new_conn(self, timeout=30):
        self.connects += 1
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def headers(self, extra=None):
        h = {"Accept": "application/json", "User-Agent": "selftest/1"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(extra or {})
        return h

    def req(self, method, path, body=None, ctype="application/json", headers=None):
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        h = self.headers(headers)
        if body is not None:
            h["Content-Type"] = ctype
        for attempt in range(2):
            if self.conn is None:
                self.conn = self.new_conn()
            try:
                self.conn.request(method, path, body=body, headers=h)
                r = self.conn.getresponse()
                raw = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return Resp(r.status, r.headers, raw)
            except (http.client.RemoteDisconnected, ConnectionError, BrokenPipeError, ssl.SSLError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.req("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.req("PUT", path, body, **kw)

    def patch(self, path, body, ctype=MERGE, **kw):
        return self.req("PATCH", path, body, ctype=ctype, **kw)

    def delete(self, path, body=None, **kw):
        return self.req("DELETE", path, body, **kw)


class Stream:
    """A watch on its own connection; a thread reads lines into a queue with arrival times."""

    def __init__(self, client, path, timeout=60, headers=None):
        self.conn = client.new_conn(timeout=timeout)
        self.conn.request("GET", path, headers=client.headers(headers))
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.q = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                self.q.put((time.monotonic(), json.loads(line)))
        except Exception as e:  # the test closed it, or the server dropped it
            self.q.put((time.monotonic(), {"type": "_error", "error": repr(e)}))
        self.q.put((time.monotonic(), None))

    def next(self, timeout=5.0, stamped=False):
        try:
            t, ev = self.q.get(timeout=timeout)
        except queue.Empty:
            return (None, "timeout") if stamped else "timeout"
        return (t, ev) if stamped else ev

    def collect(self, n, timeout=5.0):
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            ev = self.next(max(0.01, deadline - time.monotonic()))
            if ev in ("timeout", None):
                break
            out.append(ev)
        return out

    def close(self):
        try:
            self.conn.sock.shutdown(2)
        except (OSError, AttributeError):
            pass
        self.conn.close()


# ---------------------------------------------------------------------------------------------
# checks


class T:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print("ok   %s" % name, flush=True)
        else:
            self.failed.append(name)
            print("FAIL %s: %s" % (name, str(detail)[:1500]), flush=True)
        return ok


def meta(r):
    return (r.json or {}).get("metadata") or {}


def status_ok(r, code, reason=None):
    j = r.json or {}
    return r.status == code and j.get("kind") == "Status" and (reason is None or j.get("reason") == reason) \
        and j.get("code") == code and r.headers.get("Content-Type", "").startswith("application/json")


def wait_for(fn, timeout=5.0, step=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)


def cluster_v1beta2(name, replicas=3, labels=None):
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {"magnum.openstack.org/cluster": name}},
            "spec": {"topology": {"classRef": {"name": "magnum-v1"}, "version": "v1.30.2",
                                  "controlPlane": {"replicas": replicas},
                                  "workers": {"machineDeployments": [
                                      {"class": "default-worker", "name": "md-0", "replicas": 2}]}}}}


def cluster_v1beta1(name):
    return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"topology": {"class": "magnum-v1", "version": "v1.29.4",
                                  "controlPlane": {"replicas": 1},
                                  "workers": {"machineDeployments": [
                                      {"class": "default-worker", "name": "md-0", "replicas": 1}]}}}}


def machine_deployment(name, replicas=2):
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"clusterName": "c1", "replicas": replicas,
                     "selector": {"matchLabels": {"md": name}},
                     "template": {"metadata": {"labels": {"md": name}},
                                  "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "boot"},
                                           "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                                 "kind": "OpenStackMachineTemplate",
                                                                 "name": name}}}}}


def configmap(name, labels=None, data=None, **meta_extra):
    m = {"name": name}
    if labels:
        m["labels"] = labels
    m.update(meta_extra)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": m, "data": data or {"k": "v"}}


def test_auth(t, env, c):
    anon = Client(env["MAGNUM_TEST_KUBE_URL"], env["MAGNUM_TEST_KUBE_CA"])
    r = anon.get("/api/v1/namespaces")
    t.check("auth: no client certificate -> 401 Unauthorized Status", status_ok(r, 401, "Unauthorized"), r)
    bearer = Client(env["MAGNUM_TEST_KUBE_URL"], env["MAGNUM_TEST_KUBE_CA"], token=env["MAGNUM_TEST_KUBE_TOKEN"])
    r = bearer.get("/api/v1/namespaces/" + NS)
    t.check("auth: Authorization: Bearer <token from DIR/token> -> 200", r.status == 200, r)
    bad = Client(env["MAGNUM_TEST_KUBE_URL"], env["MAGNUM_TEST_KUBE_CA"], token="wrong")
    t.check("auth: a wrong bearer token -> 401", bad.get("/api/v1/namespaces").status == 401)
    r = c.get("/api/v1/namespaces/" + NS)
    t.check("auth: client certificate (CN=magnum-rs) -> 200; start.sh created namespace magnum-system",
            r.status == 200 and (r.json or {}).get("status", {}).get("phase") == "Active", r)


def test_discovery(t, c, schema):
    r = c.get("/api")
    t.check("discovery: /api lists v1", r.status == 200 and r.json.get("versions") == ["v1"], r)
    r = c.get("/api/v1")
    names = {x["name"]: x for x in (r.json or {}).get("resources", [])}
    t.check("discovery: /api/v1 has namespaces (cluster-scoped), secrets, configmaps, events",
            r.json.get("kind") == "APIResourceList" and names.get("namespaces", {}).get("namespaced") is False
            and all(names.get(n, {}).get("namespaced") for n in ("secrets", "configmaps", "events")), r)
    r = c.get("/apis")
    groups = {g["name"]: g for g in (r.json or {}).get("groups", [])}
    capi = groups.get("cluster.x-k8s.io", {})
    t.check("discovery: /apis has the CAPI groups, cluster.x-k8s.io preferring v1beta2",
            r.json.get("kind") == "APIGroupList" and capi.get("preferredVersion", {}).get("version") == "v1beta2"
            and [v["version"] for v in capi.get("versions", [])] == ["v1beta2", "v1beta1"]
            and {"infrastructure.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io",
                 "addons.cluster.x-k8s.io", "coordination.k8s.io"} <= set(groups), r)
    r = c.get("/apis/infrastructure.cluster.x-k8s.io")
    t.check("discovery: /apis/{group} is an APIGroup (CAPO: v1beta1)",
            r.json.get("kind") == "APIGroup" and r.json["preferredVersion"]["version"] == "v1beta1", r)
    r = c.get("/apis/cluster.x-k8s.io/v1beta2")
    names = {x["name"]: x for x in (r.json or {}).get("resources", [])}
    cl = names.get("clusters", {})
    t.check("discovery: /apis/cluster.x-k8s.io/v1beta2 has clusters (kind, singularName, verbs), "
            "clusters/status, machinedeployments/scale (autoscaling/v1 Scale)",
            cl.get("kind") == "Cluster" and cl.get("singularName") == "cluster" and cl.get("namespaced") is True
            and {"get", "list", "watch", "create", "update", "patch", "delete"} <= set(cl.get("verbs", []))
            and "clusters/status" in names and names.get("machinedeployments/scale", {}).get("kind") == "Scale"
            and names["machinedeployments/scale"].get("group") == "autoscaling"
            and "clusters/scale" not in names, r)
    t.check("discovery: short names from the CRDs (cl, md)" if schema else
            "discovery: the built-in kind list serves the 15 CAPI/CAPO kinds",
            (cl.get("shortNames") == ["cl"] and names.get("machinedeployments", {}).get("shortNames") == ["md"])
            if schema else sum(1 for n in names if "/" not in n) == 6, names.keys())
    r = c.get("/apis/coordination.k8s.io/v1")
    t.check("discovery: /apis/coordination.k8s.io/v1 has leases",
            any(x["name"] == "leases" for x in (r.json or {}).get("resources", [])), r)
    agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    r = c.get("/apis", headers={"Accept": agg})
    items = {i["metadata"]["name"]: i for i in (r.json or {}).get("items", [])}
    v = (items.get("cluster.x-k8s.io") or {}).get("versions") or [{}]
    res = {x["resource"]: x for x in v[0].get("resources", [])}
    t.check("discovery: aggregated (Accept as=APIGroupDiscoveryList;v=v2) -> apidiscovery.k8s.io/v2 list, "
            "preferred version first, subresources listed",
            r.headers.get("Content-Type") == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            and r.json.get("kind") == "APIGroupDiscoveryList" and v[0].get("version") == "v1beta2"
            and [x["subresource"] for x in res.get("machinedeployments", {}).get("subresources", [])] == ["status", "scale"]
            and res["clusters"]["scope"] == "Namespaced", r)
    r = c.get("/api", headers={"Accept": agg})
    t.check("discovery: aggregated /api -> the core group only",
            [i["metadata"]["name"] for i in r.json.get("items", [])] == [""], r)
    r = c.get("/version")
    t.check("discovery: /version", r.status == 200 and r.json.get("major") == "1" and "gitVersion" in r.json, r)
    ok = all(c.get(p).raw == b"ok" for p in ("/healthz", "/livez", "/readyz"))
    t.check("discovery: /healthz /livez /readyz answer ok", ok)
    r = c.get("/openapi/v2")
    t.check("discovery: /openapi/v2 -> 404 Status", status_ok(r, 404, "NotFound"), r)
    r = c.get("/apis/cluster.x-k8s.io/v1alpha4/namespaces/x/clusters")
    t.check("discovery: unserved version -> 404 'the server could not find the requested resource'",
            status_ok(r, 404) and r.json["message"] == "the server could not find the requested resource", r)


def test_create_get(t, c, schema):
    r = c.post(CL2, cluster_v1beta2("kube-abc12"))
    m = meta(r)
    t.check("create: v1beta2 Cluster with topology.classRef/version/controlPlane.replicas/workers -> 201",
            r.status == 201 and r.json["spec"]["topology"]["classRef"]["name"] == "magnum-v1", r)
    t.check("create: uid, creationTimestamp, resourceVersion (integer string), generation 1 set",
            re.fullmatch(r"[0-9a-f-]{36}", m.get("uid", "")) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                                                                              m.get("creationTimestamp", ""))
            and m.get("resourceVersion", "").isdigit() and m.get("generation") == 1, m)
    body = cluster_v1beta2("kube-status")
    body["status"] = {"phase": "Provisioned"}
    r = c.post(CL2, body)
    t.check("create: status is dropped on create (status subresource)", r.status == 201 and "status" not in r.json, r)
    r = c.post(CL2, cluster_v1beta2("kube-abc12"))
    t.check("create: again -> 409 AlreadyExists 'clusters.cluster.x-k8s.io \"kube-abc12\" already exists'",
            status_ok(r, 409, "AlreadyExists") and r.json["message"] == 'clusters.cluster.x-k8s.io "kube-abc12" already exists'
            and r.json["details"] == {"name": "kube-abc12", "group": "cluster.x-k8s.io", "kind": "clusters"}, r)
    r = c.get(CL2 + "/kube-abc12")
    t.check("get: 200 with the object", r.status == 200 and meta(r).get("name") == "kube-abc12"
            and r.json.get("kind") == "Cluster" and r.json.get("apiVersion") == "cluster.x-k8s.io/v1beta2", r)
    r = c.get(CL2 + "/kube-nope1")
    t.check("get: missing -> 404 NotFound 'clusters.cluster.x-k8s.io \"kube-nope1\" not found' with details",
            status_ok(r, 404, "NotFound") and r.json["message"] == 'clusters.cluster.x-k8s.io "kube-nope1" not found'
            and r.json["details"] == {"name": "kube-nope1", "group": "cluster.x-k8s.io", "kind": "clusters"}, r)
    r = c.get("/api/v1/namespaces/%s/secrets/nope" % NS)
    t.check("get: core kind missing -> 'secrets \"nope\" not found' (no group)",
            r.status == 404 and r.json["message"] == 'secrets "nope" not found' and "group" not in r.json["details"], r)
    body = cluster_v1beta2("x")
    del body["metadata"]["namespace"]
    r = c.post("%s/v1beta2/namespaces/nowhere/clusters" % CAPI, body)
    t.check("create: in a missing namespace -> 404 'namespaces \"nowhere\" not found'",
            status_ok(r, 404, "NotFound") and r.json["message"] == 'namespaces "nowhere" not found'
            and r.json["details"] == {"name": "nowhere", "kind": "namespaces"}, r)
    b = configmap("")
    del b["metadata"]["name"]
    b["metadata"]["generateName"] = "gen-"
    r = c.post(CM, b)
    t.check("create: generateName -> name 'gen-' + 5 characters",
            r.status == 201 and re.fullmatch(r"gen-[a-z0-9]{5}", meta(r).get("name", "")), r)
    r = c.post(CM, configmap("Bad_Name"))
    t.check("create: name not a DNS subdomain -> 422 Invalid, cause metadata.name",
            status_ok(r, 422, "Invalid") and r.json["details"]["causes"][0]["field"] == "metadata.name", r)
    r = c.post(CM, configmap("labels-bad", labels={"bad key": "x", "ok": "not valid!"}))
    causes = (r.json or {}).get("details", {}).get("causes", [])
    t.check("create: bad label key and value -> 422 with two metadata.labels causes",
            r.status == 422 and [x["field"] for x in causes] == ["metadata.labels", "metadata.labels"], r)
    r = c.post(CM, dict(configmap("cm-wrong-ver"), apiVersion="v2"))
    t.check("create: apiVersion not matching the URL -> 400 BadRequest", status_ok(r, 400, "BadRequest"), r)
    r = c.post(CM, {"metadata": {}})
    t.check("create: no name or generateName -> 422 metadata.name Required value",
            r.status == 422 and r.json["details"]["causes"][0]["reason"] == "FieldValueRequired", r)
    r = c.post(CM, configmap("cm-rv", resourceVersion="5"))
    t.check("create: with metadata.resourceVersion -> 400", r.status == 400, r)
    pom = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    r = c.get(CL2 + "/kube-abc12", headers={"Accept": pom})
    t.check("get: Accept as=PartialObjectMetadata -> meta.k8s.io/v1 PartialObjectMetadata (kube-rs get_metadata)",
            r.json.get("kind") == "PartialObjectMetadata" and r.json.get("apiVersion") == "meta.k8s.io/v1"
            and "spec" not in r.json and r.json["metadata"]["name"] == "kube-abc12"
            and r.headers["Content-Type"] == pom, r)
    r = c.get(CL2, headers={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
    t.check("list: Accept as=PartialObjectMetadataList -> PartialObjectMetadataList",
            r.json.get("kind") == "PartialObjectMetadataList" and r.json["items"][0]["kind"] == "PartialObjectMetadata"
            and r.json["metadata"]["resourceVersion"].isdigit(), r)
    r = c.get(CL2 + "/kube-abc12", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    t.check("get: Accept as=Table is answered with the plain JSON object",
            r.status == 200 and r.json.get("kind") == "Cluster" and r.headers["Content-Type"] == "application/json", r)
    r = c.get(CL2.replace("clusters", "kubeadmconfigs"))
    t.check("routing: an existing kind at a URL of another group -> 404", r.status == 404, r)
    r = c.post("%s/v1beta2/clusters" % CAPI, cluster_v1beta2("x"))
    t.check("routing: POST to the all-namespaces path -> 405 MethodNotAllowed", status_ok(r, 405, "MethodNotAllowed"), r)


def test_validation(t, c, schema):
    bad = cluster_v1beta2("kube-bad01")
    bad["spec"]["topology"]["controlPlane"]["replicas"] = "three"
    r = c.post(CL2, bad)
    if not schema:
        t.check("schema-less: a Cluster with replicas: \"three\" is accepted (no validation without the CRDs)",
                r.status == 201, r)
        noversion = cluster_v1beta2("kube-bad02")
        del noversion["spec"]["topology"]["version"]
        r = c.post(CL2, noversion)
        t.check("schema-less: a Cluster without topology.version is accepted", r.status == 201, r)
        b = cluster_v1beta2("kube-unk01")
        b["spec"]["foo"] = 1
        r = c.post(CL2, b)
        t.check("schema-less: unknown fields are kept, no warning", r.status == 201 and r.json["spec"].get("foo") == 1
                and not r.warnings, r)
        r = c.get("/readyz?verbose")
        t.check("schema-less: /readyz?verbose says 'crd-schemas: absent, objects not validated'",
                b"crd-schemas: absent, objects not validated" in r.raw, r)
        return
    r = c.get("/readyz?verbose")
    t.check("schema: /readyz?verbose says 'crd-schemas: present'", b"crd-schemas: present" in r.raw, r)
    r = c.post(CL2, bad)
    causes = (r.json or {}).get("details", {}).get("causes", [])
    t.check("schema: replicas: \"three\" -> 422 Invalid, cause FieldValueTypeInvalid spec.topology.controlPlane.replicas",
            status_ok(r, 422, "Invalid") and causes and causes[0]["field"] == "spec.topology.controlPlane.replicas"
            and causes[0]["reason"] == "FieldValueTypeInvalid"
            and r.json["message"].startswith('Cluster.cluster.x-k8s.io "kube-bad01" is invalid: '
                                             'spec.topology.controlPlane.replicas: Invalid value: "string"')
            and r.json["details"]["kind"] == "Cluster", r)
    noversion = cluster_v1beta2("kube-bad02")
    del noversion["spec"]["topology"]["version"]
    r = c.post(CL2, noversion)
    t.check("schema: no topology.version -> 422 'Cluster.cluster.x-k8s.io \"kube-bad02\" is invalid: "
            "spec.topology.version: Required value'",
            status_ok(r, 422, "Invalid") and r.json["message"] ==
            'Cluster.cluster.x-k8s.io "kube-bad02" is invalid: spec.topology.version: Required value'
            and r.json["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value",
                                                 "field": "spec.topology.version"}], r)
    two = cluster_v1beta2("kube-bad03")
    del two["spec"]["topology"]["version"]
    two["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"] = -1
    two["spec"]["topology"]["workers"]["machineDeployments"].append({"class": "x", "name": "md-0"})
    r = c.post(CL2, two)
    fields = sorted(x["field"] for x in (r.json or {}).get("details", {}).get("causes", []))
    t.check("schema: several errors -> one cause each (Required, minimum, duplicate map-list key), message '[..., ...]'",
            r.status == 422 and "spec.topology.version" in fields and
            "spec.topology.workers.machineDeployments[1]" in fields and "[" in r.json["message"], r)
    b = cluster_v1beta2("kube-enum1")
    b["spec"]["topology"]["classRef"]["name"] = "Not_A_DNS_Name"
    r = c.post(CL2, b)
    t.check("schema: pattern mismatch -> 422 FieldValueInvalid spec.topology.classRef.name",
            r.status == 422 and r.json["details"]["causes"][0]["field"] == "spec.topology.classRef.name", r)
    b = cluster_v1beta2("kube-unk01")
    b["spec"]["foo"] = 1
    b["spec"]["topology"]["bar"] = {"x": 1}
    r = c.post(CL2, b)
    t.check("schema: unknown fields pruned, with 'Warning: 299 - \"unknown field \\\"spec.foo\\\"\"' headers",
            r.status == 201 and "foo" not in r.json["spec"] and "bar" not in r.json["spec"]["topology"]
            and '299 - "unknown field \\"spec.foo\\""' in r.warnings
            and '299 - "unknown field \\"spec.topology.bar\\""' in r.warnings, (r, r.warnings))
    b = cluster_v1beta2("kube-unk02")
    b["spec"]["foo"] = 1
    r = c.post(CL2 + "?fieldValidation=Strict", b)
    t.check("schema: fieldValidation=Strict + unknown field -> 400 BadRequest 'strict decoding error: unknown field \"spec.foo\"'",
            status_ok(r, 400, "BadRequest") and 'strict decoding error: unknown field "spec.foo"' in r.json["message"], r)
    r = c.post(CL1, cluster_v1beta1("kube-old01"))
    t.check("schema: v1beta1 Cluster (spec.topology.class) accepted under v1beta1",
            r.status == 201 and r.json["spec"]["topology"]["class"] == "magnum-v1"
            and r.json["apiVersion"] == "cluster.x-k8s.io/v1beta1", r)
    t.check("schema: v1beta1 (deprecated) answers carry a deprecation Warning",
            any("deprecated" in w for w in r.warnings), r.warnings)
    r = c.post(CL2, dict(cluster_v1beta1("kube-old02"), apiVersion="cluster.x-k8s.io/v1beta2"))
    t.check("schema: the v1beta1 shape under v1beta2 -> 422 (classRef required; class pruned)",
            r.status == 422 and any(x["field"] == "spec.topology.classRef" for x in r.json["details"]["causes"]), r)
    md = machine_deployment("md-valid")
    r = c.post(MD2, md)
    t.check("schema: a valid v1beta2 MachineDeployment -> 201", r.status == 201, r)
    md = machine_deployment("md-invalid")
    md["spec"]["template"]["spec"]["infrastructureRef"]["kind"] = ""
    r = c.post(MD2, md)
    t.check("schema: MachineDeployment with an empty infrastructureRef.kind -> 422 (minLength)",
            r.status == 422 and "infrastructureRef.kind" in r.raw.decode(), r)
    r = c.post(CL2, {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "kube-nospec"}})
    t.check("schema: v1beta2 Cluster without spec -> 422 spec: Required value",
            r.status == 422 and r.json["details"]["causes"][0]["field"] == "spec", r)


def test_versions(t, c, schema):
    r = c.get(CL2 + "/kube-old01" if schema else CL2 + "/kube-abc12")
    if schema:
        t.check("versions: a v1beta1 object read through v1beta2: apiVersion rewritten, body as stored",
                r.status == 200 and r.json["apiVersion"] == "cluster.x-k8s.io/v1beta2"
                and r.json["spec"]["topology"].get("class") == "magnum-v1", r)
    r = c.get(CL1 + "/kube-abc12")
    t.check("versions: a v1beta2 object read through v1beta1: apiVersion v1beta1, same body",
            r.status == 200 and r.json["apiVersion"] == "cluster.x-k8s.io/v1beta1"
            and r.json["spec"]["topology"]["classRef"]["name"] == "magnum-v1", r)
    r = c.get(CL1)
    t.check("versions: list through v1beta1 -> ClusterList apiVersion v1beta1, items rewritten",
            r.json.get("kind") == "ClusterList" and r.json["apiVersion"] == "cluster.x-k8s.io/v1beta1"
            and all(i["apiVersion"] == "cluster.x-k8s.io/v1beta1" for i in r.json["items"]), r)


def test_lists(t, c):
    for i in range(6):
        labels = {"app": "web" if i < 3 else "db", "idx": str(i)}
        if i % 2 == 0:
            labels["even"] = "yes"
        c.post(CM, configmap("sel-%d" % i, labels=labels))

    def names(sel, extra=""):
        r = c.get(CM + "?labelSelector=" + urllib.parse.quote(sel) + extra)
        return [i["metadata"]["name"] for i in r.json["items"]] if r.status == 200 else r

    t.check("list: labelSelector app=web", names("app=web") == ["sel-0", "sel-1", "sel-2"])
    t.check("list: labelSelector app==db", names("app==db") == ["sel-3", "sel-4", "sel-5"])
    t.check("list: labelSelector app!=web (also objects without the label)",
            names("app!=web,idx") == ["sel-3", "sel-4", "sel-5"])
    t.check("list: labelSelector idx in (1,4)", names("idx in (1, 4)") == ["sel-1", "sel-4"])
    t.check("list: labelSelector app notin (web),idx", names("app notin (web),idx") == ["sel-3", "sel-4", "sel-5"])
    t.check("list: labelSelector even (exists)", names("even") == ["sel-0", "sel-2", "sel-4"])
    t.check("list: labelSelector !even,idx", names("!even,idx") == ["sel-1", "sel-3", "sel-5"])
    t.check("list: labelSelector idx>3", names("idx>3") == ["sel-4", "sel-5"])
    r = c.get(CM + "?labelSelector=" + urllib.parse.quote("app in web"))
    t.check("list: a malformed labelSelector -> 400 BadRequest", status_ok(r, 400, "BadRequest"), r)
    r = c.get(CM + "?fieldSelector=metadata.name%3Dsel-2")
    t.check("list: fieldSelector metadata.name=sel-2", [i["metadata"]["name"] for i in r.json["items"]] == ["sel-2"], r)
    r = c.get("/api/v1/configmaps?fieldSelector=metadata.namespace%3D" + NS + ",metadata.name!%3Dsel-2&labelSelector=idx")
    t.check("list: all-namespaces path with fieldSelector metadata.namespace and !=",
            r.status == 200 and len(r.json["items"]) == 5, r)
    r = c.get(CM + "?fieldSelector=data.k%3Dv")
    t.check("list: unsupported fieldSelector field -> 400 'field label not supported: data.k'",
            r.status == 400 and r.json["message"] == "field label not supported: data.k", r)
    pages, tok, rvs = [], "", set()
    for _ in range(5):
        r = c.get(CM + "?labelSelector=idx&limit=4" + ("&continue=" + urllib.parse.quote(tok) if tok else ""))
        pages.append([i["metadata"]["name"] for i in r.json["items"]])
        rvs.add(meta(r)["resourceVersion"])
        tok = meta(r).get("continue")
        if not tok:
            break
    t.check("list: limit=4 + continue -> pages [4, 2], same list resourceVersion on both",
            [len(p) for p in pages] == [4, 2] and sum(pages, []) == ["sel-%d" % i for i in range(6)] and len(rvs) == 1,
            pages)
    r = c.get(CM + "?limit=2")
    t.check("list: remainingItemCount without selectors", meta(r).get("remainingItemCount", 0) >= 4, meta(r))
    r = c.get(CM + "?continue=garbage")
    t.check("list: a bad continue token -> 400", r.status == 400, r)
    r = c.get(CM)
    t.check("list: items of a core kind carry no kind/apiVersion (as the real server); metadata.resourceVersion is the global one",
            r.json["kind"] == "ConfigMapList" and "kind" not in r.json["items"][0]
            and int(meta(r)["resourceVersion"]) >= max(int(i["metadata"]["resourceVersion"]) for i in r.json["items"]), r)
    r = c.get(CL2)
    t.check("list: CR list items carry kind and apiVersion", all(i.get("kind") == "Cluster" for i in r.json["items"]), r)


def test_replace(t, c):
    cur = c.get(CL2 + "/kube-abc12").json
    old_rv = cur["metadata"]["resourceVersion"]
    cur["spec"]["topology"]["version"] = "v1.30.3"
    r = c.put(CL2 + "/kube-abc12", cur)
    t.check("replace: PUT with the current resourceVersion -> 200, resourceVersion increases, generation 2",
            r.status == 200 and int(meta(r)["resourceVersion"]) > int(old_rv) and meta(r)["generation"] == 2, r)
    cur["spec"]["topology"]["version"] = "v1.30.4"
    r = c.put(CL2 + "/kube-abc12", cur)
    t.check("replace: PUT with a stale resourceVersion -> 409 Conflict with the real message",
            status_ok(r, 409, "Conflict") and r.json["message"] ==
            'Operation cannot be fulfilled on clusters.cluster.x-k8s.io "kube-abc12": the object has been modified; '
            'please apply your changes to the latest version and try again', r)
    del cur["metadata"]["resourceVersion"]
    r = c.put(CL2 + "/kube-abc12", cur)
    t.check("replace: PUT without resourceVersion is unconditional -> 200", r.status == 200
            and r.json["spec"]["topology"]["version"] == "v1.30.4", r)
    r = c.put(CL2 + "/kube-abc12", dict(cur, metadata=dict(cur["metadata"], name="other")))
    t.check("replace: name not matching the URL -> 400", r.status == 400, r)
    r = c.put(CL2 + "/kube-missing", cluster_v1beta2("kube-missing"))
    t.check("replace: PUT of a missing object -> 404", r.status == 404, r)
    before = c.get(CL2 + "/kube-abc12").json
    r = c.put(CL2 + "/kube-abc12", before)
    t.check("replace: a no-op PUT keeps the resourceVersion (no write, no watch event)",
            r.status == 200 and meta(r)["resourceVersion"] == before["metadata"]["resourceVersion"], r)
    cur = dict(before, metadata=dict(before["metadata"], uid="00000000-0000-0000-0000-000000000000"))
    r = c.put(CL2 + "/kube-abc12", cur)
    t.check("replace: a different metadata.uid -> 409 Precondition failed", r.status == 409 and "UID" in r.json["message"], r)


def test_generation_status(t, c):
    cur = c.get(CL2 + "/kube-abc12").json
    gen = cur["metadata"]["generation"]
    cur["metadata"]["labels"]["extra"] = "1"
    r = c.put(CL2 + "/kube-abc12", cur)
    t.check("generation: a label change keeps generation", r.status == 200 and meta(r)["generation"] == gen, r)
    cur = r.json
    cur["status"] = {"phase": "Provisioned"}
    r = c.put(CL2 + "/kube-abc12", cur)
    t.check("status: status in a main-resource PUT is ignored", r.status == 200 and "status" not in r.json, r)
    st = r.json
    st["status"] = {"phase": "Provisioned", "observedGeneration": gen}
    st["spec"]["topology"]["version"] = "v9.9.9"
    st["metadata"]["labels"]["via-status"] = "1"
    r = c.put(CL2 + "/kube-abc12/status", st)
    t.check("status: PUT /status sets status only (spec and metadata changes ignored), generation kept",
            r.status == 200 and r.json["status"]["phase"] == "Provisioned" and r.json["spec"]["topology"]["version"] == "v1.30.4"
            and "via-status" not in r.json["metadata"]["labels"] and meta(r)["generation"] == gen, r)
    r = c.patch(CL2 + "/kube-abc12/status", {"status": {"phase": "Deleting"}})
    t.check("status: merge patch on /status", r.status == 200 and r.json["status"]["phase"] == "Deleting", r)
    r = c.patch(CL2 + "/kube-abc12", {"spec": {"topology": {"version": "v1.31.0"}}, "status": {"phase": "X"}})
    t.check("generation: a spec change by patch increments generation; status in it ignored",
            r.status == 200 and meta(r)["generation"] == gen + 1 and r.json["status"]["phase"] == "Deleting", r)
    r = c.get(CL2 + "/kube-abc12/status")
    t.check("status: GET /status returns the object", r.status == 200 and r.json["kind"] == "Cluster", r)
    r = c.put(CM.replace("configmaps", "configmaps") + "/sel-0/status", configmap("sel-0"))
    t.check("status: /status of a kind without the subresource -> 404", r.status == 404, r)


def test_patches(t, c, schema):
    c.post(CM, configmap("patch-me", labels={"a": "1", "b": "2"}, data={"x": "1", "y": "2"}))
    r = c.patch(CM + "/patch-me", {"metadata": {"labels": {"a": None, "c": "3"}}, "data": {"y": None, "z": "3"}})
    t.check("patch: merge patch (RFC 7386: null removes, maps merge)",
            r.status == 200 and r.json["metadata"]["labels"] == {"b": "2", "c": "3"} and r.json["data"] == {"x": "1", "z": "3"}, r)
    rv = meta(r)["resourceVersion"]
    r = c.patch(CM + "/patch-me", {"metadata": {"resourceVersion": "1"}, "data": {"q": "1"}})
    t.check("patch: a merge patch carrying a stale resourceVersion -> 409 Conflict", r.status == 409, r)
    r = c.patch(CM + "/patch-me", {"metadata": {"resourceVersion": rv}, "data": {"q": "1"}})
    t.check("patch: a merge patch carrying the current resourceVersion -> 200", r.status == 200 and r.json["data"]["q"] == "1", r)
    r = c.patch(CM + "/patch-me", [{"op": "remove", "path": "/data/q"}], ctype=JSONP)
    r = c.patch(CM + "/patch-me", [{"op": "test", "path": "/data/x", "value": "1"},
                                   {"op": "add", "path": "/data/w", "value": "4"},
                                   {"op": "remove", "path": "/data/z"},
                                   {"op": "replace", "path": "/metadata/labels/b", "value": "22"},
                                   {"op": "copy", "from": "/data/x", "path": "/data/x2"},
                                   {"op": "move", "from": "/data/x2", "path": "/data/x3"}], ctype=JSONP)
    t.check("patch: JSON patch (RFC 6902 test/add/remove/replace/copy/move)",
            r.status == 200 and r.json["data"] == {"x": "1", "w": "4", "x3": "1"} and r.json["metadata"]["labels"]["b"] == "22", r)
    r = c.patch(CM + "/patch-me", [{"op": "test", "path": "/data/x", "value": "nope"},
                                   {"op": "add", "path": "/data/never", "value": "1"}], ctype=JSONP)
    t.check("patch: JSON patch whose test fails -> 422, nothing written",
            r.status == 422 and "never" not in c.get(CM + "/patch-me").json["data"], r)
    r = c.patch(CM + "/patch-me", [{"op": "remove", "path": "/data/absent"}], ctype=JSONP)
    t.check("patch: JSON patch removing a missing path -> 422", r.status == 422, r)
    r = c.patch(CM + "/patch-me", {"op": "add"}, ctype=JSONP)
    t.check("patch: a JSON patch that is not an array -> 400", r.status == 400, r)
    c.post("/api/v1/namespaces/%s/events" % NS, {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "ev-1"},
                                                  "involvedObject": {"kind": "Cluster", "name": "kube-abc12"},
                                                  "reason": "Created", "message": "m", "type": "Normal"})
    owner = c.post(CM, configmap("smp-owner")).json
    c.post(CM, configmap("smp", data={"a": "1"}, finalizers=["example.com/a"],
                         ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "smp-owner",
                                           "uid": owner["metadata"]["uid"]}]))
    r = c.patch(CM + "/smp", {"metadata": {"finalizers": ["example.com/b"],
                                           "$setElementOrder/finalizers": ["example.com/a", "example.com/b"]},
                              "data": {"b": "2"}}, ctype=SMP)
    t.check("patch: strategic merge patch on a core kind (finalizers merge as a set, $ directives ignored)",
            r.status == 200 and r.json["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]
            and r.json["data"] == {"a": "1", "b": "2"}, r)
    r = c.patch(CM + "/smp", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a", "example.com/b"]}}, ctype=SMP)
    t.check("patch: strategic merge $deleteFromPrimitiveList", r.status == 200 and not r.json["metadata"].get("finalizers"), r)
    r = c.patch(CL2 + "/kube-abc12", {"spec": {}}, ctype=SMP)
    t.check("patch: strategic merge patch on a custom resource -> 415 UnsupportedMediaType (as the real server)",
            status_ok(r, 415, "UnsupportedMediaType"), r)
    r = c.patch(CM + "/patch-me", {"data": {}}, ctype="application/xml")
    t.check("patch: an unknown patch content type -> 415", r.status == 415, r)
    r = c.patch(CM + "/nope", {"data": {}})
    t.check("patch: a missing object -> 404", r.status == 404, r)
    if schema:
        r = c.patch(CL2 + "/kube-abc12", {"spec": {"topology": {"controlPlane": {"replicas": "x"}}}})
        t.check("patch: the patched result is validated (422)", r.status == 422, r)
    r = c.patch(CL2 + "/kube-abc12?dryRun=All", {"metadata": {"labels": {"dry": "run"}}})
    t.check("patch: dryRun=All answers the result and stores nothing",
            r.status == 200 and r.json["metadata"]["labels"].get("dry") == "run"
            and "dry" not in c.get(CL2 + "/kube-abc12").json["metadata"]["labels"], r)


def test_apply(t, c, schema):
    path = CL2 + "/kube-ssa01"
    y = """apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: kube-ssa01
  labels: {owner: magnum}
spec:
  topology:
    classRef: {name: magnum-v1}
    version: v1.30.2
    controlPlane: {replicas: 1}
    workers:
      machineDeployments:
      - {class: default-worker, name: md-0, replicas: 2}
      - {class: default-worker, name: md-1, replicas: 1}
status: {phase: Ignored}
"""
    r = c.patch(path, y, ctype=APPLY)
    t.check("apply: without fieldManager -> 400 BadRequest", status_ok(r, 400, "BadRequest"), r)
    r = c.patch(path + "?fieldManager=magnum", y, ctype=APPLY)
    t.check("apply: creates the object when absent -> 201, generation 1, status ignored",
            r.status == 201 and meta(r)["generation"] == 1 and "status" not in r.json, r)
    mf = meta(r).get("managedFields", [])
    t.check("apply: managedFields has an Apply entry for the manager with fieldsV1",
            any(e["manager"] == "magnum" and e["operation"] == "Apply" and "f:spec" in e["fieldsV1"] for e in mf), mf)
    rv = meta(r)["resourceVersion"]
    r = c.patch(path + "?fieldManager=magnum", y, ctype=APPLY)
    t.check("apply: the same apply again is a no-op (resourceVersion kept)", r.status == 200 and meta(r)["resourceVersion"] == rv, r)
    j = json.dumps({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "kube-ssa01"},
                    "spec": {"topology": {"workers": {"machineDeployments": [{"name": "md-0", "replicas": 5}]}}}})
    r = c.patch(path + "?fieldManager=autoscaler", j, ctype=APPLY)
    t.check("apply: a JSON body from a second manager setting md-0 replicas 5 -> 409 Conflict "
            "'Apply failed with 1 conflict: conflict with \"magnum\": .spec.topology.workers.machineDeployments[name=\"md-0\"].replicas'",
            status_ok(r, 409, "Conflict") and r.json["message"] == 'Apply failed with 1 conflict: conflict with "magnum": '
            '.spec.topology.workers.machineDeployments[name="md-0"].replicas'
            and r.json["details"]["causes"][0]["reason"] == "FieldManagerConflict", r)
    r = c.patch(path + "?fieldManager=autoscaler&force=true", j, ctype=APPLY)
    mds = {m["name"]: m for m in (r.json or {}).get("spec", {}).get("topology", {}).get("workers", {}).get("machineDeployments", [])}
    t.check("apply: force=true takes the field over (md-0 replicas 5, class kept, md-1 kept)",
            r.status == 200 and mds.get("md-0", {}).get("replicas") == 5 and mds["md-0"].get("class") == "default-worker"
            and "md-1" in mds, r)
    y2 = y.replace("      - {class: default-worker, name: md-1, replicas: 1}\n", "").replace("labels: {owner: magnum}", "labels: {}")
    r = c.patch(path + "?fieldManager=magnum", y2, ctype=APPLY)
    t.check("apply: after the take-over, the first manager applying its old md-0 replicas conflicts with \"autoscaler\"",
            r.status == 409 and 'conflict with "autoscaler"' in r.json["message"], r)
    y3 = y2.replace("name: md-0, replicas: 2}", "name: md-0}")
    r = c.patch(path + "?fieldManager=magnum", y3, ctype=APPLY)
    mds = {m["name"]: m for m in (r.json or {}).get("spec", {}).get("topology", {}).get("workers", {}).get("machineDeployments", [])}
    t.check("apply: the first manager drops md-1, a label and md-0 replicas -> md-1 and the label removed, md-0 replicas "
            "stays the autoscaler's 5" + (" (map list keyed on name from the schema)" if schema else
                                          " (lists of named objects keyed on name)"),
            r.status == 200 and set(mds) == {"md-0"} and mds["md-0"]["replicas"] == 5
            and mds["md-0"]["class"] == "default-worker" and "owner" not in (r.json["metadata"].get("labels") or {}), r)
    cur = c.get(path).json
    cur["spec"]["topology"]["controlPlane"]["replicas"] = 3
    r = c.put(path + "?fieldManager=kubectl-edit", cur)
    t.check("apply: an Update (PUT) changing an applied field takes it over (Update entry in managedFields)",
            r.status == 200 and any(e["manager"] == "kubectl-edit" and e["operation"] == "Update"
                                    for e in r.json["metadata"]["managedFields"]), r)
    y4 = y3.replace("    controlPlane: {replicas: 1}\n", "")
    r = c.patch(path + "?fieldManager=magnum", y4, ctype=APPLY)
    t.check("apply: then dropping it from the applier's config keeps the updater's value",
            r.status == 200 and r.json["spec"]["topology"]["controlPlane"]["replicas"] == 3, r)
    st = "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: kube-ssa01}\nstatus:\n  phase: Provisioned\n"
    r = c.patch(path + "/status?fieldManager=capi", st, ctype=APPLY)
    t.check("apply: apply to /status sets status", r.status == 200 and r.json.get("status", {}).get("phase") == "Provisioned", r)
    if schema:
        cond = ("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: kube-ssa01}\nstatus:\n  conditions:\n"
                "  - {type: %s, status: \"True\", reason: R, message: m, lastTransitionTime: \"2025-01-01T00:00:00Z\"}\n")
        c.patch(path + "/status?fieldManager=capi-a", cond % "Available", ctype=APPLY)
        r = c.patch(path + "/status?fieldManager=capi-b", cond % "Ready", ctype=APPLY)
        types = [x["type"] for x in r.json.get("status", {}).get("conditions", [])]
        t.check("apply: status.conditions is a map list keyed on type: two managers' conditions merge",
                r.status == 200 and types == ["Available", "Ready"], r)
        bad = y.replace("replicas: 1}", "replicas: 1, bogus: true}")
        r = c.patch(path + "?fieldManager=magnum", bad, ctype=APPLY)
        t.check("apply: an unknown field -> 400 'field not declared in schema'",
                r.status == 400 and "field not declared in schema" in r.json["message"], r)
    r = c.patch(CM + "/ssa-cm?fieldManager=magnum", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa-cm\ndata:\n  a: '1'\n",
                ctype=APPLY)
    t.check("apply: core kind created by apply", r.status == 201 and r.json["data"] == {"a": "1"}, r)
    r = c.patch(CM + "/ssa-cm?fieldManager=magnum", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ssa-cm\n", ctype=APPLY)
    t.check("apply: kind not matching the URL -> 400", r.status == 400, r)
    r = c.patch(CM + "/ssa-cm?fieldManager=magnum", "{not yaml: [", ctype=APPLY)
    t.check("apply: unparsable YAML -> 400", r.status == 400, r)


def test_scale(t, c, schema):
    md = machine_deployment("md-scale", replicas=2)
    r = c.post(MD2, md)
    r = c.get(MD2 + "/md-scale/scale")
    t.check("scale: GET /scale -> autoscaling/v1 Scale with spec.replicas from .spec.replicas",
            r.status == 200 and r.json["kind"] == "Scale" and r.json["apiVersion"] == "autoscaling/v1"
            and r.json["spec"]["replicas"] == 2 and r.json["status"]["replicas"] == 0, r)
    c.patch(MD2 + "/md-scale/status", {"status": {"replicas": 2, "selector": "md=md-scale"}})
    sc = c.get(MD2 + "/md-scale/scale").json
    t.check("scale: status.replicas and status.selector from the object's status",
            sc["status"] == {"replicas": 2, "selector": "md=md-scale"}, sc)
    sc["spec"]["replicas"] = 4
    r = c.put(MD2 + "/md-scale/scale", sc)
    obj = c.get(MD2 + "/md-scale").json
    t.check("scale: PUT /scale sets .spec.replicas (generation incremented)",
            r.status == 200 and r.json["spec"]["replicas"] == 4 and obj["spec"]["replicas"] == 4
            and obj["metadata"]["generation"] == 2, (r, obj["metadata"]))
    r = c.put(MD2 + "/md-scale/scale", sc)
    t.check("scale: PUT /scale with a stale resourceVersion -> 409", r.status == 409, r)
    r = c.patch(MD2 + "/md-scale/scale", {"spec": {"replicas": 1}})
    t.check("scale: merge patch /scale", r.status == 200 and c.get(MD2 + "/md-scale").json["spec"]["replicas"] == 1, r)
    r = c.patch(MD2 + "/md-scale/scale", {"spec": {"replicas": -1}})
    t.check("scale: negative replicas -> 422", r.status == 422, r)
    r = c.get(CL2 + "/kube-abc12/scale")
    t.check("scale: a kind without the scale subresource -> 404", r.status == 404, r)


def test_delete(t, c):
    c.post(CM, configmap("del-plain"))
    r = c.delete(CM + "/del-plain")
    t.check("delete: no finalizers -> 200 Status Success with details (name, kind, uid); then 404",
            r.status == 200 and r.json.get("kind") == "Status" and r.json.get("status") == "Success"
            and r.json["details"]["name"] == "del-plain" and r.json["details"]["kind"] == "configmaps"
            and "uid" in r.json["details"] and c.get(CM + "/del-plain").status == 404, r)
    r = c.delete(CM + "/del-plain")
    t.check("delete: again -> 404", r.status == 404, r)
    c.post(CL2, cluster_v1beta2("kube-fin01"))
    r = c.patch(CL2 + "/kube-fin01", {"metadata": {"finalizers": ["cluster.cluster.x-k8s.io"]}})
    gen = meta(r)["generation"]
    r = c.delete(CL2 + "/kube-fin01", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    m = meta(r)
    t.check("delete: with finalizers -> 200 with the object: deletionTimestamp, deletionGracePeriodSeconds 0, generation+1",
            r.status == 200 and r.json.get("kind") == "Cluster" and m.get("deletionTimestamp")
            and m.get("deletionGracePeriodSeconds") == 0 and m.get("generation") == gen + 1, r)
    r2 = c.delete(CL2 + "/kube-fin01")
    t.check("delete: deleting again while terminating -> 200 with the object, unchanged",
            r2.status == 200 and meta(r2)["resourceVersion"] == m["resourceVersion"], r2)
    r = c.patch(CL2 + "/kube-fin01", {"metadata": {"finalizers": ["cluster.cluster.x-k8s.io", "new.example.com/x"]}})
    t.check("delete: adding a finalizer to an object being deleted -> 422 Forbidden cause",
            r.status == 422 and r.json["details"]["causes"][0]["reason"] == "FieldValueForbidden", r)
    r = c.patch(CL2 + "/kube-fin01", {"metadata": {"labels": {"still": "writable"}}})
    t.check("delete: other writes to a terminating object work", r.status == 200, r)
    r = c.patch(CL2 + "/kube-fin01", [{"op": "remove", "path": "/metadata/finalizers"}], ctype=JSONP)
    t.check("delete: emptying the finalizers removes the object (update answered 200, then 404)",
            r.status == 200 and c.get(CL2 + "/kube-fin01").status == 404, r)
    c.post(CM, configmap("del-pre"))
    r = c.delete(CM + "/del-pre", {"preconditions": {"resourceVersion": "1"}})
    t.check("delete: preconditions.resourceVersion mismatch -> 409", r.status == 409, r)
    r = c.delete(CM + "/del-pre?dryRun=All")
    t.check("delete: dryRun=All deletes nothing", r.status == 200 and c.get(CM + "/del-pre").status == 200, r)
    r = c.delete(CM + "/del-pre", {"propagationPolicy": "Sideways"})
    t.check("delete: an unknown propagationPolicy -> 422", r.status == 422, r)
    for i in range(3):
        c.post(CM, configmap("dc-%d" % i, labels={"dc": "yes"}))
    r = c.delete(CM + "?labelSelector=dc%3Dyes")
    t.check("deletecollection: DELETE on the collection with a labelSelector removes the matching objects",
            r.status == 200 and r.json["kind"] == "ConfigMapList" and len(r.json["items"]) == 3
            and not c.get(CM + "?labelSelector=dc").json["items"], r)


def test_gc(t, c):
    owner = c.post(CM, configmap("gc-owner")).json
    ref = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gc-owner", "uid": owner["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
    c.post(CM, configmap("gc-dep1", ownerReferences=ref))
    c.post(CM, configmap("gc-dep2", ownerReferences=ref, finalizers=["example.com/keep"]))
    cl = cluster_v1beta2("kube-gcdep")
    cl["metadata"]["ownerReferences"] = ref
    c.post(CL2, cl)
    c.delete(CM + "/gc-owner")
    gone = wait_for(lambda: c.get(CM + "/gc-dep1").status == 404 and c.get(CL2 + "/kube-gcdep").status == 404)
    t.check("gc: deleting an owner deletes its dependents (any kind) in the background", gone)
    r = c.get(CM + "/gc-dep2")
    t.check("gc: a dependent with a finalizer is marked for deletion and kept",
            r.status == 200 and meta(r).get("deletionTimestamp"), r)
    c.patch(CM + "/gc-dep2", {"metadata": {"finalizers": None}})
    t.check("gc: ... and goes once its finalizer is removed", c.get(CM + "/gc-dep2").status == 404)
    fg = c.post(CM, configmap("fg-owner")).json
    fref = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "fg-owner", "uid": fg["metadata"]["uid"]}]
    c.post(CM, configmap("fg-dep", ownerReferences=fref, finalizers=["example.com/hold"]))
    r = c.delete(CM + "/fg-owner?propagationPolicy=Foreground")
    t.check("gc: Foreground: the owner gets the foregroundDeletion finalizer and waits",
            r.status == 200 and "foregroundDeletion" in meta(r).get("finalizers", []), r)
    time.sleep(0.3)
    t.check("gc: Foreground: the owner stays while a dependent remains",
            c.get(CM + "/fg-owner").status == 200 and meta(c.get(CM + "/fg-dep")).get("deletionTimestamp"))
    c.patch(CM + "/fg-dep", {"metadata": {"finalizers": None}})
    t.check("gc: Foreground: the owner goes after its last dependent",
            wait_for(lambda: c.get(CM + "/fg-owner").status == 404))
    orph = c.post(CM, configmap("or-owner")).json
    oref = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "or-owner", "uid": orph["metadata"]["uid"]}]
    c.post(CM, configmap("or-dep", ownerReferences=oref))
    c.delete(CM + "/or-owner", {"propagationPolicy": "Orphan"})
    ok = wait_for(lambda: c.get(CM + "/or-owner").status == 404)
    r = c.get(CM + "/or-dep")
    t.check("gc: Orphan: the owner goes, the dependent stays without the ownerReference",
            ok and r.status == 200 and not meta(r).get("ownerReferences"), r)
    dang = configmap("dangling", ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                                                   "uid": "11111111-2222-3333-4444-555555555555"}])
    c.post(CM, dang)
    t.check("gc: an object whose only owner does not exist is deleted (after ~1 s)",
            wait_for(lambda: c.get(CM + "/dangling").status == 404, timeout=4))


def test_builtins(t, c):
    r = c.post(SEC, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
                     "data": {"a": base64.b64encode(b"x").decode()}, "stringData": {"b": "plain"}})
    t.check("secret: stringData merged into data (base64), type Opaque",
            r.status == 201 and r.json["data"] == {"a": "eA==", "b": "cGxhaW4="} and "stringData" not in r.json
            and r.json["type"] == "Opaque", r)
    r = c.post(SEC, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s2"}, "data": {"a": "not base64!"}})
    t.check("secret: data value not base64 -> 400 BadRequest (value not echoed)",
            r.status == 400 and "not base64!" not in r.raw.decode(), r)
    r = c.post(SEC, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3"}, "data": {}, "immutable": True})
    r = c.patch(SEC + "/s3", {"data": {"x": "eA=="}})
    t.check("secret: an immutable Secret's data cannot change -> 422", r.status == 422, r)
    r = c.post(CM, dict(configmap("cm-extra"), spec={"x": 1}))
    t.check("configmap: unknown top-level field pruned with a warning",
            r.status == 201 and "spec" not in r.json and any("unknown field" in w for w in r.warnings), r)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "magnum-conductor"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2025-01-01T00:00:00.000000Z"}}
    lp = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % NS
    r = c.post(lp, lease)
    cur = r.json
    cur["spec"]["holderIdentity"] = "b"
    r2 = c.put(lp + "/magnum-conductor", cur)
    cur["spec"]["holderIdentity"] = "c"
    r3 = c.put(lp + "/magnum-conductor", cur)
    t.check("lease: create, optimistic update, stale update -> 409", r.status == 201 and r2.status == 200
            and r3.status == 409, (r, r2, r3))
    r = c.get("/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name%%3Dkube-abc12,reason%%3DCreated" % NS)
    t.check("event: created, listed by fieldSelector involvedObject.name/reason",
            r.status == 200 and [i["metadata"]["name"] for i in r.json["items"]] == ["ev-1"], r)
    r = c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    t.check("namespace: create -> status.phase Active, spec.finalizers [kubernetes], label kubernetes.io/metadata.name",
            r.status == 201 and r.json["status"]["phase"] == "Active" and r.json["spec"]["finalizers"] == ["kubernetes"]
            and r.json["metadata"]["labels"]["kubernetes.io/metadata.name"] == "doomed", r)
    dp = "/api/v1/namespaces/doomed/configmaps"
    c.post(dp, configmap("inside1"))
    c.post(dp, configmap("inside2", finalizers=["example.com/slow"]))
    r = c.delete("/api/v1/namespaces/doomed")
    t.check("namespace: delete -> 200 with the namespace, phase Terminating",
            r.status == 200 and r.json["status"]["phase"] == "Terminating" and meta(r).get("deletionTimestamp"), r)
    r = c.post(dp, configmap("late"))
    t.check("namespace: create in a terminating namespace -> 403 Forbidden", status_ok(r, 403, "Forbidden"), r)
    t.check("namespace: its objects are deleted; one with a finalizer waits",
            wait_for(lambda: c.get(dp + "/inside1").status == 404) and c.get("/api/v1/namespaces/doomed").status == 200)
    c.patch(dp + "/inside2", {"metadata": {"finalizers": None}})
    t.check("namespace: the namespace goes once empty", wait_for(lambda: c.get("/api/v1/namespaces/doomed").status == 404))


def test_watch(t, c, env):
    lst = c.get(CM + "?labelSelector=w")
    rv = meta(lst)["resourceVersion"]
    s = Stream(c, CM + "?watch=true&labelSelector=w%3D1&resourceVersion=" + rv)
    t.check("watch: 200 chunked application/json", s.status == 200 and s.resp.getheader("Transfer-Encoding") == "chunked"
            and s.resp.getheader("Content-Type") == "application/json")
    c.post(CM, configmap("w-a", labels={"w": "1"}))
    c.post(CM, configmap("w-b", labels={"w": "2"}))
    c.patch(CM + "/w-a", {"data": {"n": "2"}})
    c.patch(CM + "/w-b", {"metadata": {"labels": {"w": "1"}}})
    c.patch(CM + "/w-a", {"metadata": {"labels": {"w": "0"}}})
    c.delete(CM + "/w-b")
    evs = s.collect(5)
    got = [(e["type"], e["object"]["metadata"]["name"]) for e in evs]
    t.check("watch: from the list resourceVersion: ADDED, MODIFIED; a relabelled object that starts matching is ADDED, "
            "one that stops matching is DELETED; DELETED on delete",
            got == [("ADDED", "w-a"), ("MODIFIED", "w-a"), ("ADDED", "w-b"), ("DELETED", "w-a"), ("DELETED", "w-b")], got)
    t.check("watch: event objects carry kind/apiVersion and increasing resourceVersions",
            all(e["object"].get("kind") == "ConfigMap" for e in evs)
            and [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
            == sorted(int(e["object"]["metadata"]["resourceVersion"]) for e in evs), evs)
    s.close()
    s = Stream(c, CM + "?watch=1&labelSelector=app%3Dweb")
    evs = s.collect(3, timeout=3)
    t.check("watch: without resourceVersion -> synthetic ADDED for the current objects",
            [e["type"] for e in evs] == ["ADDED"] * 3
            and [e["object"]["metadata"]["name"] for e in evs] == ["sel-0", "sel-1", "sel-2"], evs)
    s.close()
    s = Stream(c, CM + "?watch=true&resourceVersion=0&fieldSelector=metadata.name%3Dsel-1")
    evs = s.collect(1, timeout=3)
    t.check("watch: resourceVersion=0 + fieldSelector metadata.name", [e["object"]["metadata"]["name"] for e in evs] == ["sel-1"], evs)
    s.close()
    s = Stream(c, CM + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
               "&labelSelector=app%3Ddb")
    evs = s.collect(4, timeout=3)
    t.check("watch: sendInitialEvents=true -> ADDED for each, then BOOKMARK with k8s.io/initial-events-end",
            [e["type"] for e in evs] == ["ADDED", "ADDED", "ADDED", "BOOKMARK"]
            and evs[3]["object"]["metadata"].get("annotations") == {"k8s.io/initial-events-end": "true"}
            and evs[3]["object"]["kind"] == "ConfigMap" and evs[3]["object"]["apiVersion"] == "v1", evs)
    s.close()
    s = Stream(c, CL2 + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + meta(c.get(CL2))["resourceVersion"])
    ev = s.next(timeout=3)
    t.check("watch: allowWatchBookmarks -> periodic BOOKMARK {kind, apiVersion, metadata.resourceVersion} "
            "(MAGNUM_TEST_KUBE_BOOKMARK_SECONDS=1 here)",
            isinstance(ev, dict) and ev["type"] == "BOOKMARK" and ev["object"]["kind"] == "Cluster"
            and ev["object"]["apiVersion"] == "cluster.x-k8s.io/v1beta2"
            and ev["object"]["metadata"]["resourceVersion"].isdigit(), ev)
    s.close()
    t0 = time.monotonic()
    s = Stream(c, CM + "?watch=true&timeoutSeconds=1&resourceVersion=" + meta(c.get(CM))["resourceVersion"])
    end = s.next(timeout=4)
    t.check("watch: timeoutSeconds=1 ends the stream after ~1 s", end is None and 0.9 < time.monotonic() - t0 < 4,
            (end, time.monotonic() - t0))
    s.conn.request("GET", CM + "/sel-0", headers=c.headers())
    r = s.conn.getresponse()
    t.check("watch: the watch's connection is reused (keep-alive) after the stream ends",
            r.status == 200 and json.loads(r.read())["metadata"]["name"] == "sel-0", r.status)
    s.close()
    c.post("/_stand-in/compact", {})
    s = Stream(c, CM + "?watch=true&resourceVersion=" + rv)
    ev = s.next(timeout=3)
    t.check("watch: a resourceVersion older than the history -> ERROR event with a 410 Expired Status 'too old resource version'",
            isinstance(ev, dict) and ev["type"] == "ERROR" and ev["object"]["code"] == 410
            and ev["object"]["reason"] == "Expired"
            and re.fullmatch(r"too old resource version: %s \(\d+\)" % rv, ev["object"]["message"])
            and s.next(timeout=3) is None, ev)
    s = Stream(c, CM + "?watch=true")
    s.collect(100, timeout=0.5)
    s2 = Stream(c, CL2 + "?watch=true")
    s2.collect(100, timeout=0.5)
    t0 = time.monotonic()
    ok = all(c.get(CM + "/sel-0").status == 200 for _ in range(20))
    t.check("watch: open watch streams do not block other requests (20 GETs meanwhile, %.0f ms)"
            % ((time.monotonic() - t0) * 1000), ok and time.monotonic() - t0 < 2)
    st = c.get("/_stand-in/stats").json
    t.check("stand-in: /_stand-in/stats counts open watch streams and connections",
            st["watches_open"] >= 2 and st["connections_open"] >= 3 and st["requests_total"] > 100, st)
    r = c.post("/_stand-in/close-watches", {})
    e1, e2 = s.next(timeout=2), s2.next(timeout=2)
    t.check("stand-in: POST /_stand-in/close-watches ends every watch stream (chunked stream finished)",
            r.json["closed"] >= 2 and e1 is None and e2 is None, (r, e1, e2))
    s = Stream(c, CM + "?watch=true")
    s.collect(100, timeout=0.3)
    c.post("/_stand-in/close-watches", {"mode": "abort"})
    end = s.next(timeout=2)
    t.check("stand-in: close-watches mode=abort drops the connection mid-stream",
            isinstance(end, dict) and end["type"] == "_error" or end is None, end)
    s = Stream(c, "%s/v1beta1/namespaces/%s/clusters?watch=true&fieldSelector=metadata.name%%3Dkube-abc12" % (CAPI, NS))
    ev = s.next(timeout=3)
    t.check("watch: through v1beta1, a v1beta2 object's event has apiVersion v1beta1",
            isinstance(ev, dict) and ev["object"]["apiVersion"] == "cluster.x-k8s.io/v1beta1", ev)
    s.close()
    s = Stream(c, CM + "?watch=true&fieldSelector=metadata.name%3Dsel-3", headers={
        "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
    ev = s.next(timeout=3)
    t.check("watch: metadata-only (Accept as=PartialObjectMetadata) -> PartialObjectMetadata event objects",
            isinstance(ev, dict) and ev["object"]["kind"] == "PartialObjectMetadata" and "data" not in ev["object"], ev)
    s.close()
    s = Stream(c, CM + "/sel-3?watch=true")
    ev = s.next(timeout=3)
    t.check("watch: on a single object's path", isinstance(ev, dict) and ev["object"]["metadata"]["name"] == "sel-3", ev)
    s.close()


def test_watch_curl(t, c, env):
    """A watch through curl delivers an event within 100 ms of the write."""
    rv = meta(c.get(CM))["resourceVersion"]
    url = env["MAGNUM_TEST_KUBE_URL"] + CM + "?watch=true&labelSelector=curl%3D1&resourceVersion=" + rv
    p = subprocess.Popen(["curl", "-sN", "--cacert", env["MAGNUM_TEST_KUBE_CA"], "--cert", env["MAGNUM_TEST_KUBE_CERT"],
                          "--key", env["MAGNUM_TEST_KUBE_KEY"], url], stdout=subprocess.PIPE)
    lines = queue.Queue()

    def pump():
        for line in p.stdout:
            lines.put((time.monotonic(), line))
    threading.Thread(target=pump, daemon=True).start()
    try:
        c.post(CM, configmap("curl-0", labels={"curl": "1"}))
        lines.get(timeout=5)  # the ADDED: the stream is up
        lat = []
        for i in range(1, 6):
            t0 = time.monotonic()
            c.patch(CM + "/curl-0", {"data": {"i": str(i)}})
            t1, line = lines.get(timeout=5)
            ev = json.loads(line)
            lat.append((t1 - t0) * 1000)
            assert ev["object"]["data"]["i"] == str(i)
        t.check("watch: curl sees each MODIFIED within 100 ms of the write (worst %.1f ms, from before the PATCH)" % max(lat),
                max(lat) < 100, lat)
    except (queue.Empty, AssertionError, ValueError) as e:
        t.check("watch: curl sees each event within 100 ms", False, repr(e))
    finally:
        p.terminate()
        p.wait()


def test_faults(t, c):
    r = c.post("/_stand-in/faults", {"path_regex": "/configmaps/sel-0$", "verb": "get", "status": 503, "count": 2})
    fid = r.json.get("id")
    a, b, d = c.get(CM + "/sel-0"), c.get(CM + "/sel-0"), c.get(CM + "/sel-0")
    t.check("stand-in: a fault (path_regex, verb, status 503, count 2) fails two requests, then passes",
            r.status == 201 and status_ok(a, 503, "ServiceUnavailable") and b.status == 503 and d.status == 200, (a, d))
    c.post("/_stand-in/faults", {"path_regex": "/configmaps/sel-1", "delay_seconds": 0.5, "count": 1})
    t0 = time.monotonic()
    r = c.get(CM + "/sel-1")
    t.check("stand-in: a delay-only fault holds the request, then answers normally",
            r.status == 200 and time.monotonic() - t0 >= 0.45)
    c.post("/_stand-in/faults", {"path_regex": "/configmaps/sel-2", "delay_seconds": 3, "count": 1})
    other = Client("https://%s:%d" % (c.host, c.port), None)
    other.ctx = c.ctx
    res = {}
    th = threading.Thread(target=lambda: res.setdefault("r", other.get(CM + "/sel-2")))
    th.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    ok = c.get(CM + "/sel-3").status == 200
    t.check("stand-in: a hung request (3 s delay fault) does not block others", ok and time.monotonic() - t0 < 2)
    th.join()
    c.post("/_stand-in/faults", {"verb": "create", "status": 429, "retry_after": 1, "count": 1, "path_regex": "configmaps"})
    r = c.post(CM, configmap("throttled"))
    t.check("stand-in: a 429 fault carries Retry-After", r.status == 429 and r.headers.get("Retry-After") == "1", r)
    c.post("/_stand-in/faults", {"path_regex": "/configmaps/sel-4", "close": True, "count": 1})
    conn = c.new_conn()
    try:
        conn.request("GET", CM + "/sel-4", headers=c.headers())
        dropped = conn.getresponse().status is None
    except (http.client.RemoteDisconnected, ConnectionError, ssl.SSLError, http.client.IncompleteRead):
        dropped = True
    conn.close()
    t.check("stand-in: a close fault drops the connection without an answer", dropped)
    c.post("/_stand-in/faults", {"status": 500, "count": -1, "path_regex": "never-matches"})
    r = c.get("/_stand-in/faults")
    t.check("stand-in: GET /_stand-in/faults lists the remaining faults", len(r.json["faults"]) == 1, r)
    r = c.delete("/_stand-in/faults")
    t.check("stand-in: DELETE /_stand-in/faults clears them", r.json["removed"] == 1 and not c.get("/_stand-in/faults").json["faults"])
    _ = fid


def test_http(t, c):
    conn = c.new_conn()
    body = json.dumps(configmap("chunked")).encode()
    conn.request("POST", CM, body=iter([body[:10], body[10:]]), headers=dict(c.headers(), **{"Content-Type": "application/json"}),
                 encode_chunked=True)
    r = conn.getresponse()
    r.read()
    t.check("http: a chunked request body is read", r.status == 201 and c.get(CM + "/chunked").status == 200, r.status)
    conn.putrequest("POST", CM)
    for k, v in dict(c.headers(), **{"Content-Type": "application/json", "Content-Length": str(3 * 1024 * 1024 + 1)}).items():
        conn.putheader(k, v)
    conn.endheaders()
    r = conn.getresponse()
    t.check("http: a body over 3 MiB -> 413, connection closed", r.status == 413 and r.getheader("Connection") == "close", r.status)
    conn.close()
    r = c.get("/")
    t.check("http: / lists the API paths", r.status == 200 and "/apis/cluster.x-k8s.io/v1beta2" in r.json["paths"], r)
    r = c.req("OPTIONS", "/api/v1")
    t.check("http: an unsupported method -> 501", r.status == 501, r)


def test_concurrency(t, env):
    errors = []

    def worker(i):
        cl = Client(env["MAGNUM_TEST_KUBE_URL"], env["MAGNUM_TEST_KUBE_CA"], env["MAGNUM_TEST_KUBE_CERT"],
                    env["MAGNUM_TEST_KUBE_KEY"])
        for j in range(20):
            name = "conc-%d-%d" % (i, j)
            r = cl.post(CM, configmap(name, labels={"conc": str(i)}))
            if r.status != 201:
                errors.append(r)
            cur = r.json
            cur["data"]["j"] = str(j)
            r = cl.put(CM + "/" + name, cur)
            if r.status != 200:
                errors.append(r)
        if len(cl.get(CM + "?labelSelector=conc%3D" + str(i)).json["items"]) != 20:
            errors.append("list %d" % i)
        if cl.connects != 1:
            errors.append("client %d opened %d connections (keep-alive broken)" % (i, cl.connects))
    ths = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    t0 = time.monotonic()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    t.check("concurrency: 8 clients x 20 creates+updates on keep-alive connections (one each), no error (%.2f s)"
            % (time.monotonic() - t0), not errors, errors[:3])


# ---------------------------------------------------------------------------------------------
# benchmark


def _bench_worker(args):
    env, path, seconds = args
    cl = Client(env["MAGNUM_TEST_KUBE_URL"], env["MAGNUM_TEST_KUBE_CA"], env["MAGNUM_TEST_KUBE_CERT"], env["MAGNUM_TEST_KUBE_KEY"])
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r = cl.get(path)
        assert r.status == 200
        n += 1
    return n


def bench(env, c, seconds, procs=2):
    for i in range(100):
        c.post(CL2, cluster_v1beta2("bench-%03d" % i, labels={"bench": "yes", "i": str(i)}))
    for i in range(100):
        c.post(CL2, cluster_v1beta2("other-%03d" % i, labels={"bench": "no"}))
    out = {}
    for label, path in (("GET one Cluster", CL2 + "/bench-042"),
                        ("LIST 100 Clusters of 200+ with labelSelector=bench=yes", CL2 + "?labelSelector=bench%3Dyes")):
        n = len(c.get(path).json.get("items", [])) if "LIST" in label else 1
        with multiprocessing.Pool(procs) as pool:
            t0 = time.monotonic()
            counts = pool.map(_bench_worker, [(env, path, seconds)] * procs)
            dt = time.monotonic() - t0
        out[label] = sum(counts) / dt
        print("bench: %s: %.0f requests/s (%d client processes, keep-alive, %d items/answer, %.1f s)"
              % (label, out[label], procs, n, dt), flush=True)
    return out


# ---------------------------------------------------------------------------------------------


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"export (\w+)=(.*)", line.strip())
            if m:
                env[m.group(1)] = m.group(2)
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", action="store_true", help="leave the temporary folder (the server is stopped)")
    ap.add_argument("--bench", type=float, default=0, metavar="SECONDS", help="also measure requests/s")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kube-selftest-")
    t = T()
    envv = dict(os.environ, MAGNUM_TEST_KUBE_BOOKMARK_SECONDS="1")
    start = subprocess.run(["bash", os.path.join(HERE, "start.sh"), tmp, "--no-controller"], env=envv,
                           stdout=subprocess.PIPE, text=True)
    try:
        if start.returncode != 0:
            t.check("start.sh DIR --no-controller", False, "exit %d" % start.returncode)
            return finish(t)
        kc = start.stdout.strip()
        t.check("start.sh prints the kubeconfig path; env.sh exports KUBECONFIG and MAGNUM_TEST_KUBE_URL",
                kc == os.path.join(tmp, "kubeconfig") and os.path.isfile(kc))
        env = read_env(os.path.join(tmp, "env.sh"))
        t.check("env.sh: KUBECONFIG, MAGNUM_TEST_KUBE_URL=https://127.0.0.1:PORT",
                env.get("KUBECONFIG") == kc and re.fullmatch(r"https://127\.0\.0\.1:\d+", env.get("MAGNUM_TEST_KUBE_URL", "")), env)
        with open(kc) as f:
            kct = f.read()
        t.check("kubeconfig: cluster with certificate-authority-data, user with client-certificate-data and "
                "client-key-data, current-context",
                all(k in kct for k in ("certificate-authority-data:", "client-certificate-data:", "client-key-data:",
                                       "current-context: magnum-test", "server: " + env["MAGNUM_TEST_KUBE_URL"])))
        c = Client(env["MAGNUM_TEST_KUBE_URL"], env["MAGNUM_TEST_KUBE_CA"], env["MAGNUM_TEST_KUBE_CERT"], env["MAGNUM_TEST_KUBE_KEY"])
        schema = b"crd-schemas: present" in c.get("/readyz?verbose").raw
        print("selftest: mode: %s" % ("CRD schemas present (%s): objects validated" % (os.environ.get("MAGNUM_TEST_CAPI_CRDS") or "default folder")
                                     if schema else "CRD schemas ABSENT: objects not validated (built-in kind list)"), flush=True)
        out = subprocess.run(["openssl", "x509", "-in", env["MAGNUM_TEST_KUBE_CERT"], "-noout", "-subject"],
                             stdout=subprocess.PIPE, text=True).stdout
        t.check("certificates: client certificate CN=magnum-rs, O=system:masters",
                "CN" in out and "magnum-rs" in out and "system:masters" in out, out)
        out = subprocess.run(["openssl", "x509", "-in", os.path.join(tmp, "server.crt"), "-noout", "-ext", "subjectAltName"],
                             stdout=subprocess.PIPE, text=True).stdout
        t.check("certificates: server certificate for IP 127.0.0.1 and DNS localhost",
                "IP Address:127.0.0.1" in out and "DNS:localhost" in out, out)
        for fn, fargs in ((test_auth, (env, c)), (test_discovery, (c, schema)), (test_create_get, (c, schema)),
                          (test_validation, (c, schema)), (test_versions, (c, schema)), (test_lists, (c,)),
                          (test_replace, (c,)), (test_generation_status, (c,)), (test_patches, (c, schema)),
                          (test_apply, (c, schema)), (test_scale, (c, schema)), (test_delete, (c,)), (test_gc, (c,)),
                          (test_builtins, (c,)), (test_watch, (c, env)), (test_watch_curl, (c, env)),
                          (test_faults, (c,)), (test_http, (c,)), (test_concurrency, (env,))):
            try:
                fn(t, *fargs)
            except Exception:  # a crash in one group is one failed check; the others still run
                t.check("%s ran to its end" % fn.__name__, False, traceback.format_exc())
                c.conn = None
        with open(os.path.join(tmp, "apiserver.log")) as f:
            log = f.read()
        t.check("log: one line per request (method, path, code, ms); no Secret data in it",
                re.search(r" GET /api/v1/namespaces/%s \d+ [\d.]+ms" % NS, log) and "cGxhaW4=" not in log
                and "not base64!" not in log
                and "Traceback" not in log, log[-2000:])
        if args.bench:
            bench(env, c, args.bench)
    finally:
        subprocess.run(["bash", os.path.join(HERE, "stop.sh"), tmp])
        pid_left = os.path.exists(os.path.join(tmp, "apiserver.pid"))
        if args.keep or t.failed:
            print("selftest: state kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        if pid_left:
            t.check("stop.sh removes the pid file", False)
    return finish(t)


def finish(t):
    if t.failed:
        print("selftest: %d checks passed, %d failed: %s" % (t.passed, len(t.failed), "; ".join(t.failed)))
        return 1
    print("selftest: %d checks passed" % t.passed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
