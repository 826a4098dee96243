//! `barbican`: each certificate is a Barbican `certificate` container over `text/plain`
//! secrets ("Certificate", "Private Key", "Private Key Passphrase", "Intermediates"), made
//! with Magnum's service credentials, as upstream's `barbican_cert_manager` stores them, so
//! references written by upstream Magnum read the same here. The reference is the container's
//! URL.
//!
//! Unlike upstream: a failed store removes every secret it created (upstream's rollback only
//! ran for one exception class), and a delete retries each step, so no secret of a deleted
//! cluster stays behind.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};
use magnum_openstack::keymanager::{self, Container};
use magnum_openstack::{OpenStack, OsError, Session};

use super::{CertStore, StoredCert};

/// The `barbican` backend.
pub struct BarbicanStore {
    openstack: Arc<OpenStack>,
    /// Pause before each retry of a failed delete step.
    retry_delays: Vec<Duration>,
}

impl BarbicanStore {
    pub fn new(openstack: Arc<OpenStack>) -> Self {
        Self {
            openstack,
            retry_delays: vec![Duration::from_millis(500), Duration::from_secs(2)],
        }
    }

    async fn session(&self) -> Result<Session> {
        self.openstack.service_session().await.map_err(unavailable)
    }
}

fn unavailable(e: OsError) -> Error {
    Error::ServiceUnavailable {
        message: format!("Certificate storage failed: {e}"),
    }
}

fn not_found(reference: &str) -> Error {
    Error::X509KeyPairNotFound {
        x509keypair: reference.to_owned(),
    }
}

impl BarbicanStore {
    /// Deletes one secret or container, retrying transient failures.
    async fn delete_with_retries(&self, s: &Session, kind: &str, reference: &str) -> Result<()> {
        let mut last = None;
        for delay in std::iter::once(None).chain(self.retry_delays.iter().map(Some)) {
            if let Some(d) = delay {
                tokio::time::sleep(*d).await;
            }
            match keymanager::delete(s, kind, reference).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(kind, reference, error = %e, "Barbican delete failed");
                    last = Some(e);
                }
            }
        }
        Err(last.map_or_else(|| Error::Internal("no delete attempt".into()), unavailable))
    }

    async fn container(&self, s: &Session, reference: &str) -> Result<Container> {
        let c = keymanager::get_container(s, reference)
            .await
            .map_err(|e| match e.status() {
                Some(403) | Some(404) => not_found(reference),
                _ => unavailable(e),
            })?
            .ok_or_else(|| not_found(reference))?;
        if c.kind != "certificate" {
            return Err(Error::Internal(format!(
                "Barbican container {reference} is not a certificate container."
            )));
        }
        Ok(c)
    }
}

#[async_trait]
impl CertStore for BarbicanStore {
    async fn store(&self, _ctx: &RequestContext, name: &str, cert: &StoredCert) -> Result<String> {
        let s = self.session().await?;
        let mut parts: Vec<(&str, &str, &str)> = vec![
            ("certificate", "Certificate", cert.certificate.as_str()),
            ("private_key", "Private Key", cert.private_key.as_str()),
        ];
        if let Some(i) = cert.intermediates.as_deref().filter(|i| !i.is_empty()) {
            parts.push(("intermediates", "Intermediates", i));
        }
        if let Some(p) = cert
            .private_key_passphrase
            .as_deref()
            .filter(|p| !p.is_empty())
        {
            parts.push(("private_key_passphrase", "Private Key Passphrase", p));
        }
        let mut created: Vec<(&str, String)> = Vec::with_capacity(parts.len());
        let mut failure = None;
        for (slot, secret_name, payload) in parts {
            match keymanager::create_secret(&s, secret_name, payload).await {
                Ok(r) => created.push((slot, r)),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if failure.is_none() {
            match keymanager::create_certificate_container(&s, name, &created).await {
                Ok(container) => return Ok(container),
                Err(e) => failure = Some(e),
            }
        }
        // Nothing half-stored: the secrets made so far go again.
        for (_, r) in &created {
            if let Err(e) = self.delete_with_retries(&s, "secrets", r).await {
                tracing::warn!(reference = %r, error = %e, "could not roll back a Barbican secret");
            }
        }
        Err(failure.map_or_else(
            || Error::Internal("certificate not stored".into()),
            unavailable,
        ))
    }

    async fn get(&self, _ctx: &RequestContext, reference: &str) -> Result<StoredCert> {
        let s = self.session().await?;
        let c = self.container(&s, reference).await?;
        let mut out = StoredCert::default();
        let mut have = (false, false);
        for (slot, secret_ref) in &c.secrets {
            let payload = keymanager::get_payload(&s, secret_ref)
                .await
                .map_err(unavailable)?
                .ok_or_else(|| not_found(reference))?;
            match slot.as_str() {
                "certificate" => {
                    out.certificate = payload;
                    have.0 = true;
                }
                "private_key" => {
                    out.private_key = payload;
                    have.1 = true;
                }
                "private_key_passphrase" => out.private_key_passphrase = Some(payload),
                "intermediates" => out.intermediates = Some(payload),
                _ => {}
            }
        }
        if !(have.0 && have.1) {
            return Err(Error::Internal(format!(
                "Certificate {reference} is stored without its certificate or private key."
            )));
        }
        Ok(out)
    }

    async fn delete(&self, _ctx: &RequestContext, reference: &str) -> Result<()> {
        let s = self.session().await?;
        let c = self.container(&s, reference).await?;
        // Every secret, then the container: a failure leaves the container, so a retry of
        // the delete finds what is left.
        let mut failed = None;
        for (_, secret_ref) in &c.secrets {
            if let Err(e) = self.delete_with_retries(&s, "secrets", secret_ref).await {
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        self.delete_with_retries(&s, "containers", reference).await
    }
}
