//! TLS both ways, with test certificates made by openssl. `magnumd api` with `[api]
//! enabled_ssl`: the real `openstack coe` client reaches it over HTTPS through Keystone's
//! catalogue; without the CA the client refuses it, and plain HTTP gets no answer. A real
//! Keystone on HTTPS: `[keystone_authtoken] cafile` (or `insecure`) lets magnumd validate
//! tokens there; without either it refuses Keystone's certificate, and says so.
//! Runs when MAGNUM_TEST_KEYSTONE=1 (and MAGNUM_TEST_RABBIT_URL for `api`; scripts/test sets
//! both).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::client::{Cli, authtoken_section, free_port, start_keystone_for, start_keystone_with};

/// Test PKI in `dir`, made by openssl: a CA, and a server certificate for 127.0.0.1 signed by
/// it (webpki, which magnumd's client uses, refuses a CA certificate as a server's own).
struct TestPki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(args: &[&str]) {
    let st = Command::new("openssl")
        .args(args)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "openssl {args:?} failed");
}

fn test_pki(dir: &Path) -> TestPki {
    let p = |n: &str| dir.join(n).display().to_string();
    let rsa = ["-newkey", "rsa:2048", "-nodes"];
    openssl(
        &[
            &[
                "req",
                "-x509",
                "-days",
                "1",
                "-subj",
                "/CN=magnum-rs test CA",
            ][..],
            &rsa,
            &["-keyout", &p("ca.key"), "-out", &p("ca.crt")],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req", "-subj", "/CN=127.0.0.1"][..],
            &rsa,
            &["-keyout", &p("tls.key"), "-out", &p("tls.csr")],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("tls.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-days",
        "1",
        "-in",
        &p("tls.csr"),
        "-CA",
        &p("ca.crt"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-extfile",
        &p("tls.ext"),
        "-out",
        &p("tls.crt"),
    ]);
    TestPki {
        ca: dir.join("ca.crt"),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    }
}

#[test]
fn api_serves_the_openstack_client_over_https() {
    let rabbit = std::env::var("MAGNUM_TEST_RABBIT_URL").ok();
    let (Some(rabbit), true) = (rabbit, magnum_testkit::flag("MAGNUM_TEST_KEYSTONE")) else {
        magnum_testkit::skip("needs MAGNUM_TEST_RABBIT_URL and MAGNUM_TEST_KEYSTONE=1");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pki = test_pki(dir);
    let (cert, key) = (&pki.cert, &pki.key);

    let api_port = free_port();
    let (mut running, env) = start_keystone_for(dir, &format!("https://127.0.0.1:{api_port}"));
    let conf = dir.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\n\n[api]\nhost = 127.0.0.1\nport = {api_port}\n\
             enabled_ssl = true\nssl_cert_file = {cert}\nssl_key_file = {key}\n\n\
             [database]\nconnection = sqlite:///{db}\n\n{ks}",
            cert = cert.display(),
            key = key.display(),
            db = dir.join("magnum.sqlite").display(),
            ks = authtoken_section(&env),
        ),
    )
    .unwrap();
    let conf = conf.display().to_string();
    let up = crate::magnumd(&["--config-file", &conf, "db", "upgrade"]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let log = dir.join("api.log");
    let api = crate::spawn_magnumd(&conf, "api", &log, api_port);
    running.api = Some(api);

    let with_ca = Cli {
        openstack: env["MAGNUM_TEST_OPENSTACK"].clone(),
        clouds: Some(env["OS_CLIENT_CONFIG_FILE"].clone()),
        global: vec!["--os-cacert".into(), pki.ca.display().to_string()],
    };
    let created = with_ca.create_template("demo-member", "tls-k8s", "fedora-coreos-40", &[]);
    assert_eq!(created["name"], "tls-k8s");
    let listed = with_ca.json("demo-member", &["coe", "cluster", "template", "list"]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "tls-k8s"),
        "{listed}"
    );

    // Without the test CA the client's own verification refuses the server.
    let without_ca = Cli {
        global: Vec::new(),
        ..with_ca
    };
    let out = without_ca.run("demo-member", &["coe", "cluster", "template", "list"]);
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(!out.status.success(), "listed without trusting the CA");
    assert!(err.contains("certificate") || err.contains("ssl"), "{err}");

    // Plain HTTP on the TLS port gets no HTTP answer (a TLS alert, or the connection closed).
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", api_port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!answer.starts_with(b"HTTP/"), "{answer:?}");
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(log.contains("listening on https://"), "{log}");
}

#[test]
fn enabled_ssl_without_a_certificate_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let conf = crate::write_conf(
        dir.path(),
        "magnum.conf",
        &format!(
            "[api]\nenabled_ssl = true\nauth_strategy = noauth\nport = {}\n[certificates]\ncert_manager_type = x509keypair\n[database]\nconnection = sqlite:///{}\n",
            free_port(),
            dir.path().join("m.sqlite").display()
        ),
    );
    let out = crate::magnumd(&["--config-file", &conf, "serve"]);
    crate::assert_one_line_error(&out, 2, "[api] ssl_cert_file must be set");
}

#[test]
fn keystone_over_https_is_trusted_through_cafile_or_insecure() {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pki = test_pki(dir);
    let api_port = free_port();
    let (mut running, env) = start_keystone_with(
        dir,
        &format!("http://127.0.0.1:{api_port}"),
        &[
            ("KEYSTONE_TLS_CERT", &pki.cert),
            ("KEYSTONE_TLS_KEY", &pki.key),
            ("KEYSTONE_TLS_CA", &pki.ca),
        ],
    );
    assert!(
        env["MAGNUM_TEST_AUTH_URL"].starts_with("https://"),
        "{env:?}"
    );
    let conf_with = |name: &str, tls: &str| {
        crate::write_conf(
            dir,
            name,
            &format!(
                "[api]\nhost = 127.0.0.1\nport = {api_port}\n\n[certificates]\n\
                 cert_manager_type = x509keypair\n\n[database]\nconnection = sqlite:///{db}\n\n\
                 {ks}{tls}",
                db = dir.join("magnum.sqlite").display(),
                ks = authtoken_section(&env),
            ),
        )
    };
    let trusted = conf_with("trusted.conf", &format!("cafile = {}\n", pki.ca.display()));
    let untrusted = conf_with("untrusted.conf", "");
    let insecure = conf_with("insecure.conf", "insecure = true\n");

    // `magnumd status` asks Keystone with the service credentials.
    let status = |conf: &str| {
        let out = crate::magnumd(&["--config-file", conf, "status"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find(|l| l.contains("keystone:"))
            .unwrap_or_else(|| panic!("no keystone line in {text}"))
            .to_owned()
    };
    let line = status(&trusted);
    assert!(line.starts_with("OK"), "{line}");
    assert!(line.contains("https://127.0.0.1"), "{line}");
    let line = status(&untrusted);
    assert!(line.starts_with("FAIL"), "{line}");
    // The reason names the refused certificate, not just "error sending request".
    assert!(line.to_lowercase().contains("certificate"), "{line}");
    let line = status(&insecure);
    assert!(line.starts_with("OK"), "{line}");

    // Tokens are validated over HTTPS: the real client, through the catalogue.
    assert!(
        crate::magnumd(&["--config-file", &trusted, "db", "upgrade"])
            .status
            .success()
    );
    let log = dir.join("serve.log");
    running.api = Some(crate::spawn_magnumd(&trusted, "serve", &log, api_port));
    let cli = Cli::keystone(&env);
    let created = cli.create_template("demo-member", "ks-tls", "fedora-coreos-40", &[]);
    assert_eq!(created["name"], "ks-tls");
    assert_eq!(
        created["project_id"].as_str(),
        Some(env["MAGNUM_TEST_DEMO_PROJECT_ID"].as_str())
    );
}

#[test]
fn an_unreadable_keystone_cafile_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let conf = crate::write_conf(
        dir.path(),
        "magnum.conf",
        "[keystone_authtoken]\nauth_url = https://127.0.0.1:1/v3\nusername = magnum\n\
         password = x\nproject_name = service\ncafile = /nonexistent/ca.pem\n\
         [database]\nconnection = sqlite://\n",
    );
    let out = crate::magnumd(&["--config-file", &conf, "api"]);
    crate::assert_one_line_error(&out, 2, "[keystone_authtoken] cafile /nonexistent/ca.pem");
}
