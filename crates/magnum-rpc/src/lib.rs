//! The conductor's RPC surface (spec/conductor.md §1.5) behind one trait, [`ConductorApi`].
//!
//! The API holds an `Arc<dyn ConductorApi>` that is an [`RpcClient`] over some
//! [`Transport`]; the conductor implements the same trait, and [`dispatch`] turns a
//! transport [`Message`] back into a call on it. Every message crosses the transport as JSON
//! even in-process, so a new transport (RabbitMQ) changes neither side's handlers.

mod client;
mod dispatch;
mod inproc;
pub mod messages;
pub mod oslo;
mod transport;

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};

pub use client::RpcClient;
pub use dispatch::dispatch;
pub use inproc::InProcess;
pub use messages::*;
pub use transport::{Message, RemoteError, RpcError, Transport};

/// The conductor's RPC surface: one [`Request`] in, one [`Reply`] out. Implemented by the
/// client (which sends it over a [`Transport`]), by the conductor (which handles it) and by
/// test fakes; the typed methods below are what callers use, written once, here.
#[async_trait]
pub trait ConductorApi: Send + Sync {
    /// Casts return once the message is handed over; calls return the conductor's answer
    /// (or its error, carried over as `Error::Remote`).
    async fn handle(&self, ctx: &RequestContext, req: Request) -> Result<Reply>;

    /// Cast. The cluster row and its default nodegroups already exist (CREATE_IN_PROGRESS).
    async fn cluster_create(&self, ctx: &RequestContext, req: ClusterCreate) -> Result<()> {
        self.handle(ctx, Request::ClusterCreate(req))
            .await
            .map(drop)
    }
    /// Cast. PATCH of node_count and/or health.
    async fn cluster_update(&self, ctx: &RequestContext, req: ClusterUpdate) -> Result<()> {
        self.handle(ctx, Request::ClusterUpdate(req))
            .await
            .map(drop)
    }
    /// Cast.
    async fn cluster_delete(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()> {
        self.handle(ctx, Request::ClusterDelete(req))
            .await
            .map(drop)
    }
    /// Cast.
    async fn cluster_resize(&self, ctx: &RequestContext, req: ClusterResize) -> Result<()> {
        self.handle(ctx, Request::ClusterResize(req))
            .await
            .map(drop)
    }
    /// Call: the API answers 400 when the conductor refuses.
    async fn cluster_upgrade(&self, ctx: &RequestContext, req: ClusterUpgrade) -> Result<()> {
        self.handle(ctx, Request::ClusterUpgrade(req))
            .await
            .map(drop)
    }
    /// Cast. The nodegroup row already exists (CREATE_IN_PROGRESS).
    async fn nodegroup_create(&self, ctx: &RequestContext, req: NodegroupRef) -> Result<()> {
        self.handle(ctx, Request::NodegroupCreate(req))
            .await
            .map(drop)
    }
    /// Cast.
    async fn nodegroup_update(&self, ctx: &RequestContext, req: NodegroupUpdate) -> Result<()> {
        self.handle(ctx, Request::NodegroupUpdate(req))
            .await
            .map(drop)
    }
    /// Cast.
    async fn nodegroup_delete(&self, ctx: &RequestContext, req: NodegroupRef) -> Result<()> {
        self.handle(ctx, Request::NodegroupDelete(req))
            .await
            .map(drop)
    }
    /// Call.
    async fn credential_rotate(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()> {
        self.handle(ctx, Request::CredentialRotate(req))
            .await
            .map(drop)
    }
    /// Call: returns the signed certificate PEM.
    async fn sign_certificate(&self, ctx: &RequestContext, req: SignCertificate) -> Result<String> {
        pem(self.handle(ctx, Request::SignCertificate(req)).await?)
    }
    /// Call: returns the CA certificate PEM.
    async fn get_ca_certificate(
        &self,
        ctx: &RequestContext,
        req: GetCaCertificate,
    ) -> Result<String> {
        pem(self.handle(ctx, Request::GetCaCertificate(req)).await?)
    }
    /// Call.
    async fn rotate_ca_certificate(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()> {
        self.handle(ctx, Request::RotateCaCertificate(req))
            .await
            .map(drop)
    }
    /// Call: true when a conductor is there to answer.
    async fn ping_conductor(&self, ctx: &RequestContext) -> Result<bool> {
        match self.handle(ctx, Request::PingConductor).await? {
            Reply::Alive(b) => Ok(b),
            other => Err(Error::Internal(format!(
                "ping_conductor answered {other:?}"
            ))),
        }
    }
}

fn pem(reply: Reply) -> Result<String> {
    match reply {
        Reply::Pem(p) => Ok(p),
        other => Err(Error::Internal(format!(
            "expected a certificate, got {other:?}"
        ))),
    }
}
