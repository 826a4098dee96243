//! The label matrix of docs/cluster-api.md, through the real `openstack coe` client: every
//! label of the table set on two templates (Calico and Cilium) and overridden on clusters
//! (`--merge-labels`), in the test cloud (real Nova, Cinder and Manila answer the driver)
//! against the Kubernetes API stand-in, whose simulated topology controller runs the
//! ClusterClass's patches. Each label's field is read back from the objects that controller
//! created, from the HelmChartProxies and the workload cloud-config, and from Nova. Then every
//! refusal: a bad value of each label, at template create and at cluster create, answered 400
//! naming label and value, with nothing created.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::capi::{CLUSTERS, Kube, status_is, wait_all_deleted, wait_for};
use crate::client::repo_root;

const CLOUD: &str = "demo-member";
const OSMT: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

/// A label's effective values on one cluster (its own over its template's).
type Labels = BTreeMap<String, String>;

/// Labels as given to the client, in order.
type Pairs<'a> = &'a [(&'a str, &'a str)];

/// What a check found.
enum Found {
    Pass,
    Fail(String),
    /// The label has no effect on this cluster (its feature is off, another CNI).
    NotHere,
}

/// One row of the table: the two templates' values, the clusters' override, and where the
/// value must show.
struct Row {
    label: &'static str,
    calico: &'static str,
    cilium: &'static str,
    cluster: &'static str,
    check: fn(&Seen, &Labels) -> Found,
}

/// What one cluster became in the management cluster and in Nova.
struct Seen {
    network_driver: String,
    cluster: Value,
    /// KubeadmControlPlane `spec.kubeadmConfigSpec`.
    kcp: Value,
    /// OpenStackCluster `spec`.
    osc: Value,
    /// OpenStackMachineTemplate `spec.template.spec` of the control plane and the workers.
    cp: Value,
    worker: Value,
    /// The workers' KubeadmConfigTemplate `spec.template.spec`.
    kct: Value,
    /// The workers' MachineDeployment.
    md: Value,
    /// HelmChartProxies by add-on (name without the stack id): chart version and values.
    proxies: BTreeMap<String, (String, Value)>,
    /// The workload's `cloud.conf`, and its StorageClasses by name.
    cloud_conf: String,
    classes: BTreeMap<String, Value>,
    autoscalers: Vec<Value>,
    /// Nova's server groups of this cluster, by name.
    groups: BTreeMap<String, Value>,
}

fn eq(what: &str, got: &Value, want: Value) -> Found {
    if *got == want {
        Found::Pass
    } else {
        Found::Fail(format!("{what}: {got}, not {want}"))
    }
}

/// All of them pass, or the first failure.
fn all(found: impl IntoIterator<Item = Found>) -> Found {
    for f in found {
        if let Found::Fail(why) = f {
            return Found::Fail(why);
        }
    }
    Found::Pass
}

fn value<'a>(l: &'a Labels, name: &str) -> &'a str {
    l.get(name).map_or("", String::as_str)
}

/// oslo's strict boolean, as the driver reads it.
fn yes(l: &Labels, name: &str) -> bool {
    matches!(
        value(l, name).to_ascii_lowercase().as_str(),
        "1" | "t" | "true" | "on" | "y" | "yes"
    )
}

fn items(l: &Labels, name: &str) -> Vec<String> {
    value(l, name)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A named argument of a v1beta2 `extraArgs` list.
fn arg(args: &Value, name: &str) -> Value {
    args.as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == name))
        .map_or(Value::Null, |x| x["value"].clone())
}

fn api_arg(s: &Seen, name: &str) -> Value {
    arg(
        &s.kcp["clusterConfiguration"]["apiServer"]["extraArgs"],
        name,
    )
}

fn api_arg_is(s: &Seen, l: &Labels, label: &str, flag: &str) -> Found {
    eq(flag, &api_arg(s, flag), json!(value(l, label)))
}

fn disk<'a>(machine: &'a Value, name: &str) -> &'a Value {
    machine["additionalBlockDevices"]
        .as_array()
        .and_then(|d| d.iter().find(|x| x["name"] == name))
        .unwrap_or(&Value::Null)
}

fn number(l: &Labels, name: &str) -> Value {
    json!(value(l, name).parse::<i64>().unwrap_or(-1))
}

fn proxy_present(s: &Seen, addon: &str, want: bool) -> Found {
    if s.proxies.contains_key(addon) == want {
        Found::Pass
    } else {
        Found::Fail(format!(
            "HelmChartProxy {addon} present should be {want}; proxies: {:?}",
            s.proxies.keys().collect::<Vec<_>>()
        ))
    }
}

fn proxy_values<'a>(s: &'a Seen, addon: &str) -> &'a Value {
    s.proxies.get(addon).map_or(&Value::Null, |(_, v)| v)
}

fn only(s: &Seen, driver: &str, check: impl FnOnce() -> Found) -> Found {
    if s.network_driver == driver {
        check()
    } else {
        Found::NotHere
    }
}

fn when(on: bool, check: impl FnOnce() -> Found) -> Found {
    if on { check() } else { Found::NotHere }
}

fn conf_line(s: &Seen, line: &str) -> Found {
    if s.cloud_conf.lines().any(|l| l == line) {
        Found::Pass
    } else {
        Found::Fail(format!("no `{line}` in cloud.conf:\n{}", s.cloud_conf))
    }
}

/// Every image reference in chart values (`repository`, `registry`, `imageRegistry`,
/// `baseRepo` strings).
fn image_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    (
                        "repository" | "registry" | "imageRegistry" | "baseRepo",
                        Value::String(s),
                    ) => {
                        out.push(s.clone());
                    }
                    _ => image_refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| image_refs(x, out)),
        _ => {}
    }
}

fn mirror(s: &Seen, l: &Labels) -> Found {
    let p = value(l, "container_infra_prefix").trim_end_matches('/');
    let pause = format!("\"{p}/pause:");
    let mut found = vec![
        eq(
            "imageRepository",
            &s.kcp["clusterConfiguration"]["imageRepository"],
            json!(p),
        ),
        if s.kcp["preKubeadmCommands"].to_string().contains(&pause)
            && s.kct["preKubeadmCommands"].to_string().contains(&pause)
        {
            Found::Pass
        } else {
            Found::Fail(format!(
                "no sandbox image {pause} in {} / {}",
                s.kcp["preKubeadmCommands"], s.kct["preKubeadmCommands"]
            ))
        },
    ];
    for (addon, (_, values)) in &s.proxies {
        let mut refs = Vec::new();
        image_refs(values, &mut refs);
        if let Some(r) = refs.iter().find(|r| !r.starts_with(p)) {
            found.push(Found::Fail(format!("{addon}'s image {r} is not on {p}")));
        }
        // Every add-on that pulls images names the mirror (keystone-auth's, the CCM's...).
        if refs.is_empty() {
            found.push(Found::Fail(format!("{addon} names no image: {values}")));
        }
    }
    for a in &s.autoscalers {
        let image = &a["spec"]["template"]["spec"]["containers"][0]["image"];
        if !image.as_str().is_some_and(|i| i.starts_with(p)) {
            found.push(Found::Fail(format!("autoscaler image {image}")));
        }
    }
    all(found)
}

fn boolean(l: &Labels, name: &str) -> Value {
    json!(yes(l, name))
}

/// The table, in docs/cluster-api.md's order. Each override differs from at least one
/// template's value, so the cluster's own label is seen winning.
const ROWS: &[Row] = &[
    Row {
        label: "kube_tag",
        calico: "v1.33.1",
        cilium: "v1.32.3",
        cluster: "v1.31.4",
        check: |s, l| {
            eq(
                "topology.version",
                &s.cluster["spec"]["topology"]["version"],
                json!(value(l, "kube_tag")),
            )
        },
    },
    Row {
        label: "container_infra_prefix",
        calico: "mirror.example.com:5000/k8s/",
        cilium: "registry.example.org/magnum",
        cluster: "harbor.example.net/mirror",
        check: mirror,
    },
    Row {
        label: "cloud_provider_tag",
        calico: "v1.33.0",
        cilium: "v1.32.1",
        cluster: "v1.31.3",
        check: |s, l| {
            eq(
                "ccm image.tag",
                &proxy_values(s, "ccm")["image"]["tag"],
                json!(value(l, "cloud_provider_tag")),
            )
        },
    },
    Row {
        label: "calico_tag",
        calico: "v3.30.2",
        cilium: "v3.29.4",
        cluster: "v3.31.1",
        check: |s, l| {
            only(s, "calico", || {
                let (version, _) = &s.proxies["cni"];
                eq(
                    "Calico chart",
                    &json!(version),
                    json!(value(l, "calico_tag")),
                )
            })
        },
    },
    Row {
        label: "cilium_tag",
        calico: "v1.16.4",
        cilium: "v1.17.2",
        cluster: "v1.18.1",
        check: |s, l| {
            only(s, "cilium", || {
                let (version, _) = &s.proxies["cni"];
                eq(
                    "Cilium chart",
                    &json!(version),
                    json!(value(l, "cilium_tag").trim_start_matches('v')),
                )
            })
        },
    },
    Row {
        label: "cinder_csi_plugin_tag",
        calico: "v1.33.0",
        cilium: "v1.32.2",
        cluster: "v1.31.5",
        check: |s, l| {
            when(yes(l, "cinder_csi_enabled"), || {
                eq(
                    "cinder plugin tag",
                    &proxy_values(s, "cinder-csi")["csi"]["plugin"]["image"]["tag"],
                    json!(value(l, "cinder_csi_plugin_tag")),
                )
            })
        },
    },
    Row {
        label: "manila_csi_plugin_tag",
        calico: "v1.33.0",
        cilium: "v1.32.2",
        cluster: "v1.31.5",
        check: |s, l| {
            when(yes(l, "manila_csi_enabled"), || {
                eq(
                    "manila plugin tag",
                    &proxy_values(s, "manila-csi")["csimanila"]["image"]["tag"],
                    json!(value(l, "manila_csi_plugin_tag")),
                )
            })
        },
    },
    Row {
        label: "admission_control_list",
        calico: "PodSecurity,NodeRestriction",
        cilium: "AlwaysPullImages",
        cluster: "EventRateLimit,PodSecurity",
        check: |s, l| {
            let mut want = vec!["NodeRestriction".to_owned()];
            want.extend(
                items(l, "admission_control_list")
                    .into_iter()
                    .filter(|p| p != "NodeRestriction"),
            );
            eq(
                "enable-admission-plugins",
                &api_arg(s, "enable-admission-plugins"),
                json!(want.join(",")),
            )
        },
    },
    Row {
        label: "api_server_cert_sans",
        calico: "api.example.com,10.1.2.3",
        cilium: "k8s.example.org",
        cluster: "*.apps.example.net,2001:db8::1",
        check: |s, l| {
            eq(
                "certSANs",
                &s.kcp["clusterConfiguration"]["apiServer"]["certSANs"],
                json!(items(l, "api_server_cert_sans")),
            )
        },
    },
    Row {
        label: "api_server_tls_cipher_suites",
        calico: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        cilium: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        cluster: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        check: |s, l| {
            eq(
                "tls-cipher-suites",
                &api_arg(s, "tls-cipher-suites"),
                json!(items(l, "api_server_tls_cipher_suites").join(",")),
            )
        },
    },
    Row {
        label: "kubelet_tls_cipher_suites",
        calico: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        cilium: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        cluster: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        check: |s, l| {
            let want = json!(value(l, "kubelet_tls_cipher_suites"));
            let kubelet = |reg: &Value| arg(&reg["kubeletExtraArgs"], "tls-cipher-suites");
            all([
                eq(
                    "control plane init",
                    &kubelet(&s.kcp["initConfiguration"]["nodeRegistration"]),
                    want.clone(),
                ),
                eq(
                    "control plane join",
                    &kubelet(&s.kcp["joinConfiguration"]["nodeRegistration"]),
                    want.clone(),
                ),
                eq(
                    "workers' join",
                    &kubelet(&s.kct["joinConfiguration"]["nodeRegistration"]),
                    want,
                ),
            ])
        },
    },
    Row {
        label: "audit_log_enabled",
        calico: "true",
        cilium: "false",
        cluster: "True",
        check: |s, l| {
            let path = api_arg(s, "audit-log-path");
            if yes(l, "audit_log_enabled") {
                eq(
                    "audit-log-path",
                    &path,
                    json!("/var/log/audit/kube-apiserver-audit.log"),
                )
            } else {
                eq("audit-log-path", &path, Value::Null)
            }
        },
    },
    Row {
        label: "audit_log_max_age",
        calico: "7",
        cilium: "9",
        cluster: "14",
        check: |s, l| {
            when(yes(l, "audit_log_enabled"), || {
                api_arg_is(s, l, "audit_log_max_age", "audit-log-maxage")
            })
        },
    },
    Row {
        label: "audit_log_max_backup",
        calico: "3",
        cilium: "4",
        cluster: "5",
        check: |s, l| {
            when(yes(l, "audit_log_enabled"), || {
                api_arg_is(s, l, "audit_log_max_backup", "audit-log-maxbackup")
            })
        },
    },
    Row {
        label: "audit_log_max_size",
        calico: "50",
        cilium: "60",
        cluster: "200",
        check: |s, l| {
            when(yes(l, "audit_log_enabled"), || {
                api_arg_is(s, l, "audit_log_max_size", "audit-log-maxsize")
            })
        },
    },
    Row {
        label: "oidc_issuer_url",
        calico: "https://idp.example.com/realms/k8s",
        cilium: "https://login.example.org",
        cluster: "https://sso.example.net/oidc",
        check: |s, l| api_arg_is(s, l, "oidc_issuer_url", "oidc-issuer-url"),
    },
    Row {
        label: "oidc_client_id",
        calico: "kubernetes",
        cilium: "k8s-cilium",
        cluster: "k8s-cluster",
        check: |s, l| api_arg_is(s, l, "oidc_client_id", "oidc-client-id"),
    },
    Row {
        label: "oidc_username_claim",
        calico: "email",
        cilium: "preferred_username",
        cluster: "sub",
        check: |s, l| api_arg_is(s, l, "oidc_username_claim", "oidc-username-claim"),
    },
    Row {
        label: "oidc_username_prefix",
        calico: "oidc:",
        cilium: "sso:",
        cluster: "-",
        check: |s, l| api_arg_is(s, l, "oidc_username_prefix", "oidc-username-prefix"),
    },
    Row {
        label: "oidc_groups_claim",
        calico: "groups",
        cilium: "roles",
        cluster: "teams",
        check: |s, l| api_arg_is(s, l, "oidc_groups_claim", "oidc-groups-claim"),
    },
    Row {
        label: "oidc_groups_prefix",
        calico: "oidc:",
        cilium: "grp:",
        cluster: "team:",
        check: |s, l| api_arg_is(s, l, "oidc_groups_prefix", "oidc-groups-prefix"),
    },
    Row {
        label: "keystone_auth_enabled",
        calico: "true",
        cilium: "false",
        cluster: "on",
        check: |s, l| {
            let on = yes(l, "keystone_auth_enabled");
            let mode = api_arg(s, "authorization-mode");
            all([
                if (mode == json!("Node,RBAC,Webhook")) == on {
                    Found::Pass
                } else {
                    Found::Fail(format!("authorization-mode {mode} with keystone auth {on}"))
                },
                proxy_present(s, "keystone-auth", on),
            ])
        },
    },
    Row {
        label: "calico_ipv4pool",
        calico: "10.200.0.0/16",
        cilium: "10.201.0.0/16",
        cluster: "10.210.0.0/16",
        check: |s, l| {
            only(s, "calico", || {
                let want = value(l, "calico_ipv4pool");
                all([
                    eq(
                        "pods",
                        &s.cluster["spec"]["clusterNetwork"]["pods"]["cidrBlocks"],
                        json!([want]),
                    ),
                    eq(
                        "Calico pool",
                        &proxy_values(s, "cni")["installation"]["calicoNetwork"]["ipPools"][0]["cidr"],
                        json!(want),
                    ),
                ])
            })
        },
    },
    Row {
        label: "cilium_ipv4pool",
        calico: "10.202.0.0/16",
        cilium: "10.203.0.0/16",
        cluster: "10.220.0.0/16",
        check: |s, l| {
            only(s, "cilium", || {
                let want = value(l, "cilium_ipv4pool");
                all([
                    eq(
                        "pods",
                        &s.cluster["spec"]["clusterNetwork"]["pods"]["cidrBlocks"],
                        json!([want]),
                    ),
                    eq(
                        "Cilium pool",
                        &proxy_values(s, "cni")["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"],
                        json!([want]),
                    ),
                ])
            })
        },
    },
    Row {
        label: "cilium_hubble_ui_enabled",
        calico: "true",
        cilium: "true",
        cluster: "false",
        check: |s, l| {
            only(s, "cilium", || {
                let hubble = &proxy_values(s, "cni")["hubble"];
                let on = boolean(l, "cilium_hubble_ui_enabled");
                all([
                    eq("hubble.ui.enabled", &hubble["ui"]["enabled"], on.clone()),
                    eq("hubble.relay.enabled", &hubble["relay"]["enabled"], on),
                ])
            })
        },
    },
    Row {
        label: "service_cluster_ip_range",
        calico: "10.96.0.0/12",
        cilium: "10.43.0.0/16",
        cluster: "10.254.0.0/16",
        check: |s, l| {
            eq(
                "services",
                &s.cluster["spec"]["clusterNetwork"]["services"]["cidrBlocks"],
                json!([value(l, "service_cluster_ip_range")]),
            )
        },
    },
    Row {
        label: "dns_cluster_domain",
        calico: "corp.local",
        cilium: "k8s.example",
        cluster: "cluster.local",
        check: |s, l| {
            eq(
                "serviceDomain",
                &s.cluster["spec"]["clusterNetwork"]["serviceDomain"],
                json!(value(l, "dns_cluster_domain")),
            )
        },
    },
    Row {
        label: "fixed_subnet_cidr",
        calico: "10.20.0.0/24",
        cilium: "10.30.0.0/24",
        cluster: "10.40.0.0/22",
        check: |s, l| {
            eq(
                "managedSubnets[0].cidr",
                &s.osc["managedSubnets"][0]["cidr"],
                json!(value(l, "fixed_subnet_cidr")),
            )
        },
    },
    Row {
        label: "extra_network_names",
        calico: "storage",
        cilium: "storage backup",
        cluster: "backup",
        check: |s, l| {
            let mut ports = vec![json!({})];
            ports.extend(
                value(l, "extra_network_names")
                    .split_whitespace()
                    .map(|n| json!({"network": {"filter": {"name": n}}})),
            );
            eq("workers' ports", &s.worker["ports"], json!(ports))
        },
    },
    Row {
        label: "api_master_lb_allowed_cidrs",
        calico: "10.0.0.0/8, 192.168.0.0/16",
        cilium: "172.16.0.0/12",
        cluster: "203.0.113.0/24",
        check: |s, l| {
            eq(
                "allowedCIDRs",
                &s.osc["apiServerLoadBalancer"]["allowedCIDRs"],
                json!(items(l, "api_master_lb_allowed_cidrs")),
            )
        },
    },
    Row {
        label: "master_lb_floating_ip_enabled",
        calico: "false",
        cilium: "true",
        cluster: "false",
        check: |s, l| {
            let disabled = s.osc["disableAPIServerFloatingIP"]
                .as_bool()
                .unwrap_or(false);
            eq(
                "disableAPIServerFloatingIP",
                &json!(disabled),
                json!(!yes(l, "master_lb_floating_ip_enabled")),
            )
        },
    },
    Row {
        label: "api_server_floating_ip",
        calico: "203.0.113.10",
        cilium: "203.0.113.20",
        cluster: "203.0.113.30",
        check: |s, l| {
            eq(
                "apiServerFloatingIP",
                &s.osc["apiServerFloatingIP"],
                json!(value(l, "api_server_floating_ip")),
            )
        },
    },
    Row {
        label: "octavia_provider",
        calico: "ovn",
        cilium: "amphora",
        cluster: "amphorav2",
        check: |s, l| {
            let p = value(l, "octavia_provider");
            all([
                eq(
                    "apiServerLoadBalancer.provider",
                    &s.osc["apiServerLoadBalancer"]["provider"],
                    json!(p),
                ),
                conf_line(s, &format!("lb-provider=\"{p}\"")),
            ])
        },
    },
    Row {
        label: "octavia_lb_algorithm",
        calico: "SOURCE_IP_PORT",
        cilium: "LEAST_CONNECTIONS",
        cluster: "SOURCE_IP",
        check: |s, l| {
            conf_line(
                s,
                &format!("lb-method=\"{}\"", value(l, "octavia_lb_algorithm")),
            )
        },
    },
    Row {
        label: "octavia_lb_healthcheck",
        calico: "false",
        cilium: "true",
        cluster: "f",
        check: |s, l| {
            conf_line(
                s,
                &format!("create-monitor={}", yes(l, "octavia_lb_healthcheck")),
            )
        },
    },
    Row {
        label: "api_server_lb_flavor",
        calico: "lb.small",
        cilium: "lb.large",
        cluster: "lb.medium",
        check: |s, l| {
            eq(
                "apiServerLoadBalancer.flavor",
                &s.osc["apiServerLoadBalancer"]["flavor"],
                json!(value(l, "api_server_lb_flavor")),
            )
        },
    },
    Row {
        label: "api_server_lb_availability_zone",
        calico: "az-lb1",
        cilium: "az-lb2",
        cluster: "az-lb3",
        check: |s, l| {
            eq(
                "apiServerLoadBalancer.availabilityZone",
                &s.osc["apiServerLoadBalancer"]["availabilityZone"],
                json!(value(l, "api_server_lb_availability_zone")),
            )
        },
    },
    Row {
        label: "availability_zone",
        calico: "az1",
        cilium: "az2",
        cluster: "az3",
        check: |s, l| {
            let az = json!(value(l, "availability_zone"));
            all([
                eq(
                    "workers' failureDomain",
                    &s.md["spec"]["template"]["spec"]["failureDomain"],
                    az.clone(),
                ),
                eq(
                    "etcd volume zone",
                    &disk(&s.cp, "etcd")["storage"]["volume"]["availabilityZone"]["name"],
                    az.clone(),
                ),
                eq(
                    "runtime volume zone",
                    &disk(&s.worker, "runtime")["storage"]["volume"]["availabilityZone"]["name"],
                    az,
                ),
            ])
        },
    },
    Row {
        label: "control_plane_availability_zones",
        calico: "az1,az2",
        cilium: "az2",
        cluster: "az3,az4",
        check: |s, l| {
            eq(
                "controlPlaneAvailabilityZones",
                &s.osc["controlPlaneAvailabilityZones"],
                json!(items(l, "control_plane_availability_zones")),
            )
        },
    },
    Row {
        label: "boot_volume_size",
        calico: "40",
        cilium: "30",
        cluster: "50",
        check: |s, l| {
            let want = number(l, "boot_volume_size");
            all([
                eq(
                    "control plane root",
                    &s.cp["rootVolume"]["sizeGiB"],
                    want.clone(),
                ),
                eq("workers' root", &s.worker["rootVolume"]["sizeGiB"], want),
            ])
        },
    },
    Row {
        label: "boot_volume_type",
        calico: "fast",
        cilium: "slow",
        cluster: "standard",
        check: |s, l| {
            let want = json!(value(l, "boot_volume_type"));
            all([
                eq(
                    "control plane root type",
                    &s.cp["rootVolume"]["type"],
                    want.clone(),
                ),
                eq("workers' root type", &s.worker["rootVolume"]["type"], want),
            ])
        },
    },
    Row {
        label: "boot_volume_availability_zone",
        calico: "az-b1",
        cilium: "az-b2",
        cluster: "az-b3",
        check: |s, l| {
            let want = json!(value(l, "boot_volume_availability_zone"));
            all([
                eq(
                    "control plane root zone",
                    &s.cp["rootVolume"]["availabilityZone"]["name"],
                    want.clone(),
                ),
                eq(
                    "workers' root zone",
                    &s.worker["rootVolume"]["availabilityZone"]["name"],
                    want,
                ),
            ])
        },
    },
    Row {
        label: "etcd_volume_size",
        calico: "20",
        cilium: "10",
        cluster: "30",
        check: |s, l| {
            all([
                eq(
                    "etcd volume",
                    &disk(&s.cp, "etcd")["sizeGiB"],
                    number(l, "etcd_volume_size"),
                ),
                eq(
                    "etcd mount",
                    &s.kcp["mounts"][0],
                    json!(["LABEL=etcd_disk", "/var/lib/etcd"]),
                ),
            ])
        },
    },
    Row {
        label: "etcd_volume_type",
        calico: "ssd",
        cilium: "hdd",
        cluster: "nvme",
        check: |s, l| {
            eq(
                "etcd volume type",
                &disk(&s.cp, "etcd")["storage"]["volume"]["type"],
                json!(value(l, "etcd_volume_type")),
            )
        },
    },
    Row {
        label: "docker_volume_type",
        calico: "ssd",
        cilium: "hdd",
        cluster: "nvme",
        check: |s, l| {
            let want = json!(value(l, "docker_volume_type"));
            all([
                eq(
                    "control plane runtime volume type",
                    &disk(&s.cp, "runtime")["storage"]["volume"]["type"],
                    want.clone(),
                ),
                eq(
                    "workers' runtime volume type",
                    &disk(&s.worker, "runtime")["storage"]["volume"]["type"],
                    want,
                ),
                eq(
                    "runtime volume size",
                    &disk(&s.worker, "runtime")["sizeGiB"],
                    json!(25),
                ),
            ])
        },
    },
    Row {
        label: "server_group_policies",
        calico: "anti-affinity",
        cilium: "affinity,anti-affinity",
        cluster: "soft-affinity",
        check: |s, l| {
            let first = items(l, "server_group_policies").remove(0);
            let groups: Vec<Found> = s
                .groups
                .values()
                .map(|g| eq("Nova server group policies", &g["policies"], json!([first])))
                .collect();
            if groups.len() == 2 {
                all(groups)
            } else {
                Found::Fail(format!("{} Nova server groups, not 2", groups.len()))
            }
        },
    },
    Row {
        label: "different_failure_domain",
        calico: "true",
        cilium: "false",
        cluster: "on",
        check: |s, l| {
            let want = boolean(l, "different_failure_domain");
            let hint = |m: &Value| m["schedulerHintAdditionalProperties"][0].clone();
            let expect = json!({"name": "different_failure_domain",
                                "value": {"type": "Bool", "bool": want}});
            all([
                eq("control plane hint", &hint(&s.cp), expect.clone()),
                eq("workers' hint", &hint(&s.worker), expect),
            ])
        },
    },
    Row {
        label: "auto_scaling_enabled",
        calico: "true",
        cilium: "false",
        cluster: "yes",
        check: |s, l| {
            let on = yes(l, "auto_scaling_enabled");
            let ann = &s.md["metadata"]["annotations"]["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"];
            all([
                if ann.is_string() == on {
                    Found::Pass
                } else {
                    Found::Fail(format!("autoscaler max-size annotation {ann} with {on}"))
                },
                eq(
                    "cluster autoscalers",
                    &json!(s.autoscalers.len()),
                    json!(usize::from(on)),
                ),
            ])
        },
    },
    Row {
        label: "min_node_count",
        calico: "1",
        cilium: "2",
        cluster: "2",
        check: |s, l| {
            when(yes(l, "auto_scaling_enabled"), || {
                eq(
                    "min-size",
                    &s.md["metadata"]["annotations"]["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"],
                    json!(value(l, "min_node_count")),
                )
            })
        },
    },
    Row {
        label: "max_node_count",
        calico: "4",
        cilium: "5",
        cluster: "6",
        check: |s, l| {
            when(yes(l, "auto_scaling_enabled"), || {
                eq(
                    "max-size",
                    &s.md["metadata"]["annotations"]["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"],
                    json!(value(l, "max_node_count")),
                )
            })
        },
    },
    Row {
        label: "auto_healing_enabled",
        calico: "false",
        cilium: "true",
        cluster: "false",
        check: |s, l| {
            let want = boolean(l, "auto_healing_enabled");
            let topology = &s.cluster["spec"]["topology"];
            all([
                eq(
                    "control plane healthCheck",
                    &topology["controlPlane"]["healthCheck"]["enabled"],
                    want.clone(),
                ),
                eq(
                    "workers' healthCheck",
                    &topology["workers"]["machineDeployments"][0]["healthCheck"]["enabled"],
                    want,
                ),
            ])
        },
    },
    Row {
        label: "cinder_csi_enabled",
        calico: "true",
        cilium: "false",
        cluster: "true",
        check: |s, l| {
            let on = yes(l, "cinder_csi_enabled");
            let blocks = s.classes.keys().filter(|k| k.starts_with("block-")).count();
            all([
                proxy_present(s, "cinder-csi", on),
                if (blocks > 0) == on {
                    Found::Pass
                } else {
                    Found::Fail(format!(
                        "{blocks} block StorageClasses with Cinder CSI {on}"
                    ))
                },
            ])
        },
    },
    Row {
        label: "manila_csi_enabled",
        calico: "true",
        cilium: "false",
        cluster: "true",
        check: |s, l| {
            let on = yes(l, "manila_csi_enabled");
            all([
                proxy_present(s, "manila-csi", on),
                proxy_present(s, "nfs-csi", on),
            ])
        },
    },
    Row {
        label: "manila_csi_share_network_id",
        calico: "8d0bd1d2-6c3e-4f1b-9a55-1f0e6a7c0001",
        cilium: "8d0bd1d2-6c3e-4f1b-9a55-1f0e6a7c0002",
        cluster: "8d0bd1d2-6c3e-4f1b-9a55-1f0e6a7c0003",
        check: |s, l| {
            when(yes(l, "manila_csi_enabled"), || {
                let shares: Vec<&Value> = s
                    .classes
                    .iter()
                    .filter(|(k, _)| k.starts_with("share-"))
                    .map(|(_, v)| v)
                    .collect();
                if shares.is_empty() {
                    return Found::Fail("no share StorageClass".into());
                }
                all(shares.iter().map(|sc| {
                    eq(
                        "shareNetworkID",
                        &sc["parameters"]["shareNetworkID"],
                        json!(value(l, "manila_csi_share_network_id")),
                    )
                }))
            })
        },
    },
    Row {
        label: "monitoring_enabled",
        calico: "true",
        cilium: "false",
        cluster: "true",
        check: |s, l| proxy_present(s, "monitoring", yes(l, "monitoring_enabled")),
    },
    Row {
        label: "kube_dashboard_enabled",
        calico: "true",
        cilium: "false",
        cluster: "false",
        check: |s, l| proxy_present(s, "dashboard", yes(l, "kube_dashboard_enabled")),
    },
];

/// The labels of docs/cluster-api.md's table, in its order.
fn documented_labels() -> Vec<String> {
    let doc = std::fs::read_to_string(repo_root().join("docs/cluster-api.md")).unwrap();
    let mut in_table = false;
    let mut out = Vec::new();
    for line in doc.lines() {
        if line.starts_with("| label | default |") {
            in_table = true;
            continue;
        }
        if in_table {
            let Some(rest) = line.strip_prefix("| `") else {
                if !line.starts_with("| ---") {
                    break;
                }
                continue;
            };
            out.push(rest.split('`').next().unwrap_or_default().to_owned());
        }
    }
    out
}

fn labels_arg(pairs: &[(&str, &str)]) -> Vec<String> {
    // One `--labels` per label: list values carry commas.
    pairs
        .iter()
        .flat_map(|(k, v)| ["--labels".to_owned(), format!("{k}={v}")])
        .collect()
}

fn template_args(name: &str, driver: &str, labels: &[(&str, &str)]) -> Vec<String> {
    let mut args: Vec<String> = [
        "coe",
        "cluster",
        "template",
        "create",
        name,
        "--coe",
        "kubernetes",
        "--image",
        "fedora-coreos-40",
        "--external-network",
        "public",
        "--flavor",
        "m1.small",
        "--master-flavor",
        "m1.medium",
        "--docker-volume-size",
        "25",
        "--master-lb-enabled",
        "--network-driver",
        driver,
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(labels_arg(labels));
    args
}

fn cluster_args(name: &str, template: &str, labels: &[(&str, &str)]) -> Vec<String> {
    let mut args: Vec<String> = [
        "coe",
        "cluster",
        "create",
        name,
        "--cluster-template",
        template,
        "--master-count",
        "1",
        "--node-count",
        "1",
    ]
    .map(str::to_owned)
    .to_vec();
    if !labels.is_empty() {
        args.extend(labels_arg(labels));
        args.push("--merge-labels".into());
    }
    args
}

fn b64_json(v: &Value) -> Value {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_default())
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn one(kube: &Kube, group_version: &str, plural: &str, selector: &str) -> Value {
    let items = kube.list(group_version, plural, selector);
    assert_eq!(items.len(), 1, "{plural} {selector}: {items:?}");
    items.into_iter().next().unwrap()
}

fn seen(kube: &Kube, c: &crate::cloud::Env, shown: &Value, driver: &str) -> Seen {
    let stack = shown["cluster_id"].as_str().unwrap();
    let uuid = shown["uuid"].as_str().unwrap();
    let sel = format!("cluster.x-k8s.io/cluster-name={stack}");
    let osmts = kube.list(OSMT, "openstackmachinetemplates", &sel);
    let by_role = |role: &str| {
        osmts
            .iter()
            .find(|o| o["metadata"]["annotations"]["capi-sim.magnum-rs.dev/template-role"] == role)
            .unwrap_or_else(|| panic!("{stack}: no {role} machine template: {osmts:?}"))["spec"]
            ["template"]["spec"]
            .clone()
    };
    let mut proxies = BTreeMap::new();
    for p in kube.list(
        "addons.cluster.x-k8s.io/v1alpha1",
        "helmchartproxies",
        &format!("cluster-uuid={uuid}"),
    ) {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let addon = name.trim_start_matches(&format!("{stack}-")).to_owned();
        let text = p["spec"]["valuesTemplate"]
            .as_str()
            .unwrap_or_default()
            .replace("{{ \"{{\" }}", "{{");
        let values: Value = serde_json::from_str(&text).unwrap();
        let version = p["spec"]["version"].as_str().unwrap_or_default().to_owned();
        proxies.insert(addon, (version, values));
    }
    let workload = kube.get(&format!(
        "/api/v1/namespaces/magnum-system/secrets/{stack}-workload-cloud-config"
    ));
    let data = workload["data"].as_object().cloned().unwrap_or_default();
    let inner = b64_json(&data["cloud-config.yaml"]);
    let conf = base64::engine::general_purpose::STANDARD
        .decode(inner["data"]["cloud.conf"].as_str().unwrap_or_default())
        .unwrap();
    let classes = data
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("storageclass-")?.strip_suffix(".yaml")?;
            Some((name.to_owned(), b64_json(v)))
        })
        .collect();
    let groups = c
        .server_groups()
        .into_iter()
        .filter(|g| {
            g["name"]
                .as_str()
                .is_some_and(|n| n == stack || n.starts_with(&format!("{stack}-")))
        })
        .map(|g| (g["name"].as_str().unwrap_or_default().to_owned(), g))
        .collect();
    Seen {
        network_driver: driver.to_owned(),
        cluster: kube.get(&format!(
            "/apis/{CLUSTERS}/namespaces/magnum-system/clusters/{stack}"
        )),
        kcp: one(
            kube,
            "controlplane.cluster.x-k8s.io/v1beta2",
            "kubeadmcontrolplanes",
            &sel,
        )["spec"]["kubeadmConfigSpec"]
            .clone(),
        osc: one(kube, OSMT, "openstackclusters", &sel)["spec"].clone(),
        cp: by_role("control-plane"),
        worker: by_role("md-default-worker"),
        kct: one(
            kube,
            "bootstrap.cluster.x-k8s.io/v1beta2",
            "kubeadmconfigtemplates",
            &sel,
        )["spec"]["template"]["spec"]
            .clone(),
        md: one(kube, CLUSTERS, "machinedeployments", &sel),
        proxies,
        cloud_conf: String::from_utf8_lossy(&conf).into_owned(),
        classes,
        autoscalers: kube.list("apps/v1", "deployments", &sel),
        groups,
    }
}

/// A bad value per label the driver parses, and the refusals that need two labels: (labels,
/// the start of the message the client shows).
fn refusals() -> Vec<(Vec<(&'static str, &'static str)>, String)> {
    const BAD: &[(&str, &str)] = &[
        ("container_infra_prefix", "https://mirror"),
        ("cloud_provider_tag", "v1/33"),
        ("calico_tag", "v3:30"),
        ("cilium_tag", "latest!"),
        ("cinder_csi_plugin_tag", "@v1"),
        ("manila_csi_plugin_tag", "v1 33"),
        ("admission_control_list", "Pod-Security"),
        ("api_server_cert_sans", "bad_name!"),
        ("api_server_tls_cipher_suites", "AES128-SHA"),
        ("kubelet_tls_cipher_suites", "RC4"),
        ("audit_log_enabled", "sometimes"),
        ("audit_log_max_age", "-1"),
        ("audit_log_max_backup", "ten"),
        ("audit_log_max_size", "1G"),
        ("oidc_issuer_url", "http://idp"),
        ("oidc_client_id", "k8s\u{7}"),
        ("keystone_auth_enabled", "maybe"),
        ("calico_ipv4pool", "10/8"),
        ("cilium_ipv4pool", "fd00::/200"),
        ("cilium_hubble_ui_enabled", "2"),
        ("service_cluster_ip_range", "everything"),
        ("dns_cluster_domain", "-bad-"),
        ("fixed_subnet_cidr", "subnet"),
        ("extra_network_names", "storage \u{1}x"),
        ("api_master_lb_allowed_cidrs", "any"),
        ("master_lb_floating_ip_enabled", "enabled"),
        ("api_server_floating_ip", "floating"),
        ("octavia_lb_algorithm", "RANDOM"),
        ("octavia_lb_healthcheck", "always"),
        ("control_plane_availability_zones", "az\u{1}"),
        ("boot_volume_size", "big"),
        ("etcd_volume_size", "-20"),
        ("server_group_policies", "spread"),
        ("different_failure_domain", "maybe"),
        ("auto_scaling_enabled", "auto"),
        ("min_node_count", "-1"),
        ("max_node_count", "many"),
        ("auto_healing_enabled", "sure"),
        ("cinder_csi_enabled", "x"),
        ("manila_csi_enabled", "x"),
        ("monitoring_enabled", "x"),
        ("kube_dashboard_enabled", "x"),
    ];
    // The client shows a message up to its first full stop.
    let shown = |m: String| m.split('.').next().unwrap_or_default().to_owned();
    let mut out: Vec<_> = BAD
        .iter()
        .map(|&(k, v)| {
            (
                vec![(k, v)],
                shown(format!("Invalid value for label {k}: '{v}'")),
            )
        })
        .collect();
    out.push((
        vec![("kube_tag", "latest")],
        "The kube_tag label must be a Kubernetes version, vMAJOR".into(),
    ));
    out.push((
        vec![
            ("octavia_provider", "ovn"),
            ("octavia_lb_algorithm", "ROUND_ROBIN"),
        ],
        "Invalid value for octavia_lb_algorithm: 'ROUND_ROBIN' (the ovn provider supports SOURCE_IP_PORT only)".into(),
    ));
    out.push((
        vec![("oidc_issuer_url", "https://idp")],
        "The label oidc_client_id is required with oidc_issuer_url (the API server does not start without it)".into(),
    ));
    out.push((
        vec![
            ("auto_scaling_enabled", "true"),
            ("min_node_count", "3"),
            ("max_node_count", "2"),
        ],
        "Invalid value for label max_node_count: '2' (below min_node_count 3)".into(),
    ));
    out
}

/// The answer to a refused command: 400 and the message.
fn assert_refused(what: &str, answer: &(i32, String), text: &str) {
    let (rc, out) = answer;
    assert!(
        out.contains("(HTTP 400)") && out.contains(text),
        "{what}: expected a 400 with {text:?}, got exit {rc}: {out}"
    );
}

#[test]
fn every_label_of_the_table_reaches_its_object_from_a_template_and_a_cluster_override() {
    let Some(c) = crate::cloud::cloud() else {
        return;
    };
    // The table and the matrix name the same labels, in the same order.
    let documented = documented_labels();
    let rows: Vec<&str> = ROWS.iter().map(|r| r.label).collect();
    assert_eq!(rows, documented, "docs/cluster-api.md's label table");
    for r in ROWS {
        assert!(
            r.cluster != r.calico || r.cluster != r.cilium,
            "{}: the override must differ from a template's value",
            r.label
        );
    }

    let kube_dir = tempfile::tempdir().unwrap();
    let kube = Kube::start(kube_dir.path(), "0.2");
    let m = crate::cloud::start_magnum(
        &c,
        &format!(
            // Upstream's default allows flannel and calico only: an operator adds cilium.
            "\n[cluster_api]\nenabled = true\nkubeconfig = {}\n\n[drivers]\ndefault_driver = k8s_capi\n\n\
             [cluster_template]\nkubernetes_allowed_network_drivers = calico,cilium\n",
            kube.kubeconfig.display()
        ),
    );
    let cli = &m.cli;
    let template_labels = |driver: &str| -> Vec<(&str, &str)> {
        let mut l: Vec<(&str, &str)> = ROWS
            .iter()
            .map(|r| {
                (
                    r.label,
                    if driver == "calico" {
                        r.calico
                    } else {
                        r.cilium
                    },
                )
            })
            .collect();
        l.push(("unknown_label", "kept"));
        l
    };
    let overrides: Vec<(&str, &str)> = ROWS
        .iter()
        .map(|r| (r.label, r.cluster))
        .chain([("unknown_label", "other")])
        .collect();

    // Every refusal first, so "nothing created" is nothing at all. Each bad value on a
    // template, then on a cluster of a good template.
    let cases = refusals();
    let mut commands: Vec<Vec<String>> = cases
        .iter()
        .map(|(bad, _)| template_args("refused", "calico", bad))
        .collect();
    commands.push(template_args(
        "labels-calico",
        "calico",
        &template_labels("calico"),
    ));
    commands.push(template_args(
        "labels-cilium",
        "cilium",
        &template_labels("cilium"),
    ));
    // The bad values on clusters of a template without labels: each case alone.
    commands.push(template_args("plain", "calico", &[]));
    commands.extend(
        cases
            .iter()
            .map(|(bad, _)| cluster_args("refused", "plain", bad)),
    );
    let started = std::time::Instant::now();
    let answers = cli.batch(CLOUD, &commands);
    eprintln!(
        "label matrix: {} client commands in {:.1} s",
        commands.len(),
        started.elapsed().as_secs_f64()
    );
    let n = cases.len();
    for ((bad, text), answer) in cases.iter().zip(&answers[..n]) {
        assert_refused(&format!("template with {bad:?}"), answer, text);
    }
    for (i, name) in ["labels-calico", "labels-cilium", "plain"]
        .iter()
        .enumerate()
    {
        let (rc, out) = &answers[n + i];
        assert_eq!(*rc, 0, "template {name}: {out}");
    }
    for ((bad, text), answer) in cases.iter().zip(&answers[n + 3..]) {
        assert_refused(&format!("cluster with {bad:?}"), answer, text);
    }
    let templates = cli.json(CLOUD, &["coe", "cluster", "template", "list"]);
    let names: BTreeSet<&str> = templates
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["labels-calico", "labels-cilium", "plain"]),
        "no refused template was stored"
    );
    assert_eq!(
        cli.json(CLOUD, &["coe", "cluster", "list"]),
        json!([]),
        "no refused cluster was stored"
    );
    assert!(
        kube.list(CLUSTERS, "clusters", "").is_empty(),
        "a refused cluster reached the management cluster"
    );

    // Four clusters: each template alone, and each with every label overridden.
    // (name, template, network driver, the cluster's own labels)
    let clusters: [(&str, &str, &str, Pairs<'_>); 4] = [
        ("calico-template", "labels-calico", "calico", &[]),
        ("calico-override", "labels-calico", "calico", &overrides),
        ("cilium-template", "labels-cilium", "cilium", &[]),
        ("cilium-override", "labels-cilium", "cilium", &overrides),
    ];
    let creates: Vec<Vec<String>> = clusters
        .iter()
        .map(|(name, template, _, labels)| cluster_args(name, template, labels))
        .collect();
    for ((name, ..), (rc, out)) in clusters.iter().zip(cli.batch(CLOUD, &creates)) {
        assert_eq!(rc, 0, "cluster {name}: {out}");
    }
    // Which labels were seen set by a template alone, and overridden by a cluster.
    let mut by_template = BTreeSet::new();
    let mut by_override = BTreeSet::new();
    let mut failures = Vec::new();
    for (name, template, driver, over) in &clusters {
        let shown = wait_for(cli, CLOUD, name, 180, status_is("CREATE_COMPLETE"));
        let seen = seen(&kube, &c, &shown, driver);
        let tl = template_labels(driver);
        let mut effective: Labels = tl
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        for (k, v) in over.iter() {
            effective.insert((*k).to_owned(), (*v).to_owned());
        }
        for r in ROWS {
            match (r.check)(&seen, &effective) {
                Found::Pass if over.is_empty() => {
                    by_template.insert(r.label);
                }
                Found::Pass => {
                    by_override.insert(r.label);
                }
                Found::Fail(why) => failures.push(format!(
                    "{name} ({template}): {} = {:?}: {why}",
                    r.label,
                    value(&effective, r.label)
                )),
                Found::NotHere => {}
            }
        }
    }
    assert!(
        failures.is_empty(),
        "labels that did not reach their objects:\n{}",
        failures.join("\n")
    );
    for r in ROWS {
        assert!(
            by_template.contains(r.label),
            "{}: never checked from a template",
            r.label
        );
        assert!(
            by_override.contains(r.label),
            "{}: never checked from a cluster override",
            r.label
        );
    }
    // A label the driver does not know is accepted, and logged once.
    let log = std::fs::read_to_string(m.work.path().join("api.log")).unwrap_or_default();
    let unknown = log
        .lines()
        .filter(|l| l.contains("does not use this label") && l.contains("unknown_label"))
        .count();
    assert_eq!(unknown, 1, "the unknown label logged once");
    eprintln!(
        "label matrix: {} labels, each checked from a template and from a cluster override; {} refusals at template and at cluster create",
        ROWS.len(),
        n
    );

    for (name, ..) in &clusters {
        cli.ok(CLOUD, &["coe", "cluster", "delete", name]);
    }
    wait_all_deleted(cli, 180);
    assert!(kube.list(CLUSTERS, "clusters", "").is_empty());
}
