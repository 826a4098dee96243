//! A fresh, uniquely named database per test on each configured engine.

use magnum_db::{Database, DbSettings, Engine};
use magnum_testkit::db::{Server, ServerDb, quick_retries, sqlite_empty};

pub struct TestDb {
    pub db: Database,
    pub engine: Engine,
    /// The server database, dropped with the guard (also when the test fails).
    server: Option<ServerDb>,
    _dir: Option<tempfile::TempDir>,
}

/// Quick retries keep contention tests short; the policy is the same as production's.
fn tune(s: &mut DbSettings) {
    quick_retries(s);
    s.db_max_retries = 50;
    s.max_pool_size = 10;
    s.max_overflow = 10;
}

pub fn settings(url: &str) -> DbSettings {
    let mut s = magnum_testkit::db::settings(url);
    tune(&mut s);
    s
}

impl TestDb {
    /// An empty database (no schema) on `engine`, or None when that engine is not configured.
    pub async fn empty(engine: Engine) -> Option<Self> {
        let server = match engine {
            Engine::Sqlite => {
                let (db, dir) = sqlite_empty(tune).await;
                return Some(Self {
                    db,
                    engine,
                    server: None,
                    _dir: Some(dir),
                });
            }
            Engine::MySql => Server::MariaDb,
            Engine::Postgres => Server::Postgres,
        };
        let server = ServerDb::create(server, "magnum_t").await?;
        let db = Database::connect(settings(&server.url())).await.unwrap();
        Some(Self {
            db,
            engine,
            server: Some(server),
            _dir: None,
        })
    }

    /// A database at head.
    pub async fn at_head(engine: Engine) -> Option<Self> {
        let t = Self::empty(engine).await?;
        magnum_db::schema::upgrade(&t.db).await.unwrap();
        Some(t)
    }

    /// Closes the pool, then drops the server database.
    pub async fn drop(self) {
        self.db.close().await;
        drop(self.server);
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
