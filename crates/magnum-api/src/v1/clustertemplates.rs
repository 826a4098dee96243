//! `/v1/clustertemplates`: create, show, list/detail, JSON-patch update, delete (api.md §6.1).

use axum::response::Response;
use http::StatusCode;
use magnum_core::RequestContext;
use magnum_core::ids::is_uuid_like;
use magnum_db::repo::cluster_template::{ClusterTemplate, TemplateRow};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::json_out as out;
use super::{Link, ListParams, Ts, created, ctx_target, links, no_content, owner_target, raw_json};
use crate::AppState;
use crate::error::ApiResult;
use crate::input::{Field, Kind, STR255, field, mandatory, parse_object, read_only, revalidate};
use crate::patch::{PatchRules, apply_patch, parse_patch};
use crate::request::Req;

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

use crate::openapi::Body;
use crate::table::{ANY, Route, arg, handler, missing, no_such_path};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/clustertemplates",
        handler!(|app, req, p| list(app, req, false)),
        "List cluster templates",
        200,
        Body::None,
        "clustertemplate:get_all",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/clustertemplates/detail",
        handler!(|app, req, p| list(app, req, true)),
        "List cluster templates with details",
        200,
        Body::None,
        "clustertemplate:detail",
    )
    .query(&["marker", "limit", "sort_key", "sort_dir"]),
    Route::op(
        "GET",
        "/v1/clustertemplates/{ident}",
        handler!(|app, req, p| show(app, req, arg(p, 0))),
        "Show a cluster template",
        200,
        Body::None,
        "clustertemplate:get",
    ),
    Route::op(
        "POST",
        "/v1/clustertemplates",
        handler!(|app, req, p| create(app, req)),
        "Create a cluster template",
        201,
        Body::Object("ClusterTemplate", FIELDS),
        "clustertemplate:create",
    ),
    Route::op(
        "PATCH",
        "/v1/clustertemplates/{ident}",
        handler!(|app, req, p| update(app, req, arg(p, 0))),
        "Update a cluster template",
        200,
        Body::JsonPatch,
        "clustertemplate:update",
    ),
    Route::op(
        "DELETE",
        "/v1/clustertemplates/{ident}",
        handler!(|app, req, p| delete(app, req, arg(p, 0))),
        "Delete a cluster template",
        204,
        Body::None,
        "clustertemplate:delete",
    ),
    Route::quirk(
        "GET",
        "/v1/clustertemplates/{marker}/detail",
        handler!(|_app, _req, p| super::clusters::detail_with_marker(arg(p, 0))),
    ),
    Route::quirk(
        ANY,
        "/v1/clustertemplates/{marker}/detail",
        handler!(|_app, req, _p| no_such_path(req)),
    ),
    Route::quirk(
        "DELETE",
        "/v1/clustertemplates",
        handler!(|_app, _req, _p| async { Err(missing("cluster_template_ident")) }),
    ),
    Route::quirk(
        "PATCH",
        "/v1/clustertemplates",
        handler!(|_app, _req, _p| async { Err(missing("cluster_template_ident")) }),
    ),
];

async fn list(app: &AppState, req: &Req, detail: bool) -> ApiResult<Response> {
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
        Some(m) => Some(app.db.cluster_templates().get_by_uuid(&ctx, m).await?),
        None => None,
    };
    let path = if detail {
        "clustertemplates/detail"
    } else {
        "clustertemplates"
    };
    // Each template is written as the driver reads its row (or copied, rendered before
    // from an equal row), into a buffer sized for the page (about 1.2 KB per template with
    // short labels; it grows past 128).
    let limit = usize::try_from(params.limit).unwrap_or(usize::MAX).min(128);
    let mut body = Vec::with_capacity(32 + 1280 * limit);
    body.extend_from_slice(b"{\"clustertemplates\":[");
    let base = req.base.as_str();
    let list = app
        .db
        .cluster_templates()
        .list_rendered(&ctx, &params.page(marker), body, base, |t, o| {
            write_item(o, t, base)
        })
        .await?;
    let mut body = list.body;
    let next = params.next(base, path, list.count, list.last);
    out::end_list(&mut body, next.as_deref());
    Ok(out::respond(body))
}

/// A list item, written straight from the driver's row: the same bytes as serde_json's
/// rendering of [`view`] (keys in upstream's order, the same defaults).
fn write_item(o: &mut Vec<u8>, t: &TemplateRow<'_>, base: &str) {
    o.extend_from_slice(b"{\"uuid\":");
    out::opt_str(o, t.uuid);
    o.extend_from_slice(b",\"name\":");
    out::opt_str(o, t.name);
    o.extend_from_slice(b",\"coe\":");
    out::opt_str(o, t.coe);
    o.extend_from_slice(b",\"image_id\":");
    out::opt_str(o, t.image_id);
    o.extend_from_slice(b",\"flavor_id\":");
    out::opt_str(o, t.flavor_id);
    o.extend_from_slice(b",\"master_flavor_id\":");
    out::opt_str(o, t.master_flavor_id);
    o.extend_from_slice(b",\"dns_nameserver\":");
    out::opt_str(o, t.dns_nameserver);
    o.extend_from_slice(b",\"keypair_id\":");
    out::opt_str(o, t.keypair_id);
    o.extend_from_slice(b",\"external_network_id\":");
    out::opt_str(o, t.external_network_id);
    o.extend_from_slice(b",\"fixed_network\":");
    out::opt_str(o, t.fixed_network);
    o.extend_from_slice(b",\"fixed_subnet\":");
    out::opt_str(o, t.fixed_subnet);
    o.extend_from_slice(b",\"network_driver\":");
    out::opt_str(o, t.network_driver);
    o.extend_from_slice(b",\"apiserver_port\":");
    out::opt_int(o, t.apiserver_port);
    o.extend_from_slice(b",\"docker_volume_size\":");
    out::opt_int(o, t.docker_volume_size);
    o.extend_from_slice(b",\"cluster_distro\":");
    out::opt_str(o, t.cluster_distro);
    o.extend_from_slice(b",\"links\":");
    out::links(o, base, "clustertemplates/", t.uuid.unwrap_or_default());
    o.extend_from_slice(b",\"http_proxy\":");
    out::opt_str(o, t.http_proxy);
    o.extend_from_slice(b",\"https_proxy\":");
    out::opt_str(o, t.https_proxy);
    o.extend_from_slice(b",\"no_proxy\":");
    out::opt_str(o, t.no_proxy);
    o.extend_from_slice(b",\"volume_driver\":");
    out::opt_str(o, t.volume_driver);
    o.extend_from_slice(b",\"registry_enabled\":");
    out::bool(o, t.registry_enabled.unwrap_or(false));
    o.extend_from_slice(b",\"labels\":");
    out::raw_json(o, t.labels);
    o.extend_from_slice(b",\"tls_disabled\":");
    out::bool(o, t.tls_disabled.unwrap_or(false));
    o.extend_from_slice(b",\"public\":");
    out::bool(o, t.public.unwrap_or(false));
    o.extend_from_slice(b",\"server_type\":");
    out::opt_str(o, t.server_type);
    o.extend_from_slice(b",\"insecure_registry\":");
    out::opt_str(o, t.insecure_registry);
    o.extend_from_slice(b",\"docker_storage_driver\":");
    out::opt_str(o, t.docker_storage_driver);
    o.extend_from_slice(b",\"master_lb_enabled\":");
    out::bool(o, t.master_lb_enabled.unwrap_or(false));
    o.extend_from_slice(b",\"floating_ip_enabled\":");
    out::bool(o, t.floating_ip_enabled.unwrap_or(true));
    o.extend_from_slice(b",\"project_id\":");
    out::opt_str(o, t.project_id);
    o.extend_from_slice(b",\"user_id\":");
    out::opt_str(o, t.user_id);
    o.extend_from_slice(b",\"hidden\":");
    out::bool(o, t.hidden.unwrap_or(false));
    o.extend_from_slice(b",\"tags\":");
    out::opt_str(o, t.tags);
    o.extend_from_slice(b",\"driver\":");
    out::opt_str(o, t.driver);
    o.extend_from_slice(b",\"created_at\":");
    out::ts(o, t.created_at);
    o.extend_from_slice(b",\"updated_at\":");
    out::ts(o, t.updated_at);
    o.push(b'}');
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
    let templates = app.services.templates();
    templates.check(&mut doc, true)?;
    let checks = templates.check_image(&req.ctx, &doc).await?;
    app.policy
        .authorize("clustertemplate:create", &ctx_target(req), &req.ctx)?;
    let may_publish = app
        .policy
        .check("clustertemplate:publish", &ctx_target(req), &req.ctx);
    let stored = templates.create(&req.ctx, checks, doc, may_publish).await?;
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
    let templates = app.services.templates();
    templates.check(&mut doc, false)?;
    let may_publish = app
        .policy
        .check("clustertemplate:publish", &ctx_target(req), &req.ctx);
    let stored = templates
        .update(&req.ctx, &original, doc, may_publish)
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
    app.services.templates().delete(&t).await?;
    no_content()
}
