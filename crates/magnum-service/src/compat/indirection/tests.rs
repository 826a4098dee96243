//! The indirection endpoint on SQLite, and upstream's own client applying our answers when
//! MAGNUM_TEST_UPSTREAM=1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use serde_json::json;

use super::*;
use crate::compat::rows::tests::{
    CLUSTER_UUID, PROJECT, TEMPLATE_UUID, normalized, seed, spec_cluster, temp_db, upstream,
};
use magnum_rpc::oslo::objects::{CERTIFICATE, KEY_DATA, KEY_VERSION};

fn admin() -> RequestContext {
    RequestContext::admin_all_tenants()
}

fn versions() -> Value {
    json!({"Cluster": "1.24", "ClusterTemplate": "1.21"})
}

fn class_call(name: &str, method: &str, args: Value, kwargs: Value) -> Map<String, Value> {
    json!({"objname": name, "objmethod": method,
           "object_versions": {name: class(name).unwrap().version.to_string()},
           "args": args, "kwargs": kwargs})
    .as_object()
    .unwrap()
    .clone()
}

fn instance_call(obj: &Object, method: &str) -> Map<String, Value> {
    json!({"objinst": obj.to_primitive(), "objmethod": method, "args": [], "kwargs": {}})
        .as_object()
        .unwrap()
        .clone()
}

async fn call(db: &Database, method: &str, args: &Map<String, Value>) -> Value {
    answer(db, &admin(), method, args).await.unwrap()
}

fn kind(r: Result<Value, RpcError>) -> magnum_core::ErrorKind {
    match r {
        Err(RpcError::Remote(e)) => e.kind,
        other => panic!("expected a failure: {other:?}"),
    }
}

#[tokio::test]
async fn class_actions_answer_from_the_repositories() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let cluster = rows::cluster(&s.cluster).unwrap();
    // §15.6: get_by_uuid with the manifest of Cluster and its template.
    let mut req = class_call("Cluster", "get_by_uuid", json!([CLUSTER_UUID]), json!({}));
    req.insert("object_versions".into(), versions());
    assert_eq!(
        call(&db, OBJECT_CLASS_ACTION_VERSIONS, &req).await,
        cluster.to_primitive()
    );
    // An older caller gets its own version back.
    req.insert("object_versions".into(), json!({"Cluster": "1.23"}));
    let old = call(&db, OBJECT_CLASS_ACTION_VERSIONS, &req).await;
    assert_eq!(old[KEY_VERSION], "1.23");
    assert_eq!(old[KEY_DATA], cluster.to_primitive()[KEY_DATA]);
    // A newer one is refused.
    req.insert("object_versions".into(), json!({"Cluster": "1.25"}));
    kind(answer(&db, &admin(), OBJECT_CLASS_ACTION_VERSIONS, &req).await);

    let cases: Vec<(Map<String, Value>, Value)> = vec![
        (
            class_call("Cluster", "get", json!([s.cluster.id]), json!({})),
            cluster.to_primitive(),
        ),
        (
            class_call("Cluster", "get", json!([CLUSTER_UUID]), json!({})),
            cluster.to_primitive(),
        ),
        (
            class_call(
                "Cluster",
                "get_by_name",
                json!([]),
                json!({"name": "prod-k8s"}),
            ),
            cluster.to_primitive(),
        ),
        (
            class_call(
                "Cluster",
                "list",
                json!([10]),
                json!({"sort_key": "name", "sort_dir": "desc", "filters": {"status": ["CREATE_COMPLETE"], "node_count": 2}}),
            ),
            json!([cluster.to_primitive()]),
        ),
        (
            class_call(
                "Cluster",
                "get_count_all",
                json!([{"master_count": 2}]),
                json!({}),
            ),
            json!(0),
        ),
        (
            class_call("Cluster", "get_stats", json!([PROJECT]), json!({})),
            json!([1, 3]),
        ),
        (
            class_call("ClusterTemplate", "get", json!(["k8s-1.30"]), json!({})),
            rows::cluster_template(&s.template).unwrap().to_primitive(),
        ),
        (
            class_call(
                "NodeGroup",
                "get",
                json!([CLUSTER_UUID, "default-worker"]),
                json!({}),
            ),
            rows::nodegroup(&s.worker).unwrap().to_primitive(),
        ),
        (
            class_call(
                "NodeGroup",
                "list",
                json!([CLUSTER_UUID]),
                json!({"filters": {"role": "master"}}),
            ),
            json!([rows::nodegroup(&s.master).unwrap().to_primitive()]),
        ),
        // Upstream's API sends project_id with a nodegroup list; its query drops the key.
        (
            class_call(
                "NodeGroup",
                "list",
                json!([CLUSTER_UUID]),
                json!({"filters": {"role": "master", "project_id": "someone-else"}}),
            ),
            json!([rows::nodegroup(&s.master).unwrap().to_primitive()]),
        ),
        (
            class_call(
                "NodeGroup",
                "get_count_all",
                json!([CLUSTER_UUID]),
                json!({}),
            ),
            json!(2),
        ),
        (
            class_call("Stats", "get_cluster_stats", json!([]), json!({})),
            rows::stats(1, 3).unwrap().to_primitive(),
        ),
        (
            class_call(
                "MagnumService",
                "get_by_host_and_binary",
                json!(["ctl-a", "magnum-conductor"]),
                json!({}),
            ),
            Value::Null,
        ),
        (
            class_call("Federation", "get_count_all", json!([]), json!({})),
            json!(0),
        ),
    ];
    for (req, want) in cases {
        assert_eq!(
            call(&db, OBJECT_CLASS_ACTION_VERSIONS, &req).await,
            want,
            "{req:?}"
        );
    }

    // Pagination: the marker travels as a full primitive.
    let req = class_call(
        "NodeGroup",
        "list",
        json!([CLUSTER_UUID, 1]),
        json!({"marker": rows::nodegroup(&s.master).unwrap().to_primitive()}),
    );
    assert_eq!(
        call(&db, OBJECT_CLASS_ACTION_VERSIONS, &req).await,
        json!([rows::nodegroup(&s.worker).unwrap().to_primitive()])
    );

    // Quotas through create, lookup, update and list.
    let mut q = Object::new(&QUOTA);
    q.set("project_id", json!(PROJECT)).unwrap();
    q.set("resource", json!("Cluster")).unwrap();
    q.set("hard_limit", json!(5)).unwrap();
    let created = call(&db, OBJECT_ACTION, &instance_call(&q, "create")).await;
    assert!(
        created[0].get("hard_limit").is_none(),
        "unchanged by create"
    );
    assert!(created[0]["id"].is_i64());
    let req = class_call(
        "Quota",
        "update_quota",
        json!([PROJECT, {"project_id": PROJECT, "resource": "Cluster", "hard_limit": 7}]),
        json!({}),
    );
    assert_eq!(
        call(&db, OBJECT_CLASS_ACTION_VERSIONS, &req).await[KEY_DATA]["hard_limit"],
        7
    );
    let req = class_call(
        "Quota",
        "get_quota_by_project_id_resource",
        json!([PROJECT, "Cluster"]),
        json!({}),
    );
    assert_eq!(
        call(&db, OBJECT_CLASS_ACTION_VERSIONS, &req).await[KEY_DATA]["hard_limit"],
        7
    );
    let req = class_call(
        "Quota",
        "list",
        json!([]),
        json!({"filters": {"project_id": PROJECT}}),
    );
    assert_eq!(
        call(&db, OBJECT_CLASS_ACTION_VERSIONS, &req)
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn failures_keep_their_kind() {
    let (db, _dir) = temp_db().await;
    seed(&db).await;
    let missing = "11111111-2222-4333-8444-555555555555";
    use magnum_core::ErrorKind as K;
    let cases = [
        (
            class_call("Cluster", "get_by_uuid", json!([missing]), json!({})),
            K::NotFound,
        ),
        (
            class_call("Cluster", "get", json!(["not-an-id"]), json!({})),
            K::Invalid,
        ),
        (
            class_call("Cluster", "fly", json!([]), json!({})),
            K::Internal,
        ),
        (
            class_call("Cluster", "get_by_uuid", json!([missing, 1]), json!({})),
            K::Internal,
        ),
        (
            class_call("Cluster", "get_by_uuid", json!([]), json!({"id": 1})),
            K::Internal,
        ),
        (
            class_call(
                "Cluster",
                "list",
                json!([]),
                json!({"filters": {"node_addresses": []}}),
            ),
            K::Internal,
        ),
        (
            class_call("Cluster", "list", json!([]), json!({"sort_dir": "up"})),
            K::Invalid,
        ),
    ];
    for (req, want) in cases {
        assert_eq!(
            kind(answer(&db, &admin(), OBJECT_CLASS_ACTION_VERSIONS, &req).await),
            want,
            "{req:?}"
        );
    }
    let mut req = class_call("Cluster", "get", json!([1]), json!({}));
    req.insert("objname".into(), json!("Bay"));
    kind(answer(&db, &admin(), OBJECT_CLASS_ACTION_VERSIONS, &req).await);
    let cert = Object::new(&CERTIFICATE);
    assert_eq!(
        kind(answer(&db, &admin(), OBJECT_ACTION, &instance_call(&cert, "save")).await),
        K::Internal
    );
    kind(answer(&db, &admin(), "object_fly", &Map::new()).await);
}

#[tokio::test]
async fn object_actions_write_through_and_report_updates() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let sys = admin();
    // §15.6: save with changes ["status"] answers [{"obj_what_changed": []}, null].
    let mut c = rows::cluster(&s.cluster).unwrap();
    c.set("status", json!("UPDATE_IN_PROGRESS")).unwrap();
    let r = call(&db, OBJECT_ACTION, &instance_call(&c, "save")).await;
    assert_eq!(r, json!([{"obj_what_changed": []}, null]));
    let stored = db.clusters().get_by_uuid(&sys, CLUSTER_UUID).await.unwrap();
    assert_eq!(
        stored.status.map(|s| s.as_str()),
        Some("UPDATE_IN_PROGRESS")
    );
    assert_eq!(stored.name, s.cluster.name);

    // refresh: fields that differ come back, marked changed.
    let stale = rows::cluster(&s.cluster).unwrap();
    let r = call(&db, OBJECT_ACTION, &instance_call(&stale, "refresh")).await;
    assert_eq!(r[0]["status"], "UPDATE_IN_PROGRESS");
    assert!(
        r[0]["obj_what_changed"]
            .as_array()
            .unwrap()
            .contains(&json!("status"))
    );

    // create: the new row's stored fields come back; nothing is left dirty.
    let mut ng = Object::new(&NODEGROUP);
    for (k, v) in [
        ("name", json!("extra")),
        ("cluster_id", json!(CLUSTER_UUID)),
        ("project_id", json!(PROJECT)),
        ("role", json!("worker")),
        ("node_count", json!(4)),
    ] {
        ng.set(k, v).unwrap();
    }
    let r = call(&db, OBJECT_ACTION, &instance_call(&ng, "create")).await;
    let updates = r[0].as_object().unwrap();
    for k in [
        "id",
        "uuid",
        "created_at",
        "labels",
        "is_default",
        "min_node_count",
    ] {
        assert!(updates.contains_key(k), "{k}: {updates:?}");
    }
    assert!(!updates.contains_key("node_count"), "unchanged");
    assert_eq!(updates["obj_what_changed"], json!([]));
    assert_eq!(r[1], Value::Null);
    let uuid = updates["uuid"].as_str().unwrap();
    let row = db
        .nodegroups()
        .get_by_uuid(&sys, CLUSTER_UUID, uuid)
        .await
        .unwrap();
    assert_eq!(row.node_count, Some(4));

    // destroy.
    let created = rows::nodegroup(&row).unwrap();
    let r = call(&db, OBJECT_ACTION, &instance_call(&created, "destroy")).await;
    assert_eq!(r, json!([{"obj_what_changed": []}, null]));
    assert!(
        db.nodegroups()
            .get_by_uuid(&sys, CLUSTER_UUID, uuid)
            .await
            .is_err()
    );

    // The heartbeat of a Python conductor using indirection.
    let svc = db
        .magnum_services()
        .create(Some("ctl-a"), "magnum-conductor")
        .await
        .unwrap();
    let obj = rows::magnum_service(&svc).unwrap();
    let r = call(&db, OBJECT_ACTION, &instance_call(&obj, "report_state_up")).await;
    assert_eq!(r[0], json!({"report_count": 1, "obj_what_changed": []}));
    let mut obj = obj;
    obj.set("disabled", json!(true)).unwrap();
    obj.set("disabled_reason", json!("maintenance")).unwrap();
    call(&db, OBJECT_ACTION, &instance_call(&obj, "save")).await;
    let svc = db
        .magnum_services()
        .get_by_host_and_binary(Some("ctl-a"), "magnum-conductor")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(svc.disabled, Some(true));
    assert_eq!(svc.report_count, 1);

    // Template save, then a template in use cannot be destroyed.
    let mut t = rows::cluster_template(&s.template).unwrap();
    t.set("name", json!("renamed")).unwrap();
    call(&db, OBJECT_ACTION, &instance_call(&t, "save")).await;
    let stored = db
        .cluster_templates()
        .get_by_uuid(&sys, TEMPLATE_UUID)
        .await
        .unwrap();
    assert_eq!(stored.name.as_deref(), Some("renamed"));
    assert_eq!(
        kind(answer(&db, &sys, OBJECT_ACTION, &instance_call(&t, "destroy")).await),
        magnum_core::ErrorKind::Invalid
    );

    // Backport: relabelled, changes kept.
    let mut c = Object::from_primitive(&spec_cluster()).unwrap();
    c.set("name", json!("n")).unwrap();
    let req = json!({"objinst": c.to_primitive(), "object_versions": {"Cluster": "1.20"}});
    let r = call(&db, OBJECT_BACKPORT_VERSIONS, req.as_object().unwrap()).await;
    assert_eq!(r, c.to_primitive_at(Version::new(1, 20)));
}

/// Asks upstream's client what it sends for each doc (answered with a dummy), answers those
/// requests ourselves, and lets upstream's client apply our answers: (ours, theirs) per doc.
async fn through_upstream(
    db: &Database,
    mode: &str,
    docs: Vec<Value>,
) -> Option<Vec<(Value, Value)>> {
    let probes: Vec<Value> = docs
        .iter()
        .map(|d| {
            let mut p = d.clone();
            p["reply"] = Value::Null;
            p
        })
        .collect();
    let asked = upstream(mode, &json!(probes))?;
    let mut applies = Vec::new();
    let mut ours = Vec::new();
    for (doc, asked) in docs.into_iter().zip(asked.as_array().unwrap()) {
        let request = &asked["request"];
        let answer = answer(
            db,
            &admin(),
            request["method"].as_str().unwrap(),
            request["args"].as_object().unwrap(),
        )
        .await
        .unwrap();
        let mut apply = doc;
        apply["reply"] = answer.clone();
        applies.push(apply);
        ours.push(answer);
    }
    let theirs = upstream(mode, &json!(applies))?;
    let theirs = theirs.as_array().unwrap().clone();
    for t in &theirs {
        assert!(t.get("error").is_none(), "{t}");
    }
    Some(ours.into_iter().zip(theirs).collect())
}

#[tokio::test]
async fn upstreams_client_applies_our_answers() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let calls = [
        ("Cluster", "get_by_uuid", json!([CLUSTER_UUID]), json!({})),
        ("Cluster", "get_by_name", json!(["prod-k8s"]), json!({})),
        (
            "Cluster",
            "list",
            json!([]),
            json!({"limit": 5, "sort_key": "id", "sort_dir": "asc", "filters": {"project_id": PROJECT}}),
        ),
        ("Cluster", "get_stats", json!([PROJECT]), json!({})),
        (
            "ClusterTemplate",
            "get_by_uuid",
            json!([TEMPLATE_UUID]),
            json!({}),
        ),
        ("NodeGroup", "list", json!([CLUSTER_UUID]), json!({})),
        ("Stats", "get_cluster_stats", json!([PROJECT]), json!({})),
    ];
    let docs = calls
        .iter()
        .map(|(name, method, args, kwargs)| {
            json!({"name": name, "method": method, "args": args, "kwargs": kwargs})
        })
        .collect();
    let Some(answers) = through_upstream(&db, "class_action", docs).await else {
        return;
    };
    // Python hands our reply to its caller unchanged (tuples become lists).
    let norm = |v: &Value| match v {
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => normalized(other),
    };
    for ((name, method, ..), (ours, theirs)) in calls.iter().zip(answers) {
        assert_eq!(norm(&theirs["result"]), norm(&ours), "{name}.{method}");
    }

    // A Python API saving a cluster, then creating a nodegroup, through us.
    let mut c = rows::cluster(&s.cluster).unwrap();
    c.set("status", json!("UPDATE_IN_PROGRESS")).unwrap();
    c.set("labels", json!({"x": "y"})).unwrap();
    let mut ng = Object::new(&NODEGROUP);
    for (k, v) in [
        ("name", json!("py")),
        ("cluster_id", json!(CLUSTER_UUID)),
        ("project_id", json!(PROJECT)),
        ("role", json!("worker")),
    ] {
        ng.set(k, v).unwrap();
    }
    let docs = vec![
        json!({"objinst": c.to_primitive(), "method": "save"}),
        json!({"objinst": ng.to_primitive(), "method": "create"}),
    ];
    let Some(answers) = through_upstream(&db, "object_action", docs).await else {
        return;
    };
    let (saved, theirs) = &answers[0];
    assert_eq!(saved, &json!([{"obj_what_changed": []}, null]));
    assert_eq!(theirs["changes"], json!([]));
    let stored = db
        .clusters()
        .get_by_uuid(&admin(), CLUSTER_UUID)
        .await
        .unwrap();
    assert_eq!(stored.labels.as_deref(), Some(r#"{"x": "y"}"#));
    // The Python object ends up with the stored id and nothing dirty.
    let (created, theirs) = &answers[1];
    assert_eq!(theirs["object"][KEY_DATA]["id"], created[0]["id"]);
    assert_eq!(theirs["changes"], json!([]));
}
