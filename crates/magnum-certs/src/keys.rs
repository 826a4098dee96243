//! Private keys at rest: PKCS#8 `ENCRYPTED PRIVATE KEY` PEM under a short-id passphrase,
//! the form upstream Magnum writes (Python `cryptography`, `BestAvailableEncryption`), so
//! either implementation reads what the other stored.

use pkcs8::der::pem::{self, LineEnding};
use pkcs8::pkcs5::pbes2;
use pkcs8::{EncryptedPrivateKeyInfoRef, PrivateKeyInfoRef};

/// PBKDF2 rounds Python `cryptography` uses for PKCS#8 `BestAvailableEncryption`. The
/// passphrase carries 60 random bits, so more rounds would only slow every CSR signing.
const PBKDF2_ITERATIONS: u32 = 2048;
const SALT_LEN: usize = 16;
const AES_BLOCK: usize = 16;

const LABEL_PLAIN: &str = "PRIVATE KEY";
const LABEL_ENCRYPTED: &str = "ENCRYPTED PRIVATE KEY";

/// Why a key could not be sealed or opened. Messages never include key material or the
/// passphrase.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("private key is not PEM")]
    NotPem,
    #[error("private key PEM label {0:?} is not PKCS#8")]
    UnsupportedLabel(String),
    #[error("private key is not valid PKCS#8")]
    Malformed,
    #[error("private key is encrypted but no passphrase is stored")]
    MissingPassphrase,
    #[error("private key does not decrypt: wrong passphrase or corrupt key")]
    Decrypt,
    #[error("passphrase is not Latin-1 text")]
    PassphraseEncoding,
    #[error("private key encryption failed: {0}")]
    Encrypt(&'static str),
}

/// Upstream's `short_id.generate_id()`: 12 lowercase base32 characters (`a-z2-7`) carrying
/// the 60 random bits of a fresh UUIDv4's time field.
pub fn generate_passphrase() -> String {
    short_id(&uuid::Uuid::new_v4())
}

/// Upstream's `short_id.get_id` for a v4 UUID: the 60-bit time field in 5-bit groups, most
/// significant first. (Upstream pads it to 64 bits and keeps the first 12 base32 characters,
/// which is the same thing.)
pub(crate) fn short_id(u: &uuid::Uuid) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let b = u.as_bytes();
    let time_low = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let time_mid = u64::from(u16::from_be_bytes([b[4], b[5]]));
    let time_hi = u64::from(u16::from_be_bytes([b[6], b[7]]) & 0x0fff);
    let time = (time_hi << 48) | (time_mid << 32) | time_low;
    (0..12)
        .map(|i| char::from(ALPHABET[((time >> (55 - 5 * i)) & 31) as usize]))
        .collect()
}

/// Upstream encodes passphrases as Latin-1 before use; short ids are ASCII, where this is
/// the identity.
fn latin1(passphrase: &str) -> Result<Vec<u8>, KeyError> {
    passphrase
        .chars()
        .map(|c| u8::try_from(u32::from(c)).map_err(|_| KeyError::PassphraseEncoding))
        .collect()
}

fn random<const N: usize>() -> Result<[u8; N], KeyError> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out).map_err(|_| KeyError::Encrypt("no system randomness"))?;
    Ok(out)
}

/// Encrypts an unencrypted PKCS#8 PEM key (`PRIVATE KEY`) into `ENCRYPTED PRIVATE KEY` PEM:
/// PBES2 with PBKDF2-HMAC-SHA256 (2048 rounds, 16-byte salt) and AES-256-CBC.
pub fn encrypt_private_key(pem_text: &str, passphrase: &str) -> Result<String, KeyError> {
    let password = latin1(passphrase)?;
    let (label, der) = decode_pem(pem_text)?;
    if label != LABEL_PLAIN {
        return Err(KeyError::UnsupportedLabel(label));
    }
    let info = PrivateKeyInfoRef::try_from(der.as_slice()).map_err(|_| KeyError::Malformed)?;
    let salt = random::<SALT_LEN>()?;
    let iv = random::<AES_BLOCK>()?;
    let params = pbes2::Parameters::generate_pbkdf2_sha256_aes256cbc(PBKDF2_ITERATIONS, &salt, iv)
        .map_err(|_| KeyError::Encrypt("invalid PBES2 parameters"))?;
    let doc = info
        .encrypt_with_params(params, &password)
        .map_err(|_| KeyError::Encrypt("PBES2 encryption"))?;
    let out = doc
        .to_pem(LABEL_ENCRYPTED, LineEnding::LF)
        .map_err(|_| KeyError::Encrypt("PEM encoding"))?;
    Ok(out.to_string())
}

/// Returns the key as unencrypted PKCS#8 PEM (`PRIVATE KEY`). An `ENCRYPTED PRIVATE KEY` is
/// decrypted with `passphrase` (any PBES2 scheme upstream may have written: PBKDF2 with
/// HMAC-SHA256 or HMAC-SHA1, scrypt; AES-CBC); an unencrypted PKCS#8 key is returned as it
/// is, whether or not a passphrase is given.
pub fn decrypt_private_key(pem_text: &str, passphrase: Option<&str>) -> Result<String, KeyError> {
    let (label, der) = decode_pem(pem_text)?;
    let plain = match label.as_str() {
        LABEL_PLAIN => {
            PrivateKeyInfoRef::try_from(der.as_slice()).map_err(|_| KeyError::Malformed)?;
            return pem::encode_string(LABEL_PLAIN, LineEnding::LF, &der)
                .map_err(|_| KeyError::Malformed);
        }
        LABEL_ENCRYPTED => {
            let passphrase = passphrase
                .filter(|p| !p.is_empty())
                .ok_or(KeyError::MissingPassphrase)?;
            let info = EncryptedPrivateKeyInfoRef::try_from(der.as_slice())
                .map_err(|_| KeyError::Malformed)?;
            info.decrypt(latin1(passphrase)?)
                .map_err(|_| KeyError::Decrypt)?
        }
        _ => return Err(KeyError::UnsupportedLabel(label)),
    };
    // A wrong passphrase almost always fails the padding check; the rare survivor is
    // garbage that does not parse as PKCS#8.
    PrivateKeyInfoRef::try_from(plain.as_bytes()).map_err(|_| KeyError::Decrypt)?;
    let out = plain
        .to_pem(LABEL_PLAIN, LineEnding::LF)
        .map_err(|_| KeyError::Malformed)?;
    Ok(out.to_string())
}

fn decode_pem(text: &str) -> Result<(String, Vec<u8>), KeyError> {
    // OpenSSL, Python and the local store may add or strip surrounding whitespace.
    let trimmed = text.trim();
    let normalised = format!("{trimmed}\n");
    let (label, der) = pem::decode_vec(normalised.as_bytes()).map_err(|_| KeyError::NotPem)?;
    Ok((label.to_owned(), der))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::process::{Command, Stdio};

    use super::*;

    /// A throwaway RSA-1024 key, unencrypted PKCS#8 (made by `openssl genpkey`).
    const PLAIN: &str = include_str!("testdata/plain.pem");
    /// `PLAIN` encrypted by Python `cryptography` 48 with `BestAvailableEncryption(b"a2bcdefghijk")`
    /// (PBES2, PBKDF2-HMAC-SHA256 2048 rounds, AES-256-CBC).
    const PY_ENCRYPTED: &str = include_str!("testdata/python-cryptography.pem");
    /// `PLAIN` encrypted by `openssl pkcs8 -topk8 -v2 aes-256-cbc -v2prf hmacWithSHA1` with
    /// passphrase `a2bcdefghijk`, as OpenSSL 1.0-era Magnum wrote keys.
    const OPENSSL_SHA1: &str = include_str!("testdata/openssl-hmacsha1.pem");
    const PASS: &str = "a2bcdefghijk";

    #[test]
    fn short_id_matches_upstream() {
        // Python: short_id.get_id(uuid.UUID("a4107d71-de4b-4c1e-8e1c-1f5d6a3b9c2e"))
        let u = uuid::Uuid::parse_str("a4107d71-de4b-4c1e-8e1c-1f5d6a3b9c2e").unwrap();
        assert_eq!(short_id(&u), "yhw6josba7lr");
        let p = generate_passphrase();
        assert_eq!(p.len(), 12);
        assert!(
            p.bytes()
                .all(|c| c.is_ascii_lowercase() || (b'2'..=b'7').contains(&c))
        );
        assert_ne!(p, generate_passphrase());
    }

    #[test]
    fn round_trip_and_wrong_passphrase() {
        let enc = encrypt_private_key(PLAIN, PASS).unwrap();
        assert!(enc.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"));
        assert_ne!(
            enc,
            encrypt_private_key(PLAIN, PASS).unwrap(),
            "fresh salt/IV"
        );
        assert_eq!(decrypt_private_key(&enc, Some(PASS)).unwrap(), PLAIN);
        assert_eq!(
            decrypt_private_key(&enc, Some("wrongpassphr")).unwrap_err(),
            KeyError::Decrypt
        );
        assert_eq!(
            decrypt_private_key(&enc, None).unwrap_err(),
            KeyError::MissingPassphrase
        );
    }

    #[test]
    fn unencrypted_keys_pass_through() {
        assert_eq!(decrypt_private_key(PLAIN, None).unwrap(), PLAIN);
        assert_eq!(decrypt_private_key(PLAIN, Some(PASS)).unwrap(), PLAIN);
        let rsa = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert!(matches!(
            decrypt_private_key(rsa, None).unwrap_err(),
            KeyError::UnsupportedLabel(_)
        ));
        assert_eq!(
            decrypt_private_key("garbage", None).unwrap_err(),
            KeyError::NotPem
        );
    }

    #[test]
    fn reads_keys_upstream_wrote() {
        assert_eq!(
            decrypt_private_key(PY_ENCRYPTED, Some(PASS)).unwrap(),
            PLAIN
        );
        assert_eq!(
            decrypt_private_key(OPENSSL_SHA1, Some(PASS)).unwrap(),
            PLAIN
        );
        assert_eq!(
            decrypt_private_key(PY_ENCRYPTED, Some("a2bcdefghijj")).unwrap_err(),
            KeyError::Decrypt
        );
    }

    fn run(cmd: &mut Command, input: &str) -> Option<String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        out.status
            .success()
            .then(|| String::from_utf8(out.stdout).unwrap())
    }

    /// What we store must open in upstream's Python `cryptography` (when installed here)
    /// and in OpenSSL.
    #[test]
    fn upstream_tools_read_what_we_write() {
        let enc = encrypt_private_key(PLAIN, PASS).unwrap();
        let script = "import sys\n\
            from cryptography.hazmat.primitives import serialization as s\n\
            k = s.load_pem_private_key(sys.stdin.read().encode('latin-1'), password=b'a2bcdefghijk')\n\
            sys.stdout.write(k.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()).decode())\n";
        let has_cryptography = Command::new("python3")
            .args(["-c", "import cryptography"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if has_cryptography {
            let out = run(Command::new("python3").args(["-c", script]), &enc)
                .expect("python cryptography refused our key");
            assert_eq!(out, PLAIN);
        }
        let out = run(
            Command::new("openssl").args(["pkcs8", "-passin", &format!("pass:{PASS}")]),
            &enc,
        )
        .expect("openssl refused our key");
        assert_eq!(out, PLAIN);
    }
}
