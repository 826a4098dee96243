#!/usr/bin/env python3
"""Kubernetes API server stand-in for the magnum-rs tests.

An in-memory imitation of the kube-apiserver's HTTPS wire behaviour for the Cluster API and
Cluster API Provider OpenStack custom resources and a few core kinds, written from the public
API conventions because no real API server can be installed on the test machines. README.md
beside this file says what it implements, what it does not, and how to run it; start.sh is the
way to start it.

Nothing here is Kubernetes code. State lives in memory only and is lost when the process ends.
"""

import argparse
import base64
import binascii
import datetime
import glob
import heapq
import http.server
import ipaddress
import itertools
import json
import os
import queue
import random
import re
import select
import signal
import socket
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
import uuid

try:
    import yaml
    _YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # the venv has it; a bare interpreter can still serve JSON
    yaml = None
    _YAML_LOADER = None

SERVER_NAME = "magnum-rs-kube-stand-in"
K8S_VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.0+magnum-rs-stand-in"}
MAX_BODY = 3 * 1024 * 1024
DEFAULT_WATCH_TIMEOUT = 1800

# ---------------------------------------------------------------------------------------------
# small helpers


def jcopy(v):
    """Deep copy of JSON data (faster than copy.deepcopy for dicts of scalars)."""
    return json.loads(json.dumps(v))


def dumps(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()


def now_ts():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def show(v):
    """A value as an error message shows it: scalars as JSON, containers by type."""
    if isinstance(v, (dict, list)):
        return '"%s"' % go_type(v)
    return json.dumps(v)


# ---------------------------------------------------------------------------------------------
# errors: every one is answered as a metav1 Status


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None, close=False):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or []
        self.close = close

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason}
        if self.details is not None:
            st["details"] = self.details
        st["code"] = self.code
        return st


def _details(rt, name, kind=None):
    d = {}
    if name:
        d["name"] = name
    if rt is not None and rt.group:
        d["group"] = rt.group
    if rt is not None or kind:
        d["kind"] = kind or rt.plural
    return d


def not_found(rt, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (rt.qualified, name), _details(rt, name))


def ns_not_found(ns):
    return ApiError(404, "NotFound", 'namespaces "%s" not found' % ns, {"name": ns, "kind": "namespaces"})


def no_resource():
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(rt, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (rt.qualified, name),
                    _details(rt, name))


def conflict(rt, name, why="the object has been modified; please apply your changes to the "
                            "latest version and try again"):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (rt.qualified, name, why), _details(rt, name))


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource", {})


def unsupported_media(ctype, accepted):
    return ApiError(415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format (%s); accepted media types "
                    "include: %s" % (ctype or "none", ", ".join(accepted)), {})


def invalid(rt, name, errors):
    """errors: [(reason, field, message)] as the validators collect them."""
    parts = ["%s: %s" % (f, m) if f else m for (_, f, m) in errors]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = _details(rt, name, rt.kind)
    details["causes"] = [{"reason": r, "message": m, "field": f} for (r, f, m) in errors]
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (rt.qualified_kind, name, summary),
                    details)


# ---------------------------------------------------------------------------------------------
# resource types


class Version:
    def __init__(self, name, *, storage=False, deprecated=False, deprecation_warning=None,
                 schema=None, status=False, scale=None, cel=0):
        self.name = name
        self.storage = storage
        self.deprecated = deprecated
        self.deprecation_warning = deprecation_warning
        self.schema = schema          # openAPIV3Schema, or None (not validated)
        self.status = status          # has a status subresource
        self.scale = scale            # {specReplicasPath, statusReplicasPath, labelSelectorPath}
        self.cel = cel                # x-kubernetes-validations rules counted, not evaluated
        self.merge_root = None        # schema used by server-side apply (metadata made explicit)


class ResourceType:
    def __init__(self, group, kind, plural, singular, namespaced, versions, *, crd,
                 short_names=(), categories=(), extra_fields=()):
        self.group = group
        self.kind = kind
        self.plural = plural
        self.singular = singular
        self.namespaced = namespaced
        self.versions = {v.name: v for v in versions}
        self.crd = crd
        self.short_names = list(short_names)
        self.categories = list(categories)
        self.extra_fields = set(extra_fields)
        self.key = (group, plural)
        self.qualified = "%s.%s" % (plural, group) if group else plural
        self.qualified_kind = "%s.%s" % (kind, group) if group else kind
        self.list_kind = kind + "List"
        for v in versions:
            v.merge_root = make_merge_root(v.schema)

    def gv(self, version):
        return "%s/%s" % (self.group, version) if self.group else version

    def storage_version(self):
        for v in self.versions.values():
            if v.storage:
                return v.name
        return sorted(self.versions, key=version_key)[0]


def version_key(v):
    """Kubernetes' version priority: GA before beta before alpha, higher numbers first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if not m:
        return (3, 0, 0, v)
    stab = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stab, -int(m.group(1)), -int(m.group(3) or 0), v)


# The Cluster API / CAPO kinds of shared/fixtures/capi-crds, for when that folder is absent:
# (group, kind, plural, versions, deprecated versions, subresources)
_CAPI = ("v1beta1", "v1beta2")
FALLBACK_CRDS = [
    ("cluster.x-k8s.io", "Cluster", "clusters", _CAPI, "status"),
    ("cluster.x-k8s.io", "ClusterClass", "clusterclasses", _CAPI, "status"),
    ("cluster.x-k8s.io", "MachineDeployment", "machinedeployments", _CAPI, "status scale"),
    ("cluster.x-k8s.io", "MachineSet", "machinesets", _CAPI, "status scale"),
    ("cluster.x-k8s.io", "Machine", "machines", _CAPI, "status"),
    ("cluster.x-k8s.io", "MachineHealthCheck", "machinehealthchecks", _CAPI, "status"),
    ("addons.cluster.x-k8s.io", "ClusterResourceSet", "clusterresourcesets", _CAPI, "status"),
    # CAAPH's, which the driver's add-ons need.
    ("addons.cluster.x-k8s.io", "HelmChartProxy", "helmchartproxies", ("v1alpha1",), "status"),
    ("addons.cluster.x-k8s.io", "HelmReleaseProxy", "helmreleaseproxies", ("v1alpha1",),
     "status"),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane", "kubeadmcontrolplanes", _CAPI,
     "status scale"),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlaneTemplate",
     "kubeadmcontrolplanetemplates", _CAPI, ""),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kubeadmconfigs", _CAPI, "status"),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate", "kubeadmconfigtemplates", _CAPI, ""),
    ("infrastructure.cluster.x-k8s.io", "OpenStackCluster", "openstackclusters", ("v1beta1",),
     "status"),
    ("infrastructure.cluster.x-k8s.io", "OpenStackClusterTemplate", "openstackclustertemplates",
     ("v1beta1",), ""),
    ("infrastructure.cluster.x-k8s.io", "OpenStackMachine", "openstackmachines", ("v1beta1",),
     "status"),
    ("infrastructure.cluster.x-k8s.io", "OpenStackMachineTemplate", "openstackmachinetemplates",
     ("v1beta1",), "status"),
]
_SCALE = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
          "labelSelectorPath": ".status.selector"}


def fallback_crds():
    out = []
    for group, kind, plural, versions, subs in FALLBACK_CRDS:
        vs = []
        for v in versions:
            capi_old = len(versions) == 2 and v == "v1beta1"
            vs.append(Version(v, storage=(v == versions[-1]), deprecated=capi_old,
                              status="status" in subs, scale=_SCALE if "scale" in subs else None))
        out.append(ResourceType(group, kind, plural, kind.lower(), True, vs, crd=True,
                                categories=["cluster-api"]))
    return out


def builtin_types():
    return [
        ResourceType("", "Namespace", "namespaces", "namespace", False,
                     [Version("v1", storage=True, status=True)], crd=False, short_names=["ns"],
                     extra_fields=["status.phase"]),
        ResourceType("", "Secret", "secrets", "secret", True, [Version("v1", storage=True)],
                     crd=False, extra_fields=["type"]),
        ResourceType("", "ConfigMap", "configmaps", "configmap", True,
                     [Version("v1", storage=True)], crd=False, short_names=["cm"]),
        ResourceType("", "Event", "events", "event", True, [Version("v1", storage=True)],
                     crd=False, short_names=["ev"],
                     extra_fields=["involvedObject.kind", "involvedObject.namespace",
                                   "involvedObject.name", "involvedObject.uid",
                                   "involvedObject.apiVersion", "involvedObject.resourceVersion",
                                   "involvedObject.fieldPath", "reason", "reportingComponent",
                                   "source", "type"]),
        ResourceType("coordination.k8s.io", "Lease", "leases", "lease", True,
                     [Version("v1", storage=True)], crd=False),
        # What the driver runs in the management cluster itself (the cluster autoscaler):
        # stored with their top-level fields checked, their specs not validated.
        ResourceType("apps", "Deployment", "deployments", "deployment", True,
                     [Version("v1", storage=True, status=True, scale={
                         "specReplicasPath": ".spec.replicas",
                         "statusReplicasPath": ".status.replicas",
                         "labelSelectorPath": ".status.selector"})],
                     crd=False, short_names=["deploy"]),
        ResourceType("", "ServiceAccount", "serviceaccounts", "serviceaccount", True,
                     [Version("v1", storage=True)], crd=False, short_names=["sa"]),
        ResourceType("rbac.authorization.k8s.io", "Role", "roles", "role", True,
                     [Version("v1", storage=True)], crd=False),
        ResourceType("rbac.authorization.k8s.io", "RoleBinding", "rolebindings", "rolebinding",
                     True, [Version("v1", storage=True)], crd=False),
    ]


# Top-level fields the built-in kinds have; anything else is pruned with a warning.
BUILTIN_FIELDS = {
    "Namespace": {"spec", "status"},
    "Secret": {"data", "stringData", "type", "immutable"},
    "ConfigMap": {"data", "binaryData", "immutable"},
    "Event": {"involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp",
              "count", "type", "eventTime", "series", "action", "related", "reportingComponent",
              "reportingInstance"},
    "Lease": {"spec"},
    "Deployment": {"spec", "status"},
    "ServiceAccount": {"secrets", "imagePullSecrets", "automountServiceAccountToken"},
    "Role": {"rules"},
    "RoleBinding": {"subjects", "roleRef"},
}


def count_cel(node):
    n = 0
    if isinstance(node, dict):
        n += len(node.get("x-kubernetes-validations") or ())
        for v in node.values():
            n += count_cel(v)
    elif isinstance(node, list):
        for v in node:
            n += count_cel(v)
    return n


def load_crds(folder):
    types = []
    files = sorted(glob.glob(os.path.join(folder, "*.yaml")) + glob.glob(os.path.join(folder, "*.yml")))
    for path in files:
        with open(path, encoding="utf-8") as f:
            docs = list(yaml.load_all(f, Loader=_YAML_LOADER))
        for d in docs:
            if not isinstance(d, dict) or d.get("kind") != "CustomResourceDefinition":
                continue
            spec = d["spec"]
            names = spec["names"]
            vs = []
            for v in spec["versions"]:
                if not v.get("served", True):
                    continue
                subs = v.get("subresources") or {}
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                vs.append(Version(v["name"], storage=bool(v.get("storage")),
                                  deprecated=bool(v.get("deprecated")),
                                  deprecation_warning=v.get("deprecationWarning"),
                                  schema=schema, status="status" in subs,
                                  scale=subs.get("scale"), cel=count_cel(schema)))
            types.append(ResourceType(spec["group"], names["kind"], names["plural"],
                                      names.get("singular") or names["kind"].lower(),
                                      spec.get("scope", "Namespaced") == "Namespaced", vs,
                                      crd=True, short_names=names.get("shortNames") or (),
                                      categories=names.get("categories") or ()))
    return types, files


# ---------------------------------------------------------------------------------------------
# selectors

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VAL = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_RE_SET = re.compile(r"(%s)\s+(in|notin)\s*\((.*)\)" % _KEY)
_RE_EQ = re.compile(r"(%s)\s*(==|=|!=)\s*(%s)" % (_KEY, _VAL))
_RE_CMP = re.compile(r"(%s)\s*(>|<)\s*(-?\d+)" % _KEY)
_RE_NOT = re.compile(r"!\s*(%s)" % _KEY)
_RE_HAS = re.compile(r"(%s)" % _KEY)
_RE_VAL = re.compile(_VAL)


def split_terms(s):
    terms, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return terms


def parse_label_selector(s):
    reqs = []
    if not s or not s.strip():
        return reqs
    for t in split_terms(s):
        t = t.strip()
        m = _RE_SET.fullmatch(t)
        if m:
            vals = [v.strip() for v in m.group(3).split(",")]
            if not vals or any(not _RE_VAL.fullmatch(v) for v in vals):
                raise bad_request("unable to parse requirement: invalid values in %r" % t)
            reqs.append((m.group(2), m.group(1), set(vals)))
            continue
        m = _RE_EQ.fullmatch(t)
        if m:
            reqs.append(("!=" if m.group(2) == "!=" else "=", m.group(1), m.group(3)))
            continue
        m = _RE_CMP.fullmatch(t)
        if m:
            reqs.append((m.group(2), m.group(1), int(m.group(3))))
            continue
        m = _RE_NOT.fullmatch(t)
        if m:
            reqs.append(("!", m.group(1), None))
            continue
        m = _RE_HAS.fullmatch(t)
        if m:
            reqs.append(("exists", m.group(1), None))
            continue
        raise bad_request("unable to parse requirement: %r is not a valid label selector term" % t)
    return reqs


def match_labels(reqs, labels):
    for op, k, v in reqs:
        have = k in labels
        val = labels.get(k)
        if op == "=":
            if not have or val != v:
                return False
        elif op == "!=":
            if have and val == v:
                return False
        elif op == "in":
            if not have or val not in v:
                return False
        elif op == "notin":
            if have and val in v:
                return False
        elif op == "exists":
            if not have:
                return False
        elif op == "!":
            if have:
                return False
        else:
            try:
                n = int(val)
            except (TypeError, ValueError):
                return False
            if (op == ">" and not n > v) or (op == "<" and not n < v):
                return False
    return True


def parse_field_selector(s, rt):
    reqs = []
    if not s or not s.strip():
        return reqs
    for t in s.split(","):
        t = t.strip()
        m = re.fullmatch(r"([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)", t)
        if not m:
            raise bad_request("invalid selector: %r; can't understand %r" % (s, t))
        k = m.group(1)
        if k not in ("metadata.name", "metadata.namespace") and k not in rt.extra_fields:
            raise bad_request('field label not supported: %s' % k)
        reqs.append((m.group(2) == "!=", k, m.group(3)))
    return reqs


def field_value(obj, dotted):
    cur = obj
    for p in dotted.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return ""
    return cur if isinstance(cur, str) else json.dumps(cur)


def match_fields(reqs, obj):
    for neg, k, v in reqs:
        if (field_value(obj, k) == v) == neg:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# metadata and name validation

DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
QNAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"

META_FIELDS = {"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
               "generation", "creationTimestamp", "deletionTimestamp",
               "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
               "finalizers", "managedFields"}


def qualified_name_problem(key):
    if key.count("/") > 1:
        return 'a qualified name has at most one "/"'
    prefix, _, name = key.rpartition("/")
    if "/" in key:
        if not prefix:
            return "the prefix before \"/\" must not be empty"
        if len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix):
            return "the prefix before \"/\" must be a lowercase DNS subdomain of at most 253 characters"
    if not name:
        return "the name part must not be empty"
    if len(name) > 63:
        return "the name part must be at most 63 characters"
    if not QNAME.fullmatch(name):
        return ("the name part may hold only alphanumerics, '-', '_' and '.', and must start "
                "and end with an alphanumeric")
    return None


def name_problem(rt, name):
    if rt.kind == "Namespace":
        if len(name) > 63 or not DNS_LABEL.fullmatch(name):
            return ("must be a lowercase RFC 1123 label of at most 63 characters (lowercase "
                    "alphanumerics or '-', starting and ending with an alphanumeric)")
        return None
    if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
        return ("must be a lowercase RFC 1123 subdomain of at most 253 characters (lowercase "
                "alphanumerics, '-' or '.', starting and ending with an alphanumeric)")
    return None


def validate_meta(rt, meta, errors, unknown):
    """ObjectMeta rules; type errors in metadata are decoding errors (400) as on the real server."""
    for k in list(meta):
        if k not in META_FIELDS:
            unknown.append("metadata." + k)
            del meta[k]
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        errors.append(("FieldValueRequired", "metadata.name", "Required value: name or generateName is required"))
    else:
        p = name_problem(rt, name)
        if p:
            errors.append(("FieldValueInvalid", "metadata.name", "Invalid value: %s: %s" % (json.dumps(name), p)))
    for f in ("labels", "annotations"):
        v = meta.get(f)
        if v is None:
            meta.pop(f, None)
            continue
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            raise bad_request("%s in version \"v1\" cannot be handled: metadata.%s must be a map of "
                              "strings" % (rt.kind, f))
        for k, val in v.items():
            p = qualified_name_problem(k)
            if p:
                errors.append(("FieldValueInvalid", "metadata.%s" % f, "Invalid value: %s: %s" % (json.dumps(k), p)))
            if f == "labels" and (len(val) > 63 or not LABEL_VALUE.fullmatch(val)):
                errors.append(("FieldValueInvalid", "metadata.labels",
                               "Invalid value: %s: a label value is empty or at most 63 "
                               "alphanumerics, '-', '_' or '.', starting and ending with an "
                               "alphanumeric" % json.dumps(val)))
        if f == "annotations" and sum(len(k) + len(x) for k, x in v.items()) > 256 * 1024:
            errors.append(("FieldValueTooLong", "metadata.annotations",
                           "Too long: the annotations may not be more than 262144 bytes"))
    fins = meta.get("finalizers")
    if fins is not None:
        if not isinstance(fins, list) or not all(isinstance(x, str) for x in fins):
            raise bad_request("%s cannot be handled: metadata.finalizers must be a list of strings" % rt.kind)
        for i, fin in enumerate(fins):
            p = qualified_name_problem(fin)
            if p:
                errors.append(("FieldValueInvalid", "metadata.finalizers[%d]" % i, "Invalid value: %s: %s" % (json.dumps(fin), p)))
        if not fins:
            del meta["finalizers"]
    refs = meta.get("ownerReferences")
    if refs is not None:
        if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
            raise bad_request("%s cannot be handled: metadata.ownerReferences must be a list of objects" % rt.kind)
        controllers = 0
        for i, r in enumerate(refs):
            for f in ("apiVersion", "kind", "name", "uid"):
                if not r.get(f):
                    errors.append(("FieldValueRequired" if f != "apiVersion" else "FieldValueInvalid",
                                   "metadata.ownerReferences[%d].%s" % (i, f), "Required value"))
            if r.get("controller"):
                controllers += 1
        if controllers > 1:
            errors.append(("FieldValueInvalid", "metadata.ownerReferences",
                           "Invalid value: only one reference can have controller set to true"))
        if not refs:
            del meta["ownerReferences"]


# ---------------------------------------------------------------------------------------------
# schema validation, pruning and defaulting (openAPIV3Schema of the request's version)

_RE_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_RE_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_PATTERNS = {}


def _pattern(p):
    r = _PATTERNS.get(p)
    if r is None:
        try:
            r = re.compile(p)
        except re.error:
            r = False
        _PATTERNS[p] = r
    return r


def type_ok(v, t):
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "boolean":
        return isinstance(v, bool)
    return True


class SchemaWalker:
    """Walks a value along its schema, pruning unknown fields, dropping nulls of non-nullable
    fields and filling defaults in place, and collecting (reason, field, message) errors."""

    def __init__(self):
        self.errors = []
        self.unknown = []

    def err(self, reason, field, message):
        self.errors.append((reason, field, message))

    def type_err(self, path, v, want):
        self.err("FieldValueTypeInvalid", path, 'Invalid value: "%s": %s in body must be of type %s: "%s"'
                 % (go_type(v), path, want, go_type(v)))

    def walk(self, v, s, path, root=False):
        if v is None:
            if not s.get("nullable"):
                self.type_err(path, v, s.get("type") or "object")
            return v
        if s.get("x-kubernetes-int-or-string"):
            if isinstance(v, bool) or not isinstance(v, (int, str)):
                self.type_err(path, v, "integer,string")
                return v
        else:
            t = s.get("type")
            if t and not type_ok(v, t):
                self.type_err(path, v, t)
                return v
        if isinstance(v, dict):
            self.walk_object(v, s, path, root)
        elif isinstance(v, list):
            self.walk_array(v, s, path)
        else:
            self.scalar_checks(v, s, path)
        if "enum" in s and not any(v == e and type(v) is type(e) for e in s["enum"]):
            self.err("FieldValueNotSupported", path, "Unsupported value: %s: supported values: %s"
                     % (show(v), ", ".join(json.dumps(e) for e in s["enum"])))
        if not s.get("x-kubernetes-int-or-string"):
            self.combinators(v, s, path)
        return v

    def combinators(self, v, s, path):
        def ok(sub):
            w = SchemaWalker()
            w.walk(jcopy(v), sub, path)
            return not w.errors
        for sub in s.get("allOf") or ():
            if not ok(sub):
                self.err("FieldValueInvalid", path, "Invalid value: %s: must validate all the schemas (allOf)" % show(v))
                break
        if s.get("anyOf") and not any(ok(sub) for sub in s["anyOf"]):
            self.err("FieldValueInvalid", path, "Invalid value: %s: must validate at least one schema (anyOf)" % show(v))
        if s.get("oneOf") and sum(1 for sub in s["oneOf"] if ok(sub)) != 1:
            self.err("FieldValueInvalid", path, "Invalid value: %s: must validate one and only one schema (oneOf)" % show(v))
        if s.get("not") and ok(s["not"]):
            self.err("FieldValueInvalid", path, "Invalid value: %s: must not validate the schema (not)" % show(v))

    def walk_object(self, v, s, path, root=False):
        props = s.get("properties") or {}
        addl = s.get("additionalProperties")
        preserve = s.get("x-kubernetes-preserve-unknown-fields")
        embedded = s.get("x-kubernetes-embedded-resource")
        for k in list(v):
            cv = v[k]
            cp = "%s.%s" % (path, k) if path else k
            if root and k in ("apiVersion", "kind", "metadata"):
                continue
            if k in props:
                ps = props[k]
                if cv is None and not ps.get("nullable"):
                    del v[k]
                    continue
                v[k] = self.walk(cv, ps, cp)
            elif isinstance(addl, dict):
                if cv is None and not addl.get("nullable"):
                    del v[k]
                    continue
                v[k] = self.walk(cv, addl, "%s[%s]" % (path, k))
            elif addl is True or preserve:
                continue
            elif embedded and k in ("apiVersion", "kind", "metadata"):
                if k == "metadata" and not isinstance(cv, dict):
                    self.type_err(cp, cv, "object")
                continue
            else:
                self.unknown.append(cp)
                del v[k]
        for k, ps in props.items():
            if k not in v and "default" in ps and not (root and k == "metadata"):
                v[k] = self.walk(jcopy(ps["default"]), ps, "%s.%s" % (path, k) if path else k)
        for r in s.get("required") or ():
            if r not in v:
                self.err("FieldValueRequired", "%s.%s" % (path, r) if path else r, "Required value")
        if embedded:
            for r in ("apiVersion", "kind"):
                if not v.get(r):
                    self.err("FieldValueRequired", "%s.%s" % (path, r), "Required value")
        n = len(v)
        if "maxProperties" in s and n > s["maxProperties"]:
            self.err("FieldValueTooMany", path, "Too many: %d: must have at most %d items" % (n, s["maxProperties"]))
        if "minProperties" in s and n < s["minProperties"]:
            self.err("FieldValueInvalid", path, "Invalid value: %d: %s in body should have at least %d properties"
                     % (n, path, s["minProperties"]))

    def walk_array(self, v, s, path):
        items = s.get("items")
        if isinstance(items, dict):
            for i in range(len(v)):
                v[i] = self.walk(v[i], items, "%s[%d]" % (path, i))
        n = len(v)
        if "maxItems" in s and n > s["maxItems"]:
            self.err("FieldValueTooMany", path, "Too many: %d: must have at most %d items" % (n, s["maxItems"]))
        if "minItems" in s and n < s["minItems"]:
            self.err("FieldValueInvalid", path, "Invalid value: %d: %s in body should have at least %d items"
                     % (n, path, s["minItems"]))
        lt = s.get("x-kubernetes-list-type")
        if lt == "set":
            seen = []
            for i, x in enumerate(v):
                if x in seen:
                    self.err("FieldValueDuplicate", "%s[%d]" % (path, i), "Duplicate value: %s" % show(x))
                seen.append(x)
        elif lt == "map":
            keys = s.get("x-kubernetes-list-map-keys") or ()
            seen = set()
            for i, x in enumerate(v):
                if not isinstance(x, dict):
                    continue
                kv = json.dumps({k: x.get(k) for k in keys}, sort_keys=True)
                if kv in seen:
                    self.err("FieldValueDuplicate", "%s[%d]" % (path, i), "Duplicate value: %s" % kv)
                seen.add(kv)

    def scalar_checks(self, v, s, path):
        if isinstance(v, str):
            n = len(v)
            if "maxLength" in s and n > s["maxLength"]:
                self.err("FieldValueTooLong", path, "Too long: may not be more than %d bytes" % s["maxLength"])
            if "minLength" in s and n < s["minLength"]:
                self.err("FieldValueInvalid", path, "Invalid value: %s: %s in body should be at least %d chars long"
                         % (json.dumps(v), path, s["minLength"]))
            if "pattern" in s:
                r = _pattern(s["pattern"])
                if r and not r.search(v):
                    self.err("FieldValueInvalid", path, "Invalid value: %s: %s in body should match '%s'"
                             % (json.dumps(v), path, s["pattern"]))
            fmt = s.get("format")
            bad = False
            if fmt == "date-time":
                bad = not _RE_DATETIME.fullmatch(v)
            elif fmt == "byte":
                try:
                    base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    bad = True
            elif fmt == "uuid":
                bad = not _RE_UUID.fullmatch(v)
            elif fmt == "ipv4":
                try:
                    ipaddress.IPv4Address(v)
                except ValueError:
                    bad = True
            if bad:
                self.err("FieldValueInvalid", path, "Invalid value: %s: %s in body must be of type %s: %s"
                         % (json.dumps(v), path, fmt, json.dumps(v)))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            if "minimum" in s:
                lo = s["minimum"]
                if v < lo or (s.get("exclusiveMinimum") and v == lo):
                    self.err("FieldValueInvalid", path, "Invalid value: %s: %s in body should be greater than %s%s"
                             % (v, path, "" if s.get("exclusiveMinimum") else "or equal to ", lo))
            if "maximum" in s:
                hi = s["maximum"]
                if v > hi or (s.get("exclusiveMaximum") and v == hi):
                    self.err("FieldValueInvalid", path, "Invalid value: %s: %s in body should be less than %s%s"
                             % (v, path, "" if s.get("exclusiveMaximum") else "or equal to ", hi))
            if s.get("multipleOf") and v % s["multipleOf"]:
                self.err("FieldValueInvalid", path, "Invalid value: %s: %s in body should be a multiple of %s"
                         % (v, path, s["multipleOf"]))
            fmt = s.get("format")
            if isinstance(v, int) and ((fmt == "int32" and not -2**31 <= v < 2**31)
                                       or (fmt == "int64" and not -2**63 <= v < 2**63)):
                self.err("FieldValueInvalid", path, "Invalid value: %s: %s in body must be of type %s" % (v, path, fmt))


# ---------------------------------------------------------------------------------------------
# patches

def merge_patch(target, patch):
    """RFC 7386. Never mutates target; unchanged subtrees are shared with it."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class PatchFailed(Exception):
    pass


def _pointer(path):
    if path == "":
        return []
    if not isinstance(path, str) or not path.startswith("/"):
        raise PatchFailed("invalid JSON pointer %r" % (path,))
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk_to(doc, tokens, path):
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchFailed("path %s does not exist" % path)
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                i = int(t)
            except ValueError:
                raise PatchFailed("path %s: %r is not an array index" % (path, t))
            if not 0 <= i < len(cur):
                raise PatchFailed("path %s: index %d out of range" % (path, i))
            cur = cur[i]
        else:
            raise PatchFailed("path %s does not exist" % path)
    return cur


def _jp_get(doc, path):
    return _walk_to(doc, _pointer(path), path)


def _jp_add(doc, path, value):
    toks = _pointer(path)
    if not toks:
        return value
    parent = _walk_to(doc, toks[:-1], path)
    last = toks[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                i = int(last)
            except ValueError:
                raise PatchFailed("path %s: %r is not an array index" % (path, last))
            if not 0 <= i <= len(parent):
                raise PatchFailed("path %s: index %d out of range" % (path, i))
            parent.insert(i, value)
    else:
        raise PatchFailed("path %s does not exist" % path)
    return doc


def _jp_remove(doc, path):
    toks = _pointer(path)
    if not toks:
        raise PatchFailed("cannot remove the whole document")
    parent = _walk_to(doc, toks[:-1], path)
    last = toks[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed("path %s does not exist" % path)
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            i = int(last)
        except ValueError:
            raise PatchFailed("path %s: %r is not an array index" % (path, last))
        if not 0 <= i < len(parent):
            raise PatchFailed("path %s: index %d out of range" % (path, i))
        return parent.pop(i)
    raise PatchFailed("path %s does not exist" % path)


def json_patch(doc, ops):
    """RFC 6902 on a copy of doc."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a JSON array of operations")
    doc = jcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request("json patch operation %s lacks op or path" % json.dumps(op)[:200])
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise bad_request("json patch %s operation on %s lacks a value" % (kind, path))
        if kind == "add":
            doc = _jp_add(doc, path, jcopy(op["value"]))
        elif kind == "remove":
            _jp_remove(doc, path)
        elif kind == "replace":
            if _pointer(path):
                _jp_get(doc, path)
                _jp_remove(doc, path)
                doc = _jp_add(doc, path, jcopy(op["value"]))
            else:
                doc = jcopy(op["value"])
        elif kind in ("move", "copy"):
            frm = op.get("from")
            if frm is None:
                raise bad_request("json patch %s operation lacks from" % kind)
            val = _jp_get(doc, frm)
            if kind == "move":
                if path.startswith(frm + "/"):
                    raise PatchFailed("cannot move %s into its own child %s" % (frm, path))
                _jp_remove(doc, frm)
            doc = _jp_add(doc, path, jcopy(val))
        elif kind == "test":
            cur = _jp_get(doc, path)
            if cur != op["value"] or type(cur) is not type(op["value"]):
                raise PatchFailed("test operation failed: %s is %s, not %s"
                                  % (path, json.dumps(cur)[:200], json.dumps(op["value"])[:200]))
        else:
            raise bad_request("unknown json patch operation %r" % kind)
    return doc


def _strip_directives(v):
    if isinstance(v, dict):
        return {k: _strip_directives(x) for k, x in v.items() if not k.startswith("$")}
    if isinstance(v, list):
        return [_strip_directives(x) for x in v if not (isinstance(x, dict) and x.get("$patch") == "delete")]
    return v


def strategic_merge(target, patch, path=()):
    """Strategic merge patch for the built-in kinds: a merge patch, except that lists of objects
    merge item by item on their key ('uid' for ownerReferences, else 'name'), metadata.finalizers
    merges as a set, '$patch: delete|replace' and '$deleteFromPrimitiveList/' are honoured and
    other '$' directives ('$setElementOrder', '$retainKeys') ignored."""
    if not isinstance(patch, dict):
        return _strip_directives(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(out.get(f), list) and isinstance(v, list):
                out[f] = [x for x in out[f] if x not in v]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            out.pop(k, None)
            continue
        cur = out.get(k)
        if isinstance(v, list) and isinstance(cur, list):
            out[k] = _smp_list(cur, v, path + (k,))
        elif isinstance(v, dict) and isinstance(cur, dict):
            out[k] = strategic_merge(cur, v, path + (k,))
        else:
            out[k] = _strip_directives(v)
    return out


def _smp_list(cur, patch, path):
    if path == ("metadata", "finalizers"):
        return list(cur) + [x for x in patch if x not in cur]
    key = "uid" if path == ("metadata", "ownerReferences") else "name"
    if patch and all(isinstance(x, dict) and key in x for x in patch) and \
            all(isinstance(x, dict) and key in x for x in cur):
        out = list(cur)
        for item in patch:
            idx = next((i for i, x in enumerate(out) if x.get(key) == item[key]), None)
            if item.get("$patch") == "delete":
                if idx is not None:
                    out.pop(idx)
            elif idx is None:
                out.append(_strip_directives(item))
            else:
                out[idx] = strategic_merge(out[idx], item, path)
        return out
    return _strip_directives(patch)


# ---------------------------------------------------------------------------------------------
# server-side apply helpers
#
# A field path is a tuple of segments in the managedFields notation: 'f:<field>' for an object
# field, 'k:<json of the key fields>' for an item of a map list, 'v:<json>' for a set element,
# and a final '.' marking the existence of a map-list item. flatten() turns a value into
# {path: leaf value}; atomic lists and maps are leaves.

META_MERGE_SCHEMA = {
    "type": "object",
    "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "ownerReferences": {"type": "array", "items": {"type": "object"},
                            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
    },
}
SCHEMALESS = {"x-stand-in-schemaless": True}


def make_merge_root(schema):
    if schema is None:
        return {"x-stand-in-schemaless": True, "properties": {"metadata": META_MERGE_SCHEMA}}
    root = dict(schema)
    props = dict(root.get("properties") or {})
    props["metadata"] = META_MERGE_SCHEMA
    root["properties"] = props
    return root


def s_child(node, key):
    if node is None:
        return None
    props = node.get("properties")
    if props and key in props:
        return props[key]
    addl = node.get("additionalProperties")
    if isinstance(addl, dict):
        return addl
    return None


def s_items(node):
    if node is None:
        return None
    it = node.get("items")
    return it if isinstance(it, dict) else None


def list_kind(node, *lists):
    """('map', keys) | ('set', None) | ('atomic', None) for a list at this schema node."""
    if node is not None and not node.get("x-stand-in-schemaless") and (
            node.get("type") == "array" or "items" in node or "x-kubernetes-list-type" in node):
        lt = node.get("x-kubernetes-list-type")
        if lt == "map":
            return ("map", tuple(node.get("x-kubernetes-list-map-keys") or ("name",)))
        if lt == "set":
            return ("set", None)
        return ("atomic", None)
    items = [x for lst in lists if isinstance(lst, list) for x in lst]
    if items and all(isinstance(x, dict) and "name" in x for x in items):
        return ("map", ("name",))
    return ("atomic", None)


def atomic_map(node):
    return node is not None and node.get("x-kubernetes-map-type") == "atomic"


def item_seg(item, keys):
    return "k:" + json.dumps({k: item.get(k) for k in keys}, separators=(",", ":"), sort_keys=True)


def flatten(v, node, prefix=(), out=None):
    if out is None:
        out = {}
    if isinstance(v, dict) and not atomic_map(node):
        if not v and prefix:
            out[prefix] = {}
        for k, cv in v.items():
            flatten(cv, s_child(node, k), prefix + ("f:" + k,), out)
    elif isinstance(v, list):
        kind, keys = list_kind(node, v)
        if kind == "map" and all(isinstance(x, dict) for x in v):
            it = s_items(node)
            for x in v:
                p = prefix + (item_seg(x, keys),)
                out[p + (".",)] = None
                for k, cv in x.items():
                    flatten(cv, s_child(it, k), p + ("f:" + k,), out)
        elif kind == "set":
            for x in v:
                out[prefix + ("v:" + json.dumps(x, separators=(",", ":"), sort_keys=True),)] = x
        else:
            out[prefix] = v
    elif prefix:
        out[prefix] = v
    return out


def _seg_find(cur, seg):
    """The container and index/key a path segment names inside cur, or None."""
    if seg.startswith("f:"):
        k = seg[2:]
        if isinstance(cur, dict) and k in cur:
            return k
        return None
    if not isinstance(cur, list):
        return None
    if seg.startswith("k:"):
        want = json.loads(seg[2:])
        for i, x in enumerate(cur):
            if isinstance(x, dict) and all(x.get(k) == val for k, val in want.items()):
                return i
        return None
    if seg.startswith("v:"):
        want = json.loads(seg[2:])
        for i, x in enumerate(cur):
            if x == want:
                return i
    return None


def path_get(obj, path):
    cur = obj
    for seg in path:
        if seg == ".":
            break
        idx = _seg_find(cur, seg)
        if idx is None:
            return False, None
        cur = cur[idx]
    return True, cur


def path_remove(obj, path, prune_depth=1):
    """Removes the field (or map-list item when the path ends with '.') in place; parents that
    this empties are removed too, down to prune_depth segments (top-level fields stay)."""
    if path and path[-1] == ".":
        path = path[:-1]
    chain = [obj]
    cur = obj
    idxs = []
    for seg in path:
        idx = _seg_find(cur, seg)
        if idx is None:
            return False
        idxs.append(idx)
        cur = cur[idx]
        chain.append(cur)
    if not idxs:
        return False
    del chain[-2][idxs[-1]]
    for depth in range(len(idxs) - 1, prune_depth - 1, -1):
        c = chain[depth]
        if isinstance(c, dict) and not c and depth > 0:
            del chain[depth - 1][idxs[depth - 1]]
        else:
            break
    return True


def ssa_merge(cur, cfg, node):
    if isinstance(cfg, dict):
        if not isinstance(cur, dict) or atomic_map(node):
            return _drop_nulls(jcopy(cfg))
        out = dict(cur)
        for k, v in cfg.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = ssa_merge(out.get(k), v, s_child(node, k))
        return out
    if isinstance(cfg, list):
        kind, keys = list_kind(node, cfg, cur)
        if kind == "map" and isinstance(cur, list) and all(isinstance(x, dict) for x in cur + cfg):
            out = list(cur)
            it = s_items(node)
            for item in cfg:
                seg = item_seg(item, keys)
                idx = _seg_find(out, seg)
                if idx is None:
                    out.append(_drop_nulls(jcopy(item)))
                else:
                    out[idx] = ssa_merge(out[idx], item, it)
            return out
        if kind == "set" and isinstance(cur, list):
            return list(cur) + [x for x in cfg if x not in cur]
        return jcopy(cfg)
    return cfg


def _drop_nulls(v):
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


def path_text(path):
    out = []
    for seg in path:
        if seg.startswith("f:"):
            out.append("." + seg[2:])
        elif seg.startswith("k:"):
            kv = json.loads(seg[2:])
            out.append("[" + ",".join("%s=%s" % (k, json.dumps(v)) for k, v in kv.items()) + "]")
        elif seg.startswith("v:"):
            out.append("[=%s]" % seg[2:])
    return "".join(out)


def fields_v1(paths):
    tree = {}
    for p in paths:
        cur = tree
        for seg in p:
            cur = cur.setdefault(seg, {})
    return tree


def ssa_view(obj, sub, has_status):
    """The part of an object (or applied configuration) that field management looks at for a
    subresource: labels, annotations, finalizers and ownerReferences of metadata, and spec-side
    fields (main) or only status (status)."""
    if sub == "status":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {}
    for k, v in obj.items():
        if k in ("apiVersion", "kind"):
            continue
        if k == "status" and has_status:
            continue
        if k == "metadata":
            m = {f: v[f] for f in ("labels", "annotations", "finalizers", "ownerReferences")
                 if isinstance(v, dict) and f in v}
            if m:
                out["metadata"] = m
            continue
        out[k] = v
    return out


# ---------------------------------------------------------------------------------------------
# the store


class Rec:
    """One stored object (never mutated once stored) and its JSON encodings per version."""
    __slots__ = ("rt", "obj", "cache")

    def __init__(self, rt, obj):
        self.rt = rt
        self.obj = obj
        self.cache = {}

    def view(self, version):
        gv = self.rt.gv(version)
        if self.obj.get("apiVersion") == gv:
            return self.obj
        o = dict(self.obj)
        o["apiVersion"] = gv
        return o

    def json(self, version, typed=True):
        key = (version, typed)
        b = self.cache.get(key)
        if b is None:
            o = self.view(version)
            if not typed:
                o = {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
            b = dumps(o)
            self.cache[key] = b
        return b

    def json_meta(self):
        """The object as a meta.k8s.io/v1 PartialObjectMetadata."""
        b = self.cache.get("meta")
        if b is None:
            b = dumps({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": self.obj["metadata"]})
            self.cache["meta"] = b
        return b

    def with_rv(self, rv):
        o = dict(self.obj)
        o["metadata"] = dict(o["metadata"], resourceVersion=str(rv))
        return Rec(self.rt, o)


CLOSE = "close"
ABORT = "abort"


class Watcher:
    def __init__(self, rt, version, ns, lsel, fsel, bookmarks, path):
        self.rt = rt
        self.version = version
        self.ns = ns
        self.lsel = lsel
        self.fsel = fsel
        self.bookmarks = bookmarks
        self.path = path
        self.meta_only = False
        self.q = queue.SimpleQueue()

    def matches(self, obj):
        meta = obj["metadata"]
        if self.ns is not None and meta.get("namespace") != self.ns:
            return False
        if self.lsel and not match_labels(self.lsel, meta.get("labels") or {}):
            return False
        if self.fsel and not match_fields(self.fsel, obj):
            return False
        return True

    def offer(self, ev):
        rv, etype, rec, old = ev[0], ev[1], ev[3], ev[4]
        if etype == "ADDED":
            if self.matches(rec.obj):
                self.q.put(("ADDED", rec))
        elif etype == "DELETED":
            if self.matches(rec.obj) or (old is not None and self.matches(old.obj)):
                self.q.put(("DELETED", rec))
        else:
            now_ok = self.matches(rec.obj)
            was_ok = old is not None and self.matches(old.obj)
            if now_ok and was_ok:
                self.q.put(("MODIFIED", rec))
            elif now_ok:
                self.q.put(("ADDED", rec))
            elif was_ok:
                self.q.put(("DELETED", old.with_rv(rv)))


class Ctx:
    """What a write request asks for."""

    def __init__(self, manager, op="Update", sub="", version=None, dry_run=False,
                 validation="Warn", track=True):
        self.manager = manager
        self.op = op
        self.sub = sub
        self.version = version
        self.dry_run = dry_run
        self.validation = validation
        self.track = track
        self.warnings = []
        self.applied = None   # (key, cfg, flat, forced {other manager key: new cfg}) for Apply


class Api:
    def __init__(self, crd_dir, history=10000, log=None):
        self.lock = threading.RLock()
        self.log = log or (lambda line: None)
        self.types = {}
        self.by_group = {}
        self.crd_dir = crd_dir
        self.crd_files = []
        self.schema_mode = False
        self.cel_rules = 0
        crds = []
        if crd_dir and os.path.isdir(crd_dir):
            if yaml is None:
                raise SystemExit("apiserver: PyYAML is needed to load %s (use setup-venv.sh)" % crd_dir)
            crds, self.crd_files = load_crds(crd_dir)
        if crds:
            self.schema_mode = True
        else:
            crds = fallback_crds()
        for rt in builtin_types() + crds:
            self.types[rt.key] = rt
            self.by_group.setdefault(rt.group, []).append(rt)
            for v in rt.versions.values():
                self.cel_rules += v.cel
        self.ns_rt = self.types[("", "namespaces")]
        self.rv = 1
        self.objs = {k: {} for k in self.types}
        self.uids = {}                 # uid -> (rt key, ns, name)
        self.dependents = {}           # owner uid -> set of (rt key, ns, name)
        self.applied = {}              # (rt key, ns, name) -> {(manager, sub): entry}
        self.updaters = {}             # (rt key, ns, name) -> {(manager, sub): entry}
        self.history = []
        self.history_max = history
        self.history_floor = self.rv
        self.watchers = {}             # rt key -> set of Watcher
        self.gc = GarbageCollector(self)
        self.faults = []
        self.fault_ids = itertools.count(1)
        self.stats = {"requests": {}, "codes": {}, "requests_total": 0, "watches_total": 0,
                      "connections_total": 0}
        self.open_watches = 0
        self.open_conns = 0
        self.stats_lock = threading.Lock()
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(Ctx("stand-in", version="v1"), self.ns_rt, None,
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # ---- bookkeeping

    def schema_summary(self):
        if self.schema_mode:
            return ("crd-schemas: present, %d CRDs from %s; objects validated against their "
                    "openAPIV3Schema (%d x-kubernetes-validations rules counted, not evaluated)"
                    % (sum(1 for t in self.types.values() if t.crd), self.crd_dir, self.cel_rules))
        return ("crd-schemas: absent, objects not validated (%s not found; serving the %d Cluster "
                "API kinds from the built-in list)" % (self.crd_dir or "no --crds folder",
                                                       len(FALLBACK_CRDS)))

    def _commit(self, rt, ns, name, obj, etype, old):
        self.rv += 1
        rv = self.rv
        meta = dict(obj["metadata"], resourceVersion=str(rv))
        obj = dict({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta}, **obj)
        obj["metadata"] = meta
        rec = Rec(rt, obj)
        key = (ns, name)
        full = (rt.key, ns, name)
        table = self.objs[rt.key]
        if old is not None:
            # only the current version is read often; a superseded one re-encodes if a watch
            # replays it
            old.cache.clear()
            for r in old.obj["metadata"].get("ownerReferences") or ():
                s = self.dependents.get(r.get("uid"))
                if s:
                    s.discard(full)
                    if not s:
                        del self.dependents[r.get("uid")]
        if etype == "DELETED":
            table.pop(key, None)
            self.uids.pop(obj["metadata"].get("uid"), None)
            self.applied.pop(full, None)
            self.updaters.pop(full, None)
        else:
            table[key] = rec
            self.uids[obj["metadata"]["uid"]] = full
            for r in obj["metadata"].get("ownerReferences") or ():
                self.dependents.setdefault(r.get("uid"), set()).add(full)
        ev = (rv, etype, rt, rec, old)
        self.history.append(ev)
        if len(self.history) > self.history_max + max(100, self.history_max // 10):
            drop = len(self.history) - self.history_max
            self.history_floor = self.history[drop - 1][0]
            del self.history[:drop]
        for w in self.watchers.get(rt.key, ()):
            w.offer(ev)
        if etype == "DELETED":
            self.gc.removed(rec)
        return rec

    def history_since(self, rv):
        """Events after rv from the retained history (binary search on the rv)."""
        h = self.history
        lo, hi = 0, len(h)
        while lo < hi:
            mid = (lo + hi) // 2
            if h[mid][0] <= rv:
                lo = mid + 1
            else:
                hi = mid
        return h[lo:]

    def compact(self):
        with self.lock:
            self.history = []
            self.history_floor = self.rv
            return self.rv

    def kind_served(self, api_version, kind):
        group, _, version = api_version.rpartition("/")
        return any(rt.kind == kind and version in rt.versions for rt in self.by_group.get(group, ()))

    def get_rec(self, rt, ns, name):
        return self.objs[rt.key].get((ns, name))

    def _ns_check(self, rt, ns, name):
        if not rt.namespaced:
            return
        nsrec = self.objs[self.ns_rt.key].get((None, ns))
        if nsrec is None:
            raise ns_not_found(ns)
        if nsrec.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", '%s "%s" is forbidden: unable to create new content in '
                           'namespace %s because it is being terminated' % (rt.qualified, name, ns),
                           dict(_details(rt, name), causes=[{"reason": "NamespaceTerminating",
                                                             "message": "namespace %s is being terminated" % ns,
                                                             "field": "metadata.namespace"}]))

    # ---- reads

    def list(self, rt, version, ns, q, meta_only=False):
        lsel = parse_label_selector(q.get("labelSelector"))
        fsel = parse_field_selector(q.get("fieldSelector"), rt)
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise bad_request("limit must be an integer")
        start = None
        list_rv = None
        if q.get("continue"):
            try:
                tok = json.loads(base64.urlsafe_b64decode(q["continue"].encode()))
                start = tuple(tok["start"])
                list_rv = tok["rv"]
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise bad_request("continue key is not valid: it was not made by this server")
        with self.lock:
            items = list(self.objs[rt.key].items())
            rv = self.rv
        items.sort(key=lambda kv: (kv[0][0] or "", kv[0][1]))
        out = []
        more = 0
        last = None
        for (ons, oname), rec in items:
            if ns is not None and ons != ns:
                continue
            if start is not None and ((ons or ""), oname) <= ((start[0] or ""), start[1]):
                continue
            obj = rec.obj
            if lsel and not match_labels(lsel, obj["metadata"].get("labels") or {}):
                continue
            if fsel and not match_fields(fsel, obj):
                continue
            if limit and len(out) >= limit:
                more += 1
                continue
            out.append(rec)
            last = (ons, oname)
        meta = {"resourceVersion": str(list_rv or rv)}
        if more:
            meta["continue"] = base64.urlsafe_b64encode(
                dumps({"rv": list_rv or rv, "start": list(last)})).decode()
            if not lsel and not fsel:
                meta["remainingItemCount"] = more
        if meta_only:
            head = dumps({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta})
            return head[:-1] + b',"items":[' + b",".join(r.json_meta() for r in out) + b"]}"
        typed = rt.crd
        head = dumps({"kind": rt.list_kind, "apiVersion": rt.gv(version), "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(r.json(version, typed) for r in out) + b"]}"

    def start_watch(self, rt, version, ns, q, path, meta_only=False):
        lsel = parse_label_selector(q.get("labelSelector"))
        fsel = parse_field_selector(q.get("fieldSelector"), rt)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1", "True")
        initial = q.get("sendInitialEvents") in ("true", "1", "True")
        rv_param = q.get("resourceVersion") or ""
        w = Watcher(rt, version, ns, lsel, fsel, bookmarks, path)
        w.meta_only = meta_only
        with self.lock:
            if initial or rv_param in ("", "0"):
                items = sorted(self.objs[rt.key].items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
                for _, rec in items:
                    if w.matches(rec.obj):
                        w.q.put(("ADDED", rec))
                if initial:
                    w.q.put(("BOOKMARK", self.rv, True))
            else:
                try:
                    since = int(rv_param)
                except ValueError:
                    raise bad_request("invalid resourceVersion %r: it must be an integer" % rv_param)
                if since < self.history_floor:
                    return w, ApiError(410, "Expired", "too old resource version: %d (%d)"
                                       % (since, self.history_floor))
                for ev in self.history_since(since):
                    if ev[2] is rt:
                        w.offer(ev)
            self.watchers.setdefault(rt.key, set()).add(w)
        return w, None

    def bookmark(self, w):
        with self.lock:
            w.q.put(("BOOKMARK", self.rv, False))

    def stop_watch(self, w):
        with self.lock:
            s = self.watchers.get(w.rt.key)
            if s:
                s.discard(w)

    def close_watches(self, mode, path_regex=None):
        n = 0
        with self.lock:
            for s in self.watchers.values():
                for w in list(s):
                    if path_regex and not re.search(path_regex, w.path):
                        continue
                    w.q.put(ABORT if mode == "abort" else CLOSE)
                    n += 1
        return n

    # ---- writes

    def _typemeta(self, rt, version, body, what="data"):
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON or YAML object")
        av = body.get("apiVersion")
        if av is None:
            body["apiVersion"] = rt.gv(version)
        elif av != rt.gv(version):
            raise bad_request("the API version in the %s (%s) does not match the expected API "
                              "version (%s)" % (what, av, rt.gv(version)))
        kind = body.get("kind")
        if kind is None:
            body["kind"] = rt.kind
        elif kind != rt.kind:
            raise bad_request("the kind in the %s (%s) does not match the expected kind (%s)"
                              % (what, kind, rt.kind))
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        return meta

    def _normalize(self, ctx, rt, obj, old=None):
        """Built-in shape rules, schema pruning/defaulting/validation and ObjectMeta checks, in
        place; raises Invalid (422) or, for fieldValidation=Strict and unknown fields, 400."""
        errors = []
        unknown = []
        version = rt.versions[ctx.version]
        meta = obj["metadata"]
        if not rt.crd:
            allowed = BUILTIN_FIELDS.get(rt.kind, set())
            for k in list(obj):
                if k not in allowed and k not in ("apiVersion", "kind", "metadata"):
                    unknown.append(k)
                    del obj[k]
            self._builtin_rules(rt, obj, old, errors)
        if version.schema is not None:
            w = SchemaWalker()
            w.walk(obj, version.schema, "", root=True)
            errors.extend(w.errors)
            unknown.extend(w.unknown)
        validate_meta(rt, meta, errors, unknown)
        if unknown and ctx.validation != "Ignore":
            if ctx.validation == "Strict":
                raise bad_request('%s in version "%s" cannot be handled as a %s: strict decoding error: %s'
                                  % (rt.kind, ctx.version, rt.kind,
                                     ", ".join('unknown field "%s"' % u for u in unknown)))
            ctx.warnings.extend('unknown field "%s"' % u for u in unknown)
        if errors:
            raise invalid(rt, meta.get("name") or "", errors)

    def _builtin_rules(self, rt, obj, old, errors):
        if rt.kind == "Secret":
            data = obj.get("data")
            if data is not None and not isinstance(data, dict):
                raise bad_request('Secret in version "v1" cannot be handled as a Secret: data must be a map')
            data = dict(data or {})
            for k, v in data.items():
                if not isinstance(v, str):
                    raise bad_request('Secret in version "v1" cannot be handled as a Secret: data[%s] '
                                      'must be a base64 string' % k)
                try:
                    base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    raise bad_request('Secret in version "v1" cannot be handled as a Secret: illegal '
                                      'base64 data in data[%s]' % k)
            sd = obj.pop("stringData", None)
            if sd is not None:
                if not isinstance(sd, dict) or not all(isinstance(v, str) for v in sd.values()):
                    raise bad_request('Secret in version "v1" cannot be handled as a Secret: stringData '
                                      'must be a map of strings')
                for k, v in sd.items():
                    data[k] = base64.b64encode(v.encode()).decode()
            for k in data:
                if not SECRET_KEY.fullmatch(k) or len(k) > 253:
                    errors.append(("FieldValueInvalid", "data[%s]" % k, "Invalid value: %s: a key may hold "
                                   "only alphanumerics, '-', '_' or '.'" % json.dumps(k)))
            if data or "data" in obj:
                obj["data"] = data
            obj.setdefault("type", "Opaque")
            if old is not None:
                if old.get("type") != obj.get("type"):
                    errors.append(("FieldValueInvalid", "type", "Invalid value: %s: field is immutable"
                                   % json.dumps(obj.get("type"))))
                if old.get("immutable") and (old.get("data") != obj.get("data") or not obj.get("immutable")):
                    errors.append(("FieldValueForbidden", "data", "Forbidden: field is immutable when "
                                   "`immutable` is set"))
        elif rt.kind == "ConfigMap":
            for f in ("data", "binaryData"):
                v = obj.get(f)
                if v is None:
                    continue
                if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
                    raise bad_request('ConfigMap in version "v1" cannot be handled as a ConfigMap: %s '
                                      'must be a map of strings' % f)
                if f == "binaryData":
                    for k, x in v.items():
                        try:
                            base64.b64decode(x, validate=True)
                        except (binascii.Error, ValueError):
                            raise bad_request('ConfigMap in version "v1" cannot be handled as a '
                                              'ConfigMap: illegal base64 data in binaryData[%s]' % k)
            if old is not None and old.get("immutable") and (
                    old.get("data") != obj.get("data") or old.get("binaryData") != obj.get("binaryData")):
                errors.append(("FieldValueForbidden", "data", "Forbidden: field is immutable when "
                               "`immutable` is set"))
        elif rt.kind == "Namespace":
            spec = obj.get("spec")
            if spec is not None and not isinstance(spec, dict):
                raise bad_request("Namespace cannot be handled: spec must be an object")
        for f in BUILTIN_FIELDS.get(rt.kind, ()):
            if f in ("spec", "involvedObject", "source", "series") and obj.get(f) is not None \
                    and not isinstance(obj[f], dict):
                raise bad_request('%s in version "%s" cannot be handled: %s must be an object'
                                  % (rt.kind, rt.storage_version(), f))

    def create(self, ctx, rt, ns, body):
        meta = self._typemeta(rt, ctx.version, body)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise bad_request("the namespace of the provided object does not match the namespace "
                                  "sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        with self.lock:
            if not meta.get("name") and meta.get("generateName"):
                gen = str(meta["generateName"])[:58]
                for _ in range(8):
                    cand = gen + "".join(random.choice(GEN_CHARS) for _ in range(5))
                    if (ns, cand) not in self.objs[rt.key]:
                        break
                meta["name"] = cand
            return self._create_locked(ctx, rt, ns, body)

    def _create_locked(self, ctx, rt, ns, obj):
        meta = obj["metadata"]
        version = rt.versions[ctx.version]
        if version.status and rt.kind != "Namespace":
            obj.pop("status", None)
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation", "managedFields", "selfLink", "resourceVersion"):
            meta.pop(f, None)
        if rt.kind == "Namespace":
            name = meta.get("name")
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
            if isinstance(name, str):
                meta.setdefault("labels", {})
                if isinstance(meta["labels"], dict):
                    meta["labels"]["kubernetes.io/metadata.name"] = name
        self._normalize(ctx, rt, obj)
        name = meta["name"]
        self._ns_check(rt, ns, name)
        if (ns, name) in self.objs[rt.key]:
            raise already_exists(rt, name)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_ts()
        if rt.crd:
            meta["generation"] = 1
        if ctx.dry_run:
            return Rec(rt, obj)
        full = (rt.key, ns, name)
        self._track_fields(ctx, rt, full, None, obj)
        self._set_managed_fields(full, obj)
        rec = self._commit(rt, ns, name, obj, "ADDED", None)
        if meta.get("ownerReferences"):
            self.gc.check_later(rec)
        return rec

    def update(self, ctx, rt, ns, name, body):
        """PUT of the main resource or /status."""
        meta = self._typemeta(rt, ctx.version, body)
        if meta.get("name") not in (None, name):
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                              % (meta.get("name"), name))
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise bad_request("the namespace of the provided object does not match the namespace "
                              "sent on the request")
        with self.lock:
            rec = self.get_rec(rt, ns, name)
            if rec is None:
                raise not_found(rt, name)
            return self._update_locked(ctx, rec, body)

    def _update_locked(self, ctx, rec, cand):
        """The common path of every update (PUT, patches, apply, /status, /scale, the garbage
        collector): preconditions, subresource rules, validation, generation, finalizers,
        field management, no-op detection, commit or removal."""
        rt = rec.rt
        old = rec.obj
        om = old["metadata"]
        name, ns = om["name"], om.get("namespace")
        version = rt.versions[ctx.version]
        cm = cand.get("metadata") if isinstance(cand.get("metadata"), dict) else {}
        want_rv = cm.get("resourceVersion")
        if want_rv not in (None, "") and str(want_rv) != om["resourceVersion"]:
            raise conflict(rt, name)
        if cm.get("uid") not in (None, "", om["uid"]):
            raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in object "
                           "meta: %s" % (cm.get("uid"), om["uid"]))
        if ctx.sub == "status":
            new = jcopy(old)
            if "status" in cand:
                new["status"] = jcopy(cand["status"])
            else:
                new.pop("status", None)
            new["apiVersion"] = rt.gv(ctx.version)
        else:
            new = jcopy(cand)
            new["apiVersion"] = rt.gv(ctx.version)
            new["kind"] = rt.kind
            if not isinstance(new.get("metadata"), dict):
                new["metadata"] = {}
            if version.status:
                if "status" in old:
                    new["status"] = jcopy(old["status"])
                else:
                    new.pop("status", None)
            if rt.kind == "Namespace" and ctx.track:
                # spec.finalizers belong to the namespace's termination (the /finalize subresource)
                new["spec"] = jcopy(old.get("spec") or {})
        nm = new["metadata"]
        nm["name"] = name
        if ns is not None:
            nm["namespace"] = ns
        else:
            nm.pop("namespace", None)
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation", "managedFields", "resourceVersion"):
            if f in om:
                nm[f] = om[f]
            else:
                nm.pop(f, None)
        nm.pop("selfLink", None)
        if ctx.track:
            self._normalize(ctx, rt, new, old)
        if om.get("deletionTimestamp"):
            added = [f for f in nm.get("finalizers") or () if f not in (om.get("finalizers") or ())]
            if added:
                raise invalid(rt, name, [("FieldValueForbidden", "metadata.finalizers",
                                          "Forbidden: no new finalizers can be added if the object "
                                          "is being deleted, found new finalizers %s" % json.dumps(added))])
        if rt.crd:
            strip = lambda o: {k: v for k, v in o.items() if k not in ("metadata", "status", "apiVersion", "kind")}
            if strip(new) != strip(old):
                nm["generation"] = om.get("generation", 1) + 1
        full = (rt.key, ns, name)
        unchanged = self._same(new, old)
        if unchanged and (ctx.op != "Apply" or not self._apply_changes(full, ctx)):
            return rec
        if ctx.dry_run:
            return Rec(rt, new)
        if ctx.track:
            self._track_fields(ctx, rt, full, old, new)
        self._set_managed_fields(full, new)
        if nm.get("deletionTimestamp") and self._removable(rt, new):
            return self._commit(rt, ns, name, new, "DELETED", rec)
        out = self._commit(rt, ns, name, new, "MODIFIED", rec)
        if nm.get("ownerReferences") != om.get("ownerReferences") and nm.get("ownerReferences"):
            self.gc.check_later(out)
        return out

    @staticmethod
    def _same(a, b):
        if a.keys() != b.keys():
            return False
        for k in a:
            if k == "metadata":
                ma = {x: y for x, y in a[k].items() if x != "managedFields"}
                mb = {x: y for x, y in b[k].items() if x != "managedFields"}
                if ma != mb:
                    return False
            elif k != "apiVersion" and a[k] != b[k]:
                return False
        return True

    def _removable(self, rt, obj):
        if obj["metadata"].get("finalizers"):
            return False
        if rt.kind == "Namespace" and (obj.get("spec") or {}).get("finalizers"):
            return False
        return True

    # ---- field management

    def _apply_changes(self, full, ctx):
        """True when an apply changes the recorded applied configurations (so it is a write even
        when the object stays the same)."""
        mkey, cfg, flat, forced = ctx.applied
        mine = self.applied.get(full, {}).get(mkey)
        return forced or mine is None or mine["cfg"] != cfg

    def _track_fields(self, ctx, rt, full, old, new):
        version = rt.versions[ctx.version]
        t = now_ts()
        gv = rt.gv(ctx.version)
        sub = ctx.sub if ctx.sub == "status" else ""
        appl = self.applied.setdefault(full, {})
        upd = self.updaters.setdefault(full, {})
        if ctx.op == "Apply":
            mkey, cfg, flat, forced = ctx.applied
            for k, (ocfg, oflat) in forced.items():
                if k in appl:
                    appl[k].update(cfg=ocfg, flat=oflat)
            appl[mkey] = {"cfg": cfg, "flat": flat, "time": t, "apiVersion": gv}
            owned = set(p for p in flat)
            for k, e in list(upd.items()):
                if k[1] == sub:
                    e["paths"] -= owned
                    if not e["paths"]:
                        del upd[k]
            return
        root = version.merge_root
        has_status = version.status
        nflat = flatten(ssa_view(new, sub, has_status), root)
        oflat = flatten(ssa_view(old, sub, has_status), root) if old is not None else {}
        changed = {p for p, v in nflat.items() if p not in oflat or oflat[p] != v}
        if not changed:
            return
        # an update takes the fields it changes away from the other managers, appliers included
        for k, e in list(appl.items()):
            if k[1] != sub:
                continue
            lost = [p for p in e["flat"] if p in changed and p[-1] != "."]
            if lost:
                cfg = jcopy(e["cfg"])
                for p in lost:
                    path_remove(cfg, p, prune_depth=0)
                e.update(cfg=cfg, flat=flatten(cfg, root))
        mkey = (ctx.manager, sub)
        for k, e in list(upd.items()):
            if k[1] != sub or k == mkey:
                continue
            e["paths"] = {p for p in e["paths"] if p not in changed and p in nflat}
            if not e["paths"]:
                del upd[k]
        mine = upd.get(mkey)
        paths = {p for p in (mine["paths"] if mine else ()) if p in nflat} | changed
        upd[mkey] = {"paths": paths, "time": t, "apiVersion": gv}

    def _set_managed_fields(self, full, obj):
        entries = []
        for (mgr, sub), e in self.applied.get(full, {}).items():
            m = {"manager": mgr, "operation": "Apply", "apiVersion": e["apiVersion"], "time": e["time"],
                 "fieldsType": "FieldsV1", "fieldsV1": fields_v1(e["flat"])}
            if sub:
                m["subresource"] = sub
            entries.append(m)
        for (mgr, sub), e in self.updaters.get(full, {}).items():
            m = {"manager": mgr, "operation": "Update", "apiVersion": e["apiVersion"], "time": e["time"],
                 "fieldsType": "FieldsV1", "fieldsV1": fields_v1(e["paths"])}
            if sub:
                m["subresource"] = sub
            entries.append(m)
        if entries:
            obj["metadata"]["managedFields"] = entries
        else:
            obj["metadata"].pop("managedFields", None)

    # ---- patches

    def patch(self, ctx, rt, ns, name, ctype, raw, force=False):
        if ctype == "application/apply-patch+yaml":
            return self.apply(ctx, rt, ns, name, raw, force)
        try:
            body = json.loads(raw or b"null")
        except ValueError as e:
            raise bad_request("the patch is not valid JSON: %s" % e)
        if ctype == "application/strategic-merge-patch+json" and rt.crd:
            raise unsupported_media(ctype, ["application/json-patch+json", "application/merge-patch+json",
                                            "application/apply-patch+yaml"])
        if ctype not in ("application/merge-patch+json", "application/json-patch+json",
                         "application/strategic-merge-patch+json"):
            raise unsupported_media(ctype, ["application/json-patch+json", "application/merge-patch+json",
                                            "application/strategic-merge-patch+json",
                                            "application/apply-patch+yaml"])
        if ctype != "application/json-patch+json" and not isinstance(body, dict):
            raise bad_request("a merge patch must be a JSON object")
        with self.lock:
            rec = self.get_rec(rt, ns, name)
            if rec is None:
                raise not_found(rt, name)
            view = rec.view(ctx.version)
            if ctx.sub == "scale":
                view = self._scale_view(rec, ctx.version)
            try:
                if ctype == "application/merge-patch+json":
                    out = merge_patch(view, body)
                elif ctype == "application/json-patch+json":
                    out = json_patch(view, body)
                else:
                    out = strategic_merge(view, body)
            except PatchFailed as e:
                raise ApiError(422, "Invalid", "the json patch could not be applied: %s" % e,
                               _details(rt, name, rt.kind))
            if not isinstance(out, dict):
                raise bad_request("the patched object is not a JSON object")
            om = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
            if om.get("name") not in (None, name):
                raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                  % (om.get("name"), name))
            if ctx.sub == "scale":
                return self._scale_write(ctx, rec, out)
            if out.get("apiVersion") != rt.gv(ctx.version) or out.get("kind") != rt.kind:
                raise bad_request("a patch may not change apiVersion or kind")
            return self._update_locked(ctx, rec, out)

    def apply(self, ctx, rt, ns, name, raw, force):
        """Server-side apply, simplified (README: 'Server-side apply')."""
        try:
            if yaml is not None:
                cfg = yaml.load(raw.decode("utf-8") if raw else "", Loader=_YAML_LOADER)
            else:
                cfg = json.loads(raw)
        except Exception as e:  # yaml.YAMLError, ValueError, UnicodeDecodeError
            raise bad_request("the apply patch is not valid YAML or JSON: %s" % str(e).splitlines()[0])
        if not isinstance(cfg, dict):
            raise bad_request("the apply patch must be an object")
        cfg = jcopy(cfg)
        if not cfg.get("apiVersion") or not cfg.get("kind"):
            raise bad_request("apiVersion and kind must be set in an apply patch")
        self._typemeta(rt, ctx.version, cfg, "apply patch")
        meta = cfg["metadata"]
        if meta.get("name") not in (None, name):
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                              % (meta.get("name"), name))
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise bad_request("the namespace of the provided object does not match the namespace "
                              "sent on the request")
        version = rt.versions[ctx.version]
        sub = "status" if ctx.sub == "status" else ""
        if ctx.sub == "scale":
            raise unsupported_media("application/apply-patch+yaml", ["application/json-patch+json",
                                                                     "application/merge-patch+json"])
        if sub == "" and version.status:
            cfg.pop("status", None)
        want_rv = meta.get("resourceVersion")
        view = ssa_view(cfg, sub, version.status)
        if version.schema is not None:
            probe = jcopy(dict(view, apiVersion=cfg["apiVersion"], kind=cfg["kind"], metadata={}))
            w = SchemaWalker()
            w.walk(probe, version.schema, "", root=True)
            if w.unknown:
                raise bad_request("failed to create typed patch object (%s, Kind=%s): %s"
                                  % (rt.gv(ctx.version), rt.kind,
                                     "; ".join(".%s: field not declared in schema" % u for u in w.unknown)))
        root = version.merge_root
        new_flat = flatten(view, root)
        mkey = (ctx.manager, sub)
        with self.lock:
            rec = self.get_rec(rt, ns, name)
            full = (rt.key, ns, name)
            if rec is not None and want_rv not in (None, "") and str(want_rv) != rec.obj["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if rec is None and want_rv not in (None, ""):
                raise not_found(rt, name)
            mgrs = self.applied.get(full, {}) if rec is not None else {}
            others = {k: e for k, e in mgrs.items() if k != mkey and k[1] == sub}
            conflicts = []
            for k, e in others.items():
                for p, v in new_flat.items():
                    if p[-1] == "." or p not in e["flat"]:
                        continue
                    if e["flat"][p] != v:
                        conflicts.append((k[0], p))
            forced = {}
            if conflicts and not force:
                conflicts.sort(key=lambda c: (c[0], c[1]))
                by = {}
                for m, p in conflicts:
                    by.setdefault(m, []).append(path_text(p))
                if len(conflicts) == 1:
                    msg = 'Apply failed with 1 conflict: conflict with "%s": %s' % (conflicts[0][0], path_text(conflicts[0][1]))
                else:
                    parts = []
                    for m, ps in by.items():
                        parts.append('conflicts with "%s":\n%s' % (m, "\n".join("- " + x for x in ps)))
                    msg = "Apply failed with %d conflicts: %s" % (len(conflicts), "\n".join(parts))
                raise ApiError(409, "Conflict", msg, dict(_details(rt, name), causes=[
                    {"reason": "FieldManagerConflict", "message": 'conflict with "%s"' % m, "field": path_text(p)}
                    for m, p in conflicts]))
            for m, p in conflicts:
                k = (m, sub)
                ocfg = jcopy(forced[k][0] if k in forced else others[k]["cfg"])
                path_remove(ocfg, p, prune_depth=0)
                forced[k] = (ocfg, flatten(ocfg, root))
            if rec is None:
                base = {"apiVersion": rt.gv(ctx.version), "kind": rt.kind,
                        "metadata": {"name": name, **({"namespace": ns} if rt.namespaced else {})}}
            else:
                base = jcopy(rec.view(ctx.version))
            mine = mgrs.get(mkey)
            if mine is not None:
                still = set()
                for k, e in others.items():
                    flat = forced[k][1] if k in forced else e["flat"]
                    still.update(flat)
                removed = [p for p in mine["flat"] if p not in new_flat and p not in still]
                for p in sorted(removed, key=len, reverse=True):
                    if p[-1] == ".":
                        item = p[:-1]
                        if any(q[:len(item)] == item for q in still) or \
                                any(q[:len(item)] == item for q in new_flat):
                            continue
                    path_remove(base, p, prune_depth=2)
            merged = ssa_merge(base, view, root)
            if sub == "":
                merged["apiVersion"], merged["kind"] = rt.gv(ctx.version), rt.kind
                merged["metadata"]["name"] = name
            ctx.op = "Apply"
            ctx.applied = (mkey, view, new_flat, forced)
            if rec is None:
                if sub == "status":
                    raise not_found(rt, name)
                return self._create_locked(ctx, rt, ns, merged)
            return self._update_locked(ctx, rec, merged)

    # ---- scale

    def _scale_paths(self, rt, version):
        sc = rt.versions[version].scale
        if not sc:
            raise no_resource()
        return sc

    def _scale_view(self, rec, version):
        sc = self._scale_paths(rec.rt, version)
        obj = rec.obj
        _, spec_r = path_get(obj, tuple("f:" + p for p in sc["specReplicasPath"].strip(".").split(".")))
        _, stat_r = path_get(obj, tuple("f:" + p for p in sc["statusReplicasPath"].strip(".").split(".")))
        status = {"replicas": stat_r if isinstance(stat_r, int) else 0}
        if sc.get("labelSelectorPath"):
            _, sel = path_get(obj, tuple("f:" + p for p in sc["labelSelectorPath"].strip(".").split(".")))
            if isinstance(sel, str) and sel:
                status["selector"] = sel
        m = obj["metadata"]
        meta = {k: m[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in m}
        return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
                "spec": {"replicas": spec_r if isinstance(spec_r, int) else 0}, "status": status}

    def get_scale(self, rt, version, ns, name):
        rec = self.get_rec(rt, ns, name)
        if rec is None:
            raise not_found(rt, name)
        return self._scale_view(rec, version)

    def update_scale(self, ctx, rt, ns, name, body):
        if not isinstance(body, dict):
            raise bad_request("the request body must be a Scale object")
        with self.lock:
            rec = self.get_rec(rt, ns, name)
            if rec is None:
                raise not_found(rt, name)
            return self._scale_write(ctx, rec, body)

    def _scale_write(self, ctx, rec, scale):
        rt = rec.rt
        sc = self._scale_paths(rt, ctx.version)
        name = rec.obj["metadata"]["name"]
        replicas = (scale.get("spec") or {}).get("replicas") if isinstance(scale.get("spec"), dict) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(422, "Invalid", 'Scale.autoscaling "%s" is invalid: spec.replicas: Invalid value: %s: '
                           'must be greater than or equal to 0' % (name, show(replicas)),
                           {"name": name, "group": "autoscaling", "kind": "Scale", "causes": [
                               {"reason": "FieldValueInvalid", "message": "Invalid value: %s: must be greater "
                                "than or equal to 0" % show(replicas), "field": "spec.replicas"}]})
        sm = scale.get("metadata") if isinstance(scale.get("metadata"), dict) else {}
        if sm.get("resourceVersion") not in (None, "") and str(sm["resourceVersion"]) != rec.obj["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        cand = jcopy(rec.view(ctx.version))
        cur = cand
        parts = sc["specReplicasPath"].strip(".").split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = replicas
        sub_ctx = ctx
        sub_ctx.sub = ""
        new = self._update_locked(sub_ctx, rec, cand)
        return self._scale_view(new, ctx.version)

    # ---- delete

    def delete(self, ctx, rt, ns, name, opts):
        with self.lock:
            rec = self.get_rec(rt, ns, name)
            if rec is None:
                raise not_found(rt, name)
            pre = opts.get("preconditions") or {}
            om = rec.obj["metadata"]
            if pre.get("uid") not in (None, "", om["uid"]):
                raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in object "
                               "meta: %s" % (pre["uid"], om["uid"]))
            if pre.get("resourceVersion") not in (None, "", om["resourceVersion"]):
                raise conflict(rt, name, "Precondition failed: ResourceVersion in precondition: %s, "
                               "ResourceVersion in object meta: %s" % (pre["resourceVersion"], om["resourceVersion"]))
            policy = opts.get("propagationPolicy")
            if policy is None and opts.get("orphanDependents") is not None:
                policy = "Orphan" if opts["orphanDependents"] else "Background"
            if policy not in (None, "Background", "Foreground", "Orphan"):
                raise invalid(rt, name, [("FieldValueNotSupported", "propagationPolicy",
                                          'Unsupported value: %s: supported values: "Foreground", '
                                          '"Background", "Orphan"' % json.dumps(policy))])
            return self._delete_locked(rec, policy or "Background", ctx.dry_run)

    def _delete_locked(self, rec, policy, dry_run=False):
        rt = rec.rt
        obj = rec.obj
        om = obj["metadata"]
        if om.get("deletionTimestamp"):
            return False, rec
        fins = list(om.get("finalizers") or ())
        if policy == "Foreground" and "foregroundDeletion" not in fins:
            fins.append("foregroundDeletion")
        if policy == "Orphan" and "orphan" not in fins:
            fins.append("orphan")
        ns, name = om.get("namespace"), om["name"]
        if fins or rt.kind == "Namespace":
            new = dict(obj)
            nm = dict(om)
            nm["deletionTimestamp"] = now_ts()
            nm["deletionGracePeriodSeconds"] = 0
            if fins:
                nm["finalizers"] = fins
            if rt.crd and nm.get("generation"):
                nm["generation"] += 1
            new["metadata"] = nm
            if rt.kind == "Namespace":
                new["status"] = dict(obj.get("status") or {}, phase="Terminating")
            if dry_run:
                return False, Rec(rt, new)
            out = self._commit(rt, ns, name, new, "MODIFIED", rec)
            self.gc.deleting(out)
            return False, out
        if dry_run:
            return True, rec
        return True, self._commit(rt, ns, name, obj, "DELETED", rec)

    def delete_collection(self, ctx, rt, version, ns, q, opts):
        lsel = parse_label_selector(q.get("labelSelector"))
        fsel = parse_field_selector(q.get("fieldSelector"), rt)
        policy = opts.get("propagationPolicy") or "Background"
        with self.lock:
            recs = [r for (ons, _), r in sorted(self.objs[rt.key].items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
                    if (ns is None or ons == ns)
                    and (not lsel or match_labels(lsel, r.obj["metadata"].get("labels") or {}))
                    and (not fsel or match_fields(fsel, r.obj))]
            out = []
            for r in recs:
                _, res = self._delete_locked(r, policy, ctx.dry_run)
                out.append(res)
            rv = self.rv
        head = dumps({"kind": rt.list_kind, "apiVersion": rt.gv(version), "metadata": {"resourceVersion": str(rv)}})
        return head[:-1] + b',"items":[' + b",".join(r.json(version, rt.crd) for r in out) + b"]}"

    # ---- internal writes of the garbage collector

    def internal_update(self, rec, mutate):
        new = jcopy(rec.obj)
        mutate(new)
        ctx = Ctx("stand-in-garbage-collector", version=new["apiVersion"].split("/")[-1], track=False)
        if ctx.version not in rec.rt.versions:
            ctx.version = rec.rt.storage_version()
        return self._update_locked(ctx, rec, new)


# ---------------------------------------------------------------------------------------------
# garbage collection


class GarbageCollector:
    """Background deletion of dependents (ownerReferences by uid), foreground and orphan
    deletion, namespace termination. One thread; every task takes the store lock briefly."""

    def __init__(self, api):
        self.api = api
        self.cv = threading.Condition()
        self.tasks = []
        self.seq = itertools.count()
        self.thread = threading.Thread(target=self.run, name="gc", daemon=True)

    def start(self):
        self.thread.start()

    def put(self, task, delay=0.0):
        with self.cv:
            heapq.heappush(self.tasks, (time.monotonic() + delay, next(self.seq), task))
            self.cv.notify()

    # called under the store lock
    def removed(self, rec):
        m = rec.obj["metadata"]
        self.put(("removed", m["uid"]))
        for r in m.get("ownerReferences") or ():
            self.put(("owner-check", r.get("uid")))
        ns = m.get("namespace")
        if ns:
            nsrec = self.api.objs[self.api.ns_rt.key].get((None, ns))
            if nsrec is not None and nsrec.obj["metadata"].get("deletionTimestamp"):
                self.put(("namespace", ns))

    def deleting(self, rec):
        m = rec.obj["metadata"]
        fins = m.get("finalizers") or ()
        if "foregroundDeletion" in fins:
            self.put(("owner-check", m["uid"]))
        if "orphan" in fins:
            self.put(("orphan", m["uid"]))
        if rec.rt.kind == "Namespace":
            self.put(("namespace", m["name"]))

    def check_later(self, rec):
        self.put(("dangling", rec.obj["metadata"]["uid"]), delay=1.0)

    def run(self):
        while True:
            with self.cv:
                while not self.tasks or self.tasks[0][0] > time.monotonic():
                    self.cv.wait(None if not self.tasks else max(0.0, self.tasks[0][0] - time.monotonic()))
                _, _, task = heapq.heappop(self.tasks)
            try:
                with self.api.lock:
                    getattr(self, "do_" + task[0].replace("-", "_"))(*task[1:])
            except Exception:
                self.api.log("gc: task %r failed:\n%s" % (task, traceback.format_exc()))

    def _rec(self, full):
        rtkey, ns, name = full
        return self.api.objs[rtkey].get((ns, name))

    def _by_uid(self, uid):
        full = self.api.uids.get(uid)
        return self._rec(full) if full else None

    def _owners_alive(self, rec):
        ns = rec.obj["metadata"].get("namespace")
        for r in rec.obj["metadata"].get("ownerReferences") or ():
            o = self._by_uid(r.get("uid"))
            if o is None:
                continue
            ons = o.obj["metadata"].get("namespace")
            if ons is None or ons == ns:
                return True
        return False

    def _dependents(self, uid):
        return [r for r in (self._rec(f) for f in sorted(self.api.dependents.get(uid, ()), key=str)) if r]

    def do_removed(self, uid):
        for dep in self._dependents(uid):
            if not self._owners_alive(dep):
                self.api._delete_locked(dep, "Background")

    def do_dangling(self, uid):
        rec = self._by_uid(uid)
        if rec is None or rec.obj["metadata"].get("deletionTimestamp"):
            return
        refs = rec.obj["metadata"].get("ownerReferences") or ()
        # an owner of a kind this server does not serve cannot be looked up: keep the object
        known = [r for r in refs if self.api.kind_served(r.get("apiVersion") or "", r.get("kind"))]
        if refs and len(known) == len(refs) and not self._owners_alive(rec):
            self.api._delete_locked(rec, "Background")

    def do_owner_check(self, uid):
        """A foreground-deleting owner waits until its dependents are gone."""
        owner = self._by_uid(uid)
        if owner is None:
            return
        m = owner.obj["metadata"]
        if not m.get("deletionTimestamp") or "foregroundDeletion" not in (m.get("finalizers") or ()):
            return
        deps = self._dependents(uid)
        if deps:
            for d in deps:
                self.api._delete_locked(d, "Foreground")
            return
        self.api.internal_update(owner, lambda o: o["metadata"].__setitem__(
            "finalizers", [f for f in o["metadata"].get("finalizers") or () if f != "foregroundDeletion"]))

    def do_orphan(self, uid):
        owner = self._by_uid(uid)
        if owner is None:
            return
        for d in self._dependents(uid):
            self.api.internal_update(d, lambda o: o["metadata"].__setitem__(
                "ownerReferences", [r for r in o["metadata"].get("ownerReferences") or () if r.get("uid") != uid]))
        owner = self._by_uid(uid)
        if owner is not None:
            self.api.internal_update(owner, lambda o: o["metadata"].__setitem__(
                "finalizers", [f for f in o["metadata"].get("finalizers") or () if f != "orphan"]))

    def do_namespace(self, ns):
        nsrec = self.api.objs[self.api.ns_rt.key].get((None, ns))
        if nsrec is None or not nsrec.obj["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for key, table in self.api.objs.items():
            for (ons, _), rec in list(table.items()):
                if ons == ns:
                    remaining += 1
                    self.api._delete_locked(rec, "Background")
        if remaining == 0 and (nsrec.obj.get("spec") or {}).get("finalizers"):
            self.api.internal_update(nsrec, lambda o: o.__setitem__("spec", dict(o.get("spec") or {}, finalizers=[])))


# ---------------------------------------------------------------------------------------------
# HTTP


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, api, ssl_ctx, tokens, bookmark_seconds, log):
        self.api = api
        self.ssl_ctx = ssl_ctx
        self.tokens = tokens
        self.bookmark_seconds = bookmark_seconds
        self.log = log
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        # The TLS handshake runs here, in the connection's own thread, so a slow or silent
        # client never holds up accept().
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            request.settimeout(30)
            tls = self.ssl_ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            try:
                request.close()
            except OSError:
                pass
            return
        with self.api.stats_lock:
            self.api.open_conns += 1
            self.api.stats["connections_total"] += 1
        try:
            self.RequestHandlerClass(tls, client_address, self)
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self.api.stats_lock:
                self.api.open_conns -= 1
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        self.log("connection from %s failed:\n%s" % (client_address, traceback.format_exc()))


META_CTYPE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
META_LIST_CTYPE = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
AGGREGATED_CTYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


class Route:
    __slots__ = ("kind", "rt", "version", "ns", "name", "sub", "verb", "group")

    def __init__(self, kind, rt=None, version=None, ns=None, name=None, sub=None, group=None):
        self.kind = kind          # 'resource' | 'discovery'
        self.rt = rt
        self.version = version
        self.ns = ns
        self.name = name
        self.sub = sub
        self.group = group
        self.verb = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300  # idle keep-alive connections are closed after this

    def version_string(self):
        return SERVER_NAME

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        pass

    def setup(self):
        super().setup()
        self.user = None
        try:
            cert = self.connection.getpeercert()
        except (ValueError, OSError):
            cert = None
        if cert:
            cn = [v for rdn in cert.get("subject", ()) for (k, v) in rdn if k == "commonName"]
            self.user = cn[0] if cn else "unknown"

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    # ---- responses

    def negotiate(self):
        """The first media type of Accept this server can produce: plain JSON, metadata-only
        (as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1) or aggregated discovery
        (as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2). Table and protobuf are skipped, so
        a client asking for a Table first gets plain JSON, as it falls back to on a real server."""
        for part in (self.headers.get("Accept") or "application/json").split(","):
            bits = [b.strip() for b in part.split(";")]
            mime = bits[0].lower()
            params = dict(b.split("=", 1) for b in bits[1:] if "=" in b)
            kind = params.get("as")
            if mime not in ("application/json", "*/*", "application/*"):
                continue
            if kind is None:
                return None
            if kind in ("PartialObjectMetadata", "PartialObjectMetadataList") and params.get("g") == "meta.k8s.io" \
                    and params.get("v") == "v1":
                return "meta"
            if kind == "APIGroupDiscoveryList" and params.get("g") == "apidiscovery.k8s.io" and params.get("v") == "v2":
                return "aggregated"
        return None

    def _send(self, code, data, ctype="application/json", headers=()):
        self.code = code
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self.audit_id)
        for w in self.warnings:
            self.send_header("Warning", '299 - "%s"' % w.replace("\\", "\\\\").replace('"', '\\"'))
        for k, v in headers:
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self._headers_buffer.append(b"\r\n")
        self.wfile.write(b"".join(self._headers_buffer) + data)
        self._headers_buffer = []

    def send_json(self, code, obj, headers=()):
        self._send(code, obj if isinstance(obj, bytes) else dumps(obj), headers=headers)

    def send_error_status(self, e):
        self.note += " (%s: %s)" % (e.reason, e.message[:300].replace("\n", " "))
        if e.close:
            self.close_connection = True
        self.send_json(e.code, e.status(), headers=e.headers)

    # ---- request

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            total = 0
            while True:
                line = self.rfile.readline(1024)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += n
                if total > MAX_BODY:
                    raise ApiError(413, "RequestEntityTooLarge", "the request body is too large", {}, close=True)
                parts.append(self.rfile.read(n))
                self.rfile.readline(1024)
            return b"".join(parts)
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid Content-Length", close=True)
        if n > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "the request body is too large", {}, close=True)
        return self.rfile.read(n) if n else b""

    def dispatch(self):
        t0 = time.monotonic()
        self.code = 0
        self.warnings = []
        self.audit_id = str(uuid.uuid4())
        self.note = ""
        api = self.server.api
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        route = None
        self.accept = self.negotiate()
        try:
            body = self.read_body()
            if self.user is None:
                auth = self.headers.get("Authorization") or ""
                if auth.startswith("Bearer ") and auth[7:].strip() in self.server.tokens:
                    self.user = self.server.tokens[auth[7:].strip()]
                else:
                    raise ApiError(401, "Unauthorized", "Unauthorized")
            if path.startswith("/_stand-in/"):
                self.stand_in(path, q, body)
            else:
                route = self.route(path, q)
                self.count(route)
                if route.kind == "resource" and route.rt.versions[route.version].deprecated:
                    v = route.rt.versions[route.version]
                    self.warnings.append(v.deprecation_warning or "%s %s is deprecated; use %s %s"
                                         % (route.rt.gv(route.version), route.rt.kind,
                                            route.rt.gv(route.rt.storage_version()), route.rt.kind))
                if self.fault(route, path, url.query):
                    return
                self.execute(route, q, body)
        except ApiError as e:
            self.send_error_status(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, TimeoutError):
            self.close_connection = True
            self.code = self.code or 499
        except Exception:
            self.server.log("internal error on %s %s:\n%s" % (self.command, self.path, traceback.format_exc()))
            try:
                self.send_error_status(ApiError(500, "InternalError", "an internal error occurred in "
                                                "the stand-in (see its log)", {}))
            except OSError:
                self.close_connection = True
        finally:
            ms = (time.monotonic() - t0) * 1000
            with api.stats_lock:
                api.stats["codes"][str(self.code)] = api.stats["codes"].get(str(self.code), 0) + 1
            warn = "".join(' warning="%s"' % w for w in self.warnings if "deprecated" not in w)
            self.server.log("%s %s %s %d %.1fms user=%s%s%s" % (
                self.client_address[0], self.command, self.path, self.code, ms, self.user or "-", self.note, warn))

    def count(self, route):
        verb = route.verb
        res = route.rt.qualified + ("/" + route.sub if route.sub else "") if route.rt else "discovery"
        k = "%s %s" % (verb, res)
        api = self.server.api
        with api.stats_lock:
            api.stats["requests_total"] += 1
            api.stats["requests"][k] = api.stats["requests"].get(k, 0) + 1

    def fault(self, route, path, query):
        api = self.server.api
        full = path + ("?" + query if query else "")
        hit = None
        with api.stats_lock:
            for f in api.faults:
                if f["verb"] not in ("*", route.verb, self.command):
                    continue
                if f.get("path_regex") and not re.search(f["path_regex"], full):
                    continue
                if f["count"] is not None:
                    if f["count"] <= 0:
                        continue
                    f["count"] -= 1
                f["hits"] += 1
                hit = dict(f)
                break
            api.faults = [f for f in api.faults if f["count"] is None or f["count"] > 0]
        if hit is None:
            return False
        self.note = " fault=%d" % hit["id"]
        if hit.get("delay_seconds"):
            time.sleep(float(hit["delay_seconds"]))
        if hit.get("close"):
            self.close_connection = True
            self.code = 0
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return True
        status = hit.get("status")
        if not status:
            return False
        reasons = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                   409: "Conflict", 410: "Expired", 422: "Invalid", 429: "TooManyRequests",
                   500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
        headers = [("Retry-After", str(hit["retry_after"]))] if hit.get("retry_after") else []
        e = ApiError(int(status), hit.get("reason") or reasons.get(int(status), "InternalError"),
                     hit.get("message") or "fault injected by the stand-in (fault %d)" % hit["id"],
                     {"retryAfterSeconds": hit["retry_after"]} if hit.get("retry_after") else {}, headers)
        self.send_error_status(e)
        return True

    def route(self, path, q):
        api = self.server.api
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        method = self.command
        if not parts:
            r = Route("discovery", name="root")
            r.verb = "get"
            return r
        if parts[0] in ("healthz", "livez", "readyz", "version") or parts[0] == "openapi":
            r = Route("discovery", name=parts[0], sub="/".join(parts[1:]))
            r.verb = "get"
            return r
        if parts[0] == "api":
            if len(parts) == 1:
                r = Route("discovery", name="api")
                r.verb = "get"
                return r
            if parts[1] != "v1":
                raise no_resource()
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis":
            if len(parts) <= 3:
                r = Route("discovery", name="apis", group=parts[1] if len(parts) > 1 else None,
                          version=parts[2] if len(parts) > 2 else None)
                r.verb = "get"
                return r
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise no_resource()
        if method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            raise method_not_allowed()
        if not rest:
            r = Route("discovery", name="apis", group=group, version=version)
            r.verb = "get"
            return r
        ns = name = sub = None
        if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize")):
            ns, plural, rest2 = rest[1], rest[2], rest[3:]
            rt = api.types.get((group, plural))
            if rt is None or not rt.namespaced:
                raise no_resource()
        else:
            plural, rest2 = rest[0], rest[1:]
            rt = api.types.get((group, plural))
            if rt is None:
                raise no_resource()
            if rt.namespaced and rest2:
                raise no_resource()
        if version not in rt.versions:
            raise no_resource()
        if len(rest2) > 2:
            raise no_resource()
        if rest2:
            name = rest2[0]
        if len(rest2) == 2:
            sub = rest2[1]
            if sub == "status" and rt.versions[version].status:
                pass
            elif sub == "scale" and rt.versions[version].scale:
                pass
            else:
                raise no_resource()
        r = Route("resource", rt, version, ns, name, sub, group)
        watch = q.get("watch") in ("true", "1", "True")
        if name is None:
            r.verb = {"GET": "watch" if watch else "list", "POST": "create",
                      "DELETE": "deletecollection"}.get(method)
            if r.verb is None:
                raise method_not_allowed()
            if method == "POST" and rt.namespaced and ns is None:
                raise method_not_allowed()
            if method == "DELETE" and rt.namespaced and ns is None:
                raise method_not_allowed()
        else:
            r.verb = {"GET": "watch" if watch else "get", "PUT": "update", "PATCH": "patch",
                      "DELETE": "delete"}.get(method)
            if r.verb is None or (sub and method == "DELETE"):
                raise method_not_allowed()
        return r

    def parse_body(self, body):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        try:
            if ctype in ("application/yaml", "application/x-yaml", "text/yaml") and yaml is not None:
                return yaml.load(body.decode("utf-8"), Loader=_YAML_LOADER)
            if ctype not in ("application/json", "*/*", ""):
                raise unsupported_media(ctype, ["application/json", "application/yaml"])
            return json.loads(body or b"null")
        except ApiError:
            raise
        except Exception as e:
            raise bad_request("the request body could not be decoded: %s" % str(e).splitlines()[0])

    def manager(self, q, apply=False):
        m = q.get("fieldManager")
        if m is None or m == "":
            if apply:
                raise bad_request("fieldManager is required for apply requests (application/apply-patch+yaml)")
            ua = self.headers.get("User-Agent") or "unknown"
            m = ua.split("/")[0][:128] or "unknown"
        if len(m) > 128:
            raise invalid_param("fieldManager", "must be at most 128 characters")
        return m

    def ctx(self, route, q, apply=False):
        fv = q.get("fieldValidation") or "Warn"
        if fv not in ("Ignore", "Warn", "Strict"):
            raise bad_request('fieldValidation must be one of "Ignore", "Warn" or "Strict", not %r' % fv)
        dry = q.get("dryRun")
        if dry not in (None, "", "All"):
            raise bad_request('dryRun must be "All"')
        return Ctx(self.manager(q, apply), sub=route.sub or "", version=route.version,
                   dry_run=dry == "All", validation=fv)

    def execute(self, route, q, body):
        api = self.server.api
        if route.kind == "discovery":
            return self.discovery(route, q)
        rt, version, ns, name, sub = route.rt, route.version, route.ns, route.name, route.sub
        verb = route.verb
        meta_only = self.accept == "meta" and sub is None
        if verb == "list":
            if meta_only:
                return self._send(200, api.list(rt, version, ns, q, True), META_LIST_CTYPE)
            self.send_json(200, api.list(rt, version, ns, q))
        elif verb == "watch":
            if name is not None:
                q = dict(q)
                q["fieldSelector"] = ",".join(x for x in (q.get("fieldSelector"), "metadata.name=" + name) if x)
            self.watch(rt, version, ns, q, meta_only)
        elif verb == "get":
            if sub == "scale":
                return self.send_json(200, api.get_scale(rt, version, ns, name))
            rec = api.get_rec(rt, ns, name)
            if rec is None:
                raise not_found(rt, name)
            if meta_only:
                return self._send(200, rec.json_meta(), META_CTYPE)
            self.send_json(200, rec.json(version))
        elif verb == "create":
            ctx = self.ctx(route, q)
            rec = api.create(ctx, rt, ns, self.parse_body(body))
            self.warnings.extend(ctx.warnings)
            self.send_json(201, rec.json(version))
        elif verb == "update":
            ctx = self.ctx(route, q)
            data = self.parse_body(body)
            if sub == "scale":
                out = api.update_scale(ctx, rt, ns, name, data)
                self.warnings.extend(ctx.warnings)
                return self.send_json(200, out)
            rec = api.update(ctx, rt, ns, name, data)
            self.warnings.extend(ctx.warnings)
            self.send_json(200, rec.json(version))
        elif verb == "patch":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            apply = ctype == "application/apply-patch+yaml"
            ctx = self.ctx(route, q, apply)
            force = q.get("force") in ("true", "1", "True")
            if force and not apply:
                raise bad_request("force is only allowed for apply patches")
            existed = api.get_rec(rt, ns, name) is not None
            out = api.patch(ctx, rt, ns, name, ctype, body, force)
            self.warnings.extend(ctx.warnings)
            if isinstance(out, dict):
                return self.send_json(200, out)
            self.send_json(201 if apply and not existed else 200, out.json(version))
        elif verb == "delete":
            opts = self.parse_body(body) if body.strip() else {}
            if not isinstance(opts, dict):
                raise bad_request("the delete options must be an object")
            opts = dict(opts)
            if q.get("propagationPolicy"):
                opts["propagationPolicy"] = q["propagationPolicy"]
            if q.get("dryRun") == "All":
                opts["dryRun"] = ["All"]
            ctx = self.ctx(route, q)
            ctx.dry_run = ctx.dry_run or "All" in (opts.get("dryRun") or ())
            deleted, rec = api.delete(ctx, rt, ns, name, opts)
            if deleted:
                d = _details(rt, name)
                d["uid"] = rec.obj["metadata"]["uid"]
                self.send_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                     "status": "Success", "details": d})
            else:
                self.send_json(200, rec.json(version))
        elif verb == "deletecollection":
            opts = self.parse_body(body) if body.strip() else {}
            opts = dict(opts or {})
            if q.get("propagationPolicy"):
                opts["propagationPolicy"] = q["propagationPolicy"]
            ctx = self.ctx(route, q)
            self.send_json(200, api.delete_collection(ctx, rt, version, ns, q, opts))
        else:
            raise method_not_allowed()

    # ---- watch streams

    def watch(self, rt, version, ns, q, meta_only=False):
        api = self.server.api
        try:
            timeout = int(q.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        except ValueError:
            raise bad_request("timeoutSeconds must be an integer")
        w, err = api.start_watch(rt, version, ns, q, self.path, meta_only)
        with api.stats_lock:
            api.open_watches += 1
            api.stats["watches_total"] += 1
        sent = 0
        t0 = time.monotonic()
        how = "timeout"
        try:
            self.code = 200
            self.send_response(200)
            self.send_header("Content-Type", META_CTYPE if meta_only else "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Audit-Id", self.audit_id)
            for wmsg in self.warnings:
                self.send_header("Warning", '299 - "%s"' % wmsg.replace('"', '\\"'))
            self.end_headers()
            deadline = t0 + timeout
            if err is not None:
                self.write_chunk(dumps({"type": "ERROR", "object": err.status()}) + b"\n")
                how = "expired"
                deadline = t0
            interval = self.server.bookmark_seconds
            next_bm = t0 + interval if w.bookmarks else float("inf")
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                try:
                    item = w.q.get(timeout=max(0.0, min(deadline, next_bm, now + 1.0) - now))
                except queue.Empty:
                    now = time.monotonic()
                    if now >= next_bm:
                        api.bookmark(w)
                        next_bm = now + interval
                    elif self.peer_gone():
                        how = "client gone"
                        self.close_connection = True
                        return
                    continue
                batch = []
                stop = None
                while True:
                    if item in (CLOSE, ABORT):
                        stop = item
                        break
                    batch.append(self.event_line(w, item))
                    if len(batch) >= 200:
                        break
                    try:
                        item = w.q.get_nowait()
                    except queue.Empty:
                        break
                if batch:
                    self.write_chunk(b"".join(batch))
                    sent += len(batch)
                if stop == ABORT:
                    how = "aborted by /_stand-in/close-watches"
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if stop == CLOSE:
                    how = "closed by /_stand-in/close-watches"
                    break
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, TimeoutError, OSError):
            how = "client gone"
            self.close_connection = True
            return
        finally:
            api.stop_watch(w)
            with api.stats_lock:
                api.open_watches -= 1
            self.note = " watch %s after %.1fs, %d events" % (how, time.monotonic() - t0, sent)
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def event_line(self, w, item):
        etype = item[0]
        if etype == "BOOKMARK":
            meta = {"resourceVersion": str(item[1])}
            if item[2]:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            if w.meta_only:
                return dumps({"type": "BOOKMARK", "object": {"kind": "PartialObjectMetadata",
                                                             "apiVersion": "meta.k8s.io/v1", "metadata": meta}}) + b"\n"
            return dumps({"type": "BOOKMARK", "object": {"kind": w.rt.kind, "apiVersion": w.rt.gv(w.version),
                                                         "metadata": meta}}) + b"\n"
        body = item[1].json_meta() if w.meta_only else item[1].json(w.version)
        return b'{"type":"' + etype.encode() + b'","object":' + body + b"}\n"

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def peer_gone(self):
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            if not r:
                return False
            self.connection.settimeout(0.05)
            try:
                self.connection.recv(1)
            except (ssl.SSLWantReadError, TimeoutError, socket.timeout):
                return False
            finally:
                self.connection.settimeout(self.timeout)
            return True  # readable during a watch: EOF, close_notify or a stray byte; either way done
        except (OSError, ValueError, ssl.SSLError):
            return True

    # ---- discovery

    def discovery(self, route, q):
        api = self.server.api
        name = route.name
        if name in ("healthz", "livez", "readyz"):
            if route.sub:
                return self._send(200 if route.sub in ("ping", "log", "etcd") else 404,
                                  b"ok" if route.sub in ("ping", "log", "etcd") else b"not found",
                                  "text/plain; charset=utf-8")
            if "verbose" in q:
                text = "[+]ping ok\n[+]log ok\n[+]store ok (in memory)\n%s\n%s check passed\n" % (
                    api.schema_summary(), name)
                return self._send(200, text.encode(), "text/plain; charset=utf-8")
            return self._send(200, b"ok", "text/plain; charset=utf-8")
        if name == "version":
            return self.send_json(200, dict(K8S_VERSION, gitCommit="0" * 40, gitTreeState="clean",
                                            buildDate="2025-01-01T00:00:00Z", goVersion="none (Python %s)"
                                            % sys.version.split()[0], compiler="stand-in",
                                            platform="linux/amd64"))
        if name == "openapi":
            raise no_resource()
        if name == "root":
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
            for g, rts in api.by_group.items():
                if g:
                    paths.append("/apis/" + g)
                    paths.extend("/apis/%s/%s" % (g, v) for v in self.group_versions(rts))
            return self.send_json(200, {"paths": sorted(set(paths))})
        if name in ("api", "apis") and route.group is None and self.accept == "aggregated":
            return self._send(200, dumps(self.aggregated(name)), AGGREGATED_CTYPE)
        if name == "api":
            host, port = self.server.server_address[:2]
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                                        "serverAddress": "%s:%d" % (host, port)}]})
        group, version = route.group, route.version
        if group is None:
            groups = [self.group_doc(g, rts) for g, rts in sorted(api.by_group.items()) if g]
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        rts = api.by_group.get(group) if route.kind == "discovery" and group != "" else None
        if group == "" and version == "v1":
            rts = api.by_group[""]
        if not rts:
            raise no_resource()
        if version is None:
            return self.send_json(200, dict(self.group_doc(group, rts), kind="APIGroup", apiVersion="v1"))
        if version not in self.group_versions(rts):
            raise no_resource()
        resources = []
        for rt in sorted(rts, key=lambda r: r.plural):
            v = rt.versions.get(version)
            if v is None:
                continue
            res = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                   "kind": rt.kind, "verbs": ["create", "delete", "deletecollection", "get", "list",
                                              "patch", "update", "watch"]}
            if rt.short_names:
                res["shortNames"] = rt.short_names
            if rt.categories:
                res["categories"] = rt.categories
            resources.append(res)
            if v.status:
                resources.append({"name": rt.plural + "/status", "singularName": "", "namespaced": rt.namespaced,
                                  "kind": rt.kind, "verbs": ["get", "patch", "update"]})
            if v.scale:
                resources.append({"name": rt.plural + "/scale", "singularName": "", "namespaced": rt.namespaced,
                                  "group": "autoscaling", "version": "v1", "kind": "Scale",
                                  "verbs": ["get", "patch", "update"]})
        self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1",
                             "groupVersion": "%s/%s" % (group, version) if group else version,
                             "resources": resources})

    def aggregated(self, which):
        """apidiscovery.k8s.io/v2 APIGroupDiscoveryList of the core group (/api) or the others (/apis)."""
        api = self.server.api
        items = []
        for group, rts in sorted(api.by_group.items()):
            if (which == "api") != (group == ""):
                continue
            versions = []
            for v in self.group_versions(rts):
                resources = []
                for rt in sorted(rts, key=lambda r: r.plural):
                    ver = rt.versions.get(v)
                    if ver is None:
                        continue
                    rk = {"group": group, "version": v, "kind": rt.kind}
                    res = {"resource": rt.plural, "responseKind": rk, "scope": "Namespaced" if rt.namespaced else "Cluster",
                           "singularResource": rt.singular,
                           "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}
                    if rt.short_names:
                        res["shortNames"] = rt.short_names
                    if rt.categories:
                        res["categories"] = rt.categories
                    subs = []
                    if ver.status:
                        subs.append({"subresource": "status", "responseKind": rk, "verbs": ["get", "patch", "update"]})
                    if ver.scale:
                        subs.append({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1",
                                                                              "kind": "Scale"},
                                     "verbs": ["get", "patch", "update"]})
                    if subs:
                        res["subresources"] = subs
                    resources.append(res)
                entry = {"version": v, "resources": resources, "freshness": "Current"}
                versions.append(entry)
            if group:
                pref = self.group_doc(group, rts)["preferredVersion"]["version"]
                versions.sort(key=lambda e: e["version"] != pref)
            items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": versions})
        return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}

    @staticmethod
    def group_versions(rts):
        vs = set()
        for rt in rts:
            vs.update(rt.versions)
        return sorted(vs, key=version_key)

    def group_doc(self, group, rts):
        vs = self.group_versions(rts)
        # the preferred version is the storage version most of the group's kinds use
        storage = [rt.storage_version() for rt in rts]
        preferred = sorted(vs, key=lambda v: (-storage.count(v), version_key(v)))[0]
        return {"name": group, "versions": [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in vs],
                "preferredVersion": {"groupVersion": "%s/%s" % (group, preferred), "version": preferred}}

    # ---- /_stand-in/: test hooks, not Kubernetes

    def stand_in(self, path, q, body):
        api = self.server.api
        what = path[len("/_stand-in/"):].strip("/")
        data = {}
        if body.strip():
            try:
                data = json.loads(body)
            except ValueError:
                raise bad_request("the body must be JSON")
        m = self.command
        if what == "faults" and m == "POST":
            if not isinstance(data, dict):
                raise bad_request("a fault is a JSON object")
            if data.get("path_regex"):
                try:
                    re.compile(data["path_regex"])
                except re.error as e:
                    raise bad_request("path_regex: %s" % e)
            f = {"id": next(api.fault_ids), "path_regex": data.get("path_regex") or "",
                 "verb": data.get("verb") or "*", "status": data.get("status"),
                 "count": data.get("count", 1), "delay_seconds": data.get("delay_seconds"),
                 "close": bool(data.get("close")), "message": data.get("message"),
                 "reason": data.get("reason"), "retry_after": data.get("retry_after"), "hits": 0}
            if f["count"] is not None and f["count"] < 0:
                f["count"] = None
            with api.stats_lock:
                api.faults.append(f)
            self.server.log("stand-in: fault %d added: %s" % (f["id"], json.dumps(f)))
            return self.send_json(201, f)
        if what == "faults" and m == "GET":
            with api.stats_lock:
                return self.send_json(200, {"faults": list(api.faults)})
        if what == "faults" and m == "DELETE":
            with api.stats_lock:
                n = len(api.faults)
                api.faults = []
            return self.send_json(200, {"removed": n})
        if what.startswith("faults/") and m == "DELETE":
            fid = what.split("/", 1)[1]
            with api.stats_lock:
                n = len(api.faults)
                api.faults = [f for f in api.faults if str(f["id"]) != fid]
                n -= len(api.faults)
            return self.send_json(200 if n else 404, {"removed": n})
        if what == "close-watches" and m == "POST":
            mode = (data or {}).get("mode") or "end"
            if mode not in ("end", "abort"):
                raise bad_request('mode is "end" (finish the chunked stream) or "abort" (drop the connection)')
            n = api.close_watches(mode, (data or {}).get("path_regex"))
            self.server.log("stand-in: %d watch streams told to %s" % (n, mode))
            return self.send_json(200, {"closed": n, "mode": mode})
        if what == "compact" and m == "POST":
            rv = api.compact()
            return self.send_json(200, {"oldestWatchableResourceVersion": str(rv)})
        if what == "stats" and m == "GET":
            with api.lock:
                objects = {rt.qualified: len(api.objs[k]) for k, rt in api.types.items() if api.objs[k]}
                rv = api.rv
                floor = api.history_floor
                nhist = len(api.history)
                watchers = sum(len(s) for s in api.watchers.values())
            with api.stats_lock:
                out = {"requests_total": api.stats["requests_total"], "requests": dict(api.stats["requests"]),
                       "responses_by_code": dict(api.stats["codes"]), "watches_open": api.open_watches,
                       "watchers_registered": watchers, "watches_total": api.stats["watches_total"],
                       "connections_open": api.open_conns, "connections_total": api.stats["connections_total"],
                       "objects": objects, "resourceVersion": str(rv),
                       "history": {"events": nhist, "oldestWatchableResourceVersion": str(floor)},
                       "faults": list(api.faults), "schemas": api.schema_mode}
            return self.send_json(200, out)
        if what == "stats" and m == "DELETE":
            with api.stats_lock:
                api.stats["requests"] = {}
                api.stats["codes"] = {}
                api.stats["requests_total"] = 0
            return self.send_json(200, {"reset": True})
        raise ApiError(404, "NotFound", "no such stand-in endpoint: %s %s" % (m, path), {})


def invalid_param(name, why):
    return ApiError(422, "Invalid", "%s: Invalid value: %s" % (name, why), {})


# ---------------------------------------------------------------------------------------------
# main


def main():
    ap = argparse.ArgumentParser(description="Kubernetes API server stand-in for tests (see README.md)")
    ap.add_argument("--dir", required=True, help="state folder made by start.sh (certificates, port file)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = a free port, written to DIR/port")
    ap.add_argument("--crds", default=os.environ.get("MAGNUM_TEST_CAPI_CRDS"),
                    help="folder of CRD manifests (env MAGNUM_TEST_CAPI_CRDS); absent = built-in list, no validation")
    ap.add_argument("--cert", help="server certificate (default DIR/server.crt)")
    ap.add_argument("--key", help="server key (default DIR/server.key)")
    ap.add_argument("--ca", help="client CA (default DIR/ca.crt)")
    ap.add_argument("--token-file", help="bearer tokens, one 'token[,user]' a line (default DIR/token if present)")
    ap.add_argument("--history", type=int, default=10000, help="watch events kept for resumed watches")
    ap.add_argument("--bookmark-seconds", type=float,
                    default=float(os.environ.get("MAGNUM_TEST_KUBE_BOOKMARK_SECONDS") or 5))
    args = ap.parse_args()

    log_lock = threading.Lock()

    def log(line):
        ts = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        with log_lock:
            sys.stderr.write("%s %s\n" % (ts, line))
            sys.stderr.flush()

    d = args.dir
    t0 = time.monotonic()
    api = Api(args.crds, history=args.history, log=log)
    if api.schema_mode:
        log("stand-in: %s (loaded in %.1fs)" % (api.schema_summary(), time.monotonic() - t0))
    else:
        for _ in range(3):
            log("stand-in: WARNING %s" % api.schema_summary())
    tokens = {}
    tf = args.token_file or (os.path.join(d, "token") if os.path.exists(os.path.join(d, "token")) else None)
    if tf:
        with open(tf, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    tok, _, user = line.partition(",")
                    tokens[tok.strip()] = user.strip() or "token-user"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert or os.path.join(d, "server.crt"), args.key or os.path.join(d, "server.key"))
    ctx.load_verify_locations(args.ca or os.path.join(d, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    srv = Server((args.host, args.port), api, ctx, tokens, args.bookmark_seconds, log)
    api.gc.start()
    port = srv.server_address[1]
    tmp = os.path.join(d, "port.tmp")
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, os.path.join(d, "port"))
    log("stand-in: listening on https://%s:%d (pid %d, %d kinds, bookmarks every %gs, history %d events)"
        % (args.host, port, os.getpid(), len(api.types), args.bookmark_seconds, args.history))

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        srv.serve_forever(poll_interval=0.5)
    except SystemExit:
        pass
    finally:
        log("stand-in: stopping")
        srv.server_close()


if __name__ == "__main__":
    main()
