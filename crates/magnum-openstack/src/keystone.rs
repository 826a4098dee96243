//! Keystone token validation, as keystonemiddleware's auth_token does it: the service user
//! authenticates once (its token is reused until it nears expiry), each user token is checked
//! with `GET /v3/auth/tokens`, and valid answers are cached until the token expires or
//! `token_cache_time` passes. Tokens are never logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// What `[keystone_authtoken]` says about reaching Keystone as the service user.
#[derive(Clone)]
pub struct KeystoneSettings {
    /// Identity endpoint, e.g. `http://127.0.0.1:5000/v3` (a URL without `/v3` gets it added).
    pub auth_url: String,
    pub username: String,
    pub password: String,
    pub user_domain_name: String,
    pub project_name: String,
    pub project_domain_name: String,
    /// How long one request to Keystone may take.
    pub timeout: Duration,
    /// Longest time a validated token is trusted without asking Keystone again.
    pub token_cache_time: Duration,
    /// CA certificates (PEM) trusted for Keystone's certificate, besides the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// Skip verifying Keystone's certificate (`insecure = true`).
    pub insecure: bool,
    /// Which identity endpoint of the service token's catalogue validates tokens
    /// (`interface`, default `internal`; `region_name`); `auth_url` when the catalogue has none.
    pub endpoint: crate::catalog::EndpointFilter,
}

impl std::fmt::Debug for KeystoneSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeystoneSettings")
            .field("auth_url", &self.auth_url)
            .field("username", &self.username)
            .field("password", &"****")
            .finish_non_exhaustive()
    }
}

/// The caller as Keystone describes a valid token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenInfo {
    pub user_id: String,
    pub user_name: Option<String>,
    pub user_domain_id: Option<String>,
    pub project_id: Option<String>,
    pub project_name: Option<String>,
    pub project_domain_id: Option<String>,
    pub domain_id: Option<String>,
    pub system_scope: Option<String>,
    pub roles: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    /// Keystone's whole answer (`{"token": {...}}`, catalogue included), for sessions that
    /// act as the caller.
    pub body: std::sync::Arc<Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeystoneError {
    /// The token is unknown, expired or revoked: the caller gets a 401.
    #[error("The request you have made requires authentication.")]
    InvalidToken,
    /// Keystone could not be reached or answered strangely: the caller gets a 503.
    #[error("Identity service unavailable: {0}")]
    Unavailable(String),
    /// Our own service credentials were refused: an operator must fix the configuration.
    #[error(
        "Magnum's service credentials were refused by Keystone ({0}); check [keystone_authtoken]"
    )]
    ServiceCredentials(String),
    /// A TLS setting of `[keystone_authtoken]` cannot be used.
    #[error("[keystone_authtoken] {0}")]
    Config(String),
}

struct ServiceToken {
    token: String,
    until: Instant,
    validate_url: String,
}

struct Cached {
    info: TokenInfo,
    until: Instant,
}

/// Validates user tokens against one Keystone. Cheap to share behind an `Arc`.
pub struct Keystone {
    http: reqwest::Client,
    settings: KeystoneSettings,
    identity: String,
    /// The service token, until when it is used, and the identity endpoint that validates.
    service_token: tokio::sync::Mutex<Option<ServiceToken>>,
    cache: Mutex<HashMap<String, Cached>>,
}

/// Cached tokens kept at most; expired ones are swept when the map is full.
const CACHE_LIMIT: usize = 10_000;

impl Keystone {
    pub fn new(settings: KeystoneSettings) -> Result<Self, KeystoneError> {
        let http = crate::http_client(
            settings.timeout,
            settings.insecure,
            settings.ca_pem.as_deref(),
        )
        .map_err(KeystoneError::Config)?;
        let identity = crate::catalog::identity_v3(&settings.auth_url);
        Ok(Self {
            http,
            settings,
            identity,
            service_token: tokio::sync::Mutex::new(None),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The identity endpoint, for `WWW-Authenticate`.
    pub fn identity_url(&self) -> &str {
        &self.identity
    }

    /// Validate `token`, from the cache when it was seen recently.
    pub async fn validate(&self, token: &str) -> Result<TokenInfo, KeystoneError> {
        if let Ok(cache) = self.cache.lock()
            && let Some(hit) = cache.get(token)
            && hit.until > Instant::now()
        {
            return Ok(hit.info.clone());
        }
        let info = match self.check(token, false).await {
            Err(KeystoneError::ServiceCredentials(_)) => self.check(token, true).await?,
            other => other?,
        };
        let mut ttl = self.settings.token_cache_time;
        if let Some(exp) = info.expires_at {
            let left = (exp - Utc::now()).to_std().unwrap_or(Duration::ZERO);
            ttl = ttl.min(left);
        }
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_LIMIT {
                let now = Instant::now();
                cache.retain(|_, c| c.until > now);
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
            }
            cache.insert(
                token.to_owned(),
                Cached {
                    info: info.clone(),
                    until: Instant::now() + ttl,
                },
            );
        }
        Ok(info)
    }

    /// Whether Keystone knows the project (`GET /v3/projects/{id}` as the service user).
    pub async fn project_exists(&self, project_id: &str) -> Result<bool, KeystoneError> {
        for fresh in [false, true] {
            let (service, identity) = self.service_token(fresh).await?;
            let resp = self
                .http
                .get(format!("{identity}/projects/{project_id}"))
                .header("X-Auth-Token", service)
                .send()
                .await
                .map_err(|e| KeystoneError::Unavailable(without_url(&e)))?;
            match resp.status().as_u16() {
                200 => return Ok(true),
                404 => return Ok(false),
                401 if !fresh => continue,
                s => {
                    return Err(KeystoneError::Unavailable(format!(
                        "HTTP {s} from Keystone"
                    )));
                }
            }
        }
        Err(KeystoneError::ServiceCredentials("HTTP 401".into()))
    }

    async fn check(
        &self,
        token: &str,
        fresh_service_token: bool,
    ) -> Result<TokenInfo, KeystoneError> {
        let (service, identity) = self.service_token(fresh_service_token).await?;
        let resp = self
            .http
            .get(format!("{identity}/auth/tokens"))
            .header("X-Auth-Token", service)
            .header("X-Subject-Token", token)
            .send()
            .await
            .map_err(|e| KeystoneError::Unavailable(without_url(&e)))?;
        match resp.status().as_u16() {
            200 => {
                let body: Value = resp
                    .json()
                    .await
                    .map_err(|e| KeystoneError::Unavailable(without_url(&e)))?;
                parse_token(&body)
                    .ok_or_else(|| KeystoneError::Unavailable("malformed token body".into()))
            }
            404 => Err(KeystoneError::InvalidToken),
            // Our service token expired or was revoked: the caller retries with a new one.
            401 | 403 => Err(KeystoneError::ServiceCredentials(format!(
                "HTTP {}",
                resp.status().as_u16()
            ))),
            s => Err(KeystoneError::Unavailable(format!(
                "HTTP {s} from Keystone"
            ))),
        }
    }

    async fn service_token(&self, fresh: bool) -> Result<(String, String), KeystoneError> {
        let mut slot = self.service_token.lock().await;
        if !fresh
            && let Some(t) = slot.as_ref()
            && t.until > Instant::now()
        {
            return Ok((t.token.clone(), t.validate_url.clone()));
        }
        let s = &self.settings;
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": s.username, "password": s.password, "domain": {"name": s.user_domain_name}}}},
            "scope": {"project": {"name": s.project_name, "domain": {"name": s.project_domain_name}}}
        }});
        let resp = self
            .http
            .post(format!("{}/auth/tokens", self.identity))
            .json(&body)
            .send()
            .await
            .map_err(|e| KeystoneError::Unavailable(without_url(&e)))?;
        let status = resp.status().as_u16();
        if status == 401 || status == 403 {
            return Err(KeystoneError::ServiceCredentials(format!("HTTP {status}")));
        }
        if status != 201 {
            return Err(KeystoneError::Unavailable(format!(
                "HTTP {status} from Keystone"
            )));
        }
        let token = resp
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                KeystoneError::Unavailable("no X-Subject-Token in Keystone's answer".into())
            })?;
        let body: Value = resp
            .json()
            .await
            .map_err(|e| KeystoneError::Unavailable(without_url(&e)))?;
        // Renew a minute early so a validation never carries an expiring service token.
        let until = body["token"]["expires_at"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .and_then(|t| (t.with_timezone(&Utc) - Utc::now()).to_std().ok())
            .map(|left| Instant::now() + left.saturating_sub(Duration::from_secs(60)))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(300));
        let validate_url = validation_endpoint(&body, &self.settings.endpoint)
            .unwrap_or_else(|| self.identity.clone());
        *slot = Some(ServiceToken {
            token: token.clone(),
            until,
            validate_url: validate_url.clone(),
        });
        Ok((token, validate_url))
    }
}

/// reqwest errors name the URL; keep the message without it (and so without any query), with
/// the causes underneath ("error sending request" alone hides a refused certificate).
fn without_url(e: &reqwest::Error) -> String {
    crate::error::describe_as(e, "<keystone>")
}

/// The v3 identity endpoint the service token's catalogue lists under `filter`.
fn validation_endpoint(body: &Value, filter: &crate::catalog::EndpointFilter) -> Option<String> {
    let catalog = crate::catalog::Catalog::from_token_body(body);
    let url = catalog.endpoint(crate::catalog::ServiceType::Identity, filter)?;
    Some(crate::catalog::identity_v3(url))
}

fn string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// The parts of a Keystone v3 token body Magnum uses.
pub fn parse_token(body: &Value) -> Option<TokenInfo> {
    let t = body.get("token")?;
    let user = t.get("user")?;
    Some(TokenInfo {
        user_id: string(&user["id"])?,
        user_name: string(&user["name"]),
        user_domain_id: string(&user["domain"]["id"]),
        project_id: string(&t["project"]["id"]),
        project_name: string(&t["project"]["name"]),
        project_domain_id: string(&t["project"]["domain"]["id"]),
        domain_id: string(&t["domain"]["id"]),
        system_scope: t["system"]["all"]
            .as_bool()
            .filter(|b| *b)
            .map(|_| "all".to_owned()),
        roles: t["roles"]
            .as_array()
            .map(|roles| roles.iter().filter_map(|r| string(&r["name"])).collect())
            .unwrap_or_default(),
        expires_at: t["expires_at"]
            .as_str()
            .and_then(|e| DateTime::parse_from_rfc3339(e).ok())
            .map(|e| e.with_timezone(&Utc)),
        body: std::sync::Arc::new(body.clone()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_a_project_token() {
        let body = json!({"token": {
            "user": {"id": "u1", "name": "demo", "domain": {"id": "default"}},
            "project": {"id": "p1", "name": "demo", "domain": {"id": "default"}},
            "roles": [{"id": "r1", "name": "member"}, {"id": "r2", "name": "reader"}],
            "expires_at": "2026-11-29T12:00:00.000000Z"
        }});
        let info = parse_token(&body).unwrap();
        assert_eq!(info.user_id, "u1");
        assert_eq!(info.project_id.as_deref(), Some("p1"));
        assert_eq!(info.roles, ["member", "reader"]);
        assert!(info.expires_at.is_some());
        assert_eq!(info.system_scope, None);
    }

    #[test]
    fn parses_a_system_token_and_hides_the_password() {
        let body = json!({"token": {"user": {"id": "u"}, "system": {"all": true}, "roles": []}});
        assert_eq!(
            parse_token(&body).unwrap().system_scope.as_deref(),
            Some("all")
        );
        assert!(parse_token(&json!({"token": {}})).is_none());
        let s = KeystoneSettings {
            auth_url: "http://k/v3".into(),
            username: "magnum".into(),
            password: "hunter2".into(),
            user_domain_name: "Default".into(),
            project_name: "service".into(),
            project_domain_name: "Default".into(),
            timeout: Duration::from_secs(5),
            token_cache_time: Duration::from_secs(300),
            ca_pem: None,
            insecure: false,
            endpoint: Default::default(),
        };
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn tokens_are_validated_where_interface_and_region_say() {
        let body = json!({"token": {"catalog": [{"type": "identity", "endpoints": [
            {"interface": "public", "region_id": "RegionOne", "url": "https://pub:5000/v3/"},
            {"interface": "internal", "region_id": "RegionOne", "url": "http://int-one:5000"},
            {"interface": "internal", "region_id": "RegionTwo", "url": "http://int-two:5000/v3"}]}]}});
        let f = |region: Option<&str>, itf: &str| {
            crate::catalog::EndpointFilter::new(region.map(str::to_owned), itf)
        };
        assert_eq!(
            validation_endpoint(&body, &f(None, "internal")).as_deref(),
            Some("http://int-one:5000/v3")
        );
        assert_eq!(
            validation_endpoint(&body, &f(Some("RegionTwo"), "internal")).as_deref(),
            Some("http://int-two:5000/v3")
        );
        assert_eq!(
            validation_endpoint(&body, &f(None, "public")).as_deref(),
            Some("https://pub:5000/v3")
        );
        assert_eq!(
            validation_endpoint(&body, &f(Some("RegionThree"), "internal")),
            None
        );
    }
}
