"""The fault test on the three-controller topology that run.sh started.

    ha.py WORKDIR

A user's automation (test-support/faults/burst.py: openstacksdk sending creates, resizes
and deletes through HAProxy's API front end) runs while, in turn: the active Galera node is
SIGKILLed (HAProxy moves to a backup) and started again; the RabbitMQ node a conductor is
connected to is SIGKILLed (its quorum queues elect leaders elsewhere) and started again; a
conductor, then an API process, is SIGKILLed and started again. Then it checks that every
accepted request was carried out, nothing is left in progress, every refusal was a 503 within
2 s, the three Galera nodes hold the same rows, the broker's queues are quorum queues and its
connections TLS. Prints the figures, one "ha: ok|FAIL ..." line per check, and writes the
counts to WORKDIR/result ("PASSED FAILED").

Standard library and openstacksdk (the Keystone venv's) only. Every loop is bounded.
"""
import json
import os
import re
import subprocess
import sys
import time
import warnings

warnings.simplefilter("ignore")

import openstack  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
W = sys.argv[1]
ENV = {}
for f in ("ports.env", "secrets.env"):
    for line in open(os.path.join(W, f)):
        if "=" in line:
            k, v = line.strip().split("=", 1)
            ENV[k] = v
BURST_SECONDS = float(os.environ.get("HA_BURST_SECONDS", "96"))
HEADERS = {"OpenStack-API-Version": "container-infra 1.10"}
RESULTS = []  # (ok, name, detail)
FIGURES = []  # lines printed at the end


def say(msg):
    print("ha: " + msg, flush=True)


def check(name, ok, detail=""):
    RESULTS.append((bool(ok), name, detail))
    say("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""))
    return ok


def lib(*args, timeout=120, quiet=False):
    """lib.sh WORKDIR ARGS...; its stdout."""
    r = subprocess.run(["bash", os.path.join(HERE, "lib.sh"), W] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0 and r.stderr.strip() and not quiet:
        # The whole story in logs/lib.log (kept with HA_KEEP), its end here.
        with open(os.path.join(W, "logs", "lib.log"), "a") as f:
            f.write("== lib.sh %s (exit %d)\n%s\n" % (" ".join(args), r.returncode, r.stderr))
        say("lib.sh %s: %s" % (" ".join(args), r.stderr.strip()[-600:]))
    return r


def wait(what, cond, limit, every=0.2):
    """Seconds until cond() is true, or None after `limit` seconds."""
    t0 = time.time()
    while time.time() - t0 < limit:
        try:
            if cond():
                return time.time() - t0
        except Exception:  # a probe that fails is a "not yet"
            pass
        time.sleep(every)
    say("gave up after %.0f s waiting for %s" % (limit, what))
    return None


def fmt(x):
    return "n/a" if x is None else "%.1f s" % x


# --- what the pieces say -----------------------------------------------------------------

def haproxy_servers(backend):
    """{server: 'UP'|'DOWN'|...} from HAProxy's admin socket."""
    out = lib("haproxy_cmd", "show stat").stdout
    states = {}
    for line in out.splitlines():
        f = line.split(",")
        if len(f) > 17 and f[0] == backend and f[1] not in ("FRONTEND", "BACKEND"):
            states[f[1]] = f[17]
    return states


def haproxy_active_db():
    """The Galera server HAProxy sends new connections to: galera1 while it counts as UP
    (also "UP 1/5", failing checks but not yet marked down), else the first backup UP."""
    s = haproxy_servers("mariadb")
    if s.get("galera1", "").startswith("UP"):
        return "galera1"
    for name in ("galera2", "galera3"):
        if s.get(name, "").startswith("UP"):
            return name
    return None


def galera_sql(n, sql):
    r = subprocess.run(["mariadb", "--no-defaults", "-S", os.path.join(W, "galera", "n%d" % n, "mysqld.sock"),
                        "-uroot", "-N", "-B", "-e", sql], capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return r.stdout


def galera_state(n):
    try:
        return dict(l.split("\t", 1) for l in galera_sql(
            n, "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'").splitlines())["wsrep_local_state_comment"]
    except Exception:
        return None


def rabbit_json(n, *args):
    r = lib("rabbitctl", str(n), *args, "--formatter", "json", timeout=30)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-200:])
    return json.loads(r.stdout or "[]")


def rabbit_queues(n):
    return rabbit_json(n, "list_queues", "name", "type", "leader", "members", "online", "durable")


def rabbit_node_of_port(port):
    for i in (1, 2, 3):
        if int(ENV["AMQP_PORT%d" % i]) == port:
            return i
    return None


def broker_nodes_of(name):
    """Which RabbitMQ nodes (1..3) process NAME has connections to, from ss."""
    pid = open(os.path.join(W, "pids", name + ".pid")).read().strip()
    out = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True, text=True).stdout
    nodes = set()
    for line in out.splitlines():
        if "pid=%s," % pid not in line:
            continue
        peer = line.split()[3]
        n = rabbit_node_of_port(int(peer.rsplit(":", 1)[1]))
        if n:
            nodes.add(n)
    return nodes


# --- the burst's answers -----------------------------------------------------------------

def read_answers(path):
    out = []
    for line in open(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def first_accepted_after(answers, t):
    """Seconds from t until the answer to the first request sent at or after t that was
    accepted (2xx)."""
    for a in sorted(answers, key=lambda a: a["at"]):
        if a["at"] >= t and 200 <= a["status"] < 300:
            return a["at"] + a["latency"] - t
    return None


def start_listener():
    """test-support/oslo/peer.py listen, or None when there is no oslo venv (OSLO_PYTHON)."""
    python = os.environ.get("OSLO_PYTHON")
    if not python:
        return None
    hosts = ",".join("magnum:%s@localhost:%s" % (ENV["RABBIT_PASSWORD"], ENV["AMQP_PORT%d" % n]) for n in (1, 2, 3))
    support = os.path.join(REPO, "test-support", "oslo")
    out = open(os.path.join(W, "logs", "notifications.jsonl"), "w")
    p = subprocess.Popen(
        [python, os.path.join(support, "peer.py"), "listen", "rabbit://%s/" % hosts, "magnum", "notifications"],
        stdin=subprocess.PIPE, stdout=out, stderr=open(os.path.join(W, "logs", "listener.stderr"), "w"),
        env=dict(os.environ, PYTHONPATH=os.path.join(support, "stub"), PYTHONWARNINGS="ignore",
                 OS_OSLO_MESSAGING_RABBIT__SSL="true",
                 OS_OSLO_MESSAGING_RABBIT__SSL_CA_FILE=os.path.join(W, "tls", "ca.pem"),
                 OS_OSLO_MESSAGING_RABBIT__RABBIT_QUORUM_QUEUE="true"))
    path = out.name
    ready = wait("the notification listener", lambda: "READY" in open(path).read(), 60)
    if not check("a Python oslo.messaging notification listener is consuming (TLS, quorum queues)", ready is not None,
                 open(os.path.join(W, "logs", "listener.stderr")).read()[-300:]):
        p.kill()
        return None
    return p


# The oslo publisher_id of the conductor the faults kill ("container-infra.<host>").
KILLED_PUBLISHER = "container-infra.conductor-1"


def check_notifications(p, created, deleted, answers):
    """Every notification arrived once; each accepted create and delete has one outcome."""
    time.sleep(3)  # the last ones are on their way
    p.stdin.close()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
    events = []
    for line in open(os.path.join(W, "logs", "notifications.jsonl")):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict):
            events.append(v)
    ids = {}
    publishers = {}
    outcomes = {}
    for e in events:
        mid = e.get("metadata", {}).get("message_id")
        ids[mid] = ids.get(mid, 0) + 1
        publishers.setdefault(mid, set()).add(e.get("publisher_id"))
        outcome = e.get("payload", {}).get("outcome")
        if outcome and outcome != "pending":
            key = (e["payload"].get("target", {}).get("id"), e.get("event_type"))
            # An event is its message id: a copy sent again is the same outcome.
            outcomes.setdefault(key, set()).add(mid)
    twice = [m for m, n in ids.items() if n > 1]
    # With quorum queues a batch goes with publisher confirms and its ledger record last
    # (AMQP transactions do not reach quorum queues reliably): a conductor SIGKILLed after
    # the broker confirmed a batch's events but before it confirmed the record sends that
    # batch again when it restarts. Only conductor-1 is killed (its process, and its broker
    # node), so only its last batch, at most 64 events, may arrive twice; anything else is a
    # fault.
    unexpected = [m for m in twice if publishers.get(m) != {KILLED_PUBLISHER}]
    check("every notification arrived once, but for a resend of the batch the killed conductor had in flight",
          not unexpected and len(twice) <= 64,
          "%d events; %d ids twice (%d not conductor-1's), e.g. %s"
          % (len(events), len(twice), len(unexpected), (unexpected or twice)[:3]))
    say("figures: notifications delivered twice: %d (conductor-1's batch in flight when it was killed)"
        % len(twice))
    bad = []
    superseded = 0
    for uuid in created:
        n = len(outcomes.get((uuid, "magnum.cluster.create"), ()))
        if n == 0 and uuid in deleted:
            superseded += 1  # deleted before its create started: no create outcome
        elif n != 1:
            bad.append("%s: %d create outcomes" % (uuid, n))
    for uuid in deleted:
        n = len(outcomes.get((uuid, "magnum.cluster.delete"), ()))
        if n != 1:
            bad.append("%s: %d delete outcomes" % (uuid, n))
    check("each accepted create and delete has exactly one outcome notification", not bad,
          "; ".join(bad[:5]))
    say("figures: notifications received %d (%d creates deleted before they started)" % (len(events), superseded))


def main():
    clouds = os.path.join(W, "keystone", "clouds.yaml")
    os.environ["OS_CLIENT_CONFIG_FILE"] = clouds
    member = openstack.connect(cloud="demo-member", api_timeout=20)
    admin = openstack.connect(cloud="admin", api_timeout=20)
    cim = member.container_infrastructure_management
    r = cim.post("/clustertemplates", headers=HEADERS, raise_exc=False, json={
        "name": "ha", "coe": "kubernetes", "image_id": "img", "external_network_id": "public"})
    if not check("a cluster template is created through HAProxy's API front end", r.status_code == 201,
                 "" if r.status_code == 201 else "%s %s" % (r.status_code, r.text[:200])):
        return
    template = r.json()["uuid"]

    # The topology as it starts.
    check("Galera: three nodes, all Synced",
          [galera_state(n) for n in (1, 2, 3)] == ["Synced"] * 3,
          "cluster size %s" % galera_sql(1, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").split()[-1])
    s = haproxy_servers("mariadb")
    check("HAProxy: galera1 active, galera2 and galera3 backups, all UP",
          haproxy_active_db() == "galera1" and all(s.get(x) == "UP" for x in ("galera1", "galera2", "galera3")),
          str(s))
    running = rabbit_json(1, "cluster_status").get("running_nodes", [])
    check("RabbitMQ: three nodes running in one cluster", len(running) == 3, " ".join(sorted(running)))

    # A Python oslo.messaging notification listener (what a billing or audit service runs),
    # on the same three brokers, TLS and quorum queues, before the burst starts.
    listener = start_listener()

    # The burst, in the background.
    burst_out = os.path.join(W, "logs", "burst.jsonl")
    burst = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "test-support", "faults", "burst.py"), "demo-member",
         template, str(BURST_SECONDS), "ha"],
        stdout=open(burst_out, "w"), stderr=open(os.path.join(W, "logs", "burst.stderr"), "w"),
        env=dict(os.environ, PYTHONWARNINGS="ignore"))
    start = time.time()
    faults = []  # (name, killed_at, restarted_at)

    def at(t):
        left = start + t - time.time()
        if left > 0:
            time.sleep(left)

    # 1. The active Galera node SIGKILLed; HAProxy moves to the first backup.
    at(6)
    t_kill = time.time()
    lib("stop", "galera1", "KILL")
    moved = wait("HAProxy to move off galera1", lambda: haproxy_active_db() == "galera2", 30)
    check("Galera fault: HAProxy moved to galera2 after galera1 was killed", moved is not None,
          "after %s" % fmt(moved))
    t_restart = time.time()
    joined = lib("galera_join", "1", timeout=480).returncode == 0
    synced = time.time() - t_restart if joined and galera_state(1) == "Synced" else None
    back = wait("HAProxy to send to galera1 again", lambda: haproxy_active_db() == "galera1", 30)
    check("Galera fault: galera1 restarted, rejoined (IST) and is HAProxy's active server again",
          synced is not None and back is not None,
          "Synced %s after its start, active again %s later" % (fmt(synced), fmt(back)))
    faults.append(["active Galera node (galera1) SIGKILLed", t_kill, t_restart,
                   "HAProxy on galera2 after %s; galera1 Synced %s after restart, active again %s later"
                   % (fmt(moved), fmt(synced), fmt((synced or 0) + (back or 0)))])

    # 2. The RabbitMQ node conductor-1 is connected to, SIGKILLed.
    at(max(time.time() - start + 2, 30))
    nodes = broker_nodes_of("conductor-1")
    victim = min(nodes) if nodes else 1
    vname = ENV["RABBIT_NODE%d" % victim]
    other = 1 if victim != 1 else 2
    before = rabbit_queues(other)
    led = [q["name"] for q in before if q.get("type") == "quorum" and q.get("leader") == vname]
    say("conductor-1 is connected to RabbitMQ node %d (%s); it leads %d quorum queues: %s"
        % (victim, vname, len(led), ", ".join(led[:4])))
    t_kill = time.time()
    lib("stop", "rabbit%d" % victim, "KILL")

    def leaders_moved():
        qs = {q["name"]: q for q in rabbit_queues(other)}
        return all(qs.get(n, {}).get("leader") not in (None, "", vname) for n in led)

    moved = wait("quorum queue leaders to move", leaders_moved, 40, every=0.5)
    check("RabbitMQ fault: the killed node was conductor-1's, and led quorum queues",
          bool(nodes) and bool(led), "node %d, %d queues led" % (victim, len(led)))
    check("RabbitMQ fault: every quorum queue it led has a new leader on a live node",
          moved is not None and bool(led), "after %s" % fmt(moved))
    reconnected = wait("conductor-1 to reconnect", lambda: broker_nodes_of("conductor-1") - {victim}, 40)
    check("RabbitMQ fault: conductor-1 reconnected to another node", reconnected is not None,
          "node %s after %s" % (sorted(broker_nodes_of("conductor-1")), fmt(reconnected)))
    time.sleep(max(0, 10 - (time.time() - t_kill)))
    t_restart = time.time()
    lib("rabbit_start", str(victim))
    rejoined = wait("the node to rejoin", lambda: lib("rabbit_running", str(victim), quiet=True).returncode == 0
                    and len(rabbit_json(other, "cluster_status").get("running_nodes", [])) == 3, 60, every=0.5)

    def members_online():
        return all(len(q.get("online") or []) == 3 for q in rabbit_queues(other) if q.get("type") == "quorum")

    online = wait("every quorum queue to have 3 members online", members_online, 30, every=0.5)
    check("RabbitMQ fault: the node restarted, rejoined, and every quorum queue has 3 members online",
          rejoined is not None and online is not None,
          "running %s after its start, all members online %s later" % (fmt(rejoined), fmt(online)))
    faults.append(["RabbitMQ node %d (conductor-1's) SIGKILLed" % victim, t_kill, t_restart,
                   "leaders moved after %s; conductor-1 reconnected after %s; node back %s after restart"
                   % (fmt(moved), fmt(reconnected), fmt(rejoined))])

    # 3. A conductor SIGKILLed; started again 5 s later.
    at(max(time.time() - start + 2, 58))
    t_kill = time.time()
    lib("stop", "conductor-1", "KILL")
    time.sleep(5)
    t_restart = time.time()
    lib("magnumd_start", "conductor", "conductor-1")
    reconnected = wait("conductor-1 to connect", lambda: broker_nodes_of("conductor-1"), 30)
    faults.append(["conductor-1 SIGKILLed", t_kill, t_restart,
                   "restarted, connected to the broker %s after its start" % fmt(reconnected)])
    check("conductor fault: conductor-1 restarted and connected to the broker", reconnected is not None)

    # 4. An API process SIGKILLed; started again 5 s later.
    at(max(time.time() - start + 2, 70))
    t_kill = time.time()
    lib("stop", "api-1", "KILL")
    down = wait("HAProxy to mark api1 DOWN", lambda: haproxy_servers("magnum_api").get("api1", "").startswith("DOWN"), 20)
    time.sleep(max(0, 5 - (time.time() - t_kill)))
    t_restart = time.time()
    lib("magnumd_start", "api", "api-1")
    up = wait("HAProxy to mark api1 UP", lambda: haproxy_servers("magnum_api").get("api1") == "UP", 30)
    check("API fault: api-1 restarted and HAProxy sends to it again", up is not None,
          "HAProxy marked it DOWN %s after the kill, UP %s after its restart" % (fmt(down), fmt(up)))
    faults.append(["api-1 SIGKILLed", t_kill, t_restart,
                   "HAProxy: DOWN after %s, UP %s after restart" % (fmt(down), fmt(up))])

    try:
        burst.wait(timeout=BURST_SECONDS + 60)
    except subprocess.TimeoutExpired:
        burst.kill()
    check("the burst ran to its end", burst.returncode == 0,
          open(os.path.join(W, "logs", "burst.stderr")).read()[-300:])
    answers = read_answers(burst_out)

    # Every answer: a success, a 503 within 2 s, or a refusal of the cluster's state.
    ok = [a for a in answers if 200 <= a["status"] < 300]
    refused = [a for a in answers if a["status"] == 503]
    state = [a for a in answers if a["status"] in (400, 409) and a["op"] != "create"]
    unclear = [a for a in answers if a not in ok and a not in refused and a not in state]
    slow = [a for a in refused if a["latency"] >= 2.0]
    longest = max([a["latency"] for a in refused], default=0.0)
    check("every answer is a 2xx, a 503 or a refusal of the cluster's state", not unclear,
          "%d others, the first: %s" % (len(unclear), json.dumps(unclear[:3])) if unclear else "")
    check("every 503 came within 2 s", not slow, "longest %.3f s" % longest)

    # Every accepted request carried out; nothing in progress.
    created = [a["cluster"] for a in ok if a["op"] == "create"]
    resized = {a["cluster"] for a in ok if a["op"] == "resize"}
    deleted = {a["cluster"] for a in ok if a["op"] == "delete"}
    pending = {}
    t0 = time.time()
    # A create whose message was lost is resumed by a conductor's sweep after 30 s.
    while time.time() - t0 < 60:
        pending = {}
        for uuid in created:
            r = cim.get("/clusters/%s" % uuid, headers=HEADERS, raise_exc=False)
            if uuid in deleted:
                if r.status_code != 404:
                    pending[uuid] = "delete accepted, still %s %s" % (r.status_code, r.text[:100])
                continue
            if r.status_code != 200:
                pending[uuid] = "%s %s" % (r.status_code, r.text[:100])
                continue
            c = r.json()
            done = c["status"].endswith("_COMPLETE") and (uuid not in resized or c["node_count"] == 2)
            if not done:
                pending[uuid] = "%s node_count %s %s" % (c["status"], c["node_count"], c.get("status_reason") or "")
        # Done when nothing accepted is still on its way (a failed one will not change).
        if all("_FAILED" in v for v in pending.values()):
            break
        time.sleep(2)
    say("carried out: waited %.1f s after the burst" % (time.time() - t0))
    lost = len(pending)
    if pending:
        # Each lost request's story, for whoever reads the failure: the rows on every
        # Galera node, and what magnumd logged about the cluster.
        with open(os.path.join(W, "logs", "lost.txt"), "w") as out:
            logs = {}
            for f in sorted(os.listdir(os.path.join(W, "logs"))):
                if f.startswith(("api-", "conductor-")):
                    logs[f] = open(os.path.join(W, "logs", f), errors="replace").read().splitlines()
            for uuid, why in pending.items():
                out.write("== %s: %s\n" % (uuid, why))
                for a in answers:
                    if a["cluster"] == uuid:
                        out.write("   asked: %s at %.2f s -> %s\n" % (a["op"], a["t"], a["status"]))
                for n in (1, 2, 3):
                    out.write("   galera%d: %s" % (n, galera_sql(n, "SELECT status, status_reason, updated_at "
                                                               "FROM magnum.cluster WHERE uuid = '%s'" % uuid) or "no row\n"))
                for f, lines in logs.items():
                    for line in lines:
                        if uuid in line and "path=/v1/clusters/%s status=200" % uuid not in line:
                            out.write("   %s: %s\n" % (f, line[:400]))
        say("the lost requests' stories: logs/lost.txt")
    check("every accepted request was carried out (lost = 0)", lost == 0,
          "; ".join("%s: %s" % kv for kv in list(pending.items())[:5]))
    clusters = cim.get("/clusters?limit=1000", headers=HEADERS).json()["clusters"]
    stuck = [c for c in clusters if c["status"].endswith("_IN_PROGRESS")]
    check("nothing is left in progress (stuck = 0)", not stuck,
          ", ".join("%s %s" % (c["uuid"], c["status"]) for c in stuck[:5]))
    if listener:
        check_notifications(listener, created, deleted, answers)
    names = {c["name"] for c in clusters}
    applied_refused = [a for a in refused if a["op"] == "create" and a.get("name") in names]

    # The three Galera nodes hold the same rows: checksums of every magnum table, node by node.
    tables = [t for t in galera_sql(1, "SHOW TABLES FROM magnum").split() if t]
    sql = "CHECKSUM TABLE " + ", ".join("magnum.`%s`" % t for t in tables)
    sums = {}
    for _ in range(20):
        sums = {n: galera_sql(n, sql) for n in (1, 2, 3)}
        if sums[1] == sums[2] == sums[3]:
            break
        time.sleep(0.5)
    rows = galera_sql(1, "SELECT COUNT(*) FROM magnum.cluster").strip()
    digest = {n: __import__("hashlib").sha256(s.encode()).hexdigest()[:12] for n, s in sums.items()}
    check("the three Galera nodes hold the same rows (CHECKSUM TABLE of %d magnum tables)" % len(tables),
          sums[1] == sums[2] == sums[3],
          "digests %s; %s cluster rows" % (" ".join("galera%d=%s" % kv for kv in digest.items()), rows))

    # What Galera and magnumd's logs say about conflicts and stale reads.
    certs = []
    for n in (1, 2, 3):
        st = dict(l.split("\t", 1) for l in galera_sql(n, "SHOW GLOBAL STATUS WHERE Variable_name IN "
                                                        "('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')").splitlines())
        certs.append("galera%d %s/%s" % (n, st.get("wsrep_local_cert_failures"), st.get("wsrep_local_bf_aborts")))
    say("figures: Galera certification failures / brute-force aborts since each node's start: " + ", ".join(certs))
    patterns = {
        "creates whose cast was not sent because the API's re-read missed its own insert":
            r"not delivered to the conductor: Cluster \S+ could not be found",
        "casts the broker nacked": "the message broker refused the message",
        "interrupted creates resumed by a sweep": "resuming an interrupted cluster create",
        "inserts whose read-back found nothing": "Failed to find inserted item",
        "deadlocks or certification failures reported": "Deadlock found",
        "non-primary Galera node (1047)": "WSREP has not yet prepared|Unknown command",
        "notification sends held (the broker did not take them)": "notifications held until the broker",
    }
    text = ""
    for f in sorted(os.listdir(os.path.join(W, "logs"))):
        if f.startswith(("api-", "conductor-")):
            text += open(os.path.join(W, "logs", f), errors="replace").read()
    say("figures: magnumd logs: " + "; ".join("%s %d" % (k, len(re.findall(v, text))) for k, v in patterns.items()))

    # The broker: quorum queues, TLS connections.
    queues = rabbit_queues(1)
    # oslo's fanout and reply queues are transient (classic, expiring) whatever
    # rabbit_quorum_queue says, unless rabbit_transient_quorum_queue; the topic queues and
    # notification queues are the durable ones that must survive a node.
    topic = [q for q in queues if (q["name"].startswith("magnum-conductor") or q["name"].startswith("notifications"))
             and "_fanout" not in q["name"]]
    say("rabbitmqctl list_queues name type (the durable ones):")
    for q in sorted(queues, key=lambda q: q["name"]):
        if q.get("durable"):
            say("    %-60s %s" % (q["name"], q["type"]))
    check("the conductor topic queues and notification queues are quorum queues",
          topic and all(q["type"] == "quorum" for q in topic),
          "%d queues: %s" % (len(topic), ", ".join("%s=%s" % (q["name"], q["type"]) for q in topic)))
    # The conductors' notification ledgers (what each committed), under their quorum name.
    ledgers = [q for q in queues if q["name"].startswith("magnum-rs.notifications-sent")]
    check("the conductors' notification ledgers are quorum queues",
          len(ledgers) >= 1 and all(q["type"] == "quorum" for q in ledgers),
          "%d queues: %s" % (len(ledgers), ", ".join("%s=%s" % (q["name"], q["type"]) for q in ledgers)))
    classic = [q["name"] for q in queues if q.get("durable") and q["type"] != "quorum"]
    if classic:
        say("note: durable classic queues (on one node; unusable while it is down): " + ", ".join(classic))
    conns = rabbit_json(1, "list_connections", "name", "ssl", "ssl_protocol", "peer_port")
    check("every client connection to the brokers is TLS", conns and all(c.get("ssl") for c in conns),
          "%d connections, %s" % (len(conns), sorted({str(c.get("ssl_protocol")) for c in conns})))
    services = admin.container_infrastructure_management.get("/mservices", headers=HEADERS,
                                                               raise_exc=False)
    if services.status_code == 200:
        svc = services.json().get("mservices", [])
        ups = sorted("%s=%s" % (s["host"], s["state"]) for s in svc)
        check("the three conductors report up", sum(1 for s in svc if s["state"] == "up") >= 3, " ".join(ups))

    # Figures.
    say("figures: requests sent %d, accepted %d, refused (503) %d, refused for the cluster's state %d, "
        "other %d, lost %d, stuck %d, longest refusal %.3f s"
        % (len(answers), len(ok), len(refused), len(state), len(unclear), lost, len(stuck), longest))
    ops = {}
    for a in answers:
        k = (a["op"], a["status"])
        ops[k] = ops.get(k, 0) + 1
    say("figures: by operation and status: " + ", ".join("%s %s x%d" % (k[0], k[1], v) for k, v in sorted(ops.items())))
    say("figures: refused creates that were applied all the same (the 503 came after the commit): %d"
        % len(applied_refused))
    for name, t_kill, t_restart, detail in faults:
        first = first_accepted_after(answers, t_kill)
        during = [a for a in answers if t_kill <= a["at"] < t_restart + 10]
        say("fault: %s at %.1f s: users' first accepted request %s after the kill; %d requests in the "
            "next %.0f s: %d accepted, %d refused; %s"
            % (name, t_kill - start, fmt(first), len(during), t_restart + 10 - t_kill,
               sum(1 for a in during if 200 <= a["status"] < 300),
               sum(1 for a in during if a["status"] == 503), detail))
    check("creates were accepted throughout (at least 20)", len(created) >= 20, "%d" % len(created))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash of the driver is a failed check, not a silent pass
        import traceback
        traceback.print_exc()
        check("the fault driver ran to its end", False, "%s: %s" % (type(e).__name__, e))
    passed = sum(1 for r in RESULTS if r[0])
    with open(os.path.join(W, "result"), "w") as f:
        f.write("%d %d\n" % (passed, len(RESULTS) - passed))
