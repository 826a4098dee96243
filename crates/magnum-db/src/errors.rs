//! Turning driver errors into domain errors, and telling retryable ones apart.

use magnum_core::Error;
use sea_orm::{DbErr, RuntimeErr, SqlErr};

/// Errors of `magnumd db upgrade|version`.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the database is at Alembic revision {found}, older than {head} which magnum-rs needs; \
         upgrade it first with upstream's `magnum-db-manage upgrade` from Magnum 23.0.0 (the first release whose migrations reach it), \
         then run `magnumd db upgrade` again"
    )]
    OlderRevision { found: String, head: &'static str },
    #[error(
        "the database is at Alembic revision {found}, which magnum-rs does not know \
         (made by a newer Magnum?); refusing to touch it"
    )]
    UnknownRevision { found: String },
    #[error(
        "the database holds Magnum tables ({tables}) but no alembic_version row; refusing to guess its schema"
    )]
    Unversioned { tables: String },
    #[error(
        "the database schema is not at Alembic head {head} (found {found}); run `magnumd db upgrade`"
    )]
    NotAtHead { found: String, head: &'static str },
    #[error("creating the schema failed: {0}")]
    Ddl(String),
    #[error(transparent)]
    Db(#[from] Error),
}

/// A failure inside a transaction body: either the database's, or a domain decision
/// (not found, conflict) that aborts the transaction without a retry.
#[derive(Debug)]
pub(crate) enum TxError {
    Db(DbErr),
    Domain(Error),
}

impl From<DbErr> for TxError {
    fn from(e: DbErr) -> Self {
        TxError::Db(e)
    }
}

impl From<Error> for TxError {
    fn from(e: Error) -> Self {
        TxError::Domain(e)
    }
}

impl From<TxError> for Error {
    fn from(e: TxError) -> Self {
        match e {
            TxError::Db(e) => map_db_err(e),
            TxError::Domain(e) => e,
        }
    }
}

fn sqlx_error(e: &DbErr) -> Option<&sqlx::Error> {
    match e {
        DbErr::Conn(RuntimeErr::SqlxError(e))
        | DbErr::Exec(RuntimeErr::SqlxError(e))
        | DbErr::Query(RuntimeErr::SqlxError(e)) => Some(e),
        _ => None,
    }
}

/// Deadlocks, lock wait timeouts, serialisation failures and SQLite's busy/locked: the
/// transaction lost a race and can be run again from the start.
pub(crate) fn is_retryable(e: &DbErr) -> bool {
    let Some(db) = sqlx_error(e).and_then(|e| e.as_database_error()) else {
        return false;
    };
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
        return matches!(my.number(), 1213 | 1205);
    }
    match db.code().as_deref() {
        // PostgreSQL serialization_failure, deadlock_detected
        Some("40001") | Some("40P01") => true,
        // SQLite BUSY, BUSY_RECOVERY, BUSY_SNAPSHOT, LOCKED, LOCKED_SHAREDCACHE
        Some("5") | Some("261") | Some("517") | Some("6") | Some("262") => true,
        _ => false,
    }
}

/// A Galera node outside the primary component (or still joining) answers every statement
/// with ER_UNKNOWN_COM_ERROR (1047, "WSREP has not yet prepared node for application use"):
/// the database is away for now, as when the server is down, not a fault of the request.
fn is_galera_node_unready(e: &DbErr) -> bool {
    sqlx_error(e)
        .and_then(|e| e.as_database_error())
        .and_then(|db| db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .is_some_and(|my| my.number() == 1047)
}

pub(crate) fn is_unique_violation(e: &DbErr) -> bool {
    matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}

/// The one mapping from driver errors to domain errors. Connection trouble becomes
/// `DatabaseUnavailable` (503 at the API); anything else is an internal error.
pub(crate) fn map_db_err(e: DbErr) -> Error {
    let unavailable = match &e {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => true,
        _ => {
            matches!(
                sqlx_error(&e),
                Some(sqlx::Error::Io(_))
                    | Some(sqlx::Error::PoolTimedOut)
                    | Some(sqlx::Error::PoolClosed)
                    | Some(sqlx::Error::Tls(_))
                    | Some(sqlx::Error::WorkerCrashed)
            ) || is_galera_node_unready(&e)
        }
    };
    let text = match sqlx_error(&e) {
        Some(s) => s.to_string(),
        None => e.to_string(),
    };
    if unavailable {
        Error::DatabaseUnavailable(text)
    } else {
        Error::Database(text)
    }
}
