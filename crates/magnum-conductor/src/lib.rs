//! RPC handlers, periodic workers, certificate managers and drivers.

pub mod certs;
pub mod notify;
pub mod x509;
