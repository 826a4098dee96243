//! Decoding rows into entity models by column position.
//!
//! sea-orm's derived decoder looks each column up by name and, for every NULL, formats an
//! error message it then throws away; on a list of templates (36 mostly-NULL columns a row)
//! that was most of a request's CPU. Here each entity lists its columns once, in entity
//! order, and a row is decoded straight into the model's fields: the engine is matched once
//! per row, and no value goes through sea-query's `Value` on its way in.
//!
//! The hot lists go one step further ([`each_row`]): their statements run on sqlx directly
//! (no sea-orm `QueryResult` per row, no per-query tracing span), rows are handed over as
//! they arrive, and text columns are read borrowed from the driver's row.

use std::sync::Arc;

use chrono::NaiveDateTime;
use futures::future::BoxFuture;
use magnum_core::Result;
use sea_orm::{
    ConnAcquireErr, ConnectionTrait, DbErr, EntityTrait, QueryResult, QueryTrait, RuntimeErr,
    Select, Statement,
};
use sea_query_sqlx::SqlxValues;
use sqlx::pool::PoolConnection;

use crate::entity::{
    cluster, cluster_template, federation, magnum_service, nodegroup, quotas, x509keypair,
};
use crate::errors::map_db_err;

/// The driver's row of one engine, matched once per row rather than once per column.
pub(crate) enum Cols<'a> {
    MySql(&'a sqlx::mysql::MySqlRow),
    Postgres(&'a sqlx::postgres::PgRow),
    Sqlite(&'a sqlx::sqlite::SqliteRow),
}

impl<'a> Cols<'a> {
    pub(crate) fn of(row: &'a QueryResult) -> std::result::Result<Self, DbErr> {
        if let Some(r) = row.try_as_mysql_row() {
            Ok(Cols::MySql(r))
        } else if let Some(r) = row.try_as_pg_row() {
            Ok(Cols::Postgres(r))
        } else if let Some(r) = row.try_as_sqlite_row() {
            Ok(Cols::Sqlite(r))
        } else {
            Err(DbErr::Custom("unsupported row type".into()))
        }
    }

    /// Column `i` as `Option<T>`, whatever the engine.
    pub(crate) fn get<T>(&self, i: usize) -> std::result::Result<Option<T>, DbErr>
    where
        T: for<'r> sqlx::Decode<'r, sqlx::MySql>
            + sqlx::Type<sqlx::MySql>
            + for<'r> sqlx::Decode<'r, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + for<'r> sqlx::Decode<'r, sqlx::Sqlite>
            + sqlx::Type<sqlx::Sqlite>,
    {
        use sqlx::Row;
        // Unchecked: each decoder names its columns' types once, against our own schema
        // (the test below holds them to the entity); sqlx's per-value check of the wire
        // type against the Rust type was a fifth of a list's decoding.
        let res = match self {
            Cols::MySql(r) => r.try_get_unchecked::<Option<T>, _>(i),
            Cols::Postgres(r) => r.try_get_unchecked::<Option<T>, _>(i),
            Cols::Sqlite(r) => r.try_get_unchecked::<Option<T>, _>(i),
        };
        res.map_err(|e| DbErr::Type(e.to_string()))
    }

    /// Column `i` borrowed from the row (`&str`, or `&[u8]`: bytes not checked for UTF-8).
    fn borrowed<T>(&self, i: usize) -> std::result::Result<Option<T>, DbErr>
    where
        T: sqlx::Decode<'a, sqlx::MySql>
            + sqlx::Type<sqlx::MySql>
            + sqlx::Decode<'a, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + sqlx::Decode<'a, sqlx::Sqlite>
            + sqlx::Type<sqlx::Sqlite>,
    {
        use sqlx::Row;
        let res = match *self {
            Cols::MySql(r) => r.try_get_unchecked::<Option<T>, _>(i),
            Cols::Postgres(r) => r.try_get_unchecked::<Option<T>, _>(i),
            Cols::Sqlite(r) => r.try_get_unchecked::<Option<T>, _>(i),
        };
        res.map_err(|e| DbErr::Type(e.to_string()))
    }

    /// Column `i` as text borrowed from the row.
    pub(crate) fn str(&self, i: usize) -> std::result::Result<Option<&'a str>, DbErr> {
        self.borrowed(i)
    }

    /// Column `i`'s bytes as the driver holds them (text not checked for UTF-8).
    pub(crate) fn bytes(&self, i: usize) -> std::result::Result<Option<&'a [u8]>, DbErr> {
        self.borrowed(i)
    }

    fn text(&self, i: usize) -> std::result::Result<Option<String>, DbErr> {
        self.get(i)
    }
    pub(crate) fn int(&self, i: usize) -> std::result::Result<Option<i32>, DbErr> {
        self.get(i)
    }
    pub(crate) fn flag(&self, i: usize) -> std::result::Result<Option<bool>, DbErr> {
        self.get(i)
    }
    pub(crate) fn time(&self, i: usize) -> std::result::Result<Option<NaiveDateTime>, DbErr> {
        self.get(i)
    }
    // NOT NULL columns (id, nodegroup uuid/name, ...) keep their default when NULL, which
    // the schema forbids anyway.
    fn req_text(&self, i: usize) -> std::result::Result<String, DbErr> {
        Ok(self.text(i)?.unwrap_or_default())
    }
    fn req_int(&self, i: usize) -> std::result::Result<i32, DbErr> {
        Ok(self.int(i)?.unwrap_or_default())
    }
}

/// A driver row of one of the three engines.
pub(crate) trait EngineRow {
    fn cols(&self) -> Cols<'_>;
    /// The row's bytes as the server sent them, where the driver lends them (MariaDB's and
    /// MySQL's binary rows): rows of one statement with equal bytes decode alike.
    fn raw(&self) -> Option<&[u8]> {
        None
    }
}

impl EngineRow for sqlx::mysql::MySqlRow {
    fn cols(&self) -> Cols<'_> {
        Cols::MySql(self)
    }
    fn raw(&self) -> Option<&[u8]> {
        self.raw_binary()
    }
}

impl EngineRow for sqlx::postgres::PgRow {
    fn cols(&self) -> Cols<'_> {
        Cols::Postgres(self)
    }
}

impl EngineRow for sqlx::sqlite::SqliteRow {
    fn cols(&self) -> Cols<'_> {
        Cols::Sqlite(self)
    }
}

/// The errors sea-orm makes of sqlx's, so that [`map_db_err`] treats both paths alike.
pub(crate) fn acquire_err(e: sqlx::Error) -> DbErr {
    match e {
        sqlx::Error::PoolTimedOut => DbErr::ConnectionAcquire(ConnAcquireErr::Timeout),
        sqlx::Error::PoolClosed => DbErr::ConnectionAcquire(ConnAcquireErr::ConnectionClosed),
        e => DbErr::Conn(RuntimeErr::SqlxError(Arc::new(e))),
    }
}

pub(crate) fn query_err(e: sqlx::Error) -> DbErr {
    DbErr::Query(RuntimeErr::SqlxError(Arc::new(e)))
}

/// The sqlx query of a built statement, with its values bound as sea-orm binds them (the
/// same text and parameter types, so the server sees the same prepared statement).
pub(crate) fn sqlx_query<DB>(stmt: Statement) -> sqlx::query::Query<'static, DB, SqlxValues>
where
    DB: sqlx::Database,
    SqlxValues: sqlx::IntoArguments<DB>,
{
    let values = stmt
        .values
        .unwrap_or(sea_orm::sea_query::Values(Vec::new()));
    sqlx::query_with(sqlx::AssertSqlSafe(stmt.sql), SqlxValues(values))
}

/// How an engine's rows are read by the hot lists: a statement is sent ([`Engine::start`],
/// which waits for its first row, so two statements on two connections run at once) and its
/// rows are then handed over one by one as they arrive ([`Engine::each`]). On MariaDB and
/// MySQL the driver calls back with each row (vendor/README.md, change 5) instead of passing
/// it through sqlx's row stream, which cost a lock, a wake-up and three adapter layers a row.
pub(crate) trait Engine: sqlx::Database {
    /// A statement sent, its rows still to be read.
    type Pending<'c>: Send;

    fn start<'c>(
        conn: &'c mut PoolConnection<Self>,
        stmt: Statement,
    ) -> BoxFuture<'c, std::result::Result<Self::Pending<'c>, DbErr>>;

    /// Hand the rows of `pending` to `visit`; returns their number.
    fn each<'c, F>(
        pending: Self::Pending<'c>,
        visit: F,
    ) -> BoxFuture<'c, std::result::Result<usize, DbErr>>
    where
        F: FnMut(Self::Row) -> std::result::Result<(), DbErr> + Send + 'c;
}

/// Why the driver's row callback stopped: its own error or the visitor's.
enum Stop {
    Driver(sqlx::Error),
    Visitor(DbErr),
}

impl From<sqlx::Error> for Stop {
    fn from(e: sqlx::Error) -> Self {
        Stop::Driver(e)
    }
}

impl Engine for sqlx::MySql {
    type Pending<'c> = (&'c mut sqlx::MySqlConnection, sqlx::mysql::MySqlRows);

    fn start<'c>(
        conn: &'c mut PoolConnection<Self>,
        stmt: Statement,
    ) -> BoxFuture<'c, std::result::Result<Self::Pending<'c>, DbErr>> {
        Box::pin(async move {
            let conn: &'c mut sqlx::MySqlConnection = conn;
            let rows = conn
                .start_rows(sqlx_query::<Self>(stmt))
                .await
                .map_err(query_err)?;
            Ok((conn, rows))
        })
    }

    fn each<'c, F>(
        (conn, rows): Self::Pending<'c>,
        mut visit: F,
    ) -> BoxFuture<'c, std::result::Result<usize, DbErr>>
    where
        F: FnMut(Self::Row) -> std::result::Result<(), DbErr> + Send + 'c,
    {
        Box::pin(async move {
            let n = conn
                .each_row(rows, |row| visit(row).map_err(Stop::Visitor))
                .await
                .map_err(|stop| match stop {
                    Stop::Driver(e) => query_err(e),
                    Stop::Visitor(e) => e,
                })?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }
}

/// PostgreSQL and SQLite read through sqlx's row stream.
macro_rules! streamed_engine {
    ($db:ty) => {
        impl Engine for $db {
            type Pending<'c> = (
                futures::stream::BoxStream<
                    'c,
                    std::result::Result<<$db as sqlx::Database>::Row, sqlx::Error>,
                >,
                Option<<$db as sqlx::Database>::Row>,
            );

            fn start<'c>(
                conn: &'c mut PoolConnection<Self>,
                stmt: Statement,
            ) -> BoxFuture<'c, std::result::Result<Self::Pending<'c>, DbErr>> {
                use futures::TryStreamExt;
                Box::pin(async move {
                    let mut rows = sqlx_query::<Self>(stmt).fetch(&mut **conn);
                    let first = rows.try_next().await.map_err(query_err)?;
                    Ok((rows, first))
                })
            }

            fn each<'c, F>(
                (mut rows, first): Self::Pending<'c>,
                mut visit: F,
            ) -> BoxFuture<'c, std::result::Result<usize, DbErr>>
            where
                F: FnMut(Self::Row) -> std::result::Result<(), DbErr> + Send + 'c,
            {
                use futures::TryStreamExt;
                Box::pin(async move {
                    let Some(first) = first else { return Ok(0) };
                    visit(first)?;
                    let mut n = 1;
                    while let Some(row) = rows.try_next().await.map_err(query_err)? {
                        visit(row)?;
                        n += 1;
                    }
                    Ok(n)
                })
            }
        }
    };
}
streamed_engine!(sqlx::Postgres);
streamed_engine!(sqlx::Sqlite);

/// Run `stmt` on `conn` and hand each row to `visit` as it arrives (nothing collected);
/// returns the number of rows.
pub(crate) async fn each_row<DB, F>(
    conn: &mut PoolConnection<DB>,
    stmt: Statement,
    visit: F,
) -> std::result::Result<usize, DbErr>
where
    DB: Engine,
    F: FnMut(DB::Row) -> std::result::Result<(), DbErr> + Send,
{
    let pending = DB::start(conn, stmt).await?;
    DB::each(pending, visit).await
}

/// Run `stmt` on `conn` and keep its rows (for a small result read before a streamed one).
pub(crate) async fn all_rows<DB>(
    conn: &mut PoolConnection<DB>,
    stmt: Statement,
) -> std::result::Result<Vec<DB::Row>, DbErr>
where
    DB: Engine,
{
    let mut rows = Vec::new();
    each_row(conn, stmt, |row| {
        rows.push(row);
        Ok(())
    })
    .await?;
    Ok(rows)
}

/// `with_conn!(db, |conn| body)`: `body` (a `Result<_, DbErr>`, may await) with `conn`, a
/// connection of the pool of `db`'s engine, so one generic reader serves all three. The
/// connection comes from and, when `body` succeeds, goes back to the database's shelf
/// (shelf.rs): `body` must then have read its statements to the end.
/// `with_conn!(db, |conn, spare| body)` also hands `body` a second connection when one is
/// on the shelf (`Option`), for two statements at once.
macro_rules! with_conn {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::rows::with_conn!($db, |$conn, _spare| $body, false)
    };
    ($db:expr, |$conn:ident, $spare:ident| $body:expr) => {
        $crate::rows::with_conn!($db, |$conn, $spare| $body, true)
    };
    ($db:expr, |$conn:ident, $spare:ident| $body:expr, $want:literal) => {{
        use sea_orm::DatabaseConnectionType as Kind;
        let db = $db;
        let c = db.conn();
        match &c.inner {
            Kind::SqlxMySqlPoolConnection(_) => $crate::rows::with_conn!(
                @on db.shelves().mysql, c.get_mysql_connection_pool(), $conn, $spare, $body, $want
            ),
            Kind::SqlxPostgresPoolConnection(_) => $crate::rows::with_conn!(
                @on db.shelves().postgres, c.get_postgres_connection_pool(), $conn, $spare, $body, $want
            ),
            Kind::SqlxSqlitePoolConnection(_) => $crate::rows::with_conn!(
                @on db.shelves().sqlite, c.get_sqlite_connection_pool(), $conn, $spare, $body, $want
            ),
            _ => Err(sea_orm::DbErr::Custom("unsupported connection type".into())),
        }
    }};
    (@on $shelf:expr, $pool:expr, $conn:ident, $spare:ident, $body:expr, $want:literal) => {{
        let (shelf, pool) = (&$shelf, $pool);
        match shelf.take(pool).await {
            Ok(mut lent) => {
                let mut extra = if $want { shelf.try_take(pool) } else { None };
                let r = {
                    let $conn = &mut lent.conn;
                    let $spare = extra.as_mut().map(|l| &mut l.conn);
                    $body
                };
                if r.is_ok() {
                    shelf.put(lent);
                    if let Some(extra) = extra {
                        shelf.put(extra);
                    }
                }
                r
            }
            Err(e) => Err($crate::rows::acquire_err(e)),
        }
    }};
}
pub(crate) use with_conn;

/// A model decoded from a row holding every column of its entity, in entity order.
pub(crate) trait Positional: Sized {
    /// The column names, in the order decoded (checked against the entity in tests).
    const COLUMNS: &'static [&'static str];
    /// The model from the row's columns `first..first + COLUMNS.len()` (a join's row holds
    /// one entity's columns after another's).
    fn decode_at(row: &Cols<'_>, first: usize) -> std::result::Result<Self, DbErr>;
    fn decode(row: &Cols<'_>) -> std::result::Result<Self, DbErr> {
        Self::decode_at(row, 0)
    }
    /// The index of column `name` in that order.
    fn column(name: &str) -> Option<usize> {
        Self::COLUMNS.iter().position(|c| *c == name)
    }
}

/// `positional!(Model { field: reader, ... })`: fields in the entity's column order; struct
/// fields are evaluated in the order written, which gives each its column index.
macro_rules! positional {
    ($model:path { $($field:ident: $kind:ident),* $(,)? }) => {
        impl Positional for $model {
            const COLUMNS: &'static [&'static str] = &[$(stringify!($field)),*];
            fn decode_at(row: &Cols<'_>, first: usize) -> std::result::Result<Self, DbErr> {
                let mut i = first;
                let mut next = || {
                    i += 1;
                    i - 1
                };
                Ok(Self { $($field: row.$kind(next())?),* })
            }
        }
    };
}

positional!(cluster::Model {
    created_at: time,
    updated_at: time,
    id: req_int,
    uuid: text,
    name: text,
    cluster_template_id: text,
    api_address: text,
    stack_id: text,
    project_id: text,
    user_id: text,
    status: text,
    discovery_url: text,
    status_reason: text,
    ca_cert_ref: text,
    magnum_cert_ref: text,
    create_timeout: int,
    coe_version: text,
    container_version: text,
    keypair: text,
    docker_volume_size: int,
    labels: text,
    master_flavor_id: text,
    flavor_id: text,
    health_status: text,
    health_status_reason: text,
    fixed_network: text,
    fixed_subnet: text,
    floating_ip_enabled: flag,
    master_lb_enabled: flag,
    etcd_ca_cert_ref: text,
    front_proxy_ca_cert_ref: text,
});

positional!(nodegroup::Model {
    created_at: time,
    updated_at: time,
    id: req_int,
    uuid: req_text,
    name: req_text,
    cluster_id: req_text,
    project_id: req_text,
    docker_volume_size: int,
    labels: text,
    flavor_id: text,
    image_id: text,
    node_addresses: text,
    node_count: int,
    max_node_count: int,
    min_node_count: int,
    role: text,
    is_default: flag,
    stack_id: text,
    status: text,
    status_reason: text,
    version: text,
    node_labels: text,
    node_taints: text,
});

positional!(cluster_template::Model {
    created_at: time,
    updated_at: time,
    id: req_int,
    uuid: text,
    name: text,
    flavor_id: text,
    keypair_id: text,
    image_id: text,
    external_network_id: text,
    dns_nameserver: text,
    apiserver_port: int,
    project_id: text,
    user_id: text,
    docker_volume_size: int,
    fixed_network: text,
    master_flavor_id: text,
    cluster_distro: text,
    coe: text,
    http_proxy: text,
    https_proxy: text,
    no_proxy: text,
    registry_enabled: flag,
    network_driver: text,
    labels: text,
    tls_disabled: flag,
    public: flag,
    server_type: text,
    volume_driver: text,
    insecure_registry: text,
    docker_storage_driver: text,
    master_lb_enabled: flag,
    fixed_subnet: text,
    floating_ip_enabled: flag,
    hidden: flag,
    tags: text,
    driver: text,
});

positional!(federation::Model {
    created_at: time,
    updated_at: time,
    id: req_int,
    project_id: text,
    uuid: text,
    name: text,
    hostcluster_id: text,
    member_ids: text,
    status: text,
    status_reason: text,
    properties: text,
});

positional!(magnum_service::Model {
    created_at: time,
    updated_at: time,
    id: req_int,
    report_count: req_int,
    host: text,
    binary: text,
    disabled: flag,
    disabled_reason: text,
    last_seen_up: time,
    forced_down: flag,
});

positional!(quotas::Model {
    id: req_int,
    created_at: time,
    updated_at: time,
    project_id: text,
    resource: text,
    hard_limit: req_int,
});

positional!(x509keypair::Model {
    id: req_int,
    created_at: time,
    updated_at: time,
    uuid: text,
    certificate: text,
    private_key: text,
    project_id: text,
    user_id: text,
    intermediates: text,
    private_key_passphrase: text,
});

/// Run an entity select (all columns, in entity order) and decode every row.
pub(crate) async fn load<E, C>(conn: &C, q: Select<E>) -> Result<Vec<E::Model>>
where
    E: EntityTrait,
    E::Model: Positional,
    C: ConnectionTrait,
{
    let stmt = q.build(conn.get_database_backend());
    let rows = conn.query_all_raw(stmt).await.map_err(map_db_err)?;
    rows.iter()
        .map(|r| {
            Cols::of(r)
                .and_then(|c| E::Model::decode(&c))
                .map_err(map_db_err)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sea_orm::{IdenStatic, Iterable};

    fn names<E: EntityTrait>() -> Vec<&'static str> {
        E::Column::iter().map(|c| c.as_str()).collect()
    }

    /// Each decoder reads the columns in the order an entity select lists them.
    #[test]
    fn decoders_follow_entity_column_order() {
        assert_eq!(cluster::Model::COLUMNS, names::<cluster::Entity>());
        assert_eq!(nodegroup::Model::COLUMNS, names::<nodegroup::Entity>());
        assert_eq!(
            cluster_template::Model::COLUMNS,
            names::<cluster_template::Entity>()
        );
        assert_eq!(federation::Model::COLUMNS, names::<federation::Entity>());
        assert_eq!(
            magnum_service::Model::COLUMNS,
            names::<magnum_service::Entity>()
        );
        assert_eq!(quotas::Model::COLUMNS, names::<quotas::Entity>());
        assert_eq!(x509keypair::Model::COLUMNS, names::<x509keypair::Entity>());
    }
}
