//! Microversion negotiation: the `OpenStack-API-Version` header, 1.1 to 1.14.

use std::fmt;

use http::HeaderMap;

use crate::error::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiVersion {
    pub major: u32,
    pub minor: u32,
}

impl ApiVersion {
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

pub const MIN_VERSION: ApiVersion = ApiVersion::new(1, 1);
pub const MAX_VERSION: ApiVersion = ApiVersion::new(1, 14);
pub const SERVICE: &str = "container-infrastructure-management";
const SERVICES: [&str; 3] = [
    "container-infrastructure-management",
    "container-infrastructure",
    "container-infra",
];

/// Result of reading the header: the version to serve, or why not. A range error still
/// names the version (for the response headers); a malformed header does not.
pub fn negotiate(headers: &HeaderMap) -> Result<ApiVersion, (ApiError, Option<ApiVersion>)> {
    let Some(raw) = headers.get("openstack-api-version") else {
        return Ok(MIN_VERSION);
    };
    let raw = raw.to_str().unwrap_or("");
    let tokens: Vec<&str> = raw.split_whitespace().collect();
    if tokens.len() != 2 {
        return Err((
            ApiError::NotAcceptable("Invalid service type for OpenStack-API-Version header".into()),
            None,
        ));
    }
    let (service, value) = (tokens[0], tokens[1]);
    if value.eq_ignore_ascii_case("latest") {
        // Upstream does not look at the service word with `latest`.
        return Ok(MAX_VERSION);
    }
    if !SERVICES.contains(&service) {
        return Err((
            ApiError::NotAcceptable("Invalid service type for OpenStack-API-Version header".into()),
            None,
        ));
    }
    let parsed = value
        .split_once('.')
        .and_then(|(a, b)| Some(ApiVersion::new(a.parse().ok()?, b.parse().ok()?)))
        .filter(|_| value.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
    let Some(v) = parsed else {
        return Err((
            ApiError::NotAcceptable("Invalid value for OpenStack-API-Version header".into()),
            None,
        ));
    };
    let range = format!("[{SERVICE} {MIN_VERSION}, {SERVICE} {MAX_VERSION}]");
    let json_accept = headers
        .get(http::header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    if v.major != 1 {
        let description = format!(
            "Mutually exclusive versions requested. Version {v} requested but not supported by this service.The supported version range is: {range}."
        );
        return Err((
            ApiError::VersionUnsupported {
                description,
                with_description: json_accept,
            },
            Some(v),
        ));
    }
    if v < MIN_VERSION || v > MAX_VERSION {
        let description = format!(
            "Version {v} was requested but the minor version is not supported by this service. The supported version range is: {range}."
        );
        return Err((
            ApiError::VersionUnsupported {
                description,
                with_description: json_accept,
            },
            Some(v),
        ));
    }
    Ok(v)
}

/// 406 for a handler that does not exist at this version.
pub fn require(version: ApiVersion, min: ApiVersion, method: &str) -> Result<(), ApiError> {
    if version < min {
        return Err(ApiError::NotAcceptable(format!(
            "Version {version} was requested but the requested API {method} is not supported for this version."
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn with(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("OpenStack-API-Version", v.parse().unwrap());
        h.insert("Accept", "application/json".parse().unwrap());
        h
    }

    #[test]
    fn negotiation_matches_upstream() {
        assert_eq!(negotiate(&HeaderMap::new()).ok(), Some(MIN_VERSION));
        assert_eq!(
            negotiate(&with("container-infra latest")).ok(),
            Some(MAX_VERSION)
        );
        assert_eq!(negotiate(&with("anything LATEST")).ok(), Some(MAX_VERSION));
        assert_eq!(
            negotiate(&with("container-infra 1.09")).ok(),
            Some(ApiVersion::new(1, 9))
        );
        assert_eq!(
            negotiate(&with("container-infrastructure-management 1.14")).ok(),
            Some(MAX_VERSION)
        );
        let (e, v) = negotiate(&with("container-infra 1.99")).unwrap_err();
        assert!(matches!(e, ApiError::VersionUnsupported { .. }));
        assert_eq!(v, Some(ApiVersion::new(1, 99)));
        assert!(
            e.to_string()
                .starts_with("Version 1.99 was requested but the minor version")
        );
        let (e, _) = negotiate(&with("container-infra 2.1")).unwrap_err();
        assert!(
            e.to_string()
                .contains("not supported by this service.The supported")
        );
        let (e, v) = negotiate(&with("compute 1.2")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid service type for OpenStack-API-Version header"
        );
        assert_eq!(v, None);
        let (e, _) = negotiate(&with("container-infra 1.x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid value for OpenStack-API-Version header"
        );
        assert!(negotiate(&with("container-infra 1.0")).is_err());
    }
}
