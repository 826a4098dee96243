//! The `nodegroup` table. Nodegroups point at their cluster by the cluster's uuid; non-admins
//! see their own project's nodegroups, admins see all (upstream ignores all_tenants here).

use magnum_core::ids::Identity;
use magnum_core::{Error, RequestContext, Result};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder};

use super::{
    Missing, Page, count, delete_where, ensure_uuid, fetch_all, fetch_by_name, fetch_one,
    json_default, now, paginate, save,
};
use crate::Database;
use crate::entity::nodegroup;

pub use crate::records::NodeGroup;

impl NodeGroup {
    /// The uuid as its newtype (empty for a row without one, which nothing writes).
    pub fn ident(&self) -> magnum_core::ids::NodeGroupUuid {
        self.uuid.clone().into()
    }
}

/// Upstream's nodegroup list filters.
#[derive(Clone, Debug, Default)]
pub struct NodeGroupFilters {
    pub name: Option<String>,
    pub node_count: Option<i32>,
    /// Compared as JSON text, as upstream does.
    pub node_addresses: Option<Vec<String>>,
    pub role: Option<String>,
    pub is_default: Option<bool>,
    pub status: Option<Vec<String>>,
}

pub struct NodeGroupRepo<'a> {
    db: &'a Database,
}

impl Database {
    pub fn nodegroups(&self) -> NodeGroupRepo<'_> {
        NodeGroupRepo { db: self }
    }
}

fn not_found(ident: &str) -> Missing {
    Missing::new(|nodegroup| Error::NodeGroupNotFound { nodegroup }, ident)
}

fn scoped(ctx: &RequestContext, cluster_id: &str) -> sea_orm::Select<nodegroup::Entity> {
    let mut q = nodegroup::Entity::find().filter(nodegroup::Column::ClusterId.eq(cluster_id));
    if !ctx.is_admin {
        q = q.filter(nodegroup::Column::ProjectId.eq(ctx.project_id.clone()));
    }
    q
}

/// Upstream's ORM defaults for a new nodegroup row: uuid, created_at, `{}`/`[]` JSON,
/// is_default false.
pub(crate) fn new_row_defaults(ng: &mut NodeGroup) {
    let mut uuid = Some(ng.uuid.clone());
    ng.uuid = ensure_uuid(&mut uuid);
    ng.created_at = Some(now());
    ng.updated_at = None;
    json_default(&mut ng.labels, "{}");
    json_default(&mut ng.node_addresses, "[]");
    json_default(&mut ng.node_labels, "{}");
    json_default(&mut ng.node_taints, "[]");
    ng.is_default.get_or_insert(false);
}

impl NodeGroupRepo<'_> {
    /// Insert, with upstream's defaults: uuid, created_at, `{}`/`[]` JSON, is_default false.
    /// A duplicate uuid or (cluster, name) is NodeGroupAlreadyExists.
    pub async fn create(&self, mut ng: NodeGroup) -> Result<NodeGroup> {
        new_row_defaults(&mut ng);
        let (name, cluster_id) = (ng.name.clone(), ng.cluster_id.clone());
        super::insert::<nodegroup::Entity, _, _>(self.db, ng, || Error::NodeGroupAlreadyExists {
            name,
            cluster_id,
        })
        .await
    }

    pub async fn get_by_id(
        &self,
        ctx: &RequestContext,
        cluster_id: &str,
        id: i32,
    ) -> Result<NodeGroup> {
        let q = scoped(ctx, cluster_id).filter(nodegroup::Column::Id.eq(id));
        fetch_one(self.db.conn(), q, || not_found(&id.to_string()).err()).await
    }

    pub async fn get_by_uuid(
        &self,
        ctx: &RequestContext,
        cluster_id: &str,
        uuid: &str,
    ) -> Result<NodeGroup> {
        let q = scoped(ctx, cluster_id).filter(nodegroup::Column::Uuid.eq(uuid));
        fetch_one(self.db.conn(), q, || not_found(uuid).err()).await
    }

    pub async fn get_by_name(
        &self,
        ctx: &RequestContext,
        cluster_id: &str,
        name: &str,
    ) -> Result<NodeGroup> {
        let q = scoped(ctx, cluster_id).filter(nodegroup::Column::Name.eq(name));
        fetch_by_name(
            self.db.conn(),
            q,
            || not_found(name).err(),
            || Error::multiple("nodegroups", "nodegroup"),
        )
        .await
    }

    fn filtered(
        ctx: &RequestContext,
        cluster_id: &str,
        f: &NodeGroupFilters,
    ) -> sea_orm::Select<nodegroup::Entity> {
        use nodegroup::Column as C;
        let mut cond = Condition::all();
        if let Some(v) = &f.name {
            cond = cond.add(C::Name.eq(v.as_str()));
        }
        if let Some(v) = f.node_count {
            cond = cond.add(C::NodeCount.eq(v));
        }
        if let Some(v) = &f.node_addresses {
            cond = cond.add(C::NodeAddresses.eq(crate::json::dumps(v)));
        }
        if let Some(v) = &f.role {
            cond = cond.add(C::Role.eq(v.as_str()));
        }
        if let Some(v) = f.is_default {
            cond = cond.add(C::IsDefault.eq(v));
        }
        if let Some(v) = &f.status {
            cond = cond.add(C::Status.is_in(v.iter().map(String::as_str)));
        }
        scoped(ctx, cluster_id).filter(cond)
    }

    pub async fn list(
        &self,
        ctx: &RequestContext,
        cluster_id: &str,
        filters: &NodeGroupFilters,
        page: &Page<NodeGroup>,
    ) -> Result<Vec<NodeGroup>> {
        let q = paginate(
            self.db.backend(),
            Self::filtered(ctx, cluster_id, filters),
            page,
        )?;
        fetch_all(self.db.conn(), q).await
    }

    pub async fn count(&self, ctx: &RequestContext, cluster_id: &str) -> Result<u64> {
        count(self.db.conn(), scoped(ctx, cluster_id)).await
    }

    /// Every nodegroup of the given clusters in one query (for cluster lists: no N+1).
    pub async fn for_clusters(&self, cluster_uuids: &[String]) -> Result<Vec<NodeGroup>> {
        if cluster_uuids.is_empty() {
            return Ok(Vec::new());
        }
        let q = nodegroup::Entity::find()
            .filter(nodegroup::Column::ClusterId.is_in(cluster_uuids.iter().map(String::as_str)))
            .order_by_asc(nodegroup::Column::Id);
        fetch_all(self.db.conn(), q).await
    }

    /// `(cluster uuid, role, node_count)` of every nodegroup of the given clusters: what a
    /// brief cluster list needs, without decoding whole rows (one query).
    pub async fn counts_for_clusters(
        &self,
        cluster_uuids: &[String],
    ) -> Result<Vec<(String, Option<String>, Option<i32>)>> {
        use sea_orm::QuerySelect;
        if cluster_uuids.is_empty() {
            return Ok(Vec::new());
        }
        nodegroup::Entity::find()
            .select_only()
            .columns([
                nodegroup::Column::ClusterId,
                nodegroup::Column::Role,
                nodegroup::Column::NodeCount,
            ])
            .filter(nodegroup::Column::ClusterId.is_in(cluster_uuids.iter().map(String::as_str)))
            .into_tuple()
            .all(self.db.conn())
            .await
            .map_err(crate::errors::map_db_err)
    }

    /// Guarded save of the fields that differ between `original` and `modified`.
    pub async fn save(&self, original: &NodeGroup, modified: &NodeGroup) -> Result<NodeGroup> {
        save::<nodegroup::Entity, _>(
            self.db,
            original,
            modified,
            "NodeGroup",
            not_found(&original.uuid),
        )
        .await
    }

    pub async fn destroy(&self, cluster_id: &str, ident: &Identity) -> Result<()> {
        let cond = super::identity_condition(ident, nodegroup::Column::Id, nodegroup::Column::Uuid)
            .add(nodegroup::Column::ClusterId.eq(cluster_id));
        delete_where::<nodegroup::Entity>(self.db, cond, not_found(&ident.to_string())).await
    }
}
