//! `/v1/clusters` (api.md §6.2): list/detail, show, create, JSON-patch update, delete and the
//! resize/upgrade actions. Nodegroups live under a cluster and are routed from here.
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
use magnum_db::repo::cluster::{BriefSink, Cluster, ClusterBrief, ClusterFilters};
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_service::clusters::{ClusterChange, NewCluster, ZERO_NODES};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::json_out as out;
use super::lookup::{self, admin_scope, labels_diff};
use super::rendered::{Items, List};
use super::{
    Link, ListParams, Ts, bad_marker, ctx_target, links, no_content, owner_target, raw_json,
    respond,
};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::input::{
    Field, Kind, STR255, check_value, field, invalid, mandatory, parse_object, read_only,
    revalidate,
};
use crate::patch::{PatchRules, apply_patch, parse_patch};
use crate::request::Req;
use crate::version::ApiVersion;

/// Free text (upstream `wtypes.text`); the bound is the database's TEXT size.
pub const TEXT: Kind = Kind::Str { min: 0, max: 65535 };

pub const CLUSTER_STATUSES: &[&str] = magnum_core::status::ClusterStatus::NAMES;

const HEALTH_STATUSES: &[&str] = magnum_core::status::ClusterHealthStatus::NAMES;

const NAME_PATTERN: &str = "^[a-zA-Z][a-zA-Z0-9_.-]*$";

const NON_NEGATIVE: Kind = Kind::Int {
    min: Some(0),
    max: None,
};
const POSITIVE: Kind = Kind::Int {
    min: Some(1),
    max: None,
};

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

/// The brief list's clusters, rendered into its body (or copied, rendered before from an
/// equal row with the same node counts).
struct Briefs<'a> {
    items: Items<'a>,
    base: &'a str,
    cluster_id: bool,
}

impl BriefSink for Briefs<'_> {
    fn known(&mut self, raw: &[u8], node_count: i64, master_count: i64) -> bool {
        let mut counts = [0u8; 16];
        counts[..8].copy_from_slice(&node_count.to_le_bytes());
        counts[8..].copy_from_slice(&master_count.to_le_bytes());
        self.items.known(counts, raw)
    }

    fn row(&mut self, c: &ClusterBrief<'_>) {
        let (base, cluster_id) = (self.base, self.cluster_id);
        self.items.write(c.uuid, |o| brief(o, c, base, cluster_id));
    }
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
        handler!(|app, req, p| list(app, req, false)),
        "List clusters",
        200,
        Body::None,
        "cluster:get_all",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/clusters/detail",
        handler!(|app, req, p| list(app, req, true)),
        "List clusters with details",
        200,
        Body::None,
        "cluster:detail",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/clusters/{ident}",
        handler!(|app, req, p| show(app, req, arg(p, 0))),
        "Show a cluster",
        200,
        Body::None,
        "cluster:get",
    ),
    Route::op(
        "POST",
        "/v1/clusters",
        handler!(|app, req, p| create(app, req)),
        "Create a cluster",
        202,
        Body::Object("Cluster", FIELDS),
        "cluster:create",
    ),
    Route::op(
        "PATCH",
        "/v1/clusters/{ident}",
        handler!(|app, req, p| update(app, req, arg(p, 0))),
        "Update a cluster's node count or health",
        202,
        Body::JsonPatch,
        "cluster:update",
    )
    .query(&["rollback"]),
    Route::op(
        "DELETE",
        "/v1/clusters/{ident}",
        handler!(|app, req, p| delete(app, req, arg(p, 0))),
        "Delete a cluster",
        204,
        Body::None,
        "cluster:delete",
    ),
    Route::op(
        "POST",
        "/v1/clusters/{ident}/actions/resize",
        handler!(|app, req, p| resize(app, req, arg(p, 0))),
        "Resize a nodegroup of a cluster (1.7+)",
        202,
        Body::Object("ClusterResizeRequest", RESIZE_FIELDS),
        "cluster:resize",
    )
    .since(7, "resize"),
    Route::op(
        "POST",
        "/v1/clusters/{ident}/actions/upgrade",
        handler!(|app, req, p| upgrade(app, req, arg(p, 0))),
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

/// List or detail. At most three statements: the marker row, one page of clusters and the
/// nodegroups of that page (detail adds one template read per distinct template).
async fn list(app: &AppState, req: &Req, detail: bool) -> ApiResult<Response> {
    let params = ListParams::parse(req, app.settings.max_limit)?;
    let (rule, all_rule) = if detail {
        ("cluster:detail", "cluster:detail_all_projects")
    } else {
        ("cluster:get_all", "cluster:get_all_all_projects")
    };
    app.policy.authorize(rule, &ctx_target(req), &req.ctx)?;
    if req.ctx.is_admin {
        app.policy.authorize(all_rule, &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let marker = match &params.marker {
        Some(m) => Some(app.db.clusters().get_by_uuid(&ctx, m).await?),
        None => None,
    };
    let path = if detail {
        "clusters/detail"
    } else {
        "clusters"
    };
    let page = params.page(marker);
    let filters = ClusterFilters::default();
    if !detail {
        // Each cluster is written as the driver reads its row. The buffer is sized for a
        // full page up front (pages not written are never touched).
        let limit = usize::try_from(params.limit)
            .unwrap_or(usize::MAX)
            .min(1000);
        let mut body = Vec::with_capacity(16 + BRIEF_BYTES * limit);
        let cluster_id = req.version >= ApiVersion::new(1, 13);
        body.extend_from_slice(b"{\"clusters\":[");
        let list = if cluster_id {
            List::ClustersBrief
        } else {
            List::ClustersBriefBelow113
        };
        let mut sink = Briefs {
            items: Items::new(&app.rendered, body, list, &req.base),
            base: &req.base,
            cluster_id,
        };
        let n = app
            .db
            .clusters()
            .list_brief_each(&ctx, &filters, &page, &mut sink)
            .await?;
        let (mut body, last) = sink.items.finish();
        let next = params.next(&req.base, path, n, last);
        out::end_list(&mut body, next.as_deref());
        return Ok(out::respond(body));
    }
    let rows = app.db.clusters().list(&ctx, &filters, &page).await?;
    let uuids: Vec<String> = rows.iter().filter_map(|c| c.uuid.clone()).collect();
    let next = params.next(
        &req.base,
        path,
        rows.len(),
        rows.last().and_then(|c| c.uuid.clone()),
    );
    let groups = app.db.nodegroups().for_clusters(&uuids).await?;
    let mut by_cluster: HashMap<&str, Vec<&NodeGroup>> = HashMap::with_capacity(rows.len());
    for ng in &groups {
        by_cluster
            .entry(ng.cluster_id.as_str())
            .or_default()
            .push(ng);
    }
    let mut parents: HashMap<&str, Map<String, Value>> = HashMap::new();
    for c in &rows {
        if let Some(t) = c.cluster_template_id.as_deref()
            && !parents.contains_key(t)
        {
            parents.insert(t, template_labels(app, &ctx, Some(t)).await?);
        }
    }
    let empty = Map::new();
    let clusters = rows
        .iter()
        .map(|c| {
            let ngs = c
                .uuid
                .as_deref()
                .and_then(|u| by_cluster.get(u))
                .map(|v| Nodes::of(v.iter().copied()))
                .unwrap_or_default();
            let parent = c
                .cluster_template_id
                .as_deref()
                .and_then(|t| parents.get(t))
                .unwrap_or(&empty);
            full(c, ngs, parent, None, req)
        })
        .collect();
    super::respond_with(StatusCode::OK, &ClusterList { clusters, next })
}

async fn show(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    if req.ctx.is_admin {
        app.policy
            .authorize("cluster:get_one_all_projects", &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let c = lookup::cluster(app, &ctx, ident).await?;
    app.policy.authorize("cluster:get", &owner(&c), &req.ctx)?;
    let uuid = c.uuid.clone().unwrap_or_default();
    let groups = app
        .db
        .nodegroups()
        .for_clusters(std::slice::from_ref(&uuid))
        .await?;
    let parent = template_labels(app, &ctx, c.cluster_template_id.as_deref()).await?;
    let failed = c.status.is_some_and(ClusterStatus::is_failed);
    let faults = failed.then(|| {
        groups
            .iter()
            .filter(|ng| ng.status.is_some_and(ClusterStatus::is_failed))
            .map(|ng| {
                (
                    ng.name.clone(),
                    ng.status_reason.clone().map_or(Value::Null, Value::String),
                )
            })
            .collect()
    });
    let body = full(&c, Nodes::of(&groups), &parent, faults, req);
    super::respond_with(StatusCode::OK, &body)
}

async fn create(app: &AppState, req: &Req) -> ApiResult<Response> {
    let before_1_10 = req.version < ApiVersion::new(1, 10);
    let doc = parse_object("cluster", req.body.as_ref(), FIELDS)?;
    check_name(&doc)?;
    let template_ident = lookup::ident_text(doc.get("cluster_template_id"));
    let t = match lookup::template(app, &req.ctx, &template_ident).await {
        // Up to 1.9 a missing template is the request's fault: 400 with the same text.
        Err(ApiError::Domain(e @ Error::ClusterTemplateNotFound { .. })) if before_1_10 => {
            return Err(ApiError::BadRequest(e.to_string()));
        }
        other => other?,
    };
    // Absent or null counts take the attribute's declared default.
    let present = |k: &str| doc.contains_key(k);
    let new = NewCluster {
        name: text(&doc, "name"),
        keypair: text(&doc, "keypair"),
        docker_volume_size: int32(&doc, "docker_volume_size")?,
        labels: doc.get("labels").and_then(Value::as_object).cloned(),
        merge_labels: boolean(&doc, "merge_labels") == Some(true),
        master_flavor_id: text(&doc, "master_flavor_id"),
        flavor_id: text(&doc, "flavor_id"),
        master_count: int32(&doc, "master_count")?,
        node_count: int32(&doc, "node_count")?,
        create_timeout: if present("create_timeout") {
            Some(int32(&doc, "create_timeout")?)
        } else {
            None
        },
        discovery_url: text(&doc, "discovery_url"),
        fixed_network: text(&doc, "fixed_network"),
        fixed_subnet: text(&doc, "fixed_subnet"),
        floating_ip_enabled: present("floating_ip_enabled")
            .then(|| boolean(&doc, "floating_ip_enabled")),
        master_lb_enabled: present("master_lb_enabled").then(|| boolean(&doc, "master_lb_enabled")),
        health_status: text(&doc, "health_status"),
        health_status_reason: doc.get("health_status_reason").cloned(),
        allow_zero_nodes: !before_1_10,
    };
    let clusters = app.services.clusters();
    clusters.check_create(&t, &new)?;
    app.policy
        .authorize("cluster:create", &ctx_target(req), &req.ctx)?;
    let uuid = clusters.create(&req.ctx, &t, new).await?;
    respond(StatusCode::ACCEPTED, &json!({"uuid": uuid}))
}

/// The cluster as upstream's `as_dict()` shows it to JSON-patch: the object's fields plus
/// the four nodegroup-derived properties.
fn patch_document(c: &Cluster, nodes: &Nodes) -> Map<String, Value> {
    let json_col = |t: &Option<String>| super::json_column(t.as_deref());
    let doc = json!({
        "id": c.id,
        "uuid": c.uuid,
        "name": c.name,
        "project_id": c.project_id,
        "user_id": c.user_id,
        "cluster_template_id": c.cluster_template_id,
        "keypair": c.keypair,
        "docker_volume_size": c.docker_volume_size,
        "labels": json_col(&c.labels),
        "master_flavor_id": c.master_flavor_id,
        "flavor_id": c.flavor_id,
        "stack_id": c.stack_id,
        "status": c.status,
        "status_reason": c.status_reason,
        "health_status": c.health_status,
        "health_status_reason": json_col(&c.health_status_reason),
        "create_timeout": c.create_timeout,
        "api_address": c.api_address,
        "discovery_url": c.discovery_url,
        "ca_cert_ref": c.ca_cert_ref,
        "magnum_cert_ref": c.magnum_cert_ref,
        "etcd_ca_cert_ref": c.etcd_ca_cert_ref,
        "front_proxy_ca_cert_ref": c.front_proxy_ca_cert_ref,
        "coe_version": c.coe_version,
        "container_version": c.container_version,
        "fixed_network": c.fixed_network,
        "fixed_subnet": c.fixed_subnet,
        "floating_ip_enabled": c.floating_ip_enabled,
        "master_lb_enabled": c.master_lb_enabled,
        "created_at": super::timestamp(c.created_at),
        "updated_at": super::timestamp(c.updated_at),
        "node_count": nodes.node_count,
        "master_count": nodes.master_count,
        "node_addresses": nodes.node_addresses,
        "master_addresses": nodes.master_addresses,
    });
    match doc {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Each writable attribute as the API type would hold it (coerced), for comparison.
fn coerced(doc: &Map<String, Value>) -> ApiResult<Map<String, Value>> {
    let mut out = doc.clone();
    for f in FIELDS.iter().filter(|f| !f.read_only) {
        if let Some(v) = doc.get(f.name) {
            out.insert(f.name.to_owned(), check_value(f, v)?);
        }
    }
    Ok(out)
}

async fn update(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    // `rollback` is a query parameter from 1.3 on.
    if req.version < ApiVersion::new(1, 3) {
        req.allow_query(&[])?;
    }
    let rollback = match req.query("rollback") {
        None => false,
        Some(raw) => {
            let f = field("rollback", Kind::Bool);
            check_value(&f, &Value::String(raw.to_owned()))?
                .as_bool()
                .unwrap_or(false)
        }
    };
    let rules = PatchRules::cluster();
    let mut ops = parse_patch(req.body.as_ref(), &rules)?;
    if req.ctx.is_admin {
        app.policy
            .authorize("cluster:update_all_projects", &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let c = lookup::cluster(app, &ctx, ident).await?;
    app.policy
        .authorize("cluster:update", &owner(&c), &req.ctx)?;
    app.policy
        .authorize("cluster:update_health_status", &ctx_target(req), &req.ctx)?;
    let uuid = c.uuid.clone().unwrap_or_default();
    let groups = app
        .db
        .nodegroups()
        .for_clusters(std::slice::from_ref(&uuid))
        .await?;
    let original = patch_document(&c, &Nodes::of(&groups));
    let mut doc = original.clone();
    apply_patch(&mut doc, &mut ops, &rules)?;
    revalidate(&doc, FIELDS)?;
    let patched = coerced(&doc)?;
    let before = coerced(&original)?;
    let mut refused: Vec<&str> = COMPARED
        .iter()
        .copied()
        .filter(|k| before.get(*k) != patched.get(*k) && !UPDATABLE.contains(k))
        .collect();
    // Root-disk check of the flavors (§6.2.6) waits for the validator's Nova seam.
    if !refused.is_empty() {
        refused.sort_unstable();
        return Err(ApiError::BadRequest(format!(
            "cannot change cluster property(ies) {}.",
            refused.join(", ")
        )));
    }
    // The worker count sent is the default worker's, unless the patch set /node_count.
    let mut node_count = None;
    for op in ops.iter().filter(|op| op.path == "/node_count") {
        let from_op = op
            .value
            .as_ref()
            .and_then(|v| check_value(&field("node_count", NON_NEGATIVE), v).ok())
            .and_then(|v| v.as_i64())
            .filter(|n| *n != 0);
        node_count = from_op.or_else(|| patched.get("node_count").and_then(Value::as_i64));
    }
    let node_count = match node_count {
        Some(n) => i32::try_from(n).map_err(|_| {
            invalid(
                "node_count",
                &Value::from(n),
                "Value should be lower or equal to 2147483647",
            )
        })?,
        None => lookup::default_worker(app, &ctx, &uuid)
            .await?
            .node_count
            .unwrap_or(1),
    };
    if req.version < ApiVersion::new(1, 10) && node_count == 0 {
        return Err(ApiError::BadRequest(ZERO_NODES.into()));
    }
    let change = ClusterChange {
        node_count,
        health_status: patched
            .get("health_status")
            .and_then(Value::as_str)
            .map(str::to_owned),
        health_status_reason: patched
            .get("health_status_reason")
            .filter(|v| !v.is_null())
            .cloned(),
        rollback,
    };
    // The admin's all-projects scope travels to the conductor, which loads the cluster
    // again (as upstream's context does): with the caller's own scope another project's
    // cluster is not found there and the accepted change is dropped.
    app.services.clusters().update(&ctx, &c, change).await?;
    respond(StatusCode::ACCEPTED, &json!({"uuid": uuid}))
}

async fn delete(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    if req.ctx.is_admin {
        app.policy
            .authorize("cluster:delete_all_projects", &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let c = lookup::cluster(app, &ctx, ident).await?;
    app.policy
        .authorize("cluster:delete", &owner(&c), &req.ctx)?;
    // The scope the cluster was found in goes to the conductor too (see `update`).
    app.services.clusters().delete(&ctx, &c).await?;
    no_content()
}

async fn resize(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let doc = parse_object("cluster_resize_req", req.body.as_ref(), RESIZE_FIELDS)?;
    let node_count = int32(&doc, "node_count")?.unwrap_or(0);
    if req.version < ApiVersion::new(1, 10) && node_count == 0 {
        return Err(ApiError::BadRequest(ZERO_NODES.into()));
    }
    // Upstream resolves the cluster in the caller's own scope here, admins included.
    let c = lookup::cluster(app, &req.ctx, ident).await?;
    app.policy
        .authorize("cluster:resize", &owner(&c), &req.ctx)?;
    let uuid = c.uuid.clone().unwrap_or_default();
    let ng = match text(&doc, "nodegroup") {
        Some(n) if !n.is_empty() => lookup::nodegroup(app, &req.ctx, &uuid, &n).await?,
        _ => lookup::default_worker(app, &req.ctx, &uuid).await?,
    };
    let nodes_to_remove = match doc.get("nodes_to_remove") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    app.services
        .clusters()
        .resize(&req.ctx, &c, &ng, node_count, nodes_to_remove)
        .await?;
    respond(StatusCode::ACCEPTED, &json!({"uuid": uuid}))
}

async fn upgrade(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let doc = parse_object("cluster_upgrade_req", req.body.as_ref(), UPGRADE_FIELDS)?;
    if req.version < ApiVersion::new(1, 8) {
        return Err(ApiError::BadRequest(
            "Cluster upgrade is not supported in the provided microversion.".into(),
        ));
    }
    if req.ctx.is_admin {
        app.policy
            .authorize("cluster:upgrade_all_projects", &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let c = lookup::cluster(app, &ctx, ident).await?;
    app.policy
        .authorize("cluster:upgrade", &owner(&c), &req.ctx)?;
    let template_ident = lookup::ident_text(doc.get("cluster_template"));
    let t = lookup::template_by_uuid_or_name(app, &ctx, &template_ident).await?;
    let uuid = c.uuid.clone().unwrap_or_default();
    let (ng, explicit) = match text(&doc, "nodegroup") {
        Some(n) if !n.is_empty() => (lookup::nodegroup(app, &ctx, &uuid, &n).await?, true),
        _ => (lookup::default_worker(app, &ctx, &uuid).await?, false),
    };
    let max_batch_size = int32(&doc, "max_batch_size")?;
    app.services
        .clusters()
        .upgrade(&ctx, &c, &t, &ng, explicit, max_batch_size)
        .await?;
    respond(StatusCode::ACCEPTED, &json!({"uuid": uuid}))
}
