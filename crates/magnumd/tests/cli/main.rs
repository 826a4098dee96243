//! The `magnumd` binary as an operator runs it: one test binary (see magnum-db's tests).
//! MariaDB/PostgreSQL cases run when MAGNUM_TEST_MYSQL_URL / MAGNUM_TEST_POSTGRES_URL are set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod capi;
mod capi_adopt;
mod capi_labels;
mod client;
mod cloud;
mod crash;
mod faults;
mod fuzz;
mod horizon;
mod https;
mod isolation;
mod lifecycle;
mod partition;
mod rabbit;
mod upstream;

use std::path::Path;
use std::process::{Command, Output};

use magnum_testkit::ChildGuard;
use magnum_testkit::db::{Server, ServerDb};

/// Held by tests that use the machine's RabbitMQ: one of them stops the broker on purpose,
/// which must not happen under another's feet.
pub(crate) static BROKER: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn broker_lock() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed while holding it leaves nothing to repair.
    BROKER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn magnumd(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_magnumd"))
        .args(args)
        .env_remove("RUST_LOG")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    magnum_testkit::scan::keep_output("magnumd-command.out", &out.stdout);
    magnum_testkit::scan::keep_output("magnumd-command.err", &out.stderr);
    out
}

/// `magnumd --config-file <conf> <sub>` in the background, stderr appended to `log` (kept for
/// the secrets scan), once it listens on `port`; stopped when the guard drops.
pub(crate) fn spawn_magnumd(conf: &str, sub: &str, log: &Path, port: u16) -> ChildGuard {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut child = ChildGuard::new(
        Command::new(env!("CARGO_BIN_EXE_magnumd"))
            .args(["--config-file", conf, sub])
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap(),
    )
    .keep_log(log);
    magnum_testkit::wait_for_port(port, &mut child);
    child
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write_conf(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

/// Exactly one line on stderr, starting with our prefix, with no panic or backtrace.
fn assert_one_line_error(out: &Output, code: i32, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.contains(" WARN ")).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("magnumd: error: "), "{err}");
    assert!(lines[0].contains(needle), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
}

fn upgrade_then_version(connection: &str) {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(
        dir.path(),
        "magnum.conf",
        &format!("[database]\nconnection = {connection}\n"),
    );
    let v = magnumd(&["--config-file", &conf, "db", "version"]);
    assert!(v.status.success(), "{}", text(&v.stderr));
    assert_eq!(text(&v.stdout), "None\n");
    for expected in [
        "Created the schema at Alembic head b3e1cf4a2d5e\n",
        "Already at Alembic head b3e1cf4a2d5e; nothing to do\n",
    ] {
        let up = magnumd(&["--config-file", &conf, "db", "upgrade"]);
        assert!(up.status.success(), "{}", text(&up.stderr));
        assert_eq!(text(&up.stdout), expected);
    }
    let v = magnumd(&["--config-file", &conf, "db", "version"]);
    assert_eq!(text(&v.stdout), "b3e1cf4a2d5e\n");
}

/// One HTTP/1.1 request at microversion 1.14, with a Keystone token or (None) as noauth's
/// default caller; (status, JSON body or null).
pub(crate) fn http(
    port: u16,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    let body = body.map(serde_json::Value::to_string).unwrap_or_default();
    let auth = token
        .map(|t| format!("X-Auth-Token: {t}\r\n"))
        .unwrap_or_default();
    let out = magnum_testkit::raw_http(
        port,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}\
             OpenStack-API-Version: container-infra 1.14\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        std::time::Duration::from_secs(90),
    );
    let status = out[9..12].parse().unwrap();
    let json = out
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(serde_json::Value::Null);
    (status, json)
}

/// Started under upstream's command names (links to magnumd, as the package installs them),
/// magnumd runs those commands: `magnum-db-manage upgrade|version`, `magnum-status upgrade
/// check`, with upstream's `--config-file` after the name.
#[test]
fn upstream_command_names_run_their_commands() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("names.sqlite");
    let conf = write_conf(
        dir.path(),
        "magnum.conf",
        &format!("[database]\nconnection = sqlite:///{}\n", db.display()),
    );
    let link = |name: &str| {
        let path = dir.path().join(name);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_magnumd"), &path).unwrap();
        path
    };
    let run = |path: &Path, args: &[&str]| {
        let out = Command::new(path)
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let manage = link("magnum-db-manage");
    let (code, out, err) = run(&manage, &["--config-file", &conf, "version"]);
    assert_eq!((code, out.as_str()), (Some(0), "None\n"), "{err}");
    let (code, out, err) = run(&manage, &["--config-file", &conf, "upgrade"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("b3e1cf4a2d5e"), "{out}");
    let (_, out, _) = run(&manage, &["--config-file", &conf, "version"]);
    assert_eq!(out, "b3e1cf4a2d5e\n");
    // The checks' table, and an exit status of 0, 1 or 2 as upstream's.
    let status = link("magnum-status");
    let (code, out, err) = run(&status, &["--config-file", &conf, "upgrade", "check"]);
    assert!(matches!(code, Some(0..=2)), "{code:?} {err}");
    assert!(out.contains("Check:"), "{out}");
    // magnumd under its own name is unchanged: `version` is not one of its commands.
    let (code, _, _) = run(Path::new(env!("CARGO_BIN_EXE_magnumd")), &["version"]);
    assert_eq!(code, Some(2));
}

#[test]
fn db_upgrade_and_version_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    upgrade_then_version(&format!("sqlite:///{}/magnum.sqlite", dir.path().display()));
}

#[test]
fn db_upgrade_and_version_on_mariadb() {
    let Some(db) = ServerDb::create_blocking(Server::MariaDb, "magnum_cli") else {
        return;
    };
    upgrade_then_version(&db.url_with_scheme("mysql+pymysql"));
}

#[test]
fn db_upgrade_and_version_on_postgresql() {
    let Some(db) = ServerDb::create_blocking(Server::Postgres, "magnum_cli") else {
        return;
    };
    upgrade_then_version(&db.url_with_scheme("postgresql+psycopg2"));
}

#[test]
fn a_bad_value_is_one_line_naming_the_option_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(dir.path(), "bad.conf", "[api]\nport = abc\n");
    let out = magnumd(&["--config-file", &conf, "db", "version"]);
    assert_one_line_error(
        &out,
        2,
        "invalid value for [api] port: 'abc' is not an integer",
    );

    let conf = write_conf(
        dir.path(),
        "bad2.conf",
        "[database]\nconnection = oracle://scott:tiger@db/orcl\n",
    );
    let out = magnumd(&["--config-file", &conf, "db", "upgrade"]);
    assert_one_line_error(&out, 2, "[database] connection");
    assert!(!text(&out.stderr).contains("tiger"));

    let out = magnumd(&["--config-file", "/nonexistent/magnum.conf", "db", "version"]);
    assert_one_line_error(&out, 2, "/nonexistent/magnum.conf");
}

#[test]
fn an_unreachable_database_is_one_line_without_the_password() {
    // Nothing listens on port 1 of loopback.
    let dir = tempfile::tempdir().unwrap();
    for url in [
        "mysql+pymysql://magnum:hunter2@127.0.0.1:1/magnum",
        "postgresql://magnum:hunter2@127.0.0.1:1/magnum",
    ] {
        let conf = write_conf(
            dir.path(),
            "m.conf",
            &format!("[database]\nconnection = {url}\n"),
        );
        let out = magnumd(&["--config-file", &conf, "db", "upgrade"]);
        assert_one_line_error(&out, 1, "cannot connect to");
        assert!(
            text(&out.stderr).contains("magnum:****@127.0.0.1:1"),
            "{}",
            text(&out.stderr)
        );
        assert!(!text(&out.stderr).contains("hunter2"));
    }
}

#[test]
fn unknown_options_warn_and_work_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(
        dir.path(),
        "m.conf",
        &format!(
            "[api]\nno_such_option = 1\n[database]\nconnection = sqlite:///{}/m.sqlite\n",
            dir.path().display()
        ),
    );
    let out = magnumd(&["--config-file", &conf, "db", "version"]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr)
            .contains("configuration options ignored: 1 unknown ([api] no_such_option)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn config_sample_lists_sections_and_reads_back_without_warnings() {
    let out = magnumd(&["config", "sample"]);
    assert!(out.status.success());
    let sample = text(&out.stdout);
    for section in [
        "[DEFAULT]",
        "[api]",
        "[database]",
        "[keystone_authtoken]",
        "[x509]",
        "[oslo_messaging_rabbit]",
    ] {
        assert!(sample.contains(section), "{section} missing");
    }
    assert!(sample.contains("#port = 9511"));
    let dir = tempfile::tempdir().unwrap();
    let conf = write_conf(dir.path(), "sample.conf", &sample);
    let extra = write_conf(
        dir.path(),
        "db.conf",
        &format!(
            "[database]\nconnection = sqlite:///{}/m.sqlite\n",
            dir.path().display()
        ),
    );
    let out = magnumd(&[
        "--config-file",
        &conf,
        "--config-file",
        &extra,
        "db",
        "version",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("WARN"), "{}", text(&out.stderr));
}

/// The embedded default: no config anywhere, `serve` answers on 127.0.0.1:9511 with noauth,
/// its SQLite schema created, and stops cleanly on SIGTERM.
#[test]
fn serve_with_no_config_is_the_embedded_default() {
    use std::io::Read;
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    magnum_testkit::assert_port_free(9511);
    let mut child = ChildGuard::new(
        Command::new(env!("CARGO_BIN_EXE_magnumd"))
            .args(["serve", "--data-dir", &data.display().to_string()])
            .env("HOME", home.path())
            .current_dir(home.path())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    magnum_testkit::wait_for_port(9511, &mut child);
    let reply = magnum_testkit::raw_http(
        9511,
        "GET /v1/clustertemplates HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        std::time::Duration::from_secs(30),
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("\"clustertemplates\":[]"), "{reply}");
    assert!(data.join("magnum.sqlite").exists());
    let pid = child.id().to_string();
    // SIGHUP (systemctl reload, logrotate) never ends the process, log file or not.
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let again = magnum_testkit::raw_http(
        9511,
        "GET /v1/clustertemplates HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        std::time::Duration::from_secs(30),
    );
    assert!(again.starts_with("HTTP/1.1 200"), "after SIGHUP: {again}");
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("AUTHENTICATION IS OFF"), "{err}");
    assert!(err.contains("SIGHUP: no log file to reopen"), "{err}");
}

/// `magnumd serve` on the container image's configuration (packaging/container) with
/// `extra` added to its `[api]` (after the port) in an override file, state and log in `dir`,
/// once it listens on `port`. Returns the child and its log.
fn serve_image_conf(dir: &Path, port: u16, extra: &str) -> (ChildGuard, std::path::PathBuf) {
    let image_conf = crate::client::repo_root().join("packaging/container/magnumd-container.conf");
    let over = write_conf(
        dir,
        "over.conf",
        &format!(
            "[DEFAULT]\nstate_path = {}\n[api]\nport = {port}\n{extra}",
            dir.display()
        ),
    );
    let log = dir.join("serve.log");
    let mut child = ChildGuard::new(
        Command::new(env!("CARGO_BIN_EXE_magnumd"))
            .arg("--config-file")
            .arg(&image_conf)
            .args(["--config-file", &over, "serve"])
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    )
    .keep_log(&log);
    magnum_testkit::wait_for_port(port, &mut child);
    (child, log)
}

/// The runtime threads of `magnumd serve` follow `[api] workers` and `[conductor] workers`
/// (the larger of the two; upstream's process counts), as the runtime reports them: one
/// more than the CPU count (which the default would not give), then 1.
#[test]
fn workers_size_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    for (api, conductor, want) in [(cpus + 1, 1, cpus + 1), (1, 1, 1)] {
        let port = magnum_testkit::free_port();
        let (mut child, log) = serve_image_conf(
            dir.path(),
            port,
            &format!("workers = {api}\n[conductor]\nworkers = {conductor}\n"),
        );
        child.stop();
        // Counted by the runtime itself (threads by name would count its blocking pool too).
        let text = std::fs::read_to_string(&log).unwrap();
        let workers = text.contains(&format!(":{port} with {want} worker threads"));
        assert!(workers, "api {api}, conductor {conductor}: {text}");
    }
}

/// The container image's default command (packaging/container): the embedded default on
/// every address, its state in `state_path`. The image itself is not built here (no
/// container engine on this machine); this runs its configuration with this build.
#[test]
fn container_default_config_serves_the_embedded_default_on_every_address() {
    let dir = tempfile::tempdir().unwrap();
    let port = magnum_testkit::free_port();
    let (mut child, log) = serve_image_conf(dir.path(), port, "");
    let reply = magnum_testkit::raw_http(
        port,
        "GET /v1/clusters HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        std::time::Duration::from_secs(30),
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(dir.path().join("magnum.sqlite").exists());
    child.stop();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(&format!("magnum API listening on http://0.0.0.0:{port}")),
        "{text}"
    );
}

#[test]
fn status_reports_each_check_and_fails_when_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:///{}/m.sqlite", dir.path().display());
    let conf = write_conf(
        dir.path(),
        "ok.conf",
        &format!(
            "[api]\nauth_strategy = noauth\n[database]\nconnection = {db}\n\
             [certificates]\ncert_manager_type = x509keypair\n"
        ),
    );
    let out = magnumd(&["--config-file", &conf, "status"]);
    let report = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an empty database is not ready: {report}"
    );
    assert!(
        report.contains("FAIL  schema: empty; run `magnumd db upgrade`"),
        "{report}"
    );
    assert!(
        magnumd(&["--config-file", &conf, "db", "upgrade"])
            .status
            .success()
    );
    let out = magnumd(&["--config-file", &conf, "status"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("OK    database: reachable at sqlite:"));

    let bad = write_conf(
        dir.path(),
        "bad.conf",
        "[database]\nconnection = mysql+pymysql://u:pw@127.0.0.1:1/x\n",
    );
    let out = magnumd(&["--config-file", &bad, "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("FAIL  database:"));
    assert!(!text(&out.stdout).contains(":pw@"));
    // Barbican (upstream's default store) is not here yet: said, not discovered later.
    assert!(
        text(&out.stdout)
            .contains("FAIL  certificates: [certificates] cert_manager_type = barbican"),
        "{}",
        text(&out.stdout)
    );

    // A broker nobody answers on fails fast, without its password.
    let no_broker = write_conf(
        dir.path(),
        "broker.conf",
        &format!(
            "[DEFAULT]\ntransport_url = rabbit://u:secretpw@127.0.0.1:1/\n\
             [api]\nauth_strategy = noauth\n[database]\nconnection = {db}\n"
        ),
    );
    let out = magnumd(&["--config-file", &no_broker, "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("FAIL  message broker:"),
        "{}",
        text(&out.stdout)
    );
    assert!(!text(&out.stdout).contains("secretpw") && !text(&out.stderr).contains("secretpw"));
    if let Ok(url) = std::env::var("MAGNUM_TEST_RABBIT_URL") {
        let broker = write_conf(
            dir.path(),
            "broker-ok.conf",
            &format!(
                "[DEFAULT]\ntransport_url = {url}\n[api]\nauth_strategy = noauth\n\
                 [database]\nconnection = {db}\n[certificates]\ncert_manager_type = x509keypair\n"
            ),
        );
        let out = magnumd(&["--config-file", &broker, "status"]);
        assert!(out.status.success(), "{}", text(&out.stdout));
        assert!(text(&out.stdout).contains("OK    message broker:"));
    }
}
