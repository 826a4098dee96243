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
    let db = Database::connect(settings(&format!("{base}/{}", server.admin_db())))
        .await
        .unwrap();
    db.execute_text(sql).await.unwrap();
    db.close().await;
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

/// A MariaDB server of the test's own: `mariadb-install-db` into a temp folder and
/// `mariadbd` on a free loopback port, so a test may stop and start it (a fault) without
/// touching the machine's server or the other tests on it. Stopped when dropped.
pub struct PrivateMariaDb {
    dir: TempDir,
    port: u16,
    server: Option<crate::ChildGuard>,
}

impl PrivateMariaDb {
    /// None (after a skip) where MariaDB's programs are not installed.
    pub fn start() -> Option<Self> {
        let installed = std::process::Command::new("mariadb-install-db")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            crate::skip("mariadb-install-db is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut me = Self {
            dir,
            port: crate::free_port(),
            server: None,
        };
        me.resume();
        Some(me)
    }

    /// `mysql+pymysql://root@127.0.0.1:<port>/<name>`, after creating database `name`.
    pub fn database(&self, name: &str) -> String {
        let out = std::process::Command::new("mariadb")
            .args(["-uroot", "-h127.0.0.1", &format!("-P{}", self.port)])
            .args(["-e", &format!("CREATE DATABASE IF NOT EXISTS `{name}`")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        format!("mysql+pymysql://root@127.0.0.1:{}/{name}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A clean shutdown, as a service restart makes one (SIGTERM, then waits for the exit).
    pub fn pause(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &s.id().to_string()])
                .status();
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while s.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            s.stop();
        }
    }

    /// Starts the server (again) on the same port and files; returns once it answers.
    pub fn resume(&mut self) {
        let d = self.dir.path();
        let log = std::fs::File::create(d.join(format!("server-{}.log", self.port))).unwrap();
        let mut child = crate::ChildGuard::new(
            std::process::Command::new("mariadbd")
                .arg("--no-defaults")
                .arg(format!("--datadir={}", d.join("data").display()))
                .arg(format!("--port={}", self.port))
                .arg("--bind-address=127.0.0.1")
                .arg(format!("--socket={}", d.join("sock").display()))
                .arg(format!("--pid-file={}", d.join("pid").display()))
                .args(["--user=root", "--innodb-buffer-pool-size=64M"])
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        crate::wait_for_port(self.port, &mut child);
        self.server = Some(child);
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.pause();
    }
}
