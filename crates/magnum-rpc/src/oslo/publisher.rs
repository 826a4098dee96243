//! Publishing with publisher confirms on one channel per connection generation, declaring
//! what oslo declares before the first publish on a channel.

use std::collections::HashSet;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, QueueBindOptions};
use lapin::types::FieldTable;
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
    slot: Mutex<Option<Slot>>,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> RpcError {
    RpcError::Unavailable(format!("{what}: {e}"))
}

impl Publisher {
    pub(crate) fn new(broker: Broker) -> Self {
        Self {
            broker,
            slot: Mutex::new(None),
        }
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
                    .declare_exchange(live, ch, true, name, ExchangeKind::Topic, o.topic_flags())
                    .await
            }
            Declaration::FanoutExchange(name) => {
                self.broker
                    .declare_exchange(
                        live,
                        ch,
                        true,
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
                        true,
                        exchange,
                        ExchangeKind::Topic,
                        o.topic_flags(),
                    )
                    .await?;
                let (ch, _) = self
                    .broker
                    .declare_queue(live, ch, true, queue, o.topic_flags(), o.topic_queue_args())
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
            let ch = tokio::time::timeout(OPERATION_TIMEOUT, live.channel(true))
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
            if s.declared.contains(d) {
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
        let Outgoing {
            exchange,
            routing_key,
            mandatory,
            body,
            props,
        } = msg;
        let ch = self.channel(decls).await?;
        let confirm = match ch
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                BasicPublishOptions {
                    mandatory,
                    immediate: false,
                },
                body,
                props,
            )
            .await
        {
            Ok(c) => c,
            Err(e) => {
                self.invalidate(&ch).await;
                return Err(unavailable("publishing", e));
            }
        };
        match tokio::time::timeout(confirm_timeout, confirm).await {
            Ok(Ok(Confirmation::Ack(None) | Confirmation::NotRequested)) => {
                Ok(Published::Delivered)
            }
            Ok(Ok(Confirmation::Ack(Some(_)))) => Ok(Published::Returned),
            Ok(Ok(Confirmation::Nack(_))) => Err(RpcError::Unavailable(
                "the message broker refused the message".into(),
            )),
            Ok(Err(e)) => {
                self.invalidate(&ch).await;
                Err(unavailable("waiting for the broker's confirm", e))
            }
            Err(_) => Err(RpcError::Unavailable(format!(
                "the message broker did not confirm within {confirm_timeout:?}"
            ))),
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
