//! The `federation` table (written by the API only; upstream has no federation handlers).

use magnum_core::ids::Identity;
use magnum_core::{Error, RequestContext, Result};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter};

use super::{
    Missing, Page, delete_where, ensure_uuid, fetch_all, fetch_by_name, fetch_one, json_default,
    now, paginate, save, tenant_condition,
};
use crate::Database;
use crate::entity::federation;

pub use crate::records::Federation;

/// Upstream's federation list filters; JSON ones compare serialised text.
#[derive(Clone, Debug, Default)]
pub struct FederationFilters {
    pub name: Option<String>,
    pub project_id: Option<String>,
    pub hostcluster_id: Option<String>,
    pub member_ids: Option<Vec<String>>,
    pub properties: Option<serde_json::Map<String, serde_json::Value>>,
    pub status: Option<Vec<String>>,
}

pub struct FederationRepo<'a> {
    db: &'a Database,
}

impl Database {
    pub fn federations(&self) -> FederationRepo<'_> {
        FederationRepo { db: self }
    }
}

fn not_found(ident: &str) -> Missing {
    Missing::new(|federation| Error::FederationNotFound { federation }, ident)
}

fn scoped(ctx: &RequestContext) -> sea_orm::Select<federation::Entity> {
    federation::Entity::find().filter(tenant_condition(ctx, federation::Column::ProjectId, None))
}

impl FederationRepo<'_> {
    pub async fn create(&self, mut f: Federation) -> Result<Federation> {
        let uuid = ensure_uuid(&mut f.uuid);
        f.created_at = Some(now());
        f.updated_at = None;
        json_default(&mut f.member_ids, "[]");
        json_default(&mut f.properties, "{}");
        super::insert::<federation::Entity, _, _>(self.db, f, || Error::FederationAlreadyExists {
            uuid,
        })
        .await
    }

    pub async fn get_by_id(&self, ctx: &RequestContext, id: i32) -> Result<Federation> {
        let q = scoped(ctx).filter(federation::Column::Id.eq(id));
        fetch_one(self.db.conn(), q, || not_found(&id.to_string()).err()).await
    }

    pub async fn get_by_uuid(&self, ctx: &RequestContext, uuid: &str) -> Result<Federation> {
        let q = scoped(ctx).filter(federation::Column::Uuid.eq(uuid));
        fetch_one(self.db.conn(), q, || not_found(uuid).err()).await
    }

    pub async fn get_by_name(&self, ctx: &RequestContext, name: &str) -> Result<Federation> {
        let q = scoped(ctx).filter(federation::Column::Name.eq(name));
        fetch_by_name(
            self.db.conn(),
            q,
            || not_found(name).err(),
            || Error::multiple("federations", "federation"),
        )
        .await
    }

    pub async fn list(
        &self,
        ctx: &RequestContext,
        f: &FederationFilters,
        page: &Page<Federation>,
    ) -> Result<Vec<Federation>> {
        use federation::Column as C;
        let mut cond = Condition::all();
        for (col, v) in [
            (C::Name, &f.name),
            (C::ProjectId, &f.project_id),
            (C::HostclusterId, &f.hostcluster_id),
        ] {
            if let Some(v) = v {
                cond = cond.add(col.eq(v.as_str()));
            }
        }
        if let Some(v) = &f.member_ids {
            cond = cond.add(C::MemberIds.eq(crate::json::dumps(v)));
        }
        if let Some(v) = &f.properties {
            cond = cond.add(C::Properties.eq(crate::json::dumps(v)));
        }
        if let Some(v) = &f.status {
            cond = cond.add(C::Status.is_in(v.iter().map(String::as_str)));
        }
        let q = paginate(self.db.backend(), scoped(ctx).filter(cond), page)?;
        fetch_all(self.db.conn(), q).await
    }

    pub async fn save(&self, original: &Federation, modified: &Federation) -> Result<Federation> {
        let label = original
            .uuid
            .clone()
            .unwrap_or_else(|| original.id.to_string());
        save::<federation::Entity, _>(self.db, original, modified, "Federation", not_found(&label))
            .await
    }

    pub async fn destroy(&self, ident: &Identity) -> Result<()> {
        let cond =
            super::identity_condition(ident, federation::Column::Id, federation::Column::Uuid);
        delete_where::<federation::Entity>(self.db, cond, not_found(&ident.to_string())).await
    }
}
