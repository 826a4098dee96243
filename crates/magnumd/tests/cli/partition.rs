//! Periodic work shared by live conductors: three `magnumd conductor` processes over
//! RabbitMQ and MariaDB, 3,000 in-progress clusters of the simulated driver. Each cluster is
//! polled by exactly one conductor per cycle (counted from the conductors' own debug lines);
//! a SIGKILLed conductor's share is taken over within `service_down_time`; when it comes back
//! the shares rebalance; every cluster's completion is notified exactly once (consumed from
//! RabbitMQ by a Python oslo.messaging listener).
//! And the notification outbox: events of clusters that complete while RabbitMQ is down
//! are stored, survive a SIGKILL of their conductor, and arrive exactly once after both are
//! back. Runs when MAGNUM_TEST_RABBIT_URL and MAGNUM_TEST_MYSQL_URL are set.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_testkit::Children;
use magnum_testkit::db::{Server, ServerDb};
use serde_json::Value;

const CLUSTERS: usize = 3000;
const SERVICE_DOWN_TIME: i64 = 6;

fn conductor(conf: &Path, host_conf: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_magnumd"));
    cmd.arg("--config-file")
        .arg(conf)
        .arg("--config-file")
        .arg(host_conf)
        .arg("conductor");
    cmd
}

/// A conductor's JSON log lines about sweeps: `(time, cluster)` for each poll.
pub(crate) fn polls(log: &Path) -> Vec<(DateTime<Utc>, String)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "status sweep: polling")
        .filter_map(|l| {
            let t = l["timestamp"].as_str()?.parse::<DateTime<Utc>>().ok()?;
            Some((t, l["cluster"].as_str()?.to_owned()))
        })
        .collect()
}

/// Which hosts polled each cluster between `from` and `to`.
pub(crate) fn pollers(
    logs: &[(String, PathBuf)],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> HashMap<String, HashSet<String>> {
    let mut by_cluster: HashMap<String, HashSet<String>> = HashMap::new();
    for (host, log) in logs {
        for (t, cluster) in polls(log) {
            if t >= from && t < to {
                by_cluster.entry(cluster).or_default().insert(host.clone());
            }
        }
    }
    by_cluster
}

/// Asserts that every cluster was polled in `[from, to)` by exactly one host; returns the
/// shares by host.
fn assert_exactly_one(
    phase: &str,
    logs: &[(String, PathBuf)],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    expected_hosts: usize,
) -> BTreeMap<String, usize> {
    let by_cluster = pollers(logs, from, to);
    assert_eq!(
        by_cluster.len(),
        CLUSTERS,
        "{phase}: {} of {CLUSTERS} clusters polled",
        by_cluster.len()
    );
    let doubles: Vec<_> = by_cluster.iter().filter(|(_, h)| h.len() != 1).collect();
    assert!(
        doubles.is_empty(),
        "{phase}: {} clusters polled by several conductors, e.g. {:?}",
        doubles.len(),
        doubles.first()
    );
    let mut shares = BTreeMap::new();
    for hosts in by_cluster.values() {
        for h in hosts {
            *shares.entry(h.clone()).or_insert(0) += 1;
        }
    }
    assert_eq!(shares.len(), expected_hosts, "{phase}: {shares:?}");
    eprintln!("partition {phase}: every cluster polled by one conductor; shares {shares:?}");
    shares
}

/// Waits until each log says its sweep is shared by `n` conductors after `since`.
pub(crate) fn wait_members(
    logs: &[(String, PathBuf)],
    n: usize,
    since: DateTime<Utc>,
    limit: Duration,
) {
    let deadline = Instant::now() + limit;
    let wanted = format!("status sweep shared by {n} conductor(s)");
    loop {
        let all = logs.iter().all(|(_, log)| {
            std::fs::read_to_string(log)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|l| {
                    l["message"] == wanted.as_str()
                        && l["timestamp"]
                            .as_str()
                            .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                            .is_some_and(|t| t >= since)
                })
        });
        if all {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "conductors never saw {n} members"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The test's own handle on the conductors' database: one runtime and one connection for the
/// seeding and the polls.
pub(crate) struct Rows {
    rt: tokio::runtime::Runtime,
    db: magnum_db::Database,
}

impl Rows {
    pub(crate) fn open(db_url: &str) -> Self {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let db = rt
            .block_on(magnum_db::Database::connect(magnum_testkit::db::settings(
                db_url,
            )))
            .unwrap();
        Self { rt, db }
    }

    /// `count` clusters of the simulated driver held in CREATE_IN_PROGRESS; their uuids.
    pub(crate) fn seed(&self, count: usize) -> Vec<String> {
        let db = &self.db;
        self.rt.block_on(async {
            let template = db
                .cluster_templates()
                .create(ClusterTemplate {
                    name: Some("partition".into()),
                    project_id: Some("p".into()),
                    user_id: Some("u".into()),
                    coe: Some("kubernetes".into()),
                    image_id: Some("ubuntu".into()),
                    driver: Some("simulated".into()),
                    ..ClusterTemplate::default()
                })
                .await
                .unwrap();
            let mut uuids = Vec::with_capacity(count);
            let mut batch = Vec::new();
            for i in 0..count {
                let db = db.clone();
                let template = template.uuid.clone();
                batch.push(tokio::spawn(async move {
                    let uuid = uuid_of(i);
                    db.clusters()
                        .create(Cluster {
                            uuid: Some(uuid.clone()),
                            name: Some(format!("p{i}")),
                            project_id: Some("p".into()),
                            user_id: Some("u".into()),
                            cluster_template_id: template,
                            stack_id: Some(format!("sim-{uuid}")),
                            status: "CREATE_IN_PROGRESS".parse().ok(),
                            // Held in progress until the test lets them complete.
                            labels: Some(r#"{"simulated_hang": "create"}"#.into()),
                            ..Cluster::default()
                        })
                        .await
                        .unwrap();
                    uuid
                }));
                if batch.len() == 32 {
                    for t in batch.drain(..) {
                        uuids.push(t.await.unwrap());
                    }
                }
            }
            for t in batch {
                uuids.push(t.await.unwrap());
            }
            uuids
        })
    }

    /// The conductors' heartbeat rows: host and report count.
    pub(crate) fn conductor_rows(&self) -> Vec<(String, i32)> {
        let rows = self
            .rt
            .block_on(self.db.magnum_services().of_binary("magnum-conductor"))
            .unwrap();
        rows.into_iter()
            .filter_map(|r| Some((r.host?, r.report_count)))
            .collect()
    }

    /// Lets every hung create complete at its next poll.
    fn release(&self) {
        let update = self.db.execute_text("UPDATE cluster SET labels = '{}'");
        self.rt.block_on(update).unwrap();
    }

    fn completed(&self) -> i64 {
        let (clusters, _) = self.rt.block_on(self.db.status_counts()).unwrap();
        clusters
            .iter()
            .find(|(s, _)| s == "CREATE_COMPLETE")
            .map_or(0, |(_, n)| *n)
    }
}

fn uuid_of(i: usize) -> String {
    format!("5a1e0000-0000-4000-8000-{i:012}")
}

#[test]
fn three_conductors_share_3000_clusters_and_take_over_a_dead_ones_share() {
    let Some(rabbit) = magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL") else {
        return;
    };
    let Some(db) = ServerDb::create_blocking(Server::MariaDb, "magnum_cli") else {
        return;
    };
    let _broker = crate::broker_lock();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let tag = magnum_testkit::tag();
    // Dropped after the conductors: their notification ledgers (named after the tag) go too.
    let _restore = crate::rabbit::BrokerRestore(tag.clone());
    let db_url = db.url_with_scheme("mysql+pymysql");
    let conf = w.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
             service_down_time = {SERVICE_DOWN_TIME}\ndebug = true\nuse_json = true\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\nsync_interval = 2\nreport_interval = 1\n\n\
             [oslo_messaging_notifications]\ndriver = messagingv2\ntopics = notifications_{tag}\n\n\
             [simulated_driver]\ncreate_delay = 1\n\n\
             [certificates]\ncert_manager_type = x509keypair\n\n\
             [database]\nconnection = {db_url}\n"
        ),
    )
    .unwrap();
    let conf_s = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"])
            .status
            .success()
    );
    let started = Instant::now();
    let rows = Rows::open(&db.url());
    let uuids = rows.seed(CLUSTERS);
    eprintln!(
        "partition: {CLUSTERS} CREATE_IN_PROGRESS clusters seeded in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let listener = crate::rabbit::Listener::start(
        &rabbit,
        &format!("magnum_{tag}"),
        &format!("notifications_{tag}"),
    );

    let hosts = ["cond-a", "cond-b", "cond-c"];
    let host_conf = |h: &str| {
        let p = w.join(format!("{h}.conf"));
        std::fs::write(&p, format!("[DEFAULT]\nhost = {h}-{tag}\n")).unwrap();
        p
    };
    let log_of = |h: &str, run: u32| w.join(format!("{h}-{run}.log"));
    let mut procs = Children::default();
    let t0 = Utc::now();
    let mut logs: Vec<(String, PathBuf)> = Vec::new();
    for h in hosts {
        procs.spawn(conductor(&conf, &host_conf(h)), &log_of(h, 1));
        logs.push((h.to_owned(), log_of(h, 1)));
    }

    let phase = |name: &str| {
        eprintln!(
            "partition: {name} at {:.1} s",
            started.elapsed().as_secs_f64()
        )
    };
    // 1. All three up: one poller per cluster over two full cycles.
    wait_members(&logs, 3, t0, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    let from = Utc::now();
    std::thread::sleep(Duration::from_millis(4500));
    let steady = assert_exactly_one("with 3 conductors", &logs, from, Utc::now(), 3);
    for (h, n) in &steady {
        assert!(
            (CLUSTERS / 3 * 8 / 10..=CLUSTERS / 3 * 12 / 10).contains(n),
            "{h} owns {n}: {steady:?}"
        );
    }
    let c_share: HashSet<String> = pollers(&logs, from, Utc::now())
        .into_iter()
        .filter(|(_, h)| h.contains("cond-c"))
        .map(|(c, _)| c)
        .collect();

    phase("3 conductors checked");
    // 2. cond-c SIGKILLed: its clusters are polled by the others within service_down_time.
    let killed_at = Utc::now();
    procs.stop(2);
    let survivors = logs[..2].to_vec();
    // The first poll of each of its clusters by a survivor, read in one pass per check.
    let first_polls = || {
        let mut first: HashMap<String, DateTime<Utc>> = HashMap::new();
        for (_, log) in &survivors {
            for (t, c) in polls(log) {
                if t >= killed_at && c_share.contains(&c) {
                    let e = first.entry(c).or_insert(t);
                    *e = (*e).min(t);
                }
            }
        }
        first
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let last_pickup = loop {
        let first = first_polls();
        if first.len() == c_share.len() {
            break first.values().max().copied().unwrap_or(killed_at);
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} of the dead conductor's clusters taken over",
            first.len(),
            c_share.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let pickup = (last_pickup - killed_at).num_milliseconds();
    eprintln!(
        "partition: {} clusters of the killed conductor taken over {:.1} s after SIGKILL \
         (service_down_time {SERVICE_DOWN_TIME} s)",
        c_share.len(),
        pickup as f64 / 1000.0
    );
    assert!(
        pickup <= SERVICE_DOWN_TIME * 1000,
        "took {pickup} ms, more than service_down_time"
    );
    wait_members(&survivors, 2, killed_at, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    let from = Utc::now();
    std::thread::sleep(Duration::from_millis(4500));
    assert_exactly_one("with 2 conductors", &survivors, from, Utc::now(), 2);

    phase("2 conductors checked");
    // 3. cond-c comes back: the shares rebalance to three.
    let back_at = Utc::now();
    procs.spawn(conductor(&conf, &host_conf("cond-c")), &log_of("cond-c", 2));
    logs[2] = ("cond-c".to_owned(), log_of("cond-c", 2));
    wait_members(&logs, 3, back_at, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    let from = Utc::now();
    std::thread::sleep(Duration::from_millis(4500));
    let rebalanced = assert_exactly_one("after the rejoin", &logs, from, Utc::now(), 3);
    assert_eq!(
        rebalanced, steady,
        "the rejoined conductor got back its own share"
    );

    // 4. Every cluster completes once, and its completion is notified exactly once.
    rows.release();
    let released = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(120);
    while rows.completed() < CLUSTERS as i64 {
        assert!(
            Instant::now() < deadline,
            "{} of {CLUSTERS} clusters completed",
            rows.completed()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "partition: {CLUSTERS} clusters completed {:.1} s after their release",
        released.elapsed().as_secs_f64()
    );
    // The notifications follow the rows through each conductor's outbox (one sender, each
    // confirmed by the broker), so the last may come a little after the last status write.
    let completed_at = Instant::now();
    let success_of = |e: &Value| {
        e["event_type"] == "magnum.cluster.create" && e["payload"]["outcome"] == "success"
    };
    let events = listener.stop_when(Duration::from_secs(60), |seen| {
        seen.iter()
            .filter(|e| success_of(e))
            .filter_map(|e| e["payload"]["target"]["id"].as_str())
            .collect::<HashSet<_>>()
            .len()
            >= CLUSTERS
    });
    eprintln!(
        "partition: the last create notification arrived within {:.1} s of the last completion",
        completed_at.elapsed().as_secs_f64() - 2.0
    );
    let mut message_ids = HashSet::new();
    let mut successes: HashMap<String, usize> = HashMap::new();
    for e in &events {
        let id = e["metadata"]["message_id"].as_str().unwrap_or_default();
        assert!(
            message_ids.insert(id.to_owned()),
            "message {id} arrived twice"
        );
        if success_of(e) {
            let cluster = e["payload"]["target"]["id"].as_str().unwrap_or_default();
            *successes.entry(cluster.to_owned()).or_default() += 1;
        }
    }
    let twice: Vec<_> = successes.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "create success sent more than once: {twice:?}"
    );
    let missing = uuids.iter().filter(|u| !successes.contains_key(*u)).count();
    assert_eq!(
        missing, 0,
        "{missing} clusters completed without a notification"
    );
    eprintln!(
        "partition: {} notifications received, {} distinct message ids, one create success \
         per cluster",
        events.len(),
        message_ids.len()
    );
}

fn stored(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count()
    })
}

#[test]
fn notifications_wait_for_the_broker_on_disk_and_survive_a_sigkill() {
    const N: usize = 200;
    let Some(rabbit) = magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL") else {
        return;
    };
    let Some(db) = ServerDb::create_blocking(Server::MariaDb, "magnum_cli") else {
        return;
    };
    let _broker = crate::broker_lock();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let tag = magnum_testkit::tag();
    // Dropped last: the broker back up, this run's durable queues (events, ledger) gone.
    let _restore = crate::rabbit::BrokerRestore(tag.clone());
    let state = w.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let host = format!("outbox-{tag}");
    let conf = w.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
             state_path = {state}\nhost = {host}\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\nsync_interval = 1\nreport_interval = 1\n\n\
             [oslo_messaging_notifications]\ndriver = messagingv2\ntopics = notifications_{tag}\n\n\
             [simulated_driver]\ncreate_delay = 1\n\n\
             [certificates]\ncert_manager_type = x509keypair\n\n\
             [oslo_messaging_rabbit]\namqp_durable_queues = true\n\n\
             [database]\nconnection = {db_url}\n",
            state = state.display(),
            db_url = db.url_with_scheme("mysql+pymysql"),
        ),
    )
    .unwrap();
    let conf_s = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf_s, "db", "upgrade"])
            .status
            .success()
    );
    let rows = Rows::open(&db.url());
    let uuids = rows.seed(N);
    // Durable queues on both sides, as an operator who wants events kept over a broker
    // restart configures them: the listener's queue is there again before the listener has
    // reconnected, so what the restarted conductor sends at once waits for it.
    let listener = crate::rabbit::Listener::start_with(
        &rabbit,
        &format!("magnum_{tag}"),
        &format!("notifications_{tag}"),
        &[("OS_OSLO_MESSAGING_RABBIT__AMQP_DURABLE_QUEUES", "true")],
    );
    let spawn = |procs: &mut Children, run: u32| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_magnumd"));
        cmd.args(["--config-file", &conf_s, "conductor"]);
        procs.spawn(cmd, &w.join(format!("conductor-{run}.log")))
    };
    let mut procs = Children::default();
    let first = spawn(&mut procs, 1);
    std::thread::sleep(Duration::from_secs(3));

    // The broker goes away; the clusters complete meanwhile: their events wait on disk.
    crate::rabbit::rabbitmqctl(&["stop_app"]);
    rows.release();
    let outbox = state.join("notifications").join(&host);
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows.completed() < N as i64 || stored(&outbox) < N {
        assert!(
            Instant::now() < deadline,
            "{} completed, {} stored",
            rows.completed(),
            stored(&outbox)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!("outbox: {N} events stored while the broker was down");
    // Their conductor dies before the broker returns.
    procs.stop(first);
    assert_eq!(stored(&outbox), N, "nothing may be lost by the kill");
    crate::rabbit::rabbitmqctl(&["start_app"]);
    let back = Instant::now();
    spawn(&mut procs, 2);
    let deadline = Instant::now() + Duration::from_secs(90);
    while stored(&outbox) > 0 {
        assert!(
            Instant::now() < deadline,
            "{} events still stored after the broker returned",
            stored(&outbox)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!(
        "outbox: the restarted conductor sent the stored events within {:.1} s of the broker's return",
        back.elapsed().as_secs_f64()
    );
    let events = listener.stop();
    let mut ids = HashSet::new();
    let mut successes: HashMap<String, usize> = HashMap::new();
    for e in &events {
        let id = e["metadata"]["message_id"].as_str().unwrap_or_default();
        assert!(ids.insert(id.to_owned()), "message {id} arrived twice");
        if e["event_type"] == "magnum.cluster.create" && e["payload"]["outcome"] == "success" {
            let c = e["payload"]["target"]["id"].as_str().unwrap_or_default();
            *successes.entry(c.to_owned()).or_default() += 1;
        }
    }
    let missing = uuids
        .iter()
        .filter(|u| successes.get(*u) != Some(&1))
        .count();
    assert_eq!(
        missing, 0,
        "{missing} clusters without exactly one create success event"
    );
    eprintln!("outbox: {} events received, each once", events.len());
}
