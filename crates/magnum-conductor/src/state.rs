//! The conductor's shared state: what every handler, the status sync and the heartbeat
//! reach (database, drivers, PKI, notifier, settings, per-cluster locks). The RPC surface
//! (`service`) and the background workers are built on it; it knows neither.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::NaiveDateTime;
use magnum_conf::config::Config;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::Database;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_service::lifecycle::Lifecycle;
use tokio::sync::mpsc;

use crate::notify::{Action, Notifier, Outcome};
use magnum_certs::ClusterPki;
use magnum_driver::{Driver, DriverRegistry, StatusWaker};

pub const BINARY: &str = "magnum-conductor";

/// What the conductor takes from magnum.conf.
#[derive(Clone, Debug)]
pub struct ConductorSettings {
    pub host: String,
    pub periodic_enable: bool,
    pub sync_interval: Duration,
    pub report_interval: Duration,
    /// `[DEFAULT] service_down_time`: how long a silent conductor still owns its clusters.
    pub service_down_time: Duration,
    /// `[kubernetes] health_polling_interval`; `None`: no health polls (negative).
    pub health_interval: Option<Duration>,
}

impl ConductorSettings {
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            host: cfg.default.host.clone(),
            periodic_enable: cfg.default.periodic_enable,
            sync_interval: Duration::from_secs(u64::from(cfg.conductor.sync_interval)),
            report_interval: Duration::from_secs(u64::from(cfg.conductor.report_interval)),
            service_down_time: Duration::from_secs(u64::from(cfg.default.service_down_time)),
            health_interval: u64::try_from(cfg.kubernetes.health_polling_interval)
                .ok()
                .map(|s| Duration::from_secs(s.max(1))),
        }
    }
}

/// Tells the sync loop that a cluster has news.
pub(crate) struct ChannelWaker(mpsc::UnboundedSender<String>);

impl ChannelWaker {
    pub(crate) fn new(tx: mpsc::UnboundedSender<String>) -> Self {
        Self(tx)
    }
}

impl StatusWaker for ChannelWaker {
    fn wake(&self, cluster_uuid: &str) {
        // The loop is gone only at shutdown, when nothing needs to hear it.
        let _ = self.0.send(cluster_uuid.to_owned());
    }
}

pub(crate) struct Inner {
    pub(crate) db: Database,
    pub(crate) drivers: DriverRegistry,
    pub(crate) pki: ClusterPki,
    pub(crate) notifier: Notifier,
    pub(crate) settings: ConductorSettings,
    /// When this process started: clusters created before it have no pending cast here.
    pub(crate) started_at: NaiveDateTime,
    pub(crate) waker: Arc<ChannelWaker>,
    pub(crate) wake_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// One operation at a time per cluster in this process, so a handler and the sync never
    /// interleave their writes; guarded writes cover other processes.
    pub(crate) locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Where the clusters' own OpenStack credentials are kept (with the Barbican store), so
    /// they go with their clusters.
    pub(crate) credentials: std::sync::OnceLock<Arc<magnum_openstack::OpenStack>>,
    /// Which heartbeat rows are our conductors (over RabbitMQ); unset: all of them.
    pub(crate) peers: std::sync::OnceLock<Arc<dyn magnum_rpc::oslo::Peers>>,
}

impl Inner {
    /// The one writer of cluster and nodegroup rows.
    pub(crate) fn lifecycle(&self) -> Lifecycle {
        Lifecycle::new(self.db.clone())
    }

    pub(crate) fn wake(&self, cluster_uuid: &str) {
        self.waker.wake(cluster_uuid);
    }

    pub(crate) fn lock_for(&self, cluster_uuid: &str) -> Arc<tokio::sync::Mutex<()>> {
        match self.locks.lock() {
            Ok(mut map) => {
                // Forget locks nobody holds, so the map stays as small as the work in flight.
                map.retain(|_, l| Arc::strong_count(l) > 1);
                map.entry(cluster_uuid.to_owned()).or_default().clone()
            }
            Err(_) => Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The cluster (through the caller's tenant filter) and all its nodegroups.
    pub(crate) async fn load(
        &self,
        ctx: &RequestContext,
        cluster_uuid: &str,
    ) -> Result<(Cluster, Vec<NodeGroup>)> {
        let cluster = self.db.clusters().get_by_uuid(ctx, cluster_uuid).await?;
        let ngs = self
            .db
            .nodegroups()
            .for_clusters(&[cluster_uuid.to_owned()])
            .await?;
        Ok((cluster, ngs))
    }

    pub(crate) async fn template_of(&self, cluster: &Cluster) -> Result<ClusterTemplate> {
        let id = cluster.cluster_template_id.clone().unwrap_or_default();
        self.db
            .cluster_templates()
            .for_uuids(std::slice::from_ref(&id))
            .await?
            .pop()
            .ok_or(Error::ClusterTemplateNotFound { template: id })
    }

    pub(crate) async fn driver_for(&self, cluster: &Cluster) -> Result<Arc<dyn Driver>> {
        let t = self.template_of(cluster).await?;
        self.drivers.for_template(&(&t).into())
    }

    pub(crate) async fn notify(
        &self,
        ctx: &RequestContext,
        action: Action,
        outcome: Outcome,
        cluster: &Cluster,
        ngs: &[NodeGroup],
    ) {
        self.notifier
            .cluster_event(ctx, action, outcome, cluster, ngs)
            .await;
    }
}
