//! The request context: who is asking, carried from the API through RPC to storage.

use serde::{Deserialize, Serialize};

/// The caller as storage and policy see it. The caller's token rides along only as a
/// [`UserToken`], which is never serialized and never printed, so it cannot leak from here
/// into logs, messages or errors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestContext {
    pub user_id: Option<String>,
    pub project_id: Option<String>,
    pub user_name: Option<String>,
    pub project_name: Option<String>,
    pub domain_id: Option<String>,
    pub user_domain_id: Option<String>,
    pub project_domain_id: Option<String>,
    /// `all` for a system-scoped token (Keystone `X-System-Scope`).
    pub system_scope: Option<String>,
    /// Role names as Keystone expands them (implied roles included).
    pub roles: Vec<String>,
    pub is_admin: bool,
    /// `?all_tenants=true` by an admin: lift the tenant filter.
    pub all_tenants: bool,
    pub request_id: Option<String>,
    /// The caller's validated Keystone token, for calls to other OpenStack services on the
    /// caller's behalf (Glance, Nova, Neutron see what the caller may see).
    #[serde(skip)]
    pub user_token: Option<UserToken>,
}

/// A validated Keystone token and the body Keystone described it with (roles, catalogue).
#[derive(Clone, PartialEq, Eq)]
pub struct UserToken {
    token: std::sync::Arc<str>,
    body: std::sync::Arc<serde_json::Value>,
}

impl UserToken {
    pub fn new(token: &str, body: std::sync::Arc<serde_json::Value>) -> Self {
        Self {
            token: token.into(),
            body,
        }
    }

    /// The token itself: only for an `X-Auth-Token` header.
    pub fn secret(&self) -> &str {
        &self.token
    }

    /// Keystone's token body (`{"token": {...}}`), catalogue included.
    pub fn body(&self) -> &serde_json::Value {
        &self.body
    }
}

impl std::fmt::Debug for UserToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UserToken([redacted])")
    }
}

impl RequestContext {
    /// The context the conductor's periodic work uses: admin, across all projects.
    pub fn admin_all_tenants() -> Self {
        Self {
            is_admin: true,
            all_tenants: true,
            roles: vec!["admin".into()],
            ..Self::default()
        }
    }

    /// A member of `project` (tests and tools).
    pub fn for_project(project: &str, user: &str) -> Self {
        Self {
            project_id: Some(project.into()),
            user_id: Some(user.into()),
            roles: vec!["member".into(), "reader".into()],
            ..Self::default()
        }
    }
}
