//! Named background workers (the heartbeat, the status sync) under one supervisor, so a
//! process can see how each is doing and stop them all cleanly at shutdown.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinError, JoinHandle};

/// How long [`Workers::shutdown`] waits for the workers to stop before aborting them.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// Why a worker ended before it was asked to stop.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Magnum(#[from] magnum_core::Error),
    #[error("{0}")]
    Failed(String),
}

/// A long-running task with a name. `run` should return soon after `ctx.stopped()`
/// completes, leaving no write half-done; one that does not is aborted after the grace period.
pub trait Worker: Send + 'static {
    fn name(&self) -> &'static str;
    fn run(self, ctx: WorkerContext) -> impl Future<Output = Result<(), WorkerError>> + Send;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerState {
    /// Started, not yet through its first pass.
    Starting,
    Running,
    /// Returned after being asked to stop (or on its own, without an error).
    Stopped,
    /// Returned an error or panicked; `last_error` says why.
    Failed,
    /// Did not stop within the grace period and was cancelled.
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastError {
    pub at: DateTime<Utc>,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerStatus {
    pub name: &'static str,
    pub state: WorkerState,
    /// The latest error, also a passing one the worker survived (a missed heartbeat).
    pub last_error: Option<LastError>,
}

type Shared = Arc<Mutex<WorkerStatus>>;

fn update(status: &Shared, f: impl FnOnce(&mut WorkerStatus)) {
    // A poisoned lock only means a panic mid-update of plain data; the data is still usable.
    f(&mut status.lock().unwrap_or_else(PoisonError::into_inner));
}

fn snapshot(status: &Shared) -> WorkerStatus {
    status
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// A worker's view of its supervisor: the stop signal and where to report how it is doing.
pub struct WorkerContext {
    stop: watch::Receiver<bool>,
    status: Shared,
}

impl WorkerContext {
    /// Completes once the supervisor asks the workers to stop. If the supervisor was dropped
    /// without a shutdown, it never completes: the workers are detached, as a dropped
    /// `JoinHandle` detaches its task.
    pub async fn stopped(&self) {
        let mut stop = self.stop.clone();
        if stop.wait_for(|s| *s).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The worker is through its first pass.
    pub fn running(&self) {
        update(&self.status, |s| {
            if s.state == WorkerState::Starting {
                s.state = WorkerState::Running;
            }
        });
    }

    /// Records an error the worker survives; it keeps running.
    pub fn error(&self, message: impl ToString) {
        let e = LastError {
            at: Utc::now(),
            message: message.to_string(),
        };
        update(&self.status, |s| s.last_error = Some(e));
    }
}

struct Supervised {
    status: Shared,
    /// Watches the worker's task and records how it ended.
    monitor: JoinHandle<()>,
    /// The worker's own task, to cancel it after the grace period.
    task: AbortHandle,
}

/// Starts workers, shows their statuses and stops them. Dropping it without
/// [`Workers::shutdown`] leaves the workers running.
pub struct Workers {
    stop: watch::Sender<bool>,
    workers: Vec<Supervised>,
    grace: Duration,
}

impl Default for Workers {
    fn default() -> Self {
        Self::new()
    }
}

impl Workers {
    pub fn new() -> Self {
        Self {
            stop: watch::Sender::new(false),
            workers: Vec::new(),
            grace: DEFAULT_GRACE,
        }
    }

    /// How long `shutdown` waits before aborting (default [`DEFAULT_GRACE`]).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Spawns `worker` on the current Tokio runtime.
    pub fn start<W: Worker>(&mut self, worker: W) {
        let name = worker.name();
        let status = Arc::new(Mutex::new(WorkerStatus {
            name,
            state: WorkerState::Starting,
            last_error: None,
        }));
        let ctx = WorkerContext {
            stop: self.stop.subscribe(),
            status: status.clone(),
        };
        // A task of its own, so a panic is seen by the monitor instead of killing it.
        let task = tokio::spawn(worker.run(ctx));
        let abort = task.abort_handle();
        let shared = status.clone();
        let monitor = tokio::spawn(async move { finished(name, &shared, task.await) });
        self.workers.push(Supervised {
            status,
            monitor,
            task: abort,
        });
    }

    /// How every worker is doing now, in start order.
    pub fn statuses(&self) -> Vec<WorkerStatus> {
        self.workers.iter().map(|w| snapshot(&w.status)).collect()
    }

    /// Asks every worker to stop, waits up to the grace period, aborts the ones still
    /// running, logs and returns the final statuses.
    pub async fn shutdown(self) -> Vec<WorkerStatus> {
        self.stop.send_replace(true);
        let deadline = tokio::time::Instant::now() + self.grace;
        let mut finals = Vec::with_capacity(self.workers.len());
        for mut w in self.workers {
            if tokio::time::timeout_at(deadline, &mut w.monitor)
                .await
                .is_err()
            {
                tracing::warn!(
                    worker = snapshot(&w.status).name,
                    grace = ?self.grace,
                    "worker did not stop in time; aborted"
                );
                w.task.abort();
                let _ = w.monitor.await;
            }
            let s = snapshot(&w.status);
            tracing::info!(
                worker = s.name,
                state = ?s.state,
                last_error = s.last_error.as_ref().map(|e| format!("{} at {}", e.message, e.at)),
                "worker ended"
            );
            finals.push(s);
        }
        finals
    }
}

/// Records how a worker's task ended.
fn finished(
    name: &'static str,
    status: &Shared,
    outcome: Result<Result<(), WorkerError>, JoinError>,
) {
    let (state, error) = match outcome {
        Ok(Ok(())) => (WorkerState::Stopped, None),
        Ok(Err(e)) => (WorkerState::Failed, Some(e.to_string())),
        Err(e) if e.is_panic() => (WorkerState::Failed, Some("panicked".to_owned())),
        Err(_) => (WorkerState::Aborted, None),
    };
    if let Some(e) = &error {
        tracing::error!(worker = name, error = %e, "worker failed");
    }
    update(status, |s| {
        s.state = state;
        if let Some(message) = error {
            s.last_error = Some(LastError {
                at: Utc::now(),
                message,
            });
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    struct Cooperative;
    impl Worker for Cooperative {
        fn name(&self) -> &'static str {
            "cooperative"
        }
        async fn run(self, ctx: WorkerContext) -> Result<(), WorkerError> {
            ctx.running();
            ctx.stopped().await;
            Ok(())
        }
    }

    struct Stubborn;
    impl Worker for Stubborn {
        fn name(&self) -> &'static str {
            "stubborn"
        }
        async fn run(self, ctx: WorkerContext) -> Result<(), WorkerError> {
            ctx.running();
            std::future::pending::<()>().await;
            Ok(())
        }
    }

    struct Failing;
    impl Worker for Failing {
        fn name(&self) -> &'static str {
            "failing"
        }
        async fn run(self, ctx: WorkerContext) -> Result<(), WorkerError> {
            ctx.error("first attempt missed");
            Err(WorkerError::Failed("database gone".into()))
        }
    }

    struct Panicking;
    impl Worker for Panicking {
        fn name(&self) -> &'static str {
            "panicking"
        }
        async fn run(self, _ctx: WorkerContext) -> Result<(), WorkerError> {
            panic!("boom")
        }
    }

    async fn settle(workers: &Workers, name: &str, state: WorkerState) -> WorkerStatus {
        for _ in 0..200 {
            if let Some(s) = workers
                .statuses()
                .into_iter()
                .find(|s| s.name == name && s.state == state)
            {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{name} never became {state:?}: {:?}", workers.statuses());
    }

    #[tokio::test]
    async fn cooperative_worker_stops_and_reports_stopped() {
        let mut workers = Workers::new();
        workers.start(Cooperative);
        settle(&workers, "cooperative", WorkerState::Running).await;
        let started = std::time::Instant::now();
        let finals = workers.shutdown().await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            finals,
            [WorkerStatus {
                name: "cooperative",
                state: WorkerState::Stopped,
                last_error: None
            }]
        );
    }

    #[tokio::test]
    async fn worker_ignoring_stop_is_aborted_after_the_grace_period() {
        let mut workers = Workers::new().with_grace(Duration::from_millis(300));
        workers.start(Stubborn);
        workers.start(Cooperative);
        settle(&workers, "stubborn", WorkerState::Running).await;
        let started = tokio::time::Instant::now();
        let finals = workers.shutdown().await;
        assert!(started.elapsed() >= Duration::from_millis(300));
        let states: Vec<_> = finals.iter().map(|s| (s.name, s.state)).collect();
        assert_eq!(
            states,
            [
                ("stubborn", WorkerState::Aborted),
                ("cooperative", WorkerState::Stopped)
            ]
        );
    }

    #[tokio::test]
    async fn failing_worker_reports_its_error() {
        let mut workers = Workers::new();
        workers.start(Failing);
        workers.start(Panicking);
        let s = settle(&workers, "failing", WorkerState::Failed).await;
        let e = s.last_error.unwrap();
        assert_eq!(e.message, "database gone");
        assert!(Utc::now() - e.at < chrono::Duration::seconds(5));
        let s = settle(&workers, "panicking", WorkerState::Failed).await;
        assert_eq!(s.last_error.unwrap().message, "panicked");
        let finals = workers.shutdown().await;
        assert!(finals.iter().all(|s| s.state == WorkerState::Failed));
    }

    #[tokio::test]
    async fn survived_errors_are_recorded_while_running() {
        struct Flaky;
        impl Worker for Flaky {
            fn name(&self) -> &'static str {
                "flaky"
            }
            async fn run(self, ctx: WorkerContext) -> Result<(), WorkerError> {
                ctx.error("heartbeat not recorded");
                ctx.running();
                ctx.stopped().await;
                Ok(())
            }
        }
        let mut workers = Workers::new();
        workers.start(Flaky);
        let s = settle(&workers, "flaky", WorkerState::Running).await;
        assert_eq!(s.last_error.unwrap().message, "heartbeat not recorded");
        let finals = workers.shutdown().await;
        assert_eq!(finals[0].state, WorkerState::Stopped);
    }
}
