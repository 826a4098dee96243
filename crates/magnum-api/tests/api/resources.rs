//! Templates, quotas, stats, services and federations through the API: behaviour, policy per
//! persona, and bad input that must be a 4xx in the `errors` shape with nothing written.

use serde_json::{Value, json};

use crate::common::{ADMIN, MEMBER, OTHER, Persona, READER, Reply, Server, start};

fn template_body(name: &str) -> Value {
    json!({
        "name": name, "image_id": "fedora-coreos-40", "keypair_id": null, "external_network_id": "public",
        "coe": "kubernetes", "fixed_network": null, "fixed_subnet": null, "network_driver": null,
        "volume_driver": null, "driver": null, "dns_nameserver": "8.8.8.8", "flavor_id": "m1.medium",
        "master_flavor_id": null, "docker_volume_size": null, "docker_storage_driver": "overlay2",
        "http_proxy": null, "https_proxy": null, "no_proxy": null, "labels": {"kube_tag": "v1.30.4", "n": 3},
        "tls_disabled": false, "public": false, "registry_enabled": false, "insecure_registry": null,
        "server_type": "vm", "master_lb_enabled": false
    })
}

fn assert_error(r: &Reply, status: u16, detail: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    let e = &r.body["errors"][0];
    assert_eq!(e["status"], json!(status), "{}", r.body);
    assert_eq!(
        e["code"],
        json!(if status >= 500 { "server" } else { "client" })
    );
    assert_eq!(e["detail"], json!(detail), "{}", r.body);
    assert_eq!(e["title"], json!(detail.split('.').next().unwrap()));
    assert!(r.headers.contains_key("x-openstack-request-id"));
}

async fn count_templates(s: &Server) -> usize {
    s.get(ADMIN, "/v1/clustertemplates").await.body["clustertemplates"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0)
}

async fn create(s: &Server, who: Persona, name: &str) -> Value {
    let r = s
        .send(who, "POST", "/v1/clustertemplates", &template_body(name))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

#[tokio::test]
async fn template_lifecycle_as_the_client_drives_it() {
    let s = start().await;
    let t = create(&s, MEMBER, "k8s").await;
    let uuid = t["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        t["labels"],
        json!({"kube_tag": "v1.30.4", "n": "3"}),
        "label values are stored as strings"
    );
    assert_eq!(
        t["network_driver"],
        json!("flannel"),
        "the default network driver is persisted"
    );
    assert_eq!(t["cluster_distro"], json!("fedora-coreos"));
    assert_eq!(t["driver"], json!("simulated"));
    assert_eq!(t["project_id"], json!("demo"));
    assert_eq!(t["floating_ip_enabled"], json!(true));
    assert!(
        t["links"][0]["href"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/v1/clustertemplates/{uuid}"))
    );

    // By name and by uuid, with and without /v1 and trailing slashes.
    for path in [
        format!("/v1/clustertemplates/{uuid}"),
        "/clustertemplates/k8s/".to_string(),
        format!("/v1/clustertemplates/{uuid}/"),
    ] {
        let r = s.get(READER, &path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.body["uuid"], json!(uuid));
    }

    // The client's update: replace, add a label, remove a label, booleans.
    let patch = json!([
        {"op": "replace", "path": "/name", "value": "k8s-renamed"},
        {"op": "add", "path": "/labels/new", "value": "v"},
        {"op": "remove", "path": "/labels/n"},
        {"op": "replace", "path": "/docker_volume_size", "value": 20},
        {"op": "replace", "path": "/master_lb_enabled", "value": true}
    ]);
    let r = s
        .send(
            MEMBER,
            "PATCH",
            &format!("/v1/clustertemplates/{uuid}"),
            &patch,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["name"], json!("k8s-renamed"));
    assert_eq!(r.body["labels"], json!({"kube_tag": "v1.30.4", "new": "v"}));
    assert_eq!(r.body["docker_volume_size"], json!(20));
    assert_eq!(r.body["master_lb_enabled"], json!(true));
    assert!(r.body["updated_at"].is_string());

    // Pagination: full pages carry `next`, which the client follows.
    create(&s, MEMBER, "second").await;
    let r = s
        .get(
            MEMBER,
            "/v1/clustertemplates/?limit=1&sort_key=name&sort_dir=desc",
        )
        .await;
    assert_eq!(r.body["clustertemplates"][0]["name"], json!("second"));
    let next = r.body["next"].as_str().unwrap().to_owned();
    assert!(
        next.contains("sort_key=name&sort_dir=desc&limit=1&marker="),
        "{next}"
    );
    let path = next.split_once("://").unwrap().1.split_once('/').unwrap().1;
    let r = s.get(MEMBER, &format!("/{path}")).await;
    assert_eq!(r.body["clustertemplates"][0]["name"], json!("k8s-renamed"));

    assert_eq!(
        s.call(
            MEMBER,
            "DELETE",
            &format!("/v1/clustertemplates/{uuid}"),
            &[],
            None
        )
        .await
        .status,
        204
    );
    let r = s.get(MEMBER, &format!("/v1/clustertemplates/{uuid}")).await;
    assert_error(
        &r,
        404,
        &format!("ClusterTemplate {uuid} could not be found."),
    );
}

#[tokio::test]
async fn template_policy_per_persona() {
    let s = start().await;
    let own = create(&s, MEMBER, "own").await;
    let uuid = own["uuid"].as_str().unwrap();
    let path = format!("/v1/clustertemplates/{uuid}");

    // reader: may read, may not write.
    assert_eq!(s.get(READER, &path).await.status, 200);
    assert_eq!(
        s.get(READER, "/v1/clustertemplates/detail").await.status,
        200
    );
    let r = s
        .send(READER, "POST", "/v1/clustertemplates", &template_body("r"))
        .await;
    assert_error(
        &r,
        403,
        "Policy doesn't allow clustertemplate:create to be performed.",
    );
    let r = s
        .send(
            READER,
            "PATCH",
            &path,
            &json!([{"op": "replace", "path": "/name", "value": "x"}]),
        )
        .await;
    assert_error(
        &r,
        403,
        "Policy doesn't allow clustertemplate:update to be performed.",
    );
    let r = s.call(READER, "DELETE", &path, &[], None).await;
    assert_error(
        &r,
        403,
        "Policy doesn't allow clustertemplate:delete to be performed.",
    );

    // another project: a private template does not exist for it.
    assert_error(
        &s.get(OTHER, &path).await,
        404,
        &format!("ClusterTemplate {uuid} could not be found."),
    );
    assert_eq!(count_templates(&s).await, 1);
    let r = s.get(OTHER, "/v1/clustertemplates").await;
    assert_eq!(r.body["clustertemplates"], json!([]));

    // publishing needs admin.
    let mut public = template_body("pub");
    public["public"] = json!(true);
    let r = s
        .send(MEMBER, "POST", "/v1/clustertemplates", &public)
        .await;
    assert_error(
        &r,
        403,
        "Not authorized to set public or hidden flag for cluster template.",
    );
    let r = s.send(ADMIN, "POST", "/v1/clustertemplates", &public).await;
    assert_eq!(r.status, 201);
    assert_eq!(
        s.get(OTHER, "/v1/clustertemplates").await.body["clustertemplates"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // admins see and manage every project's templates.
    let other = create(&s, OTHER, "alt-private").await;
    let r = s
        .get(
            ADMIN,
            &format!("/v1/clustertemplates/{}", other["uuid"].as_str().unwrap()),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(count_templates(&s).await, 3);

    // A system-scoped token fails project-scoped rules (enforce_scope).
    let r = s
        .call(
            ADMIN,
            "GET",
            "/v1/clustertemplates",
            &[("X-System-Scope", "all")],
            None,
        )
        .await;
    assert_error(
        &r,
        403,
        "Policy doesn't allow clustertemplate:get_all to be performed.",
    );
}

#[tokio::test]
async fn bad_input_is_a_4xx_and_writes_nothing() {
    let s = start().await;
    let t = create(&s, MEMBER, "base").await;
    let path = format!("/v1/clustertemplates/{}", t["uuid"].as_str().unwrap());
    let cases: Vec<(&str, &str, Option<String>, u16, &str)> = vec![
        ("POST", "/v1/clustertemplates", Some("{not json".into()), 400, "Request is not in valid JSON format"),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "i", "coe": "kubernetes", "bogus": 1}"#.into()), 400,
            "Unknown attribute for argument cluster_template: bogus"),
        ("POST", "/v1/clustertemplates", Some(json!({"image_id": "fedora-coreos-40", "coe": "kubernetes", "name": "x".repeat(256)}).to_string()), 400,
            ""),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "fedora-coreos-40", "coe": "kubernetes", "docker_volume_size": "many"}"#.into()), 400, ""),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "fedora-coreos-40", "coe": "swarm"}"#.into()), 400,
            "Invalid input for field/attribute coe. Value: 'swarm'. Value should be one of: kubernetes"),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "fedora-coreos-40"}"#.into()), 400, "Requested COE type Unset is not supported."),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "fedora-coreos-40", "coe": "kubernetes", "network_driver": "cilium"}"#.into()), 400,
            "Network driver type cilium is not allowed, expecting a flannel/calico/unspecified network driver. "),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "fedora-coreos-40", "coe": "kubernetes", "dns_nameserver": "8.8.8"}"#.into()), 400,
            "Expected a single dns address or comma separated dns list, but received 8.8.8."),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "fedora-coreos-40", "coe": "kubernetes", "project_id": "p"}"#.into()), 400,
            "Invalid input for field/attribute project_id. Value: 'p'. Cannot set read only field."),
        ("POST", "/v1/clustertemplates", Some(r#"[1, 2]"#.into()), 400, ""),
        ("POST", "/v1/clustertemplates", Some(r#"{"image_id": "nope", "coe": "kubernetes"}"#.into()), 400, "Image nope could not be found."),
        ("PATCH", path.as_str(), Some(r#"[{"op": "frob", "path": "/name", "value": "y"}]"#.into()), 400,
            "Invalid input for field/attribute op. Value: 'frob'. Value should be one of: remove, add, replace"),
        ("PATCH", path.as_str(), Some(r#"[{"op": "replace", "path": "/uuid", "value": "y"}]"#.into()), 400,
            "'/uuid' is an internal attribute and can not be updated"),
        ("PATCH", path.as_str(), Some(r#"[{"op": "remove", "path": "/image_id"}]"#.into()), 400,
            "'/image_id' is a mandatory attribute and can not be removed"),
        ("PATCH", path.as_str(), Some(r#"[{"op": "replace", "path": "/apiserver_port", "value": 80}]"#.into()), 400,
            "Invalid input for field/attribute apiserver_port. Value: '80'. Value should be greater or equal to 1024"),
        ("PATCH", path.as_str(), Some(r#"{"op": "replace"}"#.into()), 400, ""),
        ("GET", "/v1/clustertemplates?bogus=1", None, 400, "Unknown argument: \"bogus\""),
        ("GET", "/v1/clustertemplates?limit=0", None, 400, "Limit must be positive"),
        ("GET", "/v1/clustertemplates?limit=abc", None, 400, ""),
        ("GET", "/v1/clustertemplates?sort_dir=up", None, 400, "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'"),
        ("GET", "/v1/clustertemplates?sort_key=nope", None, 400, "The sort_key value \"nope\" is an invalid field for sorting"),
    ];
    for (method, p, body, status, detail) in cases {
        let r = s.call(MEMBER, method, p, &[], body.as_deref()).await;
        assert_eq!(r.status, status, "{method} {p} {body:?}: {}", r.body);
        let e = &r.body["errors"][0];
        assert_eq!(
            e["code"],
            json!("client"),
            "{method} {p} {body:?}: {}",
            r.body
        );
        if !detail.is_empty() {
            assert_eq!(e["detail"], json!(detail), "{method} {p} {body:?}");
        }
    }
    // 415 for a foreign body type; a bad microversion is a 406.
    let r = s
        .call(
            MEMBER,
            "POST",
            "/v1/clustertemplates",
            &[("Content-Type", "text/plain")],
            Some("x"),
        )
        .await;
    assert_eq!(r.status, 415);
    let r = s
        .call(
            MEMBER,
            "GET",
            "/v1/clustertemplates",
            &[("OpenStack-API-Version", "container-infra 1.x")],
            None,
        )
        .await;
    assert_error(&r, 406, "Invalid value for OpenStack-API-Version header");
    assert!(!r.headers.contains_key("openstack-api-version"));
    // Nothing was written by any of them.
    let r = s.get(MEMBER, "/v1/clustertemplates/detail").await;
    assert_eq!(r.body["clustertemplates"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["clustertemplates"][0]["name"], json!("base"));
    assert!(r.body["clustertemplates"][0]["updated_at"].is_null());
}

#[tokio::test]
async fn routing_quirks() {
    let s = start().await;
    let r = s.call(MEMBER, "GET", "/", &[], None).await;
    assert_eq!(r.status, 200);
    assert!(!r.headers.contains_key("openstack-api-version"));
    let r = s
        .call(MEMBER, "PUT", "/v1/clustertemplates", &[], None)
        .await;
    assert_eq!(
        (r.status, r.body["errors"][0]["code"].clone()),
        (405, json!(""))
    );
    let r = s.call(MEMBER, "GET", "/v1/nothing-here", &[], None).await;
    assert_eq!(r.status, 404);
    let r = s
        .call(MEMBER, "DELETE", "/v1/clustertemplates", &[], None)
        .await;
    assert_eq!(r.status, 400);
    let r = s.call(MEMBER, "GET", "/healthcheck", &[], None).await;
    assert_eq!((r.status, r.body.clone()), (200, json!("OK")));
}

#[tokio::test]
async fn quotas_stats_services_federations() {
    let s = start().await;
    // quotas: admin CRUD; members read their own project's.
    let r = s
        .send(
            MEMBER,
            "POST",
            "/v1/quotas",
            &json!({"project_id": "demo", "resource": "Cluster", "hard_limit": 5}),
        )
        .await;
    assert_error(
        &r,
        403,
        "Policy doesn't allow quota:create to be performed.",
    );
    let r = s
        .send(
            ADMIN,
            "POST",
            "/v1/quotas",
            &json!({"project_id": "demo", "resource": "Cluster", "hard_limit": 5}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = s
        .send(
            ADMIN,
            "POST",
            "/v1/quotas",
            &json!({"project_id": "demo", "resource": "Cluster", "hard_limit": 5}),
        )
        .await;
    assert_error(
        &r,
        409,
        "Quota for project demo already exists for resource Cluster.",
    );
    let r = s
        .send(
            ADMIN,
            "POST",
            "/v1/quotas",
            &json!({"project_id": "no-such-project", "resource": "Cluster"}),
        )
        .await;
    assert_error(
        &r,
        404,
        "The project_id no-such-project could not be found.",
    );
    let r = s.get(MEMBER, "/v1/quotas/demo/Cluster").await;
    assert_eq!((r.status, r.body["hard_limit"].clone()), (200, json!(5)));
    assert_error(
        &s.get(MEMBER, "/v1/quotas/alt/Cluster").await,
        403,
        "Not authorized.",
    );
    let r = s.get(OTHER, "/v1/quotas/alt/Cluster").await;
    assert_eq!(
        r.body,
        json!({"hard_limit": 20, "project_id": "alt", "resource": "Cluster"})
    );
    let r = s
        .send(
            ADMIN,
            "PATCH",
            "/v1/quotas/demo/Cluster",
            &json!({"hard_limit": 7}),
        )
        .await;
    assert_eq!((r.status, r.body["hard_limit"].clone()), (202, json!(7)));
    assert_error(
        &s.get(MEMBER, "/v1/quotas").await,
        403,
        "Policy doesn't allow quota:get_all to be performed.",
    );
    let r = s.get(ADMIN, "/v1/quotas?all_tenants=True").await;
    assert_eq!(r.body["quotas"].as_array().unwrap().len(), 1);
    let r = s
        .send(
            ADMIN,
            "DELETE",
            "/v1/quotas",
            &json!({"project_id": "demo", "resource": "Cluster"}),
        )
        .await;
    assert_eq!(r.status, 204);
    let r = s
        .call(ADMIN, "DELETE", "/v1/quotas/demo/Cluster", &[], None)
        .await;
    assert_error(
        &r,
        404,
        "Quota could not be found: project_id demo resource Cluster.",
    );

    // stats
    let r = s.get(MEMBER, "/v1/stats").await;
    assert_eq!(r.body, json!({"clusters": 0, "nodes": 0}));
    assert_error(
        &s.get(MEMBER, "/v1/stats?project_id=alt").await,
        403,
        "Not authorized.",
    );
    assert_error(
        &s.get(MEMBER, "/v1/stats?type=pods").await,
        400,
        "Invalid stats type. Allowed values are 'cluster'",
    );

    // services: admin only; up/down from the heartbeat.
    assert_error(
        &s.get(MEMBER, "/v1/mservices").await,
        403,
        "Policy doesn't allow magnum-service:get_all to be performed.",
    );
    s.db.magnum_services()
        .report_state_up(Some("host-1"), "magnum-conductor")
        .await
        .unwrap();
    let r = s.get(ADMIN, "/v1/mservices").await;
    assert_eq!(r.body["mservices"][0]["state"], json!("up"));
    assert_eq!(r.body["mservices"][0]["host"], json!("host-1"));

    // federations: a hostcluster must exist; no driver builds them, and the user is told.
    let r = s.send(MEMBER, "POST", "/v1/federations", &json!({"name": "fed", "hostcluster_id": "nope", "properties": {"dns-zone": "example.com."}})).await;
    assert_error(&r, 404, "Cluster nope could not be found.");
    let host =
        s.db.clusters()
            .create(magnum_db::repo::cluster::Cluster {
                name: Some("host".into()),
                project_id: Some("demo".into()),
                ..Default::default()
            })
            .await
            .unwrap();
    let r = s
        .send(
            MEMBER,
            "POST",
            "/v1/federations",
            &json!({"name": "fed", "hostcluster_id": "host", "properties": {}}),
        )
        .await;
    assert_error(
        &r,
        400,
        "No DNS zone specified. Please specify a `dns-zone`.",
    );
    let r = s.send(MEMBER, "POST", "/v1/federations", &json!({"name": "fed", "hostcluster_id": "host", "properties": {"dns-zone": "example.com."}})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let fed = s.get(MEMBER, "/v1/federations/fed").await;
    assert_eq!(fed.body["status"], json!("CREATE_FAILED"));
    assert_eq!(fed.body["hostcluster_id"], json!(host.uuid));
    assert_eq!(s.get(OTHER, "/v1/federations/fed").await.status, 404);
    assert_eq!(
        s.call(MEMBER, "DELETE", "/v1/federations/fed", &[], None)
            .await
            .status,
        204
    );
}

#[tokio::test]
async fn openapi_document_matches_the_router() {
    let s = start().await;
    let r = s.call(MEMBER, "GET", "/v1/openapi.json", &[], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["openapi"], json!("3.1.0"));
    let paths = r.body["paths"].as_object().unwrap();
    assert!(paths.len() >= 10);
    assert!(
        r.body["components"]["schemas"]["ClusterTemplate"]["properties"]["image_id"].is_object()
    );
    assert_eq!(
        r.body["components"]["schemas"]["ClusterTemplate"]["required"],
        json!(["image_id"])
    );
    // Every documented route is one the router serves: never a routing-level 404 or 405.
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            let concrete = path
                .replace("{ident}", "nope")
                .replace("{cluster_ident}", "nope")
                .replace("{nodegroup_ident}", "nope")
                .replace("{project_id}", "demo")
                .replace("{resource}", "Cluster");
            // At the newest microversion, where every route exists.
            let reply = s
                .call(
                    ADMIN,
                    &method.to_uppercase(),
                    &concrete,
                    &[("OpenStack-API-Version", "container-infra latest")],
                    None,
                )
                .await;
            let routing = reply.body["errors"][0]["code"] == json!("");
            assert!(!routing, "{method} {path}: routing error {}", reply.body);
        }
    }
}

#[tokio::test]
async fn deeply_nested_label_literal_is_a_400() {
    // A 10,000-deep Python literal stops at the parser's bracket limit: a 400 naming it, not a
    // worker stack overflow, and the template is left as it was.
    let s = start().await;
    let t = create(&s, MEMBER, "deep").await;
    let path = format!("/v1/clustertemplates/{}", t["uuid"].as_str().unwrap());
    for value in [
        format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
        format!("{}1{}", "{'a': ".repeat(10_000), "}".repeat(10_000)),
    ] {
        let patch = json!([{"op": "replace", "path": "/labels", "value": value}]);
        let r = s.send(MEMBER, "PATCH", &path, &patch).await;
        assert_eq!(r.status, 400, "{}", r.body);
        let detail = r.body["errors"][0]["detail"].as_str().unwrap_or_default();
        assert!(
            detail.ends_with("Reason: too many nested parentheses (<unknown>, line 1)"),
            "{detail}"
        );
    }
    assert_eq!(s.get(READER, &path).await.body["labels"], t["labels"]);
}

/// A template stored with NULL `public`/`hidden` (rows upstream's older releases wrote) shows
/// them as false; a PATCH that leaves them alone needs no publish right.
#[tokio::test]
async fn patching_a_template_with_null_flags_needs_no_publish_right() {
    let s = start().await;
    let t = create(&s, MEMBER, "legacy").await;
    let uuid = t["uuid"].as_str().unwrap();
    s.db.execute_text(&format!(
        "UPDATE cluster_template SET public = NULL, hidden = NULL WHERE uuid = '{uuid}'"
    ))
    .await
    .unwrap();
    let path = format!("/v1/clustertemplates/{uuid}");
    let r = s
        .send(
            MEMBER,
            "PATCH",
            &path,
            &json!([{"op": "replace", "path": "/name", "value": "renamed"}]),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["name"], "renamed");
    assert_eq!(r.body["public"], false);
    // Setting the flag still needs it.
    let r = s
        .send(
            MEMBER,
            "PATCH",
            &path,
            &json!([{"op": "replace", "path": "/public", "value": true}]),
        )
        .await;
    assert_error(
        &r,
        403,
        "Not authorized to set public or hidden flag for cluster template.",
    );
}

/// The routing answers upstream's pecan gives, which the route tables reproduce: 405 for a
/// path served with other methods, 404 for none, a 400 naming the id a collection PATCH or
/// DELETE lacks, 406 below an operation's microversion (after the 405 and the missing id).
#[tokio::test]
async fn routing_answers_as_upstream_for_every_resource() {
    let s = start().await;
    let uuid = "6b4c3d1e-8f7a-4b2c-9d0e-1f2a3b4c5d6e";
    let missing = |arg: &str| format!("Missing argument: \"{arg}\"");
    let not_found = "The %(name)s resource %(id)s could not be found.";
    let marker = "Invalid input for field/attribute marker. Value: 'x'. unable to convert to uuid. Error: Expected a uuid but received x.";
    let uuid_detail = format!("/v1/clusters/{uuid}/detail");
    let (m_cluster, m_template, m_federation, m_project, m_resource, m_ng) = (
        missing("cluster_ident"),
        missing("cluster_template_ident"),
        missing("federation_ident"),
        missing("project_id"),
        missing("resource"),
        missing("nodegroup_id"),
    );
    let cases: &[(&str, &str, &str, u16, &str)] = &[
        ("PUT", "/v1/clusters", "latest", 405, ""),
        ("PUT", "/v1/clusters/x", "latest", 405, ""),
        ("GET", "/v1/clusters/x/actions/resize", "latest", 405, ""),
        ("GET", "/v1/clusters/x/actions/resize", "1.6", 406, ""),
        ("GET", "/v1/clusters/x/actions/nope", "latest", 405, ""),
        ("POST", "/v1/clusters/x/actions/resize", "1.6", 406, ""),
        ("GET", "/v1/clusters/x/detail", "latest", 400, marker),
        ("GET", &uuid_detail, "latest", 404, not_found),
        ("POST", "/v1/clusters/x/detail", "latest", 404, ""),
        ("PUT", "/v1/clusters/x/detail", "latest", 405, ""),
        ("GET", "/v1/clusters/x/y/z", "latest", 404, ""),
        ("PATCH", "/v1/clusters", "latest", 400, &m_cluster),
        ("DELETE", "/v1/clusters", "latest", 400, &m_cluster),
        (
            "GET",
            "/v1/clustertemplates/x/detail",
            "latest",
            400,
            marker,
        ),
        ("DELETE", "/v1/clustertemplates/x/detail", "latest", 404, ""),
        ("DELETE", "/v1/clustertemplates", "latest", 400, &m_template),
        ("PUT", "/v1/clustertemplates/x", "latest", 405, ""),
        ("PATCH", "/v1/federations", "latest", 400, &m_federation),
        ("PATCH", "/v1/certificates", "latest", 400, &m_cluster),
        ("DELETE", "/v1/certificates/x", "latest", 405, ""),
        ("GET", "/v1/credentials", "latest", 405, ""),
        ("GET", "/v1/credentials", "1.11", 406, ""),
        ("PATCH", "/v1/credentials", "1.11", 406, ""),
        ("PATCH", "/v1/credentials", "latest", 400, &m_cluster),
        ("GET", "/v1/quotas/demo", "latest", 400, &m_resource),
        ("PUT", "/v1/quotas/demo", "latest", 405, ""),
        ("DELETE", "/v1/quotas", "latest", 400, &m_project),
        ("DELETE", "/v1/quotas/demo", "latest", 400, &m_resource),
        ("POST", "/v1/stats", "latest", 405, ""),
        ("GET", "/v1/stats/x", "latest", 405, ""),
        ("POST", "/v1/mservices", "latest", 405, ""),
        ("GET", "/v1/nope", "latest", 404, ""),
        ("DELETE", "/v1/nope", "latest", 405, ""),
        ("GET", "/v1/clusters/x/nodegroups", "1.8", 406, ""),
        ("PUT", "/v1/clusters/x/nodegroups", "1.8", 406, ""),
        ("PATCH", "/v1/clusters/x/nodegroups", "1.8", 406, ""),
        ("PATCH", "/v1/clusters/x/nodegroups", "latest", 400, &m_ng),
        ("GET", "/v1/clusters/x/nodegroups/y/z", "latest", 404, ""),
        ("POST", "/v1/clusters/x/nodegroups/y/z", "1.8", 406, ""),
        (
            "GET",
            "/v1/clusters?bogus=1",
            "latest",
            400,
            "Unknown argument: \"bogus\"",
        ),
        (
            "GET",
            "/v1/stats?project_id=demo&x=1",
            "latest",
            400,
            "Unknown argument: \"x\"",
        ),
    ];
    for (method, path, version, status, detail) in cases {
        let v = format!("container-infra {version}");
        let headers = [
            ("OpenStack-API-Version", v.as_str()),
            ("Accept", "application/json"),
        ];
        let r = s.call(ADMIN, method, path, &headers, None).await;
        assert_eq!(
            r.status, *status,
            "{method} {path} at {version}: {}",
            r.body
        );
        if !detail.is_empty() {
            assert_eq!(
                r.body["errors"][0]["detail"],
                json!(detail),
                "{method} {path}"
            );
        }
    }
    // webob renders a routing answer in the media type `Accept` prefers: only JSON carries its
    // reason phrase and detail through upstream's error middleware.
    let refusal = "Version 1.8 was requested but the requested API get_one is not supported for this version.";
    for (accept, title, detail) in [
        ("application/json", "Not Acceptable", refusal),
        ("*/*", "", ""),
        ("application/json, text/html", "", ""),
        (
            "text/html;q=0.5, application/json",
            "Not Acceptable",
            refusal,
        ),
    ] {
        let headers = [
            ("OpenStack-API-Version", "container-infra 1.8"),
            ("Accept", accept),
        ];
        let r = s
            .call(ADMIN, "GET", "/v1/clusters/x/nodegroups", &headers, None)
            .await;
        assert_eq!(r.status, 406, "{accept}");
        assert_eq!(r.body["errors"][0]["title"], json!(title), "{accept}");
        assert_eq!(r.body["errors"][0]["detail"], json!(detail), "{accept}");
    }
}
