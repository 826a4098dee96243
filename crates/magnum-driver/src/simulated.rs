//! The `simulated` driver: builds nothing. It exists for the embedded default and for tests:
//! clusters and nodegroups move through `*_IN_PROGRESS` to `*_COMPLETE` after the delays of
//! `[simulated_driver]`, get made-up addresses, and fail on demand through labels:
//!
//! * `simulated_failure=<op>[,<op>...]`: that operation ends `*_FAILED` with a reason saying
//!   so; ops are `create`, `update`, `resize`, `upgrade`, `delete`, `rotate_ca`,
//!   `nodegroup_create`, `nodegroup_update`, `nodegroup_delete`.
//! * `simulated_failure_mode=immediate`: those operations fail in the driver call itself
//!   instead of later.
//! * `simulated_hang=<op>[,...]`: that operation never finishes (to exercise timeouts).
//!
//! Cluster labels govern cluster operations, nodegroup labels nodegroup operations.
//! Progress survives a restart: when the driver has no record of an operation (the process
//! was restarted), the operation is timed from the row's last update.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use magnum_conf::config::SimulatedDriverSection;
use magnum_core::model::{self, Cluster, ClusterTemplate, Labels, Nodegroup as NodeGroup};
use magnum_core::status::{ClusterHealthStatus, ClusterStatus, Phase};
use magnum_core::{Error, RequestContext, Result};
use serde_json::Value;

use super::{ClusterChanges, Driver, NodegroupReport, Provides, StatusReport, StatusWaker};

pub const NAME: &str = "simulated";
const DEFAULT_COE_VERSION: &str = "v1.31.1";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    Update,
    Resize,
    Upgrade,
    Delete,
    RotateCa,
    NodegroupCreate,
    NodegroupUpdate,
    NodegroupDelete,
}

impl Op {
    fn label(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Update => "update",
            Op::Resize => "resize",
            Op::Upgrade => "upgrade",
            Op::Delete => "delete",
            Op::RotateCa => "rotate_ca",
            Op::NodegroupCreate => "nodegroup_create",
            Op::NodegroupUpdate => "nodegroup_update",
            Op::NodegroupDelete => "nodegroup_delete",
        }
    }

    fn is_nodegroup(self) -> bool {
        matches!(
            self,
            Op::NodegroupCreate | Op::NodegroupUpdate | Op::NodegroupDelete
        )
    }
}

/// An operation the driver is carrying out.
#[derive(Clone, Debug)]
struct Pending {
    op: Op,
    ready_at: chrono::NaiveDateTime,
    /// For nodegroup operations: which nodegroup.
    nodegroup: Option<String>,
}

pub struct SimulatedDriver {
    create_delay: Duration,
    update_delay: Duration,
    delete_delay: Duration,
    pending: Mutex<HashMap<String, Pending>>,
    waker: OnceLock<Arc<dyn StatusWaker>>,
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or_default()
}

/// The list in a label such as `simulated_failure=create,delete`.
fn label_list(labels: &Labels, key: &str) -> Vec<String> {
    model::label(labels, key)
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn label(labels: &Labels, key: &str) -> Option<String> {
    label_list(labels, key).into_iter().next()
}

/// A stable small number from a string, to spread made-up addresses.
fn spread(s: &str) -> u32 {
    s.bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
}

fn addresses(ng: &NodeGroup, count: i32) -> Vec<String> {
    let net = spread(ng.uuid.as_str()) % 250 + 1;
    (0..count.max(0))
        .map(|i| format!("10.{net}.{}.{}", i / 250, i % 250 + 4))
        .collect()
}

fn failure_reason(op: Op) -> String {
    format!(
        "Simulated failure of {} requested by label simulated_failure.",
        op.label()
    )
}

impl SimulatedDriver {
    pub fn new(cfg: &SimulatedDriverSection) -> Self {
        Self {
            create_delay: secs(cfg.create_delay),
            update_delay: secs(cfg.update_delay),
            delete_delay: secs(cfg.delete_delay),
            pending: Mutex::new(HashMap::new()),
            waker: OnceLock::new(),
        }
    }

    /// Where to report that a cluster has something new to observe.
    pub fn set_waker(&self, waker: Arc<dyn StatusWaker>) {
        let _ = self.waker.set(waker);
    }

    /// A nodegroup operation: refused now if its labels say so, else under way.
    fn start_nodegroup(&self, cluster: &Cluster, nodegroup: &NodeGroup, op: Op) -> Result<()> {
        Self::fails_now(&nodegroup.labels, op)?;
        self.start(cluster.uuid.as_str(), op, Some(nodegroup.uuid.as_str()));
        Ok(())
    }

    fn delay(&self, op: Op) -> Duration {
        match op {
            Op::Create | Op::NodegroupCreate => self.create_delay,
            Op::Delete | Op::NodegroupDelete => self.delete_delay,
            _ => self.update_delay,
        }
    }

    fn fails_now(labels: &Labels, op: Op) -> Result<()> {
        let listed = label_list(labels, "simulated_failure")
            .iter()
            .any(|o| o == op.label());
        if listed && label(labels, "simulated_failure_mode").as_deref() == Some("immediate") {
            return Err(Error::Internal(failure_reason(op)));
        }
        Ok(())
    }

    /// Records the operation and wakes the conductor when it is due.
    fn start(&self, cluster_uuid: &str, op: Op, nodegroup: Option<&str>) {
        let delay = self.delay(op);
        let ready_at = Utc::now().naive_utc()
            + chrono::Duration::from_std(delay).unwrap_or_else(|_| chrono::Duration::zero());
        let pending = Pending {
            op,
            ready_at,
            nodegroup: nodegroup.map(str::to_owned),
        };
        if let Ok(mut map) = self.pending.lock() {
            map.insert(cluster_uuid.to_owned(), pending);
        }
        if let Some(waker) = self.waker.get().cloned() {
            let uuid = cluster_uuid.to_owned();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                waker.wake(&uuid);
            });
        }
    }

    /// The operation behind an in-progress cluster: the recorded one, or after a restart the
    /// one its statuses imply, timed from the rows' last update.
    fn current(&self, cluster: &Cluster, nodegroups: &[NodeGroup]) -> Option<Pending> {
        let uuid = cluster.uuid.as_str();
        if let Ok(map) = self.pending.lock()
            && let Some(p) = map.get(uuid)
        {
            return Some(p.clone());
        }
        let status = cluster.status?;
        let busy_ng = nodegroups
            .iter()
            .find(|ng| !ng.is_default && ng.status.is_some_and(ClusterStatus::is_in_progress));
        let op = match (status, busy_ng.and_then(|ng| ng.status)) {
            (ClusterStatus::CreateInProgress, _) => Op::Create,
            (ClusterStatus::DeleteInProgress, _) => Op::Delete,
            (_, Some(ClusterStatus::CreateInProgress)) => Op::NodegroupCreate,
            (_, Some(ClusterStatus::DeleteInProgress)) => Op::NodegroupDelete,
            (_, Some(_)) => Op::NodegroupUpdate,
            _ => Op::Update,
        };
        let since = cluster.updated_at.or(cluster.created_at)?;
        Some(Pending {
            op,
            ready_at: since
                + chrono::Duration::from_std(self.delay(op))
                    .unwrap_or_else(|_| chrono::Duration::zero()),
            nodegroup: busy_ng.map(|ng| ng.uuid.to_string()),
        })
    }

    fn finish(&self, cluster_uuid: &str) {
        if let Ok(mut map) = self.pending.lock() {
            map.remove(cluster_uuid);
        }
    }
}

#[async_trait]
impl Driver for SimulatedDriver {
    fn name(&self) -> &str {
        NAME
    }

    fn provides(&self) -> Vec<Provides> {
        // Any distro, so templates made for real drivers can be tried on it by name only.
        Vec::new()
    }

    async fn create_cluster(
        &self,
        _ctx: &RequestContext,
        cluster: &Cluster,
        _nodegroups: &[NodeGroup],
        _create_timeout: Option<i32>,
    ) -> Result<ClusterChanges> {
        Self::fails_now(&cluster.labels, Op::Create)?;
        let uuid = cluster.uuid.to_string();
        self.start(&uuid, Op::Create, None);
        Ok(ClusterChanges {
            stack_id: Some(format!("sim-{}", &uuid.get(..8).unwrap_or(&uuid))),
            ..ClusterChanges::default()
        })
    }

    async fn update_cluster(
        &self,
        _ctx: &RequestContext,
        cluster: &Cluster,
        _nodegroups: &[NodeGroup],
        _rollback: bool,
    ) -> Result<()> {
        Self::fails_now(&cluster.labels, Op::Update)?;
        self.start(cluster.uuid.as_str(), Op::Update, None);
        Ok(())
    }

    async fn resize_cluster(
        &self,
        _ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
        _node_count: i32,
        _nodes_to_remove: &[String],
    ) -> Result<()> {
        Self::fails_now(&cluster.labels, Op::Resize)?;
        self.start(
            cluster.uuid.as_str(),
            Op::Resize,
            Some(nodegroup.uuid.as_str()),
        );
        Ok(())
    }

    async fn upgrade_cluster(
        &self,
        _ctx: &RequestContext,
        cluster: &Cluster,
        template: &ClusterTemplate,
        _max_batch_size: Option<i32>,
        nodegroup: &NodeGroup,
    ) -> Result<ClusterChanges> {
        Self::fails_now(&cluster.labels, Op::Upgrade)?;
        self.start(
            cluster.uuid.as_str(),
            Op::Upgrade,
            Some(nodegroup.uuid.as_str()),
        );
        // The target version goes into the cluster's labels (as Cluster API drivers do), so
        // whichever conductor sees the upgrade finish reports it.
        let labels = label(&template.labels, "kube_tag").map(|kube| {
            let mut map = cluster.labels.clone();
            map.insert("kube_tag".into(), Value::String(kube));
            map
        });
        Ok(ClusterChanges {
            cluster_template_id: Some(template.uuid.to_string()),
            labels,
            ..ClusterChanges::default()
        })
    }

    async fn delete_cluster(&self, _ctx: &RequestContext, cluster: &Cluster) -> Result<()> {
        Self::fails_now(&cluster.labels, Op::Delete)?;
        self.start(cluster.uuid.as_str(), Op::Delete, None);
        Ok(())
    }

    async fn create_nodegroup(
        &self,
        _ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        self.start_nodegroup(cluster, nodegroup, Op::NodegroupCreate)
    }

    async fn update_nodegroup(
        &self,
        _ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        self.start_nodegroup(cluster, nodegroup, Op::NodegroupUpdate)
    }

    async fn delete_nodegroup(
        &self,
        _ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        Self::fails_now(&nodegroup.labels, Op::NodegroupDelete)?;
        self.start(
            cluster.uuid.as_str(),
            Op::NodegroupDelete,
            Some(nodegroup.uuid.as_str()),
        );
        Ok(())
    }

    async fn poll_status(
        &self,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) -> Result<StatusReport> {
        let uuid = cluster.uuid.as_str();
        let Some(status) = cluster.status.filter(|s| s.is_in_progress()) else {
            self.finish(uuid);
            return Ok(StatusReport::default());
        };
        let Some(p) = self.current(cluster, nodegroups) else {
            return Ok(StatusReport::default());
        };
        if Utc::now().naive_utc() < p.ready_at {
            return Ok(StatusReport::default());
        }
        let target = p
            .nodegroup
            .as_deref()
            .and_then(|u| nodegroups.iter().find(|ng| ng.uuid.as_str() == u));
        let none = Labels::new();
        let labels = if p.op.is_nodegroup() {
            target.map_or(&none, |ng| &ng.labels)
        } else {
            &cluster.labels
        };
        if label_list(labels, "simulated_hang")
            .iter()
            .any(|o| o == p.op.label())
        {
            return Ok(StatusReport::default());
        }
        let failed = label_list(labels, "simulated_failure")
            .iter()
            .any(|o| o == p.op.label());
        self.finish(uuid);

        let phase = status.phase();
        let reason = failed.then(|| failure_reason(p.op));
        let mut report = StatusReport {
            status: status.finished(failed),
            status_reason: Some(reason.clone()),
            ..StatusReport::default()
        };
        if phase == Phase::Create && !failed {
            report.api_address = Some(format!("https://192.0.2.{}:6443", spread(uuid) % 250 + 2));
            report.coe_version = Some(
                label(&cluster.labels, "kube_tag").unwrap_or_else(|| DEFAULT_COE_VERSION.into()),
            );
            report.container_version = Some("containerd".into());
            // What upstream's Kubernetes monitor would find on a cluster that works.
            report.health_status = Some(ClusterHealthStatus::Healthy);
            let mut reason = serde_json::Map::new();
            reason.insert("api".into(), Value::String("ok".into()));
            report.health_status_reason = Some(reason);
        }
        if phase == Phase::Update && !failed {
            // The version the labels ask for (changed by an upgrade) is what now runs.
            report.coe_version = label(&cluster.labels, "kube_tag");
        }
        for ng in nodegroups {
            let Some(ng_status) = ng.status.filter(|s| s.is_in_progress()) else {
                continue;
            };
            // A failure belongs to the nodegroup the operation was about (or, for cluster
            // operations, to every nodegroup it touched).
            let ng_failed =
                failed && (target.is_none() || target.is_some_and(|t| t.uuid == ng.uuid));
            let mut r = NodegroupReport {
                uuid: ng.uuid.to_string(),
                stack_id: cluster.stack_id.clone().filter(|_| ng.stack_id.is_none()),
                ..NodegroupReport::default()
            };
            if ng_status.phase() == Phase::Delete && !ng_failed {
                r.deleted = true;
            } else {
                r.status = ng_status.finished(ng_failed);
                r.status_reason = Some(ng_failed.then(|| failure_reason(p.op)));
                if !ng_failed {
                    r.node_addresses = Some(addresses(ng, ng.node_count));
                }
            }
            report.nodegroups.push(r);
        }
        Ok(report)
    }

    fn supports_ca_rotation(&self) -> bool {
        true
    }

    async fn rotate_ca_certificate(&self, _ctx: &RequestContext, cluster: &Cluster) -> Result<()> {
        Self::fails_now(&cluster.labels, Op::RotateCa)?;
        self.start(cluster.uuid.as_str(), Op::RotateCa, None);
        Ok(())
    }

    async fn rotate_credential(&self, _ctx: &RequestContext, _cluster: &Cluster) -> Result<()> {
        // Nothing holds credentials in a simulated cluster; rotation trivially succeeds.
        Ok(())
    }
}
