//! Newtype ids, so a cluster uuid cannot be passed where a template uuid is expected.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// A fresh random (v4) uuid, formatted as upstream stores it (lowercase, hyphenated).
            pub fn generate() -> Self {
                Self(uuid::Uuid::new_v4().to_string())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        /// Read as text where text is what is needed (a storage key, a log field): the
        /// newtype guards what is passed as an id, not how it is read.
        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for serde_json::Value {
            fn from(id: $name) -> Self {
                serde_json::Value::String(id.0)
            }
        }
    };
}

uuid_id!(
    /// `cluster.uuid`; also `nodegroup.cluster_id` (nodegroups point at the cluster by uuid).
    ClusterUuid
);
uuid_id!(
    /// `cluster_template.uuid`; also `cluster.cluster_template_id`.
    ClusterTemplateUuid
);
uuid_id!(
    /// `nodegroup.uuid`.
    NodeGroupUuid
);
uuid_id!(
    /// `x509keypair.uuid`.
    X509KeyPairUuid
);
uuid_id!(
    /// `federation.uuid`.
    FederationUuid
);
uuid_id!(
    /// A Keystone project id.
    ProjectId
);
uuid_id!(
    /// A Keystone user id.
    UserId
);

/// How a resource was named by a caller: upstream's "identity" (an integer id or a uuid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    Id(i32),
    Uuid(String),
}

impl Identity {
    /// Upstream's `add_identity_filter`: an integer-like value is an id, a uuid-like value a
    /// uuid, anything else is rejected.
    pub fn parse(value: &str) -> crate::Result<Self> {
        if let Ok(id) = value.parse::<i32>() {
            return Ok(Self::Id(id));
        }
        if is_uuid_like(value) {
            return Ok(Self::Uuid(value.to_owned()));
        }
        Err(crate::Error::InvalidIdentity {
            identity: value.to_owned(),
        })
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id(id) => write!(f, "{id}"),
            Self::Uuid(u) => f.write_str(u),
        }
    }
}

/// oslo.utils `is_uuid_like`: parses as a uuid and round-trips (hyphens optional, any case).
pub fn is_uuid_like(value: &str) -> bool {
    match uuid::Uuid::parse_str(value) {
        Ok(u) => {
            let canon = u.to_string();
            value.to_ascii_lowercase().replace('-', "") == canon.replace('-', "")
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_parses_ints_and_uuids_and_rejects_names() {
        assert_eq!(Identity::parse("42").ok(), Some(Identity::Id(42)));
        let u = "5d12f6fd-a196-4bf0-ae4c-1f639a523a52";
        assert_eq!(Identity::parse(u).ok(), Some(Identity::Uuid(u.into())));
        assert!(matches!(
            Identity::parse("k8s"),
            Err(crate::Error::InvalidIdentity { .. })
        ));
    }

    #[test]
    fn uuid_like_accepts_upper_and_unhyphenated() {
        assert!(is_uuid_like("5D12F6FD-A196-4BF0-AE4C-1F639A523A52"));
        assert!(is_uuid_like("5d12f6fda1964bf0ae4c1f639a523a52"));
        assert!(!is_uuid_like("5d12f6fd-a196"));
        assert!(!is_uuid_like("{5d12f6fd-a196-4bf0-ae4c-1f639a523a52}x"));
    }

    #[test]
    fn generated_ids_are_lowercase_hyphenated() {
        let id = ClusterUuid::generate();
        assert_eq!(id.as_str().len(), 36);
        assert!(is_uuid_like(id.as_str()));
        assert_eq!(id.as_str(), id.as_str().to_lowercase());
    }
}
