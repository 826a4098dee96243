//! The `failure` of a reply (rpc-wire.md §10.2): a JSON string with the exception's class, module,
//! message, traceback, args and kwargs, as oslo.messaging's `serialize_remote_exception`
//! writes it and a Python client rebuilds it.

use magnum_core::ErrorKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::transport::{RemoteError, RpcError};

/// The only module whose classes a Python Magnum client re-raises as themselves.
pub const MAGNUM_EXCEPTION_MODULE: &str = "magnum.common.exception";
/// oslo.messaging's dispatcher errors (NoSuchMethod, UnsupportedVersion).
pub const DISPATCHER_MODULE: &str = "oslo_messaging.rpc.dispatcher";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub class: String,
    pub module: String,
    #[serde(default)]
    pub message: String,
    /// Empty, or starting with `Traceback (most recent call last):\n` (the Python API cuts
    /// the faultstring there).
    #[serde(default)]
    pub tb: Vec<String>,
    #[serde(default)]
    pub args: Vec<Value>,
    #[serde(default)]
    pub kwargs: Map<String, Value>,
}

/// Upstream's class-level `code` of the Magnum exceptions a conductor raises (§10.2), for
/// failures that carry no `kwargs.code`.
fn class_code(class: &str) -> Option<u16> {
    Some(match class {
        "ClusterNotFound"
        | "ClusterTemplateNotFound"
        | "NodeGroupNotFound"
        | "X509KeyPairNotFound"
        | "FederationNotFound"
        | "QuotaNotFound"
        | "MagnumServiceNotFound"
        | "ObjectNotFound"
        | "ResourceNotFound"
        | "ProjectNotFound"
        | "KeyPairNotFound" => 404,
        "InvalidIdentity"
        | "InvalidParameterValue"
        | "Invalid"
        | "InvalidUUID"
        | "InvalidName"
        | "NotSupported"
        | "OperationInProgress"
        | "NgOperationInProgress"
        | "ClusterTemplateReferenced"
        | "DeletingDefaultNGNotSupported"
        | "MasterNGResizeNotSupported"
        | "MasterNGSizeInvalid"
        | "ZeroNodeCountNotSupported"
        | "ClusterUpgradeNotSupported"
        | "CreateMasterNodeGroup"
        | "NGResizeOutBounds"
        | "InvalidCsr"
        | "CertificateValidationError"
        | "ImageNotFound"
        | "FlavorNotFound"
        | "VolumeTypeNotFound"
        | "OSDistroFieldNotFound"
        | "FixedNetworkNotFound"
        | "FixedSubnetNotFound"
        | "ExternalNetworkNotFound" => 400,
        "NotAuthorized"
        | "PolicyNotAuthorized"
        | "AuthorizationFailure"
        | "ResourceLimitExceeded"
        | "ClusterTemplatePublishDenied"
        | "ImageNotAuthorized" => 403,
        "Conflict"
        | "ClusterAlreadyExists"
        | "ClusterTemplateAlreadyExists"
        | "NodeGroupAlreadyExists"
        | "X509KeyPairAlreadyExists"
        | "QuotaAlreadyExists"
        | "FederationAlreadyExists"
        | "MagnumServiceAlreadyExists"
        | "MemberAlreadyExists"
        | "PreDeletionFailed"
        | "NodeGroupInvalidInput"
        | "InvalidClusterTemplateForUpgrade"
        | "ClusterAPIAddressUnavailable" => 409,
        _ => return None,
    })
}

/// Python's `%` formatting is applied to `args[0]` again when the exception is rebuilt.
fn double_percent(s: &str) -> String {
    s.replace('%', "%%")
}

/// The traceback a failure carries: only the line Python starts one with. Upstream's API cuts
/// an error's text at that line (its hook against leaking tracebacks); without it, the newline
/// oslo.messaging puts between message and traceback would stay in the answer.
fn traceback() -> Vec<String> {
    vec!["Traceback (most recent call last):\n".into()]
}

impl Failure {
    /// A Magnum exception from our error: upstream's class (or the closest of its kind),
    /// `args` = the final message, `kwargs` = format parameters plus `code`.
    pub fn from_remote(e: &RemoteError) -> Self {
        let class = e
            .class
            .clone()
            .unwrap_or_else(|| default_class(e.kind).to_owned());
        let mut kwargs: Map<String, Value> = e.params.iter().cloned().collect();
        kwargs.insert("code".into(), Value::from(e.kind.http_status()));
        Self {
            class,
            module: MAGNUM_EXCEPTION_MODULE.into(),
            message: e.message.clone(),
            tb: traceback(),
            args: vec![Value::String(double_percent(&e.message))],
            kwargs,
        }
    }

    /// Any transport error a handler produced, as the failure a caller receives.
    pub fn from_rpc_error(e: &RpcError) -> Self {
        match e {
            RpcError::Remote(r) => Self::from_remote(r),
            // Bad arguments: Python endpoints raise TypeError for wrong keyword arguments.
            RpcError::Malformed(m) => Self::builtin("TypeError", m),
            other => Self::from_remote(&RemoteError::new(other_kind(other), other.to_string())),
        }
    }

    /// A Python built-in exception (`builtins` module), rebuilt by any Python client.
    pub fn builtin(class: &str, message: &str) -> Self {
        Self {
            class: class.into(),
            module: "builtins".into(),
            message: message.into(),
            tb: traceback(),
            args: vec![Value::String(message.into())],
            kwargs: Map::new(),
        }
    }

    /// oslo's `NoSuchMethod`: no endpoint has the method (or it is private).
    pub fn no_such_method(method: &str) -> Self {
        let message = format!("Endpoint does not support RPC method {method}");
        Self {
            class: "NoSuchMethod".into(),
            module: DISPATCHER_MODULE.into(),
            message: message.clone(),
            tb: traceback(),
            args: vec![Value::String(message)],
            kwargs: Map::new(),
        }
    }

    /// oslo's `UnsupportedVersion`: the request's version or namespace is not served.
    pub fn unsupported_version(version: &str, method: Option<&str>) -> Self {
        let mut message = format!("Endpoint does not support RPC version {version}");
        if let Some(m) = method {
            message.push_str(&format!(". Attempted method: {m}"));
        }
        Self {
            class: "UnsupportedVersion".into(),
            module: DISPATCHER_MODULE.into(),
            message: message.clone(),
            tb: traceback(),
            args: vec![Value::String(message)],
            kwargs: Map::new(),
        }
    }

    /// The JSON text that goes in a reply's `failure`.
    pub fn to_json(&self) -> String {
        // A struct of strings and JSON values always serializes.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    pub fn parse(text: &str) -> Result<Self, RpcError> {
        serde_json::from_str(text)
            .map_err(|e| RpcError::Malformed(format!("unreadable failure in reply: {e}")))
    }

    /// The HTTP status a Python API would answer: `kwargs.code`, else the class's code,
    /// else 500.
    pub fn http_status(&self) -> u16 {
        self.kwargs
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .or_else(|| {
                (self.module == MAGNUM_EXCEPTION_MODULE)
                    .then(|| class_code(&self.class))
                    .flatten()
            })
            .unwrap_or(500)
    }

    /// What our caller sees: kind from the status, the message without traceback, the class
    /// and the format parameters kept.
    pub fn into_remote_error(self) -> RemoteError {
        let kind = ErrorKind::from_http_status(self.http_status());
        let params = self
            .kwargs
            .into_iter()
            .filter(|(k, _)| k != "code")
            .collect();
        let message = if self.message.is_empty() {
            self.args
                .first()
                .and_then(Value::as_str)
                .unwrap_or(&self.class)
                .to_owned()
        } else {
            self.message
        };
        RemoteError {
            kind,
            message,
            class: Some(self.class),
            params,
        }
    }
}

fn default_class(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Invalid => "Invalid",
        ErrorKind::Forbidden => "NotAuthorized",
        ErrorKind::NotFound => "ObjectNotFound",
        ErrorKind::Conflict => "Conflict",
        ErrorKind::Unavailable | ErrorKind::Internal => "MagnumException",
    }
}

fn other_kind(e: &RpcError) -> ErrorKind {
    match e {
        RpcError::Timeout(_) | RpcError::Unavailable(_) => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use magnum_core::Error;
    use serde_json::json;

    #[test]
    fn magnum_error_becomes_upstreams_exception() {
        let e = Error::ClusterNotFound {
            cluster: "7c9e".into(),
        };
        let f = Failure::from_remote(&RemoteError::from(&e));
        let v: Value = serde_json::from_str(&f.to_json()).unwrap();
        assert_eq!(
            v,
            json!({
                "class": "ClusterNotFound",
                "module": "magnum.common.exception",
                "message": "Cluster 7c9e could not be found.",
                "tb": ["Traceback (most recent call last):\n"],
                "args": ["Cluster 7c9e could not be found."],
                "kwargs": {"cluster": "7c9e", "code": 404}
            })
        );
        // Key order as oslo writes it.
        assert!(
            f.to_json()
                .starts_with(r#"{"class":"ClusterNotFound","module":"#)
        );
    }

    #[test]
    fn percent_is_doubled_only_in_args() {
        let e = Error::InvalidParameterValue {
            message: "cpu at 100%".into(),
        };
        let f = Failure::from_remote(&RemoteError::from(&e));
        assert_eq!(f.message, "cpu at 100%");
        assert_eq!(f.args, vec![json!("cpu at 100%%")]);
        assert_eq!(f.kwargs["code"], json!(400));
        assert_eq!(f.class, "InvalidParameterValue");
    }

    #[test]
    fn python_failures_map_to_kinds() {
        // §15.4, traceback shortened.
        let text = r#"{"class": "ClusterNotFound", "module": "magnum.common.exception", "message": "Cluster x could not be found.", "tb": ["Traceback (most recent call last):\n"], "args": ["Cluster x could not be found."], "kwargs": {"cluster": "x", "code": 404}}"#;
        let r = Failure::parse(text).unwrap().into_remote_error();
        assert_eq!(r.kind, ErrorKind::NotFound);
        assert_eq!(r.message, "Cluster x could not be found.");
        assert_eq!(r.class.as_deref(), Some("ClusterNotFound"));
        assert_eq!(r.params, vec![("cluster".to_owned(), json!("x"))]);

        // No code: by class.
        let f = Failure {
            kwargs: Map::new(),
            ..Failure::parse(text).unwrap()
        };
        assert_eq!(f.http_status(), 404);
        // Foreign classes are 500.
        assert_eq!(Failure::no_such_method("x").http_status(), 500);
        let ni = Failure::builtin("NotImplementedError", "");
        assert_eq!(ni.into_remote_error().kind, ErrorKind::Internal);
        // ImageNotFound is a 400 although it is a ResourceNotFound.
        let img = Failure {
            class: "ImageNotFound".into(),
            kwargs: Map::new(),
            ..Failure::parse(text).unwrap()
        };
        assert_eq!(img.into_remote_error().kind, ErrorKind::Invalid);
    }

    #[test]
    fn dispatcher_errors_read_like_oslos() {
        assert_eq!(
            Failure::unsupported_version("2.0", Some("m")).message,
            "Endpoint does not support RPC version 2.0. Attempted method: m"
        );
        assert_eq!(
            Failure::no_such_method("echo").message,
            "Endpoint does not support RPC method echo"
        );
    }
}
