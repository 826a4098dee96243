//! The Cluster API driver's parts (drivers.md §4.7). Not registered as a driver yet: so far
//! the status engine, a pure function tested on its own, which the watches will feed.
pub mod status;
