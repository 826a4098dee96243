//! The Cluster API driver's status and management-side health over 100 clusters, 10,000
//! cycles of each, against test-support/kube's API stand-in and simulated controller:
//! open file descriptors and runtime tasks stay flat (magnum-cluster-api leaked descriptors,
//! a client per call, #822). Needs Python 3.11 and openssl (test-support/kube/setup-venv.sh
//! builds its venv); skipped with a note when the stand-in cannot start.

#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use magnum_conf::config::ClusterApiSection;
use magnum_core::model::{Cluster, ClusterTemplate, Nodegroup};
use magnum_core::status::ClusterStatus;
use magnum_core::{Error, RequestContext, Result};
use magnum_driver::Driver;
use magnum_driver_capi::kube::Management;
use magnum_driver_capi::render::{Cas, CloudConfig};
use magnum_driver_capi::{CapiDriver, LoadBalancer, Source};
use serde_json::json;

struct NoSource;

#[async_trait]
impl Source for NoSource {
    async fn template(&self, _: &Cluster) -> Result<ClusterTemplate> {
        Err(Error::Internal("not used".into()))
    }
    async fn nodegroups(&self, _: &Cluster) -> Result<Vec<Nodegroup>> {
        Ok(Vec::new())
    }
    async fn cas(&self, _: &RequestContext, _: &Cluster) -> Result<Cas> {
        Err(Error::Internal("not used".into()))
    }
    async fn cloud(&self, _: &Cluster) -> Result<Option<CloudConfig>> {
        Ok(None)
    }
    async fn load_balancers(&self, _: &Cluster) -> Result<Vec<LoadBalancer>> {
        Ok(Vec::new())
    }
    async fn delete_load_balancer(&self, _: &Cluster, _: &str) -> Result<()> {
        Ok(())
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

fn cluster(i: usize) -> Cluster {
    Cluster {
        project_id: Some("p".into()),
        user_id: Some("u".into()),
        cluster_template_id: Some("t".into()),
        stack_id: Some(format!("kube-s{i:04}")),
        status: Some(ClusterStatus::CreateInProgress),
        create_timeout: Some(60),
        ..Cluster::new(
            format!("00000000-0000-4000-8000-{i:012}").into(),
            format!("soak{i}"),
        )
    }
}

#[test]
#[ignore = "soak: cargo test -p magnum-conductor --test conductor capi_soak -- --ignored --nocapture"]
fn capi_soak_status_and_health_cycles_keep_descriptors_and_tasks_flat() {
    let dir = tempfile::tempdir().unwrap();
    let started = Command::new("bash")
        .arg(repo().join("test-support/kube/start.sh"))
        .arg(dir.path())
        .env("CAPI_SIM_STEP_SECONDS", "0.1")
        .output()
        .unwrap();
    if !started.status.success() {
        eprintln!(
            "SKIPPED: test-support/kube/start.sh failed: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        return;
    }
    struct Stop(PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = Command::new("bash")
                .arg(repo().join("test-support/kube/stop.sh"))
                .arg(&self.0)
                .output();
        }
    }
    let _stop = Stop(dir.path().to_owned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cfg = ClusterApiSection {
            enabled: true,
            kubeconfig: dir.path().join("kubeconfig").display().to_string(),
            ..ClusterApiSection::default()
        };
        let mgmt = Management::connect(&cfg).await.unwrap();
        const N: usize = 100;
        for i in 0..N {
            let c = cluster(i);
            mgmt.apply(&json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "metadata": {"name": c.stack_id, "namespace": "magnum-system",
                             "labels": {"cluster-uuid": c.uuid.as_str()}},
                "spec": {"topology": {"classRef": {"name": "magnum-rs-v1"}, "version": "v1.33.1",
                    "controlPlane": {"replicas": 1},
                    "workers": {"machineDeployments": [{"class": "default-worker", "name": "default-worker", "replicas": 1}]}}}
            }))
            .await
            .unwrap();
        }
        let driver = CapiDriver::all(&cfg, &Default::default()).remove(0);
        driver.set_source(Arc::new(NoSource));
        driver.start().await.unwrap();
        let clusters: Vec<Cluster> = (0..N).map(cluster).collect();
        // Until the simulated controller has built them all.
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let mut done = 0;
            for c in &clusters {
                let r = driver.poll_status(c, &[]).await.unwrap();
                done += usize::from(r.status == Some(ClusterStatus::CreateComplete));
            }
            if done == N {
                break;
            }
            assert!(Instant::now() < deadline, "{done} of {N} complete");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let metrics = tokio::runtime::Handle::current().metrics();
        let mut seen = Vec::new();
        let t0 = Instant::now();
        for round in 1..=100 {
            for c in &clusters {
                let r = driver.poll_status(c, &[]).await.unwrap();
                assert_eq!(r.status, Some(ClusterStatus::CreateComplete));
                let h = driver.management_health(c).await.unwrap().unwrap();
                assert_eq!(h.reason["source"], "management cluster");
            }
            if [1, 50, 100].contains(&round) {
                seen.push((round, fds(), metrics.num_alive_tasks()));
            }
        }
        let took = t0.elapsed();
        eprintln!(
            "capi soak: {} status polls and {} health reads over {N} clusters in {took:.1?}; (round, fds, tasks): {seen:?}",
            100 * N,
            100 * N
        );
        let (_, fds1, tasks1) = seen[0];
        let (_, fds_end, tasks_end) = seen[2];
        assert!(fds_end <= fds1 + 2, "descriptors grew: {seen:?}");
        assert!(tasks_end <= tasks1 + 2, "tasks grew: {seen:?}");
    });
}
