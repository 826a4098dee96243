//! The `cluster_template` table: visibility (own, public, hidden-for-admins), the in-use
//! update rules and the referenced-delete check.

use magnum_core::ids::Identity;
use magnum_core::{Error, RequestContext, Result};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter};

use super::{
    Missing, Page, count, delete_where, diff, ensure_uuid, fetch_all, fetch_by_name, fetch_one,
    json_default, now, paginate, tenant_condition, update_row,
};
use crate::Database;
use crate::entity::{cluster, cluster_template};

pub use cluster_template::Model as ClusterTemplate;

pub struct ClusterTemplateRepo<'a> {
    db: &'a Database,
}

impl Database {
    pub fn cluster_templates(&self) -> ClusterTemplateRepo<'_> {
        ClusterTemplateRepo { db: self }
    }
}

fn not_found(ident: &str) -> Missing {
    Missing::new(
        |template| Error::ClusterTemplateNotFound { template },
        ident,
    )
}

/// Upstream's visibility: the caller's own templates (tenant filter), every public
/// non-hidden template, and for admins the public hidden ones too. Upstream writes this as a
/// UNION; the OR of the branches selects the same rows.
fn visible(ctx: &RequestContext) -> Condition {
    use cluster_template::Column as C;
    let mut any = Condition::any()
        .add(tenant_condition(ctx, C::ProjectId, Some(C::UserId)))
        .add(
            Condition::all()
                .add(C::Public.eq(true))
                .add(C::Hidden.eq(false)),
        );
    if ctx.is_admin {
        any = any.add(
            Condition::all()
                .add(C::Public.eq(true))
                .add(C::Hidden.eq(true)),
        );
    }
    any
}

impl ClusterTemplateRepo<'_> {
    /// Insert, with upstream's ORM defaults: uuid, created_at, labels `{}`, booleans false
    /// except floating_ip_enabled true. `server_type` stays as given (upstream writes NULL
    /// rather than relying on the column default).
    pub async fn create(&self, mut t: ClusterTemplate) -> Result<ClusterTemplate> {
        let uuid = ensure_uuid(&mut t.uuid);
        t.created_at = Some(now());
        t.updated_at = None;
        json_default(&mut t.labels, "{}");
        for b in [
            &mut t.registry_enabled,
            &mut t.tls_disabled,
            &mut t.public,
            &mut t.master_lb_enabled,
            &mut t.hidden,
        ] {
            b.get_or_insert(false);
        }
        t.floating_ip_enabled.get_or_insert(true);
        super::insert::<cluster_template::Entity, _>(self.db, t, || {
            Error::ClusterTemplateAlreadyExists { uuid }
        })
        .await
    }

    fn scoped(ctx: &RequestContext) -> sea_orm::Select<cluster_template::Entity> {
        cluster_template::Entity::find().filter(visible(ctx))
    }

    pub async fn get_by_id(&self, ctx: &RequestContext, id: i32) -> Result<ClusterTemplate> {
        let q = Self::scoped(ctx).filter(cluster_template::Column::Id.eq(id));
        fetch_one(self.db.conn(), q, || not_found(&id.to_string()).err()).await
    }

    pub async fn get_by_uuid(&self, ctx: &RequestContext, uuid: &str) -> Result<ClusterTemplate> {
        let q = Self::scoped(ctx).filter(cluster_template::Column::Uuid.eq(uuid));
        fetch_one(self.db.conn(), q, || not_found(uuid).err()).await
    }

    pub async fn get_by_name(&self, ctx: &RequestContext, name: &str) -> Result<ClusterTemplate> {
        let q = Self::scoped(ctx).filter(cluster_template::Column::Name.eq(name));
        fetch_by_name(
            self.db.conn(),
            q,
            || not_found(name).err(),
            || Error::multiple("ClusterTemplates", "ClusterTemplate"),
        )
        .await
    }

    pub async fn list(
        &self,
        ctx: &RequestContext,
        page: &Page<ClusterTemplate>,
    ) -> Result<Vec<ClusterTemplate>> {
        let q = paginate(self.db.backend(), Self::scoped(ctx), page)?;
        fetch_all(self.db.conn(), q).await
    }

    pub async fn count(&self, ctx: &RequestContext) -> Result<u64> {
        count(self.db.conn(), Self::scoped(ctx)).await
    }

    /// The templates with these uuids, of any project, in one query (the conductor resolves
    /// drivers for many clusters at once).
    pub async fn for_uuids(&self, uuids: &[String]) -> Result<Vec<ClusterTemplate>> {
        if uuids.is_empty() {
            return Ok(Vec::new());
        }
        let q = cluster_template::Entity::find()
            .filter(cluster_template::Column::Uuid.is_in(uuids.iter().map(String::as_str)));
        fetch_all(self.db.conn(), q).await
    }

    /// How many clusters (of any project) use the template with this uuid.
    pub async fn usage(&self, uuid: &str) -> Result<u64> {
        let q = cluster::Entity::find().filter(cluster::Column::ClusterTemplateId.eq(uuid));
        count(self.db.conn(), q).await
    }

    /// Guarded save. A template that clusters use may only be renamed, published
    /// (`public` → true), hidden/unhidden or re-tagged, one of those at a time, as upstream.
    pub async fn save(
        &self,
        original: &ClusterTemplate,
        modified: &ClusterTemplate,
    ) -> Result<ClusterTemplate> {
        let label = original
            .uuid
            .clone()
            .unwrap_or_else(|| original.id.to_string());
        let changes = diff::<cluster_template::Entity>(original, modified, "ClusterTemplate")?;
        if changes.is_empty() {
            return Ok(original.clone());
        }
        if let Some(uuid) = &original.uuid
            && self.usage(uuid).await? > 0
        {
            let names: Vec<&str> = changes
                .iter()
                .map(|c| sea_orm::IdenStatic::as_str(&c.column))
                .collect();
            let allowed = match names.as_slice() {
                ["public"] => modified.public == Some(true),
                ["hidden"] | ["name"] => true,
                ["tags"] => modified.tags.is_some(),
                _ => false,
            };
            if !allowed {
                return Err(Error::ClusterTemplateReferenced {
                    template: uuid.clone(),
                });
            }
        }
        update_row::<cluster_template::Entity>(
            self.db,
            original.id,
            changes,
            "ClusterTemplate",
            not_found(&label),
        )
        .await
    }

    /// Delete, unless a cluster still uses the template (400 ClusterTemplateReferenced).
    pub async fn destroy(&self, ident: &Identity) -> Result<()> {
        let cond = super::identity_condition(
            ident,
            cluster_template::Column::Id,
            cluster_template::Column::Uuid,
        );
        let row = cluster_template::Entity::find().filter(cond.clone());
        let row = fetch_one(self.db.conn(), row, || not_found(&ident.to_string()).err()).await?;
        if let Some(uuid) = &row.uuid
            && self.usage(uuid).await? > 0
        {
            return Err(Error::ClusterTemplateReferenced {
                template: uuid.clone(),
            });
        }
        delete_where::<cluster_template::Entity>(self.db, cond, not_found(&ident.to_string())).await
    }
}
