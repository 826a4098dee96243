//! The Cluster API driver: Magnum clusters as CAPI Cluster topologies on a management
//! cluster (drivers.md §4), status from watches instead of polls, failures and timeouts that
//! end in `*_FAILED` with the root cause.
//!
//! Every mutating operation renders the cluster's whole desired state (`render`) and applies
//! it with server-side apply, so it is idempotent; clusters made by magnum-cluster-api (same
//! namespace, names and labels, another ClusterClass) are changed with a guarded JSON patch
//! of their topology instead, leaving their class and variables as they are.

pub mod addons;
mod autoscaler;
mod class;
mod health;
pub mod kube;
pub mod labels;
pub mod render;
mod server_groups;
#[cfg(test)]
mod stand_in_tests;
pub mod status;
mod watch;

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use magnum_conf::config::{AutoScalingSection, ClusterApiSection};
use magnum_core::model::{Cluster, ClusterTemplate, Labels, Nodegroup as NodeGroup, NodegroupRole};
use magnum_core::status::ClusterStatus as S;
use magnum_core::{Error, RequestContext, Result};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use self::kube::{Kind, Management};
use self::render::{Addons, CAPI_CLUSTER_LABEL, CLASS, Cas, CloudConfig, Inputs, UUID_LABEL};
use self::status::{Operation, Snapshot};
use magnum_driver::{
    ClusterChanges, Driver, HealthReport, NodegroupReport, Provides, StatusReport, StatusWaker,
};

/// The driver's own name, and magnum-cluster-api's entry points (drivers.md §2), so the
/// clusters and templates of an upstream database keep working after the switch.
pub const NAME: &str = "k8s_capi";
const MCAPI_NAMES: [(&str, &str); 5] = [
    ("k8s_cluster_api_ubuntu", "ubuntu"),
    ("k8s_cluster_api_ubuntu_focal", "ubuntu-focal"),
    ("k8s_cluster_api_debian", "debian"),
    ("k8s_cluster_api_flatcar", "flatcar"),
    ("k8s_cluster_api_rockylinux", "rockylinux"),
];

/// What the driver asks the conductor for: the rows it renders from, and the cluster's CAs
/// and cloud credentials (none of which travel in RPC messages).
#[async_trait]
pub trait Source: Send + Sync {
    async fn template(&self, cluster: &Cluster) -> Result<ClusterTemplate>;
    async fn nodegroups(&self, cluster: &Cluster) -> Result<Vec<NodeGroup>>;
    async fn cas(&self, ctx: &RequestContext, cluster: &Cluster) -> Result<Cas>;
    /// The clouds.yaml of the cluster's OpenStack components; `None` without a cloud.
    async fn cloud(&self, cluster: &Cluster) -> Result<Option<CloudConfig>>;
    /// The Octavia load balancers the workload cluster's cloud controller made for it
    /// (their description names the CAPI cluster or the Magnum cluster); none without Octavia.
    async fn load_balancers(&self, cluster: &Cluster) -> Result<Vec<LoadBalancer>>;
    async fn delete_load_balancer(&self, cluster: &Cluster, id: &str) -> Result<()>;
    /// The Nova flavors the cloud offers (the autoscaler's capacity of a node it has not
    /// made yet); none without a cloud.
    async fn flavors(&self) -> Result<Vec<render::FlavorSize>> {
        Ok(Vec::new())
    }
    /// Cinder's volume types and its default; none without a cloud or Cinder.
    async fn volume_types(&self) -> Result<render::VolumeTypes> {
        Ok(render::VolumeTypes::default())
    }
    /// The Nova server groups `wanted` (name, policy) in the cluster's project, made where
    /// none has the name, all with one session as the cluster's own application credential;
    /// their ids in `wanted`'s order. `None` without a cloud or a kept credential.
    async fn ensure_server_groups(
        &self,
        _cluster: &Cluster,
        _wanted: &[(String, String)],
    ) -> Result<Option<Vec<String>>> {
        Ok(None)
    }
    /// Deletes the server groups of the cluster's project whose name `ours` accepts.
    async fn delete_server_groups(
        &self,
        _cluster: &Cluster,
        _ours: &(dyn for<'n> Fn(&'n str) -> bool + Sync),
    ) -> Result<()> {
        Ok(())
    }
    /// The Manila share types the cluster's project sees; none without Manila.
    async fn share_types(&self, _cluster: &Cluster) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// A load balancer as the delete sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadBalancer {
    pub id: String,
    pub name: String,
    pub provisioning_status: String,
}

/// One driver instance per registered name, sharing one management-cluster connection.
pub struct CapiDriver {
    name: String,
    provides: Vec<Provides>,
    shared: Arc<Shared>,
}

struct Shared {
    cfg: ClusterApiSection,
    /// `[auto_scaling] image_repository`: where the cluster autoscaler's image comes from.
    autoscaler_repository: String,
    mgmt: OnceCell<Management>,
    watch: OnceCell<watch::Cache>,
    source: OnceLock<Arc<dyn Source>>,
    waker: OnceLock<Arc<dyn StatusWaker>>,
}

impl CapiDriver {
    /// The driver under its own name and magnum-cluster-api's, one connection for all.
    pub fn all(cfg: &ClusterApiSection, auto_scaling: &AutoScalingSection) -> Vec<Arc<CapiDriver>> {
        let shared = Arc::new(Shared {
            cfg: cfg.clone(),
            autoscaler_repository: auto_scaling.image_repository.clone(),
            mgmt: OnceCell::new(),
            watch: OnceCell::new(),
            source: OnceLock::new(),
            waker: OnceLock::new(),
        });
        let provides = |os: &str| Provides {
            server_type: "vm".into(),
            os: os.into(),
            coe: "kubernetes".into(),
        };
        let mut v = vec![Arc::new(CapiDriver {
            name: NAME.into(),
            provides: vec![provides("capi")],
            shared: shared.clone(),
        })];
        for (name, os) in MCAPI_NAMES {
            v.push(Arc::new(CapiDriver {
                name: name.into(),
                provides: vec![provides(os)],
                shared: shared.clone(),
            }));
        }
        v
    }

    /// Set once by the conductor before it starts its workers.
    pub fn set_source(&self, source: Arc<dyn Source>) {
        let _ = self.shared.source.set(source);
    }

    pub fn set_waker(&self, waker: Arc<dyn StatusWaker>) {
        let _ = self.shared.waker.set(waker);
    }

    fn source(&self) -> Result<&Arc<dyn Source>> {
        self.shared.source.get().ok_or_else(|| {
            Error::Internal("the Cluster API driver was not given its source".into())
        })
    }

    async fn mgmt(&self) -> Result<&Management> {
        self.shared
            .mgmt
            .get_or_try_init(|| Management::connect(&self.shared.cfg))
            .await
            .map_err(Error::from)
    }

    /// The watch cache, started on first use (and by [`CapiDriver::start`] at boot).
    async fn cache(&self) -> Result<&watch::Cache> {
        let mgmt = self.mgmt().await?.clone();
        let waker = self.shared.waker.get().cloned();
        let addons = self.shared.cfg.addons_helm_enabled;
        Ok(self
            .shared
            .watch
            .get_or_init(|| async move { watch::Cache::start(&mgmt, waker, addons) })
            .await)
    }

    /// Connects and starts the watches, so changes wake the status sync from the start.
    pub async fn start(&self) -> Result<()> {
        self.cache().await.map(drop)
    }

    async fn addons(&self, template: &ClusterTemplate) -> Addons {
        let dir = self.shared.cfg.addons_path.trim();
        if dir.is_empty() {
            return Addons::default();
        }
        let driver = template
            .network_driver
            .clone()
            .unwrap_or_else(|| "calico".into());
        let mut out = Addons::default();
        for file in [
            format!("cni/{driver}.yaml"),
            "cloud-provider.yaml".into(),
            "csi-cinder.yaml".into(),
        ] {
            let path = std::path::Path::new(dir).join(&file);
            if let Ok(text) = tokio::fs::read_to_string(&path).await {
                out.manifests.push((file.replace('/', "-"), text));
            }
        }
        out
    }

    /// Validation before anything changes (create, update, upgrade).
    fn validate(
        &self,
        cluster: &Cluster,
        template: &ClusterTemplate,
        ngs: &[NodeGroup],
    ) -> Result<()> {
        let driver = template
            .network_driver
            .clone()
            .unwrap_or_else(|| "calico".into());
        let allowed = &self.shared.cfg.allowed_network_drivers;
        if !allowed.contains(&driver) {
            return Err(Error::InvalidParameterValue {
                message: format!(
                    "Network driver {driver} is not supported by the Cluster API driver (supported: {}).",
                    allowed.join(", ")
                ),
            });
        }
        let masters: i32 = ngs
            .iter()
            .filter(|n| n.role == NodegroupRole::Master)
            .map(|n| n.node_count)
            .sum();
        if masters < 1 || masters % 2 == 0 {
            return Err(Error::InvalidParameterValue {
                message: format!(
                    "Master node count must be an odd number of at least 1 (asked for {masters})."
                ),
            });
        }
        check_labels(cluster, template, ngs)?;
        let version = render::effective(cluster, template, "kube_tag")
            .unwrap_or_else(|| self.shared.cfg.default_kube_tag.clone());
        check_kube_tag(&version)
    }

    async fn inputs_parts(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        template: &ClusterTemplate,
        with_secrets: bool,
    ) -> Result<(Option<CloudConfig>, Option<Cas>, Addons)> {
        if !with_secrets {
            // The operator's files still decide which add-ons are charts.
            return Ok((None, None, self.addons(template).await));
        }
        let source = self.source()?;
        let cloud = source.cloud(cluster).await?;
        let cas = source.cas(ctx, cluster).await?;
        Ok((cloud, Some(cas), self.addons(template).await))
    }

    /// The flavors, when a nodegroup is auto-scaled (at each render: a Cluster applied without
    /// its capacity annotations would drop them). Nova being away costs only the annotations.
    async fn autoscaled_flavors(
        &self,
        cluster: &Cluster,
        template: &ClusterTemplate,
        ngs: &[NodeGroup],
    ) -> Vec<render::FlavorSize> {
        if !autoscaler::any_autoscaled(cluster, template, ngs) {
            return Vec::new();
        }
        match self.source().map(Arc::clone) {
            Ok(source) => source.flavors().await.unwrap_or_else(|e| {
                tracing::warn!(cluster = %cluster.uuid, "no autoscaler capacity annotations: the flavors could not be read: {e}");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        }
    }

    /// Renders and applies the cluster: the Secrets and addons too when `with_secrets`
    /// (create), else the Cluster alone (its spec is all an operation changes).
    async fn apply_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        template: &ClusterTemplate,
        ngs: &[NodeGroup],
        target: Target<'_>,
        with_secrets: bool,
    ) -> Result<()> {
        let Target { stack_id, live } = target;
        let mgmt = self.mgmt().await?;
        let (cloud, cas, addons) = self
            .inputs_parts(ctx, cluster, template, with_secrets)
            .await?;
        let charts = addons::Settings::from_config(&self.shared.cfg);
        let flavors = self.autoscaled_flavors(cluster, template, ngs).await;
        // The StorageClasses go into the workload with its cloud-config, at the create.
        let volume_types = match (with_secrets, self.source()) {
            (true, Ok(source)) => source.volume_types().await.unwrap_or_else(|e| {
                tracing::warn!(cluster = %cluster.uuid, "no StorageClasses: Cinder's volume types could not be read: {e}");
                render::VolumeTypes::default()
            }),
            _ => render::VolumeTypes::default(),
        };
        // Manila's StorageClasses too, when a share network is named.
        let share_types = match (
            with_secrets,
            addons::manila_share_network(cluster, template),
            self.source(),
        ) {
            (true, Some(_), Ok(source)) => source.share_types(cluster).await.unwrap_or_else(|e| {
                tracing::warn!(cluster = %cluster.uuid, "no Manila StorageClasses: the share types could not be read: {e}");
                Vec::new()
            }),
            _ => Vec::new(),
        };
        // Made before the Cluster exists; later renders keep what the live Cluster names.
        let server_groups = match self.source() {
            Ok(source) => {
                server_groups::ensure(source.as_ref(), live, cluster, template, ngs, stack_id)
                    .await?
            }
            Err(_) => live.map(server_groups::from_live).unwrap_or_default(),
        };
        let inputs = Inputs {
            cluster,
            template,
            nodegroups: ngs,
            stack_id,
            namespace: mgmt.namespace(),
            default_kube_tag: &self.shared.cfg.default_kube_tag,
            cloud: cloud.as_ref(),
            cas: cas.as_ref(),
            addons: &addons,
            charts: charts.as_ref(),
            flavors: &flavors,
            volume_types: &volume_types,
            autoscaler_repository: &self.shared.autoscaler_repository,
            server_groups: &server_groups,
            share_types: &share_types,
        };
        if with_secrets {
            for obj in render::cluster_class(mgmt.namespace()) {
                mgmt.apply(&obj).await?;
            }
            for obj in render::render(&inputs) {
                apply_object(mgmt, &obj).await?;
            }
        } else {
            // The add-ons follow an upgrade's minor and label changes with the Cluster. A
            // cluster made before CAAPH was required keeps resizing without it: only a
            // create insists.
            if let Some(s) = &charts {
                if caaph_installed(mgmt, &inputs).await? {
                    for obj in addons::proxies(&inputs, s) {
                        apply_object(mgmt, &obj).await?;
                    }
                } else {
                    tracing::warn!(cluster = %cluster.uuid, "{NO_CAAPH}");
                }
            }
            mgmt.apply(&render::cluster(&inputs)).await?;
            // Auto-scaling switched on (a nodegroup added or changed) brings the autoscaler;
            // a new minor, its image.
            if autoscaler::wanted(&inputs) {
                for obj in autoscaler::objects(&inputs) {
                    apply_object(mgmt, &obj).await?;
                }
            }
        }
        // Auto-scaling switched off: an autoscaler left from before goes (a new cluster has
        // none to look for).
        if !with_secrets
            && !autoscaler::wanted(&inputs)
            && mgmt
                .get(Kind::Deployment, &autoscaler::name(stack_id))
                .await?
                .is_some()
        {
            remove_autoscaler(mgmt, stack_id).await?;
        }
        if charts.is_some() {
            remove_unselected_addons(mgmt, &inputs).await?;
        }
        Ok(())
    }

    /// The live Cluster (none before the create): read once per operation, it says whether
    /// the cluster is adopted and which server groups its machines have.
    async fn live(&self, stack_id: &str) -> Result<Option<Value>> {
        Ok(self.mgmt().await?.get(Kind::Cluster, stack_id).await?)
    }

    /// Changes a magnum-cluster-api Cluster's topology to the nodegroups: control-plane
    /// replicas and the machineDeployments list, nothing else. A merge patch conditioned on
    /// the resourceVersion read, at the API version of the object's shape; `Ok(false)` when
    /// the Cluster changed meanwhile (its status is rewritten often), to read it again.
    async fn patch_adopted(&self, live: &Value, ngs: &[NodeGroup]) -> Result<bool> {
        let mgmt = self.mgmt().await?;
        let name = live["metadata"]["name"].as_str().unwrap_or_default();
        let existing: Vec<Value> = live["spec"]["topology"]["workers"]["machineDeployments"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut mds = Vec::new();
        for ng in ngs
            .iter()
            .filter(|n| n.role != NodegroupRole::Master && !deleting(n))
        {
            let mut md = existing
                .iter()
                .find(|m| m["name"] == ng.name.as_str())
                .cloned()
                .unwrap_or_else(|| adopted_md_entry(existing.first(), ng));
            md["replicas"] = json!(ng.node_count);
            mds.push(md);
        }
        let masters: i32 = ngs
            .iter()
            .filter(|n| n.role == NodegroupRole::Master)
            .map(|n| n.node_count)
            .sum();
        // Lists are replaced whole by a merge patch: the machineDeployments list is ours to
        // compute, and every entry carries what it had.
        let patch = json!({
            "metadata": {"resourceVersion": live["metadata"]["resourceVersion"]},
            "spec": {"topology": {
                "controlPlane": {"replicas": masters.max(1)},
                "workers": {"machineDeployments": mds},
            }},
        });
        let params = ::kube::api::PatchParams {
            field_manager: Some(kube::FIELD_MANAGER.into()),
            ..Default::default()
        };
        match adopted_api(mgmt, live)
            .patch(name, &params, &::kube::api::Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(::kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(::kube::Error::Api(s)) => Err(self::kube::KubeError::Refused {
                what: format!("Cluster {name}"),
                code: s.code,
                reason: s.reason,
                message: s.message,
            }
            .into()),
            Err(other) => Err(Error::ServiceUnavailable {
                message: format!("the management cluster cannot be reached: {other}"),
            }),
        }
    }

    /// Upgrades a magnum-cluster-api Cluster through its own class: the topology's version,
    /// and the image variable (cluster-wide and in each machineDeployment's overrides) when
    /// the template brings another image; its class and every other variable stay. Patched
    /// like [`Self::patch_adopted`], conditioned on the resourceVersion read.
    async fn upgrade_adopted(&self, mut live: Value, to: &str, image: Option<&str>) -> Result<()> {
        let name = live["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for _ in 0..ADOPTED_PATCH_TRIES {
            let topology = &live["spec"]["topology"];
            let mut patch_topology = json!({"version": to});
            if let Some(image) = image {
                let set = |vars: &Value| -> Value {
                    let mut vars = vars.as_array().cloned().unwrap_or_default();
                    for v in &mut vars {
                        if v["name"] == MCAPI_IMAGE_VARIABLE {
                            v["value"] = json!(image);
                        }
                    }
                    Value::Array(vars)
                };
                patch_topology["variables"] = set(&topology["variables"]);
                let mut mds = topology["workers"]["machineDeployments"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for md in &mut mds {
                    if md["variables"]["overrides"].is_array() {
                        md["variables"]["overrides"] = set(&md["variables"]["overrides"]);
                    }
                }
                patch_topology["workers"] = json!({ "machineDeployments": mds });
            }
            let patch = json!({
                "metadata": {"resourceVersion": live["metadata"]["resourceVersion"]},
                "spec": {"topology": patch_topology},
            });
            let mgmt = self.mgmt().await?;
            let params = ::kube::api::PatchParams {
                field_manager: Some(kube::FIELD_MANAGER.into()),
                ..Default::default()
            };
            match adopted_api(mgmt, &live)
                .patch(&name, &params, &::kube::api::Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(::kube::Error::Api(s)) if s.code == 409 => {}
                Err(::kube::Error::Api(s)) => {
                    return Err(self::kube::KubeError::Refused {
                        what: format!("Cluster {name}"),
                        code: s.code,
                        reason: s.reason,
                        message: s.message,
                    }
                    .into());
                }
                Err(other) => {
                    return Err(Error::ServiceUnavailable {
                        message: format!("the management cluster cannot be reached: {other}"),
                    });
                }
            }
            live = match self.live(&name).await?.filter(is_adopted) {
                Some(again) => again,
                None => break,
            };
        }
        Err(Error::Conflict {
            message: format!("Cluster {name} kept changing while it was upgraded; try again."),
        })
    }

    /// Re-renders (or patches an adopted) cluster with `ngs` as its nodegroups.
    async fn reconcile(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        ngs: &[NodeGroup],
    ) -> Result<()> {
        let stack_id = stack_id_of(cluster)?;
        // An adopted Cluster is read again after a lost race with another writer (the
        // controllers write its status all the time), a few times.
        for _ in 0..ADOPTED_PATCH_TRIES {
            let live = self.live(stack_id).await?;
            let Some(adopted) = live.as_ref().filter(|l| is_adopted(l)) else {
                let template = self.source()?.template(cluster).await?;
                return self
                    .apply_cluster(
                        ctx,
                        cluster,
                        &template,
                        ngs,
                        Target {
                            stack_id,
                            live: live.as_ref(),
                        },
                        false,
                    )
                    .await;
            };
            if self.patch_adopted(adopted, ngs).await? {
                return Ok(());
            }
        }
        Err(Error::Conflict {
            message: format!(
                "Cluster {stack_id} kept changing while its topology was patched; try again."
            ),
        })
    }

    /// The cluster's nodegroups with `changed` in place of its stored row.
    async fn nodegroups_with(
        &self,
        cluster: &Cluster,
        changed: &NodeGroup,
    ) -> Result<Vec<NodeGroup>> {
        let mut ngs = self.source()?.nodegroups(cluster).await?;
        match ngs.iter_mut().find(|n| n.uuid == changed.uuid) {
            Some(n) => *n = changed.clone(),
            None => ngs.push(changed.clone()),
        }
        Ok(ngs)
    }

    /// Marks the Machines whose server is in `servers` for removal first.
    async fn mark_for_removal(&self, stack_id: &str, servers: &[String]) -> Result<()> {
        if servers.is_empty() {
            return Ok(());
        }
        let mgmt = self.mgmt().await?;
        let machines = mgmt
            .list(Kind::Machine, &format!("{CAPI_CLUSTER_LABEL}={stack_id}"))
            .await?;
        for m in machines {
            let provider = m["spec"]["providerID"].as_str().unwrap_or_default();
            let node = m["status"]["nodeRef"]["name"].as_str().unwrap_or_default();
            let name = m["metadata"]["name"].as_str().unwrap_or_default();
            let hit = servers.iter().any(|s| {
                !s.is_empty() && (provider.ends_with(s.as_str()) || node == s || name == s)
            });
            if hit {
                let patch = json!({"metadata": {"annotations": {render::DELETE_MACHINE: "yes"}}});
                mgmt.merge_stored(Kind::Machine, &m, &patch).await?;
            }
        }
        Ok(())
    }

    async fn snapshot_report(&self, cluster: &Cluster, ngs: &[NodeGroup]) -> Result<StatusReport> {
        let Some(status) = cluster.status else {
            return Ok(StatusReport::default());
        };
        let op = match status {
            S::CreateInProgress | S::CreateFailed => Operation::Create,
            S::DeleteInProgress | S::DeleteFailed => Operation::Delete,
            _ => Operation::Update,
        };
        let Some(stack_id) = cluster.stack_id.as_deref().filter(|s| !s.is_empty()) else {
            if op == Operation::Delete {
                return Ok(StatusReport {
                    status: Some(S::DeleteComplete),
                    ..StatusReport::default()
                });
            }
            return Ok(StatusReport::default());
        };
        let cache = self.cache().await?;
        let objects = cache.snapshot(stack_id).await?;
        let snap = Snapshot {
            cluster: objects.cluster.as_ref(),
            control_plane: objects.control_plane.as_ref(),
            machine_deployments: &objects.machine_deployments,
            machines: &objects.machines,
            openstack_cluster: objects.openstack_cluster.as_ref(),
        };
        let mut verdict = status::evaluate(op, &snap);
        // The add-ons, for an operation in progress: a failure CAAPH reports is the reason,
        // and the operation completes only with every release deployed.
        let operating = matches!(status, S::CreateInProgress | S::UpdateInProgress);
        if operating
            && self.shared.cfg.addons_helm_enabled
            && (verdict.status == op.in_progress() || verdict.status == op.complete())
            && let Some((proxies, releases)) = self.addon_objects(cluster, stack_id).await
        {
            if let Some(why) = addons::failing(&proxies, &releases) {
                verdict.status = op.in_progress();
                verdict.reason = Some(why);
            } else if verdict.status == op.complete()
                && let Some(why) = addons::waiting(&proxies, &releases)
            {
                verdict.status = op.in_progress();
                verdict.reason = Some(why);
            }
        }
        let mut report = StatusReport::default();
        if Some(verdict.status) != cluster.status {
            report.status = Some(verdict.status);
        }
        if verdict.reason != cluster.status_reason {
            report.status_reason = Some(verdict.reason.clone());
        }
        if verdict.api_address.is_some() && verdict.api_address != cluster.api_address {
            report.api_address = verdict.api_address.clone();
        }
        if verdict.coe_version.is_some() && verdict.coe_version != cluster.coe_version {
            report.coe_version = verdict.coe_version.clone();
        }
        for ng in ngs {
            let r = nodegroup_report(op, ng, &verdict, objects.cluster.is_some());
            if let Some(r) = r {
                report.nodegroups.push(r);
            }
        }
        // The cluster is not complete while a worker nodegroup still is on its way (a
        // nodegroup being deleted whose MachineDeployment has not shown its deletion yet):
        // no sweep looks at a complete cluster again, so its nodegroup would wait for ever.
        let busy = ngs.iter().find(|ng| {
            let reported = report
                .nodegroups
                .iter()
                .find(|r| r.uuid == ng.uuid.as_str());
            if reported.is_some_and(|r| r.deleted) || ng.role == NodegroupRole::Master {
                return false;
            }
            reported
                .and_then(|r| r.status)
                .or(ng.status)
                .is_some_and(S::is_in_progress)
        });
        if let Some(ng) = busy
            && op != Operation::Delete
            && verdict.status == complete_of(op)
        {
            let why = format!("Waiting for nodegroup {} to finish", ng.name);
            report.status =
                (cluster.status != Some(in_progress_of(op))).then_some(in_progress_of(op));
            report.status_reason =
                (cluster.status_reason.as_deref() != Some(why.as_str())).then_some(Some(why));
        }
        Ok(report)
    }
}

/// magnum-cluster-api's class variable for the nodes' Glance image (cluster-wide, and per
/// machineDeployment in its overrides).
const MCAPI_IMAGE_VARIABLE: &str = "imageUUID";

/// The image an adopted cluster's upgrade sets: none when the new template keeps the image,
/// the new one when it is a Glance UUID (mcapi's variable takes only UUIDs); a new image
/// given by name is refused before anything changes.
fn adopted_image<'a>(
    current: &ClusterTemplate,
    new: &'a ClusterTemplate,
) -> Result<Option<&'a str>> {
    let image = new.image_id.as_deref().filter(|i| !i.is_empty());
    match image {
        None => Ok(None),
        Some(i) if Some(i) == current.image_id.as_deref() => Ok(None),
        Some(i) if uuid::Uuid::parse_str(i).is_ok() => Ok(Some(i)),
        Some(i) => Err(Error::InvalidParameterValue {
            message: format!(
                "A cluster made by magnum-cluster-api takes its new image as a Glance UUID: give the template's image_id as one, not {i}."
            ),
        }),
    }
}

/// Attempts at patching an adopted Cluster that another writer changed meanwhile.
const ADOPTED_PATCH_TRIES: usize = 5;

/// The Cluster API at the version `live` is shaped in. A server without conversion (the
/// stand-in) serves a Cluster magnum-cluster-api wrote at v1beta1 as it was stored
/// (`topology.class`), and only its own schema accepts it back; a converting server shows
/// v1beta2 to a v1beta2 read, and takes it back at v1beta2.
fn adopted_api(mgmt: &Management, live: &Value) -> ::kube::Api<::kube::api::DynamicObject> {
    let api = mgmt.api(Kind::Cluster);
    if !live["spec"]["topology"]["class"].is_string() {
        return api;
    }
    let gvk = ::kube::core::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Cluster");
    let resource = ::kube::core::ApiResource::from_gvk_with_plural(&gvk, "clusters");
    ::kube::Api::namespaced_with(api.into_client(), mgmt.namespace(), &resource)
}

/// A machineDeployments entry for a nodegroup the Cluster does not have yet, shaped like
/// magnum-cluster-api's: a sibling's class and cluster-wide fields (image, volumes, server
/// group, detach timeout, health check), the nodegroup's own name, flavor, availability
/// zone and node labels (`node-role.kubernetes.io/<role>`, `node.cluster.x-k8s.io/nodegroup`).
fn adopted_md_entry(sibling: Option<&Value>, ng: &NodeGroup) -> Value {
    let mut md = sibling
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"class": render::WORKER_CLASS}));
    if let Some(m) = md.as_object_mut() {
        for own in ["failureDomain", "metadata", "replicas"] {
            m.remove(own);
        }
    }
    md["name"] = json!(ng.name);
    md["metadata"] = json!({"labels": {
        format!("node-role.kubernetes.io/{}", ng.role.as_str()): "",
        "node.cluster.x-k8s.io/nodegroup": ng.name,
    }});
    if let Some(az) = magnum_core::model::label(&ng.labels, "availability_zone") {
        md["failureDomain"] = json!(az);
    }
    if let Some(flavor) = ng.flavor_id.as_deref() {
        let mut overrides: Vec<Value> = md["variables"]["overrides"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        overrides.retain(|o| o["name"] != "flavor");
        overrides.push(json!({"name": "flavor", "value": flavor}));
        match md.get_mut("variables").and_then(Value::as_object_mut) {
            Some(v) => drop(v.insert("overrides".into(), Value::Array(overrides))),
            None => md["variables"] = json!({"overrides": overrides}),
        }
    }
    md
}

fn deleting(ng: &NodeGroup) -> bool {
    matches!(ng.status, Some(S::DeleteInProgress | S::DeleteComplete))
}

/// What changed for one nodegroup: workers from their MachineDeployment's verdict, the
/// control plane with the cluster, a deleted worker when its MachineDeployment is gone.
fn nodegroup_report(
    op: Operation,
    ng: &NodeGroup,
    v: &status::Verdict,
    cluster_exists: bool,
) -> Option<NodegroupReport> {
    let mut r = NodegroupReport {
        uuid: ng.uuid.to_string(),
        ..NodegroupReport::default()
    };
    let found = v.nodegroups.iter().find(|n| n.name == ng.name);
    let (status, reason) = if ng.role == NodegroupRole::Master {
        let s = match v.status {
            S::DeleteComplete => return None,
            s => s,
        };
        (s, v.reason.clone().filter(|_| s != complete_of(op)))
    } else if deleting(ng) || op == Operation::Delete {
        if found.is_none() || !cluster_exists {
            if ng.is_default || op == Operation::Delete {
                return None;
            }
            r.deleted = true;
            return Some(r);
        }
        (
            S::DeleteInProgress,
            Some("Waiting for its MachineDeployment to go".into()),
        )
    } else {
        match found {
            Some(n) => (n.status, n.reason.clone()),
            None if cluster_exists => (
                in_progress_of(op),
                Some("Waiting for its MachineDeployment to appear".into()),
            ),
            None => return None,
        }
    };
    // A nodegroup keeps its own operation (a new nodegroup is being created while its
    // cluster is being updated).
    let status = own_operation(ng.status, status);
    if Some(status) == ng.status && reason == ng.status_reason {
        return None;
    }
    r.status = Some(status);
    r.status_reason = Some(reason);
    Some(r)
}

/// `verdict`'s outcome (in progress, complete, failed) under the nodegroup's own action. A
/// nodegroup already complete stays as it is when the verdict is complete too: an operation
/// on another nodegroup must not relabel it (it read UPDATE_COMPLETE after its create).
fn own_operation(current: Option<S>, verdict: S) -> S {
    if let Some(c) = current
        && c.is_complete()
        && verdict.is_complete()
    {
        return c;
    }
    let create = matches!(current, Some(S::CreateInProgress | S::CreateFailed));
    if !create {
        return verdict;
    }
    match verdict {
        S::UpdateInProgress => S::CreateInProgress,
        S::UpdateComplete => S::CreateComplete,
        S::UpdateFailed => S::CreateFailed,
        other => other,
    }
}

fn complete_of(op: Operation) -> S {
    match op {
        Operation::Create => S::CreateComplete,
        Operation::Update => S::UpdateComplete,
        Operation::Delete => S::DeleteComplete,
    }
}

fn in_progress_of(op: Operation) -> S {
    match op {
        Operation::Create => S::CreateInProgress,
        Operation::Update => S::UpdateInProgress,
        Operation::Delete => S::DeleteInProgress,
    }
}

/// The names this driver registers under (its own and magnum-cluster-api's).
pub fn driver_names() -> Vec<&'static str> {
    std::iter::once(NAME)
        .chain(MCAPI_NAMES.iter().map(|(n, _)| *n))
        .collect()
}

/// The label checks of a new cluster from its labels alone (the API's, before anything is
/// saved): the cluster's labels over its template's, cluster and nodegroup scope.
pub fn check_label_maps(cluster: &Labels, template: &Labels) -> Result<()> {
    labels::log_unknown(&[cluster, template]);
    let cl = labels::Resolved::of(labels::Scope::Cluster, &[cluster, template]);
    let ng = labels::Resolved::of(labels::Scope::Nodegroup, &[cluster, template]);
    let first = cl
        .errors
        .iter()
        .cloned()
        .chain(labels::cross_checks(&cl))
        .chain(ng.errors.iter().cloned())
        .chain(labels::bounds(&ng))
        .next();
    if let Some(e) = first {
        return Err(e.into());
    }
    match cl.text("kube_tag") {
        Some(version) => check_kube_tag(version),
        None => Ok(()),
    }
}

/// A `kube_tag` the topology can carry: `vMAJOR.MINOR.PATCH`.
fn check_kube_tag(version: &str) -> Result<()> {
    match parse_version(version) {
        Some(_) => Ok(()),
        None => Err(Error::InvalidParameterValue {
            message: format!(
                "The kube_tag label must be a Kubernetes version, vMAJOR.MINOR.PATCH (got {version})."
            ),
        }),
    }
}

/// A new nodegroup's own labels (nodegroup scope), before its MachineDeployment is added;
/// the cluster's were checked at its create.
pub fn check_nodegroup_labels(ng: &NodeGroup) -> Result<()> {
    check_nodegroup_label_map(&ng.labels)
}

/// [`check_nodegroup_labels`] from the labels alone (the API's, before the row is saved).
pub fn check_nodegroup_label_map(labels: &Labels) -> Result<()> {
    labels::log_unknown(&[labels]);
    match labels::Resolved::of(labels::Scope::Nodegroup, &[labels])
        .errors
        .into_iter()
        .next()
    {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Every label the driver honours parses, for the cluster and each nodegroup; unknown labels
/// are accepted (as upstream) and logged once. The first refusal names its label and value.
pub fn check_labels(
    cluster: &Cluster,
    template: &ClusterTemplate,
    ngs: &[NodeGroup],
) -> Result<()> {
    check_label_maps(&cluster.labels, &template.labels)?;
    let mut errors = Vec::new();
    for ng in ngs.iter().filter(|n| n.role != NodegroupRole::Master) {
        let l = render::nodegroup_labels(Some(ng), cluster, template);
        errors.extend(l.errors.iter().cloned());
        errors.extend(labels::bounds(&l));
    }
    match errors.into_iter().next() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn class_of(c: &Value) -> Option<&str> {
    let t = &c["spec"]["topology"];
    t["classRef"]["name"]
        .as_str()
        .or_else(|| t["class"].as_str())
}

fn stack_id_of(cluster: &Cluster) -> Result<&str> {
    cluster
        .stack_id
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::Conflict {
            message: format!("Cluster {} has no Cluster API cluster yet.", cluster.uuid),
        })
}

/// `vMAJOR.MINOR.PATCH` (a `v` optional, a `-suffix` ignored).
pub fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let v = v.trim().trim_start_matches('v');
    let core = v.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
    let (major, minor, patch) = (
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    );
    Some((major, minor, patch))
}

/// Whether `from` may become `to`: no downgrade, one minor at a time (CAPI's rule; its
/// webhook refused only after mcapi had changed the status, #630).
pub fn check_upgrade(from: &str, to: &str) -> Result<()> {
    // The client shows an error's text up to its first full stop, and versions are full of
    // dots: the rule comes first in each message.
    let (Some(f), Some(t)) = (parse_version(from), parse_version(to)) else {
        return Err(Error::InvalidParameterValue {
            message: format!("Kubernetes versions look like vMAJOR.MINOR.PATCH ({from} to {to})."),
        });
    };
    if t < f {
        return Err(Error::InvalidParameterValue {
            message: format!("Kubernetes cannot be downgraded (from {from} to {to})."),
        });
    }
    if t.0 != f.0 || t.1 > f.1 + 1 {
        return Err(Error::InvalidParameterValue {
            message: format!(
                "Kubernetes can be upgraded only one minor version at a time (from {from} to v{}.{}.x first, not {to}).",
                f.0,
                f.1 + 1
            ),
        });
    }
    Ok(())
}

fn random_stack_id() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 5];
    let _ = getrandom::fill(&mut bytes);
    let tail: String = bytes
        .iter()
        .map(|b| char::from(CHARS[usize::from(*b) % CHARS.len()]))
        .collect();
    format!("kube-{tail}")
}

#[async_trait]
impl Driver for CapiDriver {
    fn name(&self) -> &str {
        &self.name
    }

    fn provides(&self) -> Vec<Provides> {
        self.provides.clone()
    }

    async fn create_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
        _create_timeout: Option<i32>,
    ) -> Result<ClusterChanges> {
        let template = self.source()?.template(cluster).await?;
        self.validate(cluster, &template, nodegroups)?;
        let mgmt = self.mgmt().await?;
        // A retried create keeps its name; a new one gets a fresh name nobody uses.
        let stack_id = match cluster.stack_id.clone().filter(|s| !s.is_empty()) {
            Some(s) => s,
            None => {
                let mut chosen = None;
                for _ in 0..5 {
                    let candidate = random_stack_id();
                    if mgmt.get(Kind::Cluster, &candidate).await?.is_none() {
                        chosen = Some(candidate);
                        break;
                    }
                }
                chosen.ok_or_else(|| Error::Conflict {
                    message: "No free Cluster API cluster name was found.".into(),
                })?
            }
        };
        // A retried create finds what the first try applied (its server groups among it).
        let live = match cluster.stack_id.as_deref().filter(|s| !s.is_empty()) {
            Some(_) => self.live(&stack_id).await?,
            None => None,
        };
        if let Err(e) = self
            .apply_cluster(
                ctx,
                cluster,
                &template,
                nodegroups,
                Target {
                    stack_id: &stack_id,
                    live: live.as_ref(),
                },
                true,
            )
            .await
        {
            // Nothing half-made stays behind a failed create.
            self.remove_objects(cluster, Some(&stack_id)).await;
            return Err(e);
        }
        Ok(ClusterChanges {
            stack_id: Some(stack_id),
            ..ClusterChanges::default()
        })
    }

    async fn update_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
        _rollback: bool,
    ) -> Result<()> {
        self.reconcile(ctx, cluster, nodegroups).await
    }

    async fn resize_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
        _node_count: i32,
        nodes_to_remove: &[String],
    ) -> Result<()> {
        let stack_id = stack_id_of(cluster)?;
        self.mark_for_removal(stack_id, nodes_to_remove).await?;
        let ngs = self.nodegroups_with(cluster, nodegroup).await?;
        self.reconcile(ctx, cluster, &ngs).await
    }

    async fn upgrade_cluster(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        template: &ClusterTemplate,
        _max_batch_size: Option<i32>,
        nodegroup: &NodeGroup,
    ) -> Result<ClusterChanges> {
        let stack_id = stack_id_of(cluster)?;
        let current_template = self.source()?.template(cluster).await?;
        let from = render::effective(cluster, &current_template, "kube_tag")
            .or_else(|| cluster.coe_version.clone())
            .unwrap_or_else(|| self.shared.cfg.default_kube_tag.clone());
        let to = magnum_core::model::label(&template.labels, "kube_tag")
            .unwrap_or_else(|| self.shared.cfg.default_kube_tag.clone());
        if !nodegroup.is_default && parse_version(&to) != parse_version(&from) {
            return Err(Error::NotSupported {
                operation:
                    "Upgrading one nodegroup to another Kubernetes version than the control plane's"
                        .into(),
            });
        }
        let live = self.live(stack_id).await?;
        if let Some(adopted) = live.as_ref().filter(|l| is_adopted(l)) {
            // What the Cluster runs is the version to upgrade from (the rows mcapi left
            // may not say).
            let running = adopted["spec"]["topology"]["version"]
                .as_str()
                .map_or(from, str::to_owned);
            check_upgrade(&running, &to)?;
            let image = adopted_image(&current_template, template)?;
            // The same checks as our own clusters' upgrade, on the cluster as it would be.
            let mut labels = cluster.labels.clone();
            labels.insert("kube_tag".into(), json!(to));
            let upgraded = Cluster {
                cluster_template_id: Some(template.uuid.clone()),
                labels: labels.clone(),
                ..cluster.clone()
            };
            let ngs = self.source()?.nodegroups(cluster).await?;
            self.validate(&upgraded, template, &ngs)?;
            self.upgrade_adopted(adopted.clone(), &to, image).await?;
            return Ok(ClusterChanges {
                cluster_template_id: Some(template.uuid.to_string()),
                labels: Some(labels),
                ..ClusterChanges::default()
            });
        }
        check_upgrade(&from, &to)?;
        let mut upgraded = cluster.clone();
        upgraded.cluster_template_id = Some(template.uuid.clone());
        upgraded.labels.insert("kube_tag".into(), json!(to));
        let mut ngs = self.source()?.nodegroups(cluster).await?;
        for ng in &mut ngs {
            if template.image_id.is_some() {
                ng.image_id = template.image_id.clone();
            }
        }
        self.validate(&upgraded, template, &ngs)?;
        self.apply_cluster(
            ctx,
            &upgraded,
            template,
            &ngs,
            Target {
                stack_id,
                live: live.as_ref(),
            },
            false,
        )
        .await?;
        Ok(ClusterChanges {
            cluster_template_id: Some(template.uuid.to_string()),
            labels: Some(upgraded.labels),
            ..ClusterChanges::default()
        })
    }

    /// Hands the cluster its newest credential (made by the API before the call): every
    /// Secret that carries one is rendered again and applied (the `-cloud-config` Secret CAPO
    /// reads, the workload's cloud-config and the add-ons' values); the caller deletes the
    /// older credentials only after this succeeded.
    async fn rotate_credential(&self, ctx: &RequestContext, cluster: &Cluster) -> Result<()> {
        let stack_id = stack_id_of(cluster)?;
        let live = self.live(stack_id).await?;
        if live.as_ref().is_some_and(is_adopted) {
            return Err(Error::NotSupported {
                operation: "Rotating the credential of a cluster made by magnum-cluster-api".into(),
            });
        }
        let source = self.source()?;
        let has_credential = source
            .cloud(cluster)
            .await?
            .is_some_and(|c| c.credential.is_some());
        if !has_credential {
            return Err(Error::NotSupported {
                operation: "Rotating the credential of a cluster without one (Magnum keeps clusters' credentials only with the Barbican certificate store)".into(),
            });
        }
        let template = source.template(cluster).await?;
        let ngs = source.nodegroups(cluster).await?;
        self.apply_cluster(
            ctx,
            cluster,
            &template,
            &ngs,
            Target {
                stack_id,
                live: live.as_ref(),
            },
            true,
        )
        .await
    }

    async fn delete_cluster(&self, _ctx: &RequestContext, cluster: &Cluster) -> Result<()> {
        self.delete_step(cluster).await.map(drop)
    }

    async fn create_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        check_nodegroup_labels(nodegroup)?;
        let ngs = self.nodegroups_with(cluster, nodegroup).await?;
        self.reconcile(ctx, cluster, &ngs).await
    }

    async fn update_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        // The same as a create: the whole topology with this nodegroup as it now is.
        self.create_nodegroup(ctx, cluster, nodegroup).await
    }

    async fn delete_nodegroup(
        &self,
        ctx: &RequestContext,
        cluster: &Cluster,
        nodegroup: &NodeGroup,
    ) -> Result<()> {
        let mut deleting = nodegroup.clone();
        deleting.status = Some(S::DeleteInProgress);
        let ngs = self.nodegroups_with(cluster, &deleting).await?;
        self.reconcile(ctx, cluster, &ngs).await?;
        // Its machines leave the group as CAPO deletes them; Nova lets it go before.
        if let (Some(stack_id), Ok(source)) = (
            cluster.stack_id.as_deref().filter(|s| !s.is_empty()),
            self.source(),
        ) && let Err(e) = server_groups::remove(
            source.as_ref(),
            cluster,
            stack_id,
            Some(nodegroup.name.as_str()),
        )
        .await
        {
            tracing::warn!(cluster = %cluster.uuid, nodegroup = %nodegroup.name, error = %e, "the nodegroup's server group is left in Nova");
        }
        Ok(())
    }

    fn probes_workload_health(&self) -> bool {
        true
    }

    /// From the management cluster (magnum-cluster-api's only source, §4.6): the control
    /// plane's availability and each Machine's node, keyed by node name (#263 keyed them by
    /// Machine), with the source named so a reader knows the workload API did not answer.
    async fn management_health(&self, cluster: &Cluster) -> Result<Option<HealthReport>> {
        let Some(stack_id) = cluster.stack_id.as_deref().filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let objects = self.cache().await?.snapshot(stack_id).await?;
        let Some(kcp) = objects.control_plane.as_ref() else {
            return Ok(None);
        };
        Ok(Some(health::from_management(kcp, &objects.machines)))
    }

    async fn scaled_node_counts(
        &self,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) -> Result<Vec<(String, i32)>> {
        let Some(stack_id) = cluster.stack_id.as_deref().filter(|s| !s.is_empty()) else {
            return Ok(Vec::new());
        };
        let objects = self.cache().await?.snapshot(stack_id).await?;
        Ok(status::scaled_counts(
            &objects.machine_deployments,
            nodegroups,
        ))
    }

    async fn poll_status(
        &self,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) -> Result<StatusReport> {
        if cluster.status == Some(S::DeleteInProgress)
            && let Some(held) = self.delete_step(cluster).await?
        {
            return Ok(StatusReport {
                status_reason: (cluster.status_reason.as_deref() != Some(held.as_str()))
                    .then_some(Some(held)),
                ..StatusReport::default()
            });
        }
        let mut report = self.snapshot_report(cluster, nodegroups).await?;
        if report.status == Some(S::DeleteComplete) {
            // The Cluster is gone: its Secrets and addons go now (they outlive it so CAPI
            // can finish with them).
            if !self
                .remove_objects(cluster, cluster.stack_id.as_deref())
                .await
            {
                report.status = None;
                report.status_reason = Some(Some(
                    "Waiting to remove the cluster's Secrets from the management cluster".into(),
                ));
            }
        }
        Ok(report)
    }
}

impl CapiDriver {
    /// The cluster's HelmChartProxies and HelmReleaseProxies; `None` when it has none (or
    /// CAAPH's kinds are not served). Not watched: one list each, only for a cluster in
    /// progress.
    async fn addon_objects(
        &self,
        cluster: &Cluster,
        stack_id: &str,
    ) -> Option<(Vec<Value>, Vec<Value>)> {
        if let Some(found) = self
            .cache()
            .await
            .ok()
            .and_then(|c| c.addons(cluster.uuid.as_str(), stack_id))
        {
            return (!found.0.is_empty()).then_some(found);
        }
        let mgmt = self.mgmt().await.ok()?;
        let proxies = mgmt
            .list(
                Kind::HelmChartProxy,
                &format!("{UUID_LABEL}={}", cluster.uuid),
            )
            .await
            .ok()?;
        if proxies.is_empty() {
            return None;
        }
        let releases = mgmt
            .list(
                Kind::HelmReleaseProxy,
                &format!("{CAPI_CLUSTER_LABEL}={stack_id}"),
            )
            .await
            .unwrap_or_default();
        Some((proxies, releases))
    }
}

/// The CAPI Cluster an operation renders: its name, and the object as the operation read it
/// (none before the create).
#[derive(Clone, Copy)]
struct Target<'a> {
    stack_id: &'a str,
    live: Option<&'a Value>,
}

/// Whether another driver (magnum-cluster-api) made the Cluster: then operations patch its
/// topology instead of rendering ours over it.
fn is_adopted(live: &Value) -> bool {
    class_of(live).is_some_and(|class| class != CLASS)
}

/// Removes a cluster's autoscaler, the Deployment last; absent objects are no error.
async fn remove_autoscaler(mgmt: &Management, stack_id: &str) -> Result<()> {
    let name = autoscaler::name(stack_id);
    for kind in autoscaler::KINDS {
        mgmt.delete(kind, &name).await?;
    }
    Ok(())
}

/// Applies one rendered object; a HelmChartProxy the management cluster has no kind for
/// says what is missing (CAAPH) instead of a bare 404, before the Cluster is created.
async fn apply_object(mgmt: &Management, obj: &serde_json::Value) -> Result<()> {
    match mgmt.apply(obj).await {
        Err(self::kube::KubeError::Refused { code: 404, .. })
            if Kind::of(obj) == Some(Kind::HelmChartProxy) =>
        {
            Err(Error::ServiceUnavailable {
                message: NO_CAAPH.into(),
            })
        }
        other => other.map_err(Error::from),
    }
}

/// Whether the management cluster serves HelmChartProxies (a list of the cluster's own).
async fn caaph_installed(mgmt: &Management, i: &Inputs<'_>) -> Result<bool> {
    match mgmt
        .list(
            Kind::HelmChartProxy,
            &format!("{UUID_LABEL}={}", i.cluster.uuid),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(self::kube::KubeError::Refused { code: 404, .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Why a cluster cannot get its add-ons when CAAPH is missing.
pub const NO_CAAPH: &str = "The management cluster has no HelmChartProxy kind: install the Cluster API add-on provider for Helm (CAAPH) there, or set [cluster_api] addons_helm_enabled = false and deliver the add-ons through addons_path.";

/// Deletes the HelmChartProxies of add-ons the cluster no longer wants (a label turned
/// off): CAAPH then uninstalls their releases.
async fn remove_unselected_addons(mgmt: &Management, i: &Inputs<'_>) -> Result<()> {
    let (wanted, unwanted) = addons::selected(i);
    let keep: Vec<String> = wanted.iter().map(|a| a.proxy_name(i.stack_id)).collect();
    for a in unwanted {
        let name = a.proxy_name(i.stack_id);
        // Both CNIs share a name: the wanted one stays.
        if keep.contains(&name) {
            continue;
        }
        // Gone already, or no CAAPH at all: both answer 404, which is success here.
        mgmt.delete(Kind::HelmChartProxy, &name).await?;
    }
    Ok(())
}

impl CapiDriver {
    /// One step of a delete, run by the delete and by every poll while it lasts: first the
    /// load balancers the cloud controller made (else the Cluster's network cannot go),
    /// then the CAPI Cluster (its Secrets go once it is gone, see `poll_status`). Returns
    /// what still holds the delete up.
    async fn delete_step(&self, cluster: &Cluster) -> Result<Option<String>> {
        let source = self.source()?;
        let lbs = source.load_balancers(cluster).await?;
        if !lbs.is_empty() {
            let mut held = Vec::new();
            for lb in &lbs {
                let state = if lb.provisioning_status == "PENDING_DELETE" {
                    "being deleted".to_owned()
                } else {
                    match source.delete_load_balancer(cluster, &lb.id).await {
                        Ok(()) => "deletion requested".to_owned(),
                        Err(e) => {
                            format!("{} and cannot be deleted yet: {e}", lb.provisioning_status)
                        }
                    }
                };
                held.push(format!("{} ({}) {state}", lb.name, lb.id));
            }
            return Ok(Some(format!(
                "Waiting for the load balancers the cluster's cloud controller made: {}",
                held.join("; ")
            )));
        }
        let mgmt = self.mgmt().await?;
        // Also finds what a create cut short left before its name was saved.
        let selector = format!("{UUID_LABEL}={}", cluster.uuid);
        let mut names: Vec<String> = mgmt
            .list(Kind::Cluster, &selector)
            .await?
            .iter()
            .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        if let Some(s) = cluster.stack_id.as_deref().filter(|s| !s.is_empty())
            && !names.iter().any(|n| n == s)
        {
            names.push(s.to_owned());
        }
        for name in names {
            mgmt.delete(Kind::Cluster, &name).await?;
        }
        Ok(None)
    }

    /// Removes every object of the cluster but the CAPI Cluster (Secrets, addons, autoscaler, any
    /// Cluster a failed create left). Returns whether all went.
    async fn remove_objects(&self, cluster: &Cluster, stack_id: Option<&str>) -> bool {
        let Ok(mgmt) = self.mgmt().await else {
            return false;
        };
        let mut ok = true;
        let selector = format!("{UUID_LABEL}={}", cluster.uuid);
        for kind in [Kind::HelmChartProxy, Kind::ClusterResourceSet, Kind::Secret] {
            match mgmt.list(kind, &selector).await {
                // No CAAPH, so no HelmChartProxy to remove.
                Err(self::kube::KubeError::Refused { code: 404, .. })
                    if kind == Kind::HelmChartProxy => {}
                Ok(items) => {
                    for item in items {
                        let name = item["metadata"]["name"].as_str().unwrap_or_default();
                        if let Err(e) = mgmt.delete(kind, name).await {
                            tracing::warn!(cluster = %cluster.uuid, error = %e, "cleanup");
                            ok = false;
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(cluster = %cluster.uuid, error = %e, "cleanup");
                    ok = false;
                }
            }
        }
        if let Some(s) = stack_id
            && remove_autoscaler(mgmt, s).await.is_err()
        {
            ok = false;
        }
        if let (Some(s), Ok(source)) = (stack_id, self.source())
            && let Err(e) = server_groups::remove(source.as_ref(), cluster, s, None).await
        {
            tracing::warn!(cluster = %cluster.uuid, error = %e, "cleanup: server groups");
            ok = false;
        }
        if let Some(s) = stack_id {
            for name in render::secret_names(s) {
                if mgmt.delete(Kind::Secret, &name).await.is_err() {
                    ok = false;
                }
            }
            // What magnum-cluster-api made beside its clusters, by its names: the addons
            // ClusterResourceSet and Secret named by the uuid, the cloud provider's by the
            // CAPI name.
            let uuid = cluster.uuid.to_string();
            for name in [uuid.clone(), format!("{s}-cloud-provider")] {
                for kind in [Kind::ClusterResourceSet, Kind::Secret] {
                    if mgmt.delete(kind, &name).await.is_err() {
                        ok = false;
                    }
                }
            }
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn upgrades_go_one_minor_at_a_time_and_never_down() {
        assert_eq!(parse_version("v1.33.1"), Some((1, 33, 1)));
        assert_eq!(parse_version("1.34"), Some((1, 34, 0)));
        assert_eq!(parse_version("v1.30.2-rc.1"), Some((1, 30, 2)));
        assert_eq!(parse_version("latest"), None);
        assert!(check_upgrade("v1.33.1", "v1.34.2").is_ok());
        assert!(check_upgrade("v1.33.1", "v1.33.4").is_ok());
        let skip = check_upgrade("v1.33.1", "v1.35.0").unwrap_err().to_string();
        assert!(
            skip.starts_with("Kubernetes can be upgraded only one minor version at a time (from v1.33.1 to v1.34.x first"),
            "{skip}"
        );
        let down = check_upgrade("v1.33.1", "v1.32.9").unwrap_err().to_string();
        assert!(
            down.starts_with("Kubernetes cannot be downgraded"),
            "{down}"
        );
        assert!(check_upgrade("v1.33.1", "v2.0.0").is_err());
    }

    #[test]
    fn an_adopted_clusters_new_image_is_a_glance_uuid_or_none() {
        let with = |image: Option<&str>| ClusterTemplate {
            image_id: image.map(str::to_owned),
            ..render::tests::template()
        };
        let current = with(Some("ubuntu-2204-kube"));
        assert_eq!(
            adopted_image(&current, &with(Some("ubuntu-2204-kube"))).unwrap(),
            None
        );
        assert_eq!(adopted_image(&current, &with(None)).unwrap(), None);
        let uuid = "3a5b1c9e-0c1f-4d6e-9a59-6f1f6b7e2d11";
        assert_eq!(
            adopted_image(&current, &with(Some(uuid))).unwrap(),
            Some(uuid)
        );
        let named = adopted_image(&current, &with(Some("ubuntu-2404-kube")))
            .unwrap_err()
            .to_string();
        assert!(
            named.contains("Glance UUID") && named.contains("ubuntu-2404-kube"),
            "{named}"
        );
    }

    #[test]
    fn stack_ids_look_like_magnum_cluster_apis() {
        let id = random_stack_id();
        assert!(id.starts_with("kube-") && id.len() == 10, "{id}");
        assert!(
            id[5..]
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
    }

    #[test]
    fn bad_labels_are_refused_as_invalid_parameters_naming_label_and_value() {
        use magnum_core::model::NodegroupRole as R;
        use render::tests::{cluster, nodegroup, template};
        let (c, t) = (cluster(), template());
        let ngs = [
            nodegroup("default-master", R::Master, 1),
            nodegroup("default-worker", R::Worker, 1),
        ];
        assert!(check_labels(&c, &t, &ngs).is_ok());
        // The template's value counts when the cluster has none.
        let mut bad_t = template();
        bad_t.labels = serde_json::from_value(json!({"audit_log_enabled": "sometimes"})).unwrap();
        let e = check_labels(&c, &bad_t, &ngs).unwrap_err();
        assert!(matches!(e, Error::InvalidParameterValue { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "Invalid value for label audit_log_enabled: 'sometimes' (a boolean: true/false, yes/no, on/off, y/n, t/f or 1/0)."
        );
        // A nodegroup's own label.
        let mut ng = nodegroup("gpu", R::Worker, 1);
        ng.labels = serde_json::from_value(json!({"boot_volume_size": "big"})).unwrap();
        let e = check_labels(&c, &t, &[ng]).unwrap_err().to_string();
        assert!(e.contains("boot_volume_size") && e.contains("'big'"), "{e}");
        // Across labels, and from the labels alone (the API's check).
        let mut ng = nodegroup("w", R::Worker, 1);
        ng.labels = serde_json::from_value(
            json!({"auto_scaling_enabled": "true", "min_node_count": "3", "max_node_count": "2"}),
        )
        .unwrap();
        assert!(check_labels(&c, &t, &[ng.clone()]).is_err());
        let e = check_label_maps(&Labels::new(), &ng.labels)
            .unwrap_err()
            .to_string();
        assert!(e.contains("below min_node_count 3"), "{e}");
        let tag = serde_json::from_value(json!({"kube_tag": "latest"})).unwrap();
        let e = check_label_maps(&tag, &Labels::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("(got latest)"), "{e}");
        let cl = serde_json::from_value(
            json!({"octavia_provider": "ovn", "octavia_lb_algorithm": "ROUND_ROBIN"}),
        )
        .unwrap();
        let e = check_label_maps(&cl, &Labels::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("ROUND_ROBIN"), "{e}");
        // Unknown labels are accepted.
        let cl = serde_json::from_value(json!({"no_such_label": "x"})).unwrap();
        assert!(check_label_maps(&cl, &Labels::new()).is_ok());
        assert!(driver_names().contains(&"k8s_capi"));
        let mut ng = nodegroup("new", R::Worker, 1);
        ng.labels = serde_json::from_value(json!({"different_failure_domain": "maybe"})).unwrap();
        let e = check_nodegroup_labels(&ng).unwrap_err().to_string();
        assert!(
            e.contains("different_failure_domain") && e.contains("'maybe'"),
            "{e}"
        );
    }
}
