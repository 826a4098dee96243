//! The oslo.messaging RabbitMQ transport against a real broker.
//!
//! Set `MAGNUM_TEST_RABBIT_URL=rabbit://guest:guest@127.0.0.1:5672/` to run; without it the
//! tests skip, unless `MAGNUM_TEST_REQUIRE_ALL=1` (CI), where a missing broker fails them.
//! The interop tests build a venv with PyPI's oslo.messaging (test-support/oslo/) on first
//! use. Every test uses its own control exchange and topic, so tests never see each other's
//! messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;
mod python;
mod reliability;
mod rust_peers;
