//! `/v1/stats` (api.md §6.7).

use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::{ctx_target, respond};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;

use crate::openapi::{Body, RouteDoc};

pub const ROUTES: &[RouteDoc] = &[RouteDoc {
    method: "GET",
    path: "/v1/stats",
    summary: "Cluster and node counts",
    status: 200,
    body: Body::None,
    policy: "stats:get_all",
}];

pub async fn route(app: &AppState, req: Req) -> ApiResult<Response> {
    super::only_get(&req)?;
    req.allow_query(&["project_id", "type"])?;
    app.policy
        .authorize("stats:get_all", &ctx_target(&req), &req.ctx)?;
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
