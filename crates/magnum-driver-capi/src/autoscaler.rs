//! The cluster autoscaler of a cluster with an auto-scaled nodegroup: one Deployment per
//! workload cluster in the management cluster, as magnum-cluster-api runs it. It scales the
//! MachineDeployments there between their min/max annotations (in-cluster credentials, a Role
//! in the cluster's namespace) and watches the workload's pending pods through the kubeconfig
//! Secret Cluster API writes for every cluster (`<name>-kubeconfig`, key `value`).

use magnum_core::model::{Cluster, ClusterTemplate, Nodegroup};
use serde_json::{Value, json};

use super::kube::Kind;
use super::render::{Inputs, meta, nodegroup_labels};

/// cluster-autoscaler releases per Kubernetes minor (the autoscaler follows the minor it was
/// built for); a minor outside the rows takes the nearest one.
pub const VERSIONS: &[(u32, &str)] = &[
    (29, "v1.29.0"),
    (30, "v1.30.0"),
    (31, "v1.31.0"),
    (32, "v1.32.0"),
    (33, "v1.33.0"),
];

/// The kinds the autoscaler brings, in the order they are applied and removed (the
/// Deployment last both ways: while it exists, the autoscaler is not wholly removed).
pub const KINDS: [Kind; 4] = [
    Kind::ServiceAccount,
    Kind::Role,
    Kind::RoleBinding,
    Kind::Deployment,
];

/// Whether the cluster needs an autoscaler: a worker nodegroup (not being deleted) with
/// `auto_scaling_enabled`.
pub fn wanted(i: &Inputs<'_>) -> bool {
    any_autoscaled(i.cluster, i.template, i.nodegroups)
}

/// [`wanted`] before the inputs are gathered (the flavors are read only when it holds).
pub fn any_autoscaled(cluster: &Cluster, template: &ClusterTemplate, ngs: &[Nodegroup]) -> bool {
    ngs.iter().any(|ng| {
        super::render::is_worker(ng)
            && nodegroup_labels(Some(ng), cluster, template).bool("auto_scaling_enabled")
    })
}

/// The name of each of the autoscaler's objects.
pub fn name(stack_id: &str) -> String {
    format!("{stack_id}-autoscaler")
}

/// The image for the cluster's minor: from `container_infra_prefix` when set, else from
/// `[auto_scaling] image_repository`.
pub fn image(i: &Inputs<'_>) -> String {
    let minor = super::addons::minor(i);
    let mut tag = VERSIONS.first().map_or("", |v| v.1);
    for (m, v) in VERSIONS {
        if *m <= minor {
            tag = v;
        }
    }
    let registry = super::addons::prefix(i)
        .unwrap_or_else(|| i.autoscaler_repository.trim_end_matches('/').to_owned());
    format!("{registry}/cluster-autoscaler:{tag}")
}

/// The ServiceAccount, Role, RoleBinding and Deployment (in [`KINDS`]'s order).
pub fn objects(i: &Inputs<'_>) -> Vec<Value> {
    let name = name(i.stack_id);
    let m = meta(&name, i);
    let pod_labels = json!({
        "app.kubernetes.io/name": "cluster-autoscaler",
        "app.kubernetes.io/instance": name,
    });
    let rw = ["get", "list", "watch", "update", "patch"];
    vec![
        json!({"apiVersion": Kind::ServiceAccount.api_version(), "kind": "ServiceAccount",
               "metadata": m}),
        json!({
            "apiVersion": Kind::Role.api_version(),
            "kind": "Role",
            "metadata": m,
            "rules": [
                {
                    "apiGroups": ["cluster.x-k8s.io"],
                    "resources": ["machinedeployments", "machinedeployments/scale",
                                  "machinesets", "machinepools", "machinepools/scale",
                                  "machines"],
                    "verbs": rw,
                },
                // The machine templates: a node's capacity when none exists yet.
                {
                    "apiGroups": ["infrastructure.cluster.x-k8s.io"],
                    "resources": ["*"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        }),
        json!({
            "apiVersion": Kind::RoleBinding.api_version(),
            "kind": "RoleBinding",
            "metadata": m,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": i.namespace}],
        }),
        json!({
            "apiVersion": Kind::Deployment.api_version(),
            "kind": "Deployment",
            "metadata": m,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": pod_labels},
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        "serviceAccountName": name,
                        "containers": [{
                            "name": "cluster-autoscaler",
                            "image": image(i),
                            "command": ["/cluster-autoscaler"],
                            "args": [
                                "--cloud-provider=clusterapi",
                                // The workload cluster's nodes and pods; the management
                                // cluster's objects through the pod's own credentials.
                                "--kubeconfig=/etc/kubernetes/workload/value",
                                "--clusterapi-cloud-config-authoritative",
                                format!(
                                    "--node-group-auto-discovery=clusterapi:namespace={},clusterName={}",
                                    i.namespace, i.stack_id
                                ),
                            ],
                            "volumeMounts": [{
                                "name": "workload-kubeconfig",
                                "mountPath": "/etc/kubernetes/workload",
                                "readOnly": true,
                            }],
                        }],
                        "volumes": [{
                            "name": "workload-kubeconfig",
                            "secret": {"secretName": format!("{}-kubeconfig", i.stack_id)},
                        }],
                    },
                },
            },
        }),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::render::Addons;
    use crate::render::tests::{cluster, inputs, nodegroup, template};
    use magnum_core::model::NodegroupRole;

    #[test]
    fn an_autoscaled_nodegroup_brings_an_autoscaler_for_the_clusters_minor() {
        let (mut c, t, addons) = (cluster(), template(), Addons::default());
        c.labels = serde_json::from_value(json!({"kube_tag": "v1.31.2"})).unwrap();
        let mut ngs = vec![
            nodegroup("default-master", NodegroupRole::Master, 1),
            nodegroup("default-worker", NodegroupRole::Worker, 1),
        ];
        assert!(!wanted(&inputs(&c, &t, &ngs, &addons)));
        ngs[1].labels = serde_json::from_value(json!({"auto_scaling_enabled": "true"})).unwrap();
        let i = inputs(&c, &t, &ngs, &addons);
        assert!(wanted(&i));
        assert_eq!(
            image(&i),
            "registry.k8s.io/autoscaling/cluster-autoscaler:v1.31.0"
        );
        let mut own = inputs(&c, &t, &ngs, &addons);
        own.autoscaler_repository = "registry.internal:5000/autoscaling/";
        assert_eq!(
            image(&own),
            "registry.internal:5000/autoscaling/cluster-autoscaler:v1.31.0",
            "[auto_scaling] image_repository"
        );
        let objs = objects(&i);
        let kinds: Vec<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
        );
        let args = &objs[3]["spec"]["template"]["spec"]["containers"][0]["args"];
        assert!(
            args.as_array().unwrap().contains(&json!(
                "--node-group-auto-discovery=clusterapi:namespace=magnum-system,clusterName=kube-ab12c"
            )),
            "{args}"
        );
        assert_eq!(
            objs[3]["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
            "kube-ab12c-kubeconfig"
        );
        c.labels = serde_json::from_value(json!({
            "kube_tag": "v1.40.1",
            "container_infra_prefix": "mirror.example.com/k8s/",
        }))
        .unwrap();
        let i = inputs(&c, &t, &ngs, &addons);
        assert_eq!(
            image(&i),
            "mirror.example.com/k8s/cluster-autoscaler:v1.33.0",
            "the mirror, and the newest row for a newer minor"
        );
    }
}
