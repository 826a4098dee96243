//! The RPC client (`OsloTransport`): casts and calls to `<control_exchange>` /
//! `<topic>[.<server>]` in oslo's format, replies on one `reply_<hex>` queue per process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions};
use lapin::types::FieldTable;
use serde_json::Value;
use tokio::sync::{OnceCell, mpsc, watch};
use tokio::time::Instant;

use super::codec::Codec;
use super::connection::{Broker, Live, OPERATION_TIMEOUT};
use super::envelope::{self, CallKeys, IncomingReply};
use super::failure::Failure;
use super::publisher::{Declaration, Outgoing, Publisher};
use crate::transport::{Message, RpcError, Transport};

/// How long a call waits for the reply consumer of a fresh connection before giving up.
const REPLY_READY_WAIT: Duration = Duration::from_secs(5);

type Waiters = StdMutex<HashMap<String, mpsc::UnboundedSender<IncomingReply>>>;

/// The process's reply queue and its consumer, re-declared on every new connection.
struct ReplyListener {
    queue: String,
    waiters: Waiters,
    /// Generation of the connection the consumer runs on (0: none yet).
    ready: watch::Sender<u64>,
}

/// Removes a call's waiter however the call ends.
struct WaiterGuard<'a> {
    listener: &'a ReplyListener,
    msg_id: String,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut w) = self.listener.waiters.lock() {
            w.remove(&self.msg_id);
        }
    }
}

impl ReplyListener {
    fn start(broker: Broker) -> Arc<Self> {
        let (ready, _) = watch::channel(0);
        let me = Arc::new(Self {
            queue: format!("reply_{}", envelope::new_id()),
            waiters: StdMutex::new(HashMap::new()),
            ready,
        });
        tokio::spawn(Arc::clone(&me).follow(broker));
        me
    }

    fn register(&self, msg_id: &str) -> (WaiterGuard<'_>, mpsc::UnboundedReceiver<IncomingReply>) {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut w) = self.waiters.lock() {
            w.insert(msg_id.to_owned(), tx);
        }
        (
            WaiterGuard {
                listener: self,
                msg_id: msg_id.to_owned(),
            },
            rx,
        )
    }

    async fn wait_ready(&self, generation: u64, max: Duration) -> bool {
        let mut rx = self.ready.subscribe();
        tokio::time::timeout(max, rx.wait_for(|g| *g == generation))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Consumes the reply queue on every connection generation until shutdown.
    async fn follow(self: Arc<Self>, broker: Broker) {
        let mut conns = broker.subscribe();
        let mut shutdown = broker.shutdown_signal();
        loop {
            let live = conns.borrow_and_update().clone();
            if let Some(live) = live.filter(|l| l.is_up()) {
                if let Err(e) = self.consume(&broker, &live).await {
                    tracing::warn!(queue = %self.queue, error = %e, "reply consumer stopped");
                    broker.report_failure();
                }
                self.ready.send_replace(0);
                // Same connection still up: retry on it after a pause.
                if conns.has_changed().unwrap_or(true) || !live.is_up() {
                    continue;
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = conns.changed() => continue,
                    _ = shutdown.changed() => return,
                }
            }
            tokio::select! {
                r = conns.changed() => if r.is_err() { return },
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
        }
    }

    async fn consume(&self, broker: &Broker, live: &Live) -> Result<(), lapin::Error> {
        let o = broker.rabbit();
        let ch = live.channel(false).await?;
        let (ch, _) = broker
            .declare_queue(
                live,
                ch,
                false,
                &self.queue,
                o.transient_queue_flags(),
                o.transient_queue_args(),
            )
            .await?;
        let mut consumer = ch
            .basic_consume(
                self.queue.as_str().into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        self.ready.send_replace(live.generation);
        while let Some(delivery) = consumer.next().await {
            let delivery = delivery?;
            // Reply consumers ack on receipt (rpc-wire.md §5).
            let _ = delivery.acker.ack(BasicAckOptions::default()).await;
            let reply = match envelope::unwrap(&delivery.data) {
                Ok(m) => IncomingReply::from_inner(m),
                Err(e) => {
                    tracing::warn!(queue = %self.queue, error = %e, "dropping an unreadable reply");
                    continue;
                }
            };
            let Some(msg_id) = reply.msg_id.clone() else {
                tracing::warn!(queue = %self.queue, "dropping a reply without _msg_id");
                continue;
            };
            let waiter = self
                .waiters
                .lock()
                .ok()
                .and_then(|w| w.get(&msg_id).cloned());
            match waiter {
                Some(tx) => {
                    let _ = tx.send(reply);
                }
                // A late reply to a call that timed out (oslo logs the same).
                None => tracing::info!(%msg_id, "no call waiting for this reply; dropped"),
            }
        }
        Ok(())
    }
}

struct ClientInner {
    broker: Broker,
    codec: Arc<dyn Codec>,
    exchange: String,
    topic: String,
    publisher: Publisher,
    replies: OnceCell<Arc<ReplyListener>>,
}

/// The oslo.messaging RPC client as a [`Transport`]: `RpcClient::new(Arc::new(transport),
/// timeout)` gives the API a `ConductorApi` that talks to any conductor, Python or Rust.
#[derive(Clone)]
pub struct OsloTransport {
    inner: Arc<ClientInner>,
    /// `Some(server)` routes to `<topic>.<server>` instead of the shared topic queue.
    server: Option<String>,
}

impl std::fmt::Debug for OsloTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OsloTransport")
            .field("exchange", &self.inner.exchange)
            .field("topic", &self.inner.topic)
            .field("server", &self.server)
            .finish()
    }
}

impl OsloTransport {
    pub fn new(broker: Broker, codec: Arc<dyn Codec>, exchange: &str, topic: &str) -> Self {
        Self {
            inner: Arc::new(ClientInner {
                publisher: Publisher::reconnecting_on_nack(broker.clone()),
                broker,
                codec,
                exchange: exchange.to_owned(),
                topic: topic.to_owned(),
                replies: OnceCell::new(),
            }),
            server: None,
        }
    }

    /// The same client addressing one server (`<topic>.<server>`), e.g. for
    /// `ping_conductor`.
    pub fn to_server(&self, server: &str) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            server: Some(server.to_owned()),
        }
    }

    fn routing_key(&self) -> String {
        match &self.server {
            Some(s) => format!("{}.{}", self.inner.topic, s),
            None => self.inner.topic.clone(),
        }
    }

    fn exchange_decl(&self) -> [Declaration; 1] {
        [Declaration::TopicExchange(self.inner.exchange.clone())]
    }

    /// The reply queue's name, once the first call created it.
    pub fn reply_queue(&self) -> Option<String> {
        self.inner.replies.get().map(|r| r.queue.clone())
    }

    /// A cast to every server (`<topic>_fanout`). Magnum never sends one; for completeness.
    pub async fn fanout_cast(&self, msg: Message) -> Result<(), RpcError> {
        self.inner.broker.live()?;
        let wire = self.inner.codec.encode_request(&msg).await?;
        let body = envelope::wrap(&envelope::request(&wire, None, &envelope::new_id()));
        let exchange = format!("{}_fanout", self.inner.topic);
        self.inner
            .publisher
            .publish(
                &[Declaration::FanoutExchange(exchange.clone())],
                Outgoing {
                    exchange: &exchange,
                    routing_key: "",
                    mandatory: false,
                    body: &body,
                    props: envelope::properties(None),
                },
                OPERATION_TIMEOUT,
            )
            .await
            .map(drop)
    }
}

#[async_trait]
impl Transport for OsloTransport {
    async fn call(&self, msg: Message, timeout: Duration) -> Result<Value, RpcError> {
        let deadline = Instant::now() + timeout;
        let live = self.inner.broker.live()?;
        let broker = self.inner.broker.clone();
        let replies = self
            .inner
            .replies
            .get_or_init(|| async move { ReplyListener::start(broker) })
            .await;
        if !replies
            .wait_ready(live.generation, REPLY_READY_WAIT.min(timeout))
            .await
        {
            return Err(RpcError::Unavailable(
                "the reply queue is not being consumed (broker connection lost?)".into(),
            ));
        }
        let wire = self.inner.codec.encode_request(&msg).await?;
        let call = CallKeys {
            msg_id: envelope::new_id(),
            reply_q: replies.queue.clone(),
        };
        let (_guard, mut rx) = replies.register(&call.msg_id);
        let body = envelope::wrap(&envelope::request(&wire, Some(&call), &envelope::new_id()));
        let left = deadline.saturating_duration_since(Instant::now());
        self.inner
            .publisher
            .publish(
                &self.exchange_decl(),
                Outgoing {
                    exchange: &self.inner.exchange,
                    routing_key: &self.routing_key(),
                    mandatory: false,
                    body: &body,
                    // The request expires unconsumed with the call (rpc-wire.md §10.4).
                    props: envelope::properties(Some(timeout)),
                },
                OPERATION_TIMEOUT.min(left.max(Duration::from_millis(1))),
            )
            .await?;

        let mut result = Value::Null;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Err(_) => return Err(RpcError::Timeout(timeout)),
                Ok(None) => {
                    return Err(RpcError::Unavailable("the reply consumer stopped".into()));
                }
                Ok(Some(reply)) => {
                    if let Some(f) = reply.failure {
                        return Err(RpcError::Remote(Failure::parse(&f)?.into_remote_error()));
                    }
                    if !reply.result.is_null() {
                        result = reply.result;
                    }
                    // `ending: false` with nothing else is a call-monitor heartbeat.
                    if reply.ending {
                        break;
                    }
                }
            }
        }
        self.inner.codec.decode_result(&msg.method, result).await
    }

    async fn cast(&self, msg: Message) -> Result<(), RpcError> {
        self.inner.broker.live()?;
        let wire = self.inner.codec.encode_request(&msg).await?;
        let body = envelope::wrap(&envelope::request(&wire, None, &envelope::new_id()));
        self.inner
            .publisher
            .publish(
                &self.exchange_decl(),
                Outgoing {
                    exchange: &self.inner.exchange,
                    routing_key: &self.routing_key(),
                    mandatory: false,
                    body: &body,
                    props: envelope::properties(None),
                },
                OPERATION_TIMEOUT,
            )
            .await
            .map(drop)
    }
}
