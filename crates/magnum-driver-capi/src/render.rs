//! Desired state: one pure function from a Magnum cluster (its row, nodegroups, template and
//! labels) to the Kubernetes objects that build it. Every mutating operation renders and
//! applies the whole set, so each is idempotent and a retry converges.
//!
//! The cluster is a ClusterClass topology (as magnum-cluster-api's): the class holds the
//! shape shared by every cluster of this driver version, the Cluster holds what differs
//! (replicas, nodegroups, version, variables). Upgrades are one `version` change CAPI rolls
//! out in order (control plane, then workers), nodegroups are entries of one list, and
//! clusters made by magnum-cluster-api have the same shape, so one code path serves both.

use base64::Engine as _;
use magnum_core::model::{Cluster, ClusterTemplate, Labels, Nodegroup, NodegroupRole, label};
use magnum_core::status::ClusterStatus;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::kube::Kind;
use super::labels::{Resolved, Scope};

/// The ClusterClass (and its templates) of this driver version. A new class per change of
/// its shape, so existing clusters keep theirs until upgraded.
pub const CLASS: &str = "magnum-rs-v1";
/// The one worker class.
pub const WORKER_CLASS: &str = "default-worker";
/// Label on every object of a cluster (magnum-cluster-api's), and CAPI's cluster label.
pub const UUID_LABEL: &str = "cluster-uuid";
pub const CAPI_CLUSTER_LABEL: &str = "cluster.x-k8s.io/cluster-name";
pub const DELETE_MACHINE: &str = "cluster.x-k8s.io/delete-machine";

/// A CA (or the admin key pair) as the Secrets carry it: PEM certificate and decrypted key.
#[derive(Clone)]
pub struct KeyPair {
    pub certificate: String,
    pub private_key: String,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyPair(****)")
    }
}

/// Magnum's CAs for the cluster: kubeadm adopts CA Secrets that exist before the control
/// plane, so Magnum's client certificate and `coe cluster config` work against it.
#[derive(Clone, Debug)]
pub struct Cas {
    pub kubernetes: KeyPair,
    pub etcd: KeyPair,
    pub front_proxy: KeyPair,
    /// Signs service-account tokens (magnum-cluster-api uses the admin key pair).
    pub service_account: KeyPair,
}

/// What the workload cluster's OpenStack components authenticate with.
#[derive(Clone)]
pub struct CloudConfig {
    pub auth_url: String,
    pub region: Option<String>,
    pub interface: String,
    pub verify: bool,
    pub ca_bundle: Option<String>,
    /// The cluster's application credential (id, secret).
    pub credential: Option<(String, String)>,
}

impl std::fmt::Debug for CloudConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudConfig")
            .field("auth_url", &self.auth_url)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// Addon manifests for the workload cluster (file name, YAML text).
#[derive(Clone, Debug, Default)]
pub struct Addons {
    pub manifests: Vec<(String, String)>,
}

/// Everything the render reads.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub cluster: &'a Cluster,
    pub template: &'a ClusterTemplate,
    pub nodegroups: &'a [Nodegroup],
    pub stack_id: &'a str,
    pub namespace: &'a str,
    pub default_kube_tag: &'a str,
    pub cloud: Option<&'a CloudConfig>,
    pub cas: Option<&'a Cas>,
    pub addons: &'a Addons,
    /// The HelmChartProxy add-ons' settings; `None`: no HelmChartProxies.
    pub charts: Option<&'a super::addons::Settings>,
    /// The Nova flavors the auto-scaled nodegroups use (empty when unknown).
    pub flavors: &'a [FlavorSize],
    /// Cinder's volume types, for the workload's StorageClasses (empty when unknown).
    pub volume_types: &'a VolumeTypes,
    /// Manila's share types, for its StorageClasses (empty when unknown or not wanted).
    pub share_types: &'a [String],
    /// `[auto_scaling] image_repository` (a `container_infra_prefix` wins).
    pub autoscaler_repository: &'a str,
    /// The Nova server groups of the control plane and nodegroups (none: no cloud, or a
    /// cluster made before the driver made them).
    pub server_groups: &'a ServerGroups,
}

/// The Nova server groups of a cluster's machines, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerGroups {
    /// The control plane's; empty: the cluster has none.
    pub control_plane: String,
    /// Each nodegroup's, by nodegroup name.
    pub workers: BTreeMap<String, String>,
}

/// No server groups.
pub static NO_SERVER_GROUPS: ServerGroups = ServerGroups {
    control_plane: String::new(),
    workers: BTreeMap::new(),
};

/// No volume types known (no StorageClasses).
pub static NO_VOLUME_TYPES: VolumeTypes = VolumeTypes {
    names: Vec::new(),
    default: None,
};

/// Cinder's volume types as the cluster's project sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeTypes {
    pub names: Vec<String>,
    /// Cinder's default type, which becomes the cluster's default StorageClass.
    pub default: Option<String>,
}

/// A Nova flavor's size: the autoscaler's capacity of a node it has not made yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlavorSize {
    pub id: String,
    pub name: String,
    pub vcpus: i64,
    pub ram_mib: i64,
    /// Root disk in GB; 0 when the image decides (then no ephemeral-disk capacity).
    pub disk_gb: i64,
}

/// The autoscaler's capacity annotations for a flavor (by id, else by name), so it can scale
/// a MachineDeployment up from zero without a node to look at.
fn capacity(flavor: Option<&str>, flavors: &[FlavorSize]) -> Vec<(&'static str, String)> {
    let Some(f) = flavor.and_then(|f| {
        flavors
            .iter()
            .find(|s| s.id == f)
            .or_else(|| flavors.iter().find(|s| s.name == f))
    }) else {
        return Vec::new();
    };
    let mut out = vec![
        (CAPACITY_CPU, f.vcpus.to_string()),
        (CAPACITY_MEMORY, format!("{}Mi", f.ram_mib)),
    ];
    if f.disk_gb > 0 {
        out.push((CAPACITY_DISK, format!("{}Gi", f.disk_gb)));
    }
    out
}

const CAPACITY_CPU: &str = "capacity.cluster-autoscaler.kubernetes.io/cpu";
const CAPACITY_MEMORY: &str = "capacity.cluster-autoscaler.kubernetes.io/memory";
const CAPACITY_DISK: &str = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk";

/// The cluster's label `key`, else its template's.
pub fn effective(cluster: &Cluster, template: &ClusterTemplate, key: &str) -> Option<String> {
    label(&cluster.labels, key)
        .or_else(|| label(&template.labels, key))
        .filter(|v| !v.is_empty())
}

/// The Kubernetes version the cluster should run (`kube_tag`, with the `v`).
pub fn kube_version(i: &Inputs<'_>) -> String {
    let tag = effective(i.cluster, i.template, "kube_tag")
        .unwrap_or_else(|| i.default_kube_tag.to_owned());
    if tag.starts_with('v') {
        tag
    } else {
        format!("v{tag}")
    }
}

pub(crate) fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

pub(crate) fn meta(name: &str, i: &Inputs<'_>) -> Value {
    json!({
        "name": name,
        "namespace": i.namespace,
        "labels": {
            UUID_LABEL: i.cluster.uuid.as_str(),
            CAPI_CLUSTER_LABEL: i.stack_id,
        },
    })
}

pub(crate) fn secret(name: &str, i: &Inputs<'_>, kind: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(name, i),
        "type": kind,
        "data": data,
    })
}

/// The names of the Secrets a cluster has (for the delete).
pub fn secret_names(stack_id: &str) -> Vec<String> {
    [
        "cloud-config",
        "workload-cloud-config",
        "ca",
        "etcd",
        "proxy",
        "sa",
        "addons",
    ]
    .iter()
    .map(|s| format!("{stack_id}-{s}"))
    .collect()
}

fn clouds_yaml(c: &CloudConfig) -> String {
    // JSON is YAML; serde_json quotes every string, so no value can break the document.
    let mut auth = json!({"auth_url": c.auth_url});
    let mut cloud = json!({
        "auth_type": "v3applicationcredential",
        "interface": c.interface,
        "identity_api_version": 3,
        "verify": c.verify,
    });
    if let Some((id, secret)) = &c.credential {
        auth["application_credential_id"] = json!(id);
        auth["application_credential_secret"] = json!(secret);
    }
    cloud["auth"] = auth;
    if let Some(r) = &c.region {
        cloud["region_name"] = json!(r);
    }
    if c.ca_bundle.is_some() {
        cloud["cacert"] = json!("/etc/openstack/cacert.pem");
    }
    json!({"clouds": {"default": cloud}}).to_string()
}

fn ca_secret(name: &str, i: &Inputs<'_>, pair: &KeyPair) -> Value {
    secret(
        name,
        i,
        "cluster.x-k8s.io/secret",
        json!({"tls.crt": b64(&pair.certificate), "tls.key": b64(&pair.private_key)}),
    )
}

/// A nodegroup the Cluster's topology should have: not the control plane, not being
/// deleted.
pub(crate) fn is_worker(ng: &Nodegroup) -> bool {
    ng.role != NodegroupRole::Master
        && !ng.status.is_some_and(|s| {
            matches!(
                s,
                ClusterStatus::DeleteInProgress
                    | ClusterStatus::DeleteComplete
                    | ClusterStatus::DeleteFailed
            )
        })
}

/// A Glance image or Neutron network: by id when it is a UUID, else by name.
fn image_ref(image: &str) -> Value {
    if uuid::Uuid::parse_str(image).is_ok() {
        json!({"id": image})
    } else {
        json!({"filter": {"name": image}})
    }
}

/// One MachineDeployment entry of the topology for a worker nodegroup.
fn machine_deployment(ng: &Nodegroup, i: &Inputs<'_>) -> Value {
    let l = nodegroup_labels(Some(ng), i.cluster, i.template);
    let cl = cluster_labels(i.cluster, i.template);
    let mut md = json!({
        "class": WORKER_CLASS,
        "name": ng.name,
        "metadata": {"labels": {
            "node.cluster.x-k8s.io/nodegroup": ng.name,
            format!("node-role.kubernetes.io/{}", ng.role.as_str()): "",
        }},
        "healthCheck": {"enabled": cl.bool("auto_healing_enabled")},
    });
    if l.bool("auto_scaling_enabled") {
        // The autoscaler owns the count between the bounds; applying a count would fight it.
        // The fields win; the labels (capi-helm's) fill a nodegroup that has none.
        let min = if ng.min_node_count > 0 {
            i64::from(ng.min_node_count)
        } else {
            l.int("min_node_count").unwrap_or(0)
        };
        let max = ng
            .max_node_count
            .map(i64::from)
            .or_else(|| l.int("max_node_count"))
            .unwrap_or(i64::from(ng.node_count))
            .max(i64::from(ng.node_count));
        md["metadata"]["annotations"] = json!({
            crate::status::AUTOSCALER_MIN: min.to_string(),
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": max.to_string(),
        });
        for (k, v) in capacity(ng.flavor_id.as_deref(), i.flavors) {
            md["metadata"]["annotations"][k] = json!(v);
        }
    } else {
        md["replicas"] = json!(ng.node_count);
    }
    if let Some(az) = l.text("availability_zone") {
        md["failureDomain"] = json!(az);
    }
    let mut overrides = Vec::new();
    if let Some(f) = ng.flavor_id.as_deref().filter(|f| !f.is_empty()) {
        overrides.push(json!({"name": "flavor", "value": f}));
    }
    if let Some(img) = ng.image_id.as_deref().filter(|f| !f.is_empty()) {
        overrides.push(json!({"name": "image", "value": image_ref(img)}));
    }
    // Nodegroup-scoped labels: each nodegroup's own value reaches its machines.
    overrides.push(
        json!({"name": "bootVolume", "value": boot_volume(&l, &cl, l.text("availability_zone"))}),
    );
    overrides.push(
        json!({"name": "differentFailureDomain", "value": l.bool("different_failure_domain")}),
    );
    // Explicit even when empty: the global value is the control plane's group.
    let group = i.server_groups.workers.get(ng.name.as_str());
    overrides.push(json!({"name": "serverGroupID", "value": group.map_or("", String::as_str)}));
    overrides.push(json!({"name": "nodeLabels", "value": node_labels(ng)}));
    overrides.push(json!({"name": "nodeTaints", "value": node_taints(ng)}));
    md["variables"] = json!({"overrides": overrides});
    md
}

/// A nodegroup's `node_labels` as the kubelet's `--node-labels` (`k=v,...`, in key order).
fn node_labels(ng: &Nodegroup) -> String {
    ng.node_labels
        .keys()
        .map(|k| format!("{k}={}", label(&ng.node_labels, k).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",")
}

/// A nodegroup's `node_taints` as kubeadm's `nodeRegistration.taints` (key, value, effect;
/// the API checked their shape, anything else is left out).
fn node_taints(ng: &Nodegroup) -> Vec<Value> {
    ng.node_taints
        .iter()
        .filter_map(|t| {
            let key = t.get("key")?.as_str()?;
            let effect = t.get("effect")?.as_str()?;
            let mut taint = json!({"key": key, "effect": effect});
            if let Some(v) = t.get("value").and_then(Value::as_str) {
                taint["value"] = json!(v);
            }
            Some(taint)
        })
        .collect()
}

/// The cluster-scoped labels of a cluster (cluster, then template), parsed.
pub fn cluster_labels(c: &Cluster, t: &ClusterTemplate) -> Resolved {
    Resolved::of(Scope::Cluster, &[&c.labels, &t.labels])
}

/// A nodegroup's labels (nodegroup, cluster, template); the control plane's when `ng` is None.
pub fn nodegroup_labels(ng: Option<&Nodegroup>, c: &Cluster, t: &ClusterTemplate) -> Resolved {
    match ng {
        Some(ng) => Resolved::of(Scope::Nodegroup, &[&ng.labels, &c.labels, &t.labels]),
        None => Resolved::of(Scope::Nodegroup, &[&c.labels, &t.labels]),
    }
}

/// The `bootVolume` variable of a nodegroup (or, with None, the control plane's).
fn boot_volume(ng: &Resolved, cl: &Resolved, az: Option<&str>) -> Value {
    json!({
        "size": ng.int("boot_volume_size").unwrap_or(0),
        "type": ng.text("boot_volume_type").unwrap_or_default(),
        "availabilityZone": cl.text("boot_volume_availability_zone").or(az).unwrap_or_default(),
    })
}

/// The containerd sandbox (pause) image on the `container_infra_prefix` mirror, at the
/// version kubeadm pins for the cluster's minor (3.10 from 1.31); empty without a mirror.
fn sandbox_image(i: &Inputs<'_>) -> String {
    match super::addons::prefix(i) {
        Some(p) => {
            let pause = if super::addons::minor(i) >= 31 {
                "3.10"
            } else {
                "3.9"
            };
            format!("{p}/pause:{pause}")
        }
        None => String::new(),
    }
}

/// The topology variables of a cluster (declared by [`cluster_class`]).
fn variables(i: &Inputs<'_>) -> Vec<Value> {
    let (c, t) = (i.cluster, i.template);
    let l = cluster_labels(c, t);
    let cp = nodegroup_labels(None, c, t);
    let az = cp.text("availability_zone");
    let worker_flavor = c
        .flavor_id
        .clone()
        .or_else(|| t.flavor_id.clone())
        .unwrap_or_default();
    let master_flavor = c
        .master_flavor_id
        .clone()
        .or_else(|| t.master_flavor_id.clone())
        .unwrap_or_else(|| worker_flavor.clone());
    let dns: Vec<String> = t
        .dns_nameserver
        .as_deref()
        .unwrap_or("8.8.8.8")
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    // NodeRestriction always first, as magnum-cluster-api does.
    let mut plugins = vec!["NodeRestriction".to_owned()];
    plugins.extend(
        l.list("admission_control_list")
            .iter()
            .filter(|p| *p != "NodeRestriction")
            .cloned(),
    );
    let text = |name: &str| l.text(name).unwrap_or_default().to_owned();
    let runtime_size = c.docker_volume_size.or(t.docker_volume_size).unwrap_or(0);
    let mut v = vec![
        json!({"name": "identityRef", "value": {"type": "Secret", "name": format!("{}-cloud-config", i.stack_id), "cloudName": "default"}}),
        json!({"name": "image", "value": image_ref(t.image_id.as_deref().unwrap_or_default())}),
        json!({"name": "flavor", "value": worker_flavor}),
        json!({"name": "controlPlaneFlavor", "value": master_flavor}),
        json!({"name": "sshKeyName", "value": c.keypair.clone().or_else(|| t.keypair_id.clone()).unwrap_or_default()}),
        json!({"name": "apiServerLoadBalancer", "value": c.master_lb_enabled}),
        json!({"name": "dnsNameservers", "value": dns}),
        json!({"name": "nodeCidr", "value": text("fixed_subnet_cidr")}),
        json!({"name": "admissionPlugins", "value": plugins.join(",")}),
        json!({"name": "apiServerCertSANs", "value": l.list("api_server_cert_sans")}),
        json!({"name": "apiServerTLSCipherSuites", "value": l.list("api_server_tls_cipher_suites").join(",")}),
        json!({"name": "kubeletTLSCipherSuites", "value": l.list("kubelet_tls_cipher_suites").join(",")}),
        json!({"name": "auditLog", "value": {
            "enabled": l.bool("audit_log_enabled"),
            "maxAge": l.int("audit_log_max_age").unwrap_or(30),
            "maxBackup": l.int("audit_log_max_backup").unwrap_or(10),
            "maxSize": l.int("audit_log_max_size").unwrap_or(100),
        }}),
        json!({"name": "oidc", "value": {
            "issuerURL": text("oidc_issuer_url"),
            "clientID": text("oidc_client_id"),
            "usernameClaim": text("oidc_username_claim"),
            "usernamePrefix": text("oidc_username_prefix"),
            "groupsClaim": text("oidc_groups_claim"),
            "groupsPrefix": text("oidc_groups_prefix"),
        }}),
        json!({"name": "keystoneAuth", "value": l.bool("keystone_auth_enabled")}),
        json!({"name": "imageRepository", "value": text("container_infra_prefix")}),
        json!({"name": "sandboxImage", "value": sandbox_image(i)}),
        json!({"name": "etcdVolume", "value": {
            "size": l.int("etcd_volume_size").unwrap_or(0),
            "type": text("etcd_volume_type"),
            "availabilityZone": az.unwrap_or_default(),
        }}),
        json!({"name": "runtimeVolume", "value": {
            "size": runtime_size.max(0),
            "type": text("docker_volume_type"),
            "availabilityZone": az.unwrap_or_default(),
        }}),
        json!({"name": "bootVolume", "value": boot_volume(&cp, &l, az)}),
        json!({"name": "differentFailureDomain", "value": cp.bool("different_failure_domain")}),
        json!({"name": "serverGroupID", "value": i.server_groups.control_plane}),
        json!({"name": "controlPlaneAvailabilityZones", "value": l.list("control_plane_availability_zones")}),
        json!({"name": "apiServerFloatingIP", "value": text("api_server_floating_ip")}),
        json!({"name": "disableAPIServerFloatingIP", "value": !l.bool("master_lb_floating_ip_enabled")}),
        json!({"name": "apiServerLoadBalancerOptions", "value": {
            "provider": text("octavia_provider"),
            "flavor": text("api_server_lb_flavor"),
            "availabilityZone": text("api_server_lb_availability_zone"),
            "allowedCIDRs": l.list("api_master_lb_allowed_cidrs"),
        }}),
        json!({"name": "extraNetworks", "value": l.list("extra_network_names")}),
    ];
    if let Some(net) = t.external_network_id.as_deref().filter(|n| !n.is_empty()) {
        v.push(json!({"name": "externalNetwork", "value": image_ref(net)}));
    }
    v
}

/// The CAPI Cluster. `version` is the cluster's `kube_tag`.
pub fn cluster(i: &Inputs<'_>) -> Value {
    let (c, t) = (i.cluster, i.template);
    let masters = i
        .nodegroups
        .iter()
        .filter(|ng| ng.role == NodegroupRole::Master)
        .map(|ng| ng.node_count)
        .sum::<i32>()
        .max(1);
    let workers: Vec<Value> = i
        .nodegroups
        .iter()
        .filter(|ng| is_worker(ng))
        .map(|ng| machine_deployment(ng, i))
        .collect();
    let network_driver = t.network_driver.clone().unwrap_or_else(|| "calico".into());
    let l = cluster_labels(c, t);
    let text_or = |name: &str, default: &str| l.text(name).unwrap_or(default).to_owned();
    let pods = text_or(&format!("{network_driver}_ipv4pool"), "10.100.0.0/16");
    let services = text_or("service_cluster_ip_range", "10.254.0.0/16");
    let mut m = meta(i.stack_id, i);
    m["labels"]["cni"] = json!(network_driver);
    json!({
        "apiVersion": Kind::Cluster.api_version(),
        "kind": "Cluster",
        "metadata": m,
        "spec": {
            "clusterNetwork": {
                "serviceDomain": text_or("dns_cluster_domain", "cluster.local"),
                "pods": {"cidrBlocks": [pods]},
                "services": {"cidrBlocks": [services]},
            },
            "topology": {
                "classRef": {"name": CLASS},
                "version": kube_version(i),
                "controlPlane": {
                    "replicas": masters,
                    "healthCheck": {"enabled": l.bool("auto_healing_enabled")},
                },
                "workers": {"machineDeployments": workers},
                "variables": variables(i),
            },
        },
    })
}

/// The cluster's objects in the order they are applied: credentials and CAs before the
/// Cluster (kubeadm must find the CAs), the HelmChartProxies, the operator's addons (after
/// ours, so theirs can build on them), then the Cluster itself.
pub fn render(i: &Inputs<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(cloud) = i.cloud {
        let mut data = json!({"clouds.yaml": b64(&clouds_yaml(cloud))});
        if let Some(ca) = &cloud.ca_bundle {
            data["cacert"] = json!(b64(ca));
        }
        out.push(secret(
            &format!("{}-cloud-config", i.stack_id),
            i,
            "Opaque",
            data,
        ));
    }
    if let Some(cas) = i.cas {
        for (suffix, pair) in [
            ("ca", &cas.kubernetes),
            ("etcd", &cas.etcd),
            ("proxy", &cas.front_proxy),
            ("sa", &cas.service_account),
        ] {
            out.push(ca_secret(&format!("{}-{suffix}", i.stack_id), i, pair));
        }
    }
    if let Some(s) = i.charts {
        out.extend(super::addons::workload_cloud_config(i));
        out.extend(super::addons::proxies(i, s));
    }
    if !i.addons.manifests.is_empty() {
        let name = format!("{}-addons", i.stack_id);
        let mut data = serde_json::Map::new();
        for (file, text) in &i.addons.manifests {
            data.insert(file.clone(), json!(b64(text)));
        }
        out.push(secret(
            &name,
            i,
            "addons.cluster.x-k8s.io/resource-set",
            Value::Object(data),
        ));
        out.push(json!({
            "apiVersion": Kind::ClusterResourceSet.api_version(),
            "kind": "ClusterResourceSet",
            "metadata": meta(&name, i),
            "spec": {
                "clusterSelector": {"matchLabels": {UUID_LABEL: i.cluster.uuid.as_str()}},
                "resources": [{"kind": "Secret", "name": name}],
                "strategy": "Reconcile",
            },
        }));
    }
    out.push(cluster(i));
    if super::autoscaler::wanted(i) {
        out.extend(super::autoscaler::objects(i));
    }
    out
}

pub use super::class::cluster_class;

/// A cluster's labels as the render reads them (for the validation's messages).
pub fn labels_of(cluster: &Cluster, template: &ClusterTemplate) -> Labels {
    let mut all = template.labels.clone();
    for (k, v) in &cluster.labels {
        all.insert(k.clone(), v.clone());
    }
    all
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use magnum_core::model::NodegroupRole;

    pub(crate) fn cluster() -> Cluster {
        Cluster {
            project_id: Some("p".into()),
            user_id: Some("u".into()),
            cluster_template_id: Some("t".into()),
            keypair: Some("kp".into()),
            labels: serde_json::from_value(json!({"kube_tag": "v1.33.1"})).unwrap(),
            flavor_id: Some("m1.small".into()),
            stack_id: Some("kube-ab12c".into()),
            status: Some(ClusterStatus::CreateInProgress),
            create_timeout: Some(60),
            floating_ip_enabled: true,
            master_lb_enabled: true,
            ..Cluster::new("2d2a5d3c-1111-4c1e-9f7e-000000000001".into(), "c")
        }
    }

    pub(crate) fn template() -> ClusterTemplate {
        ClusterTemplate {
            uuid: "t".into(),
            name: Some("t".into()),
            coe: Some("kubernetes".into()),
            server_type: Some("vm".into()),
            cluster_distro: Some("ubuntu".into()),
            driver: Some("k8s_capi".into()),
            image_id: Some("ubuntu-2204-kube".into()),
            flavor_id: Some("m1.medium".into()),
            master_flavor_id: Some("m1.large".into()),
            keypair_id: None,
            external_network_id: Some("public".into()),
            fixed_network: None,
            fixed_subnet: None,
            dns_nameserver: Some("1.1.1.1".into()),
            network_driver: Some("calico".into()),
            volume_driver: None,
            docker_volume_size: None,
            docker_storage_driver: None,
            labels: Labels::new(),
            tls_disabled: false,
            master_lb_enabled: true,
            floating_ip_enabled: true,
            http_proxy: None,
            https_proxy: None,
            no_proxy: None,
            insecure_registry: None,
        }
    }

    pub(crate) fn nodegroup(name: &str, role: NodegroupRole, count: i32) -> Nodegroup {
        Nodegroup {
            uuid: format!("ng-{name}").into(),
            name: name.into(),
            cluster_id: cluster().uuid,
            project_id: "p".into(),
            docker_volume_size: None,
            labels: Labels::new(),
            flavor_id: None,
            image_id: None,
            node_addresses: Vec::new(),
            node_count: count,
            is_default: name.starts_with("default"),
            role,
            max_node_count: None,
            min_node_count: 0,
            stack_id: None,
            status: Some(ClusterStatus::CreateInProgress),
            status_reason: None,
            version: None,
            node_labels: Labels::new(),
            node_taints: Vec::new(),
        }
    }

    pub(crate) fn inputs<'a>(
        c: &'a Cluster,
        t: &'a ClusterTemplate,
        ngs: &'a [Nodegroup],
        addons: &'a Addons,
    ) -> Inputs<'a> {
        Inputs {
            cluster: c,
            template: t,
            nodegroups: ngs,
            stack_id: "kube-ab12c",
            namespace: "magnum-system",
            default_kube_tag: "v1.32.0",
            cloud: None,
            cas: None,
            addons,
            charts: None,
            flavors: &[],
            volume_types: &crate::render::NO_VOLUME_TYPES,
            autoscaler_repository: "registry.k8s.io/autoscaling",
            server_groups: &NO_SERVER_GROUPS,
            share_types: &[],
        }
    }

    #[test]
    fn the_cluster_topology_follows_the_nodegroups() {
        let (c, t) = (cluster(), template());
        let mut gone = nodegroup("old", NodegroupRole::Worker, 4);
        gone.status = Some(ClusterStatus::DeleteInProgress);
        let mut gpu = nodegroup("gpu", NodegroupRole::Worker, 1);
        gpu.flavor_id = Some("g1".into());
        gpu.labels = serde_json::from_value(json!({"availability_zone": "az2"})).unwrap();
        let ngs = vec![
            nodegroup("default-master", NodegroupRole::Master, 3),
            nodegroup("default-worker", NodegroupRole::Worker, 2),
            gone,
            gpu,
        ];
        let addons = Addons::default();
        let obj = super::cluster(&inputs(&c, &t, &ngs, &addons));
        let topo = &obj["spec"]["topology"];
        assert_eq!(obj["apiVersion"], "cluster.x-k8s.io/v1beta2");
        assert_eq!(obj["metadata"]["name"], "kube-ab12c");
        assert_eq!(obj["metadata"]["labels"][UUID_LABEL], c.uuid.as_str());
        assert_eq!(topo["version"], "v1.33.1");
        assert_eq!(topo["classRef"]["name"], CLASS);
        assert_eq!(topo["controlPlane"]["replicas"], 3);
        let mds = topo["workers"]["machineDeployments"].as_array().unwrap();
        let names: Vec<&str> = mds.iter().map(|m| m["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["default-worker", "gpu"],
            "a deleting nodegroup is left out"
        );
        assert_eq!(mds[0]["replicas"], 2);
        assert_eq!(mds[1]["failureDomain"], "az2");
        assert_eq!(
            mds[1]["variables"]["overrides"][0],
            json!({"name": "flavor", "value": "g1"})
        );
        let var = |n: &str| {
            topo["variables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == n)
                .unwrap()["value"]
                .clone()
        };
        assert_eq!(
            var("flavor"),
            "m1.small",
            "the cluster's flavor over the template's"
        );
        assert_eq!(var("controlPlaneFlavor"), "m1.large");
        assert_eq!(
            var("image"),
            json!({"filter": {"name": "ubuntu-2204-kube"}})
        );
        assert_eq!(var("identityRef")["name"], "kube-ab12c-cloud-config");
        assert_eq!(var("dnsNameservers"), json!(["1.1.1.1"]));
        // Rendering is pure: the same inputs give the same objects.
        assert_eq!(obj, super::cluster(&inputs(&c, &t, &ngs, &addons)));
    }

    #[test]
    fn secrets_and_addons_come_before_the_cluster() {
        let (c, t) = (cluster(), template());
        let ngs = vec![nodegroup("default-master", NodegroupRole::Master, 1)];
        let pair = |n: &str| KeyPair {
            certificate: format!("CERT {n}"),
            private_key: format!("KEY {n}"),
        };
        let cas = Cas {
            kubernetes: pair("k8s"),
            etcd: pair("etcd"),
            front_proxy: pair("proxy"),
            service_account: pair("admin"),
        };
        let cloud = CloudConfig {
            auth_url: "https://keystone/v3".into(),
            region: Some("RegionOne".into()),
            interface: "public".into(),
            verify: true,
            ca_bundle: None,
            credential: Some(("id1".into(), "s3cret".into())),
        };
        let addons = Addons {
            manifests: vec![("cni-calico.yaml".into(), "kind: List".into())],
        };
        let mut i = inputs(&c, &t, &ngs, &addons);
        i.cas = Some(&cas);
        i.cloud = Some(&cloud);
        let objs = render(&i);
        let names: Vec<String> = objs
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "Secret/kube-ab12c-cloud-config",
                "Secret/kube-ab12c-ca",
                "Secret/kube-ab12c-etcd",
                "Secret/kube-ab12c-proxy",
                "Secret/kube-ab12c-sa",
                "Secret/kube-ab12c-addons",
                "ClusterResourceSet/kube-ab12c-addons",
                "Cluster/kube-ab12c",
            ]
        );
        let decode = |v: &Value| {
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(decode(&objs[1]["data"]["tls.key"]), "KEY k8s");
        assert_eq!(objs[1]["type"], "cluster.x-k8s.io/secret");
        let clouds: Value = serde_json::from_str(&decode(&objs[0]["data"]["clouds.yaml"])).unwrap();
        assert_eq!(
            clouds["clouds"]["default"]["auth"]["application_credential_id"],
            "id1"
        );
        assert_eq!(clouds["clouds"]["default"]["region_name"], "RegionOne");
        assert_eq!(
            objs[6]["spec"]["clusterSelector"]["matchLabels"][UUID_LABEL],
            c.uuid.as_str()
        );
        // Secrets never show in Debug output.
        assert!(
            !format!("{cas:?}{cloud:?}").contains("KEY")
                && !format!("{cloud:?}").contains("s3cret")
        );
    }

    #[test]
    fn labels_become_topology_variables_and_nodegroup_overrides() {
        let mut c = cluster();
        c.labels = serde_json::from_value(json!({
            "kube_tag": "v1.33.1",
            "admission_control_list": "PodSecurity",
            "audit_log_enabled": "1",
            "audit_log_max_size": "5",
            "oidc_issuer_url": "https://idp",
            "keystone_auth_enabled": "false",
            "boot_volume_size": "30",
            "availability_zone": "az1",
            "master_lb_floating_ip_enabled": "no",
            "auto_healing_enabled": "f",
            "auto_scaling_enabled": "y",
            "max_node_count": "7",
        }))
        .unwrap();
        let mut t = template();
        t.labels =
            serde_json::from_value(json!({"etcd_volume_size": "10", "audit_log_max_size": "99"}))
                .unwrap();
        let mut gpu = nodegroup("gpu", NodegroupRole::Worker, 2);
        gpu.labels = serde_json::from_value(
            json!({"boot_volume_size": "80", "different_failure_domain": "true"}),
        )
        .unwrap();
        let ngs = vec![nodegroup("default-master", NodegroupRole::Master, 1), gpu];
        let addons = Addons::default();
        let obj = super::cluster(&inputs(&c, &t, &ngs, &addons));
        let topo = &obj["spec"]["topology"];
        let var = |n: &str| {
            topo["variables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == n)
                .unwrap()["value"]
                .clone()
        };
        assert_eq!(var("admissionPlugins"), "NodeRestriction,PodSecurity");
        assert_eq!(
            var("auditLog"),
            json!({"enabled": true, "maxAge": 30, "maxBackup": 10, "maxSize": 5})
        );
        assert_eq!(var("oidc")["issuerURL"], "https://idp");
        assert_eq!(var("oidc")["usernameClaim"], "sub");
        assert_eq!(var("keystoneAuth"), false);
        assert_eq!(
            var("etcdVolume"),
            json!({"size": 10, "type": "", "availabilityZone": "az1"})
        );
        assert_eq!(
            var("bootVolume"),
            json!({"size": 30, "type": "", "availabilityZone": "az1"})
        );
        assert_eq!(var("disableAPIServerFloatingIP"), true);
        assert_eq!(var("identityRef")["type"], "Secret");
        assert_eq!(
            var("externalNetwork"),
            json!({"filter": {"name": "public"}})
        );
        assert_eq!(topo["controlPlane"]["healthCheck"]["enabled"], false);
        let md = &topo["workers"]["machineDeployments"][0];
        assert_eq!(md["healthCheck"]["enabled"], false);
        let over = md["variables"]["overrides"].as_array().unwrap();
        let ov = |n: &str| over.iter().find(|v| v["name"] == n).unwrap()["value"].clone();
        assert_eq!(
            ov("bootVolume")["size"],
            80,
            "the nodegroup's label over the cluster's"
        );
        assert_eq!(ov("differentFailureDomain"), true);
        // Auto-scaling (a strict bool now): bounds from the fields, the label filling max.
        assert!(md.get("replicas").is_none());
        let ann = &md["metadata"]["annotations"];
        assert_eq!(
            ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"],
            "0"
        );
        assert_eq!(
            ann["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"],
            "7"
        );
    }
}
