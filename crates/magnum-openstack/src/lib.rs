//! Clients for the OpenStack services Magnum talks to. Only Keystone token validation lives
//! here so far; Glance, Nova, Neutron, Cinder, Octavia and Barbican join with their issues.

pub mod keystone;
