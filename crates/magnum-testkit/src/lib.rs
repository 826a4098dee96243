//! Test helpers shared by every crate's tests (a `[dev-dependencies]` entry only): one copy
//! of each, so a fix to a guard or a gate reaches every test.
//!
//! Features: `db` (a fresh SQLite database at head, throwaway MariaDB/PostgreSQL databases),
//! `rpc` (a recording fake conductor). Without them: gates, process guards, a free port and
//! raw HTTP and the secrets scan's inputs, with no dependency at all.

// Test support: a failed setup must fail the test that asked for it, loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod gate;
mod net;
mod process;
/// The suite-wide secrets scan's inputs.
pub mod scan;

#[cfg(feature = "db")]
pub mod db;
#[cfg(feature = "rpc")]
pub mod fake_conductor;

pub use gate::{env_or_skip, flag, require_all, skip};
pub use net::{assert_port_free, free_port, raw_http, wait_for_port};
pub use process::{ChildGuard, Children, tag};
