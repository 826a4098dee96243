//! Rows as the domain's typed models (`magnum_core::model`), for the code that must not
//! depend on storage (drivers). JSON columns are decoded; unreadable legacy text reads as
//! empty, NULL flags take upstream's ORM defaults.

use magnum_core::model::{Cluster, ClusterTemplate, Labels, Nodegroup, NodegroupRole};
use serde_json::Value;

use crate::json::loads;
use crate::records::{
    Cluster as ClusterRow, ClusterTemplate as TemplateRow, NodeGroup as NodeGroupRow,
};

fn labels(text: Option<&str>) -> Labels {
    loads(text).unwrap_or_default()
}

impl From<&ClusterRow> for Cluster {
    fn from(c: &ClusterRow) -> Self {
        Cluster {
            uuid: c.uuid.clone().unwrap_or_default().into(),
            name: c.name.clone().unwrap_or_default(),
            project_id: c.project_id.clone(),
            user_id: c.user_id.clone(),
            cluster_template_id: c.cluster_template_id.clone().map(Into::into),
            keypair: c.keypair.clone(),
            docker_volume_size: c.docker_volume_size,
            labels: labels(c.labels.as_deref()),
            master_flavor_id: c.master_flavor_id.clone(),
            flavor_id: c.flavor_id.clone(),
            stack_id: c.stack_id.clone(),
            status: c.status,
            status_reason: c.status_reason.clone(),
            health_status: c.health_status,
            create_timeout: c.create_timeout,
            api_address: c.api_address.clone(),
            discovery_url: c.discovery_url.clone(),
            coe_version: c.coe_version.clone(),
            container_version: c.container_version.clone(),
            fixed_network: c.fixed_network.clone(),
            fixed_subnet: c.fixed_subnet.clone(),
            floating_ip_enabled: c.floating_ip_enabled.unwrap_or(true),
            master_lb_enabled: c.master_lb_enabled.unwrap_or(false),
            ca_cert_ref: c.ca_cert_ref.clone(),
            magnum_cert_ref: c.magnum_cert_ref.clone(),
            etcd_ca_cert_ref: c.etcd_ca_cert_ref.clone(),
            front_proxy_ca_cert_ref: c.front_proxy_ca_cert_ref.clone(),
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

impl From<&NodeGroupRow> for Nodegroup {
    fn from(ng: &NodeGroupRow) -> Self {
        Nodegroup {
            uuid: ng.uuid.clone().into(),
            name: ng.name.clone(),
            cluster_id: ng.cluster_id.clone().into(),
            project_id: ng.project_id.clone(),
            docker_volume_size: ng.docker_volume_size,
            labels: labels(ng.labels.as_deref()),
            flavor_id: ng.flavor_id.clone(),
            image_id: ng.image_id.clone(),
            node_addresses: loads(ng.node_addresses.as_deref()).unwrap_or_default(),
            // A NULL count reads as the object's default, 1.
            node_count: magnum_core::model::object_node_count(ng.node_count),
            role: ng.role.clone().unwrap_or(NodegroupRole::Worker),
            max_node_count: ng.max_node_count,
            min_node_count: ng.min_node_count.unwrap_or(0),
            is_default: ng.is_default.unwrap_or(false),
            stack_id: ng.stack_id.clone(),
            status: ng.status,
            status_reason: ng.status_reason.clone(),
            version: ng.version.clone(),
            node_labels: labels(ng.node_labels.as_deref()),
            node_taints: loads::<Vec<Value>>(ng.node_taints.as_deref()).unwrap_or_default(),
        }
    }
}

impl From<&TemplateRow> for ClusterTemplate {
    fn from(t: &TemplateRow) -> Self {
        ClusterTemplate {
            uuid: t.uuid.clone().unwrap_or_default().into(),
            name: t.name.clone(),
            coe: t.coe.clone(),
            server_type: t.server_type.clone(),
            cluster_distro: t.cluster_distro.clone(),
            driver: t.driver.clone(),
            image_id: t.image_id.clone(),
            flavor_id: t.flavor_id.clone(),
            master_flavor_id: t.master_flavor_id.clone(),
            keypair_id: t.keypair_id.clone(),
            external_network_id: t.external_network_id.clone(),
            fixed_network: t.fixed_network.clone(),
            fixed_subnet: t.fixed_subnet.clone(),
            dns_nameserver: t.dns_nameserver.clone(),
            network_driver: t.network_driver.clone(),
            volume_driver: t.volume_driver.clone(),
            docker_volume_size: t.docker_volume_size,
            docker_storage_driver: t.docker_storage_driver.clone(),
            labels: labels(t.labels.as_deref()),
            tls_disabled: t.tls_disabled.unwrap_or(false),
            master_lb_enabled: t.master_lb_enabled.unwrap_or(false),
            floating_ip_enabled: t.floating_ip_enabled.unwrap_or(true),
            http_proxy: t.http_proxy.clone(),
            https_proxy: t.https_proxy.clone(),
            no_proxy: t.no_proxy.clone(),
            insecure_registry: t.insecure_registry.clone(),
        }
    }
}

/// Every nodegroup of a list as the domain sees it.
pub fn nodegroups(rows: &[NodeGroupRow]) -> Vec<Nodegroup> {
    rows.iter().map(Nodegroup::from).collect()
}
