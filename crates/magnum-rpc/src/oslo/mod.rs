//! oslo.messaging's rabbit driver wire format (spec/rpc-wire.md): the transport that lets
//! magnum-rs and Python Magnum processes share one broker.
//!
//! Layers: [`codec`] turns our [`Message`](crate::Message)s into what upstream's client puts
//! in `args` (versioned objects, §11) and back; the AMQP transport (client, server,
//! notifications) moves those over RabbitMQ with upstream's exchanges, queues, envelope and
//! context keys.

pub mod codec;
pub mod envelope;
pub mod failure;
pub mod indirection;
pub mod magnum_codec;
pub mod objects;
pub mod options;
pub mod url;

pub use codec::{Codec, Decoded, PassThrough, WireRequest};
pub use failure::Failure;
pub use options::{OsloSettings, RabbitOptions};
pub use url::TransportUrl;
