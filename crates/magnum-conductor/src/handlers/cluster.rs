//! Cluster create, update, resize, upgrade and delete (conductor.md §4.1–4.5).

use magnum_core::lifecycle::ClusterOp;
use magnum_core::model::NodegroupRole;
use magnum_core::status::ClusterStatus as S;
use magnum_core::{Error, ErrorKind, RequestContext, Result};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_rpc::{ClusterCreate, ClusterResize, ClusterUpdate, ClusterUpgrade};

use super::{cert_ctx, fail, save_cluster, save_ng, status};
use crate::notify::{Action, Outcome};
use crate::state::Inner;
use magnum_certs::{ClusterCertRefs, ClusterPki};

fn default_worker(ngs: &[NodeGroup]) -> Option<&NodeGroup> {
    ngs.iter().find(|ng| {
        ng.is_default == Some(true) && !ng.role.as_ref().is_some_and(NodegroupRole::is_master)
    })
}

/// The cluster's nodegroup with this uuid.
pub(crate) fn nodegroup_of(ngs: &[NodeGroup], uuid: &str) -> Result<NodeGroup> {
    ngs.iter()
        .find(|ng| ng.uuid == uuid)
        .cloned()
        .ok_or_else(|| Error::NodeGroupNotFound {
            nodegroup: uuid.to_owned(),
        })
}

fn has_all_certs(c: &Cluster) -> bool {
    c.ca_cert_ref.is_some()
        && c.magnum_cert_ref.is_some()
        && c.etcd_ca_cert_ref.is_some()
        && c.front_proxy_ca_cert_ref.is_some()
}

/// Refuses `op` unless the cluster's current status allows it; a refused cluster operation
/// is reported as a failed update, as upstream does.
async fn check(
    inner: &Inner,
    ctx: &RequestContext,
    op: ClusterOp,
    cluster: &Cluster,
    ngs: &[NodeGroup],
) -> Result<()> {
    if let Err(e) = op.check(cluster.status) {
        inner
            .notify(ctx, Action::Update, Outcome::Failure, cluster, ngs)
            .await;
        return Err(e);
    }
    Ok(())
}

/// A `cluster_create`. Upstream's API sends the cluster unsaved: it is inserted first, as
/// upstream's conductor does (the codec only decodes).
pub(crate) async fn create_requested(
    inner: &Inner,
    ctx: &RequestContext,
    req: &ClusterCreate,
) -> Result<()> {
    if let Some(unsaved) = &req.unsaved {
        magnum_service::compat::adopt::insert_cluster(
            &inner.db,
            unsaved,
            req.master_count,
            req.node_count,
        )
        .await?;
    }
    create(inner, ctx, &req.cluster_uuid).await
}

/// The cluster row and its default nodegroups exist (CREATE_IN_PROGRESS): make the
/// certificates and hand the cluster to its driver. Also how the sweep resumes a create a
/// crash interrupted, so every step is skipped when already done.
pub(crate) async fn create(inner: &Inner, ctx: &RequestContext, uuid: &str) -> Result<()> {
    let lock = inner.lock_for(uuid);
    let _held = lock.lock().await;
    let (cluster, ngs) = inner.load(ctx, uuid).await?;
    if cluster.status != Some(S::CreateInProgress) || cluster.stack_id.is_some() {
        return Ok(());
    }
    match drive_create(inner, ctx, cluster, &ngs).await {
        Ok(()) => Ok(()),
        // Another conductor moved this create on meanwhile (both resumed it): it is theirs.
        Err(Error::StaleWrite { .. }) => Ok(()),
        // A service the create needs (Barbican, the database) is away: the create waits and
        // the sweep resumes it, within create_timeout, instead of failing a create the user
        // was told was accepted. Its reason says what it waits for.
        Err(e) if e.kind() == ErrorKind::Unavailable => {
            tracing::warn!(cluster = %uuid, "cluster create waits: {e}");
            if let Ok((waiting, _)) = inner.load(ctx, uuid).await {
                let reason = format!("Waiting for a service to return: {e}");
                let _ = save_cluster(inner, &waiting, |m| m.status_reason = Some(reason)).await;
            }
            Err(e)
        }
        Err(e) => {
            fail(
                inner,
                ctx,
                uuid,
                Action::Create,
                S::CreateFailed,
                &e.to_string(),
            )
            .await;
            Err(e)
        }
    }
}

async fn drive_create(
    inner: &Inner,
    ctx: &RequestContext,
    mut cluster: Cluster,
    ngs: &[NodeGroup],
) -> Result<()> {
    if !has_all_certs(&cluster) {
        let certs_ctx = cert_ctx(&cluster);
        // What an earlier attempt could not remove (its store was away) goes first.
        let earlier = ClusterCertRefs::from_cluster(&cluster);
        if earlier != ClusterCertRefs::default() {
            inner.pki.delete_all(&certs_ctx, &earlier).await?;
            cluster =
                save_cluster(inner, &cluster, |m| ClusterCertRefs::default().apply_to(m)).await?;
        }
        let refs = match inner
            .pki
            .generate_or_partial(&certs_ctx, &ClusterPki::issuer_name(&cluster))
            .await
        {
            Ok(refs) => refs,
            Err(partial) => {
                // Kept on the row, so the next attempt or the delete removes them.
                if partial.left != ClusterCertRefs::default() {
                    let _ = save_cluster(inner, &cluster, |m| partial.left.apply_to(m)).await;
                }
                return Err(partial.error);
            }
        };
        match save_cluster(inner, &cluster, |m| refs.apply_to(m)).await {
            Ok(saved) => cluster = saved,
            Err(e) => {
                // Never leave stored certificates nobody references.
                inner.pki.delete(&certs_ctx, &refs).await;
                return Err(e);
            }
        }
    }
    inner
        .notify(ctx, Action::Create, Outcome::Pending, &cluster, ngs)
        .await;
    let driver = inner.driver_for(&cluster).await?;
    let changes = driver
        .create_cluster(
            ctx,
            &super::dc(&cluster),
            &magnum_db::model::nodegroups(ngs),
            cluster.create_timeout,
        )
        .await?;
    let cluster = save_cluster(inner, &cluster, |m| {
        if changes.stack_id.is_some() {
            m.stack_id = changes.stack_id.clone();
        }
    })
    .await?;
    for ng in ngs {
        save_ng(inner, ng, |m| m.stack_id = cluster.stack_id.clone()).await?;
    }
    Ok(())
}

pub(crate) async fn update(inner: &Inner, ctx: &RequestContext, req: ClusterUpdate) -> Result<()> {
    let uuid = req.cluster_uuid.as_str();
    let lock = inner.lock_for(uuid);
    let _held = lock.lock().await;
    let (cluster, ngs) = inner.load(ctx, uuid).await?;
    check(inner, ctx, ClusterOp::Update, &cluster, &ngs).await?;
    let worker = default_worker(&ngs)
        .cloned()
        .ok_or_else(|| Error::NodeGroupNotFound {
            nodegroup: "default-worker".into(),
        })?;
    let reason_text = req
        .health_status_reason
        .as_ref()
        .map(magnum_db::json::dumps);
    let health_changed = req.health_status != cluster.health_status
        || (reason_text.is_some() && reason_text != cluster.health_status_reason);
    let count_changed = worker.node_count != Some(req.node_count);
    if !count_changed && !health_changed {
        return Ok(());
    }
    let health = |m: &mut Cluster| {
        if health_changed {
            m.health_status = req.health_status;
            if reason_text.is_some() {
                m.health_status_reason = reason_text.clone();
            }
        }
    };
    if !count_changed {
        save_cluster(inner, &cluster, health).await?;
        return Ok(());
    }
    inner
        .notify(ctx, Action::Update, Outcome::Pending, &cluster, &ngs)
        .await;
    let updated = save_cluster(inner, &cluster, |m| {
        health(m);
        m.status = status(S::UpdateInProgress);
        m.status_reason = None;
    })
    .await?;
    let old_count = worker.node_count;
    let resized = save_ng(inner, &worker, |m| m.node_count = Some(req.node_count)).await?;
    let ngs_now: Vec<NodeGroup> = ngs
        .iter()
        .map(|ng| {
            if ng.uuid == resized.uuid {
                resized.clone()
            } else {
                ng.clone()
            }
        })
        .collect();
    let outcome = match inner.driver_for(&updated).await {
        Ok(driver) => {
            driver
                .update_cluster(
                    ctx,
                    &super::dc(&updated),
                    &magnum_db::model::nodegroups(&ngs_now),
                    req.rollback,
                )
                .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = outcome {
        let _ = save_ng(inner, &resized, |m| m.node_count = old_count).await;
        fail(
            inner,
            ctx,
            uuid,
            Action::Update,
            S::UpdateFailed,
            &e.to_string(),
        )
        .await;
        return Err(e);
    }
    Ok(())
}

pub(crate) async fn resize(inner: &Inner, ctx: &RequestContext, req: ClusterResize) -> Result<()> {
    let uuid = req.cluster_uuid.as_str();
    let lock = inner.lock_for(uuid);
    let _held = lock.lock().await;
    let (cluster, ngs) = inner.load(ctx, uuid).await?;
    check(inner, ctx, ClusterOp::Resize, &cluster, &ngs).await?;
    let ng = nodegroup_of(&ngs, &req.nodegroup_uuid)?;
    let old_count = ng.node_count;
    let resized = save_ng(inner, &ng, |m| {
        m.node_count = Some(req.node_count);
        m.status = status(S::UpdateInProgress);
    })
    .await?;
    let updated = save_cluster(inner, &cluster, |m| {
        m.status = status(S::UpdateInProgress);
        m.status_reason = None;
    })
    .await;
    if let Err(e @ magnum_core::Error::StaleWrite { .. }) = updated {
        // Another writer (a delete on another conductor, say) changed the cluster since it
        // was read: take the nodegroup back and let the cast run again on what is there now,
        // instead of marking the cluster failed over that writer's state.
        let _ = save_ng(inner, &resized, |m| {
            m.node_count = old_count;
            m.status = ng.status;
            m.status_reason = ng.status_reason.clone();
        })
        .await;
        return Err(e);
    }
    inner
        .notify(ctx, Action::Update, Outcome::Pending, &cluster, &ngs)
        .await;
    let outcome = match updated {
        Ok(updated) => match inner.driver_for(&updated).await {
            Ok(driver) => {
                driver
                    .resize_cluster(
                        ctx,
                        &super::dc(&updated),
                        &super::dng(&resized),
                        req.node_count,
                        &req.nodes_to_remove,
                    )
                    .await
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    if let Err(e) = outcome {
        let reason = e.to_string();
        let _ = save_ng(inner, &resized, |m| {
            m.node_count = old_count;
            m.status = status(S::UpdateFailed);
            m.status_reason = Some(reason.clone());
        })
        .await;
        fail(inner, ctx, uuid, Action::Update, S::UpdateFailed, &reason).await;
        return Err(e);
    }
    Ok(())
}

pub(crate) async fn upgrade(
    inner: &Inner,
    ctx: &RequestContext,
    req: ClusterUpgrade,
) -> Result<()> {
    let uuid = req.cluster_uuid.as_str();
    let lock = inner.lock_for(uuid);
    let _held = lock.lock().await;
    let (cluster, ngs) = inner.load(ctx, uuid).await?;
    check(inner, ctx, ClusterOp::Upgrade, &cluster, &ngs).await?;
    let ng = nodegroup_of(&ngs, &req.nodegroup_uuid)?;
    let template = inner
        .db
        .cluster_templates()
        .for_uuids(&[req.cluster_template_uuid.to_string()])
        .await?
        .pop()
        .ok_or_else(|| Error::ClusterTemplateNotFound {
            template: req.cluster_template_uuid.to_string(),
        })?;
    // The driver of the cluster's current template carries out the upgrade.
    let driver = inner.driver_for(&cluster).await?;
    inner
        .notify(ctx, Action::Update, Outcome::Pending, &cluster, &ngs)
        .await;
    // Claim the cluster first, so a second request is refused while the driver works.
    let previous = cluster.status;
    let previous_reason = cluster.status_reason.clone();
    let claimed = save_cluster(inner, &cluster, |m| {
        m.status = status(S::UpdateInProgress);
        m.status_reason = None;
    })
    .await?;
    match driver
        .upgrade_cluster(
            ctx,
            &super::dc(&claimed),
            &(&template).into(),
            req.max_batch_size,
            &super::dng(&ng),
        )
        .await
    {
        Ok(changes) => {
            save_ng(inner, &ng, |m| m.status = status(S::UpdateInProgress)).await?;
            save_cluster(inner, &claimed, |m| {
                if let Some(t) = &changes.cluster_template_id {
                    m.cluster_template_id = Some(t.clone());
                }
                if let Some(l) = &changes.labels {
                    m.labels = Some(magnum_db::json::dumps(l));
                }
            })
            .await?;
            Ok(())
        }
        // A refusal (not supported, or a validation such as a skipped minor version) is
        // made before anything changed: the cluster gets its status and reason back, so an
        // UPDATE_FAILED cluster can be retried and a COMPLETE one stays usable.
        Err(e @ (Error::NotSupported { .. } | Error::InvalidParameterValue { .. })) => {
            let restored = save_cluster(inner, &claimed, |m| {
                m.status = previous;
                m.status_reason = previous_reason;
            })
            .await;
            let shown = restored.as_ref().unwrap_or(&cluster);
            inner
                .notify(ctx, Action::Update, Outcome::Failure, shown, &ngs)
                .await;
            Err(e)
        }
        Err(e) => {
            let reason = e.to_string();
            let _ = save_ng(inner, &ng, |m| {
                m.status = status(S::UpdateFailed);
                m.status_reason = Some(reason.clone());
            })
            .await;
            fail(inner, ctx, uuid, Action::Update, S::UpdateFailed, &reason).await;
            Err(e)
        }
    }
}

pub(crate) async fn delete(inner: &Inner, ctx: &RequestContext, uuid: &str) -> Result<()> {
    let lock = inner.lock_for(uuid);
    let _held = lock.lock().await;
    let (cluster, ngs) = inner.load(ctx, uuid).await?;
    // Deleting again while a delete runs changes nothing (upstream re-ran the driver).
    if cluster.status == Some(S::DeleteInProgress) {
        return Ok(());
    }
    inner
        .notify(ctx, Action::Delete, Outcome::Pending, &cluster, &ngs)
        .await;
    let deleting = save_cluster(inner, &cluster, |m| {
        m.status = status(S::DeleteInProgress);
        m.status_reason = None;
    })
    .await?;
    if deleting.stack_id.is_none() {
        // The driver never built anything: nothing to wait for.
        finish_delete(inner, &deleting, &ngs).await?;
        return Ok(());
    }
    let outcome = match inner.driver_for(&deleting).await {
        Ok(driver) => driver.delete_cluster(ctx, &super::dc(&deleting)).await,
        Err(e) => Err(e),
    };
    if let Err(e) = outcome {
        fail(
            inner,
            ctx,
            uuid,
            Action::Delete,
            S::DeleteFailed,
            &e.to_string(),
        )
        .await;
        return Err(e);
    }
    Ok(())
}

/// The driver reports the cluster gone: remove its rows (one transaction) and all four of its
/// certificates, and say so. Only a cluster still DELETE_IN_PROGRESS is removed.
pub(crate) async fn finish_delete(
    inner: &Inner,
    cluster: &Cluster,
    ngs: &[NodeGroup],
) -> Result<()> {
    let uuid = cluster.uuid.clone().unwrap_or_default();
    // A status text no release writes reads as None: such a row is never removed here.
    let Some(expected) = cluster.status else {
        return Ok(());
    };
    // The certificates first: with their store away the cluster stays DELETE_IN_PROGRESS,
    // saying why, and the sweep finishes the delete once the store is back (removing the rows
    // first left the certificates behind for good).
    let refs = ClusterCertRefs::from_cluster(cluster);
    if let Err(e) = inner.pki.delete_all(&cert_ctx(cluster), &refs).await {
        let reason = format!("Waiting for a service to return: {e}");
        let _ = save_cluster(inner, cluster, |m| m.status_reason = Some(reason)).await;
        return Err(e);
    }
    if !inner
        .lifecycle()
        .remove_deleted_cluster(&uuid, expected)
        .await?
    {
        return Ok(());
    }
    let mut gone = cluster.clone();
    gone.status = status(S::DeleteComplete);
    let admin = RequestContext::admin_all_tenants();
    inner
        .notify(&admin, Action::Delete, Outcome::Success, &gone, ngs)
        .await;
    if let (Some(os), Some(user)) = (inner.credentials.get(), cluster.user_id.as_deref())
        && let Err(e) = magnum_openstack::credentials::revoke(os, user, &uuid).await
    {
        tracing::warn!(cluster = %uuid, "the cluster's OpenStack credential was not removed: {e}");
    }
    Ok(())
}
