//! The conductor's row in `magnum_service`, refreshed every `[conductor] report_interval`
//! with a single atomic UPDATE (upstream raced a cached counter; conductor.md §6).

use crate::service::{BINARY, Conductor};

pub(crate) async fn run(c: Conductor) {
    let inner = &c.inner;
    let mut tick = tokio::time::interval(inner.settings.report_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let host = Some(inner.settings.host.as_str());
        match inner
            .db
            .magnum_services()
            .report_state_up(host, BINARY)
            .await
        {
            Ok(_) => tracing::debug!(host = %inner.settings.host, "heartbeat"),
            Err(e) => tracing::warn!(error = %e, "heartbeat not recorded"),
        }
    }
}
