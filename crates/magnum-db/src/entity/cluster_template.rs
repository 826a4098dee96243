//! `cluster_template` (upstream `baymodel`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "cluster_template")]
pub struct Model {
    pub created_at: Option<DateTime>,
    pub updated_at: Option<DateTime>,
    #[sea_orm(primary_key)]
    pub id: i32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub flavor_id: Option<String>,
    pub keypair_id: Option<String>,
    pub image_id: Option<String>,
    pub external_network_id: Option<String>,
    pub dns_nameserver: Option<String>,
    pub apiserver_port: Option<i32>,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub docker_volume_size: Option<i32>,
    pub fixed_network: Option<String>,
    pub master_flavor_id: Option<String>,
    pub cluster_distro: Option<String>,
    pub coe: Option<String>,
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub no_proxy: Option<String>,
    pub registry_enabled: Option<bool>,
    pub network_driver: Option<String>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub labels: Option<String>,
    pub tls_disabled: Option<bool>,
    pub public: Option<bool>,
    pub server_type: Option<String>,
    pub volume_driver: Option<String>,
    pub insecure_registry: Option<String>,
    pub docker_storage_driver: Option<String>,
    pub master_lb_enabled: Option<bool>,
    pub fixed_subnet: Option<String>,
    pub floating_ip_enabled: Option<bool>,
    pub hidden: Option<bool>,
    pub tags: Option<String>,
    pub driver: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
