//! `cluster` (upstream `bay`): one Kubernetes cluster.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "cluster")]
pub struct Model {
    pub created_at: Option<DateTime>,
    pub updated_at: Option<DateTime>,
    #[sea_orm(primary_key)]
    pub id: i32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub cluster_template_id: Option<String>,
    pub api_address: Option<String>,
    pub stack_id: Option<String>,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub status: Option<String>,
    pub discovery_url: Option<String>,
    #[sea_orm(column_type = "Text")]
    pub status_reason: Option<String>,
    pub ca_cert_ref: Option<String>,
    pub magnum_cert_ref: Option<String>,
    pub create_timeout: Option<i32>,
    pub coe_version: Option<String>,
    pub container_version: Option<String>,
    pub keypair: Option<String>,
    pub docker_volume_size: Option<i32>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub labels: Option<String>,
    pub master_flavor_id: Option<String>,
    pub flavor_id: Option<String>,
    pub health_status: Option<String>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub health_status_reason: Option<String>,
    pub fixed_network: Option<String>,
    pub fixed_subnet: Option<String>,
    pub floating_ip_enabled: Option<bool>,
    pub master_lb_enabled: Option<bool>,
    pub etcd_ca_cert_ref: Option<String>,
    pub front_proxy_ca_cert_ref: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
