//! `/v1/clustertemplates`: create, show, list/detail, JSON-patch update, delete (api.md §6.1).

use axum::response::Response;
use http::{Method, StatusCode};
use magnum_core::ids::{Identity, is_uuid_like};
use magnum_core::{Error, RequestContext};
use magnum_db::json::dumps;
use magnum_db::repo::cluster_template::ClusterTemplate;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{
    Link, ListParams, Ts, created, ctx_target, json_column, links, no_content, owner_target,
    raw_json,
};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::input::{Field, Kind, STR255, field, mandatory, parse_object, read_only, revalidate};
use crate::patch::{PatchRules, apply_patch, parse_patch};
use crate::routes::Req;

const FIELDS: &[Field] = &[
    field("uuid", Kind::Uuid),
    field("name", STR255),
    field("coe", Kind::Enum(&["kubernetes"])),
    mandatory("image_id", STR255),
    field("flavor_id", STR255),
    field("master_flavor_id", STR255),
    field("dns_nameserver", STR255),
    field("keypair_id", STR255),
    field("external_network_id", STR255),
    field("fixed_network", STR255),
    field("fixed_subnet", STR255),
    field("network_driver", STR255),
    field(
        "apiserver_port",
        Kind::Int {
            min: Some(1024),
            max: Some(65535),
        },
    ),
    field(
        "docker_volume_size",
        Kind::Int {
            min: Some(1),
            max: None,
        },
    ),
    field("cluster_distro", STR255),
    read_only("links"),
    field("http_proxy", STR255),
    field("https_proxy", STR255),
    field("no_proxy", STR255),
    field("volume_driver", STR255),
    field("registry_enabled", Kind::Bool),
    field("labels", Kind::StrDict),
    field("tls_disabled", Kind::Bool),
    field("public", Kind::Bool),
    field("server_type", STR255),
    field("insecure_registry", STR255),
    field("docker_storage_driver", STR255),
    field("master_lb_enabled", Kind::Bool),
    field("floating_ip_enabled", Kind::Bool),
    read_only("project_id"),
    read_only("user_id"),
    field("hidden", Kind::Bool),
    field("tags", Kind::Str { min: 0, max: 255 }),
    field("driver", STR255),
    read_only("created_at"),
    read_only("updated_at"),
];

const NETWORK_DRIVERS: [&str; 3] = ["flannel", "calico", "cilium"];

/// The API rendering of a stored template, keys in upstream's order, serialised straight
/// from the row: lists of templates are the API's hot path.
#[derive(serde::Serialize)]
pub struct TemplateView<'a> {
    uuid: &'a Option<String>,
    name: &'a Option<String>,
    coe: &'a Option<String>,
    image_id: &'a Option<String>,
    flavor_id: &'a Option<String>,
    master_flavor_id: &'a Option<String>,
    dns_nameserver: &'a Option<String>,
    keypair_id: &'a Option<String>,
    external_network_id: &'a Option<String>,
    fixed_network: &'a Option<String>,
    fixed_subnet: &'a Option<String>,
    network_driver: &'a Option<String>,
    apiserver_port: Option<i32>,
    docker_volume_size: Option<i32>,
    cluster_distro: &'a Option<String>,
    links: [Link; 2],
    http_proxy: &'a Option<String>,
    https_proxy: &'a Option<String>,
    no_proxy: &'a Option<String>,
    volume_driver: &'a Option<String>,
    registry_enabled: bool,
    labels: Option<&'a RawValue>,
    tls_disabled: bool,
    public: bool,
    server_type: &'a Option<String>,
    insecure_registry: &'a Option<String>,
    docker_storage_driver: &'a Option<String>,
    master_lb_enabled: bool,
    floating_ip_enabled: bool,
    project_id: &'a Option<String>,
    user_id: &'a Option<String>,
    hidden: bool,
    tags: &'a Option<String>,
    driver: &'a Option<String>,
    created_at: Ts,
    updated_at: Ts,
}

pub fn view<'a>(t: &'a ClusterTemplate, base: &str) -> TemplateView<'a> {
    TemplateView {
        uuid: &t.uuid,
        name: &t.name,
        coe: &t.coe,
        image_id: &t.image_id,
        flavor_id: &t.flavor_id,
        master_flavor_id: &t.master_flavor_id,
        dns_nameserver: &t.dns_nameserver,
        keypair_id: &t.keypair_id,
        external_network_id: &t.external_network_id,
        fixed_network: &t.fixed_network,
        fixed_subnet: &t.fixed_subnet,
        network_driver: &t.network_driver,
        apiserver_port: t.apiserver_port,
        docker_volume_size: t.docker_volume_size,
        cluster_distro: &t.cluster_distro,
        links: links(
            base,
            &format!("clustertemplates/{}", t.uuid.as_deref().unwrap_or_default()),
        ),
        http_proxy: &t.http_proxy,
        https_proxy: &t.https_proxy,
        no_proxy: &t.no_proxy,
        volume_driver: &t.volume_driver,
        registry_enabled: t.registry_enabled.unwrap_or(false),
        labels: raw_json(t.labels.as_deref()),
        tls_disabled: t.tls_disabled.unwrap_or(false),
        public: t.public.unwrap_or(false),
        server_type: &t.server_type,
        insecure_registry: &t.insecure_registry,
        docker_storage_driver: &t.docker_storage_driver,
        master_lb_enabled: t.master_lb_enabled.unwrap_or(false),
        floating_ip_enabled: t.floating_ip_enabled.unwrap_or(true),
        project_id: &t.project_id,
        user_id: &t.user_id,
        hidden: t.hidden.unwrap_or(false),
        tags: &t.tags,
        driver: &t.driver,
        created_at: Ts(t.created_at),
        updated_at: Ts(t.updated_at),
    }
}

/// The rendering as a JSON object (for JSON-patch, which works on the document).
pub fn render(t: &ClusterTemplate, base: &str) -> Value {
    serde_json::to_value(view(t, base)).unwrap_or(Value::Null)
}

#[derive(serde::Serialize)]
struct TemplateList<'a> {
    clustertemplates: Vec<TemplateView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

fn text(doc: &Map<String, Value>, k: &str) -> Option<String> {
    doc.get(k).and_then(Value::as_str).map(str::to_owned)
}

fn int(doc: &Map<String, Value>, k: &str) -> Option<i32> {
    doc.get(k)
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
}

fn boolean(doc: &Map<String, Value>, k: &str) -> Option<bool> {
    doc.get(k).and_then(Value::as_bool)
}

/// Copy the API document's writable fields onto a row.
fn apply_doc(t: &mut ClusterTemplate, doc: &Map<String, Value>) {
    t.name = text(doc, "name");
    t.coe = text(doc, "coe");
    t.image_id = text(doc, "image_id");
    t.flavor_id = text(doc, "flavor_id");
    t.master_flavor_id = text(doc, "master_flavor_id");
    t.dns_nameserver = text(doc, "dns_nameserver");
    t.keypair_id = text(doc, "keypair_id");
    t.external_network_id = text(doc, "external_network_id");
    t.fixed_network = text(doc, "fixed_network");
    t.fixed_subnet = text(doc, "fixed_subnet");
    t.network_driver = text(doc, "network_driver");
    t.apiserver_port = int(doc, "apiserver_port");
    t.docker_volume_size = int(doc, "docker_volume_size");
    t.cluster_distro = text(doc, "cluster_distro");
    t.http_proxy = text(doc, "http_proxy");
    t.https_proxy = text(doc, "https_proxy");
    t.no_proxy = text(doc, "no_proxy");
    t.volume_driver = text(doc, "volume_driver");
    t.registry_enabled = boolean(doc, "registry_enabled");
    t.labels = doc.get("labels").filter(|v| !v.is_null()).map(dumps);
    t.tls_disabled = boolean(doc, "tls_disabled");
    t.public = boolean(doc, "public");
    t.server_type = text(doc, "server_type");
    t.insecure_registry = text(doc, "insecure_registry");
    t.docker_storage_driver = text(doc, "docker_storage_driver");
    t.master_lb_enabled = boolean(doc, "master_lb_enabled");
    t.floating_ip_enabled = boolean(doc, "floating_ip_enabled");
    t.hidden = boolean(doc, "hidden");
    t.tags = text(doc, "tags");
    t.driver = text(doc, "driver");
}

/// Checks that need no other service, in upstream's order (api.md §6.1.3 steps 2-5).
fn check_drivers(
    app: &AppState,
    doc: &mut Map<String, Value>,
    fill_default: bool,
) -> ApiResult<()> {
    let coe = text(doc, "coe");
    if coe.as_deref() != Some("kubernetes") {
        return Err(ApiError::BadRequest(format!(
            "Requested COE type {} is not supported.",
            coe.as_deref().unwrap_or("Unset")
        )));
    }
    if let Some(st) = text(doc, "server_type")
        && st != "vm"
        && st != "bm"
    {
        return Err(ApiError::BadRequest(format!(
            "Server type {st} is not supported, expecting a vm/bm/unspecified server type."
        )));
    }
    if fill_default && doc.get("network_driver").is_none_or(Value::is_null) {
        doc.insert(
            "network_driver".into(),
            Value::String(app.settings.default_network_driver.clone()),
        );
    }
    if let Some(nd) = text(doc, "network_driver") {
        if !NETWORK_DRIVERS.contains(&nd.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "Network driver type {nd} is not supported, expecting a flannel/calico/cilium/unspecified network driver."
            )));
        }
        let allowed = &app.settings.allowed_network_drivers;
        if !allowed.iter().any(|a| a == "all" || *a == nd) {
            return Err(ApiError::BadRequest(format!(
                "Network driver type {nd} is not allowed, expecting a {}/unspecified network driver. ",
                allowed.join("/")
            )));
        }
    }
    if let Some(vd) = text(doc, "volume_driver")
        && vd != "cinder"
    {
        return Err(ApiError::BadRequest(format!(
            "Volume driver type {vd} is not supported, expecting a cinder/unspecified volume driver."
        )));
    }
    if text(doc, "docker_storage_driver").as_deref() == Some("devicemapper") {
        let size = int(doc, "docker_volume_size");
        if size.is_none_or(|s| s < 3) {
            return Err(ApiError::BadRequest(format!(
                "docker volume size {} GB is not valid, expecting minimum value 3GB for devicemapper storage driver.",
                size.map(|s| s.to_string()).unwrap_or_else(|| "None".into())
            )));
        }
    }
    if let Some(dns) = text(doc, "dns_nameserver")
        && !dns
            .split(',')
            .all(|ip| ip.trim().parse::<std::net::Ipv4Addr>().is_ok())
    {
        return Err(ApiError::BadRequest(format!(
            "Expected a single dns address or comma separated dns list, but received {dns}."
        )));
    }
    Ok(())
}

fn pick_driver(
    app: &AppState,
    requested: Option<String>,
    image_driver: Option<String>,
) -> ApiResult<Option<String>> {
    let name = requested
        .or(image_driver)
        .or_else(|| app.settings.default_driver.clone());
    match name {
        Some(n) if app.settings.drivers.contains(&n) => Ok(Some(n)),
        Some(n) => Err(ApiError::BadRequest(format!(
            "Cluster driver ({n}) not supported."
        ))),
        None => Ok(app.settings.drivers.iter().min().cloned()),
    }
}

const GREEK: [&str; 24] = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi",
    "psi", "omega",
];

/// Upstream's generated names: `<greek letter>-<1..24>-<suffix>`.
pub fn generate_name(suffix: &str) -> String {
    let word = GREEK[(uuid::Uuid::new_v4().as_u128() % 24) as usize];
    let n = uuid::Uuid::new_v4().as_u128() % 24 + 1;
    format!("{word}-{n}-{suffix}")
}

fn admin_scope(req: &Req) -> RequestContext {
    let mut ctx = req.ctx.clone();
    if ctx.is_admin {
        ctx.all_tenants = true;
    }
    ctx
}

/// Look a template up by uuid or name within what `ctx` may see.
async fn lookup(app: &AppState, ctx: &RequestContext, ident: &str) -> ApiResult<ClusterTemplate> {
    let repo = app.db.cluster_templates();
    let found = if is_uuid_like(ident) {
        repo.get_by_uuid(ctx, ident).await
    } else {
        repo.get_by_name(ctx, ident).await
    };
    Ok(found?)
}

use crate::openapi::{Body, RouteDoc};

pub const ROUTES: &[RouteDoc] = &[
    RouteDoc {
        method: "GET",
        path: "/v1/clustertemplates",
        summary: "List cluster templates",
        status: 200,
        body: Body::None,
        policy: "clustertemplate:get_all",
    },
    RouteDoc {
        method: "GET",
        path: "/v1/clustertemplates/detail",
        summary: "List cluster templates with details",
        status: 200,
        body: Body::None,
        policy: "clustertemplate:detail",
    },
    RouteDoc {
        method: "GET",
        path: "/v1/clustertemplates/{ident}",
        summary: "Show a cluster template",
        status: 200,
        body: Body::None,
        policy: "clustertemplate:get",
    },
    RouteDoc {
        method: "POST",
        path: "/v1/clustertemplates",
        summary: "Create a cluster template",
        status: 201,
        body: Body::Object("ClusterTemplate", FIELDS),
        policy: "clustertemplate:create",
    },
    RouteDoc {
        method: "PATCH",
        path: "/v1/clustertemplates/{ident}",
        summary: "Update a cluster template",
        status: 200,
        body: Body::JsonPatch,
        policy: "clustertemplate:update",
    },
    RouteDoc {
        method: "DELETE",
        path: "/v1/clustertemplates/{ident}",
        summary: "Delete a cluster template",
        status: 204,
        body: Body::None,
        policy: "clustertemplate:delete",
    },
];

pub async fn route(app: &AppState, req: Req) -> ApiResult<Response> {
    let rest: Vec<&str> = req.segs.iter().skip(1).map(String::as_str).collect();
    match (&req.method, rest.as_slice()) {
        (&Method::GET, []) => list(app, &req, false).await,
        (&Method::GET, ["detail"]) => list(app, &req, true).await,
        (&Method::GET, [ident]) => {
            req.allow_query(&[])?;
            show(app, &req, ident).await
        }
        (&Method::POST, []) => {
            req.allow_query(&[])?;
            create(app, &req).await
        }
        (&Method::PATCH, [ident]) => {
            req.allow_query(&[])?;
            update(app, &req, ident).await
        }
        (&Method::DELETE, [ident]) => {
            req.allow_query(&[])?;
            delete(app, &req, ident).await
        }
        (&Method::DELETE, []) | (&Method::PATCH, []) => Err(ApiError::BadRequest(
            "Missing argument: \"cluster_template_ident\"".into(),
        )),
        (_, [] | [_]) => Err(ApiError::Routing(StatusCode::METHOD_NOT_ALLOWED)),
        _ => Err(ApiError::Routing(StatusCode::NOT_FOUND)),
    }
}

async fn list(app: &AppState, req: &Req, detail: bool) -> ApiResult<Response> {
    req.allow_query(&["marker", "limit", "sort_key", "sort_dir"])?;
    let params = ListParams::parse(req, app.settings.max_limit)?;
    let (rule, all_rule) = if detail {
        (
            "clustertemplate:detail",
            "clustertemplate:detail_all_projects",
        )
    } else {
        (
            "clustertemplate:get_all",
            "clustertemplate:get_all_all_projects",
        )
    };
    app.policy.authorize(rule, &ctx_target(req), &req.ctx)?;
    if req.ctx.is_admin {
        app.policy.authorize(all_rule, &ctx_target(req), &req.ctx)?;
    }
    let ctx = admin_scope(req);
    let marker = match &params.marker {
        Some(m) if !is_uuid_like(m) => {
            return Err(ApiError::BadRequest(format!(
                "Invalid input for field/attribute marker. Value: '{m}'. Wrong type. Expected 'uuid', got 'str'"
            )));
        }
        Some(m) => Some(app.db.cluster_templates().get_by_uuid(&ctx, m).await?),
        None => None,
    };
    let rows = app
        .db
        .cluster_templates()
        .list(&ctx, &params.page(marker))
        .await?;
    let path = if detail {
        "clustertemplates/detail"
    } else {
        "clustertemplates"
    };
    let next = params.next(
        &req.base,
        path,
        rows.len(),
        rows.last().and_then(|t| t.uuid.clone()),
    );
    let body = TemplateList {
        clustertemplates: rows.iter().map(|t| view(t, &req.base)).collect(),
        next,
    };
    super::respond_with(StatusCode::OK, &body)
}

async fn show(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    if req.ctx.is_admin {
        app.policy.authorize(
            "clustertemplate:get_one_all_projects",
            &ctx_target(req),
            &req.ctx,
        )?;
    }
    let t = lookup(app, &admin_scope(req), ident).await?;
    if !t.public.unwrap_or(false) {
        app.policy.authorize(
            "clustertemplate:get",
            &owner_target(t.project_id.as_deref(), t.user_id.as_deref()),
            &req.ctx,
        )?;
    }
    super::respond_with(StatusCode::OK, &view(&t, &req.base))
}

async fn create(app: &AppState, req: &Req) -> ApiResult<Response> {
    let mut doc = parse_object("cluster_template", req.body.as_ref(), FIELDS)?;
    check_drivers(app, &mut doc, true)?;
    // Driver resolution needs the image's properties only when the body lacks a driver.
    app.policy
        .authorize("clustertemplate:create", &ctx_target(req), &req.ctx)?;
    let facts = app.validator.validate_template(&req.ctx, &doc).await?;
    if let Some(distro) = facts.os_distro.clone() {
        doc.insert("cluster_distro".into(), Value::String(distro));
    }
    let driver = pick_driver(app, text(&doc, "driver"), facts.image_driver.clone())?;
    doc.insert(
        "driver".into(),
        driver.map(Value::String).unwrap_or(Value::Null),
    );
    if (boolean(&doc, "public") == Some(true) || boolean(&doc, "hidden") == Some(true))
        && !app
            .policy
            .check("clustertemplate:publish", &ctx_target(req), &req.ctx)
    {
        return Err(ApiError::Forbidden(
            "Not authorized to set public or hidden flag for cluster template.".into(),
        ));
    }
    if text(&doc, "name").is_none_or(|n| n.is_empty()) {
        doc.insert("name".into(), Value::String(generate_name("template")));
    }
    let mut row = ClusterTemplate {
        uuid: text(&doc, "uuid"),
        project_id: req.ctx.project_id.clone(),
        user_id: req.ctx.user_id.clone(),
        ..ClusterTemplate::default()
    };
    apply_doc(&mut row, &doc);
    // Absent booleans take the API's defaults; an explicit null stays null.
    for (key, slot, default) in [
        ("registry_enabled", &mut row.registry_enabled, false),
        ("tls_disabled", &mut row.tls_disabled, false),
        ("public", &mut row.public, false),
        ("master_lb_enabled", &mut row.master_lb_enabled, false),
        ("hidden", &mut row.hidden, false),
        ("floating_ip_enabled", &mut row.floating_ip_enabled, true),
    ] {
        if !doc.contains_key(key) {
            *slot = Some(default);
        }
    }
    if !doc.contains_key("server_type") {
        row.server_type = Some("vm".into());
    }
    if !doc.contains_key("labels") {
        row.labels = Some("{}".into());
    }
    let stored = app.db.cluster_templates().create(row).await?;
    let body = render(&stored, &req.base);
    created(
        &body,
        &format!(
            "{}/v1/clustertemplates/{}",
            req.base,
            stored.uuid.as_deref().unwrap_or_default()
        ),
    )
}

async fn update(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let rules = PatchRules::cluster_template();
    let mut ops = parse_patch(req.body.as_ref(), &rules)?;
    if req.ctx.is_admin {
        app.policy.authorize(
            "clustertemplate:update_all_projects",
            &ctx_target(req),
            &req.ctx,
        )?;
    }
    let original = lookup(app, &req.ctx, ident).await?;
    app.policy.authorize(
        "clustertemplate:update",
        &owner_target(original.project_id.as_deref(), original.user_id.as_deref()),
        &req.ctx,
    )?;
    let mut doc = match render(&original, &req.base) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    apply_patch(&mut doc, &mut ops, &rules)?;
    revalidate(&doc, FIELDS)?;
    // Re-coerce label values to strings, as the typed field does.
    if let Some(labels) = doc.get("labels").cloned() {
        let f = crate::input::field("labels", Kind::StrDict);
        doc.insert("labels".into(), crate::input::check_value(&f, &labels)?);
    }
    check_drivers(app, &mut doc, false)?;
    app.validator.validate_template(&req.ctx, &doc).await?;
    let changed_flag = |k: &str| boolean(&doc, k) != render(&original, "")[k].as_bool();
    if (changed_flag("public") || changed_flag("hidden"))
        && !app
            .policy
            .check("clustertemplate:publish", &ctx_target(req), &req.ctx)
    {
        return Err(ApiError::Forbidden(
            "Not authorized to set public or hidden flag for cluster template.".into(),
        ));
    }
    let mut modified = original.clone();
    apply_doc(&mut modified, &doc);
    // Unchanged JSON keeps its stored text byte for byte.
    if json_column(original.labels.as_deref()) == doc.get("labels").cloned().unwrap_or(Value::Null)
    {
        modified.labels = original.labels.clone();
    }
    let stored = app
        .db
        .cluster_templates()
        .save(&original, &modified)
        .await?;
    super::respond_with(StatusCode::OK, &view(&stored, &req.base))
}

async fn delete(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    if req.ctx.is_admin {
        app.policy.authorize(
            "clustertemplate:delete_all_projects",
            &ctx_target(req),
            &req.ctx,
        )?;
    }
    let t = lookup(app, &admin_scope(req), ident).await?;
    app.policy.authorize(
        "clustertemplate:delete",
        &owner_target(t.project_id.as_deref(), t.user_id.as_deref()),
        &req.ctx,
    )?;
    match app
        .db
        .cluster_templates()
        .destroy(&Identity::Id(t.id))
        .await
    {
        Ok(()) => no_content(),
        Err(Error::ClusterTemplateReferenced { .. }) => Err(Error::ClusterTemplateReferenced {
            template: t.uuid.unwrap_or_default(),
        }
        .into()),
        Err(e) => Err(e.into()),
    }
}
