//! The API side: typed methods that become transport messages.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};
use serde_json::Value;

use crate::ConductorApi;
use crate::messages::{Reply, Request};
use crate::transport::{Message, RpcError, Transport};

/// A [`ConductorApi`] that sends every method through a [`Transport`].
#[derive(Clone)]
pub struct RpcClient {
    transport: Arc<dyn Transport>,
    timeout: Duration,
}

impl RpcClient {
    /// `timeout` bounds every call (`[DEFAULT] rpc_response_timeout`).
    pub fn new(transport: Arc<dyn Transport>, timeout: Duration) -> Self {
        Self { transport, timeout }
    }

    fn message(ctx: &RequestContext, method: &str, args: Value) -> Message {
        Message {
            context: ctx.clone(),
            method: method.to_owned(),
            args,
        }
    }

    async fn cast(&self, ctx: &RequestContext, method: &str, args: Value) -> Result<()> {
        let msg = Self::message(ctx, method, args);
        let started = std::time::Instant::now();
        let out = self.transport.cast(msg).await.map_err(Error::from);
        record(method, "cast", started, out.is_ok());
        out
    }

    async fn call(&self, ctx: &RequestContext, method: &str, args: Value) -> Result<Value> {
        let msg = Self::message(ctx, method, args);
        let started = std::time::Instant::now();
        let reply = self.transport.call(msg, self.timeout).await;
        record(method, "call", started, reply.is_ok());
        Ok(reply?)
    }
}

fn record(method: &str, kind: &str, started: std::time::Instant, ok: bool) {
    if let Some(m) = magnum_core::metrics::metrics() {
        let outcome = if ok { "ok" } else { "error" };
        m.rpc_requests
            .with_label_values(&[method, kind, outcome])
            .inc();
        m.rpc_latency
            .with_label_values(&[method, kind])
            .observe(started.elapsed().as_secs_f64());
    }
}

#[async_trait]
impl ConductorApi for RpcClient {
    async fn handle(&self, ctx: &RequestContext, req: Request) -> Result<Reply> {
        let method = req.method();
        let args = req
            .args()
            .map_err(|e| Error::Internal(format!("cannot encode {method}: {e}")))?;
        if req.is_cast() {
            self.cast(ctx, method, args).await.map(|()| Reply::Done)
        } else {
            let v = self.call(ctx, method, args).await?;
            req.reply_from(v)
                .map_err(|e| RpcError::Malformed(format!("reply to {method}: {e}")).into())
        }
    }
}
