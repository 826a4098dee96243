//! Prometheus metrics of the process, in one registry every layer records into (the API's
//! requests, RPC calls and casts, conductor handlers) and `/metrics` renders. Gauges that
//! count rows (clusters and nodegroups by status) are filled by whoever serves `/metrics`,
//! at scrape time.

use std::sync::OnceLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    /// `magnum_api_requests_total{method, route, status}`.
    pub api_requests: IntCounterVec,
    /// `magnum_api_request_duration_seconds{method, route}`.
    pub api_latency: HistogramVec,
    /// `magnum_rpc_requests_total{method, kind, outcome}` (kind: call or cast).
    pub rpc_requests: IntCounterVec,
    /// `magnum_rpc_request_duration_seconds{method, kind}`.
    pub rpc_latency: HistogramVec,
    /// `magnum_conductor_handler_duration_seconds{method, outcome}`.
    pub handler_latency: HistogramVec,
    /// `magnum_driver_call_duration_seconds{driver, operation, outcome}`.
    pub driver_latency: HistogramVec,
    /// `magnum_health_polls_total{driver, health}`: what each status poll said of health.
    pub health_polls: IntCounterVec,
    /// `magnum_notifications_total{outcome}`: sent, or failed (and kept for a retry).
    pub notifications: IntCounterVec,
    /// `magnum_notification_backlog`: notifications stored and not yet sent (scrape time).
    pub notification_backlog: IntGauge,
    /// `magnum_clusters{status}`, `magnum_nodegroups{status}` (set at scrape time).
    pub clusters: IntGaugeVec,
    pub nodegroups: IntGaugeVec,
    /// `magnum_db_pool_connections{state}` (in_use, idle) and `magnum_db_pool_max`.
    pub db_pool: IntGaugeVec,
    pub db_pool_max: IntGauge,
    /// `magnum_conductors{state}` (up, down): the heartbeat rows as `coe service list` judges
    /// them, so one scrape target tells of every conductor (set at scrape time).
    pub conductors: IntGaugeVec,
}

fn counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    let buckets = vec![
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ];
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)?;
    registry.register(Box::new(h.clone()))?;
    Ok(h)
}

fn gauge(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntGaugeVec> {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

fn single_gauge(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntGauge> {
    let g = IntGauge::new(name, help)?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

impl Metrics {
    fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        Ok(Self {
            api_requests: counter(
                &registry,
                "magnum_api_requests_total",
                "API requests answered, by method, route and status.",
                &["method", "route", "status"],
            )?,
            api_latency: histogram(
                &registry,
                "magnum_api_request_duration_seconds",
                "Time to answer an API request.",
                &["method", "route"],
            )?,
            rpc_requests: counter(
                &registry,
                "magnum_rpc_requests_total",
                "RPC calls and casts sent to the conductor, by outcome.",
                &["method", "kind", "outcome"],
            )?,
            rpc_latency: histogram(
                &registry,
                "magnum_rpc_request_duration_seconds",
                "Time until a call's reply or a cast's hand-over.",
                &["method", "kind"],
            )?,
            handler_latency: histogram(
                &registry,
                "magnum_conductor_handler_duration_seconds",
                "Time a conductor handler took, by outcome.",
                &["method", "outcome"],
            )?,
            driver_latency: histogram(
                &registry,
                "magnum_driver_call_duration_seconds",
                "Time a driver call took, by driver, operation and outcome.",
                &["driver", "operation", "outcome"],
            )?,
            health_polls: counter(
                &registry,
                "magnum_health_polls_total",
                "Status polls by the health they reported (unchanged: none; error: the poll failed).",
                &["driver", "health"],
            )?,
            notifications: counter(
                &registry,
                "magnum_notifications_total",
                "Notifications handed to the broker, by outcome.",
                &["outcome"],
            )?,
            notification_backlog: single_gauge(
                &registry,
                "magnum_notification_backlog",
                "Notifications stored and not yet confirmed by the broker.",
            )?,
            db_pool: gauge(
                &registry,
                "magnum_db_pool_connections",
                "Database connections of this process's pool, in use or idle.",
                &["state"],
            )?,
            db_pool_max: single_gauge(
                &registry,
                "magnum_db_pool_max",
                "The most connections the pool may open.",
            )?,
            clusters: gauge(
                &registry,
                "magnum_clusters",
                "Clusters by status.",
                &["status"],
            )?,
            nodegroups: gauge(
                &registry,
                "magnum_nodegroups",
                "Nodegroups by status.",
                &["status"],
            )?,
            conductors: gauge(
                &registry,
                "magnum_conductors",
                "Conductors by state: up when their heartbeat is within service_down_time.",
                &["state"],
            )?,
            registry,
        })
    }

    /// Sets the row gauges from `(status, count)` pairs (an empty status is a NULL one).
    pub fn set_status_counts(&self, clusters: &[(String, i64)], nodegroups: &[(String, i64)]) {
        self.clusters.reset();
        for (status, n) in clusters {
            self.clusters.with_label_values(&[status.as_str()]).set(*n);
        }
        self.nodegroups.reset();
        for (status, n) in nodegroups {
            self.nodegroups
                .with_label_values(&[status.as_str()])
                .set(*n);
        }
    }

    /// Sets the conductor gauges; both states are always present, so a rule can compare them.
    pub fn set_conductors(&self, up: i64, down: i64) {
        self.conductors.with_label_values(&["up"]).set(up);
        self.conductors.with_label_values(&["down"]).set(down);
    }

    /// Sets the pool gauges from `(open, idle, most allowed)`.
    pub fn set_db_pool(&self, open: u32, idle: u32, max: u32) {
        self.db_pool
            .with_label_values(&["in_use"])
            .set(i64::from(open.saturating_sub(idle)));
        self.db_pool
            .with_label_values(&["idle"])
            .set(i64::from(idle));
        self.db_pool_max.set(i64::from(max));
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// The process's metrics (`None` only if the constant definitions above were refused).
pub fn metrics() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    METRICS.get_or_init(|| Metrics::new().ok()).as_ref()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn records_and_renders() {
        let m = metrics().unwrap();
        m.api_requests
            .with_label_values(&["GET", "/v1/clusters", "200"])
            .inc();
        m.clusters.with_label_values(&["CREATE_COMPLETE"]).set(3);
        let text = m.render();
        assert!(
            text.contains(
                r#"magnum_api_requests_total{method="GET",route="/v1/clusters",status="200"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"magnum_clusters{status="CREATE_COMPLETE"} 3"#),
            "{text}"
        );
    }
}
