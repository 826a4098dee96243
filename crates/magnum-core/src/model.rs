//! Typed views of clusters, nodegroups and templates for the code that must not know how
//! they are stored (drivers first): statuses and roles as enums, labels as maps, JSON
//! columns decoded. Storage converts its rows into these (`magnum_db::model`).

use chrono::NaiveDateTime;
use serde_json::{Map, Value};

use crate::ids::{ClusterTemplateUuid, ClusterUuid, NodeGroupUuid};
use crate::status::{ClusterHealthStatus, ClusterStatus};

/// Labels in their stored order (upstream compares their JSON text).
pub type Labels = Map<String, Value>;

/// One label's value as text (label values are strings; anything else shows as JSON).
pub fn label(labels: &Labels, key: &str) -> Option<String> {
    labels.get(key).map(|v| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// How a nodegroup whose `node_count` column is NULL counts toward its cluster's
/// `node_count` / `master_count`. Upstream answers in two ways, and magnum-rs keeps both
/// because clients see both:
/// - Wherever it sums nodegroup *objects* (the API's cluster views, the CADF notifications,
///   the RPC objects), a NULL reads as 1: `NodeGroup.node_count` is a non-nullable field whose
///   default is 1, and oslo.versionedobjects gives a non-nullable field its default for None.
///   This function is that rule.
/// - Wherever it sums in SQL (the stats API's `nodes`, the clusters list's `node_count` and
///   `master_count` filters), `SUM` skips NULLs: it counts 0. Storage writes those queries
///   with `SUM` as upstream does, so they follow it by themselves.
pub fn object_node_count(stored: Option<i32>) -> i32 {
    /// `NodeGroup.node_count`'s default in upstream's object.
    const OBJECT_DEFAULT: i32 = 1;
    stored.unwrap_or(OBJECT_DEFAULT)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodegroupRole {
    Master,
    Worker,
    /// Upstream allows any role name for additional nodegroups.
    Other(String),
}

impl NodegroupRole {
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("master") => Self::Master,
            Some("worker") | None => Self::Worker,
            Some(other) => Self::Other(other.to_owned()),
        }
    }

    pub fn is_master(&self) -> bool {
        *self == Self::Master
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Master => "master",
            Self::Worker => "worker",
            Self::Other(s) => s,
        }
    }
}

impl serde::Serialize for NodegroupRole {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl From<&str> for NodegroupRole {
    fn from(s: &str) -> Self {
        Self::parse(Some(s))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub uuid: ClusterUuid,
    pub name: String,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub cluster_template_id: Option<ClusterTemplateUuid>,
    pub keypair: Option<String>,
    pub docker_volume_size: Option<i32>,
    pub labels: Labels,
    pub master_flavor_id: Option<String>,
    pub flavor_id: Option<String>,
    /// The driver's handle on the backend.
    pub stack_id: Option<String>,
    /// `None` for a status no release of Magnum defines.
    pub status: Option<ClusterStatus>,
    pub status_reason: Option<String>,
    pub health_status: Option<ClusterHealthStatus>,
    pub create_timeout: Option<i32>,
    pub api_address: Option<String>,
    pub discovery_url: Option<String>,
    pub coe_version: Option<String>,
    pub container_version: Option<String>,
    pub fixed_network: Option<String>,
    pub fixed_subnet: Option<String>,
    pub floating_ip_enabled: bool,
    pub master_lb_enabled: bool,
    pub ca_cert_ref: Option<String>,
    pub magnum_cert_ref: Option<String>,
    pub etcd_ca_cert_ref: Option<String>,
    pub front_proxy_ca_cert_ref: Option<String>,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
}

impl Cluster {
    /// A cluster with only its identity set, as a row freshly inserted with no optional
    /// column yet (tests and drivers' dry runs build on it).
    pub fn new(uuid: ClusterUuid, name: impl Into<String>) -> Self {
        Self {
            uuid,
            name: name.into(),
            project_id: None,
            user_id: None,
            cluster_template_id: None,
            keypair: None,
            docker_volume_size: None,
            labels: Labels::new(),
            master_flavor_id: None,
            flavor_id: None,
            stack_id: None,
            status: None,
            status_reason: None,
            health_status: None,
            create_timeout: None,
            api_address: None,
            discovery_url: None,
            coe_version: None,
            container_version: None,
            fixed_network: None,
            fixed_subnet: None,
            floating_ip_enabled: false,
            master_lb_enabled: false,
            ca_cert_ref: None,
            magnum_cert_ref: None,
            etcd_ca_cert_ref: None,
            front_proxy_ca_cert_ref: None,
            created_at: None,
            updated_at: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Nodegroup {
    pub uuid: NodeGroupUuid,
    pub name: String,
    pub cluster_id: ClusterUuid,
    pub project_id: String,
    pub docker_volume_size: Option<i32>,
    pub labels: Labels,
    pub flavor_id: Option<String>,
    pub image_id: Option<String>,
    pub node_addresses: Vec<String>,
    pub node_count: i32,
    pub role: NodegroupRole,
    pub max_node_count: Option<i32>,
    pub min_node_count: i32,
    pub is_default: bool,
    pub stack_id: Option<String>,
    pub status: Option<ClusterStatus>,
    pub status_reason: Option<String>,
    pub version: Option<String>,
    pub node_labels: Labels,
    pub node_taints: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterTemplate {
    pub uuid: ClusterTemplateUuid,
    pub name: Option<String>,
    pub coe: Option<String>,
    pub server_type: Option<String>,
    pub cluster_distro: Option<String>,
    /// The driver's entry-point name, when the template names one.
    pub driver: Option<String>,
    pub image_id: Option<String>,
    pub flavor_id: Option<String>,
    pub master_flavor_id: Option<String>,
    pub keypair_id: Option<String>,
    pub external_network_id: Option<String>,
    pub fixed_network: Option<String>,
    pub fixed_subnet: Option<String>,
    pub dns_nameserver: Option<String>,
    pub network_driver: Option<String>,
    pub volume_driver: Option<String>,
    pub docker_volume_size: Option<i32>,
    pub docker_storage_driver: Option<String>,
    pub labels: Labels,
    pub tls_disabled: bool,
    pub master_lb_enabled: bool,
    pub floating_ip_enabled: bool,
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub no_proxy: Option<String>,
    pub insecure_registry: Option<String>,
}
