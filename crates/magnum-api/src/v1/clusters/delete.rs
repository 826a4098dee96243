//! `DELETE /v1/clusters/{ident}`.

use super::*;

pub(super) async fn delete(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
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
