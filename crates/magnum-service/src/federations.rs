//! Federations. Upstream's conductor implements no federation handler, so a created
//! federation never came into being there and the user was never told. Here the row is
//! stored and marked failed with that reason, so the user sees it; updates are refused the
//! same way, and delete removes the row (nothing was ever built).

use magnum_core::ids::{Identity, is_uuid_like};
use magnum_core::status::FederationStatus;
use magnum_core::{Error, RequestContext, Result};
use magnum_db::json::{dumps, loads};
use magnum_db::repo::federation::Federation;
use serde_json::{Map, Value};

use crate::{Services, generate_name, invalid};

const NOT_IMPLEMENTED: &str = "No driver implements federations; nothing was built.";

/// A federation to create, as the request gave it.
#[derive(Clone, Debug, Default)]
pub struct NewFederation {
    pub name: Option<String>,
    /// The host cluster, by uuid or name.
    pub hostcluster: Option<String>,
    /// The member cluster ids as given (stored as sent, `[]` when absent).
    pub member_ids: Option<Value>,
    pub properties: Option<Map<String, Value>>,
}

/// What a PATCH of a federation asks for.
#[derive(Clone, Debug)]
pub struct FederationChange {
    /// The paths the patch touches, without the leading `/`.
    pub attributes: Vec<String>,
    /// A cluster joining or leaving, when the first operation says so.
    pub member: Option<MemberChange>,
}

#[derive(Clone, Debug)]
pub enum MemberChange {
    Join(String),
    Leave(String),
}

pub struct Federations<'a> {
    pub(crate) s: &'a Services,
}

impl Federations<'_> {
    pub async fn create(&self, ctx: &RequestContext, req: NewFederation) -> Result<Federation> {
        let Some(host) = req.hostcluster else {
            return Err(invalid(
                "No hostcluster specified. Please specify a hostcluster_id.".into(),
            ));
        };
        let clusters = self.s.db.clusters();
        let host_cluster = if is_uuid_like(&host) {
            clusters.get_by_uuid(ctx, &host).await?
        } else {
            clusters.get_by_name(ctx, &host).await?
        };
        let Some(props) = req.properties else {
            return Err(invalid("Please specify a `dns-zone`.".into()));
        };
        if !props.contains_key("dns-zone") {
            return Err(invalid(
                "No DNS zone specified. Please specify a `dns-zone`.".into(),
            ));
        }
        let name = req
            .name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| generate_name("federation"));
        let row = Federation {
            uuid: Some(uuid::Uuid::new_v4().to_string()),
            name: Some(name),
            project_id: ctx.project_id.clone(),
            hostcluster_id: host_cluster.uuid.clone(),
            member_ids: Some(dumps(
                &req.member_ids.unwrap_or_else(|| Value::Array(Vec::new())),
            )),
            properties: Some(dumps(&props)),
            status: Some(FederationStatus::CreateFailed),
            status_reason: Some(NOT_IMPLEMENTED.into()),
            ..Federation::default()
        };
        self.s.db.federations().create(row).await
    }

    /// `ident` is how the caller named the federation (for upstream's conflict text).
    pub async fn update(
        &self,
        ctx: &RequestContext,
        original: &Federation,
        ident: &str,
        change: FederationChange,
    ) -> Result<Federation> {
        if let Some(attr) = change
            .attributes
            .iter()
            .find(|a| !matches!(a.split('/').next(), Some("member_ids" | "properties")))
        {
            return Err(invalid(format!(
                "cannot change federation property(ies) {attr}."
            )));
        }
        let members: Vec<String> = loads(original.member_ids.as_deref()).unwrap_or_default();
        match &change.member {
            Some(MemberChange::Join(member)) => {
                self.s.db.clusters().get_by_uuid(ctx, member).await?;
                if members.contains(member) {
                    return Err(Error::Conflict {
                        message: format!(
                            "This cluster {member} is already a member of the federation {ident}."
                        ),
                    });
                }
            }
            Some(MemberChange::Leave(member)) if !members.contains(member) => {
                return Err(Error::NotFound {
                    message: format!("Cluster {member} could not be found."),
                });
            }
            _ => {}
        }
        let mut modified = original.clone();
        modified.status = Some(FederationStatus::UpdateFailed);
        modified.status_reason = Some(NOT_IMPLEMENTED.into());
        self.s.db.federations().save(original, &modified).await
    }

    pub async fn delete(&self, f: &Federation) -> Result<()> {
        self.s.db.federations().destroy(&Identity::Id(f.id)).await
    }
}
