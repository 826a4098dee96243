//! The conductor: RPC handlers, the status sync and heartbeat, certificate stores, the
//! notifier and the cluster drivers.

mod capi_source;
pub mod certs;
pub mod driver;
mod handlers;
pub mod health;
mod heartbeat;
pub mod notify;
mod partition;
mod service;
mod state;
mod sync;
pub mod worker;
pub mod x509;

pub use service::Conductor;
pub use state::{BINARY, ConductorSettings};
pub use worker::{Worker, WorkerState, WorkerStatus, Workers};
