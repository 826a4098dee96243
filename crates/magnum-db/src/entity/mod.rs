//! sea-orm entities, one per table, columns in the database's order.

pub mod cluster;
pub mod cluster_template;
pub mod federation;
pub mod magnum_service;
pub mod nodegroup;
pub mod quotas;
pub mod x509keypair;
