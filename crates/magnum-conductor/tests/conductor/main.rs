//! The conductor against a real SQLite database, the simulated driver, the x509keypair store
//! and a capturing notifier: every lifecycle path, its notifications, failures on demand,
//! create_timeout and the resume of interrupted creates.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capi_soak;
mod health;

use std::sync::Arc;
use std::time::Duration;

use magnum_certs::x509::X509Options;
use magnum_certs::{ClusterPki, X509KeyPairStore};
use magnum_conductor::notify::{CaptureDriver, Notifier};
use magnum_conductor::{Conductor, ConductorSettings};
use magnum_conf::config::SimulatedDriverSection;
use magnum_core::model;
use magnum_core::{Error, RequestContext};
use magnum_db::Database;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_driver::{Driver, DriverRegistry, SimulatedDriver};
use magnum_rpc::*;

const PROJECT: &str = "p1";
const USER: &str = "u1";

struct Env {
    db: Database,
    conductor: Conductor,
    events: CaptureDriver,
    template: String,
    _dir: tempfile::TempDir,
}

fn ctx() -> RequestContext {
    RequestContext::for_project(PROJECT, USER)
}

async fn env_with(start_workers: bool, db: Option<(Database, tempfile::TempDir)>) -> Env {
    env_with_drivers(start_workers, db, Vec::new()).await
}

async fn env_with_drivers(
    start_workers: bool,
    db: Option<(Database, tempfile::TempDir)>,
    extra: Vec<Arc<dyn Driver>>,
) -> Env {
    let (db, dir) = match db {
        Some(d) => d,
        // Quick retries when concurrent writers meet SQLite's single write lock.
        None => magnum_testkit::db::sqlite_at_head_with(magnum_testkit::db::quick_retries).await,
    };
    let sim = Arc::new(SimulatedDriver::new(&SimulatedDriverSection {
        create_delay: 0.3,
        delete_delay: 0.2,
        update_delay: 0.2,
    }));
    let mut drivers: Vec<Arc<dyn Driver>> = vec![sim.clone()];
    drivers.extend(extra);
    let registry = DriverRegistry::new(drivers, &[], &[]);
    let pki = ClusterPki::new(
        Arc::new(X509KeyPairStore::new(db.clone())),
        X509Options::default(),
    );
    let events = CaptureDriver::new();
    let notifier = Notifier::new("test-host", "openstack").with_driver(Box::new(events.clone()));
    let conductor = Conductor::new(
        db.clone(),
        registry,
        pki,
        notifier,
        ConductorSettings {
            host: "test-host".into(),
            periodic_enable: true,
            sync_interval: Duration::from_millis(500),
            report_interval: Duration::from_millis(200),
            service_down_time: Duration::from_secs(180),
            health_interval: None,
        },
    );
    sim.set_waker(conductor.waker());
    if start_workers {
        conductor.spawn_workers();
    }
    let template = db
        .cluster_templates()
        .create(ClusterTemplate {
            name: Some("k8s".into()),
            project_id: Some(PROJECT.into()),
            user_id: Some(USER.into()),
            coe: Some("kubernetes".into()),
            image_id: Some("ubuntu".into()),
            driver: Some("simulated".into()),
            labels: Some(r#"{"kube_tag": "v1.30.2"}"#.into()),
            ..ClusterTemplate::default()
        })
        .await
        .unwrap()
        .uuid
        .unwrap();
    Env {
        db,
        conductor,
        events,
        template,
        _dir: dir,
    }
}

async fn env() -> Env {
    env_with(true, None).await
}

fn ng(name: &str, role: &str, count: i32) -> NodeGroup {
    NodeGroup {
        name: name.into(),
        role: Some(role.into()),
        is_default: Some(true),
        node_count: Some(count),
        project_id: PROJECT.into(),
        status: "CREATE_IN_PROGRESS".parse().ok(),
        labels: Some("{}".into()),
        ..NodeGroup::default()
    }
}

impl Env {
    /// What the API does on POST /v1/clusters: the rows, then the cast.
    async fn insert(&self, name: &str, labels: &str) -> String {
        let c = self
            .db
            .clusters()
            .create_with_nodegroups(
                Cluster {
                    name: Some(name.into()),
                    project_id: Some(PROJECT.into()),
                    user_id: Some(USER.into()),
                    cluster_template_id: Some(self.template.clone()),
                    status: "CREATE_IN_PROGRESS".parse().ok(),
                    create_timeout: Some(60),
                    labels: Some(labels.into()),
                    ..Cluster::default()
                },
                vec![
                    ng("default-master", "master", 1),
                    ng("default-worker", "worker", 2),
                ],
                None,
            )
            .await
            .unwrap();
        c.uuid.unwrap()
    }

    async fn create(&self, name: &str, labels: &str) -> String {
        let uuid = self.insert(name, labels).await;
        let req = ClusterCreate {
            unsaved: None,
            cluster_uuid: uuid.clone().into(),
            master_count: 1,
            node_count: 2,
            create_timeout: Some(60),
        };
        // Failures are recorded on the cluster; the tests look there.
        let _ = self.conductor.cluster_create(&ctx(), req).await;
        uuid
    }

    async fn cluster(&self, uuid: &str) -> Option<Cluster> {
        match self.db.clusters().get_by_uuid(&ctx(), uuid).await {
            Ok(c) => Some(c),
            Err(Error::ClusterNotFound { .. }) => None,
            Err(e) => panic!("{e}"),
        }
    }

    async fn ngs(&self, uuid: &str) -> Vec<NodeGroup> {
        self.db
            .nodegroups()
            .for_clusters(&[uuid.to_owned()])
            .await
            .unwrap()
    }

    /// Waits (up to 10 s) until the cluster's status is `want` (None: gone).
    async fn wait_for(&self, uuid: &str, want: Option<&str>) -> Option<Cluster> {
        for _ in 0..200 {
            let c = self.cluster(uuid).await;
            if c.as_ref().and_then(|c| c.status.map(|s| s.as_str())) == want
                || (want.is_none() && c.is_none())
            {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let c = self.cluster(uuid).await;
        panic!(
            "cluster {uuid} never reached {want:?}; it is {:?} ({:?})",
            c.as_ref().and_then(|c| c.status),
            c.as_ref().and_then(|c| c.status_reason.clone())
        );
    }

    /// The events, once at least `n` have arrived (a notification follows its status write).
    async fn events_at_least(&self, n: usize) -> Vec<(String, String, String)> {
        for _ in 0..250 {
            if self.events.snapshot().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.events()
    }

    fn events(&self) -> Vec<(String, String, String)> {
        self.events
            .snapshot()
            .iter()
            .map(|n| {
                (
                    n.event_type.clone(),
                    n.payload["outcome"].as_str().unwrap_or_default().to_owned(),
                    n.payload["target"]["attachments"][0]["content"]["status"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect()
    }

    async fn keypairs(&self) -> i64 {
        let n = self
            .db
            .scalar_text("SELECT COUNT(*) FROM x509keypair")
            .await
            .unwrap();
        n.unwrap_or(0)
    }
}

fn ev(t: &str, o: &str, s: &str) -> (String, String, String) {
    (t.into(), o.into(), s.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_reaches_complete_with_certificates_addresses_and_events() {
    let e = env().await;
    let uuid = e.create("alpha", "{}").await;
    let c = e.wait_for(&uuid, Some("CREATE_COMPLETE")).await.unwrap();
    assert!(c.stack_id.as_deref().unwrap().starts_with("sim-"));
    assert!(
        c.api_address
            .as_deref()
            .unwrap()
            .starts_with("https://192.0.2.")
    );
    assert!(c.coe_version.is_some());
    assert_eq!(c.health_status.map(|s| s.as_str()), Some("HEALTHY"));
    assert_eq!(c.health_status_reason.as_deref(), Some(r#"{"api": "ok"}"#));
    for r in [
        &c.ca_cert_ref,
        &c.etcd_ca_cert_ref,
        &c.front_proxy_ca_cert_ref,
        &c.magnum_cert_ref,
    ] {
        assert!(r.is_some());
    }
    assert_eq!(e.keypairs().await, 4);
    let ngs = e.ngs(&uuid).await;
    assert!(
        ngs.iter()
            .all(|n| n.status.map(|s| s.as_str()) == Some("CREATE_COMPLETE"))
    );
    let worker = ngs.iter().find(|n| n.name == "default-worker").unwrap();
    let addrs: Vec<String> =
        serde_json::from_str(worker.node_addresses.as_deref().unwrap()).unwrap();
    assert_eq!(addrs.len(), 2);
    assert_eq!(worker.stack_id, c.stack_id);
    assert_eq!(
        e.events_at_least(2).await,
        vec![
            ev("magnum.cluster.create", "pending", "CREATE_IN_PROGRESS"),
            ev("magnum.cluster.create", "success", "CREATE_COMPLETE"),
        ]
    );
    // The heartbeat row exists and counts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let svc =
        e.db.magnum_services()
            .get_by_host_and_binary(Some("test-host"), "magnum-conductor")
            .await
            .unwrap()
            .unwrap();
    assert!(svc.report_count >= 2, "report_count {}", svc.report_count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_on_demand_end_failed_with_a_readable_reason() {
    let e = env().await;
    let later = e.create("late", r#"{"simulated_failure": "create"}"#).await;
    let now = e
        .create(
            "now",
            r#"{"simulated_failure": "create", "simulated_failure_mode": "immediate"}"#,
        )
        .await;
    for uuid in [&later, &now] {
        let c = e.wait_for(uuid, Some("CREATE_FAILED")).await.unwrap();
        assert_eq!(
            c.status_reason.as_deref(),
            Some("Simulated failure of create requested by label simulated_failure.")
        );
    }
    // Each create sent its pending event, then its failure.
    let failures = e
        .events_at_least(4)
        .await
        .into_iter()
        .filter(|x| x.1 == "failure")
        .count();
    assert_eq!(failures, 2);
    let n = e.events.snapshot();
    assert!(
        n.iter()
            .filter(|n| n.payload["outcome"] == "failure")
            .all(|n| n.priority.as_str() == "ERROR")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_resize_upgrade_and_their_preconditions() {
    let e = env().await;
    let uuid = e.create("beta", "{}").await;
    // Still creating: an update is refused on the fresh row, with upstream's text.
    let early = e
        .conductor
        .cluster_update(
            &ctx(),
            ClusterUpdate {
                cluster_uuid: uuid.clone().into(),
                node_count: 5,
                health_status: None,
                health_status_reason: None,
                rollback: false,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        early.to_string(),
        "Updating a cluster when status is \"CREATE_IN_PROGRESS\" is not supported."
    );
    e.wait_for(&uuid, Some("CREATE_COMPLETE")).await;

    let update = |n| ClusterUpdate {
        cluster_uuid: uuid.clone().into(),
        node_count: n,
        health_status: None,
        health_status_reason: None,
        rollback: false,
    };
    e.conductor.cluster_update(&ctx(), update(4)).await.unwrap();
    assert_eq!(
        e.cluster(&uuid).await.unwrap().status.map(|s| s.as_str()),
        Some("UPDATE_IN_PROGRESS"),
        "the status moves before the driver returns"
    );
    // A second update while the first runs is refused.
    assert!(matches!(
        e.conductor.cluster_update(&ctx(), update(6)).await,
        Err(Error::NotSupported { .. })
    ));
    e.wait_for(&uuid, Some("UPDATE_COMPLETE")).await;
    let worker = e
        .ngs(&uuid)
        .await
        .into_iter()
        .find(|n| n.name == "default-worker")
        .unwrap();
    assert_eq!(worker.node_count, Some(4));

    e.conductor
        .cluster_resize(
            &ctx(),
            ClusterResize {
                cluster_uuid: uuid.clone().into(),
                nodegroup_uuid: worker.uuid.clone().into(),
                node_count: 1,
                nodes_to_remove: vec![],
            },
        )
        .await
        .unwrap();
    e.wait_for(&uuid, Some("UPDATE_COMPLETE")).await;
    let worker = e
        .ngs(&uuid)
        .await
        .into_iter()
        .find(|n| n.name == "default-worker")
        .unwrap();
    assert_eq!(worker.node_count, Some(1));
    assert_eq!(worker.status.map(|s| s.as_str()), Some("UPDATE_COMPLETE"));

    let newer =
        e.db.cluster_templates()
            .create(ClusterTemplate {
                name: Some("k8s-new".into()),
                project_id: Some(PROJECT.into()),
                coe: Some("kubernetes".into()),
                driver: Some("simulated".into()),
                labels: Some(r#"{"kube_tag": "v1.31.0"}"#.into()),
                ..ClusterTemplate::default()
            })
            .await
            .unwrap()
            .uuid
            .unwrap();
    e.conductor
        .cluster_upgrade(
            &ctx(),
            ClusterUpgrade {
                cluster_uuid: uuid.clone().into(),
                nodegroup_uuid: worker.uuid.clone().into(),
                cluster_template_uuid: newer.clone().into(),
                max_batch_size: Some(1),
            },
        )
        .await
        .unwrap();
    let c = e.wait_for(&uuid, Some("UPDATE_COMPLETE")).await.unwrap();
    assert_eq!(c.cluster_template_id.as_deref(), Some(newer.as_str()));
    assert_eq!(c.coe_version.as_deref(), Some("v1.31.0"));
    // 8 updates, plus the create's two events.
    let updates = e
        .events_at_least(10)
        .await
        .into_iter()
        .filter(|x| x.0 == "magnum.cluster.update")
        .map(|x| x.1)
        .collect::<Vec<_>>();
    assert_eq!(
        updates,
        [
            "failure", "pending", "failure", "success", "pending", "success", "pending", "success"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_rows_and_all_four_certificates() {
    let e = env().await;
    let uuid = e.create("gamma", "{}").await;
    e.wait_for(&uuid, Some("CREATE_COMPLETE")).await;
    assert_eq!(e.keypairs().await, 4);
    e.conductor
        .cluster_delete(
            &ctx(),
            ClusterRef {
                cluster_uuid: uuid.clone().into(),
            },
        )
        .await
        .unwrap();
    // Deleting again while it runs is harmless.
    e.conductor
        .cluster_delete(
            &ctx(),
            ClusterRef {
                cluster_uuid: uuid.clone().into(),
            },
        )
        .await
        .unwrap();
    e.wait_for(&uuid, None).await;
    assert!(e.ngs(&uuid).await.is_empty());
    // The certificates go right after the rows.
    for _ in 0..100 {
        if e.keypairs().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(e.keypairs().await, 0);
    let deletes: Vec<_> = e
        .events()
        .into_iter()
        .filter(|x| x.0 == "magnum.cluster.delete")
        .collect();
    assert_eq!(
        deletes,
        vec![
            ev("magnum.cluster.delete", "pending", "CREATE_COMPLETE"),
            ev("magnum.cluster.delete", "success", "DELETE_COMPLETE"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodegroups_create_update_delete_and_fail() {
    let e = env().await;
    let uuid = e.create("delta", "{}").await;
    e.wait_for(&uuid, Some("CREATE_COMPLETE")).await;
    let add = |name: &str, labels: &str| NodeGroup {
        name: name.into(),
        cluster_id: uuid.clone(),
        project_id: PROJECT.into(),
        role: Some("worker".into()),
        node_count: Some(3),
        status: "CREATE_IN_PROGRESS".parse().ok(),
        labels: Some(labels.into()),
        ..NodeGroup::default()
    };
    let extra = e.db.nodegroups().create(add("extra", "{}")).await.unwrap();
    let req = NodegroupRef {
        unsaved: None,
        cluster_uuid: uuid.clone().into(),
        nodegroup_uuid: extra.uuid.clone().into(),
    };
    e.conductor
        .nodegroup_create(&ctx(), req.clone())
        .await
        .unwrap();
    e.wait_for(&uuid, Some("UPDATE_COMPLETE")).await;
    let got = e
        .ngs(&uuid)
        .await
        .into_iter()
        .find(|n| n.name == "extra")
        .unwrap();
    assert_eq!(got.status.map(|s| s.as_str()), Some("CREATE_COMPLETE"));

    e.conductor
        .nodegroup_update(
            &ctx(),
            NodegroupUpdate {
                cluster_uuid: uuid.clone().into(),
                nodegroup_uuid: extra.uuid.clone().into(),
                min_node_count: Some(1),
                max_node_count: Some(5),
                node_labels: None,
                node_taints: None,
                labels: None,
            },
        )
        .await
        .unwrap();
    e.wait_for(&uuid, Some("UPDATE_COMPLETE")).await;
    let got = e
        .ngs(&uuid)
        .await
        .into_iter()
        .find(|n| n.name == "extra")
        .unwrap();
    assert_eq!((got.min_node_count, got.max_node_count), (Some(1), Some(5)));

    e.conductor.nodegroup_delete(&ctx(), req).await.unwrap();
    e.wait_for(&uuid, Some("UPDATE_COMPLETE")).await;
    for _ in 0..100 {
        if e.ngs(&uuid).await.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(e.ngs(&uuid).await.len(), 2);

    let bad =
        e.db.nodegroups()
            .create(add("bad", r#"{"simulated_failure": "nodegroup_create"}"#))
            .await
            .unwrap();
    e.conductor
        .nodegroup_create(
            &ctx(),
            NodegroupRef {
                unsaved: None,
                cluster_uuid: uuid.clone().into(),
                nodegroup_uuid: bad.uuid.clone().into(),
            },
        )
        .await
        .unwrap();
    let c = e.wait_for(&uuid, Some("UPDATE_FAILED")).await.unwrap();
    assert!(c.status_reason.unwrap().contains("nodegroup_create"));
    let got = e
        .ngs(&uuid)
        .await
        .into_iter()
        .find(|n| n.name == "bad")
        .unwrap();
    assert_eq!(got.status.map(|s| s.as_str()), Some("CREATE_FAILED"));
    // Nodegroup operations send no notifications; the cluster's own events are there.
    assert!(
        e.events()
            .iter()
            .all(|x| x.0.starts_with("magnum.cluster."))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_sign_fetch_and_rotate() {
    let e = env().await;
    let uuid = e.create("eps", "{}").await;
    let before = e.wait_for(&uuid, Some("CREATE_COMPLETE")).await.unwrap();
    let get = |t: Option<&str>| GetCaCertificate {
        cluster_uuid: uuid.clone().into(),
        ca_cert_type: t.map(str::to_owned),
    };
    let k8s = e
        .conductor
        .get_ca_certificate(&ctx(), get(None))
        .await
        .unwrap();
    let etcd = e
        .conductor
        .get_ca_certificate(&ctx(), get(Some("etcd")))
        .await
        .unwrap();
    assert!(k8s.starts_with("-----BEGIN CERTIFICATE-----"));
    assert_ne!(k8s, etcd);
    assert!(matches!(
        e.conductor
            .get_ca_certificate(&ctx(), get(Some("kubelet")))
            .await,
        Err(Error::InvalidParameterValue { .. })
    ));
    let bad = e
        .conductor
        .sign_certificate(
            &ctx(),
            SignCertificate {
                cluster_uuid: uuid.clone().into(),
                csr: "not a csr".into(),
                ca_cert_type: None,
            },
        )
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("invalid csr"), "{bad}");

    e.conductor
        .rotate_ca_certificate(
            &ctx(),
            ClusterRef {
                cluster_uuid: uuid.clone().into(),
            },
        )
        .await
        .unwrap();
    let after = e.wait_for(&uuid, Some("UPDATE_COMPLETE")).await.unwrap();
    assert_ne!(after.ca_cert_ref, before.ca_cert_ref);
    assert_ne!(
        e.conductor
            .get_ca_certificate(&ctx(), get(None))
            .await
            .unwrap(),
        k8s
    );
    // The superseded certificates are gone, not leaked.
    assert_eq!(e.keypairs().await, 4);
    e.conductor
        .credential_rotate(
            &ctx(),
            ClusterRef {
                cluster_uuid: uuid.clone().into(),
            },
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_timeout_fails_a_create_that_never_finishes() {
    let e = env().await;
    let uuid = e.create("hang", r#"{"simulated_hang": "create"}"#).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        e.cluster(&uuid).await.unwrap().status.map(|s| s.as_str()),
        Some("CREATE_IN_PROGRESS")
    );
    // Two hours ago, with a 60-minute timeout.
    e.db.execute_text(&format!(
        "UPDATE cluster SET created_at = datetime('now', '-2 hours') WHERE uuid = '{uuid}'"
    ))
    .await
    .unwrap();
    let c = e.wait_for(&uuid, Some("CREATE_FAILED")).await.unwrap();
    assert_eq!(
        c.status_reason.as_deref(),
        Some("Cluster creation did not complete within its create_timeout of 60 minutes.")
    );
    assert!(
        e.ngs(&uuid)
            .await
            .iter()
            .all(|n| n.status.map(|s| s.as_str()) == Some("CREATE_FAILED"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cut_short_is_resumed_after_restart() {
    // First "process": the API stored the rows, then everything died before the conductor ran.
    let first = env_with(false, None).await;
    let uuid = first.insert("orphan", "{}").await;
    let Env { db, _dir, .. } = first;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // The restarted conductor finds it and finishes the job.
    let second = env_with(true, Some((db, _dir))).await;
    let c = second
        .wait_for(&uuid, Some("CREATE_COMPLETE"))
        .await
        .unwrap();
    assert!(c.magnum_cert_ref.is_some());
}

/// Upstream's periodic-task fake (drivers.md §3): a table of backend stacks; the poll copies a
/// differing backend status onto the cluster, and a missing stack fails the operation (or
/// completes a delete).
struct StackDriver {
    stacks: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

#[async_trait::async_trait]
impl Driver for StackDriver {
    fn name(&self) -> &str {
        "stacks"
    }
    fn provides(&self) -> Vec<magnum_driver::Provides> {
        Vec::new()
    }
    async fn create_cluster(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
        _: &[model::Nodegroup],
        _: Option<i32>,
    ) -> magnum_core::Result<magnum_driver::ClusterChanges> {
        Ok(Default::default())
    }
    async fn update_cluster(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
        _: &[model::Nodegroup],
        _: bool,
    ) -> magnum_core::Result<()> {
        Ok(())
    }
    async fn resize_cluster(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
        _: &model::Nodegroup,
        _: i32,
        _: &[String],
    ) -> magnum_core::Result<()> {
        Ok(())
    }
    async fn upgrade_cluster(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
        _: &model::ClusterTemplate,
        _: Option<i32>,
        _: &model::Nodegroup,
    ) -> magnum_core::Result<magnum_driver::ClusterChanges> {
        Ok(Default::default())
    }
    async fn delete_cluster(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
    ) -> magnum_core::Result<()> {
        Ok(())
    }
    async fn create_nodegroup(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
        _: &model::Nodegroup,
    ) -> magnum_core::Result<()> {
        Ok(())
    }
    async fn update_nodegroup(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
        _: &model::Nodegroup,
    ) -> magnum_core::Result<()> {
        Ok(())
    }
    async fn delete_nodegroup(
        &self,
        _: &RequestContext,
        _: &model::Cluster,
        _: &model::Nodegroup,
    ) -> magnum_core::Result<()> {
        Ok(())
    }
    async fn poll_status(
        &self,
        cluster: &model::Cluster,
        _: &[model::Nodegroup],
    ) -> magnum_core::Result<magnum_driver::StatusReport> {
        let stack = cluster.stack_id.clone().unwrap_or_default();
        let current = cluster.status.map_or("", |s| s.as_str()).to_owned();
        let backend = self.stacks.lock().unwrap().get(&stack).cloned();
        let (status, reason) = match backend {
            Some(s) if s == current => return Ok(Default::default()),
            Some(s) => (s, None),
            None if current == "DELETE_IN_PROGRESS" => ("DELETE_COMPLETE".to_owned(), None),
            None => {
                let phase = current
                    .trim_end_matches("_IN_PROGRESS")
                    .trim_end_matches("_COMPLETE");
                (
                    format!("{phase}_FAILED"),
                    Some(format!("Stack {stack} not found")),
                )
            }
        };
        Ok(magnum_driver::StatusReport {
            status: status.parse().ok(),
            status_reason: Some(reason),
            ..Default::default()
        })
    }
}

/// The five clusters of upstream's periodic tests, each with its stack.
async fn five_clusters(e: &Env, template: &str) -> Vec<String> {
    let mut uuids = Vec::new();
    for (i, status) in [
        "CREATE_IN_PROGRESS",
        "DELETE_IN_PROGRESS",
        "UPDATE_IN_PROGRESS",
        "DELETE_IN_PROGRESS",
        "ROLLBACK_IN_PROGRESS",
    ]
    .into_iter()
    .enumerate()
    {
        let c =
            e.db.clusters()
                .create_with_nodegroups(
                    Cluster {
                        name: Some(format!("c{i}")),
                        project_id: Some(PROJECT.into()),
                        user_id: Some(USER.into()),
                        cluster_template_id: Some(template.to_owned()),
                        status: status.parse().ok(),
                        stack_id: Some(format!("stack-{i}")),
                        create_timeout: Some(60),
                        ..Cluster::default()
                    },
                    vec![
                        ng("default-master", "master", 1),
                        ng("default-worker", "worker", 1),
                    ],
                    None,
                )
                .await
                .unwrap();
        uuids.push(c.uuid.unwrap());
    }
    uuids
}

async fn stacks_env(stacks: &[(&str, &str)]) -> (Env, String) {
    let driver = Arc::new(StackDriver {
        stacks: std::sync::Mutex::new(
            stacks
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
    });
    // Workers start after the clusters exist, so the first sweep sees all five.
    let e = env_with_drivers(false, None, vec![driver]).await;
    let template =
        e.db.cluster_templates()
            .create(ClusterTemplate {
                name: Some("stacks".into()),
                project_id: Some(PROJECT.into()),
                coe: Some("kubernetes".into()),
                driver: Some("stacks".into()),
                ..ClusterTemplate::default()
            })
            .await
            .unwrap()
            .uuid
            .unwrap();
    (e, template)
}

async fn statuses(e: &Env, uuids: &[String]) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for u in uuids {
        let status = e.cluster(u).await.and_then(|c| c.status);
        out.push(status.map(|s| s.as_str().to_owned()));
    }
    out
}

/// The statuses once they equal `want` (sweeps run every 500 ms), or as they are after 10 s.
async fn statuses_become(e: &Env, uuids: &[String], want: &[Option<&str>]) -> Vec<Option<String>> {
    let want: Vec<Option<String>> = want.iter().map(|w| w.map(str::to_owned)).collect();
    for _ in 0..200 {
        let now = statuses(e, uuids).await;
        if now == want {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    statuses(e, uuids).await
}

async fn nodegroup_rows(e: &Env) -> i64 {
    e.db.scalar_text("SELECT COUNT(*) FROM nodegroup")
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_follows_upstreams_periodic_expectations() {
    // Backends moved on: four transitions reported once each, one cluster gone with its
    // nodegroups; the one still deleting is left alone.
    let (e, t) = stacks_env(&[
        ("stack-0", "CREATE_COMPLETE"),
        ("stack-1", "DELETE_IN_PROGRESS"),
        ("stack-2", "UPDATE_COMPLETE"),
        ("stack-4", "ROLLBACK_COMPLETE"),
    ])
    .await;
    let uuids = five_clusters(&e, &t).await;
    e.conductor.spawn_workers();
    let want = [
        Some("CREATE_COMPLETE"),
        Some("DELETE_IN_PROGRESS"),
        Some("UPDATE_COMPLETE"),
        None,
        Some("ROLLBACK_COMPLETE"),
    ];
    let got = statuses_become(&e, &uuids, &want).await;
    assert_eq!(got, want.map(|w| w.map(str::to_owned)));
    assert_eq!(nodegroup_rows(&e).await, 8);
    let mut events = e.events_at_least(4).await;
    events.sort();
    assert_eq!(
        events,
        [
            ev("magnum.cluster.create", "success", "CREATE_COMPLETE"),
            ev("magnum.cluster.delete", "success", "DELETE_COMPLETE"),
            ev("magnum.cluster.update", "success", "ROLLBACK_COMPLETE"),
            ev("magnum.cluster.update", "success", "UPDATE_COMPLETE"),
        ]
    );

    // Every backend object missing: failures with upstream's reason, deletes complete.
    let (e, t) = stacks_env(&[]).await;
    let uuids = five_clusters(&e, &t).await;
    e.conductor.spawn_workers();
    let want = [
        Some("CREATE_FAILED"),
        None,
        Some("UPDATE_FAILED"),
        None,
        Some("ROLLBACK_FAILED"),
    ];
    let got = statuses_become(&e, &uuids, &want).await;
    assert_eq!(got, want.map(|w| w.map(str::to_owned)));
    let c = e.cluster(&uuids[0]).await.unwrap();
    assert_eq!(c.status_reason.as_deref(), Some("Stack stack-0 not found"));
    assert_eq!(nodegroup_rows(&e).await, 6);
    assert_eq!(e.events_at_least(5).await.len(), 5);

    // Nothing changed: nothing written, nothing sent, however many sweeps run.
    let (e, t) = stacks_env(&[
        ("stack-0", "CREATE_IN_PROGRESS"),
        ("stack-1", "DELETE_IN_PROGRESS"),
        ("stack-2", "UPDATE_IN_PROGRESS"),
        ("stack-3", "DELETE_IN_PROGRESS"),
        ("stack-4", "ROLLBACK_IN_PROGRESS"),
    ])
    .await;
    five_clusters(&e, &t).await;
    e.conductor.spawn_workers();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(e.events().is_empty(), "{:?}", e.events());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_run_then_stop_cleanly() {
    use magnum_conductor::WorkerState;
    let e = env_with(false, None).await;
    let workers = e.conductor.spawn_workers();
    let names: Vec<_> = workers.statuses().iter().map(|s| s.name).collect();
    assert_eq!(names, ["heartbeat", "status-sync"]);
    // Both through their first pass: a heartbeat written, a sweep done.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !workers
        .statuses()
        .iter()
        .all(|s| s.state == WorkerState::Running)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            workers.statuses()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = std::time::Instant::now();
    let finals = workers.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(5));
    for s in finals {
        assert_eq!(s.state, WorkerState::Stopped, "{s:?}");
        assert_eq!(s.last_error, None, "{s:?}");
    }
}
