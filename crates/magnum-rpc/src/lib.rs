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
use magnum_core::{RequestContext, Result};

pub use client::RpcClient;
pub use dispatch::dispatch;
pub use inproc::InProcess;
pub use messages::*;
pub use transport::{Message, RemoteError, RpcError, Transport};

/// Every conductor method the API uses. Casts return once the message is handed over;
/// calls return the conductor's answer (or its error, carried over as `Error::Remote`).
#[async_trait]
pub trait ConductorApi: Send + Sync {
    /// Cast. The cluster row and its default nodegroups already exist (CREATE_IN_PROGRESS).
    async fn cluster_create(&self, ctx: &RequestContext, req: ClusterCreate) -> Result<()>;
    /// Cast. PATCH of node_count and/or health.
    async fn cluster_update(&self, ctx: &RequestContext, req: ClusterUpdate) -> Result<()>;
    /// Cast.
    async fn cluster_delete(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()>;
    /// Cast.
    async fn cluster_resize(&self, ctx: &RequestContext, req: ClusterResize) -> Result<()>;
    /// Call: the API answers 400 when the conductor refuses.
    async fn cluster_upgrade(&self, ctx: &RequestContext, req: ClusterUpgrade) -> Result<()>;
    /// Cast. The nodegroup row already exists (CREATE_IN_PROGRESS).
    async fn nodegroup_create(&self, ctx: &RequestContext, req: NodegroupRef) -> Result<()>;
    /// Cast.
    async fn nodegroup_update(&self, ctx: &RequestContext, req: NodegroupUpdate) -> Result<()>;
    /// Cast.
    async fn nodegroup_delete(&self, ctx: &RequestContext, req: NodegroupRef) -> Result<()>;
    /// Call.
    async fn credential_rotate(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()>;
    /// Call: returns the signed certificate PEM.
    async fn sign_certificate(&self, ctx: &RequestContext, req: SignCertificate) -> Result<String>;
    /// Call: returns the CA certificate PEM.
    async fn get_ca_certificate(
        &self,
        ctx: &RequestContext,
        req: GetCaCertificate,
    ) -> Result<String>;
    /// Call.
    async fn rotate_ca_certificate(&self, ctx: &RequestContext, req: ClusterRef) -> Result<()>;
    /// Call: true when a conductor is there to answer.
    async fn ping_conductor(&self, ctx: &RequestContext) -> Result<bool>;
}
