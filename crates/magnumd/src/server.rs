//! `magnumd api` and `magnumd serve`: build the API's state from magnum.conf and serve it
//! until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use magnum_api::{
    ApiSettings, AppState, Auth, NoValidation, OpenStackValidator, ResourceValidator,
    ServiceSettings, Services,
};
use magnum_conf::config::Config;
use magnum_conf::policy::{Enforcer, PolicyOptions};
use magnum_db::Database;
use magnum_openstack::keystone::{Keystone, KeystoneSettings};

use crate::Failure;
use crate::settings::db_settings;

pub struct ServeOptions {
    /// `--config-dir` values, where a relative policy file is also searched.
    pub config_dirs: Vec<PathBuf>,
    /// Use `noauth` whatever the config says (the embedded default has no config file).
    pub force_noauth: bool,
    /// Whether `[api] auth_strategy = noauth` is acceptable (`serve` only).
    pub allow_noauth: bool,
    /// Create the schema if the database is empty.
    pub upgrade_schema: bool,
    /// Run the conductor in this process, reached over the in-process transport (`serve`).
    pub with_conductor: bool,
}

fn api_settings(cfg: &Config) -> ApiSettings {
    ApiSettings {
        max_limit: u64::from(cfg.api.max_limit),
        service_down_time: i64::from(cfg.default.service_down_time),
        https: cfg.api.enabled_ssl,
        metrics: cfg.metrics.enabled,
    }
}

fn service_settings(cfg: &Config) -> ServiceSettings {
    ServiceSettings {
        max_clusters_per_project: i32::try_from(cfg.quotas.max_clusters_per_project)
            .unwrap_or(i32::MAX),
        allowed_network_drivers: cfg
            .cluster_template
            .kubernetes_allowed_network_drivers
            .clone(),
        default_network_driver: cfg
            .cluster_template
            .kubernetes_default_network_driver
            .clone(),
        default_boot_volume_size: i64::from(cfg.cinder.default_boot_volume_size),
        // The drivers a conductor reading this magnum.conf registers.
        drivers: magnum_conductor::drivers_from_config(cfg).names(),
        default_driver: cfg.drivers.default_driver.clone(),
    }
}

/// The Cluster API driver's label checks, for clusters of its driver names only.
fn capi_label_check() -> magnum_service::LabelCheck {
    use magnum_service::LabelsToCheck;
    let names = magnum_driver_capi::driver_names();
    std::sync::Arc::new(move |driver, labels| {
        if !names.contains(&driver) {
            return Ok(());
        }
        match labels {
            LabelsToCheck::Cluster { cluster, template } => {
                magnum_driver_capi::check_label_maps(cluster, template)
            }
            LabelsToCheck::Nodegroup(labels) => {
                magnum_driver_capi::check_nodegroup_label_map(labels)
            }
        }
    })
}

/// The Keystone client `[keystone_authtoken]` describes.
pub fn keystone_client(cfg: &Config) -> Result<Keystone, Failure> {
    let k = &cfg.keystone_authtoken;
    let missing = |opt: &str| {
        Failure::Config(format!(
            "[keystone_authtoken] {opt} must be set when [api] auth_strategy = keystone"
        ))
    };
    let auth_url = k
        .auth_url
        .clone()
        .or_else(|| k.www_authenticate_uri.clone())
        .ok_or_else(|| missing("auth_url"))?;
    // Read once at start, before anything is served.
    let ca_pem = match k.cafile.as_deref().filter(|f| !f.is_empty()) {
        None => None,
        Some(f) => Some(
            std::fs::read(f)
                .map_err(|e| Failure::Config(format!("[keystone_authtoken] cafile {f}: {e}")))?,
        ),
    };
    let settings = KeystoneSettings {
        auth_url: auth_url.clone(),
        username: k.username.clone().ok_or_else(|| missing("username"))?,
        password: k
            .password
            .as_ref()
            .map(|p| p.expose().to_owned())
            .ok_or_else(|| missing("password"))?,
        user_domain_name: k
            .user_domain_name
            .clone()
            .unwrap_or_else(|| "Default".into()),
        project_name: k
            .project_name
            .clone()
            .ok_or_else(|| missing("project_name"))?,
        project_domain_name: k
            .project_domain_name
            .clone()
            .unwrap_or_else(|| "Default".into()),
        timeout: Duration::from_secs_f64(cfg.keystone_auth.timeout.max(1.0)),
        token_cache_time: Duration::from_secs(u64::try_from(k.token_cache_time).unwrap_or(0)),
        ca_pem,
        insecure: k.insecure,
        endpoint: magnum_openstack::EndpointFilter::new(k.region_name.clone(), &k.interface),
    };
    Keystone::new(settings).map_err(|e| match e {
        magnum_openstack::keystone::KeystoneError::Config(_) => Failure::Config(e.to_string()),
        other => Failure::Runtime(other.to_string()),
    })
}

fn keystone(cfg: &Config) -> Result<Auth, Failure> {
    let keystone = keystone_client(cfg)?;
    let www = cfg
        .keystone_authtoken
        .www_authenticate_uri
        .clone()
        .unwrap_or_else(|| keystone.identity_url().to_owned());
    Ok(Auth::Keystone {
        keystone: Arc::new(keystone),
        www_authenticate_uri: www,
        service_roles: magnum_api::ServiceTokenRoles {
            roles: cfg.keystone_authtoken.service_token_roles.clone(),
            required: cfg.keystone_authtoken.service_token_roles_required,
        },
    })
}

fn policy(cfg: &Config, config_dirs: &[PathBuf]) -> Result<Enforcer, Failure> {
    Enforcer::new(PolicyOptions::from_config(cfg, config_dirs))
        .map_err(|e| Failure::Config(e.to_string()))
}

async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}

pub async fn run(cfg: &Config, opts: ServeOptions) -> Result<(), Failure> {
    // Before anything connects: a TLS setting that cannot work is a configuration error.
    let tls = tls_config(cfg).await?;
    let auth = if opts.force_noauth || cfg.api.auth_strategy == "noauth" {
        if !opts.allow_noauth {
            return Err(Failure::Config(
                "[api] auth_strategy = noauth is only for `magnumd serve`, the embedded default; use keystone".into(),
            ));
        }
        tracing::warn!(
            "AUTHENTICATION IS OFF (noauth): every caller is trusted as the X-Project-Id/X-User-Id/X-Roles headers say, by default an admin. Use only on a private machine."
        );
        Auth::NoAuth
    } else {
        keystone(cfg)?
    };
    let db = if opts.upgrade_schema {
        let db = Database::connect(db_settings(cfg)?)
            .await
            .map_err(|e| Failure::Runtime(e.to_string()))?;
        magnum_db::schema::upgrade(&db)
            .await
            .map_err(|e| Failure::Runtime(e.to_string()))?;
        db
    } else {
        open_database(cfg).await?
    };
    let openstack = openstack(cfg)?;
    let validator: Arc<dyn ResourceValidator> = match &auth {
        Auth::Keystone { keystone, .. } => Arc::new(OpenStackValidator {
            keystone: Some(keystone.clone()),
            openstack: openstack.clone(),
            as_service: false,
        }),
        // The embedded default checks nothing, unless service credentials say where the
        // cloud is.
        Auth::NoAuth if openstack.has_service_credentials() => Arc::new(OpenStackValidator {
            keystone: None,
            openstack: openstack.clone(),
            as_service: true,
        }),
        Auth::NoAuth => Arc::new(NoValidation),
    };
    let mut workers = None;
    let mut oslo = None;
    // Only over RabbitMQ: in one process our conductor always finds the rows.
    let mut staged = None;
    let mut handoff = None;
    let transport: Arc<dyn magnum_rpc::Transport> = if opts.with_conductor {
        // All in one: the conductor in this process; the broker only for notifications.
        let inproc = Arc::new(magnum_rpc::InProcess::new(
            cfg.default.executor_thread_pool_size as usize,
        ));
        let publisher = if wants_messaging_notifications(cfg) {
            let handle = broker(cfg).await?;
            let p = handle.notifier();
            oslo = Some(handle);
            Some(p)
        } else {
            None
        };
        let conductor = magnum_conductor::Conductor::from_config_with(
            cfg,
            db.clone(),
            publisher,
            Some(openstack.clone()),
        )
        .map_err(|e| Failure::Config(e.to_string()))?;
        inproc.connect(Arc::new(conductor.clone()));
        tracing::info!(
            host = %cfg.default.host,
            drivers = ?conductor.drivers().names(),
            "conductor running in this process"
        );
        workers = Some(conductor.spawn_workers());
        inproc
    } else {
        // The conductors are elsewhere, reached over RabbitMQ in upstream's wire format.
        let handle = broker(cfg).await?;
        let codec = magnum_service::compat::codec::MagnumCodec::new(db.clone())
            .with_create_cluster_in_conductor(cfg.api.create_cluster_in_conductor);
        if cfg.api.create_cluster_in_conductor {
            staged = Some(codec.unsaved());
        } else {
            handoff = Some(codec.unsaved());
        }
        let transport = Arc::new(handle.transport(Arc::new(codec)));
        oslo = Some(handle);
        transport
    };
    let conductor = Arc::new(magnum_rpc::RpcClient::new(
        transport,
        Duration::from_secs(u64::from(cfg.default.rpc_response_timeout)),
    ));
    let services = Services::new(db.clone(), conductor, validator, service_settings(cfg))
        .with_staging(staged)
        .with_handoff(handoff)
        .with_credentials(cluster_credentials(cfg, &auth, &openstack))
        .with_label_check(cfg.cluster_api.enabled.then(capi_label_check));
    let state = Arc::new(AppState {
        db,
        auth,
        policy: policy(cfg, &opts.config_dirs)?,
        settings: api_settings(cfg),
        services,
    });
    let addr = format!("{}:{}", cfg.api.host, cfg.api.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| Failure::Runtime(format!("cannot listen on {addr}: {e}")))?;
    let served = match tls {
        None => {
            tracing::info!(
                "magnum API listening on http://{addr} with {} worker threads",
                runtime_threads()
            );
            axum::serve(listener, magnum_api::router(state))
                .with_graceful_shutdown(wait_for_signal())
                .await
                .map_err(|e| Failure::Runtime(format!("server failed: {e}")))
        }
        Some(tls) => {
            tracing::info!(
                "magnum API listening on https://{addr} with {} worker threads",
                runtime_threads()
            );
            let listener = listener
                .into_std()
                .map_err(|e| Failure::Runtime(format!("cannot listen on {addr}: {e}")))?;
            let handle = axum_server::Handle::new();
            let stopper = handle.clone();
            tokio::spawn(async move {
                wait_for_signal().await;
                // Requests in hand get this long to finish, as oslo.service gives them.
                stopper.graceful_shutdown(Some(Duration::from_secs(60)));
            });
            axum_server::from_tcp_rustls(listener, tls)
                .map_err(|e| Failure::Runtime(format!("cannot listen on {addr}: {e}")))?
                .handle(handle)
                .serve(magnum_api::router(state).into_make_service())
                .await
                .map_err(|e| Failure::Runtime(format!("server failed: {e}")))
        }
    };
    // Stop the sync and heartbeat before the broker, so nothing they send is cut off.
    if let Some(workers) = workers {
        workers.shutdown().await;
    }
    if let Some(handle) = oslo {
        handle.close().await;
    }
    served
}

/// `[api] enabled_ssl`: the certificate chain and key the API serves HTTPS with. A missing or
/// unreadable file stops the start with the option to fix.
async fn tls_config(
    cfg: &Config,
) -> Result<Option<axum_server::tls_rustls::RustlsConfig>, Failure> {
    if !cfg.api.enabled_ssl {
        return Ok(None);
    }
    let path = |v: &Option<String>, opt: &str| {
        v.clone().filter(|p| !p.is_empty()).ok_or_else(|| {
            Failure::Config(format!(
                "[api] {opt} must be set when [api] enabled_ssl = true"
            ))
        })
    };
    let cert = path(&cfg.api.ssl_cert_file, "ssl_cert_file")?;
    let key = path(&cfg.api.ssl_key_file, "ssl_key_file")?;
    axum_server::tls_rustls::RustlsConfig::from_pem_file(&cert, &key)
        .await
        .map(Some)
        .map_err(|e| {
            Failure::Config(format!(
                "[api] ssl_cert_file {cert} / ssl_key_file {key}: cannot be used for HTTPS: {e}"
            ))
        })
}

/// Whether `[oslo_messaging_notifications] driver` asks for RabbitMQ.
fn wants_messaging_notifications(cfg: &Config) -> bool {
    cfg.oslo_messaging_notifications
        .driver
        .iter()
        .any(|d| matches!(d.trim(), "messaging" | "messagingv2"))
}

/// The broker of `[DEFAULT] transport_url`. An unreachable broker is not fatal: the
/// connection keeps being retried and RPCs answer 503 meanwhile.
async fn broker(cfg: &Config) -> Result<magnum_rpc::oslo::OsloHandle, Failure> {
    magnum_rpc::oslo::connect(cfg)
        .await
        .map_err(|e| Failure::Config(e.to_string()))
}

/// With Keystone and the Barbican store, each new cluster gets its own application credential
/// (made with the user's token before the create is answered, kept in Barbican).
fn cluster_credentials(
    cfg: &Config,
    auth: &Auth,
    openstack: &Arc<magnum_openstack::OpenStack>,
) -> Option<Arc<dyn magnum_service::credentials::ClusterCredentials>> {
    let on = matches!(auth, Auth::Keystone { .. })
        && cfg.certificates.cert_manager_type.trim() == "barbican"
        && openstack.has_service_credentials();
    on.then(|| {
        Arc::new(magnum_service::credentials::OpenStackCredentials {
            openstack: openstack.clone(),
        }) as Arc<dyn magnum_service::credentials::ClusterCredentials>
    })
}

/// `/metrics` of a conductor process, on `[metrics] conductor_host:conductor_port`.
async fn serve_conductor_metrics(cfg: &Config, db: Database) -> Result<(), Failure> {
    let addr = format!(
        "{}:{}",
        cfg.metrics.conductor_host, cfg.metrics.conductor_port
    );
    let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
        Failure::Config(format!(
            "[metrics] conductor_host/conductor_port {addr}: {e}"
        ))
    })?;
    let down_time = i64::from(cfg.default.service_down_time);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let db = db.clone();
            async move {
                let Some(m) = magnum_core::metrics::metrics() else {
                    return String::new();
                };
                db.record_metrics(m, down_time).await;
                m.render()
            }
        }),
    );
    tracing::info!("conductor metrics on http://{addr}/metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("conductor metrics listener stopped: {e}");
        }
    });
    Ok(())
}

/// The one OpenStack client of the process (connection pool, service token).
fn openstack(cfg: &Config) -> Result<Arc<magnum_openstack::OpenStack>, Failure> {
    magnum_openstack::OpenStack::new(crate::settings::openstack_settings(cfg)?)
        .map(Arc::new)
        .map_err(|e| Failure::Config(e.to_string()))
}

async fn open_database(cfg: &Config) -> Result<Database, Failure> {
    let db = Database::connect(db_settings(cfg)?)
        .await
        .map_err(|e| Failure::Runtime(e.to_string()))?;
    magnum_db::schema::ensure_at_head(&db)
        .await
        .map_err(|e| Failure::Runtime(e.to_string()))?;
    Ok(db)
}

/// The runtime's worker threads (`[api] workers`, `[conductor] workers`), for the start-up
/// lines: logged there rather than at start, so a configuration error stays one line.
fn runtime_threads() -> usize {
    tokio::runtime::Handle::current().metrics().num_workers()
}

/// `magnumd conductor`: serves the conductor topic on RabbitMQ (the shared queue and its own
/// server queue), runs the status sync and the heartbeat, until SIGTERM or SIGINT. Several may
/// run side by side, also next to Python conductors.
pub async fn run_conductor(cfg: &Config) -> Result<(), Failure> {
    let db = open_database(cfg).await?;
    let handle = broker(cfg).await?;
    let publisher = handle.notifier();
    let publisher = publisher.is_enabled().then_some(publisher);
    let conductor = magnum_conductor::Conductor::from_config_with(
        cfg,
        db.clone(),
        publisher,
        Some(openstack(cfg)?),
    )
    .map_err(|e| Failure::Config(e.to_string()))?
    .with_peers(Arc::new(handle.membership(&cfg.default.host)));
    if cfg.metrics.enabled && cfg.metrics.conductor_port != 0 {
        serve_conductor_metrics(cfg, db.clone()).await?;
    }
    let codec = Arc::new(magnum_service::compat::codec::MagnumCodec::new(db));
    let server = handle.start_server(Arc::new(conductor.clone()), codec, None);
    let workers = conductor.spawn_workers();
    tracing::info!(
        host = %cfg.default.host,
        server = server.server_id(),
        topic = %cfg.conductor.topic,
        worker_threads = runtime_threads(),
        drivers = ?conductor.drivers().names(),
        "conductor serving"
    );
    wait_for_signal().await;
    // Finish the requests in hand (they are acknowledged only when handled), then go.
    server.stop().await;
    workers.shutdown().await;
    handle.close().await;
    Ok(())
}
