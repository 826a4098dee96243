//! The `messaging` / `messagingv2` notifier drivers: CADF events to RabbitMQ through the
//! oslo.messaging publisher (`notifications.info` / `notifications.error` on the control
//! exchange), so a Python notification listener receives what upstream's conductor sends.

use async_trait::async_trait;
use magnum_core::{Error, Result};
use magnum_rpc::oslo::NotificationPublisher;

use super::{Notification, NotifierDriver};

pub struct MessagingDriver {
    publisher: NotificationPublisher,
}

impl MessagingDriver {
    pub fn new(publisher: NotificationPublisher) -> Self {
        Self { publisher }
    }
}

#[async_trait]
impl NotifierDriver for MessagingDriver {
    fn name(&self) -> &str {
        "messaging"
    }

    async fn emit(&self, n: &Notification) -> Result<()> {
        self.publisher
            .publish(n.priority.as_str(), n.to_message())
            .await
            .map_err(Error::from)
    }
}
