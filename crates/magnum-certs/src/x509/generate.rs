//! Generation of cluster CAs and Magnum's admin client certificate (upstream
//! `generate_ca_certificate` / `generate_client_certificate`).

use rcgen::{BasicConstraints, DnType, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose};

use super::common::{CaSigner, base_params, dn_with_cn, rsa_key};
use super::{KeyPairPem, X509Error, X509Options};

/// Generates a self-signed CA: `CN=<common_name>`, RSA `rsa_key_size`, SHA-256,
/// basicConstraints CA:TRUE pathlen:0 (critical), keyUsage keyCertSign+cRLSign (critical),
/// subjectKeyIdentifier, valid for `term_of_validity_days`.
pub fn generate_ca(common_name: &str, opts: &X509Options) -> Result<KeyPairPem, X509Error> {
    let key = rsa_key(opts.rsa_key_size)?;
    let mut params = base_params(opts.term_of_validity_days, None)?;
    params.distinguished_name = dn_with_cn(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key)?;
    Ok(KeyPairPem {
        certificate: cert.pem(),
        private_key: key.serialize_pem(),
    })
}

/// Generates a client certificate signed by `ca`: `CN=<common_name>, O=<organization>`,
/// keyUsage digitalSignature+keyEncipherment (critical), extendedKeyUsage clientAuth,
/// basicConstraints CA:FALSE (critical), subjectKeyIdentifier. It never outlives `ca`.
pub fn generate_client_cert(
    ca: &KeyPairPem,
    common_name: &str,
    organization_name: &str,
    opts: &X509Options,
) -> Result<KeyPairPem, X509Error> {
    // Load the CA before the (slow) key generation so a bad CA fails fast.
    let signer = CaSigner::load(ca)?;
    let key = rsa_key(opts.rsa_key_size)?;
    let mut params = base_params(opts.term_of_validity_days, Some(signer.not_after))?;
    params.distinguished_name = dn_with_cn(common_name);
    params
        .distinguished_name
        .push(DnType::OrganizationName, organization_name);
    // ExplicitNoCa makes rcgen write a critical CA:FALSE plus the SKI, as upstream does.
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &signer.issuer)?;
    Ok(KeyPairPem {
        certificate: cert.pem(),
        private_key: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use x509_parser::prelude::{FromDer, ParsedExtension, X509Certificate, X509Version};

    use super::*;
    use crate::x509::test_support::{der_of, shared_ca};

    #[test]
    fn ca_is_self_signed_with_ca_extensions() {
        let ca = shared_ca();
        let der = der_of(&ca.certificate);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        cert.verify_signature(None).unwrap();
        assert_eq!(cert.subject().to_string(), "CN=test-cluster");
        assert_eq!(cert.issuer().to_string(), "CN=test-cluster");
        assert_eq!(cert.version(), X509Version::V3);
        assert_eq!(
            cert.signature_algorithm.algorithm.to_id_string(),
            "1.2.840.113549.1.1.11"
        );
        let bc = cert.basic_constraints().unwrap().unwrap();
        assert!(bc.critical);
        assert!(bc.value.ca);
        assert_eq!(bc.value.path_len_constraint, Some(0));
        let ku = cert.key_usage().unwrap().unwrap();
        assert!(ku.critical);
        assert!(ku.value.key_cert_sign() && ku.value.crl_sign());
        assert!(!ku.value.digital_signature());
        assert!(cert.extensions().iter().any(|e| matches!(
            e.parsed_extension(),
            ParsedExtension::SubjectKeyIdentifier(_)
        )));
        assert!(!cert.extensions().iter().any(|e| matches!(
            e.parsed_extension(),
            ParsedExtension::AuthorityKeyIdentifier(_)
        )));
        let v = cert.validity();
        let days = (v.not_after.timestamp() - v.not_before.timestamp()) / 86_400;
        assert_eq!(days, 1825 + 1);
        // The private key is PKCS#8 and reloadable.
        assert!(ca.private_key.starts_with("-----BEGIN PRIVATE KEY-----"));
    }

    #[test]
    fn client_cert_chains_to_ca_and_never_outlives_it() {
        let ca = shared_ca();
        // A very long term must be clamped to the CA's notAfter.
        let opts = X509Options {
            term_of_validity_days: 100_000,
            ..X509Options::default()
        };
        let client = generate_client_cert(ca, "admin", "system:masters", &opts).unwrap();
        let ca_der = der_of(&ca.certificate);
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        let der = der_of(&client.certificate);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        cert.verify_signature(Some(ca_cert.public_key())).unwrap();
        assert_eq!(cert.subject().to_string(), "CN=admin, O=system:masters");
        assert_eq!(cert.issuer().to_string(), "CN=test-cluster");
        assert!(cert.validity().not_after <= ca_cert.validity().not_after);
        let bc = cert.basic_constraints().unwrap().unwrap();
        assert!(bc.critical && !bc.value.ca);
        let ku = cert.key_usage().unwrap().unwrap();
        assert!(ku.critical);
        assert!(ku.value.digital_signature() && ku.value.key_encipherment());
        assert!(!ku.value.key_cert_sign());
        let eku = cert.extended_key_usage().unwrap().unwrap();
        assert!(!eku.critical && eku.value.client_auth && !eku.value.server_auth);
        assert!(!format!("{client:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn mismatched_ca_key_is_rejected_and_bad_sizes_are_config_errors() {
        let ca = shared_ca();
        let other = crate::x509::test_support::second_key_pem();
        let broken = KeyPairPem {
            certificate: ca.certificate.clone(),
            private_key: other,
        };
        let err = generate_client_cert(&broken, "admin", "x", &X509Options::default()).unwrap_err();
        assert!(matches!(err, X509Error::InvalidCa(_)), "{err}");
        let opts = X509Options {
            rsa_key_size: 1024,
            ..X509Options::default()
        };
        assert!(matches!(
            generate_ca("x", &opts).unwrap_err(),
            X509Error::Config(_)
        ));
    }
}
