//! `/v1/credentials` (api.md §6.5): rotate the credential a cluster uses, from 1.12, as a
//! synchronous call to the conductor.

use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::{ctx_target, lookup, respond};
use crate::AppState;
use crate::error::ApiResult;
use crate::request::Req;

use crate::openapi::Body;
use crate::table::{Route, arg, handler, missing};

pub const ROUTES: &[Route] = &[
    Route::op(
        "PATCH",
        "/v1/credentials/{cluster_ident}",
        handler!(|app, req, p| rotate(app, req, arg(p, 0))),
        "Rotate the credential a cluster uses (1.12+)",
        202,
        Body::None,
        "credential:rotate",
    )
    .since(12, "patch"),
    Route::quirk(
        "PATCH",
        "/v1/credentials",
        handler!(|_app, _req, _p| async { Err(missing("cluster_ident")) }),
    )
    .since(12, "patch"),
];

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
