//! RPC handlers, periodic workers, certificate managers and drivers.
//!
//! Empty until its issue lands; the folder marks where this layer lives.
