//! The REST API v1 of magnum-rs, wire-compatible with upstream Magnum (microversions 1.1 to
//! 1.14). Each resource declares its routes as a table (`table.rs`) that drives dispatch and
//! the OpenAPI document alike; upstream's pecan routing quirks clients rely on (`/v1`
//! optional, trailing slashes, 405 versus 404 versus 400) are entries of those tables.

pub mod auth;
pub mod error;
pub mod input;
pub mod openapi;
pub mod patch;
pub mod request;
pub mod routes;
mod table;
pub mod version;

mod v1;

use std::sync::Arc;

use magnum_conf::policy::Enforcer;
use magnum_db::Database;

pub use auth::{Auth, ServiceTokenRoles};
pub use magnum_service::validate::{Flavor, Found, Image, Named};
pub use magnum_service::{
    Lookups, NoValidation, OpenStackValidator, ResourceValidator, ServiceSettings, Services,
};

/// What the API needs from magnum.conf.
#[derive(Clone, Debug)]
pub struct ApiSettings {
    pub max_limit: u64,
    pub service_down_time: i64,
    /// Scheme used for links when no `X-Forwarded-Proto` says otherwise.
    pub https: bool,
    /// `[metrics] enabled`: serve `/metrics`.
    pub metrics: bool,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            max_limit: 1000,
            service_down_time: 180,
            https: false,
            metrics: false,
        }
    }
}

/// Everything a request handler can reach.
pub struct AppState {
    /// Reads for rendering (lists, shows, lookups); every write goes through `services`.
    pub db: Database,
    pub auth: Auth,
    pub policy: Enforcer,
    pub settings: ApiSettings,
    /// The domain services: the only way a handler changes anything.
    pub services: Services,
}

/// The axum application: one fallback handler that does its own routing.
pub fn router(state: Arc<AppState>) -> axum::Router {
    axum::Router::new()
        .fallback(routes::handle)
        .with_state(state)
}
