//! Sessions for calling OpenStack services: as the user (the request's own token and the
//! catalogue Keystone returned with it, as upstream reuses `auth_token_info`) or as Magnum's
//! service user (`[keystone_auth]`, password or application credential, its token cached until
//! a minute before it expires). Every call has a timeout; a service that cannot be reached is
//! an [`OsError::Unavailable`] naming it, never a hang. Tokens are never logged.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use magnum_core::UserToken;
use serde_json::{Value, json};

use crate::catalog::{Catalog, EndpointFilter, ServiceType};
use crate::error::{OsError, describe, message_of};

/// Who Magnum's service user is (`[keystone_auth]`).
#[derive(Clone)]
pub enum ServiceCredentials {
    Password {
        user: NamedRef,
        password: String,
        scope: Scope,
    },
    /// `auth_type = v3applicationcredential`: an id, or a name with its user.
    ApplicationCredential {
        id: Option<String>,
        name: Option<String>,
        user: Option<NamedRef>,
        secret: String,
    },
}

impl std::fmt::Debug for ServiceCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceCredentials::Password { user, scope, .. } => f
                .debug_struct("Password")
                .field("user", user)
                .field("scope", scope)
                .field("password", &"****")
                .finish(),
            ServiceCredentials::ApplicationCredential { id, name, user, .. } => f
                .debug_struct("ApplicationCredential")
                .field("id", id)
                .field("name", name)
                .field("user", user)
                .field("secret", &"****")
                .finish(),
        }
    }
}

/// A user or project by id, or by name within a domain (by id or name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedRef {
    pub id: Option<String>,
    pub name: Option<String>,
    pub domain_id: Option<String>,
    pub domain_name: Option<String>,
}

impl NamedRef {
    fn to_json(&self) -> Value {
        let mut v = json!({});
        if let Some(id) = &self.id {
            v["id"] = json!(id);
        }
        if let Some(name) = &self.name {
            v["name"] = json!(name);
            v["domain"] = match (&self.domain_id, &self.domain_name) {
                (Some(id), _) => json!({"id": id}),
                (None, Some(n)) => json!({"name": n}),
                (None, None) => json!({"id": "default"}),
            };
        }
        v
    }
}

/// What the service token is scoped to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Project(NamedRef),
    Domain {
        id: Option<String>,
        name: Option<String>,
    },
    System,
    Unscoped,
}

/// How Magnum reaches OpenStack services.
#[derive(Clone, Debug)]
pub struct OpenStackSettings {
    /// Keystone for the service user (`[keystone_auth] auth_url`, else
    /// `[keystone_authtoken] www_authenticate_uri`); `None`: no service credentials.
    pub auth_url: Option<String>,
    pub credentials: Option<ServiceCredentials>,
    /// Longest time one call may take (`[keystone_auth] timeout`).
    pub timeout: Duration,
    pub ca_pem: Option<Vec<u8>>,
    pub insecure: bool,
    /// `[<service>_client] region_name / endpoint_type`; a service not here takes the
    /// public endpoint of whichever region comes first.
    pub endpoints: HashMap<ServiceType, EndpointFilter>,
}

struct ServiceToken {
    token: String,
    catalog: Arc<Catalog>,
    until: Instant,
}

/// The shared client: one connection pool, the service token cache. Share it behind an `Arc`.
pub struct OpenStack {
    http: reqwest::Client,
    settings: OpenStackSettings,
    service: tokio::sync::Mutex<Option<ServiceToken>>,
}

/// A token with its catalogue, ready to call services.
#[derive(Clone)]
pub struct Session {
    os: Arc<OpenStack>,
    token: Arc<str>,
    catalog: Arc<Catalog>,
    /// Sessions of the service user renew their token once on a 401.
    service: bool,
}

impl OpenStack {
    pub fn new(settings: OpenStackSettings) -> Result<Self, OsError> {
        let http = crate::http_client(
            settings.timeout,
            settings.insecure,
            settings.ca_pem.as_deref(),
        )
        .map_err(OsError::Config)?;
        Ok(Self {
            http,
            settings,
            service: tokio::sync::Mutex::new(None),
        })
    }

    /// Whether service credentials are configured (Barbican and other service-side calls).
    pub fn has_service_credentials(&self) -> bool {
        self.settings.auth_url.is_some() && self.settings.credentials.is_some()
    }

    /// A session acting as the caller, with the catalogue of the caller's token.
    pub fn user_session(self: &Arc<Self>, user: &UserToken) -> Session {
        Session {
            os: self.clone(),
            token: user.secret().into(),
            catalog: Arc::new(Catalog::from_token_body(user.body())),
            service: false,
        }
    }

    /// A session acting as Magnum's service user.
    pub async fn service_session(self: &Arc<Self>) -> Result<Session, OsError> {
        let (token, catalog) = self.service_token(false).await?;
        Ok(Session {
            os: self.clone(),
            token,
            catalog,
            service: true,
        })
    }

    async fn service_token(&self, fresh: bool) -> Result<(Arc<str>, Arc<Catalog>), OsError> {
        let mut slot = self.service.lock().await;
        if !fresh
            && let Some(t) = slot.as_ref()
            && t.until > Instant::now()
        {
            return Ok((t.token.as_str().into(), t.catalog.clone()));
        }
        let (Some(auth_url), Some(creds)) = (&self.settings.auth_url, &self.settings.credentials)
        else {
            return Err(OsError::Config(
                "no service credentials: set auth_url, auth_type and the user's credentials".into(),
            ));
        };
        let (token, until, catalog) = self.issue(auth_url, &auth_body(creds)).await?;
        let out = (Arc::<str>::from(token.as_str()), catalog.clone());
        *slot = Some(ServiceToken {
            token,
            catalog,
            until,
        });
        Ok(out)
    }

    /// A session acting as an application credential (a cluster's own, scoped to its
    /// project); its token is not cached.
    pub async fn credential_session(
        self: &Arc<Self>,
        auth_url: &str,
        id: &str,
        secret: &str,
    ) -> Result<Session, OsError> {
        let creds = ServiceCredentials::ApplicationCredential {
            id: Some(id.to_owned()),
            name: None,
            user: None,
            secret: secret.to_owned(),
        };
        let (token, _, catalog) = self.issue(auth_url, &auth_body(&creds)).await?;
        Ok(Session {
            os: self.clone(),
            token: token.into(),
            catalog,
            service: false,
        })
    }

    /// Asks Keystone for a token: the token, when to renew it, its catalogue.
    async fn issue(
        &self,
        auth_url: &str,
        body: &Value,
    ) -> Result<(String, Instant, Arc<Catalog>), OsError> {
        let identity = crate::catalog::identity_v3(auth_url);
        let resp = self
            .http
            .post(format!("{identity}/auth/tokens"))
            .json(body)
            .send()
            .await
            .map_err(|e| OsError::Unavailable {
                service: ServiceType::Identity,
                detail: describe(&e),
            })?;
        let status = resp.status().as_u16();
        if status == 401 || status == 403 || status == 400 {
            let text = resp.text().await.unwrap_or_default();
            return Err(OsError::Credentials(format!(
                "HTTP {status}: {}",
                message_of(&text)
            )));
        }
        if status != 201 {
            return Err(OsError::Unavailable {
                service: ServiceType::Identity,
                detail: format!("HTTP {status}"),
            });
        }
        let token = resp
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| OsError::Unavailable {
                service: ServiceType::Identity,
                detail: "no X-Subject-Token in Keystone's answer".into(),
            })?;
        let body: Value = resp.json().await.map_err(|e| OsError::Unavailable {
            service: ServiceType::Identity,
            detail: describe(&e),
        })?;
        let until = body["token"]["expires_at"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .and_then(|t| (t.with_timezone(&Utc) - Utc::now()).to_std().ok())
            .map(|left| Instant::now() + left.saturating_sub(Duration::from_secs(60)))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(300));
        Ok((token, until, Arc::new(Catalog::from_token_body(&body))))
    }

    fn filter(&self, service: ServiceType) -> EndpointFilter {
        self.settings
            .endpoints
            .get(&service)
            .cloned()
            .unwrap_or_else(|| EndpointFilter::new(None, "public"))
    }
}

fn auth_body(creds: &ServiceCredentials) -> Value {
    match creds {
        ServiceCredentials::Password {
            user,
            password,
            scope,
        } => {
            let mut u = user.to_json();
            u["password"] = json!(password);
            let mut auth = json!({"identity": {"methods": ["password"], "password": {"user": u}}});
            match scope {
                Scope::Project(p) => auth["scope"] = json!({"project": p.to_json()}),
                Scope::Domain { id: Some(id), .. } => {
                    auth["scope"] = json!({"domain": {"id": id}});
                }
                Scope::Domain { name: Some(n), .. } => {
                    auth["scope"] = json!({"domain": {"name": n}});
                }
                Scope::System => auth["scope"] = json!({"system": {"all": true}}),
                Scope::Domain { .. } | Scope::Unscoped => {}
            }
            json!({ "auth": auth })
        }
        ServiceCredentials::ApplicationCredential {
            id,
            name,
            user,
            secret,
        } => {
            let mut ac = json!({"secret": secret});
            if let Some(id) = id {
                ac["id"] = json!(id);
            } else if let Some(name) = name {
                ac["name"] = json!(name);
                if let Some(u) = user {
                    ac["user"] = u.to_json();
                }
            }
            json!({"auth": {"identity": {"methods": ["application_credential"],
                "application_credential": ac}}})
        }
    }
}

/// What a call sends.
pub enum Body<'a> {
    None,
    Json(&'a Value),
}

impl Session {
    /// The catalogue endpoint of `service` under its `[<service>_client]` filter.
    pub fn endpoint(&self, service: ServiceType) -> Result<String, OsError> {
        let filter = self.os.filter(service);
        self.catalog
            .endpoint(service, &filter)
            .map(str::to_owned)
            .ok_or_else(|| OsError::NoEndpoint {
                service,
                interface: filter.interface.clone(),
                region: filter.region.clone(),
            })
    }

    /// The catalogue's identity endpoint as a v3 URL (some clouds register it without `/v3`).
    pub fn identity_v3(&self) -> Result<String, OsError> {
        Ok(crate::catalog::identity_v3(
            &self.endpoint(ServiceType::Identity)?,
        ))
    }

    /// Whether the catalogue has `service` under its filter (Octavia checks use this).
    pub fn has_service(&self, service: ServiceType) -> bool {
        self.catalog.has(service, &self.os.filter(service))
    }

    /// One call: `path` is joined to the endpoint unless it is absolute. Answers with any
    /// status come back (the caller decides what a 404 means); a transport failure or
    /// timeout is `Unavailable`.
    pub async fn call(
        &self,
        service: ServiceType,
        method: reqwest::Method,
        path: &str,
        body: Body<'_>,
        accept: &str,
    ) -> Result<(u16, String), OsError> {
        self.call_with(service, method, path, body, accept, &[])
            .await
    }

    /// [`Session::call`] with extra headers (a microversion).
    pub async fn call_with(
        &self,
        service: ServiceType,
        method: reqwest::Method,
        path: &str,
        body: Body<'_>,
        accept: &str,
        headers: &[(&str, &str)],
    ) -> Result<(u16, String), OsError> {
        let url = if path.starts_with("http://") || path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("{}{path}", self.endpoint(service)?)
        };
        let mut token = self.token.clone();
        for attempt in 0..2 {
            let mut req = self
                .os
                .http
                .request(method.clone(), &url)
                .header("X-Auth-Token", token.as_ref())
                .header("Accept", accept)
                .header("User-Agent", "magnum-rs");
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            if let Body::Json(v) = &body {
                req = req.json(v);
            }
            let resp = req.send().await.map_err(|e| OsError::Unavailable {
                service,
                detail: describe(&e),
            })?;
            let status = resp.status().as_u16();
            if status == 401 && self.service && attempt == 0 {
                // Our cached service token was revoked or expired early: renew once.
                token = self.os.service_token(true).await?.0;
                continue;
            }
            let text = resp.text().await.map_err(|e| OsError::Unavailable {
                service,
                detail: describe(&e),
            })?;
            if status >= 500 {
                return Err(OsError::Unavailable {
                    service,
                    detail: format!("HTTP {status}: {}", message_of(&text)),
                });
            }
            return Ok((status, text));
        }
        Err(OsError::Credentials("HTTP 401".into()))
    }

    /// GET a JSON document; 404 is `Ok(None)`, other non-2xx answers are errors.
    pub async fn get_json(
        &self,
        service: ServiceType,
        path: &str,
    ) -> Result<Option<Value>, OsError> {
        let (status, text) = self
            .call(
                service,
                reqwest::Method::GET,
                path,
                Body::None,
                "application/json",
            )
            .await?;
        match status {
            200..=299 => parse(service, &text).map(Some),
            404 => Ok(None),
            s => Err(OsError::Status {
                service,
                status: s,
                detail: message_of(&text),
            }),
        }
    }
}

pub(crate) fn parse(service: ServiceType, text: &str) -> Result<Value, OsError> {
    serde_json::from_str(text).map_err(|e| OsError::Unavailable {
        service,
        detail: format!("unreadable answer: {e}"),
    })
}
