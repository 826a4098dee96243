//! No lost updates: real concurrent writers on one row, on every engine.

use std::sync::Arc;

use magnum_core::status::{ClusterHealthStatus, ClusterStatus};
use magnum_core::{Error, RequestContext};
use magnum_db::repo::cluster::Cluster;
use tokio::sync::Barrier;

use crate::on_every_engine;

/// Sets a field to a value that depends on the writer's index.
type Setter = fn(&mut Cluster, usize);

const FIELDS: [(&str, Setter); 8] = [
    ("status", |c, i| c.status = Some(ClusterStatus::ALL[i])),
    ("status_reason", |c, i| {
        c.status_reason = Some(format!("V{i}"))
    }),
    ("api_address", |c, i| c.api_address = Some(format!("V{i}"))),
    ("coe_version", |c, i| c.coe_version = Some(format!("V{i}"))),
    ("stack_id", |c, i| c.stack_id = Some(format!("V{i}"))),
    ("discovery_url", |c, i| {
        c.discovery_url = Some(format!("V{i}"))
    }),
    ("keypair", |c, i| c.keypair = Some(format!("V{i}"))),
    ("health_status", |c, i| {
        c.health_status = Some(ClusterHealthStatus::ALL[i % ClusterHealthStatus::ALL.len()])
    }),
];

async fn seed(db: &magnum_db::Database) -> Cluster {
    db.clusters()
        .create(Cluster {
            name: Some("race".into()),
            project_id: Some("p".into()),
            ..Default::default()
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_saves_of_different_fields_all_persist() {
    on_every_engine!(at_head, |t| {
        let c = seed(&t.db).await;
        let uuid = c.uuid.clone().unwrap();
        let ctx = RequestContext::admin_all_tenants();
        let barrier = Arc::new(Barrier::new(FIELDS.len()));
        let mut tasks = Vec::new();
        for (i, (_, set)) in FIELDS.into_iter().enumerate() {
            let (db, uuid, ctx, barrier) =
                (t.db.clone(), uuid.clone(), ctx.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                // Every writer reads before any writes: each holds a stale copy of the others' fields.
                let original = db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
                barrier.wait().await;
                let mut mine = original.clone();
                set(&mut mine, i);
                db.clusters().save(&original, &mine).await
            }));
        }
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let after = t.db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
        for (i, (name, set)) in FIELDS.into_iter().enumerate() {
            let mut expected = after.clone();
            set(&mut expected, i);
            assert_eq!(after, expected, "{}: field {name} was lost", t.engine);
        }
        assert!(after.updated_at.is_some());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_saves_of_the_same_field_never_overwrite_silently() {
    on_every_engine!(at_head, |t| {
        let c = seed(&t.db).await;
        let uuid = c.uuid.clone().unwrap();
        let ctx = RequestContext::admin_all_tenants();
        let writers = 8;
        let barrier = Arc::new(Barrier::new(writers));
        let mut tasks = Vec::new();
        for i in 0..writers {
            let (db, uuid, ctx, barrier) =
                (t.db.clone(), uuid.clone(), ctx.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let original = db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
                barrier.wait().await;
                let mut mine = original.clone();
                mine.status_reason = Some(format!("writer {i}"));
                (i, db.clusters().save(&original, &mine).await)
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                (i, Ok(_)) => winners.push(i),
                (_, Err(Error::StaleWrite { fields, .. })) => assert_eq!(fields, "status_reason"),
                (_, Err(e)) => panic!("unexpected error: {e}"),
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "{}: exactly one writer based on the same read may win",
            t.engine
        );
        let after = t.db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
        assert_eq!(after.status_reason, Some(format!("writer {}", winners[0])));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_modify_write_with_retry_on_conflict_loses_no_increment() {
    on_every_engine!(at_head, |t| {
        let c = seed(&t.db).await;
        let uuid = c.uuid.clone().unwrap();
        let ctx = RequestContext::admin_all_tenants();
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let (db, uuid, ctx) = (t.db.clone(), uuid.clone(), ctx.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let original = db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
                    let mut next = original.clone();
                    next.docker_volume_size = Some(original.docker_volume_size.unwrap_or(0) + 1);
                    match db.clusters().save(&original, &next).await {
                        Ok(_) => return,
                        Err(Error::StaleWrite { .. }) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let after = t.db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
        assert_eq!(after.docker_volume_size, Some(10), "{}", t.engine);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_heartbeats_all_count() {
    on_every_engine!(at_head, |t| {
        t.db.magnum_services()
            .create(Some("h"), "magnum-conductor")
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let db = t.db.clone();
            tasks.push(tokio::spawn(async move {
                db.magnum_services()
                    .report_state_up(Some("h"), "magnum-conductor")
                    .await
                    .unwrap();
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let row =
            t.db.magnum_services()
                .get_by_host_and_binary(Some("h"), "magnum-conductor")
                .await
                .unwrap()
                .unwrap();
        assert_eq!(row.report_count, 20);
        assert!(row.last_seen_up.is_some());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_quota_checked_creates_never_overshoot_the_limit() {
    use magnum_db::repo::cluster::ClusterQuota;
    use magnum_db::repo::nodegroup::NodeGroup;

    let new = |project: &str, name: String| {
        let cluster = Cluster {
            name: Some(name),
            project_id: Some(project.into()),
            user_id: Some("u".into()),
            status: "CREATE_IN_PROGRESS".parse().ok(),
            ..Default::default()
        };
        let groups = [("master", 1), ("worker", 2)].map(|(role, count)| NodeGroup {
            name: format!("default-{role}"),
            project_id: project.into(),
            role: Some(role.into()),
            node_count: Some(count),
            is_default: Some(true),
            ..Default::default()
        });
        (cluster, groups.to_vec())
    };
    on_every_engine!(at_head, |t| {
        // Another project's clusters do not count against this one's quota.
        for i in 0..3 {
            let (c, groups) = new("other", format!("o{i}"));
            t.db.clusters()
                .create_with_nodegroups(c, groups, None)
                .await
                .unwrap();
        }
        let scope = RequestContext::for_project("p", "u");
        let writers = 20;
        let barrier = Arc::new(Barrier::new(writers));
        let mut tasks = Vec::new();
        for i in 0..writers {
            let (db, scope, barrier) = (t.db.clone(), scope.clone(), barrier.clone());
            let (c, groups) = new("p", format!("c{i}"));
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let quota = ClusterQuota { scope, limit: 10 };
                db.clusters()
                    .create_with_nodegroups(c, groups, Some(quota))
                    .await
            }));
        }
        let (mut created, mut refused) = (Vec::new(), 0);
        for task in tasks {
            match task.await.unwrap() {
                Ok(c) => created.push(c.uuid.unwrap()),
                Err(Error::Forbidden { message }) => {
                    assert_eq!(
                        message,
                        "Resource limit exceeded: You have reached the maximum clusters per project, 10. You may delete a cluster to make room for a new one."
                    );
                    refused += 1;
                }
                Err(e) => panic!("{}: unexpected error: {e}", t.engine),
            }
        }
        assert_eq!((created.len(), refused), (10, 10), "{}", t.engine);
        let stored =
            t.db.clusters()
                .count(&scope, &Default::default())
                .await
                .unwrap();
        assert_eq!(stored, 10, "{}", t.engine);
        let groups = t.db.nodegroups().for_clusters(&created).await.unwrap();
        assert_eq!(groups.len(), 20, "{}", t.engine);
        // No nodegroup outlived a refused create: 13 clusters of 3 nodes in all.
        let stats = t.db.clusters().stats(None).await.unwrap();
        assert_eq!((stats.clusters, stats.nodes), (13, 39), "{}", t.engine);
    });
}

/// Two status syncs that read the row before either wrote: the one whose view is older
/// wrote its reason first, the newer one only moves the status on. Without the observation
/// guard the row ends COMPLETE with the older view's in-progress reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_observation_made_against_an_older_status_or_reason_is_refused() {
    on_every_engine!(at_head, |t| {
        let seeded = seed(&t.db).await;
        let uuid = seeded.uuid.clone().unwrap();
        let ctx = RequestContext::admin_all_tenants();
        let mut updating = seeded.clone();
        updating.status = Some(ClusterStatus::UpdateInProgress);
        let read = t.db.clusters().save(&seeded, &updating).await.unwrap();
        // The older view: a Machine still building.
        let mut older = read.clone();
        older.status_reason =
            Some("Machine m1 InfrastructureReady: Instance state is BUILD".into());
        t.db.clusters().save_observed(&read, &older).await.unwrap();
        // The newer view, made from the same read: complete, its reason (none) unchanged.
        let mut newer = read.clone();
        newer.status = Some(ClusterStatus::UpdateComplete);
        match t.db.clusters().save_observed(&read, &newer).await {
            Err(Error::StaleWrite { fields, .. }) => assert_eq!(fields, "status_reason"),
            other => panic!("{}: a stale observation was written: {other:?}", t.engine),
        }
        let now = t.db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
        assert_eq!(
            now.status,
            Some(ClusterStatus::UpdateInProgress),
            "{}",
            t.engine
        );
        // Made again from the row as it is, it lands, with its own reason.
        let mut again = now.clone();
        again.status = Some(ClusterStatus::UpdateComplete);
        again.status_reason = None;
        let saved = t.db.clusters().save_observed(&now, &again).await.unwrap();
        assert_eq!(
            (saved.status, saved.status_reason.clone()),
            (Some(ClusterStatus::UpdateComplete), None)
        );
        // A plain save of another column is not held back by the observation's columns.
        let mut reason = saved.clone();
        reason.status_reason = Some("x".into());
        t.db.clusters().save(&saved, &reason).await.unwrap();
        let mut address = saved.clone();
        address.api_address = Some("https://192.0.2.1:6443".into());
        t.db.clusters().save(&saved, &address).await.unwrap();
    });
}
