//! The management-cluster client: one `kube::Client` per process (it pools its connections,
//! so file descriptors stay flat; magnum-cluster-api built a client per call, #822), the
//! kinds the driver reads and writes, and the mapping of Kubernetes errors to Magnum's.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use magnum_conf::config::ClusterApiSection;
use magnum_core::Error;
use serde_json::Value;

/// The field manager of every write: one owner for everything the driver renders, so an
/// apply that leaves a field out removes it.
pub const FIELD_MANAGER: &str = "magnum-rs";

/// A kind the driver uses, by what its apply body says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Cluster,
    ClusterClass,
    KubeadmControlPlane,
    KubeadmControlPlaneTemplate,
    KubeadmConfigTemplate,
    MachineDeployment,
    Machine,
    OpenStackCluster,
    OpenStackClusterTemplate,
    OpenStackMachineTemplate,
    ClusterResourceSet,
    /// CAAPH's: one Helm chart installed into the Clusters it selects.
    HelmChartProxy,
    /// What CAAPH made of a HelmChartProxy for one Cluster: the Helm release's state.
    HelmReleaseProxy,
    Secret,
    /// The cluster autoscaler's, in the management cluster.
    ServiceAccount,
    Role,
    RoleBinding,
    Deployment,
}

impl Kind {
    pub const ALL: [Kind; 18] = [
        Kind::Cluster,
        Kind::ClusterClass,
        Kind::KubeadmControlPlane,
        Kind::KubeadmControlPlaneTemplate,
        Kind::KubeadmConfigTemplate,
        Kind::MachineDeployment,
        Kind::Machine,
        Kind::OpenStackCluster,
        Kind::OpenStackClusterTemplate,
        Kind::OpenStackMachineTemplate,
        Kind::ClusterResourceSet,
        Kind::HelmChartProxy,
        Kind::HelmReleaseProxy,
        Kind::Secret,
        Kind::ServiceAccount,
        Kind::Role,
        Kind::RoleBinding,
        Kind::Deployment,
    ];

    /// (group, version, kind, plural). Core CAPI at v1beta2 (v1beta1 stops being served in
    /// 2027), CAPO at its only served v1beta1.
    fn parts(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Kind::Cluster => ("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
            Kind::ClusterClass => (
                "cluster.x-k8s.io",
                "v1beta2",
                "ClusterClass",
                "clusterclasses",
            ),
            Kind::KubeadmControlPlane => (
                "controlplane.cluster.x-k8s.io",
                "v1beta2",
                "KubeadmControlPlane",
                "kubeadmcontrolplanes",
            ),
            Kind::KubeadmControlPlaneTemplate => (
                "controlplane.cluster.x-k8s.io",
                "v1beta2",
                "KubeadmControlPlaneTemplate",
                "kubeadmcontrolplanetemplates",
            ),
            Kind::KubeadmConfigTemplate => (
                "bootstrap.cluster.x-k8s.io",
                "v1beta2",
                "KubeadmConfigTemplate",
                "kubeadmconfigtemplates",
            ),
            Kind::MachineDeployment => (
                "cluster.x-k8s.io",
                "v1beta2",
                "MachineDeployment",
                "machinedeployments",
            ),
            Kind::Machine => ("cluster.x-k8s.io", "v1beta2", "Machine", "machines"),
            Kind::OpenStackCluster => (
                "infrastructure.cluster.x-k8s.io",
                "v1beta1",
                "OpenStackCluster",
                "openstackclusters",
            ),
            Kind::OpenStackClusterTemplate => (
                "infrastructure.cluster.x-k8s.io",
                "v1beta1",
                "OpenStackClusterTemplate",
                "openstackclustertemplates",
            ),
            Kind::OpenStackMachineTemplate => (
                "infrastructure.cluster.x-k8s.io",
                "v1beta1",
                "OpenStackMachineTemplate",
                "openstackmachinetemplates",
            ),
            Kind::ClusterResourceSet => (
                "addons.cluster.x-k8s.io",
                "v1beta2",
                "ClusterResourceSet",
                "clusterresourcesets",
            ),
            Kind::HelmChartProxy => (
                "addons.cluster.x-k8s.io",
                "v1alpha1",
                "HelmChartProxy",
                "helmchartproxies",
            ),
            Kind::HelmReleaseProxy => (
                "addons.cluster.x-k8s.io",
                "v1alpha1",
                "HelmReleaseProxy",
                "helmreleaseproxies",
            ),
            Kind::Secret => ("", "v1", "Secret", "secrets"),
            Kind::ServiceAccount => ("", "v1", "ServiceAccount", "serviceaccounts"),
            Kind::Role => ("rbac.authorization.k8s.io", "v1", "Role", "roles"),
            Kind::RoleBinding => (
                "rbac.authorization.k8s.io",
                "v1",
                "RoleBinding",
                "rolebindings",
            ),
            Kind::Deployment => ("apps", "v1", "Deployment", "deployments"),
        }
    }

    pub fn api_version(self) -> String {
        let (group, version, _, _) = self.parts();
        if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }
    }

    pub fn name(self) -> &'static str {
        self.parts().2
    }

    pub fn resource(self) -> ApiResource {
        let (group, version, kind, plural) = self.parts();
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
    }

    /// The kind an apply body names (by `kind` alone: each is used at one version).
    pub fn of(obj: &Value) -> Option<Kind> {
        let kind = obj["kind"].as_str()?;
        Kind::ALL.into_iter().find(|k| k.name() == kind)
    }
}

/// Why a management-cluster call failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The API server answered with a Status.
    #[error("the management cluster refused {what}: {message} ({reason}, {code})")]
    Refused {
        what: String,
        code: u16,
        reason: String,
        message: String,
    },
    /// No answer: connection, TLS or timeout.
    #[error("the management cluster cannot be reached ({what}): {detail}")]
    Unreachable { what: String, detail: String },
    #[error("the management cluster's configuration is unusable: {0}")]
    Config(String),
}

impl KubeError {
    fn from_kube(what: String, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => KubeError::Refused {
                what,
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
            },
            other => KubeError::Unreachable {
                what,
                detail: other.to_string(),
            },
        }
    }

    pub fn is_conflict(&self) -> bool {
        matches!(self, KubeError::Refused { code: 409, .. })
    }
}

impl From<KubeError> for Error {
    fn from(e: KubeError) -> Self {
        match e {
            KubeError::Unreachable { .. } => Error::ServiceUnavailable {
                message: e.to_string(),
            },
            KubeError::Refused { code: 409, .. } => Error::Conflict {
                message: e.to_string(),
            },
            KubeError::Refused {
                code: 400 | 422, ..
            } => Error::InvalidParameterValue {
                message: e.to_string(),
            },
            other => Error::Internal(other.to_string()),
        }
    }
}

/// The management cluster: a client and the namespace of every object.
#[derive(Clone)]
pub struct Management {
    client: kube::Client,
    namespace: String,
}

impl Management {
    /// From `[cluster_api]`: its kubeconfig (and context), else the in-cluster service
    /// account, else `$KUBECONFIG`/`~/.kube/config`.
    pub async fn connect(cfg: &ClusterApiSection) -> Result<Self, KubeError> {
        let options = kube::config::KubeConfigOptions {
            context: (!cfg.context.is_empty()).then(|| cfg.context.clone()),
            ..Default::default()
        };
        let mut config = if cfg.kubeconfig.is_empty() {
            kube::Config::infer()
                .await
                .map_err(|e| KubeError::Config(e.to_string()))?
        } else {
            let file = kube::config::Kubeconfig::read_from(&cfg.kubeconfig)
                .map_err(|e| KubeError::Config(format!("{}: {e}", cfg.kubeconfig)))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| KubeError::Config(format!("{}: {e}", cfg.kubeconfig)))?
        };
        let timeout = Duration::from_secs(u64::from(cfg.request_timeout));
        config.connect_timeout = Some(timeout.min(Duration::from_secs(10)));
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        let client =
            kube::Client::try_from(config).map_err(|e| KubeError::Config(e.to_string()))?;
        Ok(Self {
            client,
            namespace: cfg.namespace.clone(),
        })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn api(&self, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &kind.resource())
    }

    /// Server-side apply of a rendered object, forced: the driver owns what it renders.
    pub async fn apply(&self, obj: &Value) -> Result<(), KubeError> {
        let kind = Kind::of(obj).ok_or_else(|| {
            KubeError::Config(format!(
                "rendered an object of unknown kind {}",
                obj["kind"]
            ))
        })?;
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api(kind)
            .patch(name, &params, &Patch::Apply(obj))
            .await
            .map(drop)
            .map_err(|e| KubeError::from_kube(format!("{} {name}", kind.name()), e))
    }

    /// A merge patch of `obj` at the API version it was read at (a v1beta1 object that
    /// magnum-cluster-api wrote is patched as v1beta1; a real server converts either way).
    pub async fn merge_stored(
        &self,
        kind: Kind,
        obj: &Value,
        patch: &Value,
    ) -> Result<(), KubeError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let (group, version, kind_name, plural) = kind.parts();
        let stored = obj["apiVersion"].as_str().unwrap_or_default();
        let version = stored
            .strip_prefix(&format!("{group}/"))
            .filter(|v| !v.is_empty())
            .unwrap_or(version);
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind_name),
            plural,
        );
        Api::<DynamicObject>::namespaced_with(self.client.clone(), &self.namespace, &resource)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|e| KubeError::from_kube(format!("{kind_name} {name}"), e))
    }

    pub async fn get(&self, kind: Kind, name: &str) -> Result<Option<Value>, KubeError> {
        let got = self
            .api(kind)
            .get_opt(name)
            .await
            .map_err(|e| KubeError::from_kube(format!("{} {name}", kind.name()), e))?;
        Ok(got.map(to_value))
    }

    pub async fn list(&self, kind: Kind, selector: &str) -> Result<Vec<Value>, KubeError> {
        let list = self
            .api(kind)
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| KubeError::from_kube(format!("{} list {selector}", kind.name()), e))?;
        Ok(list.items.into_iter().map(to_value).collect())
    }

    /// Deletes in the background (owned objects go with it); already gone is fine.
    pub async fn delete(&self, kind: Kind, name: &str) -> Result<(), KubeError> {
        match self
            .api(kind)
            .delete(name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(KubeError::from_kube(format!("{} {name}", kind.name()), e)),
        }
    }
}

/// A DynamicObject as the JSON the status engine reads (metadata, and everything else).
pub fn to_value(o: DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}
