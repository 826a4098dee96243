//! What the suite-wide secrets scan reads. `scripts/test` points `MAGNUM_TEST_SCAN_DIR` at a
//! folder for the whole run; the tests put there the logs of every `magnumd` they started,
//! every error body they were answered, the secrets they handled and the RabbitMQ exchanges
//! where upstream's Python processes take part; `test-support/secrets/scan.py` reads it after
//! the last test, beside what the broker's firehose caught. Without the variable nothing is
//! kept and every function here does nothing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The scan folder of this run, if any.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os("MAGNUM_TEST_SCAN_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

fn unique(name: &str) -> String {
    format!(
        "{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        name
    )
}

fn append(file: &str, line: &str) {
    let Some(d) = dir() else { return };
    let _ = std::fs::create_dir_all(&d);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(d.join(file))
    {
        // One write per line: O_APPEND keeps lines of parallel tests whole.
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// One line: tabs and line breaks would split a record.
fn flat(s: &str) -> String {
    s.replace(['\t', '\r', '\n'], " ")
}

/// Keeps a copy of a log our process wrote (called once the process has stopped).
pub fn keep_log(path: &Path) {
    let Some(d) = dir() else { return };
    let logs = d.join("logs");
    let _ = std::fs::create_dir_all(&logs);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "log".into());
    let _ = std::fs::copy(path, logs.join(unique(&name)));
}

/// Keeps what a one-shot `magnumd` command printed.
pub fn keep_output(name: &str, out: &[u8]) {
    let Some(d) = dir() else { return };
    let logs = d.join("logs");
    let _ = std::fs::create_dir_all(&logs);
    let _ = std::fs::write(logs.join(unique(name)), out);
}

/// An error body a test was answered (status 400 and up).
pub fn error_body(status: u16, body: &str) {
    if status >= 400 {
        append("error-bodies.tsv", &format!("{status}\t{}", flat(body)));
    }
}

/// A secret value that must appear nowhere (a password, an application credential secret).
pub fn secret(what: &str, value: &str) {
    // Short values would match by chance.
    if value.len() >= 8 {
        append("secrets.tsv", &format!("{}\t{}", flat(what), flat(value)));
    }
}

/// Every `*PASSWORD` of an env.sh a test read.
pub fn secrets_of_env<'a>(vars: impl IntoIterator<Item = (&'a String, &'a String)>) {
    for (k, v) in vars {
        if k.ends_with("PASSWORD") {
            secret(k, v);
        }
    }
}

/// Messages published to `exchange` are left out of the scan, for `why`: upstream's Python
/// processes take part there and put the user's token in their RPC context, as upstream does.
pub fn exempt_exchange(exchange: &str, why: &str) {
    append("exempt.tsv", &format!("{}\t{}", flat(exchange), flat(why)));
}
