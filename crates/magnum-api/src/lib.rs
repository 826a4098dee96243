//! The REST API v1: router, microversions, auth, policy, one module per resource, wire errors.
//!
//! Empty until its issue lands; the folder marks where this layer lives.
