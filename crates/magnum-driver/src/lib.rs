//! The cluster driver interface (spec/drivers.md §1) and driver selection (§2.2).
//!
//! Unlike upstream, a driver never saves anything itself: it gets typed domain models
//! (`magnum_core::model`, no storage types) and returns what changed, and the conductor
//! persists it with guarded writes, so the "you must save" contract that drivers forgot
//! cannot be forgotten here. One instance per driver lives for the whole process.

mod metered;
pub mod simulated;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use magnum_core::model::{Cluster, ClusterTemplate, Labels, Nodegroup as NodeGroup};
use magnum_core::status::{ClusterHealthStatus, ClusterStatus};
use magnum_core::{Error, RequestContext, Result};

pub use simulated::SimulatedDriver;

/// One `(server_type, os, coe)` a driver handles.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Provides {
    pub server_type: String,
    pub os: String,
    pub coe: String,
}

/// Fields a driver sets on the cluster when it accepts an operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterChanges {
    pub stack_id: Option<String>,
    pub cluster_template_id: Option<String>,
    pub labels: Option<Labels>,
}

/// What the driver observed about a cluster. `None` fields are unchanged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusReport {
    pub status: Option<ClusterStatus>,
    pub status_reason: Option<Option<String>>,
    pub api_address: Option<String>,
    pub coe_version: Option<String>,
    pub container_version: Option<String>,
    pub health_status: Option<ClusterHealthStatus>,
    /// The reason dict (values are strings, as upstream stores them).
    pub health_status_reason: Option<serde_json::Map<String, serde_json::Value>>,
    pub nodegroups: Vec<NodegroupReport>,
}

impl StatusReport {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What the driver observed about one nodegroup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodegroupReport {
    pub uuid: String,
    pub status: Option<ClusterStatus>,
    pub status_reason: Option<Option<String>>,
    pub node_addresses: Option<Vec<String>>,
    pub stack_id: Option<String>,
    /// The nodegroup is gone from the backend: remove its row.
    pub deleted: bool,
}

/// Runs in the driver when it can tell the conductor that a cluster changed, so the new
/// status reaches the API at once instead of at the next sweep.
pub trait StatusWaker: Send + Sync {
    fn wake(&self, cluster_uuid: &str);
}

/// A cluster driver. Every method gets the cluster as just read from storage; mutations go
/// back as return values. Errors become the cluster's `*_FAILED` reason, so their text is for users.
#[async_trait]
pub trait Driver: Send + Sync {
    /// The entry-point name (`cluster_template.driver`).
    fn name(&self) -> &str;
    fn provides(&self) -> Vec<Provides>;
    /// Beta drivers need `[drivers] enabled_beta_drivers`.
    fn beta(&self) -> bool {
        false
    }

    /// Start building; return quickly with the backend handle (`stack_id`).
    async fn create_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
        create_timeout: Option<i32>,
    ) -> Result<ClusterChanges>;

    /// The default worker nodegroup's new node_count is already stored.
    async fn update_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
        rollback: bool,
    ) -> Result<()>;

    /// `nodegroup` already carries the new node_count.
    async fn resize_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
        node_count: i32,
        nodes_to_remove: &[String],
    ) -> Result<()>;

    /// `Error::NotSupported` refuses without any state change.
    async fn upgrade_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        template: &ClusterTemplate,
        max_batch_size: Option<i32>,
        nodegroup: &NodeGroup,
    ) -> Result<ClusterChanges>;

    /// Must be idempotent.
    async fn delete_cluster(&self, ctx: &RequestContext, cluster: &Cluster) -> Result<()>;

    async fn create_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()>;
    async fn update_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()>;
    async fn delete_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()>;

    /// Observe an in-progress cluster (upstream `update_cluster_status`).
    async fn poll_status(
        &self,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) -> Result<StatusReport>;

    /// For a cluster at rest: the node counts the backend chose by itself (an autoscaler
    /// scaled a nodegroup), by nodegroup uuid, where they differ from `node_count`. The
    /// conductor stores them, so `nodegroup show` tells the truth.
    async fn scaled_node_counts(
        &self,
        _cluster: &Cluster,
        _nodegroups: &[NodeGroup],
    ) -> Result<Vec<(String, i32)>> {
        Ok(Vec::new())
    }

    /// Whether `rotate_ca_certificate` can succeed: asked before any new CA is made, so a
    /// refusal changes nothing (upstream replaced the CAs first).
    fn supports_ca_rotation(&self) -> bool {
        false
    }

    /// Distribute the cluster's new CAs (already stored; `cluster` carries the new refs).
    async fn rotate_ca_certificate(&self, _ctx: &RequestContext, _cluster: &Cluster) -> Result<()> {
        Err(Error::NotSupported {
            operation: "Rotating the CA certificate on this driver".into(),
        })
    }

    async fn rotate_credential(&self, _ctx: &RequestContext, _cluster: &Cluster) -> Result<()> {
        Err(Error::NotSupported {
            operation: "Credential rotation by this driver".into(),
        })
    }

    /// Whether the health worker probes this driver's clusters' Kubernetes API over mTLS
    /// (`/healthz` and the nodes) with Magnum's admin client certificate.
    fn probes_workload_health(&self) -> bool {
        false
    }

    /// Health as the backend sees it, for when the workload API cannot be reached; `None`:
    /// the backend cannot tell.
    async fn management_health(&self, _cluster: &Cluster) -> Result<Option<HealthReport>> {
        Ok(None)
    }
}

/// A cluster's health and upstream's reason dict (values are strings).
#[derive(Clone, Debug, PartialEq)]
pub struct HealthReport {
    pub status: ClusterHealthStatus,
    pub reason: serde_json::Map<String, serde_json::Value>,
}

/// Upstream's `ClusterDriverNotSupported` / `ClusterTypeNotSupported` texts.
fn driver_not_supported(name: &str) -> Error {
    Error::InvalidParameterValue {
        message: format!("Cluster driver ({name}) not supported."),
    }
}

fn type_not_supported(p: &Provides) -> Error {
    Error::InvalidParameterValue {
        message: format!(
            "Cluster type ({}, {}, {}) not supported.",
            p.server_type, p.os, p.coe
        ),
    }
}

/// The drivers of this process and upstream's selection rules, minus its flaw: the
/// explicit-name path also honours `disabled_drivers` and `enabled_beta_drivers`.
#[derive(Clone, Default)]
pub struct DriverRegistry {
    by_name: HashMap<String, Arc<dyn Driver>>,
    by_type: HashMap<Provides, String>,
    enabled_beta: Vec<String>,
}

impl DriverRegistry {
    pub fn new(
        drivers: Vec<Arc<dyn Driver>>,
        disabled: &[String],
        enabled_beta: &[String],
    ) -> Self {
        let mut reg = Self {
            enabled_beta: enabled_beta.to_vec(),
            ..Self::default()
        };
        for d in drivers {
            let d = metered::Metered::wrap(d);
            let name = d.name().to_owned();
            if disabled.contains(&name) {
                continue;
            }
            for p in d.provides() {
                reg.by_type.insert(p, name.clone());
            }
            reg.by_name.insert(name, d);
        }
        reg
    }

    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.by_name.keys().cloned().collect();
        v.sort();
        v
    }

    fn usable(&self, name: &str) -> Option<&Arc<dyn Driver>> {
        let d = self.by_name.get(name)?;
        (!d.beta() || self.enabled_beta.iter().any(|b| b == name)).then_some(d)
    }

    /// The driver of a template: its `driver` field, else its `(server_type, distro, coe)`.
    pub fn for_template(&self, t: &ClusterTemplate) -> Result<Arc<dyn Driver>> {
        if let Some(name) = t.driver.as_deref().filter(|n| !n.is_empty()) {
            return self
                .usable(name)
                .cloned()
                .ok_or_else(|| driver_not_supported(name));
        }
        let p = Provides {
            server_type: t.server_type.clone().unwrap_or_else(|| "vm".into()),
            os: t.cluster_distro.clone().unwrap_or_default(),
            coe: t.coe.clone().unwrap_or_default(),
        };
        self.by_type
            .get(&p)
            .and_then(|name| self.usable(name))
            .cloned()
            .ok_or_else(|| type_not_supported(&p))
    }
}
