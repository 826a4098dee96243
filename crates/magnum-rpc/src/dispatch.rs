//! The conductor side: a message becomes a call on a [`ConductorApi`] implementation.

use magnum_core::Error;
use serde_json::Value;

use crate::ConductorApi;
use crate::messages::Request;
use crate::transport::{Message, RemoteError, RpcError};

/// Runs `msg` on `handler`; the reply (or the handler's error) is what goes back on the wire.
pub async fn dispatch(handler: &dyn ConductorApi, msg: Message) -> Result<Value, RpcError> {
    let req = match Request::decode(&msg.method, msg.args) {
        Some(Ok(req)) => req,
        Some(Err(e)) => {
            return Err(RpcError::Malformed(format!(
                "arguments of {}: {e}",
                msg.method
            )));
        }
        None => {
            return Err(RpcError::Remote(RemoteError::from(&Error::Internal(
                format!("Endpoint does not support RPC method {}", msg.method),
            ))));
        }
    };
    match handler.handle(&msg.context, req).await {
        Ok(reply) => Ok(reply.into_value()),
        Err(e) => Err(RpcError::Remote(RemoteError::from(&e))),
    }
}
