//! The RPC server (a conductor): consumes `<topic>`, `<topic>.<server>` and the fanout
//! queue, dispatches each request to a [`ConductorApi`] and answers calls (rpc-wire.md §4.1, §8.2,
//! §10).
//!
//! Unlike upstream, a request is acked only after its handler finished and its reply was
//! sent, so a conductor killed mid-message loses nothing: the broker redelivers it to
//! another conductor. Duplicate detection (the last 16 `_unique_id`s) still drops a
//! redelivery that reaches the conductor already handling it.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use futures::stream::SelectAll;
use futures::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicQosOptions, BasicRejectOptions,
    QueueBindOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Consumer, ExchangeKind};
use magnum_core::ErrorKind;
use serde_json::{Map, Value};
use tokio::sync::{Mutex, Semaphore, watch};
use tokio::task::JoinHandle;

use super::codec::{Codec, Decoded, WireRequest};
use super::connection::{Broker, Live, OPERATION_TIMEOUT};
use super::envelope::{self, IncomingRequest};
use super::failure::Failure;
use super::publisher::{Outgoing, Published, Publisher};
use crate::ConductorApi;
use crate::dispatch::dispatch;
use crate::messages::method;
use crate::transport::{RemoteError, RpcError};

/// Requests remembered for duplicate detection, as oslo's listener keeps them.
const DUPLICATE_WINDOW: usize = 16;
/// Reply queues that stayed missing are not retried again for this long (oslo: 60 s, 200).
const DEAD_REPLY_QUEUE_TTL: Duration = Duration::from_secs(60);
const DEAD_REPLY_QUEUE_MAX: usize = 200;
/// Pause between two replies to a reply queue that does not exist (yet).
const REPLY_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// How long `stop` waits for requests in progress.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// The methods our handlers serve; anything else is oslo's NoSuchMethod.
const METHODS: &[&str] = &[
    method::CLUSTER_CREATE,
    method::CLUSTER_UPDATE,
    method::CLUSTER_DELETE,
    method::CLUSTER_RESIZE,
    method::CLUSTER_UPGRADE,
    method::NODEGROUP_CREATE,
    method::NODEGROUP_UPDATE,
    method::NODEGROUP_DELETE,
    method::CREDENTIAL_ROTATE,
    method::SIGN_CERTIFICATE,
    method::GET_CA_CERTIFICATE,
    method::ROTATE_CA_CERTIFICATE,
    method::PING_CONDUCTOR,
];

/// A fresh 12-character lowercase base32 id, the form of upstream's `short_id.generate_id()`
/// that names a conductor's own queue.
pub fn generate_server_id() -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let bits = uuid::Uuid::new_v4().as_u128();
    (0..12)
        .map(|i| ALPHABET[((bits >> (i * 5)) & 0x1f) as usize] as char)
        .collect()
}

/// Where a server listens.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `[DEFAULT] control_exchange`.
    pub exchange: String,
    /// `[conductor] topic`.
    pub topic: String,
    /// The per-server queue suffix.
    pub server_id: String,
    /// Requests handled at once (`executor_thread_pool_size`): the prefetch of each queue
    /// and the size of the handler pool.
    pub pool_size: usize,
}

/// What handling a request came to.
enum Outcome {
    /// The handler's answer (or its error).
    Done(Result<Value, Failure>),
    /// Not a request we can serve (unknown method, version, namespace, bad arguments):
    /// answered with the failure when a caller waits, else rejected without requeue.
    Foreign(Failure),
}

struct ServerInner {
    broker: Broker,
    codec: Arc<dyn Codec>,
    handler: Arc<dyn ConductorApi>,
    config: ServerConfig,
    fanout_queue: String,
    seen: StdMutex<VecDeque<String>>,
    permits: Arc<Semaphore>,
    replies: Publisher,
    dead_reply_queues: StdMutex<HashMap<String, Instant>>,
    stop: watch::Sender<bool>,
}

/// A running RPC server. Dropping it does not stop it; call [`RpcServer::stop`].
pub struct RpcServer {
    inner: Arc<ServerInner>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for RpcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcServer")
            .field("config", &self.inner.config)
            .finish()
    }
}

impl RpcServer {
    /// Starts consuming on the current connection and on every later one.
    pub fn start(
        broker: Broker,
        codec: Arc<dyn Codec>,
        handler: Arc<dyn ConductorApi>,
        config: ServerConfig,
    ) -> Self {
        let (stop, _) = watch::channel(false);
        let pool = config.pool_size.max(1);
        let inner = Arc::new(ServerInner {
            fanout_queue: format!("{}_fanout_{}", config.topic, envelope::new_id()),
            replies: Publisher::new(broker.clone()),
            broker,
            codec,
            handler,
            config,
            seen: StdMutex::new(VecDeque::with_capacity(DUPLICATE_WINDOW)),
            permits: Arc::new(Semaphore::new(pool)),
            dead_reply_queues: StdMutex::new(HashMap::new()),
            stop,
        });
        let task = tokio::spawn(Arc::clone(&inner).follow());
        Self {
            inner,
            task: Mutex::new(Some(task)),
        }
    }

    pub fn server_id(&self) -> &str {
        &self.inner.config.server_id
    }

    /// Stops consuming, waits for the requests in progress (acked as they finish) and
    /// deletes the fanout queue.
    pub async fn stop(&self) {
        self.inner.stop.send_replace(true);
        if let Some(task) = self.task.lock().await.take() {
            let _ = task.await;
        }
    }
}

impl ServerInner {
    fn pool(&self) -> usize {
        self.config.pool_size.max(1)
    }

    async fn follow(self: Arc<Self>) {
        let mut conns = self.broker.subscribe();
        let mut stop = self.stop.subscribe();
        let mut broker_down = self.broker.shutdown_signal();
        loop {
            if *stop.borrow() {
                break;
            }
            let live = conns.borrow_and_update().clone();
            if let Some(live) = live.filter(|l| l.is_up()) {
                match Arc::clone(&self).session(&live).await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(topic = %self.config.topic, error = %e, "RPC server lost its consumers; re-declaring");
                        self.broker.report_failure();
                    }
                }
                if !conns.has_changed().unwrap_or(true) && live.is_up() {
                    // Same connection still up (e.g. a declare was refused): retry later.
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = conns.changed() => {}
                        _ = stop.changed() => {}
                    }
                }
                continue;
            }
            tokio::select! {
                r = conns.changed() => if r.is_err() { break },
                _ = stop.changed() => {}
                _ = broker_down.changed() => if *broker_down.borrow() { break },
            }
        }
        self.drain().await;
    }

    /// Waits for the requests in progress.
    async fn drain(&self) {
        let n = u32::try_from(self.pool()).unwrap_or(u32::MAX);
        if tokio::time::timeout(STOP_GRACE, self.permits.acquire_many(n))
            .await
            .is_err()
        {
            tracing::warn!("RPC server stopped with requests still in progress");
        }
    }

    async fn declare(&self, live: &Live, ch: Channel) -> Result<Channel, lapin::Error> {
        let o = self.broker.rabbit();
        let c = &self.config;
        let bind = |ch: Channel, queue: String, exchange: String, key: String| async move {
            ch.queue_bind(
                queue.as_str().into(),
                exchange.as_str().into(),
                key.as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map(|()| ch)
        };
        let ch = self
            .broker
            .declare_exchange(
                live,
                ch,
                false,
                &c.exchange,
                ExchangeKind::Topic,
                o.topic_flags(),
            )
            .await?;
        let server_queue = format!("{}.{}", c.topic, c.server_id);
        let mut ch = ch;
        for queue in [c.topic.clone(), server_queue] {
            let (next, _) = self
                .broker
                .declare_queue(
                    live,
                    ch,
                    false,
                    &queue,
                    o.topic_flags(),
                    o.topic_queue_args(),
                )
                .await?;
            ch = bind(next, queue.clone(), c.exchange.clone(), queue).await?;
        }
        let fanout = format!("{}_fanout", c.topic);
        let ch = self
            .broker
            .declare_exchange(
                live,
                ch,
                false,
                &fanout,
                ExchangeKind::Fanout,
                o.fanout_exchange_flags(),
            )
            .await?;
        let (ch, _) = self
            .broker
            .declare_queue(
                live,
                ch,
                false,
                &self.fanout_queue,
                o.transient_queue_flags(),
                o.transient_queue_args(),
            )
            .await?;
        bind(ch, self.fanout_queue.clone(), fanout, c.topic.clone()).await
    }

    /// Declares and consumes on one connection until it ends (`Ok(false)`), or until
    /// `stop` (`Ok(true)`).
    async fn session(self: Arc<Self>, live: &Live) -> Result<bool, String> {
        let c = &self.config;
        let text = |e: lapin::Error| e.to_string();
        let ch = live.channel(false).await.map_err(text)?;
        let prefetch = u16::try_from(self.pool()).unwrap_or(u16::MAX);
        let prefetch = match self.broker.rabbit().rabbit_qos_prefetch_count {
            0 => prefetch,
            n => n.min(prefetch),
        };
        ch.basic_qos(prefetch, BasicQosOptions::default())
            .await
            .map_err(text)?;
        let ch = tokio::time::timeout(OPERATION_TIMEOUT * 4, self.declare(live, ch))
            .await
            .map_err(|_| "declaring queues timed out".to_owned())?
            .map_err(text)?;
        let mut consumer_args = FieldTable::default();
        if self.broker.rabbit().enable_cancel_on_failover {
            consumer_args.insert(
                ShortString::from("x-cancel-on-ha-failover"),
                AMQPValue::Boolean(true),
            );
        }
        let server_queue = format!("{}.{}", c.topic, c.server_id);
        let mut consumers: SelectAll<Consumer> = SelectAll::new();
        let mut tags = Vec::new();
        // oslo's consumer tags are small integers.
        for (i, queue) in [
            c.topic.as_str(),
            server_queue.as_str(),
            self.fanout_queue.as_str(),
        ]
        .into_iter()
        .enumerate()
        {
            let tag = (i + 1).to_string();
            consumers.push(
                ch.basic_consume(
                    queue.into(),
                    tag.as_str().into(),
                    BasicConsumeOptions::default(),
                    consumer_args.clone(),
                )
                .await
                .map_err(text)?,
            );
            tags.push(tag);
        }
        tracing::info!(topic = %c.topic, server = %c.server_id, broker = %live.address, generation = live.generation, "RPC server consuming");

        let mut stop = self.stop.subscribe();
        let stopped = loop {
            // Take a handler slot before the next delivery, so at most `pool` run at once.
            let permit = tokio::select! {
                p = Arc::clone(&self.permits).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break true,
                },
                _ = stop.changed() => break true,
            };
            let delivery = tokio::select! {
                d = consumers.next() => d,
                _ = stop.changed() => break true,
            };
            match delivery {
                Some(Ok(d)) => {
                    let me = Arc::clone(&self);
                    tokio::spawn(async move {
                        me.handle(d).await;
                        drop(permit);
                    });
                }
                Some(Err(e)) => return Err(e.to_string()),
                None => break false,
            }
        };
        if stopped {
            for tag in &tags {
                let _ = tokio::time::timeout(
                    OPERATION_TIMEOUT,
                    ch.basic_cancel(tag.as_str().into(), BasicCancelOptions::default()),
                )
                .await;
            }
            // Requests in progress still ack on this channel.
            self.drain().await;
            let _ = tokio::time::timeout(
                OPERATION_TIMEOUT,
                ch.queue_delete(
                    self.fanout_queue.as_str().into(),
                    QueueDeleteOptions::default(),
                ),
            )
            .await;
            let _ = tokio::time::timeout(OPERATION_TIMEOUT, ch.close(200, "OK".into())).await;
        }
        Ok(stopped)
    }

    /// True when `id` was seen among the last 16 requests; remembers it otherwise.
    fn is_duplicate(&self, id: &str) -> bool {
        let Ok(mut seen) = self.seen.lock() else {
            return false;
        };
        if seen.iter().any(|s| s == id) {
            return true;
        }
        if seen.len() == DUPLICATE_WINDOW {
            seen.pop_front();
        }
        seen.push_back(id.to_owned());
        false
    }

    async fn handle(&self, delivery: Delivery) {
        let queue = delivery.routing_key.to_string();
        let inner = match envelope::unwrap(&delivery.data) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(routing_key = %queue, error = %e, "rejecting an undecodable message");
                let _ = delivery
                    .acker
                    .reject(BasicRejectOptions { requeue: false })
                    .await;
                return;
            }
        };
        let req = IncomingRequest::from_inner(inner);
        if let Some(id) = &req.unique_id
            && self.is_duplicate(id)
        {
            tracing::info!(unique_id = %id, "duplicate message dropped");
            let _ = delivery.acker.ack(BasicAckOptions::default()).await;
            return;
        }
        let method = req
            .method
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let request_id = req
            .context
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned();

        let started = Instant::now();
        tracing::debug!(%method, %request_id, routing_key = %queue, redelivered = delivery.redelivered, msg_id = %req.reply_to().map_or("-", |(id, _)| id), "request received");
        // Call-monitor heartbeats while the handler runs, when the caller asked for them.
        let heartbeat = match (req.reply_to(), req.client_timeout) {
            (Some((msg_id, reply_q)), Some(t)) if t > 0.0 => {
                Some(self.heartbeats(msg_id, reply_q, t))
            }
            _ => None,
        };
        // A panicking handler answers like a failing one and its message is acked, so it
        // cannot come back forever.
        let outcome = AssertUnwindSafe(self.process(&req))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!(%method, %request_id, "the handler panicked");
                Outcome::Done(Err(Failure::from_remote(&RemoteError::new(
                    ErrorKind::Internal,
                    "The conductor failed while handling the request.",
                ))))
            });
        if let Some(h) = heartbeat {
            h.abort();
        }

        let reply = match (&outcome, req.reply_to()) {
            (Outcome::Done(r), Some(to)) => Some((r.clone(), to)),
            (Outcome::Foreign(f), Some(to)) => Some((Err(f.clone()), to)),
            (Outcome::Done(Err(f)), None) => {
                tracing::warn!(%method, %request_id, error = %f.message, "cast failed");
                None
            }
            (Outcome::Done(Ok(_)), None) => None,
            (Outcome::Foreign(f), None) => {
                tracing::warn!(%method, %request_id, routing_key = %queue, error = %f.message, "rejecting a cast we cannot serve");
                let _ = delivery
                    .acker
                    .reject(BasicRejectOptions { requeue: false })
                    .await;
                return;
            }
        };
        if let Some((result, (msg_id, reply_q))) = reply {
            if let Err(f) = &result {
                tracing::info!(%method, %request_id, class = %f.class, error = %f.message, "call answered with a failure");
            }
            self.reply(msg_id, reply_q, result).await;
            tracing::debug!(%method, %msg_id, elapsed_ms = started.elapsed().as_millis() as u64, "call answered");
        }
        if let Err(e) = delivery.acker.ack(BasicAckOptions::default()).await {
            // The channel is gone: the broker will redeliver; duplicate detection (or the
            // handlers' idempotence) copes.
            tracing::debug!(%method, error = %e, "ack failed");
        }
    }

    async fn process(&self, req: &IncomingRequest) -> Outcome {
        let method = match &req.method {
            Some(Value::String(m)) => m.clone(),
            other => {
                let shown = other
                    .as_ref()
                    .map_or_else(|| "None".to_owned(), Value::to_string);
                return Outcome::Foreign(Failure::no_such_method(&shown));
            }
        };
        // Endpoints declare no target: namespace null, any version 1.0.
        let version = match &req.version {
            None => Some("1.0".to_owned()),
            Some(Value::String(v)) => Some(v.clone()),
            Some(_) => None,
        };
        let namespace_ok = matches!(req.namespace, None | Some(Value::Null));
        let version_ok = version.as_deref().is_some_and(version_1_0_compatible);
        if !namespace_ok || !version_ok {
            return Outcome::Foreign(Failure::unsupported_version(
                version.as_deref().unwrap_or("None"),
                Some(&method),
            ));
        }
        if method.starts_with('_') {
            return Outcome::Foreign(Failure::no_such_method(&method));
        }
        let args = match &req.args {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Outcome::Foreign(Failure::builtin(
                    "TypeError",
                    &format!("{method}() argument after ** must be a mapping"),
                ));
            }
        };
        let wire = WireRequest {
            method: method.clone(),
            args,
            context: req.context.clone(),
        };
        let decoded = match self.codec.decode_request(wire.clone()).await {
            Ok(d) => d,
            Err(e) => return Outcome::Foreign(Failure::from_rpc_error(&e)),
        };
        let result = match decoded {
            Decoded::Answered(r) => r,
            Decoded::Dispatch(msg) => {
                if !METHODS.contains(&msg.method.as_str()) {
                    return Outcome::Foreign(Failure::no_such_method(&method));
                }
                match dispatch(self.handler.as_ref(), msg).await {
                    Ok(v) => self.codec.encode_result(&wire, v).await,
                    // Arguments our handlers cannot read: a foreign message.
                    Err(e @ RpcError::Malformed(_)) => {
                        return Outcome::Foreign(Failure::from_rpc_error(&e));
                    }
                    Err(e) => Err(e),
                }
            }
        };
        Outcome::Done(result.map_err(|e| Failure::from_rpc_error(&e)))
    }

    fn heartbeats(&self, msg_id: &str, reply_q: &str, client_timeout: f64) -> JoinHandle<()> {
        // oslo: every max(int(timeout / 2), 1) seconds.
        let interval = Duration::from_secs(((client_timeout / 2.0).floor() as u64).max(1));
        let publisher = Publisher::new(self.broker.clone());
        let (msg_id, reply_q) = (msg_id.to_owned(), reply_q.to_owned());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let body = envelope::wrap(&envelope::reply(&msg_id, None, None, false));
                if let Err(e) = publisher
                    .publish(
                        &[],
                        Outgoing {
                            exchange: "",
                            routing_key: &reply_q,
                            mandatory: true,
                            body: &body,
                            props: envelope::properties(None),
                        },
                        OPERATION_TIMEOUT,
                    )
                    .await
                {
                    tracing::debug!(error = %e, "call-monitor heartbeat not sent");
                }
            }
        })
    }

    fn reply_queue_dead(&self, queue: &str) -> bool {
        let Ok(mut dead) = self.dead_reply_queues.lock() else {
            return false;
        };
        dead.retain(|_, since| since.elapsed() < DEAD_REPLY_QUEUE_TTL);
        dead.contains_key(queue)
    }

    fn mark_reply_queue_dead(&self, queue: &str) {
        if let Ok(mut dead) = self.dead_reply_queues.lock() {
            if dead.len() >= DEAD_REPLY_QUEUE_MAX
                && let Some(oldest) = dead.iter().min_by_key(|(_, t)| **t).map(|(k, _)| k.clone())
            {
                dead.remove(&oldest);
            }
            dead.insert(queue.to_owned(), Instant::now());
        }
    }

    /// Sends the one reply of a call; a missing reply queue is retried for
    /// `kombu_missing_consumer_retry_timeout` (the caller may be reconnecting).
    async fn reply(&self, msg_id: &str, reply_q: &str, result: Result<Value, Failure>) {
        if self.reply_queue_dead(reply_q) {
            tracing::info!(%msg_id, "reply queue known to be gone; reply dropped");
            return;
        }
        let (value, failure) = match result {
            Ok(v) => (Some(v), None),
            Err(f) => (None, Some(f)),
        };
        let body = envelope::wrap(&envelope::reply(msg_id, value, failure.as_ref(), true));
        let o = self.broker.rabbit();
        let give_up =
            Instant::now() + Duration::from_secs(u64::from(o.kombu_missing_consumer_retry_timeout));
        loop {
            match self
                .replies
                .publish(
                    &[],
                    Outgoing {
                        exchange: "",
                        routing_key: reply_q,
                        mandatory: o.direct_mandatory_flag,
                        body: &body,
                        props: envelope::properties(None),
                    },
                    OPERATION_TIMEOUT,
                )
                .await
            {
                Ok(Published::Delivered) => return,
                Ok(Published::Returned) if Instant::now() < give_up => {
                    tokio::time::sleep(REPLY_RETRY_PAUSE).await;
                }
                Ok(Published::Returned) => {
                    tracing::warn!(%msg_id, "reply queue does not exist; reply dropped");
                    self.mark_reply_queue_dead(reply_q);
                    return;
                }
                Err(e) => {
                    tracing::warn!(%msg_id, error = %e, "reply not sent");
                    return;
                }
            }
        }
    }
}

/// oslo's `version_is_compatible("1.0", v)`: major 1, minor 0, revision 0.
fn version_1_0_compatible(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    let num = |i: usize| parts.get(i).map(|p| p.parse::<u64>());
    matches!(
        (num(0), num(1), num(2)),
        (Some(Ok(1)), Some(Ok(0)), None | Some(Ok(0)))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ids_look_like_upstreams() {
        let id = generate_server_id();
        assert_eq!(id.len(), 12);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c))
        );
        assert_ne!(id, generate_server_id());
    }

    #[test]
    fn versions_compatible_with_1_0() {
        assert!(version_1_0_compatible("1.0"));
        assert!(version_1_0_compatible("1.0.0"));
        assert!(!version_1_0_compatible("1.1"));
        assert!(!version_1_0_compatible("2.0"));
        assert!(!version_1_0_compatible("1"));
        assert!(!version_1_0_compatible("x.y"));
    }
}
