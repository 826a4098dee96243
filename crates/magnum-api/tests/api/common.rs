//! An API server on a free loopback port, backed by a fresh database, with a fake conductor
//! that records every RPC the API sends.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use magnum_api::{ApiSettings, AppState, Auth, ServiceSettings, Services};
use magnum_api::{ResourceValidator, TemplateFacts};
use magnum_core::policy::{Enforcer, PolicyOptions};
use magnum_core::{Error, RequestContext};
use magnum_db::{Database, DbSettings, DbUrl};
use magnum_rpc::{
    ClusterCreate, ClusterRef, ClusterResize, ClusterUpdate, ClusterUpgrade, ConductorApi,
    GetCaCertificate, NodegroupRef, NodegroupUpdate, SignCertificate,
};
use sea_orm::ConnectionTrait;
use serde_json::{Map, Value};

pub struct Server {
    pub base: String,
    pub db: Database,
    pub http: reqwest::Client,
    /// Every RPC the API sent, and the answers it gets.
    pub conductor: Arc<FakeConductor>,
    _dir: tempfile::TempDir,
}

/// What `get_ca_certificate` answers.
pub const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nFAKE-CA\n-----END CERTIFICATE-----\n";
/// What `sign_certificate` answers.
pub const SIGNED_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nFAKE-SIGNED\n-----END CERTIFICATE-----\n";

/// One RPC as the API sent it.
#[derive(Clone, Debug)]
pub struct Sent {
    pub method: &'static str,
    pub args: Value,
    pub ctx: RequestContext,
}

type Failure = Box<dyn Fn() -> Error + Send + Sync>;

/// A conductor that records calls and casts and answers as told: by default every method
/// succeeds (CA and signing answer fixed PEMs); `fail` makes one method return an error.
#[derive(Default)]
pub struct FakeConductor {
    sent: Mutex<Vec<Sent>>,
    failures: Mutex<HashMap<&'static str, Failure>>,
}

impl FakeConductor {
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().unwrap().clone()
    }

    /// The arguments of every `method` sent so far, oldest first.
    pub fn args_of(&self, method: &str) -> Vec<Value> {
        self.sent()
            .into_iter()
            .filter(|s| s.method == method)
            .map(|s| s.args)
            .collect()
    }

    /// The arguments of the only `method` sent so far.
    pub fn only(&self, method: &str) -> Value {
        let all = self.args_of(method);
        assert_eq!(all.len(), 1, "{method}: {all:?}");
        all.into_iter().next().unwrap()
    }

    pub fn clear(&self) {
        self.sent.lock().unwrap().clear();
    }

    /// From now on `method` fails with what `error` builds.
    pub fn fail(&self, method: &'static str, error: impl Fn() -> Error + Send + Sync + 'static) {
        self.failures
            .lock()
            .unwrap()
            .insert(method, Box::new(error));
    }

    pub fn heal(&self, method: &'static str) {
        self.failures.lock().unwrap().remove(method);
    }

    fn record(
        &self,
        method: &'static str,
        ctx: &RequestContext,
        args: &impl serde::Serialize,
    ) -> magnum_core::Result<()> {
        self.sent.lock().unwrap().push(Sent {
            method,
            args: serde_json::to_value(args).unwrap(),
            ctx: ctx.clone(),
        });
        match self.failures.lock().unwrap().get(method) {
            Some(f) => Err(f()),
            None => Ok(()),
        }
    }
}

type RpcFuture<'a, T> = Pin<Box<dyn Future<Output = magnum_core::Result<T>> + Send + 'a>>;

/// `ConductorApi` is an `async_trait`; these are its methods written out by hand.
macro_rules! fake_methods {
    ($($name:ident($msg:ty) -> $ret:ty = $answer:expr;)*) => {
        impl ConductorApi for FakeConductor {
            $(
                fn $name<'life0, 'life1, 'async_trait>(
                    &'life0 self,
                    ctx: &'life1 RequestContext,
                    req: $msg,
                ) -> RpcFuture<'async_trait, $ret>
                where
                    'life0: 'async_trait,
                    'life1: 'async_trait,
                    Self: 'async_trait,
                {
                    Box::pin(async move {
                        self.record(stringify!($name), ctx, &req)?;
                        Ok($answer)
                    })
                }
            )*

            fn ping_conductor<'life0, 'life1, 'async_trait>(
                &'life0 self,
                _ctx: &'life1 RequestContext,
            ) -> RpcFuture<'async_trait, bool>
            where
                'life0: 'async_trait,
                'life1: 'async_trait,
                Self: 'async_trait,
            {
                Box::pin(async { Ok(true) })
            }
        }
    };
}

fake_methods! {
    cluster_create(ClusterCreate) -> () = ();
    cluster_update(ClusterUpdate) -> () = ();
    cluster_delete(ClusterRef) -> () = ();
    cluster_resize(ClusterResize) -> () = ();
    cluster_upgrade(ClusterUpgrade) -> () = ();
    nodegroup_create(NodegroupRef) -> () = ();
    nodegroup_update(NodegroupUpdate) -> () = ();
    nodegroup_delete(NodegroupRef) -> () = ();
    credential_rotate(ClusterRef) -> () = ();
    sign_certificate(SignCertificate) -> String = SIGNED_PEM.to_owned();
    get_ca_certificate(GetCaCertificate) -> String = CA_PEM.to_owned();
    rotate_ca_certificate(ClusterRef) -> () = ();
}

/// A stand-in for Glance in tests: knows a few images; anything else is not found.
pub struct FakeImages;

impl ResourceValidator for FakeImages {
    fn validate_template<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        doc: &'a Map<String, Value>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = magnum_core::Result<TemplateFacts>> + Send + 'a>,
    > {
        Box::pin(async move {
            match doc.get("image_id").and_then(Value::as_str) {
                Some("fedora-coreos-40") | Some("ubuntu-jammy") => Ok(TemplateFacts {
                    os_distro: Some("fedora-coreos".into()),
                    image_driver: None,
                }),
                Some(other) => Err(magnum_core::Error::InvalidParameterValue {
                    message: format!("Image {other} could not be found."),
                }),
                None => Ok(TemplateFacts::default()),
            }
        })
    }

    fn project_exists<'a>(
        &'a self,
        project_id: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = magnum_core::Result<bool>> + Send + 'a>>
    {
        Box::pin(async move { Ok(project_id != "no-such-project") })
    }
}

async fn database(dir: &tempfile::TempDir) -> Database {
    let url = match std::env::var("MAGNUM_TEST_MYSQL_URL") {
        Ok(base) if !base.is_empty() => {
            let base = base.trim_end_matches('/');
            let admin = Database::connect(DbSettings::new(
                DbUrl::parse(&format!("{base}/mysql")).unwrap(),
            ))
            .await
            .unwrap();
            let name = format!("magnum_api_{}", uuid::Uuid::new_v4().simple());
            admin
                .conn()
                .execute_unprepared(&format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"))
                .await
                .unwrap();
            format!("{base}/{name}")
        }
        _ => format!("sqlite:///{}/magnum.sqlite", dir.path().display()),
    };
    let db = Database::connect(DbSettings::new(DbUrl::parse(&url).unwrap()))
        .await
        .unwrap();
    magnum_db::schema::upgrade(&db).await.unwrap();
    db
}

pub async fn start_with(auth: Auth) -> Server {
    start_with_settings(auth, ApiSettings::default()).await
}

pub async fn start_with_settings(auth: Auth, settings: ApiSettings) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let db = database(&dir).await;
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
    tokio::spawn(async move {
        axum::serve(listener, magnum_api::router(state))
            .await
            .unwrap();
    });
    Server {
        base: format!("http://{addr}"),
        db,
        http: reqwest::Client::new(),
        conductor,
        _dir: dir,
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
            .header("X-Roles", who.roles)
            .header("Accept", "application/json");
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
