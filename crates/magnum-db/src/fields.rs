//! A row's columns by name, as plain values: what the upstream object bridge needs to map
//! versioned objects onto rows generically (every persistent field of upstream's objects is a
//! column of the same name), without the bridge depending on the ORM.

use chrono::NaiveDateTime;
use sea_orm::{EntityTrait, ModelTrait, Value as Sql};

/// The storage type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    Int,
    Bool,
    DateTime,
    Text,
}

/// One column's value. JSON columns are `Text` holding the JSON as stored.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue {
    Null,
    Int(i64),
    Bool(bool),
    DateTime(NaiveDateTime),
    Text(String),
}

#[derive(Debug, thiserror::Error)]
pub enum FieldError {
    #[error("no column {0}")]
    NoColumn(String),
    #[error("column {column} cannot hold {value:?}")]
    Type { column: String, value: FieldValue },
    #[error("column {column}: {reason}")]
    Set { column: String, reason: String },
}

/// Column access by name for every table's row type.
pub trait RowFields {
    /// `None` when the table has no such column.
    fn column_kind(&self, name: &str) -> Option<ColumnKind>;
    fn column_value(&self, name: &str) -> Option<FieldValue>;
    fn set_column_value(&mut self, name: &str, value: FieldValue) -> Result<(), FieldError>;
}

type Column<M> = <<M as ModelTrait>::Entity as EntityTrait>::Column;

fn column<M: ModelTrait>(name: &str) -> Option<Column<M>> {
    name.parse::<Column<M>>().ok()
}

fn kind_of(v: &Sql) -> Option<ColumnKind> {
    Some(match v {
        Sql::Int(_) | Sql::BigInt(_) => ColumnKind::Int,
        Sql::Bool(_) => ColumnKind::Bool,
        Sql::ChronoDateTime(_) => ColumnKind::DateTime,
        Sql::String(_) => ColumnKind::Text,
        _ => return None,
    })
}

impl<M: ModelTrait> RowFields for M {
    fn column_kind(&self, name: &str) -> Option<ColumnKind> {
        kind_of(&self.get(column::<M>(name)?))
    }

    fn column_value(&self, name: &str) -> Option<FieldValue> {
        Some(match self.get(column::<M>(name)?) {
            Sql::Int(Some(i)) => FieldValue::Int(i64::from(i)),
            Sql::BigInt(Some(i)) => FieldValue::Int(i),
            Sql::Bool(Some(b)) => FieldValue::Bool(b),
            Sql::ChronoDateTime(Some(dt)) => FieldValue::DateTime(dt),
            Sql::String(Some(s)) => FieldValue::Text(s),
            _ => FieldValue::Null,
        })
    }

    fn set_column_value(&mut self, name: &str, value: FieldValue) -> Result<(), FieldError> {
        let col = column::<M>(name).ok_or_else(|| FieldError::NoColumn(name.to_owned()))?;
        let bad = |value: FieldValue| FieldError::Type {
            column: name.to_owned(),
            value,
        };
        let new = match (self.get(col), value) {
            (Sql::Int(_), FieldValue::Null) => Sql::Int(None),
            (Sql::Int(_), FieldValue::Int(i)) => {
                Sql::Int(Some(i32::try_from(i).map_err(|_| bad(FieldValue::Int(i)))?))
            }
            (Sql::BigInt(_), FieldValue::Null) => Sql::BigInt(None),
            (Sql::BigInt(_), FieldValue::Int(i)) => Sql::BigInt(Some(i)),
            (Sql::Bool(_), FieldValue::Null) => Sql::Bool(None),
            (Sql::Bool(_), FieldValue::Bool(b)) => Sql::Bool(Some(b)),
            (Sql::ChronoDateTime(_), FieldValue::Null) => Sql::ChronoDateTime(None),
            (Sql::ChronoDateTime(_), FieldValue::DateTime(dt)) => Sql::ChronoDateTime(Some(dt)),
            (Sql::String(_), FieldValue::Null) => Sql::String(None),
            (Sql::String(_), FieldValue::Text(s)) => Sql::String(Some(s)),
            (_, v) => return Err(bad(v)),
        };
        self.try_set(col, new).map_err(|e| FieldError::Set {
            column: name.to_owned(),
            reason: e.to_string(),
        })
    }
}
