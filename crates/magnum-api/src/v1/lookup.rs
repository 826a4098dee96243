//! What the cluster-scoped resources (clusters, nodegroups, certificates, credentials) share:
//! ident lookups with upstream's rules (api.md §1.6), the admin all-projects scope, the
//! per-method microversion gate and the label diff.

use magnum_core::RequestContext;
use magnum_core::ids::is_uuid_like;
use magnum_db::Page;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::nodegroup::{NodeGroup, NodeGroupFilters};
use serde_json::{Map, Value};

use crate::AppState;
use crate::error::ApiResult;
use crate::request::Req;

/// The caller's context, widened to every project for an admin (upstream sets
/// `all_tenants` on the paths that check a `*_all_projects` rule).
pub fn admin_scope(req: &Req) -> RequestContext {
    let mut ctx = req.ctx.clone();
    if ctx.is_admin {
        ctx.all_tenants = true;
    }
    ctx
}

/// oslo `is_int_like`: the text is exactly an integer's decimal form.
fn int_like(ident: &str) -> Option<i32> {
    ident.parse::<i32>().ok().filter(|n| n.to_string() == ident)
}

/// `get_resource('Cluster', ident)`: a uuid-like ident is a uuid, anything else a name.
pub async fn cluster(app: &AppState, ctx: &RequestContext, ident: &str) -> ApiResult<Cluster> {
    let repo = app.db.clusters();
    Ok(if is_uuid_like(ident) {
        repo.get_by_uuid(ctx, ident).await?
    } else {
        repo.get_by_name(ctx, ident).await?
    })
}

/// `ClusterTemplate.get(ident)`: integer-like is the id, uuid-like the uuid, else the name.
pub async fn template(
    app: &AppState,
    ctx: &RequestContext,
    ident: &str,
) -> ApiResult<ClusterTemplate> {
    let repo = app.db.cluster_templates();
    Ok(if let Some(id) = int_like(ident) {
        repo.get_by_id(ctx, id).await?
    } else if is_uuid_like(ident) {
        repo.get_by_uuid(ctx, ident).await?
    } else {
        repo.get_by_name(ctx, ident).await?
    })
}

/// `get_resource('ClusterTemplate', ident)`: uuid-like is the uuid, anything else the name.
pub async fn template_by_uuid_or_name(
    app: &AppState,
    ctx: &RequestContext,
    ident: &str,
) -> ApiResult<ClusterTemplate> {
    let repo = app.db.cluster_templates();
    Ok(if is_uuid_like(ident) {
        repo.get_by_uuid(ctx, ident).await?
    } else {
        repo.get_by_name(ctx, ident).await?
    })
}

/// `NodeGroup.get(cluster, ident)`: integer-like is the id, uuid-like the uuid, else the
/// name; always within the cluster.
pub async fn nodegroup(
    app: &AppState,
    ctx: &RequestContext,
    cluster_uuid: &str,
    ident: &str,
) -> ApiResult<NodeGroup> {
    let repo = app.db.nodegroups();
    Ok(if let Some(id) = int_like(ident) {
        repo.get_by_id(ctx, cluster_uuid, id).await?
    } else if is_uuid_like(ident) {
        repo.get_by_uuid(ctx, cluster_uuid, ident).await?
    } else {
        repo.get_by_name(ctx, cluster_uuid, ident).await?
    })
}

/// The cluster's default worker nodegroup (upstream's `default_ng_worker`).
pub async fn default_worker(
    app: &AppState,
    ctx: &RequestContext,
    cluster_uuid: &str,
) -> ApiResult<NodeGroup> {
    let filters = NodeGroupFilters {
        is_default: Some(true),
        ..NodeGroupFilters::default()
    };
    app.db
        .nodegroups()
        .list(ctx, cluster_uuid, &filters, &Page::default())
        .await?
        .into_iter()
        .find(|ng| {
            !ng.role
                .as_ref()
                .is_some_and(magnum_core::model::NodegroupRole::is_master)
        })
        .ok_or_else(|| {
            magnum_core::Error::NodeGroupNotFound {
                nodegroup: "default-worker".into(),
            }
            .into()
        })
}

/// The request's uuid-or-name of a cluster ident, as text (`null` reads as Python's `None`).
pub fn ident_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "None".into(),
        Some(other) => crate::input::py_str(other),
    }
}

/// A stored label dict (JSON text); NULL or unparsable text is empty.
pub fn labels(text: Option<&str>) -> Map<String, Value> {
    magnum_db::json::loads::<Map<String, Value>>(text).unwrap_or_default()
}

/// Upstream's `get_labels_diff`: (overridden, holding the parent's value; added; skipped).
pub fn labels_diff(
    parent: &Map<String, Value>,
    own: &Map<String, Value>,
) -> (Map<String, Value>, Map<String, Value>, Map<String, Value>) {
    let mut overridden = Map::new();
    let mut added = Map::new();
    for (k, v) in own {
        match parent.get(k) {
            Some(p) if p != v => {
                overridden.insert(k.clone(), p.clone());
            }
            Some(_) => {}
            None => {
                added.insert(k.clone(), v.clone());
            }
        }
    }
    let skipped = parent
        .iter()
        .filter(|(k, _)| !own.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (overridden, added, skipped)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_diff_keeps_the_parents_value_for_overrides() {
        let parent = json!({"a": "1", "b": "2", "c": "3"});
        let own = json!({"a": "1", "b": "20", "d": "4"});
        let (o, a, s) = labels_diff(
            parent.as_object().unwrap_or(&Map::new()),
            own.as_object().unwrap_or(&Map::new()),
        );
        assert_eq!(Value::Object(o), json!({"b": "2"}));
        assert_eq!(Value::Object(a), json!({"d": "4"}));
        assert_eq!(Value::Object(s), json!({"c": "3"}));
    }

    #[test]
    fn int_like_is_the_exact_decimal_form() {
        assert_eq!(int_like("7"), Some(7));
        assert_eq!(int_like("-1"), Some(-1));
        assert_eq!(int_like("007"), None);
        assert_eq!(int_like("k8s"), None);
    }
}
