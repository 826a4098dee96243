//! Who is calling: Keystone tokens (`keystone`, the default) or trusted headers (`noauth`,
//! the embedded default only).

use std::sync::Arc;

use http::HeaderMap;
use magnum_core::RequestContext;
use magnum_openstack::keystone::{Keystone, KeystoneError};

use crate::error::ApiError;

pub enum Auth {
    /// Context from `X-Project-Id`, `X-User-Id`, `X-Roles`; by default an admin of `admin`.
    NoAuth,
    Keystone {
        keystone: Arc<Keystone>,
        www_authenticate_uri: String,
        service_roles: ServiceTokenRoles,
    },
}

/// `[keystone_authtoken] service_token_roles(_required)`: what a service token
/// (`X-Service-Token`) must carry.
#[derive(Clone, Debug, Default)]
pub struct ServiceTokenRoles {
    /// One of these roles is needed.
    pub roles: Vec<String>,
    /// Refuse a service token without one (otherwise accept it with a warning, as
    /// keystonemiddleware does by default).
    pub required: bool,
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
}

fn split_roles(s: &str) -> Vec<String> {
    s.split(',')
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
        .collect()
}

impl Auth {
    pub async fn context(&self, headers: &HeaderMap) -> Result<RequestContext, ApiError> {
        match self {
            Auth::NoAuth => {
                let roles = header(headers, "x-roles")
                    .map(split_roles)
                    .unwrap_or_else(|| vec!["admin".into(), "member".into(), "reader".into()]);
                Ok(RequestContext {
                    user_id: Some(header(headers, "x-user-id").unwrap_or("admin").to_owned()),
                    project_id: Some(
                        header(headers, "x-project-id")
                            .unwrap_or("admin")
                            .to_owned(),
                    ),
                    user_name: header(headers, "x-user-name").map(str::to_owned),
                    project_name: header(headers, "x-project-name").map(str::to_owned),
                    system_scope: header(headers, "x-system-scope").map(str::to_owned),
                    roles,
                    ..RequestContext::default()
                })
            }
            Auth::Keystone {
                keystone,
                www_authenticate_uri,
                service_roles,
            } => {
                let unauthorized = || ApiError::Unauthorized {
                    www_authenticate: format!("Keystone uri=\"{www_authenticate_uri}\""),
                };
                let token = header(headers, "x-auth-token").ok_or_else(unauthorized)?;
                // A service token, when sent, must be valid too (keystonemiddleware refuses the
                // request otherwise).
                if let Some(service) = header(headers, "x-service-token") {
                    match keystone.validate(service).await {
                        Ok(info) => {
                            let has_role = service_roles.roles.is_empty()
                                || info.roles.iter().any(|r| service_roles.roles.contains(r));
                            if !has_role {
                                if service_roles.required {
                                    return Err(unauthorized());
                                }
                                tracing::warn!(
                                    "a service token without any of the roles in [keystone_authtoken] service_token_roles was accepted; set service_token_roles_required = true to refuse it"
                                );
                            }
                        }
                        Err(KeystoneError::InvalidToken) => return Err(unauthorized()),
                        Err(e) => {
                            tracing::error!("service token validation failed: {e}");
                            return Err(ApiError::Unavailable(
                                "The identity service (Keystone) cannot be reached to validate the token; try again later.".into(),
                            ));
                        }
                    }
                }
                let info = match keystone.validate(token).await {
                    Ok(info) => info,
                    Err(KeystoneError::InvalidToken) => return Err(unauthorized()),
                    Err(e) => {
                        tracing::error!("token validation failed: {e}");
                        return Err(ApiError::Unavailable(
                            "The identity service (Keystone) cannot be reached to validate the token; try again later.".into(),
                        ));
                    }
                };
                Ok(RequestContext {
                    user_id: Some(info.user_id),
                    project_id: info.project_id,
                    user_name: info.user_name,
                    project_name: info.project_name,
                    domain_id: info.domain_id,
                    user_domain_id: info.user_domain_id,
                    project_domain_id: info.project_domain_id,
                    system_scope: info.system_scope,
                    roles: info.roles,
                    user_token: Some(magnum_core::UserToken::new(token, info.body)),
                    ..RequestContext::default()
                })
            }
        }
    }
}
