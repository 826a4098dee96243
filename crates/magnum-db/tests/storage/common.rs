//! A fresh, uniquely named database per test on each configured engine.

use std::time::Duration;

use magnum_db::{Database, DbSettings, DbUrl, Engine};
use sea_orm::ConnectionTrait;

pub struct TestDb {
    pub db: Database,
    pub engine: Engine,
    server: Option<Database>,
    name: String,
    _dir: Option<tempfile::TempDir>,
}

fn required() -> bool {
    std::env::var("MAGNUM_TEST_REQUIRE_ALL").is_ok_and(|v| v == "1")
}

fn server_url(engine: Engine) -> Option<String> {
    let var = match engine {
        Engine::MySql => "MAGNUM_TEST_MYSQL_URL",
        Engine::Postgres => "MAGNUM_TEST_POSTGRES_URL",
        Engine::Sqlite => return Some(String::new()),
    };
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v.trim_end_matches('/').to_owned()),
        _ => {
            assert!(
                !required(),
                "{var} is not set but MAGNUM_TEST_REQUIRE_ALL=1"
            );
            eprintln!("skipping {engine}: {var} not set");
            None
        }
    }
}

pub fn settings(url: &str) -> DbSettings {
    let mut s = DbSettings::new(DbUrl::parse(url).unwrap());
    // Quick retries keep contention tests short; the policy is the same as production's.
    s.db_retry_interval = Duration::from_millis(20);
    s.db_max_retry_interval = Duration::from_millis(200);
    s.db_max_retries = 50;
    s.max_pool_size = 10;
    s.max_overflow = 10;
    s
}

impl TestDb {
    /// An empty database (no schema) on `engine`, or None when that engine is not configured.
    pub async fn empty(engine: Engine) -> Option<Self> {
        let base = server_url(engine)?;
        let name = format!("magnum_t_{}", uuid::Uuid::new_v4().simple());
        match engine {
            Engine::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite:///{}/magnum.sqlite", dir.path().display());
                let db = Database::connect(settings(&url)).await.unwrap();
                Some(Self {
                    db,
                    engine,
                    server: None,
                    name,
                    _dir: Some(dir),
                })
            }
            Engine::MySql | Engine::Postgres => {
                let admin_db = if engine == Engine::MySql {
                    "mysql"
                } else {
                    "postgres"
                };
                let server = Database::connect(settings(&format!("{base}/{admin_db}")))
                    .await
                    .unwrap();
                let create = if engine == Engine::MySql {
                    // The reference schema was made on a utf8mb4 database (tables without
                    // options inherit it).
                    format!(
                        "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
                    )
                } else {
                    format!("CREATE DATABASE \"{name}\"")
                };
                server.conn().execute_unprepared(&create).await.unwrap();
                let db = Database::connect(settings(&format!("{base}/{name}")))
                    .await
                    .unwrap();
                Some(Self {
                    db,
                    engine,
                    server: Some(server),
                    name,
                    _dir: None,
                })
            }
        }
    }

    /// A database at head.
    pub async fn at_head(engine: Engine) -> Option<Self> {
        let t = Self::empty(engine).await?;
        magnum_db::schema::upgrade(&t.db).await.unwrap();
        Some(t)
    }

    pub async fn drop(self) {
        let Some(server) = self.server else { return };
        self.db.conn().clone().close().await.ok();
        let stmt = match self.engine {
            Engine::MySql => format!("DROP DATABASE `{}`", self.name),
            _ => format!("DROP DATABASE \"{}\" WITH (FORCE)", self.name),
        };
        server.conn().execute_unprepared(&stmt).await.unwrap();
    }
}

pub const ENGINES: [Engine; 3] = [Engine::Sqlite, Engine::MySql, Engine::Postgres];

/// Run a test body on every configured engine.
#[macro_export]
macro_rules! on_every_engine {
    ($setup:ident, |$t:ident| $body:block) => {
        for engine in $crate::common::ENGINES {
            let Some($t) = $crate::common::TestDb::$setup(engine).await else { continue };
            eprintln!("-- {engine}");
            $body
            $t.drop().await;
        }
    };
}
