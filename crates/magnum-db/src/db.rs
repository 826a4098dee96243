//! The connection pool, per-engine session settings and the retrying transaction runner.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use magnum_core::{Error, Result};
use sea_orm::{
    ConnectOptions, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend,
    TransactionTrait,
};
use sqlx::Executor;

use crate::errors::{TxError, is_retryable, map_db_err};
use crate::url::{DbUrl, Engine};

/// What storage needs from `[database]`; magnumd fills it from magnum.conf.
#[derive(Clone, Debug)]
pub struct DbSettings {
    pub url: DbUrl,
    /// oslo.db `mysql_sql_mode`, set on every new MySQL connection (upstream: TRADITIONAL).
    pub mysql_sql_mode: String,
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
    /// oslo.db's defaults for a URL.
    pub fn new(url: DbUrl) -> Self {
        Self {
            url,
            mysql_sql_mode: "TRADITIONAL".into(),
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

/// The storage handle: a pool plus the retry policy. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Database {
    conn: DatabaseConnection,
    engine: Engine,
    settings: DbSettings,
}

pub(crate) type TxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, TxError>> + Send + 'a>>;

impl Database {
    /// Connect (once, without retrying: callers decide how long to keep trying).
    pub async fn connect(settings: DbSettings) -> Result<Self> {
        let url = &settings.url;
        let mut opts = ConnectOptions::new(url.sqlx_url.clone());
        let max = if url.in_memory {
            // Every connection to `sqlite::memory:` would be a different database.
            1
        } else {
            (settings.max_pool_size + settings.max_overflow).max(1)
        };
        opts.max_connections(max)
            .min_connections(0)
            .connect_timeout(Duration::from_secs(settings.pool_timeout))
            .acquire_timeout(Duration::from_secs(settings.pool_timeout))
            .max_lifetime(Duration::from_secs(settings.connection_recycle_time.max(1)))
            .sqlx_logging(false);
        if url.in_memory {
            // The single connection must never be dropped, or the database goes with it.
            opts.idle_timeout(None::<Duration>).max_lifetime(None::<Duration>);
        }
        let sql_mode = settings.mysql_sql_mode.clone();
        opts.map_sqlx_mysql_opts(|o| o.pipes_as_concat(false).no_engine_substitution(false))
            .map_sqlx_mysql_pool_opts(move |p| {
                let sql_mode = sql_mode.clone();
                p.after_connect(move |conn, _meta| {
                    let stmt = format!("SET SESSION sql_mode = '{}'", sql_mode.replace('\'', ""));
                    Box::pin(async move {
                        conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(stmt))).await?;
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
            Error::DatabaseUnavailable(format!("cannot reach {}: {}", url.redacted(), map_db_err(e)))
        })?;
        Ok(Self {
            engine: url.engine,
            conn,
            settings,
        })
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    pub fn backend(&self) -> DbBackend {
        self.conn.get_database_backend()
    }

    pub fn conn(&self) -> &DatabaseConnection {
        &self.conn
    }

    pub fn settings(&self) -> &DbSettings {
        &self.settings
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
                Err(TxError::Db(e)) if is_retryable(&e) && attempt < self.settings.db_max_retries => {
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
