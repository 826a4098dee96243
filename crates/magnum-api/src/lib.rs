//! The REST API v1 of magnum-rs, wire-compatible with upstream Magnum (microversions 1.1 to
//! 1.14). Routing is explicit (see `routes`), because upstream's pecan routing has quirks
//! clients rely on (`/v1` optional, trailing slashes, 405 versus 404 versus 400).

pub mod auth;
pub mod error;
pub mod input;
pub mod openapi;
pub mod patch;
pub mod routes;
pub mod validate;
pub mod version;

mod v1;

use std::sync::Arc;

use magnum_core::policy::Enforcer;
use magnum_db::Database;

pub use auth::Auth;
pub use validate::{KeystoneValidator, NoValidation, ResourceValidator};

/// What the API needs from magnum.conf.
#[derive(Clone, Debug)]
pub struct ApiSettings {
    pub max_limit: u64,
    pub service_down_time: i64,
    pub max_clusters_per_project: i32,
    pub allowed_network_drivers: Vec<String>,
    pub default_network_driver: String,
    pub default_boot_volume_size: i64,
    /// Drivers this deployment has; templates may only name these.
    pub drivers: Vec<String>,
    pub default_driver: Option<String>,
    /// Scheme used for links when no `X-Forwarded-Proto` says otherwise.
    pub https: bool,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            max_limit: 1000,
            service_down_time: 180,
            max_clusters_per_project: 20,
            allowed_network_drivers: vec!["flannel".into(), "calico".into()],
            default_network_driver: "flannel".into(),
            default_boot_volume_size: 0,
            drivers: vec!["simulated".into()],
            default_driver: None,
            https: false,
        }
    }
}

/// Everything a request handler can reach.
pub struct AppState {
    pub db: Database,
    pub auth: Auth,
    pub policy: Enforcer,
    pub settings: ApiSettings,
    pub validator: Arc<dyn ResourceValidator>,
    /// The conductor, over whatever transport this process uses.
    pub conductor: Arc<dyn magnum_rpc::ConductorApi>,
    /// Set with `[api] create_cluster_in_conductor` (Python conductors serve the queue): new
    /// clusters and nodegroups are handed to the codec unsaved, as upstream's API does, and
    /// the conductor inserts them.
    pub staged: Option<magnum_service::compat::codec::UnsavedRows>,
}

/// The axum application: one fallback handler that does its own routing.
pub fn router(state: Arc<AppState>) -> axum::Router {
    axum::Router::new()
        .fallback(routes::handle)
        .with_state(state)
}
