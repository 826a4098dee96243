//! The `cluster` table: create, lookups under the tenant filter, filtered keyset lists,
//! guarded saves, delete and the stats counts.

use magnum_core::ids::Identity;
use magnum_core::status::ClusterStatus;
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
use crate::items::{Items, List, RenderedList};
use crate::rows::{self, EngineRow};

pub use crate::records::Cluster;

impl Cluster {
    /// The uuid as its newtype (empty for a row without one, which nothing writes).
    pub fn ident(&self) -> magnum_core::ids::ClusterUuid {
        self.uuid.clone().unwrap_or_default().into()
    }
}

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

/// One item of a brief cluster list as the driver's row holds it (text borrowed from the
/// row), with its node counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterBrief<'r> {
    pub uuid: Option<&'r str>,
    pub name: Option<&'r str>,
    pub cluster_template_id: Option<&'r str>,
    pub keypair: Option<&'r str>,
    pub docker_volume_size: Option<i32>,
    /// JSON text, as stored.
    pub labels: Option<&'r str>,
    pub master_flavor_id: Option<&'r str>,
    pub flavor_id: Option<&'r str>,
    pub create_timeout: Option<i32>,
    pub stack_id: Option<&'r str>,
    pub status: Option<&'r str>,
    pub health_status: Option<&'r str>,
    /// As [`ClusterSummary::node_count`].
    pub node_count: i64,
    /// As [`ClusterSummary::master_count`].
    pub master_count: i64,
}

impl ClusterBrief<'_> {
    pub fn to_summary(&self) -> ClusterSummary {
        let own = |s: Option<&str>| s.map(str::to_owned);
        ClusterSummary {
            uuid: own(self.uuid),
            name: own(self.name),
            cluster_template_id: own(self.cluster_template_id),
            keypair: own(self.keypair),
            docker_volume_size: self.docker_volume_size,
            labels: own(self.labels),
            master_flavor_id: own(self.master_flavor_id),
            flavor_id: own(self.flavor_id),
            create_timeout: self.create_timeout,
            stack_id: own(self.stack_id),
            status: own(self.status),
            health_status: own(self.health_status),
            node_count: self.node_count,
            master_count: self.master_count,
        }
    }
}

/// Where [`ClusterRepo::list_brief_each`] hands its clusters, decoded. A closure taking a
/// [`ClusterBrief`] is one.
pub trait BriefSink {
    fn row(&mut self, cluster: &ClusterBrief<'_>);
}

impl<F: FnMut(&ClusterBrief<'_>)> BriefSink for F {
    fn row(&mut self, cluster: &ClusterBrief<'_>) {
        self(cluster)
    }
}

/// How the brief list takes its clusters: first the page row's bytes as the server sent them,
/// with the cluster's node counts (MariaDB and MySQL only; rows of the page with equal bytes
/// hold equal values), true when handled from them (then `row` is not called); else the
/// cluster decoded. Crate-internal: the bytes stay here.
trait BriefRows {
    fn known(&mut self, _raw: &[u8], _node_count: i64, _master_count: i64) -> bool {
        false
    }
    fn row(&mut self, cluster: &ClusterBrief<'_>);
}

/// A caller's sink: every cluster decoded.
struct Decoded<'s, S: ?Sized>(&'s mut S);

impl<S: BriefSink + ?Sized> BriefRows for Decoded<'_, S> {
    fn row(&mut self, cluster: &ClusterBrief<'_>) {
        self.0.row(cluster);
    }
}

/// The caller's rendering, each item kept under its row's bytes and node counts
/// ([`crate::items`]).
struct Rendered<'c, F> {
    items: Items<'c>,
    render: F,
}

impl<F: FnMut(&ClusterBrief<'_>, &mut Vec<u8>)> BriefRows for Rendered<'_, F> {
    fn known(&mut self, raw: &[u8], node_count: i64, master_count: i64) -> bool {
        let mut counts = [0u8; 16];
        counts[..8].copy_from_slice(&node_count.to_le_bytes());
        counts[8..].copy_from_slice(&master_count.to_le_bytes());
        self.items.known(counts, raw)
    }

    fn row(&mut self, c: &ClusterBrief<'_>) {
        let render = &mut self.render;
        self.items.write(c.uuid, |o| render(c, o));
    }
}

/// The brief list's two statements: the page's node counts (kept, keyed by the cluster uuid
/// borrowed from their rows) and the page itself, streamed. With a `spare` connection both
/// run at once (the page's rows wait in the socket while the counts are read); without, one
/// after the other on `conn`.
async fn brief_on<DB, S>(
    conn: &mut sqlx::pool::PoolConnection<DB>,
    spare: Option<&mut sqlx::pool::PoolConnection<DB>>,
    counts: Statement,
    page: Statement,
    sink: &mut S,
) -> std::result::Result<usize, sea_orm::DbErr>
where
    DB: rows::Engine,
    DB::Row: EngineRow,
    S: BriefRows + Send + ?Sized,
{
    // With a spare connection the page is sent at once and the counts read beside it.
    let (counts, page) = match spare {
        Some(spare) => {
            let (counts, page) =
                futures::future::join(rows::all_rows(spare, counts), DB::start(conn, page)).await;
            (counts?, page?)
        }
        None => {
            let counts = rows::all_rows(conn, counts).await?;
            (counts, DB::start(conn, page).await?)
        }
    };
    // Keyed by the uuid's bytes (the page's rows look theirs up the same way, so no count
    // row's text is checked for UTF-8), hashed with foldhash: SipHash and the UTF-8 checks
    // were 5 % of a page's CPU.
    let mut by_cluster: std::collections::HashMap<&[u8], (i64, i64), foldhash::fast::FixedState> =
        std::collections::HashMap::with_capacity_and_hasher(counts.len(), Default::default());
    for r in &counts {
        let c = r.cols();
        let Some(cluster) = c.bytes(0)? else { continue };
        let master = c.bytes(1)? == Some(b"master".as_slice());
        let n = i64::from(magnum_core::model::object_node_count(c.int(2)?));
        let sums = by_cluster.entry(cluster).or_default();
        if master {
            sums.1 += n;
        } else {
            sums.0 += n;
        }
    }
    let mut emit = |r: &DB::Row| -> std::result::Result<(), sea_orm::DbErr> {
        let c = r.cols();
        let (node_count, master_count) = c
            .bytes(0)?
            .and_then(|u| by_cluster.get(u).copied())
            .unwrap_or_default();
        if r.raw()
            .is_some_and(|raw| sink.known(raw, node_count, master_count))
        {
            return Ok(());
        }
        sink.row(&ClusterBrief {
            uuid: c.str(0)?,
            name: c.str(1)?,
            cluster_template_id: c.str(2)?,
            keypair: c.str(3)?,
            docker_volume_size: c.int(4)?,
            labels: c.str(5)?,
            master_flavor_id: c.str(6)?,
            flavor_id: c.str(7)?,
            create_timeout: c.int(8)?,
            stack_id: c.str(9)?,
            status: c.str(10)?,
            health_status: c.str(11)?,
            node_count,
            master_count,
        });
        Ok(())
    };
    DB::each(page, |row| emit(&row)).await
}

/// The columns of [`ClusterBrief`], in its field order.
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

/// A cluster with its nodegroups, as [`ClusterRepo::stream_among`] sends them.
pub type Swept = (Cluster, Vec<crate::repo::nodegroup::NodeGroup>);

/// Clusters [`ClusterRepo::stream_among`] reads ahead of its receiver.
const STREAM_BUFFER: usize = 64;

/// The engine's condition "the cluster's uuid is in the JSON array bound as the one value".
fn uuid_among(backend: DbBackend) -> &'static str {
    match backend {
        // The column is utf8mb3 like the cluster table: of another charset, the uuid index
        // goes unused (a scan per uuid: 15 s for 3,334 uuids among 10,000 rows, 30 ms with).
        DbBackend::MySql => {
            "`cluster`.`uuid` IN (SELECT j.u FROM JSON_TABLE(?, '$[*]' COLUMNS \
             (u VARCHAR(36) CHARACTER SET utf8mb3 PATH '$')) AS j)"
        }
        DbBackend::Postgres => {
            "\"cluster\".\"uuid\" IN (SELECT json_array_elements_text(CAST($1 AS json)))"
        }
        _ => "\"cluster\".\"uuid\" IN (SELECT value FROM json_each(?))",
    }
}

/// Read `stmt` (cluster columns, then nodegroup columns when `nodegroups`, ordered by
/// cluster) and send each cluster once its last row has arrived.
async fn stream_on<DB>(
    conn: &mut sqlx::pool::PoolConnection<DB>,
    stmt: Statement,
    nodegroups: bool,
    out: &tokio::sync::mpsc::Sender<Swept>,
) -> std::result::Result<usize, sea_orm::DbErr>
where
    DB: sqlx::Database,
    DB::Row: EngineRow,
    sea_query_sqlx::SqlxValues: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    use crate::rows::Positional;
    use futures::TryStreamExt;
    let missing = || sea_orm::DbErr::Custom("no id column".into());
    let id = cluster::Model::column("id").ok_or_else(missing)?;
    let ng_first = cluster::Model::COLUMNS.len();
    let ng_id = ng_first + nodegroup::Model::column("id").ok_or_else(missing)?;
    let mut rows = rows::sqlx_query::<DB>(stmt).fetch(&mut **conn);
    let mut current: Option<Swept> = None;
    let (mut n, mut open) = (0, true);
    while let Some(row) = rows.try_next().await.map_err(rows::query_err)? {
        let c = row.cols();
        let this = c.int(id)?;
        let done = match &current {
            Some((cluster, _)) if Some(cluster.id) == this => None,
            _ => current.replace((cluster::Model::decode(&c)?.into(), Vec::new())),
        };
        if nodegroups
            && c.int(ng_id)?.is_some()
            && let Some((_, ngs)) = current.as_mut()
        {
            ngs.push(nodegroup::Model::decode_at(&c, ng_first)?.into());
        }
        drop(row);
        if let Some(done) = done {
            n += 1;
            open = open && out.send(done).await.is_ok();
        }
    }
    if let Some(done) = current {
        n += 1;
        if open {
            let _ = out.send(done).await;
        }
    }
    Ok(n)
}

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
        super::insert::<cluster::Entity, _, _>(self.db, c, || Error::ClusterAlreadyExists { uuid })
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
        nodegroups: Vec<crate::records::NodeGroup>,
        quota: Option<ClusterQuota>,
    ) -> Result<Cluster> {
        let uuid = new_row_defaults(&mut c);
        let nodegroups: Vec<nodegroup::Model> = nodegroups
            .into_iter()
            .map(|mut ng| {
                super::nodegroup::new_row_defaults(&mut ng);
                ng.cluster_id = uuid.clone();
                ng.created_at = c.created_at;
                nodegroup::Model::from(ng)
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
                    let c = super::insert_in::<cluster::Entity, _, _>(txn, c.into(), || {
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
            .map(Cluster::from)
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
        // SUM skips NULL counts, as upstream's filter does (unlike the object rule,
        // magnum_core::model::object_node_count).
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

    /// One page of the brief list with each cluster's node counts, as owned summaries (see
    /// [`Self::list_brief_each`], which the API's list streams from).
    pub async fn list_brief(
        &self,
        ctx: &RequestContext,
        filters: &ClusterFilters,
        page: &Page<Cluster>,
    ) -> Result<Vec<ClusterSummary>> {
        let mut out = Vec::new();
        self.list_brief_each(ctx, filters, page, &mut |c: &ClusterBrief<'_>| {
            out.push(c.to_summary())
        })
        .await?;
        Ok(out)
    }

    /// One page of the brief list with each cluster's node counts, handed to `sink` row by
    /// row as the driver reads them, text borrowed from the row (nothing collected, no owned
    /// model). Two statements on one connection: `(cluster, role, count)` of the nodegroups
    /// joined on the page, then the page's columns that the list shows. Returns the number of
    /// clusters. (Whole rows and a 1,000-uuid `IN` list were slower; summing in correlated
    /// sub-selects made it one statement, but MariaDB served that at half the rate.)
    pub async fn list_brief_each<S>(
        &self,
        ctx: &RequestContext,
        filters: &ClusterFilters,
        page: &Page<Cluster>,
        sink: &mut S,
    ) -> Result<usize>
    where
        S: BriefSink + Send + ?Sized,
    {
        self.brief_stream(ctx, filters, page, &mut Decoded(sink))
            .await
    }

    /// One page rendered after `body` (the list's opening; every item of a `list` and
    /// `base` depends on them besides its row): each cluster written by `render` as the
    /// driver reads it, or copied from the item `render` wrote before for an equal row with
    /// the same node counts (the list's hot path, [`crate::items`]). The statements of
    /// [`Self::list_brief_each`].
    pub async fn list_brief_rendered<F>(
        &self,
        ctx: &RequestContext,
        filters: &ClusterFilters,
        page: &Page<Cluster>,
        (body, list, base): (Vec<u8>, List, &str),
        render: F,
    ) -> Result<RenderedList>
    where
        F: FnMut(&ClusterBrief<'_>, &mut Vec<u8>) + Send,
    {
        let mut sink = Rendered {
            items: Items::new(self.db.items(), body, list, base),
            render,
        };
        let n = self.brief_stream(ctx, filters, page, &mut sink).await?;
        Ok(sink.items.list(n))
    }

    async fn brief_stream<S>(
        &self,
        ctx: &RequestContext,
        filters: &ClusterFilters,
        page: &Page<Cluster>,
        sink: &mut S,
    ) -> Result<usize>
    where
        S: BriefRows + Send + ?Sized,
    {
        use sea_orm::sea_query::{Alias, JoinType};
        use sea_orm::{QuerySelect, QueryTrait};
        let backend = self.db.backend();
        let paged = paginate(backend, Self::filtered(ctx, filters), page)?;
        let uuids = paged
            .clone()
            .select_only()
            .column(cluster::Column::Uuid)
            .into_query();
        let page = paged.select_only().columns(SUMMARY_COLUMNS).build(backend);
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
        let counts = backend.build(&counts);
        rows::with_conn!(self.db, |conn, spare| brief_on(
            conn, spare, counts, page, sink
        )
        .await)
        .map_err(map_db_err)
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
        save::<cluster::Entity, _>(self.db, original, modified, "Cluster", not_found(&label)).await
    }

    /// As [`Self::save`] for what a status sync observed: refused (a stale write) when the
    /// status or its reason changed since `original` was read, even where the observation
    /// leaves them, so a report made against an older status never lands on a newer one.
    pub async fn save_observed(&self, original: &Cluster, modified: &Cluster) -> Result<Cluster> {
        let label = original
            .uuid
            .clone()
            .unwrap_or_else(|| original.id.to_string());
        super::save_guarding::<cluster::Entity, _>(
            self.db,
            original,
            modified,
            &["status", "status_reason"],
            "Cluster",
            not_found(&label),
        )
        .await
    }

    pub async fn destroy(&self, ident: &Identity) -> Result<()> {
        let cond = super::identity_condition(ident, cluster::Column::Id, cluster::Column::Uuid);
        delete_where::<cluster::Entity>(self.db, cond, not_found(&ident.to_string())).await
    }

    /// Remove a cluster whose deletion completed together with all its nodegroups, in one
    /// transaction (upstream removed them one by one), but only while it is still in
    /// `expected_status`: a cluster someone moved on meanwhile is left alone (false).
    pub async fn destroy_with_nodegroups(
        &self,
        uuid: &str,
        expected_status: ClusterStatus,
    ) -> Result<bool> {
        let (uuid, expected) = (uuid.to_owned(), expected_status.as_str());
        self.db
            .tx(move |txn| {
                let uuid = uuid.clone();
                Box::pin(async move {
                    let res = cluster::Entity::delete_many()
                        .filter(cluster::Column::Uuid.eq(uuid.as_str()))
                        .filter(cluster::Column::Status.eq(expected))
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
    pub async fn uuids_with_status(&self, statuses: &[ClusterStatus]) -> Result<Vec<String>> {
        use sea_orm::{QueryOrder, QuerySelect};
        let rows: Vec<Option<String>> = cluster::Entity::find()
            .select_only()
            .column(cluster::Column::Uuid)
            .filter(cluster::Column::Status.is_in(statuses.iter().map(|s| s.as_str())))
            .order_by_asc(cluster::Column::Id)
            .into_tuple()
            .all(self.db.conn())
            .await
            .map_err(crate::errors::map_db_err)?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// The clusters among `uuids` still in one of `statuses`, each with its nodegroups when
    /// `nodegroups` (else none), read in one statement whatever their number: the uuids go
    /// as one JSON array (an `IN` list binds one value per uuid, and PostgreSQL takes at
    /// most 65,535), the nodegroups joined on. Returns the reader, to be run while the
    /// receiver is drained: each cluster is sent as soon as its rows have arrived, so what is
    /// held is the channel's capacity, not the result. Once the receiver is gone the rest is
    /// read and dropped. The reader resolves to the number of clusters read.
    pub fn stream_among<'s>(
        &'s self,
        statuses: &[ClusterStatus],
        uuids: &[String],
        nodegroups: bool,
    ) -> (
        impl std::future::Future<Output = Result<usize>> + Send + 's,
        tokio::sync::mpsc::Receiver<Swept>,
    ) {
        use sea_orm::Iterable;
        use sea_orm::sea_query::Order;
        // A single-connection pool (in-memory SQLite) must not stall its only connection
        // on a full channel while the receiver's work waits for that connection.
        let capacity = if self.db.pool_use().2 > 1 {
            STREAM_BUFFER
        } else {
            uuids.len().max(1)
        };
        let (tx, rx) = tokio::sync::mpsc::channel(capacity);
        let backend = self.db.backend();
        let mut q = Query::select();
        q.columns(cluster::Column::iter().map(|c| (cluster::Entity, c)))
            .from(cluster::Entity)
            .and_where(
                Expr::col((cluster::Entity, cluster::Column::Status))
                    .is_in(statuses.iter().map(|s| s.as_str())),
            )
            .and_where(Expr::cust_with_values(
                uuid_among(backend),
                [serde_json::to_string(uuids).unwrap_or_default()],
            ))
            .order_by((cluster::Entity, cluster::Column::Id), Order::Asc);
        if nodegroups {
            q.columns(nodegroup::Column::iter().map(|c| (nodegroup::Entity, c)))
                .left_join(
                    nodegroup::Entity,
                    Expr::col((nodegroup::Entity, nodegroup::Column::ClusterId))
                        .equals((cluster::Entity, cluster::Column::Uuid)),
                )
                .order_by((nodegroup::Entity, nodegroup::Column::Id), Order::Asc);
        }
        let stmt = backend.build(&q);
        let empty = uuids.is_empty();
        let read = async move {
            if empty {
                return Ok(0);
            }
            rows::with_conn!(self.db, |conn| stream_on(conn, stmt, nodegroups, &tx).await)
                .map_err(map_db_err)
        };
        (read, rx)
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
        // SUM skips NULL counts, as upstream's stats query does (unlike the object rule,
        // magnum_core::model::object_node_count).
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::url::{DbUrl, Engine};
    use crate::{DbSettings, Page};

    /// A database at head on each configured engine (SQLite always), with the server and
    /// the name to drop afterwards.
    async fn engines() -> Vec<(Database, Option<(Database, String)>, Engine)> {
        let mut out = Vec::new();
        let db = Database::connect(DbSettings::new(DbUrl::parse("sqlite://").unwrap()))
            .await
            .unwrap();
        crate::schema::upgrade(&db).await.unwrap();
        out.push((db, None, Engine::Sqlite));
        for (var, engine, admin) in [
            ("MAGNUM_TEST_MYSQL_URL", Engine::MySql, "mysql"),
            ("MAGNUM_TEST_POSTGRES_URL", Engine::Postgres, "postgres"),
        ] {
            let Some(base) = magnum_testkit::env_or_skip(var) else {
                continue;
            };
            let base = base.trim_end_matches('/').to_owned();
            let settings = |u: &str| DbSettings::new(DbUrl::parse(u).unwrap());
            let server = Database::connect(settings(&format!("{base}/{admin}")))
                .await
                .unwrap();
            let name = format!("magnum_l_{}", uuid::Uuid::new_v4().simple());
            server
                .conn()
                .execute_unprepared(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
            let db = Database::connect(settings(&format!("{base}/{name}")))
                .await
                .unwrap();
            crate::schema::upgrade(&db).await.unwrap();
            out.push((db, Some((server, name)), engine));
        }
        out
    }

    /// A list that read its rows leaves its connection on the shelf and the next list takes
    /// it from there; the clusters list, finding no spare, has one fetched for the next
    /// time, and from then on the two connections go round (the pool opens no third); a
    /// list that fails drops its connection; the pool still closes with connections
    /// shelved; a pool of one has no shelf.
    #[tokio::test]
    async fn lists_reuse_their_connection_from_the_shelf() {
        for (db, server, engine) in engines().await {
            let ctx = RequestContext {
                project_id: Some("p".into()),
                ..Default::default()
            };
            let list = || async {
                db.cluster_templates()
                    .list_rendered(&ctx, &Page::default(), Vec::new(), "", |_, _| {})
                    .await
                    .map(|l| l.count)
            };
            let brief = || async {
                db.clusters()
                    .list_brief_each(
                        &ctx,
                        &ClusterFilters::default(),
                        &Page::default(),
                        &mut |_: &ClusterBrief<'_>| {},
                    )
                    .await
            };
            list().await.unwrap();
            if server.is_none() {
                // The in-memory SQLite: one connection, never shelved.
                assert_eq!(db.shelves().len(), 0, "{engine}");
                continue;
            }
            assert_eq!(db.shelves().len(), 1, "{engine}");
            brief().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            assert_eq!(db.shelves().len(), 2, "{engine}: no spare was fetched");
            let (open, _, _) = db.pool_use();
            for _ in 0..5 {
                list().await.unwrap();
                brief().await.unwrap();
            }
            assert_eq!(db.shelves().len(), 2, "{engine}");
            assert_eq!(
                db.pool_use().0,
                open,
                "{engine}: another connection was opened"
            );
            let rename = |from: &str, to: &str| {
                if engine == Engine::MySql {
                    format!("RENAME TABLE {from} TO {to}")
                } else {
                    format!("ALTER TABLE {from} RENAME TO {to}")
                }
            };
            db.conn()
                .execute_unprepared(&rename("cluster_template", "ct_away"))
                .await
                .unwrap();
            assert!(list().await.is_err(), "{engine}");
            assert_eq!(db.shelves().len(), 1, "{engine}: a failed list was shelved");
            db.conn()
                .execute_unprepared(&rename("ct_away", "cluster_template"))
                .await
                .unwrap();
            list().await.unwrap();
            assert_eq!(db.shelves().len(), 1, "{engine}");
            // What the lists stopped using goes back to the pool (the reaper's step). The
            // pool takes a connection back in a task of its own: let the failed one land.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let idle = db.pool_use().1;
            db.shelves().expire(std::time::Duration::ZERO);
            assert_eq!(db.shelves().len(), 0, "{engine}");
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            assert_eq!(db.pool_use().1, idle, "{engine}: not idle in the pool");
            list().await.unwrap();
            assert_eq!(db.shelves().len(), 1, "{engine}");
            tokio::time::timeout(std::time::Duration::from_secs(10), db.close())
                .await
                .unwrap_or_else(|_| panic!("{engine}: the pool did not close"));
            if let Some((server, name)) = server {
                crate::db::drop_scratch(&server, &name).await;
            }
        }
    }

    /// The streamed, borrowed readers give what the owned models hold, on every engine:
    /// the brief list's columns and node counts (NULL count as 1, NULL role not master),
    /// and every template field.
    #[tokio::test]
    async fn streamed_lists_match_the_owned_models() {
        for (db, server, engine) in engines().await {
            let ctx = RequestContext {
                project_id: Some("p".into()),
                user_id: Some("u".into()),
                ..Default::default()
            };
            let text = |s: &str| Some(s.to_owned());
            for (i, name) in ["b\"q\\x\n", "a é", "c"].iter().enumerate() {
                let c = db
                    .clusters()
                    .create(Cluster {
                        name: text(name),
                        project_id: text("p"),
                        user_id: text("u"),
                        status: (i != 1).then_some(ClusterStatus::CreateComplete),
                        labels: text(r#"{"k": "v"}"#),
                        create_timeout: (i == 0).then_some(60),
                        docker_volume_size: Some(i as i32),
                        stack_id: text("s"),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                for (role, count) in [
                    (Some("master"), Some(3)),
                    (None, None),
                    (Some("w"), Some(2)),
                ] {
                    db.nodegroups()
                        .create(crate::records::NodeGroup {
                            uuid: uuid::Uuid::new_v4().to_string(),
                            name: format!("g-{role:?}"),
                            cluster_id: c.uuid.clone().unwrap(),
                            project_id: "p".into(),
                            role: role.map(Into::into),
                            node_count: count,
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                }
            }
            let page = Page {
                sort_key: Some("name".into()),
                ..Page::limit(10)
            };
            let none = ClusterFilters::default();
            // Once with the two statements in turn, then (with a spare connection shelved
            // meanwhile, on the servers) at once: the same answer.
            let brief = db.clusters().list_brief(&ctx, &none, &page).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let again = db.clusters().list_brief(&ctx, &none, &page).await.unwrap();
            assert_eq!(format!("{brief:?}"), format!("{again:?}"), "{engine}");
            let full = db.clusters().list(&ctx, &none, &page).await.unwrap();
            assert_eq!(brief.len(), 3, "{engine}");
            for (b, f) in brief.iter().zip(&full) {
                assert_eq!(b.uuid, f.uuid, "{engine}");
                assert_eq!(b.name, f.name, "{engine}");
                assert_eq!(
                    b.status.as_deref(),
                    f.status.map(|s| s.as_str()),
                    "{engine}"
                );
                assert_eq!(b.labels, f.labels, "{engine}");
                assert_eq!(b.create_timeout, f.create_timeout, "{engine}");
                assert_eq!(b.docker_volume_size, f.docker_volume_size, "{engine}");
                assert_eq!(b.stack_id, f.stack_id, "{engine}");
                assert_eq!((b.node_count, b.master_count), (3, 3), "{engine}");
            }

            let t = db
                .cluster_templates()
                .create(crate::records::ClusterTemplate {
                    name: text("t\"\\"),
                    image_id: text("img"),
                    coe: text("kubernetes"),
                    project_id: text("p"),
                    user_id: text("u"),
                    apiserver_port: Some(6443),
                    labels: text("{}"),
                    ..Default::default()
                })
                .await
                .unwrap();
            let mut rows = Vec::new();
            let n = db
                .cluster_templates()
                .list_rendered(&ctx, &Page::default(), Vec::new(), "", |r, _| {
                    rows.push((
                        r.id,
                        r.uuid.map(str::to_owned),
                        r.name.map(str::to_owned),
                        r.created_at,
                        r.updated_at,
                        r.apiserver_port,
                        r.public,
                        r.floating_ip_enabled,
                        r.labels.map(str::to_owned),
                        r.server_type.map(str::to_owned),
                    ))
                })
                .await
                .unwrap()
                .count;
            assert_eq!(n, 1, "{engine}");
            assert_eq!(
                rows,
                [(
                    t.id,
                    t.uuid.clone(),
                    t.name.clone(),
                    t.created_at,
                    t.updated_at,
                    t.apiserver_port,
                    t.public,
                    t.floating_ip_enabled,
                    t.labels.clone(),
                    t.server_type.clone(),
                )],
                "{engine}"
            );
            db.close().await;
            if let Some((server, name)) = server {
                crate::db::drop_scratch(&server, &name).await;
            }
        }
    }
}
