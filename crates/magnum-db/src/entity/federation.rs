//! `federation`: cluster federations (API-only upstream).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "federation")]
pub struct Model {
    pub created_at: Option<DateTime>,
    pub updated_at: Option<DateTime>,
    #[sea_orm(primary_key)]
    pub id: i32,
    pub project_id: Option<String>,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub hostcluster_id: Option<String>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub member_ids: Option<String>,
    pub status: Option<String>,
    #[sea_orm(column_type = "Text")]
    pub status_reason: Option<String>,
    /// JSON text, written byte for byte as Python's `json.dumps` does.
    #[sea_orm(column_type = "Text")]
    pub properties: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
