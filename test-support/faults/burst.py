"""A user's automation under faults: openstacksdk (PyPI) sends a steady burst of cluster
creates, resizes and deletes to a Magnum for a given time, and records every answer.

    burst.py CLOUD TEMPLATE_ID SECONDS PREFIX

CLOUD is a clouds.yaml entry (OS_CLIENT_CONFIG_FILE). Each step is one request: a create
(name PREFIX-<n>, one worker), or a resize of an earlier accepted cluster to two workers, or
the delete of an earlier accepted cluster, in a fixed rotation. Prints one JSON line per
request: {"t": seconds since start, "at": when it was sent (Unix time), "op", "cluster",
"name" (of a create), "status", "latency", "detail"}; status 0 is a request that got no
answer within the client's 10 s timeout. A failed step is recorded and the burst goes on, as
a retrying automation would.
"""
import json
import sys
import time
import warnings

warnings.simplefilter("ignore")

import openstack  # noqa: E402

HEADERS = {"OpenStack-API-Version": "container-infra 1.10"}


def say(**kw):
    print(json.dumps(kw), flush=True)


def main(cloud, template, seconds, prefix):
    conn = openstack.connect(cloud=cloud, api_timeout=10)
    cim = conn.container_infrastructure_management
    # Authenticate and discover the endpoint before the clock starts.
    cim.get("/clustertemplates/%s" % template, headers=HEADERS)
    start = time.time()
    accepted = []   # clusters whose create got a 2xx, oldest first
    resized = set()
    deleted = set()
    n = 0
    while time.time() - start < seconds:
        n += 1
        live = [c for c in accepted if c not in deleted]
        if n % 4 == 3 and [c for c in live if c not in resized]:
            cluster = [c for c in live if c not in resized][0]
            op, call = "resize", lambda: cim.post(
                "/clusters/%s/actions/resize" % cluster, json={"node_count": 2},
                headers=HEADERS, raise_exc=False)
        elif n % 4 == 0 and len(live) > 3:
            cluster = live[0]
            op, call = "delete", lambda: cim.delete(
                "/clusters/%s" % cluster, headers=HEADERS, raise_exc=False)
        else:
            cluster = None
            body = {"name": "%s-%d" % (prefix, n), "cluster_template_id": template,
                    "master_count": 1, "node_count": 1}
            op, call = "create", lambda: cim.post(
                "/clusters", json=body, headers=HEADERS, raise_exc=False)
        t0 = time.time()
        try:
            r = call()
            status, detail = r.status_code, ""
            if status >= 300:
                detail = r.text[:300]
        except Exception as e:  # the request got no answer (timeout, refused)
            status, detail = 0, "%s: %s" % (type(e).__name__, str(e)[:200])
        latency = time.time() - t0
        name = None
        if op == "create":
            name = body["name"]
            if 200 <= status < 300:
                cluster = r.json().get("uuid")
                accepted.append(cluster)
        elif op == "resize" and 200 <= status < 300:
            resized.add(cluster)
        elif op == "delete" and 200 <= status < 300:
            deleted.add(cluster)
        say(t=round(t0 - start, 3), at=round(t0, 3), op=op, cluster=cluster, name=name,
            status=status, latency=round(latency, 3), detail=detail)
        time.sleep(0.25)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4])
