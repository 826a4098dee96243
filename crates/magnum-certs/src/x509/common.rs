//! Pieces shared by generation and CSR signing: keys, serials, validity, CA loading.

use rcgen::{
    CertificateParams, DistinguishedName, DnType, Issuer, KeyPair, PKCS_RSA_SHA256, PublicKeyData,
    RsaKeySize, SerialNumber,
};
use time::{Duration, OffsetDateTime};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{KeyPairPem, X509Error};

/// Generates an RSA key (exponent 65537) that signs with SHA-256.
pub(crate) fn rsa_key(bits: u32) -> Result<KeyPair, X509Error> {
    // aws-lc-rs only generates these sizes; upstream accepted any size >= 1024.
    let size = match bits {
        2048 => RsaKeySize::_2048,
        3072 => RsaKeySize::_3072,
        4096 => RsaKeySize::_4096,
        other => {
            return Err(X509Error::Config(format!(
                "rsa_key_size {other} unsupported (use 2048, 3072 or 4096)"
            )));
        }
    };
    Ok(KeyPair::generate_rsa_for(&PKCS_RSA_SHA256, size)?)
}

/// Fresh parameters with upstream's common fields: random UUIDv4 serial, UTC validity
/// from one day ago for `term_days`, capped at `ceiling` (the issuer's notAfter).
pub(crate) fn base_params(
    term_days: u32,
    ceiling: Option<OffsetDateTime>,
) -> Result<CertificateParams, X509Error> {
    let now = OffsetDateTime::now_utc();
    let mut not_after = now + Duration::days(i64::from(term_days));
    if let Some(ceiling) = ceiling {
        if ceiling <= now {
            return Err(X509Error::CaExpired);
        }
        // Upstream let leaves outlive their CA; a leaf is useless past its CA anyway.
        not_after = not_after.min(ceiling);
    }
    let mut params = CertificateParams::default();
    params.not_before = now - Duration::days(1);
    params.not_after = not_after;
    params.serial_number = Some(SerialNumber::from_slice(uuid::Uuid::new_v4().as_bytes()));
    // Upstream never writes AKI; rcgen's default is also off, stated here for clarity.
    params.use_authority_key_identifier_extension = false;
    Ok(params)
}

pub(crate) fn dn_with_cn(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// A CA loaded from its PEM pair, ready to sign.
pub(crate) struct CaSigner {
    pub(crate) issuer: Issuer<'static, KeyPair>,
    pub(crate) not_after: OffsetDateTime,
}

impl CaSigner {
    pub(crate) fn load(ca: &KeyPairPem) -> Result<Self, X509Error> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(ca.certificate.as_bytes())
            .map_err(|_| X509Error::InvalidCa("certificate is not PEM".into()))?;
        let (_, cert) = X509Certificate::from_der(&pem.contents)
            .map_err(|_| X509Error::InvalidCa("certificate does not parse".into()))?;
        // Only RSA CAs are ever generated; rcgen picks the algorithm from the key type.
        let key = KeyPair::from_pkcs8_pem_and_sign_algo(&ca.private_key, &PKCS_RSA_SHA256)
            .map_err(|_| X509Error::InvalidCa("private key is not a PKCS#8 RSA key".into()))?;
        // A mismatched pair would yield leaves that never verify; fail loudly instead.
        if key.subject_public_key_info() != cert.public_key().raw {
            return Err(X509Error::InvalidCa(
                "private key does not match certificate".into(),
            ));
        }
        let not_after = cert.validity().not_after.to_datetime();
        let issuer = Issuer::from_ca_cert_der(&pem.contents.clone().into(), key)
            .map_err(|e| X509Error::InvalidCa(format!("certificate unusable as issuer: {e}")))?;
        Ok(Self { issuer, not_after })
    }
}

/// DER OCTET STRING content for a subjectKeyIdentifier extension.
pub(crate) fn ski_extension(params: &CertificateParams, key: &impl PublicKeyData) -> Vec<u8> {
    let id = params.key_identifier(key);
    let mut out = Vec::with_capacity(id.len() + 2);
    out.push(0x04);
    // SHA-256 truncated to 20 bytes, so the short length form always applies.
    out.push(id.len() as u8);
    out.extend_from_slice(&id);
    out
}
