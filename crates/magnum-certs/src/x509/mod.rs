//! X.509 material for cluster PKI: CA and client certificate generation and CSR signing
//! under the `[x509]` policy (see `spec/certificates.md` §2–§3).
//!
//! rcgen (aws-lc-rs backend) builds and signs certificates; x509-parser reads CSRs and
//! CA certificates, because rcgen's own CSR parser rejects extensions Magnum allows
//! (e.g. subjectKeyIdentifier).

mod common;
mod generate;
mod sign;

#[cfg(test)]
mod test_support;

use std::fmt;

use magnum_conf::config::X509Section;

pub use generate::{generate_ca, generate_client_cert};
pub use sign::sign_csr;

/// A certificate and its unencrypted PKCS#8 private key, both PEM.
///
/// Encrypting the key at rest is the certificate store's job.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPairPem {
    pub certificate: String,
    pub private_key: String,
}

impl fmt::Debug for KeyPairPem {
    // The key must never reach logs, so it is redacted here once for every caller.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPairPem")
            .field("certificate", &self.certificate)
            .field("private_key", &"[redacted]")
            .finish()
    }
}

/// The `[x509]` options that govern generation and CSR signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct X509Options {
    /// Allow CA:TRUE and the certificate/CRL signing key usages in signed CSRs.
    pub allow_ca: bool,
    /// Short OID names of CSR extensions that may be copied into a signed certificate.
    pub allowed_extensions: Vec<String>,
    /// Key-usage names (e.g. "Digital Signature") allowed in signed certificates.
    pub allowed_key_usage: Vec<String>,
    /// Validity of generated and signed certificates, never beyond the issuing CA.
    pub term_of_validity_days: u32,
    /// RSA size for generated keys: 2048, 3072 or 4096.
    pub rsa_key_size: u32,
}

impl Default for X509Options {
    fn default() -> Self {
        Self::from(&X509Section::default())
    }
}

impl From<&X509Section> for X509Options {
    fn from(s: &X509Section) -> Self {
        Self {
            allow_ca: s.allow_ca,
            allowed_extensions: s.allowed_extensions.clone(),
            allowed_key_usage: s.allowed_key_usage.clone(),
            term_of_validity_days: s.term_of_validity,
            rsa_key_size: s.rsa_key_size,
        }
    }
}

/// Errors from X.509 operations. Messages never include key material.
#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    /// An `[x509]` option has a value this implementation cannot honour.
    #[error("invalid x509 configuration: {0}")]
    Config(String),
    /// The stored CA certificate or key is unusable.
    #[error("invalid CA: {0}")]
    InvalidCa(String),
    /// The CA's validity has ended, so nothing it signs could be valid.
    #[error("CA certificate has expired")]
    CaExpired,
    /// The CSR could not be parsed or uses a form we cannot reproduce (upstream `InvalidCsr`).
    #[error("invalid CSR: {0}")]
    InvalidCsr(String),
    /// The CSR's self-signature does not verify: no proof of key possession.
    #[error("CSR signature verification failed")]
    CsrSignature,
    /// The CSR asks for something the `[x509]` policy forbids (upstream
    /// `CertificateValidationError`).
    #[error("certificate validation failed for extension {extension}: {reason}")]
    Validation { extension: String, reason: String },
    /// Key generation, encoding or signing failed inside the crypto library.
    #[error("certificate generation failed: {0}")]
    Crypto(#[from] rcgen::Error),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn debug_redacts_private_key() {
        let kp = KeyPairPem {
            certificate: "-----BEGIN CERTIFICATE-----".into(),
            private_key: "-----BEGIN PRIVATE KEY-----\nSECRETBYTES\n".into(),
        };
        let dbg = format!("{kp:?}");
        assert!(!dbg.contains("SECRETBYTES"));
        assert!(!dbg.contains("PRIVATE KEY"));
        assert!(dbg.contains("[redacted]"));
    }

    #[test]
    fn defaults_match_upstream() {
        let o = X509Options::default();
        assert!(!o.allow_ca);
        assert_eq!(o.term_of_validity_days, 1825);
        assert_eq!(o.rsa_key_size, 2048);
        assert_eq!(
            o.allowed_extensions,
            [
                "keyUsage",
                "extendedKeyUsage",
                "subjectAltName",
                "basicConstraints",
                "subjectKeyIdentifier"
            ]
        );
        assert_eq!(
            o.allowed_key_usage,
            ["Digital Signature", "Key Encipherment", "Non Repudiation"]
        );
    }
}
