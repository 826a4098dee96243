//! The `x509keypair` table, where the `x509keypair` cert manager keeps certificates.

use magnum_core::ids::Identity;
use magnum_core::{Error, RequestContext, Result};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use super::{
    Missing, Page, delete_where, ensure_uuid, fetch_all, fetch_one, now, paginate, save,
    tenant_condition,
};
use crate::Database;
use crate::entity::x509keypair;

pub use crate::records::X509KeyPair;

#[derive(Clone, Debug, Default)]
pub struct X509KeyPairFilters {
    pub project_id: Option<String>,
    pub user_id: Option<String>,
}

pub struct X509KeyPairRepo<'a> {
    db: &'a Database,
}

impl Database {
    pub fn x509keypairs(&self) -> X509KeyPairRepo<'_> {
        X509KeyPairRepo { db: self }
    }
}

fn not_found(ident: &str) -> Missing {
    Missing::new(
        |x509keypair| Error::X509KeyPairNotFound { x509keypair },
        ident,
    )
}

fn scoped(ctx: &RequestContext) -> sea_orm::Select<x509keypair::Entity> {
    x509keypair::Entity::find().filter(tenant_condition(
        ctx,
        x509keypair::Column::ProjectId,
        Some(x509keypair::Column::UserId),
    ))
}

impl X509KeyPairRepo<'_> {
    pub async fn create(&self, mut k: X509KeyPair) -> Result<X509KeyPair> {
        let uuid = ensure_uuid(&mut k.uuid);
        k.created_at = Some(now());
        k.updated_at = None;
        super::insert::<x509keypair::Entity, _, _>(self.db, k, || Error::X509KeyPairAlreadyExists {
            uuid,
        })
        .await
    }

    pub async fn get_by_id(&self, ctx: &RequestContext, id: i32) -> Result<X509KeyPair> {
        let q = scoped(ctx).filter(x509keypair::Column::Id.eq(id));
        fetch_one(self.db.conn(), q, || not_found(&id.to_string()).err()).await
    }

    pub async fn get_by_uuid(&self, ctx: &RequestContext, uuid: &str) -> Result<X509KeyPair> {
        let q = scoped(ctx).filter(x509keypair::Column::Uuid.eq(uuid));
        fetch_one(self.db.conn(), q, || not_found(uuid).err()).await
    }

    pub async fn list(
        &self,
        ctx: &RequestContext,
        f: &X509KeyPairFilters,
        page: &Page<X509KeyPair>,
    ) -> Result<Vec<X509KeyPair>> {
        let mut q = scoped(ctx);
        if let Some(p) = &f.project_id {
            q = q.filter(x509keypair::Column::ProjectId.eq(p.as_str()));
        }
        if let Some(u) = &f.user_id {
            q = q.filter(x509keypair::Column::UserId.eq(u.as_str()));
        }
        fetch_all(self.db.conn(), paginate(self.db.backend(), q, page)?).await
    }

    pub async fn save(
        &self,
        original: &X509KeyPair,
        modified: &X509KeyPair,
    ) -> Result<X509KeyPair> {
        let label = original
            .uuid
            .clone()
            .unwrap_or_else(|| original.id.to_string());
        save::<x509keypair::Entity, _>(
            self.db,
            original,
            modified,
            "X509KeyPair",
            not_found(&label),
        )
        .await
    }

    pub async fn destroy(&self, ident: &Identity) -> Result<()> {
        let cond =
            super::identity_condition(ident, x509keypair::Column::Id, x509keypair::Column::Uuid);
        delete_where::<x509keypair::Entity>(self.db, cond, not_found(&ident.to_string())).await
    }
}
