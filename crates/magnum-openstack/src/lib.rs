//! Clients for the OpenStack services Magnum talks to: Keystone (token validation, project
//! lookup, the service catalogue and service credentials), and the reads and writes Magnum
//! makes on Glance, Nova, Neutron, Cinder, Octavia and Barbican.
//!
//! Hand-written over reqwest rather than an SDK crate: `openstack_sdk` is built for CLIs
//! (interactive auth, config files, many services we never call) and has no Barbican;
//! `openstack` (rust-openstack) is on an old reqwest and has neither Barbican, Cinder nor
//! Octavia. Magnum needs about a dozen calls.

pub mod catalog;
pub mod credentials;
pub mod error;
pub mod keymanager;
pub mod keystone;
pub mod resources;
pub mod session;

pub use catalog::{Catalog, EndpointFilter, ServiceType};

use std::time::Duration;

/// The HTTP client every OpenStack call goes through: the request timeout, a connect timeout
/// of at most 5 s (a dead endpoint fails fast), `insecure` and the configured CA bundle.
/// The error is the text to report, for each caller's own error type.
pub(crate) fn http_client(
    timeout: Duration,
    insecure: bool,
    ca_pem: Option<&[u8]>,
) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .tls_danger_accept_invalid_certs(insecure);
    if let Some(pem) = ca_pem {
        let certs =
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("cafile: {e}"))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| format!("HTTP client: {e}"))
}
pub use error::OsError;
pub use session::{NamedRef, OpenStack, OpenStackSettings, Scope, ServiceCredentials, Session};
