//! The CADF event upstream puts in the payload of every cluster notification
//! (spec/notifications.md §2; upstream `conductor/utils.py` with pycadf).

use chrono::{DateTime, NaiveDateTime, Utc};
use magnum_core::RequestContext;
use magnum_core::model::NodegroupRole;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{Action, Outcome};

const EVENT_TYPE_URI: &str = "http://schemas.dmtf.org/cloud/audit/1.0/event";
const CLUSTER_TYPE_URI: &str = "service/magnum/cluster";
const USER_TYPE_URI: &str = "service/security/account/user";

/// pycadf's `AUDIT_NS`: the first 128 bits of SHA-256 of `[audit] namespace`, or none when
/// the namespace is empty.
pub(crate) fn audit_namespace_uuid(namespace: &str) -> Option<Uuid> {
    if namespace.is_empty() {
        return None;
    }
    let digest = Sha256::digest(namespace.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Some(Uuid::from_bytes(bytes))
}

/// pycadf's `generate_uuid()`: UUIDv5 of a random UUIDv4's text under the audit namespace,
/// or the plain UUIDv4 without one.
fn cadf_id(ns: Option<Uuid>, seed: Uuid) -> String {
    match ns {
        Some(ns) => Uuid::new_v5(&ns, seed.to_string().as_bytes()).to_string(),
        None => seed.to_string(),
    }
}

/// pycadf's timestamp: UTC with microseconds and a `+0000` offset.
pub(crate) fn event_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f+0000").to_string()
}

/// oslo.versionedobjects' datetime in `as_dict`, as the fixture shows: no zone.
fn object_time(t: Option<NaiveDateTime>) -> Value {
    t.map_or(Value::Null, |t| {
        Value::String(t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string())
    })
}

fn opt_str(v: &Option<String>) -> Value {
    v.as_ref().map_or(Value::Null, |s| Value::String(s.clone()))
}

fn opt_int(v: Option<i32>) -> Value {
    v.map_or(Value::Null, Value::from)
}

/// The `labels` JSON text column as an object (null stays null).
fn labels(text: &Option<String>) -> Value {
    text.as_deref()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .unwrap_or(Value::Null)
}

/// The addresses of one nodegroup: its `node_addresses` column is the JSON text of a list.
fn addresses(ng: &NodeGroup) -> Vec<Value> {
    match ng
        .node_addresses
        .as_deref()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
    {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

fn is_master(ng: &NodeGroup) -> bool {
    ng.role.as_ref().is_some_and(NodegroupRole::is_master)
}

/// The CADF event of a cluster operation, as upstream emits it.
///
/// Key names and order follow upstream exactly, including the `"docker_volume_size:"` key
/// (a typo upstream that consumers now depend on). Counts and addresses come from
/// `nodegroups` (the cluster's), passed by the caller: upstream ran four queries per event.
pub fn cadf_event(
    ctx: &RequestContext,
    action: Action,
    outcome: Outcome,
    cluster: &Cluster,
    nodegroups: &[NodeGroup],
    audit_namespace: &str,
) -> Value {
    cadf_event_in(
        ctx,
        action,
        outcome,
        cluster,
        nodegroups,
        audit_namespace_uuid(audit_namespace),
        Utc::now(),
    )
}

pub(crate) fn cadf_event_in(
    ctx: &RequestContext,
    action: Action,
    outcome: Outcome,
    cluster: &Cluster,
    nodegroups: &[NodeGroup],
    ns: Option<Uuid>,
    now: DateTime<Utc>,
) -> Value {
    let new_id = || cadf_id(ns, Uuid::new_v4());

    let mut initiator = Map::new();
    initiator.insert("id".into(), Value::String(new_id()));
    initiator.insert("typeURI".into(), USER_TYPE_URI.into());
    for (key, value) in [
        ("user_id", &ctx.user_id),
        ("project_id", &ctx.project_id),
        ("domain_id", &ctx.domain_id),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            initiator.insert(key.into(), v.into());
        }
    }

    let (masters, workers): (Vec<&NodeGroup>, Vec<&NodeGroup>) =
        nodegroups.iter().partition(|ng| is_master(ng));
    let count = |ngs: &[&NodeGroup]| -> i64 {
        ngs.iter()
            .map(|ng| i64::from(magnum_core::model::object_node_count(ng.node_count)))
            .sum()
    };
    let addrs = |ngs: &[&NodeGroup]| -> Value {
        Value::Array(ngs.iter().flat_map(|ng| addresses(ng)).collect())
    };

    let content = json!({
        "status": cluster.status.map_or(Value::Null, Value::from),
        "status_reason": opt_str(&cluster.status_reason),
        "project_id": opt_str(&cluster.project_id),
        "created_at": object_time(cluster.created_at),
        "updated_at": object_time(cluster.updated_at),
        "cluster_template_id": opt_str(&cluster.cluster_template_id),
        "keypair": opt_str(&cluster.keypair),
        "docker_volume_size:": opt_int(cluster.docker_volume_size),
        "labels": labels(&cluster.labels),
        "master_flavor_id": opt_str(&cluster.master_flavor_id),
        "flavor_id": opt_str(&cluster.flavor_id),
        "stack_id": opt_str(&cluster.stack_id),
        "health_status": cluster.health_status.map_or(Value::Null, Value::from),
        "create_timeout": opt_int(cluster.create_timeout),
        "api_address": opt_str(&cluster.api_address),
        "discovery_url": opt_str(&cluster.discovery_url),
        "node_addresses": addrs(&workers),
        "master_addresses": addrs(&masters),
        "node_count": count(&workers),
        "master_count": count(&masters),
    });

    let mut target = Map::new();
    target.insert(
        "id".into(),
        cluster
            .uuid
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(new_id)
            .into(),
    );
    target.insert("typeURI".into(), CLUSTER_TYPE_URI.into());
    if let Some(name) = &cluster.name {
        target.insert("name".into(), name.clone().into());
    }
    target.insert(
        "attachments".into(),
        json!([{
            "typeURI": CLUSTER_TYPE_URI,
            "content": content,
            "name": "cluster_data",
        }]),
    );

    json!({
        "typeURI": EVENT_TYPE_URI,
        "eventType": "activity",
        "id": new_id(),
        "eventTime": event_time(now),
        "action": action.as_str(),
        "outcome": outcome.as_str(),
        "observer": {"id": new_id(), "typeURI": CLUSTER_TYPE_URI},
        "initiator": initiator,
        "target": target,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn ids_match_pycadf() {
        let seed = Uuid::parse_str("a4107d71-de4b-4c1e-8e1c-1f5d6a3b9c2e").unwrap();
        // Python: uuid.UUID(hashlib.sha256(b"openstack").hexdigest()[0:32])
        let ns = audit_namespace_uuid("openstack").unwrap();
        assert_eq!(ns.to_string(), "d460a96a-a6b4-9db0-52ef-9f1aac13d33e");
        assert_eq!(
            cadf_id(Some(ns), seed),
            "40b2c034-9ed6-5a86-9320-b95aaba53cb9"
        );
        let ns = audit_namespace_uuid("my-cloud").unwrap();
        assert_eq!(
            cadf_id(Some(ns), seed),
            "6790f564-bd5d-5f7e-b019-b3fe62557983"
        );
        assert_eq!(audit_namespace_uuid(""), None);
        assert_eq!(cadf_id(None, seed), seed.to_string());
    }
}
