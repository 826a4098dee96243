//! `PATCH /v1/clusters/{ident}`: the JSON patch of node_count and health.

use super::*;

/// The cluster as upstream's `as_dict()` shows it to JSON-patch: the object's fields plus
/// the four nodegroup-derived properties.
fn patch_document(c: &Cluster, nodes: &Nodes) -> Map<String, Value> {
    let json_col = |t: &Option<String>| super::super::json_column(t.as_deref());
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
        "created_at": super::super::timestamp(c.created_at),
        "updated_at": super::super::timestamp(c.updated_at),
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

pub(super) async fn update(app: &AppState, req: &Req, ident: &str) -> ApiResult<Response> {
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
