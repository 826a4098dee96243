//! The `cluster` table: create, lookups under the tenant filter, filtered keyset lists,
//! guarded saves, delete and the stats counts.

use magnum_core::ids::Identity;
use magnum_core::{Error, RequestContext, Result};
use sea_orm::sea_query::{Expr, ExprTrait, Func, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, Statement,
};

use super::{
    Missing, Page, count, delete_where, ensure_uuid, fetch_all, fetch_by_name, fetch_one,
    json_default, now, paginate, save, tenant_condition,
};
use crate::Database;
use crate::entity::{cluster, nodegroup};
use crate::errors::map_db_err;
use crate::rows::Cols;

pub use cluster::Model as Cluster;

/// Upstream's cluster list filters (every one optional; all given ones must match).
#[derive(Clone, Debug, Default)]
pub struct ClusterFilters {
    pub cluster_template_id: Option<String>,
    pub name: Option<String>,
    pub stack_id: Option<String>,
    pub api_address: Option<String>,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub status: Option<Vec<String>>,
    /// Sum of node_count over the cluster's non-master nodegroups.
    pub node_count: Option<i64>,
    /// Sum of node_count over the cluster's master nodegroups.
    pub master_count: Option<i64>,
}

/// One item of a brief cluster list: the columns it shows and its node counts, nothing
/// decoded that the list does not show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterSummary {
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub cluster_template_id: Option<String>,
    pub keypair: Option<String>,
    pub docker_volume_size: Option<i32>,
    /// JSON text, as stored.
    pub labels: Option<String>,
    pub master_flavor_id: Option<String>,
    pub flavor_id: Option<String>,
    pub create_timeout: Option<i32>,
    pub stack_id: Option<String>,
    pub status: Option<String>,
    pub health_status: Option<String>,
    /// Sum of `node_count` over the non-master nodegroups (a NULL count is 1, as upstream's
    /// object default; a NULL role is not master).
    pub node_count: i64,
    /// Sum of `node_count` over the master nodegroups.
    pub master_count: i64,
}

/// The columns of [`ClusterSummary`], in its field order.
const SUMMARY_COLUMNS: [cluster::Column; 12] = [
    cluster::Column::Uuid,
    cluster::Column::Name,
    cluster::Column::ClusterTemplateId,
    cluster::Column::Keypair,
    cluster::Column::DockerVolumeSize,
    cluster::Column::Labels,
    cluster::Column::MasterFlavorId,
    cluster::Column::FlavorId,
    cluster::Column::CreateTimeout,
    cluster::Column::StackId,
    cluster::Column::Status,
    cluster::Column::HealthStatus,
];

/// The integer type SUM is cast to (its own type differs per engine: DECIMAL on MySQL).
fn int64(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::MySql => "SIGNED",
        DbBackend::Postgres => "BIGINT",
        _ => "INTEGER",
    }
}

/// Clusters and nodes, as `GET /v1/stats` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterStats {
    pub clusters: u64,
    pub nodes: i64,
}

/// The cluster quota a create must respect: at most `limit` clusters visible in `scope`.
#[derive(Clone, Debug)]
pub struct ClusterQuota {
    pub scope: RequestContext,
    pub limit: u64,
}

/// Serialises quota-checked cluster creates until the transaction ends. The lock is the
/// row of `alembic_version`, which every Magnum database has exactly once: a row lock is
/// released by commit or rollback (also when the request is abandoned), unlike MySQL's
/// session-level GET_LOCK. SQLite has one writer; taking the write lock first makes the
/// count and the insert one unit there too.
async fn lock_cluster_creation(
    txn: &sea_orm::DatabaseTransaction,
    backend: DbBackend,
) -> std::result::Result<(), crate::errors::TxError> {
    let sql = match backend {
        DbBackend::Sqlite => "UPDATE alembic_version SET version_num = version_num",
        _ => "SELECT version_num FROM alembic_version FOR UPDATE",
    };
    txn.execute_raw(Statement::from_string(backend, sql))
        .await?;
    Ok(())
}

/// Upstream's ORM defaults for a new cluster row: uuid, created_at, `{}` for JSON dicts,
/// floating_ip_enabled=true, master_lb_enabled=false. Returns the uuid.
fn new_row_defaults(c: &mut Cluster) -> String {
    let uuid = ensure_uuid(&mut c.uuid);
    c.created_at = Some(now());
    c.updated_at = None;
    json_default(&mut c.labels, "{}");
    json_default(&mut c.health_status_reason, "{}");
    c.floating_ip_enabled.get_or_insert(true);
    c.master_lb_enabled.get_or_insert(false);
    uuid
}

pub struct ClusterRepo<'a> {
    db: &'a Database,
}

impl Database {
    pub fn clusters(&self) -> ClusterRepo<'_> {
        ClusterRepo { db: self }
    }
}

fn not_found(ident: &str) -> Missing {
    Missing::new(|cluster| Error::ClusterNotFound { cluster }, ident)
}

impl ClusterRepo<'_> {
    /// Insert a cluster, filling upstream's ORM defaults for what the caller left empty:
    /// uuid, created_at, `{}` for JSON dicts, floating_ip_enabled=true, master_lb_enabled=false.
    pub async fn create(&self, mut c: Cluster) -> Result<Cluster> {
        let uuid = new_row_defaults(&mut c);
        super::insert::<cluster::Entity, _>(self.db, c, || Error::ClusterAlreadyExists { uuid })
            .await
    }

    /// Insert a new cluster and its nodegroups in one transaction, so that neither exists
    /// without the other. With `quota`, the clusters already visible in that scope are
    /// counted in the same transaction under a lock every quota-checked create takes, so
    /// concurrent creates cannot overshoot the limit (upstream counted in the API and
    /// inserted later in the conductor).
    pub async fn create_with_nodegroups(
        &self,
        mut c: Cluster,
        nodegroups: Vec<nodegroup::Model>,
        quota: Option<ClusterQuota>,
    ) -> Result<Cluster> {
        let uuid = new_row_defaults(&mut c);
        let nodegroups: Vec<nodegroup::Model> = nodegroups
            .into_iter()
            .map(|mut ng| {
                super::nodegroup::new_row_defaults(&mut ng);
                ng.cluster_id = uuid.clone();
                ng.created_at = c.created_at;
                ng
            })
            .collect();
        let backend = self.db.backend();
        self.db
            .tx(move |txn| {
                let (c, nodegroups, quota, uuid) =
                    (c.clone(), nodegroups.clone(), quota.clone(), uuid.clone());
                Box::pin(async move {
                    if let Some(q) = &quota {
                        lock_cluster_creation(txn, backend).await?;
                        let n = count(txn, Self::scoped(&q.scope)).await?;
                        if n >= q.limit {
                            return Err(Error::cluster_quota_exceeded(q.limit).into());
                        }
                    }
                    let c = super::insert_in::<cluster::Entity, _, _>(txn, c, || {
                        Error::ClusterAlreadyExists { uuid }
                    })
                    .await?;
                    for ng in nodegroups {
                        let (name, cluster_id) = (ng.name.clone(), ng.cluster_id.clone());
                        super::insert_in::<nodegroup::Entity, _, _>(txn, ng, || {
                            Error::NodeGroupAlreadyExists { name, cluster_id }
                        })
                        .await?;
                    }
                    Ok(c)
                })
            })
            .await
    }

    fn scoped(ctx: &RequestContext) -> sea_orm::Select<cluster::Entity> {
        cluster::Entity::find().filter(tenant_condition(
            ctx,
            cluster::Column::ProjectId,
            Some(cluster::Column::UserId),
        ))
    }

    pub async fn get_by_id(&self, ctx: &RequestContext, id: i32) -> Result<Cluster> {
        let q = Self::scoped(ctx).filter(cluster::Column::Id.eq(id));
        fetch_one(self.db.conn(), q, || not_found(&id.to_string()).err()).await
    }

    pub async fn get_by_uuid(&self, ctx: &RequestContext, uuid: &str) -> Result<Cluster> {
        let q = Self::scoped(ctx).filter(cluster::Column::Uuid.eq(uuid));
        fetch_one(self.db.conn(), q, || not_found(uuid).err()).await
    }

    pub async fn get_by_name(&self, ctx: &RequestContext, name: &str) -> Result<Cluster> {
        let q = Self::scoped(ctx).filter(cluster::Column::Name.eq(name));
        fetch_by_name(
            self.db.conn(),
            q,
            || not_found(name).err(),
            || Error::multiple("clusters", "cluster"),
        )
        .await
    }

    fn filtered(ctx: &RequestContext, f: &ClusterFilters) -> sea_orm::Select<cluster::Entity> {
        let mut cond = Condition::all();
        let eq = [
            (cluster::Column::ClusterTemplateId, &f.cluster_template_id),
            (cluster::Column::Name, &f.name),
            (cluster::Column::StackId, &f.stack_id),
            (cluster::Column::ApiAddress, &f.api_address),
            (cluster::Column::ProjectId, &f.project_id),
            (cluster::Column::UserId, &f.user_id),
        ];
        for (col, value) in eq {
            if let Some(v) = value {
                cond = cond.add(col.eq(v.as_str()));
            }
        }
        if let Some(statuses) = &f.status {
            cond = cond.add(cluster::Column::Status.is_in(statuses.iter().map(String::as_str)));
        }
        // Node counts live on nodegroups: one sub-select per filter, grouped by cluster uuid.
        for (sum, master) in [(f.node_count, false), (f.master_count, true)] {
            let Some(sum) = sum else { continue };
            let role = if master {
                nodegroup::Column::Role.eq("master")
            } else {
                nodegroup::Column::Role.ne("master")
            };
            let sub = Query::select()
                .column(nodegroup::Column::ClusterId)
                .from(nodegroup::Entity)
                .and_where(role)
                .group_by_col(nodegroup::Column::ClusterId)
                .and_having(Expr::expr(Func::sum(Expr::col(nodegroup::Column::NodeCount))).eq(sum))
                .to_owned();
            cond = cond.add(cluster::Column::Uuid.in_subquery(sub));
        }
        Self::scoped(ctx).filter(cond)
    }

    pub async fn list(
        &self,
        ctx: &RequestContext,
        filters: &ClusterFilters,
        page: &Page<Cluster>,
    ) -> Result<Vec<Cluster>> {
        let q = paginate(self.db.backend(), Self::filtered(ctx, filters), page)?;
        fetch_all(self.db.conn(), q).await
    }

    /// One page of the brief list with each cluster's node counts, in two statements: the
    /// page's columns that the list shows, then `(cluster, role, count)` of the nodegroups
    /// joined on that page. Before, whole rows were read, then the nodegroups through a
    /// 1,000-uuid `IN` list. (Summing in correlated sub-selects made it one statement, but
    /// MariaDB served that at half the rate of these two.)
    pub async fn list_brief(
        &self,
        ctx: &RequestContext,
        filters: &ClusterFilters,
        page: &Page<Cluster>,
    ) -> Result<Vec<ClusterSummary>> {
        use sea_orm::sea_query::{Alias, JoinType};
        use sea_orm::{QuerySelect, QueryTrait};
        let backend = self.db.backend();
        let paged = paginate(backend, Self::filtered(ctx, filters), page)?;
        let uuids = paged
            .clone()
            .select_only()
            .column(cluster::Column::Uuid)
            .into_query();
        let q = paged.select_only().columns(SUMMARY_COLUMNS);
        let conn = self.db.conn();
        let rows = conn
            .query_all_raw(q.build(backend))
            .await
            .map_err(map_db_err)?;
        let summary = |r: &sea_orm::QueryResult| -> std::result::Result<_, sea_orm::DbErr> {
            let c = Cols::of(r)?;
            Ok(ClusterSummary {
                uuid: c.get(0)?,
                name: c.get(1)?,
                cluster_template_id: c.get(2)?,
                keypair: c.get(3)?,
                docker_volume_size: c.get(4)?,
                labels: c.get(5)?,
                master_flavor_id: c.get(6)?,
                flavor_id: c.get(7)?,
                create_timeout: c.get(8)?,
                stack_id: c.get(9)?,
                status: c.get(10)?,
                health_status: c.get(11)?,
                node_count: 0,
                master_count: 0,
            })
        };
        let mut out = rows
            .iter()
            .map(|r| summary(r).map_err(map_db_err))
            .collect::<Result<Vec<_>>>()?;
        if out.is_empty() {
            return Ok(out);
        }
        let ng = |c: nodegroup::Column| (nodegroup::Entity, c);
        let counts = Query::select()
            .columns([
                ng(nodegroup::Column::ClusterId),
                ng(nodegroup::Column::Role),
                ng(nodegroup::Column::NodeCount),
            ])
            .from(nodegroup::Entity)
            .join_subquery(
                JoinType::InnerJoin,
                uuids,
                Alias::new("page"),
                Expr::col(ng(nodegroup::Column::ClusterId))
                    .equals((Alias::new("page"), cluster::Column::Uuid)),
            )
            .to_owned();
        let counts = conn
            .query_all_raw(backend.build(&counts))
            .await
            .map_err(map_db_err)?;
        let at: std::collections::HashMap<String, usize> = out
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((c.uuid.clone()?, i)))
            .collect();
        for r in &counts {
            let c = Cols::of(r).map_err(map_db_err)?;
            let cluster: Option<String> = c.get(0).map_err(map_db_err)?;
            let role: Option<String> = c.get(1).map_err(map_db_err)?;
            // A NULL count reads as the object's default, 1.
            let n = i64::from(c.get::<i32>(2).map_err(map_db_err)?.unwrap_or(1));
            let Some(i) = cluster.and_then(|u| at.get(&u).copied()) else {
                continue;
            };
            if role.as_deref() == Some("master") {
                out[i].master_count += n;
            } else {
                out[i].node_count += n;
            }
        }
        Ok(out)
    }

    pub async fn count(&self, ctx: &RequestContext, filters: &ClusterFilters) -> Result<u64> {
        count(self.db.conn(), Self::filtered(ctx, filters)).await
    }

    /// Store the fields that differ between `original` (as the caller read it) and
    /// `modified`; a field someone else changed meanwhile makes this a `StaleWrite` conflict.
    pub async fn save(&self, original: &Cluster, modified: &Cluster) -> Result<Cluster> {
        let label = original
            .uuid
            .clone()
            .unwrap_or_else(|| original.id.to_string());
        save::<cluster::Entity>(self.db, original, modified, "Cluster", not_found(&label)).await
    }

    pub async fn destroy(&self, ident: &Identity) -> Result<()> {
        let cond = super::identity_condition(ident, cluster::Column::Id, cluster::Column::Uuid);
        delete_where::<cluster::Entity>(self.db, cond, not_found(&ident.to_string())).await
    }

    /// Remove a cluster whose deletion completed together with all its nodegroups, in one
    /// transaction (upstream removed them one by one), but only while it is still in
    /// `expected_status`: a cluster someone moved on meanwhile is left alone (false).
    pub async fn destroy_with_nodegroups(&self, uuid: &str, expected_status: &str) -> Result<bool> {
        let (uuid, expected) = (uuid.to_owned(), expected_status.to_owned());
        self.db
            .tx(move |txn| {
                let (uuid, expected) = (uuid.clone(), expected.clone());
                Box::pin(async move {
                    let res = cluster::Entity::delete_many()
                        .filter(cluster::Column::Uuid.eq(uuid.as_str()))
                        .filter(cluster::Column::Status.eq(expected.as_str()))
                        .exec(txn)
                        .await?;
                    if res.rows_affected == 0 {
                        return Ok(false);
                    }
                    nodegroup::Entity::delete_many()
                        .filter(nodegroup::Column::ClusterId.eq(uuid.as_str()))
                        .exec(txn)
                        .await?;
                    Ok(true)
                })
            })
            .await
    }

    /// The uuids of the clusters in `statuses` (one light query: a sweep decides which it
    /// owns before it decodes any whole row).
    pub async fn uuids_with_status(&self, statuses: &[&str]) -> Result<Vec<String>> {
        use sea_orm::{QueryOrder, QuerySelect};
        let rows: Vec<Option<String>> = cluster::Entity::find()
            .select_only()
            .column(cluster::Column::Uuid)
            .filter(cluster::Column::Status.is_in(statuses.iter().copied()))
            .order_by_asc(cluster::Column::Id)
            .into_tuple()
            .all(self.db.conn())
            .await
            .map_err(crate::errors::map_db_err)?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// The clusters among `uuids` still in `statuses`, in one query.
    pub async fn with_status_among(
        &self,
        statuses: &[&str],
        uuids: &[String],
    ) -> Result<Vec<Cluster>> {
        use sea_orm::QueryOrder;
        if uuids.is_empty() {
            return Ok(Vec::new());
        }
        let q = cluster::Entity::find()
            .filter(cluster::Column::Status.is_in(statuses.iter().copied()))
            .filter(cluster::Column::Uuid.is_in(uuids.iter().map(String::as_str)))
            .order_by_asc(cluster::Column::Id);
        fetch_all(self.db.conn(), q).await
    }

    /// Cluster count and node total (every role) for one project, or for all.
    pub async fn stats(&self, project_id: Option<&str>) -> Result<ClusterStats> {
        let mut clusters = cluster::Entity::find();
        if let Some(p) = project_id {
            clusters = clusters.filter(cluster::Column::ProjectId.eq(p));
        }
        let clusters = count(self.db.conn(), clusters).await?;
        let backend = self.db.backend();
        let int = int64(backend);
        let mut sql = format!("SELECT CAST(COALESCE(SUM(node_count), 0) AS {int}) FROM nodegroup");
        let mut values = Vec::new();
        if let Some(p) = project_id {
            sql.push_str(if backend == DbBackend::Postgres {
                " WHERE project_id = $1"
            } else {
                " WHERE project_id = ?"
            });
            values.push(p.into());
        }
        let row = self
            .db
            .conn()
            .query_one_raw(Statement::from_sql_and_values(backend, sql, values))
            .await
            .map_err(map_db_err)?;
        let nodes = match row {
            Some(r) => r.try_get_by_index::<i64>(0).map_err(map_db_err)?,
            None => 0,
        };
        Ok(ClusterStats { clusters, nodes })
    }
}
