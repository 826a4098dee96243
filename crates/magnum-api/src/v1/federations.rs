//! `/v1/federations` (api.md §6.9). Upstream's conductor implements no federation handler, so
//! a created federation never came into being there and the user was never told. Here the row
//! is stored and marked failed with that reason, so the user sees it; updates are refused the
//! same way, and delete removes the row (nothing was ever built).

use axum::response::Response;
use http::{Method, StatusCode};
use magnum_core::ids::is_uuid_like;
use magnum_db::repo::federation::{Federation, FederationFilters};
use magnum_service::federations::{FederationChange, MemberChange, NewFederation};
use serde_json::{Value, json};

use super::{
    ListParams, collection, ctx_target, links_pair, no_content, owner_target, respond, timestamp,
};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
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

use crate::openapi::{Body, RouteDoc};

pub const ROUTES: &[RouteDoc] = &[
    RouteDoc {
        method: "GET",
        path: "/v1/federations",
        summary: "List federations",
        status: 200,
        body: Body::None,
        policy: "federation:get_all",
    },
    RouteDoc {
        method: "GET",
        path: "/v1/federations/detail",
        summary: "List federations with details",
        status: 200,
        body: Body::None,
        policy: "federation:detail",
    },
    RouteDoc {
        method: "GET",
        path: "/v1/federations/{ident}",
        summary: "Show a federation",
        status: 200,
        body: Body::None,
        policy: "federation:get",
    },
    RouteDoc {
        method: "POST",
        path: "/v1/federations",
        summary: "Create a federation",
        status: 202,
        body: Body::Object("Federation", FIELDS),
        policy: "federation:create",
    },
    RouteDoc {
        method: "PATCH",
        path: "/v1/federations/{ident}",
        summary: "Join or leave clusters",
        status: 202,
        body: Body::JsonPatch,
        policy: "federation:update",
    },
    RouteDoc {
        method: "DELETE",
        path: "/v1/federations/{ident}",
        summary: "Delete a federation",
        status: 204,
        body: Body::None,
        policy: "federation:delete",
    },
];

pub async fn route(app: &AppState, req: Req) -> ApiResult<Response> {
    let rest: Vec<String> = req.segs.iter().skip(1).cloned().collect();
    match (&req.method, rest.as_slice()) {
        (&Method::GET, []) => list(app, &req, false).await,
        (&Method::GET, [d]) if d == "detail" => list(app, &req, true).await,
        (&Method::GET, [ident]) => {
            req.allow_query(&[])?;
            let f = lookup(app, &req, ident).await?;
            app.policy.authorize(
                "federation:get",
                &owner_target(f.project_id.as_deref(), None),
                &req.ctx,
            )?;
            respond(StatusCode::OK, &render(&f, &req.base, true))
        }
        (&Method::POST, []) => {
            req.allow_query(&[])?;
            create(app, &req).await
        }
        (&Method::PATCH, [ident]) => {
            req.allow_query(&["rollback"])?;
            update(app, &req, ident).await
        }
        (&Method::DELETE, [ident]) => {
            req.allow_query(&[])?;
            let f = lookup(app, &req, ident).await?;
            app.policy.authorize(
                "federation:delete",
                &owner_target(f.project_id.as_deref(), None),
                &req.ctx,
            )?;
            app.services.federations().delete(&f).await?;
            no_content()
        }
        (&Method::DELETE | &Method::PATCH, []) => Err(ApiError::BadRequest(
            "Missing argument: \"federation_ident\"".into(),
        )),
        (_, [] | [_]) => Err(ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED)),
        _ => Err(ApiError::Routing(StatusCode::NOT_FOUND)),
    }
}

async fn list(app: &AppState, req: &Req, detail: bool) -> ApiResult<Response> {
    req.allow_query(&["marker", "limit", "sort_key", "sort_dir"])?;
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
