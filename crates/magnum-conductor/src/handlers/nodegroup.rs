//! Nodegroup create, update and delete (conductor.md §4.6–4.8). Unlike upstream, the
//! cluster's own status is checked too, and a failed update keeps the nodegroup's old values.

use magnum_core::lifecycle::NodegroupOp;
use magnum_core::status::ClusterStatus as S;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_rpc::{NodegroupRef, NodegroupUpdate};

use super::{fail, save_cluster, save_ng, status};
use crate::notify::Action;
use crate::state::Inner;

async fn load(
    inner: &Inner,
    ctx: &RequestContext,
    cluster_uuid: &str,
    ng_uuid: &str,
) -> Result<(Cluster, NodeGroup)> {
    let (cluster, ngs) = inner.load(ctx, cluster_uuid).await?;
    Ok((cluster, super::cluster::nodegroup_of(&ngs, ng_uuid)?))
}

/// Shared by the three operations: claim the cluster (UPDATE_IN_PROGRESS), run the driver
/// call; on failure mark the nodegroup with `on_fail` (plus `revert`) and the cluster failed.
async fn run<F, R>(
    inner: &Inner,
    ctx: &RequestContext,
    op: NodegroupOp,
    cluster: &Cluster,
    ng: &NodeGroup,
    call: F,
    revert: R,
) -> Result<()>
where
    F: AsyncFnOnce(&Cluster) -> Result<()>,
    R: FnOnce(&mut NodeGroup),
{
    let uuid = cluster.uuid.clone().unwrap_or_default();
    let claimed = op.cluster_op().check(cluster.status);
    let outcome = match claimed {
        Ok(()) => match save_cluster(inner, cluster, |m| {
            m.status = status(S::UpdateInProgress);
            m.status_reason = None;
        })
        .await
        {
            Ok(c) => call(&c).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    if let Err(e) = outcome {
        let reason = e.to_string();
        let fresh = inner
            .db
            .nodegroups()
            .for_clusters(std::slice::from_ref(&uuid))
            .await
            .ok()
            .and_then(|v| v.into_iter().find(|n| n.uuid == ng.uuid));
        // A refused update or delete leaves the nodegroup as it was; a refused create must
        // not leave its new row in progress forever.
        let touch = claimed_ok(&e) || op == NodegroupOp::Create;
        if let Some(fresh) = fresh.filter(|_| touch) {
            let _ = save_ng(inner, &fresh, |m| {
                revert(m);
                m.status = Some(op.finished(false));
                m.status_reason = Some(reason.clone());
            })
            .await;
        }
        // A refusal on the cluster's state leaves the cluster as it was.
        if claimed_ok(&e) {
            fail(inner, ctx, &uuid, Action::Update, S::UpdateFailed, &reason).await;
        }
        return Err(e);
    }
    Ok(())
}

fn claimed_ok(e: &Error) -> bool {
    !matches!(e, Error::NotSupported { .. } | Error::StaleWrite { .. })
}

pub(crate) async fn create(inner: &Inner, ctx: &RequestContext, req: NodegroupRef) -> Result<()> {
    let lock = inner.lock_for(&req.cluster_uuid);
    let _held = lock.lock().await;
    // Sent unsaved by upstream's API: inserted here (the codec only decodes).
    if let Some(unsaved) = &req.unsaved {
        magnum_service::compat::adopt::insert_nodegroup(&inner.db, &req.cluster_uuid, unsaved)
            .await?;
    }
    let (cluster, ng) = load(inner, ctx, &req.cluster_uuid, &req.nodegroup_uuid).await?;
    if ng.status != Some(S::CreateInProgress) {
        return Ok(());
    }
    let call = async |c: &Cluster| {
        let driver = inner.driver_for(c).await?;
        driver
            .create_nodegroup(ctx, &super::dc(c), &super::dng(&ng))
            .await
    };
    run(inner, ctx, NodegroupOp::Create, &cluster, &ng, call, |_| {}).await
}

pub(crate) async fn update(
    inner: &Inner,
    ctx: &RequestContext,
    req: NodegroupUpdate,
) -> Result<()> {
    let lock = inner.lock_for(&req.cluster_uuid);
    let _held = lock.lock().await;
    let (cluster, ng) = load(inner, ctx, &req.cluster_uuid, &req.nodegroup_uuid).await?;
    NodegroupOp::Update.check(ng.status)?;
    let old = ng.clone();
    let patch = |m: &mut NodeGroup| {
        if req.min_node_count.is_some() {
            m.min_node_count = req.min_node_count;
        }
        m.max_node_count = req.max_node_count;
        if req.node_labels.is_some() {
            m.node_labels = req.node_labels.clone();
        }
        if req.node_taints.is_some() {
            m.node_taints = req.node_taints.clone();
        }
        if req.labels.is_some() {
            m.labels = req.labels.clone();
        }
    };
    let call = async |c: &Cluster| {
        let patched = save_ng(inner, &ng, |m| {
            patch(m);
            m.status = status(S::UpdateInProgress);
        })
        .await?;
        let driver = inner.driver_for(c).await?;
        driver
            .update_nodegroup(ctx, &super::dc(c), &super::dng(&patched))
            .await
    };
    let revert = |m: &mut NodeGroup| {
        m.min_node_count = old.min_node_count;
        m.max_node_count = old.max_node_count;
        m.node_labels = old.node_labels.clone();
        m.node_taints = old.node_taints.clone();
        m.labels = old.labels.clone();
    };
    let op = NodegroupOp::Update;
    run(inner, ctx, op, &cluster, &ng, call, revert).await
}

pub(crate) async fn delete(inner: &Inner, ctx: &RequestContext, req: NodegroupRef) -> Result<()> {
    let lock = inner.lock_for(&req.cluster_uuid);
    let _held = lock.lock().await;
    let (cluster, ng) = load(inner, ctx, &req.cluster_uuid, &req.nodegroup_uuid).await?;
    if ng.status == Some(S::DeleteInProgress) {
        return Ok(());
    }
    let call = async |c: &Cluster| {
        let deleting = save_ng(inner, &ng, |m| {
            m.status = status(S::DeleteInProgress);
            m.status_reason = None;
        })
        .await?;
        let driver = inner.driver_for(c).await?;
        driver
            .delete_nodegroup(ctx, &super::dc(c), &super::dng(&deleting))
            .await
    };
    run(inner, ctx, NodegroupOp::Delete, &cluster, &ng, call, |_| {}).await
}
