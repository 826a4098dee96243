//! Storage integration tests: one binary (every file under tests/ would be another link).
//! SQLite always runs; MariaDB and PostgreSQL run when their server URLs are given:
//!   MAGNUM_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306
//!   MAGNUM_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432
//! With MAGNUM_TEST_REQUIRE_ALL=1 (CI) a missing server fails the run instead of skipping.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;
mod concurrency;
mod driver;
mod repos;
mod schema;
