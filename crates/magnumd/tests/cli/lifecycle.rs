//! A cluster's whole life through the real `openstack coe` client against `magnumd serve`
//! (API and conductor in one process, simulated driver): create, show, resize, upgrade,
//! nodegroups, CA show/sign/rotate, kubeconfig, delete, and a failure on demand. Run on SQLite
//! with noauth here, and on MariaDB with Keystone from `client.rs`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;

use crate::client::{Cli, Running, free_port, repo_root, wait_for_port};

/// magnum.conf lines that make the simulated driver quick and the sweep frequent.
pub(crate) const FAST_SIMULATION: &str = "[simulated_driver]\ncreate_delay = 1\nupdate_delay = 0.5\ndelete_delay = 0.5\n\n\
     [conductor]\nsync_interval = 2\nreport_interval = 2\n\n[certificates]\ncert_manager_type = x509keypair\n";

pub(crate) fn openssl(args: &[&str]) -> std::process::Output {
    let out = Command::new("openssl").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The first PEM block in `text`.
pub(crate) fn pem(text: &str) -> String {
    let start = text
        .find("-----BEGIN CERTIFICATE-----")
        .unwrap_or_else(|| panic!("no certificate in {text}"));
    let end = text[start..].find("-----END CERTIFICATE-----").unwrap() + start + 25;
    format!("{}\n", &text[start..end])
}

pub(crate) fn show(cli: &Cli, cloud: &str, cluster: &str) -> Value {
    cli.json(cloud, &["coe", "cluster", "show", cluster])
}

/// Polls `cluster show` until its status is `want`; fails fast on an unexpected failure. A
/// cast may not have been handled yet when this starts, so the old status is waited out too.
pub(crate) fn wait_status(cli: &Cli, cloud: &str, cluster: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let c = show(cli, cloud, cluster);
        let status = c["status"].as_str().unwrap_or_default().to_owned();
        if status == want {
            return c;
        }
        assert!(
            !status.ends_with("_FAILED"),
            "{cluster}: expected {want}, got {status}: {}",
            c["status_reason"]
        );
        assert!(Instant::now() < deadline, "{cluster} stuck in {status}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Polls `nodegroup show` until `done` holds for it (the cluster's own status may still show
/// the previous operation's result when a cast has not been handled yet).
fn wait_nodegroup(cli: &Cli, cloud: &str, ng: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let n = cli.json(cloud, &["coe", "nodegroup", "show", "life", ng]);
        if done(&n) {
            return n;
        }
        assert!(
            !n["status"]
                .as_str()
                .unwrap_or_default()
                .ends_with("_FAILED"),
            "{n}"
        );
        assert!(Instant::now() < deadline, "nodegroup {ng} stuck: {n}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn nodegroups(cli: &Cli, cloud: &str, cluster: &str) -> Vec<Value> {
    cli.json(cloud, &["coe", "nodegroup", "list", cluster])
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The whole life of one cluster as `cloud` (a persona allowed to manage clusters).
/// `coe ca show` of `cluster` (the CA, returned), and a CSR signed by it with `coe ca sign`,
/// verified with openssl. Files go to `work`.
pub(crate) fn check_ca_and_signing(cli: &Cli, cloud: &str, cluster: &str, work: &Path) -> String {
    let ca = pem(&cli.ok(cloud, &["coe", "ca", "show", cluster]));
    let ca_file = work.join(format!("{cluster}-ca.pem"));
    std::fs::write(&ca_file, &ca).unwrap();
    let (key, csr) = (work.join("user.key"), work.join("user.csr"));
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=alice/O=developers",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        csr.to_str().unwrap(),
    ]);
    let signed = pem(&cli.ok(
        cloud,
        &["coe", "ca", "sign", cluster, csr.to_str().unwrap()],
    ));
    let signed_file = work.join("user.crt");
    std::fs::write(&signed_file, &signed).unwrap();
    let verified = openssl(&[
        "verify",
        "-CAfile",
        ca_file.to_str().unwrap(),
        signed_file.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&verified.stdout).contains(": OK"));
    let subject = openssl(&[
        "x509",
        "-noout",
        "-subject",
        "-in",
        signed_file.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&subject.stdout).contains("alice"));
    ca
}

/// `coe cluster config` of `cluster`: the kubeconfig (returned), whose client certificate its
/// CA verifies (openssl).
pub(crate) fn check_kubeconfig(cli: &Cli, cloud: &str, cluster: &str, work: &Path) -> String {
    let kube_dir = work.join(format!("{cluster}-kube"));
    std::fs::create_dir_all(&kube_dir).unwrap();
    cli.ok(
        cloud,
        &[
            "coe",
            "cluster",
            "config",
            cluster,
            "--dir",
            kube_dir.to_str().unwrap(),
            "--force",
        ],
    );
    let kubeconfig = std::fs::read_to_string(kube_dir.join("config")).unwrap();
    let field = |name: &str| {
        let line = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {kubeconfig}"));
        base64::engine::general_purpose::STANDARD
            .decode(line.trim())
            .unwrap()
    };
    let (kca, kcert) = (work.join("kube-ca.pem"), work.join("kube-client.pem"));
    std::fs::write(&kca, field("certificate-authority-data")).unwrap();
    std::fs::write(&kcert, field("client-certificate-data")).unwrap();
    let verified = openssl(&[
        "verify",
        "-CAfile",
        kca.to_str().unwrap(),
        kcert.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&verified.stdout).contains(": OK"));
    kubeconfig
}

/// Its templates use `image`, with `extra` options (flavors where the cloud checks them).
pub(crate) fn cluster_lifecycle(cli: &Cli, cloud: &str, work: &Path, image: &str, extra: &[&str]) {
    let template = |name: &str, kube: &str| {
        let label = format!("kube_tag={kube}");
        let mut args = vec!["--label", label.as_str()];
        args.extend_from_slice(extra);
        cli.create_template(cloud, name, image, &args)
    };
    template("life-v130", "v1.30.4");
    let newer = template("life-v131", "v1.31.1");

    // Create: the cluster is there at once, with its nodegroups, and completes.
    let accepted = cli.ok(
        cloud,
        &[
            "coe",
            "cluster",
            "create",
            "life",
            "--cluster-template",
            "life-v130",
            "--node-count",
            "2",
            "--master-count",
            "1",
        ],
    );
    assert!(accepted.contains("accepted"), "{accepted}");
    let first = show(cli, cloud, "life");
    assert_eq!(first["node_count"], 2, "{first}");
    assert_eq!(first["master_count"], 1, "{first}");
    assert_eq!(nodegroups(cli, cloud, "life").len(), 2);
    let c = wait_status(cli, cloud, "life", "CREATE_COMPLETE");
    assert!(
        c["api_address"].as_str().unwrap().starts_with("https://"),
        "{c}"
    );
    assert_eq!(c["coe_version"], "v1.30.4");
    assert_eq!(c["node_addresses"].as_array().map(Vec::len), Some(2), "{c}");

    // Resize, then upgrade.
    cli.ok(cloud, &["coe", "cluster", "resize", "life", "3"]);
    let c = wait_status(cli, cloud, "life", "UPDATE_COMPLETE");
    assert_eq!(c["node_count"], 3, "{c}");
    cli.ok(cloud, &["coe", "cluster", "upgrade", "life", "life-v131"]);
    let c = wait_status(cli, cloud, "life", "UPDATE_COMPLETE");
    assert_eq!(c["cluster_template_id"], newer["uuid"], "{c}");
    assert_eq!(c["coe_version"], "v1.31.1");

    // Nodegroups.
    cli.ok(
        cloud,
        &[
            "coe",
            "nodegroup",
            "create",
            "life",
            "extra",
            "--node-count",
            "2",
        ],
    );
    let ng = cli.json(cloud, &["coe", "nodegroup", "show", "life", "extra"]);
    assert_eq!(ng["node_count"], 2, "{ng}");
    wait_nodegroup(cli, cloud, "extra", |n| n["status"] == "CREATE_COMPLETE");
    wait_status(cli, cloud, "life", "UPDATE_COMPLETE");
    assert_eq!(nodegroups(cli, cloud, "life").len(), 3);
    cli.ok(
        cloud,
        &[
            "coe",
            "nodegroup",
            "update",
            "life",
            "extra",
            "--max-nodes",
            "5",
        ],
    );
    wait_nodegroup(cli, cloud, "extra", |n| {
        n["max_node_count"] == 5 && n["status"] == "UPDATE_COMPLETE"
    });
    wait_status(cli, cloud, "life", "UPDATE_COMPLETE");
    cli.ok(cloud, &["coe", "nodegroup", "delete", "life", "extra"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while nodegroups(cli, cloud, "life").len() != 2 {
        assert!(Instant::now() < deadline, "nodegroup extra never went away");
        std::thread::sleep(Duration::from_millis(500));
    }
    wait_status(cli, cloud, "life", "UPDATE_COMPLETE");

    // The CA, a CSR signed by it, and a kubeconfig whose client certificate it verifies.
    let ca = check_ca_and_signing(cli, cloud, "life", work);
    let kubeconfig = check_kubeconfig(cli, cloud, "life", work);
    assert!(kubeconfig.contains(c["api_address"].as_str().unwrap()));

    // CA rotation: a new CA, which no longer verifies the old client certificate.
    cli.ok(cloud, &["coe", "ca", "rotate", "life"]);
    wait_status(cli, cloud, "life", "UPDATE_COMPLETE");
    let rotated = pem(&cli.ok(cloud, &["coe", "ca", "show", "life"]));
    assert_ne!(rotated, ca);

    // Delete: gone, then 404.
    cli.ok(cloud, &["coe", "cluster", "delete", "life"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = cli.run(cloud, &["coe", "cluster", "show", "life"]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("(HTTP 404)"), "{err}");
            break;
        }
        assert!(Instant::now() < deadline, "cluster never went away");
        std::thread::sleep(Duration::from_millis(500));
    }

    // A failure on demand ends CREATE_FAILED with a reason a user can read.
    cli.ok(
        cloud,
        &[
            "coe",
            "cluster",
            "create",
            "doomed",
            "--cluster-template",
            "life-v130",
            "--labels",
            "simulated_failure=create",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let failed = loop {
        let c = show(cli, cloud, "doomed");
        if c["status"] == "CREATE_FAILED" {
            break c;
        }
        assert_eq!(c["status"], "CREATE_IN_PROGRESS", "{c}");
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        failed["status_reason"],
        "Simulated failure of create requested by label simulated_failure."
    );
    cli.ok(cloud, &["coe", "cluster", "delete", "doomed"]);
}

#[test]
fn cluster_lifecycle_on_sqlite_with_the_openstack_client() {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1 (no python client venv)");
        return;
    }
    let st = Command::new("bash")
        .arg(repo_root().join("test-support/keystone/setup-venv.sh"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "python client venv");
    let venv =
        std::env::var("MAGNUM_TEST_VENV").unwrap_or_else(|_| "/var/tmp/magnum-rs-venv".into());
    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[api]\nhost = 127.0.0.1\nport = {port}\nauth_strategy = noauth\n\n\
             [database]\nconnection = sqlite:///{}/magnum.sqlite\n\n{FAST_SIMULATION}",
            work.path().display()
        ),
    )
    .unwrap();
    let log = work.path().join("serve.log");
    let serve = crate::spawn_magnumd(conf.to_str().unwrap(), "serve", &log, port);
    let _running = Running {
        api: Some(serve),
        keystone_dir: work.path().join("no-keystone"),
    };
    let cli = Cli {
        openstack: format!("{venv}/bin/openstack"),
        clouds: None,
        global: vec![
            "--os-auth-type".into(),
            "none".into(),
            "--os-endpoint".into(),
            format!("http://127.0.0.1:{port}/v1"),
        ],
    };
    cluster_lifecycle(&cli, "", work.path(), "ubuntu-2204", &[]);
}

/// Percent-encodes a PromQL query for a URL.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Debian's Prometheus on a free port, scraping with `config` (its YAML, without `global`),
/// every second; its data in `dir`.
fn start_prometheus(
    prometheus: &str,
    dir: &Path,
    config: &str,
) -> (magnum_testkit::ChildGuard, u16) {
    let port = free_port();
    let conf = dir.join("prometheus.yml");
    std::fs::write(
        &conf,
        format!("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{config}"),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let mut prom = magnum_testkit::ChildGuard::spawn(
        Command::new(prometheus)
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log),
    );
    wait_for_port(port, &mut prom);
    (prom, port)
}

/// A GET of Prometheus's HTTP API, as JSON (Null if it did not answer with some).
fn prometheus_get(port: u16, path: &str) -> Value {
    let reply = magnum_testkit::raw_http(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
        Duration::from_secs(10),
    );
    serde_json::from_str(reply.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap_or(Value::Null)
}

/// A real Prometheus (Debian's) scrapes `/metrics` of `magnumd serve` while a cluster is made;
/// its queries for the request rate by status and for clusters by status answer the series
/// the traffic made.
#[test]
fn prometheus_scrapes_request_rates_and_clusters_by_status() {
    let Some(prometheus) = magnum_testkit::env_or_skip("MAGNUM_TEST_PROMETHEUS") else {
        return;
    };
    let st = Command::new("bash")
        .arg(repo_root().join("test-support/keystone/setup-venv.sh"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "python client venv");
    let venv =
        std::env::var("MAGNUM_TEST_VENV").unwrap_or_else(|_| "/var/tmp/magnum-rs-venv".into());
    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[api]\nhost = 127.0.0.1\nport = {port}\nauth_strategy = noauth\n\n\
             [metrics]\nenabled = true\n\n\
             [database]\nconnection = sqlite:///{}/magnum.sqlite\n\n{FAST_SIMULATION}",
            work.path().display()
        ),
    )
    .unwrap();
    let log = work.path().join("serve.log");
    let serve = crate::spawn_magnumd(conf.to_str().unwrap(), "serve", &log, port);
    let _running = Running {
        api: Some(serve),
        keystone_dir: work.path().join("no-keystone"),
    };
    let (_prom, prom_port) = start_prometheus(
        &prometheus,
        work.path(),
        &format!(
            "scrape_configs:\n  - job_name: magnum\n    metrics_path: /metrics\n\
             \x20   static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    );

    let cli = Cli {
        openstack: format!("{venv}/bin/openstack"),
        clouds: None,
        global: vec![
            "--os-auth-type".into(),
            "none".into(),
            "--os-endpoint".into(),
            format!("http://127.0.0.1:{port}/v1"),
        ],
    };
    cli.create_template("", "scraped-t", "ubuntu-2204", &[]);
    for name in ["scraped-a", "scraped-b"] {
        cli.ok(
            "",
            &[
                "coe",
                "cluster",
                "create",
                name,
                "--cluster-template",
                "scraped-t",
            ],
        );
    }
    for name in ["scraped-a", "scraped-b"] {
        wait_status(&cli, "", name, "CREATE_COMPLETE");
    }
    let query = |q: &str| prometheus_get(prom_port, &format!("/api/v1/query?query={}", encode(q)));
    let series = |v: &Value, label: &str| -> Vec<(String, f64)> {
        v["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["metric"][label].as_str().unwrap_or_default().to_owned(),
                    r["value"][1]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0.0),
                )
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let rates = series(
            &query("sum by (status) (rate(magnum_api_requests_total[30s]))"),
            "status",
        );
        let clusters = series(&query("magnum_clusters"), "status");
        let has = |s: &[(String, f64)], k: &str| s.iter().any(|(n, _)| n == k);
        let complete = clusters
            .iter()
            .find(|(s, _)| s == "CREATE_COMPLETE")
            .map(|(_, v)| *v);
        if has(&rates, "201") && has(&rates, "202") && has(&rates, "200") && complete == Some(2.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never saw the traffic: rates {rates:?}, clusters {clusters:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The alerting rules the package ships (packaging/prometheus) pass `promtool check rules` and
/// their own `promtool test rules`; then a real Prometheus, scraping `magnumd serve` and
/// evaluating them, fires `MagnumConductorDown` once a second conductor is killed, and not
/// before.
#[test]
fn shipped_alert_rules_check_and_fire_when_a_conductor_dies() {
    let Some(prometheus) = magnum_testkit::env_or_skip("MAGNUM_TEST_PROMETHEUS") else {
        return;
    };
    let Some(rabbit) = magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL") else {
        return;
    };
    // Another test may stop the broker (a partition); the rest of the suite waits for ours.
    let _broker = crate::broker_lock();
    let rules_dir = repo_root().join("packaging/prometheus");
    let promtool = Path::new(&prometheus).with_file_name("promtool");
    for args in [
        ["check", "rules", "magnum-rs.rules.yml"],
        ["test", "rules", "magnum-rs.rules.test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(&rules_dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let work = tempfile::tempdir().unwrap();
    // The shipped expressions; only `for:` is cut to 0s so the test does not wait minutes.
    let shipped = std::fs::read_to_string(rules_dir.join("magnum-rs.rules.yml")).unwrap();
    let rules: Vec<String> = shipped
        .lines()
        .map(|l| match l.trim_start().strip_prefix("for: ") {
            Some(_) => format!("{}for: 0s", &l[..l.len() - l.trim_start().len()]),
            None => l.to_owned(),
        })
        .collect();
    let rules_file = work.path().join("rules.yml");
    std::fs::write(&rules_file, rules.join("\n")).unwrap();

    // `magnumd serve` (API and a conductor; noauth is for serve only) and a second
    // conductor of another host, which is then killed.
    let (port, metrics_port) = (free_port(), free_port());
    let tag = magnum_testkit::tag();
    let conf_for = |host: &str| {
        let conf = work.path().join(format!("{host}.conf"));
        std::fs::write(
            &conf,
            format!(
                "[DEFAULT]\nhost = {host}\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
                 service_down_time = 3\n\n\
                 [api]\nhost = 127.0.0.1\nport = {port}\nauth_strategy = noauth\n\n\
                 [metrics]\nenabled = true\nconductor_port = {metrics_port}\n\n\
                 [database]\nconnection = sqlite:///{}/magnum.sqlite\n\n{FAST_SIMULATION}\n\
                 [conductor]\ntopic = magnum-conductor-{tag}\n",
                work.path().display()
            ),
        )
        .unwrap();
        conf.display().to_string()
    };
    let (serve_conf, doomed_conf) = (conf_for("staying"), conf_for("doomed"));
    assert!(
        crate::magnumd(&["--config-file", &serve_conf, "db", "upgrade"])
            .status
            .success()
    );
    let _serve = crate::spawn_magnumd(&serve_conf, "serve", &work.path().join("serve.log"), port);
    let mut conductor = crate::spawn_magnumd(
        &doomed_conf,
        "conductor",
        &work.path().join("conductor.log"),
        metrics_port,
    );

    let (_prom, prom_port) = start_prometheus(
        &prometheus,
        work.path(),
        &format!(
            "rule_files: ['{}']\n\
             scrape_configs:\n  - job_name: magnum-api\n\
             \x20   static_configs:\n      - targets: ['127.0.0.1:{port}']\n",
            rules_file.display()
        ),
    );
    let get = |path: &str| prometheus_get(prom_port, path);
    let up_conductors = || -> Option<f64> {
        get("/api/v1/query?query=magnum_conductors%7Bstate%3D%22up%22%7D")["data"]["result"][0]
            ["value"][1]
            .as_str()
            .and_then(|v| v.parse().ok())
    };
    let firing = || -> Vec<String> {
        get("/api/v1/alerts")["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "firing")
            .filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_owned))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(45);
    while up_conductors() != Some(2.0) {
        assert!(
            Instant::now() < deadline,
            "Prometheus never saw the conductor up: {:?}",
            get("/api/v1/query?query=magnum_conductors")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Rules are evaluated every second: give them a few rounds with the conductor alive.
    std::thread::sleep(Duration::from_secs(3));
    let before = firing();
    assert!(
        !before
            .iter()
            .any(|a| a.starts_with("MagnumConductor") || a == "MagnumNoConductorUp"),
        "alerts fired while the conductor was up: {before:?}"
    );

    conductor.stop();
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(60);
    loop {
        let now_firing = firing();
        if now_firing.iter().any(|a| a == "MagnumConductorDown") {
            // One conductor is left: the alert for none must stay quiet.
            assert!(
                !now_firing.iter().any(|a| a == "MagnumNoConductorUp"),
                "{now_firing:?}"
            );
            eprintln!(
                "MagnumConductorDown firing {:.1} s after the kill",
                killed.elapsed().as_secs_f64()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no conductor-down alert 60 s after the kill: firing {now_firing:?}, {:?}",
            get("/api/v1/query?query=magnum_conductors")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// User, password, host and port of a test server URL (`mysql://u:p@host:port`).
fn server_parts(base: &str) -> (String, String, String, String) {
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    let (cred, addr) = rest.split_once('@').unwrap_or(("", rest));
    let (user, pw) = cred.split_once(':').unwrap_or((cred, ""));
    let (host, port) = addr.split_once(':').unwrap_or((addr, ""));
    (user.into(), pw.into(), host.into(), port.into())
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The backup and restore docs/operations.md gives, with each server's own tools: a database
/// `magnumd serve` wrote (templates, clusters, nodegroups, certificates), dumped with
/// mysqldump or pg_dump and loaded into an empty database, serves the same answers to every
/// GET and passes the upgrade check.
#[test]
fn backup_and_restore_with_the_servers_own_tools() {
    use magnum_testkit::db::{Server, ServerDb};
    for server in [Server::MariaDb, Server::Postgres] {
        let Some(src) = ServerDb::create_blocking(server, "magnum_backup") else {
            continue;
        };
        let dst = ServerDb::create_blocking(server, "magnum_restored").unwrap();
        let work = tempfile::tempdir().unwrap();
        let port = free_port();
        let conf_for = |db: &ServerDb| {
            let conf = work.path().join(format!("{}.conf", db.name));
            let scheme = match server {
                Server::MariaDb => "mysql+pymysql",
                Server::Postgres => "postgresql+psycopg2",
            };
            std::fs::write(
                &conf,
                format!(
                    "[api]\nhost = 127.0.0.1\nport = {port}\nauth_strategy = noauth\n\n\
                     [database]\nconnection = {}\n\n{FAST_SIMULATION}",
                    db.url_with_scheme(scheme)
                ),
            )
            .unwrap();
            conf.display().to_string()
        };
        let (src_conf, dst_conf) = (conf_for(&src), conf_for(&dst));
        assert!(
            crate::magnumd(&["--config-file", &src_conf, "db", "upgrade"])
                .status
                .success()
        );
        let http = |method: &str, path: &str, body: &str| -> (u16, Value) {
            let reply = magnum_testkit::raw_http(
                port,
                &format!(
                    "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                     OpenStack-API-Version: container-infra latest\r\n\
                     Content-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                ),
                Duration::from_secs(30),
            );
            let status = reply.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
            let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
            (status, serde_json::from_str(body).unwrap_or(Value::Null))
        };
        let log = work.path().join("serve.log");
        let mut serve = crate::spawn_magnumd(&src_conf, "serve", &log, port);
        let (st, t) = http(
            "POST",
            "/v1/clustertemplates",
            r#"{"name": "kept-t", "image_id": "img", "coe": "kubernetes", "external_network_id": "ext", "labels": {"kube_tag": "v1.31.1"}}"#,
        );
        assert_eq!(st, 201, "{t}");
        let mut clusters = Vec::new();
        for name in ["kept-a", "kept-b"] {
            let (st, c) = http(
                "POST",
                "/v1/clusters",
                &format!(
                    r#"{{"name": "{name}", "cluster_template_id": "kept-t", "node_count": 2}}"#
                ),
            );
            assert_eq!(st, 202, "{c}");
            clusters.push(c["uuid"].as_str().unwrap().to_owned());
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for uuid in &clusters {
            loop {
                let (_, c) = http("GET", &format!("/v1/clusters/{uuid}"), "");
                if c["status"] == "CREATE_COMPLETE" {
                    break;
                }
                assert!(Instant::now() < deadline, "{c}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let (st, ng) = http(
            "POST",
            &format!("/v1/clusters/{}/nodegroups", clusters[0]),
            r#"{"name": "extra", "node_count": 1}"#,
        );
        assert_eq!(st, 202, "{ng}");
        let mut gets = vec![
            "/v1/clustertemplates/detail".to_owned(),
            "/v1/clusters/detail".to_owned(),
            "/v1/quotas".to_owned(),
            "/v1/stats".to_owned(),
        ];
        gets.push(format!("/v1/clusters/{}/nodegroups/extra", clusters[0]));
        for uuid in &clusters {
            gets.push(format!("/v1/clusters/{uuid}"));
            gets.push(format!("/v1/clusters/{uuid}/nodegroups"));
            gets.push(format!("/v1/certificates/{uuid}"));
        }
        // Wait for the nodegroup to settle, so both sides see the same state.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, n) = http(
                "GET",
                &format!("/v1/clusters/{}/nodegroups/extra", clusters[0]),
                "",
            );
            if n["status"] == "CREATE_COMPLETE" {
                break;
            }
            assert!(Instant::now() < deadline, "{n}");
            std::thread::sleep(Duration::from_millis(200));
        }
        let before: Vec<(u16, Value)> = gets.iter().map(|p| http("GET", p, "")).collect();
        serve.stop();

        let dump = work.path().join("dump");
        let (user, pw, host, db_port) = server_parts(&src.base);
        match server {
            Server::MariaDb => {
                let file = std::fs::File::create(&dump).unwrap();
                let mut cmd = Command::new("mysqldump");
                cmd.args(["--single-transaction", "--routines", "--triggers"])
                    .args(["-h", &host, "-P", &db_port, "-u", &user])
                    .arg(format!("-p{pw}"))
                    .arg(&src.name)
                    .stdout(file);
                run_ok(&mut cmd);
                let file = std::fs::File::open(&dump).unwrap();
                run_ok(
                    Command::new("mysql")
                        .args(["-h", &host, "-P", &db_port, "-u", &user])
                        .arg(format!("-p{pw}"))
                        .arg(&dst.name)
                        .stdin(file),
                );
            }
            Server::Postgres => {
                run_ok(
                    Command::new("pg_dump")
                        .args(["-h", &host, "-p", &db_port, "-U", &user, "-Fc", "-f"])
                        .arg(&dump)
                        .arg(&src.name)
                        .env("PGPASSWORD", &pw),
                );
                run_ok(
                    Command::new("pg_restore")
                        .args(["-h", &host, "-p", &db_port, "-U", &user, "--no-owner", "-d"])
                        .arg(&dst.name)
                        .arg(&dump)
                        .env("PGPASSWORD", &pw),
                );
            }
        }
        drop(src);
        let check = crate::magnumd(&["--config-file", &dst_conf, "status", "upgrade", "check"]);
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stdout)
        );
        let _restored = crate::spawn_magnumd(&dst_conf, "serve", &log, port);
        for (path, (st, body)) in gets.iter().zip(&before) {
            assert_eq!(*st, 200, "{path} before the backup: {body}");
            let (st2, body2) = http("GET", path, "");
            assert_eq!(
                (st2, &body2),
                (*st, body),
                "{server:?}: {path} after the restore"
            );
        }
        eprintln!(
            "{server:?}: {} GETs equal after a dump and restore",
            gets.len()
        );
    }
}
