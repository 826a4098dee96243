//! The cluster labels this driver honours, in one table: each label's default, parser, scope
//! and the ClusterClass variable (or other object) it feeds. The vocabulary and defaults are
//! magnum-cluster-api 0.38's, plus magnum-capi-helm 1.4's extras (docs/spec/cluster-api-labels.md).
//!
//! Upstream finds a bad value late (a failed create) or not at all; here every label is parsed
//! before anything is created, and a value that cannot work is refused naming label and value.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};

use magnum_core::model::{Labels, label};

/// How a label's text is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parser {
    /// oslo `bool_from_string(strict=True)`: `1/0 true/false yes/no on/off y/n t/f`, any case.
    Bool,
    /// A whole number at least `min`.
    Int { min: i64 },
    /// Free text.
    Text,
    /// Comma-separated items (empty items dropped), each checked by `item`.
    List { item: Item },
    /// Space-separated items (capi-helm's network names).
    Words,
    /// One of a fixed set (exact spelling).
    OneOf(&'static [&'static str]),
    /// One item check on a single value.
    One(Item),
}

/// What one item of a list (or a single value) must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    Any,
    /// An IPv4 or IPv6 network, `address/prefix`.
    Cidr,
    /// An IP address.
    Ip,
    /// A DNS name (letters, digits, `-`, `.`), or `*.`-wildcard / IP for certificate SANs.
    San,
    /// A DNS domain.
    Domain,
    /// A TLS cipher suite name as Go spells them (`TLS_…`).
    Cipher,
    /// An admission plugin name (letters and digits).
    Plugin,
    /// A container image tag.
    Tag,
    /// An image registry prefix (`host[:port][/path]`).
    Registry,
    /// An `https://` URL (kube-apiserver refuses other OIDC issuers).
    HttpsUrl,
    /// A Nova server group policy.
    Policy,
}

/// Where a label is read from, first match wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The cluster's labels, then its template's.
    Cluster,
    /// The nodegroup's labels, then the cluster's, then the template's.
    Nodegroup,
}

/// One honoured label.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub name: &'static str,
    /// As text, read by `parser` (an empty default means unset).
    pub default: &'static str,
    pub parser: Parser,
    pub scope: Scope,
    /// The topology variable (or object field) it feeds.
    pub feeds: &'static str,
    /// Honoured by magnum-cluster-api 0.38 / magnum-capi-helm 1.4.
    pub mcapi: bool,
    pub helm: bool,
}

const fn spec(
    name: &'static str,
    default: &'static str,
    parser: Parser,
    scope: Scope,
    feeds: &'static str,
    (mcapi, helm): (bool, bool),
) -> Spec {
    Spec {
        name,
        default,
        parser,
        scope,
        feeds,
        mcapi,
        helm,
    }
}

const M: (bool, bool) = (true, false);
const H: (bool, bool) = (false, true);
const MH: (bool, bool) = (true, true);
const C: Scope = Scope::Cluster;
const NG: Scope = Scope::Nodegroup;
const BOOL: Parser = Parser::Bool;
const SIZE: Parser = Parser::Int { min: 0 };
const TEXT: Parser = Parser::Text;
const TAG: Parser = Parser::One(Item::Tag);
const CIDR: Parser = Parser::One(Item::Cidr);

/// mcapi's default API server cipher suites.
pub const API_CIPHERS: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305";
/// mcapi's default kubelet cipher suites.
pub const KUBELET_CIPHERS: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305";
/// Octavia's load-balancing algorithms.
const LB_ALGORITHMS: &[&str] = &[
    "ROUND_ROBIN",
    "LEAST_CONNECTIONS",
    "SOURCE_IP",
    "SOURCE_IP_PORT",
];

/// Every label the driver honours. `kube_tag` is checked by the driver's version rules.
pub const TABLE: &[Spec] = &[
    // Images.
    spec("kube_tag", "", TEXT, C, "topology.version", M),
    spec(
        "container_infra_prefix",
        "",
        Parser::One(Item::Registry),
        C,
        "imageRepository",
        M,
    ),
    spec(
        "cloud_provider_tag",
        "",
        TAG,
        C,
        "add-on: cloud controller manager image",
        M,
    ),
    spec("calico_tag", "v3.32.1", TAG, C, "add-on: Calico version", M),
    spec("cilium_tag", "v1.15.3", TAG, C, "add-on: Cilium version", M),
    spec(
        "cinder_csi_plugin_tag",
        "v1.32.0",
        TAG,
        C,
        "add-on: Cinder CSI image",
        M,
    ),
    spec(
        "manila_csi_plugin_tag",
        "v1.32.0",
        TAG,
        C,
        "add-on: Manila CSI image",
        M,
    ),
    // Control plane and API server.
    spec(
        "admission_control_list",
        "",
        Parser::List { item: Item::Plugin },
        C,
        "admissionPlugins",
        M,
    ),
    spec(
        "api_server_cert_sans",
        "",
        Parser::List { item: Item::San },
        C,
        "apiServerCertSANs",
        M,
    ),
    spec(
        "api_server_tls_cipher_suites",
        API_CIPHERS,
        Parser::List { item: Item::Cipher },
        C,
        "apiServerTLSCipherSuites",
        M,
    ),
    spec(
        "kubelet_tls_cipher_suites",
        KUBELET_CIPHERS,
        Parser::List { item: Item::Cipher },
        C,
        "kubeletTLSCipherSuites",
        M,
    ),
    spec("audit_log_enabled", "false", BOOL, C, "auditLog.enabled", M),
    spec("audit_log_max_age", "30", SIZE, C, "auditLog.maxAge", M),
    spec(
        "audit_log_max_backup",
        "10",
        SIZE,
        C,
        "auditLog.maxBackup",
        M,
    ),
    spec("audit_log_max_size", "100", SIZE, C, "auditLog.maxSize", M),
    spec(
        "oidc_issuer_url",
        "",
        Parser::One(Item::HttpsUrl),
        C,
        "oidc.issuerURL",
        M,
    ),
    spec("oidc_client_id", "", TEXT, C, "oidc.clientID", M),
    spec(
        "oidc_username_claim",
        "sub",
        TEXT,
        C,
        "oidc.usernameClaim",
        M,
    ),
    spec(
        "oidc_username_prefix",
        "-",
        TEXT,
        C,
        "oidc.usernamePrefix",
        M,
    ),
    spec("oidc_groups_claim", "", TEXT, C, "oidc.groupsClaim", M),
    spec("oidc_groups_prefix", "", TEXT, C, "oidc.groupsPrefix", M),
    spec("keystone_auth_enabled", "true", BOOL, C, "keystoneAuth", MH),
    // Networking.
    spec(
        "calico_ipv4pool",
        "10.100.0.0/16",
        CIDR,
        C,
        "Cluster clusterNetwork.pods",
        M,
    ),
    spec(
        "cilium_ipv4pool",
        "10.100.0.0/16",
        CIDR,
        C,
        "Cluster clusterNetwork.pods",
        M,
    ),
    spec(
        "cilium_hubble_ui_enabled",
        "false",
        BOOL,
        C,
        "add-on: Cilium Hubble relay and UI",
        M,
    ),
    spec(
        "service_cluster_ip_range",
        "10.254.0.0/16",
        CIDR,
        C,
        "Cluster clusterNetwork.services",
        M,
    ),
    spec(
        "dns_cluster_domain",
        "cluster.local",
        Parser::One(Item::Domain),
        C,
        "Cluster clusterNetwork.serviceDomain",
        M,
    ),
    spec("fixed_subnet_cidr", "10.0.0.0/24", CIDR, C, "nodeCidr", MH),
    spec(
        "extra_network_names",
        "",
        Parser::Words,
        C,
        "extraNetworks",
        H,
    ),
    spec(
        "api_master_lb_allowed_cidrs",
        "",
        Parser::List { item: Item::Cidr },
        C,
        "apiServerLoadBalancerOptions.allowedCIDRs",
        H,
    ),
    spec(
        "master_lb_floating_ip_enabled",
        "true",
        BOOL,
        C,
        "disableAPIServerFloatingIP",
        MH,
    ),
    spec(
        "api_server_floating_ip",
        "",
        Parser::One(Item::Ip),
        C,
        "apiServerFloatingIP",
        M,
    ),
    spec(
        "octavia_provider",
        "",
        TEXT,
        C,
        "apiServerLoadBalancerOptions.provider",
        MH,
    ),
    spec(
        "octavia_lb_algorithm",
        "",
        Parser::OneOf(LB_ALGORITHMS),
        C,
        "add-on: cloud controller manager lb-method",
        MH,
    ),
    spec(
        "octavia_lb_healthcheck",
        "true",
        BOOL,
        C,
        "add-on: cloud controller manager create-monitor",
        MH,
    ),
    spec(
        "api_server_lb_flavor",
        "",
        TEXT,
        C,
        "apiServerLoadBalancerOptions.flavor",
        M,
    ),
    spec(
        "api_server_lb_availability_zone",
        "",
        TEXT,
        C,
        "apiServerLoadBalancerOptions.availabilityZone",
        M,
    ),
    // Nodes.
    spec(
        "availability_zone",
        "",
        TEXT,
        NG,
        "MachineDeployment failureDomain; volume zone",
        M,
    ),
    spec(
        "control_plane_availability_zones",
        "",
        Parser::List { item: Item::Any },
        C,
        "controlPlaneAvailabilityZones",
        M,
    ),
    spec("boot_volume_size", "0", SIZE, NG, "bootVolume.size", MH),
    spec("boot_volume_type", "", TEXT, NG, "bootVolume.type", MH),
    spec(
        "boot_volume_availability_zone",
        "",
        TEXT,
        C,
        "bootVolume.availabilityZone",
        M,
    ),
    spec("etcd_volume_size", "0", SIZE, C, "etcdVolume.size", MH),
    spec("etcd_volume_type", "", TEXT, C, "etcdVolume.type", MH),
    spec("docker_volume_type", "", TEXT, C, "runtimeVolume.type", M),
    spec(
        "server_group_policies",
        "soft-anti-affinity",
        Parser::List { item: Item::Policy },
        NG,
        "Nova server group (serverGroupID)",
        M,
    ),
    spec(
        "different_failure_domain",
        "false",
        BOOL,
        NG,
        "differentFailureDomain",
        M,
    ),
    // Scaling and healing.
    spec(
        "auto_scaling_enabled",
        "false",
        BOOL,
        NG,
        "MachineDeployment autoscaler annotations",
        MH,
    ),
    spec(
        "min_node_count",
        "",
        SIZE,
        NG,
        "autoscaler min-size (default worker)",
        H,
    ),
    spec("max_node_count", "", SIZE, NG, "autoscaler max-size", MH),
    spec(
        "auto_healing_enabled",
        "true",
        BOOL,
        C,
        "topology healthCheck.enabled",
        MH,
    ),
    // Storage and add-ons.
    spec(
        "cinder_csi_enabled",
        "true",
        BOOL,
        C,
        "add-on: Cinder CSI",
        M,
    ),
    spec(
        "manila_csi_enabled",
        "true",
        BOOL,
        C,
        "add-on: Manila CSI",
        M,
    ),
    spec(
        "manila_csi_share_network_id",
        "",
        TEXT,
        C,
        "add-on: Manila share StorageClasses",
        M,
    ),
    spec(
        "monitoring_enabled",
        "false",
        BOOL,
        C,
        "add-on: kube-prometheus-stack",
        H,
    ),
    // magnum-capi-helm's option defaults to true, but its charts dropped the retired
    // Kubernetes Dashboard (capi-helm-charts 0.20): no dashboard unless asked for.
    spec(
        "kube_dashboard_enabled",
        "false",
        BOOL,
        C,
        "add-on: Headlamp",
        H,
    ),
];

/// Labels the table does not list but Magnum or the driver read elsewhere (not "unknown").
const KNOWN_ELSEWHERE: &[&str] = &["master_lb_enabled", "node_labels", "node_taints"];

/// A parsed label value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    Bool(bool),
    Int(i64),
    Text(String),
    List(Vec<String>),
    /// Empty text or no default: not set.
    Unset,
}

/// Why a label value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("Invalid value for label {label}: '{value}' ({expected}).")]
    Invalid {
        label: &'static str,
        value: String,
        expected: String,
    },
    #[error("{0}")]
    Conflict(String),
}

impl From<LabelError> for magnum_core::Error {
    fn from(e: LabelError) -> Self {
        magnum_core::Error::InvalidParameterValue {
            message: e.to_string(),
        }
    }
}

pub fn spec_of(name: &str) -> Option<&'static Spec> {
    TABLE.iter().find(|s| s.name == name)
}

/// oslo's strict boolean set.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
        "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
        _ => None,
    }
}

fn is_cidr(v: &str) -> bool {
    let Some((addr, prefix)) = v.split_once('/') else {
        return false;
    };
    let Ok(addr) = addr.parse::<IpAddr>() else {
        return false;
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    prefix.parse::<u8>().is_ok_and(|p| p <= max)
}

fn is_domain(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 253
        && v.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn item_ok(item: Item, v: &str) -> Result<(), &'static str> {
    let ok = match item {
        Item::Any => !v.chars().any(char::is_control),
        Item::Cidr => is_cidr(v),
        Item::Ip => v.parse::<IpAddr>().is_ok(),
        Item::San => v.parse::<IpAddr>().is_ok() || is_domain(v.strip_prefix("*.").unwrap_or(v)),
        Item::Domain => is_domain(v),
        Item::Cipher => {
            v.starts_with("TLS_") && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        Item::Plugin => !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()),
        Item::Tag => {
            !v.is_empty()
                && v.len() <= 128
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        }
        Item::Registry => {
            !v.is_empty()
                && !v.contains("//")
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '/'))
        }
        Item::HttpsUrl => v
            .strip_prefix("https://")
            .is_some_and(|rest| !rest.is_empty() && !rest.contains(char::is_whitespace)),
        Item::Policy => matches!(
            v,
            "affinity" | "anti-affinity" | "soft-affinity" | "soft-anti-affinity"
        ),
    };
    if ok {
        return Ok(());
    }
    Err(match item {
        Item::Any => "text without control characters",
        Item::Cidr => "an IP network such as 10.0.0.0/24",
        Item::Ip => "an IP address",
        Item::San => "DNS names or IP addresses",
        Item::Domain => "a DNS domain",
        Item::Cipher => "TLS cipher suite names such as TLS_AES_128_GCM_SHA256",
        Item::Plugin => "admission plugin names",
        Item::Tag => "an image tag",
        Item::Registry => "an image registry such as registry.example.com:5000/mirror",
        Item::HttpsUrl => "an https:// URL",
        Item::Policy => "affinity, anti-affinity, soft-affinity or soft-anti-affinity",
    })
}

/// Parses `raw` as `spec` says; empty text is unset (upstream treats it so).
pub fn parse(spec: &Spec, raw: &str) -> Result<Parsed, LabelError> {
    let bad = |expected: &str| LabelError::Invalid {
        label: spec.name,
        value: raw.to_owned(),
        expected: expected.to_owned(),
    };
    let v = raw.trim();
    if v.is_empty() {
        return Ok(Parsed::Unset);
    }
    match spec.parser {
        Parser::Bool => parse_bool(v)
            .map(Parsed::Bool)
            .ok_or_else(|| bad("a boolean: true/false, yes/no, on/off, y/n, t/f or 1/0")),
        Parser::Int { min } => match v.parse::<i64>() {
            Ok(n) if n >= min => Ok(Parsed::Int(n)),
            _ => Err(bad(&format!("a whole number of at least {min}"))),
        },
        Parser::Text => item_ok(Item::Any, v)
            .map(|()| Parsed::Text(v.to_owned()))
            .map_err(bad),
        Parser::One(item) => item_ok(item, v)
            .map(|()| Parsed::Text(v.trim_end_matches('/').to_owned()))
            .map_err(bad),
        Parser::OneOf(set) => {
            if set.contains(&v) {
                Ok(Parsed::Text(v.to_owned()))
            } else {
                Err(bad(&format!("one of {}", set.join(", "))))
            }
        }
        Parser::List { item } => {
            let items: Vec<String> = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            for i in &items {
                item_ok(item, i).map_err(bad)?;
            }
            Ok(Parsed::List(items))
        }
        Parser::Words => {
            let items: Vec<String> = v.split_whitespace().map(str::to_owned).collect();
            for i in &items {
                item_ok(Item::Any, i).map_err(bad)?;
            }
            Ok(Parsed::List(items))
        }
    }
}

/// The table's labels of one scope, resolved over layers (first layer wins).
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    values: BTreeMap<&'static str, Parsed>,
    /// Refusals, in table order.
    pub errors: Vec<LabelError>,
}

impl Resolved {
    /// Resolves every label of `scope` over `layers` (e.g. cluster, then template). A value
    /// that does not parse is recorded in `errors` and its default used.
    pub fn of(scope: Scope, layers: &[&Labels]) -> Self {
        let mut out = Resolved::default();
        for s in TABLE.iter().filter(|s| s.scope == scope) {
            let given = layers
                .iter()
                .find_map(|l| label(l, s.name).filter(|v| !v.trim().is_empty()));
            let value = match given.map(|v| parse(s, &v)) {
                Some(Ok(p)) => p,
                Some(Err(e)) => {
                    out.errors.push(e);
                    default_of(s)
                }
                None => default_of(s),
            };
            out.values.insert(s.name, value);
        }
        out
    }

    fn get(&self, name: &str) -> Option<&Parsed> {
        self.values.get(name)
    }

    pub fn bool(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Parsed::Bool(true)))
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(Parsed::Int(n)) => Some(*n),
            _ => None,
        }
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(Parsed::Text(s)) => Some(s),
            _ => None,
        }
    }

    pub fn list(&self, name: &str) -> &[String] {
        match self.get(name) {
            Some(Parsed::List(l)) => l,
            _ => &[],
        }
    }
}

fn default_of(s: &Spec) -> Parsed {
    parse(s, s.default).unwrap_or(Parsed::Unset)
}

/// The checks across labels and fields (after each label parsed): upstream's refusals that
/// need two values.
pub fn cross_checks(cluster: &Resolved) -> Vec<LabelError> {
    let mut out = Vec::new();
    if let (Some("ovn"), Some(alg)) = (
        cluster.text("octavia_provider"),
        cluster.text("octavia_lb_algorithm"),
    ) && alg != "SOURCE_IP_PORT"
    {
        out.push(LabelError::Conflict(format!(
            "Invalid value for octavia_lb_algorithm: '{alg}' (the ovn provider supports SOURCE_IP_PORT only)."
        )));
    }
    if cluster.text("oidc_issuer_url").is_some() && cluster.text("oidc_client_id").is_none() {
        out.push(LabelError::Conflict(
            "The label oidc_client_id is required with oidc_issuer_url (the API server does not start without it).".into(),
        ));
    }
    out
}

/// The autoscaler's bounds of one nodegroup's resolved labels: a max below the min cannot work.
pub fn bounds(ng: &Resolved) -> Option<LabelError> {
    let (min, max) = (ng.int("min_node_count")?, ng.int("max_node_count")?);
    (ng.bool("auto_scaling_enabled") && min > max).then(|| {
        LabelError::Conflict(format!(
            "Invalid value for label max_node_count: '{max}' (below min_node_count {min})."
        ))
    })
}

/// Labels that no table row names, logged once per process and name (upstream accepts them).
pub fn log_unknown(layers: &[&Labels]) {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(HashSet::new()));
    let Ok(mut seen) = seen.lock() else {
        return;
    };
    for name in layers.iter().flat_map(|l| l.keys()) {
        if spec_of(name).is_none()
            && !KNOWN_ELSEWHERE.contains(&name.as_str())
            && seen.insert(name.clone())
        {
            tracing::info!(label = %name, "the Cluster API driver does not use this label");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn labels(v: serde_json::Value) -> Labels {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn every_default_parses_and_names_are_unique() {
        let mut names = HashSet::new();
        for s in TABLE {
            assert!(parse(s, s.default).is_ok(), "{}", s.name);
            assert!(names.insert(s.name), "{} twice", s.name);
            assert!(s.mcapi || s.helm, "{}", s.name);
        }
    }

    #[test]
    fn the_docs_table_lists_every_label() {
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cluster-api.md");
        let text = std::fs::read_to_string(doc).unwrap();
        for s in TABLE {
            assert!(
                text.contains(&format!("| `{}` |", s.name)),
                "docs/cluster-api.md has no row for {}",
                s.name
            );
        }
    }

    #[test]
    fn booleans_are_oslos_strict_set() {
        for t in ["1", "true", "TRUE", "Yes", "on", "Y", "t"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "false", "No", "OFF", "n", "F"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for bad in ["maybe", "2", "enabled", "truee"] {
            assert_eq!(parse_bool(bad), None, "{bad}");
        }
    }

    #[test]
    fn cluster_labels_win_over_the_template_and_defaults_fill_the_rest() {
        let c = labels(json!({"audit_log_enabled": "yes", "etcd_volume_size": "20"}));
        let t = labels(
            json!({"audit_log_enabled": "false", "audit_log_max_age": "7",
                              "keystone_auth_enabled": "off"}),
        );
        let r = Resolved::of(Scope::Cluster, &[&c, &t]);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert!(r.bool("audit_log_enabled"));
        assert_eq!(r.int("audit_log_max_age"), Some(7));
        assert_eq!(r.int("audit_log_max_backup"), Some(10));
        assert_eq!(r.int("etcd_volume_size"), Some(20));
        assert!(!r.bool("keystone_auth_enabled"));
        assert!(r.bool("auto_healing_enabled"), "auto-healing defaults on");
        assert_eq!(r.text("oidc_username_claim"), Some("sub"));
        assert_eq!(r.list("api_server_tls_cipher_suites").len(), 6);
        // Nodegroup scope: the nodegroup, then the cluster.
        let ng = labels(json!({"boot_volume_size": "50"}));
        let c = labels(json!({"boot_volume_size": "20", "different_failure_domain": "t"}));
        let r = Resolved::of(Scope::Nodegroup, &[&ng, &c]);
        assert_eq!(r.int("boot_volume_size"), Some(50));
        assert!(r.bool("different_failure_domain"));
        assert_eq!(r.list("server_group_policies"), ["soft-anti-affinity"]);
    }

    #[test]
    fn values_that_cannot_work_are_refused_naming_label_and_value() {
        let cases = [
            ("audit_log_enabled", "maybe"),
            ("etcd_volume_size", "-1"),
            ("boot_volume_size", "ten"),
            ("fixed_subnet_cidr", "10.0.0.0/33"),
            ("calico_ipv4pool", "10.100.0.0"),
            ("api_server_tls_cipher_suites", "RC4"),
            ("oidc_issuer_url", "http://idp"),
            ("server_group_policies", "anti-affinity,spread"),
            ("octavia_lb_algorithm", "RANDOM"),
            ("api_server_floating_ip", "1.2.3"),
            ("dns_cluster_domain", "bad_domain"),
            ("container_infra_prefix", "https://registry"),
            ("api_server_cert_sans", "ok.example,not ok"),
            ("admission_control_list", "PodSecurity,Bad-Name"),
        ];
        for (name, value) in cases {
            let c = labels(json!({ name: value }));
            let scope = spec_of(name).unwrap().scope;
            let r = Resolved::of(scope, &[&c]);
            assert_eq!(r.errors.len(), 1, "{name}={value}");
            let text = r.errors[0].to_string();
            assert!(text.contains(name) && text.contains(value), "{text}");
        }
        let c = labels(
            json!({"octavia_provider": "ovn", "octavia_lb_algorithm": "ROUND_ROBIN",
                              "oidc_issuer_url": "https://idp"}),
        );
        let errs = cross_checks(&Resolved::of(Scope::Cluster, &[&c]));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].to_string().contains("ROUND_ROBIN"));
    }

    #[test]
    fn lists_drop_empty_items_and_prefixes_lose_a_trailing_slash() {
        let c = labels(
            json!({"api_server_cert_sans": "a.example,,10.0.0.1,*.b.example",
                              "container_infra_prefix": "mirror.example:5000/k8s/",
                              "extra_network_names": "storage  backup"}),
        );
        let r = Resolved::of(Scope::Cluster, &[&c]);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(
            r.list("api_server_cert_sans"),
            ["a.example", "10.0.0.1", "*.b.example"]
        );
        assert_eq!(
            r.text("container_infra_prefix"),
            Some("mirror.example:5000/k8s")
        );
        assert_eq!(r.list("extra_network_names"), ["storage", "backup"]);
    }
}
