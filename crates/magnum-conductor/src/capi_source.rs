//! What the Cluster API driver asks the conductor for: the rows it renders from, the
//! cluster's CAs (decrypted, for the management cluster's CA Secrets) and the cloud
//! credentials its OpenStack components use. Driver reads go through here, never to storage.

use std::sync::Arc;

use async_trait::async_trait;
use magnum_core::model::{Cluster, ClusterTemplate, Nodegroup};
use magnum_core::{Error, RequestContext, Result};
use magnum_openstack::catalog::ServiceType;

use crate::certs::{CaType, ClusterCertRefs};
use crate::driver::capi::Source;
use crate::driver::capi::render::{Cas, CloudConfig, KeyPair};
use crate::state::Inner;

fn unavailable(e: magnum_openstack::OsError) -> Error {
    Error::ServiceUnavailable {
        message: format!("OpenStack for the cluster's cloud credentials: {e}"),
    }
}

pub(crate) struct ConductorSource {
    pub(crate) inner: Arc<Inner>,
    pub(crate) capi_client: magnum_core::config::CapiClientSection,
}

fn refs(c: &Cluster) -> ClusterCertRefs {
    ClusterCertRefs {
        ca_cert_ref: c.ca_cert_ref.clone(),
        etcd_ca_cert_ref: c.etcd_ca_cert_ref.clone(),
        front_proxy_ca_cert_ref: c.front_proxy_ca_cert_ref.clone(),
        magnum_cert_ref: c.magnum_cert_ref.clone(),
    }
}

fn pair(p: crate::x509::KeyPairPem) -> KeyPair {
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

    async fn cloud(&self, cluster: &Cluster) -> Result<Option<CloudConfig>> {
        let Some(os) = self.inner.credentials.get() else {
            return Ok(None);
        };
        let svc = os.service_session().await.map_err(unavailable)?;
        let auth_url = svc.endpoint(ServiceType::Identity).map_err(unavailable)?;
        let credential = magnum_openstack::credentials::fetch(os, cluster.uuid.as_str())
            .await
            .map_err(unavailable)?
            .map(|c| (c.id, c.secret));
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
