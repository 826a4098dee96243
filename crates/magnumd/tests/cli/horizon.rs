//! Horizon with magnum-ui (and Skyline) in headless Chromium: see test-support/horizon.
//!
//! The real dashboard, Horizon 27.0.0 with the magnum-ui 19.0.0 plugin (both from PyPI),
//! against the cloud's real Keystone, Glance, Nova and Neutron and this test's `magnumd serve`,
//! driven by playwright-core in Debian's Chromium (test-support/horizon/flow.js): demo-member
//! logs in, creates a cluster template and a cluster in magnum-ui's panels, sees the cluster
//! reach CREATE_COMPLETE in the list, opens its detail page and deletes both. magnumd must
//! answer every request Horizon made with the status upstream gives (no 4xx/5xx at all). The
//! screenshots, the browser's call record and magnumd's request list stay in
//! `$MAGNUM_TEST_ARTIFACTS/horizon` (default /var/tmp/magnum-rs-artifacts/horizon).
//! Runs when MAGNUM_TEST_CLOUD is set and MAGNUM_TEST_HORIZON=1. Skyline: see the README there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use magnum_testkit::ChildGuard;
use serde_json::Value;

use crate::client::{free_port, repo_root};
use crate::cloud::{Env, cloud, start_magnum};

/// The stages flow.js goes through, in order.
const STAGES: [&str; 10] = [
    "login",
    "region",
    "template-list",
    "template-create",
    "template-in-list",
    "cluster-create",
    "cluster-complete",
    "cluster-detail",
    "cluster-delete",
    "template-delete",
];

/// Removes this test's catalogue region (its endpoints, then the region) when dropped.
struct Region<'a> {
    env: &'a Env,
    name: String,
}

impl Region<'_> {
    /// Adds `TYPE=NAME=URL` endpoints to the region (test-support/openstack/register.py).
    fn register(&self, entries: &[String]) {
        let st = Command::new(format!("{}/bin/python", self.env.ks["MAGNUM_TEST_VENV"]))
            .arg(repo_root().join("test-support/openstack/register.py"))
            .arg(&self.env.ks["MAGNUM_TEST_AUTH_URL"])
            .arg(&self.env.ks["MAGNUM_TEST_ADMIN_PASSWORD"])
            .arg(&self.name)
            .args(entries)
            .env("PYTHONWARNINGS", "ignore")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "register.py for {}", self.name);
    }
}

impl Drop for Region<'_> {
    fn drop(&mut self) {
        let script = r#"
import sys
from keystoneauth1 import session
from keystoneauth1.identity import v3
from keystoneclient.v3 import client
auth_url, password, region = sys.argv[1:4]
s = session.Session(auth=v3.Password(auth_url=auth_url, username="admin", password=password,
    project_name="admin", user_domain_id="default", project_domain_id="default"))
ks = client.Client(session=s, endpoint_override=auth_url, interface="public")
for ep in ks.endpoints.list(region_id=region):
    if ep.region_id == region:
        ks.endpoints.delete(ep)
ks.regions.delete(region)
"#;
        let st = Command::new(format!("{}/bin/python", self.env.ks["MAGNUM_TEST_VENV"]))
            .arg("-c")
            .arg(script)
            .arg(&self.env.ks["MAGNUM_TEST_AUTH_URL"])
            .arg(&self.env.ks["MAGNUM_TEST_ADMIN_PASSWORD"])
            .arg(&self.name)
            .env("PYTHONWARNINGS", "ignore")
            .status();
        if !matches!(st, Ok(s) if s.success()) {
            eprintln!("horizon: could not remove region {}", self.name);
        }
    }
}

/// One SQL statement on the cloud's MariaDB (the mysql CLI, as magnumd's tests' account).
fn sql(db: &str, statement: &str) -> std::io::Result<std::process::Output> {
    Command::new("mysql")
        .args([
            "-h127.0.0.1",
            "-umagnum_test",
            "-pmagnum_test",
            db,
            "-e",
            statement,
        ])
        .output()
}

/// A `nova-compute` service row in the real Nova's cell database while the test runs, so
/// that Nova lists availability zone `nova` (there is no compute process: Nova lists the
/// zones of its enabled compute services and nothing else); removed when dropped.
struct Zone {
    db: String,
    host: String,
}

impl Zone {
    fn new(env: &Env) -> Self {
        let zone = Self {
            db: format!("{}nova", env.os["MAGNUM_TEST_OS_DB_PREFIX"]),
            host: format!("hz-compute-{}", magnum_testkit::tag()),
        };
        // The service version of the running nova-api, so no minimum-version check trips.
        let out = sql(
            &zone.db,
            &format!(
                "INSERT INTO services (created_at, updated_at, host, `binary`, topic, \
                 report_count, disabled, deleted, version, uuid, forced_down) \
                 SELECT NOW(), NOW(), '{}', 'nova-compute', 'compute', 1, 0, 0, MAX(version), \
                 UUID(), 0 FROM services WHERE `binary` = 'nova-osapi_compute'",
                zone.host
            ),
        )
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        zone
    }
}

impl Drop for Zone {
    fn drop(&mut self) {
        let gone = sql(
            &self.db,
            &format!("DELETE FROM services WHERE host = '{}'", self.host),
        );
        if !matches!(gone, Ok(o) if o.status.success()) {
            eprintln!("horizon: could not remove Nova service row {}", self.host);
        }
    }
}

/// Stops the Horizon of `workdir` (test-support/horizon/stop.sh) when dropped.
struct Horizon(PathBuf);

impl Drop for Horizon {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("test-support/horizon/stop.sh"))
            .arg(&self.0)
            .status();
    }
}

/// Kills, when dropped, every process whose command line names `profile`: the Chromium that
/// flow.js started with that profile (Playwright runs it in a process group of its own, so
/// the node's guard does not reach it).
struct Browsers(PathBuf);

impl Browsers {
    fn pids(&self) -> Vec<u32> {
        let needle = self.0.display().to_string();
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                pids.push(pid);
            }
        }
        pids
    }
}

impl Drop for Browsers {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// `[api] port` of a magnum.conf written by `start_magnum`.
fn api_port(conf: &Path) -> u16 {
    let text = std::fs::read_to_string(conf).unwrap();
    let mut in_api = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_api = line == "[api]";
        } else if let Some(v) = line.strip_prefix("port = ").filter(|_| in_api) {
            return v.parse().unwrap();
        }
    }
    panic!("no [api] port in {}", conf.display());
}

/// magnumd's request lines (`... method=GET path=/v1/... status=200 ...`) as
/// (method, path, status).
fn requests(log: &str) -> Vec<(String, String, u16)> {
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(key)? + key.len();
        let rest = &line[at..];
        let end = rest.find([' ', '\u{1b}']).unwrap_or(rest.len());
        Some(rest[..end].to_owned())
    };
    log.lines()
        .filter_map(|l| {
            Some((
                field(l, "method=")?,
                field(l, "path=")?,
                field(l, "status=")?.parse().ok()?,
            ))
        })
        .collect()
}

/// A path with its ids replaced by `<id>`, for counting.
fn route(path: &str) -> String {
    path.split('/')
        .map(|s| {
            if s.len() >= 32 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                "<id>"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn artifacts() -> PathBuf {
    let base = std::env::var("MAGNUM_TEST_ARTIFACTS")
        .unwrap_or_else(|_| "/var/tmp/magnum-rs-artifacts".into());
    PathBuf::from(base).join("horizon")
}

#[test]
fn a_member_runs_a_cluster_through_horizon_and_magnum_ui() {
    let Some(c) = cloud() else { return };
    if !magnum_testkit::flag("MAGNUM_TEST_HORIZON") {
        magnum_testkit::skip("MAGNUM_TEST_HORIZON is not 1");
        return;
    }
    let started = Instant::now();
    let m = start_magnum(&c, "");
    let port = api_port(&m.work.path().join("magnum.conf"));
    // start_magnum registered identity and container-infra in region mt<port>; Horizon's
    // forms also list images, flavors, keypairs, zones and networks in the region it shows,
    // so the real Glance, Nova and Neutron join it there.
    let region = Region {
        env: &c,
        name: format!("mt{port}"),
    };
    region.register(&[
        format!("image=glance={}", c.os["MAGNUM_TEST_OS_GLANCE_URL"]),
        format!("compute=nova={}", c.os["MAGNUM_TEST_OS_NOVA_URL"]),
        format!("network=neutron={}", c.os["MAGNUM_TEST_OS_NEUTRON_URL"]),
    ]);

    let _zone = Zone::new(&c);

    let out = artifacts();
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    eprintln!("horizon: screenshots and records in {}", out.display());

    let hz_dir = m.work.path().join("horizon");
    let hz_port = free_port();
    let st = Command::new("bash")
        .arg(repo_root().join("test-support/horizon/start.sh"))
        .arg(&hz_dir)
        .arg(Path::new(&c.ks["MAGNUM_TEST_KEYSTONE_WORKDIR"]).join("env.sh"))
        .arg(hz_port.to_string())
        .status()
        .unwrap();
    let _horizon = Horizon(hz_dir.clone());
    assert!(st.success(), "test-support/horizon/start.sh failed");
    let up = started.elapsed();

    // The flow, in a process group of its own; its Chromium by its profile folder.
    let root = std::env::var("MAGNUM_TEST_HORIZON_ROOT")
        .unwrap_or_else(|_| "/var/tmp/magnum-rs-horizon".into());
    let profile = m.work.path().join("chromium-profile");
    let browsers = Browsers(profile.clone());
    let flow_log = out.join("flow.log");
    let mut node = ChildGuard::spawn(
        Command::new("node")
            .arg(repo_root().join("test-support/horizon/flow.js"))
            .env("NODE_PATH", format!("{root}/node/node_modules"))
            .env("HORIZON", format!("http://127.0.0.1:{hz_port}"))
            .env("REGION", &region.name)
            .env("OS_USER", "demo-member")
            .env("OS_PASS", &c.ks["MAGNUM_TEST_DEMO_MEMBER_PASSWORD"])
            .env("SHOTS", &out)
            .env("TAG", magnum_testkit::tag())
            .env("USER_DATA_DIR", &profile)
            // Nova lists zone `nova` (Zone): no zone made up in the browser
            .env("AZ_FALLBACK", "")
            .stdout(std::fs::File::create(&flow_log).unwrap())
            .stderr(std::fs::File::create(out.join("flow.stderr")).unwrap()),
    );
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(s) = node.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(node);
    drop(browsers);
    let flow_text = std::fs::read_to_string(&flow_log).unwrap_or_default();
    let flow_err = std::fs::read_to_string(out.join("flow.stderr")).unwrap_or_default();
    let _ = std::fs::copy(hz_dir.join("horizon.log"), out.join("horizon.log"));
    let log = std::fs::read_to_string(m.work.path().join("api.log")).unwrap();
    let seen = requests(&log);
    let mut listing = String::new();
    for (method, path, code) in &seen {
        listing.push_str(&format!("{method} {path} {code}\n"));
    }
    std::fs::write(out.join("magnumd-requests.txt"), &listing).unwrap();
    let status = status.unwrap_or_else(|| panic!("flow.js ran over 240 s:\n{flow_text}"));
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap_or_default())
            .unwrap_or_else(|e| panic!("no result.json ({e}): {flow_text}\n{flow_err}"));
    assert!(
        status.success() && result["ok"] == true,
        "the Horizon flow failed ({status}): {}\n{flow_text}\n{flow_err}\nscreenshots: {}",
        result["error"],
        out.display()
    );
    let stages: Vec<&str> = result["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(stages, STAGES, "{flow_text}");
    let shots = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "png"))
        .count();
    assert!(shots >= 20, "{shots} screenshots in {}", out.display());

    // The zone came from Nova, as openstacksdk's `name`; the shim only copied it to `zoneName`.
    let shim = result["az_shim"].to_string();
    assert!(
        shim.contains(r#"\"name\":\"nova\""#) && shim.contains(r#"\"zoneName\":\"nova\""#),
        "{shim}"
    );

    // What magnumd answered the two creates, as Horizon passed it on: the template as
    // upstream fills it in (cluster_distro from the real Glance image's os_distro, the
    // external network's id as magnum-ui sent it), and the accepted cluster's uuid.
    let calls: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("api-calls.json")).unwrap())
            .unwrap();
    let answer = |url: &str| -> Value {
        let call = calls
            .iter()
            .find(|a| a["method"] == "POST" && a["url"] == url)
            .unwrap_or_else(|| panic!("no POST {url} in api-calls.json"));
        serde_json::from_str(call["response"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("POST {url}: {e}: {call}"))
    };
    let t = answer("/api/container_infra/cluster_templates/");
    for (key, want) in [
        ("coe", "kubernetes"),
        ("image_id", "fedora-coreos-40"),
        ("cluster_distro", "fedora-coreos"),
        ("keypair_id", "demo-key"),
        ("flavor_id", "m1.medium"),
        ("network_driver", "calico"),
        (
            "external_network_id",
            &c.os["MAGNUM_TEST_OS_NETWORK_PUBLIC_ID"],
        ),
    ] {
        assert_eq!(t[key], want, "{key} in {t}");
    }
    assert_eq!(t["floating_ip_enabled"], true, "{t}");
    let cl = answer("/api/container_infra/clusters/");
    assert!(cl["uuid"].as_str().is_some_and(|u| u.len() == 36), "{cl}");

    // Every answer magnumd gave Horizon is a success, with upstream's status for each write.
    let bad: Vec<_> = seen.iter().filter(|(_, _, s)| *s >= 400).collect();
    assert!(
        bad.is_empty(),
        "magnumd answered Horizon with 4xx/5xx: {bad:?}"
    );
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (method, path, code) in &seen {
        *counts
            .entry(format!("{method} {} {code}", route(path)))
            .or_default() += 1;
    }
    for expected in [
        "GET /v1/clustertemplates/detail 200",
        "POST /v1/clustertemplates 201",
        "GET /v1/clustertemplates/<id> 200",
        "GET /v1/clusters/detail 200",
        "GET /v1/stats 200",
        "POST /v1/clusters 202",
        "GET /v1/clusters/<id> 200",
        "DELETE /v1/clusters/<id> 204",
        "DELETE /v1/clustertemplates/<id> 204",
    ] {
        assert!(
            counts.contains_key(expected),
            "Horizon's requests lack {expected}: {counts:#?}"
        );
    }
    // The quota read is per project: /v1/quotas/<project id>/Cluster.
    assert!(
        seen.iter().any(|(m, p, s)| m == "GET"
            && *p == format!("/v1/quotas/{}/Cluster", c.ks["MAGNUM_TEST_DEMO_PROJECT_ID"])
            && *s == 200),
        "{counts:#?}"
    );
    // What the UI created, magnumd has deleted: nothing is left of demo's.
    let lists: [&[&str]; 2] = [
        &["coe", "cluster", "list"],
        &["coe", "cluster", "template", "list"],
    ];
    for what in lists {
        let left = m.cli.json("demo-member", what);
        assert_eq!(left, serde_json::json!([]), "{what:?}");
    }
    // Horizon's own calls that failed (Nova/Neutron panels, not Magnum), for the record; none
    // of magnum-ui's may.
    let ui_errors = result["api_errors"].as_array().cloned().unwrap_or_default();
    let magnum_ui: Vec<&Value> = ui_errors
        .iter()
        .filter(|e| {
            e["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("/api/container_infra/"))
        })
        .collect();
    assert!(
        magnum_ui.is_empty(),
        "magnum-ui's calls failed: {magnum_ui:?}"
    );
    eprintln!(
        "horizon: flow OK in {}s ({} s to start magnumd and Horizon; stages {}); \
         browser /api/ calls {} ({} with 4xx/5xx: {ui_errors:?}); zone nova from Nova; \
         magnumd answered {} requests: {counts:?}; screenshots: {} in {}",
        result["total_s"],
        up.as_secs(),
        result["timings"],
        result["api_calls"],
        ui_errors.len(),
        seen.len(),
        shots,
        out.display()
    );
}
