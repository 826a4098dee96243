//! An API server on a free loopback port, backed by a fresh database, with a fake conductor
//! that records every RPC the API sends.

use std::sync::Arc;

use magnum_api::{ApiSettings, AppState, Auth, ServiceSettings, Services};
use magnum_api::{Flavor, Found, Image, Lookups, Named, ResourceValidator};
use magnum_conf::policy::{Enforcer, PolicyOptions};
use magnum_core::RequestContext;
use magnum_db::{Database, DbSettings, DbUrl};
use magnum_testkit::db::{self, ServerDb};
use serde_json::Value;

pub struct Server {
    pub base: String,
    pub db: Database,
    pub http: reqwest::Client,
    /// Every RPC the API sent, and the answers it gets.
    pub conductor: Arc<FakeConductor>,
    /// The server's own state (its rendered-items cache, say).
    pub state: Arc<AppState>,
    _dir: tempfile::TempDir,
    /// The MariaDB database, dropped when the test ends however it ends.
    _server_db: Option<ServerDb>,
}

/// Every RPC the API sends is recorded by the testkit's fake conductor.
pub use magnum_testkit::fake_conductor::{CA_PEM, FakeConductor, SIGNED_PEM};

/// A stand-in for Glance in tests: knows a few images; anything else is not found. Flavors,
/// networks and keypairs are not checked.
pub struct FakeImages;

struct FakeLookups;

#[async_trait::async_trait]
impl Lookups for FakeLookups {
    async fn image(&mut self, name: &str) -> magnum_core::Result<Option<Found<Image>>> {
        Ok(Some(match name {
            "fedora-coreos-40" | "ubuntu-jammy" => Found::One(Image {
                id: format!("{name}-id"),
                name: Some(name.into()),
                os_distro: Some("fedora-coreos".into()),
                magnum_driver: None,
            }),
            _ => Found::None,
        }))
    }
    async fn flavors(&mut self) -> magnum_core::Result<Option<Vec<Flavor>>> {
        Ok(None)
    }
    async fn networks(&mut self, _external: bool) -> magnum_core::Result<Option<Vec<Named>>> {
        Ok(None)
    }
    async fn subnets(&mut self) -> magnum_core::Result<Option<Vec<Named>>> {
        Ok(None)
    }
    async fn keypair_exists(&mut self, _name: &str) -> magnum_core::Result<Option<bool>> {
        Ok(None)
    }
}

impl ResourceValidator for FakeImages {
    fn lookups(&self, _ctx: &RequestContext) -> Option<Box<dyn Lookups>> {
        Some(Box::new(FakeLookups))
    }

    fn project_exists<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        project_id: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = magnum_core::Result<bool>> + Send + 'a>>
    {
        Box::pin(async move { Ok(project_id != "no-such-project") })
    }
}

/// SQLite at head in `dir`, or a new database at head on MariaDB when
/// MAGNUM_TEST_MYSQL_URL is set (as CI does), with its guard.
async fn database(dir: &tempfile::TempDir) -> (Database, Option<ServerDb>) {
    let (url, guard) = if std::env::var("MAGNUM_TEST_MYSQL_URL").is_ok_and(|v| !v.is_empty()) {
        let server_db = ServerDb::create(db::Server::MariaDb, "magnum_api")
            .await
            .unwrap();
        (server_db.url(), Some(server_db))
    } else {
        (
            format!("sqlite:///{}/magnum.sqlite", dir.path().display()),
            None,
        )
    };
    let db = Database::connect(DbSettings::new(DbUrl::parse(&url).unwrap()))
        .await
        .unwrap();
    magnum_db::schema::upgrade(&db).await.unwrap();
    (db, guard)
}

pub async fn start_with(auth: Auth) -> Server {
    start_with_settings(auth, ApiSettings::default()).await
}

pub async fn start_with_settings(auth: Auth, settings: ApiSettings) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (db, server_db) = database(&dir).await;
    let conductor = Arc::new(FakeConductor::default());
    let services = Services::new(
        db.clone(),
        conductor.clone(),
        Arc::new(FakeImages),
        ServiceSettings::default(),
    );
    let state = Arc::new(AppState {
        db: db.clone(),
        auth,
        policy: Enforcer::new(PolicyOptions::default()).unwrap(),
        settings,
        services,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = state.clone();
    tokio::spawn(async move {
        axum::serve(listener, magnum_api::router(served))
            .await
            .unwrap();
    });
    Server {
        base: format!("http://{addr}"),
        db,
        http: reqwest::Client::new(),
        conductor,
        state,
        _dir: dir,
        _server_db: server_db,
    }
}

pub async fn start() -> Server {
    start_with(Auth::NoAuth).await
}

/// Who is calling, as noauth headers.
#[derive(Clone, Copy)]
pub struct Persona {
    pub project: &'static str,
    pub user: &'static str,
    pub roles: &'static str,
}

pub const ADMIN: Persona = Persona {
    project: "demo",
    user: "demo-admin",
    roles: "admin,member,reader",
};
pub const MEMBER: Persona = Persona {
    project: "demo",
    user: "demo-member",
    roles: "member,reader",
};
pub const READER: Persona = Persona {
    project: "demo",
    user: "demo-reader",
    roles: "reader",
};
pub const OTHER: Persona = Persona {
    project: "alt",
    user: "alt-member",
    roles: "member,reader",
};

pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Server {
    pub async fn call(
        &self,
        who: Persona,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Reply {
        let mut rb = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .header("X-Project-Id", who.project)
            .header("X-User-Id", who.user)
            .header("X-Roles", who.roles);
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
        {
            rb = rb.header("Accept", "application/json");
        }
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.body(b.to_owned());
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                rb = rb.header("Content-Type", "application/json");
            }
        }
        let resp = rb.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        magnum_testkit::scan::error_body(status, &text);
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, who: Persona, path: &str) -> Reply {
        self.call(
            who,
            "GET",
            path,
            &[("OpenStack-API-Version", "container-infra latest")],
            None,
        )
        .await
    }

    pub async fn send(&self, who: Persona, method: &str, path: &str, body: &Value) -> Reply {
        let text = body.to_string();
        self.call(
            who,
            method,
            path,
            &[("OpenStack-API-Version", "container-infra latest")],
            Some(&text),
        )
        .await
    }
}
