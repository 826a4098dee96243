//! Certificates and credentials of a cluster: the conductor holds the CAs and does the work;
//! the rules the API can apply before asking it live here.

use magnum_core::{Error, RequestContext, Result};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_rpc::{ClusterRef, GetCaCertificate, SignCertificate};

use crate::{Services, invalid, invalid_attribute};

pub struct Certificates<'a> {
    pub(crate) s: &'a Services,
}

fn cluster_ref(c: &Cluster) -> ClusterRef {
    ClusterRef {
        cluster_uuid: c.ident(),
    }
}

impl Certificates<'_> {
    /// The PEM of one of the cluster's CAs (`ca_cert_type`: kubernetes, etcd, front-proxy).
    pub async fn ca(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        ca_cert_type: Option<String>,
    ) -> Result<String> {
        let message = GetCaCertificate {
            cluster_uuid: c.ident(),
            ca_cert_type,
        };
        self.s.conductor.get_ca_certificate(ctx, message).await
    }

    /// Sign a CSR with one of the cluster's CAs; returns the certificate PEM.
    pub async fn sign(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        csr: Option<String>,
        ca_cert_type: Option<String>,
    ) -> Result<String> {
        let Some(csr) = csr else {
            // Upstream's conductor failed on a missing CSR; say so before asking it.
            return Err(invalid_attribute(
                "csr",
                &serde_json::Value::Null,
                "Mandatory field missing.",
            ));
        };
        let message = SignCertificate {
            cluster_uuid: c.ident(),
            csr,
            ca_cert_type,
        };
        self.s.conductor.sign_certificate(ctx, message).await
    }

    /// Replace the cluster's CAs; `template` is the cluster's own.
    pub async fn rotate_ca(
        &self,
        ctx: &RequestContext,
        c: &Cluster,
        template: &ClusterTemplate,
    ) -> Result<()> {
        if template.tls_disabled == Some(true) {
            return Err(invalid(
                "Rotating the CA certificate on a non-TLS cluster is not supported".into(),
            ));
        }
        self.s
            .conductor
            .rotate_ca_certificate(ctx, cluster_ref(c))
            .await
    }

    /// Rotate the credentials the cluster's driver holds for it. With kept credentials (the
    /// Barbican store), a new one is made first as the caller, while the caller's token is
    /// at hand (no token travels to the conductor); the conductor hands it to the cluster and
    /// deletes the older ones once the cluster uses it. Refused by the driver, the new one is
    /// taken back; cut short otherwise (the conductor or the management cluster away), it is
    /// kept: the cluster works with the old or the new one, both valid, and a retry finishes.
    pub async fn rotate_credential(&self, ctx: &RequestContext, c: &Cluster) -> Result<()> {
        let uuid = c.uuid.as_deref().unwrap_or_default();
        let issued = match &self.s.credentials {
            Some(creds) => {
                // An application credential acts in the project its maker's token is scoped
                // to: only the cluster's own project will do.
                if ctx.project_id.is_some() && ctx.project_id != c.project_id {
                    return Err(Error::InvalidParameterValue {
                        message: "A cluster's credential is rotated with a token scoped to the cluster's project.".into(),
                    });
                }
                creds.rotate(ctx, uuid).await?.map(|id| (creds, id))
            }
            None => None,
        };
        let done = self
            .s
            .conductor
            .credential_rotate(ctx, cluster_ref(c))
            .await;
        if let (Err(e), Some((creds, id))) = (&done, issued)
            && matches!(
                e,
                Error::InvalidParameterValue { .. } | Error::NotSupported { .. }
            )
        {
            creds
                .withdraw(c.user_id.as_deref().unwrap_or_default(), uuid, &id)
                .await;
        }
        done
    }
}
