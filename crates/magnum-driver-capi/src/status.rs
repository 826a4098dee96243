//! The Cluster API status engine: one pure function from what the management cluster shows
//! (the CAPI Cluster, its control plane, MachineDeployments, Machines and the
//! OpenStackCluster, as JSON objects) and the operation in progress to Magnum's status, its
//! reason, the API address, the Kubernetes version and each nodegroup's status.
//!
//! Where magnum-cluster-api falls short (drivers.md §4.5, research/cluster-api.md): it never
//! reports FAILED, its reason is the latest Event (the previous step), and it declares
//! COMPLETE from stale status. Here COMPLETE needs every object's status to describe its
//! current spec (`observedGeneration == metadata.generation`); CAPI's failure signals end in
//! `*_FAILED` and a later recovery brings the cluster back; the reason names the root cause,
//! the failing Machine's message first. Both status shapes are read: v1beta2 (conditions
//! without severity, the old fields under `status.deprecated.v1beta1`) and v1beta1.

use magnum_core::status::ClusterStatus as S;
use serde_json::Value;

/// The Magnum operation the objects are observed for (the prefix of the cluster status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn in_progress(self) -> S {
        match self {
            Self::Create => S::CreateInProgress,
            Self::Update => S::UpdateInProgress,
            Self::Delete => S::DeleteInProgress,
        }
    }

    pub fn complete(self) -> S {
        match self {
            Self::Create => S::CreateComplete,
            Self::Update => S::UpdateComplete,
            Self::Delete => S::DeleteComplete,
        }
    }

    fn failed(self) -> S {
        match self {
            Self::Create => S::CreateFailed,
            Self::Update => S::UpdateFailed,
            Self::Delete => S::DeleteFailed,
        }
    }
}

/// What the management cluster shows for one Magnum cluster.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot<'a> {
    pub cluster: Option<&'a Value>,
    pub control_plane: Option<&'a Value>,
    pub machine_deployments: &'a [Value],
    pub machines: &'a [Value],
    pub openstack_cluster: Option<&'a Value>,
}

/// One worker nodegroup's verdict, keyed by its MachineDeployment's topology name (the
/// nodegroup's name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodegroupVerdict {
    pub name: String,
    pub status: S,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: S,
    /// `None`: no reason (a completed operation clears it).
    pub reason: Option<String>,
    pub api_address: Option<String>,
    pub coe_version: Option<String>,
    pub nodegroups: Vec<NodegroupVerdict>,
}

/// A condition as both API versions carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Condition {
    status: String,
    reason: String,
    message: String,
    /// v1beta1 only: `Error`, `Warning`, `Info`.
    severity: String,
}

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

fn text(v: &Value, path: &[&str]) -> Option<String> {
    s(v, path)
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

fn name(v: &Value) -> String {
    text(v, &["metadata", "name"]).unwrap_or_default()
}

/// The condition `kind` of `obj`, from the current list or the v1beta1 one kept beside it.
fn condition(obj: &Value, kind: &str) -> Option<Condition> {
    let lists = [
        s(obj, &["status", "conditions"]),
        s(obj, &["status", "deprecated", "v1beta1", "conditions"]),
        // CAPO v1beta1 and old CAPI put them here too.
        s(obj, &["status", "v1beta2", "conditions"]),
    ];
    lists
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .find(|c| c["type"] == kind)
        .map(|c| Condition {
            status: c["status"].as_str().unwrap_or("Unknown").to_owned(),
            reason: c["reason"].as_str().unwrap_or_default().to_owned(),
            message: c["message"].as_str().unwrap_or_default().to_owned(),
            severity: c["severity"].as_str().unwrap_or_default().to_owned(),
        })
}

fn is_true(obj: &Value, kind: &str) -> bool {
    condition(obj, kind).is_some_and(|c| c.status == "True")
}

/// Whether `obj`'s condition `kind` is True, in either API version's shape.
pub fn is_condition_true(obj: &Value, kind: &str) -> bool {
    is_true(obj, kind)
}

/// Whether the object's status describes its current spec. An object without status (just
/// created) is not current, and never an error (mcapi dropped such polls).
fn current(obj: &Value) -> bool {
    let generation = s(obj, &["metadata", "generation"]).and_then(Value::as_i64);
    let observed = s(obj, &["status", "observedGeneration"]).and_then(Value::as_i64);
    match (generation, observed) {
        (Some(g), Some(o)) => o >= g,
        // Objects whose kind has no generation (rare stand-ins): their status is all we have.
        (None, _) => s(obj, &["status"]).is_some(),
        (Some(_), None) => false,
    }
}

/// A failure CAPI or CAPO declared on `obj`: v1beta1's `failureReason/failureMessage` (also
/// kept under `deprecated.v1beta1` in v1beta2), a `Failed` phase, or a False condition of
/// severity Error.
fn failure(obj: &Value) -> Option<String> {
    for base in [&["status"][..], &["status", "deprecated", "v1beta1"][..]] {
        let mut reason_path = base.to_vec();
        reason_path.push("failureReason");
        let mut message_path = base.to_vec();
        message_path.push("failureMessage");
        let reason = text(obj, &reason_path);
        let message = text(obj, &message_path);
        if reason.is_some() || message.is_some() {
            return Some(match (reason, message) {
                (Some(r), Some(m)) => format!("{r}: {m}"),
                (Some(x), None) | (None, Some(x)) => x,
                (None, None) => String::new(),
            });
        }
    }
    if text(obj, &["status", "phase"]).as_deref() == Some("Failed") {
        return Some("phase Failed".into());
    }
    let conditions = s(obj, &["status", "conditions"]).and_then(Value::as_array);
    conditions
        .into_iter()
        .flatten()
        .find(|c| c["status"] == "False" && c["severity"] == "Error")
        .map(|c| {
            let m = c["message"].as_str().unwrap_or_default();
            let r = c["reason"].as_str().unwrap_or_default();
            if m.is_empty() {
                r.to_owned()
            } else {
                m.to_owned()
            }
        })
}

fn kind_of(obj: &Value) -> String {
    obj["kind"].as_str().unwrap_or("object").to_owned()
}

/// The first not-ready condition's words, for a reason while waiting.
fn waiting_on(obj: &Value, kinds: &[&str]) -> Option<String> {
    kinds.iter().find_map(|k| {
        let c = condition(obj, k)?;
        if c.status == "True" {
            return None;
        }
        let detail = if c.message.is_empty() {
            c.reason
        } else {
            c.message
        };
        (!detail.is_empty()).then(|| format!("{} {} {k}: {detail}", kind_of(obj), name(obj)))
    })
}

/// The Machine that holds a cluster back, and why: a declared failure first, then the first
/// not-ready infrastructure, bootstrap or node condition with a message.
fn machine_problem(machines: &[Value]) -> Option<(bool, String)> {
    for m in machines {
        if let Some(f) = failure(m) {
            return Some((true, format!("Machine {}: {f}", name(m))));
        }
    }
    for m in machines {
        for k in [
            "InfrastructureReady",
            "BootstrapConfigReady",
            "BootstrapReady",
            "NodeHealthy",
        ] {
            if let Some(c) = condition(m, k).filter(|c| c.status == "False") {
                let detail = if c.message.is_empty() {
                    c.reason
                } else {
                    c.message
                };
                if !detail.is_empty() {
                    return Some((false, format!("Machine {} {k}: {detail}", name(m))));
                }
            }
        }
    }
    None
}

fn machines_of<'a>(machines: &'a [Value], deployment: &str) -> Vec<&'a Value> {
    machines
        .iter()
        .filter(|m| {
            text(
                m,
                &["metadata", "labels", "cluster.x-k8s.io/deployment-name"],
            )
            .as_deref()
                == Some(deployment)
        })
        .collect()
}

fn replicas(obj: &Value, field: &str) -> Option<i64> {
    s(obj, &["status", field])
        .or_else(|| s(obj, &["status", "deprecated", "v1beta1", field]))
        .and_then(Value::as_i64)
}

/// The autoscaler's bound on a MachineDeployment (set only on autoscaled nodegroups').
pub const AUTOSCALER_MIN: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";

/// The replicas of the autoscaled MachineDeployments, by nodegroup uuid, where they differ
/// from the nodegroup's `node_count` (the autoscaler owns the count between its bounds).
pub fn scaled_counts(mds: &[Value], ngs: &[magnum_core::model::Nodegroup]) -> Vec<(String, i32)> {
    mds.iter()
        .filter(|md| s(md, &["metadata", "annotations", AUTOSCALER_MIN]).is_some())
        .filter(|md| s(md, &["metadata", "deletionTimestamp"]).is_none())
        .filter_map(|md| {
            let name = text(
                md,
                &[
                    "metadata",
                    "labels",
                    "topology.cluster.x-k8s.io/deployment-name",
                ],
            )?;
            let replicas = s(md, &["spec", "replicas"])?
                .as_i64()
                .and_then(|r| i32::try_from(r).ok())?;
            let ng = ngs.iter().find(|ng| ng.name == name)?;
            (ng.node_count != replicas).then(|| (ng.uuid.to_string(), replicas))
        })
        .collect()
}

/// A MachineDeployment's verdict for the operation.
fn deployment_verdict(op: Operation, md: &Value, machines: &[Value]) -> NodegroupVerdict {
    let topology = text(
        md,
        &[
            "metadata",
            "labels",
            "topology.cluster.x-k8s.io/deployment-name",
        ],
    );
    let ng_name = topology.unwrap_or_else(|| name(md));
    let own: Vec<Value> = machines_of(machines, &name(md))
        .into_iter()
        .cloned()
        .collect();
    if s(md, &["metadata", "deletionTimestamp"]).is_some() {
        // Going, with its Machines: never settled (a deleted nodegroup waits for it to go).
        return NodegroupVerdict {
            name: ng_name,
            status: op.in_progress(),
            reason: Some(format!("MachineDeployment {} is being deleted", name(md))),
        };
    }
    if let Some(f) = failure(md) {
        return NodegroupVerdict {
            name: ng_name,
            status: op.failed(),
            reason: Some(format!("MachineDeployment {}: {f}", name(md))),
        };
    }
    if let Some((true, why)) = machine_problem(&own) {
        return NodegroupVerdict {
            name: ng_name,
            status: op.failed(),
            reason: Some(why),
        };
    }
    let wanted = s(md, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let ready = replicas(md, "readyReplicas").unwrap_or(0);
    let updated = replicas(md, "updatedReplicas")
        .or_else(|| replicas(md, "upToDateReplicas"))
        .unwrap_or(0);
    let total = replicas(md, "replicas").unwrap_or(0);
    let draining = own
        .iter()
        .any(|m| s(m, &["metadata", "deletionTimestamp"]).is_some());
    let settled =
        current(md) && ready == wanted && updated == wanted && total == wanted && !draining;
    if settled {
        return NodegroupVerdict {
            name: ng_name,
            status: op.complete(),
            reason: None,
        };
    }
    let reason = machine_problem(&own).map(|(_, w)| w).or_else(|| {
        Some(format!(
            "MachineDeployment {}: {ready} of {wanted} machines ready",
            name(md)
        ))
    });
    NodegroupVerdict {
        name: ng_name,
        status: op.in_progress(),
        reason,
    }
}

/// Whether the control plane is up, current and at its wanted size, and what it fails of.
fn control_plane(kcp: &Value) -> (bool, Option<String>) {
    if let Some(f) = failure(kcp) {
        return (false, Some(format!("{} {}: {f}", kind_of(kcp), name(kcp))));
    }
    let wanted = s(kcp, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let ready = replicas(kcp, "readyReplicas").unwrap_or(0);
    let updated = replicas(kcp, "updatedReplicas")
        .or_else(|| replicas(kcp, "upToDateReplicas"))
        .unwrap_or(0);
    let available = is_true(kcp, "Available") || is_true(kcp, "Ready");
    (
        current(kcp) && available && ready == wanted && updated == wanted,
        None,
    )
}

/// The cluster is up: v1beta2's `Available`, or v1beta1's `Ready`, `ControlPlaneReady` and
/// `InfrastructureReady` all True.
fn cluster_available(c: &Value) -> bool {
    is_true(c, "Available")
        || (is_true(c, "Ready")
            && is_true(c, "ControlPlaneReady")
            && is_true(c, "InfrastructureReady"))
}

fn api_address(c: &Value) -> Option<String> {
    let host = text(c, &["spec", "controlPlaneEndpoint", "host"])?;
    let port = s(c, &["spec", "controlPlaneEndpoint", "port"])
        .and_then(Value::as_i64)
        .unwrap_or(6443);
    Some(format!("https://{host}:{port}"))
}

/// Magnum's view of one cluster being `op`-ed, from what the management cluster shows.
pub fn evaluate(op: Operation, snap: &Snapshot<'_>) -> Verdict {
    let nodegroups: Vec<NodegroupVerdict> = snap
        .machine_deployments
        .iter()
        .map(|md| deployment_verdict(op, md, snap.machines))
        .collect();
    let mut v = Verdict {
        status: op.in_progress(),
        reason: None,
        api_address: None,
        coe_version: None,
        nodegroups,
    };
    let Some(cluster) = snap.cluster else {
        if op == Operation::Delete {
            v.status = S::DeleteComplete;
        } else {
            v.reason = Some("Waiting for the Cluster API Cluster to appear".into());
        }
        return v;
    };
    v.api_address = api_address(cluster);
    v.coe_version = text(cluster, &["spec", "topology", "version"]);
    if op == Operation::Delete {
        // What holds the delete up, the deepest cause first: the infrastructure (a port or
        // security group in use by a load balancer), then what the Cluster still waits for.
        let blocked = snap
            .openstack_cluster
            .and_then(|o| failure(o).map(|f| format!("{} {}: {f}", kind_of(o), name(o))))
            .or_else(|| {
                snap.openstack_cluster
                    .and_then(|o| waiting_on(o, &["Ready"]))
            })
            .or_else(|| {
                condition(cluster, "Deleting")
                    .filter(|c| !c.message.is_empty())
                    .map(|c| format!("Cluster {} Deleting: {}", name(cluster), c.message))
            });
        v.reason = Some(
            blocked.unwrap_or_else(|| format!("Cluster API is deleting Cluster {}", name(cluster))),
        );
        return v;
    }

    // A declared failure anywhere ends the operation, the root cause first.
    let infra_failure = snap
        .openstack_cluster
        .and_then(|o| failure(o).map(|f| format!("{} {}: {f}", kind_of(o), name(o))));
    let cp_failure = snap.control_plane.and_then(|k| control_plane(k).1);
    let machine = machine_problem(snap.machines);
    let ng_failure = v
        .nodegroups
        .iter()
        .find(|n| n.status == op.failed())
        .and_then(|n| n.reason.clone());
    let failed = machine
        .as_ref()
        .filter(|(declared, _)| *declared)
        .map(|(_, w)| w.clone())
        .or(infra_failure)
        .or(cp_failure)
        .or(ng_failure)
        .or_else(|| failure(cluster).map(|f| format!("Cluster {}: {f}", name(cluster))));
    if let Some(why) = failed {
        v.status = op.failed();
        v.reason = Some(why);
        return v;
    }

    let cp_ready = snap.control_plane.is_some_and(|k| control_plane(k).0);
    let workers_done = v.nodegroups.iter().all(|n| n.status == op.complete());
    // A rollout is over only when no Machine is still going and every one runs the
    // cluster's version (the counters can settle while an old Machine drains).
    let machines_settled = snap.machines.iter().all(|m| {
        s(m, &["metadata", "deletionTimestamp"]).is_none()
            && match (&v.coe_version, text(m, &["spec", "version"])) {
                (Some(want), Some(has)) => *want == has,
                _ => true,
            }
    });
    if current(cluster)
        && cluster_available(cluster)
        && cp_ready
        && workers_done
        && machines_settled
    {
        v.status = op.complete();
        v.reason = None;
        return v;
    }
    // Still on its way: say what it waits for, the deepest cause first.
    v.reason = machine
        .map(|(_, w)| w)
        .or_else(|| {
            snap.openstack_cluster
                .and_then(|o| waiting_on(o, &["Ready", "NetworkReady", "APIEndpointReady"]))
        })
        .or_else(|| {
            snap.control_plane
                .and_then(|k| waiting_on(k, &["Available", "Ready", "MachinesReady"]))
        })
        .or_else(|| v.nodegroups.iter().find_map(|n| n.reason.clone()))
        .or_else(|| {
            waiting_on(
                cluster,
                &[
                    "Available",
                    "Ready",
                    "InfrastructureReady",
                    "ControlPlaneAvailable",
                    "ControlPlaneReady",
                ],
            )
        })
        .or_else(|| Some(format!("Waiting for Cluster {} to settle", name(cluster))));
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn autoscaled_replicas_become_node_counts_where_they_differ() {
        use magnum_core::model::NodegroupRole;
        let md = |name: &str, replicas: i64, scaled: bool| {
            let mut m = json!({
                "metadata": {"labels": {"topology.cluster.x-k8s.io/deployment-name": name}},
                "spec": {"replicas": replicas},
            });
            if scaled {
                m["metadata"]["annotations"] = json!({AUTOSCALER_MIN: "1"});
            }
            m
        };
        let ngs = [
            crate::render::tests::nodegroup("scaled", NodegroupRole::Worker, 1),
            crate::render::tests::nodegroup("same", NodegroupRole::Worker, 2),
            crate::render::tests::nodegroup("fixed", NodegroupRole::Worker, 1),
        ];
        let mut going = md("scaled", 7, true);
        going["metadata"]["deletionTimestamp"] = json!("2026-12-05T00:00:00Z");
        let mds = [
            md("scaled", 3, true),
            md("same", 2, true),
            md("fixed", 5, false),
        ];
        assert_eq!(
            scaled_counts(&mds, &ngs),
            vec![(ngs[0].uuid.to_string(), 3)],
            "only an autoscaled MachineDeployment whose count differs"
        );
        assert!(
            scaled_counts(&[going], &ngs).is_empty(),
            "one being deleted says nothing"
        );
    }

    fn cluster(available: bool, generation: i64, observed: i64) -> Value {
        json!({
            "kind": "Cluster",
            "metadata": {"name": "kube-abcde", "generation": generation},
            "spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
                     "topology": {"version": "v1.31.1"}},
            "status": {"observedGeneration": observed,
                       "conditions": [{"type": "Available", "status": if available {"True"} else {"False"},
                                       "reason": "x", "message": ""}]}
        })
    }

    fn kcp(ready: i64, wanted: i64) -> Value {
        json!({
            "kind": "KubeadmControlPlane",
            "metadata": {"name": "kube-abcde-cp", "generation": 1},
            "spec": {"replicas": wanted},
            "status": {"observedGeneration": 1, "readyReplicas": ready, "upToDateReplicas": ready,
                       "replicas": ready,
                       "conditions": [{"type": "Available", "status": if ready == wanted {"True"} else {"False"}}]}
        })
    }

    fn md(ready: i64, wanted: i64) -> Value {
        json!({
            "kind": "MachineDeployment",
            "metadata": {"name": "kube-abcde-default-worker-x1", "generation": 2,
                         "labels": {"topology.cluster.x-k8s.io/deployment-name": "default-worker"}},
            "spec": {"replicas": wanted},
            "status": {"observedGeneration": 2, "readyReplicas": ready, "upToDateReplicas": ready,
                       "replicas": ready, "phase": "Running"}
        })
    }

    fn machine(name: &str, infra: Option<&str>) -> Value {
        let conditions = match infra {
            Some(msg) => json!([{"type": "InfrastructureReady", "status": "False",
                                 "reason": "InstanceCreateFailed", "message": msg}]),
            None => json!([{"type": "InfrastructureReady", "status": "True"}]),
        };
        json!({
            "kind": "Machine",
            "metadata": {"name": name,
                         "labels": {"cluster.x-k8s.io/deployment-name": "kube-abcde-default-worker-x1"}},
            "status": {"conditions": conditions}
        })
    }

    #[test]
    fn complete_only_when_every_object_is_current_and_ready() {
        let (c, k, mds) = (cluster(true, 3, 3), kcp(1, 1), [md(2, 2)]);
        let snap = Snapshot {
            cluster: Some(&c),
            control_plane: Some(&k),
            machine_deployments: &mds,
            ..Snapshot::default()
        };
        let v = evaluate(Operation::Create, &snap);
        assert_eq!(v.status, S::CreateComplete, "{v:?}");
        assert_eq!(v.reason, None);
        assert_eq!(v.api_address.as_deref(), Some("https://10.0.0.5:6443"));
        assert_eq!(v.coe_version.as_deref(), Some("v1.31.1"));
        assert_eq!(v.nodegroups[0].name, "default-worker");
        assert_eq!(v.nodegroups[0].status, S::CreateComplete);

        // The Cluster's status predates its spec (an upgrade just applied): not complete.
        let stale = cluster(true, 4, 3);
        let v = evaluate(
            Operation::Update,
            &Snapshot {
                cluster: Some(&stale),
                ..snap
            },
        );
        assert_eq!(v.status, S::UpdateInProgress, "{v:?}");
    }

    #[test]
    fn a_fresh_cluster_without_status_is_in_progress_not_an_error() {
        let c = json!({"kind": "Cluster", "metadata": {"name": "kube-abcde", "generation": 1}, "spec": {}});
        let v = evaluate(
            Operation::Create,
            &Snapshot {
                cluster: Some(&c),
                ..Snapshot::default()
            },
        );
        assert_eq!(v.status, S::CreateInProgress);
        assert!(v.reason.is_some());
    }

    #[test]
    fn the_reason_is_the_machine_that_holds_the_cluster_back() {
        let (c, k, mds) = (cluster(false, 1, 1), kcp(1, 1), [md(1, 2)]);
        let machines = [
            machine("kube-abcde-default-worker-x1-aaaaa", None),
            machine(
                "kube-abcde-default-worker-x1-bbbbb",
                Some(
                    "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances",
                ),
            ),
        ];
        let os = json!({"kind": "OpenStackCluster", "metadata": {"name": "kube-abcde"},
                        "status": {"ready": true, "conditions": [{"type": "Ready", "status": "True"}]}});
        let snap = Snapshot {
            cluster: Some(&c),
            control_plane: Some(&k),
            machine_deployments: &mds,
            machines: &machines,
            openstack_cluster: Some(&os),
        };
        let v = evaluate(Operation::Create, &snap);
        assert_eq!(v.status, S::CreateInProgress);
        let reason = v.reason.unwrap();
        assert!(
            reason.contains("kube-abcde-default-worker-x1-bbbbb"),
            "{reason}"
        );
        assert!(reason.contains("Quota exceeded"), "{reason}");
        assert_eq!(v.nodegroups[0].status, S::CreateInProgress);
    }

    #[test]
    fn declared_failures_end_in_failed_and_a_recovery_completes() {
        let (c, k, mds) = (cluster(false, 1, 1), kcp(0, 1), [md(0, 1)]);
        // v1beta2 keeps the old failure fields under deprecated.v1beta1.
        let os = json!({"kind": "OpenStackCluster", "metadata": {"name": "kube-abcde"},
                            "status": {"failureReason": "CreateError",
                                       "failureMessage": "failed to create router: quota exceeded"}});
        let snap = Snapshot {
            cluster: Some(&c),
            control_plane: Some(&k),
            machine_deployments: &mds,
            openstack_cluster: Some(&os),
            ..Snapshot::default()
        };
        let v = evaluate(Operation::Create, &snap);
        assert_eq!(v.status, S::CreateFailed);
        assert!(
            v.reason
                .as_deref()
                .unwrap()
                .contains("failed to create router"),
            "{v:?}"
        );

        let failed_machine = json!({"kind": "Machine", "metadata": {"name": "m-1",
            "labels": {"cluster.x-k8s.io/deployment-name": "kube-abcde-default-worker-x1"}},
            "status": {"deprecated": {"v1beta1": {"failureReason": "InsufficientResources",
                                                   "failureMessage": "No valid host was found"}}}});
        let machines = [failed_machine];
        let healthy_os = json!({"kind": "OpenStackCluster", "metadata": {"name": "kube-abcde"},
                                "status": {"ready": true}});
        let v = evaluate(
            Operation::Create,
            &Snapshot {
                machines: &machines,
                openstack_cluster: Some(&healthy_os),
                ..snap
            },
        );
        assert_eq!(v.status, S::CreateFailed);
        assert!(
            v.reason
                .as_deref()
                .unwrap()
                .starts_with("Machine m-1: InsufficientResources"),
            "{v:?}"
        );
        assert_eq!(v.nodegroups[0].status, S::CreateFailed);

        // The same cluster once everything converged: complete again.
        let (c, k, mds) = (cluster(true, 1, 1), kcp(1, 1), [md(1, 1)]);
        let v = evaluate(
            Operation::Create,
            &Snapshot {
                cluster: Some(&c),
                control_plane: Some(&k),
                machine_deployments: &mds,
                ..Snapshot::default()
            },
        );
        assert_eq!(v.status, S::CreateComplete);
    }

    #[test]
    fn v1beta1_shapes_are_read_too() {
        let c = json!({"kind": "Cluster", "metadata": {"name": "kube-old", "generation": 2},
            "spec": {"controlPlaneEndpoint": {"host": "lb.example", "port": 443}},
            "status": {"observedGeneration": 2, "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "ControlPlaneReady", "status": "True"},
                {"type": "InfrastructureReady", "status": "True"}]}});
        let k = json!({"kind": "KubeadmControlPlane", "metadata": {"name": "kube-old", "generation": 1},
            "spec": {"replicas": 3},
            "status": {"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 3, "replicas": 3,
                       "conditions": [{"type": "Ready", "status": "True"}]}});
        let v = evaluate(
            Operation::Update,
            &Snapshot {
                cluster: Some(&c),
                control_plane: Some(&k),
                ..Snapshot::default()
            },
        );
        assert_eq!(v.status, S::UpdateComplete, "{v:?}");
        assert_eq!(v.api_address.as_deref(), Some("https://lb.example:443"));

        // A v1beta1 condition of severity Error is a failure.
        let bad = json!({"kind": "KubeadmControlPlane", "metadata": {"name": "kube-old", "generation": 1},
            "spec": {"replicas": 3},
            "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "False",
                "severity": "Error", "reason": "RemediationFailed", "message": "etcd member unhealthy"}]}});
        let v = evaluate(
            Operation::Update,
            &Snapshot {
                cluster: Some(&c),
                control_plane: Some(&bad),
                ..Snapshot::default()
            },
        );
        assert_eq!(v.status, S::UpdateFailed);
        assert!(
            v.reason
                .as_deref()
                .unwrap()
                .contains("etcd member unhealthy"),
            "{v:?}"
        );
    }

    #[test]
    fn delete_completes_when_the_cluster_is_gone() {
        let c = cluster(true, 1, 1);
        let v = evaluate(
            Operation::Delete,
            &Snapshot {
                cluster: Some(&c),
                ..Snapshot::default()
            },
        );
        assert_eq!(v.status, S::DeleteInProgress);
        let v = evaluate(Operation::Delete, &Snapshot::default());
        assert_eq!(v.status, S::DeleteComplete);
    }
}
