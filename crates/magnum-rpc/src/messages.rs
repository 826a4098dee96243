//! Arguments of each RPC method. They carry identifiers and the requested change, not the
//! caller's copy of the objects: the conductor re-reads the database, so a stale snapshot
//! can never be acted upon (upstream's flaw, conductor.md §1.5). Ids are the newtypes and
//! health statuses the enum: a message is typed until it is encoded.

use magnum_core::ids::{ClusterTemplateUuid, ClusterUuid, NodeGroupUuid};
use magnum_core::status::ClusterHealthStatus;
use serde::{Deserialize, Serialize};

/// Method names on the wire (oslo.messaging uses the Python method names).
pub mod method {
    pub const CLUSTER_CREATE: &str = "cluster_create";
    pub const CLUSTER_UPDATE: &str = "cluster_update";
    pub const CLUSTER_DELETE: &str = "cluster_delete";
    pub const CLUSTER_RESIZE: &str = "cluster_resize";
    pub const CLUSTER_UPGRADE: &str = "cluster_upgrade";
    pub const NODEGROUP_CREATE: &str = "nodegroup_create";
    pub const NODEGROUP_UPDATE: &str = "nodegroup_update";
    pub const NODEGROUP_DELETE: &str = "nodegroup_delete";
    pub const CREDENTIAL_ROTATE: &str = "credential_rotate";
    pub const SIGN_CERTIFICATE: &str = "sign_certificate";
    pub const GET_CA_CERTIFICATE: &str = "get_ca_certificate";
    pub const ROTATE_CA_CERTIFICATE: &str = "rotate_ca_certificate";
    pub const PING_CONDUCTOR: &str = "ping_conductor";
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRef {
    pub cluster_uuid: ClusterUuid,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterCreate {
    pub cluster_uuid: ClusterUuid,
    pub master_count: i32,
    pub node_count: i32,
    /// Minutes; None means no timeout.
    pub create_timeout: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterUpdate {
    pub cluster_uuid: ClusterUuid,
    /// New node_count of the default worker nodegroup.
    pub node_count: i32,
    pub health_status: Option<ClusterHealthStatus>,
    /// Object of strings, or None to leave it unchanged.
    pub health_status_reason: Option<serde_json::Value>,
    pub rollback: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterResize {
    pub cluster_uuid: ClusterUuid,
    pub nodegroup_uuid: NodeGroupUuid,
    pub node_count: i32,
    pub nodes_to_remove: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterUpgrade {
    pub cluster_uuid: ClusterUuid,
    pub nodegroup_uuid: NodeGroupUuid,
    pub cluster_template_uuid: ClusterTemplateUuid,
    pub max_batch_size: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodegroupRef {
    pub cluster_uuid: ClusterUuid,
    pub nodegroup_uuid: NodeGroupUuid,
}

/// The nodegroup fields a PATCH may change (api.md §6.3.5), with their new values. JSON
/// columns are carried as their stored text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodegroupUpdate {
    pub cluster_uuid: ClusterUuid,
    pub nodegroup_uuid: NodeGroupUuid,
    pub min_node_count: Option<i32>,
    pub max_node_count: Option<i32>,
    pub node_labels: Option<String>,
    pub node_taints: Option<String>,
    pub labels: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignCertificate {
    pub cluster_uuid: ClusterUuid,
    pub csr: String,
    pub ca_cert_type: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetCaCertificate {
    pub cluster_uuid: ClusterUuid,
    pub ca_cert_type: Option<String>,
}
