//! `magnumd api` and two `magnumd conductor` processes over RabbitMQ (oslo.messaging wire
//! format) and MariaDB, with Keystone: a cluster's whole life through the real client, a
//! conductor killed with SIGKILL while casts stream in, and the broker restarted under traffic.
//! Runs when MAGNUM_TEST_KEYSTONE=1 and MAGNUM_TEST_RABBIT_URL is set (scripts/test sets both).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Cli, free_port, wait_for_port};
use crate::http;
use magnum_testkit::db::{Server, ServerDb};
use magnum_testkit::{ChildGuard, Children};

fn magnumd(conf: &[&Path], sub: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_magnumd"));
    for c in conf {
        cmd.arg("--config-file").arg(c);
    }
    cmd.arg(sub);
    cmd
}

/// Puts the broker and its firehose back as they were, whatever happened, and removes this
/// run's durable queues (named after its tag), which would outlive it.
pub(crate) struct BrokerRestore(pub(crate) String);

impl Drop for BrokerRestore {
    fn drop(&mut self) {
        let quiet = |args: &[&str]| {
            let _ = Command::new("rabbitmqctl")
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        };
        quiet(&["start_app"]);
        // The suite-wide tap (scripts/test) keeps the firehose on for the whole run.
        if magnum_testkit::scan::dir().is_none() {
            quiet(&["trace_off"]);
        }
        let listed = Command::new("rabbitmqctl")
            .args(["list_queues", "name", "--quiet", "--no-table-headers"])
            .output();
        let names = listed.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        for name in names.unwrap_or_default().lines() {
            if name.contains(&self.0) {
                quiet(&["delete_queue", name.trim()]);
            }
        }
    }
}

pub(crate) fn rabbitmqctl(args: &[&str]) {
    let st = Command::new("rabbitmqctl")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "rabbitmqctl {args:?}");
}

/// The broker's URL when both RabbitMQ and a test Keystone may be used; else a skip.
fn rabbit_and_keystone() -> Option<String> {
    let rabbit = std::env::var("MAGNUM_TEST_RABBIT_URL")
        .ok()
        .filter(|v| !v.is_empty());
    match (rabbit, magnum_testkit::flag("MAGNUM_TEST_KEYSTONE")) {
        (Some(rabbit), true) => Some(rabbit),
        _ => {
            magnum_testkit::skip("needs MAGNUM_TEST_RABBIT_URL and MAGNUM_TEST_KEYSTONE=1");
            None
        }
    }
}

#[test]
fn api_and_two_conductors_over_rabbitmq() {
    let Some(rabbit) = rabbit_and_keystone() else {
        return;
    };
    let _broker = crate::broker_lock();
    let work = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let (_keystone, env) = crate::client::start_keystone(work.path(), api_port);
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let db_url = db.url_with_scheme("mysql+pymysql");
    // A private exchange and topic, so nothing else on the broker interferes.
    let tag = magnum_testkit::tag();
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\nrpc_response_timeout = 20\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\n\n\
             [oslo_messaging_notifications]\ndriver = messagingv2\ntopics = notifications_{tag}\n\n\
             [api]\nhost = 127.0.0.1\nport = {api_port}\n\n[database]\nconnection = {db_url}\n\n\
             {ks}\n{sim}",
            ks = crate::client::authtoken_section(&env),
            sim = crate::lifecycle::FAST_SIMULATION,
        ),
    )
    .unwrap();
    let host = |name: &str| {
        let p = work.path().join(format!("{name}.conf"));
        std::fs::write(&p, format!("[DEFAULT]\nhost = {name}-{tag}\n")).unwrap();
        p
    };
    let (host_a, host_b) = (host("conductor-a"), host("conductor-b"));
    let conf_s = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"])
            .status
            .success()
    );
    let w = work.path();
    let mut procs = Children::default();
    procs.spawn(magnumd(&[&conf], "api"), &w.join("api.log"));
    let conductor_a = procs.spawn(
        magnumd(&[&conf, &host_a], "conductor"),
        &w.join("conductor-a.log"),
    );
    procs.spawn(
        magnumd(&[&conf, &host_b], "conductor"),
        &w.join("conductor-b.log"),
    );
    wait_for_port(api_port, &mut procs.0[0]);

    let cli = Cli::keystone(&env);
    // Both conductors beat into magnum_service under their own host.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let services = cli.json("admin", &["coe", "service", "list"]);
        let up = services
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|s| s["binary"] == "magnum-conductor" && s["state"] == "up")
                    .count()
            })
            .unwrap_or(0);
        if up == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "conductors not up: {services}");
        std::thread::sleep(Duration::from_millis(500));
    }

    // A Python notification listener (PyPI oslo.messaging) on this test's topic.
    let listener = Listener::start(
        &rabbit,
        &format!("magnum_{tag}"),
        &format!("notifications_{tag}"),
    );

    crate::lifecycle::cluster_lifecycle(&cli, "demo-member", w, "ubuntu-2204", &[]);

    // It received the conductors' CADF events, as upstream's conductor sends them.
    let events = listener.stop();
    let seen = |event_type: &str, outcome: &str| {
        events.iter().any(|e| {
            e["event_type"] == event_type
                && e["payload"]["outcome"] == outcome
                && e["payload"]["typeURI"] == "http://schemas.dmtf.org/cloud/audit/1.0/event"
        })
    };
    for (t, o) in [
        ("magnum.cluster.create", "pending"),
        ("magnum.cluster.create", "success"),
        ("magnum.cluster.create", "failure"),
        ("magnum.cluster.update", "pending"),
        ("magnum.cluster.update", "success"),
        ("magnum.cluster.delete", "pending"),
        ("magnum.cluster.delete", "success"),
    ] {
        assert!(seen(t, o), "no {t} {o} among {} events", events.len());
    }
    for e in &events {
        let publisher = e["publisher_id"].as_str().unwrap_or_default();
        assert!(publisher.starts_with("container-infra.conductor-"), "{e}");
        assert_eq!(
            e["priority"],
            if e["payload"]["outcome"] == "failure" {
                "error"
            } else {
                "info"
            },
            "{e}"
        );
        assert!(
            e["context"].get("auth_token").is_none_or(Value::is_null),
            "{e}"
        );
    }

    // A conductor killed with SIGKILL while creates stream in: every accepted create is done.
    let token = cli.token("demo-member");
    let (code, t) = http(
        api_port,
        Some(&token),
        "POST",
        "/v1/clustertemplates",
        Some(
            &json!({"name": "burst", "coe": "kubernetes", "image_id": "img",
                     "external_network_id": "public"}),
        ),
    );
    assert_eq!(code, 201, "{t}");
    let mut accepted = Vec::new();
    for i in 0..12 {
        if i == 4 {
            procs.stop(conductor_a);
        }
        let (code, r) = http(
            api_port,
            Some(&token),
            "POST",
            "/v1/clusters",
            Some(
                &json!({"name": format!("burst-{i}"), "cluster_template_id": "burst",
                         "node_count": 1}),
            ),
        );
        assert_eq!(code, 202, "{r}");
        accepted.push(r["uuid"].as_str().unwrap().to_owned());
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    for uuid in &accepted {
        loop {
            let (code, c) = http(
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
    }

    // The broker goes away: calls fail fast with a 503 in the errors shape, then everything
    // recovers by itself once it is back.
    let ca = format!("/v1/certificates/{}", accepted[0]);
    assert_eq!(http(api_port, Some(&token), "GET", &ca, None).0, 200);
    rabbitmqctl(&["stop_app"]);
    let started = Instant::now();
    let (code, body) = http(api_port, Some(&token), "GET", &ca, None);
    let down_for = started.elapsed();
    rabbitmqctl(&["start_app"]);
    assert_eq!(code, 503, "{body}");
    assert!(body["errors"].is_array(), "{body}");
    assert!(down_for < Duration::from_secs(5), "took {down_for:?}");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (code, body) = http(api_port, Some(&token), "GET", &ca, None);
        if code == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "never recovered: {code} {body}");
        std::thread::sleep(Duration::from_secs(1));
    }
    // Casts work again too: the burst goes away.
    for uuid in &accepted {
        let (code, r) = http(
            api_port,
            Some(&token),
            "DELETE",
            &format!("/v1/clusters/{uuid}"),
            None,
        );
        assert_eq!(code, 204, "{r}");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    for uuid in &accepted {
        while http(
            api_port,
            Some(&token),
            "GET",
            &format!("/v1/clusters/{uuid}"),
            None,
        )
        .0 != 404
        {
            assert!(Instant::now() < deadline, "{uuid} never deleted");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// `test-support/oslo/peer.py listen`: a Python oslo.messaging notification listener whose
/// events are collected until [`Listener::stop`].
pub(crate) struct Listener {
    child: ChildGuard,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Listener {
    pub(crate) fn start(url: &str, exchange: &str, topic: &str) -> Self {
        Self::start_with(url, exchange, topic, &[])
    }

    /// As [`Listener::start`], with oslo.config options as `OS_<GROUP>__<OPTION>` variables.
    pub(crate) fn start_with(
        url: &str,
        exchange: &str,
        topic: &str,
        envs: &[(&str, &str)],
    ) -> Self {
        let support = crate::client::repo_root().join("test-support/oslo");
        let out = Command::new("bash")
            .arg(support.join("setup-venv.sh"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "oslo venv: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let python = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut child = ChildGuard::new(
            Command::new(python)
                .arg(support.join("peer.py"))
                .args(["listen", url, exchange, topic])
                .env("PYTHONPATH", support.join("stub"))
                .envs(envs.iter().copied())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let ready = lines.recv_timeout(Duration::from_secs(60)).unwrap();
        assert!(ready.contains("READY"), "{ready}");
        Self { child, lines }
    }

    /// Collects events until `done` holds for those received (or `limit` passes), then stops
    /// as [`Listener::stop`] does, so late duplicates are still caught; every event received.
    pub(crate) fn stop_when(self, limit: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = std::time::Instant::now() + limit;
        let mut events: Vec<Value> = Vec::new();
        while !done(&events) && std::time::Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200))
                && let Ok(v) = serde_json::from_str::<Value>(&line)
                && v.is_object()
            {
                events.push(v);
            }
        }
        events.extend(self.stop());
        events
    }

    /// Stops listening (stdin closed) and returns every event received.
    pub(crate) fn stop(mut self) -> Vec<Value> {
        // Events published just before are still on their way.
        std::thread::sleep(Duration::from_secs(2));
        drop(self.child.stdin.take());
        let _ = self.child.wait();
        self.lines
            .try_iter()
            .filter_map(|l| serde_json::from_str(&l).ok())
            .filter(Value::is_object)
            .collect()
    }
}

/// A create that waits in the queue longer than the user's token lives still completes: our
/// conductor never needs the user's token (none travels between our processes).
#[test]
fn a_create_queued_past_the_users_token_lifetime_still_completes() {
    let Some(rabbit) = rabbit_and_keystone() else {
        return;
    };
    const LIFETIME: u64 = 20;
    let work = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let lifetime = LIFETIME.to_string();
    let (_keystone, env) = crate::client::start_keystone_with(
        work.path(),
        &format!("http://127.0.0.1:{api_port}"),
        &[("KEYSTONE_TOKEN_EXPIRATION", Path::new(&lifetime))],
    );
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let tag = magnum_testkit::tag();
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\n\n\
             [api]\nhost = 127.0.0.1\nport = {api_port}\n\n[database]\nconnection = {db}\n\n\
             {ks}\n{sim}",
            db = db.url_with_scheme("mysql+pymysql"),
            ks = crate::client::authtoken_section(&env),
            sim = crate::lifecycle::FAST_SIMULATION,
        ),
    )
    .unwrap();
    let conf_s = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"])
            .status
            .success()
    );
    let w = work.path();
    let mut procs = Children::default();
    procs.spawn(magnumd(&[&conf], "api"), &w.join("api.log"));
    wait_for_port(api_port, &mut procs.0[0]);
    let cli = Cli::keystone(&env);
    // A token of the user from before the create, to see it expire.
    let token = cli.token("demo-member");
    cli.create_template("demo-member", "queued-t", "ubuntu-2204", &[]);
    let accepted = cli.ok(
        "demo-member",
        &[
            "coe",
            "cluster",
            "create",
            "queued",
            "--cluster-template",
            "queued-t",
        ],
    );
    assert!(accepted.contains("accepted"), "{accepted}");
    // No conductor yet: the cast waits in RabbitMQ until every token of then has expired.
    std::thread::sleep(Duration::from_secs(LIFETIME + 5));
    let (status, _) = http(api_port, Some(&token), "GET", "/v1/clusters", None);
    assert_eq!(status, 401, "the user's token should have expired by now");
    assert_eq!(
        crate::lifecycle::show(&cli, "demo-member", "queued")["status"],
        "CREATE_IN_PROGRESS"
    );
    procs.spawn(magnumd(&[&conf], "conductor"), &w.join("conductor.log"));
    let done = crate::lifecycle::wait_status(&cli, "demo-member", "queued", "CREATE_COMPLETE");
    assert!(done["api_address"].as_str().is_some(), "{done}");
}

/// With `[DEFAULT] log_dir` and `use_json`, `magnumd api` and `magnumd conductor` write
/// `magnum-api.log` and `magnum-conductor.log` as JSON lines; the conductor's lines for a
/// create carry the request id the API answered that create with; after logrotate moves a file
/// and sends SIGHUP the file is reopened; no token or password is in either.
#[test]
fn api_and_conductor_log_json_to_log_dir_and_reopen_on_sighup() {
    let Some(rabbit) = rabbit_and_keystone() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let api_port = free_port();
    let (_keystone, env) = crate::client::start_keystone(w, api_port);
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let tag = magnum_testkit::tag();
    let logs = w.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let metrics_port = free_port();
    let conf = w.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
             log_dir = {logs}\nuse_json = true\n\n\
             [metrics]\nenabled = true\nconductor_port = {metrics_port}\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\n\n\
             [api]\nhost = 127.0.0.1\nport = {api_port}\n\n[database]\nconnection = {db}\n\n\
             {ks}\n{sim}",
            logs = logs.display(),
            db = db.url_with_scheme("mysql+pymysql"),
            ks = crate::client::authtoken_section(&env),
            sim = crate::lifecycle::FAST_SIMULATION,
        ),
    )
    .unwrap();
    let conf_s = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"])
            .status
            .success()
    );
    let mut procs = Children::default();
    let api = procs.spawn(magnumd(&[&conf], "api"), &w.join("api.stderr"));
    procs.spawn(magnumd(&[&conf], "conductor"), &w.join("conductor.stderr"));
    wait_for_port(api_port, &mut procs.0[api]);
    let cli = Cli::keystone(&env);
    cli.create_template("demo-member", "logged-t", "ubuntu-2204", &[]);
    let token = cli.token("demo-member");
    let body = r#"{"name": "logged", "cluster_template_id": "logged-t", "node_count": 1}"#;
    let reply = magnum_testkit::raw_http(
        api_port,
        &format!(
            "POST /v1/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Auth-Token: {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Duration::from_secs(30),
    );
    assert!(reply.starts_with("HTTP/1.1 202"), "{reply}");
    let request_id = reply
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("x-openstack-request-id: ")
                .map(|v| v.trim().to_owned())
        })
        .unwrap();
    crate::lifecycle::wait_status(&cli, "demo-member", "logged", "CREATE_COMPLETE");

    // Metrics: the API's casts on its own address, the conductor's handlers on its listener.
    let scrape = |port: u16| {
        let reply = magnum_testkit::raw_http(
            port,
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            Duration::from_secs(10),
        );
        reply
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    let api_metrics = scrape(api_port);
    assert!(
        api_metrics.contains(
            r#"magnum_rpc_requests_total{kind="cast",method="cluster_create",outcome="ok"} 1"#
        ),
        "{api_metrics}"
    );
    let conductor_metrics = scrape(metrics_port);
    assert!(
        conductor_metrics.contains(
            r#"magnum_conductor_handler_duration_seconds_count{method="cluster_create",outcome="ok"} 1"#
        ),
        "{conductor_metrics}"
    );
    assert!(
        conductor_metrics.contains(r#"magnum_clusters{status="CREATE_COMPLETE"} 1"#),
        "{conductor_metrics}"
    );
    // The driver's calls, what its polls said of health, and the pool of this process.
    for series in [
        r#"magnum_driver_call_duration_seconds_count{driver="simulated",operation="create_cluster",outcome="ok"} 1"#,
        r#"magnum_driver_call_duration_seconds_count{driver="simulated",operation="poll_status",outcome="ok"}"#,
        r#"magnum_health_polls_total{driver="simulated",health="HEALTHY"}"#,
        r#"magnum_db_pool_connections{state="in_use"}"#,
        "magnum_db_pool_max 55",
    ] {
        assert!(
            conductor_metrics.contains(series),
            "{series}: {conductor_metrics}"
        );
    }

    let lines = |name: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(logs.join(name)).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
            .collect()
    };
    let of_request = |name: &str| {
        lines(name)
            .into_iter()
            .filter(|l| l["span"]["request_id"] == request_id.as_str())
            .collect::<Vec<_>>()
    };
    let api_lines = of_request("magnum-api.log");
    assert!(!api_lines.is_empty(), "{:?}", lines("magnum-api.log"));
    let conductor_lines = of_request("magnum-conductor.log");
    assert!(
        conductor_lines
            .iter()
            .any(|l| l["method"] == "cluster_create"),
        "no conductor line with {request_id}: {:?}",
        lines("magnum-conductor.log")
    );
    let user = &env["MAGNUM_TEST_DEMO_MEMBER_USER_ID"];
    assert!(
        conductor_lines
            .iter()
            .all(|l| l["span"]["user"] == user.as_str())
    );
    assert!(
        conductor_lines
            .iter()
            .all(|l| l["span"]["cluster"].is_string())
    );

    // logrotate: move the file away, SIGHUP, and the next lines go to a new file.
    std::fs::rename(logs.join("magnum-api.log"), logs.join("magnum-api.log.1")).unwrap();
    let st = Command::new("kill")
        .args(["-HUP", &procs.0[api].id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let _ = http(api_port, Some(&token), "GET", "/v1/clusters", None);
        if lines("magnum-api.log")
            .iter()
            .any(|l| l["path"] == "/v1/clusters")
        {
            break;
        }
        assert!(Instant::now() < deadline, "magnum-api.log not reopened");
        std::thread::sleep(Duration::from_millis(200));
    }
    for f in ["magnum-api.log", "magnum-api.log.1", "magnum-conductor.log"] {
        magnum_testkit::scan::keep_log(&logs.join(f));
        let text = std::fs::read_to_string(logs.join(f)).unwrap();
        assert!(!text.contains(&token), "the user's token is in {f}");
        assert!(
            !text.contains(&env["MAGNUM_TEST_SERVICE_PASSWORD"]),
            "the service password is in {f}"
        );
    }
}
