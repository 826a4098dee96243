//! Certificate stores and per-cluster PKI (spec/certificates.md).
//!
//! A [`CertStore`] keeps one certificate with its encrypted key and passphrase under an
//! opaque reference (the values of the cluster's `*_cert_ref` columns). [`ClusterPki`]
//! builds the four pairs of a cluster on top of a store, signs CSRs and cleans up; [`x509`]
//! generates and signs the certificates themselves. Its own crate so that the X.509 and
//! PKCS#8 stack is not rebuilt with the conductor.

mod barbican;
mod keys;
mod local;
mod pki;
pub mod x509;
mod x509keypair;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use magnum_conf::config::Config;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::Database;

use crate::x509::KeyPairPem;

pub use barbican::BarbicanStore;
pub use keys::{KeyError, decrypt_private_key, encrypt_private_key, generate_passphrase};
pub use local::LocalStore;
pub use pki::{CaType, ClusterCertRefs, ClusterPki, PartialCerts};
pub use x509keypair::X509KeyPairStore;

/// One stored certificate, exactly as a backend keeps it (upstream's `Cert`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StoredCert {
    /// PEM certificate.
    pub certificate: String,
    /// PEM private key as stored: PKCS#8 `ENCRYPTED PRIVATE KEY` when a passphrase is set.
    pub private_key: String,
    pub private_key_passphrase: Option<String>,
    /// PEM chain; Magnum never sets it, other writers of the table may have.
    pub intermediates: Option<String>,
}

impl fmt::Debug for StoredCert {
    // Key and passphrase must never reach logs, so they are redacted here for every caller.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredCert")
            .field("certificate", &self.certificate)
            .field("private_key", &"[redacted]")
            .field(
                "private_key_passphrase",
                &self.private_key_passphrase.as_ref().map(|_| "[redacted]"),
            )
            .field("intermediates", &self.intermediates)
            .finish()
    }
}

impl StoredCert {
    /// Encrypts `pair`'s key under a fresh random passphrase, as upstream stores every pair
    /// it generates.
    pub fn seal(pair: &KeyPairPem) -> Result<Self> {
        let passphrase = generate_passphrase();
        let private_key = encrypt_private_key(&pair.private_key, &passphrase)
            .map_err(|e| Error::Internal(format!("Could not store certificate: {e}")))?;
        Ok(Self {
            certificate: pair.certificate.clone(),
            private_key,
            private_key_passphrase: Some(passphrase),
            intermediates: None,
        })
    }

    /// The certificate with its decrypted (unencrypted PKCS#8 PEM) key.
    pub fn open(&self) -> Result<KeyPairPem> {
        let private_key =
            decrypt_private_key(&self.private_key, self.private_key_passphrase.as_deref())
                .map_err(|e| Error::Internal(format!("Stored certificate is unusable: {e}")))?;
        Ok(KeyPairPem {
            certificate: self.certificate.clone(),
            private_key,
        })
    }
}

/// A certificate backend (`[certificates] cert_manager_type`).
#[async_trait]
pub trait CertStore: Send + Sync {
    /// Stores `cert` under the friendly `name` (the cluster's issuer name) and returns its
    /// reference.
    async fn store(&self, ctx: &RequestContext, name: &str, cert: &StoredCert) -> Result<String>;
    /// The certificate stored under `reference`; `X509KeyPairNotFound` when there is none
    /// (or the caller may not see it).
    async fn get(&self, ctx: &RequestContext, reference: &str) -> Result<StoredCert>;
    /// Removes the certificate stored under `reference`.
    async fn delete(&self, ctx: &RequestContext, reference: &str) -> Result<()>;
}

/// The store `[certificates] cert_manager_type` names.
/// `openstack` carries the service credentials Barbican needs.
pub fn store_from_config(
    cfg: &Config,
    db: &Database,
    openstack: Option<Arc<magnum_openstack::OpenStack>>,
) -> Result<Arc<dyn CertStore>> {
    match cfg.certificates.cert_manager_type.trim() {
        "x509keypair" => Ok(Arc::new(X509KeyPairStore::new(db.clone()))),
        "local" => Ok(Arc::new(LocalStore::new(&cfg.certificates.storage_path))),
        "barbican" => match openstack.filter(|o| o.has_service_credentials()) {
            Some(os) => Ok(Arc::new(BarbicanStore::new(os))),
            None => Err(Error::InvalidParameterValue {
                message: "[certificates] cert_manager_type = barbican needs Magnum's service \
                          credentials: set auth_url, username, password and project_name in \
                          [keystone_auth] (or use cert_manager_type = x509keypair)."
                    .into(),
            }),
        },
        other => Err(Error::InvalidParameterValue {
            message: format!(
                "Unknown [certificates] cert_manager_type \"{other}\": use barbican or \
                 x509keypair (or local, for tests)."
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use magnum_testkit::db::sqlite_at_head as sqlite_db;

    #[test]
    fn debug_redacts_key_and_passphrase() {
        let c = StoredCert {
            certificate: "CERT".into(),
            private_key: "-----BEGIN ENCRYPTED PRIVATE KEY-----SECRETBYTES".into(),
            private_key_passphrase: Some("hunter2hunte".into()),
            intermediates: None,
        };
        let d = format!("{c:?}");
        assert!(d.contains("CERT"));
        assert!(!d.contains("SECRETBYTES") && !d.contains("hunter2"), "{d}");
        let none = StoredCert::default();
        assert!(format!("{none:?}").contains("private_key_passphrase: None"));
    }

    #[tokio::test]
    async fn store_is_chosen_by_config() {
        let (db, _dir) = sqlite_db().await;
        let mut cfg = Config::default();
        // Upstream's default needs service credentials: without them a message naming the fix.
        let e = store_from_config(&cfg, &db, None).err().unwrap();
        assert!(matches!(e, Error::InvalidParameterValue { .. }));
        assert!(e.to_string().contains("[keystone_auth]"), "{e}");
        cfg.certificates.cert_manager_type = "x509keypair".into();
        assert!(store_from_config(&cfg, &db, None).is_ok());
        cfg.certificates.cert_manager_type = "local".into();
        assert!(store_from_config(&cfg, &db, None).is_ok());
        cfg.certificates.cert_manager_type = "vault".into();
        let e = store_from_config(&cfg, &db, None).err().unwrap();
        assert!(e.to_string().contains("\"vault\""), "{e}");
    }
}
