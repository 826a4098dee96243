//! Per-cluster OpenStack credentials, so a conductor can act in a cluster's project long after
//! the user's token expired, without any token travelling between our processes: the API
//! makes a Keystone application credential for the cluster's owner with the owner's own token
//! before it answers (name `magnum-<cluster uuid>`, restricted: it cannot make or delete
//! other credentials), and keeps its id and secret in Barbican as a secret of Magnum's service
//! user (Barbican encrypts it at rest). Drivers read it with [`fetch`]; the conductor removes
//! both with the cluster ([`revoke`]), as the service user, whom Keystone's default policy
//! (`admin_required or owner`) lets delete another user's application credential. A rotation
//! adds a newer one, made by whoever rotates ([`issue_rotation`]); drivers get the newest, and
//! the older ones go once the cluster uses it ([`retire_older`]).

use std::sync::Arc;

use magnum_core::UserToken;
use serde_json::{Value, json};

use crate::catalog::ServiceType;
use crate::error::{OsError, message_of};
use crate::keymanager;
use crate::session::{Body, OpenStack, Session};

/// An application credential: its id and secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AppCredential {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for AppCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppCredential")
            .field("id", &self.id)
            .field("secret", &"****")
            .finish()
    }
}

/// Keystone's name of a cluster's application credential.
pub fn credential_name(cluster_uuid: &str) -> String {
    format!("magnum-{cluster_uuid}")
}

/// Barbican's name of the secret holding it.
pub fn secret_name(cluster_uuid: &str) -> String {
    format!("magnum-cluster-{cluster_uuid}-credential")
}

fn segment(value: &str) -> Result<&str, OsError> {
    if value.is_empty() || value.contains(['/', '?', '#', '%']) {
        return Err(OsError::Status {
            service: ServiceType::Identity,
            status: 400,
            detail: format!("{value:?} is not an id"),
        });
    }
    Ok(value)
}

/// Makes the cluster's credential as `user` and stores it; on a failure half-way nothing is
/// left (the credential is deleted again).
pub async fn issue(
    os: &Arc<OpenStack>,
    user: &UserToken,
    user_id: &str,
    cluster_uuid: &str,
) -> Result<(), OsError> {
    issue_named(
        os,
        user,
        user_id,
        cluster_uuid,
        credential_name(cluster_uuid),
        issued_now(),
    )
    .await
    .map(drop)
}

/// A rotation's new credential for the cluster, made as `user` (who owns it from now on:
/// the cluster no longer depends on its creator's account) and stored as the newest; the
/// older ones stay valid until [`retire_older`]. Returns the new credential's id.
pub async fn issue_rotation(
    os: &Arc<OpenStack>,
    user: &UserToken,
    user_id: &str,
    cluster_uuid: &str,
) -> Result<String, OsError> {
    let issued = issued_now();
    // Keystone names are unique per user: a rotation's carries its moment.
    let name = format!("{}-{issued}", credential_name(cluster_uuid));
    issue_named(os, user, user_id, cluster_uuid, name, issued).await
}

/// Microseconds since the epoch: orders a cluster's stored credentials, newest first.
fn issued_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

async fn issue_named(
    os: &Arc<OpenStack>,
    user: &UserToken,
    user_id: &str,
    cluster_uuid: &str,
    name: String,
    issued: u64,
) -> Result<String, OsError> {
    // Barbican first: with the key manager away the create fails at once, before Keystone
    // makes (slowly) a credential that would have to be taken back.
    let svc = os.service_session().await?;
    svc.get_json(ServiceType::KeyManager, "/v1/secrets?limit=1")
        .await?;
    let us = os.user_session(user);
    let url = format!(
        "{}/users/{}/application_credentials",
        us.identity_v3()?,
        segment(user_id)?
    );
    let body = json!({"application_credential": {
        "name": name,
        "description": format!("Magnum cluster {cluster_uuid}"),
        "unrestricted": false,
    }});
    let (status, text) = us
        .call(
            ServiceType::Identity,
            reqwest::Method::POST,
            &url,
            Body::Json(&body),
            "application/json",
        )
        .await?;
    if status != 201 {
        return Err(OsError::Status {
            service: ServiceType::Identity,
            status,
            detail: message_of(&text),
        });
    }
    let v: Value = crate::session::parse(ServiceType::Identity, &text)?;
    let cred = AppCredential {
        id: v["application_credential"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        secret: v["application_credential"]["secret"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    };
    // Its owner kept beside it: a rotation's belongs to whoever rotated, and Keystone finds
    // a credential only under its user.
    let payload =
        json!({"id": cred.id, "secret": cred.secret, "user_id": user_id, "issued": issued})
            .to_string();
    let stored = keymanager::create_secret(&svc, &secret_name(cluster_uuid), &payload).await;
    if let Err(e) = stored {
        // Not kept, so not usable: take the credential back, without holding the answer.
        let gone = format!("{url}/{}", segment(&cred.id)?);
        tokio::spawn(async move {
            let _ = us
                .call(
                    ServiceType::Identity,
                    reqwest::Method::DELETE,
                    &gone,
                    Body::None,
                    "application/json",
                )
                .await;
        });
        return Err(e);
    }
    Ok(cred.id)
}

async fn stored_secrets(svc: &Session, cluster_uuid: &str) -> Result<Vec<String>, OsError> {
    let v = svc
        .get_json(
            ServiceType::KeyManager,
            &format!("/v1/secrets?name={}&limit=10", secret_name(cluster_uuid)),
        )
        .await?
        .unwrap_or(Value::Null);
    Ok(v["secrets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["secret_ref"].as_str().map(str::to_owned))
        .collect())
}

/// A credential kept in Barbican: the secret holding it, the credential, its owner (absent in
/// those stored before rotations existed: the cluster's creator) and when it was made.
struct Kept {
    secret_ref: String,
    cred: AppCredential,
    user_id: Option<String>,
    issued: u64,
}

/// The cluster's kept credentials, newest first.
async fn kept(svc: &Session, cluster_uuid: &str) -> Result<Vec<Kept>, OsError> {
    let mut all = Vec::new();
    for r in stored_secrets(svc, cluster_uuid).await? {
        let Some(payload) = keymanager::get_payload(svc, &r).await? else {
            continue;
        };
        let v: Value = crate::session::parse(ServiceType::KeyManager, &payload)?;
        if let (Some(id), Some(secret)) = (v["id"].as_str(), v["secret"].as_str()) {
            all.push(Kept {
                secret_ref: r,
                cred: AppCredential {
                    id: id.to_owned(),
                    secret: secret.to_owned(),
                },
                user_id: v["user_id"].as_str().map(str::to_owned),
                issued: v["issued"].as_u64().unwrap_or(0),
            });
        }
    }
    all.sort_by_key(|k| std::cmp::Reverse(k.issued));
    Ok(all)
}

/// The cluster's credential, for a driver to hand to the cluster (`None` when none was made):
/// the newest, during a rotation the new one.
pub async fn fetch(
    os: &Arc<OpenStack>,
    cluster_uuid: &str,
) -> Result<Option<AppCredential>, OsError> {
    let svc = os.service_session().await?;
    Ok(kept(&svc, cluster_uuid)
        .await?
        .into_iter()
        .next()
        .map(|k| k.cred))
}

/// Deletes one credential from Keystone as the service user (Keystone's default policy lets
/// it delete another user's); already gone (or its user gone) is fine.
async fn delete_credential(svc: &Session, user_id: &str, id: &str) -> Result<(), OsError> {
    let url = format!(
        "{}/users/{}/application_credentials/{}",
        svc.identity_v3()?,
        segment(user_id)?,
        segment(id)?
    );
    let (status, text) = svc
        .call(
            ServiceType::Identity,
            reqwest::Method::DELETE,
            &url,
            Body::None,
            "application/json",
        )
        .await?;
    if !(200..300).contains(&status) && status != 404 {
        return Err(OsError::Status {
            service: ServiceType::Identity,
            status,
            detail: message_of(&text),
        });
    }
    Ok(())
}

async fn forget(svc: &Session, k: &Kept, creator: &str) -> Result<(), OsError> {
    delete_credential(svc, k.user_id.as_deref().unwrap_or(creator), &k.cred.id).await?;
    keymanager::delete(svc, "secrets", &k.secret_ref).await
}

/// Once the cluster uses its newest credential: every older one is deleted from Keystone
/// and Barbican (`creator` owns those stored without an owner). Returns how many went.
pub async fn retire_older(
    os: &Arc<OpenStack>,
    creator: &str,
    cluster_uuid: &str,
) -> Result<usize, OsError> {
    let svc = os.service_session().await?;
    let all = kept(&svc, cluster_uuid).await?;
    for k in all.iter().skip(1) {
        forget(&svc, k, creator).await?;
    }
    Ok(all.len().saturating_sub(1))
}

/// Takes back the credential `id` (a rotation refused before the cluster used it).
pub async fn withdraw(
    os: &Arc<OpenStack>,
    creator: &str,
    cluster_uuid: &str,
    id: &str,
) -> Result<(), OsError> {
    let svc = os.service_session().await?;
    for k in kept(&svc, cluster_uuid).await? {
        if k.cred.id == id {
            forget(&svc, &k, creator).await?;
        }
    }
    Ok(())
}

/// Deletes the cluster's credential from Keystone (found by its name under `user_id`) and its
/// secret from Barbican. Already gone is fine.
pub async fn revoke(os: &Arc<OpenStack>, user_id: &str, cluster_uuid: &str) -> Result<(), OsError> {
    let svc = os.service_session().await?;
    let base = format!(
        "{}/users/{}/application_credentials",
        svc.identity_v3()?,
        segment(user_id)?
    );
    let listed = svc
        .get_json(
            ServiceType::Identity,
            &format!("{base}?name={}", credential_name(cluster_uuid)),
        )
        .await?
        .unwrap_or(Value::Null);
    for cred in listed["application_credentials"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(id) = cred["id"].as_str() {
            delete_credential(&svc, user_id, id).await?;
        }
    }
    // Rotations' credentials, under whoever rotated.
    for k in kept(&svc, cluster_uuid).await? {
        forget(&svc, &k, user_id).await?;
    }
    for r in stored_secrets(&svc, cluster_uuid).await? {
        keymanager::delete(&svc, "secrets", &r).await?;
    }
    Ok(())
}
