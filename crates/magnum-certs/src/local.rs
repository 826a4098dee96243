//! `local`: certificates as files `<ref>.crt`, `<ref>.key`, `<ref>.int`, `<ref>.pass` in
//! `[certificates] storage_path` (upstream `local_cert_manager`, for tests only).
//!
//! Unlike upstream, files are private (0600, in a 0700 directory when we create it) from
//! the moment they exist, appear only complete (written to a temporary name, synced, then
//! renamed), and a failed store leaves nothing behind.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};

use super::{CertStore, StoredCert};

const CERT: &str = "crt";
const KEY: &str = "key";
const INTERMEDIATES: &str = "int";
const PASSPHRASE: &str = "pass";

/// The `local` backend: one directory on this host.
#[derive(Clone, Debug)]
pub struct LocalStore {
    dir: PathBuf,
}

impl LocalStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        tracing::warn!(
            dir = %dir.display(),
            "certificates are stored as local files ([certificates] cert_manager_type = \
             local); this is for tests only: other hosts cannot read them"
        );
        Self { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Path) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || f(&dir))
            .await
            .map_err(|e| Error::Internal(format!("certificate file task failed: {e}")))?
    }
}

/// Only canonical UUIDs name files: a reference is never a path.
fn canonical_ref(reference: &str) -> Result<String> {
    uuid::Uuid::parse_str(reference)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| Error::X509KeyPairNotFound {
            x509keypair: reference.to_owned(),
        })
}

fn file(dir: &Path, reference: &str, ext: &str) -> PathBuf {
    dir.join(format!("{reference}.{ext}"))
}

fn storage_error(what: &str, e: &io::Error) -> Error {
    // The io error names the path and the cause, never file contents.
    Error::Internal(format!("Could not store certificate: {what}: {e}"))
}

/// Creates `path` (never reusing an existing file) and records it in `created` for cleanup.
fn write_private(path: &Path, content: &str, created: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    created.push(path.to_path_buf());
    f.write_all(content.as_bytes())?;
    f.sync_all()
}

fn store_files(dir: &Path, reference: &str, cert: &StoredCert) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| storage_error("cannot create the storage directory", &e))?;
    let mut parts = vec![
        (CERT, cert.certificate.as_str()),
        (KEY, cert.private_key.as_str()),
    ];
    // Upstream writes the optional files only for non-empty values.
    if let Some(int) = cert.intermediates.as_deref().filter(|s| !s.is_empty()) {
        parts.push((INTERMEDIATES, int));
    }
    if let Some(pass) = cert
        .private_key_passphrase
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        parts.push((PASSPHRASE, pass));
    }
    let mut created: Vec<PathBuf> = Vec::new();
    let result = (|| -> io::Result<()> {
        let mut staged = Vec::new();
        for (ext, content) in &parts {
            let tmp = dir.join(format!(".{reference}.{ext}.tmp"));
            write_private(&tmp, content, &mut created)?;
            staged.push((tmp, file(dir, reference, ext)));
        }
        for (tmp, target) in staged {
            fs::rename(&tmp, &target)?;
            created.push(target);
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            // Best effort: make the renames durable; the files themselves are synced.
            if let Ok(d) = fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        }
        Err(e) => {
            for path in created {
                let _ = fs::remove_file(path);
            }
            Err(storage_error("cannot write certificate files", &e))
        }
    }
}

fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_files(dir: &Path, reference: &str) -> Result<StoredCert> {
    let read = |ext: &str| {
        read_optional(&file(dir, reference, ext))
            .map_err(|e| Error::Internal(format!("Certificate {reference} could not be read: {e}")))
    };
    let not_found = || Error::X509KeyPairNotFound {
        x509keypair: reference.to_owned(),
    };
    let certificate = read(CERT)?.ok_or_else(not_found)?;
    let private_key = read(KEY)?.ok_or_else(|| {
        Error::Internal(format!("Certificate {reference} has no private key file."))
    })?;
    Ok(StoredCert {
        certificate,
        private_key,
        private_key_passphrase: read(PASSPHRASE)?,
        intermediates: read(INTERMEDIATES)?,
    })
}

fn delete_files(dir: &Path, reference: &str) -> Result<()> {
    let mut found = false;
    for ext in [CERT, KEY, INTERMEDIATES, PASSPHRASE] {
        match fs::remove_file(file(dir, reference, ext)) {
            Ok(()) => found = true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::Internal(format!(
                    "Certificate {reference} could not be deleted: {e}"
                )));
            }
        }
    }
    if found {
        Ok(())
    } else {
        Err(Error::X509KeyPairNotFound {
            x509keypair: reference.to_owned(),
        })
    }
}

#[async_trait]
impl CertStore for LocalStore {
    async fn store(&self, _ctx: &RequestContext, _name: &str, cert: &StoredCert) -> Result<String> {
        let reference = uuid::Uuid::new_v4().to_string();
        let cert = cert.clone();
        let r = reference.clone();
        self.blocking(move |dir| store_files(dir, &r, &cert))
            .await?;
        Ok(reference)
    }

    async fn get(&self, _ctx: &RequestContext, reference: &str) -> Result<StoredCert> {
        let r = canonical_ref(reference)?;
        self.blocking(move |dir| read_files(dir, &r)).await
    }

    async fn delete(&self, _ctx: &RequestContext, reference: &str) -> Result<()> {
        let r = canonical_ref(reference)?;
        self.blocking(move |dir| delete_files(dir, &r)).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn sample(with_optional: bool) -> StoredCert {
        StoredCert {
            certificate: "CERT PEM\n".into(),
            private_key: "KEY PEM\n".into(),
            private_key_passphrase: with_optional.then(|| "abcdefghijkl".into()),
            intermediates: with_optional.then(|| "INT PEM\n".into()),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[tokio::test]
    async fn files_are_private_complete_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("certs");
        let store = LocalStore::new(&dir);
        let ctx = RequestContext::default();

        let r = store.store(&ctx, "c", &sample(true)).await.unwrap();
        assert!(uuid::Uuid::parse_str(&r).is_ok());
        assert_eq!(
            names(&dir),
            ["crt", "int", "key", "pass"].map(|e| format!("{r}.{e}"))
        );
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        for n in names(&dir) {
            let mode = fs::metadata(dir.join(&n)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{n}");
        }
        assert_eq!(store.get(&ctx, &r).await.unwrap(), sample(true));

        let r2 = store.store(&ctx, "c", &sample(false)).await.unwrap();
        assert_eq!(store.get(&ctx, &r2).await.unwrap(), sample(false));
        assert_eq!(names(&dir).len(), 6);

        store.delete(&ctx, &r).await.unwrap();
        store.delete(&ctx, &r2).await.unwrap();
        assert!(names(&dir).is_empty());
        assert!(matches!(
            store.get(&ctx, &r).await.unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));
        assert!(matches!(
            store.delete(&ctx, &r).await.unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));
    }

    #[tokio::test]
    async fn references_are_never_paths() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("secret.crt"), "x").unwrap();
        let store = LocalStore::new(tmp.path().join("certs"));
        let ctx = RequestContext::default();
        for bad in ["../secret", "/etc/passwd", ""] {
            assert!(matches!(
                store.get(&ctx, bad).await.unwrap_err(),
                Error::X509KeyPairNotFound { .. }
            ));
            assert!(store.delete(&ctx, bad).await.is_err());
        }
        assert!(tmp.path().join("secret.crt").exists());
    }

    #[tokio::test]
    async fn failed_store_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let store = LocalStore::new(&dir);
        // A directory where the passphrase's temporary file would go makes the last write
        // fail after the others succeeded.
        let r = "6f1d4c7e-3b1a-4e0b-9c53-4cf7a1c0d2aa";
        fs::create_dir(dir.join(format!(".{r}.pass.tmp"))).unwrap();
        let err = store_files(&dir, r, &sample(true)).unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err}");
        assert!(!err.to_string().contains("KEY PEM"));
        assert_eq!(names(&dir), [format!(".{r}.pass.tmp")]);
        assert!(matches!(
            store.get(&RequestContext::default(), r).await.unwrap_err(),
            Error::X509KeyPairNotFound { .. }
        ));
    }
}
