//! RPC handlers, periodic workers, certificate managers and drivers.

pub mod x509;
