//! `GET /v1/clusters/{ident}`.

use super::*;

pub(super) async fn show(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
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
    super::super::respond_with(StatusCode::OK, &body)
}
