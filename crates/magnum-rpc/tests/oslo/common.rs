//! Broker gating, per-test names, a recording conductor and raw AMQP access.

use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use magnum_core::{Error, RequestContext};
use magnum_rpc::oslo::{OsloHandle, OsloSettings, envelope};
pub use magnum_testkit::fake_conductor::{Call as Seen, FakeConductor};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The broker URL (oslo form), or `None` to skip.
pub fn rabbit_url() -> Option<String> {
    magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL")
}

/// `rabbit://…` as lapin's `amqp://…` (default vhost).
pub fn amqp_url(rabbit: &str) -> String {
    let rest = rabbit.split_once("://").map_or(rabbit, |(_, r)| r);
    let rest = rest.split('?').next().unwrap_or(rest);
    let rest = rest.trim_end_matches('/');
    format!("amqp://{rest}/%2f")
}

/// Test URLs ask for auto-delete exchanges and queues, so the broker forgets each test's
/// names once its consumers are gone (reply queues a minute after). Python peers get the
/// same URL, hence the same flags.
pub fn test_url(rabbit: &str) -> String {
    let sep = if rabbit.contains('?') { '&' } else { '?' };
    format!(
        "{rabbit}{sep}amqp_auto_delete=true&rabbit_transient_queues_ttl=60\
         &rabbit_retry_interval=1&rabbit_retry_backoff=0"
    )
}

/// A name unique to this test run.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

pub struct Names {
    pub exchange: String,
    pub topic: String,
}

impl Names {
    pub fn new(test: &str) -> Self {
        Self {
            exchange: unique(&format!("oslotest-{test}")),
            topic: unique(&format!("conductor-{test}")),
        }
    }
}

pub async fn connect(url: &str, names: &Names) -> OsloHandle {
    connect_with_pool(url, names, 8).await
}

/// `pool`: `executor_thread_pool_size` of the servers started on this handle.
pub async fn connect_with_pool(url: &str, names: &Names, pool: usize) -> OsloHandle {
    let mut s = OsloSettings::for_url(&test_url(url)).unwrap();
    s.control_exchange = names.exchange.clone();
    s.topic = names.topic.clone();
    s.executor_thread_pool_size = pool;
    let h = OsloHandle::connect(s).await.unwrap();
    assert!(
        h.wait_connected(Duration::from_secs(10)).await,
        "no broker connection"
    );
    h
}

pub fn ctx() -> RequestContext {
    RequestContext {
        user_id: Some("0f1e2d3c4b5a69788796a5b4c3d2e1f0".into()),
        project_id: Some("a1b2c3d4e5f60718293a4b5c6d7e8f90".into()),
        user_name: Some("alice".into()),
        roles: vec!["member".into(), "reader".into()],
        request_id: Some("req-6c1f3e0a-2b4d-4e6f-8a9b-0c1d2e3f4a5b".into()),
        ..RequestContext::default()
    }
}

/// A conductor that records what it is asked and answers predictably:
/// `sign_certificate` → `signed:<csr>`, `get_ca_certificate` → ClusterNotFound,
/// `cluster_upgrade` → NotSupported with a `%`, `credential_rotate` → sleeps 3 s,
/// `cluster_resize` → blocks until [`FakeConductor::release`], `rotate_ca_certificate` of
/// cluster `panic` → panics.
pub fn recorder() -> (Arc<FakeConductor>, mpsc::UnboundedReceiver<Seen>) {
    let (rec, rx) = FakeConductor::with_receiver();
    rec.answer("sign_certificate", |c| {
        Ok(json!(format!("signed:{}", c.args["csr"].as_str().unwrap())))
    });
    rec.answer("get_ca_certificate", |c| {
        Err(Error::ClusterNotFound {
            cluster: c.args["cluster_uuid"].as_str().unwrap().to_owned(),
        })
    });
    rec.answer("cluster_upgrade", |_| {
        Err(Error::NotSupported {
            operation: "Upgrading more than 50% of the nodes at once".into(),
        })
    });
    rec.delay("credential_rotate", Duration::from_secs(3));
    rec.hold("cluster_resize");
    rec.answer("rotate_ca_certificate", |c| {
        assert!(
            c.args["cluster_uuid"] != "panic",
            "handler panics on request"
        );
        Ok(Value::Null)
    });
    (rec, rx)
}

/// The next recorded method, or a failure after `secs`.
pub async fn next_seen(rx: &mut mpsc::UnboundedReceiver<Seen>, secs: u64) -> Seen {
    tokio::time::timeout(Duration::from_secs(secs), rx.recv())
        .await
        .expect("the conductor was not called in time")
        .expect("recorder gone")
}

/// Nothing more is recorded within `ms`.
pub async fn nothing_more(rx: &mut mpsc::UnboundedReceiver<Seen>, ms: u64) {
    if let Ok(Some(s)) = tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await {
        panic!("unexpected call: {s:?}");
    }
}

/// A plain AMQP connection for publishing hand-made bodies and inspecting queues.
pub struct Raw {
    pub conn: Connection,
    pub ch: lapin::Channel,
}

impl Raw {
    pub async fn open(url: &str) -> Self {
        let conn = Connection::connect(&amqp_url(url), ConnectionProperties::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        ch.confirm_select(Default::default()).await.unwrap();
        Self { conn, ch }
    }

    pub async fn publish(&self, exchange: &str, routing_key: &str, body: &[u8]) {
        self.ch
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                BasicPublishOptions::default(),
                body,
                envelope::properties(None),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// Messages waiting in `queue` (passive declare).
    pub async fn depth(&self, queue: &str) -> u32 {
        let ch = self.conn.create_channel().await.unwrap();
        let q = ch
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        let _ = ch.close(200, "OK".into()).await;
        q.message_count()
    }
}
