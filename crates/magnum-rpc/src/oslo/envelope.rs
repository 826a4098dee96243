//! Message bodies and properties (rpc-wire.md §6 to §10): the 2.0 envelope around the inner JSON,
//! requests with their `_context_*` keys, and replies.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::FieldTable;
use serde_json::{Map, Value};

use super::codec::WireRequest;
use super::failure::Failure;

pub const VERSION_KEY: &str = "oslo.version";
pub const MESSAGE_KEY: &str = "oslo.message";
pub const ENVELOPE_VERSION: &str = "2.0";
pub const CONTEXT_PREFIX: &str = "_context_";
pub const UNIQUE_ID: &str = "_unique_id";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvelopeError {
    #[error("body is not JSON: {0}")]
    NotJson(String),
    #[error("body is not a JSON object")]
    NotAnObject,
    #[error("unsupported envelope version {0:?}")]
    UnsupportedVersion(String),
    #[error("oslo.message is not a JSON object text: {0}")]
    BadInner(String),
}

/// A fresh uuid4 as 32 hex digits (`_unique_id`, `_msg_id`, reply queue names).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The properties every oslo message has (§6); calls add `expiration` = timeout in ms.
pub fn properties(expiration: Option<Duration>) -> BasicProperties {
    let p = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_content_encoding("utf-8".into())
        .with_delivery_mode(2)
        .with_priority(0)
        .with_headers(FieldTable::default());
    match expiration {
        Some(t) => p.with_expiration(t.as_millis().max(1).to_string().into()),
        None => p,
    }
}

/// `{"oslo.version": "2.0", "oslo.message": "<inner JSON text>"}`.
pub fn wrap(inner: &Map<String, Value>) -> Vec<u8> {
    // Maps of JSON values always serialize.
    let text = serde_json::to_string(inner).unwrap_or_else(|_| String::from("{}"));
    let mut outer = Map::new();
    outer.insert(VERSION_KEY.into(), Value::String(ENVELOPE_VERSION.into()));
    outer.insert(MESSAGE_KEY.into(), Value::String(text));
    serde_json::to_vec(&outer).unwrap_or_default()
}

/// `messaging` (v1) notifications: the inner message itself.
pub fn unwrapped(inner: &Map<String, Value>) -> Vec<u8> {
    serde_json::to_vec(inner).unwrap_or_default()
}

/// The inner message of a body: the envelope's, or the object itself when it lacks either
/// envelope key (format 1.0), as oslo's `deserialize_msg` does.
pub fn unwrap(body: &[u8]) -> Result<Map<String, Value>, EnvelopeError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| EnvelopeError::NotJson(e.to_string()))?;
    let Value::Object(mut outer) = v else {
        return Err(EnvelopeError::NotAnObject);
    };
    if !(outer.contains_key(VERSION_KEY) && outer.contains_key(MESSAGE_KEY)) {
        return Ok(outer);
    }
    let version = outer.get(VERSION_KEY).and_then(Value::as_str).unwrap_or("");
    if !envelope_version_ok(version) {
        return Err(EnvelopeError::UnsupportedVersion(version.to_owned()));
    }
    let Some(Value::String(text)) = outer.remove(MESSAGE_KEY) else {
        return Err(EnvelopeError::BadInner("not a string".into()));
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(EnvelopeError::BadInner("not an object".into())),
        Err(e) => Err(EnvelopeError::BadInner(e.to_string())),
    }
}

/// Same major as 2.0 and a minor no higher (oslo's `version_is_compatible("2.0", v)`).
fn envelope_version_ok(v: &str) -> bool {
    let mut parts = v.split('.');
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    matches!((major, minor), (Some(2), Some(0)))
}

/// The call-specific keys of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct CallKeys {
    pub msg_id: String,
    pub reply_q: String,
}

/// A request's inner message in Python's key order: `method`, `args`, [`_msg_id`,
/// `_reply_q`, `_timeout`], `_unique_id`, then the `_context_*` keys.
pub fn request(req: &WireRequest, call: Option<&CallKeys>, unique_id: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("method".into(), Value::String(req.method.clone()));
    m.insert("args".into(), Value::Object(req.args.clone()));
    if let Some(c) = call {
        m.insert("_msg_id".into(), Value::String(c.msg_id.clone()));
        m.insert("_reply_q".into(), Value::String(c.reply_q.clone()));
        // Magnum never asks for call-monitor heartbeats.
        m.insert("_timeout".into(), Value::Null);
    }
    m.insert(UNIQUE_ID.into(), Value::String(unique_id.to_owned()));
    for (k, v) in &req.context {
        m.insert(format!("{CONTEXT_PREFIX}{k}"), v.clone());
    }
    m
}

/// A request as a server receives it, the transport's keys popped (§8.2).
#[derive(Clone, Debug, PartialEq)]
pub struct IncomingRequest {
    pub method: Option<Value>,
    pub args: Option<Value>,
    pub namespace: Option<Value>,
    /// `None` when absent (oslo assumes "1.0"); `Some(Value::Null)` when sent as null.
    pub version: Option<Value>,
    pub msg_id: Option<String>,
    pub reply_q: Option<String>,
    /// `_timeout` in seconds: the client wants call-monitor heartbeats.
    pub client_timeout: Option<f64>,
    pub unique_id: Option<String>,
    pub context: Map<String, Value>,
}

impl IncomingRequest {
    pub fn from_inner(mut m: Map<String, Value>) -> Self {
        let mut context = Map::new();
        let keys: Vec<String> = m
            .keys()
            .filter(|k| k.starts_with(CONTEXT_PREFIX))
            .cloned()
            .collect();
        for k in keys {
            if let Some(v) = m.remove(&k) {
                context.insert(k[CONTEXT_PREFIX.len()..].to_owned(), v);
            }
        }
        let string = |v: Option<Value>| match v {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        Self {
            msg_id: string(m.remove("_msg_id")),
            reply_q: string(m.remove("_reply_q")),
            client_timeout: m.remove("_timeout").and_then(|v| v.as_f64()),
            unique_id: string(m.remove(UNIQUE_ID)),
            method: m.remove("method"),
            args: m.remove("args"),
            namespace: m.remove("namespace"),
            version: m.remove("version"),
            context,
        }
    }

    /// Whether the sender waits for a reply (and can receive one).
    pub fn reply_to(&self) -> Option<(&str, &str)> {
        match (&self.msg_id, &self.reply_q) {
            (Some(id), Some(q)) if !q.is_empty() => Some((id.as_str(), q.as_str())),
            _ => None,
        }
    }
}

/// A reply's inner message (§10.1): the final one, or a call-monitor heartbeat.
pub fn reply(
    msg_id: &str,
    result: Option<Value>,
    failure: Option<&Failure>,
    ending: bool,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("result".into(), result.unwrap_or(Value::Null));
    m.insert(
        "failure".into(),
        failure.map_or(Value::Null, |f| Value::String(f.to_json())),
    );
    m.insert("ending".into(), Value::Bool(ending));
    m.insert("_msg_id".into(), Value::String(msg_id.to_owned()));
    m.insert(UNIQUE_ID.into(), Value::String(new_id()));
    m
}

/// A reply as a client receives it.
#[derive(Clone, Debug, PartialEq)]
pub struct IncomingReply {
    pub msg_id: Option<String>,
    pub result: Value,
    pub failure: Option<String>,
    pub ending: bool,
}

impl IncomingReply {
    pub fn from_inner(mut m: Map<String, Value>) -> Self {
        Self {
            msg_id: match m.remove("_msg_id") {
                Some(Value::String(s)) => Some(s),
                _ => None,
            },
            result: m.remove("result").unwrap_or(Value::Null),
            failure: match m.remove("failure") {
                Some(Value::String(s)) => Some(s),
                // Some peers put the object itself; keep it readable.
                Some(v @ Value::Object(_)) => Some(v.to_string()),
                _ => None,
            },
            ending: m.get("ending").and_then(Value::as_bool).unwrap_or(false),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_spec_cast_frame() {
        // §15.1, context shortened.
        let body = br#"{"oslo.version": "2.0", "oslo.message": "{\"method\": \"cluster_delete\", \"args\": {\"uuid\": \"7c9e6679-7425-40de-944b-e07fc1f90ae7\"}, \"_unique_id\": \"feed0003000040008000000000000003\", \"_context_user\": \"u\", \"_context_roles\": [\"member\", \"reader\"], \"_context_is_admin\": false}"}"#;
        let r = IncomingRequest::from_inner(unwrap(body).unwrap());
        assert_eq!(r.method, Some(json!("cluster_delete")));
        assert_eq!(
            r.args,
            Some(json!({"uuid": "7c9e6679-7425-40de-944b-e07fc1f90ae7"}))
        );
        assert_eq!(
            r.unique_id.as_deref(),
            Some("feed0003000040008000000000000003")
        );
        assert_eq!(r.reply_to(), None);
        assert_eq!(r.context["roles"], json!(["member", "reader"]));
        assert_eq!(r.context.len(), 3);
        assert_eq!(r.version, None);
    }

    #[test]
    fn request_keys_in_pythons_order_and_envelope_round_trip() {
        let mut context = Map::new();
        context.insert("project_id".into(), json!("p"));
        let req = WireRequest {
            method: "sign_certificate".into(),
            args: json!({"a": 1}).as_object().unwrap().clone(),
            context,
        };
        let call = CallKeys {
            msg_id: "m".into(),
            reply_q: "reply_q".into(),
        };
        let inner = request(&req, Some(&call), "u");
        let keys: Vec<&str> = inner.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "method",
                "args",
                "_msg_id",
                "_reply_q",
                "_timeout",
                "_unique_id",
                "_context_project_id"
            ]
        );
        let body = wrap(&inner);
        let outer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(outer["oslo.version"], "2.0");
        assert!(outer["oslo.message"].is_string());
        let back = IncomingRequest::from_inner(unwrap(&body).unwrap());
        assert_eq!(back.reply_to(), Some(("m", "reply_q")));
        assert_eq!(back.client_timeout, None);
    }

    #[test]
    fn un_enveloped_and_bad_bodies() {
        let m = unwrap(br#"{"method": "x", "oslo.version": "2.0"}"#).unwrap();
        assert_eq!(m["method"], "x");
        assert_eq!(unwrap(b"[1]"), Err(EnvelopeError::NotAnObject));
        assert!(matches!(unwrap(b"nope"), Err(EnvelopeError::NotJson(_))));
        assert_eq!(
            unwrap(br#"{"oslo.version": "2.1", "oslo.message": "{}"}"#),
            Err(EnvelopeError::UnsupportedVersion("2.1".into()))
        );
        assert_eq!(
            unwrap(br#"{"oslo.version": "3.0", "oslo.message": "{}"}"#),
            Err(EnvelopeError::UnsupportedVersion("3.0".into()))
        );
        assert!(unwrap(br#"{"oslo.version": "2.0", "oslo.message": "[]"}"#).is_err());
    }

    #[test]
    fn reply_with_failure_is_a_json_string() {
        let f = Failure::no_such_method("echo");
        let r = reply("m", None, Some(&f), true);
        assert!(r["failure"].is_string());
        let back = IncomingReply::from_inner(unwrap(&wrap(&r)).unwrap());
        assert_eq!(back.msg_id.as_deref(), Some("m"));
        assert!(back.ending);
        assert_eq!(Failure::parse(&back.failure.unwrap()).unwrap(), f);
    }

    #[test]
    fn properties_as_upstream() {
        let p = properties(Some(Duration::from_secs(60)));
        assert_eq!(
            p.content_type().as_ref().map(|s| s.as_str()),
            Some("application/json")
        );
        assert_eq!(*p.delivery_mode(), Some(2));
        assert_eq!(*p.priority(), Some(0));
        assert_eq!(p.expiration().as_ref().map(|s| s.as_str()), Some("60000"));
        assert!(properties(None).expiration().is_none());
    }
}
