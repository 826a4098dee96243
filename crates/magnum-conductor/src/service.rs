//! The conductor: shared state of the RPC handlers, the status sync and the heartbeat.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::NaiveDateTime;
use magnum_core::config::Config;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::Database;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::nodegroup::NodeGroup;
use tokio::sync::mpsc;

use crate::certs::{ClusterPki, store_from_config};
use crate::driver::{Driver, DriverRegistry, SimulatedDriver, StatusWaker};
use crate::notify::{Action, Notifier, Outcome};
use crate::worker::{Worker, WorkerContext, WorkerError, Workers};
use crate::x509::X509Options;

pub const BINARY: &str = "magnum-conductor";

/// What the conductor takes from magnum.conf.
#[derive(Clone, Debug)]
pub struct ConductorSettings {
    pub host: String,
    pub periodic_enable: bool,
    pub sync_interval: Duration,
    pub report_interval: Duration,
}

impl ConductorSettings {
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            host: cfg.default.host.clone(),
            periodic_enable: cfg.default.periodic_enable,
            sync_interval: Duration::from_secs(u64::from(cfg.conductor.sync_interval)),
            report_interval: Duration::from_secs(u64::from(cfg.conductor.report_interval)),
        }
    }
}

/// The notifier of magnum.conf. One publisher serves both messaging drivers (it sends the
/// envelope each asks for), so it is handed out once.
fn notifier(cfg: &Config, publisher: Option<magnum_rpc::oslo::NotificationPublisher>) -> Notifier {
    let mut publisher = publisher;
    let mut handed_out = false;
    Notifier::from_config_with(cfg, |_| {
        if let Some(p) = publisher.take() {
            handed_out = true;
            return Some(Box::new(crate::notify::MessagingDriver::new(p)));
        }
        handed_out
            .then(|| Box::new(crate::notify::NoopDriver) as Box<dyn crate::notify::NotifierDriver>)
    })
}

/// Tells the sync loop that a cluster has news.
struct ChannelWaker(mpsc::UnboundedSender<String>);

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
    waker: Arc<ChannelWaker>,
    wake_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// One operation at a time per cluster in this process, so a handler and the sync never
    /// interleave their writes; guarded writes cover other processes.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The conductor. Cheap to clone; implements `magnum_rpc::ConductorApi`.
#[derive(Clone)]
pub struct Conductor {
    pub(crate) inner: Arc<Inner>,
}

impl Conductor {
    /// The conductor of `magnumd`: drivers, certificate store and notifier per magnum.conf.
    pub fn from_config(cfg: &Config, db: Database) -> Result<Self> {
        Self::from_config_with(cfg, db, None)
    }

    /// As [`Conductor::from_config`], with the RabbitMQ publisher for the `messaging` and
    /// `messagingv2` notification drivers.
    pub fn from_config_with(
        cfg: &Config,
        db: Database,
        publisher: Option<magnum_rpc::oslo::NotificationPublisher>,
    ) -> Result<Self> {
        let simulated = Arc::new(SimulatedDriver::new(&cfg.simulated_driver));
        let drivers: Vec<Arc<dyn Driver>> = vec![simulated.clone()];
        let registry = DriverRegistry::new(
            drivers,
            &cfg.drivers.disabled_drivers,
            &cfg.drivers.enabled_beta_drivers,
        );
        let pki = ClusterPki::new(store_from_config(cfg, &db)?, X509Options::from(&cfg.x509));
        let c = Self::new(
            db,
            registry,
            pki,
            notifier(cfg, publisher),
            ConductorSettings::from_config(cfg),
        );
        simulated.set_waker(c.waker());
        Ok(c)
    }

    pub fn new(
        db: Database,
        drivers: DriverRegistry,
        pki: ClusterPki,
        notifier: Notifier,
        settings: ConductorSettings,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            inner: Arc::new(Inner {
                db,
                drivers,
                pki,
                notifier,
                settings,
                started_at: magnum_db::repo::now(),
                waker: Arc::new(ChannelWaker(tx)),
                wake_rx: Mutex::new(Some(rx)),
                locks: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Hand this to drivers so they can report changes as they happen.
    pub fn waker(&self) -> Arc<dyn StatusWaker> {
        self.inner.waker.clone()
    }

    pub fn drivers(&self) -> &DriverRegistry {
        &self.inner.drivers
    }

    /// Starts the heartbeat and the status sync (which first resumes or times out whatever a
    /// previous run left in progress). Call once: a second call starts only a heartbeat.
    pub fn spawn_workers(&self) -> Workers {
        let mut workers = Workers::new();
        workers.start(crate::heartbeat::Heartbeat(self.clone()));
        let rx = self.inner.wake_rx.lock().ok().and_then(|mut g| g.take());
        if let Some(rx) = rx {
            workers.start(StatusSync {
                conductor: self.clone(),
                wakes: rx,
            });
        }
        workers
    }
}

/// The status sync as a worker: driver wakes plus the periodic sweep (`sync::run`).
struct StatusSync {
    conductor: Conductor,
    wakes: mpsc::UnboundedReceiver<String>,
}

impl Worker for StatusSync {
    fn name(&self) -> &'static str {
        "status-sync"
    }

    async fn run(self, ctx: WorkerContext) -> std::result::Result<(), WorkerError> {
        crate::sync::run(self.conductor, self.wakes, ctx).await
    }
}

impl Inner {
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
