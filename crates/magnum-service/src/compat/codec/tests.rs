//! The codec against spec §12/§15 shapes, both directions, on SQLite; and against upstream's
//! object layer when MAGNUM_TEST_UPSTREAM=1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use serde_json::json;

use super::*;
use crate::compat::rows::tests::{
    CLUSTER_UUID, CSR, PROJECT, Seed, TEMPLATE_UUID, USER, cluster_row, normalized, seed,
    spec_certificate, spec_cluster, temp_db, template_row, upstream,
};
use magnum_rpc::oslo::objects::{KEY_CHANGES, KEY_DATA, KEY_NAME, KEY_VERSION};

fn ctx() -> RequestContext {
    RequestContext {
        user_id: Some(USER.into()),
        project_id: Some(PROJECT.into()),
        roles: vec!["member".into(), "reader".into()],
        request_id: Some("req-6c1f3e0a-2b4d-4e6f-8a9b-0c1d2e3f4a5b".into()),
        ..RequestContext::default()
    }
}

fn msg(method: &str, args: impl Serialize) -> Message {
    Message {
        context: ctx(),
        method: method.to_owned(),
        args: serde_json::to_value(args).unwrap(),
    }
}

fn wire(method: &str, args: Value) -> WireRequest {
    WireRequest {
        method: method.to_owned(),
        args: args.as_object().unwrap().clone(),
        context: context_to_wire(&ctx()),
    }
}

fn keys(m: &Map<String, Value>) -> Vec<&str> {
    m.keys().map(String::as_str).collect()
}

fn dispatched(d: Decoded) -> Message {
    match d {
        Decoded::Dispatch(m) => m,
        Decoded::Answered(r) => panic!("answered: {r:?}"),
    }
}

/// What the conductor's create handlers do first with a decoded create: insert the object
/// upstream's API sent unsaved (the codec itself writes nothing).
async fn conductor_inserts(db: &magnum_db::Database, m: &Message) {
    match m.method.as_str() {
        m::CLUSTER_CREATE => {
            let r: ClusterCreate = serde_json::from_value(m.args.clone()).unwrap();
            if let Some(u) = &r.unsaved {
                crate::compat::adopt::insert_cluster(db, u, r.master_count, r.node_count)
                    .await
                    .unwrap();
            }
        }
        m::NODEGROUP_CREATE => {
            let r: NodegroupRef = serde_json::from_value(m.args.clone()).unwrap();
            if let Some(u) = &r.unsaved {
                crate::compat::adopt::insert_nodegroup(db, &r.cluster_uuid, u)
                    .await
                    .unwrap();
            }
        }
        _ => {}
    }
}

/// Every method our API sends, with the exact keyword arguments of §12 in Python's order.
fn our_messages(s: &Seed) -> Vec<(Message, &'static [&'static str])> {
    let worker = s.worker.uuid.clone();
    let cluster = CLUSTER_UUID.to_owned();
    vec![
        (
            msg(
                m::CLUSTER_CREATE,
                ClusterCreate {
                    unsaved: None,
                    cluster_uuid: cluster.clone().into(),
                    master_count: 1,
                    node_count: 2,
                    create_timeout: Some(60),
                },
            ),
            &["cluster", "master_count", "node_count", "create_timeout"],
        ),
        (
            msg(
                m::CLUSTER_UPDATE,
                ClusterUpdate {
                    cluster_uuid: cluster.clone().into(),
                    node_count: 3,
                    health_status: Some(magnum_core::status::ClusterHealthStatus::Unhealthy),
                    health_status_reason: Some(json!({"api": "down"})),
                    rollback: true,
                },
            ),
            &[
                "cluster",
                "node_count",
                "health_status",
                "health_status_reason",
                "rollback",
            ],
        ),
        (
            msg(
                m::CLUSTER_DELETE,
                ClusterRef {
                    cluster_uuid: cluster.clone().into(),
                },
            ),
            &["uuid"],
        ),
        (
            msg(
                m::CLUSTER_RESIZE,
                ClusterResize {
                    cluster_uuid: cluster.clone().into(),
                    nodegroup_uuid: worker.clone().into(),
                    node_count: 1,
                    nodes_to_remove: vec!["server-1".into()],
                },
            ),
            &["cluster", "node_count", "nodes_to_remove", "nodegroup"],
        ),
        (
            msg(
                m::CLUSTER_UPGRADE,
                ClusterUpgrade {
                    cluster_uuid: cluster.clone().into(),
                    nodegroup_uuid: worker.clone().into(),
                    cluster_template_uuid: TEMPLATE_UUID.into(),
                    max_batch_size: Some(2),
                },
            ),
            &["cluster", "cluster_template", "max_batch_size", "nodegroup"],
        ),
        (
            msg(
                m::NODEGROUP_CREATE,
                NodegroupRef {
                    unsaved: None,
                    cluster_uuid: cluster.clone().into(),
                    nodegroup_uuid: worker.clone().into(),
                },
            ),
            &["cluster", "nodegroup"],
        ),
        (
            msg(
                m::NODEGROUP_UPDATE,
                NodegroupUpdate {
                    cluster_uuid: cluster.clone().into(),
                    nodegroup_uuid: worker.clone().into(),
                    min_node_count: Some(1),
                    max_node_count: Some(5),
                    node_labels: Some(r#"{"gpu": "true"}"#.into()),
                    node_taints: None,
                    labels: Some("{}".into()),
                },
            ),
            &["cluster", "nodegroup"],
        ),
        (
            msg(
                m::NODEGROUP_DELETE,
                NodegroupRef {
                    unsaved: None,
                    cluster_uuid: cluster.clone().into(),
                    nodegroup_uuid: worker.clone().into(),
                },
            ),
            &["cluster", "nodegroup"],
        ),
        (
            msg(
                m::CREDENTIAL_ROTATE,
                ClusterRef {
                    cluster_uuid: cluster.clone().into(),
                },
            ),
            &["cluster"],
        ),
        (
            msg(
                m::SIGN_CERTIFICATE,
                SignCertificate {
                    cluster_uuid: cluster.clone().into(),
                    csr: CSR.into(),
                    ca_cert_type: Some("etcd".into()),
                },
            ),
            &["cluster", "certificate"],
        ),
        (
            msg(
                m::GET_CA_CERTIFICATE,
                GetCaCertificate {
                    cluster_uuid: cluster.clone().into(),
                    ca_cert_type: None,
                },
            ),
            &["cluster", "ca_cert_type"],
        ),
        (
            msg(
                m::ROTATE_CA_CERTIFICATE,
                ClusterRef {
                    cluster_uuid: cluster.clone().into(),
                },
            ),
            &["cluster"],
        ),
        (msg(m::PING_CONDUCTOR, json!({})), &[]),
    ]
}

#[tokio::test]
async fn every_method_goes_out_in_upstreams_shape_and_comes_back_the_same() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let codec = MagnumCodec::new(db.clone());
    let stored = rows::cluster(&s.cluster).unwrap().to_primitive();
    for (ours, want_keys) in our_messages(&s) {
        let w = codec.encode_request(&ours).await.unwrap();
        assert_eq!(w.method, ours.method);
        assert_eq!(keys(&w.args), want_keys, "{}", ours.method);
        assert_eq!(w.context.len(), 25);
        // Stored objects go out as loaded: no changes; the cluster at 1.24.
        if let Some(c) = w.args.get("cluster") {
            assert_eq!(c[KEY_VERSION], "1.24");
            match ours.method.as_str() {
                m::CLUSTER_CREATE => assert!(c[KEY_DATA].get("id").is_none()),
                m::ROTATE_CA_CERTIFICATE => {
                    assert_eq!(c[KEY_DATA]["cluster_template"][KEY_VERSION], "1.21");
                    assert!(c.get(KEY_CHANGES).is_none());
                }
                _ => assert_eq!(c, &stored, "{}", ours.method),
            }
        }
        let back = dispatched(codec.decode_request(w).await.unwrap());
        assert_eq!(back.method, ours.method);
        assert_eq!(back.context, ours.context, "{}", ours.method);
        assert_eq!(back.args, ours.args, "{}", ours.method);
    }
}

#[tokio::test]
async fn cluster_delete_is_the_15_1_frame() {
    let (db, _dir) = temp_db().await;
    let codec = MagnumCodec::new(db);
    let w = codec
        .encode_request(&msg(
            m::CLUSTER_DELETE,
            ClusterRef {
                cluster_uuid: CLUSTER_UUID.into(),
            },
        ))
        .await
        .unwrap();
    assert_eq!(Value::Object(w.args.clone()), json!({"uuid": CLUSTER_UUID}));
    // The 15.1 frame's inner message, decoded by a transport into a WireRequest.
    let inner = json!({"_context_user": USER, "_context_project_id": PROJECT,
        "_context_is_admin": false, "_context_roles": ["member", "reader"],
        "_context_user_id": USER, "_context_all_tenants": false,
        "_context_request_id": "req-6c1f3e0a-2b4d-4e6f-8a9b-0c1d2e3f4a5b",
        "_context_auth_token": "gAAAAABtoken-redacted"});
    let context: Map<String, Value> = inner
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.trim_start_matches("_context_").to_owned(), v.clone()))
        .collect();
    let back = dispatched(
        codec
            .decode_request(WireRequest {
                method: "cluster_delete".into(),
                args: w.args,
                context,
            })
            .await
            .unwrap(),
    );
    assert_eq!(back.args, json!({"cluster_uuid": CLUSTER_UUID}));
    assert_eq!(back.context, ctx());
}

#[tokio::test]
async fn sign_certificate_is_the_15_2_frame_and_its_reply_15_3() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let codec = MagnumCodec::new(db);
    let w = codec
        .encode_request(&msg(
            m::SIGN_CERTIFICATE,
            SignCertificate {
                cluster_uuid: CLUSTER_UUID.into(),
                csr: CSR.into(),
                ca_cert_type: Some("kubernetes".into()),
            },
        ))
        .await
        .unwrap();
    assert_eq!(
        normalized(&w.args["certificate"]),
        normalized(&spec_certificate())
    );
    let cluster = &w.args["cluster"];
    assert_eq!(cluster, &rows::cluster(&s.cluster).unwrap().to_primitive());
    let spec = spec_cluster();
    let data_keys = |v: &Value| {
        let mut k: Vec<String> = v[KEY_DATA].as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(data_keys(cluster), data_keys(&spec));
    let prim_keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(prim_keys(cluster), prim_keys(&spec));
    for (k, v) in spec[KEY_DATA].as_object().unwrap() {
        if !matches!(k.as_str(), "id" | "created_at" | "updated_at") {
            assert_eq!(&cluster[KEY_DATA][k], v, "{k}");
        }
    }

    // The §15.2 frame's args from upstream's API decode to our request.
    let req = wire(
        m::SIGN_CERTIFICATE,
        json!({"cluster": spec_cluster(), "certificate": spec_certificate()}),
    );
    let back = dispatched(codec.decode_request(req.clone()).await.unwrap());
    assert_eq!(
        back.args,
        to_value(&SignCertificate {
            cluster_uuid: CLUSTER_UUID.into(),
            csr: CSR.into(),
            ca_cert_type: Some("kubernetes".into()),
        })
        .unwrap()
    );

    // Our handler's PEM goes back as §15.3's Certificate, and comes out as the PEM again.
    let pem = "-----BEGIN CERTIFICATE-----\nMIIC...snip...\n-----END CERTIFICATE-----\n";
    let result = codec.encode_result(&req, json!(pem)).await.unwrap();
    let mut want = spec_certificate();
    want[KEY_DATA]["pem"] = json!(pem);
    want[KEY_CHANGES].as_array_mut().unwrap().push(json!("pem"));
    assert_eq!(normalized(&result), normalized(&want));
    assert_eq!(
        codec
            .decode_result(m::SIGN_CERTIFICATE, result)
            .await
            .unwrap(),
        json!(pem)
    );
    // A certificate without ca_cert_type leaves the field unset (upstream then signs for
    // kubernetes) and decodes as None.
    let mut cert = spec_certificate();
    cert[KEY_DATA]
        .as_object_mut()
        .unwrap()
        .remove("ca_cert_type");
    let back = dispatched(
        codec
            .decode_request(wire(
                m::SIGN_CERTIFICATE,
                json!({"cluster": spec_cluster(), "certificate": cert}),
            ))
            .await
            .unwrap(),
    );
    assert_eq!(back.args["ca_cert_type"], Value::Null);
}

#[tokio::test]
async fn results_take_upstreams_return_shapes() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let codec = MagnumCodec::new(db);
    let cluster = rows::cluster(&s.cluster).unwrap().to_primitive();
    // get_ca_certificate: Certificate.from_object_cluster + pem.
    let req = wire(
        m::GET_CA_CERTIFICATE,
        json!({"cluster": cluster, "ca_cert_type": null}),
    );
    let r = codec.encode_result(&req, json!("CA PEM")).await.unwrap();
    assert_eq!(r[KEY_NAME], "Certificate");
    assert_eq!(
        r[KEY_DATA],
        json!({"project_id": PROJECT, "user_id": USER, "cluster_uuid": CLUSTER_UUID, "pem": "CA PEM"})
    );
    assert_eq!(
        codec.decode_result(m::GET_CA_CERTIFICATE, r).await.unwrap(),
        json!("CA PEM")
    );
    // Cluster-returning calls: the stored cluster, saved (no changes).
    for method in [m::CLUSTER_UPGRADE, m::ROTATE_CA_CERTIFICATE] {
        let req = wire(method, json!({"cluster": cluster}));
        let r = codec.encode_result(&req, Value::Null).await.unwrap();
        assert_eq!(r, cluster);
        // Our client discards it.
        assert_eq!(codec.decode_result(method, r).await.unwrap(), Value::Null);
    }
    let ng = rows::nodegroup(&s.worker).unwrap().to_primitive();
    let req = wire(
        m::NODEGROUP_UPDATE,
        json!({"cluster": cluster, "nodegroup": ng}),
    );
    assert_eq!(codec.encode_result(&req, Value::Null).await.unwrap(), ng);
    for method in [m::CREDENTIAL_ROTATE, m::CLUSTER_DELETE, m::NODEGROUP_DELETE] {
        let req = wire(method, json!({"cluster": cluster, "uuid": CLUSTER_UUID}));
        assert_eq!(
            codec.encode_result(&req, Value::Null).await.unwrap(),
            Value::Null
        );
    }
    let req = wire(m::PING_CONDUCTOR, json!({}));
    assert_eq!(
        codec.encode_result(&req, json!(true)).await.unwrap(),
        json!(true)
    );
    assert_eq!(
        codec
            .decode_result(m::PING_CONDUCTOR, json!(true))
            .await
            .unwrap(),
        json!(true)
    );
    // A Certificate without a pem is an error, not an empty PEM.
    assert!(
        codec
            .decode_result(m::SIGN_CERTIFICATE, spec_certificate())
            .await
            .is_err()
    );
}

/// A new cluster as upstream's API sends it (every set field changed; no id).
fn upstream_new_cluster(uuid: &str) -> Value {
    let mut c = Object::new(&CLUSTER);
    for (k, v) in [
        ("uuid", json!(uuid)),
        ("name", json!("from-python")),
        ("project_id", json!(PROJECT)),
        ("user_id", json!(USER)),
        ("cluster_template_id", json!(TEMPLATE_UUID)),
        ("keypair", json!("alice-key")),
        ("docker_volume_size", json!(null)),
        (
            "labels",
            json!({"kube_tag": "v1.30.4", "min_node_count": "1"}),
        ),
        ("master_flavor_id", json!(null)),
        ("flavor_id", json!("m1.xlarge")),
        ("create_timeout", json!(60)),
        ("floating_ip_enabled", json!(true)),
        ("master_lb_enabled", json!(false)),
        ("coe_version", json!(null)),
        ("container_version", json!(null)),
    ] {
        c.set(k, v).unwrap();
    }
    c.to_primitive()
}

#[tokio::test]
async fn cluster_create_from_upstream_inserts_the_cluster_and_its_default_nodegroups() {
    let (db, _dir) = temp_db().await;
    db.cluster_templates().create(template_row()).await.unwrap();
    let codec = MagnumCodec::new(db.clone());
    let req = wire(
        m::CLUSTER_CREATE,
        json!({"cluster": upstream_new_cluster(CLUSTER_UUID), "master_count": 1,
               "node_count": 3, "create_timeout": 60}),
    );
    let back = dispatched(codec.decode_request(req.clone()).await.unwrap());
    let decoded: ClusterCreate = serde_json::from_value(back.args.clone()).unwrap();
    assert!(
        decoded.unsaved.is_some(),
        "no row yet: the object travels on"
    );
    assert!(
        db.clusters()
            .get_by_uuid(&system(), CLUSTER_UUID)
            .await
            .is_err(),
        "the codec decodes; it does not write"
    );
    for _redelivered in 0..2 {
        conductor_inserts(&db, &back).await;
    }
    // Once inserted, a redelivered message decodes to the plain request.
    let again = dispatched(codec.decode_request(req.clone()).await.unwrap());
    assert_eq!(
        again.args,
        to_value(&ClusterCreate {
            unsaved: None,
            cluster_uuid: CLUSTER_UUID.into(),
            master_count: 1,
            node_count: 3,
            create_timeout: Some(60),
        })
        .unwrap()
    );
    let sys = system();
    let c = db.clusters().get_by_uuid(&sys, CLUSTER_UUID).await.unwrap();
    assert_eq!(c.status.map(|s| s.as_str()), Some("CREATE_IN_PROGRESS"));
    assert_eq!(c.name.as_deref(), Some("from-python"));
    assert_eq!(
        c.labels.as_deref(),
        Some(r#"{"kube_tag": "v1.30.4", "min_node_count": "1"}"#)
    );
    assert_eq!(c.health_status_reason.as_deref(), Some("{}"));
    assert_eq!(c.create_timeout, Some(60));
    let ngs = db
        .nodegroups()
        .for_clusters(&[CLUSTER_UUID.to_owned()])
        .await
        .unwrap();
    assert_eq!(ngs.len(), 2, "a redelivery inserts nothing");
    let (master, worker) = (&ngs[0], &ngs[1]);
    assert_eq!(master.name, "default-master");
    assert_eq!(master.role.as_ref().map(|r| r.as_str()), Some("master"));
    assert_eq!(master.node_count, Some(1));
    // Cluster's flavor, else the template's; volume size likewise; template image.
    assert_eq!(master.flavor_id.as_deref(), Some("m1.medium"));
    assert_eq!(master.docker_volume_size, Some(20));
    assert_eq!(master.image_id.as_deref(), Some("fedora-coreos-40"));
    assert_eq!(master.is_default, Some(true));
    assert_eq!(
        master.status.map(|s| s.as_str()),
        Some("CREATE_IN_PROGRESS")
    );
    assert_eq!(worker.name, "default-worker");
    assert_eq!(worker.node_count, Some(3));
    assert_eq!(worker.flavor_id.as_deref(), Some("m1.xlarge"));
    assert_eq!(worker.min_node_count, Some(1));
    assert_eq!(worker.labels, c.labels);
    assert_eq!(worker.project_id, PROJECT);

    // A cluster our API inserted is only dispatched.
    let (db2, _dir2) = temp_db().await;
    let s = seed(&db2).await;
    let codec2 = MagnumCodec::new(db2.clone());
    let req = wire(
        m::CLUSTER_CREATE,
        json!({"cluster": upstream_new_cluster(CLUSTER_UUID), "master_count": 1,
               "node_count": 3, "create_timeout": null}),
    );
    dispatched(codec2.decode_request(req).await.unwrap());
    let c = db2
        .clusters()
        .get_by_uuid(&sys, CLUSTER_UUID)
        .await
        .unwrap();
    assert_eq!(c, s.cluster);

    // A template that does not exist fails before anything is inserted.
    let mut bad = upstream_new_cluster("11111111-2222-4333-8444-555555555555");
    bad[KEY_DATA]["cluster_template_id"] = json!("99999999-2222-4333-8444-555555555555");
    let req = wire(
        m::CLUSTER_CREATE,
        json!({"cluster": bad, "master_count": 1, "node_count": 1, "create_timeout": 60}),
    );
    let back = dispatched(codec.decode_request(req).await.unwrap());
    let r: ClusterCreate = serde_json::from_value(back.args).unwrap();
    let unsaved = r.unsaved.unwrap();
    assert!(
        crate::compat::adopt::insert_cluster(&db, &unsaved, 1, 1)
            .await
            .is_err()
    );
    assert!(
        db.clusters()
            .get_by_uuid(&sys, "11111111-2222-4333-8444-555555555555")
            .await
            .is_err()
    );
}

#[tokio::test]
async fn with_create_cluster_in_conductor_the_api_stages_and_the_conductor_inserts() {
    let (db, _dir) = temp_db().await;
    db.cluster_templates().create(template_row()).await.unwrap();
    let codec = MagnumCodec::new(db.clone()).with_create_cluster_in_conductor(true);
    assert!(codec.create_cluster_in_conductor());
    // The API's part: build the row, stage it, cast.
    let mut row = cluster_row();
    row.status = "CREATE_IN_PROGRESS".parse().ok();
    row.api_address = None;
    row.ca_cert_ref = None;
    row.magnum_cert_ref = None;
    codec.unsaved().stage_cluster(row.clone());
    let create = msg(
        m::CLUSTER_CREATE,
        ClusterCreate {
            unsaved: None,
            cluster_uuid: CLUSTER_UUID.into(),
            master_count: 1,
            node_count: 2,
            create_timeout: Some(60),
        },
    );
    let w = codec.encode_request(&create).await.unwrap();
    let sent = Object::from_primitive(&w.args["cluster"]).unwrap();
    // Upstream's unsaved cluster: no id or timestamps, everything set is changed.
    assert!(!sent.is_set("id") && !sent.is_set("created_at") && !sent.is_set("status"));
    let set: Vec<&str> = sent.fields().map(|(n, _)| n).collect();
    assert_eq!(sent.changes(), set);
    assert!(
        sent.is_set("docker_volume_size"),
        "set to None all the same"
    );
    assert!(!sent.is_set("stack_id"));
    // Taken: a second encode finds neither a staged nor a stored cluster.
    assert!(codec.encode_request(&create).await.is_err());
    // The conductor's part.
    let back = dispatched(codec.decode_request(w).await.unwrap());
    conductor_inserts(&db, &back).await;
    let c = db
        .clusters()
        .get_by_uuid(&system(), CLUSTER_UUID)
        .await
        .unwrap();
    assert_eq!(c.name, row.name);
    assert_eq!(c.status.map(|s| s.as_str()), Some("CREATE_IN_PROGRESS"));
    // discard() drops an abandoned one.
    codec.unsaved().stage_cluster(row);
    codec.unsaved().discard(CLUSTER_UUID);
    assert!(codec.unsaved().take_cluster(CLUSTER_UUID).is_none());

    // Nodegroups likewise: staged by the API, inserted by the conductor.
    let ng_uuid = "5b0c3f9e-1d2a-4c3b-8e7f-6a5b4c3d2e1f";
    let mut ng = crate::compat::rows::tests::nodegroup_row("worker", 2);
    ng.uuid = ng_uuid.into();
    ng.name = "extra".into();
    ng.is_default = Some(false);
    ng.status = "CREATE_IN_PROGRESS".parse().ok();
    codec.unsaved().stage_nodegroup(ng);
    let w = codec
        .encode_request(&msg(
            m::NODEGROUP_CREATE,
            NodegroupRef {
                unsaved: None,
                cluster_uuid: CLUSTER_UUID.into(),
                nodegroup_uuid: ng_uuid.into(),
            },
        ))
        .await
        .unwrap();
    let sent = Object::from_primitive(&w.args["nodegroup"]).unwrap();
    assert!(!sent.is_set("id") && !sent.is_set("status"));
    assert_eq!(sent.str("name"), Some("extra"));
    let back = dispatched(codec.decode_request(w).await.unwrap());
    conductor_inserts(&db, &back).await;
    let stored = db
        .nodegroups()
        .get_by_uuid(&system(), CLUSTER_UUID, ng_uuid)
        .await
        .unwrap();
    assert_eq!(
        stored.status.map(|s| s.as_str()),
        Some("CREATE_IN_PROGRESS")
    );
    assert_eq!(stored.node_count, Some(2));
}

/// Our API inserted the cluster and hands the row over: the cast is built from it, with no
/// read-back (which could reach a Galera node that has not applied the insert yet).
#[tokio::test]
async fn the_inserted_cluster_is_sent_as_handed_over_not_read_back() {
    let (db, _dir) = temp_db().await;
    let codec = MagnumCodec::new(db.clone());
    assert!(!codec.create_cluster_in_conductor());
    let mut row = cluster_row();
    row.status = "CREATE_IN_PROGRESS".parse().ok();
    // Not in this database: what a lagging node would answer.
    codec.unsaved().stage_cluster(row.clone());
    let create = msg(
        m::CLUSTER_CREATE,
        ClusterCreate {
            unsaved: None,
            cluster_uuid: CLUSTER_UUID.into(),
            master_count: 1,
            node_count: 2,
            create_timeout: Some(60),
        },
    );
    let w = codec.encode_request(&create).await.unwrap();
    let sent = Object::from_primitive(&w.args["cluster"]).unwrap();
    assert_eq!(sent.str("uuid"), Some(CLUSTER_UUID));
    assert_eq!(sent.str("name"), row.name.as_deref());
    assert!(!sent.is_set("id") && !sent.is_set("status"));
    // Taken once; without it the stored row is read (and here there is none).
    assert!(codec.encode_request(&create).await.is_err());
}

#[tokio::test]
async fn nodegroup_patch_and_create_travel_as_upstreams_objects() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let codec = MagnumCodec::new(db.clone());
    // PATCH: only what really changes is marked; max_node_count removed is null.
    let update = NodegroupUpdate {
        cluster_uuid: CLUSTER_UUID.into(),
        nodegroup_uuid: s.worker.uuid.clone().into(),
        min_node_count: Some(0),
        max_node_count: None,
        node_labels: Some(r#"{"gpu": "true"}"#.into()),
        node_taints: Some("[]".into()),
        labels: None,
    };
    let w = codec
        .encode_request(&msg(m::NODEGROUP_UPDATE, &update))
        .await
        .unwrap();
    let ng = Object::from_primitive(&w.args["nodegroup"]).unwrap();
    assert_eq!(ng.changes(), ["node_labels", "node_taints"]);
    assert_eq!(ng.get("node_taints"), Some(&json!([])));
    let back = dispatched(codec.decode_request(w).await.unwrap());
    assert_eq!(
        back.args,
        to_value(&NodegroupUpdate {
            min_node_count: None,
            ..update
        })
        .unwrap()
    );
    // A removed JSON attribute (None) arrives as the empty value.
    let mut ng = rows::nodegroup(&s.worker).unwrap();
    ng.set("labels", Value::Null).unwrap();
    ng.set("max_node_count", json!(9)).unwrap();
    let back = dispatched(
        codec
            .decode_request(wire(
                m::NODEGROUP_UPDATE,
                json!({"cluster": spec_cluster(), "nodegroup": ng.to_primitive()}),
            ))
            .await
            .unwrap(),
    );
    assert_eq!(back.args["labels"], "{}");
    assert_eq!(back.args["max_node_count"], 9);
    assert_eq!(back.args["node_labels"], Value::Null);

    // Create from upstream's API: the new nodegroup does not exist yet.
    let new_uuid = "5b0c3f9e-1d2a-4c3b-8e7f-6a5b4c3d2e1f";
    let mut new = Object::new(&NODEGROUP);
    for (k, v) in [
        ("uuid", json!(new_uuid)),
        ("name", json!("gpu")),
        ("cluster_id", json!(CLUSTER_UUID)),
        ("project_id", json!(PROJECT)),
        ("role", json!("worker")),
        ("node_count", json!(2)),
        ("labels", json!({"kube_tag": "v1.30.4"})),
        ("flavor_id", json!("g1.large")),
        ("image_id", json!("fedora-coreos-40")),
    ] {
        new.set(k, v).unwrap();
    }
    let req = wire(
        m::NODEGROUP_CREATE,
        json!({"cluster": spec_cluster(), "nodegroup": new.to_primitive()}),
    );
    let back = dispatched(codec.decode_request(req.clone()).await.unwrap());
    assert_eq!(back.args["unsaved"][KEY_DATA]["name"], "gpu");
    for _redelivered in 0..2 {
        conductor_inserts(&db, &back).await;
    }
    let again = dispatched(codec.decode_request(req.clone()).await.unwrap());
    assert_eq!(
        again.args,
        json!({"cluster_uuid": CLUSTER_UUID, "nodegroup_uuid": new_uuid})
    );
    let row = db
        .nodegroups()
        .get_by_uuid(&system(), CLUSTER_UUID, new_uuid)
        .await
        .unwrap();
    assert_eq!(row.status.map(|s| s.as_str()), Some("CREATE_IN_PROGRESS"));
    assert_eq!(row.node_count, Some(2));
    assert_eq!(row.is_default, Some(false));
    assert_eq!(row.node_labels.as_deref(), Some("{}"));
}

#[tokio::test]
async fn federation_methods_fail_and_unknown_ones_reach_the_dispatcher() {
    let (db, _dir) = temp_db().await;
    let codec = MagnumCodec::new(db);
    match codec
        .decode_request(wire("federation_create", json!({"create_timeout": 1})))
        .await
        .unwrap()
    {
        Decoded::Answered(Err(RpcError::Remote(r))) => {
            assert_eq!(r.kind, magnum_core::ErrorKind::Internal)
        }
        other => panic!("{other:?}"),
    }
    let m = dispatched(
        codec
            .decode_request(wire("echo", json!({"message": "hi"})))
            .await
            .unwrap(),
    );
    assert_eq!(m.args, json!({"message": "hi"}));
    // Missing clusters surface as the domain's not-found.
    let err = codec
        .encode_request(&msg(
            m::CREDENTIAL_ROTATE,
            ClusterRef {
                cluster_uuid: CLUSTER_UUID.into(),
            },
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RpcError::Remote(r) if r.kind == magnum_core::ErrorKind::NotFound),
        "{err:?}"
    );
    // A newer object version than ours is refused.
    let mut newer = spec_cluster();
    newer[KEY_VERSION] = json!("1.25");
    assert!(
        codec
            .decode_request(wire(m::CREDENTIAL_ROTATE, json!({"cluster": newer})))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn upstream_hydrates_every_argument_we_send() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let codec = MagnumCodec::new(db);
    let mut sent = Vec::new();
    for (ours, _) in our_messages(&s) {
        let w = codec.encode_request(&ours).await.unwrap();
        for v in w.args.values() {
            if is_primitive(v) {
                sent.push(v.clone());
            }
        }
    }
    let Some(theirs) = upstream("hydrate", &json!(sent)) else {
        return;
    };
    for (ours, t) in sent.iter().zip(theirs.as_array().unwrap()) {
        assert!(t.get("error").is_none(), "{t}");
        assert_eq!(normalized(&t["primitive"]), normalized(ours));
    }
}

#[tokio::test]
async fn upstreams_new_cluster_creates_through_our_decoder() {
    let (db, _dir) = temp_db().await;
    db.cluster_templates().create(template_row()).await.unwrap();
    // Built by upstream's own object layer, as its API builds it.
    let Some(cluster) = upstream(
        "build",
        &json!({"name": "Cluster", "fields": {
            "uuid": CLUSTER_UUID, "name": "py", "project_id": PROJECT, "user_id": USER,
            "cluster_template_id": TEMPLATE_UUID, "keypair": null, "labels": {},
            "docker_volume_size": 5, "master_flavor_id": null, "flavor_id": null,
            "create_timeout": 60, "discovery_url": null, "floating_ip_enabled": false,
            "master_lb_enabled": false, "coe_version": null, "container_version": null}}),
    ) else {
        return;
    };
    let codec = MagnumCodec::new(db.clone());
    let req = wire(
        m::CLUSTER_CREATE,
        json!({"cluster": cluster, "master_count": 3, "node_count": 1, "create_timeout": 60}),
    );
    let back = dispatched(codec.decode_request(req).await.unwrap());
    conductor_inserts(&db, &back).await;
    let c = db
        .clusters()
        .get_by_uuid(&system(), CLUSTER_UUID)
        .await
        .unwrap();
    assert_eq!(c.floating_ip_enabled, Some(false));
    assert_eq!(c.docker_volume_size, Some(5));
    let ngs = db
        .nodegroups()
        .for_clusters(&[CLUSTER_UUID.to_owned()])
        .await
        .unwrap();
    assert_eq!(ngs[0].node_count, Some(3));
    assert_eq!(ngs[0].docker_volume_size, Some(5));
    assert_eq!(ngs[1].flavor_id.as_deref(), Some("m1.large"));
}

#[tokio::test]
async fn the_users_token_travels_only_to_python_conductors() {
    let (db, _dir) = temp_db().await;
    let body = std::sync::Arc::new(json!({"token": {"user": {"id": "u"}, "catalog": []}}));
    let mut with_token = msg(
        m::CLUSTER_DELETE,
        magnum_rpc::ClusterRef {
            cluster_uuid: CLUSTER_UUID.into(),
        },
    );
    with_token.context.user_token = Some(magnum_core::UserToken::new("gAAAAAtoken", body.clone()));
    // Between our own processes: no token.
    let ours = MagnumCodec::new(db.clone());
    let w = ours.encode_request(&with_token).await.unwrap();
    assert_eq!(w.context["auth_token"], Value::Null);
    assert_eq!(w.context["auth_token_info"], Value::Null);
    // A Python conductor acts for the user with the user's token, as upstream's API sends it.
    let upstream = MagnumCodec::new(db).with_create_cluster_in_conductor(true);
    let w = upstream.encode_request(&with_token).await.unwrap();
    assert_eq!(w.context["auth_token"], "gAAAAAtoken");
    assert_eq!(w.context["auth_token_info"], *body);
    // Never in the context's Debug form.
    assert!(!format!("{:?}", with_token.context).contains("gAAAAAtoken"));
}
