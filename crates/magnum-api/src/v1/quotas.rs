//! `/v1/quotas` (api.md §6.6). PATCH takes a plain object, not JSON-patch, and both PATCH and
//! DELETE also accept `project_id`/`resource` in the body instead of the path (pecan quirk).

use axum::response::Response;
use http::{Method, StatusCode};
use magnum_db::repo::quota::{Quota, QuotaFilters};
use serde_json::{Value, json};

use super::{
    ListParams, MarkerType, collection, created, ctx_target, no_content, respond, timestamp,
};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::input::{Field, Kind, field, parse_bool, parse_object, read_only};
use crate::request::Req;

const FIELDS: &[Field] = &[
    field(
        "id",
        Kind::Int {
            min: Some(1),
            max: None,
        },
    ),
    field(
        "hard_limit",
        Kind::Int {
            min: Some(0),
            max: None,
        },
    ),
    field("project_id", Kind::Str { min: 1, max: 255 }),
    field("resource", Kind::Enum(&["Cluster"])),
    read_only("created_at"),
    read_only("updated_at"),
];

pub fn render(q: &Quota) -> Value {
    json!({
        "id": q.id, "hard_limit": q.hard_limit, "project_id": q.project_id, "resource": q.resource,
        "created_at": timestamp(q.created_at), "updated_at": timestamp(q.updated_at),
    })
}

use crate::openapi::Body;
use crate::table::{Route, arg, handler, missing};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/quotas",
        handler!(|app, req, p| list(app, req)),
        "List quotas",
        200,
        Body::None,
        "quota:get_all",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir", "all_tenants"]),
    Route::op(
        "GET",
        "/v1/quotas/{project_id}/{resource}",
        handler!(|app, req, p| show(app, req, arg(p, 0), arg(p, 1))),
        "Show a project's quota",
        200,
        Body::None,
        "quota:get",
    ),
    Route::op(
        "POST",
        "/v1/quotas",
        handler!(|app, req, p| create(app, req)),
        "Create a quota",
        201,
        Body::Object("Quota", FIELDS),
        "quota:create",
    ),
    Route::op(
        "PATCH",
        "/v1/quotas/{project_id}/{resource}",
        handler!(|app, req, p| change(app, req, p)),
        "Update a quota (plain object, not JSON-patch)",
        202,
        Body::Object("Quota", FIELDS),
        "quota:update",
    ),
    Route::op(
        "DELETE",
        "/v1/quotas/{project_id}/{resource}",
        handler!(|app, req, p| change(app, req, p)),
        "Delete a quota",
        204,
        Body::None,
        "quota:delete",
    ),
    Route::quirk(
        "GET",
        "/v1/quotas/{project_id}",
        handler!(|_app, _req, _p| async { Err(missing("resource")) }),
    ),
    Route::quirk(
        "PATCH",
        "/v1/quotas",
        handler!(|app, req, p| change(app, req, p)),
    ),
    Route::quirk(
        "PATCH",
        "/v1/quotas/{project_id}",
        handler!(|app, req, p| change(app, req, p)),
    ),
    Route::quirk(
        "DELETE",
        "/v1/quotas",
        handler!(|app, req, p| change(app, req, p)),
    ),
    Route::quirk(
        "DELETE",
        "/v1/quotas/{project_id}",
        handler!(|app, req, p| change(app, req, p)),
    ),
];

/// PATCH and DELETE: the path's values win; missing ones may come from the body's top-level
/// keys, as upstream's controller takes them.
async fn change(app: &AppState, req: &Req, p: &[String]) -> ApiResult<Response> {
    let from_body = |k: &str| {
        req.body
            .as_ref()
            .and_then(|b| b.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let project = p.first().cloned().or_else(|| from_body("project_id"));
    let resource = p.get(1).cloned().or_else(|| from_body("resource"));
    let (Some(project), Some(resource)) = (project, resource) else {
        return Err(missing(if p.is_empty() {
            "project_id"
        } else {
            "resource"
        }));
    };
    if req.method == Method::PATCH {
        update(app, req, &project, &resource).await
    } else {
        delete(app, req, &project, &resource).await
    }
}

async fn list(app: &AppState, req: &Req) -> ApiResult<Response> {
    let params = ListParams::parse_as(req, app.settings.max_limit, MarkerType::Int)?;
    app.policy
        .authorize("quota:get_all", &ctx_target(req), &req.ctx)?;
    let all_tenants = match req.query("all_tenants") {
        None => false,
        Some(v) => parse_bool(&Value::String(v.to_owned())).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "Invalid input for field/attribute all_tenants. Value: '{v}'. Invalid boolean value"
            ))
        })?,
    };
    let mut filters = QuotaFilters::default();
    if !(req.ctx.is_admin && all_tenants) {
        filters.project_id = req.ctx.project_id.clone();
    }
    let marker = match &params.marker {
        Some(m) => {
            // An integer already (parse_as); one past i32 names no row.
            let id: i32 = m.trim().parse().unwrap_or(i32::MAX);
            Some(app.db.quotas().get_by_id(id).await?)
        }
        None => None,
    };
    let rows = app.db.quotas().list(&filters, &params.page(marker)).await?;
    let next = params.next(
        &req.base,
        "quotas",
        rows.len(),
        rows.last().map(|q| q.id.to_string()),
    );
    respond(
        StatusCode::OK,
        &collection("quotas", rows.iter().map(render).collect(), next),
    )
}

async fn show(app: &AppState, req: &Req, project: &str, resource: &str) -> ApiResult<Response> {
    app.policy
        .authorize("quota:get", &ctx_target(req), &req.ctx)?;
    if !req.ctx.is_admin && req.ctx.project_id.as_deref() != Some(project) {
        return Err(ApiError::Forbidden("Not authorized.".into()));
    }
    match app.db.quotas().get(project, resource).await {
        Ok(q) => respond(StatusCode::OK, &render(&q)),
        // No row: the configured default, as upstream synthesises it.
        Err(magnum_core::Error::QuotaNotFound { .. }) => respond(
            StatusCode::OK,
            &json!({"hard_limit": app.services.settings().max_clusters_per_project, "project_id": project, "resource": "Cluster"}),
        ),
        Err(e) => Err(e.into()),
    }
}

async fn create(app: &AppState, req: &Req) -> ApiResult<Response> {
    let doc = parse_object("quota", req.body.as_ref(), FIELDS)?;
    let project = doc
        .get("project_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let quotas = app.services.quotas();
    quotas.check_project(&req.ctx, &project).await?;
    app.policy
        .authorize("quota:create", &ctx_target(req), &req.ctx)?;
    let resource = doc
        .get("resource")
        .and_then(Value::as_str)
        .unwrap_or("Cluster");
    let q = quotas
        .create(&project, resource, doc.get("hard_limit"))
        .await?;
    created(
        &render(&q),
        &format!("{}/v1/quotas/{project}/{resource}", req.base),
    )
}

async fn update(app: &AppState, req: &Req, project: &str, resource: &str) -> ApiResult<Response> {
    let doc = parse_object("quotapatch", req.body.as_ref(), FIELDS)?;
    app.policy
        .authorize("quota:update", &ctx_target(req), &req.ctx)?;
    let q = app
        .services
        .quotas()
        .update(project, resource, doc.get("hard_limit"))
        .await?;
    respond(StatusCode::ACCEPTED, &render(&q))
}

async fn delete(app: &AppState, req: &Req, project: &str, resource: &str) -> ApiResult<Response> {
    app.policy
        .authorize("quota:delete", &ctx_target(req), &req.ctx)?;
    app.services.quotas().delete(project, resource).await?;
    no_content()
}
