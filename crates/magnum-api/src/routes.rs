//! Request handling from the socket to a resource module: request id, public routes, auth,
//! microversions, body parsing, explicit routing, and the version headers on the way out.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use magnum_core::RequestContext;
use serde_json::Value;

use crate::AppState;
use crate::error::{
    ApiError, ApiResult, RoutingAnswer, bare_routing_answer, json_response, prefers_json,
};
pub use crate::request::Req;
use crate::version::{ApiVersion, SERVICE, negotiate};

/// Largest request body accepted (upstream has no tighter limit; templates are small).
const BODY_LIMIT: usize = 1 << 20;

pub async fn handle(State(app): State<Arc<AppState>>, request: Request) -> Response {
    let request_id = format!("req-{}", uuid::Uuid::new_v4());
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    // Every line logged for this request names it, and the caller once known; the id
    // travels on in the RPC context, so the conductor's lines name it too.
    let span = tracing::info_span!(
        "request",
        request_id = %request_id,
        user = tracing::field::Empty,
        project = tracing::field::Empty
    );
    let started = std::time::Instant::now();
    // Several Accept fields are one list, as the WSGI environ joins them.
    let accept: Vec<&str> = request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let json_accepted = prefers_json((!accept.is_empty()).then(|| accept.join(", ")).as_deref());
    let mut resp =
        tracing::Instrument::instrument(dispatch(&app, request, &request_id), span.clone()).await;
    if !json_accepted && resp.extensions().get::<RoutingAnswer>().is_some() {
        let headers = std::mem::take(resp.headers_mut());
        resp = bare_routing_answer(resp.status());
        *resp.headers_mut() = headers;
    }
    span.in_scope(|| {
        tracing::info!(%method, %path, status = resp.status().as_u16(), "request");
    });
    if let Some(m) = magnum_core::metrics::metrics() {
        let route = route_of(&path);
        m.api_requests
            .with_label_values(&[method.as_str(), &route, resp.status().as_str()])
            .inc();
        m.api_latency
            .with_label_values(&[method.as_str(), &route])
            .observe(started.elapsed().as_secs_f64());
    }
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        resp.headers_mut().insert("x-openstack-request-id", v);
    }
    resp
}

/// A request path as a route for metrics: names the route tables spell stay, anything else
/// becomes `{id}`, so label values are bounded.
fn route_of(path: &str) -> String {
    // Besides the tables' literal segments, the paths served before the tables.
    const OTHERS: &[&str] = &["v1", "openapi.json", "healthcheck", "metrics", "v1.json"];
    static NAMES: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| crate::table::literals(crate::v1::ROUTES));
    let segs: Vec<&str> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            if OTHERS.contains(&s) || names.contains(s) {
                s
            } else {
                "{id}"
            }
        })
        .collect();
    format!("/{}", segs.join("/"))
}

fn base_url(headers: &HeaderMap, https: bool) -> String {
    let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let scheme = get("x-forwarded-proto").unwrap_or(if https { "https" } else { "http" });
    let host = get("x-forwarded-host")
        .or_else(|| get("host"))
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

fn add_version_headers(resp: &mut Response, v: ApiVersion) {
    let h = resp.headers_mut();
    let pairs = [
        ("openstack-api-minimum-version", format!("{SERVICE} 1.1")),
        ("openstack-api-maximum-version", format!("{SERVICE} 1.14")),
        ("openstack-api-version", format!("{SERVICE} {v}")),
        ("vary", "OpenStack-API-Version".to_owned()),
    ];
    for (k, v) in pairs {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    }
}

async fn dispatch(app: &AppState, request: Request, request_id: &str) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    if path == "/metrics" && app.settings.metrics {
        return metrics_response(app).await;
    }
    if path == "/healthcheck" {
        let mut r = Response::new(Body::from("OK"));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        return r;
    }
    let base = base_url(&parts.headers, app.settings.https);
    let mut segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    if segs.is_empty() {
        return if parts.method == Method::GET {
            json_response(StatusCode::OK, &crate::v1::root_document(&base))
        } else {
            ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED).into_response()
        };
    }
    // `/v1.json` is the v1 document too (upstream's public-route pattern).
    if segs.len() == 1
        && let Some(stripped) = segs[0].strip_suffix(".json").map(str::to_owned)
    {
        segs[0] = stripped;
    }
    if segs[0] != "v1" {
        segs.insert(0, "v1".into());
    }
    segs.remove(0);
    if segs.len() == 1 && segs[0] == "openapi.json" && parts.method == Method::GET {
        return json_response(StatusCode::OK, &crate::openapi::document());
    }
    let public = segs.is_empty();
    let ctx = if public {
        RequestContext::default()
    } else {
        match app.auth.context(&parts.headers).await {
            Ok(mut ctx) => {
                ctx.is_admin = app.policy.is_admin(&ctx);
                ctx.request_id = Some(request_id.to_owned());
                let span = tracing::Span::current();
                span.record("user", ctx.user_id.as_deref().unwrap_or("-"));
                span.record("project", ctx.project_id.as_deref().unwrap_or("-"));
                ctx
            }
            Err(e) => return e.into_response(),
        }
    };
    let version = match negotiate(&parts.headers) {
        Ok(v) => v,
        Err((e, v)) => {
            let mut r = e.into_response();
            if let Some(v) = v {
                add_version_headers(&mut r, v);
            }
            return r;
        }
    };
    let query = parts
        .uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let result = match read_body(&parts.headers, body).await {
        Ok(body) => {
            let req = Req {
                method: parts.method,
                segs,
                query,
                body,
                ctx,
                version,
                base,
            };
            // A database that goes away ends the request at once with a 503 instead of
            // leaving it to wait out the pool's timeout (its transaction rolls back).
            tokio::select! {
                r = route(app, req) => r,
                e = app.db.unreachable() => Err(e.into()),
            }
        }
        Err(e) => Err(e),
    };
    let mut resp = match result {
        Ok(r) => r,
        Err(e) => {
            let versioned = e.has_version_headers();
            let mut r = e.into_response();
            if !versioned {
                return r;
            }
            add_version_headers(&mut r, version);
            return r;
        }
    };
    add_version_headers(&mut resp, version);
    resp
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

async fn read_body(headers: &HeaderMap, body: Body) -> ApiResult<Option<Value>> {
    let bytes = to_bytes(body, BODY_LIMIT).await.map_err(|_| {
        ApiError::BadRequest(format!("Request body larger than {BODY_LIMIT} bytes"))
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ctype.split(';').next().unwrap_or("").trim();
    if !matches!(
        mime,
        "application/json" | "text/javascript" | "application/javascript"
    ) {
        return Err(ApiError::UnsupportedMediaType(mime.to_owned()));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|_| ApiError::BadRequest("Request is not in valid JSON format".into()))
}

async fn route(app: &AppState, req: Req) -> ApiResult<Response> {
    if req.segs.is_empty() {
        return match req.method {
            Method::GET => Ok(json_response(
                StatusCode::OK,
                &crate::v1::v1_document(&req.base),
            )),
            _ => Err(ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED)),
        };
    }
    crate::table::dispatch(app, &req, crate::v1::ROUTES).await
}

/// `/metrics`: the row gauges are filled now, then everything rendered.
async fn metrics_response(app: &AppState) -> Response {
    let Some(m) = magnum_core::metrics::metrics() else {
        return ApiError::Routing(StatusCode::NOT_FOUND).into_response();
    };
    app.db
        .record_metrics(m, app.settings.service_down_time)
        .await;
    let mut r = Response::new(Body::from(m.render()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::route_of;

    #[test]
    fn metrics_routes_keep_the_tables_names_and_fold_ids() {
        for (path, route) in [
            (
                "/v1/clusters/6b4c3d1e/actions/resize",
                "/v1/clusters/{id}/actions/resize",
            ),
            (
                "/v1/clusters/prod/nodegroups/default-worker",
                "/v1/clusters/{id}/nodegroups/{id}",
            ),
            ("/v1/quotas/demo/Cluster", "/v1/quotas/{id}/{id}"),
            ("/v1/clustertemplates/detail", "/v1/clustertemplates/detail"),
            ("/v1/mservices", "/v1/mservices"),
            ("/healthcheck", "/healthcheck"),
            ("/v1/anything-else", "/v1/{id}"),
        ] {
            assert_eq!(route_of(path), route, "{path}");
        }
    }
}
