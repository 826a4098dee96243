//! Clusters: create (checks, quota, rows with their defaults and default nodegroups, then
//! the cast), update, delete, resize and upgrade.
//!
//! Upstream flaw fixed: create checked the quota in the API and left the insert to the
//! conductor, so concurrent creates overshot the quota and a GET right after the 202 found no
//! cluster. Here the cluster row and its two default nodegroups are inserted in one
//! transaction that enforces the quota, and only then is the conductor told.

use magnum_core::lifecycle::ClusterOp;
use magnum_core::model::NodegroupRole;
use magnum_core::status::ClusterStatus;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::json::{dumps, loads};
use magnum_db::repo::cluster::{Cluster, ClusterFilters, ClusterQuota};
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_rpc::{ClusterCreate, ClusterRef, ClusterResize, ClusterUpdate, ClusterUpgrade};
use serde_json::{Map, Value};

use crate::{LabelsToCheck, Services, generate_name, invalid};

/// A cluster to create, as the request gave it. `None` means absent (the template's value
/// or the attribute's default applies); `Some(None)` is an explicit null.
#[derive(Clone, Debug, Default)]
pub struct NewCluster {
    pub name: Option<String>,
    pub keypair: Option<String>,
    pub docker_volume_size: Option<i32>,
    /// The request's labels when it gave any.
    pub labels: Option<Map<String, Value>>,
    pub merge_labels: bool,
    pub master_flavor_id: Option<String>,
    pub flavor_id: Option<String>,
    pub master_count: Option<i32>,
    pub node_count: Option<i32>,
    pub create_timeout: Option<Option<i32>>,
    pub discovery_url: Option<String>,
    pub fixed_network: Option<String>,
    pub fixed_subnet: Option<String>,
    pub floating_ip_enabled: Option<Option<bool>>,
    pub master_lb_enabled: Option<Option<bool>>,
    pub health_status: Option<String>,
    pub health_status_reason: Option<Value>,
    /// Microversions before 1.10 refuse clusters without workers.
    pub allow_zero_nodes: bool,
}

/// What a cluster PATCH asks the conductor for.
#[derive(Clone, Debug)]
pub struct ClusterChange {
    pub node_count: i32,
    pub health_status: Option<String>,
    pub health_status_reason: Option<Value>,
    pub rollback: bool,
}

pub const ZERO_NODES: &str =
    "Resizing a nodegroup to zero is not supported in the provided microversion.";

fn is_master(ng: &NodeGroup) -> bool {
    ng.role.as_ref().is_some_and(NodegroupRole::is_master)
}

/// Labels of a new cluster (api.md §6.2.4): the request's, merged onto the template's when
/// asked, else the template's.
fn initial_labels(req: &NewCluster, t: &ClusterTemplate) -> Map<String, Value> {
    let template: Map<String, Value> = loads(t.labels.as_deref()).unwrap_or_default();
    match &req.labels {
        Some(given) if !given.is_empty() => {
            if req.merge_labels {
                let mut merged = template;
                merged.extend(given.clone());
                merged
            } else {
                given.clone()
            }
        }
        _ => template,
    }
}

/// The request's value when set, else the template's.
fn or_template<T: Clone>(own: Option<T>, template: &Option<T>) -> Option<T> {
    own.or_else(|| template.clone())
}

/// A label value in an error text, as Python's `str()` shows a string.
fn shown(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

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
        role: Some(role.into()),
        is_default: Some(true),
        status: Some(ClusterStatus::CreateInProgress),
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

pub struct Clusters<'a> {
    pub(crate) s: &'a Services,
}

impl Clusters<'_> {
    /// The template's driver must be one this deployment runs (api.md §6.2.3 step 4).
    /// Upstream resolved the driver from (server_type, os, coe) and ignored the template's
    /// `driver`, which could pick a different driver than the one that runs.
    fn check_driver(&self, t: &ClusterTemplate) -> Result<()> {
        let settings = &self.s.settings;
        let name = self.s.driver_name(t);
        let none = || "None".to_owned();
        match name {
            Some(n) if settings.drivers.contains(&n) => Ok(()),
            Some(n) => Err(invalid(format!("Cluster driver ({n}) not supported."))),
            None => Err(invalid(format!(
                "Cluster type ({}, {}, {}) not supported.",
                t.server_type.clone().unwrap_or_else(none),
                t.cluster_distro.clone().unwrap_or_else(none),
                t.coe.clone().unwrap_or_else(none)
            ))),
        }
    }

    /// The checks upstream makes before the caller's policy (api.md §6.2.3 steps 4-7).
    pub fn check_create(&self, t: &ClusterTemplate, req: &NewCluster) -> Result<()> {
        self.check_driver(t)?;
        if let (Some(check), Some(driver)) = (&self.s.label_check, self.s.driver_name(t)) {
            let template: Map<String, Value> = loads(t.labels.as_deref()).unwrap_or_default();
            let cluster = initial_labels(req, t);
            check(
                &driver,
                LabelsToCheck::Cluster {
                    cluster: &cluster,
                    template: &template,
                },
            )?;
        }
        let docker_volume_size = or_template(req.docker_volume_size, &t.docker_volume_size);
        if t.docker_storage_driver.as_deref() == Some("devicemapper")
            && docker_volume_size.is_none_or(|v| v < 3)
        {
            return Err(invalid(format!(
                "docker volume size {} GB is not valid, expecting minimum value 3GB for devicemapper storage driver.",
                docker_volume_size.map_or_else(|| "None".to_owned(), |v| v.to_string())
            )));
        }
        let master_count = req.master_count.unwrap_or(1);
        if master_count % 2 == 0 || master_count < 1 {
            return Err(invalid(format!(
                "master nodegroup size of {master_count} is invalid, size cannot be an even number."
            )));
        }
        if !req.allow_zero_nodes && req.node_count.unwrap_or(1) == 0 {
            return Err(invalid(ZERO_NODES.into()));
        }
        Ok(())
    }

    /// Create the cluster (after [`Self::check_create`] and the caller's policy): quota,
    /// the remaining checks, then the rows and the cast. Returns the new cluster's uuid.
    pub async fn create(
        &self,
        ctx: &RequestContext,
        t: &ClusterTemplate,
        req: NewCluster,
    ) -> Result<String> {
        let limit = self
            .s
            .quotas()
            .cluster_limit(ctx.project_id.as_deref())
            .await?;
        // Checked here for upstream's error order; the insert below re-checks atomically.
        if self
            .s
            .db
            .clusters()
            .count(ctx, &ClusterFilters::default())
            .await?
            >= limit
        {
            return Err(Error::cluster_quota_exceeded(limit));
        }
        if t.hidden == Some(true) && !ctx.is_admin {
            return Err(Error::Forbidden {
                message: "Not authorized.".into(),
            });
        }
        let labels = initial_labels(&req, t);
        let master_count = req.master_count.unwrap_or(1);
        let node_count = req.node_count.unwrap_or(1);
        let keypair = or_template(req.keypair, &t.keypair_id);
        let master_flavor_id = or_template(req.master_flavor_id, &t.master_flavor_id);
        let flavor_id = or_template(req.flavor_id, &t.flavor_id);
        let fixed_network = or_template(req.fixed_network, &t.fixed_network);
        let fixed_subnet = or_template(req.fixed_subnet, &t.fixed_subnet);
        let floating_ip_enabled = req.floating_ip_enabled.unwrap_or(t.floating_ip_enabled);
        let master_lb_enabled = req.master_lb_enabled.unwrap_or(t.master_lb_enabled);
        let mut checks = self.s.checks(ctx);
        let boot = self
            .s
            .boot_volume_size(Some(&Value::Object(labels.clone())));
        checks.root_disk(flavor_id.as_deref(), &boot).await?;
        checks.root_disk(master_flavor_id.as_deref(), &boot).await?;
        let opt = |v: &Option<String>| v.clone().map_or(Value::Null, Value::String);
        let mut template = Map::new();
        for (k, v) in [
            ("image_id", &t.image_id),
            ("flavor_id", &t.flavor_id),
            ("master_flavor_id", &t.master_flavor_id),
            ("external_network_id", &t.external_network_id),
            ("fixed_network", &t.fixed_network),
            ("fixed_subnet", &t.fixed_subnet),
        ] {
            template.insert(k.into(), opt(v));
        }
        let mut cluster = Map::new();
        for (k, v) in [
            ("flavor_id", &flavor_id),
            ("master_flavor_id", &master_flavor_id),
            ("fixed_network", &fixed_network),
            ("fixed_subnet", &fixed_subnet),
            ("keypair", &keypair),
        ] {
            cluster.insert(k.into(), opt(v));
        }
        checks.os_resources(&template, Some(&cluster)).await?;
        if master_lb_enabled == Some(true) {
            checks.load_balancer().await?;
        }
        if master_count > 1 && master_lb_enabled != Some(true) {
            return Err(invalid(
                "master_count must be 1 when master_lb_enabled is False".into(),
            ));
        }
        // The default worker's min_node_count comes from this label (upstream crashed on a
        // bad one).
        if let Some(v) = labels.get("min_node_count")
            && v.as_str()
                .and_then(|s| s.trim().parse::<i32>().ok())
                .is_none()
        {
            return Err(invalid(format!(
                "Invalid input for field/attribute min_node_count. Value: '{}'. Value should be an integer",
                shown(v)
            )));
        }
        let uuid = uuid::Uuid::new_v4().to_string();
        let name = req
            .name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| generate_name("cluster"));
        let row = Cluster {
            uuid: Some(uuid.clone()),
            name: Some(name),
            project_id: ctx.project_id.clone(),
            user_id: ctx.user_id.clone(),
            cluster_template_id: t.uuid.clone(),
            keypair,
            docker_volume_size: or_template(req.docker_volume_size, &t.docker_volume_size),
            labels: Some(dumps(&Value::Object(labels))),
            master_flavor_id,
            flavor_id,
            status: Some(ClusterStatus::CreateInProgress),
            status_reason: None,
            health_status: req.health_status.as_deref().map(str::parse).transpose()?,
            health_status_reason: req
                .health_status_reason
                .filter(|v| !v.is_null())
                .map(|v| dumps(&v)),
            create_timeout: req.create_timeout.unwrap_or(Some(60)),
            discovery_url: req.discovery_url,
            coe_version: None,
            container_version: None,
            fixed_network,
            fixed_subnet,
            floating_ip_enabled,
            master_lb_enabled,
            ..Cluster::default()
        };
        let groups = default_nodegroups(&row, t, master_count, node_count)?;
        let message = ClusterCreate {
            unsaved: None,
            cluster_uuid: uuid.clone().into(),
            master_count,
            node_count,
            create_timeout: row.create_timeout,
        };
        if let Some(staged) = &self.s.staged {
            // Upstream's contract: the conductor inserts the cluster and its nodegroups (the
            // quota was counted above, without the atomic reservation).
            staged.stage_cluster(row);
            if let Err(e) = self.s.conductor.cluster_create(ctx, message).await {
                staged.discard(&uuid);
                return Err(e);
            }
            return Ok(uuid);
        }
        let quota = ClusterQuota {
            scope: ctx.clone(),
            limit,
        };
        // Made while the user's token is at hand; nothing of a create that fails stays.
        if let Some(creds) = &self.s.credentials {
            creds.issue(ctx, &uuid).await?;
        }
        let inserted = match self
            .s
            .lifecycle()
            .insert_cluster(row, groups, Some(quota))
            .await
        {
            Ok(inserted) => inserted,
            Err(e) => {
                if let (Some(creds), Some(user)) = (&self.s.credentials, ctx.user_id.as_deref()) {
                    creds.revoke(user, &uuid).await;
                }
                return Err(e);
            }
        };
        // The message is built from the row in hand: a read-back could run on another pool
        // connection, on a Galera node that has not applied the insert yet.
        if let Some(handoff) = &self.s.handoff {
            handoff.stage_cluster(inserted);
        }
        let sent = self.s.conductor.cluster_create(ctx, message).await;
        if let Some(handoff) = &self.s.handoff {
            // Whatever the encoding did not take (the cast failed before it).
            handoff.discard(&uuid);
        }
        if let Err(e) = sent {
            // The rows exist in CREATE_IN_PROGRESS; the conductor's sweep picks the cluster up.
            tracing::warn!(cluster = %uuid, "cluster_create not delivered to the conductor: {e}");
        }
        Ok(uuid)
    }

    /// A PATCH of the worker count and/or health, checked against the cluster's state.
    pub async fn update(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        change: ClusterChange,
    ) -> Result<()> {
        ClusterOp::Update.check(c.status)?;
        let mut checks = self.s.checks(ctx);
        let labels: Option<Value> = loads(c.labels.as_deref());
        let boot = self.s.boot_volume_size(labels.as_ref());
        checks.root_disk(c.flavor_id.as_deref(), &boot).await?;
        checks
            .root_disk(c.master_flavor_id.as_deref(), &boot)
            .await?;
        let message = ClusterUpdate {
            cluster_uuid: c.ident(),
            node_count: change.node_count,
            health_status: change
                .health_status
                .as_deref()
                .map(str::parse)
                .transpose()?,
            health_status_reason: change.health_status_reason,
            rollback: change.rollback,
        };
        self.s.conductor.cluster_update(ctx, message).await
    }

    pub async fn delete(&self, ctx: &RequestContext, c: &Cluster) -> Result<()> {
        let message = ClusterRef {
            cluster_uuid: c.ident(),
        };
        self.s.conductor.cluster_delete(ctx, message).await
    }

    /// Resize one worker nodegroup within its bounds.
    pub async fn resize(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        ng: &NodeGroup,
        node_count: i32,
        nodes_to_remove: Vec<String>,
    ) -> Result<()> {
        if is_master(ng) {
            // The base driver's rule; no driver in this deployment resizes masters.
            return Err(invalid(
                "Resizing the master nodegroup is not supported by this driver.".into(),
            ));
        }
        let min = ng.min_node_count.unwrap_or(0);
        if min > node_count || ng.max_node_count.is_some_and(|m| m != 0 && m < node_count) {
            return Err(invalid(format!(
                "Resizing {} outside the allowed range: min_node_count = {min}, max_node_count = {}",
                ng.name,
                ng.max_node_count
                    .map_or_else(|| "None".to_owned(), |m| m.to_string())
            )));
        }
        ClusterOp::Resize.check(c.status)?;
        let message = ClusterResize {
            cluster_uuid: c.ident(),
            nodegroup_uuid: ng.ident(),
            node_count,
            nodes_to_remove,
        };
        self.s.conductor.cluster_resize(ctx, message).await
    }

    /// Upgrade the cluster (or one nodegroup) to template `t`. A non-default nodegroup may
    /// only follow the cluster's own template.
    pub async fn upgrade(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        t: &ClusterTemplate,
        ng: &NodeGroup,
        explicit_nodegroup: bool,
        max_batch_size: Option<i32>,
    ) -> Result<()> {
        if explicit_nodegroup && t.uuid != c.cluster_template_id && ng.is_default != Some(true) {
            let current = match c.cluster_template_id.as_deref() {
                Some(tid) => self
                    .s
                    .db
                    .cluster_templates()
                    .get_by_uuid(ctx, tid)
                    .await
                    .ok()
                    .and_then(|t| t.name),
                None => None,
            };
            return Err(Error::Conflict {
                message: format!(
                    "Cluster Template is not valid for upgrade: Nodegroup {} can be upgraded only to match cluster's template ({}).",
                    ng.name,
                    current.unwrap_or_else(|| "None".into())
                ),
            });
        }
        let message = ClusterUpgrade {
            cluster_uuid: c.ident(),
            nodegroup_uuid: ng.ident(),
            cluster_template_uuid: t.ident(),
            max_batch_size,
        };
        self.s.conductor.cluster_upgrade(ctx, message).await
    }
}
