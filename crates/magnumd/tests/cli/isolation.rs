//! Tenant isolation with real Keystone tokens: every route as five personas.
