//! The API side: typed methods that become transport messages.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ConductorApi;
use crate::messages::{method, *};
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

    fn message(ctx: &RequestContext, method: &str, args: &impl Serialize) -> Result<Message> {
        let args = serde_json::to_value(args)
            .map_err(|e| Error::Internal(format!("cannot encode {method}: {e}")))?;
        Ok(Message {
            context: ctx.clone(),
            method: method.to_owned(),
            args,
        })
    }

    async fn cast(&self, ctx: &RequestContext, method: &str, args: &impl Serialize) -> Result<()> {
        let msg = Self::message(ctx, method, args)?;
        let started = std::time::Instant::now();
        let out = self.transport.cast(msg).await.map_err(Error::from);
        record(method, "cast", started, out.is_ok());
        out
    }

    async fn call<T: DeserializeOwned>(
        &self,
        ctx: &RequestContext,
        method: &str,
        args: &impl Serialize,
    ) -> Result<T> {
        let msg = Self::message(ctx, method, args)?;
        let started = std::time::Instant::now();
        let reply = self.transport.call(msg, self.timeout).await;
        record(method, "call", started, reply.is_ok());
        serde_json::from_value(reply?)
            .map_err(|e| RpcError::Malformed(format!("reply to {method}: {e}")).into())
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
    async fn cluster_create(&self, ctx: &RequestContext, req: ClusterCreate) -> Result<()> {
        self.cast(ctx, method::CLUSTER_CREATE, &req).await
    }
    async fn cluster_update(&self, ctx: &RequestContext, req: ClusterUpdate) -> Result<()> {
        self.cast(ctx, method::CLUSTER_UPDATE, &req).await
    }
    async fn cluster_delete(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()> {
        self.cast(ctx, method::CLUSTER_DELETE, &req).await
    }
    async fn cluster_resize(&self, ctx: &RequestContext, req: ClusterResize) -> Result<()> {
        self.cast(ctx, method::CLUSTER_RESIZE, &req).await
    }
    async fn cluster_upgrade(&self, ctx: &RequestContext, req: ClusterUpgrade) -> Result<()> {
        self.call::<Value>(ctx, method::CLUSTER_UPGRADE, &req)
            .await
            .map(drop)
    }
    async fn nodegroup_create(&self, ctx: &RequestContext, req: NodegroupRef) -> Result<()> {
        self.cast(ctx, method::NODEGROUP_CREATE, &req).await
    }
    async fn nodegroup_update(&self, ctx: &RequestContext, req: NodegroupUpdate) -> Result<()> {
        self.cast(ctx, method::NODEGROUP_UPDATE, &req).await
    }
    async fn nodegroup_delete(&self, ctx: &RequestContext, req: NodegroupRef) -> Result<()> {
        self.cast(ctx, method::NODEGROUP_DELETE, &req).await
    }
    async fn credential_rotate(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()> {
        self.call::<Value>(ctx, method::CREDENTIAL_ROTATE, &req)
            .await
            .map(drop)
    }
    async fn sign_certificate(&self, ctx: &RequestContext, req: SignCertificate) -> Result<String> {
        self.call(ctx, method::SIGN_CERTIFICATE, &req).await
    }
    async fn get_ca_certificate(
        &self,
        ctx: &RequestContext,
        req: GetCaCertificate,
    ) -> Result<String> {
        self.call(ctx, method::GET_CA_CERTIFICATE, &req).await
    }
    async fn rotate_ca_certificate(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()> {
        self.call::<Value>(ctx, method::ROTATE_CA_CERTIFICATE, &req)
            .await
            .map(drop)
    }
    async fn ping_conductor(&self, ctx: &RequestContext) -> Result<bool> {
        self.call(
            ctx,
            method::PING_CONDUCTOR,
            &Value::Object(Default::default()),
        )
        .await
    }
}
