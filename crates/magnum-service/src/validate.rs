//! The seam for validation that needs other OpenStack services (Glance images, Nova flavors and
//! keypairs, Neutron networks and subnets). Only Keystone's project lookup is implemented so
//! far; under `noauth` (the embedded default) nothing is checked.

use magnum_core::{Error, RequestContext, Result};
use serde_json::{Map, Value};

/// What validating a cluster template learned from other services.
#[derive(Clone, Debug, Default)]
pub struct TemplateFacts {
    /// The image's `os_distro`, which becomes the template's `cluster_distro`.
    pub os_distro: Option<String>,
    /// The image property `magnum_driver`.
    pub image_driver: Option<String>,
}

pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

pub trait ResourceValidator: Send + Sync {
    /// Check a template document's image, flavors and networks (upstream's order), returning
    /// what the image says about itself. Until the Glance/Nova/Neutron clients exist, nothing
    /// is checked and nothing learned.
    fn validate_template<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        _doc: &'a Map<String, Value>,
    ) -> BoxFuture<'a, Result<TemplateFacts>> {
        Box::pin(async { Ok(TemplateFacts::default()) })
    }

    /// Whether Keystone knows the project (quota create).
    fn project_exists<'a>(&'a self, project_id: &'a str) -> BoxFuture<'a, Result<bool>>;
}

/// Validation off: everything passes and nothing is learned.
pub struct NoValidation;

impl ResourceValidator for NoValidation {
    fn project_exists<'a>(&'a self, _project_id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async { Ok(true) })
    }
}

/// Keystone-backed checks; image, flavor and network checks join with the Glance/Nova/Neutron
/// clients.
pub struct KeystoneValidator {
    pub keystone: std::sync::Arc<magnum_openstack::keystone::Keystone>,
}

impl ResourceValidator for KeystoneValidator {
    fn project_exists<'a>(&'a self, project_id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            self.keystone.project_exists(project_id).await.map_err(|e| {
                tracing::error!("project lookup failed: {e}");
                Error::ServiceUnavailable {
                    message: "The identity service (Keystone) cannot be reached to look up the project; try again later.".into(),
                }
            })
        })
    }
}
