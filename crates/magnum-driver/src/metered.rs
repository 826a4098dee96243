//! Every driver call timed into `magnum_driver_call_duration_seconds{driver, operation,
//! outcome}`, and every status poll's health answer counted into
//! `magnum_health_polls_total{driver, health}`. The registry wraps each driver in it, so no
//! call site can forget to record and a new driver gets its metrics for free.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use magnum_core::model::{Cluster, ClusterTemplate, Nodegroup as NodeGroup};
use magnum_core::{RequestContext, Result};

use super::{ClusterChanges, Driver, HealthReport, Provides, StatusReport};

pub(super) struct Metered {
    inner: Arc<dyn Driver>,
}

impl Metered {
    pub(super) fn wrap(inner: Arc<dyn Driver>) -> Arc<dyn Driver> {
        Arc::new(Self { inner })
    }

    async fn timed<T>(&self, operation: &str, call: impl Future<Output = Result<T>>) -> Result<T> {
        let started = Instant::now();
        let result = call.await;
        if let Some(m) = magnum_core::metrics::metrics() {
            let outcome = if result.is_ok() { "ok" } else { "error" };
            m.driver_latency
                .with_label_values(&[self.inner.name(), operation, outcome])
                .observe(started.elapsed().as_secs_f64());
        }
        result
    }
}

#[async_trait]
impl Driver for Metered {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn provides(&self) -> Vec<Provides> {
        self.inner.provides()
    }

    fn beta(&self) -> bool {
        self.inner.beta()
    }

    async fn create_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
        create_timeout: Option<i32>,
    ) -> Result<ClusterChanges> {
        let call = self
            .inner
            .create_cluster(ctx, cluster, nodegroups, create_timeout);
        self.timed("create_cluster", call).await
    }

    async fn update_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
        rollback: bool,
    ) -> Result<()> {
        let call = self
            .inner
            .update_cluster(ctx, cluster, nodegroups, rollback);
        self.timed("update_cluster", call).await
    }

    async fn resize_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
        node_count: i32,
        nodes_to_remove: &[String],
    ) -> Result<()> {
        let call = self
            .inner
            .resize_cluster(ctx, cluster, nodegroup, node_count, nodes_to_remove);
        self.timed("resize_cluster", call).await
    }

    async fn upgrade_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        template: &ClusterTemplate,
        max_batch_size: Option<i32>,
        nodegroup: &NodeGroup,
    ) -> Result<ClusterChanges> {
        let call = self
            .inner
            .upgrade_cluster(ctx, cluster, template, max_batch_size, nodegroup);
        self.timed("upgrade_cluster", call).await
    }

    async fn delete_cluster(&self, ctx: &RequestContext, cluster: &Cluster) -> Result<()> {
        let call = self.inner.delete_cluster(ctx, cluster);
        self.timed("delete_cluster", call).await
    }

    async fn create_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        let call = self.inner.create_nodegroup(ctx, cluster, nodegroup);
        self.timed("create_nodegroup", call).await
    }

    async fn update_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        let call = self.inner.update_nodegroup(ctx, cluster, nodegroup);
        self.timed("update_nodegroup", call).await
    }

    async fn delete_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        let call = self.inner.delete_nodegroup(ctx, cluster, nodegroup);
        self.timed("delete_nodegroup", call).await
    }

    async fn poll_status(
        &self,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) -> Result<StatusReport> {
        let report = self
            .timed("poll_status", self.inner.poll_status(cluster, nodegroups))
            .await;
        if let Some(m) = magnum_core::metrics::metrics() {
            // "unchanged": the poll did not speak about health; "error": the poll failed.
            let health = match &report {
                Ok(r) => r.health_status.map_or("unchanged", |h| h.as_str()),
                Err(_) => "error",
            };
            m.health_polls
                .with_label_values(&[self.inner.name(), health])
                .inc();
        }
        report
    }

    fn supports_ca_rotation(&self) -> bool {
        self.inner.supports_ca_rotation()
    }

    async fn rotate_ca_certificate(&self, ctx: &RequestContext, cluster: &Cluster) -> Result<()> {
        let call = self.inner.rotate_ca_certificate(ctx, cluster);
        self.timed("rotate_ca_certificate", call).await
    }

    async fn rotate_credential(&self, ctx: &RequestContext, cluster: &Cluster) -> Result<()> {
        let call = self.inner.rotate_credential(ctx, cluster);
        self.timed("rotate_credential", call).await
    }

    fn probes_workload_health(&self) -> bool {
        self.inner.probes_workload_health()
    }

    async fn management_health(&self, cluster: &Cluster) -> Result<Option<HealthReport>> {
        let call = self.inner.management_health(cluster);
        self.timed("management_health", call).await
    }

    async fn scaled_node_counts(
        &self,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) -> Result<Vec<(String, i32)>> {
        let call = self.inner.scaled_node_counts(cluster, nodegroups);
        self.timed("scaled_node_counts", call).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::SimulatedDriver;

    #[tokio::test]
    async fn records_calls_and_health() {
        let cfg = magnum_conf::config::Config::default();
        let d = Metered::wrap(Arc::new(SimulatedDriver::new(&cfg.simulated_driver)));
        let c = magnum_core::model::Cluster::new("6f1b7e43-57f6-4c5d-9a45-2f1f0fbc0a11".into(), "");
        let _ = d.poll_status(&c, &[]).await;
        let text = magnum_core::metrics::metrics().unwrap().render();
        assert!(
            text.contains(r#"magnum_driver_call_duration_seconds_count{driver="simulated",operation="poll_status""#),
            "{text}"
        );
        assert!(
            text.contains(r#"magnum_health_polls_total{driver="simulated""#),
            "{text}"
        );
    }
}
