//! The conductor: RPC handlers, the status sync and heartbeat, certificate stores, the
//! notifier and the cluster drivers.

pub mod certs;
pub mod driver;
mod handlers;
mod heartbeat;
pub mod notify;
mod service;
mod sync;
pub mod worker;
pub mod x509;

pub use service::{BINARY, Conductor, ConductorSettings};
pub use worker::{Worker, WorkerState, WorkerStatus, Workers};
