//! oslo.messaging's rabbit driver wire format (spec/rpc-wire.md): the transport that lets
//! magnum-rs and Python Magnum processes share one broker.
//!
//! Layers: [`codec`] turns our [`Message`](crate::Message)s into what upstream's client puts
//! in `args` (versioned objects, §11) and back; the AMQP transport (client, server,
//! notifications) moves those over RabbitMQ with upstream's exchanges, queues, envelope and
//! context keys.

pub mod client;
pub mod codec;
pub mod connection;
pub mod envelope;
pub mod failure;
pub mod handle;
pub mod members;
pub mod notify;
pub mod objects;
pub mod options;
mod publisher;
pub mod server;
pub mod url;

pub use client::OsloTransport;
pub use codec::{Codec, Decoded, PassThrough, WireRequest};
pub use connection::Broker;
pub use failure::Failure;
pub use handle::{OsloError, OsloHandle, connect};
pub use members::{Membership, Peers};
pub use notify::{NotificationPublisher, ledger_queue, quorum_ledger_queue};
pub use options::{OsloSettings, RabbitOptions};
pub use server::{RpcServer, ServerConfig, generate_server_id};
pub use url::TransportUrl;
