//! The `magnum_service` table: one heartbeat row per (host, binary).

use chrono::NaiveDateTime;
use magnum_core::{Error, Result};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, Value};

use super::{Missing, Page, delete_where, fetch_all, fetch_one, now, paginate, update_row};
use crate::Database;
use crate::entity::magnum_service;
use crate::errors::{TxError, map_db_err};

pub use crate::records::MagnumService;

pub struct MagnumServiceRepo<'a> {
    db: &'a Database,
}

impl Database {
    pub fn magnum_services(&self) -> MagnumServiceRepo<'_> {
        MagnumServiceRepo { db: self }
    }
}

fn not_found(id: &str) -> Missing {
    Missing::new(
        |magnum_service_id| Error::MagnumServiceNotFound { magnum_service_id },
        id,
    )
}

fn host_binary(host: Option<&str>, binary: &str) -> Condition {
    let host = match host {
        Some(h) => magnum_service::Column::Host.eq(h),
        None => magnum_service::Column::Host.is_null(),
    };
    Condition::all()
        .add(host)
        .add(magnum_service::Column::Binary.eq(binary))
}

impl MagnumServiceRepo<'_> {
    pub async fn get_by_host_and_binary(
        &self,
        host: Option<&str>,
        binary: &str,
    ) -> Result<Option<MagnumService>> {
        magnum_service::Entity::find()
            .filter(host_binary(host, binary))
            .one(self.db.conn())
            .await
            .map(|row| row.map(Into::into))
            .map_err(map_db_err)
    }

    /// Insert the row, or return the existing one when (host, binary) is already there.
    pub async fn create(&self, host: Option<&str>, binary: &str) -> Result<MagnumService> {
        let row = MagnumService {
            created_at: Some(now()),
            report_count: 0,
            host: host.map(str::to_owned),
            binary: Some(binary.to_owned()),
            disabled: Some(false),
            forced_down: Some(false),
            ..MagnumService::default()
        };
        match super::insert::<magnum_service::Entity, _, _>(self.db, row, || {
            Error::MagnumServiceAlreadyExists {
                id: format!("{}/{binary}", host.unwrap_or("")),
            }
        })
        .await
        {
            Err(Error::MagnumServiceAlreadyExists { id }) => self
                .get_by_host_and_binary(host, binary)
                .await?
                .ok_or(Error::MagnumServiceAlreadyExists { id }),
            other => other,
        }
    }

    /// One heartbeat: `report_count + 1` and `last_seen_up = now` computed by the database in
    /// a single UPDATE, so concurrent heartbeats never lose a count. Creates the row if needed.
    pub async fn report_state_up(&self, host: Option<&str>, binary: &str) -> Result<MagnumService> {
        let row = match self.get_by_host_and_binary(host, binary).await? {
            Some(r) => r,
            None => self.create(host, binary).await?,
        };
        let id = row.id;
        let stamp: NaiveDateTime = now();
        self.db
            .tx(move |txn| {
                Box::pin(async move {
                    let res = magnum_service::Entity::update_many()
                        .col_expr(
                            magnum_service::Column::ReportCount,
                            Expr::col(magnum_service::Column::ReportCount).add(1),
                        )
                        .col_expr(magnum_service::Column::LastSeenUp, Expr::value(stamp))
                        .col_expr(magnum_service::Column::UpdatedAt, Expr::value(stamp))
                        .filter(magnum_service::Column::Id.eq(id))
                        .exec(txn)
                        .await?;
                    if res.rows_affected == 0 {
                        return Err(TxError::Domain(not_found(&id.to_string()).err()));
                    }
                    Ok(())
                })
            })
            .await?;
        let q = magnum_service::Entity::find().filter(magnum_service::Column::Id.eq(id));
        fetch_one(self.db.conn(), q, || not_found(&id.to_string()).err()).await
    }

    /// Set `disabled`, `disabled_reason` or `forced_down` (plain overwrites by an operator).
    pub async fn update(
        &self,
        id: i32,
        disabled: Option<bool>,
        disabled_reason: Option<Option<String>>,
        forced_down: Option<bool>,
    ) -> Result<MagnumService> {
        use magnum_service::Column as C;
        let mut changes = Vec::new();
        let mut push = |column, new: Value| {
            changes.push(super::Change {
                column,
                new,
                expected: None,
            })
        };
        if let Some(d) = disabled {
            push(C::Disabled, d.into());
        }
        if let Some(r) = disabled_reason {
            push(C::DisabledReason, r.into());
        }
        if let Some(f) = forced_down {
            push(C::ForcedDown, f.into());
        }
        update_row::<magnum_service::Entity, _>(
            self.db,
            id,
            changes,
            "MagnumService",
            not_found(&id.to_string()),
        )
        .await
    }

    pub async fn list(
        &self,
        disabled: Option<bool>,
        page: &Page<MagnumService>,
    ) -> Result<Vec<MagnumService>> {
        let mut q = magnum_service::Entity::find();
        if let Some(d) = disabled {
            q = q.filter(magnum_service::Column::Disabled.eq(d));
        }
        fetch_all(self.db.conn(), paginate(self.db.backend(), q, page)?).await
    }

    /// Every row of `binary` (a handful: one per host), in one statement.
    pub async fn of_binary(&self, binary: &str) -> Result<Vec<MagnumService>> {
        let q = magnum_service::Entity::find().filter(magnum_service::Column::Binary.eq(binary));
        fetch_all(self.db.conn(), q).await
    }

    pub async fn destroy(&self, id: i32) -> Result<()> {
        let cond = Condition::all().add(magnum_service::Column::Id.eq(id));
        delete_where::<magnum_service::Entity>(self.db, cond, not_found(&id.to_string())).await
    }
}

/// Upstream's up/down rule: down when forced down, or when the last sign of life (last_seen_up,
/// else updated_at, else created_at) is further than `service_down_time` seconds from now, in
/// either direction.
pub fn is_up(svc: &MagnumService, now: NaiveDateTime, service_down_time: i64) -> bool {
    if svc.forced_down == Some(true) {
        return false;
    }
    match svc.last_seen_up.or(svc.updated_at).or(svc.created_at) {
        Some(seen) => (now - seen).num_seconds().abs() <= service_down_time,
        None => false,
    }
}
