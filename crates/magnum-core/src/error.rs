//! Domain errors. Messages follow upstream Magnum's exception texts, because clients show them;
//! the API layer alone decides the HTTP status and wire shape (see `ErrorKind`).

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The broad class of an error, which the API maps to a status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ErrorKind {
    /// 400
    Invalid,
    /// 403
    Forbidden,
    /// 404
    NotFound,
    /// 409
    Conflict,
    /// 503: a dependency (database, broker, Keystone) cannot be reached.
    Unavailable,
    /// 500
    Internal,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{message}")]
    InvalidParameterValue { message: String },
    #[error("Expected an uuid or int but received {identity}.")]
    InvalidIdentity { identity: String },
    #[error("The sort_key value \"{key}\" is an invalid field for sorting")]
    InvalidSortKey { key: String },
    #[error("ClusterTemplate {template} is referenced by one or multiple clusters.")]
    ClusterTemplateReferenced { template: String },
    /// An operation the resource's current state (or its driver) does not allow.
    #[error("{operation} is not supported.")]
    NotSupported { operation: String },

    #[error("Cluster {cluster} could not be found.")]
    ClusterNotFound { cluster: String },
    #[error("ClusterTemplate {template} could not be found.")]
    ClusterTemplateNotFound { template: String },
    #[error("Nodegroup {nodegroup} could not be found.")]
    NodeGroupNotFound { nodegroup: String },
    #[error("A key pair {x509keypair} could not be found.")]
    X509KeyPairNotFound { x509keypair: String },
    #[error("A magnum service {magnum_service_id} could not be found.")]
    MagnumServiceNotFound { magnum_service_id: String },
    #[error("Quota could not be found: {msg}")]
    QuotaNotFound { msg: String },
    #[error("Federation {federation} could not be found.")]
    FederationNotFound { federation: String },

    #[error("A cluster with UUID {uuid} already exists.")]
    ClusterAlreadyExists { uuid: String },
    #[error("A ClusterTemplate with UUID {uuid} already exists.")]
    ClusterTemplateAlreadyExists { uuid: String },
    #[error("A node group with name {name} already exists in the cluster {cluster_id}.")]
    NodeGroupAlreadyExists { name: String, cluster_id: String },
    #[error("A key pair with UUID {uuid} already exists.")]
    X509KeyPairAlreadyExists { uuid: String },
    #[error("A magnum service with ID {id} already exists.")]
    MagnumServiceAlreadyExists { id: String },
    #[error("Quota for project {project_id} already exists for resource {resource}.")]
    QuotaAlreadyExists {
        project_id: String,
        resource: String,
    },
    #[error("A federation with UUID {uuid} already exists.")]
    FederationAlreadyExists { uuid: String },
    /// Ambiguous names and other 409s with a free-text message.
    #[error("{message}")]
    Conflict { message: String },
    /// Someone else changed the row between our read and our write; the write was not applied.
    #[error("{resource} {id} was modified concurrently ({fields}); reload it and try again.")]
    StaleWrite {
        resource: &'static str,
        id: String,
        fields: String,
    },

    /// Refused for the caller (e.g. a quota reached), with upstream's text.
    #[error("{message}")]
    Forbidden { message: String },
    /// An error raised on the other side of an RPC call, carried over with its class.
    #[error("{message}")]
    Remote { kind: ErrorKind, message: String },

    /// Not found, with a free-text message (upstream's plain 404s).
    #[error("{message}")]
    NotFound { message: String },
    /// Another service this one needs (Keystone, Glance, ...) cannot be reached.
    #[error("{message}")]
    ServiceUnavailable { message: String },
    #[error("Database unavailable: {0}")]
    DatabaseUnavailable(String),
    #[error("Database error: {0}")]
    Database(String),
    #[error("{0}")]
    Internal(String),
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        use Error::*;
        match self {
            InvalidParameterValue { .. }
            | InvalidIdentity { .. }
            | InvalidSortKey { .. }
            | ClusterTemplateReferenced { .. }
            | NotSupported { .. } => ErrorKind::Invalid,
            ClusterNotFound { .. }
            | ClusterTemplateNotFound { .. }
            | NodeGroupNotFound { .. }
            | X509KeyPairNotFound { .. }
            | MagnumServiceNotFound { .. }
            | QuotaNotFound { .. }
            | FederationNotFound { .. }
            | NotFound { .. } => ErrorKind::NotFound,
            ClusterAlreadyExists { .. }
            | ClusterTemplateAlreadyExists { .. }
            | NodeGroupAlreadyExists { .. }
            | X509KeyPairAlreadyExists { .. }
            | MagnumServiceAlreadyExists { .. }
            | QuotaAlreadyExists { .. }
            | FederationAlreadyExists { .. }
            | Conflict { .. }
            | StaleWrite { .. } => ErrorKind::Conflict,
            Forbidden { .. } => ErrorKind::Forbidden,
            Remote { kind, .. } => *kind,
            DatabaseUnavailable(_) | ServiceUnavailable { .. } => ErrorKind::Unavailable,
            Database(_) | Internal(_) => ErrorKind::Internal,
        }
    }

    /// Upstream's `ResourceLimitExceeded` for the cluster quota.
    pub fn cluster_quota_exceeded(limit: u64) -> Self {
        Error::Forbidden {
            message: format!(
                "Resource limit exceeded: You have reached the maximum clusters per project, {limit}. You may delete a cluster to make room for a new one."
            ),
        }
    }

    pub fn multiple(resource_plural: &str, id_word: &str) -> Self {
        Error::Conflict {
            message: format!(
                "Multiple {resource_plural} exist with same name. Please use the {id_word} uuid instead."
            ),
        }
    }
}

impl ErrorKind {
    /// The HTTP status this kind stands for; also the `code` an RPC failure carries.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::Invalid => 400,
            ErrorKind::Forbidden => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
        }
    }

    /// The kind of an HTTP status received from a peer (an RPC failure's `code`).
    pub fn from_http_status(code: u16) -> Self {
        match code {
            401 | 403 => ErrorKind::Forbidden,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::Conflict,
            503 => ErrorKind::Unavailable,
            400..=499 => ErrorKind::Invalid,
            _ => ErrorKind::Internal,
        }
    }
}

impl Error {
    /// Upstream's exception class (`magnum.common.exception`) for this error, so a Python peer
    /// re-raises the same class and answers the same HTTP status (rpc-wire.md §10.2). A
    /// remote error's own class is not kept here; the closest class of its kind stands in.
    pub fn class_name(&self) -> &'static str {
        use Error::*;
        match self {
            InvalidParameterValue { .. } | InvalidSortKey { .. } => "InvalidParameterValue",
            InvalidIdentity { .. } => "InvalidIdentity",
            ClusterTemplateReferenced { .. } => "ClusterTemplateReferenced",
            NotSupported { .. } => "NotSupported",
            ClusterNotFound { .. } => "ClusterNotFound",
            ClusterTemplateNotFound { .. } => "ClusterTemplateNotFound",
            NodeGroupNotFound { .. } => "NodeGroupNotFound",
            X509KeyPairNotFound { .. } => "X509KeyPairNotFound",
            MagnumServiceNotFound { .. } => "MagnumServiceNotFound",
            QuotaNotFound { .. } => "QuotaNotFound",
            FederationNotFound { .. } => "FederationNotFound",
            ClusterAlreadyExists { .. } => "ClusterAlreadyExists",
            ClusterTemplateAlreadyExists { .. } => "ClusterTemplateAlreadyExists",
            NodeGroupAlreadyExists { .. } => "NodeGroupAlreadyExists",
            X509KeyPairAlreadyExists { .. } => "X509KeyPairAlreadyExists",
            MagnumServiceAlreadyExists { .. } => "MagnumServiceAlreadyExists",
            QuotaAlreadyExists { .. } => "QuotaAlreadyExists",
            FederationAlreadyExists { .. } => "FederationAlreadyExists",
            Conflict { .. } | StaleWrite { .. } => "Conflict",
            Forbidden { .. } => "NotAuthorized",
            Remote { kind, .. } => match kind {
                ErrorKind::Invalid => "Invalid",
                ErrorKind::Forbidden => "NotAuthorized",
                ErrorKind::NotFound => "ObjectNotFound",
                ErrorKind::Conflict => "Conflict",
                ErrorKind::Unavailable | ErrorKind::Internal => "MagnumException",
            },
            NotFound { .. } => "ObjectNotFound",
            ServiceUnavailable { .. } | DatabaseUnavailable(_) | Database(_) | Internal(_) => {
                "MagnumException"
            }
        }
    }

    /// The keyword arguments upstream's class formats its message with (e.g. `cluster` for
    /// ClusterNotFound); they travel in an RPC failure's `kwargs` next to `code`.
    pub fn format_params(&self) -> Vec<(&'static str, String)> {
        use Error::*;
        match self {
            InvalidParameterValue { message } => vec![("err", message.clone())],
            InvalidSortKey { .. } => vec![("err", self.to_string())],
            InvalidIdentity { identity } => vec![("identity", identity.clone())],
            ClusterTemplateReferenced { template } | ClusterTemplateNotFound { template } => {
                vec![("clustertemplate", template.clone())]
            }
            NotSupported { operation } => vec![("operation", operation.clone())],
            ClusterNotFound { cluster } => vec![("cluster", cluster.clone())],
            NodeGroupNotFound { nodegroup } => vec![("nodegroup", nodegroup.clone())],
            X509KeyPairNotFound { x509keypair } => vec![("x509keypair", x509keypair.clone())],
            MagnumServiceNotFound { magnum_service_id } => {
                vec![("magnum_service_id", magnum_service_id.clone())]
            }
            QuotaNotFound { msg } => vec![("msg", msg.clone())],
            FederationNotFound { federation } => vec![("federation", federation.clone())],
            ClusterAlreadyExists { uuid }
            | ClusterTemplateAlreadyExists { uuid }
            | X509KeyPairAlreadyExists { uuid }
            | FederationAlreadyExists { uuid } => vec![("uuid", uuid.clone())],
            NodeGroupAlreadyExists { name, cluster_id } => {
                vec![("name", name.clone()), ("cluster_id", cluster_id.clone())]
            }
            MagnumServiceAlreadyExists { id } => vec![("id", id.clone())],
            QuotaAlreadyExists {
                project_id,
                resource,
            } => vec![
                ("project_id", project_id.clone()),
                ("resource", resource.clone()),
            ],
            _ => Vec::new(),
        }
    }
}
