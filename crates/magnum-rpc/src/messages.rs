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
    /// The new cluster as upstream's API sent it (an oslo object primitive) when no row exists
    /// yet: the conductor inserts it, with its default nodegroups, before it builds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsaved: Option<serde_json::Value>,
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
    /// For `nodegroup_create` from upstream's API: the new nodegroup (an oslo object
    /// primitive) when no row exists yet; the conductor inserts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsaved: Option<serde_json::Value>,
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

/// One request of the RPC surface. Each variant is a method of upstream's conductor API; the
/// API sends it, the transport carries its name and arguments, the conductor handles it.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    ClusterCreate(ClusterCreate),
    ClusterUpdate(ClusterUpdate),
    ClusterDelete(ClusterRef),
    ClusterResize(ClusterResize),
    ClusterUpgrade(ClusterUpgrade),
    NodegroupCreate(NodegroupRef),
    NodegroupUpdate(NodegroupUpdate),
    NodegroupDelete(NodegroupRef),
    CredentialRotate(ClusterRef),
    SignCertificate(SignCertificate),
    GetCaCertificate(GetCaCertificate),
    RotateCaCertificate(ClusterRef),
    PingConductor,
}

/// What a handled [`Request`] gives back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A cast handed over, or a call that returns nothing the API reads.
    Done,
    /// A certificate (PEM): `sign_certificate`, `get_ca_certificate`.
    Pem(String),
    /// `ping_conductor`: whether a conductor answered.
    Alive(bool),
}

impl Request {
    /// The method's name on the wire (upstream's).
    pub fn method(&self) -> &'static str {
        match self {
            Self::ClusterCreate(_) => method::CLUSTER_CREATE,
            Self::ClusterUpdate(_) => method::CLUSTER_UPDATE,
            Self::ClusterDelete(_) => method::CLUSTER_DELETE,
            Self::ClusterResize(_) => method::CLUSTER_RESIZE,
            Self::ClusterUpgrade(_) => method::CLUSTER_UPGRADE,
            Self::NodegroupCreate(_) => method::NODEGROUP_CREATE,
            Self::NodegroupUpdate(_) => method::NODEGROUP_UPDATE,
            Self::NodegroupDelete(_) => method::NODEGROUP_DELETE,
            Self::CredentialRotate(_) => method::CREDENTIAL_ROTATE,
            Self::SignCertificate(_) => method::SIGN_CERTIFICATE,
            Self::GetCaCertificate(_) => method::GET_CA_CERTIFICATE,
            Self::RotateCaCertificate(_) => method::ROTATE_CA_CERTIFICATE,
            Self::PingConductor => method::PING_CONDUCTOR,
        }
    }

    /// Casts return once the message is handed over; the rest are calls, whose answer (or
    /// refusal) the API waits for, as upstream's API does.
    pub fn is_cast(&self) -> bool {
        matches!(
            self,
            Self::ClusterCreate(_)
                | Self::ClusterUpdate(_)
                | Self::ClusterDelete(_)
                | Self::ClusterResize(_)
                | Self::NodegroupCreate(_)
                | Self::NodegroupUpdate(_)
                | Self::NodegroupDelete(_)
        )
    }

    /// The cluster it is about (every request but the ping names one).
    pub fn cluster(&self) -> Option<&ClusterUuid> {
        Some(match self {
            Self::ClusterCreate(r) => &r.cluster_uuid,
            Self::ClusterUpdate(r) => &r.cluster_uuid,
            Self::ClusterDelete(r) | Self::CredentialRotate(r) | Self::RotateCaCertificate(r) => {
                &r.cluster_uuid
            }
            Self::ClusterResize(r) => &r.cluster_uuid,
            Self::ClusterUpgrade(r) => &r.cluster_uuid,
            Self::NodegroupCreate(r) | Self::NodegroupDelete(r) => &r.cluster_uuid,
            Self::NodegroupUpdate(r) => &r.cluster_uuid,
            Self::SignCertificate(r) => &r.cluster_uuid,
            Self::GetCaCertificate(r) => &r.cluster_uuid,
            Self::PingConductor => return None,
        })
    }

    /// The arguments as they travel (an object; the ping has none).
    pub fn args(&self) -> serde_json::Result<serde_json::Value> {
        use serde_json::to_value;
        match self {
            Self::ClusterCreate(r) => to_value(r),
            Self::ClusterUpdate(r) => to_value(r),
            Self::ClusterDelete(r) | Self::CredentialRotate(r) | Self::RotateCaCertificate(r) => {
                to_value(r)
            }
            Self::ClusterResize(r) => to_value(r),
            Self::ClusterUpgrade(r) => to_value(r),
            Self::NodegroupCreate(r) | Self::NodegroupDelete(r) => to_value(r),
            Self::NodegroupUpdate(r) => to_value(r),
            Self::SignCertificate(r) => to_value(r),
            Self::GetCaCertificate(r) => to_value(r),
            Self::PingConductor => Ok(serde_json::Value::Object(Default::default())),
        }
    }

    /// A request from its method name and arguments; None for a method that is not ours.
    pub fn decode(method_name: &str, args: serde_json::Value) -> Option<serde_json::Result<Self>> {
        use serde_json::from_value as de;
        Some(match method_name {
            method::CLUSTER_CREATE => de(args).map(Self::ClusterCreate),
            method::CLUSTER_UPDATE => de(args).map(Self::ClusterUpdate),
            method::CLUSTER_DELETE => de(args).map(Self::ClusterDelete),
            method::CLUSTER_RESIZE => de(args).map(Self::ClusterResize),
            method::CLUSTER_UPGRADE => de(args).map(Self::ClusterUpgrade),
            method::NODEGROUP_CREATE => de(args).map(Self::NodegroupCreate),
            method::NODEGROUP_UPDATE => de(args).map(Self::NodegroupUpdate),
            method::NODEGROUP_DELETE => de(args).map(Self::NodegroupDelete),
            method::CREDENTIAL_ROTATE => de(args).map(Self::CredentialRotate),
            method::SIGN_CERTIFICATE => de(args).map(Self::SignCertificate),
            method::GET_CA_CERTIFICATE => de(args).map(Self::GetCaCertificate),
            method::ROTATE_CA_CERTIFICATE => de(args).map(Self::RotateCaCertificate),
            method::PING_CONDUCTOR => Ok(Self::PingConductor),
            _ => return None,
        })
    }

    /// The reply of this request from the value that came back.
    pub fn reply_from(&self, v: serde_json::Value) -> serde_json::Result<Reply> {
        Ok(match self {
            Self::SignCertificate(_) | Self::GetCaCertificate(_) => {
                Reply::Pem(serde_json::from_value(v)?)
            }
            Self::PingConductor => Reply::Alive(serde_json::from_value(v)?),
            _ => Reply::Done,
        })
    }
}

impl Reply {
    /// The value that travels back (`null` for [`Reply::Done`]).
    pub fn into_value(self) -> serde_json::Value {
        match self {
            Self::Done => serde_json::Value::Null,
            Self::Pem(p) => serde_json::Value::String(p),
            Self::Alive(b) => serde_json::Value::Bool(b),
        }
    }
}
