//! The conductor: built from magnum.conf on the shared state (`state`), it serves the RPC
//! surface (`impl ConductorApi`, one handler per method) and starts the background workers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use magnum_conf::config::Config;
use magnum_core::{RequestContext, Result};
use magnum_db::Database;
use magnum_rpc::{ConductorApi, Reply, Request};
use tokio::sync::mpsc;

use crate::handlers;
use crate::notify::Notifier;
use crate::state::{ChannelWaker, ConductorSettings, Inner};
use crate::worker::{Worker, WorkerContext, WorkerError, Workers};
use magnum_certs::x509::X509Options;
use magnum_certs::{ClusterPki, store_from_config};
use magnum_core::ids::ClusterUuid;
use magnum_driver::{Driver, DriverRegistry, SimulatedDriver, StatusWaker};
use magnum_driver_capi::CapiDriver;

/// The notifier of magnum.conf. One publisher serves both messaging drivers (it sends the
/// envelope each asks for), so it is handed out once.
fn notifier(cfg: &Config, publisher: Option<magnum_rpc::oslo::NotificationPublisher>) -> Notifier {
    let mut publisher = publisher;
    let mut handed_out = false;
    Notifier::from_config_with(cfg, |_| {
        if let Some(p) = publisher.take() {
            handed_out = true;
            return Some(Box::new(crate::notify::MessagingDriver::new(
                p,
                outbox_dir(cfg),
                host_of(cfg),
            )));
        }
        handed_out
            .then(|| Box::new(crate::notify::NoopDriver) as Box<dyn crate::notify::NotifierDriver>)
    })
}

fn host_of(cfg: &Config) -> &str {
    if cfg.default.host.is_empty() {
        "localhost"
    } else {
        &cfg.default.host
    }
}

/// `$state_path/notifications/<host>`, when `state_path` is a folder (it is not created
/// here: a missing one is a deployment without state, where notifications queue in memory).
fn outbox_dir(cfg: &Config) -> Option<std::path::PathBuf> {
    let state = std::path::Path::new(&cfg.default.state_path);
    if state.is_dir() {
        return Some(state.join("notifications").join(host_of(cfg)));
    }
    tracing::warn!(
        state_path = %state.display(),
        "[DEFAULT] state_path is not a folder: notifications wait for the broker in memory \
         only and a restart loses what is still waiting"
    );
    None
}

/// The drivers `magnumd` has, as magnum.conf enables them (without a status waker: for
/// checks that only resolve templates, such as `magnumd status upgrade check`).
pub fn drivers_from_config(cfg: &Config) -> DriverRegistry {
    let simulated: Arc<dyn Driver> = Arc::new(SimulatedDriver::new(&cfg.simulated_driver));
    let mut drivers = vec![simulated];
    if cfg.cluster_api.enabled {
        for d in CapiDriver::all(&cfg.cluster_api, &cfg.auto_scaling) {
            drivers.push(d);
        }
    }
    DriverRegistry::new(
        drivers,
        &cfg.drivers.disabled_drivers,
        &cfg.drivers.enabled_beta_drivers,
    )
}

/// The conductor. Cheap to clone; implements `magnum_rpc::ConductorApi`.
#[derive(Clone)]
pub struct Conductor {
    pub(crate) inner: Arc<Inner>,
    /// The Cluster API driver (one connection behind all its names), started with the
    /// workers so its watches wake the status sync from the start.
    capi: Option<Arc<CapiDriver>>,
}

impl Conductor {
    /// The conductor of `magnumd`: drivers, certificate store and notifier per magnum.conf.
    pub fn from_config(cfg: &Config, db: Database) -> Result<Self> {
        Self::from_config_with(cfg, db, None, None)
    }

    /// As [`Conductor::from_config`], with the RabbitMQ publisher for the `messaging` and
    /// `messagingv2` notification drivers.
    pub fn from_config_with(
        cfg: &Config,
        db: Database,
        publisher: Option<magnum_rpc::oslo::NotificationPublisher>,
        openstack: Option<Arc<magnum_openstack::OpenStack>>,
    ) -> Result<Self> {
        let simulated = Arc::new(SimulatedDriver::new(&cfg.simulated_driver));
        let mut drivers: Vec<Arc<dyn Driver>> = vec![simulated.clone()];
        let capi = cfg
            .cluster_api
            .enabled
            .then(|| CapiDriver::all(&cfg.cluster_api, &cfg.auto_scaling));
        for d in capi.iter().flatten() {
            drivers.push(d.clone());
        }
        let registry = DriverRegistry::new(
            drivers,
            &cfg.drivers.disabled_drivers,
            &cfg.drivers.enabled_beta_drivers,
        );
        let openstack_for_capi = openstack.clone().filter(|o| o.has_service_credentials());
        let barbican = cfg.certificates.cert_manager_type.trim() == "barbican";
        let credentials = openstack
            .clone()
            .filter(|o| barbican && o.has_service_credentials());
        let pki = ClusterPki::new(
            store_from_config(cfg, &db, openstack)?,
            X509Options::from(&cfg.x509),
        );
        let c = Self::new(
            db,
            registry,
            pki,
            notifier(cfg, publisher),
            ConductorSettings::from_config(cfg),
        );
        simulated.set_waker(c.waker());
        let mut c = c;
        if let Some(first) = capi.as_ref().and_then(|all| all.first()) {
            // All names share one connection, waker and source.
            first.set_waker(c.waker());
            first.set_source(Arc::new(crate::capi_source::ConductorSource {
                inner: c.inner.clone(),
                capi_client: cfg.capi_client.clone(),
                openstack: openstack_for_capi,
            }));
            c.capi = Some(first.clone());
        }
        if let Some(os) = credentials {
            let _ = c.inner.credentials.set(os);
        }
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
            capi: None,
            inner: Arc::new(Inner {
                db,
                drivers,
                pki,
                notifier,
                settings,
                started_at: magnum_db::repo::now(),
                waker: Arc::new(ChannelWaker::new(tx)),
                wake_rx: Mutex::new(Some(rx)),
                locks: Mutex::new(HashMap::new()),
                credentials: std::sync::OnceLock::new(),
                peers: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Shares the periodic work only with the conductors `peers` says are ours (Python
    /// conductors heartbeat under the same binary but cannot run our drivers). Without it,
    /// every live heartbeat row is a member.
    pub fn with_peers(self, peers: Arc<dyn magnum_rpc::oslo::Peers>) -> Self {
        let _ = self.inner.peers.set(peers);
        self
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
        if let Some(capi) = self.capi.clone() {
            tokio::spawn(async move {
                if let Err(e) = capi.start().await {
                    tracing::warn!(error = %e, "Cluster API driver: management cluster not reached yet");
                }
            });
        }
        workers.start(crate::heartbeat::Heartbeat(self.inner.clone()));
        if let Some(interval) = self.inner.settings.health_interval
            && self.inner.settings.periodic_enable
        {
            workers.start(crate::health::worker::HealthPoll {
                state: self.inner.clone(),
                interval,
            });
        }
        let rx = self.inner.wake_rx.lock().ok().and_then(|mut g| g.take());
        if let Some(rx) = rx {
            workers.start(StatusSync {
                state: self.inner.clone(),
                wakes: rx,
            });
        }
        workers
    }
}

/// The status sync as a worker: driver wakes plus the periodic sweep (`sync::run`).
struct StatusSync {
    state: Arc<Inner>,
    wakes: mpsc::UnboundedReceiver<String>,
}

impl Worker for StatusSync {
    fn name(&self) -> &'static str {
        "status-sync"
    }

    async fn run(self, ctx: WorkerContext) -> std::result::Result<(), WorkerError> {
        crate::sync::run(self.state, self.wakes, ctx).await
    }
}

/// Runs one handler in a span naming the request (its id comes from the API in the RPC
/// context), the caller and the cluster, so every line it logs carries them.
async fn handled<T>(
    method: &'static str,
    ctx: &RequestContext,
    cluster: ClusterUuid,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let span = tracing::info_span!(
        "rpc",
        request_id = ctx.request_id.as_deref().unwrap_or("-"),
        user = ctx.user_id.as_deref().unwrap_or("-"),
        project = ctx.project_id.as_deref().unwrap_or("-"),
        cluster = %cluster
    );
    tracing::Instrument::instrument(
        async move {
            tracing::info!(method, "handling");
            let started = std::time::Instant::now();
            let out = work.await;
            if let Err(e) = &out {
                tracing::info!(method, "refused: {e}");
            }
            if let Some(m) = magnum_core::metrics::metrics() {
                m.handler_latency
                    .with_label_values(&[method, if out.is_ok() { "ok" } else { "error" }])
                    .observe(started.elapsed().as_secs_f64());
            }
            out
        },
        span,
    )
    .await
}

/// How long a cast whose handler met the database away is tried again.
const CAST_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(300);

/// A cast (nobody waits for its answer): when its handler meets the database away, it is
/// handled again once the database answers, for up to [`CAST_RETRY_FOR`], and when another
/// conductor's write beat its own, it is handled again at once (five times at most), so a
/// request the API accepted is not dropped by an outage or a race (upstream dropped both).
/// Each attempt re-reads everything and checks the state machine again.
async fn cast<F, Fut>(
    inner: &Inner,
    method: &'static str,
    ctx: &RequestContext,
    cluster: ClusterUuid,
    work: F,
) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    use magnum_core::Error;
    let deadline = std::time::Instant::now() + CAST_RETRY_FOR;
    let mut raced = 0u64;
    loop {
        let out = handled(method, ctx, cluster.clone(), work()).await;
        match out {
            // Another conductor changed the cluster between this handler's read and its
            // guarded write (a resize completing as a delete arrives): read again and decide
            // again, instead of dropping a request the user was told was accepted.
            Err(Error::StaleWrite { .. }) if raced < 5 => {
                raced += 1;
                tracing::info!(method, cluster = %cluster, "the cluster changed meanwhile; handled again");
                tokio::time::sleep(std::time::Duration::from_millis(100 * raced)).await;
                continue;
            }
            Err(Error::DatabaseUnavailable(_)) if std::time::Instant::now() < deadline => {}
            other => return other,
        }
        tracing::warn!(method, cluster = %cluster, "the database is away; handled again once it answers");
        // At least a pause, then until the database's watch sees it again.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        while inner.db.reachable().is_err() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
}

/// The RPC surface: each request is one handler on the shared state. Casts are retried when
/// they lose a race with another conductor's write ([`cast`]); calls answer as they end.
#[async_trait]
impl ConductorApi for Conductor {
    async fn handle(&self, ctx: &RequestContext, req: Request) -> Result<Reply> {
        let inner = &self.inner;
        let method = req.method();
        let Some(cluster) = req.cluster().cloned() else {
            // The ping: a conductor is here to answer it.
            return Ok(Reply::Alive(true));
        };
        let done = |r: Result<()>| r.map(|()| Reply::Done);
        let pem = |r: Result<String>| r.map(Reply::Pem);
        match req {
            Request::ClusterCreate(r) => done(
                cast(inner, method, ctx, cluster, || {
                    handlers::cluster::create_requested(inner, ctx, &r)
                })
                .await,
            ),
            Request::ClusterUpdate(r) => done(
                cast(inner, method, ctx, cluster, || {
                    handlers::cluster::update(inner, ctx, r.clone())
                })
                .await,
            ),
            Request::ClusterDelete(r) => done(
                cast(inner, method, ctx, cluster, || {
                    handlers::cluster::delete(inner, ctx, &r.cluster_uuid)
                })
                .await,
            ),
            Request::ClusterResize(r) => done(
                cast(inner, method, ctx, cluster, || {
                    handlers::cluster::resize(inner, ctx, r.clone())
                })
                .await,
            ),
            Request::NodegroupCreate(r) => done(
                cast(inner, method, ctx, cluster, || {
                    handlers::nodegroup::create(inner, ctx, r.clone())
                })
                .await,
            ),
            Request::NodegroupUpdate(r) => done(
                cast(inner, method, ctx, cluster, || {
                    handlers::nodegroup::update(inner, ctx, r.clone())
                })
                .await,
            ),
            Request::NodegroupDelete(r) => done(
                cast(inner, method, ctx, cluster, || {
                    handlers::nodegroup::delete(inner, ctx, r.clone())
                })
                .await,
            ),
            Request::ClusterUpgrade(r) => done(
                handled(
                    method,
                    ctx,
                    cluster,
                    handlers::cluster::upgrade(inner, ctx, r),
                )
                .await,
            ),
            Request::CredentialRotate(r) => done(
                handled(
                    method,
                    ctx,
                    cluster,
                    handlers::ca::rotate_credential(inner, ctx, &r.cluster_uuid),
                )
                .await,
            ),
            Request::RotateCaCertificate(r) => done(
                handled(
                    method,
                    ctx,
                    cluster,
                    handlers::ca::rotate_ca(inner, ctx, &r.cluster_uuid),
                )
                .await,
            ),
            Request::SignCertificate(r) => {
                pem(handled(method, ctx, cluster, handlers::ca::sign(inner, ctx, r)).await)
            }
            Request::GetCaCertificate(r) => {
                pem(handled(method, ctx, cluster, handlers::ca::get_ca(inner, ctx, r)).await)
            }
            Request::PingConductor => Ok(Reply::Alive(true)),
        }
    }
}
