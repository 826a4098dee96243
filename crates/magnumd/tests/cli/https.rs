//! `magnumd api` with `[api] enabled_ssl`: the real `openstack coe` client reaches it over
//! HTTPS through Keystone's catalogue, verifying a test certificate made by openssl; the same
//! client without that CA is refused by its own TLS check, and plain HTTP gets no answer.
//! Runs when MAGNUM_TEST_KEYSTONE=1 and MAGNUM_TEST_RABBIT_URL is set (scripts/test sets both).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::client::{Cli, authtoken_section, free_port, start_keystone_for};

#[test]
fn api_serves_the_openstack_client_over_https() {
    let rabbit = std::env::var("MAGNUM_TEST_RABBIT_URL").ok();
    let (Some(rabbit), true) = (rabbit, magnum_testkit::flag("MAGNUM_TEST_KEYSTONE")) else {
        magnum_testkit::skip("needs MAGNUM_TEST_RABBIT_URL and MAGNUM_TEST_KEYSTONE=1");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (cert, key) = (dir.join("api.crt"), dir.join("api.key"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(
        made.success(),
        "openssl could not make the test certificate"
    );

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
    let api = crate::spawn_magnumd(&conf, "api", std::fs::File::create(&log).unwrap(), api_port);
    running.api = Some(api);

    let with_ca = Cli {
        openstack: env["MAGNUM_TEST_OPENSTACK"].clone(),
        clouds: Some(env["OS_CLIENT_CONFIG_FILE"].clone()),
        global: vec!["--os-cacert".into(), cert.display().to_string()],
    };
    let created = with_ca.json(
        "demo-member",
        &[
            "coe",
            "cluster",
            "template",
            "create",
            "tls-k8s",
            "--coe",
            "kubernetes",
            "--image",
            "fedora-coreos-40",
            "--external-network",
            "public",
        ],
    );
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
