//! Certificate signing, CA retrieval and rotation, credential rotation (conductor.md §4.9,
//! §4.10; certificates.md §3–4).

use magnum_core::lifecycle::ClusterOp;
use magnum_core::status::ClusterStatus as S;
use magnum_core::{Error, RequestContext, Result};
use magnum_rpc::{GetCaCertificate, SignCertificate};

use super::{cert_ctx, fail, save_cluster, status};
use crate::notify::{Action, Outcome};
use crate::state::Inner;
use magnum_certs::{CaType, ClusterCertRefs, ClusterPki};

/// The CA a request names, and the cluster's certificate references and store context.
async fn cluster_ca(
    inner: &Inner,
    ctx: &RequestContext,
    cluster_uuid: &str,
    ca_cert_type: Option<&str>,
) -> Result<(CaType, ClusterCertRefs, RequestContext)> {
    let ca = CaType::parse(ca_cert_type)?;
    let cluster = inner.db.clusters().get_by_uuid(ctx, cluster_uuid).await?;
    Ok((
        ca,
        ClusterCertRefs::from_cluster(&cluster),
        cert_ctx(&cluster),
    ))
}

pub(crate) async fn sign(
    inner: &Inner,
    ctx: &RequestContext,
    req: SignCertificate,
) -> Result<String> {
    let (ca, refs, certs_ctx) =
        cluster_ca(inner, ctx, &req.cluster_uuid, req.ca_cert_type.as_deref()).await?;
    inner.pki.sign(&certs_ctx, &refs, ca, &req.csr).await
}

pub(crate) async fn get_ca(
    inner: &Inner,
    ctx: &RequestContext,
    req: GetCaCertificate,
) -> Result<String> {
    let (ca, refs, certs_ctx) =
        cluster_ca(inner, ctx, &req.cluster_uuid, req.ca_cert_type.as_deref()).await?;
    inner.pki.ca_certificate(&certs_ctx, &refs, ca).await
}

/// New CAs replace the old ones only once the driver has accepted them; a driver that cannot
/// rotate is asked first, so refusing changes nothing (upstream stored CAs the running
/// cluster did not trust). Superseded certificates are deleted.
pub(crate) async fn rotate_ca(inner: &Inner, ctx: &RequestContext, uuid: &str) -> Result<()> {
    let lock = inner.lock_for(uuid);
    let _held = lock.lock().await;
    let (cluster, ngs) = inner.load(ctx, uuid).await?;
    if let Err(e) = ClusterOp::RotateCa.check(cluster.status) {
        inner
            .notify(ctx, Action::Update, Outcome::Failure, &cluster, &ngs)
            .await;
        return Err(e);
    }
    let driver = inner.driver_for(&cluster).await?;
    if !driver.supports_ca_rotation() {
        inner
            .notify(ctx, Action::Update, Outcome::Failure, &cluster, &ngs)
            .await;
        return Err(Error::NotSupported {
            operation: format!("Rotating the CA certificate with driver {}", driver.name()),
        });
    }
    let certs_ctx = cert_ctx(&cluster);
    let old = ClusterCertRefs::from_cluster(&cluster);
    let new = inner
        .pki
        .generate(&certs_ctx, &ClusterPki::issuer_name(&cluster))
        .await?;
    let mut proposed = cluster.clone();
    new.apply_to(&mut proposed);
    if let Err(e) = driver
        .rotate_ca_certificate(ctx, &super::dc(&proposed))
        .await
    {
        inner.pki.delete(&certs_ctx, &new).await;
        fail(
            inner,
            ctx,
            uuid,
            Action::Update,
            S::UpdateFailed,
            &e.to_string(),
        )
        .await;
        return Err(e);
    }
    let saved = save_cluster(inner, &cluster, |m| {
        new.apply_to(m);
        m.status = status(S::UpdateInProgress);
        m.status_reason = None;
    })
    .await;
    match saved {
        Ok(_) => {
            inner.pki.delete(&certs_ctx, &old).await;
            inner.wake(uuid);
            Ok(())
        }
        Err(e) => {
            inner.pki.delete(&certs_ctx, &new).await;
            Err(e)
        }
    }
}

pub(crate) async fn rotate_credential(
    inner: &Inner,
    ctx: &RequestContext,
    uuid: &str,
) -> Result<()> {
    let cluster = inner.db.clusters().get_by_uuid(ctx, uuid).await?;
    ClusterOp::RotateCredentials.check(cluster.status)?;
    let driver = inner.driver_for(&cluster).await?;
    driver
        .rotate_credential(ctx, &super::dc(&cluster))
        .await
        .map_err(|e| match e {
            Error::NotSupported { .. } => Error::InvalidParameterValue {
                message: "Credential rotation is not supported by driver.".into(),
            },
            other => other,
        })?;
    // The cluster holds its newest credential now: the older ones go (their owners may have
    // left Keystone; the service user deletes them).
    if let Some(os) = inner.credentials.get() {
        let creator = cluster.user_id.as_deref().unwrap_or_default();
        match magnum_openstack::credentials::retire_older(os, creator, uuid).await {
            Ok(n) => tracing::info!(cluster = uuid, retired = n, "cluster credential rotated"),
            Err(e) => {
                return Err(Error::ServiceUnavailable {
                    message: format!(
                        "The cluster uses its new credential, but the old one could not be deleted: {e}; rotate again to finish."
                    ),
                });
            }
        }
    }
    Ok(())
}
