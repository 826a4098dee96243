//! The cluster's own OpenStack credentials, made before the create is answered, while the
//! user's token is at hand (see `magnum_openstack::credentials`). Only with the Barbican
//! certificate store, which keeps the secret encrypted; otherwise no credential is made.

use std::sync::Arc;

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};
use magnum_openstack::OpenStack;

#[async_trait]
pub trait ClusterCredentials: Send + Sync {
    /// Makes and keeps the credential of a new cluster as its creator.
    async fn issue(&self, ctx: &RequestContext, cluster_uuid: &str) -> Result<()>;
    /// Removes it again (a create that did not go through).
    async fn revoke(&self, user_id: &str, cluster_uuid: &str);
    /// A rotation's new credential, made as the caller and kept as the cluster's newest;
    /// its id (`None`: the caller has no token to delegate, nothing was made).
    async fn rotate(&self, ctx: &RequestContext, cluster_uuid: &str) -> Result<Option<String>>;
    /// Takes back a rotation's credential the cluster never used.
    async fn withdraw(&self, creator: &str, cluster_uuid: &str, id: &str);
}

/// Application credentials in Keystone, their secrets in Barbican.
pub struct OpenStackCredentials {
    pub openstack: Arc<OpenStack>,
}

#[async_trait]
impl ClusterCredentials for OpenStackCredentials {
    async fn issue(&self, ctx: &RequestContext, cluster_uuid: &str) -> Result<()> {
        // A caller without a token (internal contexts) has nothing to delegate.
        let (Some(token), Some(user_id)) = (&ctx.user_token, ctx.user_id.as_deref()) else {
            return Ok(());
        };
        magnum_openstack::credentials::issue(&self.openstack, token, user_id, cluster_uuid)
            .await
            .map_err(|e| {
                tracing::warn!(cluster = cluster_uuid, "cluster credential not made: {e}");
                Error::ServiceUnavailable {
                    message: format!(
                        "The cluster's OpenStack credentials could not be made: {e}; try again later."
                    ),
                }
            })
    }

    async fn rotate(&self, ctx: &RequestContext, cluster_uuid: &str) -> Result<Option<String>> {
        let (Some(token), Some(user_id)) = (&ctx.user_token, ctx.user_id.as_deref()) else {
            return Ok(None);
        };
        magnum_openstack::credentials::issue_rotation(
            &self.openstack,
            token,
            user_id,
            cluster_uuid,
        )
        .await
        .map(Some)
        .map_err(|e| {
            tracing::warn!(cluster = cluster_uuid, "rotated credential not made: {e}");
            Error::ServiceUnavailable {
                message: format!(
                    "The cluster's new OpenStack credentials could not be made: {e}; nothing changed, try again later."
                ),
            }
        })
    }

    async fn withdraw(&self, creator: &str, cluster_uuid: &str, id: &str) {
        if let Err(e) =
            magnum_openstack::credentials::withdraw(&self.openstack, creator, cluster_uuid, id)
                .await
        {
            tracing::warn!(
                cluster = cluster_uuid,
                "unused rotated credential not removed: {e}"
            );
        }
    }

    async fn revoke(&self, user_id: &str, cluster_uuid: &str) {
        if let Err(e) =
            magnum_openstack::credentials::revoke(&self.openstack, user_id, cluster_uuid).await
        {
            tracing::warn!(
                cluster = cluster_uuid,
                "cluster credential not removed: {e}"
            );
        }
    }
}
