#!/usr/bin/env python3
"""Status latency at scale (scripts/bench-scale): creates clusters one at a time through
`magnumd api` (Keystone token in $BENCH_TOKEN) from TEMPLATE, whose simulated driver finishes
a create DELAY seconds after it starts, polls GET /v1/clusters/<uuid> every 10 ms, and prints
how long after DELAY the API showed CREATE_COMPLETE (min / median / max over N clusters).
The clusters are deleted afterwards (not waited for).

    BENCH_TOKEN=... bench-scale-latency.py PORT TEMPLATE DELAY N
"""

import json
import os
import statistics
import sys
import time
import urllib.error
import urllib.request

port, template, delay, n = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
base = f"http://127.0.0.1:{port}/v1"
headers = {"OpenStack-API-Version": "container-infra 1.14", "Content-Type": "application/json",
           "X-Auth-Token": os.environ["BENCH_TOKEN"]}


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        sys.exit(f"{method} {path}: HTTP {e.code}: {e.read().decode(errors='replace')[:500]}")


lags, made = [], []
for i in range(n):
    t0 = time.monotonic()
    uuid = call("POST", "/clusters", {"name": f"latency-{i}", "cluster_template_id": template,
                                      "master_count": 1, "node_count": 1})["uuid"]
    made.append(uuid)
    while True:
        status = call("GET", f"/clusters/{uuid}")["status"]
        if status == "CREATE_COMPLETE":
            break
        if not status.endswith("IN_PROGRESS"):
            sys.exit(f"cluster {uuid} ended {status}")
        if time.monotonic() - t0 > 120:
            sys.exit(f"cluster {uuid} still {status} after 120 s")
        time.sleep(0.01)
    lags.append(time.monotonic() - t0 - delay)
for uuid in made:
    try:
        call("DELETE", f"/clusters/{uuid}")
    except Exception:  # noqa: BLE001 - best effort, the database is dropped anyway
        pass
ms = sorted(1000 * x for x in lags)
print(f"{n} creates through the API, driver delay {delay:.1f} s: CREATE_COMPLETE visible after "
      f"the delay in min {ms[0]:.0f} ms, median {statistics.median(ms):.0f} ms, "
      f"max {ms[-1]:.0f} ms")
print("  each, in order of creation (ms): " + " ".join(f"{1000 * x:.0f}" for x in lags))
