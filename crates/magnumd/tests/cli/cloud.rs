//! magnumd in a real cloud: the real Keystone and the seven real OpenStack API services that
//! scripts/test starts once (test-support/openstack: Barbican, Glance, Nova, Neutron, Cinder,
//! Octavia, Manila from PyPI, in region RealOne), driven with the real `openstack coe` client.
//! Runs when MAGNUM_TEST_CLOUD names that cloud's directory.
//!
//! Each test registers its magnumd in a region of its own (identity and container-infra
//! only), so tests never share a Magnum endpoint; the services stay in RealOne and every
//! `[<service>_client] region_name` names it. The tests take one lock, because they stop
//! services and count requests in the services' logs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use magnum_testkit::ChildGuard;
use magnum_testkit::db::{Server, ServerDb};
use serde_json::Value;

use crate::client::{Cli, authtoken_section, free_port, read_env, repo_root};
use crate::lifecycle::{FAST_SIMULATION, openssl, show, wait_status};

static CLOUD: Mutex<()> = Mutex::new(());

/// The cloud's env.sh values (Keystone's and the services').
#[derive(Clone)]
pub(crate) struct Env {
    pub(crate) ks: HashMap<String, String>,
    pub(crate) os: HashMap<String, String>,
}

/// The cloud, held by one test at a time.
pub(crate) struct Cloud {
    env: Env,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl std::ops::Deref for Cloud {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

pub(crate) fn cloud() -> Option<Cloud> {
    let dir = magnum_testkit::env_or_skip("MAGNUM_TEST_CLOUD")?;
    let dir = PathBuf::from(dir);
    let lock = CLOUD.lock().unwrap_or_else(|e| e.into_inner());
    Some(Cloud {
        env: Env {
            ks: read_env(&dir.join("keystone/env.sh")),
            os: read_env(&dir.join("openstack/env.sh")),
        },
        _lock: lock,
    })
}

impl Env {
    fn region(&self) -> &str {
        &self.os["MAGNUM_TEST_OS_REGION"]
    }

    /// Stops or starts one service (`ctl.sh`), waiting until it is down or answers.
    pub(crate) fn ctl(&self, action: &str, service: &str) {
        let st = Command::new("bash")
            .arg(&self.os["MAGNUM_TEST_OS_CTL"])
            .arg(&self.os["MAGNUM_TEST_OS_WORKDIR"])
            .arg(action)
            .arg(service)
            .status()
            .unwrap();
        assert!(st.success(), "ctl.sh {action} {service}");
    }

    /// Freezes (`STOP`) or thaws (`CONT`) one service's processes: a service that accepts
    /// connections and never answers.
    fn signal(&self, service: &str, signal: &str) {
        let pid = std::fs::read_to_string(
            Path::new(&self.os["MAGNUM_TEST_OS_WORKDIR"])
                .join("run")
                .join(format!("{service}.pid")),
        )
        .unwrap();
        // Each service's uWSGI master leads a process group with its workers.
        let st = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg("--")
            .arg(format!("-{}", pid.trim()))
            .status()
            .unwrap();
        assert!(st.success(), "kill -{signal} {service}");
    }

    /// Lines of a service's uWSGI request log that contain `needle`.
    fn requests(&self, service: &str, needle: &str) -> usize {
        let log = Path::new(&self.os["MAGNUM_TEST_OS_WORKDIR"])
            .join("log")
            .join(format!("{service}-uwsgi.log"));
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// A Barbican read as Magnum's service user (which owns the certificates).
    fn barbican(&self, path: &str) -> Value {
        self.barbican_call("GET", path)
    }

    /// A Barbican call as Magnum's service user.
    fn barbican_call(&self, method: &str, path: &str) -> Value {
        self.barbican_with(method, path, "application/json")
    }

    /// A Barbican call as Magnum's service user, accepting `accept`.
    fn barbican_with(&self, method: &str, path: &str, accept: &str) -> Value {
        let script = r#"
import json, sys
from keystoneauth1 import session
from keystoneauth1.identity import v3
auth_url, password, region, method, path, accept = sys.argv[1:7]
s = session.Session(auth=v3.Password(auth_url=auth_url, username="magnum", password=password,
    project_name="service", user_domain_id="default", project_domain_id="default"))
r = s.request(path, method, endpoint_filter={"service_type": "key-manager", "region_name": region,
    "interface": "public"}, headers={"Accept": accept}, raise_exc=False)
print(json.dumps({"status": r.status_code, "body": r.json() if r.content else None}))
"#;
        self.python(
            script,
            &[
                &self.ks["MAGNUM_TEST_AUTH_URL"],
                &self.ks["MAGNUM_TEST_SERVICE_PASSWORD"],
                self.region(),
                method,
                path,
                accept,
            ],
        )
    }

    /// Every project's Nova server groups (`id`, `name`, `project_id`, `policies`), read as
    /// Magnum's service user (an admin).
    pub(crate) fn server_groups(&self) -> Vec<Value> {
        let script = r#"
import json, sys
from keystoneauth1 import session
from keystoneauth1.identity import v3
auth_url, password, region = sys.argv[1:4]
s = session.Session(auth=v3.Password(auth_url=auth_url, username="magnum", password=password,
    project_name="service", user_domain_id="default", project_domain_id="default"))
r = s.get("/os-server-groups?all_projects=True", endpoint_filter={"service_type": "compute",
    "region_name": region, "interface": "public"}, headers={"OpenStack-API-Version": "compute 2.15"})
print(json.dumps(r.json()["server_groups"]))
"#;
        let v = self.python(
            script,
            &[
                &self.ks["MAGNUM_TEST_AUTH_URL"],
                &self.ks["MAGNUM_TEST_SERVICE_PASSWORD"],
                self.region(),
            ],
        );
        v.as_array().cloned().unwrap_or_default()
    }

    /// Runs `script` with the Keystone venv's python (keystoneauth1); it prints one JSON line.
    fn python(&self, script: &str, args: &[&str]) -> Value {
        let out = Command::new(format!("{}/bin/python", self.ks["MAGNUM_TEST_VENV"]))
            .arg("-c")
            .arg(script)
            .args(args)
            .env("PYTHONWARNINGS", "ignore")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The list under `key` of a 200 answer.
    fn listed(got: Value, key: &str) -> Vec<Value> {
        assert_eq!(got["status"], 200, "{got}");
        got["body"][key].as_array().cloned().unwrap_or_default()
    }

    /// Keystone, as admin (`admin = true`) or anonymously: method, path under /v3, body.
    fn keystone(&self, admin: bool, method: &str, path: &str, body: &Value) -> Value {
        let script = r#"
import json, sys
from keystoneauth1 import session
from keystoneauth1.identity import v3
auth_url, password, admin, method, path, body = sys.argv[1:7]
auth = v3.Password(auth_url=auth_url, username="admin", password=password, project_name="admin",
    user_domain_id="default", project_domain_id="default") if admin == "1" else None
s = session.Session(auth=auth)
r = s.request(auth_url + path, method, json=json.loads(body) if body != "null" else None,
    raise_exc=False, authenticated=admin == "1")
print(json.dumps({"status": r.status_code, "body": r.json() if r.content else None}))
"#;
        let body = body.to_string();
        self.python(
            script,
            &[
                &self.ks["MAGNUM_TEST_AUTH_URL"],
                &self.ks["MAGNUM_TEST_ADMIN_PASSWORD"],
                if admin { "1" } else { "0" },
                method,
                path,
                &body,
            ],
        )
    }

    /// The cluster's application credentials in Keystone (by name, under its owner).
    fn app_credentials(&self, user_id: &str, cluster_uuid: &str) -> Vec<Value> {
        Self::listed(
            self.keystone(
                true,
                "GET",
                &format!("/users/{user_id}/application_credentials?name=magnum-{cluster_uuid}"),
                &Value::Null,
            ),
            "application_credentials",
        )
    }

    /// Barbican's secrets named `name`.
    fn secrets(&self, name: &str) -> Vec<Value> {
        Self::listed(
            self.barbican(&format!("/v1/secrets?name={name}&limit=100")),
            "secrets",
        )
    }

    /// Barbican's certificate containers named `name`, with their secret references.
    fn containers(&self, name: &str) -> Vec<Value> {
        Self::listed(
            self.barbican(&format!("/v1/containers?name={name}&limit=100")),
            "containers",
        )
    }

    fn secret_status(&self, secret_ref: &str) -> u64 {
        let id = secret_ref.rsplit('/').next().unwrap();
        self.barbican(&format!("/v1/secrets/{id}"))["status"]
            .as_u64()
            .unwrap()
    }
}

/// Brings a stopped (or frozen) service back when the test ends, however it ends, so one
/// failure does not take the next tests' cloud down.
struct Restore<'a> {
    env: &'a Env,
    service: &'static str,
    frozen: bool,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if self.frozen {
            self.env.signal(self.service, "CONT");
        } else {
            self.env.ctl("start", self.service);
        }
    }
}

impl Env {
    /// Stops `service` until the guard drops.
    fn stopped(&self, service: &'static str) -> Restore<'_> {
        self.ctl("stop", service);
        Restore {
            env: self,
            service,
            frozen: false,
        }
    }

    /// Freezes `service` until the guard drops.
    fn frozen(&self, service: &'static str) -> Restore<'_> {
        self.signal(service, "STOP");
        Restore {
            env: self,
            service,
            frozen: true,
        }
    }
}

/// A `magnumd serve` of this test in the cloud, with the CLI pointed at it.
pub(crate) struct Magnum {
    pub(crate) cli: Cli,
    // Dropped before `work` (fields drop in order), so its log is still there to be kept
    // for the secrets scan.
    _api: ChildGuard,
    pub(crate) work: tempfile::TempDir,
    conf: String,
    port: u16,
    db: ServerDb,
}

impl Magnum {
    /// A `magnumd conductor` beside this test's `magnumd api` (stopped when dropped).
    fn conductor(&self) -> ChildGuard {
        let path = self
            .work
            .path()
            .join(format!("conductor-{}.log", magnum_testkit::tag()));
        let log = std::fs::File::create(&path).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_magnumd"))
            .args(["--config-file", &self.conf, "conductor"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        ChildGuard::new(child).keep_log(&path)
    }

    /// One SQL statement on this magnumd's MariaDB database (the mysql CLI).
    fn sql(&self, statement: &str) {
        let out = Command::new("mysql")
            .args([
                "-h127.0.0.1",
                "-umagnum_test",
                "-pmagnum_test",
                &self.db.name,
                "-e",
                statement,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{statement}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `magnum.conf` lines that put magnumd in the cloud: token validation, the service user,
/// every client in the services' region, and `extra`.
fn cloud_conf(c: &Env, port: u16, db_url: &str, extra: &str) -> String {
    let region = c.region();
    let mut conf = format!(
        "[api]\nhost = 127.0.0.1\nport = {port}\n\n[database]\nconnection = {db_url}\n\n{authtoken}\n\
         [keystone_auth]\nauth_url = {auth}\nauth_type = password\nusername = {user}\npassword = {pw}\n\
         user_domain_name = Default\nproject_name = service\nproject_domain_name = Default\ntimeout = 10\n\n",
        authtoken = authtoken_section(&c.ks),
        auth = c.ks["MAGNUM_TEST_AUTH_URL"],
        user = c.ks["MAGNUM_TEST_SERVICE_USER"],
        pw = c.ks["MAGNUM_TEST_SERVICE_PASSWORD"],
    );
    for svc in [
        "glance", "nova", "neutron", "cinder", "octavia", "barbican", "manila",
    ] {
        conf.push_str(&format!("[{svc}_client]\nregion_name = {region}\n\n"));
    }
    // The simulated driver quick, the certificates in Barbican (upstream's default).
    conf.push_str(&FAST_SIMULATION.replace(
        "cert_manager_type = x509keypair",
        "cert_manager_type = barbican",
    ));
    conf.push_str(extra);
    conf
}

pub(crate) fn start_magnum(c: &Cloud, extra: &str) -> Magnum {
    start_magnum_as(c, extra, "serve")
}

/// As [`start_magnum`], running `sub` (`serve`, or `api` with conductors started apart).
fn start_magnum_as(c: &Cloud, extra: &str, sub: &str) -> Magnum {
    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let region = format!("mt{port}");
    // This magnumd in its own region, with identity beside it for the CLI.
    let st = Command::new(format!("{}/bin/python", c.ks["MAGNUM_TEST_VENV"]))
        .arg(repo_root().join("test-support/openstack/register.py"))
        .arg(&c.ks["MAGNUM_TEST_AUTH_URL"])
        .arg(&c.ks["MAGNUM_TEST_ADMIN_PASSWORD"])
        .arg(&region)
        .arg(format!(
            "identity=keystone={}",
            c.ks["MAGNUM_TEST_AUTH_URL"]
        ))
        .arg(format!("container-infra=magnum=http://127.0.0.1:{port}/v1"))
        .env("PYTHONWARNINGS", "ignore")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "register.py for {region}");
    let clouds = std::fs::read_to_string(&c.os["MAGNUM_TEST_OS_CLOUDS_YAML"])
        .unwrap()
        .replace(
            &format!("\"region_name\": \"{}\"", c.region()),
            &format!("\"region_name\": \"{region}\""),
        );
    let clouds_file = work.path().join("clouds.yaml");
    std::fs::write(&clouds_file, clouds).unwrap();

    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cloud").unwrap();
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        cloud_conf(c, port, &db.url_with_scheme("mysql+pymysql"), extra),
    )
    .unwrap();
    let conf = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf, "db", "upgrade"])
            .status
            .success()
    );
    let log = work.path().join("api.log");
    let api = crate::spawn_magnumd(&conf, sub, &log, port);
    let cli = Cli {
        openstack: c.ks["MAGNUM_TEST_OPENSTACK"].clone(),
        clouds: Some(clouds_file.display().to_string()),
        global: vec![],
    };
    Magnum {
        cli,
        work,
        conf,
        port,
        _api: api,
        db,
    }
}

const FLAVORS: [&str; 4] = ["--flavor", "m1.small", "--master-flavor", "m1.medium"];

fn template_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = FLAVORS.to_vec();
    v.extend_from_slice(extra);
    v
}

fn create_template_args<'a>(name: &'a str, image: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "coe",
        "cluster",
        "template",
        "create",
        name,
        "--coe",
        "kubernetes",
        "--image",
        image,
        "--external-network",
        "public",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn templates_and_clusters_are_validated_against_the_real_services() {
    let Some(c) = cloud() else { return };
    let m = start_magnum(&c, "");
    let (cli, who) = (&m.cli, "demo-member");

    // Names resolve; the image's os_distro becomes cluster_distro.
    let t = cli.create_template(
        who,
        "real-t",
        "fedora-coreos-40",
        &template_args(&[
            "--fixed-network",
            "private",
            "--fixed-subnet",
            "private-subnet",
        ]),
    );
    assert_eq!(t["cluster_distro"], "fedora-coreos", "{t}");
    assert_eq!(t["image_id"], "fedora-coreos-40");
    assert_eq!(t["flavor_id"], "m1.small");
    // By id works as well as by name.
    let by_id = cli.create_template(
        who,
        "real-t-ids",
        &c.os["MAGNUM_TEST_OS_IMAGE_UBUNTU_JAMMY_ID"],
        &[
            "--flavor",
            &c.os["MAGNUM_TEST_OS_FLAVOR_M1_SMALL_ID"],
            "--master-flavor",
            &c.os["MAGNUM_TEST_OS_FLAVOR_M1_MEDIUM_ID"],
            "--external-network",
            &c.os["MAGNUM_TEST_OS_NETWORK_PUBLIC_ID"],
        ],
    );
    assert_eq!(by_id["cluster_distro"], "ubuntu", "{by_id}");

    // Upstream's refusals, with upstream's status and text.
    let refusals: [(&str, Vec<&str>, u16, &str); 9] = [
        (
            "no-such-image",
            template_args(&[]),
            400,
            "Image no-such-image could not be found.",
        ),
        (
            "no-distro-image",
            template_args(&[]),
            400,
            "Image no-distro-image doesn't contain os_distro field.",
        ),
        (
            "dup-image",
            template_args(&[]),
            409,
            "Multiple images exist with same name 'dup-image'. Please use the image ID instead.",
        ),
        (
            "fedora-coreos-40",
            vec!["--flavor", "aaa", "--master-flavor", "m1.medium"],
            400,
            "Unable to find flavor aaa.",
        ),
        (
            "fedora-coreos-40",
            template_args(&["--external-network", "private"]),
            400,
            "Unable to find external network private.",
        ),
        (
            "fedora-coreos-40",
            template_args(&["--external-network", "dup-ext"]),
            409,
            "Multiple external networks exist with same name 'dup-ext'. Please use the external network ID instead.",
        ),
        (
            "fedora-coreos-40",
            template_args(&["--fixed-network", "dup-net"]),
            409,
            "Multiple networks exist with same name 'dup-net'. Please use the network ID instead.",
        ),
        (
            "fedora-coreos-40",
            template_args(&["--fixed-subnet", "no-such-subnet"]),
            400,
            "Unable to find fixed subnet no-such-subnet.",
        ),
        (
            "fedora-coreos-40",
            vec!["--flavor", "m1.zero-disk", "--master-flavor", "m1.medium"],
            400,
            "Flavor with zero root volume size is not supported when boot_volume_size is zero.",
        ),
    ];
    for (image, extra, status, text) in &refusals {
        // The client prints the error's title: the detail's first sentence.
        let title = text.split(". ").next().unwrap().trim_end_matches('.');
        cli.refused(
            who,
            &create_template_args("refused", image, extra),
            *status,
            title,
        );
    }
    // Upstream's oddity, kept: the client sends master_flavor_id null when --master-flavor is
    // left out, and with no boot volume that null flavor is refused.
    cli.refused(
        who,
        &create_template_args("refused", "fedora-coreos-40", &["--flavor", "m1.small"]),
        400,
        "Unable to find flavor None",
    );
    // With a boot volume the zero-disk flavor is fine.
    cli.create_template(
        who,
        "real-t-bfv",
        "fedora-coreos-40",
        &[
            "--flavor",
            "m1.zero-disk",
            "--master-flavor",
            "m1.medium",
            "--labels",
            "boot_volume_size=10",
        ],
    );

    // A keypair the caller does not have: 404, as upstream.
    cli.refused(
        who,
        &[
            "coe",
            "cluster",
            "create",
            "kp",
            "--cluster-template",
            "real-t",
            "--keypair",
            "no-such-key",
        ],
        404,
        "Unable to find keypair no-such-key",
    );

    // One cluster create lists flavors once (upstream: twice) and reads the keypair once.
    let (flavors, keypairs) = (
        c.requests("nova", "GET /v2.1/flavors/detail"),
        c.requests("nova", "GET /v2.1/os-keypairs/demo-key"),
    );
    cli.ok(
        who,
        &[
            "coe",
            "cluster",
            "create",
            "counted",
            "--cluster-template",
            "real-t",
            "--keypair",
            "demo-key",
        ],
    );
    assert_eq!(c.requests("nova", "GET /v2.1/flavors/detail") - flavors, 1);
    assert_eq!(
        c.requests("nova", "GET /v2.1/os-keypairs/demo-key") - keypairs,
        1
    );
    let done = wait_status(cli, who, "counted", "CREATE_COMPLETE");
    assert_eq!(done["keypair"], "demo-key");

    // The cluster's own OpenStack credential: an application credential of its owner, its
    // secret in Barbican, usable for the owner's project after the create's token is gone.
    let uuid = done["uuid"].as_str().unwrap().to_owned();
    let owner = c.ks["MAGNUM_TEST_DEMO_MEMBER_USER_ID"].clone();
    let creds = c.app_credentials(&owner, &uuid);
    assert_eq!(creds.len(), 1, "{creds:?}");
    assert_eq!(creds[0]["unrestricted"], false, "{creds:?}");
    let kept = c.secrets(&format!("magnum-cluster-{uuid}-credential"));
    assert_eq!(kept.len(), 1, "{kept:?}");
    let secret_id = kept[0]["secret_ref"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let payload = c.barbican_with(
        "GET",
        &format!("/v1/secrets/{secret_id}/payload"),
        "text/plain",
    );
    assert_eq!(payload["status"], 200, "{payload}");
    let cred = &payload["body"];
    assert_eq!(cred["id"], creds[0]["id"]);
    magnum_testkit::scan::secret(
        "a cluster's application credential secret",
        cred["secret"].as_str().unwrap_or_default(),
    );
    let auth = c.keystone(
        false,
        "POST",
        "/auth/tokens",
        &serde_json::json!({"auth": {"identity": {"methods": ["application_credential"],
            "application_credential": {"id": cred["id"], "secret": cred["secret"]}}}}),
    );
    assert_eq!(auth["status"], 201, "{auth}");
    assert_eq!(
        auth["body"]["token"]["project"]["id"].as_str(),
        Some(c.ks["MAGNUM_TEST_DEMO_PROJECT_ID"].as_str()),
        "{auth}"
    );

    // Nodegroups: the root-disk rule on their flavor, as upstream.
    for (flavor, text) in [
        ("aaa", "Unable to find flavor aaa"),
        (
            "m1.zero-disk",
            "Flavor with zero root volume size is not supported when boot_volume_size is zero",
        ),
    ] {
        cli.refused(
            who,
            &[
                "coe",
                "nodegroup",
                "create",
                "counted",
                "extra",
                "--flavor",
                flavor,
            ],
            400,
            text,
        );
    }
    cli.ok(
        who,
        &[
            "coe",
            "nodegroup",
            "create",
            "counted",
            "extra",
            "--flavor",
            "m1.small",
        ],
    );
    // With Octavia in the catalogue a load-balanced cluster is accepted.
    cli.ok(
        who,
        &[
            "coe",
            "cluster",
            "create",
            "lb",
            "--cluster-template",
            "real-t",
            "--master-lb-enabled",
        ],
    );
    wait_status(cli, who, "lb", "CREATE_COMPLETE");
    for name in ["counted", "lb"] {
        cli.ok(who, &["coe", "cluster", "delete", name]);
    }
    // The credential goes with the cluster, from Keystone and from Barbican.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(c.app_credentials(&owner, &uuid).is_empty()
        && c.secrets(&format!("magnum-cluster-{uuid}-credential"))
            .is_empty())
    {
        assert!(Instant::now() < deadline, "the credential of {uuid} stayed");
        std::thread::sleep(Duration::from_millis(500));
    }

    // magnumd status reaches Barbican as the service user.
    let status = crate::magnumd(&["--config-file", &m.conf, "status"]);
    let report = crate::text(&status.stdout) + &crate::text(&status.stderr);
    assert!(report.contains("barbican at http://127.0.0.1:"), "{report}");

    // No secret in magnumd's log: no token, no password, no key.
    let token = cli.token(who);
    let (code, _) = crate::http(m.port, Some(&token), "GET", "/v1/clusters", None);
    assert_eq!(code, 200);
    let log = std::fs::read_to_string(m.work.path().join("api.log")).unwrap();
    for secret in [
        token.as_str(),
        c.ks["MAGNUM_TEST_SERVICE_PASSWORD"].as_str(),
        "PRIVATE KEY",
    ] {
        assert!(!log.contains(secret), "a secret in magnumd's log: {secret}");
    }
}

/// The CA, a signed CSR, rotation, a kubeconfig and delete, with the certificates in the real
/// Barbican; afterwards Barbican holds nothing of the cluster.
#[test]
fn certificates_live_in_barbican_and_go_with_the_cluster() {
    let Some(c) = cloud() else { return };
    let m = start_magnum(&c, "");
    let (cli, who) = (&m.cli, "demo-member");
    // The whole life (create, resize, upgrade, CA show/sign, config, rotate, delete) runs
    // against Barbican; watch the containers while it does.
    let before: Vec<Value> = c.containers("life");
    assert!(before.is_empty(), "{before:?}");
    let watcher = {
        let peek = c.env.clone();
        std::thread::spawn(move || {
            // The four containers of the cluster while it lives, and their secrets.
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut seen: Vec<Value> = Vec::new();
            while Instant::now() < deadline {
                let now = peek.containers("life");
                for ct in now {
                    if !seen
                        .iter()
                        .any(|s| s["container_ref"] == ct["container_ref"])
                    {
                        seen.push(ct);
                    }
                }
                if seen.len() >= 4 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            seen
        })
    };
    crate::lifecycle::cluster_lifecycle(cli, who, m.work.path(), "fedora-coreos-40", &FLAVORS);
    let seen = watcher.join().unwrap();
    assert!(
        seen.len() >= 4,
        "the cluster's 4 containers were never all in Barbican: {seen:?}"
    );
    for ct in &seen {
        assert_eq!(ct["type"], "certificate");
        let names: Vec<&str> = ct["secret_refs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        for n in ["certificate", "private_key", "private_key_passphrase"] {
            assert!(names.contains(&n), "{names:?}");
        }
    }
    // Deleted with the cluster (and the rotated-out CA with the rotation): nothing is left.
    let left = c.containers("life");
    assert!(left.is_empty(), "containers left in Barbican: {left:?}");
    for ct in &seen {
        for r in ct["secret_refs"].as_array().unwrap() {
            let secret = r["secret_ref"].as_str().unwrap();
            assert_eq!(
                c.secret_status(secret),
                404,
                "secret {secret} left in Barbican"
            );
        }
    }
}

/// Glance down: template create answers at once with a clear error; Nova hanging: a 503
/// after the timeout; Barbican down when a create comes: 503 and nothing made; Barbican down
/// during a create (after the API answered, before the conductor stored the certificates):
/// CREATE_FAILED naming it, nothing half-stored. All recover when the service is back.
#[test]
fn a_service_that_is_down_gives_a_clear_error_and_work_recovers() {
    let Some(c) = cloud() else { return };
    let Some(rabbit) = magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL") else {
        return;
    };
    // The API and its conductor apart, over RabbitMQ, so a create can wait for its conductor.
    let tag = magnum_testkit::tag();
    let m = start_magnum_as(
        &c,
        &format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\n\
             [conductor]\ntopic = magnum-conductor-{tag}\n"
        ),
        "api",
    );
    let (cli, who) = (&m.cli, "demo-member");
    let mut conductor = Some(m.conductor());
    cli.create_template(who, "down-t", "fedora-coreos-40", &FLAVORS);

    {
        let _glance = c.stopped("glance");
        let started = Instant::now();
        cli.refused(
            who,
            &create_template_args("no-glance", "fedora-coreos-40", &FLAVORS),
            503,
            "The image service (Glance) cannot be reached",
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
    cli.create_template(who, "glance-back", "fedora-coreos-40", &FLAVORS);

    // A service that hangs: the call times out ([keystone_auth] timeout = 10 s here) and the
    // user gets a 503 naming it, not a hang.
    {
        let _nova = c.frozen("nova");
        let started = Instant::now();
        let out = cli.run(
            who,
            &create_template_args("slow-nova", "fedora-coreos-40", &FLAVORS),
        );
        let err = crate::text(&out.stderr);
        assert!(err.contains("(HTTP 503)"), "{err}");
        assert!(
            err.contains("The compute service (Nova) cannot be reached"),
            "{err}"
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(9) && took < Duration::from_secs(40),
            "{took:?}"
        );
    }
    cli.create_template(who, "nova-back", "fedora-coreos-40", &FLAVORS);

    // Barbican down when the create comes: the cluster's credential cannot be kept, so the
    // create is refused at once and nothing is made (no cluster, no credential in Keystone).
    let owner = c.ks["MAGNUM_TEST_DEMO_MEMBER_USER_ID"].clone();
    let credentials_of_owner = || {
        let got = c.keystone(
            true,
            "GET",
            &format!("/users/{owner}/application_credentials"),
            &Value::Null,
        );
        got["body"]["application_credentials"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let before = credentials_of_owner();
    {
        let _barbican = c.stopped("barbican");
        cli.refused(
            who,
            &[
                "coe",
                "cluster",
                "create",
                "no-barbican",
                "--cluster-template",
                "down-t",
            ],
            503,
            "The key manager service (Barbican) cannot be reached",
        );
    }
    assert!(
        !cli.run(who, &["coe", "cluster", "show", "no-barbican"])
            .status
            .success()
    );
    assert_eq!(
        credentials_of_owner(),
        before,
        "a credential stayed in Keystone"
    );

    // Barbican down during the create: accepted while it answered, then the conductor
    // cannot store the certificates. The create waits, saying why, and nothing is half-stored.
    drop(conductor.take());
    cli.ok(
        who,
        &[
            "coe",
            "cluster",
            "create",
            "mid-create",
            "--cluster-template",
            "down-t",
        ],
    );
    {
        let _barbican = c.stopped("barbican");
        conductor = Some(m.conductor());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let s = show(cli, who, "mid-create");
            assert_eq!(s["status"], "CREATE_IN_PROGRESS", "{s}");
            let reason = s["status_reason"].as_str().unwrap_or_default();
            if reason.contains("Barbican") {
                assert!(
                    reason.starts_with("Waiting for a service to return"),
                    "{reason}"
                );
                break;
            }
            assert!(Instant::now() < deadline, "no reason given: {s}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    // Barbican back: the waiting create is resumed by the sweep and completes, with its four
    // certificates and nothing left of the attempt Barbican's absence cut short.
    let done = wait_status(cli, who, "mid-create", "CREATE_COMPLETE");
    assert!(done["status_reason"].is_null(), "{done}");
    assert_eq!(c.containers("mid-create").len(), 4);

    // A new cluster completes too, and both go with their credentials.
    cli.ok(
        who,
        &[
            "coe",
            "cluster",
            "create",
            "barbican-back",
            "--cluster-template",
            "down-t",
        ],
    );
    wait_status(cli, who, "barbican-back", "CREATE_COMPLETE");
    assert_eq!(c.containers("barbican-back").len(), 4);
    for name in ["mid-create", "barbican-back"] {
        cli.ok(who, &["coe", "cluster", "delete", name]);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !c.containers("barbican-back").is_empty() || credentials_of_owner() != before {
        assert!(
            Instant::now() < deadline,
            "certificates or credentials stayed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(conductor);
}

/// A cluster whose certificates upstream Magnum 23.0.0's own Barbican store wrote (its code,
/// from test-support/upstream) works through ours: CA show, CSR signing, kubeconfig,
/// rotation, and delete removes upstream's containers too.
#[test]
fn certificates_written_by_upstreams_barbican_store_work_here() {
    let Some(c) = cloud() else { return };
    if magnum_testkit::env_or_skip("MAGNUM_TEST_UPSTREAM").is_none() {
        return;
    }
    let m = start_magnum(&c, "");
    let (cli, who) = (&m.cli, "demo-member");
    cli.create_template(who, "up-t", "fedora-coreos-40", &FLAVORS);
    cli.ok(
        who,
        &[
            "coe",
            "cluster",
            "create",
            "up-made",
            "--cluster-template",
            "up-t",
        ],
    );
    wait_status(cli, who, "up-made", "CREATE_COMPLETE");
    let ours = c.containers("up-made");
    assert_eq!(ours.len(), 4, "{ours:?}");

    // Upstream's store writes four new certificates (CN=up-written).
    let venv = crate::upstream::venv();
    let out = Command::new(format!("{venv}/bin/python"))
        .arg(repo_root().join("test-support/upstream/barbican_certs.py"))
        .arg(&m.conf)
        .arg("up-written")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refs: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let cols = [
        "ca_cert_ref",
        "etcd_ca_cert_ref",
        "front_proxy_ca_cert_ref",
        "magnum_cert_ref",
    ];
    let set: Vec<String> = cols
        .iter()
        .map(|k| format!("{k} = '{}'", refs[k].as_str().unwrap()))
        .collect();
    m.sql(&format!(
        "UPDATE cluster SET {} WHERE name = 'up-made'",
        set.join(", ")
    ));
    // Our own four are no longer referenced: drop them (test hygiene).
    for ct in &ours {
        for r in ct["secret_refs"].as_array().unwrap() {
            let id = r["secret_ref"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap();
            c.barbican_call("DELETE", &format!("/v1/secrets/{id}"));
        }
        let id = ct["container_ref"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        c.barbican_call("DELETE", &format!("/v1/containers/{id}"));
    }

    // CA show (upstream's CA, CN=up-written), a CSR signed with upstream's key, and a
    // kubeconfig whose client certificate (upstream's) upstream's CA verifies.
    let work = m.work.path();
    let ca = crate::lifecycle::check_ca_and_signing(cli, who, "up-made", work);
    let ca_file = work.join("up-made-ca.pem");
    let subject = openssl(&[
        "x509",
        "-noout",
        "-subject",
        "-in",
        ca_file.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&subject.stdout).contains("up-written"));
    crate::lifecycle::check_kubeconfig(cli, who, "up-made", work);

    // Rotation replaces upstream's CA with ours and removes the old one from Barbican.
    cli.ok(who, &["coe", "ca", "rotate", "up-made"]);
    wait_status(cli, who, "up-made", "UPDATE_COMPLETE");
    let rotated = crate::lifecycle::pem(&cli.ok(who, &["coe", "ca", "show", "up-made"]));
    assert_ne!(rotated, ca);
    cli.ok(who, &["coe", "cluster", "delete", "up-made"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(c.containers("up-written").is_empty() && c.containers("up-made").is_empty()) {
        assert!(
            Instant::now() < deadline,
            "left in Barbican: {:?} {:?}",
            c.containers("up-written"),
            c.containers("up-made")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `noauth` with `[keystone_auth]` set: there is no caller's token, so the checks run as
/// Magnum's service user against the catalogue it gets.
#[test]
fn noauth_with_service_credentials_still_validates() {
    let Some(c) = cloud() else { return };
    let m = start_magnum(&c, "\n[api]\nauth_strategy = noauth\n");
    let body = |image: &str| {
        serde_json::json!({"name": format!("noauth-{image}"), "coe": "kubernetes",
            "image_id": image, "external_network_id": "public",
            "flavor_id": "m1.small", "master_flavor_id": "m1.medium"})
    };
    let (code, err) = crate::http(
        m.port,
        None,
        "POST",
        "/v1/clustertemplates",
        Some(&body("no-such-image")),
    );
    assert_eq!(code, 400, "{err}");
    assert_eq!(
        err["errors"][0]["detail"], "Image no-such-image could not be found.",
        "{err}"
    );
    let (code, t) = crate::http(
        m.port,
        None,
        "POST",
        "/v1/clustertemplates",
        Some(&body("fedora-coreos-40")),
    );
    assert_eq!(code, 201, "{t}");
    assert_eq!(t["cluster_distro"], "fedora-coreos", "{t}");
}

/// The fault suite's Barbican case: openstacksdk bursts creates, resizes and deletes at a
/// magnumd that keeps certificates and credentials in the real Barbican, which is stopped for
/// a while mid-burst. Every 2xx is carried out (creates accepted before the stop wait and
/// complete after it), every refusal is a 503 within 2 s (of Barbican being down, if it
/// was sent while Barbican stopped), nothing stays in progress, and every notification
/// (over RabbitMQ, consumed by an oslo.messaging listener) arrives once.
#[test]
fn a_burst_survives_barbican_stopped() {
    let Some(c) = cloud() else { return };
    let Some(rabbit) = magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL") else {
        return;
    };
    // No broker restart under this test's listener.
    let _broker = crate::broker_lock();
    let tag = magnum_testkit::tag();
    let m = start_magnum(
        &c,
        &format!(
            "[DEFAULT]\ntransport_url = {rabbit}\ncontrol_exchange = magnum_{tag}\n\
             host = burst-{tag}\n\n\
             [oslo_messaging_notifications]\ndriver = messagingv2\ntopics = notifications_{tag}\n\n\
             [quotas]\nmax_clusters_per_project = 1000\n"
        ),
    );
    let listener = crate::rabbit::Listener::start(
        &rabbit,
        &format!("magnum_{tag}"),
        &format!("notifications_{tag}"),
    );
    let (cli, who) = (&m.cli, "demo-member");
    let t = cli.create_template(who, "burst-t", "fedora-coreos-40", &FLAVORS);
    let template = t["uuid"].as_str().unwrap().to_owned();
    let burst = crate::faults::Burst::start(
        &c.ks["MAGNUM_TEST_VENV"],
        cli.clouds.as_deref().unwrap(),
        &template,
        45,
        m.work.path(),
    );
    std::thread::sleep(Duration::from_secs(12));
    let stopped_at = Instant::now();
    let mut barbican = None;
    let outage = crate::faults::outage(|| barbican = Some(c.stopped("barbican")));
    std::thread::sleep(Duration::from_secs(10));
    drop(barbican);
    eprintln!(
        "barbican burst: Barbican away for {:.1} s (its stop took {:.1} s)",
        stopped_at.elapsed().as_secs_f64(),
        outage.1 - outage.0
    );
    let answers = burst.finish();
    let mut table: std::collections::BTreeMap<(String, u16), usize> = Default::default();
    for a in &answers {
        *table.entry((a.op.clone(), a.status)).or_default() += 1;
    }
    eprintln!(
        "barbican burst: {} requests, (op, status) -> count: {table:?}",
        answers.len()
    );
    assert!(
        answers.iter().any(|a| a.status == 503),
        "no request met the outage: {table:?}"
    );
    eprintln!(
        "barbican burst: slowest 503: {:.3} s",
        crate::faults::slowest_503(&answers)
    );
    crate::faults::assert_clear(&answers, &[outage]);
    let token = cli.token(who);
    let (created, deleted) = crate::faults::assert_carried_out(m.port, &token, &answers);
    assert!(
        created.len() >= 10,
        "only {} creates accepted",
        created.len()
    );
    // Deleted clusters took their certificates out of Barbican (those deleted while it was
    // away too); the others keep their four.
    let mut gone = 0;
    for a in answers
        .iter()
        .filter(|a| a.op == "create" && a.cluster.is_some())
    {
        let (uuid, name) = (a.cluster.as_deref().unwrap(), a.name.as_deref().unwrap());
        let left = c.containers(name).len();
        if deleted.contains(uuid) {
            assert_eq!(
                left, 0,
                "{name} was deleted but left {left} certificates in Barbican"
            );
            gone += 1;
        } else {
            assert_eq!(left, 4, "{name}: {left} certificates in Barbican");
        }
    }
    eprintln!("barbican burst: {gone} deleted clusters left nothing in Barbican");

    std::thread::sleep(Duration::from_secs(3));
    let events = listener.stop();
    let superseded = crate::faults::assert_notified_once(&events, &created, &deleted, &answers);
    eprintln!(
        "barbican burst: {} notifications, each once; one outcome per accepted delete and per \
         accepted create ({superseded} creates waiting for Barbican were deleted before they \
         started, with no create outcome)",
        events.len()
    );
}
