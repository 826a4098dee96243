//! `magnum.conf` and policy: the ports of oslo.config (the option registry, INI parsing and
//! the sample file) and oslo.policy (rules, defaults, `policy.yaml` overrides). Kept out of
//! `magnum-core` so that a new option or rule does not rebuild the crates that never read
//! configuration (storage types, drivers, RPC messages).

pub mod config;
pub mod policy;
