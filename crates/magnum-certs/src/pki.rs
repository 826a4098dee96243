//! The PKI of one cluster: its three CAs and Magnum's admin client certificate
//! (spec/certificates.md §1, §3, §6; upstream `handlers/common/cert_manager.py`).

use std::sync::Arc;

use magnum_core::{Error, RequestContext, Result};
use magnum_db::repo::cluster::Cluster;

use super::{CertStore, StoredCert};
use crate::x509::{self, KeyPairPem, X509Error, X509Options};

/// Subject of Magnum's client certificate: Kubernetes maps `O=system:masters` to
/// cluster-admin.
const ADMIN_CN: &str = "admin";
const ADMIN_ORG: &str = "system:masters";

/// Which of a cluster's CAs an operation means (`ca_cert_type` of the certificate API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaType {
    Kubernetes,
    Etcd,
    FrontProxy,
}

impl CaType {
    /// `None` or `kubernetes` → Kubernetes, `etcd`, `front_proxy` / `front-proxy`. Anything
    /// else is refused: upstream silently used the Kubernetes CA, handing out a certificate
    /// from the wrong CA.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        match value {
            None | Some("kubernetes") => Ok(Self::Kubernetes),
            Some("etcd") => Ok(Self::Etcd),
            Some("front_proxy" | "front-proxy") => Ok(Self::FrontProxy),
            Some(other) => Err(Error::InvalidParameterValue {
                message: format!(
                    "Unknown ca_cert_type \"{other}\": use kubernetes, etcd or front_proxy."
                ),
            }),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kubernetes => "kubernetes",
            Self::Etcd => "etcd",
            Self::FrontProxy => "front_proxy",
        }
    }
}

/// A failed generation: its error, and the references still stored because their removal
/// failed too.
#[derive(Debug)]
pub struct PartialCerts {
    pub error: Error,
    pub left: ClusterCertRefs,
}

/// The four certificate references kept on a cluster row. Any may be null: clusters made
/// before etcd and front-proxy CAs existed have neither.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterCertRefs {
    pub ca_cert_ref: Option<String>,
    pub etcd_ca_cert_ref: Option<String>,
    pub front_proxy_ca_cert_ref: Option<String>,
    pub magnum_cert_ref: Option<String>,
}

impl ClusterCertRefs {
    pub fn from_cluster(cluster: &Cluster) -> Self {
        Self {
            ca_cert_ref: cluster.ca_cert_ref.clone(),
            etcd_ca_cert_ref: cluster.etcd_ca_cert_ref.clone(),
            front_proxy_ca_cert_ref: cluster.front_proxy_ca_cert_ref.clone(),
            magnum_cert_ref: cluster.magnum_cert_ref.clone(),
        }
    }

    /// Writes the four references onto `cluster` (the caller saves it).
    pub fn apply_to(&self, cluster: &mut Cluster) {
        cluster.ca_cert_ref = self.ca_cert_ref.clone();
        cluster.etcd_ca_cert_ref = self.etcd_ca_cert_ref.clone();
        cluster.front_proxy_ca_cert_ref = self.front_proxy_ca_cert_ref.clone();
        cluster.magnum_cert_ref = self.magnum_cert_ref.clone();
    }

    pub fn ca(&self, ca: CaType) -> Option<&str> {
        match ca {
            CaType::Kubernetes => self.ca_cert_ref.as_deref(),
            CaType::Etcd => self.etcd_ca_cert_ref.as_deref(),
            CaType::FrontProxy => self.front_proxy_ca_cert_ref.as_deref(),
        }
        .filter(|r| !r.is_empty())
    }

    fn all(&self) -> [(&'static str, Option<&str>); 4] {
        [
            ("ca_cert_ref", self.ca_cert_ref.as_deref()),
            ("etcd_ca_cert_ref", self.etcd_ca_cert_ref.as_deref()),
            (
                "front_proxy_ca_cert_ref",
                self.front_proxy_ca_cert_ref.as_deref(),
            ),
            ("magnum_cert_ref", self.magnum_cert_ref.as_deref()),
        ]
    }
}

/// Upstream's issuer name: the cluster name, or its uuid when the name is null.
fn issuer_name(cluster: &Cluster) -> String {
    cluster
        .name
        .clone()
        .or_else(|| cluster.uuid.clone())
        .unwrap_or_default()
}

/// Cluster-level certificate operations over one store.
#[derive(Clone)]
pub struct ClusterPki {
    store: Arc<dyn CertStore>,
    opts: X509Options,
}

impl std::fmt::Debug for ClusterPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterPki")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// Freshly generated, sealed pairs in upstream's storage order.
struct Generated {
    k8s_ca: StoredCert,
    etcd_ca: StoredCert,
    front_proxy_ca: StoredCert,
    admin: StoredCert,
}

impl ClusterPki {
    pub fn new(store: Arc<dyn CertStore>, opts: X509Options) -> Self {
        Self { store, opts }
    }

    pub fn store(&self) -> &Arc<dyn CertStore> {
        &self.store
    }

    pub fn issuer_name(cluster: &Cluster) -> String {
        issuer_name(cluster)
    }

    /// Generates and stores the Kubernetes, etcd and front-proxy CAs (each `CN=<issuer>`)
    /// and the admin client certificate (`CN=admin, O=system:masters`, signed by the
    /// Kubernetes CA), each key under its own random passphrase. On any failure nothing
    /// stays stored (upstream leaked what it had stored so far), unless the store went away
    /// in between: what could not be removed is logged (see [`Self::generate_or_partial`]).
    pub async fn generate(&self, ctx: &RequestContext, issuer: &str) -> Result<ClusterCertRefs> {
        self.generate_or_partial(ctx, issuer).await.map_err(|p| {
            for (_, r) in p
                .left
                .all()
                .into_iter()
                .filter_map(|(f, r)| r.map(|r| (f, r)))
            {
                tracing::error!(issuer, reference = r, "certificate left in its store");
            }
            p.error
        })
    }

    /// As [`Self::generate`], but a failure also returns what stayed stored because its
    /// removal failed too (the store went away mid-way), so the caller can keep those
    /// references and remove them once the store is back.
    pub async fn generate_or_partial(
        &self,
        ctx: &RequestContext,
        issuer: &str,
    ) -> std::result::Result<ClusterCertRefs, PartialCerts> {
        let generated = self
            .generate_pairs(issuer)
            .await
            .map_err(|error| PartialCerts {
                error,
                left: ClusterCertRefs::default(),
            })?;
        let mut stored: Vec<String> = Vec::with_capacity(4);
        for cert in [
            &generated.k8s_ca,
            &generated.etcd_ca,
            &generated.front_proxy_ca,
            &generated.admin,
        ] {
            match self.store.store(ctx, issuer, cert).await {
                Ok(r) => stored.push(r),
                Err(error) => {
                    tracing::warn!(
                        issuer,
                        error = %error,
                        "storing cluster certificates failed; removing the {} already stored",
                        stored.len()
                    );
                    let mut left: [Option<String>; 4] = Default::default();
                    for (i, r) in stored.iter().enumerate() {
                        if self.delete_one(ctx, "partial", r).await.is_err() {
                            left[i] = Some(r.clone());
                        }
                    }
                    let [ca, etcd, proxy, admin] = left;
                    return Err(PartialCerts {
                        error,
                        left: ClusterCertRefs {
                            ca_cert_ref: ca,
                            etcd_ca_cert_ref: etcd,
                            front_proxy_ca_cert_ref: proxy,
                            magnum_cert_ref: admin,
                        },
                    });
                }
            }
        }
        let mut refs = stored.into_iter();
        Ok(ClusterCertRefs {
            ca_cert_ref: refs.next(),
            etcd_ca_cert_ref: refs.next(),
            front_proxy_ca_cert_ref: refs.next(),
            magnum_cert_ref: refs.next(),
        })
    }

    /// RSA key generation is CPU-bound: it runs on the blocking pool, the three CA chains
    /// in parallel (the admin certificate needs the Kubernetes CA, so it follows it).
    async fn generate_pairs(&self, issuer: &str) -> Result<Generated> {
        let job = |with_admin: bool| {
            let opts = self.opts.clone();
            let issuer = issuer.to_owned();
            tokio::task::spawn_blocking(move || -> Result<(StoredCert, Option<StoredCert>)> {
                let fail = |e: X509Error| {
                    Error::Internal(format!("Failed to create certificates for {issuer}: {e}"))
                };
                let ca = x509::generate_ca(&issuer, &opts).map_err(fail)?;
                let admin = if with_admin {
                    let pair = x509::generate_client_cert(&ca, ADMIN_CN, ADMIN_ORG, &opts)
                        .map_err(fail)?;
                    Some(StoredCert::seal(&pair)?)
                } else {
                    None
                };
                Ok((StoredCert::seal(&ca)?, admin))
            })
        };
        let (k8s, etcd, front_proxy) = tokio::join!(job(true), job(false), job(false));
        let joined = |r: std::result::Result<_, tokio::task::JoinError>| {
            r.map_err(|e| Error::Internal(format!("certificate generation task failed: {e}")))?
        };
        let (k8s_ca, admin) = joined(k8s)?;
        let (etcd_ca, _) = joined(etcd)?;
        let (front_proxy_ca, _) = joined(front_proxy)?;
        let admin = admin
            .ok_or_else(|| Error::Internal("admin client certificate was not generated".into()))?;
        Ok(Generated {
            k8s_ca,
            etcd_ca,
            front_proxy_ca,
            admin,
        })
    }

    async fn fetch_ca(
        &self,
        ctx: &RequestContext,
        refs: &ClusterCertRefs,
        ca: CaType,
    ) -> Result<StoredCert> {
        let reference = refs.ca(ca).ok_or_else(|| missing(ca.as_str()))?;
        self.store.get(ctx, reference).await
    }

    /// The PEM certificate of the chosen CA (never its key).
    pub async fn ca_certificate(
        &self,
        ctx: &RequestContext,
        refs: &ClusterCertRefs,
        ca: CaType,
    ) -> Result<String> {
        Ok(self.fetch_ca(ctx, refs, ca).await?.certificate)
    }

    /// The chosen CA with its decrypted key, for drivers that hand Magnum's CAs to the
    /// cluster's control plane (the Cluster API driver's CA Secrets).
    pub async fn ca_pair(
        &self,
        ctx: &RequestContext,
        refs: &ClusterCertRefs,
        ca: CaType,
    ) -> Result<KeyPairPem> {
        let stored = self.fetch_ca(ctx, refs, ca).await?;
        // PBKDF2 key decryption is CPU work: off the async threads.
        tokio::task::spawn_blocking(move || stored.open())
            .await
            .map_err(|e| Error::Internal(format!("key decryption task failed: {e}")))?
    }

    /// Signs `csr_pem` with the chosen CA under the `[x509]` policy and returns the
    /// certificate PEM.
    pub async fn sign(
        &self,
        ctx: &RequestContext,
        refs: &ClusterCertRefs,
        ca: CaType,
        csr_pem: &str,
    ) -> Result<String> {
        let stored = self.fetch_ca(ctx, refs, ca).await?;
        let opts = self.opts.clone();
        let csr = csr_pem.to_owned();
        // Key decryption (PBKDF2) and RSA signing are CPU work: off the async threads.
        tokio::task::spawn_blocking(move || {
            let pair = stored.open()?;
            x509::sign_csr(&pair, &csr, &opts).map_err(|e| signing_error(ca, e))
        })
        .await
        .map_err(|e| Error::Internal(format!("certificate signing task failed: {e}")))?
    }

    /// Magnum's admin client certificate with its decrypted key, for drivers that talk to
    /// the cluster's API.
    pub async fn admin_client(
        &self,
        ctx: &RequestContext,
        refs: &ClusterCertRefs,
    ) -> Result<KeyPairPem> {
        let reference = refs
            .magnum_cert_ref
            .as_deref()
            .filter(|r| !r.is_empty())
            .ok_or_else(|| missing("admin client"))?;
        self.store.get(ctx, reference).await?.open()
    }

    /// Deletes all four certificates, each on its own: a failure is logged and the rest
    /// still go (upstream deleted only the Kubernetes CA and the client certificate).
    pub async fn delete(&self, ctx: &RequestContext, refs: &ClusterCertRefs) {
        for (field, reference) in refs.all() {
            if let Some(r) = reference.filter(|r| !r.is_empty()) {
                let _ = self.delete_one(ctx, field, r).await;
            }
        }
    }

    /// As [`delete`](Self::delete), but a store that is away (Barbican down) is an error, so a
    /// cluster's delete can wait for it instead of leaving its certificates behind for good.
    pub async fn delete_all(&self, ctx: &RequestContext, refs: &ClusterCertRefs) -> Result<()> {
        let mut away = None;
        for (field, reference) in refs.all() {
            if let Some(r) = reference.filter(|r| !r.is_empty())
                && let Err(e) = self.delete_one(ctx, field, r).await
            {
                away = Some(e);
            }
        }
        away.map_or(Ok(()), Err)
    }

    /// Deletes one certificate; only an unreachable store is returned (anything else is
    /// logged: retrying would not help).
    async fn delete_one(&self, ctx: &RequestContext, field: &str, reference: &str) -> Result<()> {
        match self.store.delete(ctx, reference).await {
            Ok(()) => tracing::debug!(field, reference, "deleted certificate"),
            Err(Error::X509KeyPairNotFound { .. }) => {
                tracing::info!(field, reference, "certificate already gone")
            }
            Err(e) if e.kind() == magnum_core::ErrorKind::Unavailable => {
                tracing::warn!(field, reference, error = %e, "certificate store away");
                return Err(e);
            }
            Err(e) => tracing::warn!(field, reference, error = %e, "could not delete certificate"),
        }
        Ok(())
    }
}

fn missing(what: &str) -> Error {
    Error::InvalidParameterValue {
        message: format!(
            "This cluster has no {what} certificate (it predates Magnum storing one); rotate \
             the cluster CA to create it."
        ),
    }
}

/// Maps signing failures to upstream's texts: the caller's CSR is at fault (400) for
/// `InvalidCsr` and `CertificateValidationError`, the stored CA otherwise.
fn signing_error(ca: CaType, e: X509Error) -> Error {
    let invalid = |message: String| Error::InvalidParameterValue { message };
    match e {
        X509Error::InvalidCsr(detail) => invalid(format!("Received invalid csr ({detail}).")),
        X509Error::CsrSignature => invalid(
            "Received invalid csr (its signature does not verify with its own public key).".into(),
        ),
        X509Error::Validation { extension, reason } => {
            invalid(format!("Extension '{extension}' not allowed: {reason}"))
        }
        X509Error::CaExpired => Error::Conflict {
            message: format!(
                "The cluster's {} CA certificate has expired; rotate the cluster CA.",
                ca.as_str()
            ),
        },
        other @ (X509Error::InvalidCa(_) | X509Error::Config(_) | X509Error::Crypto(_)) => {
            Error::Internal(format!(
                "Signing with the cluster's {} CA failed: {other}",
                ca.as_str()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use magnum_db::Database;
    use magnum_db::repo::Page;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    use x509_parser::prelude::{FromDer, X509Certificate};

    use super::*;
    use crate::{LocalStore, X509KeyPairStore};
    use magnum_testkit::db::sqlite_at_head as sqlite_db;

    fn der(pem: &str) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .unwrap()
            .1
            .contents
    }

    fn ctx() -> RequestContext {
        RequestContext::for_project("p1", "alice")
    }

    async fn rows(db: &Database) -> usize {
        db.x509keypairs()
            .list(
                &RequestContext::admin_all_tenants(),
                &Default::default(),
                &Page::default(),
            )
            .await
            .unwrap()
            .len()
    }

    fn csr(cn: &str, ca: bool) -> String {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    #[test]
    fn ca_type_parsing() {
        assert_eq!(CaType::parse(None).unwrap(), CaType::Kubernetes);
        assert_eq!(
            CaType::parse(Some("kubernetes")).unwrap(),
            CaType::Kubernetes
        );
        assert_eq!(CaType::parse(Some("etcd")).unwrap(), CaType::Etcd);
        assert_eq!(
            CaType::parse(Some("front_proxy")).unwrap(),
            CaType::FrontProxy
        );
        assert_eq!(
            CaType::parse(Some("front-proxy")).unwrap(),
            CaType::FrontProxy
        );
        let e = CaType::parse(Some("Etcd")).unwrap_err();
        assert!(matches!(e, Error::InvalidParameterValue { .. }));
        assert_eq!(
            e.to_string(),
            "Unknown ca_cert_type \"Etcd\": use kubernetes, etcd or front_proxy."
        );
    }

    #[test]
    fn refs_follow_the_cluster_row() {
        let mut c = Cluster {
            name: None,
            uuid: Some("u-1".into()),
            ca_cert_ref: Some("a".into()),
            etcd_ca_cert_ref: Some(String::new()),
            ..Cluster::default()
        };
        assert_eq!(issuer_name(&c), "u-1");
        let refs = ClusterCertRefs::from_cluster(&c);
        assert_eq!(refs.ca(CaType::Kubernetes), Some("a"));
        assert_eq!(refs.ca(CaType::Etcd), None);
        assert_eq!(refs.ca(CaType::FrontProxy), None);
        let new = ClusterCertRefs {
            ca_cert_ref: Some("1".into()),
            etcd_ca_cert_ref: Some("2".into()),
            front_proxy_ca_cert_ref: Some("3".into()),
            magnum_cert_ref: Some("4".into()),
        };
        new.apply_to(&mut c);
        assert_eq!(ClusterCertRefs::from_cluster(&c), new);
        c.name = Some("k8s".into());
        assert_eq!(ClusterPki::issuer_name(&c), "k8s");
    }

    #[tokio::test]
    async fn generate_sign_fetch_and_delete_in_the_database() {
        let (db, _dir) = sqlite_db().await;
        let pki = ClusterPki::new(
            Arc::new(X509KeyPairStore::new(db.clone())),
            X509Options::default(),
        );
        let refs = pki.generate(&ctx(), "my-cluster").await.unwrap();
        assert_eq!(rows(&db).await, 4);

        // Every key is stored encrypted, each under its own passphrase.
        let mut passphrases = Vec::new();
        for (_, r) in refs.all() {
            let stored = pki.store().get(&ctx(), r.unwrap()).await.unwrap();
            assert!(
                stored
                    .private_key
                    .starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----")
            );
            passphrases.push(stored.private_key_passphrase.unwrap());
        }
        passphrases.sort();
        passphrases.dedup();
        assert_eq!(passphrases.len(), 4);

        // Three distinct self-signed CAs named after the issuer.
        let mut ca_pems = Vec::new();
        for t in [CaType::Kubernetes, CaType::Etcd, CaType::FrontProxy] {
            let pem = pki.ca_certificate(&ctx(), &refs, t).await.unwrap();
            assert!(!pem.contains("PRIVATE KEY"));
            let d = der(&pem);
            let (_, cert) = X509Certificate::from_der(&d).unwrap();
            assert_eq!(cert.subject().to_string(), "CN=my-cluster");
            cert.verify_signature(None).unwrap();
            ca_pems.push(pem);
        }
        ca_pems.dedup();
        assert_eq!(ca_pems.len(), 3);

        // The admin client certificate chains to the Kubernetes CA, and its key matches.
        let k8s_der = der(&ca_pems[0]);
        let (_, k8s) = X509Certificate::from_der(&k8s_der).unwrap();
        let admin = pki.admin_client(&ctx(), &refs).await.unwrap();
        assert!(admin.private_key.starts_with("-----BEGIN PRIVATE KEY-----"));
        let admin_der = der(&admin.certificate);
        let (_, admin_cert) = X509Certificate::from_der(&admin_der).unwrap();
        assert_eq!(
            admin_cert.subject().to_string(),
            "CN=admin, O=system:masters"
        );
        admin_cert.verify_signature(Some(k8s.public_key())).unwrap();
        let key = KeyPair::from_pem(&admin.private_key).unwrap();
        assert_eq!(
            rcgen::PublicKeyData::subject_public_key_info(&key),
            admin_cert.public_key().raw
        );

        // A CSR signed by the etcd CA verifies with it and not with the Kubernetes CA.
        let cert_pem = pki
            .sign(&ctx(), &refs, CaType::Etcd, &csr("etcd-client", false))
            .await
            .unwrap();
        let etcd_der = der(&ca_pems[1]);
        let (_, etcd) = X509Certificate::from_der(&etcd_der).unwrap();
        let signed_der = der(&cert_pem);
        let (_, signed) = X509Certificate::from_der(&signed_der).unwrap();
        assert_eq!(signed.subject().to_string(), "CN=etcd-client");
        signed.verify_signature(Some(etcd.public_key())).unwrap();
        assert!(signed.verify_signature(Some(k8s.public_key())).is_err());

        // Bad CSRs are the caller's fault, with upstream's wording.
        let e = pki
            .sign(&ctx(), &refs, CaType::Kubernetes, "not a csr")
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidParameterValue { .. }), "{e}");
        assert!(e.to_string().starts_with("Received invalid csr"), "{e}");
        let e = pki
            .sign(&ctx(), &refs, CaType::Kubernetes, &csr("sub-ca", true))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidParameterValue { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("Extension 'basicConstraints' not allowed"),
            "{e}"
        );

        // Another project cannot use this cluster's CAs through the store.
        let other = RequestContext::for_project("p2", "eve");
        assert!(matches!(
            pki.ca_certificate(&other, &refs, CaType::Kubernetes)
                .await
                .unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));

        // Delete removes all four rows, as the poller's admin context.
        pki.delete(&RequestContext::admin_all_tenants(), &refs)
            .await;
        assert_eq!(rows(&db).await, 0);
        // Deleting again only logs.
        pki.delete(&RequestContext::admin_all_tenants(), &refs)
            .await;
    }

    #[tokio::test]
    async fn null_refs_are_clean_errors() {
        let (db, _dir) = sqlite_db().await;
        let pki = ClusterPki::new(Arc::new(X509KeyPairStore::new(db)), X509Options::default());
        let refs = ClusterCertRefs {
            ca_cert_ref: Some(uuid::Uuid::new_v4().to_string()),
            ..ClusterCertRefs::default()
        };
        for t in [CaType::Etcd, CaType::FrontProxy] {
            let e = pki.ca_certificate(&ctx(), &refs, t).await.unwrap_err();
            assert!(matches!(e, Error::InvalidParameterValue { .. }), "{e}");
            let e = pki.sign(&ctx(), &refs, t, "x").await.unwrap_err();
            assert!(matches!(e, Error::InvalidParameterValue { .. }), "{e}");
        }
        assert!(matches!(
            pki.admin_client(&ctx(), &refs).await.unwrap_err(),
            Error::InvalidParameterValue { .. }
        ));
        // A ref pointing nowhere is a not-found, not a crash.
        assert!(matches!(
            pki.ca_certificate(&ctx(), &refs, CaType::Kubernetes)
                .await
                .unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));
        // Nothing to delete is fine.
        pki.delete(&ctx(), &ClusterCertRefs::default()).await;
    }

    #[tokio::test]
    async fn local_store_generate_and_delete_leave_no_files() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Arc::new(LocalStore::new(tmp.path()));
        let pki = ClusterPki::new(store, X509Options::default());
        let refs = pki.generate(&ctx(), "c").await.unwrap();
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 4 * 3);
        let admin = pki.admin_client(&ctx(), &refs).await.unwrap();
        assert!(admin.certificate.starts_with("-----BEGIN CERTIFICATE-----"));
        pki.delete(&ctx(), &refs).await;
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    /// Delegates to a real store but fails the `fail_at`-th store call.
    struct FailingStore {
        inner: Arc<dyn CertStore>,
        calls: AtomicUsize,
        fail_at: usize,
        /// Deletes fail too once the store failed (it went away).
        away_after_failure: bool,
    }

    #[async_trait]
    impl CertStore for FailingStore {
        async fn store(
            &self,
            ctx: &RequestContext,
            name: &str,
            cert: &StoredCert,
        ) -> Result<String> {
            if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
                return Err(Error::DatabaseUnavailable("injected".into()));
            }
            self.inner.store(ctx, name, cert).await
        }
        async fn get(&self, ctx: &RequestContext, reference: &str) -> Result<StoredCert> {
            self.inner.get(ctx, reference).await
        }
        async fn delete(&self, ctx: &RequestContext, reference: &str) -> Result<()> {
            if self.away_after_failure && self.calls.load(Ordering::SeqCst) >= self.fail_at {
                return Err(Error::ServiceUnavailable {
                    message: "injected: the store is away".into(),
                });
            }
            self.inner.delete(ctx, reference).await
        }
    }

    #[tokio::test]
    async fn a_store_gone_mid_way_hands_back_what_it_could_not_remove() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Arc::new(FailingStore {
            inner: Arc::new(LocalStore::new(tmp.path())),
            calls: AtomicUsize::new(0),
            fail_at: 4,
            away_after_failure: true,
        });
        let pki = ClusterPki::new(store.clone(), X509Options::default());
        let partial = pki.generate_or_partial(&ctx(), "c").await.unwrap_err();
        let left = partial.left.clone();
        // The three CAs stored before the admin certificate failed: kept, in their fields.
        assert!(left.ca_cert_ref.is_some() && left.etcd_ca_cert_ref.is_some());
        assert!(left.front_proxy_ca_cert_ref.is_some() && left.magnum_cert_ref.is_none());
        assert!(
            std::fs::read_dir(tmp.path()).unwrap().count() > 0,
            "the three stay stored"
        );
        // Once the store is back, removing them leaves nothing.
        let back = ClusterPki::new(
            Arc::new(LocalStore::new(tmp.path())),
            X509Options::default(),
        );
        back.delete_all(&ctx(), &left).await.unwrap();
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn failure_half_way_leaves_nothing_stored() {
        let (db, _dir) = sqlite_db().await;
        let tmp = tempfile::tempdir().unwrap();
        let backends: [Arc<dyn CertStore>; 2] = [
            Arc::new(X509KeyPairStore::new(db.clone())),
            Arc::new(LocalStore::new(tmp.path())),
        ];
        for inner in backends {
            let store = Arc::new(FailingStore {
                inner,
                calls: AtomicUsize::new(0),
                fail_at: 4,
                away_after_failure: false,
            });
            let pki = ClusterPki::new(store.clone(), X509Options::default());
            let e = pki.generate(&ctx(), "c").await.unwrap_err();
            // The store's error comes back as it was (here a 503-class one).
            assert!(matches!(e, Error::DatabaseUnavailable(_)), "{e}");
            assert_eq!(store.calls.load(Ordering::SeqCst), 4);
        }
        assert_eq!(rows(&db).await, 0);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn bad_configuration_fails_before_storing() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = X509Options {
            rsa_key_size: 1000,
            ..X509Options::default()
        };
        let pki = ClusterPki::new(Arc::new(LocalStore::new(tmp.path())), opts);
        let e = pki.generate(&ctx(), "c").await.unwrap_err();
        assert!(matches!(e, Error::Internal(_)), "{e}");
        assert!(e.to_string().contains("rsa_key_size"), "{e}");
        assert!(!tmp.path().exists() || std::fs::read_dir(tmp.path()).unwrap().count() == 0);
    }
}
