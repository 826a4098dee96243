//! The one writer of cluster and nodegroup rows. The API's services, the conductor's
//! handlers, the status sync, the health worker, the object-indirection endpoint and the
//! upstream bridge all change those rows through here, so the rules of a write live in one
//! place: a new row starts CREATE_IN_PROGRESS, every change is a guarded save of what the
//! writer read (a concurrent change makes it `StaleWrite`, never a silent overwrite), an
//! operation starts only from a status its precondition allows, and a finished delete takes
//! the cluster and its nodegroups away together, only while it is still as the caller read it.
//! (`scripts/check-layers` holds every other crate and module to it.)

use magnum_core::Result;
use magnum_core::ids::Identity;
use magnum_core::lifecycle::ClusterOp;
use magnum_core::status::ClusterStatus;
use magnum_db::Database;
use magnum_db::repo::cluster::{Cluster, ClusterQuota};
use magnum_db::repo::nodegroup::NodeGroup;

/// Cluster and nodegroup state changes over one database.
#[derive(Clone)]
pub struct Lifecycle {
    db: Database,
}

impl Lifecycle {
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Insert a new cluster with its nodegroups (one transaction), all CREATE_IN_PROGRESS,
    /// within `quota` when given.
    pub async fn insert_cluster(
        &self,
        mut cluster: Cluster,
        mut nodegroups: Vec<NodeGroup>,
        quota: Option<ClusterQuota>,
    ) -> Result<Cluster> {
        cluster.status = Some(ClusterStatus::CreateInProgress);
        cluster.status_reason = None;
        for ng in &mut nodegroups {
            ng.status = Some(ClusterStatus::CreateInProgress);
        }
        self.db
            .clusters()
            .create_with_nodegroups(cluster, nodegroups, quota)
            .await
    }

    /// Insert a new nodegroup of an existing cluster, CREATE_IN_PROGRESS.
    pub async fn insert_nodegroup(&self, mut ng: NodeGroup) -> Result<NodeGroup> {
        ng.status = Some(ClusterStatus::CreateInProgress);
        ng.status_reason = None;
        self.db.nodegroups().create(ng).await
    }

    /// A row as another process wrote it (the object-indirection endpoint's `create()`): kept
    /// as given, status included.
    pub async fn insert_cluster_as_given(&self, cluster: Cluster) -> Result<Cluster> {
        self.db.clusters().create(cluster).await
    }

    /// As [`Self::insert_cluster_as_given`], for a nodegroup.
    pub async fn insert_nodegroup_as_given(&self, ng: NodeGroup) -> Result<NodeGroup> {
        self.db.nodegroups().create(ng).await
    }

    /// Store `change` applied to `cluster` (as the writer read it); nothing is written when
    /// it changes nothing. Returns the row as stored.
    pub async fn change_cluster(
        &self,
        cluster: &Cluster,
        change: impl FnOnce(&mut Cluster),
    ) -> Result<Cluster> {
        self.save_cluster(cluster, &changed(cluster, change)).await
    }

    /// Store `changed` over `original` (as the writer read it).
    pub async fn save_cluster(&self, original: &Cluster, changed: &Cluster) -> Result<Cluster> {
        if changed == original {
            return Ok(changed.clone());
        }
        self.db.clusters().save(original, changed).await
    }

    /// As [`Self::change_cluster`], for what a status sync observed: refused as stale when
    /// the cluster's status or reason moved on since it was read, even where `change`
    /// leaves them (the next sync observes again).
    pub async fn observe_cluster(
        &self,
        cluster: &Cluster,
        change: impl FnOnce(&mut Cluster),
    ) -> Result<Cluster> {
        let changed = changed(cluster, change);
        if changed == *cluster {
            return Ok(changed);
        }
        self.db.clusters().save_observed(cluster, &changed).await
    }

    /// As [`Self::change_cluster`], for a nodegroup.
    pub async fn change_nodegroup(
        &self,
        ng: &NodeGroup,
        change: impl FnOnce(&mut NodeGroup),
    ) -> Result<NodeGroup> {
        self.save_nodegroup(ng, &changed(ng, change)).await
    }

    /// As [`Self::save_cluster`], for a nodegroup.
    pub async fn save_nodegroup(
        &self,
        original: &NodeGroup,
        changed: &NodeGroup,
    ) -> Result<NodeGroup> {
        if changed == original {
            return Ok(changed.clone());
        }
        self.db.nodegroups().save(original, changed).await
    }

    /// Start `op` on `cluster`: refused (upstream's NotSupported) unless its status allows the
    /// operation; otherwise the operation's in-progress status is stored with `change`.
    pub async fn start(
        &self,
        op: ClusterOp,
        cluster: &Cluster,
        change: impl FnOnce(&mut Cluster),
    ) -> Result<Cluster> {
        op.check(cluster.status)?;
        self.change_cluster(cluster, |c| {
            if let Some(s) = op.started() {
                c.status = Some(s);
            }
            change(c);
        })
        .await
    }

    /// Remove one nodegroup of `cluster_uuid`.
    pub async fn remove_nodegroup(&self, cluster_uuid: &str, nodegroup: &Identity) -> Result<()> {
        self.db.nodegroups().destroy(cluster_uuid, nodegroup).await
    }

    /// Remove a cluster row on its own (the indirection endpoint's `destroy()`).
    pub async fn remove_cluster(&self, cluster: &Identity) -> Result<()> {
        self.db.clusters().destroy(cluster).await
    }

    /// Remove a cluster whose delete finished (its driver says so), with its nodegroups, only
    /// while it is still in `expected`, the status the caller read (false: someone moved it on
    /// meanwhile, and it stays).
    pub async fn remove_deleted_cluster(
        &self,
        uuid: &str,
        expected: ClusterStatus,
    ) -> Result<bool> {
        self.db
            .clusters()
            .destroy_with_nodegroups(uuid, expected)
            .await
    }
}

/// `change` applied to a copy of `row`.
fn changed<T: Clone>(row: &T, change: impl FnOnce(&mut T)) -> T {
    let mut copy = row.clone();
    change(&mut copy);
    copy
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use magnum_core::RequestContext;

    use super::*;
    use magnum_core::Error;

    async fn seeded() -> (Lifecycle, Cluster, tempfile::TempDir) {
        let (db, dir) = magnum_testkit::db::sqlite_at_head().await;
        let life = Lifecycle::new(db);
        // Whatever status the caller put on a new row, it starts in progress.
        let cluster = Cluster {
            name: Some("c".into()),
            project_id: Some("p".into()),
            status: Some(ClusterStatus::CreateComplete),
            status_reason: Some("left over".into()),
            ..Cluster::default()
        };
        let ng = NodeGroup {
            uuid: uuid::Uuid::new_v4().to_string(),
            name: "default-worker".into(),
            project_id: "p".into(),
            ..NodeGroup::default()
        };
        let c = life.insert_cluster(cluster, vec![ng], None).await.unwrap();
        (life, c, dir)
    }

    #[tokio::test]
    async fn new_rows_start_in_progress() {
        let (life, c, _dir) = seeded().await;
        assert_eq!(c.status, Some(ClusterStatus::CreateInProgress));
        assert_eq!(c.status_reason, None);
        let ngs = life
            .db
            .nodegroups()
            .for_clusters(&[c.uuid.clone().unwrap()])
            .await
            .unwrap();
        assert_eq!(ngs[0].status, Some(ClusterStatus::CreateInProgress));
    }

    #[tokio::test]
    async fn an_operation_starts_only_from_a_status_it_allows() {
        let (life, c, _dir) = seeded().await;
        let refused = life.start(ClusterOp::Update, &c, |_| {}).await;
        assert!(
            matches!(refused, Err(Error::NotSupported { .. })),
            "{refused:?}"
        );
        let done = life
            .change_cluster(&c, |c| c.status = Some(ClusterStatus::CreateComplete))
            .await
            .unwrap();
        let updating = life
            .start(ClusterOp::Update, &done, |c| c.status_reason = None)
            .await
            .unwrap();
        assert_eq!(updating.status, Some(ClusterStatus::UpdateInProgress));
        // A writer holding the row as it was before is refused, not silently applied.
        let stale = life
            .change_cluster(&done, |c| c.status = Some(ClusterStatus::DeleteInProgress))
            .await;
        assert!(matches!(stale, Err(Error::StaleWrite { .. })), "{stale:?}");
    }

    #[tokio::test]
    async fn a_finished_delete_removes_only_a_cluster_still_as_read() {
        let (life, c, _dir) = seeded().await;
        let uuid = c.uuid.clone().unwrap();
        // Expected DELETE_IN_PROGRESS, but the row is still being created: it stays.
        assert!(
            !life
                .remove_deleted_cluster(&uuid, ClusterStatus::DeleteInProgress)
                .await
                .unwrap()
        );
        let deleting = life.start(ClusterOp::Delete, &c, |_| {}).await.unwrap();
        assert_eq!(deleting.status, Some(ClusterStatus::DeleteInProgress));
        assert!(
            life.remove_deleted_cluster(&uuid, ClusterStatus::DeleteInProgress)
                .await
                .unwrap()
        );
        let ctx = RequestContext::admin_all_tenants();
        assert!(life.db.clusters().get_by_uuid(&ctx, &uuid).await.is_err());
        let ngs = life.db.nodegroups().for_clusters(&[uuid]).await.unwrap();
        assert!(ngs.is_empty());
    }
}
