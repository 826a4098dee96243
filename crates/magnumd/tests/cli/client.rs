//! The real `openstack coe` client (python-openstackclient + python-magnumclient) against
//! `magnumd serve` on MariaDB, authenticated by a real Keystone, as each persona, ending with
//! a cluster's whole life (lifecycle.rs).
//! Runs when MAGNUM_TEST_KEYSTONE=1 (scripts/test sets it); needs MAGNUM_TEST_MYSQL_URL.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use magnum_testkit::ChildGuard;
use magnum_testkit::db::{Server, ServerDb};
use serde_json::Value;

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) use magnum_testkit::{free_port, wait_for_port};

/// Stops what it holds when the test ends, however it ends.
pub(crate) struct Running {
    pub(crate) api: Option<ChildGuard>,
    pub(crate) keystone_dir: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        // magnumd first, while Keystone still answers.
        drop(self.api.take());
        let _ = Command::new("bash")
            .arg(repo_root().join("test-support/keystone/stop.sh"))
            .arg(&self.keystone_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The `export K=V` lines of an env.sh (its passwords go to the secrets scan's list).
pub(crate) fn read_env(path: &Path) -> HashMap<String, String> {
    let vars: HashMap<String, String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.trim_matches('\'').trim_matches('"').to_owned(),
            )
        })
        .collect();
    magnum_testkit::scan::secrets_of_env(&vars);
    vars
}

/// A real Keystone for this test (stopped when the guard drops) whose catalog points
/// container-infra at `api_port`, and its env.sh values.
pub(crate) fn start_keystone(work: &Path, api_port: u16) -> (Running, HashMap<String, String>) {
    start_keystone_for(work, &format!("http://127.0.0.1:{api_port}"))
}

/// As [`start_keystone`], with container-infra at `magnum_url`.
pub(crate) fn start_keystone_for(
    work: &Path,
    magnum_url: &str,
) -> (Running, HashMap<String, String>) {
    start_keystone_with(work, magnum_url, &[])
}

/// As [`start_keystone_for`], with extra environment for start.sh (`KEYSTONE_TLS_CERT`...).
pub(crate) fn start_keystone_with(
    work: &Path,
    magnum_url: &str,
    envs: &[(&str, &Path)],
) -> (Running, HashMap<String, String>) {
    let ks_dir = work.join("keystone");
    let guard = Running {
        api: None,
        keystone_dir: ks_dir.clone(),
    };
    let st = Command::new("bash")
        .arg(repo_root().join("test-support/keystone/start.sh"))
        .arg(&ks_dir)
        .arg(free_port().to_string())
        .arg(magnum_url)
        .envs(envs.iter().copied())
        .status()
        .unwrap();
    assert!(st.success(), "keystone did not start");
    let env = read_env(&ks_dir.join("env.sh"));
    (guard, env)
}

/// magnum.conf's `[keystone_authtoken]` with the test Keystone's service user.
pub(crate) fn authtoken_section(env: &HashMap<String, String>) -> String {
    format!(
        "[keystone_authtoken]\nwww_authenticate_uri = {auth}\nauth_url = {auth}\nauth_type = password\n\
         username = {user}\npassword = {pw}\nuser_domain_name = Default\nproject_name = service\n\
         project_domain_name = Default\n",
        auth = env["MAGNUM_TEST_AUTH_URL"],
        user = env["MAGNUM_TEST_SERVICE_USER"],
        pw = env["MAGNUM_TEST_SERVICE_PASSWORD"],
    )
}

/// A raw HTTP request, for what the python client cannot send (a bogus token).
fn raw_get(port: u16, path: &str, token: &str) -> String {
    magnum_testkit::raw_http(
        port,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Auth-Token: {token}\r\nConnection: close\r\n\r\n"
        ),
        Duration::from_secs(30),
    )
}

/// The `openstack` CLI: with a clouds.yaml (a cloud per persona), or with global options
/// only (`--os-auth-type none --os-endpoint ...` for noauth; then `cloud` is ignored).
pub(crate) struct Cli {
    pub(crate) openstack: String,
    pub(crate) clouds: Option<String>,
    pub(crate) global: Vec<String>,
}

impl Cli {
    /// The CLI with a test Keystone's clouds.yaml (its env.sh values).
    pub(crate) fn keystone(env: &HashMap<String, String>) -> Self {
        Self {
            openstack: env["MAGNUM_TEST_OPENSTACK"].clone(),
            clouds: Some(env["OS_CLIENT_CONFIG_FILE"].clone()),
            global: Vec::new(),
        }
    }

    /// A fresh token of `cloud`'s persona.
    pub(crate) fn token(&self, cloud: &str) -> String {
        self.ok(cloud, &["token", "issue", "-f", "value", "-c", "id"])
            .trim()
            .to_owned()
    }

    /// `program` with only the client's environment (and its clouds.yaml).
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env(
                "HOME",
                std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()),
            )
            .env("PYTHONWARNINGS", "ignore")
            // `coe cluster config` prints the export line for the user's shell.
            .env("SHELL", "/bin/bash");
        if let Some(clouds) = &self.clouds {
            cmd.env("OS_CLIENT_CONFIG_FILE", clouds);
        }
        cmd
    }

    pub(crate) fn run(&self, cloud: &str, args: &[&str]) -> Output {
        let mut cmd = self.command(&self.openstack);
        cmd.args(&self.global);
        if self.clouds.is_some() {
            cmd.arg("--os-cloud").arg(cloud);
        }
        cmd.args(args).output().unwrap()
    }

    /// Run and expect success with JSON output.
    pub(crate) fn json(&self, cloud: &str, args: &[&str]) -> Value {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-f", "json"]);
        let out = self.run(cloud, &all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "openstack --os-cloud {cloud} {args:?} failed: {stderr}"
        );
        // Some commands print a sentence ("Request to create ... accepted") before the JSON.
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let start = text.find(['{', '[']).unwrap_or(0);
        serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
    }

    /// `coe cluster template create NAME` as `cloud` (kubernetes, external network `public`),
    /// with `image` and any further options; the created template.
    pub(crate) fn create_template(
        &self,
        cloud: &str,
        name: &str,
        image: &str,
        extra: &[&str],
    ) -> Value {
        let mut args = vec![
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
        args.extend_from_slice(extra);
        self.json(cloud, &args)
    }

    /// Run and expect success; return stdout.
    pub(crate) fn ok(&self, cloud: &str, args: &[&str]) -> String {
        let out = self.run(cloud, args);
        assert!(
            out.status.success(),
            "openstack --os-cloud {cloud} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Many commands through one interpreter of the real client: openstackclient's own
    /// `main(argv)` per command, so each costs its request, not the client's start-up (about
    /// 1.5 s of imports). Each answer: the exit code and what the command printed.
    pub(crate) fn batch(&self, cloud: &str, commands: &[Vec<String>]) -> Vec<(i32, String)> {
        const RUNNER: &str = r#"
import contextlib, io, json, sys
from openstackclient import shell
for line in sys.stdin:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = shell.main(json.loads(line))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    sys.__stdout__.write(json.dumps([rc or 0, out.getvalue()]) + "\n")
    sys.__stdout__.flush()
"#;
        // The console script's interpreter is the venv's Python.
        let script = std::fs::read_to_string(&self.openstack).unwrap();
        let python = script
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("#!"))
            .unwrap_or_else(|| panic!("{} has no #! line", self.openstack))
            .trim()
            .to_owned();
        let mut input = String::new();
        for args in commands {
            let mut argv: Vec<&str> = self.global.iter().map(String::as_str).collect();
            if self.clouds.is_some() {
                argv.extend(["--os-cloud", cloud]);
            }
            argv.extend(args.iter().map(String::as_str));
            input.push_str(&serde_json::to_string(&argv).unwrap());
            input.push('\n');
        }
        let mut child = self
            .command(&python)
            .args(["-c", RUNNER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // Written from a thread: the answers fill the pipe while the commands go in.
        let feeder = std::thread::spawn(move || {
            use std::io::Write as _;
            stdin.write_all(input.as_bytes())
        });
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap().unwrap();
        let answers: Vec<(i32, String)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(
            answers.len(),
            commands.len(),
            "the client's interpreter stopped early: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        answers
    }

    /// Run and expect the API's refusal with `status` and text in the client's message.
    pub(crate) fn refused(&self, cloud: &str, args: &[&str], status: u16, text: &str) {
        let out = self.run(cloud, args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        // `delete` prints each failure and carries on, exiting 0: the message is what counts.
        assert!(err.contains(&format!("(HTTP {status})")), "{args:?}: {err}");
        assert!(err.contains(text), "{args:?}: expected {text:?} in {err}");
    }
}

/// A value from python-magnumclient's `print_dict` table (`| key | value |`).
fn prop(table: &str, key: &str) -> Option<String> {
    table.lines().find_map(|l| {
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        (cells.len() >= 3 && cells[1] == key).then(|| cells[2].to_owned())
    })
}

/// Rows of a `print_list` table (header excluded).
fn rows(table: &str) -> usize {
    table
        .lines()
        .filter(|l| l.starts_with('|'))
        .count()
        .saturating_sub(1)
}

#[test]
fn openstack_coe_commands_as_each_persona() {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1");
        return;
    }
    let mysql = std::env::var("MAGNUM_TEST_MYSQL_URL").expect("MAGNUM_TEST_MYSQL_URL");
    let work = tempfile::tempdir().unwrap();
    let ks_dir = work.path().join("keystone");
    let api_port = free_port();
    let (mut running, env) = crate::client::start_keystone(work.path(), api_port);

    // magnum.conf as an operator writes it: MariaDB, Keystone service credentials.
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let db_url = db.url_with_scheme("mysql+pymysql");
    let _ = mysql;
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[api]\nhost = 127.0.0.1\nport = {api_port}\n\n[database]\nconnection = {db_url}\n\n\
             {ks}service_token_roles_required = true\n\n{sim}",
            ks = crate::client::authtoken_section(&env),
            sim = crate::lifecycle::FAST_SIMULATION,
        ),
    )
    .unwrap();
    let conf = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf, "db", "upgrade"])
            .status
            .success()
    );
    let log = work.path().join("api.log");
    let api = crate::spawn_magnumd(&conf, "serve", &log, api_port);
    running.api = Some(api);

    let cli = Cli::keystone(&env);
    let demo = env["MAGNUM_TEST_DEMO_PROJECT_ID"].clone();
    let alt = env["MAGNUM_TEST_ALT_PROJECT_ID"].clone();

    // Cluster templates.
    let created = cli.create_template(
        "demo-member",
        "k8s",
        "fedora-coreos-40",
        &["--label", "kube_tag=v1.30.4"],
    );
    assert_eq!(created["name"], "k8s");
    assert_eq!(created["project_id"].as_str(), Some(demo.as_str()));
    assert_eq!(created["labels"]["kube_tag"], "v1.30.4");
    let uuid = created["uuid"].as_str().unwrap().to_owned();
    cli.refused(
        "demo-reader",
        &[
            "coe",
            "cluster",
            "template",
            "create",
            "r",
            "--coe",
            "kubernetes",
            "--image",
            "i",
            "--external-network",
            "public",
        ],
        403,
        "Policy doesn't allow clustertemplate:create to be performed",
    );
    let listed = cli.json("demo-reader", &["coe", "cluster", "template", "list"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["uuid"].as_str(), Some(uuid.as_str()), "{listed}");
    assert_eq!(
        cli.json("alt-member", &["coe", "cluster", "template", "list"]),
        serde_json::json!([])
    );
    cli.refused(
        "alt-member",
        &["coe", "cluster", "template", "show", &uuid],
        404,
        &format!("ClusterTemplate {uuid} could not be found"),
    );
    let shown = cli.json(
        "demo-reader",
        &["coe", "cluster", "template", "show", "k8s"],
    );
    assert_eq!(shown["uuid"].as_str(), Some(uuid.as_str()));
    let updated = cli.json(
        "demo-member",
        &[
            "coe", "cluster", "template", "update", "k8s", "--name", "k8s-2", "--label", "extra=1",
        ],
    );
    assert_eq!(updated["name"], "k8s-2");
    assert_eq!(updated["labels"]["extra"], "1");
    cli.refused(
        "demo-reader",
        &[
            "coe", "cluster", "template", "update", "k8s-2", "--name", "x",
        ],
        403,
        "clustertemplate:update",
    );
    cli.refused(
        "demo-member",
        &["coe", "cluster", "template", "update", "k8s-2", "--public"],
        403,
        "Not authorized to set public or hidden flag",
    );
    let public = cli.json(
        "demo-admin",
        &["coe", "cluster", "template", "update", "k8s-2", "--public"],
    );
    assert_eq!(public["public"], true);
    assert_eq!(
        cli.json("alt-member", &["coe", "cluster", "template", "list"])
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let admin_list = cli.json("admin", &["coe", "cluster", "template", "list"]);
    assert_eq!(admin_list.as_array().map(Vec::len), Some(1));
    cli.refused(
        "demo-reader",
        &["coe", "cluster", "template", "delete", "k8s-2"],
        403,
        "clustertemplate:delete",
    );
    let out = cli.ok(
        "demo-member",
        &["coe", "cluster", "template", "delete", "k8s-2"],
    );
    assert!(
        out.contains("accepted") || out.is_empty() || out.contains("k8s-2"),
        "{out}"
    );
    cli.refused(
        "demo-member",
        &["coe", "cluster", "template", "show", &uuid],
        404,
        "could not be found",
    );

    // Quotas: admin CRUD, members read their own. (These commands print tables, not -f json.)
    let q = cli.ok(
        "admin",
        &[
            "coe",
            "quotas",
            "create",
            "--project-id",
            &demo,
            "--resource",
            "Cluster",
            "--hard-limit",
            "5",
        ],
    );
    assert_eq!(prop(&q, "hard_limit").as_deref(), Some("5"), "{q}");
    cli.refused(
        "demo-member",
        &[
            "coe",
            "quotas",
            "create",
            "--project-id",
            &alt,
            "--resource",
            "Cluster",
        ],
        403,
        "quota:create",
    );
    cli.refused(
        "admin",
        &[
            "coe",
            "quotas",
            "create",
            "--project-id",
            "no-such-project",
            "--resource",
            "Cluster",
        ],
        404,
        "could not be found",
    );
    let shown = cli.ok(
        "demo-member",
        &[
            "coe",
            "quotas",
            "show",
            "--project-id",
            &demo,
            "--resource",
            "Cluster",
        ],
    );
    assert_eq!(prop(&shown, "hard_limit").as_deref(), Some("5"), "{shown}");
    cli.refused(
        "demo-member",
        &[
            "coe",
            "quotas",
            "show",
            "--project-id",
            &alt,
            "--resource",
            "Cluster",
        ],
        403,
        "Not authorized",
    );
    let defaulted = cli.ok(
        "alt-member",
        &[
            "coe",
            "quotas",
            "show",
            "--project-id",
            &alt,
            "--resource",
            "Cluster",
        ],
    );
    assert_eq!(
        prop(&defaulted, "hard_limit").as_deref(),
        Some("20"),
        "{defaulted}"
    );
    let updated = cli.ok(
        "admin",
        &[
            "coe",
            "quotas",
            "update",
            "--project-id",
            &demo,
            "--resource",
            "Cluster",
            "--hard-limit",
            "8",
        ],
    );
    assert_eq!(
        prop(&updated, "hard_limit").as_deref(),
        Some("8"),
        "{updated}"
    );
    let all = cli.ok("admin", &["coe", "quotas", "list", "--all-tenants"]);
    assert_eq!(rows(&all), 1, "{all}");
    cli.refused(
        "demo-member",
        &["coe", "quotas", "list"],
        403,
        "quota:get_all",
    );
    cli.ok(
        "admin",
        &[
            "coe",
            "quotas",
            "delete",
            "--project-id",
            &demo,
            "--resource",
            "Cluster",
        ],
    );
    cli.refused(
        "admin",
        &[
            "coe",
            "quotas",
            "delete",
            "--project-id",
            &demo,
            "--resource",
            "Cluster",
        ],
        404,
        "Quota could not be found",
    );

    // Stats and services.
    let stats = cli.ok("demo-reader", &["coe", "stats", "list", &demo]);
    assert_eq!(
        (
            prop(&stats, "clusters").as_deref(),
            prop(&stats, "nodes").as_deref()
        ),
        (Some("0"), Some("0")),
        "{stats}"
    );
    cli.refused(
        "demo-member",
        &["coe", "stats", "list", &alt],
        403,
        "Not authorized",
    );
    // The conductor in this process beats into magnum_service: listed, and up.
    let services = cli.json("admin", &["coe", "service", "list"]);
    let conductor = services
        .as_array()
        .and_then(|a| a.iter().find(|s| s["binary"] == "magnum-conductor"))
        .unwrap_or_else(|| panic!("no conductor in {services}"));
    assert_eq!(conductor["state"], "up", "{services}");
    cli.refused(
        "demo-member",
        &["coe", "service", "list"],
        403,
        "magnum-service:get_all",
    );

    // A cluster's whole life, authenticated by Keystone, on MariaDB.
    crate::lifecycle::cluster_lifecycle(&cli, "demo-member", work.path(), "ubuntu-2204", &[]);

    // A service token must carry a role of service_token_roles (here required): the service
    // user's does, a member's does not.
    let (user, service, member) = (
        cli.token("demo-member"),
        cli.token("magnum-service"),
        cli.token("alt-member"),
    );
    for (service_token, want) in [(&service, "HTTP/1.1 200"), (&member, "HTTP/1.1 401")] {
        let reply = magnum_testkit::raw_http(
            api_port,
            &format!(
                "GET /v1/clustertemplates HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Auth-Token: {user}\r\n\
                 X-Service-Token: {service_token}\r\nConnection: close\r\n\r\n"
            ),
            Duration::from_secs(30),
        );
        assert!(reply.starts_with(want), "{want}: {reply}");
    }

    // A bad token is keystonemiddleware's 401; Keystone gone is a 503, never a hang.
    let reply = raw_get(api_port, "/v1/clustertemplates", "not-a-token");
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains(&format!(
            "www-authenticate: keystone uri=\"{}\"",
            env["MAGNUM_TEST_AUTH_URL"]
        )),
        "{reply}"
    );
    Command::new("bash")
        .arg(repo_root().join("test-support/keystone/stop.sh"))
        .arg(&ks_dir)
        .status()
        .unwrap();
    let started = Instant::now();
    let reply = raw_get(api_port, "/v1/clustertemplates", "another-unknown-token");
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    assert!(reply.contains("\"errors\""), "{reply}");
    assert!(started.elapsed() < Duration::from_secs(15));

    drop(running);
    drop(db);
}

/// openstacksdk's container-infrastructure-management proxy (PyPI, as automation uses it)
/// creates, lists, updates and deletes templates and clusters against `magnumd serve` with a
/// real Keystone (test-support/keystone/sdk_lifecycle.py).
#[test]
fn openstacksdk_manages_templates_and_clusters() {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let (mut running, env) = start_keystone(work.path(), api_port);
    let db = ServerDb::create_blocking(Server::MariaDb, "magnum_cli").unwrap();
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[api]\nhost = 127.0.0.1\nport = {api_port}\n\n[database]\nconnection = {db}\n\n{ks}\n{sim}",
            db = db.url_with_scheme("mysql+pymysql"),
            ks = authtoken_section(&env),
            sim = crate::lifecycle::FAST_SIMULATION,
        ),
    )
    .unwrap();
    let conf = conf.display().to_string();
    assert!(
        crate::magnumd(&["--config-file", &conf, "db", "upgrade"])
            .status
            .success()
    );
    let log = work.path().join("api.log");
    running.api = Some(crate::spawn_magnumd(&conf, "serve", &log, api_port));
    let out = Command::new(format!("{}/bin/python", env["MAGNUM_TEST_VENV"]))
        .arg(repo_root().join("test-support/keystone/sdk_lifecycle.py"))
        .arg("demo-member")
        .arg(magnum_testkit::tag())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env(
            "HOME",
            std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()),
        )
        .env("OS_CLIENT_CONFIG_FILE", &env["OS_CLIENT_CONFIG_FILE"])
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps: HashMap<String, Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| (v["step"].as_str().unwrap_or_default().to_owned(), v))
        .collect();
    assert_eq!(
        steps["template create"]["labels"]["kube_tag"], "v1.30.4",
        "{text}"
    );
    assert_eq!(steps["template list"]["found"], true, "{text}");
    assert!(
        steps["template update"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-renamed")),
        "{text}"
    );
    assert_eq!(
        steps["cluster create"]["status"], "CREATE_COMPLETE",
        "{text}"
    );
    assert_eq!(steps["cluster create"]["coe_version"], "v1.30.4", "{text}");
    assert_eq!(steps["cluster list"]["found"], true, "{text}");
    assert_eq!(steps["cluster update"]["node_count"], 2, "{text}");
    assert_eq!(steps["cluster delete"]["gone"], true, "{text}");
    assert_eq!(steps["template delete"]["gone"], true, "{text}");
    drop(running);
    drop(db);
}
