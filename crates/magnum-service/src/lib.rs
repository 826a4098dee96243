//! Domain services: the one place that creates or changes clusters, nodegroups, cluster
//! templates, quotas and federations. The HTTP layer parses (WSME rules) and authorises, then
//! calls a service with a typed request; the service validates (local rules, and other
//! OpenStack services through [`ResourceValidator`]), reserves quota, builds rows with their
//! defaults, writes them through storage and hands the work to the conductor over RPC,
//! compensating when the hand-over fails.
//!
//! Reads that only render (lists, shows) go to storage directly: they change nothing and
//! need no rule but the tenant filter, which storage applies.

pub mod certificates;
pub mod clusters;
pub mod compat;
pub mod credentials;
pub mod federations;
pub mod lifecycle;
pub mod nodegroups;
pub mod quotas;
pub mod templates;
pub mod validate;

use std::sync::Arc;

use magnum_db::Database;
use magnum_rpc::ConductorApi;

pub use compat::UnsavedRows;
pub use validate::{Checks, Lookups, NoValidation, OpenStackValidator, ResourceValidator};

/// The options of magnum.conf the domain rules use.
#[derive(Clone, Debug)]
pub struct ServiceSettings {
    /// `[quotas] max_clusters_per_project`: the limit of projects without an explicit quota.
    pub max_clusters_per_project: i32,
    pub allowed_network_drivers: Vec<String>,
    pub default_network_driver: String,
    pub default_boot_volume_size: i64,
    /// Drivers this deployment has; templates may only name these.
    pub drivers: Vec<String>,
    pub default_driver: Option<String>,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        Self {
            max_clusters_per_project: 20,
            allowed_network_drivers: vec!["flannel".into(), "calico".into()],
            default_network_driver: "flannel".into(),
            default_boot_volume_size: 0,
            drivers: vec!["simulated".into()],
            default_driver: None,
        }
    }
}

/// The labels a driver checks before anything is saved.
#[derive(Clone, Copy, Debug)]
pub enum LabelsToCheck<'a> {
    /// A new template's or cluster's: the cluster's labels over its template's.
    Cluster {
        cluster: &'a serde_json::Map<String, serde_json::Value>,
        template: &'a serde_json::Map<String, serde_json::Value>,
    },
    /// A new nodegroup's labels (the cluster's, when it was given none, were checked before).
    Nodegroup(&'a serde_json::Map<String, serde_json::Value>),
}

/// A driver's check of new labels (the driver name, the labels), so a value that cannot work
/// is refused with a 400 before anything is saved.
pub type LabelCheck = Arc<dyn Fn(&str, LabelsToCheck<'_>) -> magnum_core::Result<()> + Send + Sync>;

/// Everything the services need. Cheap to share behind an `Arc`.
pub struct Services {
    db: Database,
    conductor: Arc<dyn ConductorApi>,
    validator: Arc<dyn ResourceValidator>,
    settings: ServiceSettings,
    /// Set with `[api] create_cluster_in_conductor` (Python conductors serve the queue): new
    /// clusters and nodegroups go to the codec unsaved, as upstream's API sends them, and the
    /// conductor inserts them.
    staged: Option<UnsavedRows>,
    /// Otherwise, over RabbitMQ: the rows the API has just inserted, handed to the codec so
    /// it builds the create's message without reading them back.
    handoff: Option<UnsavedRows>,
    /// Per-cluster OpenStack credentials, when the deployment keeps them.
    credentials: Option<Arc<dyn credentials::ClusterCredentials>>,
    /// The drivers' label checks at cluster create.
    label_check: Option<LabelCheck>,
}

impl Services {
    /// The driver a template's clusters use: its own, else the configured default, else the
    /// first enabled.
    pub(crate) fn driver_name(
        &self,
        t: &magnum_db::repo::cluster_template::ClusterTemplate,
    ) -> Option<String> {
        let settings = &self.settings;
        t.driver
            .clone()
            .or_else(|| settings.default_driver.clone())
            .or_else(|| settings.drivers.iter().min().cloned())
    }

    /// The writer of cluster and nodegroup rows.
    pub fn lifecycle(&self) -> lifecycle::Lifecycle {
        lifecycle::Lifecycle::new(self.db.clone())
    }

    /// The OpenStack checks of one request, acting as its caller.
    pub fn checks(&self, ctx: &magnum_core::RequestContext) -> Checks {
        Checks::new(self.validator.lookups(ctx))
    }

    /// The boot volume size a resource with `labels` gets: the `boot_volume_size` label,
    /// else `[cinder] default_boot_volume_size`.
    pub fn boot_volume_size(&self, labels: Option<&serde_json::Value>) -> serde_json::Value {
        labels
            .and_then(|l| l.get("boot_volume_size"))
            .cloned()
            .unwrap_or_else(|| self.settings.default_boot_volume_size.into())
    }

    pub fn new(
        db: Database,
        conductor: Arc<dyn ConductorApi>,
        validator: Arc<dyn ResourceValidator>,
        settings: ServiceSettings,
    ) -> Self {
        Self {
            db,
            conductor,
            validator,
            settings,
            staged: None,
            handoff: None,
            credentials: None,
            label_check: None,
        }
    }

    /// Check new clusters' labels with `check` (see [`LabelCheck`]).
    pub fn with_label_check(mut self, check: Option<LabelCheck>) -> Self {
        self.label_check = check;
        self
    }

    /// Make each new cluster its own OpenStack credentials (see [`credentials`]).
    pub fn with_credentials(
        mut self,
        credentials: Option<Arc<dyn credentials::ClusterCredentials>>,
    ) -> Self {
        self.credentials = credentials;
        self
    }

    /// Hand new clusters and nodegroups to the conductor unsaved (see [`UnsavedRows`]).
    pub fn with_staging(mut self, staged: Option<UnsavedRows>) -> Self {
        self.staged = staged;
        self
    }

    /// Hand the rows of new clusters and nodegroups, once inserted, to the codec that
    /// encodes their creates (see [`UnsavedRows`]).
    pub fn with_handoff(mut self, handoff: Option<UnsavedRows>) -> Self {
        self.handoff = handoff;
        self
    }

    pub fn settings(&self) -> &ServiceSettings {
        &self.settings
    }

    pub fn certificates(&self) -> certificates::Certificates<'_> {
        certificates::Certificates { s: self }
    }

    pub fn templates(&self) -> templates::Templates<'_> {
        templates::Templates { s: self }
    }

    pub fn clusters(&self) -> clusters::Clusters<'_> {
        clusters::Clusters { s: self }
    }

    pub fn nodegroups(&self) -> nodegroups::Nodegroups<'_> {
        nodegroups::Nodegroups { s: self }
    }

    pub fn quotas(&self) -> quotas::Quotas<'_> {
        quotas::Quotas { s: self }
    }

    pub fn federations(&self) -> federations::Federations<'_> {
        federations::Federations { s: self }
    }
}

const GREEK: [&str; 24] = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi",
    "psi", "omega",
];

/// Upstream's generated names: `<greek letter>-<1..24>-<suffix>`.
pub fn generate_name(suffix: &str) -> String {
    let word = GREEK[(uuid::Uuid::new_v4().as_u128() % 24) as usize];
    let n = uuid::Uuid::new_v4().as_u128() % 24 + 1;
    format!("{word}-{n}-{suffix}")
}

fn invalid(message: String) -> magnum_core::Error {
    magnum_core::Error::InvalidParameterValue { message }
}

/// Upstream's invalid-attribute text, with the value as Python's `str()` shows it.
pub fn invalid_attribute(
    field: &str,
    value: &serde_json::Value,
    reason: impl std::fmt::Display,
) -> magnum_core::Error {
    invalid(format!(
        "Invalid input for field/attribute {field}. Value: '{}'. {reason}",
        magnum_core::py::py_str(value)
    ))
}

/// An integer attribute of a request that must fit its 32-bit column.
pub fn int32(
    doc: &serde_json::Map<String, serde_json::Value>,
    k: &str,
) -> magnum_core::Result<Option<i32>> {
    match doc.get(k) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| invalid_attribute(k, v, "Value should be lower or equal to 2147483647")),
    }
}
