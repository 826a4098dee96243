//! Quotas: create (the project must exist in Keystone), update, delete.

use magnum_core::{Error, RequestContext, Result};
use magnum_db::repo::quota::Quota;
use serde_json::Value;

use crate::Services;

pub struct Quotas<'a> {
    pub(crate) s: &'a Services,
}

/// The requested limit: 1 when absent or null, and it must fit the column.
fn hard_limit(v: Option<&Value>) -> Result<i32> {
    match v {
        None | Some(Value::Null) => Ok(1),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| {
                crate::invalid(format!(
                    "Invalid input for field/attribute hard_limit. Value: '{v}'. Value too large"
                ))
            }),
    }
}

impl Quotas<'_> {
    /// Refuses an unknown project with upstream's 404 before the caller's policy is
    /// checked (upstream's order), so [`Self::create`] takes a checked project.
    pub async fn check_project(&self, ctx: &RequestContext, project_id: &str) -> Result<()> {
        if !project_id.is_empty() && !self.s.validator.project_exists(ctx, project_id).await? {
            return Err(Error::NotFound {
                message: format!("The project_id {project_id} could not be found."),
            });
        }
        Ok(())
    }

    pub async fn create(
        &self,
        project_id: &str,
        resource: &str,
        limit: Option<&Value>,
    ) -> Result<Quota> {
        if project_id.is_empty() {
            return Err(crate::invalid("Must provide a valid project ID.".into()));
        }
        self.s
            .db
            .quotas()
            .create(project_id, resource, hard_limit(limit)?)
            .await
    }

    pub async fn update(
        &self,
        project_id: &str,
        resource: &str,
        limit: Option<&Value>,
    ) -> Result<Quota> {
        self.s
            .db
            .quotas()
            .update(project_id, resource, hard_limit(limit)?)
            .await
    }

    pub async fn delete(&self, project_id: &str, resource: &str) -> Result<()> {
        self.s.db.quotas().delete(project_id, resource).await
    }

    /// The project's cluster limit: its explicit quota, else `[quotas]
    /// max_clusters_per_project`.
    pub async fn cluster_limit(&self, project_id: Option<&str>) -> Result<u64> {
        let default = self.s.settings.max_clusters_per_project;
        let limit = match project_id {
            None => default,
            Some(p) => match self.s.db.quotas().get(p, "Cluster").await {
                Ok(q) => q.hard_limit,
                Err(Error::QuotaNotFound { .. }) => default,
                Err(e) => return Err(e),
            },
        };
        Ok(u64::try_from(limit).unwrap_or(0))
    }
}
