//! The parsed request every resource module works from. Its own module, so the resource
//! modules (`v1/`) depend on it and not on the router that dispatches to them.

use http::Method;
use magnum_core::RequestContext;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::version::ApiVersion;

/// One parsed request, as resource modules see it.
pub struct Req {
    pub method: Method,
    /// Path segments after `v1`.
    pub segs: Vec<String>,
    pub query: Vec<(String, String)>,
    pub body: Option<Value>,
    pub ctx: RequestContext,
    pub version: ApiVersion,
    /// `<scheme>://<host>` for links.
    pub base: String,
}

impl Req {
    /// Upstream refuses query parameters a handler does not take.
    pub fn allow_query(&self, allowed: &[&str]) -> ApiResult<()> {
        match self
            .query
            .iter()
            .find(|(k, _)| !allowed.contains(&k.as_str()))
        {
            Some((k, _)) => Err(ApiError::BadRequest(format!("Unknown argument: \"{k}\""))),
            None => Ok(()),
        }
    }

    pub fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}
