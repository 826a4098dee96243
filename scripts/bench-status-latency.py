"""How long a status change takes to reach the API: creates clusters one at a time on a
`magnumd serve` whose simulated driver finishes a create after DELAY seconds, polls
GET /v1/clusters/<uuid> every 10 ms, and prints how long after DELAY the API showed
CREATE_COMPLETE (min / median / max over N clusters).

    bench-status-latency.py PORT DELAY N
"""

import json
import statistics
import sys
import time
import urllib.request

port, delay, n = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
base = f"http://127.0.0.1:{port}/v1"
headers = {"OpenStack-API-Version": "container-infra 1.14", "Content-Type": "application/json"}


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")


call("POST", "/clustertemplates", {"name": "lat", "coe": "kubernetes", "image_id": "img",
                                   "external_network_id": "public"})
lags = []
for i in range(n):
    t0 = time.monotonic()
    uuid = call("POST", "/clusters", {"name": f"lat-{i}", "cluster_template_id": "lat"})["uuid"]
    while True:
        status = call("GET", f"/clusters/{uuid}")["status"]
        if status == "CREATE_COMPLETE":
            break
        if not status.endswith("IN_PROGRESS"):
            sys.exit(f"cluster {uuid} ended {status}")
        time.sleep(0.01)
    lags.append(time.monotonic() - t0 - delay)
ms = sorted(1000 * x for x in lags)
print(f"{n} creates, driver delay {delay:.1f} s: status visible after the delay in "
      f"min {ms[0]:.0f} ms, median {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms")
