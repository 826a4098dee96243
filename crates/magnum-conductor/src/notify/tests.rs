#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::NaiveDateTime;
use magnum_core::Error;

use super::*;

/// Eight frames upstream Magnum put on RabbitMQ (create/delete × pending/failure).
fn frames() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/upstream-notifications.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn parse_action(s: &str) -> Action {
    match s {
        "create" => Action::Create,
        "update" => Action::Update,
        "delete" => Action::Delete,
        other => panic!("{other}"),
    }
}

fn parse_outcome(s: &str) -> Outcome {
    match s {
        "pending" => Outcome::Pending,
        "success" => Outcome::Success,
        "failure" => Outcome::Failure,
        other => panic!("{other}"),
    }
}

fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

fn i(v: &Value) -> Option<i32> {
    v.as_i64().map(|n| i32::try_from(n).unwrap())
}

fn t(v: &Value) -> Option<NaiveDateTime> {
    v.as_str()
        .map(|s| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").unwrap())
}

/// The cluster row and nodegroups that upstream's event describes.
fn cluster_from(payload: &Value) -> (Cluster, Vec<NodeGroup>) {
    let target = &payload["target"];
    let c = &target["attachments"][0]["content"];
    let cluster = Cluster {
        uuid: s(&target["id"]),
        name: s(&target["name"]),
        status: s(&c["status"]).and_then(|v| v.parse().ok()),
        status_reason: s(&c["status_reason"]),
        project_id: s(&c["project_id"]),
        created_at: t(&c["created_at"]),
        updated_at: t(&c["updated_at"]),
        cluster_template_id: s(&c["cluster_template_id"]),
        keypair: s(&c["keypair"]),
        docker_volume_size: i(&c["docker_volume_size:"]),
        labels: Some(magnum_db::json::dumps(&c["labels"])),
        master_flavor_id: s(&c["master_flavor_id"]),
        flavor_id: s(&c["flavor_id"]),
        stack_id: s(&c["stack_id"]),
        health_status: s(&c["health_status"]).and_then(|v| v.parse().ok()),
        create_timeout: i(&c["create_timeout"]),
        api_address: s(&c["api_address"]),
        discovery_url: s(&c["discovery_url"]),
        // Never in the payload.
        user_id: Some("someone".into()),
        ca_cert_ref: Some("secret-ref".into()),
        ..Cluster::default()
    };
    let ng = |role: &str, count: &Value, addrs: &Value| NodeGroup {
        role: Some(role.into()),
        node_count: i(count),
        node_addresses: Some(magnum_db::json::dumps(addrs)),
        cluster_id: cluster.uuid.clone().unwrap(),
        ..NodeGroup::default()
    };
    let ngs = vec![
        ng("master", &c["master_count"], &c["master_addresses"]),
        ng("worker", &c["node_count"], &c["node_addresses"]),
    ];
    (cluster, ngs)
}

fn ctx_from(payload: &Value) -> RequestContext {
    let ini = &payload["initiator"];
    RequestContext {
        user_id: s(&ini["user_id"]),
        project_id: s(&ini["project_id"]),
        request_id: Some("req-05aa9b9e-f836-474a-b4cc-b6cf726d98cf".into()),
        is_admin: true,
        roles: vec!["admin".into()],
        ..RequestContext::default()
    }
}

/// Same keys in the same order at every level (arrays: element by element).
fn assert_same_shape(ours: &Value, theirs: &Value, path: &str) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let ka: Vec<&String> = a.keys().collect();
            let kb: Vec<&String> = b.keys().collect();
            assert_eq!(ka, kb, "keys at {path}");
            for (k, v) in b {
                assert_same_shape(&a[k], v, &format!("{path}/{k}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "length at {path}");
            for (n, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same_shape(x, y, &format!("{path}[{n}]"));
            }
        }
        _ => {}
    }
}

fn notifier(host: &str) -> (Notifier, CaptureDriver) {
    let capture = CaptureDriver::new();
    let n = Notifier::new(host, "openstack").with_driver(Box::new(capture.clone()));
    (n, capture)
}

#[tokio::test]
async fn every_upstream_frame_is_reproduced() {
    let frames = frames();
    assert_eq!(frames.len(), 8);
    let (notifier, capture) = notifier("anchors");
    for frame in &frames {
        let theirs = &frame["message"];
        let payload = &theirs["payload"];
        let action = parse_action(payload["action"].as_str().unwrap());
        let outcome = parse_outcome(payload["outcome"].as_str().unwrap());
        let (cluster, ngs) = cluster_from(payload);
        let ctx = RequestContext {
            request_id: s(&theirs["_context_request_id"]),
            ..ctx_from(payload)
        };
        notifier
            .cluster_event(&ctx, action, outcome, &cluster, &ngs)
            .await;
        let n = capture.take().pop().unwrap();
        let ours = n.to_message();

        assert_same_shape(&ours["payload"], payload, "payload");
        // Everything but fresh ids and times is exactly upstream's.
        for key in ["typeURI", "eventType", "action", "outcome"] {
            assert_eq!(ours["payload"][key], payload[key], "{key}");
        }
        assert_eq!(ours["payload"]["target"], payload["target"]);
        assert_eq!(
            ours["payload"]["observer"]["typeURI"],
            payload["observer"]["typeURI"]
        );
        let (mut oi, mut ti) = (
            ours["payload"]["initiator"].clone(),
            payload["initiator"].clone(),
        );
        oi.as_object_mut().unwrap().remove("id");
        ti.as_object_mut().unwrap().remove("id");
        assert_eq!(oi, ti);
        for key in ["publisher_id", "event_type", "priority"] {
            assert_eq!(ours[key], theirs[key], "{key}");
        }
        assert_eq!(
            frame["routing_key"],
            format!("notifications.{}", n.priority.as_str().to_lowercase())
        );

        // The envelope: upstream's keys in upstream's order, then only three context keys.
        let upstream_keys: Vec<&String> = theirs
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !k.starts_with('_'))
            .collect();
        let our_keys: Vec<&String> = ours.as_object().unwrap().keys().collect();
        assert_eq!(our_keys[..6], upstream_keys[..]);
        assert_eq!(
            our_keys[6..],
            [
                "_context_request_id",
                "_context_user_id",
                "_context_project_id"
            ]
        );
        assert_eq!(ours["_context_request_id"], theirs["_context_request_id"]);
        assert_eq!(ours["_context_user_id"], theirs["_context_user_id"]);
        assert_eq!(ours["_context_project_id"], theirs["_context_project_id"]);
    }
}

#[test]
fn typo_key_is_kept() {
    let payload = &frames()[0]["message"]["payload"];
    let (cluster, ngs) = cluster_from(payload);
    let ev = cadf_event(
        &ctx_from(payload),
        Action::Create,
        Outcome::Pending,
        &Cluster {
            docker_volume_size: Some(20),
            ..cluster
        },
        &ngs,
        "openstack",
    );
    let content = &ev["target"]["attachments"][0]["content"];
    assert_eq!(content["docker_volume_size:"], 20);
    assert!(content.get("docker_volume_size").is_none());
}

#[test]
fn no_credentials_travel() {
    let payload = &frames()[0]["message"]["payload"];
    let (cluster, ngs) = cluster_from(payload);
    let (notifier, _) = notifier("h");
    let msg = notifier
        .build(
            &ctx_from(payload),
            Action::Create,
            Outcome::Pending,
            &cluster,
            &ngs,
        )
        .to_message();
    let text = msg.to_string();
    for needle in [
        "auth_token",
        "auth_token_info",
        "token",
        "secret-ref",
        "catalog",
    ] {
        assert!(!text.contains(needle), "{needle} in {text}");
    }
    let context_keys: Vec<&String> = msg
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("_context"))
        .collect();
    assert_eq!(
        context_keys,
        [
            "_context_request_id",
            "_context_user_id",
            "_context_project_id"
        ]
    );
}

#[test]
fn priority_follows_outcome() {
    assert_eq!(Priority::for_outcome(Outcome::Pending), Priority::Info);
    assert_eq!(Priority::for_outcome(Outcome::Success), Priority::Info);
    assert_eq!(Priority::for_outcome(Outcome::Failure), Priority::Error);
    let (notifier, _) = notifier("h");
    let c = Cluster::default();
    for (action, word) in [
        (Action::Create, "create"),
        (Action::Update, "update"),
        (Action::Delete, "delete"),
    ] {
        let n = notifier.build(
            &RequestContext::default(),
            action,
            Outcome::Failure,
            &c,
            &[],
        );
        assert_eq!(n.event_type, format!("magnum.cluster.{word}"));
        assert_eq!(n.to_message()["priority"], "ERROR");
        let n = notifier.build(
            &RequestContext::default(),
            action,
            Outcome::Success,
            &c,
            &[],
        );
        assert_eq!(n.to_message()["priority"], "INFO");
        assert_eq!(n.payload["outcome"], "success");
    }
}

#[test]
fn time_formats() {
    let (notifier, _) = notifier("h");
    let n = notifier.build(
        &RequestContext::default(),
        Action::Create,
        Outcome::Pending,
        &Cluster {
            created_at: Some(
                NaiveDateTime::parse_from_str("2026-11-29 10:24:39", "%Y-%m-%d %H:%M:%S").unwrap(),
            ),
            ..Cluster::default()
        },
        &[],
    );
    let event_time = n.payload["eventTime"].as_str().unwrap();
    assert_eq!(event_time.len(), "2026-11-29T10:24:39.462318+0000".len());
    assert!(event_time.ends_with("+0000"));
    chrono::DateTime::parse_from_str(event_time, "%Y-%m-%dT%H:%M:%S%.6f%z").unwrap();
    assert_eq!(n.timestamp.len(), "2026-11-29 10:24:39.463096".len());
    NaiveDateTime::parse_from_str(&n.timestamp, "%Y-%m-%d %H:%M:%S%.6f").unwrap();
    let content = &n.payload["target"]["attachments"][0]["content"];
    assert_eq!(content["created_at"], "2026-11-29T10:24:39.000000");
    assert_eq!(content["updated_at"], Value::Null);
    uuid::Uuid::parse_str(&n.message_id).unwrap();
    // Ids are UUIDv5 under the audit namespace, fresh for every event.
    let id = uuid::Uuid::parse_str(n.payload["id"].as_str().unwrap()).unwrap();
    assert_eq!(id.get_version_num(), 5);
    assert_ne!(n.payload["id"], n.payload["observer"]["id"]);
}

#[test]
fn initiator_carries_only_known_ids() {
    let c = Cluster::default();
    let ctx = RequestContext {
        user_id: Some("u".into()),
        project_id: Some(String::new()),
        domain_id: Some("d".into()),
        ..RequestContext::default()
    };
    let ev = cadf_event(&ctx, Action::Update, Outcome::Pending, &c, &[], "");
    let keys: Vec<&String> = ev["initiator"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "typeURI", "user_id", "domain_id"]);
    // Without a namespace, ids are plain UUIDv4.
    let id = uuid::Uuid::parse_str(ev["id"].as_str().unwrap()).unwrap();
    assert_eq!(id.get_version_num(), 4);
    // The poller's admin context names nobody.
    let ev = cadf_event(
        &RequestContext::admin_all_tenants(),
        Action::Delete,
        Outcome::Success,
        &c,
        &[],
        "openstack",
    );
    let keys: Vec<&String> = ev["initiator"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "typeURI"]);
    // A nameless cluster has no target name; an unknown uuid gets a fresh id.
    let keys: Vec<&String> = ev["target"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "typeURI", "attachments"]);
}

#[test]
fn counts_and_addresses_come_from_nodegroups() {
    let ng = |role: Option<&str>, count: i32, addrs: &str| NodeGroup {
        role: role.map(Into::into),
        node_count: Some(count),
        node_addresses: Some(addrs.into()),
        ..NodeGroup::default()
    };
    let ngs = [
        ng(Some("master"), 3, r#"["10.0.0.1", "10.0.0.2", "10.0.0.3"]"#),
        ng(Some("worker"), 2, r#"["10.0.1.1", "10.0.1.2"]"#),
        // Any role other than master is a worker, as upstream.
        ng(None, 1, r#"["10.0.2.1"]"#),
        ng(Some("gpu"), 4, "not json"),
    ];
    let c = Cluster {
        labels: Some(r#"{"kube_tag": "v1.30.1", "auto_healing_enabled": "true"}"#.into()),
        ..Cluster::default()
    };
    let ev = cadf_event(
        &RequestContext::default(),
        Action::Update,
        Outcome::Pending,
        &c,
        &ngs,
        "openstack",
    );
    let content = &ev["target"]["attachments"][0]["content"];
    assert_eq!(content["master_count"], 3);
    assert_eq!(content["node_count"], 7);

    // A NULL count is the object's default, 1, as upstream's payload (built from
    // NodeGroup objects) says; it counted 0 here before the rule had one home.
    let mut with_null = ngs.to_vec();
    with_null[1].node_count = None;
    let ev = cadf_event(
        &RequestContext::default(),
        Action::Update,
        Outcome::Pending,
        &c,
        &with_null,
        "openstack",
    );
    assert_eq!(ev["target"]["attachments"][0]["content"]["node_count"], 6);
    assert_eq!(
        content["master_addresses"],
        serde_json::json!(["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    );
    assert_eq!(
        content["node_addresses"],
        serde_json::json!(["10.0.1.1", "10.0.1.2", "10.0.2.1"])
    );
    let label_keys: Vec<&String> = content["labels"].as_object().unwrap().keys().collect();
    assert_eq!(label_keys, ["kube_tag", "auto_healing_enabled"]);
}

fn config(drivers: &[&str]) -> Config {
    let mut cfg = Config::default();
    cfg.default.host = "conductor-1".into();
    cfg.oslo_messaging_notifications.driver = drivers.iter().map(|d| (*d).to_owned()).collect();
    cfg
}

#[test]
fn drivers_from_config() {
    let n = Notifier::from_config(&config(&[]));
    assert!(!n.is_enabled());
    assert_eq!(n.publisher_id(), "container-infra.conductor-1");
    assert!(!Notifier::from_config(&config(&["noop"])).is_enabled());
    for drivers in [
        &["log"][..],
        &["messagingv2"],
        &["messaging", "log"],
        &["routing"],
        &["log", "log"],
    ] {
        let n = Notifier::from_config(&config(drivers));
        assert_eq!(
            format!("{n:?}").matches("\"log\"").count(),
            1,
            "{drivers:?}"
        );
    }
    assert!(!Notifier::from_config(&config(&["bogus"])).is_enabled());

    // Another crate supplies the RabbitMQ driver.
    let capture = CaptureDriver::new();
    let c2 = capture.clone();
    let n = Notifier::from_config_with(&config(&["messagingv2"]), move |name| {
        assert_eq!(name, "messagingv2");
        Some(Box::new(c2.clone()))
    });
    assert_eq!(format!("{n:?}").matches("capture").count(), 1);
    assert!(!format!("{n:?}").contains("\"log\""));
}

struct Broken;

#[async_trait]
impl NotifierDriver for Broken {
    async fn emit(&self, _n: &Notification) -> Result<()> {
        Err(Error::Internal("broker down".into()))
    }
}

#[tokio::test]
async fn delivery_is_best_effort() {
    let capture = CaptureDriver::new();
    let n = Notifier::new("h", "openstack")
        .with_driver(Box::new(Broken))
        .with_driver(Box::new(LogDriver))
        .with_driver(Box::new(NoopDriver))
        .with_driver(Box::new(capture.clone()));
    let c = Cluster::default();
    n.cluster_event(
        &RequestContext::default(),
        Action::Delete,
        Outcome::Failure,
        &c,
        &[],
    )
    .await;
    n.cluster_event(
        &RequestContext::default(),
        Action::Delete,
        Outcome::Success,
        &c,
        &[],
    )
    .await;
    {
        let shared = capture.captured();
        let got = shared.lock().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].priority, Priority::Error);
        assert_eq!(
            (got[1].action, got[1].outcome),
            (Action::Delete, Outcome::Success)
        );
    }
    assert_eq!(capture.snapshot().len(), 2);
    assert_eq!(capture.take().len(), 2);
    assert!(capture.snapshot().is_empty());

    // A disabled notifier builds nothing.
    Notifier::new("h", "")
        .cluster_event(
            &RequestContext::default(),
            Action::Create,
            Outcome::Pending,
            &c,
            &[],
        )
        .await;
}
