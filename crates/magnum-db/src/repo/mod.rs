//! Repositories, one per table, and the machinery they share: tenant scoping, keyset
//! pagination, name lookups and the guarded read-modify-write update.

pub mod cluster;
pub mod cluster_template;
pub mod federation;
pub mod magnum_service;
pub mod nodegroup;
pub mod quota;
pub mod x509keypair;

use std::str::FromStr;

use chrono::{NaiveDateTime, SubsecRound, Utc};
use magnum_core::{Error, RequestContext, Result};
use sea_orm::sea_query::{Expr, NullOrdering, Order};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, IdenStatic,
    IntoActiveModel, Iterable, ModelTrait, QueryFilter, QueryOrder, QuerySelect, Select,
    TransactionTrait, Value,
};

use crate::Database;
use crate::errors::{TxError, is_unique_violation, map_db_err};

/// Sort direction of a list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortDir {
    #[default]
    Asc,
    Desc,
}

impl FromStr for SortDir {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "asc" => Ok(SortDir::Asc),
            "desc" => Ok(SortDir::Desc),
            other => Err(Error::InvalidParameterValue {
                message: format!(
                    "Invalid sort direction: {other}. Acceptable values are 'asc' or 'desc'"
                ),
            }),
        }
    }
}

/// One page of a list, as oslo.db's `paginate_query` takes it. The marker is the full row of
/// the last item of the previous page (the API resolves the marker uuid to a row first).
#[derive(Clone, Debug)]
pub struct Page<M> {
    pub limit: Option<u64>,
    pub marker: Option<M>,
    pub sort_key: Option<String>,
    pub sort_dir: SortDir,
}

impl<M> Default for Page<M> {
    fn default() -> Self {
        Self {
            limit: None,
            marker: None,
            sort_key: None,
            sort_dir: SortDir::Asc,
        }
    }
}

impl<M> Page<M> {
    pub fn limit(limit: u64) -> Self {
        Self {
            limit: Some(limit),
            ..Self::default()
        }
    }
}

/// Timestamps are naive UTC with whole seconds: what MySQL's DATETIME keeps, on every engine.
pub fn now() -> NaiveDateTime {
    Utc::now().naive_utc().trunc_subsecs(0)
}

pub(crate) fn column<E: EntityTrait>(name: &str) -> Result<E::Column> {
    E::Column::from_str(name).map_err(|_| Error::InvalidSortKey {
        key: name.to_owned(),
    })
}

/// Upstream's tenant filter: admins asking for all tenants see everything; otherwise the
/// caller's project, or (with no project) the caller's own rows.
/// Tables without a `user_id` column (federation) pass `None` and match nothing then.
pub(crate) fn tenant_condition<C: ColumnTrait>(
    ctx: &RequestContext,
    project: C,
    user: Option<C>,
) -> Condition {
    if ctx.is_admin && ctx.all_tenants {
        Condition::all()
    } else if let Some(p) = &ctx.project_id {
        Condition::all().add(project.eq(p.as_str()))
    } else if let Some(user) = user {
        Condition::all().add(user.eq(ctx.user_id.clone()))
    } else {
        Condition::all()
            .add(project.is_null())
            .add(project.is_not_null())
    }
}

fn is_null(v: &Value) -> bool {
    matches!(
        v,
        Value::Bool(None) | Value::Int(None) | Value::String(None) | Value::ChronoDateTime(None)
    )
}

/// `ORDER BY sort_key dir, id dir` plus the keyset predicate after `page.marker`, then LIMIT.
/// NULL marker values drop their terms as oslo.db does; PostgreSQL is told to put NULLs first
/// in ascending order, as MySQL and SQLite do.
pub(crate) fn paginate<E, R>(
    backend: DbBackend,
    mut q: Select<E>,
    page: &Page<R>,
) -> Result<Select<E>>
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E>,
    R: Clone + Into<E::Model>,
{
    let id = column::<E>("id")?;
    let mut keys = Vec::with_capacity(2);
    if let Some(k) = page.sort_key.as_deref().filter(|k| *k != "id") {
        keys.push(column::<E>(k)?);
    }
    keys.push(id);
    let order = match page.sort_dir {
        SortDir::Asc => Order::Asc,
        SortDir::Desc => Order::Desc,
    };
    if let Some(marker) = &page.marker {
        let marker: E::Model = marker.clone().into();
        let values: Vec<Value> = keys.iter().map(|k| marker.get(*k)).collect();
        let mut any = Condition::any();
        for i in 0..keys.len() {
            if is_null(&values[i]) {
                continue;
            }
            let mut term = Condition::all();
            for j in 0..i {
                if !is_null(&values[j]) {
                    term = term.add(keys[j].eq(values[j].clone()));
                }
            }
            term = term.add(match page.sort_dir {
                SortDir::Asc => keys[i].gt(values[i].clone()),
                SortDir::Desc => keys[i].lt(values[i].clone()),
            });
            any = any.add(term);
        }
        q = q.filter(any);
    }
    for k in keys {
        q = if backend == DbBackend::Postgres {
            let nulls = match page.sort_dir {
                SortDir::Asc => NullOrdering::First,
                SortDir::Desc => NullOrdering::Last,
            };
            q.order_by_with_nulls(k, order.clone(), nulls)
        } else {
            q.order_by(k, order.clone())
        };
    }
    if let Some(limit) = page.limit {
        q = q.limit(limit);
    }
    Ok(q)
}

pub(crate) async fn fetch_one<E, C, R>(
    conn: &C,
    q: Select<E>,
    not_found: impl FnOnce() -> Error,
) -> Result<R>
where
    E: EntityTrait,
    E::Model: crate::rows::Positional,
    C: ConnectionTrait,
    R: From<E::Model>,
{
    crate::rows::load(conn, q.limit(1))
        .await?
        .pop()
        .map(R::from)
        .ok_or_else(not_found)
}

/// A lookup by name: none is not-found, more than one is upstream's 409 "Multiple ...".
pub(crate) async fn fetch_by_name<E, C, R>(
    conn: &C,
    q: Select<E>,
    not_found: impl FnOnce() -> Error,
    multiple: impl FnOnce() -> Error,
) -> Result<R>
where
    E: EntityTrait,
    E::Model: crate::rows::Positional,
    C: ConnectionTrait,
    R: From<E::Model>,
{
    let mut rows = crate::rows::load(conn, q.limit(2)).await?;
    match rows.len() {
        0 => Err(not_found()),
        1 => Ok(rows.remove(0).into()),
        _ => Err(multiple()),
    }
}

pub(crate) async fn fetch_all<E, C, R>(conn: &C, q: Select<E>) -> Result<Vec<R>>
where
    E: EntityTrait,
    E::Model: crate::rows::Positional,
    C: ConnectionTrait,
    R: From<E::Model>,
{
    Ok(crate::rows::load(conn, q)
        .await?
        .into_iter()
        .map(R::from)
        .collect())
}

pub(crate) async fn count<E, C>(conn: &C, q: Select<E>) -> Result<u64>
where
    E: EntityTrait,
    E::Model: Sync,
    C: ConnectionTrait,
{
    use sea_orm::PaginatorTrait;
    q.count(conn).await.map_err(map_db_err)
}

/// INSERT every column of `model` except the auto-increment id, and return the stored row.
pub(crate) async fn insert<E, A, R>(
    db: &Database,
    record: R,
    duplicate: impl FnOnce() -> Error,
) -> Result<R>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<A>,
    A: ActiveModelTrait<Entity = E> + sea_orm::ActiveModelBehavior + Send,
    R: Into<E::Model> + From<E::Model>,
{
    // sea-orm inserts, then reads the row back by its new id: on a pool those can be two
    // connections, and behind HAProxy two Galera nodes, the second of which may not have
    // applied the insert yet ("Failed to find inserted item"). A transaction holds one.
    let txn = db.conn().begin().await.map_err(map_db_err)?;
    let row = insert_in::<E, A, _>(&txn, record.into(), duplicate).await?;
    txn.commit().await.map_err(map_db_err)?;
    Ok(row.into())
}

/// `insert` on a given connection or transaction.
pub(crate) async fn insert_in<E, A, C>(
    conn: &C,
    model: E::Model,
    duplicate: impl FnOnce() -> Error,
) -> Result<E::Model>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<A>,
    A: ActiveModelTrait<Entity = E> + sea_orm::ActiveModelBehavior + Send,
    C: ConnectionTrait,
{
    let mut active: A = model.into_active_model().reset_all();
    active.not_set(column::<E>("id")?);
    match active.insert(conn).await {
        Ok(m) => Ok(m),
        Err(e) if is_unique_violation(&e) => Err(duplicate()),
        Err(e) => Err(map_db_err(e)),
    }
}

/// How to report a missing row: an owned label and the error it goes into, so transaction
/// bodies (which may run several times) can own it.
#[derive(Clone, Debug)]
pub(crate) struct Missing {
    make: fn(String) -> Error,
    label: String,
}

impl Missing {
    pub(crate) fn new(make: fn(String) -> Error, label: impl Into<String>) -> Self {
        Self {
            make,
            label: label.into(),
        }
    }

    pub(crate) fn err(&self) -> Error {
        (self.make)(self.label.clone())
    }
}

/// One column a writer wants to change: the new value, and (for guarded writes) the value
/// the writer based its change on.
#[derive(Clone, Debug)]
pub struct Change<C> {
    pub column: C,
    pub new: Value,
    pub expected: Option<Value>,
}

/// Columns that differ between what a writer read and what it wants stored, each guarded by
/// the value it read. `id`, `created_at` and `updated_at` belong to storage and are ignored;
/// changing `uuid` is refused, as upstream does.
pub(crate) fn diff<E>(
    original: &E::Model,
    modified: &E::Model,
    resource: &str,
) -> Result<Vec<Change<E::Column>>>
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E>,
{
    let mut changes = Vec::new();
    for c in E::Column::iter() {
        let name = c.as_str();
        if matches!(name, "id" | "created_at" | "updated_at") {
            continue;
        }
        let (old, new) = (original.get(c), modified.get(c));
        if old == new {
            continue;
        }
        if name == "uuid" {
            return Err(Error::InvalidParameterValue {
                message: format!("Cannot overwrite UUID for an existing {resource}."),
            });
        }
        changes.push(Change {
            column: c,
            new,
            expected: Some(old),
        });
    }
    Ok(changes)
}

/// Apply `changes` to the row with primary key `id` in one transaction: lock the row
/// (`SELECT … FOR UPDATE`; SQLite serialises writers itself), refuse if any guarded column no
/// longer holds the value the writer read (even if it now holds the writer's new value: two
/// increments from the same read must not count once), then
/// `UPDATE` only the changed columns and `updated_at`. Deadlocks and busy errors re-run the
/// whole transaction on fresh data. Returns the row as stored.
pub(crate) async fn update_row<E, R>(
    db: &Database,
    id: i32,
    changes: Vec<Change<E::Column>>,
    resource: &'static str,
    missing: Missing,
) -> Result<R>
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E> + Send + Sync,
    R: From<E::Model>,
{
    let id_col = column::<E>("id")?;
    let updated_at = column::<E>("updated_at")?;
    db.tx(move |txn| {
        let changes = changes.clone();
        let missing = missing.clone();
        Box::pin(async move {
            let mut current = E::find()
                .filter(id_col.eq(id))
                .lock_exclusive()
                .one(txn)
                .await?
                .ok_or_else(|| missing.err())?;
            let stale: Vec<&str> = changes
                .iter()
                .filter(|c| {
                    c.expected
                        .as_ref()
                        .is_some_and(|exp| current.get(c.column) != *exp)
                })
                .map(|c| c.column.as_str())
                .collect();
            if !stale.is_empty() {
                return Err(TxError::Domain(Error::StaleWrite {
                    resource,
                    id: uuid_or_id(&current, id),
                    fields: stale.join(", "),
                }));
            }
            // A change whose new value is the one expected only guards (see `save_guarding`).
            let changes: Vec<_> = changes
                .into_iter()
                .filter(|c| c.expected.as_ref() != Some(&c.new))
                .collect();
            if changes.is_empty() {
                return Ok(current);
            }
            let stamp = now();
            let mut update = E::update_many().filter(id_col.eq(id));
            for c in changes {
                current.try_set(c.column, c.new.clone())?;
                update = update.col_expr(c.column, Expr::value(c.new));
            }
            update = update.col_expr(updated_at, Expr::value(stamp));
            current.try_set(updated_at, Value::ChronoDateTime(Some(stamp)))?;
            update.exec(txn).await?;
            Ok(current)
        })
    })
    .await
    .map(R::from)
}

fn uuid_or_id<M: ModelTrait>(m: &M, id: i32) -> String {
    match <M::Entity as EntityTrait>::Column::from_str("uuid").map(|c| m.get(c)) {
        Ok(Value::String(Some(u))) => u,
        _ => id.to_string(),
    }
}

/// Guarded save: the changes between `original` (as read) and `modified`.
pub(crate) async fn save<E, R>(
    db: &Database,
    original: &R,
    modified: &R,
    resource: &'static str,
    missing: Missing,
) -> Result<R>
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E> + Send + Sync,
    R: Clone + Into<E::Model> + From<E::Model>,
{
    save_guarding::<E, R>(db, original, modified, &[], resource, missing).await
}

/// As [`save`], and the columns `guard` must still hold what `original` read even where
/// this write leaves them: a write derived from them (an observation made against a status)
/// is refused once another writer moved them on.
pub(crate) async fn save_guarding<E, R>(
    db: &Database,
    original: &R,
    modified: &R,
    guard: &[&str],
    resource: &'static str,
    missing: Missing,
) -> Result<R>
where
    E: EntityTrait,
    E::Model: ModelTrait<Entity = E> + Send + Sync,
    R: Clone + Into<E::Model> + From<E::Model>,
{
    let (original, modified): (E::Model, E::Model) =
        (original.clone().into(), modified.clone().into());
    let mut changes = diff::<E>(&original, &modified, resource)?;
    if !changes.is_empty() {
        for name in guard {
            let column = column::<E>(name)?;
            if changes.iter().all(|c| c.column.as_str() != *name) {
                let held = original.get(column);
                changes.push(Change {
                    column,
                    new: held.clone(),
                    expected: Some(held),
                });
            }
        }
    }
    let id = match original.get(column::<E>("id")?) {
        Value::Int(Some(id)) => id,
        _ => return Err(missing.err()),
    };
    update_row::<E, R>(db, id, changes, resource, missing).await
}

/// `DELETE … WHERE <condition>`; no row deleted is not-found.
pub(crate) async fn delete_where<E>(db: &Database, cond: Condition, missing: Missing) -> Result<()>
where
    E: EntityTrait,
{
    db.tx(move |txn| {
        let cond = cond.clone();
        let missing = missing.clone();
        Box::pin(async move {
            let res = E::delete_many().filter(cond).exec(txn).await?;
            if res.rows_affected == 0 {
                return Err(TxError::Domain(missing.err()));
            }
            Ok(())
        })
    })
    .await
}

/// The `id`/`uuid` predicate of an upstream "identity".
pub(crate) fn identity_condition<C: ColumnTrait>(
    ident: &magnum_core::ids::Identity,
    id: C,
    uuid: C,
) -> Condition {
    match ident {
        magnum_core::ids::Identity::Id(i) => Condition::all().add(id.eq(*i)),
        magnum_core::ids::Identity::Uuid(u) => Condition::all().add(uuid.eq(u.as_str())),
    }
}

/// A fresh uuid when the caller left it empty, as upstream's create_* do.
pub(crate) fn ensure_uuid(uuid: &mut Option<String>) -> String {
    match uuid {
        Some(u) if !u.is_empty() => u.clone(),
        _ => {
            let u = uuid::Uuid::new_v4().to_string();
            *uuid = Some(u.clone());
            u
        }
    }
}

pub(crate) fn json_default(v: &mut Option<String>, empty: &str) {
    if v.is_none() {
        *v = Some(empty.to_owned());
    }
}

/// Rows per status of one table (NULL counted as an empty status).
async fn by_status<E>(db: &Database, status: E::Column) -> Result<Vec<(String, i64)>>
where
    E: EntityTrait,
{
    use sea_orm::QuerySelect;
    use sea_orm::sea_query::Func;
    let rows: Vec<(Option<String>, i64)> = E::find()
        .select_only()
        .column(status)
        .column_as(Expr::expr(Func::count(Expr::col(status))), "n")
        .group_by(status)
        .into_tuple()
        .all(db.conn())
        .await
        .map_err(map_db_err)?;
    Ok(rows
        .into_iter()
        .map(|(s, n)| (s.unwrap_or_default(), n))
        .collect())
}

impl Database {
    /// Clusters and nodegroups by status, each in one GROUP BY (for `/metrics`).
    pub async fn status_counts(&self) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>)> {
        let clusters = by_status::<crate::entity::cluster::Entity>(
            self,
            crate::entity::cluster::Column::Status,
        )
        .await?;
        let nodegroups = by_status::<crate::entity::nodegroup::Entity>(
            self,
            crate::entity::nodegroup::Column::Status,
        )
        .await?;
        Ok((clusters, nodegroups))
    }

    /// Fills the gauges `/metrics` reads from storage at scrape time: rows by status,
    /// conductors up and down (by `service_down_time`, seconds) and the connection pool's use.
    pub async fn record_metrics(&self, m: &magnum_core::metrics::Metrics, service_down_time: i64) {
        match self.status_counts().await {
            Ok((clusters, nodegroups)) => m.set_status_counts(&clusters, &nodegroups),
            Err(e) => tracing::warn!("metrics: cannot count clusters: {e}"),
        }
        match self.magnum_services().list(None, &Page::default()).await {
            Ok(rows) => {
                let now = now();
                let up = rows
                    .iter()
                    .filter(|s| magnum_service::is_up(s, now, service_down_time))
                    .count() as i64;
                m.set_conductors(up, rows.len() as i64 - up);
            }
            Err(e) => tracing::warn!("metrics: cannot count conductors: {e}"),
        }
        let (open, idle, max) = self.pool_use();
        m.set_db_pool(open, idle, max);
    }
}
