//! `x509keypair`: certificates stored in the database by the `x509keypair` cert manager.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, Default, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "x509keypair")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub created_at: Option<DateTime>,
    pub updated_at: Option<DateTime>,
    pub uuid: Option<String>,
    #[sea_orm(column_type = "Text")]
    pub certificate: Option<String>,
    #[sea_orm(column_type = "Text")]
    pub private_key: Option<String>,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    #[sea_orm(column_type = "Text")]
    pub intermediates: Option<String>,
    #[sea_orm(column_type = "Text")]
    pub private_key_passphrase: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
