//! `/v1/mservices` (api.md §6.8): conductor heartbeat rows with their up/down state.

use axum::response::Response;
use http::StatusCode;
use magnum_db::Page;
use magnum_db::repo::magnum_service::is_up;
use serde_json::json;

use super::{collection, ctx_target, respond, timestamp};
use crate::AppState;
use crate::error::ApiResult;
use crate::request::Req;

use crate::openapi::{Body, RouteDoc};

pub const ROUTES: &[RouteDoc] = &[RouteDoc {
    method: "GET",
    path: "/v1/mservices",
    summary: "List conductor services and their state",
    status: 200,
    body: Body::None,
    policy: "magnum-service:get_all",
}];

pub async fn route(app: &AppState, req: Req) -> ApiResult<Response> {
    super::only_get(&req)?;
    req.allow_query(&[])?;
    app.policy
        .authorize("magnum-service:get_all", &ctx_target(&req), &req.ctx)?;
    let now = magnum_db::repo::now();
    let rows = app
        .db
        .magnum_services()
        .list(None, &Page::default())
        .await?;
    let items = rows
        .iter()
        .map(|s| {
            json!({
                "host": s.host, "binary": s.binary,
                "state": if is_up(s, now, app.settings.service_down_time) { "up" } else { "down" },
                "id": s.id, "report_count": s.report_count, "disabled": s.disabled.unwrap_or(false),
                "disabled_reason": s.disabled_reason,
                "created_at": timestamp(s.created_at), "updated_at": timestamp(s.updated_at),
            })
        })
        .collect();
    respond(StatusCode::OK, &collection("mservices", items, None))
}
