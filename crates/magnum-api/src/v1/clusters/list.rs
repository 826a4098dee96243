//! `GET /v1/clusters` and `/v1/clusters/detail`: a page of clusters, streamed from storage.

use super::*;

/// List or detail. At most three statements: the marker row, one page of clusters and the
/// nodegroups of that page (detail adds one template read per distinct template).
pub(super) async fn list(app: &AppState, req: &Req, detail: bool) -> ApiResult<Response> {
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
        let kind = if cluster_id {
            List::ClustersBrief
        } else {
            List::ClustersBriefBelow113
        };
        let base = req.base.as_str();
        let list = app
            .db
            .clusters()
            .list_brief_rendered(&ctx, &filters, &page, (body, kind, base), |c, o| {
                brief(o, c, base, cluster_id)
            })
            .await?;
        let mut body = list.body;
        let next = params.next(base, path, list.count, list.last);
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
    super::super::respond_with(StatusCode::OK, &ClusterList { clusters, next })
}
