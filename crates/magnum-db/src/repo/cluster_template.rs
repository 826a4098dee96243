//! The `cluster_template` table: visibility (own, public, hidden-for-admins), the in-use
//! update rules and the referenced-delete check.

use chrono::NaiveDateTime;
use magnum_core::ids::Identity;
use magnum_core::status::ClusterStatus;
use magnum_core::{Error, RequestContext, Result};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter};

use super::{
    Missing, Page, count, delete_where, diff, ensure_uuid, fetch_all, fetch_by_name, fetch_one,
    json_default, now, paginate, tenant_condition, update_row,
};
use crate::Database;
use crate::entity::{cluster, cluster_template};
use crate::items::{Items, List, RenderedList};
use crate::rows::Cols;

pub use crate::records::ClusterTemplate;

impl ClusterTemplate {
    /// The uuid as its newtype (empty for a row without one, which nothing writes).
    pub fn ident(&self) -> magnum_core::ids::ClusterTemplateUuid {
        self.uuid.clone().unwrap_or_default().into()
    }
}

/// A template as the driver's row holds it, for the streamed list: the fields of
/// [`ClusterTemplate`], text borrowed from the row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TemplateRow<'r> {
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub id: i32,
    pub uuid: Option<&'r str>,
    pub name: Option<&'r str>,
    pub flavor_id: Option<&'r str>,
    pub keypair_id: Option<&'r str>,
    pub image_id: Option<&'r str>,
    pub external_network_id: Option<&'r str>,
    pub dns_nameserver: Option<&'r str>,
    pub apiserver_port: Option<i32>,
    pub project_id: Option<&'r str>,
    pub user_id: Option<&'r str>,
    pub docker_volume_size: Option<i32>,
    pub fixed_network: Option<&'r str>,
    pub master_flavor_id: Option<&'r str>,
    pub cluster_distro: Option<&'r str>,
    pub coe: Option<&'r str>,
    pub http_proxy: Option<&'r str>,
    pub https_proxy: Option<&'r str>,
    pub no_proxy: Option<&'r str>,
    pub registry_enabled: Option<bool>,
    pub network_driver: Option<&'r str>,
    /// JSON text, as stored.
    pub labels: Option<&'r str>,
    pub tls_disabled: Option<bool>,
    pub public: Option<bool>,
    pub server_type: Option<&'r str>,
    pub volume_driver: Option<&'r str>,
    pub insecure_registry: Option<&'r str>,
    pub docker_storage_driver: Option<&'r str>,
    pub master_lb_enabled: Option<bool>,
    pub fixed_subnet: Option<&'r str>,
    pub floating_ip_enabled: Option<bool>,
    pub hidden: Option<bool>,
    pub tags: Option<&'r str>,
    pub driver: Option<&'r str>,
}

impl<'r> TemplateRow<'r> {
    /// A row holding every column of the entity, in entity order (as `Positional`).
    fn decode(c: &Cols<'r>) -> std::result::Result<Self, sea_orm::DbErr> {
        Ok(Self {
            created_at: c.time(0)?,
            updated_at: c.time(1)?,
            id: c.int(2)?.unwrap_or_default(),
            uuid: c.str(3)?,
            name: c.str(4)?,
            flavor_id: c.str(5)?,
            keypair_id: c.str(6)?,
            image_id: c.str(7)?,
            external_network_id: c.str(8)?,
            dns_nameserver: c.str(9)?,
            apiserver_port: c.int(10)?,
            project_id: c.str(11)?,
            user_id: c.str(12)?,
            docker_volume_size: c.int(13)?,
            fixed_network: c.str(14)?,
            master_flavor_id: c.str(15)?,
            cluster_distro: c.str(16)?,
            coe: c.str(17)?,
            http_proxy: c.str(18)?,
            https_proxy: c.str(19)?,
            no_proxy: c.str(20)?,
            registry_enabled: c.flag(21)?,
            network_driver: c.str(22)?,
            labels: c.str(23)?,
            tls_disabled: c.flag(24)?,
            public: c.flag(25)?,
            server_type: c.str(26)?,
            volume_driver: c.str(27)?,
            insecure_registry: c.str(28)?,
            docker_storage_driver: c.str(29)?,
            master_lb_enabled: c.flag(30)?,
            fixed_subnet: c.str(31)?,
            floating_ip_enabled: c.flag(32)?,
            hidden: c.flag(33)?,
            tags: c.str(34)?,
            driver: c.str(35)?,
        })
    }
}

/// The caller's rendering, each item kept under its row's bytes ([`crate::items`]): a row
/// whose bytes (MariaDB and MySQL only; rows of the list with equal bytes hold equal values)
/// match one rendered before is copied, not decoded.
struct Rendered<'c, F> {
    items: Items<'c>,
    render: F,
}

impl<F: FnMut(&TemplateRow<'_>, &mut Vec<u8>)> Rendered<'_, F> {
    fn known(&mut self, raw: &[u8]) -> bool {
        self.items.known([0; 16], raw)
    }

    fn row(&mut self, t: &TemplateRow<'_>) {
        let render = &mut self.render;
        self.items.write(t.uuid, |o| render(t, o));
    }
}

/// Stream `page`'s rows to `sink`.
async fn each_template<DB, F>(
    conn: &mut sqlx::pool::PoolConnection<DB>,
    page: sea_orm::Statement,
    sink: &mut Rendered<'_, F>,
) -> std::result::Result<usize, sea_orm::DbErr>
where
    DB: crate::rows::Engine,
    DB::Row: crate::rows::EngineRow,
    F: FnMut(&TemplateRow<'_>, &mut Vec<u8>) + Send,
{
    use crate::rows::EngineRow;
    crate::rows::each_row(conn, page, |r: DB::Row| {
        if !r.raw().is_some_and(|raw| sink.known(raw)) {
            sink.row(&TemplateRow::decode(&r.cols())?);
        }
        Ok(())
    })
    .await
}

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
        super::insert::<cluster_template::Entity, _, _>(self.db, t, || {
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

    /// One page rendered after `body` (the list's opening, which every item of a `base`
    /// shares): each template written by `render` as the driver reads it, or copied from the
    /// item `render` wrote before for an equal row (the list's hot path, [`crate::items`]).
    /// The same statement as [`Self::list`].
    pub async fn list_rendered<F>(
        &self,
        ctx: &RequestContext,
        page: &Page<ClusterTemplate>,
        body: Vec<u8>,
        base: &str,
        render: F,
    ) -> Result<RenderedList>
    where
        F: FnMut(&TemplateRow<'_>, &mut Vec<u8>) + Send,
    {
        use sea_orm::QueryTrait;
        let mut sink = Rendered {
            items: Items::new(self.db.items(), body, List::Templates, base),
            render,
        };
        let backend = self.db.backend();
        let q = paginate(backend, Self::scoped(ctx), page)?.build(backend);
        let n = crate::rows::with_conn!(self.db, |conn| each_template(conn, q, &mut sink).await)
            .map_err(crate::errors::map_db_err)?;
        Ok(sink.items.list(n))
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

    /// The templates of the clusters in one of `statuses`, of any project, in one query
    /// whatever the number of clusters (a sweep resolves every cluster's driver from them).
    pub async fn of_clusters_in(&self, statuses: &[ClusterStatus]) -> Result<Vec<ClusterTemplate>> {
        use sea_orm::sea_query::Query;
        let used = Query::select()
            .column(cluster::Column::ClusterTemplateId)
            .from(cluster::Entity)
            .and_where(cluster::Column::Status.is_in(statuses.iter().map(|s| s.as_str())))
            .to_owned();
        let q = cluster_template::Entity::find()
            .filter(cluster_template::Column::Uuid.in_subquery(used));
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
        let (before, after): (cluster_template::Model, cluster_template::Model) =
            (original.clone().into(), modified.clone().into());
        let changes = diff::<cluster_template::Entity>(&before, &after, "ClusterTemplate")?;
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
        update_row::<cluster_template::Entity, _>(
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
        let row: ClusterTemplate =
            fetch_one(self.db.conn(), row, || not_found(&ident.to_string()).err()).await?;
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
