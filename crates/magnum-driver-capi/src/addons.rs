//! Add-ons every cluster gets without operator files: one CAAPH `HelmChartProxy`
//! (addons.cluster.x-k8s.io/v1alpha1) per add-on and cluster, selecting only that cluster
//! (docs/spec/cluster-api-addons.md §5). Charts are referred to by their public coordinates;
//! values are rendered here from the cluster and never carry a credential (CAAPH copies
//! values in clear text into its HelmReleaseProxy and Helm into a release Secret): the
//! charts read the workload cluster's Secret [`WORKLOAD_SECRET`] instead.

use std::collections::BTreeMap;

use magnum_conf::config::ClusterApiSection;
use magnum_core::model::{Cluster, ClusterTemplate};
use serde_json::{Value, json};

use super::kube::Kind;
use super::render::{
    Inputs, UUID_LABEL, b64, cluster_labels, effective, kube_version, meta, secret,
};

/// The Secret in the workload cluster's `kube-system` every OpenStack chart reads
/// (`cloud.conf`, `ca.crt`; magnum-cluster-api's name, so its users' habits carry over).
pub const WORKLOAD_SECRET: &str = "cloud-config";
/// Label on each HelmChartProxy naming its add-on.
pub const ADDON_LABEL: &str = "magnum.openstack.org/addon";

/// An add-on the driver can install.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addon {
    Calico,
    Cilium,
    Ccm,
    CinderCsi,
    ManilaCsi,
    /// The NFS node plugin Manila's forwards NFS shares to.
    NfsCsi,
    KeystoneAuth,
    /// kube-prometheus-stack (`monitoring_enabled`, magnum-capi-helm's label).
    Monitoring,
    /// Headlamp (`kube_dashboard_enabled`): the retired Kubernetes Dashboard's successor.
    Dashboard,
}

impl Addon {
    pub const ALL: [Addon; 9] = [
        Addon::Calico,
        Addon::Cilium,
        Addon::Ccm,
        Addon::CinderCsi,
        Addon::ManilaCsi,
        Addon::NfsCsi,
        Addon::KeystoneAuth,
        Addon::Monitoring,
        Addon::Dashboard,
    ];

    /// Its key in `[cluster_api] addons_chart_versions` and in [`ADDON_LABEL`].
    pub fn key(self) -> &'static str {
        self.chart().key
    }

    /// The HelmChartProxy name's suffix: both CNIs are `cni`, as a cluster has one.
    fn suffix(self) -> &'static str {
        match self {
            Addon::Calico | Addon::Cilium => "cni",
            Addon::Ccm => "ccm",
            Addon::CinderCsi => "cinder-csi",
            Addon::ManilaCsi => "manila-csi",
            Addon::NfsCsi => "nfs-csi",
            Addon::KeystoneAuth => "keystone-auth",
            Addon::Monitoring => "monitoring",
            Addon::Dashboard => "dashboard",
        }
    }

    pub fn proxy_name(self, stack_id: &str) -> String {
        format!("{stack_id}-{}", self.suffix())
    }

    fn chart(self) -> &'static Chart {
        // CHARTS holds one row per add-on, in `ALL`'s order.
        &CHARTS[self as usize]
    }
}

/// One add-on's chart: public coordinates and the version pinned per Kubernetes minor.
#[derive(Debug)]
pub struct Chart {
    pub addon: Addon,
    pub key: &'static str,
    pub repository: &'static str,
    pub chart: &'static str,
    /// Release namespace and name in the workload cluster.
    pub namespace: &'static str,
    pub release: &'static str,
    /// (Kubernetes minor, chart version), ascending; a minor outside the rows takes the
    /// nearest one (one minor of skew is what these components tolerate).
    pub versions: &'static [(u32, &'static str)],
}

const CPO: &str = "https://kubernetes.github.io/cloud-provider-openstack";

/// Every chart, in `Addon::ALL`'s order. Versions: cloud-provider-openstack's chart
/// releases whose appVersion matches the minor; tigera-operator as magnum-capi-helm's
/// charts pin it; Cilium's latest 1.17 (documented down to 1.29) and 1.18 patch releases;
/// csi-driver-nfs's 4.12.1 (Kubernetes 1.21 and later); the catalyst-cloud keystone-auth
/// chart magnum-capi-helm uses; kube-prometheus-stack and Headlamp at the versions
/// capi-helm-charts' cluster-addons pins (July 2026).
pub const CHARTS: &[Chart] = &[
    Chart {
        addon: Addon::Calico,
        key: "calico",
        repository: "https://docs.tigera.io/calico/charts",
        chart: "tigera-operator",
        namespace: "tigera-operator",
        release: "calico",
        versions: &[(29, "v3.31.5")],
    },
    Chart {
        addon: Addon::Cilium,
        key: "cilium",
        repository: "https://helm.cilium.io/",
        chart: "cilium",
        namespace: "kube-system",
        release: "cilium",
        versions: &[(29, "1.17.10"), (30, "1.18.5")],
    },
    Chart {
        addon: Addon::Ccm,
        key: "openstack-ccm",
        repository: CPO,
        chart: "openstack-cloud-controller-manager",
        namespace: "kube-system",
        release: "openstack-ccm",
        versions: &[
            (29, "2.29.3"),
            (30, "2.30.6"),
            (31, "2.31.4"),
            (32, "2.32.1"),
            (33, "2.33.1"),
        ],
    },
    Chart {
        addon: Addon::CinderCsi,
        key: "cinder-csi",
        repository: CPO,
        chart: "openstack-cinder-csi",
        namespace: "kube-system",
        release: "cinder-csi",
        versions: &[
            (29, "2.29.2"),
            (30, "2.30.4"),
            (31, "2.31.8"),
            (32, "2.32.2"),
            (33, "2.33.1"),
        ],
    },
    Chart {
        addon: Addon::ManilaCsi,
        key: "manila-csi",
        repository: CPO,
        chart: "openstack-manila-csi",
        namespace: "kube-system",
        release: "manila-csi",
        versions: &[
            (29, "2.29.1"),
            (30, "2.30.4"),
            (31, "2.31.5"),
            (32, "2.32.1"),
            (33, "2.33.1"),
        ],
    },
    Chart {
        addon: Addon::NfsCsi,
        key: "nfs-csi",
        repository: "https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/master/charts",
        chart: "csi-driver-nfs",
        namespace: "kube-system",
        release: "csi-driver-nfs",
        versions: &[(29, "4.12.1")],
    },
    Chart {
        addon: Addon::KeystoneAuth,
        key: "k8s-keystone-auth",
        repository: "https://catalyst-cloud.github.io/capi-plugin-helm-charts",
        chart: "k8s-keystone-auth",
        namespace: "kube-system",
        release: "k8s-keystone-auth",
        versions: &[(29, "1.5.1")],
    },
    Chart {
        addon: Addon::Monitoring,
        key: "kube-prometheus-stack",
        repository: "https://prometheus-community.github.io/helm-charts",
        chart: "kube-prometheus-stack",
        namespace: "monitoring-system",
        release: "kube-prometheus-stack",
        versions: &[(29, "85.0.2")],
    },
    Chart {
        addon: Addon::Dashboard,
        key: "headlamp",
        repository: "https://kubernetes-sigs.github.io/headlamp",
        chart: "headlamp",
        namespace: "headlamp",
        release: "headlamp",
        versions: &[(29, "0.43.0")],
    },
];

impl Chart {
    /// The pinned version for a Kubernetes minor.
    pub fn pinned(&self, minor: u32) -> &'static str {
        let mut out = self.versions.first().map_or("", |v| v.1);
        for (m, v) in self.versions {
            if *m <= minor {
                out = v;
            }
        }
        out
    }
}

/// The operator's choices from `[cluster_api]`.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// One repository for every chart (a mirror); empty: the public ones.
    pub repository: String,
    /// Version overrides by add-on key.
    pub versions: BTreeMap<String, String>,
}

impl Settings {
    /// `None` when the operator turned the HelmChartProxies off.
    pub fn from_config(cfg: &ClusterApiSection) -> Option<Self> {
        if !cfg.addons_helm_enabled {
            return None;
        }
        // A misspelt add-on would silently keep the pinned version: say so.
        for key in cfg.addons_chart_versions.keys() {
            if !CHARTS.iter().any(|c| c.key == key) {
                let known: Vec<&str> = CHARTS.iter().map(|c| c.key).collect();
                tracing::warn!(
                    addon = %key,
                    known = %known.join(", "),
                    "[cluster_api] addons_chart_versions names no add-on"
                );
            }
        }
        Some(Settings {
            repository: cfg.addons_chart_repository.trim().to_owned(),
            versions: cfg.addons_chart_versions.clone(),
        })
    }
}

/// The operator's `addons_path` file that provides an add-on instead of its chart.
fn operator_file(addon: Addon, driver: &str) -> Option<String> {
    match addon {
        Addon::Calico | Addon::Cilium => Some(format!("cni-{driver}.yaml")),
        Addon::Ccm => Some("cloud-provider.yaml".into()),
        Addon::CinderCsi => Some("csi-cinder.yaml".into()),
        Addon::ManilaCsi
        | Addon::NfsCsi
        | Addon::KeystoneAuth
        | Addon::Monitoring
        | Addon::Dashboard => None,
    }
}

/// The add-ons a cluster gets, and those it must not have (to delete: a label turned off).
/// An add-on the operator's `addons_path` provides is in neither: their manifest wins, and
/// two CNIs or cloud controllers in one cluster would fight.
pub fn selected(i: &Inputs<'_>) -> (Vec<Addon>, Vec<Addon>) {
    let driver = i.template.network_driver.as_deref().unwrap_or("calico");
    let by_operator = |a: &Addon| {
        operator_file(*a, driver)
            .is_some_and(|f| i.addons.manifests.iter().any(|(name, _)| *name == f))
    };
    let (wanted, unwanted) = chosen(i);
    (
        wanted.into_iter().filter(|a| !by_operator(a)).collect(),
        unwanted.into_iter().filter(|a| !by_operator(a)).collect(),
    )
}

/// The add-ons the labels and network driver ask for, and the others.
fn chosen(i: &Inputs<'_>) -> (Vec<Addon>, Vec<Addon>) {
    let l = cluster_labels(i.cluster, i.template);
    let cilium = i.template.network_driver.as_deref() == Some("cilium");
    // Manila needs a share service the renderer cannot see in the catalogue (magnum-cluster-api
    // checks it), so it is installed only when a label asks for it.
    let manila = effective(i.cluster, i.template, "manila_csi_enabled")
        .is_some_and(|v| super::labels::parse_bool(&v) == Some(true));
    let want = |a: Addon| match a {
        Addon::Calico => !cilium,
        Addon::Cilium => cilium,
        Addon::Ccm => true,
        Addon::CinderCsi => l.bool("cinder_csi_enabled"),
        Addon::ManilaCsi | Addon::NfsCsi => manila,
        Addon::KeystoneAuth => l.bool("keystone_auth_enabled"),
        Addon::Monitoring => l.bool("monitoring_enabled"),
        Addon::Dashboard => l.bool("kube_dashboard_enabled"),
    };
    Addon::ALL.into_iter().partition(|a| want(*a))
}

/// `container_infra_prefix` without its trailing `/`, when set.
pub(crate) fn prefix(i: &Inputs<'_>) -> Option<String> {
    cluster_labels(i.cluster, i.template)
        .text("container_infra_prefix")
        .map(|p| p.trim_end_matches('/').to_owned())
        .filter(|p| !p.is_empty())
}

/// A label only when the user set it (a table default would pin an image the chart
/// version may not match).
fn given(i: &Inputs<'_>, name: &str) -> Option<String> {
    effective(i.cluster, i.template, name)
}

/// The Kubernetes minor of the cluster's version (0 when unparsable: the first row).
pub(crate) fn minor(i: &Inputs<'_>) -> u32 {
    kube_version(i)
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// The pod CIDR, as the Cluster object carries it (the service CIDR reaches the cluster
/// through kubeadm's clusterNetwork; none of these charts takes it).
fn pod_cidr(i: &Inputs<'_>) -> String {
    let l = cluster_labels(i.cluster, i.template);
    let driver = i.template.network_driver.as_deref().unwrap_or("calico");
    l.text(&format!("{driver}_ipv4pool"))
        .unwrap_or("10.100.0.0/16")
        .to_owned()
}

fn image(repo: &str, tag: Option<String>) -> Value {
    let mut v = json!({"repository": repo});
    if let Some(t) = tag {
        v["tag"] = json!(t);
    }
    v
}

/// Tolerations letting a controller run on control-plane nodes (old and new taint).
fn control_plane_tolerations() -> Value {
    json!([
        {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
    ])
}

/// The chart values of one add-on for this cluster.
pub fn values(addon: Addon, i: &Inputs<'_>) -> Value {
    let p = prefix(i);
    let uuid = i.cluster.uuid.as_str();
    let pods = pod_cidr(i);
    let l = cluster_labels(i.cluster, i.template);
    // The layout of magnum-cluster-api's mirrors (spec §7), so they serve these clusters.
    let mirrored = |name: &str| p.as_ref().map(|p| format!("{p}/{name}"));
    match addon {
        Addon::Calico => {
            let mut v = json!({"installation": {
                "calicoNetwork": {
                    // IP-in-IP over BGP, as magnum-cluster-api's Calico runs.
                    "bgp": "Enabled",
                    "ipPools": [{
                        "cidr": pods,
                        "encapsulation": "IPIP",
                        "natOutgoing": "Enabled",
                        "blockSize": 26,
                    }],
                },
            }});
            if let Some(p) = &p {
                v["installation"]["registry"] = json!(format!("{p}/"));
                v["installation"]["imagePath"] = json!("calico");
                v["tigeraOperator"] = json!({"registry": p, "image": "tigera/operator"});
            }
            v
        }
        Addon::Cilium => {
            let hubble = l.bool("cilium_hubble_ui_enabled");
            let mut v = json!({
                "ipam": {"mode": "cluster-pool", "operator": {"clusterPoolIPv4PodCIDRList": [pods]}},
                "hubble": {"relay": {"enabled": hubble}, "ui": {"enabled": hubble}},
            });
            if let Some(p) = &p {
                // Digests name the public images; a mirror is addressed by tag.
                let img =
                    |name: &str| json!({"repository": format!("{p}/{name}"), "useDigest": false});
                v["image"] = img("cilium");
                v["operator"] = json!({"image": img("cilium-operator")});
                v["certgen"] = json!({"image": img("cilium-certgen")});
                v["hubble"]["relay"]["image"] = img("cilium-hubble-relay");
                v["hubble"]["ui"]["backend"] = json!({"image": img("cilium-hubble-ui-backend")});
                v["hubble"]["ui"]["frontend"] = json!({"image": img("cilium-hubble-ui")});
                v["envoy"] = json!({"image": img("cilium-envoy")});
                v["nodeinit"] = json!({"image": img("cilium-startup-script")});
                v["preflight"] = json!({"image": img("cilium")});
                v["clustermesh"] =
                    json!({"apiserver": {"image": img("cilium-clustermesh-apiserver")}});
            }
            v
        }
        Addon::Ccm => {
            let mut v = json!({
                "secret": {"enabled": true, "create": false, "name": WORKLOAD_SECRET},
                // The Magnum uuid names the load balancers, as magnum-cluster-api's: the
                // delete finds them by it.
                "cluster": {"name": uuid},
                "extraVolumes": [
                    {"name": "k8s-certs", "hostPath": {"path": "/etc/kubernetes/pki", "type": "Directory"}},
                    {"name": "ca-certs", "hostPath": {"path": "/etc/ssl/certs", "type": "DirectoryOrCreate"}},
                ],
                "extraVolumeMounts": [
                    {"name": "k8s-certs", "mountPath": "/etc/kubernetes/pki", "readOnly": true},
                    {"name": "ca-certs", "mountPath": "/etc/ssl/certs", "readOnly": true},
                ],
            });
            let tag = given(i, "cloud_provider_tag");
            if let Some(repo) = mirrored("openstack-cloud-controller-manager") {
                v["image"] = image(&repo, tag);
            } else if let Some(t) = tag {
                v["image"] = json!({"tag": t});
            }
            v
        }
        Addon::CinderCsi => {
            let mut plugin = json!({
                "volumes": [],
                "volumeMounts": [
                    {"name": WORKLOAD_SECRET, "mountPath": "/etc/kubernetes", "readOnly": true},
                    {"name": WORKLOAD_SECRET, "mountPath": "/etc/config", "readOnly": true},
                ],
                "controllerPlugin": {"tolerations": control_plane_tolerations()},
            });
            let tag = given(i, "cinder_csi_plugin_tag");
            let mut csi = json!({});
            if let Some(p) = &p {
                plugin["image"] = image(&format!("{p}/cinder-csi-plugin"), tag);
                for (key, name) in [
                    ("attacher", "csi-attacher"),
                    ("provisioner", "csi-provisioner"),
                    ("snapshotter", "csi-snapshotter"),
                    ("resizer", "csi-resizer"),
                    ("nodeDriverRegistrar", "csi-node-driver-registrar"),
                    ("livenessprobe", "csi-livenessprobe"),
                ] {
                    csi[key] = json!({"image": {"repository": format!("{p}/{name}")}});
                }
            } else if let Some(t) = tag {
                plugin["image"] = json!({"tag": t});
            }
            csi["plugin"] = plugin;
            json!({
                "secret": {"enabled": true, "create": false, "name": WORKLOAD_SECRET},
                // StorageClasses follow the cloud's volume types, not the chart's default.
                "storageClass": {"enabled": false},
                "clusterID": uuid,
                "csi": csi,
            })
        }
        Addon::ManilaCsi => {
            let tag = given(i, "manila_csi_plugin_tag");
            let mut v = json!({
                "csimanila": {"clusterID": uuid},
                "nodeplugin": {"tolerations": [{"operator": "Exists"}]},
                "controllerplugin": {"tolerations": control_plane_tolerations()},
                "shareProtocols": [{
                    "protocolSelector": "NFS",
                    // Where the csi-driver-nfs node plugin (Addon::NfsCsi) listens.
                    "fwdNodePluginEndpoint": {
                        "dir": "/var/lib/kubelet/plugins/csi-nfsplugin",
                        "sockFile": "csi.sock",
                    },
                }],
            });
            if let Some(p) = &p {
                v["csimanila"]["image"] = image(&format!("{p}/manila-csi-plugin"), tag);
                v["nodeplugin"]["registrar"] =
                    json!({"image": {"repository": format!("{p}/csi-node-driver-registrar")}});
                for (key, name) in [
                    ("provisioner", "csi-provisioner"),
                    ("snapshotter", "csi-snapshotter"),
                    ("resizer", "csi-resizer"),
                ] {
                    v["controllerplugin"][key] =
                        json!({"image": {"repository": format!("{p}/{name}")}});
                }
            } else if let Some(t) = tag {
                v["csimanila"]["image"] = json!({"tag": t});
            }
            v
        }
        Addon::NfsCsi => {
            let mut v = json!({});
            if let Some(p) = &p {
                let mut images = json!({"baseRepo": p});
                for (key, name) in [
                    ("nfs", "nfsplugin"),
                    ("csiProvisioner", "csi-provisioner"),
                    ("csiResizer", "csi-resizer"),
                    ("csiSnapshotter", "csi-snapshotter"),
                    ("livenessProbe", "csi-livenessprobe"),
                    ("nodeDriverRegistrar", "csi-node-driver-registrar"),
                    ("externalSnapshotter", "snapshot-controller"),
                ] {
                    images[key] = json!({"repository": format!("{p}/{name}")});
                }
                v["image"] = images;
            }
            v
        }
        Addon::KeystoneAuth => {
            let auth = i
                .cloud
                .map(|c| c.auth_url.trim_end_matches('/').to_owned())
                .unwrap_or_default();
            let mut v = json!({
                "openstackAuthUrl": auth,
                "projectId": i.cluster.project_id.clone().unwrap_or_default(),
            });
            if let Some(repo) = mirrored("k8s-keystone-auth") {
                v["image"] = json!({"repository": repo});
            }
            v
        }
        Addon::Monitoring => {
            let mut v = json!({
                "prometheus": {"prometheusSpec": {"retention": "7d"}},
                // Empty: Grafana's chart makes a random admin password (kept in a Secret of
                // the workload cluster) instead of the stack's well-known default.
                "grafana": {"adminPassword": ""},
            });
            // The stack and its subcharts put `global.imageRegistry` before every image
            // path, so a mirror keeps the public paths under its prefix.
            if let Some(p) = &p {
                v["global"] = json!({"imageRegistry": p});
            }
            v
        }
        Addon::Dashboard => {
            let mut v = json!({});
            if let Some(p) = &p {
                v["image"] = json!({"registry": p});
            }
            v
        }
    }
}

/// A gcfg (INI) string value, quoted so no character of a secret can end it.
fn ini_quote(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The workload cluster's `cloud.conf`, as magnum-cluster-api writes it (spec §3): the
/// cluster's application credential and its Octavia settings.
pub fn cloud_conf(i: &Inputs<'_>, cloud: &super::render::CloudConfig) -> String {
    let l = cluster_labels(i.cluster, i.template);
    let mut g = vec![format!("auth-url={}", ini_quote(&cloud.auth_url))];
    if let Some(r) = &cloud.region {
        g.push(format!("region={}", ini_quote(r)));
    }
    if let Some((id, secret)) = &cloud.credential {
        g.push(format!("application-credential-id={}", ini_quote(id)));
        g.push(format!(
            "application-credential-secret={}",
            ini_quote(secret)
        ));
    }
    g.push(format!("tls-insecure={}", !cloud.verify));
    if cloud.ca_bundle.is_some() {
        g.push("ca-file=/etc/config/ca.crt".into());
    }
    let provider = l.text("octavia_provider").unwrap_or("amphorav2");
    // ovn balances by source address and port only.
    let default_method = if provider == "ovn" {
        "SOURCE_IP_PORT"
    } else {
        "ROUND_ROBIN"
    };
    let method = l.text("octavia_lb_algorithm").unwrap_or(default_method);
    format!(
        "[Global]\n{}\n\n[LoadBalancer]\nlb-provider={}\nlb-method={}\ncreate-monitor={}\n",
        g.join("\n"),
        ini_quote(provider),
        ini_quote(method),
        l.bool("octavia_lb_healthcheck"),
    )
}

/// `kube-system/csi-manila-secrets`: the Manila CSI plugin reads its OpenStack credentials
/// from a Secret of its own, with these keys (magnum-cluster-api's contents).
fn manila_secret(cloud: &super::render::CloudConfig) -> Value {
    let mut data = json!({
        "os-authURL": b64(&cloud.auth_url),
        "os-TLSInsecure": b64(if cloud.verify { "false" } else { "true" }),
    });
    if let Some(r) = &cloud.region {
        data["os-region"] = json!(b64(r));
    }
    if let Some((id, secret)) = &cloud.credential {
        data["os-applicationCredentialID"] = json!(b64(id));
        data["os-applicationCredentialSecret"] = json!(b64(secret));
    }
    if cloud.ca_bundle.is_some() {
        data["os-certAuthorityPath"] = json!(b64("/etc/config/ca.crt"));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "csi-manila-secrets", "namespace": "kube-system"},
        "type": "Opaque",
        "data": data,
    })
}

/// One StorageClass per Cinder volume type but `__DEFAULT__` (magnum-cluster-api's):
/// `block-<type>` (lower case, other runs of characters as `-`), Cinder's default type the
/// cluster's default class.
fn storage_classes(types: &super::render::VolumeTypes) -> Vec<Value> {
    types
        .names
        .iter()
        .filter(|t| t.as_str() != "__DEFAULT__")
        .map(|t| {
            let mut meta = json!({"name": class_name("block", t)});
            if types.default.as_deref() == Some(t.as_str()) {
                meta["annotations"] =
                    json!({"storageclass.kubernetes.io/is-default-class": "true"});
            }
            json!({
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": meta,
                "provisioner": "cinder.csi.openstack.org",
                "parameters": {"type": t},
                "allowVolumeExpansion": true,
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "Immediate",
            })
        })
        .collect()
}

/// `<prefix>-<type>`: the type in lower case, other runs of characters as `-`.
fn class_name(prefix: &str, t: &str) -> String {
    let mut name = String::from(prefix);
    for part in t
        .to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
    {
        name.push('-');
        name.push_str(part);
    }
    name
}

/// The share network Manila's StorageClasses name: only with Manila asked for (spec §4.5).
pub fn manila_share_network(c: &Cluster, t: &ClusterTemplate) -> Option<String> {
    let on = effective(c, t, "manila_csi_enabled")
        .is_some_and(|v| super::labels::parse_bool(&v) == Some(true));
    effective(c, t, "manila_csi_share_network_id")
        .filter(|n| on && !n.trim().is_empty())
        .map(|n| n.trim().to_owned())
}

/// One StorageClass per Manila share type (magnum-cluster-api's): `share-<type>`, shares
/// made in the cluster's share network, the plugin's credentials from [`manila_secret`].
fn share_classes(types: &[String], network: &str) -> Vec<Value> {
    let secret = |what: &str| {
        [
            (
                format!("csi.storage.k8s.io/{what}-secret-name"),
                "csi-manila-secrets",
            ),
            (
                format!("csi.storage.k8s.io/{what}-secret-namespace"),
                "kube-system",
            ),
        ]
    };
    types
        .iter()
        .map(|t| {
            let mut parameters = json!({"type": t, "shareNetworkID": network});
            for what in [
                "provisioner",
                "controller-expand",
                "node-stage",
                "node-publish",
            ] {
                for (k, v) in secret(what) {
                    parameters[k] = json!(v);
                }
            }
            json!({
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": class_name("share", t)},
                "provisioner": "nfs.manila.csi.openstack.org",
                "parameters": parameters,
                "allowVolumeExpansion": true,
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "Immediate",
            })
        })
        .collect()
}

/// The ClusterResourceSet (strategy Reconcile, so a rotated credential reaches the cluster)
/// and its Secret that put [`WORKLOAD_SECRET`] into the workload cluster's `kube-system`.
/// Only when the credentials are at hand (a create).
pub fn workload_cloud_config(i: &Inputs<'_>) -> Vec<Value> {
    let Some(cloud) = i.cloud else {
        return Vec::new();
    };
    let inner = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": WORKLOAD_SECRET, "namespace": "kube-system"},
        "type": "Opaque",
        "data": {
            "cloud.conf": b64(&cloud_conf(i, cloud)),
            "ca.crt": b64(cloud.ca_bundle.as_deref().unwrap_or_default()),
        },
    });
    let mut data = json!({"cloud-config.yaml": b64(&inner.to_string())});
    let chosen = selected(i).0;
    let mut classes = Vec::new();
    if chosen.contains(&Addon::ManilaCsi) {
        data["csi-manila-secrets.yaml"] = json!(b64(&manila_secret(cloud).to_string()));
        if let Some(network) = manila_share_network(i.cluster, i.template) {
            classes.extend(share_classes(i.share_types, &network));
        }
    }
    if chosen.contains(&Addon::CinderCsi) {
        classes.extend(storage_classes(i.volume_types));
    }
    for sc in classes {
        let key = format!(
            "storageclass-{}.yaml",
            sc["metadata"]["name"].as_str().unwrap_or_default()
        );
        data[key] = json!(b64(&sc.to_string()));
    }
    let name = format!("{}-workload-cloud-config", i.stack_id);
    vec![
        secret(&name, i, "addons.cluster.x-k8s.io/resource-set", data),
        json!({
            "apiVersion": Kind::ClusterResourceSet.api_version(),
            "kind": "ClusterResourceSet",
            "metadata": meta(&format!("{}-cloud-config", i.stack_id), i),
            "spec": {
                "clusterSelector": {"matchLabels": {UUID_LABEL: i.cluster.uuid.as_str()}},
                "resources": [{"kind": "Secret", "name": name}],
                "strategy": "Reconcile",
            },
        }),
    ]
}

/// The values as CAAPH's `valuesTemplate`: JSON is YAML, and no `{{` may reach Go's
/// template engine as an action.
fn values_template(v: &Value) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into());
    text.replace("{{", "{{ \"{{\" }}")
}

/// One add-on's HelmChartProxy for this cluster.
pub fn proxy(addon: Addon, i: &Inputs<'_>, s: &Settings) -> Value {
    let chart = addon.chart();
    let cni_tag = match addon {
        Addon::Calico => given(i, "calico_tag"),
        // Cilium's chart versions have no `v`.
        Addon::Cilium => given(i, "cilium_tag").map(|t| t.trim_start_matches('v').to_owned()),
        _ => None,
    };
    let version = s
        .versions
        .get(chart.key)
        .cloned()
        .or(cni_tag)
        .unwrap_or_else(|| chart.pinned(minor(i)).to_owned());
    let repository = if s.repository.is_empty() {
        chart.repository
    } else {
        &s.repository
    };
    let name = addon.proxy_name(i.stack_id);
    let mut m = meta(&name, i);
    m["labels"][ADDON_LABEL] = json!(chart.key);
    json!({
        "apiVersion": Kind::HelmChartProxy.api_version(),
        "kind": "HelmChartProxy",
        "metadata": m,
        "spec": {
            // This cluster only: an empty selector would match every Cluster.
            "clusterSelector": {"matchLabels": {UUID_LABEL: i.cluster.uuid.as_str()}},
            "repoURL": repository,
            "chartName": chart.chart,
            "version": version,
            "namespace": chart.namespace,
            "releaseName": chart.release,
            "valuesTemplate": values_template(&values(addon, i)),
            "options": {
                "wait": true,
                "timeout": "5m",
                "install": {"createNamespace": true},
                "upgrade": {"maxHistory": 3},
            },
        },
    })
}

/// The HelmChartProxies of a cluster, in apply order (CNI first: nothing else schedules
/// before nodes have a network).
/// Keystone auth is left out when the cloud's auth URL is not at hand (an update renders
/// without credentials): its proxy keeps the values of the create.
pub fn proxies(i: &Inputs<'_>, s: &Settings) -> Vec<Value> {
    selected(i)
        .0
        .into_iter()
        .filter(|a| *a != Addon::KeystoneAuth || i.cloud.is_some())
        .map(|a| proxy(a, i, s))
        .collect()
}

/// CAAPH's label on a HelmReleaseProxy naming its HelmChartProxy.
pub const PROXY_NAME_LABEL: &str = "helmreleaseproxy.addons.cluster.x-k8s.io/helmchartproxy-name";

/// The condition `kind` of a CAAPH object, when it is False: (reason, message).
fn false_condition(obj: &Value, kind: &str) -> Option<(String, String)> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "False")
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

/// Why the cluster's add-ons cannot be installed, when CAAPH says so: a value template it
/// cannot render, a release Helm refused, a workload cluster it cannot reach. Waiting
/// states (the control plane not up yet, an install pending) are not failures and give
/// `None`, as does a proxy CAAPH has not acted on at all (see docs/cluster-api.md).
pub fn failing(proxies: &[Value], releases: &[Value]) -> Option<String> {
    let mut proxies: Vec<&Value> = proxies.iter().collect();
    proxies.sort_by_key(|p| {
        p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    for p in proxies {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        if let Some((reason, message)) = false_condition(p, "HelmReleaseProxySpecsUpToDate")
            .filter(|(r, _)| r != "HelmReleaseProxySpecsUpdating")
        {
            return Some(format!("Add-on {name}: {reason}: {message}"));
        }
        for r in releases
            .iter()
            .filter(|r| r["metadata"]["labels"][PROXY_NAME_LABEL] == name)
        {
            let helm = false_condition(r, "HelmReleaseReady").filter(|(reason, _)| {
                !matches!(
                    reason.as_str(),
                    "PreparingToHelmInstall" | "HelmReleasePending"
                )
            });
            let cluster = false_condition(r, "ClusterAvailable")
                .filter(|(reason, _)| reason != "NotAvailable");
            if let Some((reason, message)) = cluster.or(helm) {
                return Some(format!("Add-on {name}: {reason}: {message}"));
            }
        }
    }
    None
}

/// The add-on not installed yet, if any: each proxy needs its HelmReleaseProxy, current
/// (`observedGeneration`), Ready and `deployed` (the proxy's own conditions are true while
/// it has no release at all, so they prove nothing).
pub fn waiting(proxies: &[Value], releases: &[Value]) -> Option<String> {
    let mut proxies: Vec<&Value> = proxies.iter().collect();
    proxies.sort_by_key(|p| {
        p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    for p in proxies {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let Some(r) = releases
            .iter()
            .find(|r| r["metadata"]["labels"][PROXY_NAME_LABEL] == name)
        else {
            return Some(format!(
                "Waiting for CAAPH to install add-on {name}: no HelmReleaseProxy yet (is the Cluster API add-on provider for Helm running in the management cluster?)"
            ));
        };
        let ready = r["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        let current = r["metadata"]["generation"].as_i64().unwrap_or(1)
            == r["status"]["observedGeneration"].as_i64().unwrap_or(0);
        let status = r["status"]["status"].as_str().unwrap_or_default();
        if !(ready && current && status == "deployed") {
            let why = false_condition(r, "HelmReleaseReady")
                .or_else(|| false_condition(r, "ClusterAvailable"))
                .map(|(reason, message)| format!("{reason}: {message}"))
                .unwrap_or_else(|| {
                    format!(
                        "release {}",
                        if status.is_empty() {
                            "not installed"
                        } else {
                            status
                        }
                    )
                });
            return Some(format!("Waiting for add-on {name}: {why}"));
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::render::tests::{cluster, nodegroup, template};
    use crate::render::{Addons, CloudConfig, render};
    use magnum_core::model::{Cluster, ClusterTemplate, Nodegroup, NodegroupRole};

    pub(crate) fn cloud() -> CloudConfig {
        CloudConfig {
            auth_url: "https://keystone.example.com/v3/".into(),
            region: Some("RegionOne".into()),
            interface: "public".into(),
            verify: true,
            ca_bundle: None,
            credential: Some(("app-id".into(), "app-s3cret".into())),
        }
    }

    pub(crate) fn inputs<'a>(
        c: &'a Cluster,
        t: &'a ClusterTemplate,
        ngs: &'a [Nodegroup],
        addons: &'a Addons,
        cloud: &'a CloudConfig,
        s: &'a Settings,
    ) -> Inputs<'a> {
        Inputs {
            cluster: c,
            template: t,
            nodegroups: ngs,
            stack_id: "kube-ab12c",
            namespace: "magnum-system",
            default_kube_tag: "v1.32.0",
            cloud: Some(cloud),
            cas: None,
            addons,
            charts: Some(s),
            flavors: &[],
            volume_types: &crate::render::NO_VOLUME_TYPES,
            autoscaler_repository: "registry.k8s.io/autoscaling",
            server_groups: &crate::render::NO_SERVER_GROUPS,
            share_types: &[],
        }
    }

    fn by_name<'a>(objs: &'a [Value], name: &str) -> Option<&'a Value> {
        objs.iter().find(|o| o["metadata"]["name"] == name)
    }

    /// The values a proxy's `valuesTemplate` renders to (no template actions in them).
    pub(crate) fn values_of(proxy: &Value) -> Value {
        let text = proxy["spec"]["valuesTemplate"].as_str().unwrap();
        assert!(!text.contains("{{"), "{text}");
        serde_json::from_str(text).unwrap()
    }

    /// Every image reference in chart values: each `repository`/`registry` under an image
    /// key, Calico's registries, and any string naming a public registry.
    fn image_refs(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{path}.{k}");
                    if let Value::String(s) = x
                        && matches!(k.as_str(), "repository" | "registry" | "imageRegistry")
                    {
                        out.push((p.clone(), s.clone()));
                    }
                    image_refs(x, &p, out);
                }
            }
            Value::Array(a) => {
                for (n, x) in a.iter().enumerate() {
                    image_refs(x, &format!("{path}[{n}]"), out);
                }
            }
            Value::String(s)
                if ["registry.k8s.io", "quay.io", "docker.io", "gcr.io"]
                    .iter()
                    .any(|r| s.contains(r)) =>
            {
                out.push((path.to_owned(), s.clone()));
            }
            _ => {}
        }
    }

    #[test]
    fn the_chart_table_has_one_row_per_addon_in_order() {
        assert_eq!(CHARTS.len(), Addon::ALL.len());
        for (a, c) in Addon::ALL.iter().zip(CHARTS) {
            assert_eq!(*a, c.addon);
            assert_eq!(a.key(), c.key);
            assert!(c.versions.windows(2).all(|w| w[0].0 < w[1].0), "{}", c.key);
        }
        let ccm = Addon::Ccm.chart();
        assert_eq!(ccm.pinned(33), "2.33.1");
        assert_eq!(
            ccm.pinned(40),
            "2.33.1",
            "a newer minor takes the newest row"
        );
        assert_eq!(ccm.pinned(20), "2.29.3", "an older minor the oldest");
    }

    #[test]
    fn a_cluster_gets_its_cni_ccm_and_cinder_each_selecting_only_it() {
        let (c, t) = (cluster(), template());
        let ngs = vec![nodegroup("default-master", NodegroupRole::Master, 1)];
        let (addons, cloud, s) = (Addons::default(), cloud(), Settings::default());
        let i = inputs(&c, &t, &ngs, &addons, &cloud, &s);
        let objs = render(&i);
        let names: Vec<&str> = objs
            .iter()
            .filter(|o| o["kind"] == "HelmChartProxy")
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        // keystone_auth_enabled defaults to true (magnum-cluster-api's default), Manila to
        // off here (no catalogue to check).
        assert_eq!(
            names,
            [
                "kube-ab12c-cni",
                "kube-ab12c-ccm",
                "kube-ab12c-cinder-csi",
                "kube-ab12c-keystone-auth"
            ]
        );
        assert_eq!(
            objs.last().unwrap()["kind"],
            "Cluster",
            "the Cluster comes last"
        );
        let cluster_obj = objs.last().unwrap();
        for p in objs.iter().filter(|o| o["kind"] == "HelmChartProxy") {
            assert_eq!(p["apiVersion"], "addons.cluster.x-k8s.io/v1alpha1");
            let sel = &p["spec"]["clusterSelector"];
            assert_eq!(sel, &json!({"matchLabels": {UUID_LABEL: c.uuid.as_str()}}));
            // The selector matches this cluster's Cluster object.
            assert_eq!(
                cluster_obj["metadata"]["labels"][UUID_LABEL],
                sel["matchLabels"][UUID_LABEL]
            );
            assert_eq!(p["metadata"]["labels"][UUID_LABEL], c.uuid.as_str());
            assert!(!p["spec"]["version"].as_str().unwrap().is_empty());
            // No credential in any value.
            let text = p["spec"]["valuesTemplate"].as_str().unwrap();
            assert!(
                !text.contains("app-s3cret") && !text.contains("app-id"),
                "{text}"
            );
        }
        let cni = by_name(&objs, "kube-ab12c-cni").unwrap();
        assert_eq!(cni["spec"]["chartName"], "tigera-operator");
        assert_eq!(
            cni["spec"]["repoURL"],
            "https://docs.tigera.io/calico/charts"
        );
        let v = values_of(cni);
        let pool = &v["installation"]["calicoNetwork"]["ipPools"][0];
        assert_eq!(pool["cidr"], "10.100.0.0/16");
        // The operator's Installation has no service CIDR field: kubeadm's clusterNetwork
        // carries it (a field the CRD does not know would fail Helm's validation).
        assert!(v["installation"].get("serviceCIDRs").is_none());
        let ccm = by_name(&objs, "kube-ab12c-ccm").unwrap();
        assert_eq!(ccm["spec"]["version"], "2.33.1", "pinned for 1.33");
        assert_eq!(ccm["spec"]["namespace"], "kube-system");
        assert_eq!(ccm["spec"]["releaseName"], "openstack-ccm");
        let v = values_of(ccm);
        assert_eq!(
            v["secret"],
            json!({"enabled": true, "create": false, "name": WORKLOAD_SECRET})
        );
        assert_eq!(v["cluster"]["name"], c.uuid.as_str());
        let cinder = values_of(by_name(&objs, "kube-ab12c-cinder-csi").unwrap());
        assert_eq!(cinder["secret"]["name"], WORKLOAD_SECRET);
        assert_eq!(cinder["clusterID"], c.uuid.as_str());
        let ks = values_of(by_name(&objs, "kube-ab12c-keystone-auth").unwrap());
        assert_eq!(ks["openstackAuthUrl"], "https://keystone.example.com/v3");
        assert_eq!(ks["projectId"], "p");
    }

    #[test]
    fn labels_pick_cni_cidrs_versions_and_optional_addons() {
        let mut c = cluster();
        c.labels = serde_json::from_value(json!({
            "kube_tag": "v1.31.2",
            "cilium_tag": "v1.16.4",
            "cilium_ipv4pool": "10.64.0.0/12",
            "service_cluster_ip_range": "10.96.0.0/16",
            "cilium_hubble_ui_enabled": "true",
            "cinder_csi_enabled": "false",
            "manila_csi_enabled": "true",
            "keystone_auth_enabled": "false",
            "cloud_provider_tag": "v1.31.9",
            "monitoring_enabled": "true",
        }))
        .unwrap();
        let mut t = template();
        t.network_driver = Some("cilium".into());
        let (addons, cloud) = (Addons::default(), cloud());
        let s = Settings::default();
        let i = inputs(&c, &t, &[], &addons, &cloud, &s);
        let (wanted, unwanted) = selected(&i);
        assert_eq!(
            wanted,
            [
                Addon::Cilium,
                Addon::Ccm,
                Addon::ManilaCsi,
                Addon::NfsCsi,
                Addon::Monitoring
            ]
        );
        assert_eq!(
            unwanted,
            [
                Addon::Calico,
                Addon::CinderCsi,
                Addon::KeystoneAuth,
                Addon::Dashboard
            ],
            "no dashboard unless a label asks"
        );
        let objs = proxies(&i, &s);
        let cni = by_name(&objs, "kube-ab12c-cni").unwrap();
        assert_eq!(cni["spec"]["chartName"], "cilium");
        assert_eq!(
            cni["spec"]["version"], "1.16.4",
            "cilium_tag, without its v"
        );
        let v = values_of(cni);
        assert_eq!(
            v["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"],
            json!(["10.64.0.0/12"])
        );
        assert_eq!(v["hubble"]["ui"]["enabled"], true);
        let ccm = by_name(&objs, "kube-ab12c-ccm").unwrap();
        assert_eq!(ccm["spec"]["version"], "2.31.4", "pinned for 1.31");
        assert_eq!(values_of(ccm)["image"], json!({"tag": "v1.31.9"}));
        let manila = by_name(&objs, "kube-ab12c-manila-csi").unwrap();
        assert_eq!(manila["spec"]["chartName"], "openstack-manila-csi");
        assert_eq!(manila["spec"]["version"], "2.31.5");
        let nfs = by_name(&objs, "kube-ab12c-nfs-csi").unwrap();
        assert_eq!(nfs["spec"]["chartName"], "csi-driver-nfs");
        assert!(by_name(&objs, "kube-ab12c-cinder-csi").is_none());
        assert!(by_name(&objs, "kube-ab12c-keystone-auth").is_none());
        let mon = by_name(&objs, "kube-ab12c-monitoring").unwrap();
        assert_eq!(mon["spec"]["chartName"], "kube-prometheus-stack");
        assert_eq!(mon["spec"]["namespace"], "monitoring-system");
        assert_eq!(
            mon["metadata"]["labels"][ADDON_LABEL],
            "kube-prometheus-stack"
        );
        let v = values_of(mon);
        assert_eq!(v["grafana"]["adminPassword"], "", "no well-known password");
        assert!(
            v.get("global").is_none(),
            "no mirror: the public registries"
        );
    }

    #[test]
    fn operator_overrides_win_over_the_table_and_the_labels() {
        let mut c = cluster();
        c.labels = serde_json::from_value(json!({"kube_tag": "v1.33.1", "calico_tag": "v3.30.2"}))
            .unwrap();
        let t = template();
        let (addons, cloud) = (Addons::default(), cloud());
        let s = Settings {
            repository: "oci://charts.internal/mirror".into(),
            versions: [
                ("calico".to_owned(), "v3.29.3".to_owned()),
                ("openstack-ccm".to_owned(), "2.34.2".to_owned()),
            ]
            .into(),
        };
        let i = inputs(&c, &t, &[], &addons, &cloud, &s);
        let objs = proxies(&i, &s);
        for p in &objs {
            assert_eq!(p["spec"]["repoURL"], "oci://charts.internal/mirror");
        }
        assert_eq!(
            by_name(&objs, "kube-ab12c-cni").unwrap()["spec"]["version"],
            "v3.29.3"
        );
        assert_eq!(
            by_name(&objs, "kube-ab12c-ccm").unwrap()["spec"]["version"],
            "2.34.2"
        );
        assert_eq!(
            by_name(&objs, "kube-ab12c-cinder-csi").unwrap()["spec"]["version"],
            "2.33.1"
        );
        // Without the override the label's Calico version is the chart's.
        let plain = Settings::default();
        let objs = proxies(&inputs(&c, &t, &[], &addons, &cloud, &plain), &plain);
        assert_eq!(
            by_name(&objs, "kube-ab12c-cni").unwrap()["spec"]["version"],
            "v3.30.2"
        );
    }

    #[test]
    fn the_mirror_prefix_reaches_every_image_of_every_chart() {
        let mirror = "mirror.example.com:5000/k8s";
        for driver in ["calico", "cilium"] {
            let mut c = cluster();
            c.labels = serde_json::from_value(json!({
                "kube_tag": "v1.33.1",
                "container_infra_prefix": format!("{mirror}/"),
                "manila_csi_enabled": "true",
                "cilium_hubble_ui_enabled": "true",
                "monitoring_enabled": "true",
                "kube_dashboard_enabled": "true",
            }))
            .unwrap();
            let mut t = template();
            t.network_driver = Some(driver.into());
            let (addons, cloud, s) = (Addons::default(), cloud(), Settings::default());
            let i = inputs(&c, &t, &[], &addons, &cloud, &s);
            let objs = proxies(&i, &s);
            assert_eq!(
                objs.len(),
                8,
                "{driver}: CNI, CCM, Cinder, Manila, NFS, keystone, monitoring, dashboard"
            );
            for p in &objs {
                let mut refs = Vec::new();
                image_refs(&values_of(p), "", &mut refs);
                assert!(!refs.is_empty(), "{}: no image set", p["metadata"]["name"]);
                for (path, r) in refs {
                    assert!(
                        r.starts_with(&format!("{mirror}/")) || r == mirror,
                        "{}{path} = {r}",
                        p["metadata"]["name"]
                    );
                }
            }
            // The sidecars follow magnum-cluster-api's mirror layout.
            let cinder = values_of(by_name(&objs, "kube-ab12c-cinder-csi").unwrap());
            assert_eq!(
                cinder["csi"]["livenessprobe"]["image"]["repository"],
                format!("{mirror}/csi-livenessprobe")
            );
            assert_eq!(
                cinder["csi"]["plugin"]["image"]["repository"],
                format!("{mirror}/cinder-csi-plugin")
            );
            // Charts with a registry knob keep their images' public paths under the mirror.
            let mon = values_of(by_name(&objs, "kube-ab12c-monitoring").unwrap());
            assert_eq!(mon["global"]["imageRegistry"], mirror);
            let dash = values_of(by_name(&objs, "kube-ab12c-dashboard").unwrap());
            assert_eq!(dash["image"], json!({"registry": mirror}));
        }
    }

    #[test]
    fn manila_share_types_become_storage_classes_in_the_share_network() {
        let mut c = cluster();
        let t = template();
        let (addons, cloud, s) = (Addons::default(), cloud(), Settings::default());
        let types = ["default".to_owned(), "CephFS Fast".to_owned()];
        let decode = |v: &Value| -> Value {
            use base64::Engine as _;
            serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        let classes = |c: &Cluster| {
            let mut i = inputs(c, &t, &[], &addons, &cloud, &s);
            i.share_types = &types;
            let objs = workload_cloud_config(&i);
            let holder = by_name(&objs, "kube-ab12c-workload-cloud-config").unwrap();
            holder["data"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| k.starts_with("storageclass-share-"))
                .map(|(k, v)| (k.clone(), decode(v)))
                .collect::<Vec<_>>()
        };
        // The share network alone asks for nothing: Manila must be asked for.
        c.labels = serde_json::from_value(json!({"manila_csi_share_network_id": "net-1"})).unwrap();
        assert!(classes(&c).is_empty());
        c.labels = serde_json::from_value(
            json!({"manila_csi_enabled": "true", "manila_csi_share_network_id": " net-1 "}),
        )
        .unwrap();
        let got = classes(&c);
        let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "storageclass-share-default.yaml",
                "storageclass-share-cephfs-fast.yaml"
            ]
        );
        let sc = &got[1].1;
        assert_eq!(sc["provisioner"], "nfs.manila.csi.openstack.org");
        assert_eq!(sc["parameters"]["type"], "CephFS Fast");
        assert_eq!(sc["parameters"]["shareNetworkID"], "net-1");
        for what in [
            "provisioner",
            "controller-expand",
            "node-stage",
            "node-publish",
        ] {
            assert_eq!(
                sc["parameters"][format!("csi.storage.k8s.io/{what}-secret-name")],
                "csi-manila-secrets"
            );
            assert_eq!(
                sc["parameters"][format!("csi.storage.k8s.io/{what}-secret-namespace")],
                "kube-system"
            );
        }
        assert_eq!(sc["allowVolumeExpansion"], true);
        // Manila without a share network: its plugin, no classes (as magnum-cluster-api).
        c.labels = serde_json::from_value(json!({"manila_csi_enabled": "true"})).unwrap();
        assert!(classes(&c).is_empty());
    }

    #[test]
    fn the_workload_secret_carries_the_credential_and_octavia_settings() {
        let mut c = cluster();
        c.labels = serde_json::from_value(json!({
            "kube_tag": "v1.33.1",
            "octavia_provider": "ovn",
            "octavia_lb_healthcheck": "false",
        }))
        .unwrap();
        let t = template();
        let (addons, mut cloud, s) = (Addons::default(), cloud(), Settings::default());
        cloud.ca_bundle = Some("PEM".into());
        let i = inputs(&c, &t, &[], &addons, &cloud, &s);
        let objs = render(&i);
        let crs = objs
            .iter()
            .find(|o| o["kind"] == "ClusterResourceSet")
            .unwrap();
        assert_eq!(crs["metadata"]["name"], "kube-ab12c-cloud-config");
        assert_eq!(crs["spec"]["strategy"], "Reconcile");
        assert_eq!(
            crs["spec"]["resources"],
            json!([{"kind": "Secret", "name": "kube-ab12c-workload-cloud-config"}])
        );
        let decode = |v: &Value| {
            use base64::Engine as _;
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        let holder = by_name(&objs, "kube-ab12c-workload-cloud-config").unwrap();
        assert_eq!(holder["type"], "addons.cluster.x-k8s.io/resource-set");
        let inner: Value =
            serde_json::from_str(&decode(&holder["data"]["cloud-config.yaml"])).unwrap();
        assert_eq!(
            inner["metadata"],
            json!({"name": WORKLOAD_SECRET, "namespace": "kube-system"})
        );
        let conf = decode(&inner["data"]["cloud.conf"]);
        for line in [
            "auth-url=\"https://keystone.example.com/v3/\"",
            "region=\"RegionOne\"",
            "application-credential-id=\"app-id\"",
            "application-credential-secret=\"app-s3cret\"",
            "tls-insecure=false",
            "ca-file=/etc/config/ca.crt",
            "lb-provider=\"ovn\"",
            "lb-method=\"SOURCE_IP_PORT\"",
            "create-monitor=false",
        ] {
            assert!(conf.lines().any(|l| l == line), "{line} not in\n{conf}");
        }
        assert_eq!(decode(&inner["data"]["ca.crt"]), "PEM");
        assert!(
            holder["data"].get("csi-manila-secrets.yaml").is_none(),
            "Manila's credentials only with Manila"
        );
        // One StorageClass per Cinder volume type but __DEFAULT__; Cinder's default is the
        // cluster's default.
        let types = crate::render::VolumeTypes {
            names: vec!["__DEFAULT__".into(), "SSD  Fast".into(), "standard".into()],
            default: Some("standard".into()),
        };
        let mut with_types = inputs(&c, &t, &[], &addons, &cloud, &s);
        with_types.volume_types = &types;
        let holder = workload_cloud_config(&with_types).remove(0);
        let classes: Vec<Value> = holder["data"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with("storageclass-"))
            .map(|(_, v)| serde_json::from_str(&decode(v)).unwrap())
            .collect();
        assert_eq!(classes.len(), 2, "{classes:?}");
        let fast = classes
            .iter()
            .find(|c| c["metadata"]["name"] == "block-ssd-fast")
            .unwrap();
        assert_eq!(fast["parameters"], json!({"type": "SSD  Fast"}));
        assert_eq!(fast["provisioner"], "cinder.csi.openstack.org");
        assert!(fast["metadata"].get("annotations").is_none());
        let standard = classes
            .iter()
            .find(|c| c["metadata"]["name"] == "block-standard")
            .unwrap();
        assert_eq!(
            standard["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
            "true"
        );
        assert_eq!(
            (&standard["reclaimPolicy"], &standard["volumeBindingMode"]),
            (&json!("Delete"), &json!("Immediate"))
        );
        assert!(
            workload_cloud_config(&inputs(&c, &t, &[], &addons, &cloud, &s))[0]["data"]
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.starts_with("storageclass-")),
            "no types, no classes"
        );
        c.labels.insert("manila_csi_enabled".into(), json!("true"));
        let with_manila = workload_cloud_config(&inputs(&c, &t, &[], &addons, &cloud, &s));
        let manila: Value =
            serde_json::from_str(&decode(&with_manila[0]["data"]["csi-manila-secrets.yaml"]))
                .unwrap();
        assert_eq!(
            manila["metadata"],
            json!({"name": "csi-manila-secrets", "namespace": "kube-system"})
        );
        assert_eq!(
            decode(&manila["data"]["os-applicationCredentialID"]),
            "app-id"
        );
        assert_eq!(decode(&manila["data"]["os-TLSInsecure"]), "false");
        assert_eq!(
            decode(&manila["data"]["os-certAuthorityPath"]),
            "/etc/config/ca.crt"
        );
        assert_eq!(ini_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        // The CRS and its Secret come before the proxies, which come before the Cluster.
        let pos = |n: &str| {
            objs.iter()
                .position(|o| o["metadata"]["name"] == n)
                .unwrap()
        };
        assert!(pos("kube-ab12c-workload-cloud-config") < pos("kube-ab12c-ccm"));
        assert!(pos("kube-ab12c-ccm") < pos("kube-ab12c"));
    }

    #[test]
    fn an_operator_manifest_replaces_the_chart_of_its_addon() {
        let (c, t) = (cluster(), template());
        let addons = Addons {
            manifests: vec![
                ("cni-calico.yaml".into(), "kind: List".into()),
                ("csi-cinder.yaml".into(), "kind: List".into()),
            ],
        };
        let (cloud, s) = (cloud(), Settings::default());
        let i = inputs(&c, &t, &[], &addons, &cloud, &s);
        let (wanted, unwanted) = selected(&i);
        assert_eq!(wanted, [Addon::Ccm, Addon::KeystoneAuth]);
        // Neither created nor deleted: the operator's manifest owns them (and the CNI's
        // proxy name, which both CNIs share).
        assert_eq!(
            unwanted,
            [
                Addon::ManilaCsi,
                Addon::NfsCsi,
                Addon::Monitoring,
                Addon::Dashboard
            ]
        );
        let objs = render(&i);
        let kinds: Vec<String> = objs
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert!(
            kinds.contains(&"ClusterResourceSet/kube-ab12c-addons".to_owned()),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&"HelmChartProxy/kube-ab12c-ccm".to_owned()),
            "{kinds:?}"
        );
        assert!(
            !kinds.contains(&"HelmChartProxy/kube-ab12c-cni".to_owned()),
            "{kinds:?}"
        );
    }

    #[test]
    fn caaph_failures_become_the_reason_and_waiting_does_not() {
        let hcp = |name: &str, conds: Value| json!({"metadata": {"name": name}, "status": {"conditions": conds}});
        let hrp = |proxy: &str, conds: Value| {
            json!({"metadata": {"name": format!("{proxy}-x"), "labels": {PROXY_NAME_LABEL: proxy}},
                   "status": {"conditions": conds}})
        };
        let ok = json!([{"type": "HelmReleaseProxySpecsUpToDate", "status": "True", "reason": "UpToDate"}]);
        let proxies = vec![hcp("k-cni", ok.clone()), hcp("k-ccm", ok.clone())];
        // Nothing acted on yet, or still waiting: no failure.
        assert_eq!(failing(&proxies, &[]), None);
        let waiting = vec![hrp(
            "k-cni",
            json!([
                {"type": "ClusterAvailable", "status": "False", "reason": "NotAvailable", "message": "control plane not initialized"},
                {"type": "HelmReleaseReady", "status": "False", "reason": "PreparingToHelmInstall", "message": ""},
            ]),
        )];
        assert_eq!(failing(&proxies, &waiting), None);
        // Helm's refusal names the add-on.
        let refused = vec![hrp(
            "k-ccm",
            json!([{"type": "HelmReleaseReady", "status": "False", "reason": "HelmInstallOrUpgradeFailed",
                    "message": "chart not found"}]),
        )];
        assert_eq!(
            failing(&proxies, &refused).as_deref(),
            Some("Add-on k-ccm: HelmInstallOrUpgradeFailed: chart not found")
        );
        // A template CAAPH cannot render, on the proxy itself.
        let bad = vec![hcp(
            "k-cni",
            json!([{"type": "HelmReleaseProxySpecsUpToDate", "status": "False",
                    "reason": "ValueParsingFailed", "message": "bad template"}]),
        )];
        assert_eq!(
            failing(&bad, &[]).as_deref(),
            Some("Add-on k-cni: ValueParsingFailed: bad template")
        );
    }

    #[test]
    fn complete_waits_for_every_release_deployed() {
        let proxies = vec![
            json!({"metadata": {"name": "k-cni"}}),
            json!({"metadata": {"name": "k-ccm"}}),
        ];
        let release = |proxy: &str, ready: &str, status: &str, generation: i64| {
            json!({
                "metadata": {"name": format!("{proxy}-x"), "generation": generation,
                             "labels": {PROXY_NAME_LABEL: proxy}},
                "status": {"observedGeneration": 1, "status": status, "conditions": [
                    {"type": "Ready", "status": ready},
                    {"type": "HelmReleaseReady", "status": ready, "reason": "HelmReleasePending",
                     "message": "pending-install"},
                ]},
            })
        };
        let none = waiting(&proxies, &[]).unwrap();
        assert!(
            none.starts_with("Waiting for CAAPH to install add-on k-ccm"),
            "{none}"
        );
        let pending = vec![
            release("k-ccm", "False", "pending-install", 1),
            release("k-cni", "True", "deployed", 1),
        ];
        assert_eq!(
            waiting(&proxies, &pending).as_deref(),
            Some("Waiting for add-on k-ccm: HelmReleasePending: pending-install")
        );
        let stale = vec![
            release("k-ccm", "True", "deployed", 2),
            release("k-cni", "True", "deployed", 1),
        ];
        assert_eq!(
            waiting(&proxies, &stale).as_deref(),
            Some("Waiting for add-on k-ccm: release deployed")
        );
        let done = vec![
            release("k-ccm", "True", "deployed", 1),
            release("k-cni", "True", "deployed", 1),
        ];
        assert_eq!(waiting(&proxies, &done), None);
        assert_eq!(waiting(&[], &[]), None, "no add-ons, nothing to wait for");
    }

    #[test]
    fn no_template_action_can_come_from_a_value() {
        let v = json!({"policy": "{{ .Cluster.metadata.name }}"});
        let t = values_template(&v);
        assert!(t.contains("{{ \"{{\" }} .Cluster"), "{t}");
    }
}
