//! `/v1/clusters` (api.md §6.2): list/detail, show, create, JSON-patch update, delete and the
//! resize/upgrade actions. Nodegroups live under a cluster and are routed from here.
//!
//! This module holds the resource's fields, views and route table; each operation is a file
//! of its own beside it.
//!
//! Upstream flaw fixed: create checked the quota in the API and left the insert to the
//! conductor, so concurrent creates overshot the quota and a GET right after the 202 found no
//! cluster (or failed to render it, with master_count 0). Here the cluster row and its two
//! default nodegroups are inserted in one transaction that enforces the quota, and only then
//! is the conductor told.

use std::collections::HashMap;

use axum::response::Response;
use http::StatusCode;
use magnum_core::ids::is_uuid_like;
use magnum_core::model::NodegroupRole;
use magnum_core::status::{ClusterHealthStatus, ClusterStatus};
use magnum_core::{Error, RequestContext};
use magnum_db::repo::cluster::{Cluster, ClusterBrief, ClusterFilters};
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_service::clusters::{ClusterChange, NewCluster, ZERO_NODES};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::json_out as out;
use super::lookup::{self, admin_scope, labels_diff};
use super::{
    Link, ListParams, Ts, bad_marker, ctx_target, links, no_content, owner_target, raw_json,
    respond,
};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::input::{
    Field, Kind, NON_NEGATIVE, POSITIVE, STR255, check_value, field, invalid, mandatory,
    parse_object, read_only, revalidate,
};
use crate::patch::{PatchRules, apply_patch, parse_patch};
use crate::request::Req;
use crate::version::ApiVersion;
use magnum_db::items::List;

mod create;
mod delete;
mod list;
mod resize;
mod show;
mod update;
mod upgrade;

/// Free text (upstream `wtypes.text`); the bound is the database's TEXT size.
pub const TEXT: Kind = Kind::Str { min: 0, max: 65535 };

pub const CLUSTER_STATUSES: &[&str] = magnum_core::status::ClusterStatus::NAMES;

const HEALTH_STATUSES: &[&str] = magnum_core::status::ClusterHealthStatus::NAMES;

const NAME_PATTERN: &str = "^[a-zA-Z][a-zA-Z0-9_.-]*$";

const FIELDS: &[Field] = &[
    field("uuid", Kind::Uuid),
    field("name", Kind::Str { min: 1, max: 242 }),
    mandatory("cluster_template_id", TEXT),
    field("keypair", STR255),
    field("node_count", NON_NEGATIVE),
    field("master_count", POSITIVE),
    field("docker_volume_size", POSITIVE),
    field("labels", Kind::StrDict),
    field("master_flavor_id", STR255),
    field("flavor_id", STR255),
    field("create_timeout", NON_NEGATIVE),
    read_only("links"),
    read_only("stack_id"),
    read_only("cluster_id"),
    field("status", Kind::Enum(CLUSTER_STATUSES)),
    field("status_reason", TEXT),
    field("health_status", Kind::Enum(HEALTH_STATUSES)),
    field("health_status_reason", Kind::StrDict),
    field("discovery_url", TEXT),
    read_only("api_address"),
    read_only("coe_version"),
    read_only("container_version"),
    read_only("project_id"),
    read_only("user_id"),
    read_only("node_addresses"),
    read_only("master_addresses"),
    field("faults", Kind::StrDict),
    field("fixed_network", STR255),
    field("fixed_subnet", STR255),
    field("floating_ip_enabled", Kind::Bool),
    field("merge_labels", Kind::Bool),
    field("labels_overridden", Kind::StrDict),
    field("labels_added", Kind::StrDict),
    field("labels_skipped", Kind::StrDict),
    field("master_lb_enabled", Kind::Bool),
    read_only("created_at"),
    read_only("updated_at"),
];

const RESIZE_FIELDS: &[Field] = &[
    mandatory("node_count", NON_NEGATIVE),
    field("nodes_to_remove", Kind::StrList),
    field("nodegroup", STR255),
];

const UPGRADE_FIELDS: &[Field] = &[
    field("max_batch_size", POSITIVE),
    field("nodegroup", STR255),
    field("cluster_template", STR255),
];

/// The attributes a PATCH may change; any other difference is refused.
const UPDATABLE: [&str; 3] = ["node_count", "health_status", "health_status_reason"];

/// The API attributes upstream compares to find what a PATCH changed.
const COMPARED: &[&str] = &[
    "uuid",
    "name",
    "cluster_template_id",
    "keypair",
    "docker_volume_size",
    "labels",
    "master_flavor_id",
    "flavor_id",
    "stack_id",
    "status",
    "status_reason",
    "health_status",
    "health_status_reason",
    "create_timeout",
    "api_address",
    "discovery_url",
    "coe_version",
    "container_version",
    "project_id",
    "user_id",
    "fixed_network",
    "fixed_subnet",
    "floating_ip_enabled",
    "master_lb_enabled",
    "created_at",
    "updated_at",
    "node_count",
    "master_count",
    "node_addresses",
    "master_addresses",
];

fn is_master(ng: &NodeGroup) -> bool {
    ng.role.as_ref().is_some_and(NodegroupRole::is_master)
}

/// What upstream derives from a cluster's nodegroups (its `node_count`, `master_count`,
/// `node_addresses` and `master_addresses` properties).
#[derive(Default)]
pub struct Nodes {
    pub node_count: i64,
    pub master_count: i64,
    pub node_addresses: Vec<String>,
    pub master_addresses: Vec<String>,
}

impl Nodes {
    pub fn of<'a>(ngs: impl IntoIterator<Item = &'a NodeGroup>) -> Self {
        let mut n = Nodes::default();
        for ng in ngs {
            let count = i64::from(magnum_core::model::object_node_count(ng.node_count));
            let addrs: Vec<String> =
                magnum_db::json::loads(ng.node_addresses.as_deref()).unwrap_or_default();
            if is_master(ng) {
                n.master_count += count;
                n.master_addresses.extend(addrs);
            } else {
                n.node_count += count;
                n.node_addresses.extend(addrs);
            }
        }
        n
    }
}

/// The full rendering (detail list items and GET one).
#[derive(serde::Serialize)]
struct FullView<'a> {
    uuid: &'a Option<String>,
    name: &'a Option<String>,
    cluster_template_id: &'a Option<String>,
    keypair: &'a Option<String>,
    node_count: i64,
    master_count: i64,
    docker_volume_size: Option<i32>,
    labels: Option<&'a RawValue>,
    master_flavor_id: &'a Option<String>,
    flavor_id: &'a Option<String>,
    create_timeout: Option<i32>,
    links: [Link; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    stack_id: Option<&'a Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_id: Option<&'a Option<String>>,
    status: Option<ClusterStatus>,
    status_reason: &'a Option<String>,
    health_status: Option<ClusterHealthStatus>,
    health_status_reason: Option<&'a RawValue>,
    discovery_url: &'a Option<String>,
    api_address: &'a Option<String>,
    coe_version: &'a Option<String>,
    container_version: &'a Option<String>,
    project_id: &'a Option<String>,
    user_id: &'a Option<String>,
    node_addresses: Vec<String>,
    master_addresses: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    faults: Option<Map<String, Value>>,
    fixed_network: &'a Option<String>,
    fixed_subnet: &'a Option<String>,
    floating_ip_enabled: Option<bool>,
    merge_labels: bool,
    labels_overridden: Map<String, Value>,
    labels_added: Map<String, Value>,
    labels_skipped: Map<String, Value>,
    master_lb_enabled: Option<bool>,
    created_at: Ts,
    updated_at: Ts,
}

/// `stack_id` below 1.13, `cluster_id` (same value) from 1.13 on.
fn stack_or_cluster_id<'a>(
    c: &'a Cluster,
    req: &Req,
) -> (Option<&'a Option<String>>, Option<&'a Option<String>>) {
    if req.version >= ApiVersion::new(1, 13) {
        (None, Some(&c.stack_id))
    } else {
        (Some(&c.stack_id), None)
    }
}

fn cluster_links(base: &str, c: &Cluster) -> [Link; 2] {
    links(
        base,
        &format!("clusters/{}", c.uuid.as_deref().unwrap_or_default()),
    )
}

/// A brief list item, keys in upstream's order, written straight from the driver's row:
/// the cluster list is a hot path. The bytes are serde_json's compact rendering of the
/// same fields (`out` writes them as it does).
fn brief(o: &mut Vec<u8>, c: &ClusterBrief<'_>, base: &str, cluster_id: bool) {
    o.extend_from_slice(b"{\"uuid\":");
    out::opt_str(o, c.uuid);
    o.extend_from_slice(b",\"name\":");
    out::opt_str(o, c.name);
    o.extend_from_slice(b",\"cluster_template_id\":");
    out::opt_str(o, c.cluster_template_id);
    o.extend_from_slice(b",\"keypair\":");
    out::opt_str(o, c.keypair);
    o.extend_from_slice(b",\"node_count\":");
    out::int(o, c.node_count);
    o.extend_from_slice(b",\"master_count\":");
    out::int(o, c.master_count);
    o.extend_from_slice(b",\"docker_volume_size\":");
    out::opt_int(o, c.docker_volume_size);
    o.extend_from_slice(b",\"labels\":");
    out::raw_json(o, c.labels);
    o.extend_from_slice(b",\"master_flavor_id\":");
    out::opt_str(o, c.master_flavor_id);
    o.extend_from_slice(b",\"flavor_id\":");
    out::opt_str(o, c.flavor_id);
    o.extend_from_slice(b",\"create_timeout\":");
    out::opt_int(o, c.create_timeout);
    o.extend_from_slice(b",\"links\":");
    out::links(o, base, "clusters/", c.uuid.unwrap_or_default());
    // `stack_id` below 1.13, `cluster_id` (same value) from 1.13 on.
    o.extend_from_slice(if cluster_id {
        b",\"cluster_id\":"
    } else {
        b",\"stack_id\":"
    });
    out::opt_str(o, c.stack_id);
    o.extend_from_slice(b",\"status\":");
    out::opt_str(o, c.status);
    o.extend_from_slice(b",\"health_status\":");
    out::opt_str(o, c.health_status);
    o.extend_from_slice(b",\"merge_labels\":false}");
}

fn full<'a>(
    c: &'a Cluster,
    nodes: Nodes,
    parent_labels: &Map<String, Value>,
    faults: Option<Map<String, Value>>,
    req: &Req,
) -> FullView<'a> {
    let (stack_id, cluster_id) = stack_or_cluster_id(c, req);
    let (labels_overridden, labels_added, labels_skipped) =
        labels_diff(parent_labels, &lookup::labels(c.labels.as_deref()));
    FullView {
        uuid: &c.uuid,
        name: &c.name,
        cluster_template_id: &c.cluster_template_id,
        keypair: &c.keypair,
        node_count: nodes.node_count,
        master_count: nodes.master_count,
        docker_volume_size: c.docker_volume_size,
        labels: raw_json(c.labels.as_deref()),
        master_flavor_id: &c.master_flavor_id,
        flavor_id: &c.flavor_id,
        create_timeout: c.create_timeout,
        links: cluster_links(&req.base, c),
        stack_id,
        cluster_id,
        status: c.status,
        status_reason: &c.status_reason,
        health_status: c.health_status,
        health_status_reason: raw_json(c.health_status_reason.as_deref()),
        discovery_url: &c.discovery_url,
        api_address: &c.api_address,
        coe_version: &c.coe_version,
        container_version: &c.container_version,
        project_id: &c.project_id,
        user_id: &c.user_id,
        node_addresses: nodes.node_addresses,
        master_addresses: nodes.master_addresses,
        faults,
        fixed_network: &c.fixed_network,
        fixed_subnet: &c.fixed_subnet,
        floating_ip_enabled: c.floating_ip_enabled,
        merge_labels: false,
        labels_overridden,
        labels_added,
        labels_skipped,
        master_lb_enabled: c.master_lb_enabled,
        created_at: Ts(c.created_at),
        updated_at: Ts(c.updated_at),
    }
}

/// About the size of one brief item (700 bytes with short labels), to size the output once.
const BRIEF_BYTES: usize = 768;

#[derive(serde::Serialize)]
struct ClusterList<T> {
    clusters: Vec<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

/// The labels of the cluster's template, for the label diff. A template the caller can no
/// longer see leaves the diff against nothing rather than failing the whole rendering.
async fn template_labels(
    app: &AppState,
    ctx: &RequestContext,
    template_uuid: Option<&str>,
) -> ApiResult<Map<String, Value>> {
    let Some(uuid) = template_uuid else {
        return Ok(Map::new());
    };
    match app.db.cluster_templates().get_by_uuid(ctx, uuid).await {
        Ok(t) => Ok(lookup::labels(t.labels.as_deref())),
        Err(Error::ClusterTemplateNotFound { .. }) => Ok(Map::new()),
        Err(e) => Err(e.into()),
    }
}

fn owner(c: &Cluster) -> magnum_conf::policy::Target {
    owner_target(c.project_id.as_deref(), c.user_id.as_deref())
}

fn text(doc: &Map<String, Value>, k: &str) -> Option<String> {
    doc.get(k).and_then(Value::as_str).map(str::to_owned)
}

fn boolean(doc: &Map<String, Value>, k: &str) -> Option<bool> {
    doc.get(k).and_then(Value::as_bool)
}

/// An integer attribute that must fit its 32-bit column.
fn int32(doc: &Map<String, Value>, k: &str) -> ApiResult<Option<i32>> {
    Ok(magnum_service::int32(doc, k)?)
}

/// WSME's `StringType(pattern=...)`: Python's `$` also matches before one final newline.
fn check_name(doc: &Map<String, Value>) -> ApiResult<()> {
    let Some(v @ Value::String(name)) = doc.get("name") else {
        return Ok(());
    };
    let name = name.strip_suffix('\n').unwrap_or(name);
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "name",
            v,
            format!("Value should match the pattern {NAME_PATTERN}"),
        ))
    }
}

use crate::openapi::Body;
use crate::table::{ANY, Route, arg, handler, missing, no_such_path};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/clusters",
        handler!(|app, req, p| list::list(app, req, false)),
        "List clusters",
        200,
        Body::None,
        "cluster:get_all",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/clusters/detail",
        handler!(|app, req, p| list::list(app, req, true)),
        "List clusters with details",
        200,
        Body::None,
        "cluster:detail",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/clusters/{ident}",
        handler!(|app, req, p| show::show(app, req, arg(p, 0))),
        "Show a cluster",
        200,
        Body::None,
        "cluster:get",
    ),
    Route::op(
        "POST",
        "/v1/clusters",
        handler!(|app, req, p| create::create(app, req)),
        "Create a cluster",
        202,
        Body::Object("Cluster", FIELDS),
        "cluster:create",
    ),
    Route::op(
        "PATCH",
        "/v1/clusters/{ident}",
        handler!(|app, req, p| update::update(app, req, arg(p, 0))),
        "Update a cluster's node count or health",
        202,
        Body::JsonPatch,
        "cluster:update",
    )
    .query(&["rollback"]),
    Route::op(
        "DELETE",
        "/v1/clusters/{ident}",
        handler!(|app, req, p| delete::delete(app, req, arg(p, 0))),
        "Delete a cluster",
        204,
        Body::None,
        "cluster:delete",
    ),
    Route::op(
        "POST",
        "/v1/clusters/{ident}/actions/resize",
        handler!(|app, req, p| resize::resize(app, req, arg(p, 0))),
        "Resize a nodegroup of a cluster (1.7+)",
        202,
        Body::Object("ClusterResizeRequest", RESIZE_FIELDS),
        "cluster:resize",
    )
    .since(7, "resize"),
    Route::op(
        "POST",
        "/v1/clusters/{ident}/actions/upgrade",
        handler!(|app, req, p| upgrade::upgrade(app, req, arg(p, 0))),
        "Upgrade a cluster to another template (1.8+)",
        202,
        Body::Object("ClusterUpgradeRequest", UPGRADE_FIELDS),
        "cluster:upgrade",
    )
    .since(7, "upgrade"),
    Route::quirk(
        "GET",
        "/v1/clusters/{marker}/detail",
        handler!(|_app, _req, p| detail_with_marker(arg(p, 0))),
    ),
    Route::quirk(
        ANY,
        "/v1/clusters/{ident}/actions/**",
        handler!(|_app, _req, _p| async { Err(ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED)) }),
    ),
    Route::quirk(
        ANY,
        "/v1/clusters/{marker}/detail",
        handler!(|_app, req, _p| no_such_path(req)),
    ),
    Route::quirk(
        "DELETE",
        "/v1/clusters",
        handler!(|_app, _req, _p| async { Err(missing("cluster_ident")) }),
    ),
    Route::quirk(
        "PATCH",
        "/v1/clusters",
        handler!(|_app, _req, _p| async { Err(missing("cluster_ident")) }),
    ),
];

/// `/clusters/<x>/detail` (and `/clustertemplates/<x>/detail`) binds `<x>` to the detail
/// list's marker: any but a UUID is a bad marker, and a UUID is refused because the path's
/// parent is not the collection, with upstream's unformatted not-found message.
pub(super) async fn detail_with_marker(marker: &str) -> ApiResult<Response> {
    Err(if is_uuid_like(marker) {
        ApiError::NotFound("The %(name)s resource %(id)s could not be found.".into())
    } else {
        bad_marker(marker)
    })
}
