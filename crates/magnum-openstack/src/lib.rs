//! Clients for Keystone, Glance, Nova, Neutron, Cinder, Octavia and Barbican.
//!
//! Empty until its issue lands; the folder marks where this layer lives.
