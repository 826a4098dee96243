//! Clusters and their actions through the API: what is stored, what the conductor is sent,
//! microversion gates, policy per persona, and refusals in upstream's words.

use magnum_core::{Error, ErrorKind, RequestContext};
use serde_json::{Value, json};

use crate::common::{ADMIN, MEMBER, OTHER, Persona, READER, Reply, Server, start};

pub fn template_body(name: &str) -> Value {
    json!({
        "name": name, "image_id": "fedora-coreos-40", "keypair_id": "default-key",
        "external_network_id": "public", "coe": "kubernetes", "dns_nameserver": "8.8.8.8",
        "flavor_id": "m1.small", "master_flavor_id": "m1.medium", "docker_volume_size": 10,
        "docker_storage_driver": "overlay2", "labels": {"kube_tag": "v1.30.4", "a": "1"},
        "master_lb_enabled": true, "server_type": "vm"
    })
}

pub async fn template(s: &Server, who: Persona, body: &Value) -> String {
    let r = s.send(who, "POST", "/v1/clustertemplates", body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["uuid"].as_str().unwrap().to_owned()
}

pub async fn create(s: &Server, who: Persona, body: &Value) -> String {
    let r = s.send(who, "POST", "/v1/clusters", body).await;
    assert_eq!(r.status, 202, "{}", r.body);
    r.body["uuid"].as_str().unwrap().to_owned()
}

pub fn assert_error(r: &Reply, status: u16, detail: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    let e = &r.body["errors"][0];
    assert_eq!(e["detail"], json!(detail), "{}", r.body);
    assert_eq!(e["code"], json!("client"));
}

/// Call with an explicit microversion.
pub async fn at(
    s: &Server,
    who: Persona,
    version: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Reply {
    let header = format!("container-infra {version}");
    let text = body.map(Value::to_string);
    s.call(
        who,
        method,
        path,
        &[("OpenStack-API-Version", header.as_str())],
        text.as_deref(),
    )
    .await
}

/// Put a cluster (and its nodegroups) where the driver would have it after a create.
pub async fn mark_complete(s: &Server, uuid: &str) {
    let ctx = RequestContext::admin_all_tenants();
    let c = s.db.clusters().get_by_uuid(&ctx, uuid).await.unwrap();
    let mut done = c.clone();
    done.status = "CREATE_COMPLETE".parse().ok();
    done.api_address = Some("https://10.0.0.5:6443".into());
    done.stack_id = Some("stack-1".into());
    s.db.clusters().save(&c, &done).await.unwrap();
    for ng in
        s.db.nodegroups()
            .for_clusters(&[uuid.into()])
            .await
            .unwrap()
    {
        let mut ok = ng.clone();
        ok.status = "CREATE_COMPLETE".parse().ok();
        s.db.nodegroups().save(&ng, &ok).await.unwrap();
    }
}

#[tokio::test]
async fn create_stores_the_cluster_and_its_default_nodegroups_then_casts() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let uuid = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": "k8s", "master_count": 3, "node_count": 2,
                "labels": {"min_node_count": 1, "extra": "x"}, "merge_labels": true,
                "keypair": null, "discovery_url": null, "create_timeout": 30}),
    )
    .await;
    assert_eq!(
        s.conductor.only("cluster_create"),
        json!({"cluster_uuid": uuid, "master_count": 3, "node_count": 2, "create_timeout": 30})
    );
    assert_eq!(
        s.conductor.calls()[0].ctx.project_id.as_deref(),
        Some("demo")
    );

    // Right away: the cluster, with counts from its nodegroups and defaults from the template.
    let r = s.get(MEMBER, &format!("/v1/clusters/{uuid}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let c = &r.body;
    assert_eq!(c["status"], json!("CREATE_IN_PROGRESS"));
    assert_eq!(c["status_reason"], Value::Null);
    assert_eq!(c["master_count"], json!(3));
    assert_eq!(c["node_count"], json!(2));
    assert_eq!(c["cluster_template_id"], json!(t));
    assert_eq!(c["keypair"], json!("default-key"));
    assert_eq!(c["flavor_id"], json!("m1.small"));
    assert_eq!(c["master_flavor_id"], json!("m1.medium"));
    assert_eq!(c["docker_volume_size"], json!(10));
    assert_eq!(c["master_lb_enabled"], json!(true));
    assert_eq!(c["floating_ip_enabled"], json!(true));
    assert_eq!(c["create_timeout"], json!(30));
    assert_eq!(c["project_id"], json!("demo"));
    assert_eq!(c["user_id"], json!("demo-member"));
    assert_eq!(
        c["labels"],
        json!({"kube_tag": "v1.30.4", "a": "1", "min_node_count": "1", "extra": "x"})
    );
    assert_eq!(
        c["labels_added"],
        json!({"min_node_count": "1", "extra": "x"})
    );
    assert_eq!(c["labels_overridden"], json!({}));
    assert!(c.get("faults").is_none());
    assert!(
        c.get("stack_id").is_none(),
        "cluster_id replaces it at 1.13+"
    );
    assert_eq!(c["cluster_id"], Value::Null);
    let name = c["name"].as_str().unwrap();
    assert!(name.ends_with("-cluster"), "{name}");

    let r = s
        .get(MEMBER, &format!("/v1/clusters/{uuid}/nodegroups"))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let ngs = r.body["nodegroups"].as_array().unwrap();
    assert_eq!(ngs.len(), 2);
    assert_eq!(ngs[0]["name"], json!("default-master"));
    assert_eq!(ngs[0]["role"], json!("master"));
    assert_eq!(ngs[0]["node_count"], json!(3));
    assert_eq!(ngs[0]["flavor_id"], json!("m1.medium"));
    assert_eq!(ngs[1]["name"], json!("default-worker"));
    assert_eq!(ngs[1]["node_count"], json!(2));
    assert_eq!(ngs[1]["flavor_id"], json!("m1.small"));
    for ng in ngs {
        assert_eq!(ng["is_default"], json!(true));
        assert_eq!(ng["status"], json!("CREATE_IN_PROGRESS"));
        assert_eq!(ng["image_id"], json!("fedora-coreos-40"));
    }
    let r = s
        .get(
            MEMBER,
            &format!("/v1/clusters/{uuid}/nodegroups/default-worker"),
        )
        .await;
    assert_eq!(r.body["min_node_count"], json!(1), "from the label");
    assert_eq!(r.body["docker_volume_size"], json!(10));
    assert_eq!(r.body["labels"], c["labels"]);
    assert_eq!(r.body["cluster_id"], json!(uuid));
    assert_eq!(r.body["project_id"], json!("demo"));

    // Lists: brief items carry counts; detail items the label diff.
    let r = s.get(MEMBER, "/v1/clusters").await;
    let item = &r.body["clusters"][0];
    assert_eq!(item["master_count"], json!(3));
    assert_eq!(item["node_count"], json!(2));
    assert_eq!(item["merge_labels"], json!(false));
    assert!(item.get("project_id").is_none(), "brief items only");
    let r = s.get(MEMBER, "/v1/clusters/detail").await;
    assert_eq!(r.body["clusters"][0]["labels_added"], c["labels_added"]);
    assert!(r.body["clusters"][0].get("faults").is_none());
    // Below 1.13 the same value is called stack_id.
    let r = at(&s, MEMBER, "1.12", "GET", "/v1/clusters", None).await;
    assert_eq!(r.body["clusters"][0]["stack_id"], Value::Null);
    assert!(r.body["clusters"][0].get("cluster_id").is_none());
}

/// A worker nodegroup whose `node_count` is NULL (a row another writer left) counts 1 in the
/// cluster's `node_count`, as upstream's views sum NodeGroup objects (whose field defaults to
/// 1); the stats API sums in SQL and skips it (`magnum_core::model::object_node_count`).
#[tokio::test]
async fn a_null_nodegroup_count_counts_one_in_views_and_none_in_stats() {
    let s = start().await;
    template(&s, MEMBER, &template_body("k8s")).await;
    let uuid = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": "k8s", "master_count": 1, "node_count": 2}),
    )
    .await;
    s.db.execute_text(&format!(
        "UPDATE nodegroup SET node_count = NULL WHERE cluster_id = '{uuid}' AND role = 'worker'"
    ))
    .await
    .unwrap();
    let shown = s.get(MEMBER, &format!("/v1/clusters/{uuid}")).await;
    assert_eq!(shown.body["node_count"], json!(1), "{}", shown.body);
    assert_eq!(shown.body["master_count"], json!(1));
    let listed = s.get(MEMBER, "/v1/clusters").await;
    assert_eq!(listed.body["clusters"][0]["node_count"], json!(1));
    let stats = s.get(ADMIN, "/v1/stats").await;
    assert_eq!(stats.body["nodes"], json!(1), "{}", stats.body);
}

#[tokio::test]
async fn create_defaults_labels_and_names() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    // No labels: the template's. Given labels without merge: exactly those.
    let a = create(&s, MEMBER, &json!({"cluster_template_id": t, "name": "a"})).await;
    let b = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "b", "labels": {"x": true}, "flavor_id": "m1.large",
                "master_lb_enabled": false, "floating_ip_enabled": false}),
    )
    .await;
    let r = s.get(MEMBER, &format!("/v1/clusters/{a}")).await;
    assert_eq!(r.body["labels"], json!({"kube_tag": "v1.30.4", "a": "1"}));
    assert_eq!(r.body["create_timeout"], json!(60));
    assert_eq!(r.body["name"], json!("a"));
    let r = s.get(MEMBER, "/v1/clusters/b").await;
    assert_eq!(r.body["uuid"], json!(b));
    assert_eq!(r.body["labels"], json!({"x": "True"}));
    assert_eq!(
        r.body["labels_skipped"],
        json!({"kube_tag": "v1.30.4", "a": "1"})
    );
    assert_eq!(r.body["flavor_id"], json!("m1.large"));
    assert_eq!(r.body["master_lb_enabled"], json!(false));
    assert_eq!(r.body["floating_ip_enabled"], json!(false));
    // An explicit null timeout stays null.
    let c = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "c", "create_timeout": null}),
    )
    .await;
    assert_eq!(
        s.conductor.args_of("cluster_create")[2],
        json!({"cluster_uuid": c, "master_count": 1, "node_count": 1, "create_timeout": null})
    );
}

#[tokio::test]
async fn create_refusals_in_upstreams_order_and_words() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let post = |v: &'static str, body: Value| {
        let s = &s;
        async move { at(s, MEMBER, v, "POST", "/v1/clusters", Some(&body)).await }
    };
    // Template lookup: 400 up to 1.9, 404 from 1.10.
    let missing = json!({"cluster_template_id": "nope"});
    assert_error(
        &post("1.9", missing.clone()).await,
        400,
        "ClusterTemplate nope could not be found.",
    );
    assert_error(
        &post("1.10", missing).await,
        404,
        "ClusterTemplate nope could not be found.",
    );
    assert_error(
        &post("latest", json!({"name": "x"})).await,
        400,
        "Invalid input for field/attribute cluster_template_id. Value: 'None'. Mandatory field missing.",
    );
    assert_error(
        &post(
            "latest",
            json!({"cluster_template_id": t, "name": "9lives"}),
        )
        .await,
        400,
        "Invalid input for field/attribute name. Value: '9lives'. Value should match the pattern ^[a-zA-Z][a-zA-Z0-9_.-]*$",
    );
    assert_error(
        &post("latest", json!({"cluster_template_id": t, "bogus": 1})).await,
        400,
        "Unknown attribute for argument cluster: bogus",
    );
    assert_error(
        &post(
            "latest",
            json!({"cluster_template_id": t, "master_count": 2}),
        )
        .await,
        400,
        "master nodegroup size of 2 is invalid, size cannot be an even number.",
    );
    assert_error(
        &post("1.9", json!({"cluster_template_id": t, "node_count": 0})).await,
        400,
        "Resizing a nodegroup to zero is not supported in the provided microversion.",
    );
    let r = post("1.10", json!({"cluster_template_id": t, "node_count": 0})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let mut no_lb = template_body("no-lb");
    no_lb["master_lb_enabled"] = json!(false);
    let no_lb = template(&s, MEMBER, &no_lb).await;
    assert_error(
        &post(
            "latest",
            json!({"cluster_template_id": no_lb, "master_count": 3}),
        )
        .await,
        400,
        "master_count must be 1 when master_lb_enabled is False",
    );
    let mut dm = template_body("dm");
    dm["docker_storage_driver"] = json!("devicemapper");
    dm["docker_volume_size"] = json!(3);
    let dm = template(&s, MEMBER, &dm).await;
    assert_error(
        &post(
            "latest",
            json!({"cluster_template_id": dm, "docker_volume_size": 2}),
        )
        .await,
        400,
        "docker volume size 2 GB is not valid, expecting minimum value 3GB for devicemapper storage driver.",
    );
    // A template naming a driver this deployment lacks.
    let ctx = RequestContext::admin_all_tenants();
    let row =
        s.db.cluster_templates()
            .get_by_uuid(&ctx, &t)
            .await
            .unwrap();
    let mut other = row.clone();
    other.uuid = None;
    other.name = Some("elsewhere".into());
    other.driver = Some("k8s_capi_helm_v1".into());
    s.db.cluster_templates().create(other).await.unwrap();
    assert_error(
        &post("latest", json!({"cluster_template_id": "elsewhere"})).await,
        400,
        "Cluster driver (k8s_capi_helm_v1) not supported.",
    );
    // Policy, then the hidden-template rule (owners included), then image validation.
    let r = s
        .send(
            READER,
            "POST",
            "/v1/clusters",
            &json!({"cluster_template_id": t}),
        )
        .await;
    assert_error(
        &r,
        403,
        "Policy doesn't allow cluster:create to be performed.",
    );
    let mut hidden = template_body("hidden");
    hidden["hidden"] = json!(true);
    let hidden = template(&s, ADMIN, &hidden).await;
    assert_error(
        &post("latest", json!({"cluster_template_id": hidden})).await,
        403,
        "Not authorized.",
    );
    let r = s
        .send(
            ADMIN,
            "POST",
            "/v1/clusters",
            &json!({"cluster_template_id": hidden}),
        )
        .await;
    assert_eq!(r.status, 202, "admins may use hidden templates: {}", r.body);
    let mut bad = row;
    bad.uuid = None;
    bad.name = Some("bad-image".into());
    bad.image_id = Some("no-such-image".into());
    s.db.cluster_templates().create(bad).await.unwrap();
    assert_error(
        &post("latest", json!({"cluster_template_id": "bad-image"})).await,
        400,
        "Image no-such-image could not be found.",
    );
    // Only the two accepted creates reached storage and the conductor.
    assert_eq!(s.conductor.args_of("cluster_create").len(), 2);
    let r = s.get(ADMIN, "/v1/clusters").await;
    assert_eq!(r.body["clusters"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn an_undelivered_create_still_answers_202_with_the_rows_stored() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    s.conductor.fail("cluster_create", || Error::Remote {
        kind: ErrorKind::Unavailable,
        message: "Conductor unreachable: no consumer".into(),
    });
    let uuid = create(&s, MEMBER, &json!({"cluster_template_id": t})).await;
    let r = s.get(MEMBER, &format!("/v1/clusters/{uuid}")).await;
    assert_eq!(r.body["status"], json!("CREATE_IN_PROGRESS"));
    assert_eq!(r.body["master_count"], json!(1));
}

#[tokio::test]
async fn quota_is_counted_per_project_and_reported_in_upstreams_words() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    s.db.quotas().create("demo", "Cluster", 1).await.unwrap();
    create(&s, MEMBER, &json!({"cluster_template_id": t})).await;
    let r = s
        .send(
            MEMBER,
            "POST",
            "/v1/clusters",
            &json!({"cluster_template_id": t}),
        )
        .await;
    assert_error(
        &r,
        403,
        "Resource limit exceeded: You have reached the maximum clusters per project, 1. You may delete a cluster to make room for a new one.",
    );
    // Another project has the default limit (20).
    let t2 = template(&s, OTHER, &template_body("k8s")).await;
    create(&s, OTHER, &json!({"cluster_template_id": t2})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_never_overshoot_the_quota() {
    let s = std::sync::Arc::new(start().await);
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    s.db.quotas().create("demo", "Cluster", 10).await.unwrap();
    let mut tasks = Vec::new();
    for n in 0..20 {
        let (s, t) = (s.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            s.send(
                MEMBER,
                "POST",
                "/v1/clusters",
                &json!({"cluster_template_id": t, "name": format!("c{n}")}),
            )
            .await
        }));
    }
    let mut accepted = 0;
    let mut refused = 0;
    for task in tasks {
        let r = task.await.unwrap();
        match r.status {
            202 => accepted += 1,
            403 => {
                assert_eq!(
                    r.body["errors"][0]["detail"],
                    json!(
                        "Resource limit exceeded: You have reached the maximum clusters per project, 10. You may delete a cluster to make room for a new one."
                    )
                );
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", r.body),
        }
    }
    assert_eq!((accepted, refused), (10, 10));
    let r = s.get(MEMBER, "/v1/clusters").await;
    assert_eq!(r.body["clusters"].as_array().unwrap().len(), 10);
    assert_eq!(s.conductor.args_of("cluster_create").len(), 10);
    let r = s.get(MEMBER, "/v1/stats").await;
    assert_eq!(r.body, json!({"clusters": 10, "nodes": 20}));
}

#[tokio::test]
async fn show_scopes_policy_and_faults() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let uuid = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "k8s"}),
    )
    .await;
    let path = format!("/v1/clusters/{uuid}");
    assert_eq!(s.get(READER, &path).await.status, 200);
    assert_eq!(s.get(READER, "/clusters/k8s/").await.status, 200);
    assert_error(
        &s.get(OTHER, &path).await,
        404,
        &format!("Cluster {uuid} could not be found."),
    );
    let r = s
        .call(
            Persona {
                project: "alt",
                user: "alt-admin",
                roles: "admin,member,reader",
            },
            "GET",
            &path,
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, 200, "admins see every project's clusters");
    // Two clusters named alike: 409.
    create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "k8s"}),
    )
    .await;
    assert_error(
        &s.get(MEMBER, "/v1/clusters/k8s").await,
        409,
        "Multiple clusters exist with same name. Please use the cluster uuid instead.",
    );
    // A failed cluster shows its failed nodegroups' reasons.
    let ctx = RequestContext::admin_all_tenants();
    let c = s.db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
    let mut failed = c.clone();
    failed.status = "CREATE_FAILED".parse().ok();
    s.db.clusters().save(&c, &failed).await.unwrap();
    let ngs =
        s.db.nodegroups()
            .for_clusters(std::slice::from_ref(&uuid))
            .await
            .unwrap();
    let mut broken = ngs[1].clone();
    broken.status = "CREATE_FAILED".parse().ok();
    broken.status_reason = Some("no capacity".into());
    s.db.nodegroups().save(&ngs[1], &broken).await.unwrap();
    let r = s.get(MEMBER, &path).await;
    assert_eq!(r.body["faults"], json!({"default-worker": "no capacity"}));
    let r = s.get(MEMBER, "/v1/clusters/detail").await;
    assert!(r.body["clusters"][0].get("faults").is_none());
    // Quirks of the routes.
    assert_eq!(s.get(MEMBER, &format!("{path}/detail")).await.status, 404);
    assert_eq!(s.get(MEMBER, "/v1/clusters/k8s/detail").await.status, 400);
    assert_error(
        &s.get(MEMBER, "/v1/clusters?all_tenants=1").await,
        400,
        "Unknown argument: \"all_tenants\"",
    );
    assert_error(
        &s.call(MEMBER, "DELETE", "/v1/clusters", &[], None).await,
        400,
        "Missing argument: \"cluster_ident\"",
    );
}

#[tokio::test]
async fn list_pages_and_policies() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    for name in ["a", "b", "c"] {
        create(&s, MEMBER, &json!({"cluster_template_id": t, "name": name})).await;
    }
    create(&s, OTHER, &json!({"cluster_template_id": template(&s, OTHER, &template_body("o")).await, "name": "o"})).await;
    let r = s
        .get(MEMBER, "/v1/clusters/?limit=2&sort_key=name&sort_dir=desc")
        .await;
    let names: Vec<&str> = r.body["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "b"]);
    let next = r.body["next"].as_str().unwrap();
    assert!(
        next.contains("/v1/clusters?sort_key=name&sort_dir=desc&limit=2&marker="),
        "{next}"
    );
    let rest = next.split_once("/v1").unwrap().1;
    let r = s.get(MEMBER, &format!("/v1{rest}")).await;
    assert_eq!(r.body["clusters"][0]["name"], json!("a"));
    assert!(r.body.get("next").is_none());
    assert_eq!(
        s.get(ADMIN, "/v1/clusters").await.body["clusters"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    assert_eq!(
        s.get(OTHER, "/v1/clusters/detail").await.body["clusters"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let nobody = Persona {
        project: "demo",
        user: "u",
        roles: "viewer",
    };
    assert_error(
        &s.get(nobody, "/v1/clusters").await,
        403,
        "Policy doesn't allow cluster:get_all to be performed.",
    );
    assert_error(
        &s.get(MEMBER, "/v1/clusters?marker=nope").await,
        400,
        "Invalid input for field/attribute marker. Value: 'nope'. unable to convert to uuid. Error: Expected a uuid but received nope.",
    );
}

/// Upstream's WSME converts a list's arguments in their order before the controller runs, so a
/// bad marker is refused ahead of a bad limit, the policy and the parent cluster's lookup
/// (texts read off upstream Magnum 23.0.0's API).
#[tokio::test]
async fn list_arguments_are_refused_in_upstreams_order_and_words() {
    let s = start().await;
    let uuid_err = |v: &str| {
        format!(
            "Invalid input for field/attribute marker. Value: '{v}'. unable to convert to uuid. Error: Expected a uuid but received {v}."
        )
    };
    for path in [
        "/v1/clusters?marker=abc&limit=x",
        "/v1/clusters/detail?marker=abc",
        "/v1/clustertemplates?marker=abc",
        "/v1/clustertemplates/detail?marker=abc",
        "/v1/clusters/no-such-cluster/nodegroups?marker=abc",
        "/v1/clusters/abc/detail",
    ] {
        assert_error(&s.get(MEMBER, path).await, 400, &uuid_err("abc"));
    }
    let nobody = Persona {
        project: "demo",
        user: "u",
        roles: "viewer",
    };
    assert_error(
        &s.get(nobody, "/v1/clusters?marker=abc").await,
        400,
        &uuid_err("abc"),
    );
    assert_error(
        &s.get(MEMBER, "/v1/clusters?limit=x").await,
        400,
        "Invalid input for field/attribute limit. Value: 'x'. unable to convert to int. Error: invalid literal for int() with base 10: 'x'",
    );
    assert_error(
        &s.get(ADMIN, "/v1/quotas?marker=abc").await,
        400,
        "Invalid input for field/attribute marker. Value: 'abc'. unable to convert to int. Error: invalid literal for int() with base 10: 'abc'",
    );
}

#[tokio::test]
async fn patch_sends_the_worker_count_and_refuses_other_changes() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let uuid = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "node_count": 2}),
    )
    .await;
    let path = format!("/v1/clusters/{uuid}");
    let patch = json!([{"op": "replace", "path": "/node_count", "value": 5}]);
    // Still being created: the conductor's own refusal, before anything is sent.
    assert_error(
        &s.send(MEMBER, "PATCH", &path, &patch).await,
        400,
        "Updating a cluster when status is \"CREATE_IN_PROGRESS\" is not supported.",
    );
    mark_complete(&s, &uuid).await;
    let r = s.send(MEMBER, "PATCH", &path, &patch).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body, json!({"uuid": uuid}));
    assert_eq!(
        s.conductor.only("cluster_update"),
        json!({"cluster_uuid": uuid, "node_count": 5, "health_status": null,
               "health_status_reason": {}, "rollback": false})
    );
    s.conductor.clear();
    // Health only: the default worker's count is sent; rollback from 1.3 on.
    let health = json!([
        {"op": "replace", "path": "/health_status", "value": "UNHEALTHY"},
        {"op": "replace", "path": "/health_status_reason", "value": "{'api': 'ok', 'node-0.Ready': False}"}
    ]);
    let r = at(
        &s,
        MEMBER,
        "latest",
        "PATCH",
        &format!("{path}/?rollback=True"),
        Some(&health),
    )
    .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        s.conductor.only("cluster_update"),
        json!({"cluster_uuid": uuid, "node_count": 2, "health_status": "UNHEALTHY",
               "health_status_reason": {"api": "ok", "node-0.Ready": "False"}, "rollback": true})
    );
    assert_error(
        &at(
            &s,
            MEMBER,
            "1.2",
            "PATCH",
            &format!("{path}?rollback=True"),
            Some(&health),
        )
        .await,
        400,
        "Unknown argument: \"rollback\"",
    );
    // What the client sends for --name / --label / --master-count.
    assert_error(
        &s.send(
            MEMBER,
            "PATCH",
            &path,
            &json!([{"op": "replace", "path": "/name", "value": "x"},
                    {"op": "add", "path": "/labels/k", "value": "v"},
                    {"op": "replace", "path": "/master_count", "value": 3}]),
        )
        .await,
        400,
        "cannot change cluster property(ies) labels, master_count, name.",
    );
    assert_error(
        &s.send(
            MEMBER,
            "PATCH",
            &path,
            &json!([{"op": "replace", "path": "/api_address", "value": "x"}]),
        )
        .await,
        400,
        "'/api_address' is an internal attribute and can not be updated",
    );
    // Same value: no change. Zero workers only from 1.10.
    let same = json!([{"op": "replace", "path": "/name", "value": s.get(MEMBER, &path).await.body["name"]}]);
    assert_eq!(s.send(MEMBER, "PATCH", &path, &same).await.status, 202);
    let zero = json!([{"op": "replace", "path": "/node_count", "value": 0}]);
    assert_error(
        &at(&s, MEMBER, "1.9", "PATCH", &path, Some(&zero)).await,
        400,
        "Resizing a nodegroup to zero is not supported in the provided microversion.",
    );
    assert_eq!(s.send(MEMBER, "PATCH", &path, &zero).await.status, 202);
    assert_eq!(
        s.conductor.args_of("cluster_update").last().unwrap()["node_count"],
        json!(0)
    );
    // Policy and scope; nothing stored changed.
    assert_error(
        &s.send(READER, "PATCH", &path, &patch).await,
        403,
        "Policy doesn't allow cluster:update to be performed.",
    );
    assert_eq!(s.send(OTHER, "PATCH", &path, &patch).await.status, 404);
    let r = s.get(MEMBER, &path).await;
    assert_eq!(r.body["node_count"], json!(2));
    // A cast the conductor does not take is the caller's error.
    s.conductor.fail("cluster_update", || Error::Remote {
        kind: ErrorKind::Unavailable,
        message: "Conductor unreachable: queue full".into(),
    });
    let r = s.send(MEMBER, "PATCH", &path, &patch).await;
    assert_eq!(r.status, 503, "{}", r.body);
}

#[tokio::test]
async fn delete_casts_and_answers_204() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let uuid = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "gone"}),
    )
    .await;
    assert_error(
        &s.call(READER, "DELETE", "/v1/clusters/gone", &[], None)
            .await,
        403,
        "Policy doesn't allow cluster:delete to be performed.",
    );
    assert_eq!(
        s.call(OTHER, "DELETE", "/v1/clusters/gone", &[], None)
            .await
            .status,
        404
    );
    let r = s
        .call(
            MEMBER,
            "DELETE",
            "/v1/clusters/gone",
            &[("Content-Type", "application/octet-stream")],
            None,
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(r.body, Value::Null);
    assert_eq!(
        s.conductor.only("cluster_delete"),
        json!({"cluster_uuid": uuid})
    );
}

#[tokio::test]
async fn resize_checks_the_nodegroup_bounds_and_casts() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let uuid = create(&s, MEMBER, &json!({"cluster_template_id": t})).await;
    let path = format!("/v1/clusters/{uuid}/actions/resize");
    let body = json!({"node_count": 4, "nodes_to_remove": ["srv-1"]});
    let r = at(&s, MEMBER, "1.6", "POST", &path, Some(&body)).await;
    assert_eq!(r.status, 406);
    assert!(!r.headers.contains_key("openstack-api-version"));
    assert_error(
        &s.send(MEMBER, "POST", &path, &body).await,
        400,
        "Resizing a cluster when status is \"CREATE_IN_PROGRESS\" is not supported.",
    );
    mark_complete(&s, &uuid).await;
    let r = s.send(MEMBER, "POST", &path, &body).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body, json!({"uuid": uuid}));
    let ctx = RequestContext::admin_all_tenants();
    let worker =
        s.db.nodegroups()
            .get_by_name(&ctx, &uuid, "default-worker")
            .await
            .unwrap();
    assert_eq!(
        s.conductor.only("cluster_resize"),
        json!({"cluster_uuid": uuid, "nodegroup_uuid": worker.uuid, "node_count": 4,
               "nodes_to_remove": ["srv-1"]})
    );
    assert_error(
        &at(
            &s,
            MEMBER,
            "1.9",
            "POST",
            &path,
            Some(&json!({"node_count": 0})),
        )
        .await,
        400,
        "Resizing a nodegroup to zero is not supported in the provided microversion.",
    );
    assert_error(
        &s.send(
            MEMBER,
            "POST",
            &path,
            &json!({"nodegroup": "default-master", "node_count": 3}),
        )
        .await,
        400,
        "Resizing the master nodegroup is not supported by this driver.",
    );
    let mut bounded = worker.clone();
    bounded.min_node_count = Some(2);
    bounded.max_node_count = Some(5);
    s.db.nodegroups().save(&worker, &bounded).await.unwrap();
    assert_error(
        &s.send(MEMBER, "POST", &path, &json!({"node_count": 6}))
            .await,
        400,
        "Resizing default-worker outside the allowed range: min_node_count = 2, max_node_count = 5",
    );
    assert_error(
        &s.send(
            MEMBER,
            "POST",
            &path,
            &json!({"node_count": 1, "nodegroup": worker.uuid}),
        )
        .await,
        400,
        "Resizing default-worker outside the allowed range: min_node_count = 2, max_node_count = 5",
    );
    assert_error(
        &s.send(
            MEMBER,
            "POST",
            &path,
            &json!({"node_count": 1, "nodegroup": "nope"}),
        )
        .await,
        404,
        "Nodegroup nope could not be found.",
    );
    assert_error(
        &s.send(MEMBER, "POST", &path, &json!({})).await,
        400,
        "Invalid input for field/attribute node_count. Value: 'None'. Mandatory field missing.",
    );
    assert_error(
        &s.send(READER, "POST", &path, &body).await,
        403,
        "Policy doesn't allow cluster:resize to be performed.",
    );
    assert_eq!(s.conductor.args_of("cluster_resize").len(), 1);
}

#[tokio::test]
async fn upgrade_calls_the_conductor_and_reports_its_refusal() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let newer = template(&s, MEMBER, &template_body("k8s-newer")).await;
    let uuid = create(&s, MEMBER, &json!({"cluster_template_id": t, "name": "up"})).await;
    let path = "/v1/clusters/up/actions/upgrade";
    let body = json!({"cluster_template": "k8s-newer", "max_batch_size": 1});
    assert_eq!(
        at(&s, MEMBER, "1.6", "POST", path, Some(&body))
            .await
            .status,
        406
    );
    assert_error(
        &at(&s, MEMBER, "1.7", "POST", path, Some(&body)).await,
        400,
        "Cluster upgrade is not supported in the provided microversion.",
    );
    let r = s.send(MEMBER, "POST", path, &body).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body, json!({"uuid": uuid}));
    let ctx = RequestContext::admin_all_tenants();
    let worker =
        s.db.nodegroups()
            .get_by_name(&ctx, &uuid, "default-worker")
            .await
            .unwrap();
    assert_eq!(
        s.conductor.only("cluster_upgrade"),
        json!({"cluster_uuid": uuid, "nodegroup_uuid": worker.uuid,
               "cluster_template_uuid": newer, "max_batch_size": 1})
    );
    // The conductor's refusal comes back as the answer.
    s.conductor.fail("cluster_upgrade", || Error::NotSupported {
        operation: "Upgrading a cluster when status is \"CREATE_IN_PROGRESS\"".into(),
    });
    assert_error(
        &s.send(MEMBER, "POST", path, &body).await,
        400,
        "Upgrading a cluster when status is \"CREATE_IN_PROGRESS\" is not supported.",
    );
    s.conductor.heal("cluster_upgrade");
    assert_error(
        &s.send(MEMBER, "POST", path, &json!({"cluster_template": "nope"}))
            .await,
        404,
        "ClusterTemplate nope could not be found.",
    );
    // A non-default nodegroup may only follow the cluster's own template.
    mark_complete(&s, &uuid).await;
    let r = s
        .send(
            MEMBER,
            "POST",
            "/v1/clusters/up/nodegroups",
            &json!({"name": "extra"}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_error(
        &s.send(
            MEMBER,
            "POST",
            path,
            &json!({"cluster_template": newer, "nodegroup": "extra"}),
        )
        .await,
        409,
        "Cluster Template is not valid for upgrade: Nodegroup extra can be upgraded only to match cluster's template (k8s).",
    );
    assert_error(
        &s.send(READER, "POST", path, &body).await,
        403,
        "Policy doesn't allow cluster:upgrade to be performed.",
    );
}
