//! Clusters: the rules for a new cluster's rows (one definition for our API and for the
//! upstream bridge).

use magnum_core::status::ClusterStatus;
use magnum_core::{Error, Result};
use magnum_db::json::loads;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::nodegroup::NodeGroup;
use serde_json::{Map, Value};

/// Upstream conductor's default nodegroups for a new cluster (`_get_nodegroup_object`):
/// `default-master` and `default-worker`, labels copied from the cluster, image from the
/// template, volume size and flavors from the cluster or else the template, the worker's
/// minimum from the `min_node_count` label, both CREATE_IN_PROGRESS. Uuids are fresh.
pub fn default_nodegroups(
    cluster: &Cluster,
    template: &ClusterTemplate,
    master_count: i32,
    node_count: i32,
) -> Result<Vec<NodeGroup>> {
    let labels: Map<String, Value> = loads(cluster.labels.as_deref()).unwrap_or_default();
    let min_node_count = match labels.get("min_node_count") {
        None => 0,
        Some(v) => v
            .as_str()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .or_else(|| v.as_i64().and_then(|i| i32::try_from(i).ok()))
            .ok_or_else(|| Error::InvalidParameterValue {
                message: format!("invalid literal for int(): {v}"),
            })?,
    };
    let labels_text = magnum_db::json::dumps(&Value::Object(labels));
    let docker_volume_size = cluster.docker_volume_size.or(template.docker_volume_size);
    let group = |role: &str, count: i32, flavor: Option<String>, min: i32| NodeGroup {
        uuid: uuid::Uuid::new_v4().to_string(),
        name: format!("default-{role}"),
        cluster_id: cluster.uuid.clone().unwrap_or_default(),
        project_id: cluster.project_id.clone().unwrap_or_default(),
        docker_volume_size,
        labels: Some(labels_text.clone()),
        flavor_id: flavor,
        image_id: template.image_id.clone(),
        node_count: Some(count),
        min_node_count: Some(min),
        role: Some(role.to_owned()),
        is_default: Some(true),
        status: Some(ClusterStatus::CreateInProgress.as_str().to_owned()),
        ..NodeGroup::default()
    };
    let or_template = |own: &Option<String>, t: &Option<String>| {
        own.clone().filter(|s| !s.is_empty()).or_else(|| t.clone())
    };
    Ok(vec![
        group(
            "master",
            master_count,
            or_template(&cluster.master_flavor_id, &template.master_flavor_id),
            0,
        ),
        group(
            "worker",
            node_count,
            or_template(&cluster.flavor_id, &template.flavor_id),
            min_node_count,
        ),
    ])
}

