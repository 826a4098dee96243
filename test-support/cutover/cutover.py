"""The cut-over rehearsal's steps and checks, for run.sh (which prepared WORKDIR).

    cutover.py WORKDIR

Starts HAProxy, upstream's magnum-conductor and magnum-api (with the stand-in driver of
standin/ on PYTHONPATH), makes templates, a quota and clusters through upstream's API, then,
with a client sending requests through HAProxy all along:
  1. magnumd conductor joins, upstream's conductor stops;
  2. magnumd api joins HAProxy; GETs compared between the two APIs; upstream's API is drained
     and stops;
  3. rollback: upstream's API starts and joins HAProxy; GETs compared again; magnumd's API is
     drained and stops; upstream's conductor starts; magnumd's conductor stops.
Prints "cutover: ok|FAIL ..." lines and the figures; writes "PASSED FAILED" to WORKDIR/result.
Every process is started in a session of its own, its id in WORKDIR/pids/NAME.pid (run.sh's
exit trap stops whatever is left).
"""
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid as uuidlib

import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

W = sys.argv[1]


def read_env(path):
    env = {}
    for line in open(path):
        m = re.match(r"(?:export\s+)?([A-Z0-9_]+)=(.*)$", line.strip())
        if m:
            v = m.group(2)
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
                v = v[1:-1]
            env[m.group(1)] = v
    return env


E = read_env(os.path.join(W, "ports.env"))
KS = read_env(os.path.join(W, "keystone/env.sh"))
OS = read_env(os.path.join(W, "openstack/env.sh"))
FRONT = "http://127.0.0.1:%s" % E["FRONT_PORT"]
UP = "http://127.0.0.1:%s" % E["UPSTREAM_PORT"]
RS = "http://127.0.0.1:%s" % E["RUST_PORT"]
CONF = os.path.join(W, "magnum.conf")
VENV = E["UPSTREAM_VENV"]
TAG = E["TAG"]
LATEST = {"OpenStack-API-Version": "container-infra latest"}
V110 = {"OpenStack-API-Version": "container-infra 1.10"}

passed = 0
failed = 0
T0 = time.time()


def log(msg):
    print("cutover: %s" % msg, file=sys.stderr, flush=True)


def result(ok, msg):
    global passed, failed
    if ok:
        passed += 1
        print("cutover: ok   %s" % msg, flush=True)
    else:
        failed += 1
        print("cutover: FAIL %s" % msg, flush=True)
    with open(os.path.join(W, "result"), "w") as f:
        f.write("%d %d\n" % (passed, failed))
    return ok


def elapsed():
    return "%.0f s" % (time.time() - T0)


# --- processes --------------------------------------------------------------------------------

def spawn(name, argv, extra_env=None):
    env = dict(os.environ)
    env.update(extra_env or {})
    logf = open(os.path.join(W, "logs", name + ".log"), "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                         env=env, start_new_session=True)
    with open(os.path.join(W, "pids", name + ".pid"), "w") as f:
        f.write(str(p.pid))
    return p


PROCS = {}


def start(name, argv, extra_env=None):
    PROCS[name] = spawn(name, argv, extra_env)


def stop(name, grace=30):
    """SIGTERM to NAME's process group; SIGKILL after GRACE seconds. Returns the seconds it took."""
    p = PROCS.pop(name)
    t = time.time()
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        log("%s did not stop within %d s of SIGTERM; killing it" % (name, grace))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    try:
        os.killpg(p.pid, signal.SIGKILL)  # anything it left in its group
    except ProcessLookupError:
        pass
    os.unlink(os.path.join(W, "pids", name + ".pid"))
    return time.time() - t


def alive(name):
    return name in PROCS and PROCS[name].poll() is None


def tail(name, n=15):
    try:
        lines = open(os.path.join(W, "logs", name + ".log"), errors="replace").read().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def wait_until(limit, what, fn, interval=0.3):
    deadline = time.time() + limit
    while True:
        try:
            v = fn()
            if v:
                return v
        except Exception:
            pass
        if time.time() >= deadline:
            log("timed out after %d s waiting for %s" % (limit, what))
            return None
        time.sleep(interval)


PY_ENV = {"PYTHONPATH": E["STANDIN"], "PYTHONDONTWRITEBYTECODE": "1", "PYTHONWARNINGS": "ignore"}


def start_upstream(kind):
    name = "upstream-" + kind
    start(name, [os.path.join(VENV, "bin/magnum-" + kind), "--config-file", CONF,
                 "--config-file", os.path.join(W, name + ".conf")], PY_ENV)


def start_magnumd(kind):
    name = "magnumd-" + kind
    # The RPC server's debug lines name each call's msg_id (see upstream_stop_losses).
    start(name, [E["MAGNUMD"], "--config-file", CONF, "--config-file",
                 os.path.join(W, name + ".conf"), kind],
          {"RUST_LOG": "info,magnum_rpc::oslo::server=debug"})


# --- the database -----------------------------------------------------------------------------

def sql(query):
    out = subprocess.run(["mariadb", "-uroot", "-N", "-B", E["DB"], "-e", query],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def clusters_in_db():
    rows = sql("SELECT c.uuid, c.status, (SELECT n.node_count FROM nodegroup n WHERE "
               "n.cluster_id = c.uuid AND n.is_default = 1 AND n.role <> 'master' LIMIT 1) "
               "FROM cluster c")
    return {r[0]: (r[1], r[2]) for r in rows}


def service_beat(host):
    rows = sql("SELECT report_count FROM magnum_service WHERE host = '%s' "
               "AND `binary` = 'magnum-conductor'" % host)
    return int(rows[0][0]) if rows else -1


def schema_dump():
    db = E["DB"]
    parts = []
    for q in [
        "SELECT TABLE_NAME, ENGINE, TABLE_COLLATION FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = '%s' ORDER BY 1" % db,
        "SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, COLUMN_TYPE, "
        "COLUMN_KEY, EXTRA, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = '%s' ORDER BY 1, 3" % db,
        "SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE, INDEX_TYPE "
        "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = '%s' ORDER BY 1, 2, 3" % db,
        "SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, "
        "k.REFERENCED_COLUMN_NAME, t.CONSTRAINT_TYPE FROM information_schema.KEY_COLUMN_USAGE k "
        "JOIN information_schema.TABLE_CONSTRAINTS t ON t.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA "
        "AND t.TABLE_NAME = k.TABLE_NAME AND t.CONSTRAINT_NAME = k.CONSTRAINT_NAME "
        "WHERE k.TABLE_SCHEMA = '%s' ORDER BY 1, 2, k.ORDINAL_POSITION" % db,
        "SELECT version_num FROM alembic_version",
    ]:
        parts.append("\n".join("\t".join(r) for r in sql(q)))
    return parts


# --- Keystone ---------------------------------------------------------------------------------

def token(user, project):
    pw = KS["MAGNUM_TEST_%s_PASSWORD" % user.upper().replace("-", "_")]
    auth = v3.Password(auth_url=KS["MAGNUM_TEST_AUTH_URL"], username=user, password=pw,
                       project_name=project, user_domain_name="Default",
                       project_domain_name="Default")
    return ks_session.Session(auth=auth).get_token()


TOKENS = {
    "demo-member": token("demo-member", "demo"),
    "admin": token("admin", "admin"),
    "alt-member": token("alt-member", "alt"),
}


def call(base, method, path, who="demo-member", body=None, headers=None, timeout=30):
    h = dict(LATEST)
    h.update(headers or {})
    if who:
        h["X-Auth-Token"] = TOKENS[who]
    return requests.request(method, base + "/v1" + path, json=body, headers=h, timeout=timeout)


# --- HAProxy ----------------------------------------------------------------------------------

HA_SOCK = os.path.join(W, "haproxy.sock")


def haproxy(cmd):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(HA_SOCK)
    s.sendall((cmd + "\n").encode())
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    return out.decode()


def ha_server(name):
    """(status, current sessions) of server NAME of the API backend."""
    for line in haproxy("show stat").splitlines():
        f = line.split(",")
        if len(f) > 17 and f[0] == "magnum_api" and f[1] == name:
            return f[17], int(f[4] or 0)
    return None, None


def ha_enable(name):
    haproxy("set server magnum_api/%s state ready" % name)
    return wait_until(30, "%s UP in HAProxy" % name, lambda: ha_server(name)[0] == "UP")


def ha_drain(name):
    """Takes NAME out of rotation (maintenance) and waits until its sessions are done."""
    haproxy("set server magnum_api/%s state maint" % name)
    return wait_until(60, "%s drained" % name, lambda: ha_server(name)[1] == 0, 0.1)


def start_haproxy():
    cfg = os.path.join(W, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write("""global
    stats socket %(sock)s mode 600 level admin
    maxconn 256

defaults
    mode http
    timeout connect 2s
    timeout client 90s
    timeout server 90s
    timeout http-keep-alive 5s
    retries 3
    option redispatch

frontend magnum
    bind 127.0.0.1:%(front)s
    default_backend magnum_api

backend magnum_api
    balance roundrobin
    option httpchk GET /
    http-check expect status 200
    server upstream 127.0.0.1:%(up)s check inter 1s fall 2 rise 1
    server magnumd 127.0.0.1:%(rs)s check inter 1s fall 2 rise 1 disabled
""" % {"sock": HA_SOCK, "front": E["FRONT_PORT"], "up": E["UPSTREAM_PORT"], "rs": E["RUST_PORT"]})
    start("haproxy", ["haproxy", "-db", "-f", cfg])
    return wait_until(15, "HAProxy's socket", lambda: ha_server("upstream")[0] is not None)


def api_answers(base):
    return requests.get(base + "/", timeout=3).status_code == 200


# --- the client's load ------------------------------------------------------------------------

class Load(threading.Thread):
    """demo-member through HAProxy: creates, resizes of completed clusters, deletes of settled
    ones, and reads, one at a time, ~3 a second. Every request is recorded with the step it
    was sent in."""

    def __init__(self, templates):
        super().__init__(daemon=True)
        self.templates = templates
        self.step = "setup"
        self.records = []
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.idle = threading.Event()
        self.created = []     # accepted creates, oldest first
        self.resized = set()
        self.deleted = set()
        self.http = requests.Session()
        self.n = 0

    def send(self, op, method, path, cluster=None, body=None):
        h = dict(V110)
        h["X-Auth-Token"] = TOKENS["demo-member"]
        step = self.step  # the step it was sent in, not the one it ended in
        t = time.time()
        try:
            r = self.http.request(method, FRONT + "/v1" + path, json=body, headers=h, timeout=30)
            status, detail = r.status_code, (r.text[:300] if r.status_code >= 300 else "")
        except Exception as e:
            r, status, detail = None, 0, "%s: %s" % (type(e).__name__, str(e)[:200])
        rec = {"step": step, "op": op, "cluster": cluster, "status": status,
               "t": round(t - T0, 2), "latency": round(time.time() - t, 3), "detail": detail}
        if op == "create" and r is not None and 200 <= status < 300:
            rec["cluster"] = r.json().get("uuid")
        self.records.append(rec)
        return r, status

    def live(self):
        return [c for c in self.created if c not in self.deleted]

    def run(self):
        while not self.stop.is_set():
            if self.paused.is_set():
                self.idle.set()
                time.sleep(0.1)
                continue
            self.idle.clear()
            self.n += 1
            k = self.n % 5
            if k in (0, 1):
                body = {"name": "load-%s-%d" % (TAG, self.n), "master_count": 1, "node_count": 1,
                        "cluster_template_id": self.templates[self.n % len(self.templates)]}
                r, st = self.send("create", "POST", "/clusters", body=body)
                if 200 <= st < 300:
                    self.created.append(self.records[-1]["cluster"])
            elif k == 2:
                self.send("list", "GET", "/clusters")
            elif k == 3:
                cands = [c for c in self.live() if c not in self.resized]
                if cands:
                    c = cands[0]
                    r, st = self.send("show", "GET", "/clusters/%s" % c, cluster=c)
                    if st == 200 and r.json().get("status") == "CREATE_COMPLETE":
                        r, st = self.send("resize", "POST", "/clusters/%s/actions/resize" % c,
                                          cluster=c, body={"node_count": 2})
                        if 200 <= st < 300:
                            self.resized.add(c)
            else:
                live = self.live()
                if len(live) > 4:
                    c = live[0]
                    r, st = self.send("show", "GET", "/clusters/%s" % c, cluster=c)
                    if st == 200 and r.json().get("status", "").endswith("_COMPLETE"):
                        r, st = self.send("delete", "DELETE", "/clusters/%s" % c, cluster=c)
                        if 200 <= st < 300:
                            self.deleted.add(c)
            time.sleep(0.3)
        self.idle.set()

    def pause(self):
        self.paused.set()
        self.idle.clear()
        wait_until(60, "the client to pause", self.idle.is_set, 0.05)

    def resume(self):
        self.paused.clear()


def outcome(rec, db, deleted_ok):
    """'done', 'failed' or 'waiting' for an accepted mutation, from the database's rows."""
    c = rec["cluster"]
    row = db.get(c)
    if row is not None and row[0].endswith("FAILED"):
        return "failed"
    if c in deleted_ok:  # a delete of it was accepted (in this step or a later one)
        return "done" if row is None else "waiting"
    if row is None:
        return "waiting"  # upstream's API casts the create: the row comes with the conductor
    status, workers = row
    if rec["op"] == "create":
        return "waiting" if status == "CREATE_IN_PROGRESS" else "done"
    if rec["op"] == "resize":
        return "done" if workers == "2" and status == "UPDATE_COMPLETE" else "waiting"
    return "waiting"


# When upstream's conductor got SIGTERM and when it was gone (seconds since T0).
UPSTREAM_CONDUCTOR_STOP = []
TIMED_OUT = re.compile(r"Timed out waiting for a reply to message ID ([0-9a-f]{32})")


def upstream_stop_losses(recs):
    """Calls upstream's conductor took and never answered as it stopped: oslo.messaging acks a
    call when it takes it, before running it, so a call taken as SIGTERM arrives is gone with
    the process. Such a request is one upstream's API answered 500 with oslo's reply timeout,
    sent while upstream's conductor was stopping, whose msg_id magnumd's conductor never
    received (its RPC server logs every msg_id at debug). Counted, not failed."""
    if not UPSTREAM_CONDUCTOR_STOP:
        return []
    begin, end = UPSTREAM_CONDUCTOR_STOP
    try:
        ours = open(os.path.join(W, "logs", "magnumd-conductor.log")).read()
    except OSError:
        return []
    out = []
    for r in recs:
        m = TIMED_OUT.search(r["detail"]) if r["status"] == 500 else None
        if m and begin - 1 <= r["t"] <= end and m.group(1) not in ours:
            out.append(r)
    return out


def check_step(load, step, title, limit=60):
    """Waits (up to LIMIT s) until every request of STEP the client was told succeeded is
    carried out, and prints the step's figures."""
    recs = [r for r in load.records if r["step"] == step]
    muts = [r for r in recs if r["op"] in ("create", "resize", "delete")]
    accepted = [r for r in muts if 200 <= r["status"] < 300]
    gets = [r for r in recs if r["op"] in ("list", "show")]
    # Upstream's own race: its conductor inserts a cluster, then its nodegroups, in separate
    # transactions; a list in between is refused (master_count 0). Counted, not failed.
    race = [r for r in recs if r["op"] == "list" and r["status"] == 400
            and "master_count" in r["detail"] and "Value: '0'" in r["detail"]]
    theirs = upstream_stop_losses(recs)
    refused = [r for r in recs if r["status"] >= 300 and r not in race and r not in theirs]
    unanswered = [r for r in recs if r["status"] == 0]
    t = time.time()
    done = set()
    while True:
        deleted_ok = {r["cluster"] for r in load.records if r["op"] == "delete" and 200 <= r["status"] < 300}
        db = clusters_in_db()
        states = []
        for i, r in enumerate(accepted):
            o = "done" if i in done else outcome(r, db, deleted_ok)
            if o == "done":
                done.add(i)
            states.append((r, o))
        waiting = [r for r, o in states if o == "waiting"]
        if not waiting or time.time() - t > limit:
            break
        time.sleep(1)
    # Not carried out: failed, or never there; stuck: still *_IN_PROGRESS.
    stuck = [r for r, o in states if o == "waiting"
             and (db.get(r["cluster"]) or ("",))[0].endswith("_IN_PROGRESS")]
    lost = [r for r, o in states if o != "done" and r not in stuck]
    lat = sorted(r["latency"] for r in recs if r["status"])
    worst = lat[-1] if lat else 0
    result(not lost and not stuck and not refused and not unanswered,
           "%s: sent %d (%d creates, %d resizes, %d deletes, %d reads), accepted %d, refused %d, "
           "unanswered %d, lost %d, stuck in progress %d; lists refused by upstream's own create "
           "race %d; calls lost by upstream's conductor as it stopped %d; slowest answer %.2f s; "
           "carried out within %.0f s"
           % (title, len(recs), sum(r["op"] == "create" for r in muts),
              sum(r["op"] == "resize" for r in muts), sum(r["op"] == "delete" for r in muts),
              len(gets), sum(1 for r in recs if 200 <= r["status"] < 300), len(refused),
              len(unanswered), len(lost), len(stuck), len(race), len(theirs), worst,
              time.time() - t))
    for r in theirs:
        log("  lost by upstream's conductor as it stopped (magnumd's never received it): %s"
            % json.dumps(r))
    for r in (refused + unanswered)[:5]:
        log("  refused/unanswered: %s" % json.dumps(r))
    for r in (lost + stuck)[:5]:
        log("  not carried out: %s -> %s" % (json.dumps(r), clusters_in_db().get(r["cluster"])))


# --- the GET comparison -----------------------------------------------------------------------

def normalise(v):
    """What must differ between the two APIs: the host:port in links, request ids."""
    if isinstance(v, dict):
        return {k: ("<request id>" if k == "request_id" else normalise(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [normalise(x) for x in v]
    if isinstance(v, str):
        return v.replace(UP, "http://<api>").replace(RS, "http://<api>")
    return v


def answer(base, path, who, headers):
    h = dict(headers)
    if who:
        h["X-Auth-Token"] = TOKENS[who]
    r = requests.get(base + path, headers=h, timeout=30)
    try:
        body = normalise(r.json())
    except ValueError:
        body = normalise(r.text)
    return r.status_code, body


def diff(a, b, at=""):
    if type(a) is not type(b):
        return ["%s: %s != %s" % (at or "/", json.dumps(a)[:200], json.dumps(b)[:200])]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append("%s/%s: only upstream has it (%s)" % (at, k, json.dumps(a[k])[:200]))
            elif k not in a:
                out.append("%s/%s: only ours has it (%s)" % (at, k, json.dumps(b[k])[:200]))
            else:
                out += diff(a[k], b[k], "%s/%s" % (at, k))
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return ["%s: %d items upstream, %d ours" % (at or "/", len(a), len(b))]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, "%s[%d]" % (at, i))
        return out
    return [] if a == b else ["%s: upstream %s, ours %s" % (at or "/", json.dumps(a)[:300], json.dumps(b)[:300])]


def get_list(fx):
    c1, c2, c3 = fx["clusters"]
    t_demo, t_pub = fx["templates"]
    ng = fx["nodegroup"]
    demo = KS["MAGNUM_TEST_DEMO_PROJECT_ID"]
    nope = str(uuidlib.uuid4())
    d, a, alt = "demo-member", "admin", "alt-member"
    reqs = [
        (None, "/"), (None, "/v1"), (None, "/v1/"),
        (d, "/v1/clustertemplates"), (d, "/v1/clustertemplates/detail"),
        (d, "/v1/clustertemplates/%s" % t_demo), (d, "/v1/clustertemplates/%s" % t_pub),
        (d, "/v1/clustertemplates/cutover-demo"),
        (d, "/v1/clustertemplates?limit=1"), (d, "/v1/clustertemplates?limit=1&marker=%s" % t_demo),
        (d, "/v1/clustertemplates?sort_key=name&sort_dir=desc"),
        (a, "/v1/clustertemplates"), (alt, "/v1/clustertemplates"),
        (d, "/v1/clusters"), (d, "/v1/clusters/detail"),
        (d, "/v1/clusters/%s" % c1), (d, "/v1/clusters/%s" % c2), (d, "/v1/clusters/cutover-c3"),
        (d, "/v1/clusters?limit=2"), (d, "/v1/clusters?limit=1&marker=%s" % c1),
        (d, "/v1/clusters?sort_key=name&sort_dir=desc"), (d, "/v1/clusters/detail?limit=1"),
        (a, "/v1/clusters"), (a, "/v1/clusters/detail"), (alt, "/v1/clusters"),
        (d, "/v1/clusters/%s/nodegroups" % c1), (d, "/v1/clusters/%s/nodegroups?role=worker" % c1),
        (d, "/v1/clusters/%s/nodegroups/%s" % (c1, ng)),
        (d, "/v1/clusters/%s/nodegroups/default-worker" % c2),
        (d, "/v1/clusters/%s/nodegroups?limit=1" % c3),
        (a, "/v1/quotas"), (a, "/v1/quotas?all_tenants=True"), (a, "/v1/quotas/%s/Cluster" % demo),
        (d, "/v1/quotas/%s/Cluster" % demo),
        (d, "/v1/stats"), (a, "/v1/stats"), (a, "/v1/stats?project_id=%s" % demo),
        (d, "/v1/certificates/%s" % c1),
        (a, "/v1/mservices"), (d, "/v1/federations"),
        # errors
        (d, "/v1/clusters/%s" % nope), (d, "/v1/clustertemplates/%s" % nope),
        (d, "/v1/clusters/no-such-cluster"), (d, "/v1/clusters?marker=abc"),
        (d, "/v1/clustertemplates?marker=abc"), (d, "/v1/clusters?limit=abc"),
        (d, "/v1/clusters?limit=-1"), (d, "/v1/clusters?sort_key=bogus"),
        (d, "/v1/clustertemplates?sort_key=bogus"), (d, "/v1/clusters?sort_dir=sideways"),
        (d, "/v1/clusters/%s/nodegroups/%s" % (c1, nope)), (d, "/v1/clusters/%s/nodegroups" % nope),
        (d, "/v1/certificates/%s" % nope), (alt, "/v1/clusters/%s" % c1),
        (d, "/v1/mservices"), (None, "/v1/clusters"), (a, "/v1/quotas/%s/Bogus" % demo),
        (d, "/v1/no-such-resource"),
    ]
    out = []
    for who, path in reqs:
        for hname, h in (("latest", LATEST), ("no version", {})):
            out.append((who, path, hname, h))
    out.append((d, "/v1/clusters", "1.99", {"OpenStack-API-Version": "container-infra 1.99"}))
    out.append((d, "/v1/clusters", "1.1", {"OpenStack-API-Version": "container-infra 1.1"}))
    return out


def compare_gets(fx, label):
    """Every GET of the list from upstream's API and magnumd's API directly: status codes equal,
    bodies equal as JSON after normalise()."""
    diffs = []
    unstable = []
    n = 0
    for who, path, vname, h in get_list(fx):
        n += 1
        for _ in range(4):
            u1 = answer(UP, path, who, h)
            ours = answer(RS, path, who, h)
            u2 = answer(UP, path, who, h)
            if u1 == u2:
                break
        else:
            unstable.append((who, path, vname))
            continue
        if u1 != ours:
            diffs.append({"request": "GET %s as %s, %s" % (path, who or "nobody", vname),
                          "upstream": {"status": u1[0], "body": u1[1]},
                          "ours": {"status": ours[0], "body": ours[1]},
                          "differences": ([] if u1[0] == ours[0] else
                                          ["status: upstream %d, ours %d" % (u1[0], ours[0])])
                          + diff(u1[1], ours[1])})
    with open(os.path.join(W, "logs", "get-diffs-%s.json" % label.replace(" ", "-")), "w") as f:
        json.dump(diffs, f, indent=1)
    ok = result(not diffs and not unstable,
                "%s: %d GETs compared between upstream's API and magnumd's on one database "
                "(links' host:port and request ids normalised): %d differ, %d unstable"
                % (label, n, len(diffs), len(unstable)))
    if not ok:
        for d in diffs:
            log("  differs: %s" % d["request"])
            for line in d["differences"][:6]:
                log("     %s" % line)
        for u in unstable:
            log("  unstable upstream answer: %s" % (u,))
    return diffs


# --- the rehearsal ----------------------------------------------------------------------------

def settle(limit=60):
    return wait_until(limit, "no cluster in progress", lambda: not [
        c for c, (s, _) in clusters_in_db().items() if s.endswith("_IN_PROGRESS")], 1)


def main():
    schema_before = schema_dump()
    result(True, "schema after upstream's magnum-db-manage upgrade: alembic %s, %d columns, %d index columns"
           % (schema_before[4], schema_before[1].count("\n") + 1, schema_before[2].count("\n") + 1))

    ok = start_haproxy()
    result(bool(ok), "HAProxy on :%s in front of the API(s)" % E["FRONT_PORT"])
    if not ok:
        return
    start_upstream("conductor")
    start_upstream("api")
    up_ok = wait_until(90, "upstream's API", lambda: api_answers(UP)) and ha_enable("upstream")
    cond_ok = wait_until(90, "upstream's conductor heartbeat",
                         lambda: service_beat("upstream-conductor-" + TAG) >= 0)
    result(bool(up_ok and cond_ok), "upstream's magnum-api and magnum-conductor 23.0.0 running, with the "
           "stand-in driver (%s)" % elapsed())
    if not (up_ok and cond_ok):
        log(tail("upstream-api"))
        log(tail("upstream-conductor"))
        return

    # Templates, a quota and clusters, made through upstream's API behind HAProxy.
    r = call(FRONT, "POST", "/clustertemplates", body={
        "name": "cutover-demo", "coe": "kubernetes", "image_id": "ubuntu-jammy",
        "external_network_id": "public", "master_flavor_id": "m1.small", "flavor_id": "m1.small",
        "labels": {"kube_tag": "v1.31.1"}})
    r2 = call(FRONT, "POST", "/clustertemplates", who="admin", body={
        "name": "cutover-public", "coe": "kubernetes", "image_id": "fedora-coreos-40",
        "external_network_id": "public", "public": True, "network_driver": "calico",
        "flavor_id": "m1.medium", "master_flavor_id": "m1.small"})
    r3 = call(FRONT, "POST", "/quotas", who="admin", body={
        "project_id": KS["MAGNUM_TEST_DEMO_PROJECT_ID"], "resource": "Cluster", "hard_limit": 500})
    if not result(r.status_code == 201 and r2.status_code == 201 and r3.status_code == 201,
                  "two templates (driver %s, %s) and a quota made through upstream's API"
                  % (r.json().get("driver") if r.ok else r.text[:300],
                     r2.json().get("driver") if r2.ok else r2.text[:300])):
        log(r3.text[:300])
        return
    templates = [r.json()["uuid"], r2.json()["uuid"]]
    clusters = []
    for name, t, n in (("cutover-c1", 0, 1), ("cutover-c2", 1, 2), ("cutover-c3", 0, 1)):
        c = call(FRONT, "POST", "/clusters", body={"name": name, "cluster_template_id": templates[t],
                                                    "master_count": 1, "node_count": n,
                                                    "keypair": "demo-key"})
        if not result(c.status_code == 202, "cluster %s accepted by upstream's API" % name):
            log(c.text[:400])
            return
        clusters.append(c.json()["uuid"])
    if not result(bool(settle(60)), "upstream's conductor completed them (%s)" % elapsed()):
        log(str(clusters_in_db()))
        return
    rz = call(FRONT, "POST", "/clusters/%s/actions/resize" % clusters[2], body={"node_count": 3})
    result(rz.status_code == 202 and settle(60), "cluster cutover-c3 resized to 3 workers by upstream")
    ngs = call(FRONT, "GET", "/clusters/%s/nodegroups" % clusters[0]).json()["nodegroups"]
    fx = {"clusters": clusters, "templates": templates,
          "nodegroup": [n["uuid"] for n in ngs if n["role"] == "worker"][0]}

    # The operator's check before anything of magnumd runs.
    chk = subprocess.run([E["MAGNUMD"], "--config-file", CONF, "status", "upgrade", "check"],
                         capture_output=True, text=True)
    result(chk.returncode == 0, "magnumd status upgrade check on upstream's database: exit %d"
           % chk.returncode)
    if chk.returncode != 0:
        log(chk.stdout[-1500:] + chk.stderr[-1500:])

    load = Load(templates)
    load.start()
    time.sleep(8)
    load.step = "1"
    check_step(load, "setup", "before: upstream's API and conductor only")

    # 1. magnumd's conductor joins; upstream's conductor stops.
    start_magnumd("conductor")
    ok = wait_until(60, "magnumd conductor's heartbeat", lambda: service_beat("magnumd-conductor-" + TAG) >= 0)
    result(bool(ok), "step 1: magnumd conductor joined (same magnum.conf, same queue) (%s)" % elapsed())
    if not ok:
        log(tail("magnumd-conductor"))
    time.sleep(6)
    begin = time.time() - T0
    took = stop("upstream-conductor", 15)
    UPSTREAM_CONDUCTOR_STOP[:] = [begin, time.time() - T0]
    result(True, "step 1: upstream's conductor stopped (SIGTERM, gone in %.1f s)" % took)
    time.sleep(12)
    load.step = "2"
    check_step(load, "1", "step 1 (magnumd conductor in, upstream's out)")

    # 2. magnumd's API joins HAProxy; both APIs compared; upstream's API drained and stopped.
    start_magnumd("api")
    ok = wait_until(60, "magnumd api", lambda: api_answers(RS)) and ha_enable("magnumd")
    result(bool(ok), "step 2: magnumd api joined HAProxy (%s)" % elapsed())
    if not ok:
        log(tail("magnumd-api"))
    time.sleep(6)
    load.pause()
    settle(60)
    all_diffs = compare_gets(fx, "step 2 compare")
    load.resume()
    ok = ha_drain("upstream")
    took = stop("upstream-api")
    result(bool(ok), "step 2: upstream's API drained in HAProxy, then stopped (%.1f s)" % took)
    time.sleep(12)
    load.step = "3"
    check_step(load, "2", "step 2 (magnumd api in, upstream's out)")

    # 3. Rollback: upstream's API and conductor on the data magnumd wrote; magnumd's stop.
    start_upstream("api")
    ok = wait_until(90, "upstream's API", lambda: api_answers(UP)) and ha_enable("upstream")
    result(bool(ok), "step 3: upstream's API started again and joined HAProxy (%s)" % elapsed())
    time.sleep(4)
    ok = ha_drain("magnumd")
    result(bool(ok), "step 3: magnumd api drained in HAProxy (still running, out of rotation)")
    beat0 = service_beat("upstream-conductor-" + TAG)
    start_upstream("conductor")
    ok = wait_until(90, "upstream's conductor heartbeat",
                    lambda: service_beat("upstream-conductor-" + TAG) > beat0, 1)
    result(bool(ok), "step 3: upstream's conductor started again (heartbeat %d -> %d)"
           % (beat0, service_beat("upstream-conductor-" + TAG)))
    time.sleep(4)
    took = stop("magnumd-conductor")
    result(True, "step 3: magnumd conductor stopped (SIGTERM, gone in %.1f s)" % took)
    # Both APIs once more, now that upstream's conductor serves upstream's API.
    load.pause()
    settle(60)
    all_diffs += compare_gets(fx, "step 3 compare")
    load.resume()
    took = stop("magnumd-api")
    result(True, "step 3: magnumd api stopped (%.1f s)" % took)
    time.sleep(15)
    load.stop.set()
    load.join(60)
    check_step(load, "3", "step 3 (rollback: upstream's API and conductor back, magnumd's out)")

    # Over the whole run.
    recs = load.records
    deleted_ok = {r["cluster"] for r in recs if r["op"] == "delete" and 200 <= r["status"] < 300}
    settle(60)
    db = clusters_in_db()
    accepted = [r for r in recs if r["op"] in ("create", "resize", "delete") and 200 <= r["status"] < 300]
    lost = [r for r in accepted if outcome(r, db, deleted_ok) != "done"]
    stuck = [c for c, (s, _) in db.items() if s.endswith("_IN_PROGRESS")]
    result(not lost and not stuck,
           "whole run: %d requests, %d accepted mutations, lost %d, clusters left in progress %d, "
           "%d clusters in the database" % (len(recs), len(accepted), len(lost), len(stuck), len(db)))
    with open(os.path.join(W, "logs", "requests.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    after = schema_dump()
    same = after == schema_before
    result(same, "schema untouched: alembic_version %s before and %s after; tables, columns, "
           "indexes and constraints %s" % (schema_before[4], after[4], "equal" if same else "DIFFER"))
    if not same:
        import difflib
        for i, (a, b) in enumerate(zip(schema_before, after)):
            for line in list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm=""))[:20]:
                log("  schema: " + line)
    for name in list(PROCS):
        if name != "haproxy" and not alive(name):
            result(False, "%s exited early:\n%s" % (name, tail(name)))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        import traceback
        traceback.print_exc()
        result(False, "the rehearsal stopped on %s: %s" % (type(e).__name__, e))
    for name in list(PROCS):
        try:
            stop(name, 15)
        except Exception:
            pass
