//! Databases for tests: a fresh SQLite file at schema head, and throwaway databases on the
//! MariaDB/PostgreSQL servers the environment names, dropped when their guard drops.

use std::future::Future;
use std::time::Duration;

use magnum_db::{Database, DbSettings, DbUrl};
use tempfile::TempDir;

/// Retries short enough that contention tests stay quick; the policy is production's.
pub fn quick_retries(s: &mut DbSettings) {
    s.db_retry_interval = Duration::from_millis(20);
    s.db_max_retry_interval = Duration::from_millis(200);
}

pub fn settings(url: &str) -> DbSettings {
    DbSettings::new(DbUrl::parse(url).unwrap())
}

/// An empty SQLite database in a new temp dir (keep the dir as long as the database),
/// with `tune` applied to its settings.
pub async fn sqlite_empty(tune: impl FnOnce(&mut DbSettings)) -> (Database, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(&format!("sqlite:///{}/magnum.sqlite", dir.path().display()));
    tune(&mut s);
    (Database::connect(s).await.unwrap(), dir)
}

/// A new SQLite database with upstream's schema at head, default settings.
pub async fn sqlite_at_head() -> (Database, TempDir) {
    sqlite_at_head_with(|_| {}).await
}

/// As [`sqlite_at_head`], with `tune` applied to the settings.
pub async fn sqlite_at_head_with(tune: impl FnOnce(&mut DbSettings)) -> (Database, TempDir) {
    let (db, dir) = sqlite_empty(tune).await;
    magnum_db::schema::upgrade(&db).await.unwrap();
    (db, dir)
}

/// A database server the tests may use, named by an environment variable holding its URL
/// without a database (`mysql://root@127.0.0.1:3306`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    MariaDb,
    Postgres,
}

impl Server {
    pub fn var(self) -> &'static str {
        match self {
            Self::MariaDb => "MAGNUM_TEST_MYSQL_URL",
            Self::Postgres => "MAGNUM_TEST_POSTGRES_URL",
        }
    }

    fn admin_db(self) -> &'static str {
        match self {
            Self::MariaDb => "mysql",
            Self::Postgres => "postgres",
        }
    }

    /// The server's URL (no trailing slash), or None after [`crate::skip`].
    pub fn base_url(self) -> Option<String> {
        crate::env_or_skip(self.var()).map(|v| v.trim_end_matches('/').to_owned())
    }
}

/// Runs `f` on a runtime of its own on another thread, so it works from sync tests, from
/// async ones and from `Drop`.
fn on_own_runtime<F>(f: F) -> std::thread::Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(f)
        })
        .join()
    })
}

/// Runs one statement on the server's administrative database.
pub async fn exec(server: Server, base: &str, sql: &str) {
    use sea_orm::ConnectionTrait;
    let db = Database::connect(settings(&format!("{base}/{}", server.admin_db())))
        .await
        .unwrap();
    db.conn().execute_unprepared(sql).await.unwrap();
    db.conn().clone().close().await.ok();
}

/// A uniquely named database on a server, dropped (also when the test fails) on drop.
pub struct ServerDb {
    pub server: Server,
    /// The server URL, without database.
    pub base: String,
    pub name: String,
}

impl ServerDb {
    /// Creates `<prefix>_<unique>` on `server` (MariaDB: utf8mb4, general collation, as
    /// upstream's reference schema was made), or None when the server is not configured.
    pub async fn create(server: Server, prefix: &str) -> Option<Self> {
        let base = server.base_url()?;
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let create = match server {
            Server::MariaDb => {
                format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
            }
            Server::Postgres => format!("CREATE DATABASE \"{name}\""),
        };
        exec(server, &base, &create).await;
        Some(Self { server, base, name })
    }

    /// [`ServerDb::create`] for tests without a runtime.
    pub fn create_blocking(server: Server, prefix: &str) -> Option<Self> {
        on_own_runtime(Self::create(server, prefix))
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }

    /// Disarms the guard for a database something without a guard keeps using; returns
    /// its URL. The database is left on the server.
    pub fn keep(self) -> String {
        let url = self.url();
        std::mem::forget(self);
        url
    }

    /// The database's URL as magnum-db takes it.
    pub fn url(&self) -> String {
        format!("{}/{}", self.base, self.name)
    }

    /// The database's URL with another scheme (`mysql+pymysql`, `postgresql+psycopg2`), as
    /// magnum.conf writes it.
    pub fn url_with_scheme(&self, scheme: &str) -> String {
        let rest = self.base.split_once("://").map_or(&*self.base, |(_, r)| r);
        format!("{scheme}://{rest}/{}", self.name)
    }
}

impl Drop for ServerDb {
    fn drop(&mut self) {
        let stmt = match self.server {
            Server::MariaDb => format!("DROP DATABASE IF EXISTS `{}`", self.name),
            Server::Postgres => format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
        };
        // A failed drop must not turn a passing test into a failure (or a panic in a panic).
        if on_own_runtime(exec(self.server, &self.base, &stmt)).is_err() {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}
