//! The `quotas` table: one hard limit per (project, resource). Authorisation is the API's job,
//! so no tenant filter here, as upstream.

use magnum_core::{Error, Result};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter};

use super::{Change, Missing, Page, delete_where, fetch_all, fetch_one, now, paginate, update_row};
use crate::Database;
use crate::entity::quotas;

pub use crate::records::Quota;

#[derive(Clone, Debug, Default)]
pub struct QuotaFilters {
    pub project_id: Option<String>,
    pub resource: Option<String>,
}

pub struct QuotaRepo<'a> {
    db: &'a Database,
}

impl Database {
    pub fn quotas(&self) -> QuotaRepo<'_> {
        QuotaRepo { db: self }
    }
}

fn not_found(project_id: &str, resource: &str) -> Missing {
    Missing::new(
        |msg| Error::QuotaNotFound { msg },
        format!("project_id {project_id} resource {resource}."),
    )
}

fn key(project_id: &str, resource: &str) -> Condition {
    Condition::all()
        .add(quotas::Column::ProjectId.eq(project_id))
        .add(quotas::Column::Resource.eq(resource))
}

impl QuotaRepo<'_> {
    pub async fn create(&self, project_id: &str, resource: &str, hard_limit: i32) -> Result<Quota> {
        let q = Quota {
            created_at: Some(now()),
            project_id: Some(project_id.to_owned()),
            resource: Some(resource.to_owned()),
            hard_limit,
            ..Quota::default()
        };
        let (project_id, resource) = (project_id.to_owned(), resource.to_owned());
        super::insert::<quotas::Entity, _, _>(self.db, q, || Error::QuotaAlreadyExists {
            project_id,
            resource,
        })
        .await
    }

    pub async fn get(&self, project_id: &str, resource: &str) -> Result<Quota> {
        let q = quotas::Entity::find().filter(key(project_id, resource));
        fetch_one(self.db.conn(), q, || not_found(project_id, resource).err()).await
    }

    pub async fn get_by_id(&self, id: i32) -> Result<Quota> {
        let q = quotas::Entity::find().filter(quotas::Column::Id.eq(id));
        fetch_one(self.db.conn(), q, || Error::QuotaNotFound {
            msg: format!("id {id}."),
        })
        .await
    }

    pub async fn all_for_project(&self, project_id: &str) -> Result<Vec<Quota>> {
        let q = quotas::Entity::find().filter(quotas::Column::ProjectId.eq(project_id));
        fetch_all(self.db.conn(), q).await
    }

    pub async fn list(&self, f: &QuotaFilters, page: &Page<Quota>) -> Result<Vec<Quota>> {
        let mut q = quotas::Entity::find();
        if let Some(p) = &f.project_id {
            q = q.filter(quotas::Column::ProjectId.eq(p.as_str()));
        }
        if let Some(r) = &f.resource {
            q = q.filter(quotas::Column::Resource.eq(r.as_str()));
        }
        fetch_all(self.db.conn(), paginate(self.db.backend(), q, page)?).await
    }

    /// Set the hard limit (a plain overwrite: the new limit does not depend on the old one).
    pub async fn update(&self, project_id: &str, resource: &str, hard_limit: i32) -> Result<Quota> {
        let row = self.get(project_id, resource).await?;
        let change = Change {
            column: quotas::Column::HardLimit,
            new: hard_limit.into(),
            expected: None,
        };
        update_row::<quotas::Entity, _>(
            self.db,
            row.id,
            vec![change],
            "Quota",
            not_found(project_id, resource),
        )
        .await
    }

    pub async fn delete(&self, project_id: &str, resource: &str) -> Result<()> {
        delete_where::<quotas::Entity>(
            self.db,
            key(project_id, resource),
            not_found(project_id, resource),
        )
        .await
    }
}
