//! What a transport moves: a method name, its JSON arguments and the caller's context.

use std::time::Duration;

use async_trait::async_trait;
use magnum_core::{Error, ErrorKind, RequestContext};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One RPC message. The context carries identities and roles only; tokens never travel.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Message {
    pub context: RequestContext,
    pub method: String,
    pub args: Value,
}

/// An error raised by the conductor, as it crosses the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteError {
    pub kind: ErrorKind,
    pub message: String,
}

impl From<&Error> for RemoteError {
    fn from(e: &Error) -> Self {
        // A remote error keeps the kind it had where it was raised.
        Self {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("{}", .0.message)]
    Remote(RemoteError),
    #[error("Timed out waiting for a reply from the conductor after {0:?}")]
    Timeout(Duration),
    #[error("Conductor unreachable: {0}")]
    Unavailable(String),
    #[error("Malformed RPC message: {0}")]
    Malformed(String),
}

impl From<RpcError> for Error {
    fn from(e: RpcError) -> Self {
        match e {
            RpcError::Remote(r) => Error::Remote {
                kind: r.kind,
                message: r.message,
            },
            RpcError::Timeout(_) | RpcError::Unavailable(_) => Error::Remote {
                kind: ErrorKind::Unavailable,
                message: e.to_string(),
            },
            RpcError::Malformed(m) => Error::Internal(format!("Malformed RPC message: {m}")),
        }
    }
}

/// Moves messages to a conductor. `call` waits for the answer up to `timeout`; `cast`
/// returns once the message is accepted for delivery.
#[async_trait]
pub trait Transport: Send + Sync {
    async fn call(&self, msg: Message, timeout: Duration) -> Result<Value, RpcError>;
    async fn cast(&self, msg: Message) -> Result<(), RpcError>;
}
