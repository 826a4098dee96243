//! schemathesis against GET /v1/openapi.json with a real token: see test-support/fuzz.
//! Every operation of the document, at microversions 1.1, 1.10 and latest, as a Keystone
//! admin of project `demo`: no 5xx, every answer conforms to the document (schema, status,
//! content type). Runs when MAGNUM_TEST_KEYSTONE=1; prints each pass's figures.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::client::{Running, free_port, repo_root, start_keystone};

/// Keystone and `magnumd serve` (SQLite, simulated driver, `[keystone_authtoken]`), both
/// stopped when the guard drops; the env.sh values and the API port.
pub(crate) fn keystone_and_api(work: &Path) -> (Running, HashMap<String, String>, u16) {
    let port = free_port();
    let (mut running, env) = start_keystone(work, port);
    let conf = work.join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[api]\nhost = 127.0.0.1\nport = {port}\n\n[database]\nconnection = sqlite:///{db}\n\n\
             {ks}\n{sim}",
            db = work.join("magnum.sqlite").display(),
            ks = crate::client::authtoken_section(&env),
            sim = crate::lifecycle::FAST_SIMULATION,
        ),
    )
    .unwrap();
    let conf = conf.display().to_string();
    let up = crate::magnumd(&["--config-file", &conf, "db", "upgrade"]);
    assert!(up.status.success(), "{}", crate::text(&up.stderr));
    running.api = Some(crate::spawn_magnumd(
        &conf,
        "serve",
        &work.join("api.log"),
        port,
    ));
    (running, env, port)
}

/// One request to Keystone's API (JSON body), with an optional token; (status, headers and
/// body as one text, JSON body).
pub(crate) fn keystone_call(
    env: &HashMap<String, String>,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, String, serde_json::Value) {
    let url = &env["MAGNUM_TEST_KEYSTONE_URL"];
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let body = body.map(serde_json::Value::to_string).unwrap_or_default();
    let auth = token
        .map(|t| format!("X-Auth-Token: {t}\r\n"))
        .unwrap_or_default();
    let reply = magnum_testkit::raw_http(
        port,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{auth}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        Duration::from_secs(60),
    );
    let status = reply.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, rest) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let json = serde_json::from_str(rest).unwrap_or(serde_json::Value::Null);
    (status, head.to_owned(), json)
}

/// A token for `user` (Default domain) scoped to `scope` (Keystone's `scope` object, e.g.
/// `{"project": {"id": ...}}` or `{"system": {"all": true}}`).
pub(crate) fn password_token(
    env: &HashMap<String, String>,
    user: &str,
    password: &str,
    scope: serde_json::Value,
) -> String {
    let body = serde_json::json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"id": "default"}, "password": password}}},
        "scope": scope,
    }});
    let (status, head, _) = keystone_call(env, None, "POST", "/v3/auth/tokens", Some(&body));
    assert_eq!(status, 201, "token for {user}: HTTP {status}");
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("x-subject-token")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no X-Subject-Token for {user}"))
}

/// A template, a cluster on it (complete) and the cluster's nodegroups, made by `token`'s
/// caller: their ids, space-separated.
/// The project's cluster quota is reset first: the last pass may have set it to anything.
fn seed(port: u16, token: &str, project: &str, tag: &str) -> (String, String, String) {
    let call = |method: &str, path: &str, body: Option<serde_json::Value>| {
        crate::http(port, Some(token), method, path, body.as_ref())
    };
    let (s, _) = call("DELETE", &format!("/v1/quotas/{project}/Cluster"), None);
    assert!(s == 204 || s == 404, "quota delete: {s}");
    let (s, q) = call(
        "POST",
        "/v1/quotas",
        Some(
            serde_json::json!({"project_id": project, "resource": "Cluster", "hard_limit": 10000}),
        ),
    );
    assert_eq!(s, 201, "{q}");
    let (s, t) = call(
        "POST",
        "/v1/clustertemplates",
        Some(
            serde_json::json!({"name": format!("seed-{tag}"), "coe": "kubernetes",
            "image_id": "fedora-coreos-40", "external_network_id": "public"}),
        ),
    );
    assert_eq!(s, 201, "{t}");
    let template = t["uuid"].as_str().unwrap().to_owned();
    let (s, c) = call(
        "POST",
        "/v1/clusters",
        Some(
            serde_json::json!({"name": format!("seed-{tag}"), "cluster_template_id": template,
            "node_count": 1}),
        ),
    );
    assert_eq!(s, 202, "{c}");
    let cluster = c["uuid"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    while call("GET", &format!("/v1/clusters/{cluster}"), None).1["status"] != "CREATE_COMPLETE" {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "seed cluster never completed"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let (_, ngs) = call("GET", &format!("/v1/clusters/{cluster}/nodegroups"), None);
    let nodegroups: Vec<&str> = ngs["nodegroups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["uuid"].as_str())
        .collect();
    assert_eq!(nodegroups.len(), 2, "{ngs}");
    (template, cluster, nodegroups.join(" "))
}

/// The figures of one pass, from the runner's summary line.
#[derive(Debug, Default)]
struct Pass {
    operations: u64,
    cases: u64,
    failures: u64,
    errors: u64,
}

fn parse_summary(line: &str) -> Option<Pass> {
    let rest = line.strip_prefix("fuzz: version ")?.split_once(": ")?.1;
    let mut pass = Pass::default();
    for part in rest.split(", ") {
        let (name, n) = part.split_once(' ')?;
        let n = n.parse().ok()?;
        match name {
            "operations" => pass.operations = n,
            "cases" => pass.cases = n,
            "failures" => pass.failures = n,
            "errors" => pass.errors = n,
            _ => {}
        }
    }
    Some(pass)
}

#[test]
fn schemathesis_finds_no_5xx_and_no_answer_outside_the_document() {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (running, env, port) = keystone_and_api(work.path());
    let token = password_token(
        &env,
        "demo-admin",
        &env["MAGNUM_TEST_DEMO_ADMIN_PASSWORD"],
        serde_json::json!({"project": {"id": env["MAGNUM_TEST_DEMO_PROJECT_ID"]}}),
    );
    // The document every operation is generated from lists them all.
    let (status, doc) = crate::http(port, Some(&token), "GET", "/v1/openapi.json", None);
    assert_eq!(status, 200);
    let operations: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p.as_object().unwrap().len())
        .sum();
    assert!(operations >= 36, "{operations} operations in the document");

    let mut totals = Vec::new();
    for version in ["1.1", "1.10", "latest"] {
        // Real objects for the fuzzer to draw idents from (the last pass may have deleted
        // them): a template, a cluster on it, its nodegroups, the project.
        let seeds = seed(port, &token, &env["MAGNUM_TEST_DEMO_PROJECT_ID"], version);
        let out_dir = work.path().join(format!("fuzz-{version}"));
        let out = Command::new("bash")
            .arg(repo_root().join("test-support/fuzz/run.sh"))
            .arg(format!("http://127.0.0.1:{port}"))
            .arg(version)
            .arg(&out_dir)
            .env("MAGNUM_FUZZ_TOKEN", &token)
            .env("MAGNUM_FUZZ_TEMPLATES", &seeds.0)
            .env("MAGNUM_FUZZ_CLUSTERS", &seeds.1)
            .env("MAGNUM_FUZZ_NODEGROUPS", &seeds.2)
            .env("MAGNUM_FUZZ_PROJECTS", &env["MAGNUM_TEST_DEMO_PROJECT_ID"])
            .output()
            .unwrap();
        // The runner's output without the token, should schemathesis ever echo it.
        let shown = crate::text(&out.stdout).replace(&token, "[token]");
        let err = crate::text(&out.stderr).replace(&token, "[token]");
        let pass = shown
            .lines()
            .rev()
            .find_map(parse_summary)
            .unwrap_or_else(|| panic!("no summary line from run.sh:\n{shown}\n{err}"));
        let statuses = shown
            .lines()
            .rev()
            .find(|l| l.starts_with(&format!("fuzz: version {version}: statuses ")))
            .unwrap_or_else(|| panic!("no statuses line from run.sh:\n{shown}\n{err}"));
        eprintln!(
            "fuzz: microversion {version}: {} operations, {} cases, {} failures, {} errors",
            pass.operations, pass.cases, pass.failures, pass.errors
        );
        eprintln!("{statuses}");
        assert!(statuses.ends_with("(5xx: 0)"), "{shown}");
        assert!(
            out.status.success() && pass.failures == 0 && pass.errors == 0,
            "schemathesis at {version}:\n{shown}\n{err}"
        );
        assert_eq!(pass.operations as usize, operations, "{shown}");
        assert!(pass.cases >= pass.operations * 5, "{shown}");
        totals.push((version, pass));
    }
    // magnumd logged no 5xx of its own (a panic or an internal error) during the passes.
    let log = std::fs::read_to_string(work.path().join("api.log")).unwrap();
    assert!(!log.contains("panicked"), "magnumd panicked");
    let fives = log
        .lines()
        .filter(|l| l.contains(" status=5"))
        .collect::<Vec<_>>();
    assert!(fives.is_empty(), "5xx logged: {fives:?}");
    assert!(!log.contains(&token), "the token is in magnumd's log");
    let cases: u64 = totals.iter().map(|(_, p)| p.cases).sum();
    eprintln!("fuzz: {} passes, {cases} cases, 0 failures", totals.len());
    drop(running);
}
