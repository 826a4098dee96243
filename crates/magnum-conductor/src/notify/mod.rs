//! CADF cluster notifications and the notifier (spec/notifications.md).
//!
//! [`Notifier::cluster_event`] builds upstream's `magnum.cluster.<action>` notification and
//! hands it to every configured [`NotifierDriver`]. Delivery is best effort, as upstream:
//! a failing driver is logged, never turned into an error of the operation.
//!
//! Unlike upstream, no credentials travel with a notification: only the request id and the
//! user and project ids of the context (upstream serialised the whole context, token and
//! service catalog included).

mod cadf;
mod messaging;

use std::sync::{Arc, Mutex, Once};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use magnum_conf::config::Config;
use magnum_core::{RequestContext, Result};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;
use serde_json::{Map, Value};
use uuid::Uuid;

pub use cadf::cadf_event;
pub use messaging::MessagingDriver;

/// The CADF action of a cluster notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Create,
    Update,
    Delete,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
        }
    }
}

/// The CADF outcome of a cluster notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Pending,
    Success,
    Failure,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Success => "success",
            Self::Failure => "failure",
        }
    }
}

/// oslo.messaging notification priority; upstream sends only these two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Priority {
    Info,
    Error,
}

impl Priority {
    /// `ERROR` exactly when the operation failed.
    pub fn for_outcome(outcome: Outcome) -> Self {
        if outcome == Outcome::Failure {
            Self::Error
        } else {
            Self::Info
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "INFO",
            Self::Error => "ERROR",
        }
    }
}

/// One notification, ready for any driver.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// `magnum.cluster.<action>`.
    pub event_type: String,
    pub priority: Priority,
    /// The CADF event.
    pub payload: Value,
    /// `container-infra.<host>`.
    pub publisher_id: String,
    /// A random UUIDv4.
    pub message_id: String,
    /// UTC, `YYYY-MM-DD HH:MM:SS.ffffff`.
    pub timestamp: String,
    pub action: Action,
    pub outcome: Outcome,
    /// Request identification only: never tokens.
    pub request_id: Option<String>,
    pub user_id: Option<String>,
    pub project_id: Option<String>,
}

impl Notification {
    /// The oslo.messaging message body: `message_id`, `publisher_id`, `event_type`,
    /// `priority`, `payload`, `timestamp`, then `_context_request_id`, `_context_user_id`
    /// and `_context_project_id` (null when unknown) and no other context keys.
    pub fn to_message(&self) -> Value {
        let mut m = Map::new();
        m.insert("message_id".into(), self.message_id.clone().into());
        m.insert("publisher_id".into(), self.publisher_id.clone().into());
        m.insert("event_type".into(), self.event_type.clone().into());
        m.insert("priority".into(), self.priority.as_str().into());
        m.insert("payload".into(), self.payload.clone());
        m.insert("timestamp".into(), self.timestamp.clone().into());
        for (key, value) in [
            ("_context_request_id", &self.request_id),
            ("_context_user_id", &self.user_id),
            ("_context_project_id", &self.project_id),
        ] {
            m.insert(key.into(), value.clone().map_or(Value::Null, Value::String));
        }
        Value::Object(m)
    }
}

/// oslo.messaging's notification timestamp: UTC, space-separated, microseconds.
fn message_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
}

/// Where notifications go. Other crates add drivers (the RabbitMQ `messaging` and
/// `messagingv2` ones live with the transport) through [`Notifier::with_driver`] or
/// [`Notifier::from_config_with`].
#[async_trait]
pub trait NotifierDriver: Send + Sync {
    /// A short name for logs.
    fn name(&self) -> &str {
        "custom"
    }
    async fn emit(&self, notification: &Notification) -> Result<()>;
}

/// `[oslo_messaging_notifications] driver = log`: one log event per notification, at INFO
/// or ERROR as its priority says.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogDriver;

#[async_trait]
impl NotifierDriver for LogDriver {
    fn name(&self) -> &str {
        "log"
    }

    async fn emit(&self, n: &Notification) -> Result<()> {
        let message = n.to_message().to_string();
        match n.priority {
            Priority::Info => tracing::info!(
                target: "magnum.notification",
                event_type = %n.event_type,
                %message,
                "notification"
            ),
            Priority::Error => tracing::error!(
                target: "magnum.notification",
                event_type = %n.event_type,
                %message,
                "notification"
            ),
        }
        Ok(())
    }
}

/// Accepts and drops every notification.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopDriver;

#[async_trait]
impl NotifierDriver for NoopDriver {
    fn name(&self) -> &str {
        "noop"
    }

    async fn emit(&self, _n: &Notification) -> Result<()> {
        Ok(())
    }
}

/// Records notifications in memory, so tests (in any crate) can assert what was emitted.
/// Clones share one record.
#[derive(Clone, Debug, Default)]
pub struct CaptureDriver {
    captured: Arc<Mutex<Vec<Notification>>>,
}

impl CaptureDriver {
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared record.
    pub fn captured(&self) -> Arc<Mutex<Vec<Notification>>> {
        Arc::clone(&self.captured)
    }

    /// A copy of what was recorded so far.
    pub fn snapshot(&self) -> Vec<Notification> {
        self.lock().clone()
    }

    /// Everything recorded so far, leaving the record empty.
    pub fn take(&self) -> Vec<Notification> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Notification>> {
        // A panicking test thread must not hide what was captured from the others.
        self.captured.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl NotifierDriver for CaptureDriver {
    fn name(&self) -> &str {
        "capture"
    }

    async fn emit(&self, n: &Notification) -> Result<()> {
        self.lock().push(n.clone());
        Ok(())
    }
}

/// Builds cluster notifications and sends them to its drivers (none: disabled).
pub struct Notifier {
    drivers: Vec<Box<dyn NotifierDriver>>,
    publisher_id: String,
    audit_ns: Option<Uuid>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.drivers.iter().map(|d| d.name()).collect();
        f.debug_struct("Notifier")
            .field("drivers", &names)
            .field("publisher_id", &self.publisher_id)
            .field("audit_ns", &self.audit_ns)
            .finish()
    }
}

static MESSAGING_FALLBACK_WARNING: Once = Once::new();

impl Notifier {
    /// A notifier without drivers (disabled) for `host`, hashing ids under
    /// `audit_namespace` (`[audit] namespace`).
    pub fn new(host: &str, audit_namespace: &str) -> Self {
        let host = if host.is_empty() { "localhost" } else { host };
        Self {
            drivers: Vec::new(),
            publisher_id: format!("container-infra.{host}"),
            audit_ns: cadf::audit_namespace_uuid(audit_namespace),
        }
    }

    /// Adds a driver; every notification goes to every driver.
    pub fn with_driver(mut self, driver: Box<dyn NotifierDriver>) -> Self {
        self.drivers.push(driver);
        self
    }

    /// From `[oslo_messaging_notifications] driver`, `[DEFAULT] host` and
    /// `[audit] namespace`: `log` logs; `messaging`/`messagingv2` log too until the RabbitMQ
    /// notifier is wired in (see [`Notifier::from_config_with`]); `routing` logs; `noop` or
    /// no driver disables notifications.
    pub fn from_config(cfg: &Config) -> Self {
        Self::from_config_with(cfg, |_| None)
    }

    /// As [`Notifier::from_config`], with `messaging(name)` supplying the driver for
    /// `messaging` and `messagingv2` (None: fall back to logging, with a warning).
    pub fn from_config_with(
        cfg: &Config,
        mut messaging: impl FnMut(&str) -> Option<Box<dyn NotifierDriver>>,
    ) -> Self {
        let mut notifier = Self::new(&cfg.default.host, &cfg.audit.namespace);
        let mut names: Vec<&str> = Vec::new();
        for name in cfg
            .oslo_messaging_notifications
            .driver
            .iter()
            .map(|d| d.trim())
        {
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
        }
        let mut logging = false;
        let mut add_log = |n: &mut Self| {
            // Several names may fall back to logging; one log line per event is enough.
            if !logging {
                logging = true;
                n.drivers.push(Box::new(LogDriver));
            }
        };
        for name in names {
            match name {
                "log" => add_log(&mut notifier),
                "noop" => {}
                "messaging" | "messagingv2" => match messaging(name) {
                    Some(d) => notifier.drivers.push(d),
                    None => {
                        MESSAGING_FALLBACK_WARNING.call_once(|| {
                            tracing::warn!(
                                driver = name,
                                "the RabbitMQ notifier arrives with the RabbitMQ transport; \
                                 notifications are logged instead"
                            );
                        });
                        add_log(&mut notifier);
                    }
                },
                "routing" => {
                    tracing::warn!(
                        "notification driver 'routing' is not supported; notifications are \
                         logged instead"
                    );
                    add_log(&mut notifier);
                }
                other => tracing::warn!(
                    driver = other,
                    "unknown notification driver ignored (use messagingv2, messaging, log or \
                     noop)"
                ),
            }
        }
        notifier
    }

    /// Whether any driver is configured.
    pub fn is_enabled(&self) -> bool {
        !self.drivers.is_empty()
    }

    /// `container-infra.<host>`.
    pub fn publisher_id(&self) -> &str {
        &self.publisher_id
    }

    /// The notification for a cluster operation, without sending it.
    pub fn build(
        &self,
        ctx: &RequestContext,
        action: Action,
        outcome: Outcome,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) -> Notification {
        let now = Utc::now();
        let payload = cadf::cadf_event_in(
            ctx,
            action,
            outcome,
            cluster,
            nodegroups,
            self.audit_ns,
            now,
        );
        Notification {
            event_type: format!("magnum.cluster.{}", action.as_str()),
            priority: Priority::for_outcome(outcome),
            payload,
            publisher_id: self.publisher_id.clone(),
            message_id: Uuid::new_v4().to_string(),
            timestamp: message_time(now),
            action,
            outcome,
            request_id: ctx.request_id.clone(),
            user_id: ctx.user_id.clone(),
            project_id: ctx.project_id.clone(),
        }
    }

    /// Sends the notification of a cluster operation to every driver. Best effort: a
    /// driver's failure is logged and never returned.
    pub async fn cluster_event(
        &self,
        ctx: &RequestContext,
        action: Action,
        outcome: Outcome,
        cluster: &Cluster,
        nodegroups: &[NodeGroup],
    ) {
        if self.drivers.is_empty() {
            return;
        }
        let n = self.build(ctx, action, outcome, cluster, nodegroups);
        for driver in &self.drivers {
            if let Err(e) = driver.emit(&n).await {
                tracing::warn!(
                    driver = driver.name(),
                    event_type = %n.event_type,
                    message_id = %n.message_id,
                    error = %e,
                    "could not send notification"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
