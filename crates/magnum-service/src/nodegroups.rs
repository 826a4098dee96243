//! Nodegroups: the checks upstream runs before create and after a patch, the new row's
//! defaults, insert-then-cast with its compensation, update and delete.
//!
//! Upstream flaws fixed: create only cast to the conductor, which inserted the row later, so
//! a GET right after the 202 found nothing; here the row is inserted (CREATE_IN_PROGRESS)
//! before the answer. Nodegroup operations never looked at the cluster's status, so one on a
//! cluster being created or deleted flipped it to UPDATE_IN_PROGRESS; they are refused here
//! with the conductor's own precondition texts.

use magnum_core::lifecycle::{ClusterOp, NodegroupOp};
use magnum_core::model::NodegroupRole;
use magnum_core::status::ClusterStatus;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::json::{dumps, loads};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::{NodeGroup, NodeGroupFilters};
use magnum_rpc::{NodegroupRef, NodegroupUpdate};
use serde_json::{Map, Value};

use crate::{LabelsToCheck, Services, int32, invalid, invalid_attribute};

/// A new nodegroup's attributes as the API's input rules left them. Create fills in what
/// the cluster and template provide (image, flavor, labels) and what storage assigns (uuid,
/// cluster and project ids), because upstream's answer echoes the request with them.
pub type NodegroupAttrs = Map<String, Value>;

/// The values a nodegroup PATCH leaves, after the patch was applied and re-checked. `Null`
/// JSON values mean "removed".
#[derive(Clone, Debug)]
pub struct NodegroupPatch {
    pub min_node_count: i32,
    pub max_node_count: Option<i32>,
    pub labels: Value,
    pub node_labels: Value,
    pub node_taints: Value,
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const TAINT_FIELDS: [&str; 3] = ["key", "value", "effect"];
/// Label namespaces the kubelet may set on itself inside kubernetes.io / k8s.io.
const KUBELET_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];
const KUBELET_LABELS: [&str; 12] = [
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "node.kubernetes.io/windows-build",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// Upstream's NodeGroupInvalidInput: a 409 naming the attribute and the nodegroup.
fn invalid_input(attr: &str, nodegroup: Option<&str>, expl: &str) -> Error {
    Error::Conflict {
        message: format!(
            "{attr} for {} is invalid ({expl}).",
            nodegroup.unwrap_or("None")
        ),
    }
}

/// The checks upstream runs on a nodegroup before create and after a patch, in its order:
/// counts, master-only restrictions, node label namespaces, taint shapes (all 409).
pub(crate) fn check_nodegroup(
    name: Option<&str>,
    role: Option<&str>,
    node_count: i64,
    min: i64,
    max: Option<i64>,
    node_labels: Option<&Value>,
    node_taints: Option<&Value>,
) -> Result<()> {
    if let Some(max) = max.filter(|m| *m != 0) {
        if max < min {
            return Err(invalid_input(
                "max_node_count",
                name,
                &format!(
                    "min_node_count ({min}) should be less or equal to max_node_count ({max})"
                ),
            ));
        }
        if node_count > max {
            return Err(invalid_input(
                "max_node_count",
                name,
                &format!(
                    "node_count ({node_count}) should be less or equal to max_node_count ({max})"
                ),
            ));
        }
    }
    if min > node_count {
        return Err(invalid_input(
            "min_node_count",
            name,
            &format!("min_node_count ({min}) should be less or equal to node_count ({node_count})"),
        ));
    }
    let truthy = |v: Option<&Value>| match v {
        Some(Value::Object(m)) => !m.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    };
    if role == Some("master") {
        for (attr, v) in [("node_labels", node_labels), ("node_taints", node_taints)] {
            if truthy(v) {
                return Err(invalid_input(
                    attr,
                    name,
                    &format!("{attr} may not be set on master nodegroups"),
                ));
            }
        }
    }
    if let Some(Value::Object(labels)) = node_labels {
        for key in labels.keys() {
            check_node_label(name, key)?;
        }
    }
    match node_taints {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(taints)) => taints
            .iter()
            .enumerate()
            .try_for_each(|(i, t)| check_taint(name, i, t)),
        Some(other) => Err(invalid_attribute(
            "node_taints",
            other,
            "Value not a valid list of dicts",
        )),
    }
}

/// Labels in the kubernetes.io / k8s.io namespaces make the kubelet refuse to start, unless
/// they are among the ones it may set on itself.
fn check_node_label(name: Option<&str>, key: &str) -> Result<()> {
    let Some((prefix, _)) = key.split_once('/') else {
        return Ok(());
    };
    let restricted = matches!(prefix, "kubernetes.io" | "k8s.io")
        || prefix.ends_with(".kubernetes.io")
        || prefix.ends_with(".k8s.io");
    if !restricted || KUBELET_NAMESPACES.contains(&prefix) || KUBELET_LABELS.contains(&key) {
        return Ok(());
    }
    Err(invalid_input(
        "node_labels",
        name,
        &format!(
            "node label '{key}' is in a restricted Kubernetes namespace; the kubelet will refuse to start. Labels in the kubernetes.io/ and k8s.io/ namespaces must use one of the allowed prefixes ({}) or be one of the allowed labels ({}).",
            KUBELET_NAMESPACES.join(", "),
            KUBELET_LABELS.join(", ")
        ),
    ))
}

fn check_taint(name: Option<&str>, index: usize, taint: &Value) -> Result<()> {
    let Value::Object(t) = taint else {
        return Err(invalid_input(
            "node_taints",
            name,
            &format!("node_taints[{index}] must be an object with key, effect and optional value"),
        ));
    };
    let mut unknown: Vec<&str> = t
        .keys()
        .map(String::as_str)
        .filter(|k| !TAINT_FIELDS.contains(k))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        return Err(invalid_input(
            "node_taints",
            name,
            &format!(
                "node_taints[{index}] contains unrecognised field(s) {}; allowed fields are {}",
                unknown.join(", "),
                TAINT_FIELDS.join(", ")
            ),
        ));
    }
    let key_ok = match t.get("key") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    };
    if !key_ok {
        return Err(invalid_input(
            "node_taints",
            name,
            &format!("node_taints[{index}].key is required"),
        ));
    }
    if !t
        .get("effect")
        .and_then(Value::as_str)
        .is_some_and(|e| TAINT_EFFECTS.contains(&e))
    {
        return Err(invalid_input(
            "node_taints",
            name,
            &format!(
                "node_taints[{index}].effect must be one of {}",
                TAINT_EFFECTS.join(", ")
            ),
        ));
    }
    Ok(())
}

fn text(doc: &NodegroupAttrs, k: &str) -> Option<String> {
    doc.get(k).and_then(Value::as_str).map(str::to_owned)
}

pub struct Nodegroups<'a> {
    pub(crate) s: &'a Services,
}

impl Nodegroups<'_> {
    /// Create a nodegroup in `c` (the caller's policy already checked). Returns the row.
    pub async fn create(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        doc: &mut NodegroupAttrs,
    ) -> Result<NodeGroup> {
        if c.api_address.as_deref().is_none_or(str::is_empty) {
            return Err(Error::Conflict {
                message: "Cluster API address is not available yet".into(),
            });
        }
        let cluster_uuid = c.uuid.clone().unwrap_or_default();
        // Declared defaults fill absent attributes; they are part of the rendering too.
        for (k, v) in [
            ("name", Value::Null),
            ("node_count", Value::from(1)),
            ("role", Value::from("worker")),
            ("min_node_count", Value::from(0)),
            ("max_node_count", Value::Null),
        ] {
            doc.entry(k).or_insert(v);
        }
        let name = text(doc, "name");
        let existing = self
            .s
            .db
            .nodegroups()
            .list(
                ctx,
                &cluster_uuid,
                &NodeGroupFilters::default(),
                &magnum_db::Page::default(),
            )
            .await?;
        if let Some(n) = &name
            && existing.iter().any(|ng| &ng.name == n)
        {
            return Err(Error::NodeGroupAlreadyExists {
                name: n.clone(),
                cluster_id: c.name.clone().unwrap_or_default(),
            });
        }
        let node_count = int32(doc, "node_count")?.unwrap_or(1);
        let min_node_count = int32(doc, "min_node_count")?.unwrap_or(0);
        let max_node_count = int32(doc, "max_node_count")?;
        let role = text(doc, "role");
        check_nodegroup(
            name.as_deref(),
            role.as_deref(),
            i64::from(node_count),
            i64::from(min_node_count),
            max_node_count.map(i64::from),
            doc.get("node_labels"),
            doc.get("node_taints"),
        )?;
        if role.as_deref() == Some("master") {
            return Err(invalid(
                "Creating master nodegroups is currently not supported.".into(),
            ));
        }
        ClusterOp::NodegroupCreate.check(c.status)?;
        let Some(name) = name else {
            // The row needs a name; upstream's conductor failed on the insert, unseen.
            return Err(invalid_attribute(
                "name",
                &Value::Null,
                "Mandatory field missing.",
            ));
        };
        // The template gives the image when none is given, and the driver for the label check.
        let need_image = doc.get("image_id").is_none_or(Value::is_null);
        let templates = self.s.db.cluster_templates();
        let template = match c.cluster_template_id.as_deref() {
            Some(t) if need_image => Some(templates.get_by_uuid(ctx, t).await?),
            Some(t) if self.s.label_check.is_some() => templates.get_by_uuid(ctx, t).await.ok(),
            _ => None,
        };
        if need_image {
            let image = template.as_ref().and_then(|t| t.image_id.clone());
            doc.insert("image_id".into(), image.map_or(Value::Null, Value::String));
        }
        if doc.get("flavor_id").is_none_or(Value::is_null) {
            doc.insert(
                "flavor_id".into(),
                c.flavor_id.clone().map_or(Value::Null, Value::String),
            );
        }
        let cluster_labels: Map<String, Value> = loads(c.labels.as_deref()).unwrap_or_default();
        let labels = match doc.get("labels") {
            Some(Value::Object(given)) if doc.get("merge_labels") == Some(&Value::Bool(true)) => {
                let mut merged = cluster_labels;
                merged.extend(given.clone());
                merged
            }
            Some(Value::Object(given)) => given.clone(),
            _ => cluster_labels,
        };
        // A label value the cluster's driver cannot use on this nodegroup is refused now, not
        // by a CREATE_FAILED nodegroup later.
        if let (Some(check), Some(driver)) = (
            &self.s.label_check,
            template.as_ref().and_then(|t| self.s.driver_name(t)),
        ) {
            check(&driver, LabelsToCheck::Nodegroup(&labels))?;
        }
        doc.insert("labels".into(), Value::Object(labels.clone()));
        // The cluster's labels decide the boot volume, as upstream reads them.
        let cluster_labels: Option<Value> = loads(c.labels.as_deref());
        let boot = self.s.boot_volume_size(cluster_labels.as_ref());
        self.s
            .checks(ctx)
            .root_disk(doc.get("flavor_id").and_then(Value::as_str), &boot)
            .await?;
        let uuid = uuid::Uuid::new_v4().to_string();
        let project_id = ctx.project_id.clone().unwrap_or_default();
        let json_text = |k: &str| doc.get(k).filter(|v| !v.is_null()).map(dumps);
        let row = NodeGroup {
            uuid: uuid.clone(),
            name,
            cluster_id: cluster_uuid.clone(),
            project_id: project_id.clone(),
            docker_volume_size: int32(doc, "docker_volume_size")?,
            labels: Some(dumps(&Value::Object(labels))),
            flavor_id: text(doc, "flavor_id"),
            image_id: text(doc, "image_id"),
            node_count: Some(node_count),
            max_node_count,
            min_node_count: Some(min_node_count),
            role: role.map(|r| r.as_str().into()),
            is_default: doc.get("is_default").and_then(Value::as_bool),
            status: Some(ClusterStatus::CreateInProgress),
            status_reason: text(doc, "status_reason"),
            version: text(doc, "version"),
            node_labels: json_text("node_labels"),
            node_taints: json_text("node_taints"),
            ..NodeGroup::default()
        };
        doc.insert("uuid".into(), Value::String(uuid.clone()));
        doc.insert("cluster_id".into(), Value::String(cluster_uuid.clone()));
        doc.insert("project_id".into(), Value::String(project_id));
        let message = NodegroupRef {
            unsaved: None,
            cluster_uuid: cluster_uuid.clone().into(),
            nodegroup_uuid: uuid.clone().into(),
        };
        if let Some(staged) = &self.s.staged {
            // Upstream's contract: the conductor inserts the nodegroup.
            staged.stage_nodegroup(row.clone());
            if let Err(e) = self.s.conductor.nodegroup_create(ctx, message).await {
                staged.discard(&uuid);
                return Err(e);
            }
            return Ok(row);
        }
        self.insert_then_cast(ctx, c, row, message).await
    }

    /// Our contract: the nodegroup row exists before the 202; then the conductor is told.
    async fn insert_then_cast(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        row: NodeGroup,
        message: NodegroupRef,
    ) -> Result<NodeGroup> {
        let (cluster_uuid, uuid) = (message.cluster_uuid.clone(), message.nodegroup_uuid.clone());
        let stored = match self.s.lifecycle().insert_nodegroup(row).await {
            Ok(stored) => stored,
            // A concurrent create took the name: upstream names the cluster by its name.
            Err(Error::NodeGroupAlreadyExists { name, .. }) => {
                return Err(Error::NodeGroupAlreadyExists {
                    name,
                    cluster_id: c.name.clone().unwrap_or_default(),
                });
            }
            Err(e) => return Err(e),
        };
        // Sent as stored here, not read back (see the cluster create).
        if let Some(handoff) = &self.s.handoff {
            handoff.stage_nodegroup(stored.clone());
        }
        let sent = self.s.conductor.nodegroup_create(ctx, message).await;
        if let Some(handoff) = &self.s.handoff {
            handoff.discard(&uuid);
        }
        if let Err(e) = sent {
            // Unlike a cluster create, the conductor's sweep does not resume a nodegroup
            // create (it scans in-progress clusters), so the row would stay
            // CREATE_IN_PROGRESS for ever: take it back and let the caller retry.
            let ident = magnum_core::ids::Identity::Uuid(uuid.to_string());
            if let Err(undo) = self
                .s
                .lifecycle()
                .remove_nodegroup(&cluster_uuid, &ident)
                .await
            {
                tracing::error!(nodegroup = %uuid, "cannot remove an undelivered nodegroup create: {undo}");
            }
            return Err(e);
        }
        Ok(stored)
    }

    /// Check a patched nodegroup and send the change to the conductor. Returns the row as
    /// the patch leaves it (what the API answers; the conductor stores it).
    pub async fn update(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        ng: &NodeGroup,
        patch: NodegroupPatch,
    ) -> Result<NodeGroup> {
        let cluster_labels: Option<Value> = loads(c.labels.as_deref());
        let boot = self.s.boot_volume_size(cluster_labels.as_ref());
        self.s
            .checks(ctx)
            .root_disk(ng.flavor_id.as_deref(), &boot)
            .await?;
        check_nodegroup(
            Some(&ng.name),
            ng.role.as_ref().map(NodegroupRole::as_str),
            i64::from(ng.node_count.unwrap_or(1)),
            i64::from(patch.min_node_count),
            patch.max_node_count.map(i64::from),
            Some(&patch.node_labels),
            Some(&patch.node_taints),
        )?;
        ClusterOp::NodegroupUpdate.check(c.status)?;
        NodegroupOp::Update.check(ng.status)?;
        // A removed JSON attribute is sent (and shown) empty, as new rows store it: the
        // conductor reads an absent value as "unchanged".
        let json_text = |v: &Value, empty: &str| {
            Some(if v.is_null() {
                empty.to_owned()
            } else {
                dumps(v)
            })
        };
        let mut patched = ng.clone();
        patched.min_node_count = Some(patch.min_node_count);
        patched.max_node_count = patch.max_node_count;
        patched.node_labels = json_text(&patch.node_labels, "{}");
        patched.node_taints = json_text(&patch.node_taints, "[]");
        patched.labels = json_text(&patch.labels, "{}");
        let message = NodegroupUpdate {
            cluster_uuid: c.ident(),
            nodegroup_uuid: ng.ident(),
            min_node_count: patched.min_node_count,
            max_node_count: patched.max_node_count,
            node_labels: patched.node_labels.clone(),
            node_taints: patched.node_taints.clone(),
            labels: patched.labels.clone(),
        };
        self.s.conductor.nodegroup_update(ctx, message).await?;
        Ok(patched)
    }

    /// Default nodegroups stay as long as their cluster.
    pub async fn delete(&self, ctx: &RequestContext, c: &Cluster, ng: &NodeGroup) -> Result<()> {
        if ng.is_default == Some(true) {
            return Err(invalid(
                "Deleting a default nodegroup is not supported.".into(),
            ));
        }
        ClusterOp::NodegroupDelete.check(c.status)?;
        let message = NodegroupRef {
            unsaved: None,
            cluster_uuid: c.ident(),
            nodegroup_uuid: ng.ident(),
        };
        self.s.conductor.nodegroup_delete(ctx, message).await
    }
}
