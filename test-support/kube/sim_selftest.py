#!/usr/bin/env python3
"""Self-test of capi_sim.py against the Kubernetes API server stand-in.

Starts the stand-in with start.sh (controller included) in a temporary directory, drives the
scenarios of capi_sim.md purely through the Kubernetes API (JSON bodies written here, a
client of its own: http.client + ssl with the certificates start.sh wrote), prints one line per
check and "sim selftest: N checks passed"; exits non-zero on the first failure.

    python3 sim_selftest.py [--keep] [--step SECONDS]

Works with the CRD schemas (/work/shared/fixtures/capi-crds, the default: every object the
controller writes is validated) and with MAGNUM_TEST_CAPI_CRDS=/nonexistent (no validation).
Standard library only.
"""

import argparse
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
NS = "magnum-system"
CAPI = "/apis/cluster.x-k8s.io/%s/namespaces/" + NS
KCP = "/apis/controlplane.cluster.x-k8s.io/%s/namespaces/" + NS
INFRA = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/" + NS
QUOTA = ("Failed to create server: Quota exceeded for instances: Requested 1, "
         "but already used 10 of 10 instances")
L_CLUSTER = "cluster.x-k8s.io/cluster-name"
FAULT = "capi-sim.magnum-rs.dev/fault"
STEP = "capi-sim.magnum-rs.dev/step-seconds"


def path(kind, ver="v1beta2", name=None, sub=None):
    base = {"clusters": CAPI, "machinedeployments": CAPI, "machines": CAPI, "clusterclasses": CAPI,
            "kubeadmcontrolplanes": KCP}.get(kind)
    p = (base % ver if base else INFRA) + "/" + kind
    if name:
        p += "/" + name
    if sub:
        p += "/" + sub
    return p


class Failed(Exception):
    pass


class Api:
    def __init__(self, d):
        self.port = int(open(os.path.join(d, "port")).read().strip())
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        ctx.load_cert_chain(os.path.join(d, "client.crt"), os.path.join(d, "client.key"))
        self.ctx = ctx
        self.conn = None

    def call(self, method, p, body=None, ctype="application/json", query=None):
        q = dict(query or {})
        if method in ("POST", "PATCH", "PUT"):
            q["fieldManager"] = "sim-selftest"
        url = p + ("?" + urllib.parse.urlencode(q) if q else "")
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(3):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=30)
            try:
                h = {"Accept": "application/json"}
                if data is not None:
                    h["Content-Type"] = ctype
                self.conn.request(method, url, body=data, headers=h)
                r = self.conn.getresponse()
                raw = r.read()
                return r.status, (json.loads(raw) if raw else {})
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.1)

    def ok(self, method, p, body=None, ctype="application/json", query=None):
        code, out = self.call(method, p, body, ctype, query)
        if code >= 300:
            raise Failed("%s %s -> %d: %s" % (method, p, code, out.get("message", out)))
        return out

    def get(self, kind, name, ver="v1beta2"):
        code, out = self.call("GET", path(kind, ver, name))
        return out if code == 200 else None

    def items(self, kind, cluster=None, ver="v1beta2"):
        q = {"labelSelector": "%s=%s" % (L_CLUSTER, cluster)} if cluster else None
        return self.ok("GET", path(kind, ver), query=q).get("items") or []

    def merge(self, kind, name, patch, ver="v1beta2"):
        return self.ok("PATCH", path(kind, ver, name), patch, ctype="application/merge-patch+json")


def g(o, *p, default=None):
    for k in p:
        if isinstance(o, dict) and k in o:
            o = o[k]
        elif isinstance(o, list) and isinstance(k, int) and -len(o) <= k < len(o):
            o = o[k]
        else:
            return default
    return default if o is None else o


def cond(obj, typ, where="conditions"):
    for c in g(obj, "status", *where.split("."), default=[]) or []:
        if c.get("type") == typ:
            return c
    return None


def cond_true(obj, typ, where="conditions"):
    return g(cond(obj, typ, where), "status") == "True"


def current(obj):
    return g(obj, "status", "observedGeneration") == g(obj, "metadata", "generation")


def conds_current(obj, where="conditions"):
    gen = g(obj, "metadata", "generation")
    cs = g(obj, "status", *where.split("."), default=[]) or []
    return bool(cs) and all(c.get("observedGeneration") == gen for c in cs)


class SelfTest:
    def __init__(self, args):
        self.args = args
        self.n = 0
        self.t0 = time.monotonic()
        self.dir = tempfile.mkdtemp(prefix="capi-sim-selftest-")
        self.dirs = [self.dir]

    def check(self, desc, value=True):
        if not value:
            raise Failed("check failed: %s" % desc)
        self.n += 1
        print("ok %d - %s" % (self.n, desc), flush=True)

    def wait(self, desc, fn, timeout=None, interval=0.02):
        timeout = timeout or self.args.timeout
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                last = fn()
            except Failed:
                raise
            except Exception as e:  # noqa: BLE001 - an object in between states
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(interval)
        raise Failed("timed out after %.0fs waiting for: %s (last: %r)" % (timeout, desc, last))

    def start(self, d, extra=()):
        env = dict(os.environ)
        env["CAPI_SIM_STEP_SECONDS"] = str(self.args.step)
        cmd = ["bash", os.path.join(HERE, "start.sh"), d] + (["--"] + list(extra) if extra else [])
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise Failed("start.sh failed:\n%s" % r.stderr[-3000:])
        return Api(d)

    def stop(self, d):
        subprocess.run(["bash", os.path.join(HERE, "stop.sh"), d], capture_output=True, timeout=60)

    def log_problems(self, d):
        try:
            text = open(os.path.join(d, "capi_sim.log"), encoding="utf-8").read()
        except OSError:
            return []
        return [ln for ln in text.splitlines() if "REJECTED" in ln or "reconcile failed" in ln or "Traceback" in ln]

    # ---- object builders ---------------------------------------------------------------------

    @staticmethod
    def cluster_v2(name, version, cp, mds, annotations=None):
        c = SelfTest._cluster_v2(name, version, cp, mds, annotations)
        if not mds:
            del c["spec"]["topology"]["workers"]  # at least one entry when present
        return c

    @staticmethod
    def _cluster_v2(name, version, cp, mds, annotations=None):
        return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "metadata": {"name": name, "namespace": NS, "labels": {"cluster-uuid": "uuid-" + name},
                             "annotations": annotations or {}},
                "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.100.0.0/16"]},
                                            "services": {"cidrBlocks": ["10.254.0.0/16"]},
                                            "serviceDomain": "cluster.local"},
                         "topology": {"classRef": {"name": "magnum-v1"}, "version": version,
                                      "controlPlane": {"replicas": cp},
                                      "workers": {"machineDeployments": mds},
                                      "variables": [{"name": "flavor", "value": "m1.small"},
                                                    {"name": "controlPlaneFlavor", "value": "m1.large"},
                                                    {"name": "image", "value": {"filter": {"name": "ubuntu-2404-kube"}}}]}}}

    @staticmethod
    def md(name, replicas, **extra):
        e = {"class": "default-worker", "name": name, "replicas": replicas,
             "metadata": {"labels": {"node.cluster.x-k8s.io/nodegroup": name}}}
        e.update(extra)
        return e

    # ---- views of one cluster ----------------------------------------------------------------

    def view(self, name, ver="v1beta2"):
        api = self.api
        v = {"cluster": api.get("clusters", name, ver),
             "kcp": api.items("kubeadmcontrolplanes", name, ver),
             "mds": api.items("machinedeployments", name, ver),
             "machines": api.items("machines", name, ver),
             "osc": api.items("openstackclusters", name),
             "osm": api.items("openstackmachines", name),
             "osmt": api.items("openstackmachinetemplates", name)}
        v["cp"] = [m for m in v["machines"] if "cluster.x-k8s.io/control-plane" in g(m, "metadata", "labels", default={})]
        v["workers"] = [m for m in v["machines"] if m not in v["cp"]]
        return v

    def settled(self, name, cp, md_replicas, version=None):
        """The cluster is Available with every status current and the wanted machines."""
        v = self.view(name)
        c = v["cluster"]
        if not c or not cond_true(c, "Available") or not current(c) or not conds_current(c):
            return None
        if not cond_true(c, "TopologyReconciled") or cond_true(c, "RollingOut") or cond_true(c, "ScalingUp") \
                or cond_true(c, "ScalingDown"):
            return None
        if len(v["kcp"]) != 1 or not current(v["kcp"][0]) or not conds_current(v["kcp"][0]):
            return None
        if len(v["cp"]) != cp or any(g(m, "status", "phase") != "Running" for m in v["machines"]):
            return None
        mds = {g(m, "metadata", "labels", "topology.cluster.x-k8s.io/deployment-name"): m for m in v["mds"]}
        if set(mds) != set(md_replicas) or len(v["mds"]) != len(md_replicas):
            return None
        for t, n in md_replicas.items():
            md = mds[t]
            own = [m for m in v["workers"] if g(m, "metadata", "labels", "cluster.x-k8s.io/deployment-name")
                   == md["metadata"]["name"]]
            if len(own) != n or not current(md) or not conds_current(md) or g(md, "status", "phase") != "Running" \
                    or g(md, "status", "readyReplicas") != n:
                return None
        if not all(current(m) and conds_current(m) for m in v["machines"]):
            return None
        if version and any(g(m, "spec", "version") != version for m in v["machines"]):
            return None
        if len(v["workers"]) != sum(md_replicas.values()):
            return None
        if not all(cond_true(c, t) for t in ("ControlPlaneMachinesReady", "WorkerMachinesReady",
                                             "ControlPlaneMachinesUpToDate", "WorkerMachinesUpToDate")):
            return None
        # The snapshot is several reads: the Cluster must not have moved meanwhile.
        again = self.api.get("clusters", name)
        if g(again, "metadata", "resourceVersion") != g(c, "metadata", "resourceVersion"):
            return None
        return v

    def set_topology(self, name, **changes):
        c = self.api.get("clusters", name)
        topo = c["spec"]["topology"]
        topo.update(changes)
        body = {"spec": {"topology": {k: topo[k] for k in changes}}}
        return self.api.merge("clusters", name, body)

    def set_annotation(self, kind, name, key, value, ver="v1beta2"):
        return self.api.merge(kind, name, {"metadata": {"annotations": {key: value}}}, ver)

    def watch_for(self, desc, fn, timeout=None):
        """Poll quickly for a passing state (an in-progress state lasts a step or two)."""
        return self.wait(desc, fn, timeout=timeout, interval=0.005)

    # ---- scenarios ---------------------------------------------------------------------------

    def scenario_create(self):
        t = time.monotonic()
        name = "kube-s1"
        self.api.ok("POST", path("clusters"), self.cluster_v2(
            name, "v1.33.1", 3, [self.md("md-0", 2), self.md("md-1", 2, failureDomain="az-1")]))
        early = self.watch_for("the Cluster provisioning", lambda: (lambda c: c if c and g(c, "status", "phase") in (
            "Pending", "Provisioning") and current(c) else None)(self.api.get("clusters", name)))
        self.check("v1beta2 cluster: first status is in progress (phase %s, Available %s) and current" % (
            g(early, "status", "phase"), g(cond(early, "Available"), "status")),
            g(cond(early, "Available"), "status") != "True")
        v = self.wait("kube-s1 Available with 3 control-plane and 2+2 workers",
                      lambda: self.settled(name, 3, {"md-0": 2, "md-1": 2}))
        self.timings["create 3 cp + 2x2 workers"] = time.monotonic() - t
        c = v["cluster"]
        self.check("Cluster Available True, every condition and status at generation %d" % c["metadata"]["generation"],
                   cond_true(c, "Available") and current(c) and conds_current(c))
        ep = g(c, "spec", "controlPlaneEndpoint", default={})
        self.check("controlPlaneEndpoint set on the Cluster (%s:%s)" % (ep.get("host"), ep.get("port")),
                   str(ep.get("host", "")).startswith("192.0.2.") and ep.get("port") == 6443)
        want = ["Available", "InfrastructureReady", "ControlPlaneInitialized", "ControlPlaneAvailable",
                "WorkersAvailable", "ControlPlaneMachinesReady", "WorkerMachinesReady", "RemoteConnectionProbe",
                "TopologyReconciled"]
        self.check("Cluster conditions %s all True" % ", ".join(want), all(cond_true(c, t) for t in want))
        self.check("Cluster phase Provisioned, initialization flags true",
                   g(c, "status", "phase") == "Provisioned" and g(c, "status", "initialization") ==
                   {"infrastructureProvisioned": True, "controlPlaneInitialized": True})
        self.check("Cluster counters: controlPlane 3/3, workers 4/4",
                   g(c, "status", "controlPlane", "readyReplicas") == 3 and
                   g(c, "status", "controlPlane", "desiredReplicas") == 3 and
                   g(c, "status", "workers", "availableReplicas") == 4 and
                   g(c, "status", "workers", "upToDateReplicas") == 4)
        self.check("deprecated v1beta1 conditions Ready/ControlPlaneReady/InfrastructureReady True",
                   all(cond_true(c, t, "deprecated.v1beta1.conditions")
                       for t in ("Ready", "ControlPlaneReady", "InfrastructureReady")))
        osc, kcp = v["osc"][0], v["kcp"][0]
        self.check("Cluster refs: infrastructureRef -> OpenStackCluster %s, controlPlaneRef -> KubeadmControlPlane %s"
                   % (osc["metadata"]["name"], kcp["metadata"]["name"]),
                   g(c, "spec", "infrastructureRef") == {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                         "kind": "OpenStackCluster", "name": osc["metadata"]["name"]}
                   and g(c, "spec", "controlPlaneRef", "name") == kcp["metadata"]["name"]
                   and g(c, "spec", "controlPlaneRef", "apiGroup") == "controlplane.cluster.x-k8s.io")
        self.check("finalizer cluster.cluster.x-k8s.io on the Cluster",
                   "cluster.cluster.x-k8s.io" in g(c, "metadata", "finalizers", default=[]))
        self.check("OpenStackCluster %s ready, provisioned, endpoint %s" % (osc["metadata"]["name"], ep.get("host")),
                   g(osc, "status", "ready") is True and g(osc, "status", "initialization", "provisioned") is True
                   and g(osc, "spec", "controlPlaneEndpoint", "host") == ep.get("host")
                   and all(cond_true(osc, t) for t in ("Ready", "NetworkReady", "RouterReady", "SecurityGroupsReady",
                                                       "APIEndpointReady")))
        uid = c["metadata"]["uid"]
        owned = all(any(r.get("uid") == uid and r.get("kind") == "Cluster" for r in g(o, "metadata", "ownerReferences",
                                                                                     default=[]))
                    for o in v["osc"] + v["kcp"] + v["mds"])
        labels_ok = all(g(o, "metadata", "labels", L_CLUSTER) == name and
                        "topology.cluster.x-k8s.io/owned" in g(o, "metadata", "labels", default={})
                        for o in v["osc"] + v["kcp"] + v["mds"])
        self.check("OpenStackCluster, KubeadmControlPlane, MachineDeployments owned by the Cluster and labelled",
                   owned and labels_ok)
        self.check("KubeadmControlPlane: replicas 3, ready/available/upToDate 3, version v1.33.1, Available",
                   g(kcp, "spec", "replicas") == 3 and g(kcp, "status", "readyReplicas") == 3 and
                   g(kcp, "status", "availableReplicas") == 3 and g(kcp, "status", "upToDateReplicas") == 3 and
                   g(kcp, "status", "version") == "v1.33.1" and cond_true(kcp, "Available") and
                   cond_true(kcp, "Initialized") and g(kcp, "status", "initialization", "controlPlaneInitialized"))
        mdnames = sorted(g(m, "metadata", "labels", "topology.cluster.x-k8s.io/deployment-name") for m in v["mds"])
        self.check("MachineDeployments %s named <cluster>-<md>-<5>, phase Running, Available" % mdnames,
                   mdnames == ["md-0", "md-1"] and all(
                       m["metadata"]["name"].startswith(name + "-" + g(m, "metadata", "labels",
                                                                         "topology.cluster.x-k8s.io/deployment-name") + "-")
                       and g(m, "status", "phase") == "Running" and cond_true(m, "Available") for m in v["mds"]))
        kname = kcp["metadata"]["name"]
        cp_ok = all(g(m, "metadata", "labels", "cluster.x-k8s.io/control-plane") == "" and
                    any(r.get("kind") == "KubeadmControlPlane" and r.get("name") == kname
                        for r in m["metadata"].get("ownerReferences", [])) for m in v["cp"])
        self.check("control-plane Machines labelled cluster.x-k8s.io/control-plane and owned by the KCP", cp_ok)
        mdby = {m["metadata"]["name"]: m for m in v["mds"]}
        w_ok = all(g(m, "metadata", "labels", "cluster.x-k8s.io/deployment-name") in mdby and
                   g(m, "metadata", "labels", "topology.cluster.x-k8s.io/deployment-name") ==
                   g(mdby[m["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"]], "metadata", "labels",
                     "topology.cluster.x-k8s.io/deployment-name") and
                   any(r.get("kind") == "MachineDeployment" for r in m["metadata"].get("ownerReferences", []))
                   for m in v["workers"])
        self.check("worker Machines labelled with both deployment names and owned by their MD", w_ok)
        osms = {o["metadata"]["name"]: o for o in v["osm"]}
        m_ok = True
        for m in v["machines"]:
            osm = osms.get(m["metadata"]["name"])
            m_ok &= (g(m, "spec", "providerID", default="").startswith("openstack:///") and
                     g(m, "status", "nodeRef", "name") == m["metadata"]["name"] and
                     g(m, "spec", "infrastructureRef", "name") == m["metadata"]["name"] and
                     osm is not None and g(osm, "status", "ready") is True and
                     g(osm, "spec", "providerID") == g(m, "spec", "providerID") and
                     bool(g(osm, "status", "addresses")) and g(m, "status", "addresses") == g(osm, "status", "addresses")
                     and all(cond_true(m, t) for t in ("Available", "Ready", "UpToDate", "BootstrapConfigReady",
                                                        "InfrastructureReady", "NodeReady", "NodeHealthy"))
                     and g(m, "status", "nodeInfo", "kubeletVersion") == "v1.33.1")
        self.check("every Machine: providerID, nodeRef, Running, 7 v1beta2 conditions True, its OpenStackMachine "
                   "ready with addresses", m_ok)
        flav = {g(o, "metadata", "labels", "cluster.x-k8s.io/control-plane") is not None: g(o, "spec", "flavor")
                for o in v["osm"]}
        self.check("OpenStackMachines cloned from the templates: flavor m1.large (control plane), m1.small (workers)",
                   flav == {True: "m1.large", False: "m1.small"} and all(
                       g(o, "spec", "image") == {"filter": {"name": "ubuntu-2404-kube"}} for o in v["osm"]))
        az = [m for m in v["workers"] if g(m, "spec", "failureDomain") == "az-1"]
        self.check("md-1's failureDomain az-1 reaches its Machines", len(az) == 2)

    def scenario_scale(self):
        name = "kube-s1"
        t = time.monotonic()
        c = self.api.get("clusters", name)
        mds = c["spec"]["topology"]["workers"]["machineDeployments"]
        mds[0]["replicas"] = 3
        self.set_topology(name, workers={"machineDeployments": mds})

        def scaling_up():
            v = self.view(name)
            md = [m for m in v["mds"] if m["metadata"]["labels"].get("topology.cluster.x-k8s.io/deployment-name")
                  == "md-0"][0]
            return md if g(md, "spec", "replicas") == 3 and current(md) and conds_current(md) and \
                cond_true(md, "ScalingUp") else None
        md = self.watch_for("md-0 ScalingUp True at its new generation", scaling_up)
        self.check("scale md-0 2->3: MD written first with ScalingUp True (%s) at generation %d" % (
            g(cond(md, "ScalingUp"), "message"), md["metadata"]["generation"]), True)
        v = self.wait("md-0 at 3", lambda: self.settled(name, 3, {"md-0": 3, "md-1": 2}))
        self.timings["scale md 2->3"] = time.monotonic() - t
        self.check("md-0 has 3 Running Machines, Cluster Available again", True)
        # 3 -> 1 with the oldest Machine marked for deletion (the default order would take the newest).
        md0 = [m for m in v["mds"] if m["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"] == "md-0"][0]
        own = sorted((m for m in v["workers"] if m["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"]
                      == md0["metadata"]["name"]),
                     key=lambda m: (m["metadata"]["creationTimestamp"],
                                    m["metadata"].get("annotations", {}).get("capi-sim.magnum-rs.dev/created", "")))
        marked = own[0]["metadata"]["name"]
        newest = own[-1]["metadata"]["name"]
        middle = own[1]["metadata"]["name"]
        self.set_annotation("machines", marked, "cluster.x-k8s.io/delete-machine", "yes")
        t = time.monotonic()
        c = self.api.get("clusters", name)
        mds = c["spec"]["topology"]["workers"]["machineDeployments"]
        mds[0]["replicas"] = 1
        self.set_topology(name, workers={"machineDeployments": mds})
        md = self.watch_for("md-0 ScalingDown True", lambda: (lambda m: m if m and g(m, "spec", "replicas") == 1 and
                                                              current(m) and cond_true(m, "ScalingDown") else None)(
            self.api.get("machinedeployments", md0["metadata"]["name"])))
        self.check("scale md-0 3->1: ScalingDown True (%s)" % g(cond(md, "ScalingDown"), "message"), True)
        v = self.wait("md-0 at 1", lambda: self.settled(name, 3, {"md-0": 1, "md-1": 2}))
        self.timings["scale md 3->1"] = time.monotonic() - t
        left = [m["metadata"]["name"] for m in v["workers"]
                if m["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] == md0["metadata"]["name"]]
        self.check("the Machine marked cluster.x-k8s.io/delete-machine (%s, the oldest) went first, then the newest; "
                   "%s is left" % (marked, left), left == [middle] and marked not in left and newest not in left)
        self.check("its OpenStackMachine went with it", self.api.get("openstackmachines", marked) is None)

    def scenario_add_remove_md(self):
        name = "kube-s1"
        t = time.monotonic()
        c = self.api.get("clusters", name)
        mds = c["spec"]["topology"]["workers"]["machineDeployments"]
        mds.append(self.md("md-2", 1))
        self.set_topology(name, workers={"machineDeployments": mds})
        v = self.wait("md-2 created and Running", lambda: self.settled(name, 3, {"md-0": 1, "md-1": 2, "md-2": 1}))
        md2 = [m for m in v["mds"] if m["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"] == "md-2"][0]
        m2 = [m for m in v["workers"] if m["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"]
              == md2["metadata"]["name"]]
        self.check("new topology entry md-2 -> MachineDeployment %s with 1 Running Machine" % md2["metadata"]["name"],
                   len(m2) == 1 and g(m2[0], "metadata", "labels", "node.cluster.x-k8s.io/nodegroup") == "md-2")
        self.timings["add md"] = time.monotonic() - t
        t = time.monotonic()
        self.set_topology(name, workers={"machineDeployments": mds[:2]})
        def md2_deleting():
            m = self.api.get("machinedeployments", md2["metadata"]["name"])
            if m is None:
                return "gone"
            return m if g(m, "metadata", "deletionTimestamp") else None
        md = self.watch_for("md-2 deleting", md2_deleting)
        self.check("entry md-2 removed: its MD got a deletionTimestamp, Deleting True (%s)" % g(
            cond(md, "Deleting"), "message"), isinstance(md, dict))
        self.wait("md-2 gone", lambda: self.api.get("machinedeployments", md2["metadata"]["name"]) is None)
        self.check("md-2's MachineDeployment went", True)
        self.check("md-2's Machine and OpenStackMachine went before it",
                   self.api.get("machines", m2[0]["metadata"]["name"]) is None and
                   self.api.get("openstackmachines", m2[0]["metadata"]["name"]) is None)
        self.wait("kube-s1 settled without md-2", lambda: self.settled(name, 3, {"md-0": 1, "md-1": 2}))
        self.timings["remove md"] = time.monotonic() - t
        self.check("cluster Available again with md-0 and md-1", True)

    def scenario_upgrade(self):
        name = "kube-s1"
        t = time.monotonic()
        self.set_topology(name, version="v1.34.2")
        seen = {"cp_rolling": False, "upgrading": False, "max_cp": 0, "md_before_cp": False, "kcp_msg": ""}

        def progress():
            v = self.view(name)
            c, kcp = v["cluster"], v["kcp"][0]
            seen["max_cp"] = max(seen["max_cp"], len([m for m in v["cp"]]))
            if cond_true(kcp, "RollingOut") and current(kcp):
                seen["cp_rolling"] = True
                seen["kcp_msg"] = g(cond(kcp, "RollingOut"), "message")
            tr = cond(c, "TopologyReconciled")
            if g(tr, "status") == "False" and g(tr, "reason") == "ClusterUpgrading":
                seen["upgrading"] = True
            old_cp = [m for m in v["cp"] if g(m, "spec", "version") != "v1.34.2"]
            new_w = [m for m in v["workers"] if g(m, "spec", "version") == "v1.34.2"]
            if old_cp and new_w:
                seen["md_before_cp"] = True
            return self.settled(name, 3, {"md-0": 1, "md-1": 2}, "v1.34.2")
        v = self.wait("every Machine at v1.34.2", progress, interval=0.005)
        self.timings["upgrade v1.33.1 -> v1.34.2"] = time.monotonic() - t
        kcp = v["kcp"][0]
        self.check("upgrade: KCP showed RollingOut True (%r)" % seen["kcp_msg"], seen["cp_rolling"])
        self.check("upgrade: TopologyReconciled False reason ClusterUpgrading while upgrading", seen["upgrading"])
        self.check("upgrade: control-plane Machines replaced one at a time (at most %d at once)" % seen["max_cp"],
                   seen["max_cp"] <= 4)
        self.check("upgrade: workers only after the control plane", not seen["md_before_cp"])
        self.check("upgrade: every Machine, node and KCP status.version at v1.34.2, MDs at v1.34.2",
                   all(g(m, "spec", "version") == "v1.34.2" and g(m, "status", "nodeInfo", "kubeletVersion") == "v1.34.2"
                       for m in v["machines"]) and g(kcp, "status", "version") == "v1.34.2" and
                   all(g(m, "spec", "template", "spec", "version") == "v1.34.2" for m in v["mds"]))
        self.check("upgrade: Cluster Available, TopologyReconciled True again",
                   cond_true(v["cluster"], "Available") and cond_true(v["cluster"], "TopologyReconciled"))

    def scenario_cp_scale(self):
        name = "kube-s1"
        t = time.monotonic()
        v = self.view(name)
        cps = sorted(v["cp"], key=lambda m: (m["metadata"]["creationTimestamp"],
                                             m["metadata"].get("annotations", {}).get("capi-sim.magnum-rs.dev/created", "")))
        marked = cps[-1]["metadata"]["name"]  # the newest: KCP would otherwise take the oldest
        self.set_annotation("machines", marked, "cluster.x-k8s.io/delete-machine", "true")
        self.set_topology(name, controlPlane={"replicas": 1})
        seen = {"max_deleting": 0, "marked_first": None}

        def down():
            v = self.view(name)
            dying = [m["metadata"]["name"] for m in v["cp"] if g(m, "metadata", "deletionTimestamp")]
            seen["max_deleting"] = max(seen["max_deleting"], len(dying))
            if seen["marked_first"] is None and (dying or len(v["cp"]) < 3):
                seen["marked_first"] = marked in dying or marked not in [m["metadata"]["name"] for m in v["cp"]]
            return self.settled(name, 1, {"md-0": 1, "md-1": 2})
        v = self.wait("control plane at 1", down, interval=0.005)
        self.check("scale control plane 3->1: the marked Machine went first, one Machine at a time, KCP replicas 1",
                   seen["marked_first"] and seen["max_deleting"] <= 1 and g(v["kcp"][0], "status", "replicas") == 1
                   and marked not in [m["metadata"]["name"] for m in v["cp"]])
        self.set_topology(name, controlPlane={"replicas": 3})
        kcp = self.watch_for("KCP ScalingUp", lambda: (lambda k: k if k and g(k, "spec", "replicas") == 3 and
                                                       current(k) and cond_true(k, "ScalingUp") else None)(
            self.api.get("kubeadmcontrolplanes", v["kcp"][0]["metadata"]["name"])))
        self.check("scale control plane 1->3: KCP ScalingUp True (%s), Available stays True" % g(
            cond(kcp, "ScalingUp"), "message"), cond_true(kcp, "Available"))
        self.wait("control plane at 3", lambda: self.settled(name, 3, {"md-0": 1, "md-1": 2}))
        self.check("control plane back at 3 Running Machines", True)
        self.timings["scale control plane 3->1->3"] = time.monotonic() - t

    def scenario_quota(self):
        name = "kube-s1"
        t = time.monotonic()
        self.set_annotation("clusters", name, FAULT, "quota")
        c = self.api.get("clusters", name)
        mds = c["spec"]["topology"]["workers"]["machineDeployments"]
        mds[1]["replicas"] = 3
        self.set_topology(name, workers={"machineDeployments": mds})

        def stuck():
            for osm in self.api.items("openstackmachines", name):
                c = cond(osm, "InstanceReady")
                if g(c, "reason") == "InstanceCreateFailed":
                    return osm
            return None
        osm = self.wait("an OpenStackMachine failing with the quota error", stuck)
        mname = osm["metadata"]["name"]
        ic = cond(osm, "InstanceReady")
        self.check("quota: OpenStackMachine %s InstanceReady False, InstanceCreateFailed, severity Error, quota message"
                   % mname, ic["status"] == "False" and ic.get("severity") == "Error" and ic.get("message") == QUOTA
                   and g(osm, "status", "ready") is False and cond(osm, "Ready").get("severity") == "Error")
        m = self.wait("the Machine showing it", lambda: (lambda m: m if g(cond(m, "InfrastructureReady"), "message")
                                                         == QUOTA else None)(self.api.get("machines", mname)))
        ir = cond(m, "InfrastructureReady")
        ir1 = cond(m, "InfrastructureReady", "deprecated.v1beta1.conditions")
        self.check("quota: Machine InfrastructureReady False with the message (v1beta1 copy severity Error)",
                   ir["status"] == "False" and ir1 and ir1.get("severity") == "Error" and ir1.get("message") == QUOTA
                   and g(m, "status", "phase") == "Provisioning")
        cl = self.wait("WorkerMachinesReady naming it", lambda: (lambda c: c if mname in (g(cond(
            c, "WorkerMachinesReady"), "message") or "") and QUOTA in g(cond(c, "WorkerMachinesReady"), "message")
            else None)(self.api.get("clusters", name)))
        wm = cond(cl, "WorkerMachinesReady")
        self.check("quota: Cluster WorkerMachinesReady False naming %s and the quota message" % mname,
                   wm["status"] == "False" and QUOTA in wm["message"])
        time.sleep(self.args.step * 6)
        v = self.view(name)
        others = [x for x in v["machines"] if x["metadata"]["name"] != mname]
        self.check("quota: it stays stuck while the others are Running",
                   g(self.api.get("machines", mname), "status", "phase") == "Provisioning" and
                   all(g(x, "status", "phase") == "Running" for x in others))
        self.api.merge("clusters", name, {"metadata": {"annotations": {FAULT: None}}})
        v = self.wait("the machine recovering", lambda: self.settled(name, 3, {"md-0": 1, "md-1": 3}))
        self.check("quota: annotation removed -> %s Running, Cluster Available" % mname,
                   any(x["metadata"]["name"] == mname and g(x, "status", "phase") == "Running" for x in v["machines"]))
        self.timings["quota fault and recovery"] = time.monotonic() - t

    def scenario_stall_and_block(self):
        name = "kube-s2"
        t = time.monotonic()
        self.api.ok("POST", path("clusters"), self.cluster_v2(name, "v1.33.1", 1, [self.md("md-0", 1)],
                                                              {FAULT: "stall", STEP: "0.05"}))
        self.wait("OpenStackCluster created", lambda: self.api.items("openstackclusters", name))
        time.sleep(max(1.0, self.args.step * 8))
        v = self.view(name)
        c = v["cluster"]
        no_error = not any(x.get("severity") == "Error" for o in v["osc"] + [c]
                           for x in (g(o, "status", "conditions", default=[]) or []) +
                           (g(o, "status", "deprecated", "v1beta1", "conditions", default=[]) or []))
        self.check("stall: OpenStackCluster exists, no Machines, Cluster not Available, no failure signal",
                   v["osc"] and not v["machines"] and not cond_true(c, "Available") and
                   not g(v["osc"][0], "status", "failureReason") and no_error and g(c, "status", "phase") != "Failed")
        self.api.merge("clusters", name, {"metadata": {"annotations": {FAULT: "delete-blocked"}}})
        self.wait("kube-s2 Available after the stall ends", lambda: self.settled(name, 1, {"md-0": 1}))
        self.check("stall: annotation replaced -> the cluster goes on to Available (step 0.05 s)", True)
        self.timings["stall then create 1+1 at 0.05 s"] = time.monotonic() - t
        t = time.monotonic()
        self.api.ok("DELETE", path("clusters", name=name))

        def blocked():
            v = self.view(name)
            c = v["cluster"]
            if not c or v["machines"] or v["kcp"] or v["mds"] or len(v["osc"]) != 1:
                return None
            r = cond(v["osc"][0], "Ready")
            d = cond(c, "Deleting")
            if g(r, "reason") == "DeletionFailed" and g(d, "status") == "True" and \
                    v["osc"][0]["metadata"]["name"] in g(d, "message", default=""):
                return v
            return None
        v = self.wait("deletion blocked on the OpenStackCluster", blocked)
        d = cond(v["cluster"], "Deleting")
        self.check("delete-blocked: only the OpenStackCluster is left, Ready False DeletionFailed (%s)" %
                   cond(v["osc"][0], "Ready").get("message"), True)
        self.check("delete-blocked: Cluster Deleting True %s naming it, phase Deleting" % d["reason"],
                   d["reason"] == "WaitingForInfrastructureDeletion" and g(v["cluster"], "status", "phase") == "Deleting")
        time.sleep(0.5)
        self.check("delete-blocked: still there after 10 more steps", self.api.get("clusters", name) is not None and
                   len(self.api.items("openstackclusters", name)) == 1)
        self.api.merge("clusters", name, {"metadata": {"annotations": {FAULT: None}}})
        self.wait("kube-s2 gone", lambda: self.api.get("clusters", name) is None)
        left = self.leftovers(name)
        self.check("delete-blocked: annotation removed -> the Cluster and everything of it gone", not left)
        self.timings["blocked delete then delete"] = time.monotonic() - t

    def leftovers(self, name):
        out = []
        for kind in ("machinedeployments", "machines", "kubeadmcontrolplanes"):
            out += [kind + "/" + o["metadata"]["name"] for o in self.api.items(kind, name)]
            out += [kind + "/" + o["metadata"]["name"] for o in self.api.items(kind, name, "v1beta1")]
        for kind in ("openstackclusters", "openstackmachines", "openstackmachinetemplates"):
            out += [kind + "/" + o["metadata"]["name"] for o in self.api.items(kind, name)]
        return sorted(set(out))

    def scenario_infra_failed(self):
        name = "kube-s4"
        t = time.monotonic()
        self.api.ok("POST", path("clusters"), self.cluster_v2(name, "v1.33.1", 1, [],
                                                              {FAULT: "infra-failed", STEP: "0.05"}))

        def failed():
            osc = self.api.items("openstackclusters", name)
            c = self.api.get("clusters", name)
            if osc and g(osc[0], "status", "failureReason") and g(c, "status", "phase") == "Failed":
                return osc[0], c
            return None
        osc, c = self.wait("OpenStackCluster failed", failed)
        r = cond(osc, "Ready")
        self.check("infra-failed: OpenStackCluster failureReason %s, failureMessage %r, Ready False severity Error" % (
            g(osc, "status", "failureReason"), g(osc, "status", "failureMessage")),
            "router" in g(osc, "status", "failureMessage", default="") and r["status"] == "False" and
            r.get("severity") == "Error")
        ir = cond(c, "InfrastructureReady")
        self.check("infra-failed: Cluster phase Failed, InfrastructureReady False with the message, v1beta1 "
                   "failureReason kept under deprecated",
                   ir["status"] == "False" and "router" in ir["message"] and
                   g(c, "status", "deprecated", "v1beta1", "failureReason") == "CreateError")
        self.api.merge("clusters", name, {"metadata": {"annotations": {FAULT: None}}})
        self.wait("kube-s4 Available", lambda: self.settled(name, 1, {}))
        c = self.api.get("clusters", name)
        self.check("infra-failed: annotation removed -> failure cleared, cluster Available, WorkersAvailable NoWorkers",
                   not g(c, "status", "deprecated", "v1beta1", "failureReason") and
                   g(cond(c, "WorkersAvailable"), "reason") == "NoWorkers")
        self.api.ok("DELETE", path("clusters", name=name))
        self.wait("kube-s4 gone", lambda: self.api.get("clusters", name) is None and not self.leftovers(name))
        self.timings["infra-failed, recovery, delete"] = time.monotonic() - t

    def scenario_v1beta1(self):
        name = "kube-s3"
        t = time.monotonic()
        body = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                "metadata": {"name": name, "namespace": NS, "labels": {"cluster-uuid": "uuid-s3"},
                             "annotations": {STEP: "0.05"}},
                "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.100.0.0/16"]},
                                            "services": {"cidrBlocks": ["10.254.0.0/16"]},
                                            "serviceDomain": "cluster.local"},
                         "topology": {"class": "magnum-v0-38-1", "version": "v1.31.1",
                                      "controlPlane": {"replicas": 1},
                                      "workers": {"machineDeployments": [
                                          {"class": "default-worker", "name": "default-worker", "replicas": 2}]},
                                      "variables": [{"name": "imageUUID", "value": "3b0bc7e4-7b3a-4f2e-9e5b-4c6d7e8f9a0b"},
                                                    {"name": "flavor", "value": "m1.medium"}]}}}
        self.api.ok("POST", path("clusters", "v1beta1"), body)

        def ready():
            c = self.api.get("clusters", name, "v1beta1")
            if not c or not all(cond_true(c, t) for t in ("Ready", "ControlPlaneReady", "InfrastructureReady")):
                return None
            kcp = self.api.items("kubeadmcontrolplanes", name, "v1beta1")
            mds = self.api.items("machinedeployments", name, "v1beta1")
            ms = self.api.items("machines", name, "v1beta1")
            if len(kcp) != 1 or g(kcp[0], "status", "ready") is not True or len(mds) != 1 or \
                    g(mds[0], "status", "phase") != "Running" or len(ms) != 3 or \
                    any(g(m, "status", "phase") != "Running" for m in ms) or not current(c) or not current(mds[0]):
                return None
            again = self.api.get("clusters", name, "v1beta1")
            if g(again, "metadata", "resourceVersion") != g(c, "metadata", "resourceVersion") or \
                    not cond_true(c, "Available", "v1beta2.conditions"):
                return None
            return c, kcp[0], mds[0], ms
        c, kcp, md, ms = self.wait("v1beta1 cluster Ready", ready)
        self.timings["v1beta1 create 1+2"] = time.monotonic() - t
        self.check("v1beta1 cluster: Ready, ControlPlaneReady, InfrastructureReady True (severity-style conditions), "
                   "v1beta2 conditions under status.v1beta2",
                   cond_true(c, "Available", "v1beta2.conditions") and "deprecated" not in c["status"] and
                   g(c, "status", "infrastructureReady") is True and g(c, "status", "controlPlaneReady") is True and
                   g(c, "status", "phase") == "Provisioned")
        self.check("v1beta1 cluster: spec refs with apiVersion, endpoint set",
                   g(c, "spec", "infrastructureRef", "apiVersion") == "infrastructure.cluster.x-k8s.io/v1beta1" and
                   g(c, "spec", "controlPlaneRef", "apiVersion") == "controlplane.cluster.x-k8s.io/v1beta1" and
                   str(g(c, "spec", "controlPlaneEndpoint", "host", default="")).startswith("192.0.2."))
        self.check("v1beta1 KCP: ready, initialized, replicas = updatedReplicas = readyReplicas = 1, version",
                   g(kcp, "status", "initialized") is True and g(kcp, "status", "replicas") == 1 and
                   g(kcp, "status", "updatedReplicas") == 1 and g(kcp, "status", "readyReplicas") == 1 and
                   g(kcp, "status", "unavailableReplicas") == 0 and g(kcp, "status", "version") == "v1.31.1" and
                   cond_true(kcp, "Ready") and cond_true(kcp, "Available") and
                   g(kcp, "status", "v1beta2", "upToDateReplicas") == 1 and
                   g(kcp, "spec", "machineTemplate", "infrastructureRef", "apiVersion") ==
                   "infrastructure.cluster.x-k8s.io/v1beta1")
        self.check("v1beta1 MD: phase Running, replicas/readyReplicas/updatedReplicas/availableReplicas 2, "
                   "Ready/Available True, topology label default-worker",
                   all(g(md, "status", k) == 2 for k in ("replicas", "readyReplicas", "updatedReplicas",
                                                          "availableReplicas")) and
                   cond_true(md, "Ready") and cond_true(md, "Available") and
                   g(md, "metadata", "labels", "topology.cluster.x-k8s.io/deployment-name") == "default-worker")
        self.check("v1beta1 Machines: bootstrapReady, infrastructureReady, nodeRef kind Node, Ready/NodeHealthy True, "
                   "refs with apiVersion",
                   all(g(m, "status", "bootstrapReady") is True and g(m, "status", "infrastructureReady") is True and
                       g(m, "status", "nodeRef", "kind") == "Node" and cond_true(m, "Ready") and
                       cond_true(m, "NodeHealthy") and cond_true(m, "InfrastructureReady") and
                       g(m, "spec", "infrastructureRef", "apiVersion") == "infrastructure.cluster.x-k8s.io/v1beta1"
                       for m in ms))
        osm = self.api.items("openstackmachines", name)
        self.check("v1beta1 cluster: imageUUID variable -> OpenStackMachine spec.image.id",
                   osm and all(g(o, "spec", "image") == {"id": "3b0bc7e4-7b3a-4f2e-9e5b-4c6d7e8f9a0b"} for o in osm))
        # Scale the v1beta1 MD, then delete the cluster.
        c = self.api.get("clusters", name, "v1beta1")
        mds = c["spec"]["topology"]["workers"]["machineDeployments"]
        mds[0]["replicas"] = 1
        self.api.merge("clusters", name, {"spec": {"topology": {"workers": {"machineDeployments": mds}}}}, "v1beta1")
        self.wait("v1beta1 MD at 1", lambda: (lambda m: m if m and g(m[0], "status", "replicas") == 1 and
                                             g(m[0], "status", "phase") == "Running" and current(m[0]) else None)(
            self.api.items("machinedeployments", name, "v1beta1")))
        self.check("v1beta1 MD scaled 2->1 (phase Running, observedGeneration current)", True)
        self.api.ok("DELETE", path("clusters", "v1beta1", name))
        self.wait("kube-s3 gone", lambda: self.api.get("clusters", name, "v1beta1") is None and not self.leftovers(name))
        self.check("v1beta1 cluster deleted with everything of it", True)
        self.timings["v1beta1 create, scale, delete"] = time.monotonic() - t

    def scenario_robustness(self):
        """Injected 5xx and 409s on the controller's writes, dropped watch streams and a compaction
        (410 Gone): the controller carries on."""
        api = self.api
        name = "kube-s1"
        t = time.monotonic()
        api.ok("POST", "/_stand-in/faults", {"verb": "PATCH", "path_regex": "/status", "status": 503, "count": 4})
        api.ok("POST", "/_stand-in/faults", {"verb": "PATCH", "path_regex": "/machines/", "status": 409, "count": 2,
                                             "reason": "Conflict"})
        api.ok("POST", "/_stand-in/faults", {"verb": "POST", "path_regex": "/machines", "status": 500, "count": 1})
        c = api.get("clusters", name)
        mds = c["spec"]["topology"]["workers"]["machineDeployments"]
        mds[0]["replicas"] = 2
        self.set_topology(name, workers={"machineDeployments": mds})
        time.sleep(0.1)
        api.ok("POST", "/_stand-in/close-watches", {"mode": "abort"})
        api.ok("POST", "/_stand-in/compact", {})
        time.sleep(0.1)
        api.ok("POST", "/_stand-in/close-watches", {"mode": "end"})
        self.wait("kube-s1 settled after the faults", lambda: self.settled(name, 3, {"md-0": 2, "md-1": 3}))
        faults = api.ok("GET", "/_stand-in/faults").get("faults", [])
        self.check("robustness: 503s, 409s and a 500 injected, watches dropped and compacted (410): md-0 still "
                   "scaled to 2 (%d injected faults left unused)" % len(faults), True)
        self.timings["robustness"] = time.monotonic() - t

    def scenario_delete(self):
        name = "kube-s1"
        t = time.monotonic()
        before = self.view(name)
        self.api.ok("DELETE", path("clusters", name=name))
        def cl_deleting():
            c = self.api.get("clusters", name)
            if c is None:
                return "gone"
            return c if cond_true(c, "Deleting") else None
        c = self.watch_for("Deleting", cl_deleting)
        self.check("deletion: Cluster phase %s, Deleting True (%s: %s)" % (
            g(c, "status", "phase"), g(cond(c, "Deleting"), "reason"),
            g(cond(c, "Deleting"), "message", default="").replace("\n", " ")),
            isinstance(c, dict) and g(c, "status", "phase") == "Deleting")
        order = []

        def gone():
            v = self.view(name)
            stage = ("workers" if v["mds"] or v["workers"] else "control plane" if v["kcp"] or v["cp"] else
                     "infrastructure" if v["osc"] else "cluster" if v["cluster"] else "gone")
            if not order or order[-1] != stage:
                order.append(stage)
            return v["cluster"] is None
        self.wait("kube-s1 gone", gone, interval=0.005)
        self.timings["delete 3 cp + 3 workers"] = time.monotonic() - t
        self.check("deletion order: %s" % " -> ".join(order),
                   [s for s in order if s != "gone"] == [s for s in ("workers", "control plane", "infrastructure",
                                                                     "cluster") if s in order])
        left = self.leftovers(name)
        n = sum(len(before[k]) for k in ("kcp", "mds", "machines", "osc", "osm", "osmt"))
        self.check("deletion: Cluster and all %d objects of it gone" % n, not left)

    def scenario_require_clusterclass(self):
        d = tempfile.mkdtemp(prefix="capi-sim-selftest-cc-")
        self.dirs.append(d)
        api = self.start(d, ["--require-clusterclass"])
        try:
            name = "kube-cc"
            api.ok("POST", path("clusters"), self.cluster_v2(name, "v1.33.1", 1, [], {STEP: "0.05"}))

            def refused():
                c = api.get("clusters", name)
                tr = cond(c, "TopologyReconciled")
                return c if g(tr, "reason") == "ClusterClassNotReconciled" and current(c) else None
            c = self.wait("TopologyReconciled False", refused)
            tr = cond(c, "TopologyReconciled")
            self.check("--require-clusterclass: missing ClusterClass -> TopologyReconciled False "
                       "ClusterClassNotReconciled (%s), nothing built" % tr["message"],
                       tr["status"] == "False" and "magnum-v1" in tr["message"] and
                       not api.items("openstackclusters", name))
            cc = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
                  "metadata": {"name": "magnum-v1", "namespace": NS},
                  "spec": {"infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                              "kind": "OpenStackClusterTemplate", "name": "magnum-v1"}},
                           "controlPlane": {"templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                                                            "kind": "KubeadmControlPlaneTemplate", "name": "magnum-v1"}}}}
            api.ok("POST", path("clusterclasses"), cc)
            self.wait("built once the ClusterClass exists",
                      lambda: (lambda c: c if cond_true(c, "Available") else None)(api.get("clusters", name)))
            self.check("--require-clusterclass: ClusterClass created -> the cluster is built and Available", True)
        finally:
            problems = self.log_problems(d)
            self.stop(d)
        self.check("--require-clusterclass run: no rejected write in the controller log", not problems)

    def cpu(self, d, name):
        """CPU seconds (user+system) of the process start.sh wrote DIR/<name>.pid for."""
        try:
            pid = open(os.path.join(d, name + ".pid")).read().strip()
            f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")

    def bench(self, n):
        """n clusters of 3 control-plane + 2x2 workers at once, at the given step."""
        print("# bench: %d clusters (3 cp + 2x2 workers each), step %.2fs" % (n, self.args.step), flush=True)
        self.api = api = self.start(self.dir)
        try:
            names = ["kube-b%03d" % i for i in range(n)]
            c0, s0 = self.cpu(self.dir, "capi_sim"), self.cpu(self.dir, "apiserver")
            t = time.monotonic()
            for nm in names:
                api.ok("POST", path("clusters"), self.cluster_v2(nm, "v1.33.1", 3, [self.md("md-0", 2), self.md("md-1", 2)]))
            t_post = time.monotonic() - t

            def all_up():
                cls = api.items("clusters")
                ms = api.items("machines")
                ok = [c for c in cls if cond_true(c, "Available") and current(c) and
                      g(c, "status", "controlPlane", "readyReplicas") == 3 and
                      g(c, "status", "workers", "readyReplicas") == 4]
                running = sum(1 for m in ms if g(m, "status", "phase") == "Running")
                self.progress = "%d/%d clusters Available, %d/%d machines Running" % (len(ok), n, running, 7 * n)
                return len(ok) == n and running == 7 * n
            last = [0.0]

            def report():
                r = all_up()
                if time.monotonic() - last[0] > 5:
                    print("#   %5.1fs %s" % (time.monotonic() - t, self.progress), flush=True)
                    last[0] = time.monotonic()
                return r
            self.wait("all clusters Available", report, timeout=self.args.timeout * 20, interval=2.0)
            t_up = time.monotonic() - t
            c1, s1 = self.cpu(self.dir, "capi_sim"), self.cpu(self.dir, "apiserver")
            self.check("bench: %d clusters (%d machines) Available in %.1f s (POSTs %.1f s); CPU controller %.1f s, "
                       "stand-in %.1f s" % (n, 7 * n, t_up, t_post, c1 - c0, s1 - s0), True)
            time.sleep(10)
            c2, s2 = self.cpu(self.dir, "capi_sim"), self.cpu(self.dir, "apiserver")
            self.check("bench: settled, 10 s idle: CPU controller %.2f s, stand-in %.2f s" % (c2 - c1, s2 - s1), True)
            t = time.monotonic()
            for nm in names:
                api.ok("DELETE", path("clusters", name=nm))
            self.wait("all gone", lambda: not api.items("clusters") and not api.items("machines") and
                      not api.items("openstackmachines"), timeout=self.args.timeout * 20, interval=2.0)
            c3, s3 = self.cpu(self.dir, "capi_sim"), self.cpu(self.dir, "apiserver")
            self.check("bench: all deleted in %.1f s; CPU controller %.1f s, stand-in %.1f s" % (
                time.monotonic() - t, c3 - c2, s3 - s2), True)
            problems = self.log_problems(self.dir)
            self.check("bench: no rejected write, no failed reconcile", not problems)
        finally:
            self.stop(self.dir)
        print("sim selftest: %d checks passed" % self.n, flush=True)

    def run(self):
        if self.args.bench:
            return self.bench(self.args.bench)
        t0 = time.monotonic()
        self.timings = {}
        crds = os.environ.get("MAGNUM_TEST_CAPI_CRDS")
        print("# capi_sim self-test: step %.3fs, CRD validation %s, dir %s" % (
            self.args.step, "off (%s)" % crds if crds and not os.path.isdir(crds) else "on", self.dir), flush=True)
        # The ClusterClass patch engine (no server needed).
        import patches_selftest
        self.check("topology_patches self-test (variables, enabledIf, templates, JSON patches)",
                   patches_selftest.main() == 0)
        self.api = self.start(self.dir)
        try:
            self.scenario_create()
            self.scenario_scale()
            self.scenario_add_remove_md()
            self.scenario_upgrade()
            self.scenario_cp_scale()
            self.scenario_quota()
            self.scenario_robustness()
            self.scenario_stall_and_block()
            self.scenario_infra_failed()
            self.scenario_v1beta1()
            self.scenario_delete()
            problems = self.log_problems(self.dir)
            self.check("controller log: no rejected write, no failed reconcile%s" % (
                "" if not problems else ": " + problems[0]), not problems)
        except Failed:
            tail = open(os.path.join(self.dir, "capi_sim.log"), encoding="utf-8", errors="replace").read()[-4000:]
            print("# end of capi_sim.log:\n" + "\n".join("#   " + ln for ln in tail.splitlines()), flush=True)
            raise
        finally:
            self.stop(self.dir)
        if not self.args.skip_clusterclass:
            self.scenario_require_clusterclass()
        total = time.monotonic() - t0
        for k, v in self.timings.items():
            print("# %-36s %6.2f s" % (k, v))
        print("# total %.1f s" % total)
        print("sim selftest: %d checks passed" % self.n, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--step", type=float, default=0.1, help="controller step (CAPI_SIM_STEP_SECONDS), default 0.1")
    p.add_argument("--timeout", type=float, default=60.0, help="limit of each wait, default 60 s")
    p.add_argument("--keep", action="store_true", help="keep the temporary directories (logs)")
    p.add_argument("--skip-clusterclass", action="store_true", help="skip the --require-clusterclass run")
    p.add_argument("--bench", type=int, default=0, metavar="N",
                   help="instead of the scenarios: N clusters at once (use with --step 0.5)")
    args = p.parse_args()
    st = SelfTest(args)
    code = 0
    try:
        st.run()
    except Failed as e:
        print("not ok - %s" % e, flush=True)
        code = 1
    finally:
        for d in st.dirs:
            if args.keep or code:
                print("# kept %s" % d)
            else:
                shutil.rmtree(d, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
