//! Shared fixtures: RSA keygen is slow in debug builds, so one CA serves all tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use super::{KeyPairPem, X509Options, generate_ca};

pub(crate) fn shared_ca() -> &'static KeyPairPem {
    static CA: OnceLock<KeyPairPem> = OnceLock::new();
    CA.get_or_init(|| generate_ca("test-cluster", &X509Options::default()).unwrap())
}

/// A PKCS#8 RSA key unrelated to the shared CA, made by the openssl CLI (fast, release build).
pub(crate) fn second_key_pem() -> String {
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn der_of(pem: &str) -> Vec<u8> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    p.contents
}
