//! The conductor's row in `magnum_service`, refreshed every `[conductor] report_interval`
//! with a single atomic UPDATE (upstream raced a cached counter; conductor.md §6).

use std::sync::Arc;

use crate::state::{BINARY, Inner};
use crate::worker::{Worker, WorkerContext, WorkerError};

pub(crate) struct Heartbeat(pub(crate) Arc<Inner>);

impl Worker for Heartbeat {
    fn name(&self) -> &'static str {
        "heartbeat"
    }

    async fn run(self, ctx: WorkerContext) -> Result<(), WorkerError> {
        let inner = &self.0;
        let mut tick = tokio::time::interval(inner.settings.report_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Stop only between beats, so an UPDATE in flight always completes.
            tokio::select! {
                _ = tick.tick() => {}
                () = ctx.stopped() => return Ok(()),
            }
            let host = Some(inner.settings.host.as_str());
            match inner
                .db
                .magnum_services()
                .report_state_up(host, BINARY)
                .await
            {
                Ok(_) => tracing::debug!(host = %inner.settings.host, "heartbeat"),
                Err(e) => {
                    tracing::warn!(error = %e, "heartbeat not recorded");
                    ctx.error(format!("heartbeat not recorded: {e}"));
                }
            }
            ctx.running();
        }
    }
}
