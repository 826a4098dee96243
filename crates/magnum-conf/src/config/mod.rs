//! magnum.conf: an oslo.config-compatible reader and the typed option registry.
//!
//! Files are read as oslo.config reads them (the dialect is described in `config/ini.rs`):
//! `--config-file`s in order, then every `*.conf` of each `--config-dir` in name order; a later
//! file overrides an earlier one, multi-valued options collect every occurrence. Values may
//! refer to other options with `$name` / `${name}` (same section, then `[DEFAULT]`) or
//! `$section.name`.
//!
//! Every option is declared once in `config/sections.rs` (type, default, help, secret or not);
//! the typed structs, the loader and [`sample`] all come from that declaration. Unknown
//! sections and options are not errors: they are reported by [`Config::warnings`].

mod ini;
mod registry;
mod sample;
mod secret;
mod sections;
mod value;

use std::path::{Path, PathBuf};

pub use sample::sample;
pub use secret::{Secret, redact_url};
pub use sections::{
    ApiSection, AuditSection, AutoScalingSection, CapiClientSection, CertificatesSection,
    CinderSection, ClientSection, ClusterApiSection, ClusterSection, ClusterTemplateSection,
    ConductorSection, DatabaseSection, DefaultSection, DockerRegistrySection, DockerSection,
    DriversSection, KeystoneAuthSection, KeystoneAuthtokenSection, KubernetesSection,
    ManilaClientSection, MetricsSection, OctaviaClientSection, OsloMessagingNotificationsSection,
    OsloMessagingRabbitSection, OsloPolicySection, ProfilerSection, ProxySection, QuotasSection,
    SimulatedDriverSection, TrustSection, X509_EXTENSIONS, X509_KEY_USAGES, X509Section,
};

use ini::IniFile;
use registry::{Registry, Resolver, SectionInfo};

/// Why a configuration could not be loaded. Messages are one line and never contain the
/// value of a secret option.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("config file {} not found", path.display())]
    FileNotFound { path: PathBuf },
    #[error("config directory {} not found", path.display())]
    DirNotFound { path: PathBuf },
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse {origin} at line {line}: {message}")]
    Parse {
        origin: String,
        line: usize,
        message: String,
    },
    #[error("invalid value for [{section}] {option}: {reason}")]
    InvalidValue {
        section: String,
        option: String,
        reason: String,
    },
    #[error("cannot substitute in [{section}] {option}: {reason}")]
    Substitution {
        section: String,
        option: String,
        reason: String,
    },
}

/// Lists the sections of [`Config`] once: field, type and section name.
macro_rules! config_sections {
    ($( $(#[doc = $doc:literal])* $field:ident : $ty:ty = $name:literal, )*) => {
        /// The whole configuration, one typed struct per section. `Debug` shows secrets as
        /// `****`.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Config {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            warnings: Vec<String>,
            files: Vec<PathBuf>,
        }

        impl Config {
            /// Declared defaults without `$name` substitution; only a fallback.
            fn unresolved_defaults() -> Self {
                Self {
                    $( $field: <$ty>::default(), )*
                    warnings: Vec::new(),
                    files: Vec::new(),
                }
            }

            /// Every declared section, in sample order.
            pub(crate) fn section_infos() -> Vec<SectionInfo> {
                vec![$(
                    SectionInfo {
                        name: $name,
                        help: concat!($($doc),*).trim_ascii(),
                        options: <$ty>::options(),
                        accepted: <$ty>::ACCEPTED,
                    },
                )*]
            }

            fn resolve(resolver: &mut Resolver<'_>) -> Result<Self, ConfigError> {
                Ok(Self {
                    $( $field: <$ty>::resolve(resolver, $name)?, )*
                    warnings: Vec::new(),
                    files: Vec::new(),
                })
            }
        }
    };
}

config_sections! {
    /// Node identity, logging, paths, the RPC transport and periodic tasks.
    default: DefaultSection = "DEFAULT",
    /// The REST API service.
    api: ApiSection = "api",
    /// The conductor service.
    conductor: ConductorSection = "conductor",
    /// The SQL database.
    database: DatabaseSection = "database",
    /// Magnum's service credentials and the session settings of OpenStack API calls.
    keystone_auth: KeystoneAuthSection = "keystone_auth",
    /// Validation of the tokens of API requests.
    keystone_authtoken: KeystoneAuthtokenSection = "keystone_authtoken",
    /// Notifications.
    oslo_messaging_notifications: OsloMessagingNotificationsSection =
        "oslo_messaging_notifications",
    /// The RabbitMQ driver of the transport.
    oslo_messaging_rabbit: OsloMessagingRabbitSection = "oslo_messaging_rabbit",
    /// API access policy.
    oslo_policy: OsloPolicySection = "oslo_policy",
    /// CADF audit notifications.
    audit: AuditSection = "audit",
    /// Where cluster certificates are stored.
    certificates: CertificatesSection = "certificates",
    /// What certificates signed by a cluster CA may contain.
    x509: X509Section = "x509",
    /// Cluster-wide settings.
    cluster: ClusterSection = "cluster",
    /// Defaults and limits of cluster templates.
    cluster_template: ClusterTemplateSection = "cluster_template",
    /// Which cluster drivers are available.
    drivers: DriversSection = "drivers",
    /// Kubernetes clusters.
    kubernetes: KubernetesSection = "kubernetes",
    /// Default quotas.
    quotas: QuotasSection = "quotas",
    /// Volumes of cluster nodes.
    cinder: CinderSection = "cinder",
    /// The Barbican (secret store) client.
    barbican_client: ClientSection = "barbican_client",
    /// The Glance (image) client.
    glance_client: ClientSection = "glance_client",
    /// The Nova (compute) client.
    nova_client: ClientSection = "nova_client",
    /// The Neutron (network) client.
    neutron_client: ClientSection = "neutron_client",
    /// The Cinder (volume) client.
    cinder_client: ClientSection = "cinder_client",
    /// The Magnum client (used by clusters to call back).
    magnum_client: ClientSection = "magnum_client",
    /// The Octavia (load balancer) client.
    octavia_client: OctaviaClientSection = "octavia_client",
    /// Docker API access (legacy, ignored).
    docker: DockerSection = "docker",
    /// Swift-backed registry (legacy, ignored).
    docker_registry: DockerRegistrySection = "docker_registry",
    /// Trustee users and trusts (removed upstream, ignored).
    trust: TrustSection = "trust",
    /// OSProfiler tracing.
    profiler: ProfilerSection = "profiler",
    /// The simulated cluster driver.
    simulated_driver: SimulatedDriverSection = "simulated_driver",
    /// Prometheus metrics.
    metrics: MetricsSection = "metrics",
    /// How Cluster API workload clusters reach OpenStack.
    /// The Cluster API driver's management cluster.
    cluster_api: ClusterApiSection = "cluster_api",
    capi_client: CapiClientSection = "capi_client",
    /// The cluster autoscaler of Cluster API clusters.
    auto_scaling: AutoScalingSection = "auto_scaling",
    /// Manila access for share storage classes.
    manila_client: ManilaClientSection = "manila_client",
    /// The HAProxy-based API proxy of Cluster API clusters.
    proxy: ProxySection = "proxy",
}

impl Default for Config {
    /// Every option at its default, with `$name` references expanded.
    fn default() -> Self {
        // Resolving no file cannot fail unless a declared default is invalid, which the
        // tests rule out; the unexpanded defaults are a safe fallback all the same.
        Self::from_files(Vec::new(), Vec::new()).unwrap_or_else(|_| Self::unresolved_defaults())
    }
}

impl Config {
    /// Reads `config_files` in order, then every `*.conf` file of each of `config_dirs` in
    /// name order (later files override earlier ones). A file or directory given here that
    /// does not exist is an error.
    pub fn load(config_files: &[PathBuf], config_dirs: &[PathBuf]) -> Result<Self, ConfigError> {
        let mut paths: Vec<PathBuf> = config_files.to_vec();
        for dir in config_dirs {
            paths.extend(conf_files_in(dir)?);
        }
        let files = paths
            .iter()
            .map(|path| read_file(path))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_files(files, paths)
    }

    /// Parses one configuration given as text (tests, embedded defaults).
    pub fn from_ini_str(text: &str) -> Result<Self, ConfigError> {
        Self::from_files(vec![IniFile::parse("<string>", text)?], Vec::new())
    }

    fn from_files(files: Vec<IniFile>, paths: Vec<PathBuf>) -> Result<Self, ConfigError> {
        let registry = Registry {
            sections: Self::section_infos(),
        };
        let mut warnings = registry.warnings(&files);
        let mut resolver = Resolver::new(&registry, &files);
        let mut config = Self::resolve(&mut resolver)?;
        warnings.extend(resolver.into_warnings());
        config.warnings = warnings;
        config.files = paths;
        Ok(config)
    }

    /// Unknown sections and options, deprecated option names and ignored bad values of
    /// legacy options, e.g. `unknown option [api] foo ignored`. Never contains a secret.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// The files that were read, in the order they were read.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

fn read_file(path: &Path) -> Result<IniFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => ConfigError::FileNotFound {
            path: path.to_owned(),
        },
        _ => ConfigError::Read {
            path: path.to_owned(),
            source,
        },
    })?;
    IniFile::parse(&path.display().to_string(), &text)
}

/// The `*.conf` files of `dir`, sorted, as oslo's `glob(dir/*.conf)`: hidden files excluded.
fn conf_files_in(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries = std::fs::read_dir(dir).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => ConfigError::DirNotFound {
            path: dir.to_owned(),
        },
        _ => ConfigError::Read {
            path: dir.to_owned(),
            source,
        },
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ConfigError::Read {
            path: dir.to_owned(),
            source,
        })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        if name.ends_with(".conf") && !name.starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Where oslo.config looks when no `--config-file` is given: the first of `~/.magnum/`,
/// `~/`, `/etc/magnum/`, `/etc/` holding `magnum.conf`, then likewise for `<prog>.conf`.
pub fn default_config_files(prog: Option<&str>) -> Vec<PathBuf> {
    search_default_locations(prog, ".conf", Path::is_file)
}

/// Where oslo.config looks when no `--config-dir` is given: `magnum.conf.d` and
/// `<prog>.conf.d` in the same places as [`default_config_files`].
pub fn default_config_dirs(prog: Option<&str>) -> Vec<PathBuf> {
    search_default_locations(prog, ".conf.d", Path::is_dir)
}

fn search_default_locations(
    prog: Option<&str>,
    extension: &str,
    exists: fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(home) = &home {
        dirs.push(home.join(".magnum"));
        dirs.push(home.clone());
    }
    dirs.push(PathBuf::from("/etc/magnum"));
    dirs.push(PathBuf::from("/etc"));
    let mut names = vec!["magnum"];
    names.extend(prog.filter(|p| *p != "magnum"));
    names
        .into_iter()
        .filter_map(|name| {
            dirs.iter()
                .map(|d| d.join(format!("{name}{extension}")))
                .find(|p| exists(p))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A scratch directory removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "magnum-core-config-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&path).unwrap();
            Self(path)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn load(text: &str) -> Config {
        Config::from_ini_str(text).unwrap()
    }

    fn load_err(text: &str) -> String {
        Config::from_ini_str(text).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let cfg = Config::default();
        assert_eq!(cfg, load(""));
        assert!(cfg.warnings().is_empty());
        assert_eq!(cfg.api.port, 9511);
        assert_eq!(cfg.api.host, "127.0.0.1");
        assert_eq!(cfg.api.auth_strategy, "keystone");
        assert_eq!(
            cfg.database.connection.expose(),
            "sqlite:////var/lib/magnum/magnum.sqlite"
        );
        assert_eq!(cfg.database.db_max_retries, 20);
        assert_eq!(cfg.default.control_exchange, "magnum");
        assert!(!cfg.default.host.is_empty());
        assert_eq!(cfg.default.bindir, "/bin");
        assert_eq!(cfg.keystone_auth.auth_type, "password");
        assert_eq!(cfg.keystone_auth.timeout, 30.0);
        assert_eq!(cfg.keystone_authtoken.service_token_roles, ["service"]);
        assert_eq!(cfg.oslo_messaging_notifications.topics, ["notifications"]);
        assert!(cfg.oslo_messaging_notifications.driver.is_empty());
        assert_eq!(cfg.oslo_policy.policy_dirs, ["policy.d"]);
        assert_eq!(
            cfg.x509.allowed_extensions,
            [
                "keyUsage",
                "extendedKeyUsage",
                "subjectAltName",
                "basicConstraints",
                "subjectKeyIdentifier"
            ]
        );
        assert_eq!(cfg.simulated_driver.create_delay, 2.0);
        assert_eq!(cfg.nova_client.endpoint_type, "publicURL");
        assert!(cfg.api.workers >= 1);
        assert!(cfg.files().is_empty());
    }

    #[test]
    fn declared_defaults_parse_back_to_themselves() {
        // Every rendered default must be accepted by its own parser, or a `$name` reference
        // to it (or the sample) would carry a value the loader rejects.
        let mut text = String::new();
        for section in Config::section_infos() {
            text.push_str(&format!("[{}]\n", section.name));
            for option in &section.options {
                for value in &option.default {
                    text.push_str(&format!("{} = {value}\n", option.name));
                }
            }
        }
        let mut cfg = load(&text);
        // Options magnumd does not use are named in one line; none is unknown.
        let warnings = std::mem::take(&mut cfg.warnings);
        assert!(
            warnings.len() == 1 && !warnings[0].contains(" unknown "),
            "{warnings:?}"
        );
        assert_eq!(cfg, Config::default());
    }

    #[test]
    fn typed_values() {
        let cfg = load(
            "[DEFAULT]\nhost = conductor-1\ndebug = yes\ntransport_url = rabbit://u:p@h:5672/\n\
             [api]\nport = 8080\nenabled_ssl = On\nworkers = 0\n\
             [database]\nconnection = mysql+pymysql://magnum:pw@db/magnum\nmax_retries = -1\n\
             [x509]\nallowed_extensions = keyUsage , subjectAltName\n\
             [drivers]\ndisabled_drivers =\n\
             [simulated_driver]\ncreate_delay = 0.5\n\
             [oslo_messaging_notifications]\ndriver = messagingv2\ndriver = log\n",
        );
        assert_eq!(cfg.default.host, "conductor-1");
        assert!(cfg.default.debug);
        assert_eq!(
            cfg.default.transport_url.as_ref().map(Secret::expose),
            Some("rabbit://u:p@h:5672/")
        );
        assert_eq!(cfg.api.port, 8080);
        assert!(cfg.api.enabled_ssl);
        assert_eq!(cfg.api.workers, 0);
        assert!(cfg.api.effective_workers() >= 1);
        assert_eq!(
            cfg.database.connection.redacted_url(),
            "mysql+pymysql://magnum:****@db/magnum"
        );
        assert_eq!(cfg.database.max_retries, -1);
        assert_eq!(cfg.x509.allowed_extensions, ["keyUsage", "subjectAltName"]);
        assert!(cfg.drivers.disabled_drivers.is_empty());
        assert_eq!(cfg.simulated_driver.create_delay, 0.5);
        assert_eq!(
            cfg.oslo_messaging_notifications.driver,
            ["messagingv2", "log"]
        );
    }

    #[test]
    fn devstack_style_file_loads_and_names_what_it_ignores() {
        let cfg = load(
            "[DEFAULT]\nstate_path = /opt/stack/data/magnum\ndebug = True\nhost = devstack\n\
             bindir = /usr/local/bin\nssl_cert_file = /c.pem\nssl_key_file = /k.pem\n\
             transport_url = rabbit://stackrabbit:secret@10.0.0.5:5672/\n\
             logging_context_format_string = %(color)s%(levelname)s %(name)s [%(request_id)s] %(message)s\n\
             [api]\nhost = 10.0.0.5\n\
             [database]\nconnection = mysql+pymysql://root:secret@127.0.0.1/magnum?charset=utf8\n\
             [oslo_policy]\npolicy_file = /etc/magnum/policy.yaml\nenforce_new_defaults = True\n\
             [oslo_messaging_notifications]\ndriver = messaging\n\
             [oslo_concurrency]\nlock_path = /opt/stack/data/magnum\n\
             [keystone_auth]\nauth_type = password\nusername = magnum\npassword = secret\n\
             project_name = service\nproject_domain_id = default\nuser_domain_id = default\n\
             auth_url = http://10.0.0.5/identity/v3\n\
             [keystone_authtoken]\nauth_version = v3\nwww_authenticate_uri = http://10.0.0.5/identity\n\
             auth_url = http://10.0.0.5/identity\ninterface = public\nauth_type = password\n\
             username = magnum\nuser_domain_name = Default\npassword = secret\n\
             project_name = service\nproject_domain_name = Default\ncafile = /ca.pem\n\
             memcached_servers = localhost:11211\nservice_token_roles_required = True\n\
             signing_dir = /var/cache/magnum\n\
             [trust]\ncluster_user_trust = True\ntrustee_domain_name = magnum\n\
             trustee_domain_admin_name = trustee_domain_admin\n\
             trustee_domain_admin_password = secret\ntrustee_keystone_interface = public\n\
             [cluster]\ntemp_cache_dir = /var/lib/magnum/certificate-cache\n\
             [certificates]\ncert_manager_type = barbican\n\
             [cinder_client]\nregion_name = RegionOne\n\
             [cinder]\ndefault_docker_volume_type = lvmdriver-1\n\
             [drivers]\nverify_ca = true\nopenstack_ca_file = /ca.pem\nenabled_beta_drivers = \n\
             [kubernetes]\nkeystone_auth_default_policy = /etc/magnum/keystone_auth_default_policy.json\n\
             [docker_registry]\nswift_region = RegionOne\nswift_registry_container = docker_registry\n",
        );
        // One line names every option without effect; nothing is unknown.
        assert_eq!(
            cfg.warnings(),
            [
                "configuration options ignored: 20 without effect in magnumd ([DEFAULT] bindir, \
                 [DEFAULT] ssl_cert_file, [DEFAULT] ssl_key_file, \
                 [DEFAULT] logging_context_format_string, [oslo_concurrency] lock_path, \
                 [keystone_authtoken] auth_version, [keystone_authtoken] memcached_servers, \
                 [keystone_authtoken] signing_dir, [trust] cluster_user_trust, \
                 [trust] trustee_domain_name, [trust] trustee_domain_admin_name, \
                 [trust] trustee_domain_admin_password, [trust] trustee_keystone_interface, \
                 [cluster] temp_cache_dir, [cinder] default_docker_volume_type, \
                 [drivers] verify_ca, [drivers] openstack_ca_file, \
                 [kubernetes] keystone_auth_default_policy, [docker_registry] swift_region, \
                 [docker_registry] swift_registry_container)"
            ]
        );
        assert_eq!(cfg.default.host, "devstack");
        assert!(cfg.keystone_authtoken.service_token_roles_required);
        assert_eq!(
            cfg.default
                .transport_url
                .as_ref()
                .map(Secret::redacted_url)
                .as_deref(),
            Some("rabbit://stackrabbit:****@10.0.0.5:5672/")
        );
    }

    #[test]
    fn last_occurrence_wins_for_single_valued_options() {
        let cfg = load("[api]\nport = 1000\nport = 2000\n[conductor]\n[api]\nport = 3000\n");
        assert_eq!(cfg.api.port, 3000);
    }

    #[test]
    fn section_names_fold_case_except_default() {
        let cfg = load("[API]\nport = 1234\n[default]\ndebug = true\n");
        assert_eq!(cfg.api.port, 1234);
        assert!(!cfg.default.debug);
        assert_eq!(
            cfg.warnings(),
            ["configuration options ignored: 1 unknown ([default] debug)"]
        );
    }

    #[test]
    fn continuation_and_quotes_reach_typed_values() {
        let cfg = load(
            "[x509]\nallowed_key_usage = Digital Signature,\n    Key Encipherment\n\
             [DEFAULT]\nlog_file = \"/var/log/magnum/magnum api.log\"\n",
        );
        assert_eq!(
            cfg.x509.allowed_key_usage,
            ["Digital Signature", "Key Encipherment"]
        );
        assert_eq!(
            cfg.default.log_file.as_deref(),
            Some("/var/log/magnum/magnum api.log")
        );
    }

    #[test]
    fn empty_number_keeps_the_default() {
        let cfg = load("[api]\nport =\n[simulated_driver]\ncreate_delay =\n");
        assert_eq!(cfg.api.port, 9511);
        assert_eq!(cfg.simulated_driver.create_delay, 2.0);
        // Also when a reference expands to nothing, as Python's int('') reads as unset.
        let cfg = load("[api]\nmax_limit = $tempdir\n");
        assert_eq!(cfg.api.max_limit, 1000);
        // Booleans have no such rule.
        assert_eq!(
            load_err("[api]\nenabled_ssl =\n"),
            "invalid value for [api] enabled_ssl: '' is not a boolean (use true/false, yes/no, on/off or 1/0)"
        );
    }

    #[test]
    fn an_integer_option_without_a_default() {
        assert_eq!(load("").database.mysql_wsrep_sync_wait, None);
        let cfg = load("[database]\nmysql_wsrep_sync_wait = 1\n");
        assert_eq!(cfg.database.mysql_wsrep_sync_wait, Some(1));
        assert_eq!(
            load("[database]\nmysql_wsrep_sync_wait =\n")
                .database
                .mysql_wsrep_sync_wait,
            None
        );
        assert!(
            load_err("[database]\nmysql_wsrep_sync_wait = -1\n").contains("mysql_wsrep_sync_wait"),
        );
    }

    #[test]
    fn substitution() {
        let cfg = load(
            "[DEFAULT]\nstate_path = /srv/magnum\nlog_dir = $state_path/log\n\
             log_file = ${log_dir}/magnum.log\n\
             [database]\nmysql_sql_mode = $$state_path \\$x a$ ${b\n\
             [certificates]\nstorage_path = $state_path/certs\n\
             [cluster]\ntemp_cache_dir = ${certificates.storage_path}/cache-$api.port\n",
        );
        assert_eq!(cfg.default.log_dir.as_deref(), Some("/srv/magnum/log"));
        assert_eq!(
            cfg.default.log_file.as_deref(),
            Some("/srv/magnum/log/magnum.log")
        );
        assert_eq!(cfg.database.mysql_sql_mode, "$state_path $x a$ ${b");
        assert_eq!(cfg.certificates.storage_path, "/srv/magnum/certs");
        assert_eq!(cfg.cluster.temp_cache_dir, "/srv/magnum/certs/cache-9511");
        // The default database URL follows state_path.
        assert_eq!(
            cfg.database.connection.expose(),
            "sqlite:////srv/magnum/magnum.sqlite"
        );
    }

    #[test]
    fn substitution_prefers_the_same_section() {
        let cfg = load(
            "[DEFAULT]\nhost = node\n[api]\nhost = 10.0.0.1\nssl_cert_file = /c/${host}.pem\n",
        );
        assert_eq!(cfg.api.ssl_cert_file.as_deref(), Some("/c/10.0.0.1.pem"));
        let cfg = load("[DEFAULT]\nhost = node\n[conductor]\ntopic = magnum-$host\n");
        assert_eq!(cfg.conductor.topic, "magnum-node");
    }

    #[test]
    fn substitution_of_unset_option_is_empty() {
        let cfg = load("[DEFAULT]\nlog_file = x${tempdir}.log\n");
        assert_eq!(cfg.default.log_file.as_deref(), Some("x.log"));
        // Accepted library options may be referred to as well.
        let cfg = load("[DEFAULT]\nuse_stderr = yes\nlog_file = $use_stderr\n");
        assert_eq!(cfg.default.log_file.as_deref(), Some("yes"));
    }

    #[test]
    fn substitution_errors() {
        assert_eq!(
            load_err("[api]\nssl_cert_file = $nope/cert\n"),
            "cannot substitute in [api] ssl_cert_file: $nope is not an option of [api] or [DEFAULT]"
        );
        assert_eq!(
            load_err("[DEFAULT]\nlog_file = $log_dir\nlog_dir = $log_file\n"),
            "cannot substitute in [DEFAULT] log_dir: $log_file forms a reference loop"
        );
        assert_eq!(
            load_err("[DEFAULT]\nlog_file = a$log_file\n"),
            "cannot substitute in [DEFAULT] log_file: $log_file forms a reference loop"
        );
        assert_eq!(
            load_err("[DEFAULT]\nlog_file = $nope\n"),
            "cannot substitute in [DEFAULT] log_file: $nope is not an option of [DEFAULT]"
        );
        // As in oslo, '.' continues a reference name: `$host.pem` is option pem of [host].
        assert_eq!(
            load_err("[DEFAULT]\nlog_file = /c/$host.pem\n"),
            "cannot substitute in [DEFAULT] log_file: $host.pem is not an option \
             (to follow a reference with '.', write ${host}.pem)"
        );
        // A substituted value is type-checked after substitution.
        assert_eq!(
            load_err("[DEFAULT]\nstate_path = x\n[api]\nport = $state_path\n"),
            "invalid value for [api] port: 'x' is not an integer"
        );
    }

    #[test]
    fn bad_values_name_section_option_and_value() {
        assert_eq!(
            load_err("[api]\nport = abc\n"),
            "invalid value for [api] port: 'abc' is not an integer"
        );
        assert_eq!(
            load_err("[api]\nport = 0\n"),
            "invalid value for [api] port: '0' is less than the minimum 1"
        );
        assert_eq!(
            load_err("[DEFAULT]\ndebug = maybe\n"),
            "invalid value for [DEFAULT] debug: 'maybe' is not a boolean (use true/false, yes/no, on/off or 1/0)"
        );
        assert_eq!(
            load_err("[api]\nauth_strategy = basic\n"),
            "invalid value for [api] auth_strategy: 'basic' is not one of: keystone, noauth"
        );
        assert_eq!(
            load_err("[simulated_driver]\ndelete_delay = soon\n"),
            "invalid value for [simulated_driver] delete_delay: 'soon' is not a number"
        );
        assert_eq!(
            load_err("[x509]\nallowed_key_usage = Digital Signature, Everything\n"),
            "invalid value for [x509] allowed_key_usage: 'Everything' is not one of: \
             Digital Signature, Non Repudiation, Key Encipherment, Data Encipherment, \
             Key Agreement, Certificate Sign, CRL Sign, Encipher Only, Decipher Only"
        );
        assert_eq!(
            load_err("[database]\nmax_pool_size = -1\n"),
            "invalid value for [database] max_pool_size: '-1' is less than the minimum 0"
        );
    }

    #[test]
    fn secrets_are_redacted_in_errors_debug_and_warnings() {
        let err = load_err(
            "[DEFAULT]\nstate_path = hunter2\n[database]\nconnection = $state_path$nope\n",
        );
        assert!(!err.contains("hunter2"), "{err}");
        // A bad value that came from a secret is hidden too.
        assert_eq!(
            load_err(
                "[database]\nconnection = mysql://u:hunter2@db\n[api]\nport = $database.connection\n"
            ),
            "invalid value for [api] port: '****' is not an integer"
        );
        assert_eq!(
            load_err(
                "[oslo_messaging_notifications]\ntransport_url = hunter2\nretry = $transport_url\n"
            ),
            "invalid value for [oslo_messaging_notifications] retry: '****' is not an integer"
        );
        let cfg = load(
            "[keystone_auth]\npassword = hunter2\n[database]\nconnection = mysql://u:hunter2@db/m\n\
             [trust]\ntrustee_domain_admin_password = hunter2\nroles = a\n",
        );
        let debug = format!("{cfg:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("****"));
        assert_eq!(
            cfg.keystone_auth.password.as_ref().map(Secret::expose),
            Some("hunter2")
        );
        assert!(cfg.warnings().iter().all(|w| !w.contains("hunter2")));
    }

    #[test]
    fn options_without_effect_and_unknown_ones_are_one_warning() {
        let cfg = load(
            "[DEFAULT]\nverbose = true\nfoo = 1\n[api]\nfoo = 2\nfoo = 3\nport = 1\n\
             [nonsense]\nx = 1\n[heat_client]\nregion_name = r\nca_file =\n[cors]\n\
             allowed_origin = *\n[keystone_authtoken]\nmemcached_servers = m:11211\n\
             auth_version = v3\n[trust]\ncluster_user_trust = true\n[docker]\n\
             api_insecure = true\n[database]\nmax_retries = -1\n[profiler]\nenabled = true\n",
        );
        assert_eq!(
            cfg.warnings(),
            [
                "configuration options ignored: 9 without effect in magnumd ([DEFAULT] verbose, \
                 [heat_client] region_name, [cors] allowed_origin, \
                 [keystone_authtoken] memcached_servers, [keystone_authtoken] auth_version, \
                 [trust] cluster_user_trust, [docker] api_insecure, [database] max_retries, \
                 [profiler] enabled); 3 unknown ([DEFAULT] foo, [api] foo, [nonsense] x)"
            ]
        );
        assert_eq!(cfg.api.port, 1);
        // Honoured options, and ones set empty, are not named.
        let cfg = load("[api]\nport = 1\n[glance_client]\nca_file =\nregion_name = r\n");
        assert!(cfg.warnings().is_empty(), "{:?}", cfg.warnings());
    }

    #[test]
    fn deprecated_names_are_read_with_a_warning() {
        let cfg = load("[keystone_auth]\ntenant_name = service\nuser_name = magnum\n");
        assert_eq!(cfg.keystone_auth.project_name.as_deref(), Some("service"));
        assert_eq!(cfg.keystone_auth.username.as_deref(), Some("magnum"));
        assert_eq!(
            cfg.warnings(),
            [
                "deprecated option [keystone_auth] tenant_name: use project_name instead",
                "deprecated option [keystone_auth] user_name: use username instead",
            ]
        );
        // The current name wins within one file.
        let cfg = load("[keystone_auth]\nproject_name = new\ntenant_name = old\n");
        assert_eq!(cfg.keystone_auth.project_name.as_deref(), Some("new"));
    }

    #[test]
    fn warnings_are_reported_once_and_hide_secrets() {
        let dir = TempDir::new();
        let a = dir.write("a.conf", "[api]\nfoo = hunter2\n[zzz]\n");
        let b = dir.write("b.conf", "[api]\nfoo = hunter2\n[zzz]\nx = 1\n[trust]\ntrustee_domain_admin_password = hunter2\nroles = a:b\n");
        let cfg = Config::load(&[a, b], &[]).unwrap();
        assert_eq!(
            cfg.warnings(),
            [
                "configuration options ignored: 2 without effect in magnumd \
                 ([trust] trustee_domain_admin_password, [trust] roles); \
                 3 unknown ([api] foo, [zzz], [zzz] x)"
            ]
        );
        // A legacy secret with a bad value is dropped without showing it.
        let cfg = load("[trust]\ntrustee_domain_admin_password = $nope\n");
        assert_eq!(cfg.trust.trustee_domain_admin_password, None);
        assert_eq!(
            cfg.warnings(),
            [
                "configuration options ignored: 1 without effect in magnumd \
                 ([trust] trustee_domain_admin_password)",
                "cannot substitute in [trust] trustee_domain_admin_password: $nope is not an \
              option of [trust] or [DEFAULT]; legacy option ignored, default kept"
            ]
        );
    }

    #[test]
    fn string_errors_name_the_origin() {
        assert_eq!(
            load_err("[api]\n port = 1\n"),
            "cannot parse <string> at line 2: unexpected continuation line"
        );
    }

    #[test]
    fn bad_legacy_values_only_warn() {
        let cfg = load("[docker]\ndefault_timeout = soon\n");
        assert_eq!(cfg.docker.default_timeout, 60);
        assert_eq!(
            cfg.warnings(),
            [
                "configuration options ignored: 1 without effect in magnumd \
                 ([docker] default_timeout)",
                "invalid value for [docker] default_timeout: 'soon' is not an integer; \
              legacy option ignored, default kept"
            ]
        );
    }

    #[test]
    fn files_and_dirs_in_oslo_order() {
        let dir = TempDir::new();
        let first = dir.write(
            "magnum.conf",
            "[api]\nport = 1001\nhost = 0.0.0.0\n[oslo_messaging_notifications]\ndriver = log\n",
        );
        let second = dir.write(
            "override.conf",
            "[api]\nport = 1002\nmax_limit = 5\n[oslo_messaging_notifications]\ndriver = noop\n",
        );
        dir.write("conf.d/20-b.conf", "[api]\nport = 1004\n[bogus]\n");
        dir.write("conf.d/10-a.conf", "[api]\nport = 1003\nmax_limit = 7\n");
        dir.write("conf.d/.hidden.conf", "[api]\nport = 9\n");
        dir.write("conf.d/notes.txt", "[api]\nport = 9\n");
        let conf_d = dir.0.join("conf.d");

        let cfg = Config::load(&[first.clone(), second.clone()], &[]).unwrap();
        assert_eq!(cfg.api.port, 1002);
        assert_eq!(cfg.api.host, "0.0.0.0");
        assert_eq!(cfg.api.max_limit, 5);
        assert_eq!(cfg.oslo_messaging_notifications.driver, ["log", "noop"]);

        let cfg = Config::load(&[second.clone(), first.clone()], &[]).unwrap();
        assert_eq!(cfg.api.port, 1001);

        // Directory files come after the files, sorted by name.
        let cfg = Config::load(
            &[first.clone(), second.clone()],
            std::slice::from_ref(&conf_d),
        )
        .unwrap();
        assert_eq!(cfg.api.port, 1004);
        assert_eq!(cfg.api.max_limit, 7);
        assert_eq!(
            cfg.files(),
            [
                first,
                second,
                conf_d.join("10-a.conf"),
                conf_d.join("20-b.conf")
            ]
        );
        assert_eq!(
            cfg.warnings(),
            ["configuration options ignored: 1 unknown ([bogus])"]
        );
    }

    #[test]
    fn newer_file_with_old_name_beats_older_file_with_new_name() {
        let dir = TempDir::new();
        let a = dir.write("a.conf", "[keystone_auth]\nproject_name = from-a\n");
        let b = dir.write("b.conf", "[keystone_auth]\ntenant_name = from-b\n");
        let cfg = Config::load(&[a, b], &[]).unwrap();
        assert_eq!(cfg.keystone_auth.project_name.as_deref(), Some("from-b"));
    }

    #[test]
    fn substitution_across_files() {
        let dir = TempDir::new();
        let a = dir.write(
            "a.conf",
            "[database]\nconnection = sqlite:///$state_path/m.db\n",
        );
        let b = dir.write("b.conf", "[DEFAULT]\nstate_path = /data\n");
        let cfg = Config::load(&[a, b], &[]).unwrap();
        assert_eq!(cfg.database.connection.expose(), "sqlite:////data/m.db");
    }

    #[test]
    fn missing_file_or_dir_is_an_error() {
        let dir = TempDir::new();
        let missing = dir.0.join("nope.conf");
        let err = Config::load(std::slice::from_ref(&missing), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("config file {} not found", missing.display())
        );
        let err = Config::load(&[], std::slice::from_ref(&missing)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("config directory {} not found", missing.display())
        );
        let bad = dir.write("bad.conf", "[api]\nport 1\n");
        let err = Config::load(std::slice::from_ref(&bad), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cannot parse {} at line 2: no ':' or '=' found in assignment",
                bad.display()
            )
        );
    }

    #[test]
    fn default_locations_exist_only_when_found() {
        // Whatever the machine has, every returned path exists and has the right name.
        for path in default_config_files(Some("magnum-api")) {
            assert!(path.is_file());
        }
        for path in default_config_dirs(None) {
            assert!(path.is_dir());
            assert!(path.ends_with("magnum.conf.d"));
        }
    }
}
