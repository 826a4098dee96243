//! The one place where errors become Magnum's wire errors: the `errors` envelope for handler
//! errors, reason-phrase bodies for routing errors, the microversion 406 body and
//! keystonemiddleware's 401 shape.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use magnum_core::ErrorKind;
use serde_json::{Value, json};

use crate::version::{MAX_VERSION, MIN_VERSION};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A domain error; its kind decides the status.
    #[error(transparent)]
    Domain(#[from] magnum_core::Error),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// 406 for an endpoint or method not available at the requested microversion.
    #[error("{0}")]
    NotAcceptable(String),
    #[error("Unknown mimetype: {0}")]
    UnsupportedMediaType(String),
    /// A route that exists only from a later microversion: routing-style 406 (no version
    /// headers) but with upstream's detail text.
    #[error("{0}")]
    NotAvailableAtVersion(String),
    /// Routing-level failures (unknown path, method not allowed): reason phrase, no detail.
    #[error("{0}")]
    Routing(StatusCode),
    /// The requested microversion is outside 1.1..=1.14.
    #[error("{description}")]
    VersionUnsupported {
        description: String,
        with_description: bool,
    },
    /// No or invalid token: keystonemiddleware's body and `WWW-Authenticate`.
    #[error("The request you have made requires authentication.")]
    Unauthorized { www_authenticate: String },
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl From<crate::patch::PatchError> for ApiError {
    fn from(e: crate::patch::PatchError) -> Self {
        match e.status() {
            400 => ApiError::BadRequest(e.to_string()),
            _ => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<magnum_conf::policy::PolicyError> for ApiError {
    fn from(e: magnum_conf::policy::PolicyError) -> Self {
        match e {
            magnum_conf::policy::PolicyError::NotAuthorized { .. } => {
                ApiError::Forbidden(e.to_string())
            }
            // An unregistered rule is our bug, not the caller's.
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Domain(e) => match e.kind() {
                ErrorKind::Invalid => StatusCode::BAD_REQUEST,
                ErrorKind::Forbidden => StatusCode::FORBIDDEN,
                ErrorKind::NotFound => StatusCode::NOT_FOUND,
                ErrorKind::Conflict => StatusCode::CONFLICT,
                ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
                ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            },
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::NotAcceptable(_)
            | ApiError::NotAvailableAtVersion(_)
            | ApiError::VersionUnsupported { .. } => StatusCode::NOT_ACCEPTABLE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Routing(s) => *s,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether a response to this error carries the microversion headers.
    pub fn has_version_headers(&self) -> bool {
        !matches!(
            self,
            ApiError::Routing(_)
                | ApiError::NotAvailableAtVersion(_)
                | ApiError::Unauthorized { .. }
        )
    }

    fn body(&self) -> Value {
        let status = self.status();
        match self {
            ApiError::Routing(s) => json!({"errors": [{
                "request_id": "", "code": "", "status": s.as_u16(),
                "title": s.canonical_reason().unwrap_or(""), "detail": "", "links": []}]}),
            ApiError::NotAvailableAtVersion(detail) => json!({"errors": [{
                "request_id": "", "code": "", "status": 406,
                "title": "Not Acceptable", "detail": detail, "links": []}]}),
            ApiError::VersionUnsupported {
                description,
                with_description,
            } => {
                let mut e = json!({
                    "code": "magnum.microversion-unsupported",
                    "title": "Requested microversion is unsupported",
                });
                if *with_description {
                    e["description"] = json!(description);
                }
                e["max_version"] = json!(MAX_VERSION.to_string());
                e["min_version"] = json!(MIN_VERSION.to_string());
                e["links"] = json!([{"rel": "help", "href": "http://docs.openstack.org/api-guide/compute/microversions.html"}]);
                json!({"errors": [e]})
            }
            ApiError::Unauthorized { .. } => json!({"error": {
                "code": 401, "title": "Unauthorized",
                "message": "The request you have made requires authentication."}}),
            other => {
                let detail = other.to_string();
                let title = detail.split('.').next().unwrap_or(&detail).to_owned();
                let code = if status.is_client_error() {
                    "client"
                } else {
                    "server"
                };
                json!({"errors": [{"request_id": "", "code": code, "status": status.as_u16(),
                    "title": title, "detail": detail, "links": []}]})
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(status = status.as_u16(), "{self}");
        } else {
            // What the client is told, so an operator can see why a request failed.
            tracing::info!(status = status.as_u16(), "{self}");
        }
        let mut resp = json_response(status, &self.body());
        if matches!(
            self,
            ApiError::Routing(_) | ApiError::NotAvailableAtVersion(_)
        ) {
            resp.extensions_mut().insert(RoutingAnswer);
        }
        if let ApiError::Unauthorized { www_authenticate } = &self
            && let Ok(v) = HeaderValue::from_str(www_authenticate)
        {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}

/// Marks a routing-level answer (404, 405, a microversion's 406). Upstream's routing answers
/// these in the media type the client's `Accept` prefers (webob): only a JSON one carries a
/// title and detail through its error middleware; for any other, the envelope is empty.
#[derive(Clone, Copy)]
pub struct RoutingAnswer;

/// A routing answer for a client that does not prefer JSON, as upstream gives it.
pub fn bare_routing_answer(status: StatusCode) -> Response {
    json_response(
        status,
        &json!({"errors": [{"request_id": "", "code": "", "status": status.as_u16(),
            "title": "", "detail": "", "links": []}]}),
    )
}

/// Whether `Accept` prefers `application/json` to `text/html`, as webob picks between the
/// two for an error body (a tie, `*/*` or no header, is HTML).
pub fn prefers_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    // The q of the most specific range matching `ty/sub`; 0 when none does.
    let q_of = |ty: &str, sub: &str| -> f32 {
        let mut best: Option<(u8, f32)> = None;
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|v| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let (rt, rs) = media.split_once('/').unwrap_or((media.as_str(), ""));
            let specificity = match (rt, rs) {
                (t, s) if t == ty && s == sub => 2,
                (t, "*") if t == ty => 1,
                ("*", "*") => 0,
                _ => continue,
            };
            if best.is_none_or(|(s, _)| specificity > s) {
                best = Some((specificity, q));
            }
        }
        best.map_or(0.0, |(_, q)| q)
    };
    let json = q_of("application", "json");
    json > 0.0 && json > q_of("text", "html")
}

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(Body::from(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub type ApiResult<T> = Result<T, ApiError>;
