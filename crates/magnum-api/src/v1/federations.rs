//! `/v1/federations` (api.md §6.9). Upstream's conductor implements no federation handler, so
//! a created federation never came into being there and the user was never told. Here the row
//! is stored and marked failed with that reason, so the user sees it; updates are refused the
//! same way, and delete removes the row (nothing was ever built).

use axum::response::Response;
use http::StatusCode;
use magnum_core::ids::is_uuid_like;
use magnum_db::repo::federation::{Federation, FederationFilters};
use magnum_service::federations::{FederationChange, MemberChange, NewFederation};
use serde_json::{Value, json};

use super::{
    ListParams, collection, ctx_target, links_pair, no_content, owner_target, respond, timestamp,
};
use crate::AppState;
use crate::error::ApiResult;
use crate::input::{Field, Kind, field, parse_object, read_only};
use crate::patch::{Op, parse_patch};
use crate::request::Req;

const FIELDS: &[Field] = &[
    field("uuid", Kind::Uuid),
    field("name", Kind::Str { min: 1, max: 242 }),
    field("hostcluster_id", Kind::Str { min: 0, max: 255 }),
    field("member_ids", Kind::StrList),
    field("status", Kind::Any),
    field("status_reason", Kind::Any),
    field("properties", Kind::StrDict),
    read_only("links"),
    read_only("created_at"),
    read_only("updated_at"),
];

fn render(f: &Federation, base: &str, detail: bool) -> Value {
    let uuid = f.uuid.as_deref().unwrap_or_default();
    let mut v = json!({
        "uuid": f.uuid, "name": f.name, "hostcluster_id": f.hostcluster_id,
        "member_ids": super::json_column(f.member_ids.as_deref()), "status": f.status,
        "properties": super::json_column(f.properties.as_deref()),
        "links": links_pair(base, &format!("federations/{uuid}")),
    });
    if detail {
        v["status_reason"] = json!(f.status_reason);
        v["created_at"] = timestamp(f.created_at);
        v["updated_at"] = timestamp(f.updated_at);
    }
    v
}

async fn lookup(app: &AppState, req: &Req, ident: &str) -> ApiResult<Federation> {
    let repo = app.db.federations();
    Ok(if is_uuid_like(ident) {
        repo.get_by_uuid(&req.ctx, ident).await?
    } else {
        repo.get_by_name(&req.ctx, ident).await?
    })
}

use crate::openapi::Body;
use crate::table::{Route, arg, handler, missing};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/federations",
        handler!(|app, req, p| list(app, req, false)),
        "List federations",
        200,
        Body::None,
        "federation:get_all",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/federations/detail",
        handler!(|app, req, p| list(app, req, true)),
        "List federations with details",
        200,
        Body::None,
        "federation:detail",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/federations/{ident}",
        handler!(|app, req, p| show(app, req, arg(p, 0))),
        "Show a federation",
        200,
        Body::None,
        "federation:get",
    ),
    Route::op(
        "POST",
        "/v1/federations",
        handler!(|app, req, p| create(app, req)),
        "Create a federation",
        202,
        Body::Object("Federation", FIELDS),
        "federation:create",
    ),
    Route::op(
        "PATCH",
        "/v1/federations/{ident}",
        handler!(|app, req, p| update(app, req, arg(p, 0))),
        "Join or leave clusters",
        202,
        Body::JsonPatch,
        "federation:update",
    )
    .query(&["rollback"]),
    Route::op(
        "DELETE",
        "/v1/federations/{ident}",
        handler!(|app, req, p| delete(app, req, arg(p, 0))),
        "Delete a federation",
        204,
        Body::None,
        "federation:delete",
    ),
    Route::quirk(
        "DELETE",
        "/v1/federations",
        handler!(|_app, _req, _p| async { Err(missing("federation_ident")) }),
    ),
    Route::quirk(
        "PATCH",
        "/v1/federations",
        handler!(|_app, _req, _p| async { Err(missing("federation_ident")) }),
    ),
];

async fn show(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let f = lookup(app, req, ident).await?;
    app.policy.authorize(
        "federation:get",
        &owner_target(f.project_id.as_deref(), None),
        &req.ctx,
    )?;
    respond(StatusCode::OK, &render(&f, &req.base, true))
}

async fn delete(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let f = lookup(app, req, ident).await?;
    app.policy.authorize(
        "federation:delete",
        &owner_target(f.project_id.as_deref(), None),
        &req.ctx,
    )?;
    app.services.federations().delete(&f).await?;
    no_content()
}

async fn list(app: &AppState, req: &Req, detail: bool) -> ApiResult<Response> {
    let params = ListParams::parse(req, app.settings.max_limit)?;
    let rule = if detail {
        "federation:detail"
    } else {
        "federation:get_all"
    };
    app.policy.authorize(rule, &ctx_target(req), &req.ctx)?;
    let marker = match &params.marker {
        Some(m) => Some(app.db.federations().get_by_uuid(&req.ctx, m).await?),
        None => None,
    };
    let rows = app
        .db
        .federations()
        .list(
            &req.ctx,
            &FederationFilters::default(),
            &params.page(marker),
        )
        .await?;
    let path = if detail {
        "federations/detail"
    } else {
        "federations"
    };
    let next = params.next(
        &req.base,
        path,
        rows.len(),
        rows.last().and_then(|f| f.uuid.clone()),
    );
    respond(
        StatusCode::OK,
        &collection(
            "federations",
            rows.iter().map(|f| render(f, &req.base, detail)).collect(),
            next,
        ),
    )
}

async fn create(app: &AppState, req: &Req) -> ApiResult<Response> {
    let doc = parse_object("federation", req.body.as_ref(), FIELDS)?;
    app.policy
        .authorize("federation:create", &ctx_target(req), &req.ctx)?;
    let text = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_owned);
    let new = NewFederation {
        name: text("name"),
        hostcluster: text("hostcluster_id"),
        member_ids: doc.get("member_ids").cloned(),
        properties: doc.get("properties").and_then(Value::as_object).cloned(),
    };
    let stored = app.services.federations().create(&req.ctx, new).await?;
    respond(StatusCode::ACCEPTED, &json!({"uuid": stored.uuid}))
}

async fn update(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let ops = parse_patch(req.body.as_ref(), &crate::patch::PatchRules::federation())?;
    let original = lookup(app, req, ident).await?;
    app.policy.authorize(
        "federation:update",
        &owner_target(original.project_id.as_deref(), None),
        &req.ctx,
    )?;
    let member = ops
        .first()
        .and_then(|first| match (&first.op, &first.value) {
            (Op::Add, Some(Value::String(m))) if first.path == "/member_ids" => {
                Some(MemberChange::Join(m.clone()))
            }
            (Op::Remove, Some(Value::String(m))) if first.path == "/member_ids" => {
                Some(MemberChange::Leave(m.clone()))
            }
            _ => None,
        });
    let change = FederationChange {
        attributes: ops
            .iter()
            .map(|op| op.path.trim_start_matches('/').to_owned())
            .collect(),
        member,
    };
    let stored = app
        .services
        .federations()
        .update(&req.ctx, &original, ident, change)
        .await?;
    respond(StatusCode::ACCEPTED, &json!({"uuid": stored.uuid}))
}
