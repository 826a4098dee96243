//! `/v1/federations` (api.md §6.9). Upstream's conductor implements no federation handler, so
//! a created federation never came into being there and the user was never told. Here the row
//! is stored and marked failed with that reason, so the user sees it; updates are refused the
//! same way, and delete removes the row (nothing was ever built).

use axum::response::Response;
use http::{Method, StatusCode};
use magnum_core::ids::{Identity, is_uuid_like};
use magnum_db::repo::federation::{Federation, FederationFilters};
use serde_json::{Map, Value, json};

use super::{
    ListParams, collection, ctx_target, links_pair, no_content, owner_target, respond, timestamp,
};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::input::{Field, Kind, field, parse_object, read_only};
use crate::patch::{Op, parse_patch};
use crate::routes::Req;

const NOT_IMPLEMENTED: &str = "No driver implements federations; nothing was built.";

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
            app.db.federations().destroy(&Identity::Id(f.id)).await?;
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
    let host = doc
        .get("hostcluster_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(host) = host else {
        return Err(ApiError::BadRequest(
            "No hostcluster specified. Please specify a hostcluster_id.".into(),
        ));
    };
    let clusters = app.db.clusters();
    let host_cluster = if is_uuid_like(&host) {
        clusters.get_by_uuid(&req.ctx, &host).await?
    } else {
        clusters.get_by_name(&req.ctx, &host).await?
    };
    let props: Map<String, Value> = match doc.get("properties") {
        Some(Value::Object(p)) => p.clone(),
        _ => return Err(ApiError::BadRequest("Please specify a `dns-zone`.".into())),
    };
    if !props.contains_key("dns-zone") {
        return Err(ApiError::BadRequest(
            "No DNS zone specified. Please specify a `dns-zone`.".into(),
        ));
    }
    let name = doc
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| super::clustertemplates::generate_name("federation"));
    let row = Federation {
        uuid: Some(uuid::Uuid::new_v4().to_string()),
        name: Some(name),
        project_id: req.ctx.project_id.clone(),
        hostcluster_id: host_cluster.uuid.clone(),
        member_ids: Some(magnum_db::json::dumps(
            doc.get("member_ids").unwrap_or(&json!([])),
        )),
        properties: Some(magnum_db::json::dumps(&props)),
        status: Some("CREATE_FAILED".into()),
        status_reason: Some(NOT_IMPLEMENTED.into()),
        ..Federation::default()
    };
    let stored = app.db.federations().create(row).await?;
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
    if let Some(op) = ops
        .iter()
        .find(|op| !matches!(op.path.split('/').nth(1), Some("member_ids" | "properties")))
    {
        return Err(ApiError::BadRequest(format!(
            "cannot change federation property(ies) {}.",
            op.path.trim_start_matches('/')
        )));
    }
    if let Some(first) = ops.first()
        && first.path == "/member_ids"
        && let Some(Value::String(member)) = &first.value
    {
        let members: Vec<String> =
            magnum_db::json::loads(original.member_ids.as_deref()).unwrap_or_default();
        match first.op {
            Op::Add => {
                app.db.clusters().get_by_uuid(&req.ctx, member).await?;
                if members.contains(member) {
                    return Err(ApiError::Conflict(format!(
                        "This cluster {member} is already a member of the federation {ident}."
                    )));
                }
            }
            Op::Remove if !members.contains(member) => {
                return Err(ApiError::NotFound(format!(
                    "Cluster {member} could not be found."
                )));
            }
            _ => {}
        }
    }
    let mut modified = original.clone();
    modified.status = Some("UPDATE_FAILED".into());
    modified.status_reason = Some(NOT_IMPLEMENTED.into());
    let stored = app.db.federations().save(&original, &modified).await?;
    respond(StatusCode::ACCEPTED, &json!({"uuid": stored.uuid}))
}
