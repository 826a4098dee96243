//! Nodegroups, certificates and credentials through the API.

use magnum_core::{Error, RequestContext};
use serde_json::{Value, json};

use crate::clusters::{assert_error, at, create, mark_complete, template, template_body};
use crate::common::{ADMIN, CA_PEM, MEMBER, OTHER, Persona, READER, SIGNED_PEM, Server, start};

/// A cluster named `k8s` the driver has finished creating.
async fn ready_cluster(s: &Server) -> String {
    let t = template(s, MEMBER, &template_body("k8s")).await;
    let uuid = create(
        s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "k8s", "labels": {"a": "1", "b": "2"}}),
    )
    .await;
    mark_complete(s, &uuid).await;
    s.conductor.clear();
    uuid
}

#[tokio::test]
async fn nodegroups_need_1_9() {
    let s = start().await;
    let uuid = ready_cluster(&s).await;
    for (method, path) in [
        ("GET", format!("/v1/clusters/{uuid}/nodegroups")),
        (
            "GET",
            format!("/v1/clusters/{uuid}/nodegroups/default-worker"),
        ),
        ("POST", format!("/v1/clusters/{uuid}/nodegroups")),
        ("DELETE", format!("/v1/clusters/{uuid}/nodegroups/x")),
    ] {
        let r = at(
            &s,
            MEMBER,
            "1.8",
            method,
            &path,
            Some(&json!({"name": "x"})),
        )
        .await;
        assert_eq!(r.status, 406, "{method} {path}");
        assert_eq!(r.body["errors"][0]["title"], json!("Not Acceptable"));
        assert!(!r.headers.contains_key("openstack-api-version"));
    }
    assert!(s.conductor.calls().is_empty());
}

#[tokio::test]
async fn list_and_show() {
    let s = start().await;
    let uuid = ready_cluster(&s).await;
    let r = s
        .get(READER, "/v1/clusters/k8s/nodegroups/?role=master")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let items = r.body["nodegroups"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "uuid",
            "name",
            "flavor_id",
            "image_id",
            "node_count",
            "role",
            "min_node_count",
            "max_node_count",
            "is_default",
            "stack_id",
            "status",
            "merge_labels"
        ]
    );
    let r = s
        .get(MEMBER, &format!("/v1/clusters/{uuid}/nodegroups?limit=1"))
        .await;
    let next = r.body["next"].as_str().unwrap();
    assert!(
        next.contains(&format!(
            "/v1/clusters/{uuid}/nodegroups?sort_key=id&sort_dir=asc&limit=1&marker="
        )),
        "{next}"
    );
    let r = s
        .get(MEMBER, "/v1/clusters/k8s/nodegroups/default-worker")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["labels_overridden"], json!({}));
    assert_eq!(r.body["node_labels"], json!({}));
    assert_eq!(r.body["node_taints"], json!([]));
    let id = r.body["id"].as_i64().unwrap();
    let ng_uuid = r.body["uuid"].as_str().unwrap().to_owned();
    assert!(
        r.body["links"][0]["href"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/v1/clusters/{uuid}/nodegroups/{ng_uuid}"))
    );
    // By id and by uuid too; `detail` is just a name here.
    for ident in [id.to_string(), ng_uuid] {
        let r = s
            .get(MEMBER, &format!("/v1/clusters/k8s/nodegroups/{ident}"))
            .await;
        assert_eq!(r.body["name"], json!("default-worker"));
    }
    assert_error(
        &s.get(MEMBER, "/v1/clusters/k8s/nodegroups/detail").await,
        404,
        "Nodegroup detail could not be found.",
    );
    assert_eq!(
        s.get(OTHER, "/v1/clusters/k8s/nodegroups").await.status,
        404
    );
    let admin_elsewhere = Persona {
        project: "alt",
        user: "alt-admin",
        roles: "admin,member,reader",
    };
    let r = s
        .get(admin_elsewhere, &format!("/v1/clusters/{uuid}/nodegroups"))
        .await;
    assert_eq!(r.body["nodegroups"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn create_stores_the_row_and_answers_with_the_request() {
    let s = start().await;
    let t = template(&s, MEMBER, &template_body("k8s")).await;
    let uuid = create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "k8s"}),
    )
    .await;
    let path = "/v1/clusters/k8s/nodegroups";
    let body = json!({"name": "gpu", "node_count": 2, "max_node_count": 4, "min_node_count": 1,
                      "role": "worker", "labels": {"gpu": "yes"}, "merge_labels": true,
                      "node_labels": {"tier": "gpu"},
                      "node_taints": [{"key": "gpu", "value": "", "effect": "NoSchedule"}]});
    assert_error(
        &s.send(MEMBER, "POST", path, &body).await,
        409,
        "Cluster API address is not available yet",
    );
    mark_complete(&s, &uuid).await;
    s.conductor.clear();
    let r = s.send(MEMBER, "POST", path, &body).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let ng = r.body["uuid"].as_str().unwrap().to_owned();
    let keys: Vec<&String> = r.body.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "uuid",
            "name",
            "cluster_id",
            "project_id",
            "labels",
            "links",
            "flavor_id",
            "image_id",
            "node_count",
            "role",
            "min_node_count",
            "max_node_count",
            "merge_labels",
            "labels_overridden",
            "labels_added",
            "labels_skipped",
            "node_labels",
            "node_taints"
        ]
    );
    assert_eq!(
        r.body["labels"],
        json!({"kube_tag": "v1.30.4", "a": "1", "gpu": "yes"})
    );
    assert_eq!(r.body["labels_added"], json!({"gpu": "yes"}));
    assert_eq!(r.body["flavor_id"], json!("m1.small"));
    assert_eq!(r.body["image_id"], json!("fedora-coreos-40"));
    assert_eq!(r.body["cluster_id"], json!(uuid));
    assert_eq!(
        s.conductor.only("nodegroup_create"),
        json!({"cluster_uuid": uuid, "nodegroup_uuid": ng})
    );
    // Stored before the answer.
    let r = s.get(MEMBER, &format!("{path}/gpu")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], json!("CREATE_IN_PROGRESS"));
    assert_eq!(r.body["is_default"], json!(false));
    assert_eq!(r.body["max_node_count"], json!(4));
    assert_eq!(r.body["node_taints"], body["node_taints"]);
    let r = s.get(MEMBER, "/v1/clusters/k8s").await;
    assert_eq!(r.body["node_count"], json!(3), "1 default worker + 2");

    // Refusals, each in upstream's words; nothing more stored or sent.
    let cases = [
        (
            json!({"name": "gpu"}),
            409,
            "A node group with name gpu already exists in the cluster k8s.",
        ),
        (
            json!({"name": "n", "node_count": 5, "max_node_count": 3}),
            409,
            "max_node_count for n is invalid (node_count (5) should be less or equal to max_node_count (3)).",
        ),
        (
            json!({"name": "n", "min_node_count": 4, "max_node_count": 3}),
            409,
            "max_node_count for n is invalid (min_node_count (4) should be less or equal to max_node_count (3)).",
        ),
        (
            json!({"name": "n", "min_node_count": 2}),
            409,
            "min_node_count for n is invalid (min_node_count (2) should be less or equal to node_count (1)).",
        ),
        (
            json!({"name": "n", "role": "master", "node_labels": {"a": "b"}}),
            409,
            "node_labels for n is invalid (node_labels may not be set on master nodegroups).",
        ),
        (
            json!({"name": "n", "role": "master"}),
            400,
            "Creating master nodegroups is currently not supported.",
        ),
        (
            json!({"name": "n", "node_taints": [{"key": "k", "effect": "Sometimes"}]}),
            409,
            "node_taints for n is invalid (node_taints[0].effect must be one of NoSchedule, PreferNoSchedule, NoExecute).",
        ),
        (
            json!({"name": "n", "node_taints": [{"key": "", "effect": "NoExecute"}]}),
            409,
            "node_taints for n is invalid (node_taints[0].key is required).",
        ),
        (
            json!({"name": "n", "node_taints": [{"key": "k", "effect": "NoExecute", "x": 1, "a": 2}]}),
            409,
            "node_taints for n is invalid (node_taints[0] contains unrecognised field(s) a, x; allowed fields are key, value, effect).",
        ),
        (
            json!({"name": "n", "node_count": -1}),
            400,
            "Invalid input for field/attribute node_count. Value: '-1'. Value should be greater or equal to 0",
        ),
        (
            json!({"name": "n", "stack_id": "s"}),
            400,
            "Invalid input for field/attribute stack_id. Value: 's'. Cannot set read only field.",
        ),
    ];
    for (body, status, detail) in cases {
        assert_error(&s.send(MEMBER, "POST", path, &body).await, status, detail);
    }
    let r = s
        .send(
            MEMBER,
            "POST",
            path,
            &json!({"name": "n", "node_labels": {"kubernetes.io/role": "x"}}),
        )
        .await;
    assert_eq!(r.status, 409);
    assert!(
        r.body["errors"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("node_labels for n is invalid (node label 'kubernetes.io/role' is in a restricted Kubernetes namespace;")
    );
    for allowed in ["node.kubernetes.io/pool", "kubernetes.io/os", "team"] {
        let body = json!({"name": format!("ok-{}", allowed.len()), "node_labels": {allowed: "x"}});
        assert_eq!(
            s.send(MEMBER, "POST", path, &body).await.status,
            202,
            "{allowed}"
        );
    }
    assert_error(
        &s.send(READER, "POST", path, &json!({"name": "r"})).await,
        403,
        "Policy doesn't allow nodegroup:create to be performed.",
    );
    assert_eq!(s.conductor.args_of("nodegroup_create").len(), 4);
    // Nothing resumes an undelivered nodegroup create: the row is taken back, the caller
    // told, and a retry works.
    s.conductor.fail("nodegroup_create", || Error::Remote {
        kind: magnum_core::ErrorKind::Unavailable,
        message: "Conductor unreachable: no consumer".into(),
    });
    let r = s.send(MEMBER, "POST", path, &json!({"name": "lost"})).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(s.get(MEMBER, &format!("{path}/lost")).await.status, 404);
    s.conductor.heal("nodegroup_create");
    let r = s.send(MEMBER, "POST", path, &json!({"name": "lost"})).await;
    assert_eq!(r.status, 202, "{}", r.body);
}

#[tokio::test]
async fn nodegroup_operations_wait_for_a_stable_cluster() {
    let s = start().await;
    let uuid = ready_cluster(&s).await;
    let ctx = RequestContext::admin_all_tenants();
    let c = s.db.clusters().get_by_uuid(&ctx, &uuid).await.unwrap();
    let mut deleting = c.clone();
    deleting.status = "DELETE_IN_PROGRESS".parse().ok();
    s.db.clusters().save(&c, &deleting).await.unwrap();
    assert_error(
        &s.send(
            MEMBER,
            "POST",
            "/v1/clusters/k8s/nodegroups",
            &json!({"name": "late"}),
        )
        .await,
        400,
        "Creating a nodegroup when cluster status is \"DELETE_IN_PROGRESS\" is not supported.",
    );
    assert_eq!(
        s.get(MEMBER, "/v1/clusters/k8s/nodegroups/late")
            .await
            .status,
        404
    );
    assert!(s.conductor.calls().is_empty());
}

#[tokio::test]
async fn patch_and_delete() {
    let s = start().await;
    let uuid = ready_cluster(&s).await;
    let r = s
        .send(
            MEMBER,
            "POST",
            "/v1/clusters/k8s/nodegroups",
            &json!({"name": "extra", "node_count": 2}),
        )
        .await;
    let ng = r.body["uuid"].as_str().unwrap().to_owned();
    // The conductor would finish it; the API then accepts updates.
    let ctx = RequestContext::admin_all_tenants();
    let row =
        s.db.nodegroups()
            .get_by_uuid(&ctx, &uuid, &ng)
            .await
            .unwrap();
    let mut done = row.clone();
    done.status = "CREATE_COMPLETE".parse().ok();
    s.db.nodegroups().save(&row, &done).await.unwrap();
    s.conductor.clear();

    let path = "/v1/clusters/k8s/nodegroups/extra";
    let patch = json!([
        {"op": "replace", "path": "/min_node_count", "value": 1},
        {"op": "replace", "path": "/max_node_count", "value": 5},
        {"op": "replace", "path": "/node_labels", "value": "{'tier': 'batch'}"},
        {"op": "replace", "path": "/node_taints", "value": "[{'key': 'k', 'value': '', 'effect': 'NoSchedule'}]"}
    ]);
    let r = s.send(MEMBER, "PATCH", path, &patch).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["min_node_count"], json!(1));
    assert_eq!(r.body["max_node_count"], json!(5));
    assert_eq!(r.body["node_labels"], json!({"tier": "batch"}));
    assert_eq!(r.body["uuid"], json!(ng));
    let sent = s.conductor.only("nodegroup_update");
    assert_eq!(
        sent,
        json!({"cluster_uuid": uuid, "nodegroup_uuid": ng, "min_node_count": 1, "max_node_count": 5,
               "node_labels": "{\"tier\": \"batch\"}",
               "node_taints": "[{\"key\": \"k\", \"value\": \"\", \"effect\": \"NoSchedule\"}]",
               "labels": "{\"a\": \"1\", \"b\": \"2\"}"})
    );
    // The conductor applies it: the row is unchanged until then.
    let r = s.get(MEMBER, path).await;
    assert_eq!(r.body["min_node_count"], json!(0));
    // Removing resets to the declared default (min) or empty.
    let r = s
        .send(
            MEMBER,
            "PATCH",
            path,
            &json!([{"op": "remove", "path": "/node_labels"}, {"op": "remove", "path": "/max_node_count"},
                    {"op": "remove", "path": "/min_node_count"}]),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["node_labels"], json!({}));
    assert_eq!(r.body["max_node_count"], Value::Null);
    let sent = s.conductor.args_of("nodegroup_update").pop().unwrap();
    assert_eq!(sent["node_labels"], json!("{}"));
    assert_eq!(sent["min_node_count"], json!(0));
    assert_eq!(sent["max_node_count"], Value::Null);
    s.conductor.clear();
    let refusals = [
        (
            json!([{"op": "replace", "path": "/node_count", "value": 3}]),
            400,
            "'/node_count' is an internal attribute and can not be updated",
        ),
        (
            json!([{"op": "replace", "path": "/min_node_count", "value": 3}]),
            409,
            "min_node_count for extra is invalid (min_node_count (3) should be less or equal to node_count (2)).",
        ),
        (
            json!([{"op": "replace", "path": "/node_labels", "value": "{'k8s.io/x': 'y'}"}]),
            409,
            "",
        ),
    ];
    for (patch, status, detail) in refusals {
        let r = s.send(MEMBER, "PATCH", path, &patch).await;
        assert_eq!(r.status, status, "{}", r.body);
        if !detail.is_empty() {
            assert_error(&r, status, detail);
        }
    }
    assert_error(
        &s.send(READER, "PATCH", path, &patch).await,
        403,
        "Policy doesn't allow nodegroup:update to be performed.",
    );
    assert!(s.conductor.args_of("nodegroup_update").is_empty());

    // Delete: never a default nodegroup.
    assert_error(
        &s.call(
            MEMBER,
            "DELETE",
            "/v1/clusters/k8s/nodegroups/default-worker",
            &[("OpenStack-API-Version", "container-infra latest")],
            None,
        )
        .await,
        400,
        "Deleting a default nodegroup is not supported.",
    );
    let r = s
        .call(
            MEMBER,
            "DELETE",
            path,
            &[("OpenStack-API-Version", "container-infra latest")],
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(
        s.conductor.only("nodegroup_delete"),
        json!({"cluster_uuid": uuid, "nodegroup_uuid": ng})
    );
    assert_error(
        &s.call(
            MEMBER,
            "DELETE",
            "/v1/clusters/k8s/nodegroups",
            &[("OpenStack-API-Version", "container-infra latest")],
            None,
        )
        .await,
        400,
        "Missing argument: \"nodegroup_id\"",
    );
}

#[tokio::test]
async fn certificates() {
    let s = start().await;
    let uuid = ready_cluster(&s).await;
    // The client asks by uuid; names work too.
    let r = s.get(MEMBER, &format!("/v1/certificates/{uuid}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["cluster_uuid"], json!(uuid));
    assert_eq!(r.body["pem"], json!(CA_PEM));
    assert!(
        r.body["links"][1]["href"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/certificates/{uuid}"))
    );
    let r = s
        .get(MEMBER, "/v1/certificates/k8s?ca_cert_type=etcd")
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        s.conductor.args_of("get_ca_certificate"),
        [
            json!({"cluster_uuid": uuid, "ca_cert_type": null}),
            json!({"cluster_uuid": uuid, "ca_cert_type": "etcd"})
        ]
    );
    // Only the cluster's creator (or an admin) may read or sign.
    assert_error(
        &s.get(READER, &format!("/v1/certificates/{uuid}")).await,
        403,
        "Policy doesn't allow certificate:get to be performed.",
    );
    assert_eq!(
        s.get(ADMIN, &format!("/v1/certificates/{uuid}"))
            .await
            .status,
        200
    );
    assert_eq!(s.get(MEMBER, "/v1/certificates").await.status, 405);

    let csr = "-----BEGIN CERTIFICATE REQUEST-----\nX\n-----END CERTIFICATE REQUEST-----\n";
    let r = s
        .send(
            MEMBER,
            "POST",
            "/v1/certificates",
            &json!({"cluster_uuid": "k8s", "csr": csr}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["pem"], json!(SIGNED_PEM));
    assert_eq!(r.body["csr"], json!(csr));
    assert_eq!(r.body["cluster_uuid"], json!(uuid));
    assert!(r.headers.get("location").is_none());
    assert_eq!(
        s.conductor.only("sign_certificate"),
        json!({"cluster_uuid": uuid, "csr": csr, "ca_cert_type": null})
    );
    assert_error(
        &s.send(
            MEMBER,
            "POST",
            "/v1/certificates",
            &json!({"cluster_uuid": "nope", "csr": csr}),
        )
        .await,
        400,
        "Cluster nope could not be found.",
    );
    assert_error(
        &s.send(MEMBER, "POST", "/v1/certificates", &json!({"csr": csr}))
            .await,
        404,
        "Cluster None could not be found.",
    );
    assert_error(
        &s.send(
            MEMBER,
            "POST",
            "/v1/certificates",
            &json!({"cluster_uuid": uuid, "csr": ""}),
        )
        .await,
        400,
        "Invalid input for field/attribute csr. Value: ''. Value should have a minimum character requirement of 1",
    );

    // Rotation: the client sends no body, as octet-stream.
    let raw = [
        ("OpenStack-API-Version", "container-infra latest"),
        ("Content-Type", "application/octet-stream"),
    ];
    let r = s
        .call(
            MEMBER,
            "PATCH",
            &format!("/v1/certificates/{uuid}"),
            &raw,
            None,
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body, json!({"uuid": uuid}));
    assert_eq!(
        s.conductor.only("rotate_ca_certificate"),
        json!({"cluster_uuid": uuid})
    );
    s.conductor
        .fail("rotate_ca_certificate", || Error::NotSupported {
            operation: "Updating a cluster when status is \"UPDATE_IN_PROGRESS\"".into(),
        });
    assert_error(
        &s.call(MEMBER, "PATCH", "/v1/certificates/k8s", &raw, None)
            .await,
        400,
        "Updating a cluster when status is \"UPDATE_IN_PROGRESS\" is not supported.",
    );
    assert_error(
        &s.call(READER, "PATCH", "/v1/certificates/k8s", &raw, None)
            .await,
        403,
        "Policy doesn't allow certificate:rotate_ca to be performed.",
    );
    // A cluster on a TLS-disabled template has no CA to rotate.
    let mut plain = template_body("plain");
    plain["tls_disabled"] = json!(true);
    let t = template(&s, MEMBER, &plain).await;
    create(
        &s,
        MEMBER,
        &json!({"cluster_template_id": t, "name": "plain"}),
    )
    .await;
    assert_error(
        &s.call(MEMBER, "PATCH", "/v1/certificates/plain", &raw, None)
            .await,
        400,
        "Rotating the CA certificate on a non-TLS cluster is not supported",
    );
    assert_eq!(s.conductor.args_of("rotate_ca_certificate").len(), 2);
}

#[tokio::test]
async fn credentials() {
    let s = start().await;
    let uuid = ready_cluster(&s).await;
    let path = format!("/v1/credentials/{uuid}");
    let r = at(&s, MEMBER, "1.11", "PATCH", &path, None).await;
    assert_eq!(r.status, 406);
    let r = at(&s, MEMBER, "latest", "PATCH", "/v1/credentials/k8s", None).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body, json!({"uuid": uuid}));
    assert_eq!(
        s.conductor.only("credential_rotate"),
        json!({"cluster_uuid": uuid})
    );
    // The rule is checked before the lookup: a reader learns nothing about the cluster.
    assert_error(
        &at(&s, READER, "latest", "PATCH", "/v1/credentials/nope", None).await,
        403,
        "Policy doesn't allow credential:rotate to be performed.",
    );
    assert_error(
        &at(&s, OTHER, "latest", "PATCH", &path, None).await,
        404,
        &format!("Cluster {uuid} could not be found."),
    );
    assert_eq!(
        at(&s, MEMBER, "latest", "GET", &path, None).await.status,
        405
    );
    let r = at(&s, MEMBER, "latest", "PATCH", &path, Some(&Value::Null)).await;
    assert_eq!(r.status, 202);
}
