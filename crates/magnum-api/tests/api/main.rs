//! API tests over real HTTP against an in-process server: one test binary.
//! Storage is SQLite, or MariaDB when MAGNUM_TEST_MYSQL_URL is set (as CI does).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod clusters;
mod common;
mod nodegroups;
mod rendered;
mod replay;
mod resources;
