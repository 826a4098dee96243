//! Errors of calls to OpenStack services. Each names the service, so the user learns which
//! one failed; none carries a token, a URL query or a request body.

use crate::catalog::ServiceType;

#[derive(Debug, thiserror::Error)]
pub enum OsError {
    /// The catalogue has no endpoint for the service under its filter.
    #[error("{} has no {interface} endpoint{} in the service catalogue", .service.display(), region_text(.region))]
    NoEndpoint {
        service: ServiceType,
        interface: String,
        region: Option<String>,
    },
    /// Could not connect, timed out, or answered 5xx.
    #[error("{} cannot be reached: {detail}", .service.display())]
    Unavailable {
        service: ServiceType,
        detail: String,
    },
    /// A 4xx answer the caller did not expect.
    #[error("{} refused the request (HTTP {status}): {detail}", .service.display())]
    Status {
        service: ServiceType,
        status: u16,
        detail: String,
    },
    /// Keystone refused Magnum's service credentials.
    #[error("Magnum's service credentials were refused by Keystone ({0}); check [keystone_auth]")]
    Credentials(String),
    /// A setting cannot be used.
    #[error("[keystone_auth] {0}")]
    Config(String),
}

fn region_text(region: &Option<String>) -> String {
    region
        .as_ref()
        .map(|r| format!(" in region {r}"))
        .unwrap_or_default()
}

impl OsError {
    pub fn status(&self) -> Option<u16> {
        match self {
            OsError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A reqwest error without its URL, with its causes (a refused certificate or a refused
/// connection is in the causes, not in the top message).
pub(crate) fn describe(e: &reqwest::Error) -> String {
    describe_as(e, "<endpoint>")
}

/// As [`describe`], naming the endpoint `placeholder` where a cause quotes its URL.
pub(crate) fn describe_as(e: &reqwest::Error, placeholder: &str) -> String {
    let mut msg = if e.is_timeout() {
        "timed out".to_owned()
    } else {
        e.without_url_ref().to_string()
    };
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    if let Some(url) = e.url() {
        msg = msg.replace(url.as_str(), placeholder);
    }
    msg
}

/// The human part of an OpenStack error body (`{"itemNotFound": {"message": ..}}`,
/// `{"NeutronError": {"message": ..}}`, Barbican's `description`, or plain text), shortened.
pub(crate) fn message_of(text: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| find_message(&v));
    let msg = from_json.unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "));
    let mut out: String = msg.chars().take(300).collect();
    if out.is_empty() {
        out.push_str("no details");
    }
    out
}

fn find_message(v: &serde_json::Value) -> Option<String> {
    let obj = v.as_object()?;
    for key in ["message", "description", "faultstring", "title"] {
        if let Some(s) = obj.get(key).and_then(|m| m.as_str()) {
            return Some(s.to_owned());
        }
    }
    obj.values().find_map(find_message)
}

trait WithoutUrl {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    fn without_url_ref(&self) -> String {
        let s = self.to_string();
        match self.url() {
            Some(u) => s.replace(&format!(" for url ({u})"), ""),
            None => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_out_of_error_bodies() {
        assert_eq!(
            message_of(r#"{"itemNotFound": {"code": 404, "message": "Keypair k not found"}}"#),
            "Keypair k not found"
        );
        assert_eq!(
            message_of(r#"{"NeutronError": {"type": "x", "message": "Network n not found."}}"#),
            "Network n not found."
        );
        assert_eq!(
            message_of("<html> 404  Not Found </html>"),
            "<html> 404 Not Found </html>"
        );
        assert_eq!(message_of(""), "no details");
        let e = OsError::NoEndpoint {
            service: ServiceType::Image,
            interface: "public".into(),
            region: Some("RealOne".into()),
        };
        assert_eq!(
            e.to_string(),
            "The image service (Glance) has no public endpoint in region RealOne in the service catalogue"
        );
    }
}
