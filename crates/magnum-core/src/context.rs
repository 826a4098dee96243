//! The request context: who is asking, carried from the API through RPC to storage.

use serde::{Deserialize, Serialize};

/// The caller as storage and policy see it. Tokens are deliberately not part of this type:
/// storage never needs them, so they cannot leak from here into logs or errors.
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
