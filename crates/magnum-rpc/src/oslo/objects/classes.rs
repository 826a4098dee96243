//! The field tables of upstream's object classes at the versions of rpc-wire.md §11.2, in Python's
//! declaration order (persistent objects end with `created_at`, `updated_at`).

use super::{Class, Field, FieldDefault, Kind, Version};

/// Nullable field, no default.
const fn opt(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        nullable: true,
        default: None,
    }
}

/// Non-nullable field without a default: None is refused.
const fn req(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        nullable: false,
        default: None,
    }
}

/// Non-nullable field with a default that None turns into.
const fn def(name: &'static str, kind: Kind, default: FieldDefault) -> Field {
    Field {
        name,
        kind,
        nullable: false,
        default: Some(default),
    }
}

const TRUE: FieldDefault = FieldDefault::Bool(true);
const FALSE: FieldDefault = FieldDefault::Bool(false);

/// magnum.objects.fields.ClusterStatus.
pub const CLUSTER_STATUS: &[&str] = magnum_core::status::ClusterStatus::NAMES;
/// FederationStatus: the first nine cluster statuses.
const FEDERATION_STATUS: &[&str] = CLUSTER_STATUS.split_at(9).0;
const HEALTH_STATUS: &[&str] = magnum_core::status::ClusterHealthStatus::NAMES;
const CLUSTER_TYPE: &[&str] = &["kubernetes"];

const CREATED_AT: Field = opt("created_at", Kind::DateTime);
const UPDATED_AT: Field = opt("updated_at", Kind::DateTime);

pub static CLUSTER: Class = Class {
    name: "Cluster",
    version: Version::new(1, 24),
    fields: &[
        req("id", Kind::Int),
        opt("uuid", Kind::Uuid),
        opt("name", Kind::Str),
        opt("project_id", Kind::Str),
        opt("user_id", Kind::Str),
        opt("cluster_template_id", Kind::Str),
        opt("keypair", Kind::Str),
        opt("docker_volume_size", Kind::Int),
        opt("labels", Kind::DictOfStrings),
        opt("master_flavor_id", Kind::Str),
        opt("flavor_id", Kind::Str),
        opt("stack_id", Kind::Str),
        opt("status", Kind::Enum(CLUSTER_STATUS)),
        opt("status_reason", Kind::Str),
        opt("health_status", Kind::Enum(HEALTH_STATUS)),
        opt("health_status_reason", Kind::DictOfStrings),
        opt("create_timeout", Kind::Int),
        opt("api_address", Kind::Str),
        opt("discovery_url", Kind::Str),
        opt("ca_cert_ref", Kind::Str),
        opt("magnum_cert_ref", Kind::Str),
        opt("etcd_ca_cert_ref", Kind::Str),
        opt("front_proxy_ca_cert_ref", Kind::Str),
        req("cluster_template", Kind::Object("ClusterTemplate")),
        opt("coe_version", Kind::Str),
        opt("container_version", Kind::Str),
        opt("fixed_network", Kind::Str),
        opt("fixed_subnet", Kind::Str),
        def("floating_ip_enabled", Kind::Bool, TRUE),
        def("master_lb_enabled", Kind::Bool, FALSE),
        CREATED_AT,
        UPDATED_AT,
    ],
};

pub static CLUSTER_TEMPLATE: Class = Class {
    name: "ClusterTemplate",
    version: Version::new(1, 21),
    fields: &[
        req("id", Kind::Int),
        // A plain StringField upstream, unlike the other objects' UUIDField.
        opt("uuid", Kind::Str),
        opt("project_id", Kind::Str),
        opt("user_id", Kind::Str),
        opt("name", Kind::Str),
        opt("image_id", Kind::Str),
        opt("flavor_id", Kind::Str),
        opt("master_flavor_id", Kind::Str),
        opt("keypair_id", Kind::Str),
        opt("dns_nameserver", Kind::Str),
        opt("external_network_id", Kind::Str),
        opt("fixed_network", Kind::Str),
        opt("fixed_subnet", Kind::Str),
        opt("network_driver", Kind::Str),
        opt("volume_driver", Kind::Str),
        opt("apiserver_port", Kind::Int),
        opt("docker_volume_size", Kind::Int),
        opt("docker_storage_driver", Kind::Str),
        opt("cluster_distro", Kind::Str),
        opt("coe", Kind::Enum(CLUSTER_TYPE)),
        opt("http_proxy", Kind::Str),
        opt("https_proxy", Kind::Str),
        opt("no_proxy", Kind::Str),
        def("registry_enabled", Kind::Bool, FALSE),
        opt("labels", Kind::DictOfStrings),
        def("tls_disabled", Kind::Bool, FALSE),
        def("public", Kind::Bool, FALSE),
        opt("server_type", Kind::Str),
        opt("insecure_registry", Kind::Str),
        def("master_lb_enabled", Kind::Bool, FALSE),
        def("floating_ip_enabled", Kind::Bool, TRUE),
        def("hidden", Kind::Bool, FALSE),
        opt("tags", Kind::Str),
        opt("driver", Kind::Str),
        CREATED_AT,
        UPDATED_AT,
    ],
};

pub static NODEGROUP: Class = Class {
    name: "NodeGroup",
    version: Version::new(1, 2),
    fields: &[
        req("id", Kind::Int),
        req("uuid", Kind::Uuid),
        req("name", Kind::Str),
        req("cluster_id", Kind::Str),
        req("project_id", Kind::Str),
        opt("docker_volume_size", Kind::Int),
        opt("labels", Kind::DictOfStrings),
        opt("flavor_id", Kind::Str),
        opt("image_id", Kind::Str),
        opt("node_addresses", Kind::ListOfStrings),
        def("node_count", Kind::Int, FieldDefault::Int(1)),
        req("role", Kind::Str),
        opt("max_node_count", Kind::Int),
        def("min_node_count", Kind::Int, FieldDefault::Int(0)),
        def("is_default", Kind::Bool, FALSE),
        opt("stack_id", Kind::Str),
        opt("status", Kind::Enum(CLUSTER_STATUS)),
        opt("status_reason", Kind::Str),
        opt("version", Kind::Str),
        opt("node_labels", Kind::DictOfStrings),
        opt("node_taints", Kind::ListOfDicts),
        CREATED_AT,
        UPDATED_AT,
    ],
};

/// Not persisted; a persistent object all the same, hence the two timestamps.
pub static CERTIFICATE: Class = Class {
    name: "Certificate",
    version: Version::new(1, 2),
    fields: &[
        opt("project_id", Kind::Str),
        opt("user_id", Kind::Str),
        opt("cluster_uuid", Kind::Str),
        opt("csr", Kind::Str),
        opt("pem", Kind::Str),
        opt("ca_cert_type", Kind::Str),
        CREATED_AT,
        UPDATED_AT,
    ],
};

pub static X509KEYPAIR: Class = Class {
    name: "X509KeyPair",
    version: Version::new(1, 2),
    fields: &[
        req("id", Kind::Int),
        opt("uuid", Kind::Uuid),
        opt("certificate", Kind::Str),
        opt("private_key", Kind::Str),
        opt("intermediates", Kind::Str),
        opt("private_key_passphrase", Kind::Str),
        opt("project_id", Kind::Str),
        opt("user_id", Kind::Str),
        CREATED_AT,
        UPDATED_AT,
    ],
};

pub static MAGNUM_SERVICE: Class = Class {
    name: "MagnumService",
    version: Version::new(1, 0),
    fields: &[
        req("id", Kind::Int),
        opt("host", Kind::Str),
        opt("binary", Kind::Str),
        req("disabled", Kind::Bool),
        opt("disabled_reason", Kind::Str),
        opt("last_seen_up", Kind::DateTime),
        req("forced_down", Kind::Bool),
        req("report_count", Kind::Int),
        CREATED_AT,
        UPDATED_AT,
    ],
};

pub static QUOTA: Class = Class {
    name: "Quota",
    version: Version::new(1, 0),
    fields: &[
        req("id", Kind::Int),
        req("project_id", Kind::Str),
        req("resource", Kind::Str),
        req("hard_limit", Kind::Int),
        CREATED_AT,
        UPDATED_AT,
    ],
};

pub static FEDERATION: Class = Class {
    name: "Federation",
    version: Version::new(1, 0),
    fields: &[
        req("id", Kind::Int),
        opt("uuid", Kind::Uuid),
        opt("name", Kind::Str),
        opt("project_id", Kind::Str),
        opt("hostcluster_id", Kind::Str),
        opt("member_ids", Kind::ListOfStrings),
        opt("status", Kind::Enum(FEDERATION_STATUS)),
        opt("status_reason", Kind::Str),
        opt("properties", Kind::DictOfStrings),
        CREATED_AT,
        UPDATED_AT,
    ],
};

/// Not persistent: no timestamps.
pub static STATS: Class = Class {
    name: "Stats",
    version: Version::new(1, 0),
    fields: &[req("clusters", Kind::Int), opt("nodes", Kind::Int)],
};

static ALL: [&Class; 9] = [
    &CLUSTER,
    &CLUSTER_TEMPLATE,
    &NODEGROUP,
    &CERTIFICATE,
    &X509KEYPAIR,
    &MAGNUM_SERVICE,
    &QUOTA,
    &FEDERATION,
    &STATS,
];

/// The class registered under `name`.
pub fn class(name: &str) -> Option<&'static Class> {
    ALL.iter().copied().find(|c| c.name == name)
}
