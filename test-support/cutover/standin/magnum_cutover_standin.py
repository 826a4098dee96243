"""A stand-in cluster driver for upstream Magnum 23.0.0, for test-support/cutover.

Registered as the `magnum.drivers` entry point `simulated` (the name of magnumd's simulated
driver, so a template either side writes names a driver both sides load) for
(vm, ubuntu, kubernetes) and (vm, fedora-coreos, kubernetes). It builds nothing: operations
are accepted at once, and upstream's periodic status sync (`update_cluster_status`, every
10 s) moves a cluster and its nodegroups from *_IN_PROGRESS to *_COMPLETE once the row is
STANDIN_DELAY seconds old (default 2), with made-up addresses. A completed delete is removed
by upstream's sync itself. Federations are not covered. Why it exists: test-support/cutover/README.md.
"""
import os
import uuid

from oslo_utils import timeutils

from magnum.drivers.common import driver
from magnum import objects
from magnum.objects import fields

DELAY = float(os.environ.get("STANDIN_DELAY", "2"))

DONE = {
    fields.ClusterStatus.CREATE_IN_PROGRESS: fields.ClusterStatus.CREATE_COMPLETE,
    fields.ClusterStatus.UPDATE_IN_PROGRESS: fields.ClusterStatus.UPDATE_COMPLETE,
    fields.ClusterStatus.DELETE_IN_PROGRESS: fields.ClusterStatus.DELETE_COMPLETE,
    fields.ClusterStatus.ROLLBACK_IN_PROGRESS: fields.ClusterStatus.ROLLBACK_COMPLETE,
}


def _old_enough(obj):
    when = obj.updated_at or obj.created_at
    if when is None:
        return True
    now = timeutils.utcnow(with_timezone=when.tzinfo is not None)
    return (now - when).total_seconds() >= DELAY


def _addresses(ng, count):
    net = sum(ng.uuid.encode()) % 250 + 1
    return ["10.%d.%d.%d" % (net, i // 250, i % 250 + 4) for i in range(max(count, 0))]


class Driver(driver.Driver):
    @property
    def provides(self):
        return [
            {"server_type": "vm", "os": "ubuntu", "coe": "kubernetes"},
            {"server_type": "vm", "os": "fedora-coreos", "coe": "kubernetes"},
        ]

    def create_cluster(self, context, cluster, cluster_create_timeout):
        cluster.stack_id = str(uuid.uuid4())

    def update_cluster(self, context, cluster, scale_manager=None, rollback=False):
        return

    def resize_cluster(self, context, cluster, resize_manager, node_count,
                       nodes_to_remove, nodegroup=None):
        return

    def upgrade_cluster(self, context, cluster, cluster_template, max_batch_size,
                        nodegroup, scale_manager=None, rollback=False):
        cluster.cluster_template_id = cluster_template.uuid
        cluster.coe_version = cluster_template.labels.get("kube_tag", cluster.coe_version)

    def delete_cluster(self, context, cluster):
        return

    def create_nodegroup(self, context, cluster, nodegroup):
        return

    def update_nodegroup(self, context, cluster, nodegroup):
        return

    def delete_nodegroup(self, context, cluster, nodegroup):
        return

    def create_federation(self, context, federation):
        raise NotImplementedError("the cut-over stand-in has no federations")

    def update_federation(self, context, federation):
        raise NotImplementedError("the cut-over stand-in has no federations")

    def delete_federation(self, context, federation):
        raise NotImplementedError("the cut-over stand-in has no federations")

    def update_cluster_status(self, context, cluster, use_admin_ctx=False):
        if cluster.status not in DONE or not _old_enough(cluster):
            return
        if cluster.status != fields.ClusterStatus.DELETE_IN_PROGRESS:
            for ng in objects.NodeGroup.list(context, cluster.uuid):
                if ng.status == fields.ClusterStatus.DELETE_IN_PROGRESS:
                    ng.destroy()
                    continue
                if ng.status in DONE:
                    ng.status = DONE[ng.status]
                    ng.status_reason = None
                ng.node_addresses = _addresses(ng, ng.node_count)
                ng.save()
                if ng.role == "master" and cluster.status == fields.ClusterStatus.CREATE_IN_PROGRESS:
                    cluster.api_address = "https://%s:6443" % (ng.node_addresses or ["10.0.0.4"])[0]
        cluster.status = DONE[cluster.status]
        cluster.status_reason = None
        cluster.save()
