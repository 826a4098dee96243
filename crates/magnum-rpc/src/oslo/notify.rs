//! Notifications (rpc-wire.md §13): `messagingv2` (enveloped) or `messaging` (bare) messages to
//! `<control_exchange>` with routing key `<topic>.<priority>`, into queues named like the
//! routing key, which the publisher declares as oslo does so events wait for a consumer.
//! Published in AMQP transactions, so that a sender can record in the same commit what it
//! sent and learn after a crash whether its last publish took effect; with quorum queues,
//! with publisher confirms instead, the record last (see [`NotificationPublisher::new`]).

use magnum_core::RequestContext;
use serde_json::{Map, Value};

use super::codec::context_to_wire;
use super::connection::{Broker, OPERATION_TIMEOUT};
use super::envelope::{self, CONTEXT_PREFIX, UNIQUE_ID};
use super::publisher::{Declaration, Mode, Outgoing, Publisher};
use crate::transport::RpcError;

/// Publishes notifications on the RPC connection (Magnum ignores
/// `[oslo_messaging_notifications] transport_url`).
pub struct NotificationPublisher {
    publisher: Publisher,
    /// `rabbit_quorum_queue`: the ledger is a quorum queue too.
    quorum: bool,
    exchange: String,
    topics: Vec<String>,
    enveloped: bool,
    bare: bool,
}

impl std::fmt::Debug for NotificationPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationPublisher")
            .field("exchange", &self.exchange)
            .field("topics", &self.topics)
            .field("messagingv2", &self.enveloped)
            .field("messaging", &self.bare)
            .finish()
    }
}

impl NotificationPublisher {
    /// `drivers`: `[oslo_messaging_notifications] driver`; only `messagingv2` and
    /// `messaging` send anything (log, noop, routing and test drivers send nothing here).
    pub fn new(broker: Broker, exchange: &str, topics: &[String], drivers: &[String]) -> Self {
        let quorum = broker.rabbit().rabbit_quorum_queue;
        // RabbitMQ committed transactions into a quorum queue whose messages never reached
        // it, for as long as one of its nodes was down (the HA harness: all of a conductor's
        // notifications for 12 s, no error). Confirms answer for each message. The price: a
        // batch that fails half-way may be sent again whole, so an event can arrive twice.
        let mode = if quorum {
            Mode::Confirms
        } else {
            Mode::Transactions
        };
        Self {
            quorum,
            publisher: Publisher::with_mode(broker, mode),
            exchange: exchange.to_owned(),
            topics: topics.to_vec(),
            enveloped: drivers.iter().any(|d| d == "messagingv2"),
            bare: drivers.iter().any(|d| d == "messaging"),
        }
    }

    /// Whether a driver that publishes to the broker is configured.
    pub fn is_enabled(&self) -> bool {
        (self.enveloped || self.bare) && !self.topics.is_empty()
    }

    /// Publishes `message` (with `message_id`, `publisher_id`, `event_type`, `priority`,
    /// `payload`, `timestamp` already in it) at `priority` to every topic, adding
    /// `_unique_id` unless it has one (a resent message keeps its id). Returns once the
    /// broker committed every copy; fails at once with
    /// `Unavailable` while disconnected (the caller logs and goes on, as oslo's notifier
    /// swallows send failures).
    pub async fn publish(&self, priority: &str, message: Value) -> Result<(), RpcError> {
        let Value::Object(mut m) = message else {
            return Err(RpcError::Malformed(
                "a notification must be a JSON object".into(),
            ));
        };
        m.entry(UNIQUE_ID)
            .or_insert_with(|| Value::String(envelope::new_id()));
        self.send(priority, &m).await
    }

    /// As [`publish`](Self::publish), with the `_context_*` keys of `ctx` as oslo adds
    /// them: a redacted copy (no token, no auth URL, `all_tenants` and `read_only` false).
    pub async fn publish_with_context(
        &self,
        priority: &str,
        message: Value,
        ctx: &RequestContext,
    ) -> Result<(), RpcError> {
        let Value::Object(mut m) = message else {
            return Err(RpcError::Malformed(
                "a notification must be a JSON object".into(),
            ));
        };
        m.insert(UNIQUE_ID.into(), Value::String(envelope::new_id()));
        let mut wire = context_to_wire(ctx);
        for key in ["auth_token", "auth_url", "auth_token_info"] {
            wire.insert(key.into(), Value::Null);
        }
        for key in ["all_tenants", "read_only", "show_deleted"] {
            wire.insert(key.into(), Value::Bool(false));
        }
        for (k, v) in wire {
            m.insert(format!("{CONTEXT_PREFIX}{k}"), v);
        }
        self.send(priority, &m).await
    }

    /// Publishes `events` (priority, message) in order, each as [`publish`](Self::publish)
    /// would, and records the last one's `_unique_id` in `host`'s ledger queue, all in one
    /// AMQP transaction: once it commits, every event and the record took effect together;
    /// when it fails, [`last_recorded`](Self::last_recorded) tells whether it had.
    pub async fn publish_recorded(
        &self,
        events: &[(&str, &Value)],
        host: &str,
    ) -> Result<(), RpcError> {
        let Some((_, last)) = events.last() else {
            return Ok(());
        };
        let Some(record) = last.get(UNIQUE_ID).and_then(Value::as_str) else {
            return Err(RpcError::Malformed(format!(
                "a recorded notification must carry {UNIQUE_ID}"
            )));
        };
        let mut copies = Vec::new();
        for (priority, message) in events {
            let Value::Object(m) = message else {
                return Err(RpcError::Malformed(
                    "a notification must be a JSON object".into(),
                ));
            };
            copies.extend(self.copies(priority, m));
        }
        let ledger = self.ledger(host);
        let mut decls = self.declarations(&copies);
        decls.push(ledger_declaration(&ledger, self.quorum));
        let mut msgs = self.outgoing(&copies);
        msgs.push(Outgoing {
            exchange: "",
            routing_key: &ledger,
            mandatory: false,
            body: record.as_bytes(),
            props: lapin::BasicProperties::default().with_delivery_mode(2),
        });
        self.publisher
            .commit_all(&decls, &msgs, OPERATION_TIMEOUT)
            .await
    }

    /// The `_unique_id` that `host`'s ledger holds: the last event of the last transaction
    /// of [`publish_recorded`](Self::publish_recorded) that committed, if any did.
    pub async fn last_recorded(&self, host: &str) -> Result<Option<String>, RpcError> {
        let ledger = self.ledger(host);
        let body = self
            .publisher
            .peek(
                &ledger_declaration(&ledger, self.quorum),
                &ledger,
                OPERATION_TIMEOUT,
            )
            .await?;
        Ok(body.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// `host`'s ledger queue, of the type this publisher declares.
    pub fn ledger(&self, host: &str) -> String {
        if self.quorum {
            quorum_ledger_queue(host)
        } else {
            ledger_queue(host)
        }
    }

    /// Each copy of one message to send: (routing key, body), per topic and driver.
    fn copies(&self, priority: &str, m: &Map<String, Value>) -> Vec<(String, Vec<u8>)> {
        let mut bodies = Vec::new();
        if self.enveloped {
            bodies.push(envelope::wrap(m));
        }
        if self.bare {
            bodies.push(envelope::unwrapped(m));
        }
        let priority = priority.to_ascii_lowercase();
        let mut copies = Vec::new();
        for topic in &self.topics {
            for body in &bodies {
                copies.push((format!("{topic}.{priority}"), body.clone()));
            }
        }
        copies
    }

    fn declarations(&self, copies: &[(String, Vec<u8>)]) -> Vec<Declaration> {
        let mut decls: Vec<Declaration> = Vec::new();
        for (routing_key, _) in copies {
            let d = Declaration::NotificationQueue {
                exchange: self.exchange.clone(),
                queue: routing_key.clone(),
            };
            if !decls.contains(&d) {
                decls.push(d);
            }
        }
        decls
    }

    fn outgoing<'a>(&'a self, copies: &'a [(String, Vec<u8>)]) -> Vec<Outgoing<'a>> {
        copies
            .iter()
            .map(|(routing_key, body)| Outgoing {
                exchange: &self.exchange,
                routing_key,
                mandatory: false,
                body,
                props: envelope::properties(None),
            })
            .collect()
    }

    async fn send(&self, priority: &str, m: &Map<String, Value>) -> Result<(), RpcError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let copies = self.copies(priority, m);
        self.publisher
            .commit_all(
                &self.declarations(&copies),
                &self.outgoing(&copies),
                OPERATION_TIMEOUT,
            )
            .await
    }
}

/// The queue where `host`'s notification sender records what it committed (a classic queue).
pub fn ledger_queue(host: &str) -> String {
    format!("magnum-rs.notifications-sent.{host}")
}

/// The same with `rabbit_quorum_queue`. Its own name, because a queue cannot change type:
/// declaring the classic one as quorum would fail (PRECONDITION_FAILED) for as long as it
/// exists. The classic one, no longer declared, expires within a week; switching loses only
/// its record, which matters only if notifications were left unsent across the switch.
pub fn quorum_ledger_queue(host: &str) -> String {
    format!("magnum-rs.notifications-sent-quorum.{host}")
}

/// Durable, holding only its newest message (`x-max-length` 1, the oldest dropped), and
/// removed by the broker after a week without use (`x-expires`; each transaction declares it
/// again, which renews that), so a host that is gone leaves nothing behind for long. A quorum
/// queue with `rabbit_quorum_queue`, so the record survives the loss of a broker node.
fn ledger_declaration(queue: &str, quorum: bool) -> Declaration {
    Declaration::OwnQueue {
        queue: queue.to_owned(),
        args: vec![
            ("x-max-length".into(), 1),
            ("x-expires".into(), 7 * 24 * 3600 * 1000),
        ],
        quorum,
    }
}
