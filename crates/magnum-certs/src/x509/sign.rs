//! CSR signing with `[x509]` validation (upstream `x509.sign` + `validator.py`).

use rcgen::{CustomExtension, DistinguishedName, DnType, DnValue, SubjectPublicKeyInfo};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::cri_attributes::ParsedCriAttribute;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::extensions::{ParsedExtension, X509Extension};
use x509_parser::prelude::{FromDer, X509Name};

use super::common::{CaSigner, base_params, ski_extension};
use super::{X509Error, X509Options};

/// Short names (as Python `cryptography` spells them) of the extensions the allow list
/// may name; anything else has no name and so is never allowed.
const EXTENSION_NAMES: &[(&str, &str)] = &[
    ("2.5.29.35", "authorityKeyIdentifier"),
    ("2.5.29.14", "subjectKeyIdentifier"),
    ("1.3.6.1.5.5.7.1.1", "authorityInfoAccess"),
    ("2.5.29.19", "basicConstraints"),
    ("2.5.29.31", "cRLDistributionPoints"),
    ("2.5.29.32", "certificatePolicies"),
    ("2.5.29.37", "extendedKeyUsage"),
    ("1.3.6.1.5.5.7.48.1.5", "OCSPNoCheck"),
    ("2.5.29.54", "inhibitAnyPolicy"),
    ("2.5.29.15", "keyUsage"),
    ("2.5.29.30", "nameConstraints"),
    ("2.5.29.17", "subjectAltName"),
    ("2.5.29.18", "issuerAltName"),
];

/// Key-usage names indexed by their KeyUsage bit number (RFC 5280 §4.2.1.3): the config
/// registry lists them in bit order.
const KEY_USAGE_NAMES: &[&str] = magnum_conf::config::X509_KEY_USAGES;
const KEY_AGREEMENT_BIT: usize = 4;
const CA_KEY_USAGE_BITS: [usize; 2] = [5, 6];

/// Signs `csr_pem` with `ca` and returns the certificate PEM.
///
/// The subject and public key come from the CSR; extensions are filtered per `opts`
/// (disallowed non-critical ones dropped, disallowed critical ones rejected); the
/// certificate never outlives the CA. Unlike upstream, the CSR's signature is verified
/// and its own subjectKeyIdentifier is replaced by one we compute.
pub fn sign_csr(
    ca: &super::KeyPairPem,
    csr_pem: &str,
    opts: &X509Options,
) -> Result<String, X509Error> {
    let signer = CaSigner::load(ca)?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr_pem.as_bytes())
        .map_err(|_| X509Error::InvalidCsr("not PEM".into()))?;
    if pem.label != "CERTIFICATE REQUEST" && pem.label != "NEW CERTIFICATE REQUEST" {
        return Err(X509Error::InvalidCsr(format!(
            "unexpected PEM label {:?}",
            pem.label
        )));
    }
    let (_, csr) = X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| X509Error::InvalidCsr(format!("does not parse: {e}")))?;
    // Upstream never checked proof of possession; we refuse CSRs not signed by their key.
    csr.verify_signature()
        .map_err(|_| X509Error::CsrSignature)?;

    let info = &csr.certification_request_info;
    let spki = SubjectPublicKeyInfo::from_der(info.subject_pki.raw)
        .map_err(|e| X509Error::InvalidCsr(format!("unusable public key: {e}")))?;

    let mut params = base_params(opts.term_of_validity_days, Some(signer.not_after))?;
    params.distinguished_name = subject_of(&info.subject)?;
    params.custom_extensions = filter_extensions(requested_extensions(&csr)?, opts)?;
    let ski = ski_extension(&params, &spki);
    params
        .custom_extensions
        .push(CustomExtension::from_oid_content(&[2, 5, 29, 14], ski));
    Ok(params.signed_by(&spki, &signer.issuer)?.pem())
}

fn requested_extensions<'a>(
    csr: &'a X509CertificationRequest<'a>,
) -> Result<&'a [X509Extension<'a>], X509Error> {
    let mut found = None;
    for attr in csr.certification_request_info.iter_attributes() {
        if let ParsedCriAttribute::ExtensionRequest(req) = attr.parsed_attribute() {
            if found.is_some() {
                return Err(X509Error::InvalidCsr("repeated extensionRequest".into()));
            }
            found = Some(req.extensions.as_slice());
        }
    }
    Ok(found.unwrap_or(&[]))
}

fn validation(ext: &str, reason: &str) -> X509Error {
    X509Error::Validation {
        extension: ext.into(),
        reason: reason.into(),
    }
}

/// Applies the `[x509]` policy to the requested extensions (upstream `filter_extensions`).
fn filter_extensions(
    exts: &[X509Extension<'_>],
    opts: &X509Options,
) -> Result<Vec<CustomExtension>, X509Error> {
    let mut out = Vec::new();
    for ext in exts {
        let oid = ext.oid.to_id_string();
        let name = EXTENSION_NAMES
            .iter()
            .find(|(o, _)| *o == oid)
            .map(|(_, n)| *n);
        let allowed = name.is_some_and(|n| opts.allowed_extensions.iter().any(|a| a == n));
        if !allowed {
            if ext.critical {
                return Err(validation(
                    name.unwrap_or(&oid),
                    "critical extension not allowed",
                ));
            }
            continue;
        }
        let components: Vec<u64> = ext
            .oid
            .iter()
            .ok_or_else(|| X509Error::InvalidCsr(format!("extension OID {oid} too large")))?
            .collect();
        let content = match ext.parsed_extension() {
            // We always add our own SKI; copying the CSR's made upstream fail with a duplicate.
            ParsedExtension::SubjectKeyIdentifier(_) => continue,
            ParsedExtension::KeyUsage(ku) => {
                match filter_key_usage(ku.flags, ext.critical, opts)? {
                    Some(content) => content,
                    None => continue,
                }
            }
            ParsedExtension::BasicConstraints(bc) if bc.ca && !opts.allow_ca => {
                if ext.critical {
                    return Err(validation("basicConstraints", "CA:TRUE is not allowed"));
                }
                // Upstream replaces it with a non-critical CA:FALSE (an empty SEQUENCE).
                out.push(CustomExtension::from_oid_content(
                    &components,
                    vec![0x30, 0x00],
                ));
                continue;
            }
            ParsedExtension::ParseError { .. } => {
                return Err(X509Error::InvalidCsr(format!("malformed extension {oid}")));
            }
            _ => ext.value.to_vec(),
        };
        let mut custom = CustomExtension::from_oid_content(&components, content);
        custom.set_criticality(ext.critical);
        out.push(custom);
    }
    Ok(out)
}

/// Returns the DER BIT STRING for the permitted usages, `None` when none remain, or a
/// validation error when a critical keyUsage asks for a forbidden usage.
fn filter_key_usage(
    flags: u16,
    critical: bool,
    opts: &X509Options,
) -> Result<Option<Vec<u8>>, X509Error> {
    let mut kept = Vec::new();
    for (bit, name) in KEY_USAGE_NAMES.iter().enumerate() {
        if flags & (1 << bit) == 0 {
            continue;
        }
        // Upstream reads encipherOnly/decipherOnly as false without keyAgreement.
        if bit > CA_KEY_USAGE_BITS[1] && flags & (1 << KEY_AGREEMENT_BIT) == 0 {
            continue;
        }
        let is_ca_usage = CA_KEY_USAGE_BITS.contains(&bit);
        let permitted =
            opts.allowed_key_usage.iter().any(|u| u == name) && (opts.allow_ca || !is_ca_usage);
        if permitted {
            kept.push(bit);
        } else if critical {
            return Err(validation("keyUsage", &format!("{name} is not allowed")));
        }
    }
    Ok(kept.last().map(|&high| encode_bits(&kept, high)))
}

/// DER BIT STRING with the given bit numbers set; `high` is the largest of them.
fn encode_bits(bits: &[usize], high: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; high / 8 + 1];
    for &b in bits {
        bytes[b / 8] |= 0x80 >> (b % 8);
    }
    // DER drops trailing zero bits, and the unused-bit count says how many.
    let unused = 7 - (high % 8) as u8;
    let mut out = vec![0x03, bytes.len() as u8 + 1, unused];
    out.extend_from_slice(&bytes);
    out
}

/// Re-creates the CSR subject for rcgen, refusing names it cannot reproduce faithfully.
fn subject_of(name: &X509Name<'_>) -> Result<DistinguishedName, X509Error> {
    let mut dn = DistinguishedName::new();
    let mut seen: Vec<String> = Vec::new();
    for rdn in name.iter() {
        let mut attrs = rdn.iter();
        let (Some(attr), None) = (attrs.next(), attrs.next()) else {
            return Err(X509Error::InvalidCsr(
                "multi-valued RDNs are not supported".into(),
            ));
        };
        let oid = attr.attr_type().to_id_string();
        // rcgen keeps one value per attribute type; silently merging would change the subject.
        if seen.contains(&oid) {
            return Err(X509Error::InvalidCsr(format!(
                "repeated subject attribute {oid} is not supported"
            )));
        }
        seen.push(oid.clone());
        let components: Vec<u64> = attr
            .attr_type()
            .iter()
            .ok_or_else(|| X509Error::InvalidCsr(format!("subject OID {oid} too large")))?
            .collect();
        let value = attr.attr_value();
        let bad = || X509Error::InvalidCsr(format!("subject attribute {oid} has an invalid value"));
        let text = std::str::from_utf8(value.data).map_err(|_| bad())?;
        let dn_value = match value.tag() {
            Tag::PrintableString => DnValue::PrintableString(text.try_into().map_err(|_| bad())?),
            Tag::Ia5String => DnValue::Ia5String(text.try_into().map_err(|_| bad())?),
            Tag::Utf8String => DnValue::Utf8String(text.to_owned()),
            _ => attr
                .as_str()
                .map(|s| DnValue::Utf8String(s.to_owned()))
                .map_err(|_| bad())?,
        };
        dn.push(DnType::from_oid(&components), dn_value);
    }
    Ok(dn)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::Path;
    use std::process::Command;

    use x509_parser::prelude::{FromDer, X509Certificate};

    use super::*;
    use crate::x509::test_support::{der_of, shared_ca};

    /// Runs `openssl req` with a fresh 2048-bit key and extra arguments; returns the CSR PEM.
    fn openssl_csr(dir: &Path, subj: &str, extra: &[&str]) -> String {
        let key = dir.join("key.pem");
        let csr = dir.join("csr.pem");
        let mut args = vec![
            "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", subj, "-keyout",
        ];
        let (k, c) = (key.to_str().unwrap(), csr.to_str().unwrap());
        args.extend([k, "-out", c]);
        args.extend(extra);
        let out = Command::new("openssl").args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(csr).unwrap()
    }

    fn parse(pem: &str) -> Vec<u8> {
        der_of(pem)
    }

    #[test]
    fn signs_openssl_csr_and_openssl_verifies_it() {
        let dir = tempfile::tempdir().unwrap();
        let csr = openssl_csr(
            dir.path(),
            "/CN=test/O=system:nodes",
            &[
                "-addext",
                "subjectAltName=DNS:node-0.example.com,IP:10.0.0.5",
                "-addext",
                "extendedKeyUsage=clientAuth,serverAuth",
                "-addext",
                "subjectKeyIdentifier=hash",
                // Not allowed by default and non-critical: silently dropped.
                "-addext",
                "issuerAltName=DNS:ignored.example.com",
            ],
        );
        let ca = shared_ca();
        let cert_pem = sign_csr(ca, &csr, &X509Options::default()).unwrap();

        let ca_path = dir.path().join("ca.pem");
        let cert_path = dir.path().join("cert.pem");
        std::fs::write(&ca_path, &ca.certificate).unwrap();
        std::fs::write(&cert_path, &cert_pem).unwrap();
        let out = Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(&ca_path)
            .arg(&cert_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        let der = parse(&cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        assert_eq!(cert.subject().to_string(), "CN=test, O=system:nodes");
        assert_eq!(cert.issuer().to_string(), "CN=test-cluster");
        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert_eq!(san.value.general_names.len(), 2);
        let eku = cert.extended_key_usage().unwrap().unwrap();
        assert!(eku.value.client_auth && eku.value.server_auth);
        let names: Vec<String> = cert
            .extensions()
            .iter()
            .map(|e| e.oid.to_id_string())
            .collect();
        assert!(
            !names.contains(&"2.5.29.18".to_string()),
            "issuerAltName dropped"
        );
        // Exactly one SKI (ours), never a duplicate from the CSR.
        assert_eq!(names.iter().filter(|n| *n == "2.5.29.14").count(), 1);
        let ca_der = parse(&ca.certificate);
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        assert!(cert.validity().not_after <= ca_cert.validity().not_after);
    }

    #[test]
    fn ca_requests_follow_allow_ca_and_criticality() {
        let dir = tempfile::tempdir().unwrap();
        let ca = shared_ca();
        let deny = X509Options::default();

        let critical = openssl_csr(
            dir.path(),
            "/CN=subca",
            &["-addext", "basicConstraints=critical,CA:TRUE"],
        );
        let err = sign_csr(ca, &critical, &deny).unwrap_err();
        assert!(matches!(err, X509Error::Validation { .. }), "{err}");

        let non_critical = openssl_csr(
            dir.path(),
            "/CN=subca",
            &[
                "-addext",
                "basicConstraints=CA:TRUE",
                "-addext",
                "keyUsage=digitalSignature,keyCertSign,cRLSign",
            ],
        );
        let pem = sign_csr(ca, &non_critical, &deny).unwrap();
        let der = parse(&pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let bc = cert.basic_constraints().unwrap().unwrap();
        assert!(!bc.value.ca && !bc.critical);
        let ku = cert.key_usage().unwrap().unwrap();
        assert!(ku.value.digital_signature());
        assert!(!ku.value.key_cert_sign() && !ku.value.crl_sign());

        // A critical keyUsage asking for keyCertSign is refused outright.
        let critical_ku = openssl_csr(
            dir.path(),
            "/CN=subca",
            &["-addext", "keyUsage=critical,digitalSignature,keyCertSign"],
        );
        assert!(matches!(
            sign_csr(ca, &critical_ku, &deny).unwrap_err(),
            X509Error::Validation { .. }
        ));

        // With allow_ca (and the usages allowed) CA:TRUE and keyCertSign pass through.
        let allow = X509Options {
            allow_ca: true,
            allowed_key_usage: vec!["Digital Signature".into(), "Certificate Sign".into()],
            ..X509Options::default()
        };
        let pem = sign_csr(ca, &critical, &allow).unwrap();
        let der = parse(&pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let bc = cert.basic_constraints().unwrap().unwrap();
        assert!(bc.value.ca && bc.critical);
        let pem = sign_csr(ca, &critical_ku, &allow).unwrap();
        let der = parse(&pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let ku = cert.key_usage().unwrap().unwrap();
        assert!(ku.critical && ku.value.key_cert_sign() && ku.value.digital_signature());
    }

    #[test]
    fn rejects_tampered_signature_garbage_and_disallowed_critical_extensions() {
        let dir = tempfile::tempdir().unwrap();
        let ca = shared_ca();
        let opts = X509Options::default();
        let csr = openssl_csr(dir.path(), "/CN=test", &[]);

        // Flip one bit of the signature (the last byte of the DER) and re-armour it.
        let mut der = parse(&csr);
        let last = der.len() - 1;
        der[last] ^= 0x01;
        let tampered_pem = pem_armour(&der);
        assert!(matches!(
            sign_csr(ca, &tampered_pem, &opts).unwrap_err(),
            X509Error::CsrSignature
        ));

        assert!(matches!(
            sign_csr(ca, "not a csr", &opts).unwrap_err(),
            X509Error::InvalidCsr(_)
        ));

        // rcgen keeps one value per attribute type, so repeated O= would be merged: refuse.
        let two_orgs = openssl_csr(dir.path(), "/CN=test/O=a/O=b", &[]);
        assert!(matches!(
            sign_csr(ca, &two_orgs, &opts).unwrap_err(),
            X509Error::InvalidCsr(_)
        ));

        let critical_unknown = openssl_csr(
            dir.path(),
            "/CN=test",
            &[
                "-addext",
                "nameConstraints=critical,permitted;DNS:example.com",
            ],
        );
        assert!(matches!(
            sign_csr(ca, &critical_unknown, &opts).unwrap_err(),
            X509Error::Validation { .. }
        ));
    }

    #[test]
    fn signs_ec_p256_csr() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("ec.pem");
        let csr = dir.path().join("ec.csr");
        let out = Command::new("openssl")
            .args([
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args([
                "-nodes",
                "-subj",
                "/CN=system:node:n0/O=system:nodes",
                "-keyout",
            ])
            .arg(&key)
            .arg("-out")
            .arg(&csr)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let csr = std::fs::read_to_string(csr).unwrap();
        let ca = shared_ca();
        let pem = sign_csr(ca, &csr, &X509Options::default()).unwrap();
        let ca_der = parse(&ca.certificate);
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        let der = parse(&pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        cert.verify_signature(Some(ca_cert.public_key())).unwrap();
        assert_eq!(
            cert.subject().to_string(),
            "CN=system:node:n0, O=system:nodes"
        );
    }

    fn pem_armour(der: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("csr.der");
        std::fs::write(&path, der).unwrap();
        let out = Command::new("openssl")
            .args(["base64", "-in"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}-----END CERTIFICATE REQUEST-----\n",
            String::from_utf8(out.stdout).unwrap()
        )
    }

    #[test]
    fn key_usage_bits_encode_as_der() {
        // digitalSignature + keyEncipherment: 0b1010_0000 with 5 unused bits.
        assert_eq!(encode_bits(&[0, 2], 2), vec![0x03, 0x02, 0x05, 0xa0]);
        // decipherOnly (bit 8) needs a second byte.
        assert_eq!(encode_bits(&[4, 8], 8), vec![0x03, 0x03, 0x07, 0x08, 0x80]);
    }
}
