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

use super::kube::Kind;

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
}

/// The cluster's label `key`, else its template's.
pub fn effective(cluster: &Cluster, template: &ClusterTemplate, key: &str) -> Option<String> {
    label(&cluster.labels, key)
        .or_else(|| label(&template.labels, key))
        .filter(|v| !v.is_empty())
}

fn truthy(v: Option<String>) -> bool {
    v.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
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

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn meta(name: &str, i: &Inputs<'_>) -> Value {
    json!({
        "name": name,
        "namespace": i.namespace,
        "labels": {
            UUID_LABEL: i.cluster.uuid.as_str(),
            CAPI_CLUSTER_LABEL: i.stack_id,
        },
    })
}

fn secret(name: &str, i: &Inputs<'_>, kind: &str, data: Value) -> Value {
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
    ["cloud-config", "ca", "etcd", "proxy", "sa", "addons"]
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
fn is_worker(ng: &Nodegroup) -> bool {
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

fn image_ref(image: &str) -> Value {
    if uuid::Uuid::parse_str(image).is_ok() {
        json!({"id": image})
    } else {
        json!({"filter": {"name": image}})
    }
}

/// One MachineDeployment entry of the topology for a worker nodegroup.
fn machine_deployment(ng: &Nodegroup, i: &Inputs<'_>) -> Value {
    let mut md = json!({
        "class": WORKER_CLASS,
        "name": ng.name,
        "metadata": {"labels": {
            "node.cluster.x-k8s.io/nodegroup": ng.name,
            format!("node-role.kubernetes.io/{}", ng.role.as_str()): "",
        }},
    });
    let autoscaling = truthy(label(&ng.labels, "auto_scaling_enabled"))
        || truthy(effective(i.cluster, i.template, "auto_scaling_enabled"));
    if autoscaling {
        // The autoscaler owns the count between the bounds; applying a count would fight it.
        md["metadata"]["annotations"] = json!({
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": ng.min_node_count.max(0).to_string(),
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size":
                ng.max_node_count.unwrap_or(ng.node_count).max(ng.node_count).to_string(),
        });
    } else {
        md["replicas"] = json!(ng.node_count);
    }
    if let Some(az) = label(&ng.labels, "availability_zone").filter(|z| !z.is_empty()) {
        md["failureDomain"] = json!(az);
    }
    let mut overrides = Vec::new();
    if let Some(f) = ng.flavor_id.as_deref().filter(|f| !f.is_empty()) {
        overrides.push(json!({"name": "flavor", "value": f}));
    }
    if let Some(img) = ng.image_id.as_deref().filter(|f| !f.is_empty()) {
        overrides.push(json!({"name": "image", "value": image_ref(img)}));
    }
    if !overrides.is_empty() {
        md["variables"] = json!({"overrides": overrides});
    }
    md
}

/// The topology variables of a cluster (declared by [`cluster_class`]).
fn variables(i: &Inputs<'_>) -> Vec<Value> {
    let (c, t) = (i.cluster, i.template);
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
    let mut v = vec![
        json!({"name": "identityRef", "value": {"name": format!("{}-cloud-config", i.stack_id), "cloudName": "default"}}),
        json!({"name": "image", "value": image_ref(t.image_id.as_deref().unwrap_or_default())}),
        json!({"name": "flavor", "value": worker_flavor}),
        json!({"name": "controlPlaneFlavor", "value": master_flavor}),
        json!({"name": "sshKeyName", "value": c.keypair.clone().or_else(|| t.keypair_id.clone()).unwrap_or_default()}),
        json!({"name": "apiServerLoadBalancer", "value": c.master_lb_enabled}),
        json!({"name": "dnsNameservers", "value": dns}),
        json!({"name": "nodeCidr", "value": effective(c, t, "fixed_subnet_cidr").unwrap_or_else(|| "10.0.0.0/24".into())}),
    ];
    if let Some(net) = t.external_network_id.as_deref().filter(|n| !n.is_empty()) {
        v.push(json!({"name": "externalNetworkId", "value": net}));
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
    let pods = effective(c, t, &format!("{network_driver}_ipv4pool"))
        .unwrap_or_else(|| "10.100.0.0/16".into());
    let services =
        effective(c, t, "service_cluster_ip_range").unwrap_or_else(|| "10.254.0.0/16".into());
    let mut m = meta(i.stack_id, i);
    m["labels"]["cni"] = json!(network_driver);
    json!({
        "apiVersion": Kind::Cluster.api_version(),
        "kind": "Cluster",
        "metadata": m,
        "spec": {
            "clusterNetwork": {
                "serviceDomain": effective(c, t, "dns_cluster_domain").unwrap_or_else(|| "cluster.local".into()),
                "pods": {"cidrBlocks": [pods]},
                "services": {"cidrBlocks": [services]},
            },
            "topology": {
                "classRef": {"name": CLASS},
                "version": kube_version(i),
                "controlPlane": {"replicas": masters},
                "workers": {"machineDeployments": workers},
                "variables": variables(i),
            },
        },
    })
}

/// The cluster's objects in the order they are applied: credentials and CAs before the
/// Cluster (kubeadm must find the CAs), addons, then the Cluster itself.
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
    out
}

fn shared_meta(name: &str, namespace: &str) -> Value {
    json!({"name": name, "namespace": namespace, "labels": {"magnum.openstack.org/driver": "k8s_capi"}})
}

fn template_ref(kind: Kind, name: &str) -> Value {
    json!({"apiVersion": kind.api_version(), "kind": kind.name(), "name": name})
}

fn string_var(name: &str, required: bool) -> Value {
    json!({"name": name, "required": required, "schema": {"openAPIV3Schema": {"type": "string"}}})
}

fn patch(path: &str, variable: &str) -> Value {
    json!({"op": "add", "path": path, "valueFrom": {"variable": variable}})
}

/// The ClusterClass and its four templates, shared by every cluster of this driver version
/// (applied again, idempotently, on every create and upgrade).
pub fn cluster_class(namespace: &str) -> Vec<Value> {
    let cp_machine = format!("{CLASS}-control-plane");
    let worker_machine = format!("{CLASS}-worker");
    let infra = |selector: Value, paths: &[(&str, &str)]| {
        json!({
            "selector": selector,
            "jsonPatches": paths.iter().map(|(p, v)| patch(p, v)).collect::<Vec<_>>(),
        })
    };
    let machine_paths: &[(&str, &str)] = &[
        ("/spec/template/spec/image", "image"),
        ("/spec/template/spec/sshKeyName", "sshKeyName"),
        ("/spec/template/spec/identityRef", "identityRef"),
    ];
    vec![
        json!({
            "apiVersion": Kind::OpenStackClusterTemplate.api_version(),
            "kind": "OpenStackClusterTemplate",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {"template": {"spec": {
                "managedSecurityGroups": {"allowAllInClusterTraffic": true},
                "managedSubnets": [{"cidr": "10.0.0.0/24"}],
                "apiServerLoadBalancer": {"enabled": false},
                "identityRef": {"name": "placeholder", "cloudName": "default"},
            }}},
        }),
        json!({
            "apiVersion": Kind::OpenStackMachineTemplate.api_version(),
            "kind": "OpenStackMachineTemplate",
            "metadata": shared_meta(&cp_machine, namespace),
            "spec": {"template": {"spec": {"flavor": "placeholder", "image": {"filter": {"name": "placeholder"}}}}},
        }),
        json!({
            "apiVersion": Kind::OpenStackMachineTemplate.api_version(),
            "kind": "OpenStackMachineTemplate",
            "metadata": shared_meta(&worker_machine, namespace),
            "spec": {"template": {"spec": {"flavor": "placeholder", "image": {"filter": {"name": "placeholder"}}}}},
        }),
        json!({
            "apiVersion": Kind::KubeadmControlPlaneTemplate.api_version(),
            "kind": "KubeadmControlPlaneTemplate",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {"template": {"spec": {"kubeadmConfigSpec": {
                "clusterConfiguration": {"apiServer": {"extraArgs": [
                    {"name": "cloud-provider", "value": "external"},
                    {"name": "enable-admission-plugins", "value": "NodeRestriction"},
                ]}},
                "initConfiguration": {"nodeRegistration": {"name": "{{ local_hostname }}", "kubeletExtraArgs": [
                    {"name": "cloud-provider", "value": "external"},
                    {"name": "provider-id", "value": "openstack:///{{ instance_id }}"},
                ]}},
                "joinConfiguration": {"nodeRegistration": {"name": "{{ local_hostname }}", "kubeletExtraArgs": [
                    {"name": "cloud-provider", "value": "external"},
                    {"name": "provider-id", "value": "openstack:///{{ instance_id }}"},
                ]}},
            }}}},
        }),
        json!({
            "apiVersion": Kind::KubeadmConfigTemplate.api_version(),
            "kind": "KubeadmConfigTemplate",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {"template": {"spec": {
                "joinConfiguration": {"nodeRegistration": {"name": "{{ local_hostname }}", "kubeletExtraArgs": [
                    {"name": "cloud-provider", "value": "external"},
                    {"name": "provider-id", "value": "openstack:///{{ instance_id }}"},
                ]}},
            }}},
        }),
        json!({
            "apiVersion": Kind::ClusterClass.api_version(),
            "kind": "ClusterClass",
            "metadata": shared_meta(CLASS, namespace),
            "spec": {
                "infrastructure": {"templateRef": template_ref(Kind::OpenStackClusterTemplate, CLASS)},
                "controlPlane": {
                    "templateRef": template_ref(Kind::KubeadmControlPlaneTemplate, CLASS),
                    "machineInfrastructure": {"templateRef": template_ref(Kind::OpenStackMachineTemplate, &cp_machine)},
                },
                "workers": {"machineDeployments": [{
                    "class": WORKER_CLASS,
                    "bootstrap": {"templateRef": template_ref(Kind::KubeadmConfigTemplate, CLASS)},
                    "infrastructure": {"templateRef": template_ref(Kind::OpenStackMachineTemplate, &worker_machine)},
                }]},
                "variables": [
                    {"name": "identityRef", "required": true, "schema": {"openAPIV3Schema": {
                        "type": "object", "required": ["name", "cloudName"],
                        "properties": {"name": {"type": "string"}, "cloudName": {"type": "string"}}}}},
                    {"name": "image", "required": true, "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"id": {"type": "string"},
                                       "filter": {"type": "object", "properties": {"name": {"type": "string"}}}}}}},
                    string_var("flavor", true),
                    string_var("controlPlaneFlavor", true),
                    string_var("sshKeyName", false),
                    string_var("externalNetworkId", false),
                    string_var("nodeCidr", true),
                    {"name": "apiServerLoadBalancer", "required": true, "schema": {"openAPIV3Schema": {"type": "boolean"}}},
                    {"name": "dnsNameservers", "required": true, "schema": {"openAPIV3Schema": {
                        "type": "array", "items": {"type": "string"}}}},
                ],
                "patches": [
                    {"name": "cluster", "definitions": [infra(
                        json!({"apiVersion": Kind::OpenStackClusterTemplate.api_version(), "kind": "OpenStackClusterTemplate",
                               "matchResources": {"infrastructureCluster": true}}),
                        &[("/spec/template/spec/identityRef", "identityRef"),
                          ("/spec/template/spec/apiServerLoadBalancer/enabled", "apiServerLoadBalancer"),
                          ("/spec/template/spec/managedSubnets/0/cidr", "nodeCidr"),
                          ("/spec/template/spec/managedSubnets/0/dnsNameservers", "dnsNameservers")])]},
                    {"name": "externalNetwork", "enabledIf": "{{ if .externalNetworkId }}true{{ end }}",
                     "definitions": [infra(
                        json!({"apiVersion": Kind::OpenStackClusterTemplate.api_version(), "kind": "OpenStackClusterTemplate",
                               "matchResources": {"infrastructureCluster": true}}),
                        &[("/spec/template/spec/externalNetwork/id", "externalNetworkId")])]},
                    {"name": "controlPlaneMachines", "definitions": [infra(
                        json!({"apiVersion": Kind::OpenStackMachineTemplate.api_version(), "kind": "OpenStackMachineTemplate",
                               "matchResources": {"controlPlane": true}}),
                        &[machine_paths, &[("/spec/template/spec/flavor", "controlPlaneFlavor")][..]].concat())]},
                    {"name": "workerMachines", "definitions": [infra(
                        json!({"apiVersion": Kind::OpenStackMachineTemplate.api_version(), "kind": "OpenStackMachineTemplate",
                               "matchResources": {"machineDeploymentClass": {"names": [WORKER_CLASS]}}}),
                        &[machine_paths, &[("/spec/template/spec/flavor", "flavor")][..]].concat())]},
                ],
            },
        }),
    ]
}

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

    fn inputs<'a>(
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
}
