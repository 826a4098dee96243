//! `POST /v1/clusters/{ident}/actions/resize` (1.7+).

use super::*;

pub(super) async fn resize(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
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
