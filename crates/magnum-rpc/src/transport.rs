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
    /// Upstream's exception class (e.g. `ClusterNotFound`), which oslo.messaging failures
    /// carry so Python peers re-raise the same exception.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The class's format parameters (oslo's failure `kwargs` without `code`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<(String, Value)>,
}

impl RemoteError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            class: None,
            params: Vec::new(),
        }
    }
}

impl From<&Error> for RemoteError {
    fn from(e: &Error) -> Self {
        // A remote error keeps the kind it had where it was raised.
        Self {
            kind: e.kind(),
            message: e.to_string(),
            class: Some(e.class_name().to_owned()),
            params: e
                .format_params()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), Value::String(v)))
                .collect(),
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
