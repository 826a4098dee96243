//! What storage hands up: one plain struct per table, its columns as stored (JSON columns
//! stay text, so the API can show them byte for byte) but statuses, health statuses and
//! roles typed. The sea-orm entities stay inside this crate; every repository converts at
//! its edge.
//!
//! A status text no release of Magnum writes reads as `None`. Saves write only the columns a
//! writer changed (`repo::diff`), so such a row keeps its text unless a writer sets a status.

use chrono::NaiveDateTime;
use magnum_core::model::NodegroupRole;
use magnum_core::status::{ClusterHealthStatus, ClusterStatus, FederationStatus};

use crate::entity::{
    cluster, cluster_template, federation, magnum_service, nodegroup, quotas, x509keypair,
};
use crate::fields::{ColumnKind, FieldError, FieldType, FieldValue, RowFields};

/// A column's stored form (`S`) and the form storage hands up (`Self`).
trait Stored<S>: Sized {
    fn read(stored: S) -> Self;
    fn write(self) -> S;
}

impl<T> Stored<T> for T {
    fn read(stored: T) -> Self {
        stored
    }
    fn write(self) -> T {
        self
    }
}

macro_rules! stored_enum {
    ($($ty:ty),+) => {$(
        impl Stored<Option<String>> for Option<$ty> {
            fn read(stored: Option<String>) -> Self {
                stored.as_deref()?.parse().ok()
            }
            fn write(self) -> Option<String> {
                self.map(|s| s.as_str().to_owned())
            }
        }
    )+};
}
stored_enum!(ClusterStatus, ClusterHealthStatus, FederationStatus);

impl Stored<Option<String>> for Option<NodegroupRole> {
    fn read(stored: Option<String>) -> Self {
        stored.map(|r| NodegroupRole::parse(Some(&r)))
    }
    fn write(self) -> Option<String> {
        self.map(|r| r.as_str().to_owned())
    }
}

/// `record!(Name <- entity { field: Type, ... })`: the struct, the conversions both ways with
/// the entity's `Model` (fields in any order; every column must be listed), and its columns
/// by name ([`RowFields`]) for the upstream object bridge.
macro_rules! record {
    ($(#[$meta:meta])* $name:ident <- $entity:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),+ }

        impl From<$entity::Model> for $name {
            fn from(m: $entity::Model) -> Self {
                Self { $($field: Stored::read(m.$field)),+ }
            }
        }

        impl From<$name> for $entity::Model {
            fn from(r: $name) -> Self {
                Self { $($field: Stored::write(r.$field)),+ }
            }
        }

        impl RowFields for $name {
            fn column_kind(&self, name: &str) -> Option<ColumnKind> {
                match name {
                    $(stringify!($field) => Some(<$ty as FieldType>::KIND),)+
                    _ => None,
                }
            }

            fn column_value(&self, name: &str) -> Option<FieldValue> {
                match name {
                    $(stringify!($field) => Some(self.$field.value()),)+
                    _ => None,
                }
            }

            fn set_column_value(&mut self, name: &str, value: FieldValue) -> Result<(), FieldError> {
                match name {
                    $(stringify!($field) => {
                        self.$field = FieldType::from_value(value).map_err(|value| FieldError::Type {
                            column: name.to_owned(),
                            value,
                        })?;
                        Ok(())
                    })+
                    _ => Err(FieldError::NoColumn(name.to_owned())),
                }
            }
        }
    };
}

record!(
    /// A `cluster` row (upstream's `bay`).
    Cluster <- cluster {
        created_at: Option<NaiveDateTime>,
        updated_at: Option<NaiveDateTime>,
        id: i32,
        uuid: Option<String>,
        name: Option<String>,
        cluster_template_id: Option<String>,
        api_address: Option<String>,
        stack_id: Option<String>,
        project_id: Option<String>,
        user_id: Option<String>,
        status: Option<ClusterStatus>,
        discovery_url: Option<String>,
        status_reason: Option<String>,
        ca_cert_ref: Option<String>,
        magnum_cert_ref: Option<String>,
        create_timeout: Option<i32>,
        coe_version: Option<String>,
        container_version: Option<String>,
        keypair: Option<String>,
        docker_volume_size: Option<i32>,
        /// JSON text, written byte for byte as Python's `json.dumps` does.
        labels: Option<String>,
        master_flavor_id: Option<String>,
        flavor_id: Option<String>,
        health_status: Option<ClusterHealthStatus>,
        /// JSON text, written byte for byte as Python's `json.dumps` does.
        health_status_reason: Option<String>,
        fixed_network: Option<String>,
        fixed_subnet: Option<String>,
        floating_ip_enabled: Option<bool>,
        master_lb_enabled: Option<bool>,
        etcd_ca_cert_ref: Option<String>,
        front_proxy_ca_cert_ref: Option<String>,
    }
);

record!(
    /// A `nodegroup` row.
    NodeGroup <- nodegroup {
        created_at: Option<NaiveDateTime>,
        updated_at: Option<NaiveDateTime>,
        id: i32,
        uuid: String,
        name: String,
        cluster_id: String,
        project_id: String,
        docker_volume_size: Option<i32>,
        /// JSON text.
        labels: Option<String>,
        flavor_id: Option<String>,
        image_id: Option<String>,
        /// JSON text (a list of addresses).
        node_addresses: Option<String>,
        node_count: Option<i32>,
        max_node_count: Option<i32>,
        min_node_count: Option<i32>,
        role: Option<NodegroupRole>,
        is_default: Option<bool>,
        stack_id: Option<String>,
        status: Option<ClusterStatus>,
        status_reason: Option<String>,
        version: Option<String>,
        /// JSON text.
        node_labels: Option<String>,
        /// JSON text (a list of taints).
        node_taints: Option<String>,
    }
);

record!(
    /// A `cluster_template` row (upstream's `baymodel`).
    ClusterTemplate <- cluster_template {
        created_at: Option<NaiveDateTime>,
        updated_at: Option<NaiveDateTime>,
        id: i32,
        uuid: Option<String>,
        name: Option<String>,
        flavor_id: Option<String>,
        keypair_id: Option<String>,
        image_id: Option<String>,
        external_network_id: Option<String>,
        dns_nameserver: Option<String>,
        apiserver_port: Option<i32>,
        project_id: Option<String>,
        user_id: Option<String>,
        docker_volume_size: Option<i32>,
        fixed_network: Option<String>,
        master_flavor_id: Option<String>,
        cluster_distro: Option<String>,
        coe: Option<String>,
        http_proxy: Option<String>,
        https_proxy: Option<String>,
        no_proxy: Option<String>,
        registry_enabled: Option<bool>,
        network_driver: Option<String>,
        /// JSON text.
        labels: Option<String>,
        tls_disabled: Option<bool>,
        public: Option<bool>,
        server_type: Option<String>,
        volume_driver: Option<String>,
        insecure_registry: Option<String>,
        docker_storage_driver: Option<String>,
        master_lb_enabled: Option<bool>,
        fixed_subnet: Option<String>,
        floating_ip_enabled: Option<bool>,
        hidden: Option<bool>,
        tags: Option<String>,
        driver: Option<String>,
    }
);

record!(
    /// A `federation` row.
    Federation <- federation {
        created_at: Option<NaiveDateTime>,
        updated_at: Option<NaiveDateTime>,
        id: i32,
        project_id: Option<String>,
        uuid: Option<String>,
        name: Option<String>,
        hostcluster_id: Option<String>,
        /// JSON text (a list of cluster uuids).
        member_ids: Option<String>,
        status: Option<FederationStatus>,
        status_reason: Option<String>,
        /// JSON text.
        properties: Option<String>,
    }
);

record!(
    /// A `magnum_service` row: one process's heartbeat.
    MagnumService <- magnum_service {
        created_at: Option<NaiveDateTime>,
        updated_at: Option<NaiveDateTime>,
        id: i32,
        report_count: i32,
        host: Option<String>,
        binary: Option<String>,
        disabled: Option<bool>,
        disabled_reason: Option<String>,
        last_seen_up: Option<NaiveDateTime>,
        forced_down: Option<bool>,
    }
);

record!(
    /// A `quotas` row.
    Quota <- quotas {
        id: i32,
        created_at: Option<NaiveDateTime>,
        updated_at: Option<NaiveDateTime>,
        project_id: Option<String>,
        resource: Option<String>,
        hard_limit: i32,
    }
);

record!(
    /// An `x509keypair` row: certificates kept by the `x509keypair` cert manager.
    X509KeyPair <- x509keypair {
        id: i32,
        created_at: Option<NaiveDateTime>,
        updated_at: Option<NaiveDateTime>,
        uuid: Option<String>,
        certificate: Option<String>,
        private_key: Option<String>,
        project_id: Option<String>,
        user_id: Option<String>,
        intermediates: Option<String>,
        private_key_passphrase: Option<String>,
    }
);
