//! Storage for magnum-rs: the schema at upstream's Alembic head `b3e1cf4a2d5e` on MySQL/MariaDB,
//! PostgreSQL and SQLite, and one repository per table with upstream's query behaviour.
//!
//! Only this crate writes SQL. Every write path retries deadlocks and serialisation failures a
//! bounded number of times, and read-modify-write updates are checked against what the writer
//! read, so concurrent writers never silently overwrite each other.

pub mod fields;
pub mod items;
pub mod json;
pub mod model;
pub mod records;
pub mod repo;
pub mod schema;
pub mod url;

mod db;
mod entity;
mod errors;
mod rows;
mod shelf;

pub use db::{Database, DbSettings};
pub use errors::SchemaError;
pub use repo::{Page, SortDir};
pub use url::{DbUrl, Engine};
