//! From magnum.conf to the settings each layer takes, and logging.

use std::time::Duration;

use magnum_conf::config::Config;
use magnum_db::{DbSettings, DbUrl};

use crate::Failure;

fn non_negative(v: i64, unlimited: u32) -> u32 {
    if v < 0 {
        unlimited
    } else {
        u32::try_from(v).unwrap_or(u32::MAX)
    }
}

/// `[database]` as storage takes it. A URL we cannot use is a configuration error.
pub fn db_settings(cfg: &Config) -> Result<DbSettings, Failure> {
    let d = &cfg.database;
    let url = DbUrl::parse(d.connection.expose())
        .map_err(|e| Failure::Config(format!("invalid value for [database] connection: {e}")))?;
    let mut s = DbSettings::new(url);
    s.mysql_sql_mode = d.mysql_sql_mode.clone();
    s.mysql_wsrep_sync_wait = d.mysql_wsrep_sync_wait;
    s.max_pool_size = d.max_pool_size.max(1);
    // -1 means "no limit" upstream; a pool still needs a ceiling.
    s.max_overflow = non_negative(d.max_overflow, 100);
    s.pool_timeout = u64::from(d.pool_timeout.max(1));
    s.connection_recycle_time = u64::from(non_negative(d.connection_recycle_time, u32::MAX));
    s.db_max_retries = non_negative(d.db_max_retries, u32::MAX);
    s.db_retry_interval = Duration::from_secs(u64::from(d.db_retry_interval));
    s.db_inc_retry_interval = d.db_inc_retry_interval;
    s.db_max_retry_interval = Duration::from_secs(u64::from(d.db_max_retry_interval));
    Ok(s)
}

/// `magnumd serve` without a config file keeps its SQLite database in a data directory
/// (`--data-dir`, else `[DEFAULT] state_path`) and creates that directory.
pub fn embedded_defaults(
    cfg: &mut Config,
    data_dir: Option<&std::path::Path>,
    found_config: bool,
) -> Result<(), Failure> {
    if found_config && data_dir.is_none() {
        return Ok(());
    }
    let dir = data_dir
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| std::path::PathBuf::from(&cfg.default.state_path));
    std::fs::create_dir_all(&dir).map_err(|e| {
        Failure::Runtime(format!(
            "cannot create the data directory {}: {e}",
            dir.display()
        ))
    })?;
    let dir = dir.canonicalize().unwrap_or(dir);
    if !found_config {
        // Barbican is upstream's default store but not available here yet; the embedded
        // default keeps certificates in its own database.
        cfg.certificates.cert_manager_type = "x509keypair".into();
    }
    if !found_config || cfg.database.connection.expose().starts_with("sqlite") {
        cfg.database.connection =
            magnum_conf::config::Secret::new(format!("sqlite:///{}/magnum.sqlite", dir.display()));
    }
    Ok(())
}

/// The password credentials of `[keystone_authtoken]` (keystonemiddleware's service user) and
/// its `auth_url`, when they are complete.
fn authtoken_credentials(cfg: &Config) -> Option<(magnum_openstack::ServiceCredentials, String)> {
    use magnum_openstack::{NamedRef, Scope, ServiceCredentials};
    let t = &cfg.keystone_authtoken;
    let some = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    if t.auth_type
        .as_deref()
        .is_some_and(|a| a.trim() != "password")
    {
        return None;
    }
    let auth_url = some(&t.auth_url)?;
    let password = t.password.as_ref()?.expose().to_owned();
    let credentials = ServiceCredentials::Password {
        user: NamedRef {
            id: None,
            name: Some(some(&t.username)?),
            domain_id: None,
            domain_name: Some(some(&t.user_domain_name).unwrap_or_else(|| "Default".into())),
        },
        password,
        scope: Scope::Project(NamedRef {
            id: None,
            name: Some(some(&t.project_name)?),
            domain_id: None,
            domain_name: Some(some(&t.project_domain_name).unwrap_or_else(|| "Default".into())),
        }),
    };
    Some((credentials, auth_url))
}

/// How Magnum reaches OpenStack services: `[keystone_auth]` (service credentials, session
/// options) and each `[<service>_client]` (region, interface). Files are read once, here.
pub fn openstack_settings(cfg: &Config) -> Result<magnum_openstack::OpenStackSettings, Failure> {
    use magnum_openstack::{EndpointFilter, NamedRef, Scope, ServiceCredentials, ServiceType};
    let k = &cfg.keystone_auth;
    let some = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    let auth_url = some(&k.auth_url).or_else(|| some(&cfg.keystone_authtoken.www_authenticate_uri));
    let user = NamedRef {
        id: some(&k.user_id),
        name: some(&k.username),
        domain_id: some(&k.user_domain_id).or_else(|| some(&k.default_domain_id)),
        domain_name: some(&k.user_domain_name).or_else(|| some(&k.default_domain_name)),
    };
    let credentials = match k.auth_type.trim() {
        "password" => match k.password.as_ref() {
            Some(p) if user.id.is_some() || user.name.is_some() => {
                let scope = if some(&k.project_id).is_some() || some(&k.project_name).is_some() {
                    Scope::Project(NamedRef {
                        id: some(&k.project_id),
                        name: some(&k.project_name),
                        domain_id: some(&k.project_domain_id)
                            .or_else(|| some(&k.default_domain_id)),
                        domain_name: some(&k.project_domain_name)
                            .or_else(|| some(&k.default_domain_name)),
                    })
                } else if some(&k.domain_id).is_some() || some(&k.domain_name).is_some() {
                    Scope::Domain {
                        id: some(&k.domain_id),
                        name: some(&k.domain_name),
                    }
                } else if some(&k.system_scope).is_some() {
                    Scope::System
                } else {
                    Scope::Unscoped
                };
                Some(ServiceCredentials::Password {
                    user,
                    password: p.expose().to_owned(),
                    scope,
                })
            }
            _ => None,
        },
        "v3applicationcredential" => {
            let secret = k.application_credential_secret.as_ref().ok_or_else(|| {
                Failure::Config(
                    "[keystone_auth] application_credential_secret must be set with auth_type = v3applicationcredential".into(),
                )
            })?;
            let id = some(&k.application_credential_id);
            let name = some(&k.application_credential_name);
            if id.is_none() && (name.is_none() || (user.id.is_none() && user.name.is_none())) {
                return Err(Failure::Config(
                    "[keystone_auth] v3applicationcredential needs application_credential_id, or application_credential_name with the user".into(),
                ));
            }
            Some(ServiceCredentials::ApplicationCredential {
                id,
                name,
                user: (user.id.is_some() || user.name.is_some()).then_some(user),
                secret: secret.expose().to_owned(),
            })
        }
        other => {
            return Err(Failure::Config(format!(
                "[keystone_auth] auth_type \"{other}\" is not supported: use password or v3applicationcredential"
            )));
        }
    };
    // Deployments that write no [keystone_auth] (openstack-helm's chart) give Magnum's service
    // user only to keystonemiddleware: take it from there rather than refuse to start.
    let (credentials, auth_url) = match credentials {
        Some(c) => (Some(c), auth_url),
        None => match authtoken_credentials(cfg) {
            Some((c, url)) => {
                tracing::warn!(
                    "[keystone_auth] has no service credentials: using [keystone_authtoken]'s \
                     service user for Magnum's own calls to OpenStack services"
                );
                (Some(c), auth_url.or(Some(url)))
            }
            None => (None, auth_url),
        },
    };
    let ca_pem = match k.cafile.as_deref().filter(|f| !f.is_empty()) {
        None => None,
        Some(f) => Some(
            std::fs::read(f)
                .map_err(|e| Failure::Config(format!("[keystone_auth] cafile {f}: {e}")))?,
        ),
    };
    let filter = |region: &Option<String>, endpoint_type: &str| {
        EndpointFilter::new(region.clone(), endpoint_type)
    };
    let endpoints = [
        (
            ServiceType::Image,
            filter(
                &cfg.glance_client.region_name,
                &cfg.glance_client.endpoint_type,
            ),
        ),
        (
            ServiceType::Compute,
            filter(&cfg.nova_client.region_name, &cfg.nova_client.endpoint_type),
        ),
        (
            ServiceType::Network,
            filter(
                &cfg.neutron_client.region_name,
                &cfg.neutron_client.endpoint_type,
            ),
        ),
        (
            ServiceType::BlockStorage,
            filter(
                &cfg.cinder_client.region_name,
                &cfg.cinder_client.endpoint_type,
            ),
        ),
        (
            ServiceType::LoadBalancer,
            filter(
                &cfg.octavia_client.region_name,
                &cfg.octavia_client.endpoint_type,
            ),
        ),
        (
            ServiceType::KeyManager,
            filter(
                &cfg.barbican_client.region_name,
                &cfg.barbican_client.endpoint_type,
            ),
        ),
        (
            ServiceType::SharedFileSystem,
            filter(
                &cfg.manila_client.region_name,
                &cfg.manila_client.endpoint_type,
            ),
        ),
    ]
    .into_iter()
    .collect();
    Ok(magnum_openstack::OpenStackSettings {
        auth_url,
        credentials,
        timeout: Duration::from_secs_f64(k.timeout.max(1.0)),
        ca_pem,
        insecure: k.insecure,
        endpoints,
    })
}
