//! `x509keypair`: certificates as rows of Magnum's own database (upstream
//! `x509keypair_cert_manager`). The reference is the row uuid; rows belong to the project
//! and user of the calling context, and reads and deletes are filtered by it.

use async_trait::async_trait;
use magnum_core::ids::Identity;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::Database;
use magnum_db::repo::x509keypair::X509KeyPair;

use super::{CertStore, StoredCert};

/// The `x509keypair` backend.
#[derive(Clone, Debug)]
pub struct X509KeyPairStore {
    db: Database,
}

impl X509KeyPairStore {
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[async_trait]
impl CertStore for X509KeyPairStore {
    async fn store(&self, ctx: &RequestContext, _name: &str, cert: &StoredCert) -> Result<String> {
        let row = X509KeyPair {
            certificate: Some(cert.certificate.clone()),
            private_key: Some(cert.private_key.clone()),
            private_key_passphrase: cert.private_key_passphrase.clone(),
            intermediates: cert.intermediates.clone(),
            project_id: ctx.project_id.clone(),
            user_id: ctx.user_id.clone(),
            ..X509KeyPair::default()
        };
        let row = self.db.x509keypairs().create(row).await?;
        row.uuid
            .ok_or_else(|| Error::Internal("Could not store certificate: no uuid assigned".into()))
    }

    async fn get(&self, ctx: &RequestContext, reference: &str) -> Result<StoredCert> {
        let row = self.db.x509keypairs().get_by_uuid(ctx, reference).await?;
        // A row without a certificate or key cannot serve any caller; say which one.
        let (Some(certificate), Some(private_key)) = (row.certificate, row.private_key) else {
            return Err(Error::Internal(format!(
                "Certificate {reference} is stored without its certificate or private key."
            )));
        };
        Ok(StoredCert {
            certificate,
            private_key,
            private_key_passphrase: row.private_key_passphrase,
            intermediates: row.intermediates,
        })
    }

    async fn delete(&self, ctx: &RequestContext, reference: &str) -> Result<()> {
        // Looked up through the tenant filter first, as upstream does, so a caller cannot
        // delete another project's row by uuid.
        let row = self.db.x509keypairs().get_by_uuid(ctx, reference).await?;
        self.db.x509keypairs().destroy(&Identity::Id(row.id)).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use magnum_testkit::db::sqlite_at_head as sqlite_db;

    fn sample() -> StoredCert {
        StoredCert {
            certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----".into(),
            private_key: "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIC\n".into(),
            private_key_passphrase: Some("abcdefghijkl".into()),
            intermediates: None,
        }
    }

    #[tokio::test]
    async fn store_get_delete_with_tenant_scope() {
        let (db, _dir) = sqlite_db().await;
        let store = X509KeyPairStore::new(db.clone());
        let alice = RequestContext::for_project("p1", "alice");
        let r = store.store(&alice, "c", &sample()).await.unwrap();
        assert!(uuid::Uuid::parse_str(&r).is_ok());

        let row = db
            .x509keypairs()
            .get_by_uuid(&RequestContext::admin_all_tenants(), &r)
            .await
            .unwrap();
        assert_eq!(row.project_id.as_deref(), Some("p1"));
        assert_eq!(row.user_id.as_deref(), Some("alice"));

        assert_eq!(store.get(&alice, &r).await.unwrap(), sample());
        // Same project, other user: visible (the project filter wins, as upstream).
        let bob = RequestContext::for_project("p1", "bob");
        assert_eq!(store.get(&bob, &r).await.unwrap(), sample());
        // Another project sees nothing and cannot delete it.
        let eve = RequestContext::for_project("p2", "eve");
        let e = store.get(&eve, &r).await.unwrap_err();
        assert!(matches!(e, Error::X509KeyPairNotFound { .. }), "{e}");
        assert!(matches!(
            store.delete(&eve, &r).await.unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));
        // The conductor's admin context sees every project.
        let admin = RequestContext::admin_all_tenants();
        assert_eq!(store.get(&admin, &r).await.unwrap(), sample());

        store.delete(&alice, &r).await.unwrap();
        assert!(matches!(
            store.get(&admin, &r).await.unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));
        assert!(matches!(
            store.delete(&alice, &r).await.unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));
    }
}
