//! `POST /v1/clusters/{ident}/actions/upgrade` (1.8+).

use super::*;

pub(super) async fn upgrade(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
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
