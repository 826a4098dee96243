//! Primitives (rpc-wire.md §11), coercion and row mapping; against upstream's own object
//! layer when MAGNUM_TEST_UPSTREAM=1. Also the fixtures the codec and indirection tests share.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use magnum_db::Database;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::nodegroup::NodeGroup;
use serde_json::json;

use super::{self as rows, changed_row, new_row, raw_fields};
use magnum_rpc::oslo::objects::*;

// ---------------------------------------------------------------------------------------
// Shared fixtures.

/// A fresh SQLite database at head; keep the directory alive as long as the database.
pub(crate) async fn temp_db() -> (Database, tempfile::TempDir) {
    magnum_testkit::db::sqlite_at_head().await
}

pub(crate) const CLUSTER_UUID: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
pub(crate) const TEMPLATE_UUID: &str = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
pub(crate) const PROJECT: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90";
pub(crate) const USER: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// The stored rows of the §15.2 example: a template, the cluster, its two nodegroups.
pub(crate) struct Seed {
    pub template: ClusterTemplate,
    pub cluster: Cluster,
    pub master: NodeGroup,
    pub worker: NodeGroup,
}

pub(crate) fn template_row() -> ClusterTemplate {
    ClusterTemplate {
        uuid: Some(TEMPLATE_UUID.into()),
        name: Some("k8s-1.30".into()),
        project_id: Some(PROJECT.into()),
        user_id: Some(USER.into()),
        image_id: Some("fedora-coreos-40".into()),
        flavor_id: Some("m1.large".into()),
        master_flavor_id: Some("m1.medium".into()),
        keypair_id: Some("alice-key".into()),
        external_network_id: Some("public".into()),
        docker_volume_size: Some(20),
        coe: Some("kubernetes".into()),
        labels: Some(r#"{"kube_tag": "v1.30.4"}"#.into()),
        server_type: Some("vm".into()),
        driver: Some("k8s_capi_helm_v1".into()),
        ..ClusterTemplate::default()
    }
}

pub(crate) fn cluster_row() -> Cluster {
    Cluster {
        uuid: Some(CLUSTER_UUID.into()),
        name: Some("prod-k8s".into()),
        project_id: Some(PROJECT.into()),
        user_id: Some(USER.into()),
        cluster_template_id: Some(TEMPLATE_UUID.into()),
        keypair: Some("alice-key".into()),
        labels: Some(r#"{"kube_tag": "v1.30.4", "auto_healing_enabled": "true"}"#.into()),
        master_flavor_id: Some("m1.medium".into()),
        flavor_id: Some("m1.large".into()),
        status: "CREATE_COMPLETE".parse().ok(),
        health_status: "HEALTHY".parse().ok(),
        health_status_reason: Some("{}".into()),
        create_timeout: Some(60),
        api_address: Some("https://203.0.113.10:6443".into()),
        ca_cert_ref: Some("1b4e28ba-2fa1-41d2-883f-0016d3cca427".into()),
        magnum_cert_ref: Some("6fa459ea-ee8a-4ca4-894e-db77e160355e".into()),
        coe_version: Some("v1.30.4".into()),
        container_version: Some("1.7.20".into()),
        floating_ip_enabled: Some(true),
        master_lb_enabled: Some(false),
        ..Cluster::default()
    }
}

pub(crate) fn nodegroup_row(role: &str, count: i32) -> NodeGroup {
    NodeGroup {
        uuid: uuid::Uuid::new_v4().to_string(),
        name: format!("default-{role}"),
        cluster_id: CLUSTER_UUID.into(),
        project_id: PROJECT.into(),
        labels: Some(r#"{"kube_tag": "v1.30.4"}"#.into()),
        flavor_id: Some("m1.large".into()),
        image_id: Some("fedora-coreos-40".into()),
        node_addresses: Some(r#"["10.0.0.11"]"#.into()),
        node_count: Some(count),
        min_node_count: Some(0),
        role: Some(role.into()),
        is_default: Some(true),
        status: "CREATE_COMPLETE".parse().ok(),
        node_labels: Some("{}".into()),
        node_taints: Some(
            r#"[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]"#.into(),
        ),
        ..NodeGroup::default()
    }
}

pub(crate) async fn seed(db: &Database) -> Seed {
    let template = db.cluster_templates().create(template_row()).await.unwrap();
    let cluster = db
        .clusters()
        .create_with_nodegroups(
            cluster_row(),
            vec![nodegroup_row("master", 1), nodegroup_row("worker", 2)],
            None,
        )
        .await
        .unwrap();
    let mut ngs = db
        .nodegroups()
        .for_clusters(&[CLUSTER_UUID.to_owned()])
        .await
        .unwrap();
    let worker = ngs.pop().unwrap();
    let master = ngs.pop().unwrap();
    assert_eq!(master.role.as_ref().map(|r| r.as_str()), Some("master"));
    Seed {
        template,
        cluster,
        master,
        worker,
    }
}

/// Runs `test-support/upstream/objects.py MODE` with `input` on stdin and returns its JSON
/// answer; None (test skipped) unless MAGNUM_TEST_UPSTREAM=1. A run that requires every
/// test (MAGNUM_TEST_REQUIRE_ALL=1) fails instead of skipping.
pub(crate) fn upstream(mode: &str, input: &serde_json::Value) -> Option<serde_json::Value> {
    if !magnum_testkit::flag("MAGNUM_TEST_UPSTREAM") {
        magnum_testkit::skip(
            "MAGNUM_TEST_UPSTREAM is not 1 (set it to compare with upstream Magnum's objects)",
        );
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test-support/upstream");
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    let venv = VENV.get_or_init(|| {
        let status = Command::new("bash")
            .arg(dir.join("setup-venv.sh"))
            .status()
            .expect("run setup-venv.sh");
        assert!(
            status.success(),
            "test-support/upstream/setup-venv.sh failed"
        );
        PathBuf::from(
            std::env::var("MAGNUM_TEST_UPSTREAM_VENV")
                .unwrap_or_else(|_| "/var/tmp/magnum-rs-upstream-venv".into()),
        )
    });
    let mut child = Command::new(venv.join("bin/python"))
        .arg(dir.join("objects.py"))
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start objects.py");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.to_string().as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "objects.py {mode} failed");
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// A primitive with its `changes` sorted, so Python's set order does not matter.
pub(crate) fn normalized(p: &serde_json::Value) -> serde_json::Value {
    let mut p = p.clone();
    if let Some(c) = p.get_mut(KEY_CHANGES).and_then(|c| c.as_array_mut()) {
        c.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
    if let Some(data) = p.get_mut(KEY_DATA).and_then(|d| d.as_object_mut()) {
        for v in data.values_mut() {
            if is_primitive(v) {
                *v = normalized(v);
            }
        }
    }
    p
}

/// The §15.2 Cluster primitive, byte for byte as the spec shows it.
pub(crate) fn spec_cluster() -> serde_json::Value {
    json!({
      "magnum_object.name": "Cluster",
      "magnum_object.namespace": "magnum",
      "magnum_object.version": "1.24",
      "magnum_object.data": {
        "id": 42, "uuid": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "name": "prod-k8s",
        "project_id": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
        "user_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "cluster_template_id": "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
        "keypair": "alice-key", "docker_volume_size": null,
        "labels": {"kube_tag": "v1.30.4", "auto_healing_enabled": "true"},
        "master_flavor_id": "m1.medium", "flavor_id": "m1.large", "stack_id": null,
        "status": "CREATE_COMPLETE", "status_reason": null,
        "health_status": "HEALTHY", "health_status_reason": {},
        "create_timeout": 60, "api_address": "https://203.0.113.10:6443", "discovery_url": null,
        "ca_cert_ref": "1b4e28ba-2fa1-41d2-883f-0016d3cca427",
        "magnum_cert_ref": "6fa459ea-ee8a-4ca4-894e-db77e160355e",
        "etcd_ca_cert_ref": null, "front_proxy_ca_cert_ref": null,
        "coe_version": "v1.30.4", "container_version": "1.7.20",
        "fixed_network": null, "fixed_subnet": null,
        "floating_ip_enabled": true, "master_lb_enabled": false,
        "created_at": "2026-07-01T08:00:00Z", "updated_at": "2026-07-02T09:15:30Z"
      }
    })
}

pub(crate) const CSR: &str =
    "-----BEGIN CERTIFICATE REQUEST-----\nMIIB...snip...\n-----END CERTIFICATE REQUEST-----\n";

pub(crate) fn spec_certificate() -> serde_json::Value {
    json!({
      "magnum_object.name": "Certificate",
      "magnum_object.namespace": "magnum",
      "magnum_object.version": "1.2",
      "magnum_object.data": {
        "project_id": PROJECT,
        "user_id": USER,
        "cluster_uuid": CLUSTER_UUID,
        "csr": CSR,
        "ca_cert_type": "kubernetes"
      },
      "magnum_object.changes": ["user_id", "ca_cert_type", "csr", "project_id", "cluster_uuid"]
    })
}

// ---------------------------------------------------------------------------------------
// Primitives.

#[test]
fn the_spec_cluster_primitive_round_trips_unchanged() {
    let obj = Object::from_primitive(&spec_cluster()).unwrap();
    assert_eq!(obj.name(), "Cluster");
    assert!(obj.changes().is_empty());
    assert!(!obj.is_set("cluster_template"));
    assert_eq!(obj.to_primitive(), spec_cluster());
    // No changes key at all when nothing changed (§11.1).
    assert!(obj.to_primitive().get(KEY_CHANGES).is_none());
}

#[test]
fn a_new_certificate_lists_every_set_field_as_changed() {
    let obj = Object::from_primitive(&spec_certificate()).unwrap();
    assert_eq!(
        obj.changes(),
        [
            "project_id",
            "user_id",
            "cluster_uuid",
            "csr",
            "ca_cert_type"
        ]
    );
    assert_eq!(
        normalized(&obj.to_primitive()),
        normalized(&spec_certificate())
    );
    let mut built = Object::new(&CERTIFICATE);
    for (k, v) in spec_certificate()[KEY_DATA].as_object().unwrap() {
        built.set(k, v.clone()).unwrap();
    }
    assert_eq!(built, obj);
}

#[test]
fn versions_follow_oslo_compatibility() {
    assert_eq!(Version::parse("1.24"), Some(Version::new(1, 24)));
    assert_eq!(Version::parse("1.24.1"), Some(Version::new(1, 24)));
    assert_eq!(Version::parse("1"), Some(Version::new(1, 0)));
    assert_eq!(Version::parse("1.x"), None);
    let at = |v: &str| {
        let mut p = spec_cluster();
        p[KEY_VERSION] = json!(v);
        Object::from_primitive(&p)
    };
    // Older minors hydrate and keep the version they came with.
    assert_eq!(at("1.23").unwrap().version(), Version::new(1, 23));
    assert_eq!(at("1.23").unwrap().to_primitive()[KEY_VERSION], "1.23");
    assert!(at("1.24.1").is_ok());
    for bad in ["1.25", "2.0", "0.24"] {
        assert!(
            matches!(at(bad), Err(ObjectError::IncompatibleVersion { .. })),
            "{bad}"
        );
    }
    // Every class at the version of §11.2.
    let want = [
        ("Cluster", "1.24"),
        ("ClusterTemplate", "1.21"),
        ("NodeGroup", "1.2"),
        ("Certificate", "1.2"),
        ("X509KeyPair", "1.2"),
        ("MagnumService", "1.0"),
        ("Quota", "1.0"),
        ("Federation", "1.0"),
        ("Stats", "1.0"),
    ];
    for (name, v) in want {
        assert_eq!(class(name).unwrap().version.to_string(), v);
    }
}

#[test]
fn foreign_namespaces_and_unknown_classes_are_refused() {
    let mut p = spec_cluster();
    p[KEY_NAMESPACE] = json!("nova");
    assert!(matches!(
        Object::from_primitive(&p),
        Err(ObjectError::Unsupported(_))
    ));
    let mut p = spec_cluster();
    p[KEY_NAME] = json!("Bay");
    assert!(matches!(
        Object::from_primitive(&p),
        Err(ObjectError::Unsupported(_))
    ));
    assert!(Object::from_primitive(&json!({"magnum_object.name": "Cluster"})).is_err());
    assert!(Object::from_primitive_of(&NODEGROUP, &spec_cluster()).is_err());
}

#[test]
fn values_are_coerced_as_oslo_coerces_them() {
    let mut c = Object::new(&CLUSTER);
    // Non-nullable fields with defaults take them for None.
    c.set("floating_ip_enabled", json!(null)).unwrap();
    c.set("master_lb_enabled", json!(null)).unwrap();
    assert_eq!(c.get("floating_ip_enabled"), Some(&json!(true)));
    assert_eq!(c.get("master_lb_enabled"), Some(&json!(false)));
    // Non-nullable without a default refuses None.
    assert!(c.set("id", json!(null)).is_err());
    c.set("id", json!("42")).unwrap();
    assert_eq!(c.get("id"), Some(&json!(42)));
    // Dicts of strings get str() values.
    c.set("labels", json!({"a": 1, "b": true, "c": 1.0, "d": "x"}))
        .unwrap();
    assert_eq!(
        c.get("labels"),
        Some(&json!({"a": "1", "b": "True", "c": "1.0", "d": "x"}))
    );
    assert!(c.set("labels", json!({"a": null})).is_err());
    assert!(c.set("labels", json!(["a"])).is_err());
    // Enums.
    assert!(c.set("status", json!("BOGUS")).is_err());
    assert!(c.set("health_status", json!("UNKNOWN")).is_ok());
    let mut t = Object::new(&CLUSTER_TEMPLATE);
    assert!(t.set("coe", json!("swarm")).is_err());
    assert!(t.set("coe", json!("kubernetes")).is_ok());
    let mut f = Object::new(&FEDERATION);
    assert!(f.set("status", json!("ROLLBACK_COMPLETE")).is_err());
    assert!(f.set("status", json!("DELETE_COMPLETE")).is_ok());
    // Times: seconds precision, Z for UTC, other offsets kept.
    for (given, want) in [
        ("2026-07-01T08:00:00.123456", "2026-07-01T08:00:00Z"),
        ("2026-07-01 08:00:00", "2026-07-01T08:00:00Z"),
        ("2026-07-01T08:00:00+00:00", "2026-07-01T08:00:00Z"),
        ("2026-07-01T08:00:00.5+02:00", "2026-07-01T08:00:00+02:00"),
    ] {
        c.set("created_at", json!(given)).unwrap();
        assert_eq!(c.get("created_at"), Some(&json!(want)), "{given}");
    }
    assert!(c.set("created_at", json!("yesterday")).is_err());
    assert_eq!(
        naive_utc("2026-07-01T08:00:00+02:00").unwrap().to_string(),
        "2026-07-01 06:00:00"
    );
    // Nodegroups: node_count and min_node_count default, role is required.
    let mut ng = Object::new(&NODEGROUP);
    ng.set("node_count", json!(null)).unwrap();
    ng.set("min_node_count", json!(null)).unwrap();
    assert_eq!(ng.get("node_count"), Some(&json!(1)));
    assert_eq!(ng.get("min_node_count"), Some(&json!(0)));
    assert!(ng.set("role", json!(null)).is_err());
    assert!(
        ng.set("node_taints", json!([{"key": "k", "effect": 1}]))
            .is_ok()
    );
    assert!(ng.set("node_taints", json!(["k"])).is_err());
    // Unknown fields are refused when set, ignored when hydrated.
    assert!(c.set("node_count", json!(3)).is_err());
    let mut p = spec_cluster();
    p[KEY_DATA]["node_count"] = json!(3);
    p[KEY_CHANGES] = json!(["node_count", "name"]);
    let obj = Object::from_primitive(&p).unwrap();
    assert!(!obj.is_set("node_count"));
    assert_eq!(obj.changes(), ["name"]);
}

#[test]
fn a_nested_template_hydrates_and_must_be_a_template() {
    let mut t = Object::new(&CLUSTER_TEMPLATE);
    t.load("uuid", json!(TEMPLATE_UUID)).unwrap();
    t.load("tls_disabled", json!(false)).unwrap();
    let mut p = spec_cluster();
    p[KEY_DATA]["cluster_template"] = t.to_primitive();
    let obj = Object::from_primitive(&p).unwrap();
    assert_eq!(obj.get("cluster_template"), Some(&t.to_primitive()));
    assert_eq!(obj.to_primitive(), p);
    p[KEY_DATA]["cluster_template"] = Object::new(&QUOTA).to_primitive();
    assert!(Object::from_primitive(&p).is_err());
}

// ---------------------------------------------------------------------------------------
// Rows.

#[test]
fn a_cluster_row_loads_like_from_db_object() {
    let mut row = cluster_row();
    row.id = 42;
    row.floating_ip_enabled = None;
    row.master_lb_enabled = None;
    row.created_at = chrono::NaiveDate::from_ymd_opt(2026, 7, 1)
        .unwrap()
        .and_hms_opt(8, 0, 0);
    row.updated_at = chrono::NaiveDate::from_ymd_opt(2026, 7, 2)
        .unwrap()
        .and_hms_opt(9, 15, 30);
    let obj = rows::cluster(&row).unwrap();
    // Exactly the §15.2 primitive: every column field, NULL booleans at their defaults.
    assert_eq!(obj.to_primitive(), spec_cluster());
    // Legacy NULL or garbage JSON reads as None.
    row.labels = Some("not json".into());
    row.health_status_reason = None;
    let obj = rows::cluster(&row).unwrap();
    assert_eq!(obj.get("labels"), Some(&json!(null)));
    assert_eq!(obj.get("health_status_reason"), Some(&json!(null)));
}

#[test]
fn objects_write_back_into_rows() {
    let row = cluster_row();
    let obj = rows::cluster(&row).unwrap();
    let back: Cluster = new_row(&obj).unwrap();
    assert_eq!(back, row);
    // save(): only changed fields move; JSON columns written as Python writes them.
    let mut obj = obj;
    obj.set("labels", json!({"b": "2", "a": "1"})).unwrap();
    obj.set("health_status_reason", json!(null)).unwrap();
    obj.set("status", json!("UPDATE_IN_PROGRESS")).unwrap();
    obj.load("name", json!("not saved")).unwrap();
    let saved = changed_row(&obj, &row).unwrap();
    assert_eq!(saved.labels.as_deref(), Some(r#"{"b": "2", "a": "1"}"#));
    assert_eq!(saved.health_status_reason.as_deref(), Some("{}"));
    assert_eq!(saved.status.map(|s| s.as_str()), Some("UPDATE_IN_PROGRESS"));
    assert_eq!(saved.name, row.name);
    // A non-nullable column refuses None.
    let mut ng = rows::nodegroup(&nodegroup_row("worker", 1)).unwrap();
    ng.set("node_count", json!(5)).unwrap();
    let ng_row: NodeGroup = new_row(&ng).unwrap();
    assert_eq!(ng_row.node_count, Some(5));
    assert_eq!(
        ng_row.node_taints.as_deref(),
        Some(r#"[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]"#)
    );
}

#[tokio::test]
async fn stored_rows_of_every_table_round_trip() {
    let (db, _dir) = temp_db().await;
    let s = seed(&db).await;
    let t = rows::cluster_template(&s.template).unwrap();
    assert_eq!(t.get("labels"), Some(&json!({"kube_tag": "v1.30.4"})));
    assert_eq!(t.get("public"), Some(&json!(false)));
    assert_eq!(
        new_row::<ClusterTemplate>(&t).unwrap().labels,
        s.template.labels
    );
    let c = rows::cluster(&s.cluster).unwrap();
    assert_eq!(c.int("id"), Some(i64::from(s.cluster.id)));
    assert!(c.str("created_at").unwrap().ends_with('Z'));
    let ng = rows::nodegroup(&s.worker).unwrap();
    assert_eq!(ng.get("node_addresses"), Some(&json!(["10.0.0.11"])));
    assert_eq!(ng.get("node_count"), Some(&json!(2)));
    let k = db
        .x509keypairs()
        .create(magnum_db::repo::x509keypair::X509KeyPair {
            certificate: Some("PEM".into()),
            project_id: Some(PROJECT.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let k = rows::x509keypair(&k).unwrap();
    assert_eq!(k.str("certificate"), Some("PEM"));
    let svc = db
        .magnum_services()
        .report_state_up(Some("ctl-a"), "magnum-conductor")
        .await
        .unwrap();
    let svc = rows::magnum_service(&svc).unwrap();
    assert_eq!(svc.get("report_count"), Some(&json!(1)));
    assert_eq!(svc.get("disabled"), Some(&json!(false)));
    let q = rows::quota(&db.quotas().create(PROJECT, "Cluster", 10).await.unwrap()).unwrap();
    assert_eq!(q.get("hard_limit"), Some(&json!(10)));
    let f = db
        .federations()
        .create(magnum_db::repo::federation::Federation {
            name: Some("fed".into()),
            member_ids: Some(format!(r#"["{CLUSTER_UUID}"]"#)),
            status: "CREATE_IN_PROGRESS".parse().ok(),
            ..Default::default()
        })
        .await
        .unwrap();
    let f = rows::federation(&f).unwrap();
    assert_eq!(f.get("member_ids"), Some(&json!([CLUSTER_UUID])));
    assert_eq!(f.get("properties"), Some(&json!({})));
    let st = rows::stats(1, 3).unwrap();
    assert_eq!(
        st.to_primitive(),
        json!({"magnum_object.name": "Stats", "magnum_object.namespace": "magnum",
               "magnum_object.version": "1.0", "magnum_object.data": {"clusters": 1, "nodes": 3},
               "magnum_object.changes": ["clusters", "nodes"]})
    );
}

// ---------------------------------------------------------------------------------------
// Against upstream's object layer.

/// Our primitive of every seeded row, and the raw rows upstream's loader gets.
async fn every_object(db: &Database) -> Vec<(Object, serde_json::Value)> {
    let s = seed(db).await;
    let raw = |class: &'static Class, fields: Vec<(&'static str, serde_json::Value)>| {
        let row: serde_json::Map<_, _> =
            fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        json!({"name": class.name, "row": row})
    };
    let k = db
        .x509keypairs()
        .create(magnum_db::repo::x509keypair::X509KeyPair {
            certificate: Some("PEM".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let svc = db
        .magnum_services()
        .report_state_up(Some("ctl-a"), "magnum-conductor")
        .await
        .unwrap();
    let q = db.quotas().create(PROJECT, "Cluster", 10).await.unwrap();
    let f = db
        .federations()
        .create(magnum_db::repo::federation::Federation {
            name: Some("fed".into()),
            status: "CREATE_IN_PROGRESS".parse().ok(),
            properties: Some(r#"{"dns-zone": "example.com."}"#.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    vec![
        (
            rows::cluster(&s.cluster).unwrap(),
            raw(&CLUSTER, raw_fields(&CLUSTER, &s.cluster)),
        ),
        (
            rows::cluster_template(&s.template).unwrap(),
            raw(
                &CLUSTER_TEMPLATE,
                raw_fields(&CLUSTER_TEMPLATE, &s.template),
            ),
        ),
        (
            rows::nodegroup(&s.master).unwrap(),
            raw(&NODEGROUP, raw_fields(&NODEGROUP, &s.master)),
        ),
        (
            rows::nodegroup(&s.worker).unwrap(),
            raw(&NODEGROUP, raw_fields(&NODEGROUP, &s.worker)),
        ),
        (
            rows::x509keypair(&k).unwrap(),
            raw(&X509KEYPAIR, raw_fields(&X509KEYPAIR, &k)),
        ),
        (
            rows::magnum_service(&svc).unwrap(),
            raw(&MAGNUM_SERVICE, raw_fields(&MAGNUM_SERVICE, &svc)),
        ),
        (
            rows::quota(&q).unwrap(),
            raw(&QUOTA, raw_fields(&QUOTA, &q)),
        ),
        (
            rows::federation(&f).unwrap(),
            raw(&FEDERATION, raw_fields(&FEDERATION, &f)),
        ),
    ]
}

#[tokio::test]
async fn upstream_hydrates_our_primitives_and_serializes_them_the_same() {
    let (db, _dir) = temp_db().await;
    let objs = every_object(&db).await;
    let mut ours: Vec<serde_json::Value> = objs.iter().map(|(o, _)| o.to_primitive()).collect();
    // Changed and nested objects too: a new certificate, stats, a cluster carrying its
    // template, a patched nodegroup.
    ours.push(spec_certificate());
    ours.push(rows::stats(2, 5).unwrap().to_primitive());
    let mut with_template = objs[0].0.clone();
    with_template
        .load("cluster_template", objs[1].0.to_primitive())
        .unwrap();
    ours.push(with_template.to_primitive());
    let mut patched = objs[3].0.clone();
    patched.set("max_node_count", json!(7)).unwrap();
    patched.set("node_labels", json!({"gpu": "true"})).unwrap();
    ours.push(patched.to_primitive());
    let Some(theirs) = upstream("hydrate", &json!(ours)) else {
        return;
    };
    let theirs = theirs.as_array().unwrap();
    assert_eq!(theirs.len(), ours.len());
    for (o, t) in ours.iter().zip(theirs) {
        assert!(t.get("error").is_none(), "{t}");
        assert_eq!(normalized(&t["primitive"]), normalized(o));
        let ours_changes = Object::from_primitive(o).unwrap().changes();
        let mut ours_changes: Vec<&str> = ours_changes.into_iter().collect();
        ours_changes.sort_unstable();
        assert_eq!(t["changes"], json!(ours_changes));
    }
}

#[tokio::test]
async fn our_row_mapping_equals_upstreams_loader() {
    let (db, _dir) = temp_db().await;
    let objs = every_object(&db).await;
    let raws: Vec<serde_json::Value> = objs.iter().map(|(_, r)| r.clone()).collect();
    let Some(theirs) = upstream("from_db", &json!(raws)) else {
        return;
    };
    for ((ours, _), theirs) in objs.iter().zip(theirs.as_array().unwrap()) {
        assert_eq!(theirs, &ours.to_primitive(), "{}", ours.name());
    }
}

#[test]
fn we_read_upstreams_new_objects() {
    let cases = [
        json!({"name": "Cluster", "fields": {
            "uuid": CLUSTER_UUID, "name": "c", "labels": {"a": "1"}, "master_lb_enabled": null,
            "docker_volume_size": null, "create_timeout": 60, "status": "CREATE_IN_PROGRESS"}}),
        json!({"name": "NodeGroup", "fields": {
            "uuid": CLUSTER_UUID, "name": "ng", "cluster_id": CLUSTER_UUID, "project_id": PROJECT,
            "role": "worker", "node_count": 3, "node_taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
        json!({"name": "Certificate", "fields": {"cluster_uuid": CLUSTER_UUID, "csr": CSR}}),
        json!({"name": "Quota", "fields": {"project_id": PROJECT, "resource": "Cluster", "hard_limit": 3}}),
    ];
    let Some(theirs) = upstream("build", &json!(cases)) else {
        return;
    };
    for (case, theirs) in cases.iter().zip(theirs.as_array().unwrap()) {
        let obj = Object::from_primitive(theirs).unwrap();
        assert_eq!(normalized(&obj.to_primitive()), normalized(theirs));
        let fields = case["fields"].as_object().unwrap();
        assert_eq!(obj.changes().len(), fields.len(), "{theirs}");
    }
}

#[test]
fn upstream_refuses_what_we_refuse() {
    let mut newer = spec_cluster();
    newer[KEY_VERSION] = json!("1.25");
    let mut bad_status = spec_cluster();
    bad_status[KEY_DATA]["status"] = json!("BOGUS");
    let cases = [newer, bad_status];
    for p in &cases {
        assert!(Object::from_primitive(p).is_err());
    }
    // hydrate takes the list itself: one failure for the whole batch would hide the second.
    for p in cases {
        let Some(theirs) = upstream("hydrate", &p) else {
            return;
        };
        assert!(theirs.get("error").is_some(), "{theirs}");
    }
}
