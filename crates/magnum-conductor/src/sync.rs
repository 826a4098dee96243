//! Status sync: drivers report changes as they happen (the waker), and a sweep every
//! `[conductor] sync_interval` is the safety net. The sweep reads the live conductors, the
//! in-progress clusters' uuids and their templates, then streams the rows and nodegroups of
//! the clusters this conductor owns (partition.rs): four statements whatever their number.
//! It resumes creates a crash interrupted, and enforces `create_timeout` (upstream never did).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use magnum_core::status::ClusterStatus as S;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;
use tokio::sync::{Semaphore, mpsc};

use crate::handlers::{action_of, fail, finish_delete, resume_create, save_ng};
use crate::notify::Action;
use crate::partition::{Members, ownership_window};
use crate::state::{BINARY, Inner};
use crate::worker::{WorkerContext, WorkerError};
use magnum_driver::{Driver, StatusReport};

/// Bound on concurrent driver polls, so a slow backend cannot pile up work.
const MAX_CONCURRENT: usize = 16;
/// Longest a driver may take to answer one poll.
const POLL_TIMEOUT: Duration = Duration::from_secs(30);
/// A create younger than this may still have its cast on the way; do not resume it yet.
const RESUME_GRACE_SECS: i64 = 30;

/// The sync loop, until `ctx` asks it to stop. A stop is seen between passes, so a sweep
/// in hand finishes; per-cluster tasks still running may finish or be dropped at shutdown,
/// and each of their writes is a guarded one, never half-done.
pub(crate) async fn run(
    c: Arc<Inner>,
    wakes: mpsc::UnboundedReceiver<String>,
    ctx: WorkerContext,
) -> std::result::Result<(), WorkerError> {
    let permits = Arc::new(Semaphore::new(MAX_CONCURRENT));
    // Wake-ups are served beside the sweep, not after it: a sweep over thousands of clusters
    // takes a while, and a status change should not wait for it.
    let woken = tokio::spawn(serve_wakes(c.clone(), wakes, permits.clone()));
    let _stop_wakes = AbortOnDrop(woken);
    let mut tick = tokio::time::interval(c.settings.sync_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut members: Option<Members> = None;
    loop {
        tokio::select! {
            () = ctx.stopped() => return Ok(()),
            _ = tick.tick() => {
                if c.settings.periodic_enable {
                    match sweep(&c, &permits).await {
                        Ok(now) => {
                            if members.as_ref() != Some(&now) {
                                tracing::info!("status sweep shared by {} conductor(s)", now.len());
                            }
                            members = Some(now);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "status sweep failed");
                            ctx.error(format!("status sweep failed: {e}"));
                        }
                    }
                }
                // Through the first sweep: what a previous run left is resumed or timed out.
                ctx.running();
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Syncs each cluster a driver woke. Wake-ups of a cluster whose sync is still waiting to
/// start are merged into it (it reads the row and the driver's view when it starts): a
/// burst of watch events on one cluster costs one sync, not one per event.
async fn serve_wakes(
    c: Arc<Inner>,
    mut wakes: mpsc::UnboundedReceiver<String>,
    permits: Arc<Semaphore>,
) {
    let waiting: Arc<std::sync::Mutex<std::collections::HashSet<String>>> = Arc::default();
    while let Some(uuid) = wakes.recv().await {
        let queued = waiting.lock().map_or(true, |mut w| w.insert(uuid.clone()));
        if !queued {
            continue;
        }
        let (c, permits, waiting) = (c.clone(), permits.clone(), waiting.clone());
        tokio::spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            // Started: a wake-up from now on may carry news this sync does not see.
            if let Ok(mut w) = waiting.lock() {
                w.remove(&uuid);
            }
            // A report dropped as stale (another sync wrote first) is made again from the
            // row as it is now, not left to the next sweep.
            for _ in 0..3 {
                match sync_one(&c, &uuid).await {
                    Err(Error::StaleWrite { .. }) => continue,
                    Err(e) => {
                        tracing::debug!(cluster = %uuid, error = %e, "status sync skipped");
                    }
                    Ok(()) => {}
                }
                break;
            }
        });
    }
}

/// The conductors sharing the sweep now (one read of `magnum_service`).
pub(crate) async fn members(inner: &Inner) -> Result<Members> {
    let rows = inner.db.magnum_services().of_binary(BINARY).await?;
    let s = &inner.settings;
    let window = ownership_window(s.service_down_time, s.sync_interval, s.report_interval);
    let now = chrono::Utc::now().naive_utc();
    let mut members = Members::from_rows(&rows, &s.host, now, window);
    if let Some(peers) = inner.peers.get() {
        let mut foreign = Vec::new();
        for host in members.others() {
            // Unknown (broker away, never asked): kept, as without a probe.
            if peers.is_peer(host).await == Some(false) {
                foreign.push(host.to_owned());
            }
        }
        if !foreign.is_empty() {
            tracing::debug!(?foreign, "live conductors that are not ours take no share");
            members.exclude(&foreign);
        }
    }
    Ok(members)
}

/// One pass over the in-progress clusters this conductor owns: the uuids (ownership is
/// decided on them alone), the templates in use, then the owned rows with their nodegroups
/// in one streamed statement, each cluster polled in a task of its own as it arrives. A task
/// is spawned only once it has a permit and is reaped when done, so what a sweep holds is
/// the stream's read-ahead and `MAX_CONCURRENT` tasks, and what it sends is four statements,
/// whatever the number of clusters. Returns who shared the pass.
pub(crate) async fn sweep(c: &Arc<Inner>, permits: &Arc<Semaphore>) -> Result<Members> {
    use tokio::task::JoinSet;
    let inner = c.as_ref();
    let members = members(inner).await?;
    let mut owned = inner
        .db
        .clusters()
        .uuids_with_status(&S::IN_PROGRESS)
        .await?;
    let in_progress = owned.len();
    owned.retain(|u| members.owns(u));
    tracing::debug!(
        owned = owned.len(),
        in_progress,
        conductors = members.len(),
        "status sweep"
    );
    if owned.is_empty() {
        return Ok(members);
    }
    let templates = templates_in(inner, &S::IN_PROGRESS).await?;
    let clusters = inner.db.clusters();
    let (read, mut arriving) = clusters.stream_among(&S::IN_PROGRESS, &owned, true);
    drop(owned);
    let alone = members.len() <= 1;
    let dispatch = async {
        let mut tasks = JoinSet::new();
        while let Some((cluster, ngs)) = arriving.recv().await {
            let uuid = cluster.uuid.clone().unwrap_or_default();
            let template = cluster.cluster_template_id.clone().unwrap_or_default();
            let driver = templates
                .get(&template)
                .ok_or(Error::ClusterTemplateNotFound { template })
                .and_then(|t| inner.drivers.for_template(&t.into()));
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            while tasks.try_join_next().is_some() {}
            tracing::debug!(cluster = %uuid, "status sweep: polling");
            let c = c.clone();
            tasks.spawn(async move {
                let _permit = permit;
                if let Err(e) = process(&c, cluster, ngs, driver, alone).await {
                    tracing::debug!(cluster = %uuid, error = %e, "status sync skipped");
                }
            });
        }
        // Closed before the reader ends (no permits: shutting down): it drains what is left.
        drop(arriving);
        while tasks.join_next().await.is_some() {}
    };
    let (read, ()) = tokio::join!(read, dispatch);
    read?;
    Ok(members)
}

/// The templates of the clusters in `statuses`, keyed by uuid (one query: they are few and
/// shared).
pub(crate) async fn templates_in(
    inner: &Inner,
    statuses: &[S],
) -> Result<HashMap<String, magnum_db::repo::cluster_template::ClusterTemplate>> {
    let all = inner
        .db
        .cluster_templates()
        .of_clusters_in(statuses)
        .await?;
    Ok(all
        .into_iter()
        .filter_map(|t| t.uuid.clone().map(|u| (u, t)))
        .collect())
}

/// Targeted sync of one cluster, when its driver says something changed.
pub(crate) async fn sync_one(inner: &Inner, uuid: &str) -> Result<()> {
    let admin = RequestContext::admin_all_tenants();
    let (cluster, ngs) = inner.load(&admin, uuid).await?;
    let status = cluster.status;
    if status.is_some_and(S::is_in_progress) {
        let driver = inner.driver_for(&cluster).await;
        return process(inner, cluster, ngs, driver, false).await;
    }
    if status.is_some_and(|s| RECOVERABLE.contains(&s)) {
        return recover(inner, cluster, ngs).await;
    }
    if status.is_some_and(S::is_stable) {
        return follow_scaling(inner, &cluster, &ngs).await;
    }
    Ok(())
}

/// A cluster at rest whose backend scaled a nodegroup by itself (an autoscaler): its
/// `node_count` follows, so `openstack coe nodegroup show` tells the truth.
async fn follow_scaling(inner: &Inner, cluster: &Cluster, ngs: &[NodeGroup]) -> Result<()> {
    let driver = inner.driver_for(cluster).await?;
    let seen = magnum_db::model::nodegroups(ngs);
    let counts = match tokio::time::timeout(
        POLL_TIMEOUT,
        driver.scaled_node_counts(&crate::handlers::dc(cluster), &seen),
    )
    .await
    {
        Ok(Ok(counts)) => counts,
        Ok(Err(e)) => {
            tracing::warn!(cluster = ?cluster.uuid, error = %e, "cannot read the backend's node counts");
            return Ok(());
        }
        Err(_) => return Ok(()),
    };
    tracing::debug!(cluster = ?cluster.uuid, ?counts, "node counts the backend chose");
    for (uuid, count) in counts {
        let Some(ng) = ngs.iter().find(|ng| ng.uuid == uuid) else {
            continue;
        };
        // A nodegroup being changed meanwhile is left to that operation.
        if !ng.status.is_some_and(S::is_stable) {
            continue;
        }
        inner
            .lifecycle()
            .change_nodegroup(ng, |m| m.node_count = Some(count))
            .await?;
        tracing::info!(cluster = ?cluster.uuid, nodegroup = %uuid, node_count = count, "the backend scaled a nodegroup; node_count follows");
    }
    Ok(())
}

/// Failures the backend may still get over: a create past its timeout, an update that
/// failed on the way. When the driver wakes the sync for one and its objects have since
/// converged, the cluster becomes complete again (Cluster API keeps reconciling after
/// Magnum gave up; upstream left such clusters failed for good).
const RECOVERABLE: [S; 2] = [S::CreateFailed, S::UpdateFailed];

async fn recover(inner: &Inner, cluster: Cluster, ngs: Vec<NodeGroup>) -> Result<()> {
    let driver = inner.driver_for(&cluster).await?;
    let uuid = cluster.uuid.clone().unwrap_or_default();
    let lock = inner.lock_for(&uuid);
    let _held = lock.lock().await;
    let (seen, seen_ngs) = (
        crate::handlers::dc(&cluster),
        magnum_db::model::nodegroups(&ngs),
    );
    let report =
        match tokio::time::timeout(POLL_TIMEOUT, driver.poll_status(&seen, &seen_ngs)).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        };
    let complete = matches!(report.status, Some(S::CreateComplete | S::UpdateComplete));
    if !complete {
        return Ok(());
    }
    tracing::info!(cluster = %uuid, "the backend converged after the failure: cluster recovered");
    apply(inner, cluster, ngs, report).await
}

fn timed_out(cluster: &Cluster, now: chrono::NaiveDateTime) -> Option<i32> {
    let minutes = cluster.create_timeout.filter(|m| *m > 0)?;
    let created = cluster.created_at?;
    (now > created + chrono::Duration::minutes(i64::from(minutes))).then_some(minutes)
}

/// `alone`: this conductor saw no other alive in the sweep that read the cluster.
async fn process(
    inner: &Inner,
    cluster: Cluster,
    ngs: Vec<NodeGroup>,
    driver: Result<Arc<dyn Driver>>,
    alone: bool,
) -> Result<()> {
    let uuid = cluster.uuid.clone().unwrap_or_default();
    let now = magnum_db::repo::now();
    let creating = cluster.status == Some(S::CreateInProgress);
    if creating && let Some(minutes) = timed_out(&cluster, now) {
        let reason = format!(
            "Cluster creation did not complete within its create_timeout of {minutes} minutes."
        );
        let lock = inner.lock_for(&uuid);
        let _held = lock.lock().await;
        for ng in ngs
            .iter()
            .filter(|ng| ng.status == Some(S::CreateInProgress))
        {
            let _ = save_ng(inner, ng, |m| {
                m.status = Some(S::CreateFailed);
                m.status_reason = Some(reason.clone());
            })
            .await;
        }
        let admin = RequestContext::admin_all_tenants();
        fail(
            inner,
            &admin,
            &uuid,
            Action::Create,
            S::CreateFailed,
            &reason,
        )
        .await;
        return Ok(());
    }
    if creating && cluster.stack_id.is_none() {
        // Never handed to the driver: the create was cut short (crash, lost message). A
        // create from before this process started is surely orphaned when no other conductor
        // is alive; with others, one of them may be handling it right now, so it gets the
        // grace like any other (two conductors resuming one create sent its outcome twice).
        let created = cluster.created_at.unwrap_or(now);
        let orphaned = (alone && created < inner.started_at)
            || now - created > chrono::Duration::seconds(RESUME_GRACE_SECS);
        if orphaned {
            tracing::info!(cluster = %uuid, "resuming an interrupted cluster create");
            let ctx = RequestContext::admin_all_tenants();
            // Its failure is recorded on the cluster by the handler.
            let _ = resume_create(inner, &ctx, &uuid).await;
        }
        return Ok(());
    }
    let driver = match driver {
        Ok(d) => d,
        Err(e) => {
            let admin = RequestContext::admin_all_tenants();
            let (action, to) = failure_for(cluster.status);
            fail(inner, &admin, &uuid, action, to, &e.to_string()).await;
            return Ok(());
        }
    };
    let lock = inner.lock_for(&uuid);
    let _held = lock.lock().await;
    let (seen, seen_ngs) = (
        crate::handlers::dc(&cluster),
        magnum_db::model::nodegroups(&ngs),
    );
    let poll = driver.poll_status(&seen, &seen_ngs);
    let report = match tokio::time::timeout(POLL_TIMEOUT, poll).await {
        Ok(r) => r?,
        Err(_) => {
            tracing::warn!(cluster = %uuid, driver = driver.name(), "driver poll timed out");
            return Ok(());
        }
    };
    apply(inner, cluster, ngs, report).await
}

fn failure_for(status: Option<S>) -> (Action, S) {
    match status {
        Some(S::CreateInProgress) => (Action::Create, S::CreateFailed),
        Some(S::DeleteInProgress) => (Action::Delete, S::DeleteFailed),
        _ => (Action::Update, S::UpdateFailed),
    }
}

/// Persists what the driver observed, with guarded writes: if anything changed the rows
/// meanwhile, nothing of this report is written and the next sync sees the new state.
async fn apply(
    inner: &Inner,
    cluster: Cluster,
    ngs: Vec<NodeGroup>,
    report: StatusReport,
) -> Result<()> {
    if report.is_empty() {
        return Ok(());
    }
    let uuid = cluster.uuid.clone().unwrap_or_default();
    if report.status == Some(S::DeleteComplete) {
        return finish_delete(inner, &cluster, &ngs).await;
    }
    let mut ngs_now = Vec::with_capacity(ngs.len());
    for ng in ngs {
        match report.nodegroups.iter().find(|r| r.uuid == ng.uuid) {
            Some(r) if r.deleted => {
                let ident = magnum_core::ids::Identity::Uuid(ng.uuid.clone());
                inner.lifecycle().remove_nodegroup(&uuid, &ident).await?;
            }
            Some(r) => {
                let saved = save_ng(inner, &ng, |m| {
                    if let Some(s) = r.status {
                        m.status = Some(s);
                    }
                    if let Some(reason) = &r.status_reason {
                        m.status_reason = reason.clone();
                    }
                    if let Some(addresses) = &r.node_addresses {
                        m.node_addresses = Some(magnum_db::json::dumps(addresses));
                    }
                    if r.stack_id.is_some() {
                        m.stack_id = r.stack_id.clone();
                    }
                })
                .await?;
                ngs_now.push(saved);
            }
            None => ngs_now.push(ng),
        }
    }
    let before = cluster.status;
    // Guarded on the status and reason the report was made against: another sync of this
    // cluster that wrote since (it read the row before this one took the lock) wins, and
    // this report is dropped rather than leaving, say, a COMPLETE status with the reason of
    // an older in-progress view.
    let saved = inner
        .lifecycle()
        .observe_cluster(&cluster, |m| {
            if let Some(s) = report.status {
                m.status = Some(s);
            }
            if let Some(reason) = &report.status_reason {
                m.status_reason = reason.clone();
            }
            if report.health_status.is_some() {
                m.health_status = report.health_status;
            }
            for (field, value) in [
                (&mut m.api_address, &report.api_address),
                (&mut m.coe_version, &report.coe_version),
                (&mut m.container_version, &report.container_version),
                (
                    &mut m.health_status_reason,
                    &report
                        .health_status_reason
                        .as_ref()
                        .map(magnum_db::json::dumps),
                ),
            ] {
                if value.is_some() {
                    *field = value.clone();
                }
            }
        })
        .await?;
    if saved.status != before
        && let Some((action, outcome)) = saved.status.and_then(action_of)
    {
        let admin = RequestContext::admin_all_tenants();
        inner
            .notify(&admin, action, outcome, &saved, &ngs_now)
            .await;
    }
    Ok(())
}
