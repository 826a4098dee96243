//! Domain services: the one place that creates or changes clusters, nodegroups, cluster
//! templates, quotas and federations. The HTTP layer parses and authorises, then calls a
//! service with a typed request; the service validates, reserves quota, builds rows with
//! their defaults, writes them through storage and hands the work to the conductor over RPC.

pub mod clusters;
pub mod compat;
