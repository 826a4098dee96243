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
pub use error::OsError;
pub use session::{NamedRef, OpenStack, OpenStackSettings, Scope, ServiceCredentials, Session};
