//! Every section and option of magnum.conf, declared once each.
//!
//! Help texts are ours. Options marked `legacy()` are accepted and ignored (they exist in
//! older files); `accept [..]` lists library options accepted silently without a type.

use std::collections::BTreeMap;

use super::registry::{opt, section};
use super::secret::Secret;

/// This machine's hostname, the default node name (upstream leaves it unset, which makes
/// every conductor share one heartbeat row).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Number of CPUs, the default worker count.
pub(crate) fn cpu_count() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Extensions a signed certificate may carry (`[x509] allowed_extensions`).
pub const X509_EXTENSIONS: &[&str] = &[
    "authorityKeyIdentifier",
    "subjectKeyIdentifier",
    "authorityInfoAccess",
    "basicConstraints",
    "cRLDistributionPoints",
    "certificatePolicies",
    "extendedKeyUsage",
    "OCSPNoCheck",
    "inhibitAnyPolicy",
    "keyUsage",
    "nameConstraints",
    "subjectAltName",
    "issuerAltName",
];

/// Key usages a signed certificate may carry (`[x509] allowed_key_usage`), in KeyUsage bit
/// order (RFC 5280 §4.2.1.3): the CSR signer indexes this list by bit number.
pub const X509_KEY_USAGES: &[&str] = &[
    "Digital Signature",
    "Non Repudiation",
    "Key Encipherment",
    "Data Encipherment",
    "Key Agreement",
    "Certificate Sign",
    "CRL Sign",
    "Encipher Only",
    "Decipher Only",
];

section! {
    /// `[DEFAULT]`: node identity, logging, paths, the RPC transport and periodic tasks.
    pub struct DefaultSection {
        /// Name of this node: the host of its service heartbeat row and the suffix of the
        /// notification publisher id. Any identifier valid in an AMQP routing key. Defaults to
        /// the machine's hostname.
        host: String = hostname(), opt().sample("<hostname of this machine>");
        /// Log at DEBUG level instead of INFO.
        debug: bool = false;
        /// Log to this file instead of standard error.
        log_file: Option<String> = None, opt().aliases(&["logfile"]);
        /// Directory for log_file when it is a relative path (alone: `<binary>.log` in it).
        log_dir: Option<String> = None, opt().aliases(&["logdir"]);
        /// Log JSON lines (with request id, user, project and cluster) instead of text.
        use_json: bool = false;
        /// Top-level directory for Magnum's state; `$state_path` in other values refers to it.
        state_path: String = "/var/lib/magnum".into();
        /// Messaging transport for RPC and notifications, e.g.
        /// rabbit://user:password@host:5672/vhost (several hosts may be given, separated by
        /// commas).
        transport_url: Option<Secret> = None;
        /// Seconds to wait for the reply to a synchronous RPC call.
        rpc_response_timeout: u32 = 60;
        /// AMQP exchange for RPC and notifications.
        control_exchange: String = "magnum".into();
        /// Maximum number of RPC requests a conductor worker handles concurrently.
        executor_thread_pool_size: u32 = 64, opt().min(1);
        /// Run the periodic cluster status and health pollers (the service heartbeat runs
        /// regardless).
        periodic_enable: bool = true;
        /// Longest sleep, in seconds, between two runs of the periodic task scheduler.
        periodic_interval_max: u32 = 60, opt().inert();
        /// A service whose last heartbeat is older (or further in the future) than this many
        /// seconds is reported as down.
        service_down_time: u32 = 180;
        /// Character groups used to generate passwords.
        password_symbols: Vec<String> = strings(&[
            "23456789",
            "ABCDEFGHJKLMNPQRSTUVWXYZ",
            "abcdefghijkmnopqrstuvwxyz",
        ]), opt().legacy();
        /// Temporary working directory.
        tempdir: Option<String> = None, opt().legacy();
        /// rootwrap configuration file for privileged commands.
        rootwrap_config: String = "/etc/magnum/rootwrap.conf".into(), opt().legacy();
        /// Largest manifest, in bytes, fetched by URL.
        max_manifest_size: u32 = 524_288, opt().legacy();
        /// Directory of the Python magnum package.
        pybasedir: Option<String> = None, opt().legacy();
        /// Directory of the Python magnum executables.
        bindir: String = "$pybasedir/bin".into(), opt().legacy();
    }
    accept [
        // oslo.log
        "verbose", "log_config_append", "log_config", "log-config", "log_date_format",
        "use_syslog", "use_journal", "syslog_log_facility", "use_stderr",
        "use_eventlog", "log_color",
        "log_rotate_interval", "log_rotate_interval_type", "max_logfile_count",
        "max_logfile_size_mb", "log_rotation_type", "logging_context_format_string",
        "logging_default_format_string", "logging_debug_format_suffix",
        "logging_exception_prefix", "logging_user_identity_format", "default_log_levels",
        "publish_errors", "instance_format", "instance_uuid_format", "rate_limit_interval",
        "rate_limit_burst", "rate_limit_except_level", "fatal_deprecations", "watch_log_file",
        // oslo.messaging
        "rpc_ping_enabled", "rpc_backend", "rpc_conn_pool_size",
        // oslo.service (the ssl_* are old [DEFAULT] names of its [ssl] options; devstack
        // still writes them)
        "run_external_periodic_tasks", "backdoor_port", "backdoor_socket", "log_options",
        "graceful_shutdown_timeout", "ssl_cert_file", "ssl_key_file", "ssl_ca_file",
    ]
}

section! {
    /// `[api]`: the REST API service.
    pub struct ApiSection {
        /// Address the API listens on.
        host: String = "127.0.0.1".into();
        /// Port the API listens on.
        port: u16 = 9511, opt().range(1, 65535);
        /// Largest number of items returned in one page of a collection.
        max_limit: u32 = 1000, opt().min(1);
        /// WSGI pipeline definition file.
        api_paste_config: String = "api-paste.ini".into(), opt().legacy();
        /// Serve HTTPS with ssl_cert_file and ssl_key_file.
        enabled_ssl: bool = false;
        /// TLS certificate (PEM) of the API when enabled_ssl is set.
        ssl_cert_file: Option<String> = None;
        /// TLS private key (PEM) of the API when enabled_ssl is set.
        ssl_key_file: Option<String> = None;
        /// Number of API workers; 0 means one per CPU. Defaults to the CPU count. magnum-rs
        /// runs one process with this many runtime threads (upstream forks processes).
        workers: u32 = cpu_count(), opt().sample("<number of CPUs>");
        /// How API requests are authenticated: keystone (validate X-Auth-Token) or noauth
        /// (trust the request, for tests only).
        auth_strategy: String = "keystone".into(), opt().choices(&["keystone", "noauth"]);
        /// Let the conductor, not the API, start cluster creation (the API only records the
        /// request).
        create_cluster_in_conductor: bool = false;
    }
}

impl ApiSection {
    /// The worker count to start: `workers`, or the CPU count when it is 0.
    pub fn effective_workers(&self) -> u32 {
        if self.workers == 0 {
            cpu_count()
        } else {
            self.workers
        }
    }
}

section! {
    /// `[conductor]`: the conductor service.
    pub struct ConductorSection {
        /// RPC topic the conductor consumes.
        topic: String = "magnum-conductor".into();
        /// Number of conductor workers; 0 means one per CPU. Defaults to the CPU count.
        /// magnum-rs runs one process with this many runtime threads (`magnumd serve`: the
        /// larger of this and `[api] workers`).
        workers: u32 = cpu_count(), opt().sample("<number of CPUs>");
        /// Seconds between two heartbeats of the conductor in the magnum_service table
        /// (magnum-rs; upstream beats every 60 seconds).
        report_interval: u32 = 60, opt().min(1);
        /// Seconds between two sweeps over in-progress clusters, the safety net behind the
        /// status changes drivers report as they happen (magnum-rs; upstream polls every 10
        /// seconds).
        sync_interval: u32 = 10, opt().min(1);
    }
    accept ["conductor_life_check_timeout"]
}

impl ConductorSection {
    /// The worker count to start: `workers`, or the CPU count when it is 0.
    pub fn effective_workers(&self) -> u32 {
        if self.workers == 0 {
            cpu_count()
        } else {
            self.workers
        }
    }
}

section! {
    /// `[database]`: the SQL database (oslo.db options).
    pub struct DatabaseSection {
        /// Database URL, e.g. mysql+pymysql://magnum:password@host/magnum.
        connection: Secret = "sqlite:///$state_path/magnum.sqlite".into();
        /// Database URL of a read-only replica.
        slave_connection: Option<Secret> = None, opt().inert();
        /// SQL mode set on MySQL sessions; empty leaves the server default.
        mysql_sql_mode: String = "TRADITIONAL".into();
        /// Galera: wsrep_sync_wait set on every new MySQL session (1: reads wait until the
        /// node has applied what the cluster committed); unset leaves the server's value.
        mysql_wsrep_sync_wait: Option<u32> = None;
        /// MySQL storage engine for new tables.
        mysql_engine: String = "InnoDB".into(), opt().legacy();
        /// Largest number of open connections kept in the pool.
        max_pool_size: u32 = 5;
        /// Connections allowed beyond max_pool_size; -1 means no limit.
        max_overflow: i64 = 50, opt().min(-1);
        /// Seconds to wait for a free connection from the pool.
        pool_timeout: u32 = 30;
        /// Seconds after which a pooled connection is replaced; -1 means never.
        connection_recycle_time: i64 = 3600, opt().min(-1);
        /// Connection attempts at startup; -1 means retry forever.
        max_retries: i64 = 10, opt().min(-1).inert();
        /// Seconds between connection attempts at startup.
        retry_interval: u32 = 10, opt().inert();
        /// Retries of a transaction that failed on a lost connection or a deadlock; -1 means
        /// retry forever.
        db_max_retries: i64 = 20, opt().min(-1);
        /// Seconds before the first transaction retry.
        db_retry_interval: u32 = 1;
        /// Double the wait after each transaction retry, up to db_max_retry_interval.
        db_inc_retry_interval: bool = true;
        /// Longest wait, in seconds, between transaction retries.
        db_max_retry_interval: u32 = 10;
    }
    accept [
        "backend", "sqlite_synchronous", "sqlite_db", "asyncio_connection",
        "asyncio_slave_connection", "synchronous_reader",
        "mysql_enable_ndb", "connection_debug", "connection_trace", "use_db_reconnect",
        "connection_parameters", "min_pool_size", "pool_pre_ping", "use_tpool",
    ]
}

section! {
    /// `[keystone_auth]`: Magnum's own service credentials and the session settings used
    /// for every OpenStack API call (keystoneauth password plugin and session options).
    pub struct KeystoneAuthSection {
        /// Authentication plugin of the service user.
        auth_type: String = "password".into(), opt().aliases(&["auth_plugin"]);
        /// Keystone URL; also used to validate the tokens of user requests.
        auth_url: Option<String> = None;
        /// Service user name.
        username: Option<String> = None, opt().aliases(&["user_name"]);
        /// Service user id.
        user_id: Option<String> = None;
        /// Service user password.
        password: Option<Secret> = None;
        /// Domain name of the service user.
        user_domain_name: Option<String> = None;
        /// Domain id of the service user.
        user_domain_id: Option<String> = None;
        /// Project to scope the service token to, by name.
        project_name: Option<String> = None, opt().aliases(&["tenant_name"]);
        /// Project to scope the service token to, by id.
        project_id: Option<String> = None, opt().aliases(&["tenant_id"]);
        /// Domain name of the project.
        project_domain_name: Option<String> = None;
        /// Domain id of the project.
        project_domain_id: Option<String> = None;
        /// Domain to scope the service token to, by name.
        domain_name: Option<String> = None;
        /// Domain to scope the service token to, by id.
        domain_id: Option<String> = None;
        /// System scope of the service token, e.g. all.
        system_scope: Option<String> = None;
        /// Trust to scope the service token to.
        trust_id: Option<String> = None, opt().inert();
        /// Application credential id (`auth_type = v3applicationcredential`).
        application_credential_id: Option<String> = None;
        /// Application credential name, with the user that owns it.
        application_credential_name: Option<String> = None;
        /// Application credential secret.
        application_credential_secret: Option<Secret> = None;
        /// Domain id used when neither user nor project domain is given.
        default_domain_id: Option<String> = None;
        /// Domain name used when neither user nor project domain is given.
        default_domain_name: Option<String> = None;
        /// CA bundle (PEM) for verifying OpenStack API certificates.
        cafile: Option<String> = None;
        /// Client certificate (PEM) for OpenStack API calls.
        certfile: Option<String> = None, opt().inert();
        /// Client private key (PEM) for OpenStack API calls.
        keyfile: Option<String> = None, opt().inert();
        /// Do not verify OpenStack API certificates.
        insecure: bool = false;
        /// Timeout, in seconds, of each OpenStack API call. Upstream has none by default;
        /// magnum-rs waits at most 30 seconds.
        timeout: f64 = 30.0, opt().min(0);
        /// Record the time of each API call.
        collect_timing: bool = false, opt().inert();
        /// Log API requests and responses to separate loggers.
        split_loggers: bool = false, opt().inert();
    }
    accept ["auth_section", "tls_ciphers", "tls_min_version"]
}

section! {
    /// `[keystone_authtoken]`: validation of the tokens of API requests (keystonemiddleware
    /// options).
    pub struct KeystoneAuthtokenSection {
        /// Public Keystone URL sent to unauthenticated clients; also the Keystone URL when
        /// `[keystone_auth] auth_url` is empty.
        www_authenticate_uri: Option<String> = None;
        /// Keystone URL for the credentials below.
        auth_url: Option<String> = None;
        /// Authentication plugin of the credentials below.
        auth_type: Option<String> = None, opt().aliases(&["auth_plugin"]);
        /// User that validates tokens.
        username: Option<String> = None, opt().aliases(&["user_name"]);
        /// Password of that user.
        password: Option<Secret> = None;
        /// Domain name of that user.
        user_domain_name: Option<String> = None;
        /// Project of that user.
        project_name: Option<String> = None, opt().aliases(&["tenant_name"]);
        /// Domain name of that project.
        project_domain_name: Option<String> = None;
        /// memcached servers for the token cache (ignored: tokens are cached in memory).
        memcached_servers: Vec<String> = Vec::new(), opt().legacy().aliases(&["memcache_servers"]);
        /// Seconds a validated token stays cached; -1 disables the cache.
        token_cache_time: i64 = 300, opt().min(-1);
        /// A service token must carry one of these roles.
        service_token_roles: Vec<String> = strings(&["service"]);
        /// Reject service tokens without one of service_token_roles (otherwise only warn).
        service_token_roles_required: bool = false;
        /// Pass unauthenticated requests on instead of rejecting them.
        delay_auth_decision: bool = false, opt().inert();
        /// Catalog interface of the Keystone endpoint used for validation.
        interface: String = "internal".into();
        /// Region of the Keystone endpoint used for validation.
        region_name: Option<String> = None;
        /// CA bundle (PEM) for verifying Keystone's certificate.
        cafile: Option<String> = None;
        /// Client certificate (PEM) for Keystone.
        certfile: Option<String> = None, opt().inert();
        /// Client private key (PEM) for Keystone.
        keyfile: Option<String> = None, opt().inert();
        /// Do not verify Keystone's certificate.
        insecure: bool = false;
    }
    accept [
        "auth_section", "auth_version", "http_connect_timeout", "http_request_max_retries",
        "cache", "include_service_catalog", "enforce_token_bind", "service_type",
        "memcache_security_strategy", "memcache_secret_key", "memcache_tls_enabled",
        "memcache_tls_cafile", "memcache_tls_certfile", "memcache_tls_keyfile",
        "memcache_tls_allowed_ciphers", "memcache_pool_dead_retry", "memcache_pool_maxsize",
        "memcache_pool_socket_timeout", "memcache_pool_unused_timeout",
        "memcache_pool_conn_get_timeout", "memcache_use_advanced_pool",
        "memcache_sasl_enabled", "memcache_username", "memcache_password",
        "user_id", "user_domain_id", "project_id", "tenant_id", "project_domain_id",
        "domain_id", "domain_name", "system_scope", "trust_id", "default_domain_id",
        "default_domain_name",
        "admin_user", "admin_password", "admin_tenant_name", "admin_token", "identity_uri",
        "auth_host", "auth_port", "auth_protocol", "auth_admin_prefix", "signing_dir",
        "hash_algorithms", "check_revocations_for_cached", "revocation_cache_time",
        "timeout", "collect_timing", "split_loggers",
    ]
}

section! {
    /// `[oslo_messaging_notifications]`: notifications about clusters and templates.
    pub struct OsloMessagingNotificationsSection {
        /// Notification drivers: messaging, messagingv2, log, noop or routing. Repeat the line
        /// for several; none turns notifications off.
        driver: Vec<String> = Vec::new(), opt().multi();
        /// Topic prefixes (notifications go to TOPIC.info, TOPIC.error, ...).
        topics: Vec<String> = strings(&["notifications"]);
        /// Transport for notifications; the RPC transport_url when unset.
        transport_url: Option<Secret> = None;
        /// Times to retry sending a notification; -1 retries forever.
        retry: i64 = -1, opt().min(-1).inert();
    }
}

section! {
    /// `[oslo_messaging_rabbit]`: the RabbitMQ driver of the transport.
    pub struct OsloMessagingRabbitSection {
        /// Declare queues and exchanges durable.
        amqp_durable_queues: bool = false;
        /// Delete queues and exchanges when their last consumer goes away.
        amqp_auto_delete: bool = false;
        /// Declare classic queues mirrored (x-ha-policy: all).
        rabbit_ha_queues: bool = false;
        /// Declare quorum queues instead of classic ones.
        rabbit_quorum_queue: bool = false;
        /// Declare the transient queues (replies, fanout) as quorum queues too.
        rabbit_transient_quorum_queue: bool = false;
        /// `x-delivery-limit` of quorum queues; 0 sets none.
        rabbit_quorum_delivery_limit: u32 = 0;
        /// `x-max-in-memory-length` of quorum queues; 0 sets none.
        rabbit_quorum_max_memory_length: u32 = 0;
        /// `x-max-in-memory-bytes` of quorum queues; 0 sets none.
        rabbit_quorum_max_memory_bytes: u64 = 0;
        /// Seconds an unused reply or fanout queue lives (`x-expires`); 0 keeps it.
        rabbit_transient_queues_ttl: u32 = 1800;
        /// Messages a consumer may hold unacknowledged; 0 is no limit.
        rabbit_qos_prefetch_count: u32 = 0;
        /// Seconds without a heartbeat after which the connection is considered dead; 0
        /// disables heartbeats.
        heartbeat_timeout_threshold: u32 = 60;
        /// Connect with TLS.
        ssl: bool = false;
        /// CA bundle (PEM) for verifying the broker.
        ssl_ca_file: String = String::new();
        /// Client certificate (PEM) for the broker.
        ssl_cert_file: String = String::new();
        /// Client private key (PEM) for the broker.
        ssl_key_file: String = String::new();
        /// Seconds before the first reconnection attempt.
        rabbit_retry_interval: u32 = 1;
        /// Seconds added to the wait after each failed reconnection attempt.
        rabbit_retry_backoff: u32 = 2;
        /// Longest wait, in seconds, between reconnection attempts.
        rabbit_interval_max: u32 = 30;
        /// Fail a reply to a caller that no longer listens instead of dropping it silently.
        direct_mandatory_flag: bool = true;
    }
    accept [
        "rpc_conn_pool_size", "conn_pool_min_size", "conn_pool_ttl", "ssl_version",
        "ssl_enforce_hostname_verification", "ssl_enforce_fips_mode", "kombu_reconnect_delay",
        "kombu_reconnect_splay", "kombu_compression", "kombu_missing_consumer_retry_timeout",
        "kombu_failover_strategy", "rabbit_login_method", "heartbeat_rate",
        "heartbeat_in_pthread",
        "enable_cancel_on_failover", "use_queue_manager", "hostname", "processname",
        "rabbit_stream_fanout", "rabbit_host", "rabbit_hosts", "rabbit_port", "rabbit_userid",
        "rabbit_password", "rabbit_virtual_host", "rabbit_use_ssl", "kombu_ssl_version",
        "kombu_ssl_keyfile", "kombu_ssl_certfile", "kombu_ssl_ca_certs",
    ]
}

section! {
    /// `[oslo_policy]`: API access policy.
    pub struct OsloPolicySection {
        /// Policy overrides file (YAML); a relative path is looked up next to the config files.
        policy_file: String = "policy.yaml".into();
        /// Check the scope of tokens against the scope types of each rule.
        enforce_scope: bool = true;
        /// Use the new default rules (with reader roles) rather than the deprecated ones.
        enforce_new_defaults: bool = true;
        /// Directories of further policy files, read in order after policy_file.
        policy_dirs: Vec<String> = strings(&["policy.d"]), opt().multi();
    }
    accept [
        "policy_default_rule", "remote_content_type", "remote_ssl_verify_server_crt",
        "remote_ssl_ca_crt_file", "remote_ssl_client_crt_file", "remote_ssl_client_key_file",
        "remote_timeout",
    ]
}

section! {
    /// `[audit]`: CADF audit notifications.
    pub struct AuditSection {
        /// Namespace hashed into CADF identifiers.
        namespace: String = "openstack".into();
    }
}

section! {
    /// `[certificates]`: where cluster CA and client certificates are stored.
    pub struct CertificatesSection {
        /// Certificate store: barbican, x509keypair (in the database) or local (files, for
        /// tests only).
        cert_manager_type: String = "barbican".into();
        /// Directory of the local certificate store.
        storage_path: String = "/var/lib/magnum/certificates/".into();
    }
}

section! {
    /// `[x509]`: what certificates signed by a cluster CA may contain.
    pub struct X509Section {
        /// Allow signed certificates to be CAs (CA:TRUE, certificate and CRL signing).
        allow_ca: bool = false;
        /// Extensions copied from a CSR into the certificate; others are dropped (and a CSR
        /// with another critical extension is rejected).
        allowed_extensions: Vec<String> = strings(&[
            "keyUsage",
            "extendedKeyUsage",
            "subjectAltName",
            "basicConstraints",
            "subjectKeyIdentifier",
        ]), opt().item_choices(X509_EXTENSIONS);
        /// Key usages allowed in signed certificates.
        allowed_key_usage: Vec<String> = strings(&[
            "Digital Signature",
            "Key Encipherment",
            "Non Repudiation",
        ]), opt().item_choices(X509_KEY_USAGES);
        /// Days a generated or signed certificate is valid (never beyond its CA).
        term_of_validity: u32 = 1825, opt().min(1);
        /// Size in bits of generated RSA keys.
        rsa_key_size: u32 = 2048, opt().min(1024);
    }
}

section! {
    /// `[cluster]`: cluster-wide settings.
    pub struct ClusterSection {
        /// Directory where client certificates for talking to workload clusters are cached,
        /// if it exists.
        temp_cache_dir: String = "/var/lib/magnum/certificate-cache".into(), opt().inert();
        /// Seconds to wait for the cluster's load balancers to be deleted.
        pre_delete_lb_timeout: u32 = 60, opt().inert();
        /// Server group policy of cluster nodes.
        nodes_affinity_policy: String = "soft-anti-affinity".into(), opt().legacy();
        /// URL of the public etcd discovery service.
        etcd_discovery_service_endpoint_format: String =
            "https://discovery.etcd.io/new?size=%(size)d".into(), opt().legacy();
    }
}

section! {
    /// `[cluster_template]`: defaults and limits of cluster templates.
    pub struct ClusterTemplateSection {
        /// Network drivers accepted in Kubernetes cluster templates.
        kubernetes_allowed_network_drivers: Vec<String> = strings(&["flannel", "calico"]);
        /// Network driver of Kubernetes cluster templates that name none.
        kubernetes_default_network_driver: String = "flannel".into();
    }
}

section! {
    /// `[drivers]`: which cluster drivers are available and how clusters reach OpenStack.
    pub struct DriversSection {
        /// Whether cluster nodes verify the TLS certificates of the OpenStack APIs.
        verify_ca: bool = true, opt().inert();
        /// CA bundle passed to and installed on cluster nodes.
        openstack_ca_file: String = String::new(), opt().inert();
        /// Drivers that may not be used, by entry point name.
        disabled_drivers: Vec<String> = Vec::new();
        /// Beta drivers that may be used, by entry point name.
        enabled_beta_drivers: Vec<String> = Vec::new();
        /// Driver of new cluster templates that name none (neither in the request nor in the
        /// image's magnum_driver property); the alphabetically first available when unset.
        default_driver: Option<String> = None;
    }
    accept ["send_cluster_metrics"]
}

section! {
    /// `[kubernetes]`: Kubernetes clusters.
    pub struct KubernetesSection {
        /// Default policy of the Keystone webhook in clusters using Keystone authentication.
        keystone_auth_default_policy: String =
            "/etc/magnum/keystone_auth_default_policy.json".into(), opt().inert();
        /// Seconds between health checks of each cluster; negative disables them.
        health_polling_interval: i64 = 60;
        /// Manifest applied after a cluster is created.
        post_install_manifest_url: String = String::new(), opt().legacy();
    }
}

section! {
    /// `[quotas]`: default quotas.
    pub struct QuotasSection {
        /// Clusters a project may have when no quota is set for it.
        max_clusters_per_project: u32 = 20;
    }
}

section! {
    /// `[cinder]`: volumes of cluster nodes.
    pub struct CinderSection {
        /// Volume type of boot volumes when the labels name none; empty uses Cinder's
        /// default.
        default_boot_volume_type: String = String::new(), opt().inert();
        /// Size in GB of boot volumes when the labels set none; 0 boots from the flavor's
        /// disk.
        default_boot_volume_size: u32 = 0;
        /// Volume type of container storage volumes.
        default_docker_volume_type: String = String::new(), opt().inert();
        /// Volume type of etcd volumes.
        default_etcd_volume_type: String = String::new(), opt().inert();
    }
}

section! {
    /// Catalog settings of one OpenStack service client.
    pub struct ClientSection {
        /// Catalog region of the service.
        region_name: Option<String> = None;
        /// Catalog interface of the service: publicURL, internalURL or adminURL (or public,
        /// internal, admin).
        endpoint_type: String = "publicURL".into();
    }
    accept ["api_version", "ca_file", "cert_file", "key_file", "insecure"]
}

section! {
    /// `[octavia_client]`: the Octavia (load balancer) client.
    pub struct OctaviaClientSection {
        /// Catalog region of Octavia.
        region_name: Option<String> = None;
        /// Catalog interface of Octavia: publicURL, internalURL or adminURL (or public,
        /// internal, admin).
        endpoint_type: String = "publicURL".into();
        /// CA bundle (PEM) for verifying Octavia's certificate.
        ca_file: Option<String> = None, opt().inert();
        /// Client certificate (PEM) for Octavia.
        cert_file: Option<String> = None, opt().inert();
        /// Client private key (PEM) for Octavia.
        key_file: Option<String> = None, opt().inert();
        /// Do not verify Octavia's certificate.
        insecure: bool = false, opt().inert();
    }
    accept ["api_version"]
}

section! {
    /// `[docker]`: Docker API access (Swarm-era; ignored).
    pub struct DockerSection {
        /// Docker remote API version.
        docker_remote_api_version: String = "1.21".into(), opt().legacy();
        /// Timeout in seconds of Docker API calls.
        default_timeout: u32 = 60, opt().legacy();
        /// Skip TLS verification of the Docker API.
        api_insecure: bool = false, opt().legacy();
        /// CA bundle for the Docker API.
        ca_file: Option<String> = None, opt().legacy();
        /// Client certificate for the Docker API.
        cert_file: Option<String> = None, opt().legacy();
        /// Client private key for the Docker API.
        key_file: Option<String> = None, opt().legacy();
    }
}

section! {
    /// `[docker_registry]`: Swift-backed registry (ignored).
    pub struct DockerRegistrySection {
        /// Swift region.
        swift_region: Option<String> = None, opt().legacy();
        /// Swift container holding the images.
        swift_registry_container: String = "docker_registry".into(), opt().legacy();
    }
}

section! {
    /// `[trust]`: trustee users and trusts (removed upstream in 2026; ignored).
    pub struct TrustSection {
        /// Give cluster nodes a trust to act as the cluster's user.
        cluster_user_trust: bool = false, opt().legacy();
        /// Domain of trustee users, by id.
        trustee_domain_id: Option<String> = None, opt().legacy();
        /// Domain of trustee users, by name.
        trustee_domain_name: Option<String> = None, opt().legacy();
        /// Admin of the trustee domain, by id.
        trustee_domain_admin_id: Option<String> = None, opt().legacy();
        /// Admin of the trustee domain, by name.
        trustee_domain_admin_name: Option<String> = None, opt().legacy();
        /// Domain of the trustee domain admin, by id.
        trustee_domain_admin_domain_id: Option<String> = None, opt().legacy();
        /// Domain of the trustee domain admin, by name.
        trustee_domain_admin_domain_name: Option<String> = None, opt().legacy();
        /// Password of the trustee domain admin.
        trustee_domain_admin_password: Option<Secret> = None, opt().legacy();
        /// Roles delegated by trusts.
        roles: Vec<String> = Vec::new(), opt().legacy();
        /// Catalog interface of Keystone for trustees.
        trustee_keystone_interface: String = "public".into(), opt().legacy();
        /// Catalog region of Keystone for trustees.
        trustee_keystone_region_name: Option<String> = None, opt().legacy();
    }
}

section! {
    /// `[profiler]`: OSProfiler tracing.
    pub struct ProfilerSection {
        /// Enable request tracing.
        enabled: bool = false;
        /// Trace SQL statements too.
        trace_sqlalchemy: bool = false;
        /// Keys that sign trace requests.
        hmac_keys: Option<Secret> = None;
    }
    accept [
        "trace_requests", "connection_string", "es_doc_type", "es_scroll_time",
        "es_scroll_size", "socket_timeout", "sentinel_service_name", "filter_error_trace",
    ]
}

section! {
    /// `[simulated_driver]`: the in-process cluster driver used for tests and demos.
    pub struct SimulatedDriverSection {
        /// Seconds a simulated cluster takes to be created.
        create_delay: f64 = 2.0, opt().min(0);
        /// Seconds a simulated cluster takes to be deleted.
        delete_delay: f64 = 1.0, opt().min(0);
        /// Seconds a simulated cluster takes to be updated.
        update_delay: f64 = 1.0, opt().min(0);
    }
}

section! {
    /// `[metrics]`: Prometheus metrics (magnum-rs only).
    pub struct MetricsSection {
        /// Serve the Prometheus text format at `/metrics` on the API's address, without
        /// authentication (restrict who reaches it at the network level).
        enabled: bool = false;
        /// `magnumd conductor` (which has no API) serves `/metrics` on this port when
        /// `enabled`; 0: not at all.
        conductor_port: u16 = 0;
        /// Address of the conductor's metrics listener.
        conductor_host: String = "127.0.0.1".into();
    }
}

section! {
    /// `[capi_client]`: how Cluster API workload clusters reach OpenStack.
    pub struct CapiClientSection {
        /// Catalog interface written into the workload cloud config (a trailing URL is
        /// dropped).
        endpoint_type: String = "publicURL".into();
        /// CA bundle placed in the workload cloud config.
        ca_file: Option<String> = None;
        /// Client certificate for the OpenStack APIs.
        cert_file: Option<String> = None, opt().inert();
        /// Client private key for the OpenStack APIs.
        key_file: Option<String> = None, opt().inert();
        /// Do not verify OpenStack API certificates from workload clusters.
        insecure: bool = false;
    }
}

section! {
    /// `[cluster_api]`: the Cluster API driver's management cluster (magnum-rs only).
    pub struct ClusterApiSection {
        /// Register the Cluster API driver (`k8s_capi`, and the magnum-cluster-api names so
        /// their clusters keep working).
        enabled: bool = false;
        /// kubeconfig of the management cluster; empty: the in-cluster service account when
        /// running in Kubernetes, else `$KUBECONFIG` or `~/.kube/config`.
        kubeconfig: String = String::new();
        /// kubeconfig context; empty: its current context.
        context: String = String::new();
        /// Namespace of every cluster's objects (magnum-cluster-api's).
        namespace: String = "magnum-system".into();
        /// Seconds a management-cluster request may take.
        request_timeout: u32 = 30, opt().min(1);
        /// Folder of addon manifests applied to every workload cluster through a
        /// ClusterResourceSet: `cni/<network_driver>.yaml`, `cloud-provider.yaml`,
        /// `csi-cinder.yaml` (each used when present); empty: no addons.
        addons_path: String = String::new();
        /// Install the CNI, the OpenStack cloud controller manager and the CSI drivers
        /// through Cluster API add-on provider for Helm (CAAPH) HelmChartProxies, one per
        /// add-on and cluster; needs CAAPH in the management cluster.
        addons_helm_enabled: bool = true;
        /// Chart repository used for every add-on chart instead of its public one (a mirror
        /// holding them all, `https://` or `oci://`, for air-gapped clouds); empty: the
        /// public repositories.
        addons_chart_repository: String = String::new();
        /// Chart versions overriding the driver's pins, `addon:version` pairs; add-ons
        /// `calico`, `cilium`, `openstack-ccm`, `cinder-csi`, `manila-csi`, `nfs-csi`,
        /// `k8s-keystone-auth`, `kube-prometheus-stack`, `headlamp`.
        addons_chart_versions: BTreeMap<String, String> = BTreeMap::new();
        /// Kubernetes version of clusters whose labels set no `kube_tag`.
        default_kube_tag: String = "v1.33.1".into();
        /// Network drivers (template `network_driver`) the driver can install.
        allowed_network_drivers: Vec<String> = strings(&["calico", "cilium"]);
    }
}

section! {
    /// `[auto_scaling]`: the cluster autoscaler of Cluster API clusters.
    pub struct AutoScalingSection {
        /// Image repository of the cluster autoscaler.
        image_repository: String = "registry.k8s.io/autoscaling".into();
    }
}

section! {
    /// `[manila_client]`: Manila access for share storage classes.
    pub struct ManilaClientSection {
        /// Catalog region of Manila.
        region_name: Option<String> = None;
        /// Catalog interface of Manila.
        endpoint_type: String = "publicURL".into();
        /// Manila API version.
        api_version: String = "3".into(), opt().inert();
        /// CA bundle (PEM) for verifying Manila's certificate.
        ca_file: Option<String> = None, opt().inert();
        /// Client certificate (PEM) for Manila.
        cert_file: Option<String> = None, opt().inert();
        /// Client private key (PEM) for Manila.
        key_file: Option<String> = None, opt().inert();
        /// Do not verify Manila's certificate.
        insecure: bool = false, opt().inert();
    }
}

section! {
    /// `[proxy]`: the optional HAProxy-based API proxy of Cluster API clusters.
    pub struct ProxySection {
        /// PID file of the HAProxy process.
        haproxy_pid_path: String = "/var/run/haproxy.pid".into();
    }
}
