//! The fault suite: `magnumd api` and two `magnumd conductor` processes over RabbitMQ, on a
//! MariaDB server of the test's own, behind a real Keystone, while openstacksdk sends a steady
//! burst of creates, resizes and deletes (test-support/faults/burst.py). In turn: MariaDB
//! restarted, a conductor SIGKILLed (and started again), Keystone stopped for 30 s, RabbitMQ
//! restarted. Then: every request that got a 2xx was carried out, nothing stays in progress,
//! every notification arrived exactly once, every request during an outage got a clear 503 (or
//! a state refusal) within 2 s (of the service being down, for one sent while it stopped), and no
//! token, password or private key is in any log line, message crossing RabbitMQ (captured with
//! the broker's firehose), notification or error body.
//! Runs when MAGNUM_TEST_KEYSTONE=1 and MAGNUM_TEST_RABBIT_URL is set.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Cli, authtoken_section, free_port, repo_root};
use crate::http;
use magnum_testkit::db::PrivateMariaDb;
use magnum_testkit::{ChildGuard, Children};

/// Seconds the burst runs; the faults happen inside it.
const BURST: u64 = 100;

fn keystone_script(name: &str, dir: &Path) {
    let st = Command::new("bash")
        .arg(repo_root().join("test-support/keystone").join(name))
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "keystone {name}");
}

fn oslo_python() -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("test-support/oslo/setup-venv.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Waits until `t` seconds after `start`.
fn at(start: Instant, t: u64) {
    let when = start + Duration::from_secs(t);
    if let Some(left) = when.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

/// One answer the burst recorded.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) t: f64,
    /// When it was sent, Unix time (the burst's `t` has its own origin).
    pub(crate) at: f64,
    pub(crate) op: String,
    pub(crate) cluster: Option<String>,
    /// The name a create asked for.
    pub(crate) name: Option<String>,
    pub(crate) status: u16,
    pub(crate) latency: f64,
    pub(crate) detail: String,
}

/// test-support/faults/burst.py running in the background (openstacksdk from `venv`, the
/// `demo-member` entry of `clouds`), its answers in `<dir>/burst.jsonl`.
pub(crate) struct Burst {
    child: ChildGuard,
    out: std::path::PathBuf,
    stderr: std::path::PathBuf,
}

impl Burst {
    pub(crate) fn start(
        venv: &str,
        clouds: &str,
        template: &str,
        seconds: u64,
        dir: &Path,
    ) -> Self {
        let out = dir.join("burst.jsonl");
        let stderr = dir.join("burst.stderr");
        let child = ChildGuard::new(
            Command::new(format!("{venv}/bin/python"))
                .arg(repo_root().join("test-support/faults/burst.py"))
                .args(["demo-member", template, &seconds.to_string()])
                .arg(format!("burst-{}", magnum_testkit::tag()))
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env(
                    "HOME",
                    std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()),
                )
                .env("OS_CLIENT_CONFIG_FILE", clouds)
                .env("PYTHONWARNINGS", "ignore")
                .stdout(std::fs::File::create(&out).unwrap())
                .stderr(std::fs::File::create(&stderr).unwrap())
                .spawn()
                .unwrap(),
        );
        Self { child, out, stderr }
    }

    /// Waits for the burst's end; its answers.
    pub(crate) fn finish(mut self) -> Vec<Answer> {
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "burst: {}",
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        );
        std::fs::read_to_string(&self.out)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| Answer {
                t: v["t"].as_f64().unwrap_or_default(),
                at: v["at"].as_f64().unwrap_or_default(),
                op: v["op"].as_str().unwrap_or_default().to_owned(),
                cluster: v["cluster"].as_str().map(str::to_owned),
                name: v["name"].as_str().map(str::to_owned),
                status: u16::try_from(v["status"].as_u64().unwrap_or_default()).unwrap_or(0),
                latency: v["latency"].as_f64().unwrap_or_default(),
                detail: v["detail"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    }
}

/// Now as Unix time, the clock of the burst's `at`.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs `stop` (a service going away); when it began and when it returned, Unix times.
pub(crate) fn outage(stop: impl FnOnce()) -> (f64, f64) {
    let began = unix_now();
    stop();
    (began, unix_now())
}

/// The longest a 503 took, in seconds.
pub(crate) fn slowest_503(answers: &[Answer]) -> f64 {
    answers
        .iter()
        .filter(|a| a.status == 503)
        .map(|a| a.latency)
        .fold(0.0, f64::max)
}

/// Every answer is a success, a clear 503 within 2 s, or a refusal of the cluster's state.
/// `outages` holds when each fault began and when the service was fully down (Unix times):
/// a service stopping cleanly (a uWSGI master's graceful exit, say) can hold a request sent
/// meanwhile until it is gone, so the 2 s of such a request count from then.
pub(crate) fn assert_clear(answers: &[Answer], outages: &[(f64, f64)]) {
    let unclear: Vec<&Answer> = answers
        .iter()
        .filter(|a| {
            let ok = (200..300).contains(&a.status);
            let from = outages
                .iter()
                .filter(|&&(began, down)| a.at <= down && began <= a.at + a.latency)
                .fold(a.at, |from, &(_, down)| from.max(down));
            let unavailable = a.status == 503 && a.at + a.latency - from < 2.0;
            let state = matches!(a.status, 400 | 409) && a.op != "create";
            !(ok || unavailable || state)
        })
        .collect();
    assert!(
        unclear.is_empty(),
        "{} unclear answers, the first: {:#?}",
        unclear.len(),
        &unclear[..unclear.len().min(5)]
    );
}

/// Waits (2 min at most) until every accepted create completed, every accepted resize shows
/// two workers and every accepted delete is gone; returns the created and deleted clusters.
pub(crate) fn assert_carried_out(
    port: u16,
    token: &str,
    answers: &[Answer],
) -> (Vec<String>, HashSet<String>) {
    let ok_of = |op: &str| -> Vec<String> {
        answers
            .iter()
            .filter(|a| a.op == op && (200..300).contains(&a.status))
            .filter_map(|a| a.cluster.clone())
            .collect()
    };
    let created = ok_of("create");
    let resized: HashSet<String> = ok_of("resize").into_iter().collect();
    let deleted: HashSet<String> = ok_of("delete").into_iter().collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut pending = Vec::new();
        for uuid in &created {
            let (code, c) = http(
                port,
                Some(token),
                "GET",
                &format!("/v1/clusters/{uuid}"),
                None,
            );
            let done = if deleted.contains(uuid) {
                code == 404
            } else {
                assert_eq!(code, 200, "{uuid}: {c}");
                let s = c["status"].as_str().unwrap_or_default();
                assert!(!s.ends_with("_FAILED"), "{uuid}: {c}");
                let count_ok = !resized.contains(uuid) || c["node_count"] == 2;
                s.ends_with("_COMPLETE") && count_ok
            };
            if !done {
                let requests: Vec<String> = answers
                    .iter()
                    .filter(|a| a.cluster.as_deref() == Some(uuid.as_str()))
                    .map(|a| format!("{} at {:.1} s: {}", a.op, a.t, a.status))
                    .collect();
                pending.push(format!(
                    "{uuid} ({} {} node_count {}; asked {requests:?})",
                    c["status"], c["status_reason"], c["node_count"]
                ));
            }
        }
        if pending.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not carried out within 2 min of the burst: {pending:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!(
        "faults: {} creates, {} resizes, {} deletes accepted; all carried out",
        created.len(),
        resized.len(),
        deleted.len()
    );
    (created, deleted)
}

#[test]
fn a_burst_survives_database_conductor_keystone_and_broker_faults() {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1");
        return;
    }
    let Some(rabbit) = magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL") else {
        return;
    };
    let Some(mut mariadb) = PrivateMariaDb::start() else {
        return;
    };
    let _broker = crate::broker_lock();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let api_port = free_port();
    let (_keystone, env) = crate::client::start_keystone(w, api_port);
    let ks_dir = w.join("keystone");
    let tag = magnum_testkit::tag();
    // Declared before the processes, so it runs after they are gone (their queues with them).
    let _restore = crate::rabbit::BrokerRestore(tag.clone());
    let db_url = mariadb.database("magnum");
    let conf = w.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
             rpc_response_timeout = 10\nservice_down_time = 6\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\nsync_interval = 1\nreport_interval = 1\n\n\
             [oslo_messaging_notifications]\ndriver = messagingv2\ntopics = notifications_{tag}\n\n\
             [api]\nhost = 127.0.0.1\nport = {api_port}\n\n[database]\nconnection = {db_url}\n\n\
             [simulated_driver]\ncreate_delay = 1\nupdate_delay = 0.5\ndelete_delay = 0.5\n\n\
             [certificates]\ncert_manager_type = x509keypair\n\n\
             [quotas]\nmax_clusters_per_project = 1000\n\n\
             [oslo_messaging_rabbit]\namqp_durable_queues = true\n\n{ks}",
            ks = authtoken_section(&env),
        ),
    )
    .unwrap();
    let conf_s = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"])
            .status
            .success()
    );
    let host_conf = |name: &str| {
        let state = w.join(format!("state-{name}"));
        std::fs::create_dir_all(&state).unwrap();
        let p = w.join(format!("{name}.conf"));
        std::fs::write(
            &p,
            format!(
                "[DEFAULT]\nhost = {name}-{tag}\nstate_path = {}\n",
                state.display()
            ),
        )
        .unwrap();
        p
    };
    let magnumd = |confs: &[&Path], sub: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_magnumd"));
        for c in confs {
            cmd.arg("--config-file").arg(c);
        }
        cmd.arg(sub);
        cmd
    };
    let (conf_a, conf_b) = (host_conf("cond-a"), host_conf("cond-b"));
    let mut procs = Children::default();
    let api = procs.spawn(magnumd(&[&conf], "api"), &w.join("api.log"));
    let cond_a = procs.spawn(
        magnumd(&[&conf, &conf_a], "conductor"),
        &w.join("cond-a-1.log"),
    );
    procs.spawn(
        magnumd(&[&conf, &conf_b], "conductor"),
        &w.join("cond-b.log"),
    );
    magnum_testkit::wait_for_port(api_port, &mut procs.0[api]);

    let cli = Cli::keystone(&env);
    let token = cli.token("demo-member");
    let (code, t) = http(
        api_port,
        Some(&token),
        "POST",
        "/v1/clustertemplates",
        Some(
            &json!({"name": "faults", "coe": "kubernetes", "image_id": "img",
                     "external_network_id": "public"}),
        ),
    );
    assert_eq!(code, 201, "{t}");
    let template = t["uuid"].as_str().unwrap().to_owned();

    // The broker's firehose into a file, and a Python notification listener.
    crate::rabbit::rabbitmqctl(&["trace_on"]);
    let traffic = w.join("rabbit-traffic.jsonl");
    let mut tap = ChildGuard::new(
        Command::new(oslo_python())
            .arg(repo_root().join("test-support/faults/tap.py"))
            .arg(&rabbit)
            .arg(&traffic)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(tap.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("READY"), "tap: {line}");
    }
    // Durable queues on both sides, so what waits in them outlives the broker's restart
    // (with oslo's default, non-durable queues, a restart drops it).
    let listener = crate::rabbit::Listener::start_with(
        &rabbit,
        &format!("magnum_{tag}"),
        &format!("notifications_{tag}"),
        &[("OS_OSLO_MESSAGING_RABBIT__AMQP_DURABLE_QUEUES", "true")],
    );

    // The burst, in the background.
    let burst = Burst::start(
        &env["MAGNUM_TEST_VENV"],
        &env["OS_CLIENT_CONFIG_FILE"],
        &template,
        BURST,
        w,
    );
    let start = Instant::now();
    let mut windows: Vec<(&str, f64, f64)> = Vec::new();
    // When each fault began and when the service was down, on the burst's clock.
    let mut outages: Vec<(f64, f64)> = Vec::new();
    let since = |s: Instant| s.duration_since(start).as_secs_f64();

    // MariaDB restarted (a clean shutdown, 5 s away).
    at(start, 8);
    let t0 = since(Instant::now());
    outages.push(outage(|| mariadb.pause()));
    std::thread::sleep(Duration::from_secs(5));
    mariadb.resume();
    windows.push(("MariaDB restarted", t0, since(Instant::now())));

    // A conductor SIGKILLed; it comes back 5 s later.
    at(start, 22);
    let t0 = since(Instant::now());
    outages.push(outage(|| procs.stop(cond_a)));
    std::thread::sleep(Duration::from_secs(5));
    procs.spawn(
        magnumd(&[&conf, &conf_a], "conductor"),
        &w.join("cond-a-2.log"),
    );
    windows.push(("conductor SIGKILLed", t0, since(Instant::now())));

    // Keystone stopped for 30 s: tokens magnumd has validated keep working from its cache, a
    // token it has never seen gets a 503 at once.
    at(start, 34);
    let t0 = since(Instant::now());
    outages.push(outage(|| keystone_script("stop.sh", &ks_dir)));
    std::thread::sleep(Duration::from_secs(2));
    let asked = Instant::now();
    let (code, body) = http(
        api_port,
        Some("unseen-token-while-keystone-is-away"),
        "GET",
        "/v1/clusters",
        None,
    );
    let unseen_took = asked.elapsed();
    assert_eq!(code, 503, "an unseen token while Keystone is away: {body}");
    assert!(unseen_took < Duration::from_secs(2), "took {unseen_took:?}");
    std::thread::sleep(Duration::from_secs(28));
    keystone_script("resume.sh", &ks_dir);
    windows.push(("Keystone stopped 30 s", t0, since(Instant::now())));

    // The firehose ends before the broker goes: its queue would go with it.
    at(start, 70);
    drop(tap.stdin.take());
    let _ = tap.wait();
    if magnum_testkit::scan::dir().is_none() {
        crate::rabbit::rabbitmqctl(&["trace_off"]);
    }

    // RabbitMQ restarted (5 s away).
    at(start, 72);
    let t0 = since(Instant::now());
    outages.push(outage(|| crate::rabbit::rabbitmqctl(&["stop_app"])));
    std::thread::sleep(Duration::from_secs(5));
    crate::rabbit::rabbitmqctl(&["start_app"]);
    windows.push(("RabbitMQ restarted", t0, since(Instant::now())));

    let answers = burst.finish();

    // What each request got, per phase.
    let phase_of = |t: f64| {
        windows
            .iter()
            .find(|(_, from, to)| t >= *from - 0.5 && t <= *to + 1.0)
            .map_or("steady", |(name, _, _)| *name)
    };
    let mut table: BTreeMap<(String, String, u16), usize> = BTreeMap::new();
    for a in &answers {
        *table
            .entry((phase_of(a.t).to_owned(), a.op.clone(), a.status))
            .or_default() += 1;
    }
    eprintln!(
        "faults: {} requests; (phase, op, status) -> count:",
        answers.len()
    );
    for ((phase, op, status), n) in &table {
        eprintln!("faults:   {phase:<22} {op:<7} {status} x{n}");
    }
    // A refusal outside the fault windows (the tail of a reconnect, say), with what it said.
    for a in answers
        .iter()
        .filter(|a| a.status == 503 && phase_of(a.t) == "steady")
    {
        eprintln!(
            "faults:   steady 503 at {:.1} s ({}): {}",
            a.t, a.op, a.detail
        );
    }
    assert_clear(&answers, &outages);
    let slowest_503 = slowest_503(&answers);
    eprintln!(
        "faults: slowest 503: {slowest_503:.3} s; unseen token with Keystone away: {unseen_took:?}"
    );
    for (name, from, to) in &windows {
        eprintln!("faults: {name} from {from:.1} s to {to:.1} s");
    }

    // Every 2xx was carried out, and nothing stays in progress.
    let token = cli.token("demo-member");
    let (created, deleted) = assert_carried_out(api_port, &token, &answers);
    assert!(
        created.len() >= 20,
        "only {} creates accepted",
        created.len()
    );

    // Every notification arrived once: no message twice, one outcome per operation.
    std::thread::sleep(Duration::from_secs(3));
    let events = listener.stop();
    let superseded = assert_notified_once(&events, &created, &deleted, &answers);
    eprintln!("faults: {superseded} creates deleted before they started (no create outcome)");
    eprintln!("faults: {} notifications, each once", events.len());

    // No secret anywhere: logs, what crossed RabbitMQ, notifications, error bodies.
    procs.0.clear();
    let mut secrets: Vec<(String, String)> = vec![
        ("a token".into(), token.clone()),
        (
            "the service password".into(),
            env["MAGNUM_TEST_SERVICE_PASSWORD"].clone(),
        ),
    ];
    for (k, v) in &env {
        if k.ends_with("PASSWORD") && v.len() >= 6 {
            secrets.push((k.clone(), v.clone()));
        }
    }
    // Keystone here issues Fernet tokens, which all begin so.
    let patterns = [
        ("a Fernet token", "gAAAAA"),
        ("a private key", "PRIVATE KEY-----"),
    ];
    let mut scanned: Vec<(String, String)> = Vec::new();
    for entry in std::fs::read_dir(w).unwrap().flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|x| x == "log") {
            scanned.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
    }
    let traffic_text = std::fs::read_to_string(&traffic).unwrap_or_default();
    let traced = traffic_text.lines().count();
    assert!(traced > 50, "the firehose caught only {traced} messages");
    scanned.push(("RabbitMQ traffic".into(), traffic_text));
    scanned.push((
        "notifications".into(),
        events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
    ));
    scanned.push((
        "error bodies".into(),
        answers
            .iter()
            .map(|a| a.detail.clone())
            .collect::<Vec<_>>()
            .join("\n"),
    ));
    let mut found = Vec::new();
    for (source, text) in &scanned {
        for (what, value) in &secrets {
            if text.contains(value.as_str()) {
                found.push(format!("{what} in {source}"));
            }
        }
        for (what, needle) in patterns {
            let hits = text.matches(needle).count();
            if hits > 0 {
                found.push(format!("{what} in {source} ({hits}x)"));
            }
        }
    }
    eprintln!(
        "faults: secrets scan over {} sources ({} log files, {traced} RabbitMQ messages, {} \
         notifications, {} error bodies): {} found",
        scanned.len(),
        scanned.len() - 3,
        events.len(),
        answers.iter().filter(|a| !a.detail.is_empty()).count(),
        found.len()
    );
    assert!(found.is_empty(), "secrets found: {found:?}");
}

/// Every notification arrived once (no message id twice), each accepted delete has exactly
/// one outcome among `events`, and each accepted create one (none if its cluster was deleted
/// before the create started).
pub(crate) fn assert_notified_once(
    events: &[Value],
    created: &[String],
    deleted: &HashSet<String>,
    answers: &[Answer],
) -> usize {
    let mut superseded = 0;
    let mut ids = HashSet::new();
    let mut outcomes: HashMap<(String, String), usize> = HashMap::new();
    for e in events {
        let id = e["metadata"]["message_id"].as_str().unwrap_or_default();
        assert!(ids.insert(id.to_owned()), "message {id} arrived twice: {e}");
        let outcome = e["payload"]["outcome"].as_str().unwrap_or_default();
        if outcome != "pending" {
            let cluster = e["payload"]["target"]["id"].as_str().unwrap_or_default();
            let event = e["event_type"].as_str().unwrap_or_default();
            *outcomes
                .entry((cluster.to_owned(), event.to_owned()))
                .or_default() += 1;
        }
    }
    let story = |uuid: &str| -> (Vec<String>, Vec<&Answer>) {
        let of = events
            .iter()
            .filter(|e| e["payload"]["target"]["id"] == uuid)
            .map(|e| format!("{} {}", e["event_type"], e["payload"]["outcome"]))
            .collect();
        let asked = answers
            .iter()
            .filter(|a| a.cluster.as_deref() == Some(uuid))
            .collect();
        (of, asked)
    };
    for uuid in created {
        let n = outcomes
            .get(&(uuid.clone(), "magnum.cluster.create".to_owned()))
            .copied()
            .unwrap_or(0);
        // A create still waiting (for Barbican, say) when its cluster is deleted never
        // starts, so it has no outcome; the delete has its own.
        if n > 1 || (n == 0 && !deleted.contains(uuid)) {
            let (of, asked) = story(uuid);
            panic!("{uuid}: {n} create outcomes; its events {of:?}; its requests {asked:#?}");
        }
        if n == 0 {
            superseded += 1;
        }
    }
    for uuid in deleted {
        let n = outcomes
            .get(&(uuid.clone(), "magnum.cluster.delete".to_owned()))
            .copied()
            .unwrap_or(0);
        if n != 1 {
            let (of, asked) = story(uuid);
            panic!("{uuid}: {n} delete outcomes; its events {of:?}; its requests {asked:#?}");
        }
    }
    superseded
}
