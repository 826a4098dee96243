//! The transport of `magnumd serve`: API and conductor in one process.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::ConductorApi;
use crate::dispatch::dispatch;
use crate::transport::{Message, RpcError, Transport};

/// Delivers messages to a conductor in the same process. Casts run as tasks, at most
/// `max_concurrent` at a time (`[DEFAULT] executor_thread_pool_size`), like a conductor's
/// executor pool; calls run on the caller's task with the call timeout.
pub struct InProcess {
    handler: OnceLock<Arc<dyn ConductorApi>>,
    permits: Arc<Semaphore>,
}

impl InProcess {
    pub fn new(max_concurrent: usize) -> Self {
        Self {
            handler: OnceLock::new(),
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
        }
    }

    /// Connects the conductor; the API may be built first, as with a broker.
    pub fn connect(&self, handler: Arc<dyn ConductorApi>) {
        let _ = self.handler.set(handler);
    }

    fn handler(&self) -> Result<Arc<dyn ConductorApi>, RpcError> {
        self.handler
            .get()
            .cloned()
            .ok_or_else(|| RpcError::Unavailable("no conductor is running".into()))
    }

    /// Messages cross as JSON text, exactly as they would over a broker, so anything that
    /// does not round-trip fails here too.
    fn over_the_wire(msg: &Message) -> Result<Message, RpcError> {
        let text = serde_json::to_string(msg).map_err(|e| RpcError::Malformed(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| RpcError::Malformed(e.to_string()))
    }
}

#[async_trait]
impl Transport for InProcess {
    async fn call(&self, msg: Message, timeout: Duration) -> Result<Value, RpcError> {
        let handler = self.handler()?;
        let msg = Self::over_the_wire(&msg)?;
        match tokio::time::timeout(timeout, dispatch(handler.as_ref(), msg)).await {
            Ok(r) => r,
            Err(_) => Err(RpcError::Timeout(timeout)),
        }
    }

    async fn cast(&self, msg: Message) -> Result<(), RpcError> {
        let handler = self.handler()?;
        let msg = Self::over_the_wire(&msg)?;
        let permits = self.permits.clone();
        tokio::spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let method = msg.method.clone();
            let request_id = msg.context.request_id.clone();
            // A cast has nobody to answer; its failure is already recorded on the resource.
            if let Err(e) = dispatch(handler.as_ref(), msg).await {
                tracing::warn!(%method, request_id = request_id.as_deref(), error = %e, "cast failed");
            }
        });
        Ok(())
    }
}
