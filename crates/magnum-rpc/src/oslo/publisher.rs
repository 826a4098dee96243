//! Publishing on one channel per connection generation, declaring what oslo declares before
//! the first publish on a channel: with publisher confirms (RPC), or in AMQP transactions
//! (notifications, whose sender must learn after a crash whether a publish took effect).

use std::collections::HashSet;
use std::time::Duration;

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, BasicRejectOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Confirmation, ExchangeKind};
use tokio::sync::Mutex;

use super::connection::{Broker, Live, OPERATION_TIMEOUT};
use crate::transport::RpcError;

/// Something declared once per channel before publishing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Declaration {
    /// The control exchange (topic), as RPC clients and notifiers declare it.
    TopicExchange(String),
    /// A fanout exchange `<topic>_fanout`, as fanout publishers declare it.
    FanoutExchange(String),
    /// A notification queue named like its routing key, bound to the exchange (rpc-wire.md §13.1).
    NotificationQueue { exchange: String, queue: String },
    /// A durable queue of our own, with these arguments (the notification sender's ledger),
    /// a quorum queue if `quorum`.
    OwnQueue {
        queue: String,
        args: Vec<(String, i64)>,
        quorum: bool,
    },
}

/// How a publisher's channel makes the broker answer for what it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `confirm.select`: each publish is acknowledged on its own.
    Confirms,
    /// `tx.select`: publishes take effect together at `tx.commit`, or not at all when the
    /// channel closes first.
    Transactions,
}

/// One message to publish.
pub(crate) struct Outgoing<'a> {
    pub exchange: &'a str,
    pub routing_key: &'a str,
    /// Returned by the broker when no queue takes it (replies: the caller is gone).
    pub mandatory: bool,
    pub body: &'a [u8],
    pub props: BasicProperties,
}

impl Outgoing<'_> {
    /// Publishes it on `ch`; the confirm resolves at once unless `ch` is in confirm mode.
    async fn publish_on(&self, ch: &Channel) -> lapin::Result<lapin::PublisherConfirm> {
        ch.basic_publish(
            self.exchange.into(),
            self.routing_key.into(),
            BasicPublishOptions {
                mandatory: self.mandatory,
                immediate: false,
            },
            self.body,
            self.props.clone(),
        )
        .await
    }
}

/// What became of a confirmed publish.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Published {
    Delivered,
    /// Mandatory and unroutable: no queue of that name (a caller's reply queue is gone).
    Returned,
}

struct Slot {
    generation: u64,
    channel: Channel,
    declared: HashSet<Declaration>,
}

pub(crate) struct Publisher {
    broker: Broker,
    mode: Mode,
    slot: Mutex<Option<Slot>>,
    /// On a nack, drop the connection and publish once more on the next host's.
    reconnect_on_nack: bool,
}

/// How one confirmed publish ended, before any retry.
enum Attempt {
    Done(Published),
    /// The broker nacked it on connection `generation`.
    Nacked {
        generation: u64,
    },
    Failed(RpcError),
}

/// How long after a nack the publish is tried again.
const NACK_PAUSE: Duration = Duration::from_millis(1000);

fn nacked() -> RpcError {
    RpcError::Unavailable("the message broker refused the message".into())
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> RpcError {
    RpcError::Unavailable(format!("{what}: {e}"))
}

impl Publisher {
    pub(crate) fn new(broker: Broker) -> Self {
        Self::with_mode(broker, Mode::Confirms)
    }

    pub(crate) fn with_mode(broker: Broker, mode: Mode) -> Self {
        Self {
            broker,
            mode,
            slot: Mutex::new(None),
            reconnect_on_nack: false,
        }
    }

    /// A confirming publisher that answers a nack by dropping its connection and publishing
    /// once more on a fresh one, to the next broker host. After a node dies, a surviving
    /// node may nack every publish of a connection for many seconds (seen with quorum
    /// queues whose leader was on the dead node) while a new connection is served at once.
    /// Only for publishers whose connection carries nothing a drop would hurt more than a
    /// refused message (the API's casts and calls).
    pub(crate) fn reconnecting_on_nack(broker: Broker) -> Self {
        Self {
            reconnect_on_nack: true,
            ..Self::new(broker)
        }
    }

    fn confirms(&self) -> bool {
        self.mode == Mode::Confirms
    }

    /// A channel of `live` in this publisher's mode.
    async fn open(&self, live: &Live) -> Result<Channel, lapin::Error> {
        let ch = live.channel(self.confirms()).await?;
        if self.mode == Mode::Transactions {
            ch.tx_select().await?;
        }
        Ok(ch)
    }

    async fn declare(
        &self,
        live: &Live,
        ch: Channel,
        d: &Declaration,
    ) -> Result<Channel, lapin::Error> {
        let o = self.broker.rabbit();
        match d {
            Declaration::TopicExchange(name) => {
                self.broker
                    .declare_exchange(
                        live,
                        ch,
                        self.confirms(),
                        name,
                        ExchangeKind::Topic,
                        o.topic_flags(),
                    )
                    .await
            }
            Declaration::FanoutExchange(name) => {
                self.broker
                    .declare_exchange(
                        live,
                        ch,
                        self.confirms(),
                        name,
                        ExchangeKind::Fanout,
                        o.fanout_exchange_flags(),
                    )
                    .await
            }
            Declaration::NotificationQueue { exchange, queue } => {
                let ch = self
                    .broker
                    .declare_exchange(
                        live,
                        ch,
                        self.confirms(),
                        exchange,
                        ExchangeKind::Topic,
                        o.topic_flags(),
                    )
                    .await?;
                let (ch, _) = self
                    .broker
                    .declare_queue(
                        live,
                        ch,
                        self.confirms(),
                        queue,
                        o.topic_flags(),
                        o.topic_queue_args(),
                    )
                    .await?;
                ch.queue_bind(
                    queue.as_str().into(),
                    exchange.as_str().into(),
                    queue.as_str().into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
                Ok(ch)
            }
            Declaration::OwnQueue {
                queue,
                args,
                quorum,
            } => {
                let mut table = FieldTable::default();
                for (k, v) in args {
                    table.insert(k.as_str().into(), AMQPValue::LongLongInt(*v));
                }
                if *quorum {
                    table.insert(
                        "x-queue-type".into(),
                        AMQPValue::LongString("quorum".into()),
                    );
                }
                ch.queue_declare(
                    queue.as_str().into(),
                    QueueDeclareOptions {
                        durable: true,
                        ..QueueDeclareOptions::default()
                    },
                    table,
                )
                .await?;
                Ok(ch)
            }
        }
    }

    /// The channel of the current connection with `decls` declared on it.
    async fn channel(&self, decls: &[Declaration]) -> Result<Channel, RpcError> {
        let live = self.broker.live()?;
        let mut slot = self.slot.lock().await;
        let reusable = slot
            .as_ref()
            .is_some_and(|s| s.generation == live.generation && s.channel.status().connected());
        if !reusable {
            let ch = tokio::time::timeout(OPERATION_TIMEOUT, self.open(&live))
                .await
                .map_err(|_| unavailable("opening a channel", "timed out"))?
                .map_err(|e| {
                    self.broker.report_failure();
                    unavailable("opening a channel", e)
                })?;
            *slot = Some(Slot {
                generation: live.generation,
                channel: ch,
                declared: HashSet::new(),
            });
        }
        let Some(s) = slot.as_mut() else {
            return Err(unavailable("opening a channel", "no channel"));
        };
        for d in decls {
            // Our own queue is declared on every use: that renews its `x-expires` lease,
            // which publishing to it does not.
            if s.declared.contains(d) && !matches!(d, Declaration::OwnQueue { .. }) {
                continue;
            }
            let result =
                tokio::time::timeout(OPERATION_TIMEOUT, self.declare(&live, s.channel.clone(), d))
                    .await;
            match result {
                Ok(Ok(ch)) => {
                    if ch.id() != s.channel.id() {
                        // The fallback opened a new channel: earlier declarations are still
                        // on the broker, so they stay recorded.
                        if self.mode == Mode::Transactions
                            && let Err(e) = ch.tx_select().await
                        {
                            *slot = None;
                            self.broker.report_failure();
                            return Err(unavailable("opening a channel", e));
                        }
                        s.channel = ch;
                    }
                    s.declared.insert(d.clone());
                }
                Ok(Err(e)) => {
                    *slot = None;
                    self.broker.report_failure();
                    return Err(unavailable("declaring", e));
                }
                Err(_) => {
                    *slot = None;
                    self.broker.report_failure();
                    return Err(unavailable("declaring", "timed out"));
                }
            }
        }
        Ok(s.channel.clone())
    }

    /// Publishes and waits for the broker's confirm (at most `confirm_timeout`).
    pub(crate) async fn publish(
        &self,
        decls: &[Declaration],
        msg: Outgoing<'_>,
        confirm_timeout: Duration,
    ) -> Result<Published, RpcError> {
        match self.publish_once(decls, &msg, confirm_timeout).await {
            Attempt::Done(p) => Ok(p),
            Attempt::Failed(e) => Err(e),
            Attempt::Nacked { generation } if self.reconnect_on_nack => {
                tracing::warn!(
                    routing_key = msg.routing_key,
                    "the message broker refused a message; publishing it again on a new connection"
                );
                let nacked_at = tokio::time::Instant::now();
                self.broker.reconnect(generation).await;
                if self
                    .broker
                    .newer_than(generation, OPERATION_TIMEOUT)
                    .await
                    .is_none()
                {
                    return Err(nacked());
                }
                // A nack after a node died comes while the queue elects a new leader (under
                // a second in the harness); the next host's connection is up well before.
                tokio::time::sleep_until(nacked_at + NACK_PAUSE).await;
                match self.publish_once(decls, &msg, confirm_timeout).await {
                    Attempt::Done(p) => Ok(p),
                    Attempt::Failed(e) => Err(e),
                    Attempt::Nacked { .. } => Err(nacked()),
                }
            }
            Attempt::Nacked { .. } => Err(nacked()),
        }
    }

    async fn publish_once(
        &self,
        decls: &[Declaration],
        msg: &Outgoing<'_>,
        confirm_timeout: Duration,
    ) -> Attempt {
        let generation = match self.broker.live() {
            Ok(live) => live.generation,
            Err(e) => return Attempt::Failed(e),
        };
        let ch = match self.channel(decls).await {
            Ok(ch) => ch,
            Err(e) => return Attempt::Failed(e),
        };
        let confirm = match msg.publish_on(&ch).await {
            Ok(c) => c,
            Err(e) => {
                self.invalidate(&ch).await;
                return Attempt::Failed(unavailable("publishing", e));
            }
        };
        match tokio::time::timeout(confirm_timeout, confirm).await {
            Ok(Ok(Confirmation::Ack(None) | Confirmation::NotRequested)) => {
                Attempt::Done(Published::Delivered)
            }
            Ok(Ok(Confirmation::Ack(Some(_)))) => Attempt::Done(Published::Returned),
            Ok(Ok(Confirmation::Nack(_))) => Attempt::Nacked { generation },
            Ok(Err(e)) => {
                self.invalidate(&ch).await;
                Attempt::Failed(unavailable("waiting for the broker's confirm", e))
            }
            Err(_) => Attempt::Failed(RpcError::Unavailable(format!(
                "the message broker did not confirm within {confirm_timeout:?}"
            ))),
        }
    }

    /// Publishes `msgs` in order in one transaction (a [`Mode::Transactions`] publisher) and
    /// returns once the broker committed them. A channel that fails or closes before the
    /// commit reaches the broker publishes none of them; a commit whose answer is lost leaves
    /// the outcome open, which the caller settles with what it recorded in the same
    /// transaction (see [`peek`](Self::peek)).
    ///
    /// A [`Mode::Confirms`] publisher publishes all but the last, waits until the broker
    /// confirmed each, then publishes the last and waits for its confirm: once the last (the
    /// record) is in, so is every other; when it is not, some of the others may be.
    pub(crate) async fn commit_all(
        &self,
        decls: &[Declaration],
        msgs: &[Outgoing<'_>],
        timeout: Duration,
    ) -> Result<(), RpcError> {
        if self.confirms() {
            return self.confirm_all(decls, msgs, timeout).await;
        }
        let ch = self.channel(decls).await?;
        let work = async {
            for m in msgs {
                let confirm = m.publish_on(&ch).await?;
                // Not in confirm mode: resolves at once.
                confirm.await?;
            }
            ch.tx_commit().await
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.discard(&ch).await;
                Err(unavailable("committing", e))
            }
            Err(_) => {
                self.discard(&ch).await;
                Err(RpcError::Unavailable(format!(
                    "the message broker did not commit within {timeout:?}"
                )))
            }
        }
    }

    async fn confirm_all(
        &self,
        decls: &[Declaration],
        msgs: &[Outgoing<'_>],
        timeout: Duration,
    ) -> Result<(), RpcError> {
        let ch = self.channel(decls).await?;
        let work = async {
            let (last, rest) = match msgs.split_last() {
                Some((last, rest)) => (Some(last), rest),
                None => (None, msgs),
            };
            for group in [rest, last.map(std::slice::from_ref).unwrap_or_default()] {
                let mut pending = Vec::with_capacity(group.len());
                for m in group {
                    let confirm = m.publish_on(&ch).await?;
                    pending.push(confirm);
                }
                for confirm in pending {
                    if let Confirmation::Nack(_) = confirm.await? {
                        return Ok(false);
                    }
                }
            }
            Ok::<_, lapin::Error>(true)
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => {
                self.discard(&ch).await;
                Err(nacked())
            }
            Ok(Err(e)) => {
                self.discard(&ch).await;
                Err(unavailable("publishing", e))
            }
            Err(_) => {
                self.discard(&ch).await;
                Err(RpcError::Unavailable(format!(
                    "the message broker did not confirm within {timeout:?}"
                )))
            }
        }
    }

    /// The body of the message at the head of `queue` (declared by `decl` first), left where
    /// it is: taken without acknowledging and rejected back onto the queue.
    pub(crate) async fn peek(
        &self,
        decl: &Declaration,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, RpcError> {
        let ch = self.channel(std::slice::from_ref(decl)).await?;
        let tx = self.mode == Mode::Transactions;
        let work = async {
            let got = ch
                .basic_get(queue.into(), BasicGetOptions { no_ack: false })
                .await?;
            let Some(m) = got else {
                return Ok(None);
            };
            let d = m.delivery;
            ch.basic_reject(d.delivery_tag, BasicRejectOptions { requeue: true })
                .await?;
            if tx {
                // RabbitMQ makes a rejection part of the channel's transaction.
                ch.tx_commit().await?;
            }
            Ok::<_, lapin::Error>(Some(d.data))
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(e)) => {
                self.discard(&ch).await;
                Err(unavailable("reading a queue", e))
            }
            Err(_) => {
                self.discard(&ch).await;
                Err(RpcError::Unavailable(format!(
                    "the message broker did not answer within {timeout:?}"
                )))
            }
        }
    }

    /// Forgets and closes a channel whose transaction failed: closing it makes the broker
    /// drop whatever it still held uncommitted.
    async fn discard(&self, ch: &Channel) {
        self.invalidate(ch).await;
        if ch.status().connected() {
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                ch.close(200, "transaction abandoned".into()),
            )
            .await;
        }
    }

    /// Forgets a channel that failed, so the next publish opens a new one.
    async fn invalidate(&self, ch: &Channel) {
        let mut slot = self.slot.lock().await;
        if slot.as_ref().is_some_and(|s| s.channel.id() == ch.id()) {
            *slot = None;
        }
        self.broker.report_failure();
    }
}
