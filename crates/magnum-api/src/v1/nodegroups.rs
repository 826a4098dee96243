//! `/v1/clusters/{cluster}/nodegroups` (api.md §6.3), from microversion 1.9.
//!
//! Upstream flaws fixed: create only cast to the conductor, which inserted the row later, so
//! a GET right after the 202 found nothing; here the row is inserted (CREATE_IN_PROGRESS)
//! before the answer. Nodegroup operations never looked at the cluster's status, so one on a
//! cluster being created or deleted flipped it to UPDATE_IN_PROGRESS; they are refused here
//! with the conductor's own precondition texts.

use axum::response::Response;
use http::StatusCode;
use magnum_core::model::NodegroupRole;
use magnum_core::status::ClusterStatus;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::{NodeGroup, NodeGroupFilters};
use magnum_service::nodegroups::NodegroupPatch;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::clusters::{CLUSTER_STATUSES, TEXT};
use super::lookup::{self, admin_scope, labels_diff};
use super::{Link, ListParams, Ts, ctx_target, links, no_content, raw_json};
use crate::AppState;
use crate::error::ApiResult;
use crate::input::{
    Field, Kind, NON_NEGATIVE, POSITIVE, STR255, field, parse_object, read_only, revalidate,
};
use crate::patch::{PatchRules, apply_patch, parse_patch};
use crate::request::Req;

const FIELDS: &[Field] = &[
    field("id", POSITIVE),
    field("uuid", Kind::Uuid),
    field("name", STR255),
    field("cluster_id", Kind::Uuid),
    read_only("project_id"),
    field("docker_volume_size", POSITIVE),
    field("labels", Kind::StrDict),
    read_only("links"),
    field("flavor_id", STR255),
    field("image_id", STR255),
    read_only("node_addresses"),
    field("node_count", NON_NEGATIVE),
    field("role", STR255),
    field("min_node_count", NON_NEGATIVE),
    field("max_node_count", NON_NEGATIVE),
    field("is_default", Kind::Bool),
    read_only("stack_id"),
    field("status", Kind::Enum(CLUSTER_STATUSES)),
    field("status_reason", TEXT),
    field("version", TEXT),
    field("merge_labels", Kind::Bool),
    field("labels_overridden", Kind::StrDict),
    field("labels_added", Kind::StrDict),
    field("labels_skipped", Kind::StrDict),
    field("node_labels", Kind::StrDict),
    field("node_taints", Kind::Any),
    read_only("created_at"),
    read_only("updated_at"),
];

/// A brief list item. `min_node_count` and `max_node_count` always show their declared
/// defaults, whatever is stored: upstream's rendering leaks them (api.md §1.5).
#[derive(serde::Serialize)]
struct BriefView<'a> {
    uuid: &'a str,
    name: &'a str,
    flavor_id: &'a Option<String>,
    image_id: &'a Option<String>,
    node_count: i32,
    role: Option<&'a str>,
    min_node_count: i32,
    max_node_count: Option<i32>,
    is_default: bool,
    stack_id: &'a Option<String>,
    status: Option<ClusterStatus>,
    merge_labels: bool,
}

#[derive(serde::Serialize)]
struct FullView<'a> {
    id: i32,
    uuid: &'a str,
    name: &'a str,
    cluster_id: &'a str,
    project_id: &'a str,
    docker_volume_size: Option<i32>,
    labels: Option<&'a RawValue>,
    links: [Link; 2],
    flavor_id: &'a Option<String>,
    image_id: &'a Option<String>,
    node_addresses: Option<&'a RawValue>,
    node_count: i32,
    role: Option<&'a str>,
    min_node_count: i32,
    max_node_count: Option<i32>,
    is_default: bool,
    stack_id: &'a Option<String>,
    status: Option<ClusterStatus>,
    status_reason: &'a Option<String>,
    version: &'a Option<String>,
    merge_labels: bool,
    labels_overridden: Map<String, Value>,
    labels_added: Map<String, Value>,
    labels_skipped: Map<String, Value>,
    node_labels: Option<&'a RawValue>,
    node_taints: Option<&'a RawValue>,
    created_at: Ts,
    updated_at: Ts,
}

#[derive(serde::Serialize)]
struct NodegroupList<'a> {
    nodegroups: Vec<BriefView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

fn ng_links(base: &str, cluster_uuid: &str, ng_uuid: &str) -> [Link; 2] {
    links(
        base,
        &format!("clusters/{cluster_uuid}/nodegroups/{ng_uuid}"),
    )
}

fn brief(ng: &NodeGroup) -> BriefView<'_> {
    BriefView {
        uuid: &ng.uuid,
        name: &ng.name,
        flavor_id: &ng.flavor_id,
        image_id: &ng.image_id,
        node_count: ng.node_count.unwrap_or(1),
        role: ng.role.as_ref().map(NodegroupRole::as_str),
        min_node_count: 0,
        max_node_count: None,
        is_default: ng.is_default.unwrap_or(false),
        stack_id: &ng.stack_id,
        status: ng.status,
        merge_labels: false,
    }
}

fn full<'a>(ng: &'a NodeGroup, cluster: &Cluster, base: &str) -> FullView<'a> {
    let (labels_overridden, labels_added, labels_skipped) = labels_diff(
        &lookup::labels(cluster.labels.as_deref()),
        &lookup::labels(ng.labels.as_deref()),
    );
    FullView {
        id: ng.id,
        uuid: &ng.uuid,
        name: &ng.name,
        cluster_id: &ng.cluster_id,
        project_id: &ng.project_id,
        docker_volume_size: ng.docker_volume_size,
        labels: raw_json(ng.labels.as_deref()),
        links: ng_links(base, &ng.cluster_id, &ng.uuid),
        flavor_id: &ng.flavor_id,
        image_id: &ng.image_id,
        node_addresses: raw_json(ng.node_addresses.as_deref()),
        node_count: ng.node_count.unwrap_or(1),
        role: ng.role.as_ref().map(NodegroupRole::as_str),
        min_node_count: ng.min_node_count.unwrap_or(0),
        max_node_count: ng.max_node_count,
        is_default: ng.is_default.unwrap_or(false),
        stack_id: &ng.stack_id,
        status: ng.status,
        status_reason: &ng.status_reason,
        version: &ng.version,
        merge_labels: false,
        labels_overridden,
        labels_added,
        labels_skipped,
        node_labels: raw_json(ng.node_labels.as_deref()),
        node_taints: raw_json(ng.node_taints.as_deref()),
        created_at: Ts(ng.created_at),
        updated_at: Ts(ng.updated_at),
    }
}

use crate::openapi::Body;
use crate::table::{ANY, Route, arg, handler, missing, no_such_path};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/clusters/{cluster_ident}/nodegroups",
        handler!(|app, req, p| list(app, req, arg(p, 0))),
        "List a cluster's nodegroups (1.9+)",
        200,
        Body::None,
        "nodegroup:get_all",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir", "role"])
    .since(9, "get_one"),
    Route::op(
        "GET",
        "/v1/clusters/{cluster_ident}/nodegroups/{nodegroup_ident}",
        handler!(|app, req, p| show(app, req, arg(p, 0), arg(p, 1))),
        "Show a nodegroup (1.9+)",
        200,
        Body::None,
        "nodegroup:get",
    )
    .since(9, "get_one"),
    Route::op(
        "POST",
        "/v1/clusters/{cluster_ident}/nodegroups",
        handler!(|app, req, p| create(app, req, arg(p, 0))),
        "Create a nodegroup (1.9+)",
        202,
        Body::Object("NodeGroup", FIELDS),
        "nodegroup:create",
    )
    .since(9, "post"),
    Route::op(
        "PATCH",
        "/v1/clusters/{cluster_ident}/nodegroups/{nodegroup_ident}",
        handler!(|app, req, p| update(app, req, arg(p, 0), arg(p, 1))),
        "Update a nodegroup's bounds, node labels or taints (1.9+)",
        202,
        Body::JsonPatch,
        "nodegroup:update",
    )
    .since(9, "patch"),
    Route::op(
        "DELETE",
        "/v1/clusters/{cluster_ident}/nodegroups/{nodegroup_ident}",
        handler!(|app, req, p| delete(app, req, arg(p, 0), arg(p, 1))),
        "Delete a nodegroup (1.9+)",
        204,
        Body::None,
        "nodegroup:delete",
    )
    .since(9, "delete"),
    Route::quirk(
        "PATCH",
        "/v1/clusters/{cluster_ident}/nodegroups",
        handler!(|_app, _req, _p| async { Err(missing("nodegroup_id")) }),
    )
    .since(9, "patch"),
    Route::quirk(
        "DELETE",
        "/v1/clusters/{cluster_ident}/nodegroups",
        handler!(|_app, _req, _p| async { Err(missing("nodegroup_id")) }),
    )
    .since(9, "delete"),
    // The nodegroup controller's version check covers any path below it.
    Route::quirk(
        ANY,
        "/v1/clusters/{cluster_ident}/nodegroups/{nodegroup_ident}/**",
        handler!(|_app, req, _p| no_such_path(req)),
    )
    .since(9, "get_one"),
];

async fn list(app: &AppState, req: &Req, cluster: &str) -> ApiResult<Response> {
    let params = ListParams::parse(req, app.settings.max_limit)?;
    app.policy
        .authorize("nodegroup:get_all", &ctx_target(req), &req.ctx)?;
    if req.ctx.is_admin {
        app.policy
            .authorize("nodegroup:get_all_all_projects", &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let c = lookup::cluster(app, &ctx, cluster).await?;
    let cluster_uuid = c.uuid.unwrap_or_default();
    let repo = app.db.nodegroups();
    let marker = match &params.marker {
        Some(m) => Some(repo.get_by_uuid(&ctx, &cluster_uuid, m).await?),
        None => None,
    };
    let filters = NodeGroupFilters {
        role: req.query("role").map(str::to_owned),
        ..NodeGroupFilters::default()
    };
    let rows = repo
        .list(&ctx, &cluster_uuid, &filters, &params.page(marker))
        .await?;
    let next = params.next(
        &req.base,
        &format!("clusters/{cluster_uuid}/nodegroups"),
        rows.len(),
        rows.last().map(|ng| ng.uuid.clone()),
    );
    let body = NodegroupList {
        nodegroups: rows.iter().map(brief).collect(),
        next,
    };
    super::respond_with(StatusCode::OK, &body)
}

async fn show(app: &AppState, req: &Req, cluster: &str, ident: &str) -> ApiResult<Response> {
    app.policy
        .authorize("nodegroup:get", &ctx_target(req), &req.ctx)?;
    if req.ctx.is_admin {
        app.policy
            .authorize("nodegroup:get_one_all_projects", &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let c = lookup::cluster(app, &ctx, cluster).await?;
    let ng = lookup::nodegroup(app, &ctx, c.uuid.as_deref().unwrap_or_default(), ident).await?;
    super::respond_with(StatusCode::OK, &full(&ng, &c, &req.base))
}

/// An integer attribute that must fit its 32-bit column.
fn int32(doc: &Map<String, Value>, k: &str) -> ApiResult<Option<i32>> {
    Ok(magnum_service::int32(doc, k)?)
}

async fn create(app: &AppState, req: &Req, cluster: &str) -> ApiResult<Response> {
    let mut doc = parse_object("nodegroup", req.body.as_ref(), FIELDS)?;
    app.policy
        .authorize("nodegroup:create", &ctx_target(req), &req.ctx)?;
    let c = lookup::cluster(app, &req.ctx, cluster).await?;
    app.services
        .nodegroups()
        .create(&req.ctx, &c, &mut doc)
        .await?;
    let cluster_labels = lookup::labels(c.labels.as_deref());
    let labels = match doc.get("labels") {
        Some(Value::Object(l)) => l.clone(),
        _ => Map::new(),
    };
    let body = render_request(&doc, &cluster_labels, &labels, &req.base);
    super::respond(StatusCode::ACCEPTED, &body)
}

/// Upstream's answer to a create: the request as the API type holds it, so only the
/// attributes that were set (no id, status or timestamps), plus links and the label diff.
fn render_request(
    doc: &Map<String, Value>,
    cluster_labels: &Map<String, Value>,
    labels: &Map<String, Value>,
    base: &str,
) -> Value {
    let (overridden, added, skipped) = labels_diff(cluster_labels, labels);
    let mut out = Map::new();
    let get = |k: &str| doc.get(k).cloned();
    for key in [
        "uuid",
        "name",
        "cluster_id",
        "project_id",
        "docker_volume_size",
        "labels",
    ] {
        if let Some(v) = get(key) {
            out.insert(key.into(), v);
        }
    }
    let text = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or_default();
    let links = ng_links(base, text("cluster_id"), text("uuid"));
    out.insert(
        "links".into(),
        serde_json::to_value(links).unwrap_or(Value::Null),
    );
    for key in [
        "flavor_id",
        "image_id",
        "node_count",
        "role",
        "min_node_count",
        "max_node_count",
        "is_default",
        "status_reason",
        "version",
    ] {
        if let Some(v) = get(key) {
            out.insert(key.into(), v);
        }
    }
    out.insert("merge_labels".into(), Value::Bool(false));
    out.insert("labels_overridden".into(), Value::Object(overridden));
    out.insert("labels_added".into(), Value::Object(added));
    out.insert("labels_skipped".into(), Value::Object(skipped));
    for key in ["node_labels", "node_taints"] {
        if let Some(v) = get(key) {
            out.insert(key.into(), v);
        }
    }
    Value::Object(out)
}

/// The nodegroup as upstream's `as_dict()` shows it to JSON-patch.
fn patch_document(ng: &NodeGroup) -> Map<String, Value> {
    let json_col = |t: &Option<String>| super::json_column(t.as_deref());
    let doc = serde_json::json!({
        "id": ng.id,
        "uuid": ng.uuid,
        "name": ng.name,
        "cluster_id": ng.cluster_id,
        "project_id": ng.project_id,
        "docker_volume_size": ng.docker_volume_size,
        "labels": json_col(&ng.labels),
        "flavor_id": ng.flavor_id,
        "image_id": ng.image_id,
        "node_addresses": json_col(&ng.node_addresses),
        "node_count": ng.node_count.unwrap_or(1),
        "role": ng.role,
        "max_node_count": ng.max_node_count,
        "min_node_count": ng.min_node_count.unwrap_or(0),
        "is_default": ng.is_default.unwrap_or(false),
        "stack_id": ng.stack_id,
        "status": ng.status,
        "status_reason": ng.status_reason,
        "version": ng.version,
        "node_labels": json_col(&ng.node_labels),
        "node_taints": json_col(&ng.node_taints),
        "created_at": super::timestamp(ng.created_at),
        "updated_at": super::timestamp(ng.updated_at),
    });
    match doc {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

async fn update(app: &AppState, req: &Req, cluster: &str, ident: &str) -> ApiResult<Response> {
    let rules = PatchRules::nodegroup();
    let mut ops = parse_patch(req.body.as_ref(), &rules)?;
    let c = lookup::cluster(app, &req.ctx, cluster).await?;
    app.policy
        .authorize("nodegroup:update", &ctx_target(req), &req.ctx)?;
    let cluster_uuid = c.uuid.clone().unwrap_or_default();
    let ng = lookup::nodegroup(app, &req.ctx, &cluster_uuid, ident).await?;
    let mut doc = patch_document(&ng);
    apply_patch(&mut doc, &mut ops, &rules)?;
    revalidate(&doc, FIELDS)?;
    // Label values are stored as strings whatever the patch sent.
    let labels = match doc.get("labels") {
        Some(v @ Value::Object(_)) => {
            crate::input::check_value(&field("labels", Kind::StrDict), v)?
        }
        _ => Value::Null,
    };
    let node_labels = match doc.get("node_labels") {
        Some(v @ Value::Object(_)) => {
            crate::input::check_value(&field("node_labels", Kind::StrDict), v)?
        }
        other => other.cloned().unwrap_or(Value::Null),
    };
    let node_taints = doc.get("node_taints").cloned().unwrap_or(Value::Null);
    let patch = NodegroupPatch {
        min_node_count: int32(&doc, "min_node_count")?.unwrap_or(0),
        max_node_count: int32(&doc, "max_node_count")?,
        labels,
        node_labels,
        node_taints,
    };
    let patched = app
        .services
        .nodegroups()
        .update(&req.ctx, &c, &ng, patch)
        .await?;
    super::respond_with(StatusCode::ACCEPTED, &full(&patched, &c, &req.base))
}

async fn delete(app: &AppState, req: &Req, cluster: &str, ident: &str) -> ApiResult<Response> {
    app.policy
        .authorize("nodegroup:delete", &ctx_target(req), &req.ctx)?;
    let c = lookup::cluster(app, &req.ctx, cluster).await?;
    let cluster_uuid = c.uuid.clone().unwrap_or_default();
    let ng = lookup::nodegroup(app, &req.ctx, &cluster_uuid, ident).await?;
    app.services.nodegroups().delete(&req.ctx, &c, &ng).await?;
    no_content()
}
