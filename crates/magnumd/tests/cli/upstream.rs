//! Interoperability with upstream Python Magnum 23.0.0 over RabbitMQ (oslo.messaging wire
//! format), both sides on one MariaDB:
//! (a) upstream's own conductor RPC client (`magnum.conductor.api.API`, driven by
//!     test-support/upstream/conductor_client.py) gets the CA and a signed certificate from
//!     `magnumd conductor`, and its `cluster_delete` cast is carried out by it;
//! (b) upstream's `magnum-conductor` serves `magnumd api`'s `cluster_create` (with
//!     `[api] create_cluster_in_conductor = true`): the Python conductor inserts the cluster
//!     and its default nodegroups and sets the outcome (CREATE_FAILED: no driver upstream).
//! Runs when MAGNUM_TEST_KEYSTONE=1, MAGNUM_TEST_UPSTREAM=1 and MAGNUM_TEST_RABBIT_URL are set.
//! MAGNUM_TEST_KEEP_LOGS=<dir> copies the four services' logs there when the test passes (a
//! failure prints the relevant ones).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Cli, free_port, repo_root, wait_for_port};
use magnum_testkit::Children;
use magnum_testkit::db::{Server, ServerDb};

fn magnumd(conf: &Path, sub: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_magnumd"));
    cmd.arg("--config-file").arg(conf).arg(sub);
    cmd
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Panics with its logs (in `w`) if the upstream conductor `procs.0[i]` has exited.
fn assert_py_running(procs: &mut Children, i: usize, w: &Path) {
    if let Ok(Some(st)) = procs.0[i].try_wait() {
        panic!(
            "upstream conductor exited {st}:\n{}{}",
            log_of(&w.join("py-conductor.stderr")),
            log_of(&w.join("py-conductor.log"))
        );
    }
}

/// The upstream venv (built on first use), or None when the test is to be skipped.
fn gate() -> Option<(String, PathBuf)> {
    let rabbit = std::env::var("MAGNUM_TEST_RABBIT_URL")
        .ok()
        .filter(|v| !v.is_empty());
    let on = magnum_testkit::flag;
    let (Some(rabbit), true, true) = (
        rabbit,
        on("MAGNUM_TEST_KEYSTONE"),
        on("MAGNUM_TEST_UPSTREAM"),
    ) else {
        magnum_testkit::skip(
            "needs MAGNUM_TEST_RABBIT_URL, MAGNUM_TEST_KEYSTONE=1, MAGNUM_TEST_UPSTREAM=1",
        );
        return None;
    };
    Some((rabbit, PathBuf::from(venv())))
}

/// The upstream venv's folder, built first if needed (test-support/upstream/setup-venv.sh).
pub(crate) fn venv() -> String {
    let st = Command::new("bash")
        .arg(repo_root().join("test-support/upstream/setup-venv.sh"))
        .status()
        .unwrap();
    assert!(st.success(), "upstream venv setup failed");
    std::env::var("MAGNUM_TEST_UPSTREAM_VENV")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "/var/tmp/magnum-rs-upstream-venv".into())
}

#[test]
fn upstream_client_and_upstream_conductor_interoperate() {
    let Some((rabbit, venv)) = gate() else {
        return;
    };
    let _broker = crate::broker_lock();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let api_port = free_port();
    let (_keystone, env) = crate::client::start_keystone(w, api_port);
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let db_url = db.url_with_scheme("mysql+pymysql");
    let tag = magnum_testkit::tag();
    // Upstream's processes put the user's token in their RPC context (and our API does so for
    // Python conductors): the secrets scan leaves this exchange out.
    magnum_testkit::scan::exempt_exchange(&format!("magnum_{tag}"), "upstream's Python Magnum");
    // One file for both sides; everything but the topic, the API port and
    // create_cluster_in_conductor is shared by (a) and (b).
    let conf = |name: &str, topic: &str, port: u16, in_conductor: bool| {
        let p = w.join(name);
        std::fs::write(
            &p,
            format!(
                "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
                 rpc_response_timeout = 30\nhost = {name}-{tag}\ndebug = true\n\n\
                 [conductor]\ntopic = {topic}\nworkers = 1\n\n\
                 [oslo_messaging_notifications]\ndriver = messagingv2\ntopics = notifications_{tag}\n\n\
                 [api]\nhost = 127.0.0.1\nport = {port}\ncreate_cluster_in_conductor = {in_conductor}\n\n\
                 [database]\nconnection = {db_url}\n\n\
                 [keystone_authtoken]\nwww_authenticate_uri = {auth}\nauth_url = {auth}\nauth_type = password\n\
                 username = {user}\npassword = {pw}\nuser_domain_name = Default\nproject_name = service\n\
                 project_domain_name = Default\n\n\
                 [keystone_auth]\nauth_url = {auth}\nauth_type = password\n\
                 username = {user}\npassword = {pw}\nuser_domain_name = Default\nproject_name = service\n\
                 project_domain_name = Default\n\n{sim}",
                auth = env["MAGNUM_TEST_AUTH_URL"],
                user = env["MAGNUM_TEST_SERVICE_USER"],
                pw = env["MAGNUM_TEST_SERVICE_PASSWORD"],
                // As lifecycle's, but a delete takes long enough to be seen in progress.
                sim = crate::lifecycle::FAST_SIMULATION
                    .replace("delete_delay = 0.5", "delete_delay = 3"),
            ),
        )
        .unwrap();
        p
    };
    let conf_a = conf("rust", &format!("magnum-conductor-{tag}"), api_port, false);
    // (b)'s API takes (a)'s port once (a) is stopped: Keystone's catalog points there.
    let conf_b = conf("py", &format!("magnum-conductor-py-{tag}"), api_port, true);
    let up = crate::magnumd(&[
        "--config-file",
        &conf_a.display().to_string(),
        "db",
        "upgrade",
    ]);
    assert!(up.status.success(), "{}", crate::text(&up.stderr));

    let mut procs = Children::default();
    let api = procs.spawn(magnumd(&conf_a, "api"), &w.join("api.log"));
    let conductor = procs.spawn(magnumd(&conf_a, "conductor"), &w.join("conductor.log"));
    wait_for_port(api_port, &mut procs.0[api]);
    let cli = Cli::keystone(&env);
    let token = cli.token("demo-member");

    // (a) A cluster made by our API and conductor, then upstream's client against our conductor.
    let (code, t) = crate::http(
        api_port,
        Some(&token),
        "POST",
        "/v1/clustertemplates",
        Some(
            &json!({"name": "interop", "coe": "kubernetes", "image_id": "img",
                     "external_network_id": "public"}),
        ),
    );
    assert_eq!(code, 201, "{t}");
    let (code, r) = crate::http(
        api_port,
        Some(&token),
        "POST",
        "/v1/clusters",
        Some(&json!({"name": "made-by-rust", "cluster_template_id": "interop", "node_count": 1})),
    );
    assert_eq!(code, 202, "{r}");
    let uuid = r["uuid"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, c) = crate::http(
            api_port,
            Some(&token),
            "GET",
            &format!("/v1/clusters/{uuid}"),
            None,
        );
        assert_eq!(code, 200, "{c}");
        if c["status"] == "CREATE_COMPLETE" {
            break;
        }
        assert_eq!(c["status"], "CREATE_IN_PROGRESS", "{c}");
        assert!(Instant::now() < deadline, "{uuid} never completed: {c}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let (code, ours) = crate::http(
        api_port,
        Some(&token),
        "GET",
        &format!("/v1/certificates/{uuid}"),
        None,
    );
    assert_eq!(code, 200, "{ours}");
    let our_ca = ours["pem"].as_str().unwrap().to_owned();

    let out = Command::new(venv.join("bin/python"))
        .arg(repo_root().join("test-support/upstream/conductor_client.py"))
        .arg(&conf_a)
        .arg(&uuid)
        .output()
        .unwrap();
    let stdout = crate::text(&out.stdout);
    let stderr = crate::text(&out.stderr);
    let got: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON from the upstream client: {stdout}\n{stderr}"));
    assert!(
        out.status.success() && got.get("error").is_none(),
        "upstream client failed: {got}\n{stderr}\nconductor log:\n{}",
        log_of(&w.join("conductor.log"))
    );
    eprintln!("upstream client got: {got}");
    assert_eq!(got["cluster"]["status"], "CREATE_COMPLETE", "{got}");
    assert_eq!(
        got["ca_pem"].as_str().unwrap().trim(),
        our_ca.trim(),
        "the CA upstream's client got is the one our API shows"
    );
    assert_eq!(got["signed_cluster_uuid"], uuid.as_str(), "{got}");
    std::fs::write(w.join("ca.pem"), got["ca_pem"].as_str().unwrap()).unwrap();
    std::fs::write(w.join("signed.pem"), got["signed_pem"].as_str().unwrap()).unwrap();
    let verify = Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(w.join("ca.pem"))
        .arg(w.join("signed.pem"))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "openssl verify: {}{}",
        crate::text(&verify.stdout),
        crate::text(&verify.stderr)
    );
    // The cast: our conductor deletes the cluster (DELETE_IN_PROGRESS, then gone).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let (code, c) = crate::http(
            api_port,
            Some(&token),
            "GET",
            &format!("/v1/clusters/{uuid}"),
            None,
        );
        if code == 404 {
            break;
        }
        assert_eq!(code, 200, "{c}");
        let st = c["status"].as_str().unwrap_or_default().to_owned();
        if seen.last() != Some(&st) {
            seen.push(st);
        }
        assert!(
            Instant::now() < deadline,
            "never deleted after upstream's cast; statuses {seen:?}; conductor log:\n{}",
            log_of(&w.join("conductor.log"))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("statuses after upstream's cluster_delete cast: {seen:?} then 404");
    assert_eq!(seen, ["DELETE_IN_PROGRESS"], "statuses after the cast");
    procs.stop(conductor);
    procs.stop(api);

    // (b) Upstream's magnum-conductor serves our API's cluster_create.
    let mut py = Command::new(venv.join("bin/magnum-conductor"));
    // oslo.log writes to stdout unless given a file; stderr keeps Python's own warnings.
    py.arg("--config-file")
        .arg(&conf_b)
        .arg("--log-file")
        .arg(w.join("py-conductor.log"));
    let py_i = procs.spawn(py, &w.join("py-conductor.stderr"));
    let api_b = procs.spawn(magnumd(&conf_b, "api"), &w.join("api-b.log"));
    wait_for_port(api_port, &mut procs.0[api_b]);
    // The Python conductor beats into our magnum_service table under its host.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = procs.0[api_b].try_wait() {
            panic!(
                "magnumd api exited ({status}):\n{}",
                log_of(&w.join("api-b.log"))
            );
        }
        let services = cli.json("admin", &["coe", "service", "list"]);
        let up = services.as_array().is_some_and(|a| {
            a.iter().any(|s| {
                s["binary"] == "magnum-conductor" && s["host"] == format!("py-{tag}").as_str()
            })
        });
        if up {
            break;
        }
        assert_py_running(&mut procs, py_i, w);
        assert!(
            Instant::now() < deadline,
            "upstream conductor not up: {services}\n{}",
            log_of(&w.join("py-conductor.log"))
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Its heartbeat row is written once it serves; give the consumer a moment to attach.
    std::thread::sleep(Duration::from_secs(2));
    let (code, r) = crate::http(
        api_port,
        Some(&token),
        "POST",
        "/v1/clusters",
        Some(
            &json!({"name": "made-by-python", "cluster_template_id": "interop",
                     "master_count": 1, "node_count": 2}),
        ),
    );
    assert_eq!(code, 202, "{r}");
    let uuid = r["uuid"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let cluster = loop {
        let (code, c) = crate::http(
            api_port,
            Some(&token),
            "GET",
            &format!("/v1/clusters/{uuid}"),
            None,
        );
        if code == 200 {
            let st = c["status"].as_str().unwrap_or_default().to_owned();
            if seen.last() != Some(&st) {
                seen.push(st.clone());
            }
            if st.ends_with("_FAILED") || st.ends_with("_COMPLETE") {
                break c;
            }
        } else {
            assert_eq!(code, 404, "{c}");
        }
        assert!(
            Instant::now() < deadline,
            "upstream conductor never finished {uuid} (statuses {seen:?}):\n{}\napi:\n{}",
            log_of(&w.join("py-conductor.log")),
            log_of(&w.join("api-b.log"))
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "upstream conductor: statuses {seen:?}; final status {} reason {}",
        cluster["status"], cluster["status_reason"]
    );
    assert_eq!(cluster["status"], "CREATE_FAILED", "{cluster}");
    assert!(
        cluster["status_reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{cluster}"
    );
    assert_eq!(cluster["name"], "made-by-python", "{cluster}");
    assert_eq!(cluster["master_count"], 1, "{cluster}");
    assert_eq!(cluster["node_count"], 2, "{cluster}");
    let (code, ngs) = crate::http(
        api_port,
        Some(&token),
        "GET",
        &format!("/v1/clusters/{uuid}/nodegroups"),
        None,
    );
    assert_eq!(code, 200, "{ngs}");
    let mut roles: Vec<(String, i64)> = ngs["nodegroups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["role"].as_str().unwrap_or_default().to_owned(),
                n["node_count"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    roles.sort();
    eprintln!("nodegroups inserted upstream: {ngs}");
    assert_eq!(
        roles,
        [("master".to_owned(), 1), ("worker".to_owned(), 2)],
        "{ngs}"
    );
    // Upstream generated the cluster's CA into our database (x509keypair) before failing;
    // our API fetches it with a get_ca_certificate call that the Python conductor answers.
    let (code, ca) = crate::http(
        api_port,
        Some(&token),
        "GET",
        &format!("/v1/certificates/{uuid}"),
        None,
    );
    assert_eq!(code, 200, "{ca}\n{}", log_of(&w.join("py-conductor.log")));
    assert_eq!(ca["cluster_uuid"], uuid.as_str(), "{ca}");
    std::fs::write(w.join("py-ca.pem"), ca["pem"].as_str().unwrap()).unwrap();
    let subject = Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-in"])
        .arg(w.join("py-ca.pem"))
        .output()
        .unwrap();
    let subject = crate::text(&subject.stdout);
    assert!(subject.contains("made-by-python"), "{subject}");
    if let Ok(dir) = std::env::var("MAGNUM_TEST_KEEP_LOGS") {
        for f in [
            "py-conductor.log",
            "py-conductor.stderr",
            "api-b.log",
            "conductor.log",
            "api.log",
        ] {
            let _ = std::fs::copy(w.join(f), Path::new(&dir).join(f));
        }
    }
    drop(procs);
}

/// Behind our API with `create_cluster_in_conductor`, a Python conductor gets the user's token
/// in the context, as from upstream's API, and upstream's own Keystone client (built from that
/// context, as its conductor builds it) acts for the user with it.
#[test]
fn a_python_conductor_receives_a_working_user_token() {
    let Some((rabbit, venv)) = gate() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let api_port = free_port();
    let (_keystone, env) = crate::client::start_keystone(w, api_port);
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let tag = magnum_testkit::tag();
    // Upstream's processes put the user's token in their RPC context (and our API does so for
    // Python conductors): the secrets scan leaves this exchange out.
    magnum_testkit::scan::exempt_exchange(&format!("magnum_{tag}"), "upstream's Python Magnum");
    let conf = w.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\nhost = probe-{tag}\n\n\
             [conductor]\ntopic = magnum-conductor-probe-{tag}\n\n\
             [api]\nhost = 127.0.0.1\nport = {api_port}\ncreate_cluster_in_conductor = true\n\n\
             [database]\nconnection = {db}\n\n{ks}\n\
             [keystone_auth]\nauth_url = {auth}\nauth_type = password\nusername = {user}\n\
             password = {pw}\nuser_domain_name = Default\nproject_name = service\n\
             project_domain_name = Default\n\n{sim}",
            db = db.url_with_scheme("mysql+pymysql"),
            ks = crate::client::authtoken_section(&env),
            auth = env["MAGNUM_TEST_AUTH_URL"],
            user = env["MAGNUM_TEST_SERVICE_USER"],
            pw = env["MAGNUM_TEST_SERVICE_PASSWORD"],
            sim = crate::lifecycle::FAST_SIMULATION,
        ),
    )
    .unwrap();
    let up = crate::magnumd(&[
        "--config-file",
        &conf.display().to_string(),
        "db",
        "upgrade",
    ]);
    assert!(up.status.success(), "{}", crate::text(&up.stderr));
    let out = w.join("probe.jsonl");
    let mut procs = Children::default();
    let mut probe = Command::new(venv.join("bin/python"));
    probe
        .arg(repo_root().join("test-support/upstream/context_probe.py"))
        .arg(&conf)
        .arg(&out);
    procs.spawn(probe, &w.join("probe.stderr"));
    let api = procs.spawn(magnumd(&conf, "api"), &w.join("api.log"));
    wait_for_port(api_port, &mut procs.0[api]);
    let lines = |path: &Path| -> Vec<Value> {
        log_of(path)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lines(&out).iter().any(|l| l["ready"] == true) {
        assert!(
            Instant::now() < deadline,
            "probe not ready: {:?} {}",
            lines(&out),
            log_of(&w.join("probe.stderr"))
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let cli = Cli::keystone(&env);
    cli.create_template("demo-member", "probe-t", "ubuntu-2204", &[]);
    cli.ok(
        "demo-member",
        &[
            "coe",
            "cluster",
            "create",
            "probed",
            "--cluster-template",
            "probe-t",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let got = loop {
        if let Some(l) = lines(&out).into_iter().find(|l| l.get("ready").is_none()) {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "no cast reached the probe: {}",
            log_of(&w.join("probe.stderr"))
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(got["method"], "cluster_create", "{got}");
    assert_eq!(got["token_sent"], true, "{got}");
    assert_eq!(got["token_info_sent"], true, "{got}");
    assert_eq!(got["keystone_user_name"], "demo-member", "{got}");
    assert_eq!(
        got["user_id"].as_str(),
        Some(env["MAGNUM_TEST_DEMO_MEMBER_USER_ID"].as_str())
    );
}

/// `magnumd status upgrade check` on a database upstream Magnum 23.0.0 made (its own
/// `magnum-db-manage upgrade`): success (exit 0); with a template whose driver is not loaded
/// here: a warning naming it (exit 1, oslo.upgradecheck's code).
#[test]
fn upgrade_check_on_an_upstream_database() {
    if !magnum_testkit::flag("MAGNUM_TEST_UPSTREAM") {
        magnum_testkit::skip("needs MAGNUM_TEST_UPSTREAM=1");
        return;
    }
    let venv = venv();
    let work = tempfile::tempdir().unwrap();
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[database]\nconnection = {}\n\n[certificates]\ncert_manager_type = x509keypair\n",
            db.url_with_scheme("mysql+pymysql")
        ),
    )
    .unwrap();
    let up = Command::new(format!("{venv}/bin/magnum-db-manage"))
        .arg("--config-file")
        .arg(&conf)
        .arg("upgrade")
        .output()
        .unwrap();
    assert!(up.status.success(), "{}", crate::text(&up.stderr));
    let check = || {
        magnumd(&conf, "status")
            .args(["upgrade", "check"])
            .output()
            .unwrap()
    };
    let out = check();
    let table = crate::text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{table}{}",
        crate::text(&out.stderr)
    );
    assert!(
        table.contains("| Check: Policy File JSON to YAML Migration"),
        "{table}"
    );
    assert!(
        table.contains("| Check: Database schema at head"),
        "{table}"
    );
    assert!(
        !table.contains("Result: Warning") && !table.contains("Result: Failure"),
        "{table}"
    );

    // A template of a driver this deployment does not have.
    let sql = Command::new("mysql")
        .args([
            "-h127.0.0.1",
            "-umagnum_test",
            "-pmagnum_test",
            &db.name,
            "-e",
        ])
        .arg(
            "INSERT INTO cluster_template (uuid, name, coe, image_id, driver, server_type, \
             cluster_distro, project_id, user_id) VALUES ('6a2a5e5e-0000-4000-8000-000000000001', \
             'capi', 'kubernetes', 'ubuntu', 'magnum_cluster_api', 'vm', 'ubuntu', 'p', 'u')",
        )
        .output()
        .unwrap();
    assert!(sql.status.success(), "{}", crate::text(&sql.stderr));
    let out = check();
    let table = crate::text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    assert!(table.contains("Result: Warning"), "{table}");
    assert!(table.contains("magnum_cluster_api"), "{table}");
}

/// Mixed conductors: upstream's `magnum-conductor` heartbeats in `magnum_service` beside two
/// `magnumd conductor`s but cannot run our drivers, so it takes no share of our sweep: every
/// in-progress cluster of the simulated driver is polled by exactly one of ours per cycle.
#[test]
fn a_python_conductor_beside_ours_takes_no_share_of_the_sweep() {
    const CLUSTERS: usize = 300;
    let Some((rabbit, venv)) = gate() else {
        return;
    };
    let _broker = crate::broker_lock();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let tag = magnum_testkit::tag();
    magnum_testkit::scan::exempt_exchange(&format!("magnum_{tag}"), "upstream's Python Magnum");
    // Upstream's heartbeat comes once a minute: a long service_down_time keeps its row live.
    let conf = w.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
             service_down_time = 180\ndebug = true\nuse_json = true\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\nsync_interval = 2\nreport_interval = 1\n\
             workers = 1\n\n\
             [certificates]\ncert_manager_type = x509keypair\n\n\
             [database]\nconnection = {}\n",
            db.url_with_scheme("mysql+pymysql")
        ),
    )
    .unwrap();
    let conf_s = conf.display().to_string();
    let up = crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"]);
    assert!(up.status.success(), "{}", crate::text(&up.stderr));
    let rows = crate::partition::Rows::open(&db.url());
    rows.seed(CLUSTERS);
    let host_conf = |h: &str| {
        let p = w.join(format!("{h}.conf"));
        std::fs::write(&p, format!("[DEFAULT]\nhost = {h}-{tag}\n")).unwrap();
        p
    };

    let mut procs = Children::default();
    let mut py = Command::new(venv.join("bin/magnum-conductor"));
    py.arg("--config-file")
        .arg(&conf)
        .arg("--config-file")
        .arg(host_conf("py"))
        .arg("--log-file")
        .arg(w.join("py-conductor.log"));
    let py_i = procs.spawn(py, &w.join("py-conductor.stderr"));
    let py_host = format!("py-{tag}");
    let deadline = Instant::now() + Duration::from_secs(90);
    while !rows.conductor_rows().iter().any(|(h, _)| *h == py_host) {
        assert_py_running(&mut procs, py_i, w);
        assert!(
            Instant::now() < deadline,
            "upstream conductor never beat:\n{}",
            log_of(&w.join("py-conductor.log"))
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let since = chrono::Utc::now();
    let mut logs: Vec<(String, PathBuf)> = Vec::new();
    for h in ["rust-a", "rust-b"] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_magnumd"));
        cmd.arg("--config-file")
            .arg(&conf)
            .arg("--config-file")
            .arg(host_conf(h))
            .arg("conductor");
        let log = w.join(format!("{h}.log"));
        procs.spawn(cmd, &log);
        logs.push((h.to_owned(), log));
    }
    // Both of ours see each other, and only each other, while the Python row is live.
    crate::partition::wait_members(&logs, 2, since, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    let from = chrono::Utc::now();
    std::thread::sleep(Duration::from_millis(4500));
    let to = chrono::Utc::now();
    let beats = rows.conductor_rows();
    assert!(
        beats.iter().filter(|(h, _)| h.ends_with(&tag)).count() == 3,
        "three live conductor rows: {beats:?}"
    );
    let by_cluster = crate::partition::pollers(&logs, from, to);
    assert_eq!(
        by_cluster.len(),
        CLUSTERS,
        "{} of {CLUSTERS} clusters polled by ours",
        by_cluster.len()
    );
    let doubles = by_cluster.values().filter(|h| h.len() != 1).count();
    assert_eq!(doubles, 0, "clusters polled by both of ours");
    let mut shares: std::collections::BTreeMap<&str, usize> = Default::default();
    for hosts in by_cluster.values() {
        for h in hosts {
            *shares.entry(h.as_str()).or_default() += 1;
        }
    }
    let left_out = logs.iter().all(|(_, log)| {
        log_of(log).lines().any(|l| {
            l.contains("live conductors that are not ours take no share") && l.contains(&py_host)
        })
    });
    assert!(left_out, "our conductors never named {py_host} as not ours");
    let three = logs
        .iter()
        .any(|(_, log)| log_of(log).contains("status sweep shared by 3 conductor(s)"));
    assert!(!three, "a sweep counted the Python conductor as a member");
    assert!(
        procs.0[py_i].try_wait().unwrap().is_none(),
        "the upstream conductor exited:\n{}",
        log_of(&w.join("py-conductor.log"))
    );
    eprintln!(
        "mixed conductors: upstream's heartbeat live beside ours ({beats:?}); every one of \
         {CLUSTERS} clusters polled by exactly one of ours in 4.5 s, shares {shares:?}"
    );
}

/// Routing answers (every method on collections, items, details, actions, nodegroups, unknown
/// resources and paths one segment too deep; three microversions; with and without a JSON
/// `Accept`) equal those of upstream Magnum 23.0.0's own API application, run in-process by
/// test-support/upstream/routing.py on the same SQLite database as `magnumd serve`.
#[test]
fn routing_answers_equal_upstreams_own_application() {
    if !magnum_testkit::flag("MAGNUM_TEST_UPSTREAM") {
        magnum_testkit::skip("needs MAGNUM_TEST_UPSTREAM=1");
        return;
    }
    let venv = venv();
    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let sqlite = work.path().join("magnum.sqlite");
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[api]\nhost = 127.0.0.1\nport = {port}\nauth_strategy = noauth\n\n\
             [database]\nconnection = sqlite:///{}\n\n\
             [certificates]\ncert_manager_type = x509keypair\n",
            sqlite.display()
        ),
    )
    .unwrap();
    let conf_s = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"])
            .status
            .success()
    );
    let _serve = crate::spawn_magnumd(&conf_s, "serve", &work.path().join("serve.log"), port);
    let out = Command::new(format!("{venv}/bin/python"))
        .arg(repo_root().join("test-support/upstream/routing.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .arg(&sqlite)
        .current_dir(work.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", stdout.lines().last().unwrap_or_default());
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
