//! Barbican secrets and certificate containers, as Magnum's Barbican certificate store uses
//! them. References are the full `.../v1/secrets/<uuid>` and `.../v1/containers/<uuid>` URLs
//! Barbican hands out; only their last segment is used to call back, against the catalogue's
//! endpoint, so references written through another endpoint (or by upstream Magnum) work.

use serde_json::{Value, json};

use crate::catalog::ServiceType;
use crate::error::{OsError, message_of};
use crate::session::{Body, Session};

const SVC: ServiceType = ServiceType::KeyManager;

/// The uuid at the end of a Barbican reference.
pub fn ref_id(reference: &str) -> &str {
    reference
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(reference)
}

fn check_id(id: &str) -> Result<&str, OsError> {
    // A reference that is not a uuid would let a stored value steer the request path.
    uuid::Uuid::parse_str(id)
        .map(|_| id)
        .map_err(|_| OsError::Status {
            service: SVC,
            status: 404,
            detail: format!("{id} is not a Barbican reference"),
        })
}

fn unexpected(status: u16, text: &str) -> OsError {
    OsError::Status {
        service: SVC,
        status,
        detail: message_of(text),
    }
}

/// POSTs `body` to `path` and returns the reference Barbican answers under `key`.
async fn create(s: &Session, path: &str, body: &Value, key: &str) -> Result<String, OsError> {
    let (status, text) = s
        .call(
            SVC,
            reqwest::Method::POST,
            path,
            Body::Json(body),
            "application/json",
        )
        .await?;
    if status != 201 {
        return Err(unexpected(status, &text));
    }
    let v: Value = crate::session::parse(SVC, &text)?;
    v[key]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| unexpected(status, &format!("no {key} in the answer")))
}

/// Stores `payload` as a `text/plain` secret named `name`; returns its reference.
pub async fn create_secret(s: &Session, name: &str, payload: &str) -> Result<String, OsError> {
    let body = json!({"name": name, "payload": payload, "payload_content_type": "text/plain"});
    create(s, "/v1/secrets", &body, "secret_ref").await
}

/// Creates a `certificate` container over `secrets` (`(name, reference)` pairs).
pub async fn create_certificate_container(
    s: &Session,
    name: &str,
    secrets: &[(&str, String)],
) -> Result<String, OsError> {
    let refs: Vec<Value> = secrets
        .iter()
        .map(|(n, r)| json!({"name": n, "secret_ref": r}))
        .collect();
    let body = json!({"name": name, "type": "certificate", "secret_refs": refs});
    create(s, "/v1/containers", &body, "container_ref").await
}

/// A container as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub name: Option<String>,
    pub kind: String,
    /// `(name, secret reference)`.
    pub secrets: Vec<(String, String)>,
}

/// The container behind `reference`; `None` when Barbican has none.
pub async fn get_container(s: &Session, reference: &str) -> Result<Option<Container>, OsError> {
    let id = check_id(ref_id(reference))?;
    let Some(v) = s.get_json(SVC, &format!("/v1/containers/{id}")).await? else {
        return Ok(None);
    };
    Ok(Some(Container {
        name: v["name"].as_str().map(str::to_owned),
        kind: v["type"].as_str().unwrap_or_default().to_owned(),
        secrets: v["secret_refs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some((
                    r["name"].as_str()?.to_owned(),
                    r["secret_ref"].as_str()?.to_owned(),
                ))
            })
            .collect(),
    }))
}

/// A secret's payload as text; `None` when the secret is gone.
pub async fn get_payload(s: &Session, reference: &str) -> Result<Option<String>, OsError> {
    let id = check_id(ref_id(reference))?;
    let (status, text) = s
        .call(
            SVC,
            reqwest::Method::GET,
            &format!("/v1/secrets/{id}/payload"),
            Body::None,
            "text/plain",
        )
        .await?;
    match status {
        200 => Ok(Some(text)),
        404 => Ok(None),
        s => Err(unexpected(s, &text)),
    }
}

/// Deletes a secret (`secrets`) or container (`containers`); one already gone is fine.
pub async fn delete(s: &Session, kind: &str, reference: &str) -> Result<(), OsError> {
    let id = check_id(ref_id(reference))?;
    let (status, text) = s
        .call(
            SVC,
            reqwest::Method::DELETE,
            &format!("/v1/{kind}/{id}"),
            Body::None,
            "application/json",
        )
        .await?;
    match status {
        200..=299 | 404 => Ok(()),
        s => Err(unexpected(s, &text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_end_in_their_uuid() {
        let r = "http://127.0.0.1:9311/v1/containers/2e72291c-1111-2222-3333-444455556666";
        assert_eq!(ref_id(r), "2e72291c-1111-2222-3333-444455556666");
        assert_eq!(ref_id("abc/"), "abc");
        assert!(check_id("../../v1/secrets").is_err());
        assert!(check_id(ref_id(r)).is_ok());
    }
}
