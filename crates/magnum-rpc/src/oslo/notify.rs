//! Notifications (rpc-wire.md §13): `messagingv2` (enveloped) or `messaging` (bare) messages to
//! `<control_exchange>` with routing key `<topic>.<priority>`, into queues named like the
//! routing key, which the publisher declares as oslo does so events wait for a consumer.

use magnum_core::RequestContext;
use serde_json::{Map, Value};

use super::codec::context_to_wire;
use super::connection::{Broker, OPERATION_TIMEOUT};
use super::envelope::{self, CONTEXT_PREFIX, UNIQUE_ID};
use super::publisher::{Declaration, Outgoing, Publisher};
use crate::transport::RpcError;

/// Publishes notifications on the RPC connection (Magnum ignores
/// `[oslo_messaging_notifications] transport_url`).
pub struct NotificationPublisher {
    publisher: Publisher,
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
        Self {
            publisher: Publisher::new(broker),
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
    /// `_unique_id` unless it has one (a resent message keeps its id, so oslo listeners drop
    /// the copy they already had). Returns once the broker confirmed each copy; fails at once with
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

    async fn send(&self, priority: &str, m: &Map<String, Value>) -> Result<(), RpcError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let mut bodies = Vec::new();
        if self.enveloped {
            bodies.push(envelope::wrap(m));
        }
        if self.bare {
            bodies.push(envelope::unwrapped(m));
        }
        let priority = priority.to_ascii_lowercase();
        for topic in &self.topics {
            let routing_key = format!("{topic}.{priority}");
            let decls = [Declaration::NotificationQueue {
                exchange: self.exchange.clone(),
                queue: routing_key.clone(),
            }];
            for body in &bodies {
                self.publisher
                    .publish(
                        &decls,
                        Outgoing {
                            exchange: &self.exchange,
                            routing_key: &routing_key,
                            mandatory: false,
                            body,
                            props: envelope::properties(None),
                        },
                        OPERATION_TIMEOUT,
                    )
                    .await?;
            }
        }
        Ok(())
    }
}
