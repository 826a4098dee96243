//! The connection pool, per-engine session settings and the retrying transaction runner.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use magnum_core::{Error, Result};
use sea_orm::{
    ConnectOptions, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend,
    TransactionTrait,
};
use sqlx::Executor;
use tokio::sync::watch;

use crate::errors::{TxError, is_retryable, map_db_err};
use crate::shelf::Shelves;
use crate::url::{DbUrl, Engine};

/// What storage needs from `[database]`; magnumd fills it from magnum.conf.
#[derive(Clone, Debug)]
pub struct DbSettings {
    pub url: DbUrl,
    /// oslo.db `mysql_sql_mode`, set on every new MySQL connection (upstream: TRADITIONAL).
    pub mysql_sql_mode: String,
    /// oslo.db `mysql_wsrep_sync_wait`, set on every new MySQL connection when given.
    pub mysql_wsrep_sync_wait: Option<u32>,
    pub max_pool_size: u32,
    pub max_overflow: u32,
    /// Seconds to wait for a pooled connection, and for a new connection to be made.
    pub pool_timeout: u64,
    pub connection_recycle_time: u64,
    /// Deadlock/serialisation retries: oslo.db's `db_max_retries` and its backoff.
    pub db_max_retries: u32,
    pub db_retry_interval: Duration,
    pub db_inc_retry_interval: bool,
    pub db_max_retry_interval: Duration,
}

impl DbSettings {
    /// The pool's bound: `max_pool_size + max_overflow`; one for an in-memory SQLite, where
    /// every further connection would be a different database; at most
    /// [`SQLITE_MAX_CONNECTIONS`] for a SQLite file, which takes one writer at a time: more
    /// connections there only add a thread and a page cache each (a conductor syncing 2,000
    /// clusters grew to 30 of them, scripts/bench-capi).
    pub fn max_connections(&self) -> u32 {
        let configured = (self.max_pool_size + self.max_overflow).max(1);
        if self.url.in_memory {
            1
        } else if self.url.engine == Engine::Sqlite {
            configured.min(SQLITE_MAX_CONNECTIONS)
        } else {
            configured
        }
    }

    /// oslo.db's defaults for a URL.
    pub fn new(url: DbUrl) -> Self {
        Self {
            url,
            mysql_sql_mode: "TRADITIONAL".into(),
            mysql_wsrep_sync_wait: None,
            max_pool_size: 5,
            max_overflow: 50,
            pool_timeout: 30,
            connection_recycle_time: 3600,
            db_max_retries: 20,
            db_retry_interval: Duration::from_secs(1),
            db_inc_retry_interval: true,
            db_max_retry_interval: Duration::from_secs(10),
        }
    }
}

/// The most connections a pool keeps to a SQLite file (see [`DbSettings::max_connections`]).
pub const SQLITE_MAX_CONNECTIONS: u32 = 8;

/// The storage handle: a pool plus the retry policy. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Database {
    conn: DatabaseConnection,
    engine: Engine,
    settings: DbSettings,
    /// `Some(reason)` while the server does not answer (see [`watch_server`]).
    down: Arc<watch::Sender<Option<String>>>,
    /// Connections the hot lists keep between requests (shelf.rs).
    shelves: Arc<Shelves>,
    /// The hot lists' items, kept rendered under their rows' bytes (items.rs).
    items: Arc<crate::items::ItemCache>,
}

/// How often the server is asked whether it is there, and how long it may take to say so.
const WATCH_EVERY: Duration = Duration::from_millis(500);
const WATCH_TIMEOUT: Duration = Duration::from_secs(1);
/// A pooled connection idle this long is pinged before it is handed out.
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// One connection of its own, outside the pool, asked `SELECT 1` every [`WATCH_EVERY`]: a
/// pool retries a server that went away until `pool_timeout` (30 s) for every caller, so
/// callers learn from this watch that it is away and fail at once. Ends with the last
/// handle of the database.
async fn watch_server(url: DbUrl, down: std::sync::Weak<watch::Sender<Option<String>>>) {
    use sqlx::{ConnectOptions as _, Connection as _};
    enum Conn {
        MySql(sqlx::MySqlConnection),
        Postgres(sqlx::PgConnection),
    }
    async fn connect(url: &DbUrl) -> std::result::Result<Conn, String> {
        match url.engine {
            Engine::MySql => {
                let o: sqlx::mysql::MySqlConnectOptions = url
                    .sqlx_url
                    .parse()
                    .map_err(|e: sqlx::Error| e.to_string())?;
                o.connect()
                    .await
                    .map(Conn::MySql)
                    .map_err(|e| e.to_string())
            }
            Engine::Postgres => {
                let o: sqlx::postgres::PgConnectOptions = url
                    .sqlx_url
                    .parse()
                    .map_err(|e: sqlx::Error| e.to_string())?;
                o.connect()
                    .await
                    .map(Conn::Postgres)
                    .map_err(|e| e.to_string())
            }
            Engine::Sqlite => Err("nothing to watch".into()),
        }
    }
    async fn ask(c: &mut Conn) -> std::result::Result<(), String> {
        let r = match c {
            Conn::MySql(c) => c.ping().await,
            Conn::Postgres(c) => c.ping().await,
        };
        r.map_err(|e| e.to_string())
    }
    let mut conn: Option<Conn> = None;
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(down) = down.upgrade() else { return };
        let answer = tokio::time::timeout(WATCH_TIMEOUT, async {
            match conn.as_mut() {
                Some(c) => ask(c).await,
                None => {
                    conn = Some(connect(&url).await?);
                    Ok(())
                }
            }
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", WATCH_TIMEOUT.as_secs())));
        match answer {
            Ok(()) => {
                if down.borrow().is_some() {
                    tracing::info!(database = %url.redacted(), "database reachable again");
                    down.send_replace(None);
                }
            }
            Err(e) => {
                conn = None;
                if down.borrow().is_none() {
                    tracing::warn!(database = %url.redacted(), error = %e, "database unreachable");
                    // The first sentence is the error's title; the server's address stays in
                    // the log line above.
                    down.send_replace(Some(format!("the database server does not answer. {e}")));
                }
            }
        }
    }
}

/// One direct connection attempt before the pool exists: a pool retries refused connections
/// until its timeout and then reports only "pool timed out", which tells an operator nothing.
async fn probe(url: &DbUrl, timeout: Duration) -> Result<()> {
    use sqlx::ConnectOptions as _;
    let unavailable = |e: String| {
        Error::DatabaseUnavailable(format!("cannot connect to {}: {e}", url.redacted()))
    };
    let attempt = async {
        match url.engine {
            Engine::MySql => {
                let opts: sqlx::mysql::MySqlConnectOptions = url
                    .sqlx_url
                    .parse()
                    .map_err(|e: sqlx::Error| e.to_string())?;
                opts.connect().await.map(drop).map_err(|e| e.to_string())
            }
            Engine::Postgres => {
                let opts: sqlx::postgres::PgConnectOptions = url
                    .sqlx_url
                    .parse()
                    .map_err(|e: sqlx::Error| e.to_string())?;
                opts.connect().await.map(drop).map_err(|e| e.to_string())
            }
            // A file or memory: nothing to reach.
            Engine::Sqlite => Ok(()),
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(unavailable(e)),
        Err(_) => Err(unavailable(format!(
            "no answer within {} s",
            timeout.as_secs()
        ))),
    }
}

pub(crate) type TxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, TxError>> + Send + 'a>>;

impl Database {
    /// Connect (once, without retrying: callers decide how long to keep trying).
    pub async fn connect(settings: DbSettings) -> Result<Self> {
        let url = &settings.url;
        let mut opts = ConnectOptions::new(url.sqlx_url.clone());
        opts.max_connections(settings.max_connections())
            .min_connections(0)
            .connect_timeout(Duration::from_secs(settings.pool_timeout))
            .acquire_timeout(Duration::from_secs(settings.pool_timeout))
            .max_lifetime(Duration::from_secs(settings.connection_recycle_time.max(1)))
            // A connection back from the pool is pinged only after it has been idle: pinging
            // every checkout (sea-orm's default) costs a round trip per request. A busy
            // connection that broke meanwhile fails its statement and is closed on release
            // (sqlx pings every connection handed back).
            .test_before_acquire_if_idle_for(PING_AFTER_IDLE)
            .sqlx_logging(false);
        if url.in_memory {
            // The single connection must never be dropped, or the database goes with it.
            opts.idle_timeout(None::<Duration>)
                .max_lifetime(None::<Duration>);
        }
        let sql_mode = settings.mysql_sql_mode.clone();
        let sync_wait = settings.mysql_wsrep_sync_wait;
        opts.map_sqlx_mysql_opts(|o| o.pipes_as_concat(false).no_engine_substitution(false))
            .map_sqlx_mysql_pool_opts(move |p| {
                let sql_mode = sql_mode.clone();
                p.after_connect(move |conn, _meta| {
                    let mut stmt =
                        format!("SET SESSION sql_mode = '{}'", sql_mode.replace('\'', ""));
                    if let Some(n) = sync_wait {
                        stmt.push_str(&format!(", wsrep_sync_wait = {n}"));
                    }
                    Box::pin(async move {
                        conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(stmt)))
                            .await?;
                        Ok(())
                    })
                })
            })
            .map_sqlx_sqlite_opts(|o| {
                o.busy_timeout(Duration::from_secs(5))
                    .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                    .create_if_missing(true)
            })
            .map_sqlx_postgres_opts(|o| o.options([("timezone", "UTC")]));
        probe(url, Duration::from_secs(settings.pool_timeout)).await?;
        let conn = sea_orm::Database::connect(opts).await.map_err(|e| {
            Error::DatabaseUnavailable(format!(
                "cannot connect to {}: {}",
                url.redacted(),
                map_db_err(e)
                    .to_string()
                    .trim_start_matches("Database unavailable: ")
            ))
        })?;
        // A lazy pool may not have touched the server yet: prove it is there.
        conn.execute_unprepared("SELECT 1").await.map_err(|e| {
            Error::DatabaseUnavailable(format!(
                "cannot reach {}: {}",
                url.redacted(),
                map_db_err(e)
            ))
        })?;
        let (down, _) = watch::channel(None);
        let down = Arc::new(down);
        if url.engine != Engine::Sqlite {
            tokio::spawn(watch_server(url.clone(), Arc::downgrade(&down)));
        }
        let shelves = Arc::new(Shelves::new(settings.max_connections()));
        tokio::spawn(crate::shelf::reap(Arc::downgrade(&shelves)));
        Ok(Self {
            engine: url.engine,
            conn,
            shelves,
            items: Arc::default(),
            settings,
            down,
        })
    }

    /// `DatabaseUnavailable` while the server does not answer its watch.
    pub fn reachable(&self) -> Result<()> {
        match self.down.borrow().as_ref() {
            Some(reason) => Err(Error::DatabaseUnavailable(reason.clone())),
            None => Ok(()),
        }
    }

    /// Resolves with `DatabaseUnavailable` as soon as the server is found away (at once if
    /// it is already): raced against a request, it ends that request's wait on the pool.
    pub async fn unreachable(&self) -> Error {
        let mut rx = self.down.subscribe();
        // The guard of the value must not live across an await (it is not Send).
        let reason = rx
            .wait_for(Option::is_some)
            .await
            .map(|r| r.clone().unwrap_or_default());
        match reason {
            Ok(reason) => Error::DatabaseUnavailable(reason),
            // The watch ended with the database itself: never away then.
            Err(_) => std::future::pending().await,
        }
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    pub fn backend(&self) -> DbBackend {
        self.conn.get_database_backend()
    }

    pub(crate) fn conn(&self) -> &DatabaseConnection {
        &self.conn
    }

    /// The connection itself, for this crate's own storage tests (with `test-sql`).
    #[cfg(feature = "test-sql")]
    #[doc(hidden)]
    pub fn sea_connection(&self) -> &DatabaseConnection {
        &self.conn
    }

    /// One statement as text, past the repositories, for tests that must leave a row as an
    /// older release or another writer would (a NULL flag, a backdated timestamp). Only with
    /// the `test-sql` feature, which magnum-testkit turns on: no server path can reach it.
    #[cfg(feature = "test-sql")]
    pub async fn execute_text(&self, sql: &str) -> Result<u64> {
        Ok(self
            .conn
            .execute_unprepared(sql)
            .await
            .map_err(map_db_err)?
            .rows_affected())
    }

    /// The first column of the first row of a query (a count) as text, for tests; see
    /// [`Database::execute_text`].
    #[cfg(feature = "test-sql")]
    pub async fn scalar_text(&self, sql: &str) -> Result<Option<i64>> {
        let row = self
            .conn
            .query_one_raw(sea_orm::Statement::from_string(self.backend(), sql))
            .await
            .map_err(map_db_err)?;
        match row {
            Some(row) => row.try_get_by_index::<Option<i64>>(0).map_err(map_db_err),
            None => Ok(None),
        }
    }

    pub fn settings(&self) -> &DbSettings {
        &self.settings
    }

    pub(crate) fn shelves(&self) -> &Shelves {
        &self.shelves
    }

    pub(crate) fn items(&self) -> &crate::items::ItemCache {
        &self.items
    }

    /// How many list items are kept rendered now (items.rs).
    pub fn rendered_items(&self) -> usize {
        self.items.len()
    }

    /// Close the pool, once every connection is back (the shelved ones first).
    pub async fn close(&self) {
        self.shelves.clear();
        self.conn.clone().close().await.ok();
    }

    /// The pool's connections now, for `/metrics`: `(open, idle, most allowed)`.
    pub fn pool_use(&self) -> (u32, u32, u32) {
        use sea_orm::DatabaseConnectionType as Kind;
        // Matched on the connection's own kind, so the accessors below cannot panic.
        let (open, idle) = match &self.conn.inner {
            Kind::SqlxMySqlPoolConnection(_) => {
                let p = self.conn.get_mysql_connection_pool();
                (p.size(), p.num_idle())
            }
            Kind::SqlxPostgresPoolConnection(_) => {
                let p = self.conn.get_postgres_connection_pool();
                (p.size(), p.num_idle())
            }
            Kind::SqlxSqlitePoolConnection(_) => {
                let p = self.conn.get_sqlite_connection_pool();
                (p.size(), p.num_idle())
            }
            _ => (0, 0),
        };
        // Shelved connections are idle too, though the pool counts them as in use.
        let idle = u32::try_from(idle + self.shelves.len()).unwrap_or(u32::MAX);
        (open, idle, self.settings.max_connections())
    }

    /// Run `body` in a transaction, again from the start when it loses a race (deadlock,
    /// serialisation failure, SQLite busy), at most `db_max_retries` times with oslo.db's
    /// jittered exponential backoff. Domain errors abort at once.
    pub(crate) async fn tx<T, F>(&self, mut body: F) -> Result<T>
    where
        F: for<'c> FnMut(&'c DatabaseTransaction) -> TxFuture<'c, T>,
    {
        let mut attempt = 0u32;
        let mut nominal = self.settings.db_retry_interval;
        loop {
            let txn = self.conn.begin().await.map_err(map_db_err)?;
            let outcome = match body(&txn).await {
                Ok(v) => txn.commit().await.map(|()| v).map_err(TxError::Db),
                Err(e) => {
                    // Nothing was committed; a failed rollback only means the connection is gone.
                    let _ = txn.rollback().await;
                    Err(e)
                }
            };
            match outcome {
                Err(TxError::Db(e))
                    if is_retryable(&e) && attempt < self.settings.db_max_retries =>
                {
                    attempt += 1;
                    tracing::debug!(attempt, error = %e, "transaction lost a race; retrying");
                    tokio::time::sleep(self.backoff(nominal)).await;
                    if self.settings.db_inc_retry_interval {
                        nominal = (nominal * 2).min(self.settings.db_max_retry_interval);
                    }
                }
                other => return other.map_err(Error::from),
            }
        }
    }

    /// Uniform in [0, nominal], as oslo.db does for deadlocks, so racing writers spread out.
    fn backoff(&self, nominal: Duration) -> Duration {
        let nominal = nominal.min(self.settings.db_max_retry_interval);
        nominal.mul_f64(fastrand::f64())
    }
}

/// Drop a test's throwaway database `name` on `server` (PostgreSQL: its sessions too).
#[cfg(test)]
pub(crate) async fn drop_scratch(server: &Database, name: &str) {
    let force = if server.engine() == Engine::Postgres {
        " WITH (FORCE)"
    } else {
        ""
    };
    if let Err(e) = server
        .conn()
        .execute_unprepared(&format!("DROP DATABASE {name}{force}"))
        .await
    {
        panic!("cannot drop {name}: {e}");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect};
    use tokio::sync::Barrier;

    use super::*;
    use crate::entity::quotas;

    #[test]
    fn a_sqlite_file_takes_a_few_connections_other_engines_what_is_configured() {
        let bound = |url: &str| DbSettings::new(DbUrl::parse(url).unwrap()).max_connections();
        assert_eq!(bound("mysql+pymysql://u:p@h/magnum"), 55);
        assert_eq!(bound("postgresql://u:p@h/magnum"), 55);
        assert_eq!(
            bound("sqlite:////var/lib/magnum/magnum.sqlite"),
            SQLITE_MAX_CONNECTIONS
        );
        assert_eq!(bound("sqlite://"), 1);
    }

    /// A throwaway database at head on the server in `var`, or None when it is not configured.
    async fn server_db(var: &str, engine: Engine) -> Option<(Database, Database, String)> {
        // The testkit's gate only: its database types are another build of this crate.
        let base = magnum_testkit::env_or_skip(var)?
            .trim_end_matches('/')
            .to_owned();
        let admin = if engine == Engine::MySql {
            "mysql"
        } else {
            "postgres"
        };
        let settings = |url: &str| {
            let mut s = DbSettings::new(DbUrl::parse(url).unwrap());
            s.db_retry_interval = Duration::from_millis(10);
            s
        };
        let server = Database::connect(settings(&format!("{base}/{admin}")))
            .await
            .unwrap();
        let name = format!("magnum_u_{}", uuid::Uuid::new_v4().simple());
        server
            .conn()
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        let db = Database::connect(settings(&format!("{base}/{name}")))
            .await
            .unwrap();
        crate::schema::upgrade(&db).await.unwrap();
        Some((db, server, name))
    }

    /// Two transactions lock two rows in opposite order: the engine kills one with a deadlock,
    /// `tx` runs it again, and both finish.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deadlocks_are_retried_until_both_commit() {
        for (var, engine) in [
            ("MAGNUM_TEST_MYSQL_URL", Engine::MySql),
            ("MAGNUM_TEST_POSTGRES_URL", Engine::Postgres),
        ] {
            let Some((db, server, name)) = server_db(var, engine).await else {
                continue;
            };
            let a = db.quotas().create("a", "Cluster", 1).await.unwrap().id;
            let b = db.quotas().create("b", "Cluster", 1).await.unwrap().id;
            let attempts = Arc::new(AtomicU32::new(0));
            let barrier = Arc::new(Barrier::new(2));
            let mut tasks = Vec::new();
            for (first, second) in [(a, b), (b, a)] {
                let (db, attempts, barrier) = (db.clone(), attempts.clone(), barrier.clone());
                tasks.push(tokio::spawn(async move {
                    db.tx(move |txn| {
                        let (attempts, barrier) = (attempts.clone(), barrier.clone());
                        Box::pin(async move {
                            let n = attempts.fetch_add(1, Ordering::SeqCst);
                            let lock = |id| {
                                quotas::Entity::find()
                                    .filter(quotas::Column::Id.eq(id))
                                    .lock_exclusive()
                            };
                            lock(first).one(txn).await?;
                            if n < 2 {
                                // Only the first two attempts meet, so each holds one lock.
                                barrier.wait().await;
                            }
                            lock(second).one(txn).await?;
                            Ok(())
                        })
                    })
                    .await
                }));
            }
            for t in tasks {
                t.await.unwrap().unwrap();
            }
            assert!(
                attempts.load(Ordering::SeqCst) >= 3,
                "{engine}: no deadlock was retried"
            );
            db.close().await;
            drop_scratch(&server, &name).await;
        }
    }
}
