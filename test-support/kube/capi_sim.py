#!/usr/bin/env python3
"""capi_sim: a simulated Cluster API + CAPO controller for tests.

It plays the parts of Cluster API's topology, cluster, KubeadmControlPlane, MachineDeployment
and Machine controllers and of CAPO (cluster-api-provider-openstack) against a Kubernetes API
server, over the ordinary REST wire only (list, watch, get, create, merge-patch, /status,
delete, finalizers), so it runs against the test stand-in (apiserver.py) or a real server.
Nothing is built: Machines, servers, networks and load balancers are invented, one step at a
time, with the object shapes and conditions the real controllers write.

    capi_sim.py --kubeconfig DIR/kubeconfig [--namespace magnum-system] [--step-seconds 0.5]

Standard library only. What it simulates, timings, shapes and fault switches: capi_sim.md.
"""

import argparse
import base64
import copy
import hashlib
import heapq
import http.client
import ipaddress
import json
import os
import random
import re
import signal
import ssl
import string
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid

import topology_patches as tpatch

# ---------------------------------------------------------------------------------------------
# Names

G_CAPI = "cluster.x-k8s.io"
G_CP = "controlplane.cluster.x-k8s.io"
G_BOOT = "bootstrap.cluster.x-k8s.io"
G_INFRA = "infrastructure.cluster.x-k8s.io"
INFRA_VERSION = "v1beta1"  # CAPO v0.14 serves only v1beta1

# kind -> (group, plural)
KINDS = {
    "Cluster": (G_CAPI, "clusters"),
    "ClusterClass": (G_CAPI, "clusterclasses"),
    "MachineDeployment": (G_CAPI, "machinedeployments"),
    "Machine": (G_CAPI, "machines"),
    "KubeadmControlPlane": (G_CP, "kubeadmcontrolplanes"),
    "OpenStackCluster": (G_INFRA, "openstackclusters"),
    "OpenStackMachine": (G_INFRA, "openstackmachines"),
    "OpenStackMachineTemplate": (G_INFRA, "openstackmachinetemplates"),
    "OpenStackClusterTemplate": (G_INFRA, "openstackclustertemplates"),
    "KubeadmControlPlaneTemplate": (G_CP, "kubeadmcontrolplanetemplates"),
    "KubeadmConfigTemplate": (G_BOOT, "kubeadmconfigtemplates"),
}
# The ClusterClass's bootstrap templates (watched at v1beta2 only: their patches need them).
CLASS_TEMPLATE_KINDS = ("KubeadmControlPlaneTemplate", "KubeadmConfigTemplate")
INFRA_KINDS = {"OpenStackCluster", "OpenStackMachine", "OpenStackMachineTemplate", "OpenStackClusterTemplate"}
# Kinds whose objects belong to one cluster (label cluster.x-k8s.io/cluster-name).
CAPI_CHILD_KINDS = ("MachineDeployment", "Machine", "KubeadmControlPlane")
INFRA_CHILD_KINDS = ("OpenStackCluster", "OpenStackMachine", "OpenStackMachineTemplate")

FINALIZER = {
    "Cluster": "cluster.cluster.x-k8s.io",
    "MachineDeployment": "cluster.x-k8s.io/machinedeployment",
    "KubeadmControlPlane": "kubeadm.controlplane.cluster.x-k8s.io",
    "Machine": "machine.cluster.x-k8s.io",
    "OpenStackCluster": "openstackcluster.infrastructure.cluster.x-k8s.io",
    "OpenStackMachine": "openstackmachine.infrastructure.cluster.x-k8s.io",
}

L_CLUSTER = "cluster.x-k8s.io/cluster-name"
G_ADDONS = "addons.cluster.x-k8s.io"
L_HCP = "helmreleaseproxy.addons.cluster.x-k8s.io/helmchartproxy-name"
L_CP = "cluster.x-k8s.io/control-plane"
L_CP_NAME = "cluster.x-k8s.io/control-plane-name"
L_MD = "cluster.x-k8s.io/deployment-name"
L_TOPO_MD = "topology.cluster.x-k8s.io/deployment-name"
L_OWNED = "topology.cluster.x-k8s.io/owned"
A_DELETE_MACHINE = "cluster.x-k8s.io/delete-machine"
A_CLONED_NAME = "cluster.x-k8s.io/cloned-from-name"
A_CLONED_GK = "cluster.x-k8s.io/cloned-from-groupkind"
A_PAUSED = "cluster.x-k8s.io/paused"
A_MIN_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
SIM = "capi-sim.magnum-rs.dev/"
A_FAULT = SIM + "fault"
A_STEP = SIM + "step-seconds"
A_API_VERSION = SIM + "api-version"
A_HASH = SIM + "template-hash"
A_ROLE = SIM + "template-role"
A_CREATED = SIM + "created"
A_ADDRESS = SIM + "address"
FIELD_MANAGER = "capi-sim"
FAULTS = ("quota", "stall", "infra-failed", "delete-blocked")

QUOTA_MESSAGE = ("Failed to create server: Quota exceeded for instances: Requested 1, "
                 "but already used 10 of 10 instances")
ROUTER_MESSAGE = "Failed to create router: Quota exceeded for resources: ['router']"

ALNUM = string.ascii_lowercase + string.digits


class Stats:
    """Counters for --stats: reconciles, their time, requests and their time."""

    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}

    def add(self, key, n=1, secs=0.0):
        with self.lock:
            v = self.c.setdefault(key, [0, 0.0])
            v[0] += n
            v[1] += secs

    def take(self):
        with self.lock:
            c, self.c = self.c, {}
        return c


STATS = Stats()

# ---------------------------------------------------------------------------------------------
# Small helpers

_log_lock = threading.Lock()
_log_file = None


def log(msg):
    line = "%s capi-sim %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), msg)
    with _log_lock:
        sys.stderr.write(line)
        sys.stderr.flush()
        if _log_file is not None:
            _log_file.write(line)
            _log_file.flush()


def iso(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def g(obj, *path, default=None):
    """obj[path...] or default when any step is missing or of the wrong type."""
    cur = obj
    for p in path:
        if isinstance(cur, dict):
            if p not in cur:
                return default
            cur = cur[p]
        elif isinstance(cur, list) and isinstance(p, int):
            if p >= len(cur) or p < -len(cur):
                return default
            cur = cur[p]
        else:
            return default
    return default if cur is None else cur


def name_of(obj):
    return g(obj, "metadata", "name", default="")


def labels_of(obj):
    v = g(obj, "metadata", "labels", default={})
    return v if isinstance(v, dict) else {}


def annotations_of(obj):
    v = g(obj, "metadata", "annotations", default={})
    return v if isinstance(v, dict) else {}


def generation(obj):
    v = g(obj, "metadata", "generation", default=1)
    return v if isinstance(v, int) and v >= 1 else 1


def deleting(obj):
    return bool(g(obj, "metadata", "deletionTimestamp"))


def finalizers_of(obj):
    v = g(obj, "metadata", "finalizers", default=[])
    return [f for f in v if isinstance(f, str)] if isinstance(v, list) else []


def rand5():
    return "".join(random.choice(ALNUM) for _ in range(5))


def stable_uuid(*parts):
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "capi-sim:" + ":".join(str(p) for p in parts)))


def stable_int(mod, *parts):
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") % mod


def as_int(v, default):
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return default


def version_key(v):
    v = v if isinstance(v, str) else str(v or "")
    nums = re.findall(r"\d+", v)
    return tuple(int(n) for n in nums[:3]) + (v,)


def as_dict(v):
    return v if isinstance(v, dict) else {}


def as_list(v):
    return v if isinstance(v, list) else []


def str_map(v):
    """A labels/annotations map with only its string values (others are dropped)."""
    return {k: x for k, x in as_dict(v).items() if isinstance(k, str) and isinstance(x, str)}


def replicas_of(v, default, minimum=0):
    n = as_int(v, default)
    return None if n is None else max(minimum, n)


def norm_topology(topo):
    """spec.topology as the simulation reads it, whatever the object holds (never raises)."""
    topo = as_dict(topo)
    version = topo.get("version")
    version = version if isinstance(version, str) and version else ("v%s" % version if version else "v1.0.0")
    cp = as_dict(topo.get("controlPlane"))
    entries, seen = [], set()
    for e in as_list(as_dict(topo.get("workers")).get("machineDeployments")):
        e = as_dict(e)
        name = e.get("name")
        if not isinstance(name, str) or not name or name in seen:
            continue
        seen.add(name)
        meta = as_dict(e.get("metadata"))
        fd = e.get("failureDomain")
        entries.append({"name": name, "class": e.get("class") if isinstance(e.get("class"), str) else "",
                        "replicas": replicas_of(e.get("replicas"), None),
                        "failureDomain": fd if isinstance(fd, str) and fd else None,
                        "labels": str_map(meta.get("labels")), "annotations": str_map(meta.get("annotations")),
                        "overrides": as_list(as_dict(e.get("variables")).get("overrides"))})
    return {"version": version, "cp_replicas": replicas_of(cp.get("replicas"), 1, 1),
            "cp_labels": str_map(as_dict(cp.get("metadata")).get("labels")),
            "variables": as_list(topo.get("variables")), "entries": entries}


UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def rv_int(obj):
    v = g(obj, "metadata", "resourceVersion", default="")
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def subset(cur, want):
    """Whether `cur` already holds everything in `want` (None in `want` means: absent)."""
    if isinstance(want, dict):
        if not isinstance(cur, dict):
            return False
        for k, v in want.items():
            if v is None:
                if cur.get(k) is not None:
                    return False
            elif k not in cur or not subset(cur[k], v):
                return False
        return True
    if isinstance(want, list):
        if not isinstance(cur, list) or len(cur) != len(want):
            return False
        return all(subset(c, w) for c, w in zip(cur, want))
    return cur == want


def strip_none(v):
    if isinstance(v, dict):
        return {k: strip_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [strip_none(x) for x in v]
    return v


def spec_hash(spec):
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Kubeconfig


def _scalar(s):
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    if s in ("true", "True"):
        return True
    if s in ("false", "False"):
        return False
    if s in ("null", "~", ""):
        return None
    return s


def mini_yaml(text):
    """A block-style YAML subset: mappings, sequences of mappings or scalars, plain or quoted
    scalars. Enough for a kubeconfig when PyYAML is not importable."""
    lines = []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#") or raw.strip() == "---":
            continue
        lines.append((len(raw) - len(raw.lstrip(" ")), raw.strip()))
    pos = 0

    def parse(indent):
        nonlocal pos
        if pos >= len(lines):
            return None
        if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
            seq = []
            while pos < len(lines) and lines[pos][0] == indent and (
                    lines[pos][1].startswith("- ") or lines[pos][1] == "-"):
                body = lines[pos][1][1:].strip()
                if not body:
                    pos += 1
                    seq.append(parse(lines[pos][0]) if pos < len(lines) and lines[pos][0] > indent else None)
                elif re.match(r"^[^\"'][^:]*:( |$)", body):
                    # A mapping starting on the dash line: treat the rest as one more indent.
                    lines[pos] = (indent + 2, body)
                    seq.append(parse(indent + 2))
                else:
                    seq.append(_scalar(body))
                    pos += 1
            return seq
        out = {}
        while pos < len(lines) and lines[pos][0] == indent and not lines[pos][1].startswith("- "):
            key, _, rest = lines[pos][1].partition(":")
            key = _scalar(key)
            pos += 1
            if rest.strip():
                out[key] = _scalar(rest)
            elif pos < len(lines) and (lines[pos][0] > indent or (
                    lines[pos][0] == indent and lines[pos][1].startswith("- "))):
                out[key] = parse(lines[pos][0])
            else:
                out[key] = None
        return out

    return parse(lines[0][0]) if lines else {}


def load_kubeconfig(path):
    text = open(path, encoding="utf-8").read()
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml  # PyYAML, when the venv has it

        return yaml.safe_load(text)
    except ImportError:
        return mini_yaml(text)


class KubeConfig:
    def __init__(self, path, context=None):
        cfg = load_kubeconfig(path) or {}
        base = os.path.dirname(os.path.abspath(path))
        ctx_name = context or cfg.get("current-context")
        ctxs = {c.get("name"): c.get("context") or {} for c in cfg.get("contexts") or []}
        ctx = ctxs.get(ctx_name) or (next(iter(ctxs.values())) if ctxs else {})
        clusters = {c.get("name"): c.get("cluster") or {} for c in cfg.get("clusters") or []}
        users = {u.get("name"): u.get("user") or {} for u in cfg.get("users") or []}
        cluster = clusters.get(ctx.get("cluster")) or (next(iter(clusters.values())) if clusters else {})
        user = users.get(ctx.get("user")) or (next(iter(users.values())) if users else {})
        self.namespace = ctx.get("namespace")
        server = cluster.get("server") or "https://127.0.0.1:6443"
        u = urllib.parse.urlsplit(server)
        self.scheme = u.scheme or "https"
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if self.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.token = user.get("token")
        if not self.token and user.get("tokenFile"):
            self.token = open(os.path.join(base, user["tokenFile"])).read().strip()
        self.ctx = None
        self._tmp = None
        if self.scheme == "https":
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            if cluster.get("insecure-skip-tls-verify"):
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            elif cluster.get("certificate-authority-data"):
                ctx.load_verify_locations(
                    cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
            elif cluster.get("certificate-authority"):
                ctx.load_verify_locations(cafile=os.path.join(base, cluster["certificate-authority"]))
            self.server_name = cluster.get("tls-server-name") or self.host
            cert, key = user.get("client-certificate"), user.get("client-key")
            if user.get("client-certificate-data"):
                self._tmp = tempfile.mkdtemp(prefix="capi-sim-")
                cert = os.path.join(self._tmp, "client.crt")
                key = os.path.join(self._tmp, "client.key")
                for p, field in ((cert, "client-certificate-data"), (key, "client-key-data")):
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    with os.fdopen(fd, "wb") as f:
                        f.write(base64.b64decode(user[field]))
            elif cert:
                cert, key = os.path.join(base, cert), os.path.join(base, key or cert)
            if cert:
                ctx.load_cert_chain(cert, key)
            # The context holds the key now: the copies written from the kubeconfig go at once.
            self.cleanup()
            self.ctx = ctx
        else:
            self.server_name = self.host

    def cleanup(self):
        if self._tmp:
            for f in os.listdir(self._tmp):
                try:
                    os.unlink(os.path.join(self._tmp, f))
                except OSError:
                    pass
            try:
                os.rmdir(self._tmp)
            except OSError:
                pass
            self._tmp = None


# ---------------------------------------------------------------------------------------------
# REST client


class ApiError(Exception):
    def __init__(self, code, body, method="", path=""):
        self.code = code
        self.body = body if isinstance(body, dict) else {}
        self.reason = self.body.get("reason", "")
        self.message = self.body.get("message") or (body if isinstance(body, str) else "")
        super().__init__("%s %s -> %s %s: %s" % (method, path, code, self.reason, self.message))


class _HTTPS(http.client.HTTPSConnection):
    """HTTPS whose certificate is checked against tls-server-name when the kubeconfig has one."""

    def __init__(self, host, port, context, timeout, server_name):
        super().__init__(host, port, context=context, timeout=timeout)
        self._server_name = server_name

    def connect(self):
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name)


class Kube:
    """One connection per thread; retries connection errors, 429 and 5xx with backoff."""

    def __init__(self, cfg, timeout=30.0):
        self.cfg = cfg
        self.timeout = timeout
        self.local = threading.local()

    def _new_conn(self, timeout):
        c = self.cfg
        if c.scheme == "https":
            conn = _HTTPS(c.host, c.port, c.ctx, timeout, c.server_name)
        else:
            conn = http.client.HTTPConnection(c.host, c.port, timeout=timeout)
        return conn

    def _headers(self, ctype=None):
        h = {"Accept": "application/json", "User-Agent": "capi-sim/1"}
        if ctype:
            h["Content-Type"] = ctype
        if self.cfg.token:
            h["Authorization"] = "Bearer " + self.cfg.token
        return h

    def request(self, method, path, body=None, ctype="application/json", query=None, retries=7):
        q = dict(query or {})
        if method in ("POST", "PUT", "PATCH"):
            q.setdefault("fieldManager", FIELD_MANAGER)
        url = self.cfg.prefix + path + ("?" + urllib.parse.urlencode(q) if q else "")
        data = json.dumps(body).encode() if body is not None else None
        delay = 0.1
        last = None
        for attempt in range(retries):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = self._new_conn(self.timeout)
            try:
                t0 = time.monotonic()
                conn.request(method, url, body=data, headers=self._headers(ctype if data is not None else None))
                resp = conn.getresponse()
                raw = resp.read()
                STATS.add("http " + method, 1, time.monotonic() - t0)
                status = resp.status
                retry_after = resp.getheader("Retry-After")
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    self.local.conn = None
            except (OSError, http.client.HTTPException) as e:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
                self.local.conn = None
                last = ApiError(0, {"message": "connection error: %s" % e}, method, path)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            try:
                parsed = json.loads(raw) if raw else {}
            except ValueError:
                parsed = {"message": raw[:500].decode(errors="replace")}
            if status == 429 or status >= 500:
                last = ApiError(status, parsed, method, path)
                wait = delay
                if retry_after and retry_after.isdigit():
                    wait = min(float(retry_after), 5.0)
                time.sleep(wait)
                delay = min(delay * 2, 2.0)
                continue
            if status >= 400:
                raise ApiError(status, parsed, method, path)
            return parsed
        raise last

    def open_watch(self, path, query, timeout):
        """A streaming GET on its own connection; returns (conn, response)."""
        url = self.cfg.prefix + path + "?" + urllib.parse.urlencode(query)
        conn = self._new_conn(timeout)
        conn.request("GET", url, headers=self._headers())
        return conn, conn.getresponse()


def base_path(kind, version, ns):
    group, plural = KINDS[kind]
    return "/apis/%s/%s/namespaces/%s/%s" % (group, version, ns, plural)


# ---------------------------------------------------------------------------------------------
# Cache fed by list+watch


class Cache:
    def __init__(self):
        self.lock = threading.RLock()
        self.objs = {}  # (kind, ver) -> {name: obj}
        self.index = {}  # (kind, ver) -> {cluster: {name: obj}}
        self.synced = {}  # (kind, ver) -> threading.Event
        self.tombstones = {}  # (kind, ver, name) -> (uid, time): deleted objects, for late echoes

    @staticmethod
    def cluster_key(kind, obj):
        if kind == "Cluster":
            return name_of(obj)
        return labels_of(obj).get(L_CLUSTER)

    def _index_put(self, key, obj):
        ck = self.cluster_key(key[0], obj)
        if ck:
            self.index.setdefault(key, {}).setdefault(ck, {})[name_of(obj)] = obj

    def _index_del(self, key, obj):
        ck = self.cluster_key(key[0], obj)
        if ck:
            bucket = self.index.get(key, {}).get(ck)
            if bucket is not None:
                bucket.pop(name_of(obj), None)
                if not bucket:
                    self.index[key].pop(ck, None)

    def put(self, kind, ver, obj, force=False):
        """Store obj unless the cache holds a newer one. Returns whether it changed."""
        key = (kind, ver)
        if kind != "Cluster" and isinstance(obj.get("metadata"), dict):
            obj["metadata"].pop("managedFields", None)
        with self.lock:
            store = self.objs.setdefault(key, {})
            old = store.get(name_of(obj))
            tomb = self.tombstones.get((kind, ver, name_of(obj)))
            if tomb is not None and not force:
                if tomb[0] == g(obj, "metadata", "uid"):
                    return False
                del self.tombstones[(kind, ver, name_of(obj))]
            if old is not None and not force:
                a, b = rv_int(old), rv_int(obj)
                if a is not None and b is not None and b <= a:
                    return False
                if g(old, "metadata", "uid") != g(obj, "metadata", "uid") and b is not None and a is not None and b < a:
                    return False
            if old is not None:
                self._index_del(key, old)
            store[name_of(obj)] = obj
            self._index_put(key, obj)
            return True

    def remove(self, kind, ver, name, tombstone=None):
        key = (kind, ver)
        with self.lock:
            old = self.objs.get(key, {}).pop(name, None)
            if old is not None:
                self._index_del(key, old)
            src = tombstone if tombstone is not None else old
            uid = g(src, "metadata", "uid")
            if uid:
                now = time.monotonic()
                self.tombstones[(kind, ver, name)] = (uid, now)
                if len(self.tombstones) > 5000:
                    self.tombstones = {k: v for k, v in self.tombstones.items() if now - v[1] < 60}
            return old

    def replace(self, kind, ver, items, list_rv):
        """A fresh list: returns the cluster keys of objects that changed or went."""
        key = (kind, ver)
        touched = set()
        with self.lock:
            store = self.objs.setdefault(key, {})
            fresh = {name_of(o): o for o in items}
            for name, old in list(store.items()):
                if name not in fresh:
                    a = rv_int(old)
                    if a is not None and list_rv is not None and a > list_rv:
                        continue  # written after the list was taken
                    self.remove(kind, ver, name)
                    touched.add(self.cluster_key(kind, old))
            for o in items:
                if self.put(kind, ver, o):
                    touched.add(self.cluster_key(kind, o))
        touched.discard(None)
        return touched

    def get(self, kind, ver, name):
        with self.lock:
            return self.objs.get((kind, ver), {}).get(name)

    def all(self, kind, ver):
        with self.lock:
            return list(self.objs.get((kind, ver), {}).values())

    def of_cluster(self, kind, ver, cluster):
        with self.lock:
            return list(self.index.get((kind, ver), {}).get(cluster, {}).values())

    def cluster_keys(self):
        with self.lock:
            keys = set()
            for idx in self.index.values():
                keys.update(idx.keys())
            return keys


class Watcher(threading.Thread):
    def __init__(self, ctl, kind, ver):
        super().__init__(daemon=True, name="watch-%s-%s" % (kind, ver))
        self.ctl, self.kind, self.ver = ctl, kind, ver
        self.synced = threading.Event()
        self.path = base_path(kind, ver, ctl.ns)
        self.kube = Kube(ctl.cfg, timeout=30)
        self.complained = False

    def run(self):
        rv = None
        while not self.ctl.stopping.is_set():
            try:
                if rv is None:
                    rv = self.relist()
                rv = self.watch(rv)
            except ApiError as e:
                if e.code == 410:
                    rv = None
                    continue
                if e.code in (404, 403) and not self.complained:
                    # Not served (a CRD missing) or not allowed: count it as empty so that the
                    # other kinds go on, and keep trying.
                    log("watch %s/%s: %s (retrying every 2 s)" % (self.kind, self.ver, e))
                    self.complained = True
                    self.synced.set()
                elif e.code not in (404, 403):
                    log("watch %s/%s: %s" % (self.kind, self.ver, e))
                rv = None
                self.ctl.stopping.wait(2.0 if e.code in (404, 403) else 1.0)
            except (OSError, http.client.HTTPException, ValueError) as e:
                # A dropped stream (not a clean end): list again, events may have been lost.
                if self.ctl.verbose:
                    log("watch %s/%s dropped: %s" % (self.kind, self.ver, e))
                rv = None
                self.ctl.stopping.wait(0.1)

    def relist(self):
        body = self.kube.request("GET", self.path)
        items = body.get("items") or []
        for it in items:
            # Lists carry kind/apiVersion on the list, not always on items.
            it.setdefault("kind", self.kind)
        list_rv = g(body, "metadata", "resourceVersion")
        try:
            list_rv_i = int(list_rv)
        except (TypeError, ValueError):
            list_rv_i = None
        touched = self.ctl.cache.replace(self.kind, self.ver, items, list_rv_i)
        if self.complained:
            log("watch %s/%s: listing again (%d objects)" % (self.kind, self.ver, len(items)))
            self.complained = False
        self.synced.set()
        self.ctl.objects_changed(self.kind, touched)
        return list_rv or ""

    def watch(self, rv):
        q = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "240"}
        if rv:
            q["resourceVersion"] = rv
        conn, resp = self.kube.open_watch(self.path, q, timeout=300)
        try:
            if resp.status != 200:
                raw = resp.read()
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"message": raw[:300].decode(errors="replace")}
                raise ApiError(resp.status, body, "WATCH", self.path)
            while not self.ctl.stopping.is_set():
                line = resp.readline()
                if not line:
                    return rv  # the server ended the watch: watch again from rv
                line = line.strip()
                if not line:
                    continue
                ev = json.loads(line)
                typ, obj = ev.get("type"), ev.get("object") or {}
                if typ == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        raise ApiError(410, obj, "WATCH", self.path)
                    raise ApiError(code or 500, obj, "WATCH", self.path)
                new_rv = g(obj, "metadata", "resourceVersion")
                if new_rv:
                    rv = new_rv
                if typ == "BOOKMARK":
                    continue
                obj.setdefault("kind", self.kind)
                ck = Cache.cluster_key(self.kind, obj)
                if typ == "DELETED":
                    self.ctl.cache.remove(self.kind, self.ver, name_of(obj), tombstone=obj)
                    self.ctl.objects_changed(self.kind, {ck} if ck else set(), obj)
                elif typ in ("ADDED", "MODIFIED"):
                    if self.ctl.cache.put(self.kind, self.ver, obj):
                        self.ctl.objects_changed(self.kind, {ck} if ck else set(), obj)
            return rv
        finally:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass


# ---------------------------------------------------------------------------------------------
# Work queue (one worker per cluster at a time, like client-go's) and a timer


class WorkQueue:
    def __init__(self):
        self.cv = threading.Condition()
        self.queue = []
        self.dirty = set()
        self.processing = set()
        self.timers = []  # heap of (when, seq, key)
        self.seq = 0
        self.pending = {}  # key -> earliest timer

    def add(self, key):
        with self.cv:
            if key in self.dirty:
                return
            self.dirty.add(key)
            if key not in self.processing:
                self.queue.append(key)
                self.cv.notify()

    def add_after(self, key, delay):
        if delay <= 0:
            self.add(key)
            return
        with self.cv:
            when = time.monotonic() + delay
            if self.pending.get(key, float("inf")) <= when:
                return
            self.pending[key] = when
            self.seq += 1
            heapq.heappush(self.timers, (when, self.seq, key))
            self.cv.notify_all()

    def get(self, stopping):
        with self.cv:
            while True:
                if stopping.is_set():
                    return None
                now = time.monotonic()
                while self.timers and self.timers[0][0] <= now:
                    when, _, key = heapq.heappop(self.timers)
                    if self.pending.get(key) == when:
                        del self.pending[key]
                    if key not in self.dirty:
                        self.dirty.add(key)
                        if key not in self.processing:
                            self.queue.append(key)
                if self.queue:
                    key = self.queue.pop(0)
                    self.dirty.discard(key)
                    self.processing.add(key)
                    return key
                wait = 0.5
                if self.timers:
                    wait = max(0.0, min(wait, self.timers[0][0] - now))
                self.cv.wait(wait)

    def done(self, key):
        with self.cv:
            self.processing.discard(key)
            if key in self.dirty:
                self.queue.append(key)
                self.cv.notify()


class Conflict(Exception):
    """A write lost a race: the object was re-read, the cluster is reconciled again."""


class ClusterState:
    def __init__(self, due):
        self.due = due  # monotonic time of the next simulated step
        self.failures = 0
        self.logged = {}  # key -> last value, for one log line per transition


# ---------------------------------------------------------------------------------------------
# Conditions


def cond2(typ, status, reason, message="", gen=1):
    return {"type": typ, "status": status, "reason": reason, "message": message or "",
            "observedGeneration": gen}


def cond1(typ, status, reason=None, severity=None, message=None):
    c = {"type": typ, "status": status}
    if status != "True":
        if reason:
            c["reason"] = reason
        c["severity"] = severity or "Info"
        if message:
            c["message"] = message[:10240]
    elif message:
        c["message"] = message[:10240]
    return c


def indent(msg, n=2):
    return "\n".join(" " * n + ln for ln in (msg or "").splitlines())


def aggregate(items, label, true_reason, false_reason, unknown_reason, empty_reason="NoReplicas"):
    """items: [(name, condition dict)] -> (status, reason, message), CAPI-style summaries that
    name the objects with issues."""
    if not items:
        return "True", empty_reason, ""
    bad = [(n, c) for n, c in items if c.get("status") == "False"]
    unk = [(n, c) for n, c in items if c.get("status") == "Unknown"]
    if not bad and not unk:
        return "True", true_reason, ""
    chosen = bad or unk
    groups = {}
    for n, c in sorted(chosen, key=lambda x: x[0]):
        groups.setdefault(c.get("message") or c.get("reason") or "", []).append(n)
    lines = []
    for i, (msg, names) in enumerate(groups.items()):
        if i == 3:
            lines.append("* And %d more %ss with other issues" % (sum(len(v) for v in list(groups.values())[3:]), label))
            break
        if len(names) == 1:
            head = "* %s %s" % (label, names[0])
        else:
            shown = ", ".join(names[:3]) + (", ... (%d more)" % (len(names) - 3) if len(names) > 3 else "")
            head = "* %ss %s" % (label, shown)
        if not msg:
            lines.append(head)
        elif "\n" in msg or msg.startswith("* "):
            lines.append(head + ":\n" + indent(msg))
        else:
            lines.append(head + ": " + msg)
    return ("False" if bad else "Unknown"), (false_reason if bad else unknown_reason), "\n".join(lines)


def summary(parts, negative=()):
    """parts: [(type, condition dict)]: a Ready/Available style summary."""
    bad, unk = [], []
    for typ, c in parts:
        st = c.get("status")
        ok = st == "False" if typ in negative else st == "True"
        if ok:
            continue
        (unk if st == "Unknown" else bad).append((typ, c))
    if not bad and not unk:
        return "True", ""
    lines = []
    for t, c in bad + unk:
        m = c.get("message") or c.get("reason") or ""
        if "\n" in m or m.startswith("* "):
            lines.append("* %s:\n%s" % (t, indent(m)))
        else:
            lines.append("* %s: %s" % (t, m))
    msg = "\n".join(lines)
    return ("False" if bad else "Unknown"), msg


def first_bad_v1(conds):
    """The most severe False v1beta1 condition of a list (for a v1beta1 summary)."""
    rank = {"Error": 0, "Warning": 1, "Info": 2}
    bad = [c for c in conds if c.get("status") != "True"]
    if not bad:
        return None
    return sorted(bad, key=lambda c: rank.get(c.get("severity", "Info"), 3))[0]


def summary_v1(conds, deleting_now=False):
    if deleting_now:
        return cond1("Ready", "False", "Deleting", "Info")
    b = first_bad_v1(conds)
    if b is None:
        return cond1("Ready", "True")
    return cond1("Ready", "False", b.get("reason") or "NotReady", b.get("severity"), b.get("message"))


def with_times(new, *old_lists, ts):
    """Keep lastTransitionTime of conditions whose status did not change."""
    prev = {}
    for lst in old_lists:
        if isinstance(lst, list):
            for c in lst:
                if isinstance(c, dict) and c.get("type") and c.get("type") not in prev:
                    prev[c["type"]] = c
    out = []
    for c in new:
        p = prev.get(c["type"])
        c = dict(c)
        if p is not None and p.get("status") == c["status"] and p.get("lastTransitionTime"):
            c["lastTransitionTime"] = p["lastTransitionTime"]
        else:
            c["lastTransitionTime"] = ts
        out.append(c)
    return out


def find_cond(conds, typ):
    for c in conds or []:
        if isinstance(c, dict) and c.get("type") == typ:
            return c
    return None


# ---------------------------------------------------------------------------------------------
# One reconcile of one Cluster


class Run:
    def __init__(self, ctl, name, kube, state):
        self.ctl, self.name, self.k, self.state = ctl, name, kube, state
        self.ns = ctl.ns
        self.now = time.monotonic()
        self.ts = iso()
        self.prom = {}  # ("Machine"|"OpenStackCluster", name) -> new stage this step
        self.victim_new = None
        self.flavor = "v1beta2"
        self.wrote = 0
        self.topo = {}
        self.patch_error = None

    # ----- access ----------------------------------------------------------------------------

    def ver(self, kind):
        if kind in CLASS_TEMPLATE_KINDS:
            return "v1beta2"
        return INFRA_VERSION if kind in INFRA_KINDS else self.flavor

    def path(self, kind, name=None, sub=None):
        p = base_path(kind, self.ver(kind), self.ns)
        if name:
            p += "/" + urllib.parse.quote(name)
        if sub:
            p += "/" + sub
        return p

    def api_version(self, kind):
        return "%s/%s" % (KINDS[kind][0], self.ver(kind))

    def note(self, key, value, msg):
        """Log msg once per change of value under key."""
        if self.state.logged.get(key) != value:
            self.state.logged[key] = value
            log("%s/%s %s" % (self.ns, self.name, msg))

    # ----- writes ----------------------------------------------------------------------------

    def _store(self, kind, obj):
        if isinstance(obj, dict) and obj.get("metadata") and obj.get("kind") not in (None, "Status"):
            if deleting(obj) and not finalizers_of(obj):
                self.ctl.cache.remove(kind, self.ver(kind), name_of(obj), tombstone=obj)
            else:
                self.ctl.cache.put(kind, self.ver(kind), obj)
        return obj

    def _refresh(self, kind, name):
        try:
            obj = self.k.request("GET", self.path(kind, name))
            self.ctl.cache.put(kind, self.ver(kind), obj, force=True)
        except ApiError as e:
            if e.code == 404:
                self.ctl.cache.remove(kind, self.ver(kind), name)

    def _write(self, kind, name, method, path, body, ctype="application/json"):
        self.wrote += 1
        try:
            return self.k.request(method, path, body, ctype=ctype)
        except ApiError as e:
            if e.code == 409 and method != "POST":
                self._refresh(kind, name)
                raise Conflict("%s %s: %s" % (kind, name, e.message)) from e
            if e.code == 404 and method != "POST":
                self.ctl.cache.remove(kind, self.ver(kind), name)
                raise Conflict("%s %s is gone" % (kind, name)) from e
            if e.code == 422 or e.code == 400:
                log("REJECTED %s %s %s: %s" % (method, kind, name, e.message))
            raise

    def create(self, kind, body):
        base = body["metadata"].pop("_base", None)
        body = strip_none(body)
        for _ in range(3):
            try:
                out = self._write(kind, body["metadata"]["name"], "POST", self.path(kind), body)
                self._store(kind, out)
                if kind not in ("Machine", "OpenStackMachine"):
                    log("%s/%s created %s %s" % (self.ns, self.name, kind, body["metadata"]["name"]))
                return out
            except ApiError as e:
                if e.code == 409 and base:
                    body["metadata"]["name"] = self.unique(base)
                    continue
                raise
        raise Conflict("%s: name collisions" % kind)

    def patch(self, kind, obj, patch, status=False, precondition=True):
        body = copy.deepcopy(patch)
        if precondition and g(obj, "metadata", "resourceVersion"):
            body.setdefault("metadata", {})["resourceVersion"] = obj["metadata"]["resourceVersion"]
        out = self._write(kind, name_of(obj), "PATCH", self.path(kind, name_of(obj), "status" if status else None),
                          body, ctype="application/merge-patch+json")
        return self._store(kind, out)

    def delete(self, kind, obj, why=""):
        try:
            out = self._write(kind, name_of(obj), "DELETE", self.path(kind, name_of(obj)), None)
        except Conflict:
            return None
        if isinstance(out, dict) and out.get("kind") == kind and deleting(out) and finalizers_of(out):
            self._store(kind, out)
        else:
            # Gone at once (no finalizer): a late echo of it must not bring it back.
            self.ctl.cache.remove(kind, self.ver(kind), name_of(obj), tombstone=obj)
        log("%s/%s deleting %s %s%s" % (self.ns, self.name, kind, name_of(obj), (" (" + why + ")") if why else ""))
        return out

    def drop_finalizer(self, kind, obj):
        fin = FINALIZER[kind]
        fins = finalizers_of(obj)
        if fin not in fins:
            return
        rest = [f for f in fins if f != fin]
        out = self.patch(kind, obj, {"metadata": {"finalizers": rest or None}})
        if not rest and deleting(obj):
            self.ctl.cache.remove(kind, self.ver(kind), name_of(obj), tombstone=obj)
            log("%s/%s %s %s removed" % (self.ns, self.name, kind, name_of(obj)))
        return out

    def write_status(self, kind, obj, status):
        cur = g(obj, "status", default={})
        if subset(cur, status):
            return obj
        return self.patch(kind, obj, {"status": status}, status=True)

    # ----- snapshot --------------------------------------------------------------------------

    def load(self):
        c = self.ctl.cache
        v = self.flavor
        cl = self.cl = c.get("Cluster", v, self.name) or self.cl
        self.oscs = c.of_cluster("OpenStackCluster", INFRA_VERSION, self.name)
        self.kcps = c.of_cluster("KubeadmControlPlane", v, self.name)
        self.mds = sorted(c.of_cluster("MachineDeployment", v, self.name), key=name_of)
        self.machines = sorted(c.of_cluster("Machine", v, self.name), key=self.created_key)
        self.osms = {name_of(o): o for o in c.of_cluster("OpenStackMachine", INFRA_VERSION, self.name)}
        self.osmts = {name_of(o): o for o in c.of_cluster("OpenStackMachineTemplate", INFRA_VERSION, self.name)}
        self.kcts = {name_of(o): o for o in c.of_cluster("KubeadmConfigTemplate", "v1beta2", self.name)}
        infra_name = g(cl, "spec", "infrastructureRef", "name")
        cp_name = g(cl, "spec", "controlPlaneRef", "name")
        self.osc = self.pick(self.oscs, infra_name)
        self.kcp = self.pick(self.kcps, cp_name)
        self.md_live = {}
        for md in self.mds:
            t = labels_of(md).get(L_TOPO_MD)
            if t and not deleting(md) and t not in self.md_live:
                self.md_live[t] = md
        self.cp_machines = [m for m in self.machines if L_CP in labels_of(m)]
        self.w_machines = [m for m in self.machines if L_CP not in labels_of(m)]

    @staticmethod
    def pick(objs, preferred):
        live = [o for o in objs if not deleting(o)]
        for o in live:
            if name_of(o) == preferred:
                return o
        if live:
            return sorted(live, key=name_of)[0]
        for o in objs:
            if name_of(o) == preferred:
                return o
        return sorted(objs, key=name_of)[0] if objs else None

    @staticmethod
    def created_key(m):
        return (g(m, "metadata", "creationTimestamp", default=""), annotations_of(m).get(A_CREATED, ""), name_of(m))

    def machines_of_md(self, md):
        n = name_of(md)
        return [m for m in self.w_machines if labels_of(m).get(L_MD) == n]

    def unique(self, base):
        taken = set()
        for kind in ("Machine", "MachineDeployment", "KubeadmControlPlane"):
            taken.update(name_of(o) for o in self.ctl.cache.all(kind, self.flavor))
        for kind in ("OpenStackCluster", "OpenStackMachine", "OpenStackMachineTemplate"):
            taken.update(name_of(o) for o in self.ctl.cache.all(kind, INFRA_VERSION))
        taken.update(name_of(o) for o in self.ctl.cache.all("KubeadmConfigTemplate", "v1beta2"))
        base = base[:57].rstrip("-.")
        while True:
            n = "%s-%s" % (base, rand5())
            if n not in taken:
                return n

    # ----- state of the simulation -----------------------------------------------------------

    def osc_stage(self, osc):
        if osc is None:
            return -1
        p = self.prom.get(("OpenStackCluster", name_of(osc)))
        if p is not None:
            return p
        if g(osc, "status", "ready") is True:
            return 2
        if g(find_cond(g(osc, "status", "conditions", default=[]), "NetworkReady"), "status") == "True":
            return 1
        # Provisioned once, stays provisioned even when a fault made it not ready.
        if g(osc, "status", "initialization", "provisioned") is True:
            return 2
        return 0

    def stage(self, m):
        """0: server being created, 1: server up (infrastructure provisioned), 2: node up."""
        p = self.prom.get(("Machine", name_of(m)))
        if p is not None:
            return p
        if g(m, "status", "nodeRef", "name"):
            return 2
        osm = self.osms.get(name_of(m))
        if osm is not None and g(osm, "status", "ready") is True:
            return 1
        return 0

    def is_victim(self, m):
        if self.stage(m) != 0 or deleting(m):
            return False
        if self.victim_new == name_of(m):
            return True
        osm = self.osms.get(name_of(m))
        c = find_cond(g(osm, "status", "conditions", default=[]), "InstanceReady")
        return bool(c and c.get("status") == "False" and c.get("reason") == "InstanceCreateFailed")

    def owner_of(self, m):
        if L_CP in labels_of(m):
            return self.kcp
        n = labels_of(m).get(L_MD)
        for md in self.mds:
            if name_of(md) == n:
                return md
        return None

    def owner_version(self, owner):
        if owner is None:
            return None
        if owner.get("kind") == "KubeadmControlPlane" or "machineTemplate" in g(owner, "spec", default={}):
            return g(owner, "spec", "version")
        return g(owner, "spec", "template", "spec", "version")

    @staticmethod
    def owner_infra(owner):
        if owner is None:
            return None
        return (g(owner, "spec", "machineTemplate", "spec", "infrastructureRef", "name")
                or g(owner, "spec", "machineTemplate", "infrastructureRef", "name")
                or g(owner, "spec", "template", "spec", "infrastructureRef", "name"))

    def outdated_reasons(self, m, owner=None):
        owner = owner if owner is not None else self.owner_of(m)
        if owner is None:
            return []
        out = []
        want = self.owner_version(owner)
        have = g(m, "spec", "version")
        if want and have != want:
            out.append("Version %s, %s required" % (have, want))
        tmpl = self.owner_infra(owner)
        osm = self.osms.get(name_of(m))
        cloned = annotations_of(osm).get(A_CLONED_NAME) if osm is not None else None
        if tmpl and cloned and cloned != tmpl:
            out.append("OpenStackMachineTemplate %s, %s required" % (cloned, tmpl))
        return out

    def up_to_date(self, m, owner=None):
        return not self.outdated_reasons(m, owner)

    # ----- the reconcile ---------------------------------------------------------------------

    def run(self):
        cache = self.ctl.cache
        cl = cache.get("Cluster", "v1beta2", self.name)
        if cl is None:
            self.orphans()
            return None
        self.flavor = self.ctl.flavor_of(cl)
        if self.flavor != "v1beta2":
            if not self.ctl.ensure_version(self.flavor):
                return 0.2
            cl = cache.get("Cluster", self.flavor, self.name)
            if cl is None:
                return 0.2
        self.cl = cl
        topo = g(cl, "spec", "topology")
        if not isinstance(topo, dict):
            self.note("managed", False, "Cluster has no spec.topology: not simulated")
            return None
        self.state.logged.pop("managed", None)
        ann = annotations_of(cl)
        self.faults = set(f.strip() for f in str(ann.get(A_FAULT, "")).split(",") if f.strip())
        self.note("faults", ",".join(sorted(self.faults)), "faults: %s" % (",".join(sorted(self.faults)) or "none"))
        step = self.ctl.step
        try:
            if ann.get(A_STEP) is not None:
                step = max(0.01, float(ann.get(A_STEP)))
        except (TypeError, ValueError):
            pass
        self.step = step
        self.paused = bool(g(cl, "spec", "paused")) or A_PAUSED in ann
        tick = self.now >= self.state.due
        self.load()
        moved = False
        if deleting(cl):
            if tick and not self.paused and "stall" not in self.faults:
                moved = self.advance_delete()
        else:
            self.ensure_finalizer()
            if self.cc_missing():
                self.render_all()
                return 1.0
            if not self.paused:
                try:
                    self.sync_topology()
                    self.patch_error = None
                    self.state.logged.pop("patch", None)
                except tpatch.PatchError as e:
                    # CAPI stops reconciling the topology and says why on TopologyReconciled.
                    self.patch_error = str(e)
                    self.note("patch", self.patch_error, "ClusterClass patches failed: %s" % e)
                self.load()
                if tick and "stall" not in self.faults:
                    moved = self.advance()
        if tick:
            self.state.due = self.now + step
        if deleting(cl) and self.ctl.cache.get("Cluster", self.flavor, self.name) is None:
            return 0.0  # gone: what is left goes as orphans
        self.load()
        t0 = time.monotonic()
        settled = self.render_all()
        STATS.add("render", 1, time.monotonic() - t0)
        if moved or not settled:
            return max(0.0, self.state.due - time.monotonic())
        return self.ctl.resync

    def ensure_finalizer(self):
        fins = finalizers_of(self.cl)
        if FINALIZER["Cluster"] not in fins:
            patch = {"metadata": {"finalizers": fins + [FINALIZER["Cluster"]]}}
            # First sight of this Cluster: CAPI_SIM_DEFAULT_FAULT becomes its fault
            # annotation before anything is built, so a test's fault cannot lose a race with
            # the provisioning (removing the annotation later lifts it as usual).
            default_fault = os.environ.get("CAPI_SIM_DEFAULT_FAULT", "")
            if default_fault and A_FAULT not in annotations_of(self.cl):
                patch["metadata"]["annotations"] = {A_FAULT: default_fault}
            self.patch("Cluster", self.cl, patch)
            self.load()

    def class_name(self):
        t = as_dict(g(self.cl, "spec", "topology"))
        for v in (g(t, "classRef", "name"), t.get("class")):
            if isinstance(v, str) and v:
                return v
        return None

    def cluster_class(self):
        cname = self.class_name()
        ns = g(self.cl, "spec", "topology", "classRef", "namespace") or \
            g(self.cl, "spec", "topology", "classNamespace") or self.ns
        ns = ns if isinstance(ns, str) else self.ns
        if not cname or ns != self.ns:
            return None
        return self.ctl.cache.get("ClusterClass", "v1beta2", cname)

    def cc_missing(self):
        if not self.ctl.require_clusterclass:
            return False
        if self.cluster_class() is not None:
            return False
        self.note("cc", "missing", "ClusterClass %s not found: waiting" % self.class_name())
        return True

    # ----- desired specs ---------------------------------------------------------------------

    def variables(self, entry=None):
        out = {}
        for v in norm_topology(g(self.cl, "spec", "topology"))["variables"]:
            if isinstance(v, dict) and isinstance(v.get("name"), str):
                out[v["name"]] = v.get("value")
        if entry is not None:
            for v in entry["overrides"]:
                if isinstance(v, dict) and isinstance(v.get("name"), str):
                    out[v["name"]] = v.get("value")
        return out

    def cc_template(self, role, entry=None):
        """The ClusterClass's infrastructure template for a role: (kind, spec.template.spec)."""
        cc = self.cluster_class()
        if cc is None:
            return None
        spec = cc.get("spec") or {}
        if role == "cluster":
            ref = g(spec, "infrastructure", "templateRef") or g(spec, "infrastructure", "ref")
            kind = "OpenStackClusterTemplate"
        elif role == "control-plane":
            ref = g(spec, "controlPlane", "machineInfrastructure", "templateRef") or \
                g(spec, "controlPlane", "machineInfrastructure", "ref")
            kind = "OpenStackMachineTemplate"
        else:
            ref = None
            for mdc in g(spec, "workers", "machineDeployments", default=[]) or []:
                if isinstance(mdc, dict) and mdc.get("class") == g(entry, "class"):
                    ref = g(mdc, "infrastructure", "templateRef") or g(mdc, "template", "infrastructure", "ref")
            kind = "OpenStackMachineTemplate"
        if not isinstance(ref, dict) or not ref.get("name"):
            return None
        t = self.ctl.cache.get(kind, INFRA_VERSION, ref["name"])
        base = g(t, "spec", "template", "spec")
        return copy.deepcopy(base) if isinstance(base, dict) else None

    # ----- the class's patches ----------------------------------------------------------------

    def patched_class(self):
        """The ClusterClass when it carries inline patches (then they build every template),
        else None (the variables are mapped by hand, below)."""
        cc = self.cluster_class()
        return cc if cc is not None and as_list(g(cc, "spec", "patches")) else None

    def class_ref(self, role, entry=None):
        """(kind, name, target) of the class's template for a role: "cluster",
        "control-plane", "control-plane-machine", "md-bootstrap" or "md-machine"."""
        spec = g(self.cluster_class(), "spec", default={}) or {}
        if role == "cluster":
            return "OpenStackClusterTemplate", g(spec, "infrastructure", "templateRef", "name"), \
                ("infrastructureCluster",)
        if role == "control-plane":
            return "KubeadmControlPlaneTemplate", g(spec, "controlPlane", "templateRef", "name"), ("controlPlane",)
        if role == "control-plane-machine":
            return "OpenStackMachineTemplate", \
                g(spec, "controlPlane", "machineInfrastructure", "templateRef", "name"), ("controlPlane",)
        for mdc in as_list(g(spec, "workers", "machineDeployments")):
            if isinstance(mdc, dict) and mdc.get("class") == g(entry, "class"):
                key = "bootstrap" if role == "md-bootstrap" else "infrastructure"
                kind = "KubeadmConfigTemplate" if role == "md-bootstrap" else "OpenStackMachineTemplate"
                return kind, g(mdc, key, "templateRef", "name"), ("machineDeploymentClass", mdc["class"])
        return None, None, None

    def patched(self, role, entry=None):
        """The class's template for `role` with the class's variables resolved and its patches
        run (a copy: the template object, not only its spec). Raises tpatch.PatchError."""
        cc = self.patched_class()
        kind, name, target = self.class_ref(role, entry)
        base = self.ctl.cache.get(kind, self.ver(kind), name) if kind and name else None
        if base is None:
            raise tpatch.PatchError("%s %s of ClusterClass %s not found" % (kind, name, self.class_name()))
        nt = norm_topology(g(self.cl, "spec", "topology"))
        glob = tpatch.resolve_variables(cc, nt["variables"])
        glob["builtin"] = tpatch.builtins(self.cl, cp={"replicas": nt["cp_replicas"]})
        values = glob
        if entry is not None:
            values = tpatch.resolve_variables(cc, nt["variables"], entry["overrides"])
            md = self.md_live.get(entry["name"])
            values["builtin"] = tpatch.builtins(self.cl, md={
                "class": entry["class"], "name": entry["name"], "replicas": entry["replicas"],
                "objectName": name_of(md) if md else None})
        body = {"apiVersion": base.get("apiVersion"), "kind": kind, "spec": copy.deepcopy(base.get("spec") or {})}
        out = tpatch.apply_patches(cc, body, target, glob, values)
        return tpatch.prune_nulls(out)

    def patched_spec(self, role, entry=None):
        return copy.deepcopy(g(self.patched(role, entry), "spec", "template", "spec", default={}) or {})

    def cc_bootstrap_name(self, entry):
        cc = self.cluster_class()
        for mdc in g(cc, "spec", "workers", "machineDeployments", default=[]) or []:
            if isinstance(mdc, dict) and mdc.get("class") == g(entry, "class"):
                ref = g(mdc, "bootstrap", "templateRef") or g(mdc, "template", "bootstrap", "ref")
                if isinstance(ref, dict) and ref.get("name"):
                    return ref["name"]
        return None

    @staticmethod
    def image_spec(v):
        if isinstance(v, dict):
            if isinstance(v.get("id"), str) and UUID_RE.match(v["id"]):
                return {"id": v["id"]}
            if isinstance(g(v, "filter", "name"), str) and v["filter"]["name"]:
                return {"filter": {"name": v["filter"]["name"]}}
            if isinstance(g(v, "imageRef", "name"), str) and v["imageRef"]["name"]:
                return {"imageRef": {"name": v["imageRef"]["name"]}}
            return None
        if isinstance(v, str) and v:
            return {"id": v} if UUID_RE.match(v) else {"filter": {"name": v}}
        return None

    def machine_spec(self, role, entry=None):
        if self.patched_class() is not None:
            spec = self.patched_spec("control-plane-machine" if role == "control-plane" else "md-machine", entry)
            if isinstance(spec.get("identityRef"), dict):
                spec["identityRef"].setdefault("type", "Secret")
            return spec
        spec = self.cc_template(role, entry) or {}
        v = self.variables(entry)
        flavor = v.get("controlPlaneFlavor") if role == "control-plane" else None
        if not (isinstance(flavor, str) and flavor):
            flavor = v.get("flavor")
        if isinstance(flavor, str) and flavor:
            spec["flavor"] = flavor
            spec.pop("flavorID", None)
        elif not spec.get("flavor") and not spec.get("flavorID") or spec.get("flavor") == "placeholder":
            spec["flavor"] = "m1.medium"
            spec.pop("flavorID", None)
        img = self.image_spec(v.get("image")) or self.image_spec(v.get("imageUUID"))
        if img:
            spec["image"] = img
        elif self.image_spec(spec.get("image")) is None:
            spec["image"] = {"filter": {"name": "ubuntu-22.04-kube"}}
        if isinstance(v.get("sshKeyName"), str) and v["sshKeyName"]:
            spec["sshKeyName"] = v["sshKeyName"]
        ident = v.get("identityRef")
        if isinstance(ident, dict) and ident.get("name") and ident.get("cloudName"):
            spec["identityRef"] = {"type": ident.get("type") or "Secret", "name": ident["name"],
                                   "cloudName": ident["cloudName"]}
        elif isinstance(spec.get("identityRef"), dict):
            spec["identityRef"].setdefault("type", "Secret")
        if role != "control-plane" and g(entry, "failureDomain"):
            pass  # the failure domain goes on the Machine, not the template
        return spec

    def cluster_spec(self):
        if self.patched_class() is not None:
            spec = self.patched_spec("cluster")
            if isinstance(spec.get("identityRef"), dict):
                spec["identityRef"].setdefault("type", "Secret")
            return spec
        spec = self.cc_template("cluster") or {}
        v = self.variables()
        ident = v.get("identityRef")
        if isinstance(ident, dict) and ident.get("name") and ident.get("cloudName"):
            spec["identityRef"] = {"type": ident.get("type") or "Secret", "name": ident["name"],
                                   "cloudName": ident["cloudName"]}
        cur = spec.get("identityRef")
        if not (isinstance(cur, dict) and cur.get("name") and cur.get("name") != "placeholder"):
            spec["identityRef"] = {"type": "Secret", "name": "%s-cloud-config" % self.name, "cloudName": "default"}
        else:
            cur.setdefault("type", "Secret")
            cur.setdefault("cloudName", "default")
        lb = v.get("apiServerLoadBalancer")
        if isinstance(lb, bool):
            spec["apiServerLoadBalancer"] = {"enabled": lb}
        elif isinstance(lb, dict) and isinstance(lb.get("enabled"), bool):
            spec["apiServerLoadBalancer"] = {"enabled": lb["enabled"]}
        elif not isinstance(spec.get("apiServerLoadBalancer"), dict):
            spec["apiServerLoadBalancer"] = {"enabled": True}
        cidr = v.get("nodeCidr")
        dns = v.get("dnsNameservers")
        if isinstance(cidr, str) and cidr:
            spec["managedSubnets"] = [{"cidr": cidr}]
        elif not spec.get("managedSubnets") and not spec.get("subnets") and not spec.get("network"):
            spec["managedSubnets"] = [{"cidr": "10.6.0.0/24"}]
        if isinstance(dns, list) and spec.get("managedSubnets"):
            spec["managedSubnets"][0]["dnsNameservers"] = [d for d in dns if isinstance(d, str) and d]
        ext = v.get("externalNetworkId")
        if isinstance(ext, str) and ext:
            spec["externalNetwork"] = {"id": ext} if UUID_RE.match(ext) else {"filter": {"name": ext}}
        spec.setdefault("managedSecurityGroups", {"allowAllInClusterTraffic": True})
        return spec

    def node_cidr(self):
        cidr = g(self.osc, "spec", "managedSubnets", 0, "cidr", default="10.6.0.0/24")
        try:
            net = ipaddress.ip_network(cidr, strict=False)
            if net.version == 4 and net.num_addresses >= 16:
                return net
        except ValueError:
            pass
        return ipaddress.ip_network("10.6.0.0/24")

    # ----- object bodies ---------------------------------------------------------------------

    def owner_ref(self, kind, obj):
        return {"apiVersion": self.api_version(kind), "kind": kind, "name": name_of(obj),
                "uid": g(obj, "metadata", "uid", default=stable_uuid(kind, name_of(obj))),
                "controller": True, "blockOwnerDeletion": True}

    def ref(self, kind, name):
        group = KINDS[kind][0] if kind in KINDS else G_BOOT
        if self.flavor == "v1beta2":
            return {"apiGroup": group, "kind": kind, "name": name}
        ver = INFRA_VERSION if group == G_INFRA else self.flavor
        return {"apiVersion": "%s/%s" % (group, ver), "kind": kind, "name": name, "namespace": self.ns}

    def meta(self, name, base, labels, owner_kind, owner, annotations=None, finalizer=None):
        m = {"name": name, "namespace": self.ns, "labels": labels,
             "ownerReferences": [self.owner_ref(owner_kind, owner)], "_base": base}
        if annotations:
            m["annotations"] = annotations
        if finalizer:
            m["finalizers"] = [finalizer]
        return m

    def ensure_kct(self, role, spec):
        """A MachineDeployment's KubeadmConfigTemplate: the class's, patched (CAPI clones one
        per MachineDeployment, and a new one when the patched spec changes)."""
        h = spec_hash(spec)
        for o in self.kcts.values():
            a = annotations_of(o)
            if not deleting(o) and a.get(A_ROLE) == role and a.get(A_HASH) == h:
                return name_of(o)
        base = "%s-%s" % (self.name, role[3:])
        body = {"apiVersion": self.api_version("KubeadmConfigTemplate"), "kind": "KubeadmConfigTemplate",
                "metadata": self.meta(self.unique(base), base, {L_CLUSTER: self.name, L_OWNED: ""},
                                      "Cluster", self.cl, {A_ROLE: role, A_HASH: h}),
                "spec": {"template": {"spec": spec}}}
        out = self.create("KubeadmConfigTemplate", body)
        self.kcts[name_of(out)] = out
        return name_of(out)

    def ensure_osmt(self, role, spec):
        h = spec_hash(spec)
        for o in self.osmts.values():
            a = annotations_of(o)
            if not deleting(o) and a.get(A_ROLE) == role and a.get(A_HASH) == h:
                return name_of(o)
        base = "%s-%s" % (self.name, role[3:] if role.startswith("md-") else role)
        body = {"apiVersion": self.api_version("OpenStackMachineTemplate"), "kind": "OpenStackMachineTemplate",
                "metadata": self.meta(self.unique(base), base, {L_CLUSTER: self.name, L_OWNED: ""},
                                      "Cluster", self.cl, {A_ROLE: role, A_HASH: h}),
                "spec": {"template": {"spec": spec}}}
        out = self.create("OpenStackMachineTemplate", body)
        self.osmts[name_of(out)] = out
        return name_of(out)

    # ----- topology --------------------------------------------------------------------------

    def sync_topology(self):
        cl = self.cl
        nt = norm_topology(g(cl, "spec", "topology"))
        version = nt["version"]
        cp_replicas = nt["cp_replicas"]
        cp_labels = nt["cp_labels"]
        entries = nt["entries"]
        self.topo = {"version": version, "pending_create": [], "pending_upgrade": [], "upgrading_md": None,
                     "entries": [e["name"] for e in entries]}

        # Infrastructure cluster.
        if self.osc is None:
            base = self.name
            body = {"apiVersion": self.api_version("OpenStackCluster"), "kind": "OpenStackCluster",
                    "metadata": self.meta(self.unique(base), base, {L_CLUSTER: self.name, L_OWNED: ""},
                                          "Cluster", cl, finalizer=FINALIZER["OpenStackCluster"]),
                    "spec": self.cluster_spec()}
            self.create("OpenStackCluster", body)
            self.load()

        # Control plane.
        cp_tmpl = self.ensure_osmt("control-plane", self.machine_spec("control-plane"))
        mt_labels = {L_CLUSTER: self.name, L_OWNED: ""}
        mt_labels.update({k: v for k, v in cp_labels.items() if isinstance(v, str)})
        if self.kcp is None:
            base = self.name
            # With patches, the patched KubeadmControlPlaneTemplate's spec is the KCP's base.
            cp_base = self.patched_spec("control-plane") if self.patched_class() is not None else None
            if self.flavor == "v1beta2":
                spec = {"replicas": cp_replicas, "version": version, "kubeadmConfigSpec": {"format": "cloud-config"},
                        "machineTemplate": {"metadata": {"labels": mt_labels},
                                            "spec": {"infrastructureRef": self.ref("OpenStackMachineTemplate", cp_tmpl)}}}
            else:
                spec = {"replicas": cp_replicas, "version": version, "kubeadmConfigSpec": {"format": "cloud-config"},
                        "machineTemplate": {"metadata": {"labels": mt_labels},
                                            "infrastructureRef": self.ref("OpenStackMachineTemplate", cp_tmpl)}}
            if cp_base is not None:
                kcs = cp_base.get("kubeadmConfigSpec") or {}
                kcs.setdefault("format", "cloud-config")
                spec["kubeadmConfigSpec"] = kcs
                for k, v in cp_base.items():
                    if k not in ("kubeadmConfigSpec", "machineTemplate"):
                        spec.setdefault(k, v)
            labels = {L_CLUSTER: self.name, L_OWNED: ""}
            labels.update({k: v for k, v in cp_labels.items() if isinstance(v, str)})
            body = {"apiVersion": self.api_version("KubeadmControlPlane"), "kind": "KubeadmControlPlane",
                    "metadata": self.meta(self.unique(base), base, labels, "Cluster", cl,
                                          finalizer=FINALIZER["KubeadmControlPlane"]),
                    "spec": spec}
            self.create("KubeadmControlPlane", body)
            self.load()
        elif not deleting(self.kcp):
            kcp = self.kcp
            p = {}
            if as_int(g(kcp, "spec", "replicas"), 1) != cp_replicas or g(kcp, "spec", "replicas") is None:
                p["replicas"] = cp_replicas
            if g(kcp, "spec", "version") != version:
                p["version"] = version
                self.note("kcp-version", version, "KubeadmControlPlane %s: version -> %s" % (name_of(kcp), version))
            if self.owner_infra(kcp) != cp_tmpl:
                if self.flavor == "v1beta2":
                    p.setdefault("machineTemplate", {}).setdefault("spec", {})["infrastructureRef"] = \
                        self.ref("OpenStackMachineTemplate", cp_tmpl)
                else:
                    p.setdefault("machineTemplate", {})["infrastructureRef"] = \
                        self.ref("OpenStackMachineTemplate", cp_tmpl)
            cur_labels = g(kcp, "spec", "machineTemplate", "metadata", "labels", default={}) or {}
            if not subset(cur_labels, mt_labels):
                p.setdefault("machineTemplate", {})["metadata"] = {"labels": mt_labels}
            if p:
                self.patch("KubeadmControlPlane", kcp, {"spec": p})
                self.load()

        # Cluster references (as the topology controller writes them on the Cluster's spec).
        want = {}
        if self.osc is not None and g(cl, "spec", "infrastructureRef", "name") != name_of(self.osc):
            want["infrastructureRef"] = self.ref("OpenStackCluster", name_of(self.osc))
        if self.kcp is not None and g(cl, "spec", "controlPlaneRef", "name") != name_of(self.kcp):
            want["controlPlaneRef"] = self.ref("KubeadmControlPlane", name_of(self.kcp))
        if want:
            self.patch("Cluster", cl, {"spec": want})
            self.load()

        # Where the control plane is in an upgrade.
        kcp = self.kcp
        cp_upgrading = kcp is None or g(kcp, "spec", "version") != version or any(
            g(m, "spec", "version") != g(kcp, "spec", "version") for m in self.cp_machines)
        self.topo["cp_upgrading"] = cp_upgrading
        md_upgrading = [md for md in self.md_live.values() if any(
            g(m, "spec", "version") != self.owner_version(md) for m in self.machines_of_md(md))]
        busy = bool(md_upgrading)
        if md_upgrading:
            self.topo["upgrading_md"] = name_of(md_upgrading[0])

        # Worker MachineDeployments.
        for e in entries:
            ename = e["name"]
            md = self.md_live.get(ename)
            role = "md-" + ename
            mspec = self.machine_spec(role, e)
            extra_labels = e["labels"]
            extra_ann = e["annotations"]
            tlabels = {L_CLUSTER: self.name, L_OWNED: "", L_TOPO_MD: ename}
            tlabels.update(extra_labels)
            if md is None:
                if any(labels_of(o).get(L_TOPO_MD) == ename for o in self.mds):
                    continue  # the previous one is still being deleted
                if cp_upgrading and kcp is not None and self.cp_machines:
                    self.topo["pending_create"].append(ename)
                    continue
                tmpl = self.ensure_osmt(role, mspec)
                replicas = e["replicas"]
                if replicas is None:
                    replicas = replicas_of(extra_ann.get(A_MIN_SIZE), 1)
                base = "%s-%s" % (self.name, ename)
                if self.patched_class() is not None:
                    boot = self.ensure_kct(role, self.patched_spec("md-bootstrap", e))
                else:
                    boot = self.cc_bootstrap_name(e) or base
                tspec = {"clusterName": self.name, "version": version,
                         "bootstrap": {"configRef": self.ref("KubeadmConfigTemplate", boot)},
                         "infrastructureRef": self.ref("OpenStackMachineTemplate", tmpl)}
                if e["failureDomain"]:
                    tspec["failureDomain"] = e["failureDomain"]
                body = {"apiVersion": self.api_version("MachineDeployment"), "kind": "MachineDeployment",
                        "metadata": self.meta(self.unique(base), base, dict(tlabels), "Cluster", cl,
                                              annotations=extra_ann or None,
                                              finalizer=FINALIZER["MachineDeployment"]),
                        "spec": {"clusterName": self.name, "replicas": replicas,
                                 "selector": {"matchLabels": {L_CLUSTER: self.name, L_TOPO_MD: ename}},
                                 "template": {"metadata": {"labels": tlabels}, "spec": tspec}}}
                self.create("MachineDeployment", body)
                continue
            p = {}
            replicas = e["replicas"]
            if replicas is not None and as_int(g(md, "spec", "replicas"), -1) != replicas:
                p["replicas"] = replicas
            tp = {}
            if not subset(g(md, "spec", "template", "metadata", "labels", default={}), tlabels):
                tp.setdefault("metadata", {})["labels"] = tlabels
            fd = e["failureDomain"]
            if g(md, "spec", "template", "spec", "failureDomain") != fd:
                tp.setdefault("spec", {})["failureDomain"] = fd
            cur_ver = self.owner_version(md)
            cur_tmpl = self.owner_infra(md)
            cur_hash = annotations_of(self.osmts.get(cur_tmpl)).get(A_HASH) if cur_tmpl in self.osmts else None
            want_hash = spec_hash(mspec)
            if cur_ver != version:
                if not cp_upgrading and not busy:
                    tp.setdefault("spec", {})["version"] = version
                    busy = True
                    self.topo["upgrading_md"] = name_of(md)
                    if cur_hash != want_hash:
                        tp["spec"]["infrastructureRef"] = self.ref("OpenStackMachineTemplate",
                                                                   self.ensure_osmt(role, mspec))
                    log("%s/%s MachineDeployment %s: version %s -> %s" % (self.ns, self.name, name_of(md), cur_ver, version))
                else:
                    self.topo["pending_upgrade"].append(ename)
            elif cur_hash != want_hash and not cp_upgrading:
                tp.setdefault("spec", {})["infrastructureRef"] = self.ref("OpenStackMachineTemplate",
                                                                         self.ensure_osmt(role, mspec))
            if tp:
                p["template"] = tp
            mp = {}
            if not subset(labels_of(md), tlabels):
                mp["labels"] = tlabels
            if extra_ann and not subset(annotations_of(md), extra_ann):
                mp["annotations"] = extra_ann
            body = {}
            if p:
                body["spec"] = p
            if mp:
                body["metadata"] = mp
            if body:
                self.patch("MachineDeployment", md, body)

        # MachineDeployments no longer in the topology.
        for md in self.mds:
            t = labels_of(md).get(L_TOPO_MD)
            if t and t not in self.topo["entries"] and not deleting(md):
                self.delete("MachineDeployment", md, "removed from the topology")
        self.load()

        # Labels of the templates reach the Machines in place.
        for m in self.machines:
            if deleting(m):
                continue
            owner = self.owner_of(m)
            if owner is None:
                continue
            want_l = g(owner, "spec", "machineTemplate", "metadata", "labels", default=None) \
                if L_CP in labels_of(m) else g(owner, "spec", "template", "metadata", "labels", default=None)
            if isinstance(want_l, dict) and not subset(labels_of(m), want_l):
                self.patch("Machine", m, {"metadata": {"labels": want_l}})

        # Templates no longer referenced.
        used = set()
        for o in self.kcps + self.mds:
            used.add(self.owner_infra(o))
        for o in list(self.osmts.values()):
            if A_ROLE in annotations_of(o) and name_of(o) not in used and not deleting(o):
                self.delete("OpenStackMachineTemplate", o, "not used")
        used_boot = {g(md, "spec", "template", "spec", "bootstrap", "configRef", "name") for md in self.mds}
        for o in list(self.kcts.values()):
            if A_ROLE in annotations_of(o) and name_of(o) not in used_boot and not deleting(o):
                self.delete("KubeadmConfigTemplate", o, "not used")

    # ----- one simulated step ----------------------------------------------------------------

    def progress_deletions(self):
        """Deleting objects move one step (on the snapshot taken before this step)."""
        moved = False
        machines = list(self.machines)
        for m in machines:
            if not deleting(m) or FINALIZER["Machine"] not in finalizers_of(m):
                continue
            osm = self.osms.get(name_of(m))
            if osm is not None:
                if not deleting(osm):
                    out = self.delete("OpenStackMachine", osm, "its Machine is deleting")
                    if isinstance(out, dict) and out.get("kind") == "OpenStackMachine":
                        osm = out
                if osm is not None and FINALIZER["OpenStackMachine"] in finalizers_of(osm):
                    try:
                        self.drop_finalizer("OpenStackMachine", osm)
                    except Conflict:
                        pass
            self.drop_finalizer("Machine", m)
            moved = True
        names = {name_of(m) for m in machines if not deleting(m)}
        for osm in list(self.osms.values()):
            if deleting(osm) and name_of(osm) not in names and FINALIZER["OpenStackMachine"] in finalizers_of(osm):
                self.drop_finalizer("OpenStackMachine", osm)
                moved = True
        for md in self.mds:
            if not deleting(md) or FINALIZER["MachineDeployment"] not in finalizers_of(md):
                continue
            ms = self.machines_of_md(md)
            live = [m for m in ms if not deleting(m)]
            for m in live:
                self.delete("Machine", m, "MachineDeployment %s is deleting" % name_of(md))
                moved = True
            if not ms:
                self.drop_finalizer("MachineDeployment", md)
                moved = True
        for kcp in self.kcps:
            if not deleting(kcp) or FINALIZER["KubeadmControlPlane"] not in finalizers_of(kcp):
                continue
            if self.w_machines or self.mds:
                continue  # KCP waits for the workers to go
            live = [m for m in self.cp_machines if not deleting(m)]
            for m in live:
                self.delete("Machine", m, "KubeadmControlPlane %s is deleting" % name_of(kcp))
                moved = True
            if not self.cp_machines:
                self.drop_finalizer("KubeadmControlPlane", kcp)
                moved = True
        for osc in self.oscs:
            if not deleting(osc) or FINALIZER["OpenStackCluster"] not in finalizers_of(osc):
                continue
            if self.machines:
                continue
            if "delete-blocked" in self.faults:
                self.note("osc-delete", "blocked", "OpenStackCluster %s: deletion blocked (fault)" % name_of(osc))
                continue
            self.drop_finalizer("OpenStackCluster", osc)
            moved = True
        return moved

    def current_victim(self):
        for m in self.machines:
            if self.is_victim(m):
                return name_of(m)
        return None

    def advance(self):
        moved = self.progress_deletions()
        osc = self.osc
        if osc is None or deleting(osc):
            return moved
        st = self.osc_stage(osc)
        failed = "infra-failed" in self.faults
        if failed:
            self.note("osc-stage", "failed", "OpenStackCluster %s: failed (fault infra-failed)" % name_of(osc))
        elif st < 2:
            self.prom[("OpenStackCluster", name_of(osc))] = st + 1
            self.note("osc-stage", st + 1, "OpenStackCluster %s: %s" % (
                name_of(osc), "network, router and security groups ready" if st + 1 == 1 else
                "API load balancer ready, OpenStackCluster ready"))
            if st + 1 == 2:
                self.set_endpoint(osc)
            moved = True
        if st < 2 or failed:
            return moved

        quota = "quota" in self.faults
        victim = self.current_victim()
        if quota and victim is None:
            cands = [m for m in self.w_machines if not deleting(m) and self.stage(m) == 0]
            has_workers = any(as_int(g(md, "spec", "replicas"), 0) > 0 for md in self.md_live.values())
            if not cands and not has_workers and not self.w_machines:
                cands = [m for m in self.cp_machines if not deleting(m) and self.stage(m) == 0]
            if cands:
                victim = self.victim_new = name_of(cands[0])
                log("%s/%s Machine %s: server create fails (fault quota)" % (self.ns, self.name, victim))
                moved = True
        kcp_ready_before = self.kcp is not None and self.kcp_initialized(self.kcp) and any(
            self.stage(m) == 2 and not deleting(m) for m in self.cp_machines)
        snapshot = [(m, self.stage(m)) for m in self.machines if not deleting(m)]
        for m, s in snapshot:
            if s == 0:
                if quota and name_of(m) == victim:
                    continue
                self.provision(m)
                moved = True
            elif s == 1:
                self.prom[("Machine", name_of(m))] = 2
                log("%s/%s Machine %s: Provisioned -> Running (node %s)" % (self.ns, self.name, name_of(m), name_of(m)))
                moved = True
        # Scaling decisions read the state from before this step's promotions.
        saved = self.prom
        self.prom = {k: v for k, v in saved.items() if k[0] != "Machine"}
        try:
            moved |= self.scale_cp()
            if kcp_ready_before:
                moved |= self.scale_mds()
        finally:
            self.prom = saved
        return moved

    def set_endpoint(self, osc):
        host = "192.0.2.%d" % (1 + stable_int(254, g(self.cl, "metadata", "uid", default=self.name)))
        ep = g(osc, "spec", "controlPlaneEndpoint", default={})
        if not g(ep, "host"):
            osc = self.patch("OpenStackCluster", osc, {"spec": {"controlPlaneEndpoint": {"host": host, "port": 6443}}})
        else:
            host = ep["host"]
        if not g(self.cl, "spec", "controlPlaneEndpoint", "host"):
            port = as_int(g(osc, "spec", "controlPlaneEndpoint", "port"), 6443)
            self.patch("Cluster", self.cl, {"spec": {"controlPlaneEndpoint": {"host": host, "port": port}}})
            log("%s/%s controlPlaneEndpoint %s:%d" % (self.ns, self.name, host, port))

    def provision(self, m):
        osm = self.osms.get(name_of(m))
        if osm is None:
            return
        pid = g(osm, "spec", "providerID") or "openstack:///%s" % stable_uuid("server", g(osm, "metadata", "uid", default=name_of(osm)))
        if g(osm, "spec", "providerID") != pid:
            self.osms[name_of(m)] = self.patch("OpenStackMachine", osm, {"spec": {"providerID": pid}})
        if g(m, "spec", "providerID") != pid:
            self.patch("Machine", m, {"spec": {"providerID": pid}})
        self.prom[("Machine", name_of(m))] = 1
        log("%s/%s Machine %s: Provisioning -> Provisioned (%s)" % (self.ns, self.name, name_of(m), pid))

    def kcp_initialized(self, kcp):
        return bool(g(kcp, "status", "initialization", "controlPlaneInitialized") or g(kcp, "status", "initialized")) \
            or any(self.stage(m) == 2 for m in self.cp_machines)

    def scale_cp(self):
        kcp = self.kcp
        if kcp is None or deleting(kcp):
            return False
        replicas = replicas_of(g(kcp, "spec", "replicas"), 1, 1)
        live = [m for m in self.cp_machines if not deleting(m)]
        if len(live) != len(self.cp_machines) or any(self.stage(m) < 2 for m in live):
            return False  # one machine at a time
        if len(live) > replicas:
            pick = sorted(live, key=lambda m: (A_DELETE_MACHINE not in annotations_of(m),
                                               self.up_to_date(m, kcp), self.created_key(m)))[0]
            self.delete("Machine", pick, "KubeadmControlPlane %s scaling down to %d" % (name_of(kcp), replicas))
            return True
        outdated = [m for m in live if not self.up_to_date(m, kcp)]
        if len(live) < replicas or outdated:
            self.create_machine(kcp, cp=True)
            return True
        return False

    def scale_mds(self):
        moved = False
        for md in self.md_live.values():
            desired = replicas_of(g(md, "spec", "replicas"), 1)
            ms = self.machines_of_md(md)
            live = [m for m in ms if not deleting(m)]
            dying = [m for m in ms if deleting(m)]
            outdated = [m for m in live if not self.up_to_date(m, md)]
            if not outdated:
                if len(live) > desired:
                    # Machines marked cluster.x-k8s.io/delete-machine first (oldest first), then the newest.
                    marked = [m for m in live if A_DELETE_MACHINE in annotations_of(m)]
                    rest = sorted((m for m in live if A_DELETE_MACHINE not in annotations_of(m)),
                                  key=self.created_key, reverse=True)
                    for m in (marked + rest)[:len(live) - desired]:
                        self.delete("Machine", m, "MachineDeployment %s scaling down to %d" % (name_of(md), desired))
                    moved = True
                elif len(live) < desired:
                    for _ in range(desired - len(live)):
                        self.create_machine(md, cp=False)
                    moved = True
                continue
            # A rollout: one surge machine, then one old machine goes (maxSurge 1, maxUnavailable 0).
            if dying:
                continue
            all_up = all(self.stage(m) == 2 for m in live)
            if len(live) > desired:
                if all_up:
                    pick = sorted(outdated, key=lambda m: (A_DELETE_MACHINE not in annotations_of(m),
                                                           self.created_key(m)))[0]
                    self.delete("Machine", pick, "MachineDeployment %s rolling out" % name_of(md))
                    moved = True
            elif len(live) < desired:
                for _ in range(desired - len(live)):
                    self.create_machine(md, cp=False)
                moved = True
            elif all_up:
                self.create_machine(md, cp=False)
                moved = True
        return moved

    def create_machine(self, owner, cp):
        owner_kind = "KubeadmControlPlane" if cp else "MachineDeployment"
        base = name_of(owner)
        name = self.unique(base)
        version = self.owner_version(owner)
        tmpl_name = self.owner_infra(owner)
        tmpl = self.osmts.get(tmpl_name)
        if cp:
            labels = dict(g(owner, "spec", "machineTemplate", "metadata", "labels", default={}) or {})
            labels.update({L_CLUSTER: self.name, L_CP: "", L_CP_NAME: name_of(owner)[:63]})
            fd = None
        else:
            labels = dict(g(owner, "spec", "template", "metadata", "labels", default={}) or {})
            labels.update({L_CLUSTER: self.name, L_MD: name_of(owner)[:63]})
            topo = labels_of(owner).get(L_TOPO_MD)
            if topo:
                labels[L_TOPO_MD] = topo
            fd = g(owner, "spec", "template", "spec", "failureDomain")
        labels = {k: v for k, v in labels.items() if isinstance(v, str)}
        created = "%.6f" % time.time()
        if self.flavor == "v1beta2":
            boot = {"configRef": {"apiGroup": G_BOOT, "kind": "KubeadmConfig", "name": name}, "dataSecretName": name}
        else:
            boot = {"configRef": {"apiVersion": "%s/%s" % (G_BOOT, self.flavor), "kind": "KubeadmConfig",
                                  "name": name, "namespace": self.ns}, "dataSecretName": name}
        spec = {"clusterName": self.name, "version": version, "bootstrap": boot,
                "infrastructureRef": self.ref("OpenStackMachine", name)}
        if fd:
            spec["failureDomain"] = fd
        mbody = {"apiVersion": self.api_version("Machine"), "kind": "Machine",
                 "metadata": {"name": name, "namespace": self.ns, "labels": labels,
                              "annotations": {A_CREATED: created},
                              "ownerReferences": [self.owner_ref(owner_kind, owner)],
                              "finalizers": [FINALIZER["Machine"]]},
                 "spec": spec}
        m = self.create("Machine", mbody)
        # The infrastructure machine: a clone of the template, named as the Machine.
        ospec = copy.deepcopy(g(tmpl, "spec", "template", "spec", default=None)) or \
            {"flavor": "m1.medium", "image": {"filter": {"name": "ubuntu-22.04-kube"}}}
        used = set()
        for o in self.osms.values():
            if annotations_of(o).get(A_ADDRESS):
                used.add(annotations_of(o)[A_ADDRESS])
        net = self.node_cidr()
        hosts = list(net.hosts())[9:] or list(net.hosts())
        start = stable_int(len(hosts), name)
        addr = None
        for i in range(len(hosts)):
            cand = str(hosts[(start + i) % len(hosts)])
            if cand not in used:
                addr = cand
                break
        oann = {A_CLONED_NAME: tmpl_name or "", A_CLONED_GK: "OpenStackMachineTemplate.%s" % G_INFRA,
                A_ADDRESS: addr or str(hosts[start])}
        olabels = dict(labels)
        obody = {"apiVersion": self.api_version("OpenStackMachine"), "kind": "OpenStackMachine",
                 "metadata": {"name": name, "namespace": self.ns, "labels": olabels, "annotations": oann,
                              "ownerReferences": [self.owner_ref("Machine", m)],
                              "finalizers": [FINALIZER["OpenStackMachine"]]},
                 "spec": ospec}
        osm = self.create("OpenStackMachine", obody)
        self.osms[name] = osm
        log("%s/%s Machine %s: created for %s %s (%s), Provisioning" % (
            self.ns, self.name, name, owner_kind, name_of(owner), version))

    # ----- deletion of the Cluster -----------------------------------------------------------

    def advance_delete(self):
        moved = self.progress_deletions()
        for md in self.mds:
            if not deleting(md):
                self.delete("MachineDeployment", md, "Cluster is deleting")
                moved = True
        if self.mds or self.w_machines:
            return moved
        for kcp in self.kcps:
            if not deleting(kcp):
                self.delete("KubeadmControlPlane", kcp, "Cluster is deleting")
                moved = True
        if self.kcps or self.cp_machines:
            return moved
        for osc in self.oscs:
            if not deleting(osc):
                self.delete("OpenStackCluster", osc, "Cluster is deleting")
                moved = True
        if self.oscs:
            return moved
        for o in list(self.osmts.values()):
            if not deleting(o):
                self.delete("OpenStackMachineTemplate", o, "Cluster is deleting")
        for o in list(self.kcts.values()):
            if not deleting(o):
                self.delete("KubeadmConfigTemplate", o, "Cluster is deleting")
        if FINALIZER["Cluster"] in finalizers_of(self.cl):
            self.drop_finalizer("Cluster", self.cl)
            log("%s/%s Cluster deleted" % (self.ns, self.name))
            moved = True
        return moved

    def orphans(self):
        """The Cluster is gone: what is left of it goes too (as the garbage collector would)."""
        if not self.ctl.base_synced():
            return
        for ver in self.ctl.versions():
            self.flavor = ver
            for kind in CAPI_CHILD_KINDS + INFRA_CHILD_KINDS + ("KubeadmConfigTemplate",):
                if (kind in INFRA_KINDS or kind in CLASS_TEMPLATE_KINDS) and ver != "v1beta2":
                    continue
                for o in self.ctl.cache.of_cluster(kind, self.ver(kind), self.name):
                    try:
                        if deleting(o):
                            if FINALIZER.get(kind) in finalizers_of(o):
                                self.drop_finalizer(kind, o)
                        elif g(o, "metadata", "ownerReferences"):
                            self.delete(kind, o, "its Cluster is gone")
                    except (Conflict, ApiError) as e:
                        log("%s/%s orphan %s %s: %s" % (self.ns, self.name, kind, name_of(o), e))

    # ----- status ----------------------------------------------------------------------------

    def render_all(self):
        """Write every object's status from the simulation state; returns whether the cluster
        is settled (nothing left for a later step)."""
        cl = self.cl
        self.cl_infra_prov = bool(g(cl, "status", "initialization", "infrastructureProvisioned")
                                  or g(cl, "status", "infrastructureReady")) or self.osc_stage(self.osc) == 2
        rendered_osm = {}
        for m in self.machines:
            osm = self.osms.get(name_of(m))
            if osm is not None:
                ost = self.render_osm(osm, m)
                self.write_status("OpenStackMachine", osm, ost)
                rendered_osm[name_of(m)] = ost
        for osm in self.osms.values():
            if name_of(osm) not in rendered_osm and g(osm, "status") is None:
                self.write_status("OpenStackMachine", osm, self.render_osm(osm, None))
        mstat = {}
        for m in self.machines:
            st = self.render_machine(m, rendered_osm.get(name_of(m)))
            self.write_status("Machine", m, st)
            mstat[name_of(m)] = st
        self.mstat = mstat
        osc_st = None
        if self.osc is not None:
            osc_st = self.render_osc(self.osc)
            self.write_status("OpenStackCluster", self.osc, osc_st)
        for o in self.oscs:
            if o is not self.osc:
                self.write_status("OpenStackCluster", o, self.render_osc(o))
        kcp_st = None
        for kcp in self.kcps:
            st = self.render_kcp(kcp)
            self.write_status("KubeadmControlPlane", kcp, st)
            if kcp is self.kcp:
                kcp_st = st
        md_st = {}
        for md in self.mds:
            st = self.render_md(md)
            self.write_status("MachineDeployment", md, st)
            md_st[name_of(md)] = st
        cst, settled = self.render_cluster(osc_st, kcp_st, md_st)
        self.write_status("Cluster", cl, cst)
        ncond = {c["type"]: c for c in (cst.get("conditions") if self.flavor == "v1beta2"
                                        else g(cst, "v1beta2", "conditions", default=[]))}
        avail = g(ncond.get("Available"), "status")
        self.note("cluster", (cst.get("phase"), avail),
                  "Cluster: phase %s, Available %s" % (cst.get("phase"), avail))
        return settled

    def place(self, common, n_conds, o_conds, new_counts=None, old_counts=None, old_extra=None, new_extra=None,
              cur=None):
        """Put the two condition sets and counters where this object's version keeps them."""
        s = dict(common)
        cur = cur or {}
        ts = self.ts
        if self.flavor == "v1beta2":
            prev_n, prev_o = g(cur, "conditions", default=[]), g(cur, "deprecated", "v1beta1", "conditions", default=[])
        else:
            prev_n, prev_o = g(cur, "v1beta2", "conditions", default=[]), g(cur, "conditions", default=[])
        n_conds = with_times(n_conds, prev_n, ts=ts)
        o_conds = with_times(o_conds, prev_o, ts=ts)
        if self.flavor == "v1beta2":
            s["conditions"] = n_conds
            dep = {"conditions": o_conds}
            dep.update(old_counts or {})
            dep.update(old_extra or {})
            s["deprecated"] = {"v1beta1": dep}
            s.update(new_counts or {})
            s.update(new_extra or {})
        else:
            s["conditions"] = o_conds
            v2 = {"conditions": n_conds}
            v2.update(new_counts or {})
            s["v1beta2"] = v2
            s.update(old_counts or {})
            s.update(old_extra or {})
        return s

    # OpenStackMachine (CAPO v1beta1)
    def render_osm(self, osm, m):
        s = self.stage(m) if m is not None else 0
        victim = m is not None and self.is_victim(m)
        iid = stable_uuid("server", g(osm, "metadata", "uid", default=name_of(osm)))
        addr = annotations_of(osm).get(A_ADDRESS)
        st = {"failureReason": None, "failureMessage": None}
        image = g(osm, "spec", "image", default={})
        image_id = image.get("id") if isinstance(image, dict) and image.get("id") else \
            stable_uuid("image", json.dumps(image, sort_keys=True))
        flavor = g(osm, "spec", "flavor") or g(osm, "spec", "flavorID") or "m1.medium"
        dying = deleting(osm) or (m is not None and deleting(m))
        if s >= 1:
            conds = [cond1("Ready", "True"), cond1("InstanceReady", "True")]
            st.update({"ready": True, "initialization": {"provisioned": True}, "instanceID": iid,
                       "instanceState": "ACTIVE",
                       "addresses": [{"type": "InternalIP", "address": addr}] if addr else None,
                       "resolved": {"imageID": image_id, "flavorID": stable_uuid("flavor", flavor)}})
        elif victim:
            c = cond1("InstanceReady", "False", "InstanceCreateFailed", "Error", QUOTA_MESSAGE)
            conds = [dict(c, type="Ready"), c]
            st.update({"ready": False, "instanceState": "ERROR", "instanceID": None,
                       "initialization": {"provisioned": False}})
        else:
            c = cond1("InstanceReady", "False", "InstanceNotReady", "Info", "Instance state is BUILD")
            conds = [dict(c, type="Ready"), c]
            st.update({"ready": False, "instanceID": iid, "instanceState": "BUILD",
                       "initialization": {"provisioned": False}})
        if dying:
            conds[0] = cond1("Ready", "False", "Deleting", "Info", "Deleting the OpenStack server")
        st["conditions"] = with_times(conds, g(osm, "status", "conditions", default=[]), ts=self.ts)
        return st

    # Machine
    def render_machine(self, m, osm_st):
        gen = generation(m)
        s = self.stage(m)
        dying = deleting(m)
        cp = L_CP in labels_of(m)
        victim = self.is_victim(m)
        cur = g(m, "status", default={})
        pid = g(m, "spec", "providerID")
        outdated = self.outdated_reasons(m)
        n_name = name_of(m)
        # InfrastructureReady mirrors the OpenStackMachine's Ready condition.
        osm_ready = find_cond(g(osm_st, "conditions", default=[]), "Ready") if osm_st else None
        if s >= 1:
            infra = cond2("InfrastructureReady", "True", "Ready", "", gen)
            infra1 = cond1("InfrastructureReady", "True")
        elif osm_ready is not None:
            infra = cond2("InfrastructureReady", "False", osm_ready.get("reason") or "NotReady",
                          osm_ready.get("message", ""), gen)
            infra1 = cond1("InfrastructureReady", "False", osm_ready.get("reason"), osm_ready.get("severity"),
                           osm_ready.get("message"))
        else:
            infra = cond2("InfrastructureReady", "False", "ObjectDoesNotExist", "OpenStackMachine does not exist", gen)
            infra1 = cond1("InfrastructureReady", "False", "WaitingForInfrastructure", "Info")
        if victim:
            infra = cond2("InfrastructureReady", "False", "InstanceCreateFailed", QUOTA_MESSAGE, gen)
            infra1 = cond1("InfrastructureReady", "False", "InstanceCreateFailed", "Error", QUOTA_MESSAGE)
        boot = cond2("BootstrapConfigReady", "True", "Ready", "", gen)
        if s == 2:
            node_r = cond2("NodeReady", "True", "NodeReady", "", gen)
            node_h = cond2("NodeHealthy", "True", "NodeHealthy", "", gen)
            node1 = cond1("NodeHealthy", "True")
        else:
            if not self.cl_infra_prov:
                why = "Waiting for Cluster status.initialization.infrastructureProvisioned to be true"
            elif pid:
                why = "Waiting for a Node with spec.providerID %s to exist" % pid
            else:
                why = "Waiting for OpenStackMachine to report spec.providerID"
            node_r = cond2("NodeReady", "Unknown", "InspectionFailed", why, gen)
            node_h = cond2("NodeHealthy", "Unknown", "InspectionFailed", why, gen)
            node1 = cond1("NodeHealthy", "False", "NodeProvisioning" if s == 1 else "WaitingForNodeRef", "Info")
        if dying:
            dele = cond2("Deleting", "True", "WaitingForInfrastructureDeletion",
                         "Waiting for OpenStackMachine to be deleted", gen)
            ready = cond2("Ready", "False", "NotReady",
                          "* Deleting: Machine deletion in progress, stage: WaitingForInfrastructureDeletion", gen)
        else:
            dele = cond2("Deleting", "False", "NotDeleting", "", gen)
            rs, rmsg = summary([("BootstrapConfigReady", boot), ("InfrastructureReady", infra), ("NodeHealthy", node_h)])
            ready = cond2("Ready", rs, "Ready" if rs == "True" else ("NotReady" if rs == "False" else "ReadyUnknown"),
                          rmsg, gen)
        avail = cond2("Available", "True", "Available", "", gen) if ready["status"] == "True" else \
            cond2("Available", "False", "NotReady", "", gen)
        upd = cond2("UpToDate", "True", "UpToDate", "", gen) if not outdated else \
            cond2("UpToDate", "False", "NotUpToDate", "\n".join("* " + r for r in outdated), gen)
        n_conds = [avail, ready, upd, boot, infra, node_r, node_h, dele, cond2("Paused", "False", "NotPaused", "", gen)]
        o_parts = [cond1("BootstrapReady", "True"), infra1, node1]
        o_conds = [summary_v1(o_parts, dying)] + o_parts
        if dying:
            phase = "Deleting"
        elif s == 2:
            phase = "Running"
        elif s == 1:
            phase = "Provisioned"
        else:
            phase = "Provisioning"
        addrs = g(osm_st, "addresses", default=None) if s >= 1 else None
        if addrs is None and s >= 1:
            addrs = g(cur, "addresses", default=None)
        node_name = n_name if (s == 2 or g(cur, "nodeRef", "name")) else None
        infra_prov = s >= 1 or bool(g(cur, "initialization", "infrastructureProvisioned") or g(cur, "infrastructureReady"))
        ver = g(m, "spec", "version") or ""
        node_info = None
        if node_name:
            node_info = {"architecture": "amd64", "bootID": stable_uuid("boot", g(m, "metadata", "uid", default=n_name)),
                         "containerRuntimeVersion": "containerd://1.7.27", "kernelVersion": "6.8.0-60-generic",
                         "kubeProxyVersion": ver, "kubeletVersion": ver,
                         "machineID": stable_uuid("machine", n_name).replace("-", ""),
                         "operatingSystem": "linux", "osImage": "Ubuntu 24.04.2 LTS",
                         "systemUUID": stable_uuid("system", n_name)}
        common = {"phase": phase, "observedGeneration": gen, "addresses": addrs, "nodeInfo": node_info}
        if self.flavor == "v1beta2":
            new_extra = {"initialization": {"bootstrapDataSecretCreated": True, "infrastructureProvisioned": infra_prov},
                         "nodeRef": {"name": node_name} if node_name else None}
            old_extra = {"failureReason": None, "failureMessage": None}
            return self.place(common, n_conds, o_conds, new_extra=new_extra, old_extra=old_extra, cur=cur)
        old_extra = {"bootstrapReady": True, "infrastructureReady": infra_prov, "failureReason": None,
                     "failureMessage": None,
                     "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": node_name,
                                 "uid": stable_uuid("node", n_name)} if node_name else None}
        return self.place(common, n_conds, o_conds, old_extra=old_extra, cur=cur)

    def machine_conds(self, m):
        st = self.mstat.get(name_of(m), {})
        conds = st.get("conditions") if self.flavor == "v1beta2" else g(st, "v1beta2", "conditions", default=[])
        return {c["type"]: c for c in conds or []}

    def v1_machine_conds(self, m):
        st = self.mstat.get(name_of(m), {})
        conds = g(st, "deprecated", "v1beta1", "conditions", default=[]) if self.flavor == "v1beta2" \
            else st.get("conditions") or []
        return {c["type"]: c for c in conds}

    def counts(self, machines):
        live = [m for m in machines if not deleting(m)]
        ready = sum(1 for m in machines if g(self.machine_conds(m).get("Ready"), "status") == "True")
        avail = sum(1 for m in machines if g(self.machine_conds(m).get("Available"), "status") == "True")
        upd = sum(1 for m in live if g(self.machine_conds(m).get("UpToDate"), "status") == "True")
        return live, ready, avail, upd

    def versions(self, machines):
        vs = {}
        for m in machines:
            if not deleting(m) and g(m, "spec", "version"):
                vs[m["spec"]["version"]] = vs.get(m["spec"]["version"], 0) + 1
        return [{"version": v, "replicas": n} for v, n in sorted(vs.items(), key=lambda x: version_key(x[0]))] or None

    def rollout_message(self, machines, owner):
        outdated = [m for m in machines if not deleting(m) and not self.up_to_date(m, owner)]
        reasons = []
        for m in outdated:
            for r in self.outdated_reasons(m, owner):
                if r not in reasons:
                    reasons.append(r)
        return outdated, "Rolling out %d not up-to-date replicas%s" % (
            len(outdated), "".join("\n* " + r for r in reasons))

    # KubeadmControlPlane
    def render_kcp(self, kcp):
        gen = generation(kcp)
        cur = g(kcp, "status", default={})
        dying = deleting(kcp)
        desired = replicas_of(g(kcp, "spec", "replicas"), 1, 1)
        allm = self.cp_machines if kcp is self.kcp else []
        live, ready, avail, upd = self.counts(allm)
        init = bool(g(cur, "initialization", "controlPlaneInitialized") or g(cur, "initialized")) or any(
            self.stage(m) == 2 for m in allm)
        healthy = [m for m in live if self.stage(m) == 2]
        vers = [g(m, "spec", "version") for m in healthy if g(m, "spec", "version")]
        version = min(vers, key=version_key) if vers else g(cur, "version")
        if not init:
            a = cond2("Available", "False", "NotAvailable", "Control plane not yet initialized", gen)
        elif dying:
            a = cond2("Available", "False", "NotAvailable", "* Control plane metadata.deletionTimestamp is set", gen)
        elif not healthy:
            a = cond2("Available", "False", "NotAvailable",
                      "* There are no Machines with healthy control plane components, at least 1 required", gen)
        else:
            a = cond2("Available", "True", "Available", "", gen)
        items = [(name_of(m), self.machine_conds(m).get("Ready") or {"status": "Unknown"}) for m in allm]
        mr = aggregate(items, "Machine", "Ready", "NotReady", "ReadyUnknown")
        items_u = [(name_of(m), self.machine_conds(m).get("UpToDate") or {"status": "Unknown"}) for m in live]
        mu = aggregate(items_u, "Machine", "UpToDate", "NotUpToDate", "UpToDateUnknown")
        outdated, rmsg = self.rollout_message(allm, kcp)
        health = ("True", "Healthy", "") if init and healthy else \
            ("Unknown", "InspectionFailed", "Waiting for Cluster control plane to be initialized") if not init else \
            ("False", "NotHealthy", "* No healthy control plane Machines")
        if dying:
            if self.w_machines or self.mds:
                dc = cond2("Deleting", "True", "WaitingForWorkersDeletion",
                           "KubeadmControlPlane deletion is waiting for worker Machines to be deleted", gen)
            elif allm:
                dc = cond2("Deleting", "True", "WaitingForMachineDeletion",
                           "Deleting %d Machine%s" % (len(allm), "s" if len(allm) != 1 else ""), gen)
            else:
                dc = cond2("Deleting", "True", "DeletionCompleted", "", gen)
        else:
            dc = cond2("Deleting", "False", "NotDeleting", "", gen)
        n_conds = [
            a,
            cond2("Initialized", "True", "Initialized", "", gen) if init else
            cond2("Initialized", "False", "NotInitialized", "", gen),
            cond2("CertificatesAvailable", "True", "Available", "", gen),
            cond2("EtcdClusterHealthy", health[0], health[1], health[2], gen),
            cond2("ControlPlaneComponentsHealthy", health[0], health[1], health[2], gen),
            cond2("MachinesReady", mr[0], mr[1], mr[2], gen),
            cond2("MachinesUpToDate", mu[0], mu[1], mu[2], gen),
            cond2("RollingOut", "True", "RollingOut", rmsg, gen) if outdated else
            cond2("RollingOut", "False", "NotRollingOut", "", gen),
            cond2("ScalingUp", "True", "ScalingUp", "Scaling up from %d to %d replicas" % (len(live), desired), gen)
            if len(live) < desired and not dying else cond2("ScalingUp", "False", "NotScalingUp", "", gen),
            cond2("ScalingDown", "True", "ScalingDown", "Scaling down from %d to %d replicas" % (len(allm), desired),
                  gen) if len(allm) > desired and not dying else cond2("ScalingDown", "False", "NotScalingDown", "", gen),
            cond2("Remediating", "False", "NotRemediating", "", gen),
            dc,
            cond2("Paused", "False", "NotPaused", "", gen),
        ]
        bad_m = [self.v1_machine_conds(m).get("Ready") for m in allm]
        bad_m = first_bad_v1([c for c in bad_m if c])
        o_parts = [
            cond1("Available", "True") if init else cond1("Available", "False", "WaitingForKubeadmInit", "Info"),
            cond1("CertificatesAvailable", "True"),
            cond1("MachinesCreated", "True"),
            cond1("MachinesReady", "True") if bad_m is None else
            cond1("MachinesReady", "False", bad_m.get("reason"), bad_m.get("severity"), bad_m.get("message")),
            cond1("MachinesSpecUpToDate", "True") if not outdated else
            cond1("MachinesSpecUpToDate", "False", "RollingUpdateInProgress", "Warning",
                  "Rolling %d replicas with outdated spec (%d replicas up to date)" % (len(outdated), upd)),
            cond1("Resized", "True") if len(live) == desired and len(allm) == desired else
            cond1("Resized", "False", "ScalingUp" if len(live) < desired else "ScalingDown", "Warning",
                  "Scaling %s control plane to %d replicas (actual %d)" % (
                      "up" if len(live) < desired else "down", desired, len(allm))),
            cond1("ControlPlaneComponentsHealthy", "True") if init and healthy else
            cond1("ControlPlaneComponentsHealthy", "Unknown", "ControlPlaneComponentsInspectionFailed", "Info",
                  "Waiting for control plane to be initialized"),
            cond1("EtcdClusterHealthy", "True") if init and healthy else
            cond1("EtcdClusterHealthy", "Unknown", "EtcdClusterInspectionFailed", "Info",
                  "Waiting for control plane to be initialized"),
        ]
        o_conds = [summary_v1(o_parts, dying)] + o_parts
        selector = "%s=%s,%s" % (L_CLUSTER, self.name, L_CP)
        common = {"observedGeneration": gen, "replicas": len(allm), "version": version, "selector": selector,
                  "versions": self.versions(allm)}
        new_counts = {"readyReplicas": ready, "availableReplicas": avail, "upToDateReplicas": upd}
        old_counts = {"readyReplicas": ready, "updatedReplicas": upd, "unavailableReplicas": max(0, len(allm) - ready)}
        if self.flavor == "v1beta2":
            return self.place(common, n_conds, o_conds, new_counts, old_counts,
                              new_extra={"initialization": {"controlPlaneInitialized": init}},
                              old_extra={"failureReason": None, "failureMessage": None}, cur=cur)
        return self.place(common, n_conds, o_conds, new_counts, old_counts,
                          old_extra={"initialized": init, "ready": init and ready > 0,
                                     "failureReason": None, "failureMessage": None}, cur=cur)

    @staticmethod
    def max_unavailable(md):
        for path in (("spec", "rollout", "strategy", "rollingUpdate", "maxUnavailable"),
                     ("spec", "strategy", "rollingUpdate", "maxUnavailable")):
            v = g(md, *path)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return 0

    # MachineDeployment
    def render_md(self, md):
        gen = generation(md)
        cur = g(md, "status", default={})
        dying = deleting(md)
        desired = replicas_of(g(md, "spec", "replicas"), 1)
        allm = self.machines_of_md(md)
        live, ready, avail, upd = self.counts(allm)
        mu = self.max_unavailable(md)
        need = max(0, desired - mu)
        if dying:
            a = cond2("Available", "False", "NotAvailable", "Deletion in progress", gen)
        elif avail >= need:
            a = cond2("Available", "True", "Available", "", gen)
        else:
            a = cond2("Available", "False", "NotAvailable",
                      "%d available replicas, at least %d required (spec.strategy.rollout.maxUnavailable is %d, "
                      "spec.replicas is %d)" % (avail, need, mu, desired), gen)
        mr = aggregate([(name_of(m), self.machine_conds(m).get("Ready") or {"status": "Unknown"}) for m in allm],
                       "Machine", "Ready", "NotReady", "ReadyUnknown")
        mud = aggregate([(name_of(m), self.machine_conds(m).get("UpToDate") or {"status": "Unknown"}) for m in live],
                        "Machine", "UpToDate", "NotUpToDate", "UpToDateUnknown")
        outdated, rmsg = self.rollout_message(allm, md)
        if dying:
            dc = cond2("Deleting", "True", "Deleting", "Deleting %d Machine%s" % (len(allm), "s" if len(allm) != 1 else "")
                       if allm else "Deletion completed", gen)
        else:
            dc = cond2("Deleting", "False", "NotDeleting", "", gen)
        n_conds = [
            a,
            cond2("MachinesReady", mr[0], mr[1], mr[2], gen),
            cond2("MachinesUpToDate", mud[0], mud[1], mud[2], gen),
            cond2("RollingOut", "True", "RollingOut", rmsg, gen) if outdated else
            cond2("RollingOut", "False", "NotRollingOut", "", gen),
            cond2("ScalingUp", "True", "ScalingUp", "Scaling up from %d to %d replicas" % (len(live), desired), gen)
            if len(live) < desired and not dying else cond2("ScalingUp", "False", "NotScalingUp", "", gen),
            cond2("ScalingDown", "True", "ScalingDown", "Scaling down from %d to %d replicas" % (len(allm), desired),
                  gen) if len(allm) > desired and not dying else cond2("ScalingDown", "False", "NotScalingDown", "", gen),
            cond2("Remediating", "False", "NotRemediating", "", gen),
            dc,
            cond2("Paused", "False", "NotPaused", "", gen),
        ]
        bad_m = first_bad_v1([c for c in (self.v1_machine_conds(m).get("Ready") for m in allm) if c])
        o_parts = [
            cond1("Available", "True") if avail >= need and not dying else
            cond1("Available", "False", "WaitingForAvailableMachines", "Warning",
                  "Minimum availability requires %d replicas, current %d available" % (need, avail)),
            cond1("MachineSetReady", "True") if bad_m is None else
            cond1("MachineSetReady", "False", bad_m.get("reason"), bad_m.get("severity"), bad_m.get("message")),
        ]
        o_conds = [summary_v1(o_parts, dying)] + o_parts
        if len(allm) < desired:
            phase = "ScalingUp"
        elif len(allm) > desired:
            phase = "ScalingDown"
        elif ready == desired:
            phase = "Running"
        else:
            phase = "ScalingUp"
        tname = labels_of(md).get(L_TOPO_MD)
        selector = "%s=%s" % (L_CLUSTER, self.name) + (",%s=%s" % (L_TOPO_MD, tname) if tname else "")
        common = {"observedGeneration": gen, "replicas": len(allm), "phase": phase, "selector": selector,
                  "versions": self.versions(allm)}
        new_counts = {"readyReplicas": ready, "availableReplicas": avail, "upToDateReplicas": upd}
        old_counts = {"readyReplicas": ready, "availableReplicas": avail, "updatedReplicas": upd,
                      "unavailableReplicas": max(0, desired - avail)}
        return self.place(common, n_conds, o_conds, new_counts, old_counts, cur=cur)

    # OpenStackCluster (CAPO v1beta1)
    def render_osc(self, osc):
        st = self.osc_stage(osc)
        failed = "infra-failed" in self.faults
        dying = deleting(osc)
        blocked = dying and "delete-blocked" in self.faults and not self.machines
        uid = g(osc, "metadata", "uid", default=name_of(osc))
        net_name = "k8s-clusterapi-cluster-%s-%s" % (self.ns, self.name)
        cidr = str(self.node_cidr())
        sg_cp = "k8s-cluster-%s-%s-secgroup-controlplane" % (self.ns, self.name)
        sg_w = "k8s-cluster-%s-%s-secgroup-worker" % (self.ns, self.name)
        lb_name = "k8s-clusterapi-cluster-%s-%s-kubeapi" % (self.ns, self.name)
        lb_on = g(osc, "spec", "apiServerLoadBalancer", "enabled") is not False
        out = {"failureReason": None, "failureMessage": None, "failureDomains": None}
        prov_before = g(osc, "status", "initialization", "provisioned") is True
        if st >= 1 or failed:
            out["network"] = {"id": stable_uuid("net", uid), "name": net_name,
                              "subnets": [{"cidr": cidr, "id": stable_uuid("subnet", uid), "name": net_name}]}
            out["externalNetwork"] = {"id": stable_uuid("extnet", self.ns), "name": "public"}
        if st >= 1 and not failed:
            out["router"] = {"id": stable_uuid("router", uid), "name": net_name,
                             "ips": ["203.0.113.%d" % (1 + stable_int(254, uid, "router"))]}
            out["controlPlaneSecurityGroup"] = {"id": stable_uuid("sg-cp", uid), "name": sg_cp}
            out["workerSecurityGroup"] = {"id": stable_uuid("sg-w", uid), "name": sg_w}
        ep = g(osc, "spec", "controlPlaneEndpoint", "host")
        if st >= 2 and lb_on:
            out["apiServerLoadBalancer"] = {"id": stable_uuid("lb", uid), "name": lb_name,
                                            "ip": ep or "192.0.2.1",
                                            "internalIP": str(list(self.node_cidr().hosts())[4])}
        auth = cond1("OpenStackAuthenticationSucceeded", "True")
        if failed:
            net = cond1("NetworkReady", "True")
            router = cond1("RouterReady", "False", "RouterCreateFailed", "Error", ROUTER_MESSAGE)
            sgs = cond1("SecurityGroupsReady", "False", "SecurityGroupCreateFailed", "Info", "Waiting for the router")
            api = cond1("APIEndpointReady", "False", "APIEndpointConfigFailed", "Info", "Waiting for the router")
            ready = cond1("Ready", "False", "RouterCreateFailed", "Error", ROUTER_MESSAGE)
            out["failureReason"] = "CreateError"
            out["failureMessage"] = ROUTER_MESSAGE
        else:
            prov = cond1("NetworkReady", "False", "Provisioning", "Info", "Creating the network and subnet")
            net = cond1("NetworkReady", "True") if st >= 1 else prov
            router = cond1("RouterReady", "True") if st >= 1 else \
                cond1("RouterReady", "False", "Provisioning", "Info", "Creating the router")
            sgs = cond1("SecurityGroupsReady", "True") if st >= 1 else \
                cond1("SecurityGroupsReady", "False", "Provisioning", "Info", "Creating security groups")
            api = cond1("APIEndpointReady", "True") if st >= 2 else \
                cond1("APIEndpointReady", "False", "Provisioning", "Info",
                      "Creating the API server load balancer" if lb_on else "Waiting for the network")
            ready = cond1("Ready", "True") if st >= 2 else \
                cond1("Ready", "False", "Provisioning", "Info",
                      "Creating the API server load balancer" if st == 1 else "Creating the network, router and security groups")
        if blocked:
            ready = cond1("Ready", "False", "DeletionFailed", "Warning",
                          "Failed to delete security group %s: in use by load balancer %s" % (sg_w, lb_name))
        elif dying:
            ready = cond1("Ready", "False", "Deleting", "Info", "Deleting the cluster's network, router, "
                          "security groups and load balancer")
        conds = [ready, api, auth, net, router, sgs]
        is_ready = st >= 2 and not failed and not dying
        out["ready"] = is_ready
        out["initialization"] = {"provisioned": is_ready or prov_before}
        out["conditions"] = with_times(conds, g(osc, "status", "conditions", default=[]), ts=self.ts)
        return out

    # Cluster
    def render_cluster(self, osc_st, kcp_st, md_st):
        cl = self.cl
        gen = generation(cl)
        cur = g(cl, "status", default={})
        dying = deleting(cl)
        v2 = self.flavor == "v1beta2"
        infra_failed = "infra-failed" in self.faults
        osc, kcp = self.osc, self.kcp

        def ncond(st, typ):
            if not st:
                return None
            conds = st.get("conditions") if v2 else g(st, "v1beta2", "conditions", default=[])
            return find_cond(conds, typ)

        def ocond(st, typ):
            if not st:
                return None
            conds = g(st, "deprecated", "v1beta1", "conditions", default=[]) if v2 else st.get("conditions")
            return find_cond(conds, typ)

        infra_prov = self.cl_infra_prov and not (osc_st is None and not dying)
        osc_ready = find_cond(g(osc_st, "conditions", default=[]), "Ready") if osc_st else None
        if osc is None:
            ir = cond2("InfrastructureReady", "False", "ObjectDoesNotExist",
                       "Waiting for cluster topology to be reconciled" if not dying else "OpenStackCluster has been deleted",
                       gen)
            ir1 = cond1("InfrastructureReady", "False", "WaitingForInfrastructure", "Info")
        elif g(osc_ready, "status") == "True":
            ir = cond2("InfrastructureReady", "True", "Ready", "", gen)
            ir1 = cond1("InfrastructureReady", "True")
        else:
            ir = cond2("InfrastructureReady", "False", g(osc_ready, "reason") or "NotReady",
                       g(osc_ready, "message", default=""), gen)
            ir1 = cond1("InfrastructureReady", "False", g(osc_ready, "reason") or "WaitingForInfrastructure",
                        g(osc_ready, "severity") or "Info", g(osc_ready, "message"))
        kcp_init = bool(kcp_st) and bool(g(kcp_st, "initialization", "controlPlaneInitialized") if v2
                                         else g(kcp_st, "initialized"))
        cp_init = kcp_init or bool(g(cur, "initialization", "controlPlaneInitialized") or g(cur, "controlPlaneReady"))
        if kcp is None:
            ci = cond2("ControlPlaneInitialized", "Unknown", "ObjectDoesNotExist",
                       "Waiting for cluster topology to be reconciled" if not dying else "KubeadmControlPlane does not exist",
                       gen)
        elif cp_init:
            ci = cond2("ControlPlaneInitialized", "True", "Initialized", "", gen)
        else:
            ci = cond2("ControlPlaneInitialized", "False", "NotInitialized", "Control plane not yet initialized", gen)
        ka = ncond(kcp_st, "Available")
        if kcp is None:
            ca = cond2("ControlPlaneAvailable", "False", "ObjectDoesNotExist",
                       "Waiting for cluster topology to be reconciled" if not dying else "KubeadmControlPlane has been deleted",
                       gen)
        else:
            ca = cond2("ControlPlaneAvailable", g(ka, "status", default="Unknown"),
                       g(ka, "reason", default="AvailableUnknown"), g(ka, "message", default=""), gen)
        mds_live = [md for md in self.mds if not deleting(md) or True]
        wa_items = [(name_of(md), ncond(md_st.get(name_of(md)), "Available") or {"status": "Unknown"}) for md in mds_live]
        wa = aggregate(wa_items, "MachineDeployment", "Available", "NotAvailable", "AvailableUnknown", "NoWorkers")
        cpm = aggregate([(name_of(m), self.machine_conds(m).get("Ready") or {"status": "Unknown"})
                         for m in self.cp_machines], "Machine", "Ready", "NotReady", "ReadyUnknown")
        wm = aggregate([(name_of(m), self.machine_conds(m).get("Ready") or {"status": "Unknown"})
                        for m in self.w_machines], "Machine", "Ready", "NotReady", "ReadyUnknown")
        cpu = aggregate([(name_of(m), self.machine_conds(m).get("UpToDate") or {"status": "Unknown"})
                         for m in self.cp_machines if not deleting(m)], "Machine", "UpToDate", "NotUpToDate",
                        "UpToDateUnknown")
        wu = aggregate([(name_of(m), self.machine_conds(m).get("UpToDate") or {"status": "Unknown"})
                        for m in self.w_machines if not deleting(m)], "Machine", "UpToDate", "NotUpToDate",
                       "UpToDateUnknown")
        rc = cond2("RemoteConnectionProbe", "True", "ProbeSucceeded", "", gen) if cp_init else \
            cond2("RemoteConnectionProbe", "False", "ProbeFailed", "Remote connection not established yet", gen)

        def roll(typ, reason_true, reason_false):
            lines = []
            if kcp is not None:
                c = ncond(kcp_st, typ)
                if g(c, "status") == "True":
                    lines.append("* KubeadmControlPlane %s: %s" % (name_of(kcp), c.get("message", "").replace("\n", "\n  ")))
            for md in self.mds:
                c = ncond(md_st.get(name_of(md)), typ)
                if g(c, "status") == "True":
                    lines.append("* MachineDeployment %s: %s" % (name_of(md), c.get("message", "").replace("\n", "\n  ")))
            if lines:
                return cond2(typ, "True", reason_true, "\n".join(lines), gen)
            return cond2(typ, "False", reason_false, "", gen)

        # TopologyReconciled
        t = self.topo
        version = g(cl, "spec", "topology", "version", default="")
        if dying:
            tr = cond2("TopologyReconciled", "False", "Deleting", "Cluster is deleting", gen)
        elif self.patch_error:
            tr = cond2("TopologyReconciled", "False", "ReconcileFailed",
                       "Error computing the desired state of the Cluster topology: %s" % self.patch_error, gen)
        elif self.ctl.require_clusterclass and self.cluster_class() is None:
            tr = cond2("TopologyReconciled", "False", "ClusterClassNotReconciled",
                       "ClusterClass %s not found in namespace %s" % (self.class_name(), self.ns), gen)
        elif t.get("cp_upgrading") and kcp is not None and self.cp_machines:
            lines = ["Cluster is upgrading to %s" % version,
                     "  * KubeadmControlPlane %s upgrading to version %s" % (name_of(kcp), version)]
            if t.get("pending_upgrade"):
                lines.append("  * MachineDeployments %s pending upgrade to version %s" % (
                    ", ".join(self.md_names(t["pending_upgrade"])), version))
            if t.get("pending_create"):
                lines.append("  * MachineDeployments for %s creation deferred while the control plane upgrade is "
                             "in progress" % ", ".join(t["pending_create"]))
            tr = cond2("TopologyReconciled", "False", "ClusterUpgrading", "\n".join(lines), gen)
        elif t.get("upgrading_md") or t.get("pending_upgrade"):
            lines = ["Cluster is upgrading to %s" % version]
            if t.get("upgrading_md"):
                lines.append("  * MachineDeployment %s upgrading to version %s" % (t["upgrading_md"], version))
            if t.get("pending_upgrade"):
                lines.append("  * MachineDeployments %s pending upgrade to version %s" % (
                    ", ".join(self.md_names(t["pending_upgrade"])), version))
            tr = cond2("TopologyReconciled", "False", "ClusterUpgrading", "\n".join(lines), gen)
        elif t.get("pending_create"):
            tr = cond2("TopologyReconciled", "False", "MachineDeploymentsCreatePending",
                       "MachineDeployments for %s creation pending" % ", ".join(t["pending_create"]), gen)
        elif self.paused:
            tr = cond2("TopologyReconciled", "False", "Paused", "Cluster is paused", gen)
        else:
            tr = cond2("TopologyReconciled", "True", "ReconcileSucceeded", "", gen)

        # Deleting
        if dying:
            if self.mds or self.w_machines:
                lines = []
                if self.mds:
                    lines.append("* MachineDeployments: %s" % ", ".join(name_of(x) for x in self.mds))
                if self.w_machines:
                    lines.append("* Worker Machines: %s" % self.name_list(self.w_machines))
                dc = cond2("Deleting", "True", "WaitingForWorkersDeletion", "\n".join(lines), gen)
            elif self.kcps or self.cp_machines:
                lines = ["* KubeadmControlPlane: %s" % ", ".join(name_of(x) for x in self.kcps)] if self.kcps else []
                if self.cp_machines:
                    lines.append("* Control plane Machines: %s" % self.name_list(self.cp_machines))
                dc = cond2("Deleting", "True", "WaitingForControlPlaneDeletion", "\n".join(lines), gen)
            elif self.oscs:
                msg = "* OpenStackCluster: %s" % ", ".join(name_of(x) for x in self.oscs)
                r = find_cond(g(osc_st, "conditions", default=[]), "Ready")
                if g(r, "reason") == "DeletionFailed":
                    msg += "\n  * " + r.get("message", "")
                dc = cond2("Deleting", "True", "WaitingForInfrastructureDeletion", msg, gen)
            else:
                dc = cond2("Deleting", "True", "DeletionCompleted", "", gen)
        else:
            dc = cond2("Deleting", "False", "NotDeleting", "", gen)

        wac = cond2("WorkersAvailable", wa[0], wa[1], wa[2], gen)
        tr_counts = tr["status"] == "True" or tr["reason"] not in ("ReconcileFailed", "ClusterClassNotReconciled")
        parts = [("Deleting", dc), ("RemoteConnectionProbe", rc), ("InfrastructureReady", ir),
                 ("ControlPlaneAvailable", ca), ("WorkersAvailable", wac)]
        if not tr_counts:
            parts.append(("TopologyReconciled", tr))
        ast, amsg = summary(parts, negative=("Deleting",))
        av = cond2("Available", ast, "Available" if ast == "True" else (
            "NotAvailable" if ast == "False" else "AvailableUnknown"), amsg, gen)
        n_conds = [av, ir, ci, ca, wac,
                   cond2("ControlPlaneMachinesReady", cpm[0], cpm[1], cpm[2], gen),
                   cond2("WorkerMachinesReady", wm[0], wm[1], wm[2], gen),
                   cond2("ControlPlaneMachinesUpToDate", cpu[0], cpu[1], cpu[2], gen),
                   cond2("WorkerMachinesUpToDate", wu[0], wu[1], wu[2], gen),
                   rc,
                   roll("RollingOut", "RollingOut", "NotRollingOut"),
                   roll("ScalingUp", "ScalingUp", "NotScalingUp"),
                   roll("ScalingDown", "ScalingDown", "NotScalingDown"),
                   cond2("Remediating", "False", "NotRemediating", "", gen),
                   dc,
                   cond2("Paused", "True", "Paused", "Cluster is paused", gen) if self.paused else
                   cond2("Paused", "False", "NotPaused", "", gen),
                   tr]
        # v1beta1 conditions
        kr1 = ocond(kcp_st, "Ready")
        if kcp is None:
            cr1 = cond1("ControlPlaneReady", "False", "WaitingForControlPlane", "Info")
        elif g(kr1, "status") == "True":
            cr1 = cond1("ControlPlaneReady", "True")
        else:
            cr1 = cond1("ControlPlaneReady", "False", g(kr1, "reason") or "WaitingForControlPlane",
                        g(kr1, "severity") or "Info", g(kr1, "message"))
        ci1 = cond1("ControlPlaneInitialized", "True") if cp_init else \
            cond1("ControlPlaneInitialized", "False", "WaitingForControlPlaneProviderInitialized", "Info",
                  "Waiting for control plane provider to indicate the control plane has been initialized")
        tr1 = cond1("TopologyReconciled", "True") if tr["status"] == "True" else \
            cond1("TopologyReconciled", "False", tr["reason"], "Info", tr["message"])
        o_parts = [cr1, ci1, ir1, tr1]
        o_conds = [summary_v1([cr1, ir1], dying)] + o_parts
        # phase
        endpoint = g(cl, "spec", "controlPlaneEndpoint", "host")
        if dying:
            phase = "Deleting"
        elif infra_failed:
            phase = "Failed"
        elif infra_prov and endpoint:
            phase = "Provisioned"
        elif g(cl, "spec", "infrastructureRef", "name"):
            phase = "Provisioning"
        else:
            phase = "Pending"
        fr = fm = None
        if infra_failed and osc is not None:
            fr = "CreateError"
            fm = 'Failure detected from referenced resource %s/%s, Kind=OpenStackCluster with name "%s": %s' % (
                G_INFRA, INFRA_VERSION, name_of(osc), ROUTER_MESSAGE)

        def rep(st, key):
            if not st:
                return 0
            if v2:
                return as_int(st.get(key), 0)
            return as_int(g(st, "v1beta2", key), 0)

        cpc = {"desiredReplicas": replicas_of(g(kcp, "spec", "replicas"), 1, 1) if kcp is not None else None,
               "replicas": as_int(g(kcp_st, "replicas"), 0) if kcp_st else None,
               "readyReplicas": rep(kcp_st, "readyReplicas") if kcp_st else None,
               "availableReplicas": rep(kcp_st, "availableReplicas") if kcp_st else None,
               "upToDateReplicas": rep(kcp_st, "upToDateReplicas") if kcp_st else None}
        wk = {"desiredReplicas": 0, "replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "upToDateReplicas": 0}
        for md in self.mds:
            st = md_st.get(name_of(md))
            wk["desiredReplicas"] += replicas_of(g(md, "spec", "replicas"), 1)
            wk["replicas"] += as_int(g(st, "replicas"), 0)
            for k in ("readyReplicas", "availableReplicas", "upToDateReplicas"):
                wk[k] += rep(st, k)
        if not self.mds:
            wk = None
        common = {"observedGeneration": gen, "phase": phase}
        if v2:
            s = self.place(common, n_conds, o_conds,
                           new_extra={"initialization": {"infrastructureProvisioned": bool(infra_prov),
                                                         "controlPlaneInitialized": bool(cp_init)},
                                      "controlPlane": cpc if kcp is not None else None, "workers": wk},
                           old_extra={"failureReason": fr, "failureMessage": fm}, cur=cur)
        else:
            s = self.place(common, n_conds, o_conds,
                           old_extra={"infrastructureReady": bool(infra_prov), "controlPlaneReady": bool(cp_init),
                                      "failureReason": fr, "failureMessage": fm}, cur=cur)
            s["v1beta2"]["controlPlane"] = cpc if kcp is not None else None
            s["v1beta2"]["workers"] = wk
        settled = (not dying and av["status"] == "True" and not t.get("cp_upgrading") and not t.get("upgrading_md")
                   and not t.get("pending_upgrade") and not t.get("pending_create")
                   and all(self.stage(m) == 2 and not deleting(m) for m in self.machines)
                   and g(ncond(kcp_st, "ScalingUp"), "status") != "True"
                   and g(ncond(kcp_st, "ScalingDown"), "status") != "True"
                   and g(ncond(kcp_st, "RollingOut"), "status") != "True"
                   and all(g(ncond(md_st.get(name_of(md)), k), "status") != "True"
                           for md in self.mds for k in ("ScalingUp", "ScalingDown", "RollingOut"))
                   and not any(deleting(o) for o in self.mds + self.kcps + self.oscs)
                   and len(self.md_live) == len(t.get("entries", [])))
        blocked = self.paused or "stall" in self.faults or infra_failed
        return s, settled or blocked

    def md_names(self, entries):
        out = []
        for e in entries:
            md = self.md_live.get(e)
            out.append(name_of(md) if md is not None else e)
        return out

    @staticmethod
    def name_list(objs, limit=5):
        names = sorted(name_of(o) for o in objs)
        return ", ".join(names[:limit]) + (", ... (%d more)" % (len(names) - limit) if len(names) > limit else "")


# ---------------------------------------------------------------------------------------------
# The controller


class Controller:
    def __init__(self, args):
        self.cfg = KubeConfig(args.kubeconfig, args.context)
        self.ns = args.namespace or self.cfg.namespace or "magnum-system"
        self.step = args.step_seconds
        self.resync = args.resync_seconds
        self.require_clusterclass = args.require_clusterclass
        self.verbose = args.verbose
        self.workers = args.workers
        self.stats = args.stats
        self.cache = Cache()
        self.queue = WorkQueue()
        self.stopping = threading.Event()
        self.watchers = {}
        self.wlock = threading.Lock()
        self.states = {}
        self.slock = threading.Lock()

    # watches
    def base_watches(self):
        out = [(k, "v1beta2") for k in ("Cluster", "ClusterClass") + CAPI_CHILD_KINDS]
        out += [(k, INFRA_VERSION) for k in INFRA_CHILD_KINDS + ("OpenStackClusterTemplate",)]
        out += [(k, "v1beta2") for k in CLASS_TEMPLATE_KINDS]
        return out

    def start_watch(self, kind, ver):
        with self.wlock:
            w = self.watchers.get((kind, ver))
            if w is None:
                w = self.watchers[(kind, ver)] = Watcher(self, kind, ver)
                w.start()
            return w

    def ensure_version(self, ver):
        """Start the watches of the CAPI kinds at another version (v1beta1 clusters are read and
        written at v1beta1 so that a converting server shows them in their own shape)."""
        ok = True
        for kind in ("Cluster",) + CAPI_CHILD_KINDS:
            ok = self.start_watch(kind, ver).synced.is_set() and ok
        return ok

    def versions(self):
        with self.wlock:
            return sorted({v for (k, v) in self.watchers if k == "Cluster"})

    def base_synced(self):
        return all(self.start_watch(k, v).synced.is_set() for k, v in self.base_watches())

    def flavor_of(self, cl):
        ann = annotations_of(cl).get(A_API_VERSION)
        if ann in ("v1beta1", "v1beta2"):
            return ann
        topo = g(cl, "spec", "topology", default={})
        if isinstance(topo, dict) and isinstance(topo.get("class"), str):
            return "v1beta1"
        if isinstance(topo, dict) and isinstance(topo.get("classRef"), dict):
            # A converting server shows every Cluster as v1beta2: who wrote the topology?
            for mf in g(cl, "metadata", "managedFields", default=[]) or []:
                if isinstance(mf, dict) and mf.get("manager") != FIELD_MANAGER and \
                        mf.get("apiVersion") == "%s/v1beta1" % G_CAPI and "f:topology" in json.dumps(mf.get("fieldsV1", {})):
                    return "v1beta1"
        return "v1beta2"

    def objects_changed(self, kind, clusters, obj=None):
        if kind in ("ClusterClass", "OpenStackClusterTemplate") + CLASS_TEMPLATE_KINDS and (
                obj is None or not labels_of(obj).get(L_CLUSTER)) or (
                kind == "OpenStackMachineTemplate" and obj is not None and not labels_of(obj).get(L_CLUSTER)):
            for c in self.cache.all("Cluster", "v1beta2"):
                self.queue.add(name_of(c))
            return
        for c in clusters:
            if c:
                self.queue.add(c)

    def state(self, name):
        with self.slock:
            st = self.states.get(name)
            if st is None:
                st = self.states[name] = ClusterState(time.monotonic() + self.step)
            return st

    def worker(self, idx):
        kube = Kube(self.cfg)
        while not self.stopping.is_set():
            key = self.queue.get(self.stopping)
            if key is None:
                return
            st = self.state(key)
            delay = None
            try:
                run = Run(self, key, kube, st)
                try:
                    step = max(0.01, float(annotations_of(self.cache.get("Cluster", "v1beta2", key)).get(A_STEP, self.step)))
                except (TypeError, ValueError):
                    step = self.step
                if st.due > time.monotonic() + step:
                    st.due = time.monotonic() + step
                t0 = time.monotonic()
                delay = run.run()
                STATS.add("reconcile", 1, time.monotonic() - t0)
                st.failures = 0
                if delay is None:
                    with self.slock:
                        if self.cache.get("Cluster", "v1beta2", key) is None:
                            self.states.pop(key, None)
            except Conflict as e:
                st.failures += 1
                if self.verbose or st.failures > 3:
                    log("%s/%s conflict, reconciling again: %s" % (self.ns, key, e))
                delay = 0.0 if st.failures <= 3 else min(0.05 * 2 ** st.failures, 5.0)
            except ApiError as e:
                st.failures += 1
                log("%s/%s error: %s" % (self.ns, key, e))
                delay = min(0.2 * 2 ** st.failures, 10.0)
            except Exception as e:  # noqa: BLE001 - never die on an odd object
                st.failures += 1
                log("%s/%s reconcile failed: %s: %s\n%s" % (self.ns, key, type(e).__name__, e,
                                                            traceback.format_exc().rstrip()))
                delay = min(0.5 * 2 ** st.failures, 30.0)
            finally:
                self.queue.done(key)
            if delay is not None and not self.stopping.is_set():
                self.queue.add_after(key, delay)

    def stats_loop(self):
        last = time.monotonic()
        while not self.stopping.wait(10.0):
            now = time.monotonic()
            c = STATS.take()
            qlen = len(self.queue.queue)
            log("stats %.0fs: %s; queue %d" % (now - last, ", ".join(
                "%s %d (%.1f ms avg)" % (k, v[0], 1000 * v[1] / max(1, v[0])) for k, v in sorted(c.items())), qlen))
            last = now

    def resync_loop(self):
        while not self.stopping.wait(self.resync):
            for k in self.cache.cluster_keys():
                self.queue.add(k)

    # CAAPH, just enough for the driver's add-ons: one HelmReleaseProxy per HelmChartProxy and
    # Cluster its selector matches, reported deployed at once (no Helm, no workload cluster).
    def caaph_loop(self):
        kube = Kube(self.cfg)
        base = "/apis/%s/v1alpha1/namespaces/%s/" % (G_ADDONS, self.ns)
        while not self.stopping.wait(max(self.step, 0.2)):
            try:
                self.caaph_sync(kube, base)
            except ApiError as e:
                if e.code != 404:  # 404: CAAPH's kinds are not served; nothing to do
                    log("caaph: %s" % e)
            except Exception as e:  # noqa: BLE001 - never die on an odd object
                log("caaph failed: %s: %s" % (type(e).__name__, e))

    def caaph_sync(self, kube, base):
        hcps = kube.request("GET", base + "helmchartproxies").get("items") or []
        hrps = kube.request("GET", base + "helmreleaseproxies").get("items") or []
        clusters = self.cache.all("Cluster", "v1beta2")
        want = {}
        for hcp in hcps:
            sel = g(hcp, "spec", "clusterSelector", "matchLabels", default={}) or {}
            if deleting(hcp) or not sel:
                continue
            for cl in clusters:
                if not deleting(cl) and all(labels_of(cl).get(k) == v for k, v in sel.items()):
                    want[(name_of(hcp), name_of(cl))] = (hcp, cl)
        have = {(labels_of(r).get(L_HCP), labels_of(r).get(L_CLUSTER)): r for r in hrps}
        for key, r in have.items():
            if key not in want and not deleting(r):
                kube.request("DELETE", base + "helmreleaseproxies/" + name_of(r))
        for key, (hcp, cl) in want.items():
            spec = {k: v for k, v in (hcp.get("spec") or {}).items()
                    if k in ("repoURL", "chartName", "version", "namespace", "releaseName", "options")}
            spec["clusterRef"] = {"apiVersion": "%s/v1beta2" % G_CAPI, "kind": "Cluster",
                                  "name": name_of(cl), "namespace": self.ns}
            spec["values"] = g(hcp, "spec", "valuesTemplate", default="") or ""
            r = have.get(key)
            if r is None:
                r = kube.request("POST", base + "helmreleaseproxies", {
                    "apiVersion": "%s/v1alpha1" % G_ADDONS, "kind": "HelmReleaseProxy",
                    "metadata": {"name": "%s-%s-sim" % (spec.get("chartName", "chart"), name_of(cl)),
                                 "labels": {L_CLUSTER: name_of(cl), L_HCP: name_of(hcp)}},
                    "spec": spec})
                log("%s/%s created HelmReleaseProxy %s" % (self.ns, name_of(cl), name_of(r)))
            elif not subset(r.get("spec") or {}, spec):
                r = kube.request("PATCH", base + "helmreleaseproxies/" + name_of(r), {"spec": spec},
                                 ctype="application/merge-patch+json")
            gen = generation(r)
            if g(r, "status", "observedGeneration") != gen:
                ts = iso()
                conds = [{"type": t, "status": "True", "reason": why, "message": "", "lastTransitionTime": ts}
                         for t, why in (("ClusterAvailable", "Available"), ("HelmReleaseReady", "Ready"),
                                        ("Ready", "Ready"))]
                kube.request("PATCH", base + "helmreleaseproxies/%s/status" % name_of(r),
                             {"status": {"conditions": conds, "status": "deployed", "revision": 1,
                                         "observedGeneration": gen}},
                             ctype="application/merge-patch+json")

    def run(self):
        log("starting: server %s://%s:%d, namespace %s, step %.3fs, %d workers%s" % (
            self.cfg.scheme, self.cfg.host, self.cfg.port, self.ns, self.step, self.workers,
            ", ClusterClass required" if self.require_clusterclass else ""))
        for k, v in self.base_watches():
            self.start_watch(k, v)
        while not self.stopping.is_set() and not self.base_synced():
            self.stopping.wait(0.1)
        log("caches synced: %d clusters" % len(self.cache.all("Cluster", "v1beta2")))
        for c in self.cache.all("Cluster", "v1beta2"):
            self.queue.add(name_of(c))
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True, name="worker-%d" % i)
                   for i in range(self.workers)]
        threads.append(threading.Thread(target=self.resync_loop, daemon=True, name="resync"))
        threads.append(threading.Thread(target=self.caaph_loop, daemon=True, name="caaph"))
        if self.stats:
            threads.append(threading.Thread(target=self.stats_loop, daemon=True, name="stats"))
        for t in threads:
            t.start()
        while not self.stopping.is_set():
            self.stopping.wait(1.0)


def main(argv=None):
    p = argparse.ArgumentParser(description="Simulated Cluster API + CAPO controller (for tests).")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", os.path.expanduser("~/.kube/config")))
    p.add_argument("--context", default=None)
    p.add_argument("--namespace", default=None, help="namespace to simulate (default: magnum-system)")
    p.add_argument("--step-seconds", type=float,
                   default=float(os.environ.get("CAPI_SIM_STEP_SECONDS", "0.5")),
                   help="time of one simulated step (env CAPI_SIM_STEP_SECONDS, default 0.5)")
    p.add_argument("--resync-seconds", type=float, default=10.0, help="reconcile every cluster this often")
    p.add_argument("--workers", type=int, default=int(os.environ.get("CAPI_SIM_WORKERS", "8")),
                   help="reconciles at once (env CAPI_SIM_WORKERS, default 8)")
    p.add_argument("--require-clusterclass", action="store_true",
                   help="a Cluster whose ClusterClass does not exist is not built")
    p.add_argument("--log-file", default=os.environ.get("CAPI_SIM_LOG"))
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--stats", action="store_true", default=bool(os.environ.get("CAPI_SIM_STATS")),
                   help="log request and reconcile counts every 10 s (env CAPI_SIM_STATS)")
    args = p.parse_args(argv)
    global _log_file
    if args.log_file:
        _log_file = open(args.log_file, "a", encoding="utf-8")
    args.step_seconds = max(0.01, args.step_seconds)
    ctl = Controller(args)

    def stop(*_):
        ctl.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        ctl.run()
    finally:
        ctl.cfg.cleanup()
        log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
