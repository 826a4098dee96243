//! Failing fast without a broker, redelivery of unfinished requests, and recovery after the
//! broker drops our connection.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use magnum_rpc::oslo::{OsloHandle, OsloSettings, PassThrough};
use magnum_rpc::*;
use serde_json::json;

use crate::common::*;

fn delete_msg() -> Message {
    Message {
        context: ctx(),
        method: method::CLUSTER_DELETE.into(),
        args: json!({"cluster_uuid": "c1"}),
    }
}

async fn assert_fast_unavailable(t: &dyn Transport) {
    let started = Instant::now();
    let err = t
        .call(delete_msg(), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, RpcError::Unavailable(_)), "{err:?}");
    let err = t.cast(delete_msg()).await.unwrap_err();
    assert!(matches!(err, RpcError::Unavailable(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// No broker at all: connecting returns, and RPCs fail at once (the API answers 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_broker_fails_fast() {
    let started = Instant::now();
    let s =
        OsloSettings::for_url("rabbit://guest:guest@127.0.0.1:1,guest:guest@127.0.0.1:2/").unwrap();
    let h = OsloHandle::connect(s).await.unwrap();
    assert!(!h.is_connected());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let t = h.transport(Arc::new(PassThrough));
    assert_fast_unavailable(&t).await;
    let n = h.notifier();
    // No driver configured: nothing to send, whatever the broker.
    n.publish("INFO", json!({"event_type": "x"})).await.unwrap();
    h.close().await;
}

/// A closed connection: the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_connection_fails_fast() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("closed");
    let h = connect(&url, &names).await;
    let t = h.transport(Arc::new(PassThrough));
    h.close().await;
    assert_fast_unavailable(&t).await;
}

/// A conductor that dies mid-request loses nothing: the request was not acked, so the
/// broker hands it to another conductor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_request_is_redelivered_to_another_conductor() {
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("redeliver");
    let a = connect(&url, &names).await;
    let (rec_a, mut seen_a) = recorder();
    let _server_a = a.start_server(rec_a.clone(), Arc::new(PassThrough), None);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let client = connect(&url, &names).await;
    let t = client.transport(Arc::new(PassThrough));
    t.cast(Message {
        context: ctx(),
        method: method::CLUSTER_RESIZE.into(),
        args: json!({"cluster_uuid": "c1", "nodegroup_uuid": "n1", "node_count": 3, "nodes_to_remove": []}),
    })
    .await
    .unwrap();
    // A is now inside the handler (which blocks).
    assert_eq!(next_seen(&mut seen_a, 5).await.method, "cluster_resize");

    let b = connect(&url, &names).await;
    let (rec_b, mut seen_b) = recorder();
    let server_b = b.start_server(rec_b.clone(), Arc::new(PassThrough), None);
    tokio::time::sleep(Duration::from_millis(500)).await;
    nothing_more(&mut seen_b, 100).await;

    // "Kill" A: its connection goes away with the request unacked.
    a.close().await;
    let s = next_seen(&mut seen_b, 10).await;
    assert_eq!(s.method, "cluster_resize");
    assert_eq!(s.args["node_count"], 3);
    rec_b.release();
    rec_a.release();
    server_b.stop().await;
    b.close().await;
    client.close().await;
}

/// `rabbitmqctl close_connection` for our connection: what the client sees when the broker
/// restarts or fails over. The handle reconnects; the server re-declares and consumes again;
/// calls and casts work without a process restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_after_the_broker_drops_the_connection() {
    let Some(url) = rabbit_url() else { return };
    if Command::new("rabbitmqctl").arg("--help").output().is_err() {
        eprintln!("skipped: rabbitmqctl is not available");
        return;
    }
    let names = Names::new("recover");
    let h = connect(&url, &names).await;
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec, Arc::new(PassThrough), None);
    let t = h.transport(Arc::new(PassThrough));
    let api = RpcClient::new(Arc::new(t.clone()), Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(api.ping_conductor(&ctx()).await.unwrap());
    next_seen(&mut seen, 5).await;

    let name = h.broker().connection_name().unwrap();
    let listed = Command::new("rabbitmqctl")
        .args([
            "list_connections",
            "-q",
            "--no-table-headers",
            "pid",
            "client_properties",
        ])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    let pid = listed
        .lines()
        .find(|l| l.contains(&name))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("connection {name} not listed:\n{listed}"))
        .to_owned();
    let closed = Command::new("rabbitmqctl")
        .args(["close_connection", &pid, "test: simulated broker restart"])
        .output()
        .unwrap();
    assert!(closed.status.success(), "{closed:?}");

    // Disconnected: fail fast, then reconnect by ourselves.
    let down = Instant::now();
    while h.is_connected() && down.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        h.wait_connected(Duration::from_secs(10)).await,
        "no reconnect"
    );
    assert_ne!(h.broker().connection_name().unwrap(), name);

    // Give the server and the reply consumer a moment to re-declare; then both directions.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match api.ping_conductor(&ctx()).await {
            Ok(true) => break,
            other if Instant::now() > deadline => panic!("no recovery: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), seen.recv()).await {}
    t.cast(delete_msg()).await.unwrap();
    assert_eq!(next_seen(&mut seen, 5).await.method, "cluster_delete");
    server.stop().await;
    h.close().await;
}

/// A real broker restart (`rabbitmqctl stop_app` / `start_app`): opt-in with
/// `MAGNUM_TEST_RABBIT_RESTART=1`, since it disturbs everything else using the broker. While
/// the broker is down RPCs fail fast; after it is back the same handle, server and client
/// work again (queues re-declared: a restart forgets non-durable ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_after_a_broker_restart() {
    if std::env::var("MAGNUM_TEST_RABBIT_RESTART").as_deref() != Ok("1") {
        eprintln!("skipped: set MAGNUM_TEST_RABBIT_RESTART=1 to restart the broker");
        return;
    }
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("restart");
    let h = connect(&url, &names).await;
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec, Arc::new(PassThrough), None);
    let t = h.transport(Arc::new(PassThrough));
    let api = RpcClient::new(Arc::new(t.clone()), Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(api.ping_conductor(&ctx()).await.unwrap());
    next_seen(&mut seen, 5).await;

    let stop = Command::new("rabbitmqctl")
        .arg("stop_app")
        .output()
        .unwrap();
    assert!(stop.status.success(), "{stop:?}");
    let restarted = std::panic::AssertUnwindSafe(async {
        let down = Instant::now();
        while h.is_connected() && down.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_fast_unavailable(&t).await;
    });
    let down_ok = futures::FutureExt::catch_unwind(restarted).await;
    // Whatever happened, bring the broker back.
    let start = Command::new("rabbitmqctl")
        .arg("start_app")
        .output()
        .unwrap();
    assert!(start.status.success(), "{start:?}");
    down_ok.unwrap();

    assert!(
        h.wait_connected(Duration::from_secs(30)).await,
        "no reconnect"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match api.ping_conductor(&ctx()).await {
            Ok(true) => break,
            other if Instant::now() > deadline => panic!("no recovery: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), seen.recv()).await {}
    t.cast(delete_msg()).await.unwrap();
    assert_eq!(next_seen(&mut seen, 5).await.method, "cluster_delete");
    server.stop().await;
    h.close().await;
}

/// A dead first host: the next one is tried at once (round-robin failover), and RPCs work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_over_to_the_next_host() {
    let Some(url) = rabbit_url() else { return };
    let (scheme, rest) = url.split_once("://").unwrap();
    let url = format!("{scheme}://guest:guest@127.0.0.1:1,{rest}");
    let names = Names::new("failover");
    let started = Instant::now();
    let h = connect(&url, &names).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec, Arc::new(PassThrough), None);
    let api = RpcClient::new(
        Arc::new(h.transport(Arc::new(PassThrough))),
        Duration::from_secs(5),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(api.ping_conductor(&ctx()).await.unwrap());
    next_seen(&mut seen, 5).await;
    server.stop().await;
    h.close().await;
}

/// Notifications go out in transactions that also record the last one's `_unique_id` in the
/// sender's ledger queue: the record is there once the events are, stays in place when read,
/// and a transaction whose channel closes before its commit leaves neither events nor record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_notifications_and_their_record_go_together() {
    use lapin::options::{BasicPublishOptions, QueueDeleteOptions};

    let Some(url) = rabbit_url() else { return };
    let names = Names::new("ledger");
    let topic = unique("notifications");
    let host = unique("ledger-host");
    let mut s = OsloSettings::for_url(&test_url(&url)).unwrap();
    s.control_exchange = names.exchange.clone();
    s.notification_drivers = vec!["messagingv2".into()];
    s.notification_topics = vec![topic.clone()];
    let h = OsloHandle::connect(s).await.unwrap();
    assert!(h.wait_connected(Duration::from_secs(10)).await);
    let n = h.notifier();
    let ledger = magnum_rpc::oslo::ledger_queue(&host);
    let event = |id: &str| json!({"message_id": id, "_unique_id": id, "event_type": "x", "priority": "INFO", "payload": {}});
    let (a, b, c) = (event("a"), event("b"), event("c"));

    assert_eq!(n.last_recorded(&host).await.unwrap(), None);
    n.publish_recorded(&[("INFO", &a), ("INFO", &b)], &host)
        .await
        .unwrap();
    assert_eq!(n.last_recorded(&host).await.unwrap().as_deref(), Some("b"));
    n.publish_recorded(&[("INFO", &c)], &host).await.unwrap();
    // Read twice: reading leaves the record (the ledger keeps only the newest).
    assert_eq!(n.last_recorded(&host).await.unwrap().as_deref(), Some("c"));
    assert_eq!(n.last_recorded(&host).await.unwrap().as_deref(), Some("c"));
    let raw = Raw::open(&url).await;
    let queue = format!("{topic}.info");
    assert_eq!(raw.depth(&queue).await, 3);
    assert_eq!(raw.depth(&ledger).await, 1);

    // A sender that dies before its commit: nothing of the transaction takes effect.
    let ch = raw.conn.create_channel().await.unwrap();
    ch.tx_select().await.unwrap();
    for (exchange, key, body) in [
        (names.exchange.as_str(), queue.as_str(), &b"{}"[..]),
        ("", ledger.as_str(), &b"d"[..]),
    ] {
        ch.basic_publish(
            exchange.into(),
            key.into(),
            BasicPublishOptions::default(),
            body,
            lapin::BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .unwrap();
    }
    ch.close(200, "gone before the commit".into())
        .await
        .unwrap();
    assert_eq!(raw.depth(&queue).await, 3);
    assert_eq!(n.last_recorded(&host).await.unwrap().as_deref(), Some("c"));

    // An event without the id to record is refused before anything is sent.
    let bare = json!({"message_id": "e"});
    assert!(matches!(
        n.publish_recorded(&[("INFO", &bare)], &host).await,
        Err(RpcError::Malformed(_))
    ));
    h.close().await;
    for q in [&queue, &ledger] {
        raw.ch
            .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

/// A publish the broker nacks costs one retry on a new connection, not a run of refusals:
/// the client drops its connection, publishes once more on the next one, and reports the
/// refusal only if that is refused too. (A queue full at zero with `reject-publish` nacks
/// everything, as a surviving node did for a while after another node died.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacked_cast_is_published_again_once_on_a_new_connection() {
    use lapin::options::{QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions};
    use lapin::types::{AMQPValue, FieldTable};
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("nack");
    let h = connect(&url, &names).await;
    let t = h.transport(Arc::new(PassThrough));
    // Routed nowhere yet: confirmed, and the exchange now exists.
    t.cast(delete_msg()).await.unwrap();
    let raw = Raw::open(&url).await;
    let mut args = FieldTable::default();
    args.insert("x-max-length".into(), AMQPValue::LongLongInt(0));
    args.insert(
        "x-overflow".into(),
        AMQPValue::LongString("reject-publish".into()),
    );
    raw.ch
        .queue_declare(
            names.topic.as_str().into(),
            QueueDeclareOptions::default(),
            args,
        )
        .await
        .unwrap();
    raw.ch
        .queue_bind(
            names.topic.as_str().into(),
            names.exchange.as_str().into(),
            names.topic.as_str().into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let first = h.broker().connection_name().unwrap();
    let started = Instant::now();
    let err = t.cast(delete_msg()).await.unwrap_err();
    assert!(
        matches!(&err, RpcError::Unavailable(m) if m.contains("refused")),
        "{err:?}"
    );
    // Once more after a pause of a second (a queue electing its leader), not at once.
    assert!(
        started.elapsed() >= Duration::from_secs(1) && started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Published on a second connection, which stays: one reconnection, not one per try.
    let second = h.broker().connection_name().unwrap();
    assert_ne!(first, second);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        h.broker().connection_name().as_deref(),
        Some(second.as_str())
    );
    // Casts the broker takes go through on that connection.
    t.to_server("elsewhere").cast(delete_msg()).await.unwrap();
    assert_eq!(
        h.broker().connection_name().as_deref(),
        Some(second.as_str())
    );
    h.close().await;
    raw.ch
        .queue_delete(names.topic.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
}

/// With `rabbit_quorum_queue`, the notification sender's ledger is a quorum queue, under a
/// name of its own (a classic ledger of the same host cannot become one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_is_a_quorum_queue_with_quorum_queues() {
    use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
    use lapin::types::{AMQPValue, FieldTable};
    let Some(url) = rabbit_url() else { return };
    let names = Names::new("qledger");
    let topic = unique("qnotifications");
    let host = unique("qledger-host");
    // Not test_url: a quorum queue cannot be auto-delete.
    let sep = if url.contains('?') { '&' } else { '?' };
    let mut s = OsloSettings::for_url(&format!(
        "{url}{sep}rabbit_retry_interval=1&rabbit_retry_backoff=0"
    ))
    .unwrap();
    s.rabbit.rabbit_quorum_queue = true;
    s.control_exchange = names.exchange.clone();
    s.notification_drivers = vec!["messagingv2".into()];
    s.notification_topics = vec![topic.clone()];
    let h = OsloHandle::connect(s).await.unwrap();
    assert!(h.wait_connected(Duration::from_secs(10)).await);
    let n = h.notifier();
    let ledger = n.ledger(&host);
    assert_eq!(ledger, magnum_rpc::oslo::quorum_ledger_queue(&host));
    assert_ne!(ledger, magnum_rpc::oslo::ledger_queue(&host));
    let event = |id: &str| json!({"message_id": id, "_unique_id": id, "event_type": "x", "priority": "INFO", "payload": {}});
    assert_eq!(n.last_recorded(&host).await.unwrap(), None);
    n.publish_recorded(&[("INFO", &event("a")), ("INFO", &event("b"))], &host)
        .await
        .unwrap();
    assert_eq!(n.last_recorded(&host).await.unwrap().as_deref(), Some("b"));
    n.publish_recorded(&[("INFO", &event("c"))], &host)
        .await
        .unwrap();
    assert_eq!(n.last_recorded(&host).await.unwrap().as_deref(), Some("c"));
    assert_eq!(n.last_recorded(&host).await.unwrap().as_deref(), Some("c"));
    // Declared as a quorum queue with the same arguments: equivalent, so it is one (a
    // classic queue would close the channel with PRECONDITION_FAILED).
    let raw = Raw::open(&url).await;
    let mut args = FieldTable::default();
    args.insert("x-max-length".into(), AMQPValue::LongLongInt(1));
    args.insert(
        "x-expires".into(),
        AMQPValue::LongLongInt(7 * 24 * 3600 * 1000),
    );
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    let q = raw
        .ch
        .queue_declare(
            ledger.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            args,
        )
        .await
        .unwrap();
    assert_eq!(q.message_count(), 1);
    h.close().await;
    for q in [ledger, format!("{topic}.info")] {
        raw.ch
            .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}
