//! The bridge to upstream Magnum's versioned objects: the RPC codec that makes our messages
//! look exactly like upstream's (and reads upstream's), the object-indirection endpoint a
//! Python conductor calls back into, and the mapping of objects onto rows. It lives beside
//! the services because it needs rows and a domain rule (a new cluster's default
//! nodegroups); the transport below it (`magnum_rpc::oslo`) knows neither.

pub mod adopt;
pub mod codec;
pub mod indirection;
pub mod rows;

pub use codec::{MagnumCodec, UnsavedRows};
