//! Decoding whole rows into entity models by column position.
//!
//! sea-orm's derived decoder looks each column up by name and, for every NULL, formats an
//! error message it then throws away; on a list of templates (36 mostly-NULL columns a row)
//! that was most of a request's CPU. Our tables use four column types, so a row is decoded
//! positionally straight from the driver's row with `Option<T>` per column.

use magnum_core::Result;
use sea_orm::sea_query::ColumnType;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, Iterable, ModelTrait, QueryResult,
    QueryTrait, Select, Value,
};

use crate::errors::map_db_err;

#[derive(Clone, Copy)]
enum Kind {
    Int,
    Bool,
    DateTime,
    Text,
}

fn kinds<E: EntityTrait>() -> Vec<(E::Column, Kind)> {
    E::Column::iter()
        .map(|c| {
            let kind = match c.def().get_column_type() {
                ColumnType::Integer
                | ColumnType::SmallInteger
                | ColumnType::TinyInteger
                | ColumnType::BigInteger => Kind::Int,
                ColumnType::Boolean => Kind::Bool,
                ColumnType::DateTime | ColumnType::Timestamp => Kind::DateTime,
                _ => Kind::Text,
            };
            (c, kind)
        })
        .collect()
}

/// One column of the driver's row as `Option<T>`, whatever the engine.
fn get<T>(row: &QueryResult, i: usize) -> std::result::Result<Option<T>, DbErr>
where
    T: for<'r> sqlx::Decode<'r, sqlx::MySql>
        + sqlx::Type<sqlx::MySql>
        + for<'r> sqlx::Decode<'r, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>
        + for<'r> sqlx::Decode<'r, sqlx::Sqlite>
        + sqlx::Type<sqlx::Sqlite>,
{
    use sqlx::Row;
    let res = if let Some(r) = row.try_as_mysql_row() {
        r.try_get::<Option<T>, _>(i)
    } else if let Some(r) = row.try_as_pg_row() {
        r.try_get::<Option<T>, _>(i)
    } else if let Some(r) = row.try_as_sqlite_row() {
        r.try_get::<Option<T>, _>(i)
    } else {
        return Err(DbErr::Custom("unsupported row type".into()));
    };
    res.map_err(|e| DbErr::Type(e.to_string()))
}

fn decode<E>(row: &QueryResult, kinds: &[(E::Column, Kind)]) -> std::result::Result<E::Model, DbErr>
where
    E: EntityTrait,
    E::Model: Default + ModelTrait<Entity = E>,
{
    let mut m = E::Model::default();
    for (i, (col, kind)) in kinds.iter().enumerate() {
        let v = match kind {
            Kind::Int => Value::Int(get::<i32>(row, i)?),
            Kind::Bool => Value::Bool(get::<bool>(row, i)?),
            Kind::DateTime => Value::ChronoDateTime(get::<chrono::NaiveDateTime>(row, i)?),
            Kind::Text => Value::String(get::<String>(row, i)?),
        };
        // NOT NULL columns (id, nodegroup uuid/name, ...) keep their default when NULL, which
        // the schema forbids anyway.
        if !matches!(
            v,
            Value::Int(None)
                | Value::Bool(None)
                | Value::ChronoDateTime(None)
                | Value::String(None)
        ) {
            m.try_set(*col, v)?;
        }
    }
    Ok(m)
}

/// Run an entity select (all columns, in entity order) and decode every row.
pub(crate) async fn load<E, C>(conn: &C, q: Select<E>) -> Result<Vec<E::Model>>
where
    E: EntityTrait,
    E::Model: Default + ModelTrait<Entity = E>,
    C: ConnectionTrait,
{
    let stmt = q.build(conn.get_database_backend());
    let rows = conn.query_all_raw(stmt).await.map_err(map_db_err)?;
    let kinds = kinds::<E>();
    rows.iter()
        .map(|r| decode::<E>(r, &kinds).map_err(map_db_err))
        .collect()
}
