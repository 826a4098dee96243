//! `POST /v1/clusters`.

use super::*;

pub(super) async fn create(app: &AppState, req: &Req) -> ApiResult<Response> {
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
