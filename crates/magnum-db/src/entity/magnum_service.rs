//! `magnum_service`: conductor heartbeat rows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "magnum_service")]
pub struct Model {
    pub created_at: Option<DateTime>,
    pub updated_at: Option<DateTime>,
    #[sea_orm(primary_key)]
    pub id: i32,
    pub report_count: i32,
    pub host: Option<String>,
    pub binary: Option<String>,
    pub disabled: Option<bool>,
    pub disabled_reason: Option<String>,
    pub last_seen_up: Option<DateTime>,
    pub forced_down: Option<bool>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
