//! Tenant isolation with real Keystone tokens: every route as seven personas.
//! Project A (`demo`) owns a private template, a public one, a cluster, a nodegroup, a
//! signed certificate, a federation and a quota; admin, member and reader of A and of B
//! (`alt`) and a system-scoped reader then try every route and action on them. Requests
//! that would pass authorization are probes where they can be (a value refused only after
//! the policy check, so nothing changes); the expected outcome of each cell follows
//! upstream's default policy (shared spec policy.md): an admin of any project is
//! `context_is_admin` and reaches A's objects exactly on the all-projects paths. A matrix
//! persona x route -> status is printed; no B persona may read or change what policy keeps
//! from it, readers change nothing, and A's objects are unchanged after B's attempts. Last,
//! what policy lets another project's admin do that no probe can show (delete A's cluster,
//! public template and quota) is done, and must take effect.
//! Runs when MAGNUM_TEST_KEYSTONE=1.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fuzz::{keystone_and_api, keystone_call, password_token};

const PERSONAS: [&str; 7] = [
    "sys-reader",
    "B-reader",
    "B-member",
    "B-admin",
    "A-reader",
    "A-member",
    "A-admin",
];

/// What a cell must show.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    /// Authorized and found: a 2xx, or the probe's own refusal after the policy check.
    Pass,
    /// 403, or 404 / 400 for an object the caller may not see.
    Deny,
    /// Not attempted (it would destroy what later cells need; done at the end instead).
    Skip,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Got {
    Pass,
    Deny,
    Skip,
    Other,
}

/// One route tried on A's objects.
struct Case {
    label: &'static str,
    method: &'static str,
    path: String,
    body: Option<Value>,
    /// Text in a 4xx detail that means "past authorization" (the probe's own refusal).
    probe: Option<&'static str>,
    /// For lists: the A object whose presence is "seeing" it (checked against `sees`).
    seek: Option<String>,
    want: fn(&str) -> Want,
}

fn is(persona: &str, set: &[&str]) -> bool {
    set.contains(&persona)
}

const A: &[&str] = &["A-reader", "A-member", "A-admin"];
const A_WRITE: &[&str] = &["A-member", "A-admin"];
const ADMINS: &[&str] = &["A-admin", "B-admin"];
const PROJECT: &[&str] = &[
    "B-reader", "B-member", "B-admin", "A-reader", "A-member", "A-admin",
];

fn want(pass: bool) -> Want {
    if pass { Want::Pass } else { Want::Deny }
}

fn classify(status: u16, body: &Value, probe: Option<&str>) -> Got {
    let detail = body["errors"][0]["detail"].as_str().unwrap_or_default();
    if (200..300).contains(&status) {
        return Got::Pass;
    }
    if let Some(p) = probe
        && (400..500).contains(&status)
        && detail.contains(p)
    {
        return Got::Pass;
    }
    match status {
        403 | 404 => Got::Deny,
        400 if detail.contains("could not be found") => Got::Deny,
        _ => Got::Other,
    }
}

fn csr(work: &std::path::Path) -> String {
    let key = work.join("user.key");
    let csr = work.join("user.csr");
    crate::lifecycle::openssl(&[
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        csr.to_str().unwrap(),
        "-subj",
        "/CN=isolation/O=system:masters",
    ]);
    std::fs::read_to_string(csr).unwrap()
}

fn wait_for(port: u16, token: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = crate::http(port, Some(token), "GET", path, None);
        if status == 200 && done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{path}: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn ok(port: u16, token: &str, method: &str, path: &str, body: Value, want: u16) -> Value {
    let (status, out) = crate::http(port, Some(token), method, path, Some(&body));
    assert_eq!(status, want, "{method} {path}: {out}");
    out
}

/// The fields of A's objects that B's attempts must leave as they were.
fn snapshot(port: u16, token: &str, ids: &Ids) -> Value {
    let get = |path: &str| {
        let (status, body) = crate::http(port, Some(token), "GET", path, None);
        assert_eq!(status, 200, "{path}: {body}");
        body
    };
    let pick = |v: &Value, keys: &[&str]| -> Value {
        keys.iter()
            .map(|k| ((*k).to_owned(), v[*k].clone()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let template = [
        "name",
        "public",
        "hidden",
        "image_id",
        "coe",
        "labels",
        "project_id",
        "docker_volume_size",
        "updated_at",
    ];
    let cluster = [
        "name",
        "status",
        "node_count",
        "master_count",
        "cluster_template_id",
        "labels",
        "project_id",
        "updated_at",
    ];
    let ng = [
        "name",
        "node_count",
        "min_node_count",
        "max_node_count",
        "labels",
        "status",
        "updated_at",
    ];
    json!({
        "template": pick(&get(&format!("/v1/clustertemplates/{}", ids.template)), &template),
        "public": pick(&get(&format!("/v1/clustertemplates/{}", ids.public)), &template),
        "cluster": pick(&get(&format!("/v1/clusters/{}", ids.cluster)), &cluster),
        "nodegroup": pick(&get(&format!("/v1/clusters/{}/nodegroups/{}", ids.cluster, ids.nodegroup)), &ng),
        "ca": get(&format!("/v1/certificates/{}", ids.cluster))["pem"].clone(),
        // Not updated_at: an admin's PATCH of the value it has (allowed) still stamps it.
        "quota": pick(&get(&format!("/v1/quotas/{}/Cluster", ids.project)), &["hard_limit"]),
        "federation": ids.federation.as_ref().map(|f| pick(&get(&format!("/v1/federations/{f}")), &["name", "hostcluster_id", "member_ids", "properties", "status"])),
    })
}

struct Ids {
    project: String,
    template: String,
    public: String,
    cluster: String,
    nodegroup: String,
    federation: Option<String>,
}

fn cases(ids: &Ids, csr: &str) -> Vec<Case> {
    let (t, p, c, ng, a) = (
        &ids.template,
        &ids.public,
        &ids.cluster,
        &ids.nodegroup,
        &ids.project,
    );
    let mut v = vec![
        // Cluster templates. Lists: A's private template is seen by A and by admins.
        Case {
            label: "GET clustertemplates (sees private)",
            method: "GET",
            path: "/v1/clustertemplates".into(),
            body: None,
            probe: None,
            seek: Some(t.clone()),
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "GET clustertemplates/detail (sees private)",
            method: "GET",
            path: "/v1/clustertemplates/detail".into(),
            body: None,
            probe: None,
            seek: Some(t.clone()),
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "GET clustertemplates (sees public)",
            method: "GET",
            path: "/v1/clustertemplates".into(),
            body: None,
            probe: None,
            seek: Some(p.clone()),
            want: |p| want(is(p, PROJECT)),
        },
        Case {
            label: "GET clustertemplates/{private}",
            method: "GET",
            path: format!("/v1/clustertemplates/{t}"),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "GET clustertemplates/{public}",
            method: "GET",
            path: format!("/v1/clustertemplates/{p}"),
            body: None,
            probe: None,
            seek: None,
            // Public: anyone finds it, and `clustertemplate:get` is not checked for it.
            want: |_| Want::Pass,
        },
        Case {
            label: "PATCH clustertemplates/{private}",
            method: "PATCH",
            path: format!("/v1/clustertemplates/{t}"),
            body: Some(json!([{"op": "replace", "path": "/coe", "value": "probe-coe"}])),
            probe: Some("probe-coe"),
            seek: None,
            // Upstream's network/volume-driver checks look the template up in the caller's
            // project before the admin's all-projects scope applies: another project's
            // admin does not find a private template here (a public one it does).
            want: |p| want(is(p, A_WRITE)),
        },
        Case {
            label: "PATCH clustertemplates/{public}",
            method: "PATCH",
            path: format!("/v1/clustertemplates/{p}"),
            body: Some(json!([{"op": "replace", "path": "/coe", "value": "probe-coe"}])),
            probe: Some("probe-coe"),
            seek: None,
            want: |p| want(is(p, &["A-member", "A-admin", "B-admin"])),
        },
        Case {
            // In use by A's cluster: who gets past the policy check is refused with 400.
            label: "DELETE clustertemplates/{private}",
            method: "DELETE",
            path: format!("/v1/clustertemplates/{t}"),
            body: None,
            probe: Some("is referenced by"),
            seek: None,
            want: |p| want(is(p, &["A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "DELETE clustertemplates/{public}",
            method: "DELETE",
            path: format!("/v1/clustertemplates/{p}"),
            body: None,
            probe: None,
            seek: None,
            // Admins and A's members may: done at the end (B-admin), not here.
            want: |p| {
                if is(p, &["A-member", "A-admin", "B-admin"]) {
                    Want::Skip
                } else {
                    Want::Deny
                }
            },
        },
        Case {
            label: "POST clusters (A's private template)",
            method: "POST",
            path: "/v1/clusters".into(),
            body: Some(json!({"name": "b-cluster", "cluster_template_id": t, "node_count": 1})),
            probe: None,
            seek: None,
            // A's own callers would create a cluster; B (admins too) must not find the template.
            want: |p| if is(p, A) { Want::Skip } else { Want::Deny },
        },
        // Clusters.
        Case {
            label: "GET clusters (sees)",
            method: "GET",
            path: "/v1/clusters".into(),
            body: None,
            probe: None,
            seek: Some(c.clone()),
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "GET clusters/detail (sees)",
            method: "GET",
            path: "/v1/clusters/detail".into(),
            body: None,
            probe: None,
            seek: Some(c.clone()),
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "GET clusters/{id}",
            method: "GET",
            path: format!("/v1/clusters/{c}"),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "PATCH clusters/{id}",
            method: "PATCH",
            path: format!("/v1/clusters/{c}"),
            body: Some(json!([{"op": "replace", "path": "/master_count", "value": 3}])),
            probe: Some("cannot change cluster property"),
            seek: None,
            want: |p| want(is(p, &["A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "DELETE clusters/{id}",
            method: "DELETE",
            path: format!("/v1/clusters/{c}"),
            body: None,
            probe: None,
            seek: None,
            // Admins and A's members may: B-admin does it at the end.
            want: |p| {
                if is(p, &["A-member", "A-admin", "B-admin"]) {
                    Want::Skip
                } else {
                    Want::Deny
                }
            },
        },
        Case {
            // Resize resolves the cluster in the caller's own project, admins included.
            label: "POST clusters/{id}/actions/resize",
            method: "POST",
            path: format!("/v1/clusters/{c}/actions/resize"),
            body: Some(json!({"node_count": 2, "nodegroup": "probe-nodegroup"})),
            probe: Some("probe-nodegroup"),
            seek: None,
            want: |p| want(is(p, A_WRITE)),
        },
        Case {
            label: "POST clusters/{id}/actions/upgrade",
            method: "POST",
            path: format!("/v1/clusters/{c}/actions/upgrade"),
            body: Some(json!({"cluster_template": "probe-template"})),
            probe: Some("probe-template"),
            seek: None,
            want: |p| want(is(p, &["A-member", "A-admin", "B-admin"])),
        },
        // Nodegroups.
        Case {
            label: "GET clusters/{id}/nodegroups (sees)",
            method: "GET",
            path: format!("/v1/clusters/{c}/nodegroups"),
            body: None,
            probe: None,
            seek: Some(ng.clone()),
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "GET clusters/{id}/nodegroups/{ng}",
            method: "GET",
            path: format!("/v1/clusters/{c}/nodegroups/{ng}"),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "POST clusters/{id}/nodegroups",
            method: "POST",
            path: format!("/v1/clusters/{c}/nodegroups"),
            body: Some(json!({"name": "a-ng", "node_count": 1})),
            probe: Some("already exists"),
            seek: None,
            want: |p| want(is(p, A_WRITE)),
        },
        Case {
            label: "PATCH clusters/{id}/nodegroups/{ng}",
            method: "PATCH",
            path: format!("/v1/clusters/{c}/nodegroups/{ng}"),
            body: Some(
                json!([{"op": "replace", "path": "/min_node_count", "value": "probe-count"}]),
            ),
            probe: Some("probe-count"),
            seek: None,
            want: |p| want(is(p, A_WRITE)),
        },
        Case {
            label: "DELETE clusters/{id}/nodegroups/{ng}",
            method: "DELETE",
            path: format!("/v1/clusters/{c}/nodegroups/{ng}"),
            body: None,
            probe: None,
            seek: None,
            want: |p| {
                if is(p, A_WRITE) {
                    Want::Skip
                } else {
                    Want::Deny
                }
            },
        },
        // Certificates: `get`/`create` also need the cluster's creator (A-member) or an
        // admin; the lookup is in the caller's project for everyone.
        Case {
            label: "GET certificates/{id}",
            method: "GET",
            path: format!("/v1/certificates/{c}"),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, A_WRITE)),
        },
        Case {
            label: "POST certificates (sign)",
            method: "POST",
            path: "/v1/certificates".into(),
            body: Some(json!({"cluster_uuid": c, "csr": csr})),
            probe: None,
            seek: None,
            want: |p| want(is(p, A_WRITE)),
        },
        Case {
            label: "PATCH certificates/{id} (rotate CA)",
            method: "PATCH",
            path: format!("/v1/certificates/{c}"),
            body: None,
            probe: None,
            seek: None,
            // A's own may rotate; that changes the CA, so it is left to no one here.
            want: |p| {
                if is(p, A_WRITE) {
                    Want::Skip
                } else {
                    Want::Deny
                }
            },
        },
        Case {
            label: "PATCH credentials/{id}",
            method: "PATCH",
            path: format!("/v1/credentials/{c}"),
            body: None,
            probe: None,
            seek: None,
            want: |p| {
                if is(p, A_WRITE) {
                    Want::Skip
                } else {
                    Want::Deny
                }
            },
        },
        // Quotas: reading one's own is a reader's right, everything else is admin-only.
        Case {
            label: "GET quotas (sees A's)",
            method: "GET",
            path: "/v1/quotas?all_tenants=true".into(),
            body: None,
            probe: None,
            seek: Some(a.clone()),
            want: |p| want(is(p, ADMINS)),
        },
        Case {
            label: "GET quotas/{A}/Cluster",
            method: "GET",
            path: format!("/v1/quotas/{a}/Cluster"),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "POST quotas (for A)",
            method: "POST",
            path: "/v1/quotas".into(),
            body: Some(json!({"project_id": a, "resource": "Cluster", "hard_limit": 99})),
            probe: Some("already exist"),
            seek: None,
            want: |p| want(is(p, ADMINS)),
        },
        Case {
            // Admins send the value it has (so it stays unchanged), the others a new one.
            label: "PATCH quotas/{A}/Cluster",
            method: "PATCH",
            path: format!("/v1/quotas/{a}/Cluster"),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, ADMINS)),
        },
        Case {
            label: "DELETE quotas/{A}/Cluster",
            method: "DELETE",
            path: format!("/v1/quotas/{a}/Cluster"),
            body: None,
            probe: None,
            seek: None,
            want: |p| {
                if is(p, ADMINS) {
                    Want::Skip
                } else {
                    Want::Deny
                }
            },
        },
        // Stats: another project's figures only for admins.
        Case {
            label: "GET stats?project_id=A",
            method: "GET",
            path: format!("/v1/stats?project_id={a}"),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, &["A-reader", "A-member", "A-admin", "B-admin"])),
        },
        Case {
            label: "GET mservices",
            method: "GET",
            path: "/v1/mservices".into(),
            body: None,
            probe: None,
            seek: None,
            want: |p| want(is(p, ADMINS)),
        },
    ];
    if let Some(f) = &ids.federation {
        v.extend([
            Case {
                label: "GET federations (sees)",
                method: "GET",
                path: "/v1/federations".into(),
                body: None,
                probe: None,
                seek: Some(f.clone()),
                // Federations are scoped to the caller's project for everyone.
                want: |p| want(is(p, A)),
            },
            Case {
                label: "GET federations/{id}",
                method: "GET",
                path: format!("/v1/federations/{f}"),
                body: None,
                probe: None,
                seek: None,
                want: |p| want(is(p, A)),
            },
            Case {
                label: "PATCH federations/{id}",
                method: "PATCH",
                path: format!("/v1/federations/{f}"),
                body: Some(json!([{"op": "replace", "path": "/name", "value": ""}])),
                probe: Some("name"),
                seek: None,
                want: |p| want(is(p, A_WRITE)),
            },
            Case {
                label: "DELETE federations/{id}",
                method: "DELETE",
                path: format!("/v1/federations/{f}"),
                body: None,
                probe: None,
                seek: None,
                want: |p| {
                    if is(p, A_WRITE) {
                        Want::Skip
                    } else {
                        Want::Deny
                    }
                },
            },
        ]);
    }
    v
}

/// Keystone users for the personas the test Keystone lacks (admin and reader of `alt`, a
/// system reader), with passwords made here; their (name, password).
fn add_personas(env: &HashMap<String, String>, admin: &str) -> Vec<(String, String)> {
    let role = |name: &str| {
        let (s, _, body) = keystone_call(
            env,
            Some(admin),
            "GET",
            &format!("/v3/roles?name={name}"),
            None,
        );
        assert_eq!(s, 200);
        body["roles"][0]["id"].as_str().unwrap().to_owned()
    };
    let (admin_role, reader_role) = (role("admin"), role("reader"));
    let alt = &env["MAGNUM_TEST_ALT_PROJECT_ID"];
    let mut made = Vec::new();
    for (name, grant) in [
        (
            "alt-admin",
            format!("/v3/projects/{alt}/users/{{}}/roles/{admin_role}"),
        ),
        (
            "alt-reader",
            format!("/v3/projects/{alt}/users/{{}}/roles/{reader_role}"),
        ),
        (
            "sys-reader",
            format!("/v3/system/users/{{}}/roles/{reader_role}"),
        ),
    ] {
        let password = format!("pw-{}-{}", magnum_testkit::tag(), std::process::id());
        let (s, _, body) = keystone_call(
            env,
            Some(admin),
            "POST",
            "/v3/users",
            Some(&json!({"user": {"name": name, "password": password, "domain_id": "default"}})),
        );
        assert_eq!(s, 201, "create user {name}");
        let id = body["user"]["id"].as_str().unwrap();
        let (s, _, _) = keystone_call(env, Some(admin), "PUT", &grant.replace("{}", id), None);
        assert_eq!(s, 204, "grant {name}");
        made.push((name.to_owned(), password));
    }
    made
}

#[test]
fn no_project_reads_or_changes_another_projects_objects() {
    if !magnum_testkit::flag("MAGNUM_TEST_KEYSTONE") {
        magnum_testkit::skip("MAGNUM_TEST_KEYSTONE is not 1");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (running, env, port) = keystone_and_api(work.path());
    let (demo, alt) = (
        env["MAGNUM_TEST_DEMO_PROJECT_ID"].clone(),
        env["MAGNUM_TEST_ALT_PROJECT_ID"].clone(),
    );
    let project = |id: &str| json!({"project": {"id": id}});
    let cloud_admin = password_token(
        &env,
        "admin",
        &env["MAGNUM_TEST_ADMIN_PASSWORD"],
        project(&env["MAGNUM_TEST_ADMIN_PROJECT_ID"]),
    );
    let extra: HashMap<String, String> = add_personas(&env, &cloud_admin).into_iter().collect();
    let mut tokens: HashMap<&str, String> = HashMap::new();
    for (persona, user, password, scope) in [
        (
            "A-admin",
            "demo-admin",
            env["MAGNUM_TEST_DEMO_ADMIN_PASSWORD"].clone(),
            project(&demo),
        ),
        (
            "A-member",
            "demo-member",
            env["MAGNUM_TEST_DEMO_MEMBER_PASSWORD"].clone(),
            project(&demo),
        ),
        (
            "A-reader",
            "demo-reader",
            env["MAGNUM_TEST_DEMO_READER_PASSWORD"].clone(),
            project(&demo),
        ),
        (
            "B-admin",
            "alt-admin",
            extra["alt-admin"].clone(),
            project(&alt),
        ),
        (
            "B-member",
            "alt-member",
            env["MAGNUM_TEST_ALT_MEMBER_PASSWORD"].clone(),
            project(&alt),
        ),
        (
            "B-reader",
            "alt-reader",
            extra["alt-reader"].clone(),
            project(&alt),
        ),
        (
            "sys-reader",
            "sys-reader",
            extra["sys-reader"].clone(),
            json!({"system": {"all": true}}),
        ),
    ] {
        tokens.insert(persona, password_token(&env, user, &password, scope));
    }
    let tok = |p: &str| tokens[p].clone();

    // A's objects, made by A's member (the public template by A's admin).
    let template_body = |name: &str| {
        json!({"name": name, "coe": "kubernetes", "image_id": "fedora-coreos-40",
               "external_network_id": "public"})
    };
    let am = tok("A-member");
    let t = ok(
        port,
        &am,
        "POST",
        "/v1/clustertemplates",
        template_body("a-private"),
        201,
    );
    let mut pub_body = template_body("a-public");
    pub_body["public"] = json!(true);
    let pt = ok(
        port,
        &tok("A-admin"),
        "POST",
        "/v1/clustertemplates",
        pub_body,
        201,
    );
    let c = ok(
        port,
        &am,
        "POST",
        "/v1/clusters",
        json!({"name": "a-cluster", "cluster_template_id": t["uuid"], "node_count": 1}),
        202,
    );
    let cluster = c["uuid"].as_str().unwrap().to_owned();
    wait_for(port, &am, &format!("/v1/clusters/{cluster}"), |b| {
        b["status"] == "CREATE_COMPLETE"
    });
    let ng = ok(
        port,
        &am,
        "POST",
        &format!("/v1/clusters/{cluster}/nodegroups"),
        json!({"name": "a-ng", "node_count": 1}),
        202,
    );
    let nodegroup = ng["uuid"].as_str().unwrap().to_owned();
    wait_for(
        port,
        &am,
        &format!("/v1/clusters/{cluster}/nodegroups/{nodegroup}"),
        |b| b["status"] == "CREATE_COMPLETE",
    );
    let csr = csr(work.path());
    let signed = ok(
        port,
        &am,
        "POST",
        "/v1/certificates",
        json!({"cluster_uuid": cluster, "csr": csr}),
        201,
    );
    assert!(
        signed["pem"]
            .as_str()
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    ok(
        port,
        &tok("A-admin"),
        "POST",
        "/v1/quotas",
        json!({"project_id": demo, "resource": "Cluster", "hard_limit": 7}),
        201,
    );
    let (fs, fed) = crate::http(
        port,
        Some(&am),
        "POST",
        "/v1/federations",
        Some(&json!({"name": "a-federation", "hostcluster_id": cluster,
                     "properties": {"dns-zone": "example.com."}})),
    );
    let federation = (fs == 202).then(|| fed["uuid"].as_str().unwrap().to_owned());
    if federation.is_none() {
        eprintln!("isolation: federation create answered {fs}; federation rows left out");
    }
    let ids = Ids {
        project: demo.clone(),
        template: t["uuid"].as_str().unwrap().to_owned(),
        public: pt["uuid"].as_str().unwrap().to_owned(),
        cluster: cluster.clone(),
        nodegroup,
        federation,
    };
    let before = snapshot(port, &tok("A-admin"), &ids);
    let cases = cases(&ids, &csr);

    // The matrix: B's and the system reader's attempts first, then A's own.
    let mut got: BTreeMap<(usize, &str), (u16, Got, Want)> = BTreeMap::new();
    let mut changed: Option<Vec<String>> = None;
    for persona in PERSONAS {
        if persona == "A-member" {
            // Everything but A's own writers has had its go: A's objects are as they were.
            let after = snapshot(port, &tok("A-admin"), &ids);
            changed = Some(
                before
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(k, v)| after[k.as_str()] != **v)
                    .map(|(k, v)| format!("{k}: {v} -> {}", after[k.as_str()]))
                    .collect(),
            );
        }
        let token = tok(persona);
        for (i, case) in cases.iter().enumerate() {
            let w = (case.want)(persona);
            if w == Want::Skip {
                got.insert((i, persona), (0, Got::Skip, w));
                continue;
            }
            let body = match case.label {
                "PATCH quotas/{A}/Cluster" => Some(json!({
                    "project_id": demo, "resource": "Cluster",
                    "hard_limit": if is(persona, ADMINS) { 7 } else { 99 }})),
                _ => case.body.clone(),
            };
            let (status, reply) =
                crate::http(port, Some(&token), case.method, &case.path, body.as_ref());
            let mut g = classify(status, &reply, case.probe);
            // A list answered 200 "sees" the object only if it is in it.
            if let (Some(seek), Got::Pass) = (&case.seek, g) {
                let text = reply.to_string();
                if !text.contains(seek.as_str()) {
                    g = Got::Deny;
                }
            }
            got.insert((i, persona), (status, g, w));
        }
    }

    // Print the matrix: status, and `!` where it is not what upstream's policy gives.
    let width = cases.iter().map(|c| c.label.len()).max().unwrap_or(10);
    let mut table = format!("{:width$}", "isolation matrix");
    for p in PERSONAS {
        table.push_str(&format!(" {p:>10}"));
    }
    table.push('\n');
    let mut wrong = Vec::new();
    let (mut tried, mut denied) = (0, 0);
    for (i, case) in cases.iter().enumerate() {
        table.push_str(&format!("{:width$}", case.label));
        for p in PERSONAS {
            let (status, g, w) = got[&(i, p)];
            let cell = match g {
                Got::Skip => "skip".to_owned(),
                _ => {
                    tried += 1;
                    let mark = match g {
                        Got::Pass if case.seek.is_some() => "+",
                        Got::Deny if case.seek.is_some() && status == 200 => "-",
                        Got::Pass if !(200..300).contains(&status) => "*",
                        _ => "",
                    };
                    let bad = (g == Got::Pass) != (w == Want::Pass) || g == Got::Other;
                    if bad {
                        wrong.push(format!(
                            "{p}: {} -> {status} ({g:?}, want {w:?})",
                            case.label
                        ));
                    }
                    if g == Got::Deny {
                        denied += 1;
                    }
                    format!("{status}{mark}{}", if bad { "!" } else { "" })
                }
            };
            table.push_str(&format!(" {cell:>10}"));
        }
        table.push('\n');
    }
    eprintln!("{table}");
    eprintln!(
        "isolation: {} routes x {} personas = {} cells, {tried} tried, {denied} denied, {} wrong \
         (200+: the list holds A's object, 200-: it does not; 4xx*: refused only after the \
         policy check, a probe; skip: allowed but destructive, done at the end; !: against \
         upstream's policy)",
        cases.len(),
        PERSONAS.len(),
        cases.len() * PERSONAS.len(),
        wrong.len()
    );
    let changed = changed.unwrap();
    if changed.is_empty() {
        eprintln!("isolation: A's objects after the other personas' attempts: unchanged");
    } else {
        eprintln!("isolation: A's objects after the other personas' attempts: CHANGED {changed:?}");
    }
    assert!(changed.is_empty(), "A's objects changed: {changed:?}");
    assert!(
        wrong.is_empty(),
        "cells against policy:\n{}",
        wrong.join("\n")
    );

    // B's own stats count none of A's clusters.
    for p in ["B-member", "B-reader"] {
        let (s, stats) = crate::http(port, Some(&tok(p)), "GET", "/v1/stats", None);
        assert_eq!((s, &stats["clusters"]), (200, &json!(0)), "{p}: {stats}");
    }

    // What an admin of another project may do to A's objects, and A's member to its own,
    // done once now that nothing more is read: nodegroup, federation, cluster, templates.
    let ba = tok("B-admin");
    let del = |token: &str, path: &str| crate::http(port, Some(token), "DELETE", path, None).0;
    assert_eq!(
        del(
            &am,
            &format!("/v1/clusters/{cluster}/nodegroups/{}", ids.nodegroup)
        ),
        204
    );
    if let Some(f) = &ids.federation {
        assert_eq!(del(&am, &format!("/v1/federations/{f}")), 204);
    }
    // The nodegroup's delete settles before the cluster's is asked for.
    wait_for(
        port,
        &am,
        &format!("/v1/clusters/{cluster}/nodegroups"),
        |b| b["nodegroups"].as_array().is_some_and(|n| n.len() == 2),
    );
    wait_for(port, &am, &format!("/v1/clusters/{cluster}"), |b| {
        b["status"]
            .as_str()
            .is_some_and(|s| !s.ends_with("_IN_PROGRESS"))
    });
    assert_eq!(
        del(&ba, &format!("/v1/clusters/{cluster}")),
        204,
        "B-admin deletes A's cluster"
    );
    wait_for(port, &am, "/v1/clusters", |b| {
        b["clusters"].as_array().is_some_and(Vec::is_empty)
    });
    assert_eq!(
        del(&ba, &format!("/v1/clustertemplates/{}", ids.public)),
        204
    );
    assert_eq!(
        del(&am, &format!("/v1/clustertemplates/{}", ids.template)),
        204
    );
    assert_eq!(del(&ba, &format!("/v1/quotas/{demo}/Cluster")), 204);
    // Each of those took effect: A's admin finds none of them any more.
    let aa = tok("A-admin");
    for path in [
        format!("/v1/clusters/{cluster}"),
        format!("/v1/clustertemplates/{}", ids.public),
        format!("/v1/clustertemplates/{}", ids.template),
    ] {
        assert_eq!(
            crate::http(port, Some(&aa), "GET", &path, None).0,
            404,
            "{path}"
        );
    }
    let (s, q) = crate::http(
        port,
        Some(&aa),
        "GET",
        &format!("/v1/quotas/{demo}/Cluster"),
        None,
    );
    assert_eq!(
        (s, &q["hard_limit"]),
        (200, &json!(20)),
        "back to the default: {q}"
    );
    eprintln!(
        "isolation: B-admin deleted A's cluster, public template and quota, as upstream's \
         policy lets an admin; A's member deleted its nodegroup, federation and template"
    );
    let log = std::fs::read_to_string(work.path().join("api.log")).unwrap();
    for t in tokens.values() {
        assert!(!log.contains(t.as_str()), "a token is in magnumd's log");
    }
    drop(running);
}
