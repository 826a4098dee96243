//! The conductor side: a message becomes a call on a [`ConductorApi`] implementation.

use magnum_core::{Error, RequestContext, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ConductorApi;
use crate::messages::method;
use crate::transport::{Message, RemoteError, RpcError};

fn args<T: DeserializeOwned>(msg: &Message) -> Result<T, RpcError> {
    serde_json::from_value(msg.args.clone())
        .map_err(|e| RpcError::Malformed(format!("arguments of {}: {e}", msg.method)))
}

fn reply(r: Result<impl serde::Serialize>) -> Result<Value, RpcError> {
    match r {
        Ok(v) => serde_json::to_value(v).map_err(|e| RpcError::Malformed(e.to_string())),
        Err(e) => Err(RpcError::Remote(RemoteError::from(&e))),
    }
}

/// Runs `msg` on `handler`; the reply (or the handler's error) is what goes back on the wire.
pub async fn dispatch(handler: &dyn ConductorApi, msg: Message) -> Result<Value, RpcError> {
    let ctx: &RequestContext = &msg.context;
    match msg.method.as_str() {
        method::CLUSTER_CREATE => reply(handler.cluster_create(ctx, args(&msg)?).await),
        method::CLUSTER_UPDATE => reply(handler.cluster_update(ctx, args(&msg)?).await),
        method::CLUSTER_DELETE => reply(handler.cluster_delete(ctx, args(&msg)?).await),
        method::CLUSTER_RESIZE => reply(handler.cluster_resize(ctx, args(&msg)?).await),
        method::CLUSTER_UPGRADE => reply(handler.cluster_upgrade(ctx, args(&msg)?).await),
        method::NODEGROUP_CREATE => reply(handler.nodegroup_create(ctx, args(&msg)?).await),
        method::NODEGROUP_UPDATE => reply(handler.nodegroup_update(ctx, args(&msg)?).await),
        method::NODEGROUP_DELETE => reply(handler.nodegroup_delete(ctx, args(&msg)?).await),
        method::CREDENTIAL_ROTATE => reply(handler.credential_rotate(ctx, args(&msg)?).await),
        method::SIGN_CERTIFICATE => reply(handler.sign_certificate(ctx, args(&msg)?).await),
        method::GET_CA_CERTIFICATE => reply(handler.get_ca_certificate(ctx, args(&msg)?).await),
        method::ROTATE_CA_CERTIFICATE => {
            reply(handler.rotate_ca_certificate(ctx, args(&msg)?).await)
        }
        method::PING_CONDUCTOR => reply(handler.ping_conductor(ctx).await),
        other => Err(RpcError::Remote(RemoteError::from(&Error::Internal(
            format!("Endpoint does not support RPC method {other}"),
        )))),
    }
}
