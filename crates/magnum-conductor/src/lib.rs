//! The conductor: RPC handlers, workers, the status sync and heartbeat, health checks and
//! the notifier. Drivers (`magnum-driver`, `magnum-driver-capi`) and certificates
//! (`magnum-certs`) are crates of their own; this crate wires them to storage and RPC.

mod capi_source;
mod handlers;
pub mod health;
mod heartbeat;
pub mod notify;
mod partition;
mod service;
mod state;
mod sync;
pub mod worker;

pub use service::{Conductor, drivers_from_config};
pub use state::{BINARY, ConductorSettings};
pub use worker::{Worker, WorkerState, WorkerStatus, Workers};
