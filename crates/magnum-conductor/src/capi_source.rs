//! What the Cluster API driver asks the conductor for: the rows it renders from, the
//! cluster's CAs (decrypted, for the management cluster's CA Secrets) and the cloud
//! credentials its OpenStack components use. Driver reads go through here, never to storage.

use std::sync::Arc;

use async_trait::async_trait;
use magnum_core::model::{Cluster, ClusterTemplate, Nodegroup};
use magnum_core::{Error, RequestContext, Result};
use magnum_openstack::catalog::ServiceType;

use crate::state::Inner;
use magnum_certs::{CaType, ClusterCertRefs};
use magnum_driver_capi::render::{Cas, CloudConfig, FlavorSize, KeyPair, VolumeTypes};
use magnum_driver_capi::{LoadBalancer, Source};
use magnum_openstack::resources;

/// Nova's answer to a server group call: a refusal (a quota, a policy it does not know)
/// names Nova and what it said.
fn nova(e: magnum_openstack::OsError) -> Error {
    match e.status() {
        Some(_) => Error::ServiceUnavailable {
            message: format!("Nova refused the cluster's server group: {e}"),
        },
        None => unavailable(e),
    }
}

fn unavailable(e: magnum_openstack::OsError) -> Error {
    Error::ServiceUnavailable {
        message: format!("OpenStack for the cluster's cloud credentials: {e}"),
    }
}

/// Whether a load balancer's description is the cloud controller's for this cluster:
/// "Kubernetes external service <namespace>/<name> from cluster <cluster-name>", where the
/// cluster name is the CAPI one or the Magnum uuid (as the addon manifests configure it).
fn made_for(description: &str, stack_id: &str, uuid: &str) -> bool {
    description.starts_with("Kubernetes ")
        && [stack_id, uuid]
            .iter()
            .any(|n| !n.is_empty() && description.ends_with(&format!(" from cluster {n}")))
}

pub(crate) struct ConductorSource {
    pub(crate) inner: Arc<Inner>,
    pub(crate) capi_client: magnum_conf::config::CapiClientSection,
    /// The service user's OpenStack (Keystone's catalogue, Octavia), when configured.
    pub(crate) openstack: Option<Arc<magnum_openstack::OpenStack>>,
}

impl ConductorSource {
    /// A session acting as the cluster's own application credential (scoped to its
    /// project); `None` without a cloud or a kept credential.
    async fn cluster_session(
        &self,
        cluster: &Cluster,
    ) -> Result<Option<magnum_openstack::session::Session>> {
        let (Some(os), Some(kept)) = (self.openstack.as_ref(), self.inner.credentials.get()) else {
            return Ok(None);
        };
        let Some(cred) = magnum_openstack::credentials::fetch(kept, cluster.uuid.as_str())
            .await
            .map_err(unavailable)?
        else {
            return Ok(None);
        };
        let svc = os.service_session().await.map_err(unavailable)?;
        let auth_url = svc.endpoint(ServiceType::Identity).map_err(unavailable)?;
        match os
            .credential_session(&auth_url, &cred.id, &cred.secret)
            .await
        {
            Ok(s) => Ok(Some(s)),
            // Its owner deleted it, or left: the cluster's server groups cannot be reached
            // with it, and must not hold up a delete forever.
            Err(e @ magnum_openstack::OsError::Credentials(_)) => {
                tracing::warn!(cluster = %cluster.uuid, "Keystone refused the cluster's application credential; its server groups are left as they are: {e}");
                Ok(None)
            }
            Err(e) => Err(unavailable(e)),
        }
    }
}

fn refs(c: &Cluster) -> ClusterCertRefs {
    ClusterCertRefs {
        ca_cert_ref: c.ca_cert_ref.clone(),
        etcd_ca_cert_ref: c.etcd_ca_cert_ref.clone(),
        front_proxy_ca_cert_ref: c.front_proxy_ca_cert_ref.clone(),
        magnum_cert_ref: c.magnum_cert_ref.clone(),
    }
}

fn pair(p: magnum_certs::x509::KeyPairPem) -> KeyPair {
    KeyPair {
        certificate: p.certificate,
        private_key: p.private_key,
    }
}

#[async_trait]
impl Source for ConductorSource {
    async fn template(&self, cluster: &Cluster) -> Result<ClusterTemplate> {
        let id = cluster
            .cluster_template_id
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let t = self
            .inner
            .db
            .cluster_templates()
            .for_uuids(std::slice::from_ref(&id))
            .await?
            .pop()
            .ok_or(Error::ClusterTemplateNotFound { template: id })?;
        Ok((&t).into())
    }

    async fn nodegroups(&self, cluster: &Cluster) -> Result<Vec<Nodegroup>> {
        let ngs = self
            .inner
            .db
            .nodegroups()
            .for_clusters(&[cluster.uuid.to_string()])
            .await?;
        Ok(ngs.iter().map(Into::into).collect())
    }

    async fn cas(&self, _ctx: &RequestContext, cluster: &Cluster) -> Result<Cas> {
        let ctx = RequestContext::for_project(
            cluster.project_id.as_deref().unwrap_or_default(),
            cluster.user_id.as_deref().unwrap_or_default(),
        );
        let refs = refs(cluster);
        let pki = &self.inner.pki;
        let admin = pair(pki.admin_client(&ctx, &refs).await?);
        Ok(Cas {
            kubernetes: pair(pki.ca_pair(&ctx, &refs, CaType::Kubernetes).await?),
            etcd: pair(pki.ca_pair(&ctx, &refs, CaType::Etcd).await?),
            front_proxy: pair(pki.ca_pair(&ctx, &refs, CaType::FrontProxy).await?),
            service_account: admin,
        })
    }

    async fn load_balancers(&self, cluster: &Cluster) -> Result<Vec<LoadBalancer>> {
        let Some(os) = self.openstack.as_ref() else {
            return Ok(Vec::new());
        };
        let svc = os.service_session().await.map_err(unavailable)?;
        if !resources::octavia_enabled(&svc) {
            return Ok(Vec::new());
        }
        let project = cluster.project_id.as_deref().unwrap_or_default();
        let all = resources::load_balancers(&svc, project)
            .await
            .map_err(unavailable)?;
        let stack = cluster.stack_id.clone().unwrap_or_default();
        let ours = |d: &str| made_for(d, &stack, cluster.uuid.as_str());
        Ok(all
            .into_iter()
            .filter(|lb| ours(&lb.description))
            .map(|lb| LoadBalancer {
                id: lb.id,
                name: lb.name,
                provisioning_status: lb.provisioning_status,
            })
            .collect())
    }

    async fn delete_load_balancer(&self, _cluster: &Cluster, id: &str) -> Result<()> {
        let Some(os) = self.openstack.as_ref() else {
            return Ok(());
        };
        let svc = os.service_session().await.map_err(unavailable)?;
        resources::delete_load_balancer(&svc, id)
            .await
            .map_err(|e| match e.status() {
                Some(409) => Error::Conflict {
                    message: e.to_string(),
                },
                _ => unavailable(e),
            })
    }

    async fn flavors(&self) -> Result<Vec<FlavorSize>> {
        let Some(os) = self.openstack.as_ref() else {
            return Ok(Vec::new());
        };
        let svc = os.service_session().await.map_err(unavailable)?;
        let all = resources::flavors(&svc).await.map_err(unavailable)?;
        Ok(all
            .into_iter()
            .map(|f| FlavorSize {
                id: f.id,
                name: f.name,
                vcpus: f.vcpus,
                ram_mib: f.ram,
                disk_gb: f.disk,
            })
            .collect())
    }

    async fn volume_types(&self) -> Result<VolumeTypes> {
        let Some(os) = self.openstack.as_ref() else {
            return Ok(VolumeTypes::default());
        };
        let svc = os.service_session().await.map_err(unavailable)?;
        if !svc.has_service(ServiceType::BlockStorage) {
            return Ok(VolumeTypes::default());
        }
        Ok(VolumeTypes {
            names: resources::volume_types(&svc).await.map_err(unavailable)?,
            default: resources::default_volume_type(&svc)
                .await
                .map_err(unavailable)?,
        })
    }

    async fn ensure_server_groups(
        &self,
        cluster: &Cluster,
        wanted: &[(String, String)],
    ) -> Result<Option<Vec<String>>> {
        let Some(s) = self.cluster_session(cluster).await? else {
            return Ok(None);
        };
        let existing = resources::server_groups(&s).await.map_err(nova)?;
        let mut ids = Vec::with_capacity(wanted.len());
        for (name, policy) in wanted {
            let id = match existing.iter().find(|g| &g.name == name) {
                Some(g) => g.id.clone(),
                None => {
                    let g = resources::create_server_group(&s, name, policy)
                        .await
                        .map_err(nova)?;
                    tracing::info!(cluster = %cluster.uuid, group = %g.id, %name, %policy, "server group made");
                    g.id
                }
            };
            ids.push(id);
        }
        Ok(Some(ids))
    }

    async fn delete_server_groups(
        &self,
        cluster: &Cluster,
        ours: &(dyn for<'n> Fn(&'n str) -> bool + Sync),
    ) -> Result<()> {
        let Some(s) = self.cluster_session(cluster).await? else {
            return Ok(());
        };
        for g in resources::server_groups(&s).await.map_err(nova)? {
            if ours(&g.name) {
                resources::delete_server_group(&s, &g.id)
                    .await
                    .map_err(nova)?;
            }
        }
        Ok(())
    }

    async fn share_types(&self, cluster: &Cluster) -> Result<Vec<String>> {
        let Some(s) = self.cluster_session(cluster).await? else {
            return Ok(Vec::new());
        };
        if !s.has_service(ServiceType::SharedFileSystem) {
            return Ok(Vec::new());
        }
        resources::share_types(&s).await.map_err(unavailable)
    }

    async fn cloud(&self, cluster: &Cluster) -> Result<Option<CloudConfig>> {
        let Some(os) = self.openstack.as_ref() else {
            return Ok(None);
        };
        let svc = os.service_session().await.map_err(unavailable)?;
        let auth_url = svc.endpoint(ServiceType::Identity).map_err(unavailable)?;
        // Clusters' credentials are kept in Barbican: none without it.
        let credential = match self.inner.credentials.get() {
            Some(kept) => magnum_openstack::credentials::fetch(kept, cluster.uuid.as_str())
                .await
                .map_err(unavailable)?
                .map(|c| (c.id, c.secret)),
            None => None,
        };
        let ca_bundle = match self
            .capi_client
            .ca_file
            .as_deref()
            .filter(|f| !f.is_empty())
        {
            Some(f) => Some(
                tokio::fs::read_to_string(f)
                    .await
                    .map_err(|e| Error::Internal(format!("[capi_client] ca_file {f}: {e}")))?,
            ),
            None => None,
        };
        let interface = self
            .capi_client
            .endpoint_type
            .trim_end_matches("URL")
            .to_owned();
        Ok(Some(CloudConfig {
            auth_url,
            region: None,
            interface,
            verify: !self.capi_client.insecure,
            ca_bundle,
            credential,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::made_for;

    #[test]
    fn only_the_cloud_controllers_balancers_of_this_cluster_are_taken() {
        let d = "Kubernetes external service default/web from cluster kube-ab12c";
        assert!(made_for(d, "kube-ab12c", "u-1"));
        assert!(made_for(
            "Kubernetes external service a/b from cluster u-1",
            "kube-ab12c",
            "u-1"
        ));
        assert!(
            !made_for(d, "kube-ab12", "u-1"),
            "a name that is a prefix of another"
        );
        assert!(!made_for(
            "my own balancer from cluster kube-ab12c",
            "kube-ab12c",
            "u-1"
        ));
        assert!(!made_for(d, "", ""));
    }
}
