//! `/v1/certificates` (api.md §6.4): a cluster's CA certificate, CSR signing and CA rotation,
//! each a synchronous call to the conductor.

use axum::response::Response;
use http::StatusCode;
use magnum_core::Error;
use magnum_db::repo::cluster::Cluster;
use serde_json::{Value, json};

use super::lookup;
use super::{links_pair, owner_target, respond};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::input::{Field, Kind, field, parse_object, read_only};
use crate::request::Req;

const FIELDS: &[Field] = &[
    field("cluster_uuid", super::clusters::TEXT),
    read_only("links"),
    field("csr", Kind::Str { min: 1, max: 65535 }),
    field("pem", super::clusters::TEXT),
    field("ca_cert_type", super::clusters::TEXT),
    read_only("created_at"),
    read_only("updated_at"),
];

use crate::openapi::Body;
use crate::table::{Route, arg, handler, missing};

pub const ROUTES: &[Route] = &[
    Route::op(
        "GET",
        "/v1/certificates/{cluster_ident}",
        handler!(|app, req, p| show(app, req, arg(p, 0))),
        "Show a cluster's CA certificate",
        200,
        Body::None,
        "certificate:get",
    )
    .query(&["ca_cert_type"]),
    Route::op(
        "POST",
        "/v1/certificates",
        handler!(|app, req, p| sign(app, req)),
        "Sign a certificate signing request with a cluster's CA",
        201,
        Body::Object("Certificate", FIELDS),
        "certificate:create",
    ),
    Route::op(
        "PATCH",
        "/v1/certificates/{cluster_ident}",
        handler!(|app, req, p| rotate(app, req, arg(p, 0))),
        "Rotate a cluster's CA certificate",
        202,
        Body::None,
        "certificate:rotate_ca",
    ),
    // pecan hands the extra segments to the show handler, which looks the cluster up.
    Route::quirk(
        "GET",
        "/v1/certificates/{cluster_ident}/**",
        handler!(|app, req, p| show(app, req, arg(p, 0))),
    ),
    Route::quirk(
        "PATCH",
        "/v1/certificates",
        handler!(|_app, _req, _p| async { Err(missing("cluster_ident")) }),
    ),
];

fn owner(c: &Cluster) -> magnum_conf::policy::Target {
    owner_target(c.project_id.as_deref(), c.user_id.as_deref())
}

async fn show(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let c = lookup::cluster(app, &req.ctx, ident).await?;
    app.policy
        .authorize("certificate:get", &owner(&c), &req.ctx)?;
    let ca_cert_type = req.query("ca_cert_type").map(str::to_owned);
    let pem = app
        .services
        .certificates()
        .ca(&req.ctx, &c, ca_cert_type)
        .await?;
    let uuid = c.uuid.unwrap_or_default();
    respond(
        StatusCode::OK,
        &json!({
            "cluster_uuid": uuid,
            "links": links_pair(&req.base, &format!("certificates/{uuid}")),
            "pem": pem,
        }),
    )
}

async fn sign(app: &AppState, req: &Req) -> ApiResult<Response> {
    let doc = parse_object("certificate", req.body.as_ref(), FIELDS)?;
    // The cluster is resolved while the body is read: a missing one is the request's fault
    // (400), except when no cluster was named at all (upstream's 404 for `None`).
    let c = match doc.get("cluster_uuid").and_then(Value::as_str) {
        Some(ident) if !ident.is_empty() => match lookup::cluster(app, &req.ctx, ident).await {
            Err(ApiError::Domain(e @ Error::ClusterNotFound { .. })) => {
                return Err(ApiError::BadRequest(e.to_string()));
            }
            other => other?,
        },
        _ => lookup::cluster(app, &req.ctx, "None").await?,
    };
    app.policy
        .authorize("certificate:create", &owner(&c), &req.ctx)?;
    let csr = doc.get("csr").and_then(Value::as_str).map(str::to_owned);
    let ca_cert_type = doc
        .get("ca_cert_type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let pem = app
        .services
        .certificates()
        .sign(&req.ctx, &c, csr.clone(), ca_cert_type.clone())
        .await?;
    let uuid = c.uuid.unwrap_or_default();
    let mut body = json!({
        "cluster_uuid": uuid,
        "links": links_pair(&req.base, &format!("certificates/{uuid}")),
        "csr": csr,
        "pem": pem,
    });
    if let Some(t) = ca_cert_type {
        body["ca_cert_type"] = Value::String(t);
    }
    respond(StatusCode::CREATED, &body)
}

async fn rotate(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
    let c = lookup::cluster(app, &req.ctx, ident).await?;
    app.policy
        .authorize("certificate:rotate_ca", &owner(&c), &req.ctx)?;
    let template = lookup::template(
        app,
        &req.ctx,
        c.cluster_template_id.as_deref().unwrap_or("None"),
    )
    .await?;
    app.services
        .certificates()
        .rotate_ca(&req.ctx, &c, &template)
        .await?;
    let uuid = c.uuid.unwrap_or_default();
    respond(StatusCode::ACCEPTED, &json!({"uuid": uuid}))
}
