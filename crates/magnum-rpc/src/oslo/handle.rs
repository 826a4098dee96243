//! What a binary needs from one configuration: the broker connection, the RPC client, RPC
//! servers and the notification publisher.

use std::sync::Arc;
use std::time::Duration;

use magnum_conf::config::Config;

use super::client::OsloTransport;
use super::codec::Codec;
use super::connection::{Broker, ConnectError};
use super::members::Membership;
use super::notify::NotificationPublisher;
use super::options::{OptionsError, OsloSettings};
use super::server::{RpcServer, ServerConfig, generate_server_id};
use crate::ConductorApi;

#[derive(Debug, thiserror::Error)]
pub enum OsloError {
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// The process's oslo.messaging transport. Cheap to clone.
#[derive(Clone, Debug)]
pub struct OsloHandle {
    broker: Broker,
    settings: Arc<OsloSettings>,
}

/// Connects per `[DEFAULT] transport_url` and `[oslo_messaging_rabbit]`. Returns once the
/// first connection is up or the first attempts failed; in the latter case the connection
/// keeps being retried in the background and RPCs fail with `Unavailable` until it is up.
pub async fn connect(cfg: &Config) -> Result<OsloHandle, OsloError> {
    OsloHandle::connect(OsloSettings::from_config(cfg)?).await
}

impl OsloHandle {
    pub async fn connect(settings: OsloSettings) -> Result<Self, OsloError> {
        let broker = Broker::start(&settings).await?;
        if !broker.is_connected() {
            tracing::warn!(
                url = %redacted(&settings),
                "message broker unreachable at startup; retrying in the background"
            );
        }
        Ok(Self {
            broker,
            settings: Arc::new(settings),
        })
    }

    pub fn settings(&self) -> &OsloSettings {
        &self.settings
    }

    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    pub fn is_connected(&self) -> bool {
        self.broker.is_connected()
    }

    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        self.broker.wait_connected(timeout).await
    }

    /// The RPC client to the conductor topic; give it to
    /// `RpcClient::new(transport, rpc_response_timeout)`.
    pub fn transport(&self, codec: Arc<dyn Codec>) -> OsloTransport {
        OsloTransport::new(
            self.broker.clone(),
            codec,
            &self.settings.control_exchange,
            &self.settings.topic,
        )
    }

    /// Starts a conductor's RPC server; `server_id` defaults to a fresh upstream-style
    /// short id.
    pub fn start_server(
        &self,
        handler: Arc<dyn ConductorApi>,
        codec: Arc<dyn Codec>,
        server_id: Option<String>,
    ) -> RpcServer {
        RpcServer::start(
            self.broker.clone(),
            codec,
            handler,
            ServerConfig {
                exchange: self.settings.control_exchange.clone(),
                topic: self.settings.topic.clone(),
                server_id: server_id.unwrap_or_else(generate_server_id),
                pool_size: self.settings.executor_thread_pool_size,
            },
        )
    }

    /// Marks this process as our conductor `host` on the broker for as long as it is
    /// connected, and tells which other hosts are ours ([`Membership`]).
    pub fn membership(&self, host: &str) -> Membership {
        Membership::start(
            self.broker.clone(),
            &self.settings.control_exchange,
            &self.settings.topic,
            host,
        )
    }

    /// The notifier per `[oslo_messaging_notifications]`.
    pub fn notifier(&self) -> NotificationPublisher {
        NotificationPublisher::new(
            self.broker.clone(),
            &self.settings.control_exchange,
            &self.settings.notification_topics,
            &self.settings.notification_drivers,
        )
    }

    /// Closes the connection; stop servers first so their requests finish.
    pub async fn close(&self) {
        self.broker.close().await;
    }
}

fn redacted(s: &OsloSettings) -> String {
    let hosts: Vec<String> = s.url.hosts.iter().map(|h| h.address()).collect();
    format!("{}://{}/{}", s.url.driver, hosts.join(","), s.url.vhost())
}
