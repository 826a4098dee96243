//! `nodegroup`: a set of nodes of one cluster; `cluster_id` holds the cluster **uuid**.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "nodegroup")]
pub struct Model {
    pub created_at: Option<DateTime>,
    pub updated_at: Option<DateTime>,
    #[sea_orm(primary_key)]
    pub id: i32,
    pub uuid: String,
    pub name: String,
    pub cluster_id: String,
    pub project_id: String,
    pub docker_volume_size: Option<i32>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub labels: Option<String>,
    pub flavor_id: Option<String>,
    pub image_id: Option<String>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub node_addresses: Option<String>,
    pub node_count: Option<i32>,
    pub max_node_count: Option<i32>,
    pub min_node_count: Option<i32>,
    pub role: Option<String>,
    pub is_default: Option<bool>,
    pub stack_id: Option<String>,
    pub status: Option<String>,
    #[sea_orm(column_type = "Text")]
    pub status_reason: Option<String>,
    pub version: Option<String>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub node_labels: Option<String>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub node_taints: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
