//! Health as the management cluster sees it: the fallback when a workload cluster's own API
//! does not answer (the conductor's health worker asks the workload API first).

use magnum_core::status::ClusterHealthStatus as H;
use serde_json::{Map, Value, json};

use super::status::is_condition_true;
use magnum_driver::HealthReport;

/// HEALTHY when the control plane is available and every Machine's node is healthy.
pub fn from_management(kcp: &Value, machines: &[Value]) -> HealthReport {
    let mut reason = Map::new();
    let api = is_condition_true(kcp, "Available") || is_condition_true(kcp, "Ready");
    reason.insert("api".into(), json!(if api { "ok" } else { "nok" }));
    let mut all = api;
    for m in machines {
        let node = m["status"]["nodeRef"]["name"]
            .as_str()
            .or_else(|| m["metadata"]["name"].as_str())
            .unwrap_or_default();
        let healthy = is_condition_true(m, "NodeHealthy");
        all &= healthy;
        reason.insert(
            format!("{node}.Ready"),
            json!(if healthy { "True" } else { "False" }),
        );
    }
    reason.insert("source".into(), json!("management cluster"));
    HealthReport {
        status: if all { H::Healthy } else { H::Unhealthy },
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(node: &str, healthy: bool) -> Value {
        json!({"metadata": {"name": format!("m-{node}")}, "status": {"nodeRef": {"name": node},
            "conditions": [{"type": "NodeHealthy", "status": if healthy {"True"} else {"False"}}]}})
    }

    #[test]
    fn healthy_needs_the_api_and_every_node() {
        let kcp = json!({"status": {"conditions": [{"type": "Available", "status": "True"}]}});
        let ok = from_management(&kcp, &[machine("n1", true), machine("n2", true)]);
        assert_eq!(ok.status, H::Healthy);
        assert_eq!(ok.reason["n1.Ready"], "True");
        assert_eq!(ok.reason["source"], "management cluster");
        let bad = from_management(&kcp, &[machine("n1", true), machine("n2", false)]);
        assert_eq!(bad.status, H::Unhealthy);
        assert_eq!(bad.reason["n2.Ready"], "False", "keyed by node name");
        let down = json!({"status": {"conditions": [{"type": "Available", "status": "False"}]}});
        let r = from_management(&down, &[machine("n1", true)]);
        assert_eq!((r.status, &r.reason["api"]), (H::Unhealthy, &json!("nok")));
    }
}
