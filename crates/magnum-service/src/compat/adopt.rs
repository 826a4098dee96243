//! Rows upstream's API sends unsaved: its `cluster_create` and `nodegroup_create` carry the
//! new object, and upstream's conductor inserts it. The codec only decodes; it hands the
//! object on in the request (`unsaved`), and the conductor's handler inserts it here, through
//! the lifecycle writer, before it builds anything.

use magnum_core::{Error, Result};
use magnum_db::Database;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_rpc::oslo::objects::{CLUSTER, NODEGROUP, Object};
use serde_json::Value;

use super::rows::new_row;
use crate::clusters::default_nodegroups;
use crate::lifecycle::Lifecycle;

fn malformed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("the unsaved {what} upstream's API sent: {e}"))
}

/// Insert the cluster of a `cluster_create` and its default nodegroups (CREATE_IN_PROGRESS).
/// A redelivered message finds them inserted and changes nothing.
pub async fn insert_cluster(
    db: &Database,
    unsaved: &Value,
    master_count: i32,
    node_count: i32,
) -> Result<()> {
    let obj = Object::from_primitive_of(&CLUSTER, unsaved).map_err(|e| malformed("cluster", e))?;
    let mut row: Cluster = new_row(&obj).map_err(|e| malformed("cluster", e))?;
    let uuid = obj
        .str("uuid")
        .map(str::to_owned)
        .ok_or_else(|| malformed("cluster", "no uuid"))?;
    row.uuid = Some(uuid.clone());
    let system = magnum_core::RequestContext::admin_all_tenants();
    let template_uuid = row.cluster_template_id.clone().unwrap_or_default();
    let template = db
        .cluster_templates()
        .get_by_uuid(&system, &template_uuid)
        .await?;
    let ngs = default_nodegroups(&row, &template, master_count, node_count)?;
    match Lifecycle::new(db.clone())
        .insert_cluster(row, ngs, None)
        .await
    {
        Ok(_) => {
            tracing::info!(cluster = %uuid, "cluster_create from an upstream API: inserted the cluster and its default nodegroups");
            Ok(())
        }
        // Another conductor worker got the same message (a redelivery) first.
        Err(Error::ClusterAlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Insert the nodegroup of a `nodegroup_create` (CREATE_IN_PROGRESS) unless it exists.
pub async fn insert_nodegroup(db: &Database, cluster_uuid: &str, unsaved: &Value) -> Result<()> {
    let obj =
        Object::from_primitive_of(&NODEGROUP, unsaved).map_err(|e| malformed("nodegroup", e))?;
    let mut row: NodeGroup = new_row(&obj).map_err(|e| malformed("nodegroup", e))?;
    row.cluster_id = cluster_uuid.to_owned();
    let uuid = row.uuid.clone();
    match Lifecycle::new(db.clone()).insert_nodegroup(row).await {
        Ok(_) => {
            tracing::info!(cluster = %cluster_uuid, nodegroup = %uuid, "nodegroup_create from an upstream API: inserted the nodegroup");
            Ok(())
        }
        // A redelivery: the row is there already.
        Err(e) => {
            let system = magnum_core::RequestContext::admin_all_tenants();
            match db
                .nodegroups()
                .get_by_uuid(&system, cluster_uuid, &uuid)
                .await
            {
                Ok(_) => Ok(()),
                Err(_) => Err(e),
            }
        }
    }
}
