//! Domain types shared by every layer of magnum-rs: ids, statuses, typed models, the request
//! context, domain errors, Python-compatible text (py) and metrics. Depends on nothing heavier than serde;
//! configuration and policy live in `magnum-conf`.

pub mod context;
pub mod error;
pub mod ids;
pub mod lifecycle;
pub mod metrics;
pub mod model;
pub mod py;
pub mod status;

pub use context::{RequestContext, UserToken};
pub use error::{Error, ErrorKind, Result};
