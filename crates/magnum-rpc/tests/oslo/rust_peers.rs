//! Our client against our server, through the broker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use magnum_core::{Error, ErrorKind};
use magnum_rpc::oslo::{PassThrough, envelope};
use magnum_rpc::*;
use serde_json::json;

use crate::common::*;

fn client(
    h: &magnum_rpc::oslo::OsloHandle,
    timeout: Duration,
) -> (RpcClient, magnum_rpc::oslo::OsloTransport) {
    let t = h.transport(Arc::new(PassThrough));
    (RpcClient::new(Arc::new(t.clone()), timeout), t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cast_call_and_failures_round_trip() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("roundtrip");
    let h = connect(&url, &names).await;
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec.clone(), Arc::new(PassThrough), None);
    let (api, transport) = client(&h, Duration::from_secs(10));
    // Let the server declare its queues before the first cast (a cast to a topic nobody
    // declared is dropped by the broker, as with upstream).
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Cast: returns once confirmed, arrives with the caller's context.
    api.cluster_delete(
        &ctx(),
        ClusterRef {
            cluster_uuid: "c1".into(),
        },
    )
    .await
    .unwrap();
    let s = next_seen(&mut seen, 5).await;
    assert_eq!(s.method, "cluster_delete");
    assert_eq!(s.args, json!({"cluster_uuid": "c1"}));
    assert_eq!(s.ctx, ctx());

    // Call with a result.
    let pem = api
        .sign_certificate(
            &ctx(),
            SignCertificate {
                cluster_uuid: "c1".into(),
                csr: "CSR".into(),
                ca_cert_type: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(pem, "signed:CSR");
    assert_eq!(next_seen(&mut seen, 5).await.method, "sign_certificate");
    assert!(
        transport
            .reply_queue()
            .is_some_and(|q| q.starts_with("reply_") && q.len() == 38)
    );

    // Call with a Magnum failure: class, message and code survive.
    let err = transport
        .call(
            Message {
                context: ctx(),
                method: method::GET_CA_CERTIFICATE.into(),
                args: json!({"cluster_uuid": "c9", "ca_cert_type": null}),
            },
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    let RpcError::Remote(r) = err else {
        panic!("not a remote error: {err:?}")
    };
    assert_eq!(r.kind, ErrorKind::NotFound);
    assert_eq!(r.class.as_deref(), Some("ClusterNotFound"));
    assert_eq!(r.message, "Cluster c9 could not be found.");
    assert_eq!(r.params, vec![("cluster".to_owned(), json!("c9"))]);
    next_seen(&mut seen, 5).await;

    // Through RpcClient: the API's error keeps kind and text; `%` is not doubled.
    let err = api
        .cluster_upgrade(
            &ctx(),
            ClusterUpgrade {
                cluster_uuid: "c1".into(),
                nodegroup_uuid: "n1".into(),
                cluster_template_uuid: "t1".into(),
                max_batch_size: None,
            },
        )
        .await
        .unwrap_err();
    match err {
        Error::Remote { kind, message } => {
            assert_eq!(kind, ErrorKind::Invalid);
            assert_eq!(
                message,
                "Upgrading more than 50% of the nodes at once is not supported."
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    next_seen(&mut seen, 5).await;

    // The per-server queue.
    let direct = RpcClient::new(
        Arc::new(transport.to_server(server.server_id())),
        Duration::from_secs(5),
    );
    assert!(direct.ping_conductor(&ctx()).await.unwrap());
    assert_eq!(next_seen(&mut seen, 5).await.method, "ping_conductor");

    // Unknown and private methods: oslo's NoSuchMethod, nothing dispatched.
    for m in ["echo", "_private"] {
        let err = transport
            .call(
                Message {
                    context: ctx(),
                    method: m.into(),
                    args: json!({}),
                },
                Duration::from_secs(5),
            )
            .await
            .unwrap_err();
        let RpcError::Remote(r) = err else {
            panic!("not a remote error")
        };
        assert_eq!(r.class.as_deref(), Some("NoSuchMethod"));
        assert_eq!(r.kind, ErrorKind::Internal);
        assert_eq!(
            r.message,
            format!("Endpoint does not support RPC method {m}")
        );
    }
    nothing_more(&mut seen, 200).await;

    server.stop().await;
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_times_out() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("timeout");
    let h = connect(&url, &names).await;
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec, Arc::new(PassThrough), None);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (api, _) = client(&h, Duration::from_secs(1));
    let started = Instant::now();
    let err = api
        .credential_rotate(
            &ctx(),
            ClusterRef {
                cluster_uuid: "c1".into(),
            },
        )
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(2),
        "{took:?}"
    );
    match err {
        Error::Remote { kind, message } => {
            assert_eq!(kind, ErrorKind::Unavailable);
            assert!(message.contains("Timed out"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(next_seen(&mut seen, 2).await.method, "credential_rotate");
    // The late reply is dropped by the client; the next call still works.
    let (api, _) = client(&h, Duration::from_secs(5));
    assert!(api.ping_conductor(&ctx()).await.unwrap());
    server.stop().await;
    h.close().await;
}

fn cast_body(method: &str, unique_id: &str) -> Vec<u8> {
    let mut inner = serde_json::Map::new();
    inner.insert("method".into(), json!(method));
    inner.insert("args".into(), json!({"cluster_uuid": "c1"}));
    inner.insert("_unique_id".into(), json!(unique_id));
    inner.insert("_context_project_id".into(), json!("p"));
    envelope::wrap(&inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_dropped_and_foreign_messages_rejected() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("dups");
    let h = connect(&url, &names).await;
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec, Arc::new(PassThrough), None);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let raw = Raw::open(&url).await;

    // The same _unique_id twice (a broker redelivery): dispatched once.
    let id = envelope::new_id();
    raw.publish(
        &names.exchange,
        &names.topic,
        &cast_body("cluster_delete", &id),
    )
    .await;
    raw.publish(
        &names.exchange,
        &names.topic,
        &cast_body("cluster_delete", &id),
    )
    .await;
    assert_eq!(next_seen(&mut seen, 5).await.method, "cluster_delete");
    nothing_more(&mut seen, 500).await;

    // Foreign and malformed bodies: logged, rejected (not requeued); the server goes on.
    raw.publish(&names.exchange, &names.topic, b"not json at all")
        .await;
    raw.publish(&names.exchange, &names.topic, b"[1, 2, 3]")
        .await;
    raw.publish(&names.exchange, &names.topic, br#"{"hello": "world"}"#)
        .await;
    raw.publish(
        &names.exchange,
        &names.topic,
        br#"{"oslo.version": "3.0", "oslo.message": "{}"}"#,
    )
    .await;
    raw.publish(
        &names.exchange,
        &names.topic,
        &cast_body("no_such_method", &envelope::new_id()),
    )
    .await;
    // A known method with arguments our handlers cannot read.
    let mut bad_args = serde_json::Map::new();
    bad_args.insert("method".into(), json!("cluster_delete"));
    bad_args.insert("args".into(), json!({"uuid": 42}));
    bad_args.insert("_unique_id".into(), json!(envelope::new_id()));
    raw.publish(&names.exchange, &names.topic, &envelope::wrap(&bad_args))
        .await;
    // Un-enveloped (format 1.0) requests are still served.
    raw.publish(
        &names.exchange,
        &names.topic,
        &serde_json::to_vec(&json!({
            "method": "rotate_ca_certificate",
            "args": {"cluster_uuid": "c2"},
            "_unique_id": envelope::new_id(),
        }))
        .unwrap(),
    )
    .await;
    let s = next_seen(&mut seen, 5).await;
    assert_eq!(s.method, "rotate_ca_certificate");
    assert_eq!(s.args, json!({"cluster_uuid": "c2"}));
    nothing_more(&mut seen, 300).await;
    assert_eq!(
        raw.depth(&names.topic).await,
        0,
        "rejected messages came back"
    );

    // Calls get the failure instead: bad arguments as Python's TypeError, a panicking
    // handler as an internal error; the server survives both.
    let t = h.transport(Arc::new(PassThrough));
    let call = |method: &str, args: serde_json::Value| {
        let t = t.clone();
        let msg = Message {
            context: ctx(),
            method: method.into(),
            args,
        };
        async move { t.call(msg, Duration::from_secs(5)).await.unwrap_err() }
    };
    let RpcError::Remote(r) = call("cluster_delete", json!({"uuid": 42})).await else {
        panic!("not remote")
    };
    assert_eq!(r.class.as_deref(), Some("TypeError"));
    assert_eq!(r.kind, ErrorKind::Internal);
    let RpcError::Remote(r) = call("rotate_ca_certificate", json!({"cluster_uuid": "panic"})).await
    else {
        panic!("not remote")
    };
    assert_eq!(r.kind, ErrorKind::Internal);
    assert_eq!(
        r.message,
        "The conductor failed while handling the request."
    );
    assert_eq!(
        next_seen(&mut seen, 5).await.method,
        "rotate_ca_certificate"
    );

    // And a normal cast after all that.
    raw.publish(
        &names.exchange,
        &names.topic,
        &cast_body("cluster_delete", &envelope::new_id()),
    )
    .await;
    assert_eq!(next_seen(&mut seen, 5).await.method, "cluster_delete");

    server.stop().await;
    h.close().await;
}

/// At most `executor_thread_pool_size` requests run at once; the rest wait, unacked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_is_bounded_by_the_pool() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("pool");
    let h = connect_with_pool(&url, &names, 2).await;
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec.clone(), Arc::new(PassThrough), None);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t = h.transport(Arc::new(PassThrough));
    for i in 0..4 {
        t.cast(Message {
            context: ctx(),
            method: method::CLUSTER_RESIZE.into(),
            args: json!({"cluster_uuid": format!("c{i}"), "nodegroup_uuid": "n",
                         "node_count": 1, "nodes_to_remove": []}),
        })
        .await
        .unwrap();
    }
    next_seen(&mut seen, 5).await;
    next_seen(&mut seen, 5).await;
    nothing_more(&mut seen, 500).await;
    rec.release();
    next_seen(&mut seen, 5).await;
    next_seen(&mut seen, 5).await;
    server.stop().await;
    h.close().await;
}

/// Peers configured durable meet an exchange someone declared non-durable: like oslo, we
/// fall back to the existing non-durable exchange instead of failing with 406.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_declare_falls_back_to_an_existing_non_durable_exchange() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("durable");
    let raw = Raw::open(&url).await;
    raw.ch
        .exchange_declare(
            names.exchange.as_str().into(),
            lapin::ExchangeKind::Topic,
            lapin::options::ExchangeDeclareOptions {
                durable: false,
                auto_delete: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .unwrap();
    let durable_url = format!("{url}?amqp_durable_queues=true");
    let h = connect(&durable_url, &names).await;
    assert!(h.settings().rabbit.durable());
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec, Arc::new(PassThrough), None);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (api, _) = client(&h, Duration::from_secs(5));
    assert!(api.ping_conductor(&ctx()).await.unwrap());
    next_seen(&mut seen, 5).await;
    api.cluster_delete(
        &ctx(),
        ClusterRef {
            cluster_uuid: "c1".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(next_seen(&mut seen, 5).await.method, "cluster_delete");
    server.stop().await;
    h.close().await;
}

/// Membership: a conductor's marker queue is seen by another connection while its own is up,
/// an unknown host is not ours, and a closed connection takes its marker with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_is_a_peer_while_its_connection_lives() {
    use magnum_rpc::oslo::Peers;
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("members");
    let a = connect(&url, &names).await;
    let b = connect(&url, &names).await;
    let host_a = unique("host-a");
    let _mine = a.membership(&host_a);
    let theirs = b.membership(&unique("host-b"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !theirs.probe(&host_a).await.unwrap() {
        assert!(Instant::now() < deadline, "a's marker never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(theirs.is_peer(&host_a).await, Some(true));
    // A Python conductor's host holds no marker.
    assert!(!theirs.probe(&unique("python-host")).await.unwrap());
    a.close().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while theirs.probe(&host_a).await.unwrap() {
        assert!(
            Instant::now() < deadline,
            "a's marker outlived its connection"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(theirs.is_peer(&host_a).await, Some(false));
    // The broker away: the last answer stands.
    b.close().await;
    assert_eq!(theirs.is_peer(&host_a).await, Some(false));
    assert_eq!(theirs.is_peer("never-asked").await, None);
}

/// A marker queue still held by another connection (after a broker node died, the dead
/// connection's until the cluster notices) is waited for, not taken as held: once it goes,
/// the waiting conductor declares its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_in_the_way_is_taken_over_once_it_goes() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("members-wait");
    let (old, new, other) = (
        connect(&url, &names).await,
        connect(&url, &names).await,
        connect(&url, &names).await,
    );
    let host = unique("host");
    let _before = old.membership(&host);
    let asker = other.membership(&unique("asker"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !asker.probe(&host).await.unwrap() {
        assert!(Instant::now() < deadline, "the first marker never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _after = new.membership(&host);
    tokio::time::sleep(Duration::from_millis(500)).await;
    old.close().await;
    // Gone with its connection, then back as the new holder's within its retry second.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen_gone = false;
    loop {
        let up = asker.probe(&host).await.unwrap();
        seen_gone |= !up;
        if up && seen_gone || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        asker.probe(&host).await.unwrap(),
        "the waiting conductor did not take the marker over"
    );
    new.close().await;
    other.close().await;
}
