//! `/v1/credentials` (api.md §6.5): rotate the credential a cluster uses, from 1.12, as a
//! synchronous call to the conductor.

use axum::response::Response;
use http::{Method, StatusCode};
use serde_json::json;

use super::{ctx_target, lookup, respond};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;

use crate::openapi::{Body, RouteDoc};

pub const ROUTES: &[RouteDoc] = &[RouteDoc {
    method: "PATCH",
    path: "/v1/credentials/{cluster_ident}",
    summary: "Rotate the credential a cluster uses (1.12+)",
    status: 202,
    body: Body::None,
    policy: "credential:rotate",
}];

pub async fn route(app: &AppState, req: Req) -> ApiResult<Response> {
    let rest: Vec<String> = req.segs.iter().skip(1).cloned().collect();
    match (&req.method, rest.as_slice()) {
        (&Method::PATCH, [ident]) => {
            lookup::require_version(&req, 12, "patch")?;
            req.allow_query(&[])?;
            rotate(app, &req, ident).await
        }
        (&Method::PATCH, []) => {
            lookup::require_version(&req, 12, "patch")?;
            Err(ApiError::BadRequest(
                "Missing argument: \"cluster_ident\"".into(),
            ))
        }
        (_, [] | [_]) => Err(ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED)),
        _ => Err(ApiError::Routing(StatusCode::NOT_FOUND)),
    }
}

async fn rotate(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    // Upstream checks the rule against the caller before looking the cluster up.
    app.policy
        .authorize("credential:rotate", &ctx_target(req), &req.ctx)?;
    let c = lookup::cluster(app, &req.ctx, ident).await?;
    app.services
        .certificates()
        .rotate_credential(&req.ctx, &c)
        .await?;
    let uuid = c.uuid.unwrap_or_default();
    respond(StatusCode::ACCEPTED, &json!({"uuid": uuid}))
}
