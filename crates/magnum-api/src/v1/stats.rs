//! `/v1/stats` (api.md §6.7).

use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::{ctx_target, respond};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;

use crate::openapi::Body;
use crate::table::{ANY, Route, handler};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/stats",
        handler!(|app, req, _p| get(app, req)),
        "Cluster and node counts",
        200,
        Body::None,
        "stats:get_all",
    )
    .query(&["project_id", "type"]),
    // pecan answers any path below it with a 405.
    Route::quirk(
        ANY,
        "/v1/stats/**",
        handler!(|_app, _req, _p| async { Err(ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED)) }),
    ),
];

async fn get(app: &AppState, req: &Req) -> ApiResult<Response> {
    app.policy
        .authorize("stats:get_all", &ctx_target(req), &req.ctx)?;
    if let Some(t) = req.query("type")
        && !t.eq_ignore_ascii_case("cluster")
    {
        return Err(ApiError::BadRequest(
            "Invalid stats type. Allowed values are 'cluster'".into(),
        ));
    }
    let project = match (req.query("project_id"), req.ctx.is_admin) {
        (Some(p), true) => Some(p.to_owned()),
        (None, true) => None,
        (Some(p), false) if req.ctx.project_id.as_deref() != Some(p) => {
            return Err(ApiError::Forbidden("Not authorized.".into()));
        }
        (_, false) => req.ctx.project_id.clone(),
    };
    let stats = app.db.clusters().stats(project.as_deref()).await?;
    respond(
        StatusCode::OK,
        &json!({"clusters": stats.clusters, "nodes": stats.nodes}),
    )
}
