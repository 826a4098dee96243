//! `/v1/mservices` (api.md §6.8): conductor heartbeat rows with their up/down state.

use axum::response::Response;
use http::StatusCode;
use magnum_db::Page;
use magnum_db::repo::magnum_service::is_up;
use serde_json::json;

use super::{collection, ctx_target, respond, timestamp};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;

use crate::openapi::Body;
use crate::table::{ANY, Route, handler};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/mservices",
        handler!(|app, req, _p| list(app, req)),
        "List conductor services and their state",
        200,
        Body::None,
        "magnum-service:get_all",
    ),
    // pecan answers any path below it with a 405.
    Route::quirk(
        ANY,
        "/v1/mservices/**",
        handler!(|_app, _req, _p| async { Err(ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED)) }),
    ),
];

async fn list(app: &AppState, req: &Req) -> ApiResult<Response> {
    app.policy
        .authorize("magnum-service:get_all", &ctx_target(req), &req.ctx)?;
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
