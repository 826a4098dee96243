"""openstacksdk's container-infrastructure-management proxy against a Magnum, as a user's
automation drives it: template create/list/update, cluster create/list/update (node_count),
waits for each status, then deletes both.

    sdk_lifecycle.py CLOUD TAG

CLOUD is a clouds.yaml entry (OS_CLIENT_CONFIG_FILE); TAG makes the names unique. Prints one
JSON line per step ({"step", ...}); exit 1 with {"error", "step"} on the first failure.
"""
import json
import sys
import time
import warnings

warnings.simplefilter("ignore")

import openstack  # noqa: E402
from openstack import exceptions  # noqa: E402

step = "connect"


def say(**kw):
    print(json.dumps(kw), flush=True)


def wait(cim, cluster_id, want, limit=90):
    deadline = time.time() + limit
    while True:
        c = cim.get_cluster(cluster_id)
        if c.status == want:
            return c
        if c.status.endswith("_FAILED") or time.time() > deadline:
            raise RuntimeError("%s: %s (%s), wanted %s" % (cluster_id, c.status, c.status_reason, want))
        time.sleep(0.5)


def main(cloud, tag):
    global step
    conn = openstack.connect(cloud=cloud)
    cim = conn.container_infrastructure_management

    step = "template create"
    t = cim.create_cluster_template(
        name="sdk-%s" % tag, coe="kubernetes", image_id="ubuntu-2204",
        external_network_id="public", labels={"kube_tag": "v1.30.4"})
    say(step=step, id=t.id, name=t.name, labels=t.labels)

    step = "template list"
    names = [x.name for x in cim.cluster_templates()]
    say(step=step, found=t.name in names)

    step = "template update"
    t2 = cim.update_cluster_template(t, name="sdk-%s-renamed" % tag)
    t2 = cim.get_cluster_template(t.id)
    say(step=step, name=t2.name)

    step = "cluster create"
    c = cim.create_cluster(name="sdk-c-%s" % tag, cluster_template_id=t.id,
                           master_count=1, node_count=1)
    c = wait(cim, c.id, "CREATE_COMPLETE")
    say(step=step, id=c.id, status=c.status, node_count=c.node_count,
        coe_version=c.coe_version)

    step = "cluster list"
    say(step=step, found=c.id in [x.id for x in cim.clusters()])

    step = "cluster update"
    cim.update_cluster(c, node_count=2)
    c = wait(cim, c.id, "UPDATE_COMPLETE")
    say(step=step, status=c.status, node_count=c.node_count)

    step = "cluster delete"
    cim.delete_cluster(c)
    deadline = time.time() + 60
    while True:
        try:
            cim.get_cluster(c.id)
        except exceptions.NotFoundException:
            break
        if time.time() > deadline:
            raise RuntimeError("cluster %s never went away" % c.id)
        time.sleep(0.5)
    say(step=step, gone=True)

    step = "template delete"
    cim.delete_cluster_template(t.id, ignore_missing=False)
    gone = cim.find_cluster_template(t.id, ignore_missing=True) is None
    say(step=step, gone=gone)


if __name__ == "__main__":
    try:
        main(*sys.argv[1:3])
    except Exception as e:
        say(error="%s: %s" % (type(e).__name__, e), step=step)
        sys.exit(1)
