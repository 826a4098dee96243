//! The RPC handlers (spec/conductor.md §4). Each one re-reads the cluster, checks the state
//! machine on that fresh row and moves the status with a guarded write *before* calling the
//! driver, so two requests can never both pass the check (upstream checked the API's
//! snapshot and moved the status only after the driver returned).

pub(crate) mod ca;
pub(crate) mod cluster;
pub(crate) mod nodegroup;

use magnum_core::status::{ClusterStatus, Phase, Stage};
use magnum_core::{RequestContext, Result};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;

use crate::notify::{Action, Outcome};
use crate::state::Inner;

pub(crate) use cluster::{create as resume_create, finish_delete};

/// The cluster as drivers see it (typed, no storage types).
pub(crate) fn dc(c: &Cluster) -> magnum_core::model::Cluster {
    c.into()
}

/// A nodegroup as drivers see it.
pub(crate) fn dng(ng: &NodeGroup) -> magnum_core::model::Nodegroup {
    ng.into()
}

/// The context certificate stores see: the cluster's own project, whoever asks, so the
/// rows are found again by every later caller (and by the sweep).
pub(crate) fn cert_ctx(cluster: &Cluster) -> RequestContext {
    RequestContext::for_project(
        cluster.project_id.as_deref().unwrap_or_default(),
        cluster.user_id.as_deref().unwrap_or_default(),
    )
}

fn status(s: ClusterStatus) -> Option<ClusterStatus> {
    Some(s)
}

/// Marks the cluster failed with `reason` and sends the failure notification. Reads the row
/// again first, so a failure is recorded whatever happened to it meanwhile.
pub(crate) async fn fail(
    inner: &Inner,
    ctx: &RequestContext,
    uuid: &str,
    action: Action,
    to: ClusterStatus,
    reason: &str,
) {
    for _ in 0..3 {
        let admin = RequestContext::admin_all_tenants();
        let Ok((cluster, ngs)) = inner.load(&admin, uuid).await else {
            return;
        };
        let mut m = cluster.clone();
        m.status = status(to);
        m.status_reason = Some(reason.to_owned());
        match inner.lifecycle().save_cluster(&cluster, &m).await {
            Ok(saved) => {
                inner
                    .notify(ctx, action, Outcome::Failure, &saved, &ngs)
                    .await;
                inner.wake(uuid);
                return;
            }
            Err(magnum_core::Error::StaleWrite { .. }) => continue,
            Err(e) => {
                tracing::error!(cluster = uuid, error = %e, "cannot record the failure");
                return;
            }
        }
    }
}

/// Saves `f` applied to `ng`, returning the stored row.
pub(crate) async fn save_ng(
    inner: &Inner,
    ng: &NodeGroup,
    f: impl FnOnce(&mut NodeGroup),
) -> Result<NodeGroup> {
    inner.lifecycle().change_nodegroup(ng, f).await
}

/// Saves `f` applied to `cluster`, returning the stored row.
pub(crate) async fn save_cluster(
    inner: &Inner,
    cluster: &Cluster,
    f: impl FnOnce(&mut Cluster),
) -> Result<Cluster> {
    inner.lifecycle().change_cluster(cluster, f).await
}

/// The action a final status reports (upstream's map, minus its crash on statuses outside it).
pub(crate) fn action_of(status: ClusterStatus) -> Option<(Action, Outcome)> {
    let outcome = match status.stage() {
        Stage::Complete => Outcome::Success,
        Stage::Failed => Outcome::Failure,
        Stage::InProgress => return None,
    };
    let action = match status.phase() {
        Phase::Create => Action::Create,
        Phase::Delete => Action::Delete,
        Phase::Update | Phase::Rollback => Action::Update,
        _ => return None,
    };
    Some((action, outcome))
}
