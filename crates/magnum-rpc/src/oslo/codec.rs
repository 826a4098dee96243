//! What goes in a request's `args` and a reply's `result`.
//!
//! Our messages carry identifiers; upstream's carry serialized objects (a whole Cluster for
//! `sign_certificate`, a Certificate back). A [`Codec`] translates in both directions, so the
//! transport itself never knows a method's arguments. [`PassThrough`] sends our own shapes,
//! for transport tests; the Magnum codec (objects, database-backed) speaks upstream's.

use async_trait::async_trait;
use magnum_core::RequestContext;
use serde_json::{Map, Value};

use crate::transport::{Message, RpcError};

/// A request as the inner oslo message carries it, minus the transport's own keys
/// (`_msg_id`, `_reply_q`, `_timeout`, `_unique_id`).
#[derive(Clone, Debug, PartialEq)]
pub struct WireRequest {
    pub method: String,
    pub args: Map<String, Value>,
    /// The `_context_*` keys, prefix stripped.
    pub context: Map<String, Value>,
}

/// What the server does with a decoded request.
// One value per request, moved once: boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Decoded {
    /// Dispatch it to the conductor's handlers.
    Dispatch(Message),
    /// The codec answered it itself (object indirection methods): the reply's `result`, or
    /// the failure.
    Answered(Result<Value, RpcError>),
}

#[async_trait]
pub trait Codec: Send + Sync {
    /// Client side: our message as upstream's client would send it.
    async fn encode_request(&self, msg: &Message) -> Result<WireRequest, RpcError>;
    /// Server side: a request from any client (ours or upstream's) as our message.
    async fn decode_request(&self, req: WireRequest) -> Result<Decoded, RpcError>;
    /// Server side: our handler's result as upstream's conductor would return it.
    async fn encode_result(&self, req: &WireRequest, result: Value) -> Result<Value, RpcError>;
    /// Client side: a reply's `result` (from any conductor) as our handler returns it.
    async fn decode_result(&self, method: &str, result: Value) -> Result<Value, RpcError>;
}

/// The context keys of a request (rpc-wire.md §9.1) from ours. Tokens never travel: we have none.
pub fn context_to_wire(ctx: &RequestContext) -> Map<String, Value> {
    let s = |v: &Option<String>| v.clone().map(Value::String).unwrap_or(Value::Null);
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut m = Map::new();
    m.insert("user".into(), s(&ctx.user_id));
    m.insert("project_id".into(), s(&ctx.project_id));
    m.insert("system_scope".into(), s(&ctx.system_scope));
    m.insert("project".into(), s(&ctx.project_id));
    m.insert("domain".into(), s(&ctx.domain_id));
    m.insert("user_domain".into(), s(&ctx.user_domain_id));
    m.insert("project_domain".into(), s(&ctx.project_domain_id));
    m.insert("is_admin".into(), Value::Bool(ctx.is_admin));
    m.insert("read_only".into(), Value::Bool(false));
    m.insert("show_deleted".into(), Value::Bool(false));
    m.insert("auth_token".into(), Value::Null);
    m.insert("request_id".into(), s(&ctx.request_id));
    m.insert("global_request_id".into(), Value::Null);
    m.insert("resource_uuid".into(), Value::Null);
    m.insert(
        "roles".into(),
        Value::Array(ctx.roles.iter().cloned().map(Value::String).collect()),
    );
    m.insert(
        "user_identity".into(),
        Value::String(format!(
            "{} {} {} {} {}",
            dash(&ctx.user_id),
            dash(&ctx.project_id),
            dash(&ctx.domain_id),
            dash(&ctx.user_domain_id),
            dash(&ctx.project_domain_id)
        )),
    );
    m.insert("is_admin_project".into(), Value::Bool(true));
    m.insert("auth_url".into(), Value::Null);
    m.insert("user_domain_id".into(), s(&ctx.user_domain_id));
    m.insert("user_domain_name".into(), Value::Null);
    m.insert("user_name".into(), s(&ctx.user_name));
    m.insert("user_id".into(), s(&ctx.user_id));
    m.insert("project_name".into(), s(&ctx.project_name));
    m.insert("auth_token_info".into(), Value::Null);
    m.insert("all_tenants".into(), Value::Bool(ctx.all_tenants));
    m
}

/// Our context from any sender's `_context_*` keys (unknown keys ignored, tokens dropped).
pub fn context_from_wire(m: &Map<String, Value>) -> RequestContext {
    let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    let b = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    RequestContext {
        user_id: s("user_id").or_else(|| s("user")),
        project_id: s("project_id")
            .or_else(|| s("project"))
            .or_else(|| s("tenant")),
        user_name: s("user_name"),
        project_name: s("project_name"),
        domain_id: s("domain"),
        user_domain_id: s("user_domain_id").or_else(|| s("user_domain")),
        project_domain_id: s("project_domain"),
        system_scope: s("system_scope"),
        roles: m
            .get("roles")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        is_admin: b("is_admin"),
        all_tenants: b("all_tenants"),
        request_id: s("request_id"),
        user_token: None,
    }
}

/// Our own argument shapes on the wire: for tests of the transport, and Rust-only clouds.
pub struct PassThrough;

#[async_trait]
impl Codec for PassThrough {
    async fn encode_request(&self, msg: &Message) -> Result<WireRequest, RpcError> {
        let args = match &msg.args {
            Value::Object(m) => m.clone(),
            Value::Null => Map::new(),
            other => {
                return Err(RpcError::Malformed(format!(
                    "args must be an object: {other}"
                )));
            }
        };
        Ok(WireRequest {
            method: msg.method.clone(),
            args,
            context: context_to_wire(&msg.context),
        })
    }

    async fn decode_request(&self, req: WireRequest) -> Result<Decoded, RpcError> {
        Ok(Decoded::Dispatch(Message {
            context: context_from_wire(&req.context),
            method: req.method,
            args: Value::Object(req.args),
        }))
    }

    async fn encode_result(&self, _req: &WireRequest, result: Value) -> Result<Value, RpcError> {
        Ok(result)
    }

    async fn decode_result(&self, _method: &str, result: Value) -> Result<Value, RpcError> {
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn context_round_trips_without_tokens() {
        let ctx = RequestContext {
            user_id: Some("u".into()),
            project_id: Some("p".into()),
            roles: vec!["member".into(), "reader".into()],
            is_admin: true,
            all_tenants: true,
            request_id: Some("req-1".into()),
            ..RequestContext::default()
        };
        let wire = context_to_wire(&ctx);
        assert_eq!(wire.len(), 25);
        assert_eq!(wire["auth_token"], Value::Null);
        assert_eq!(wire["user_identity"], "u p - - -");
        assert_eq!(context_from_wire(&wire), ctx);
    }
}
