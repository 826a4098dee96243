//! A row's columns by name, as plain values: what the upstream object bridge needs to map
//! versioned objects onto rows generically (every persistent field of upstream's objects is a
//! column of the same name), without the bridge depending on the ORM.

use chrono::NaiveDateTime;
use magnum_core::model::NodegroupRole;
use magnum_core::status::{ClusterHealthStatus, ClusterStatus, FederationStatus};

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

/// A column's Rust type as the records hold it, and its plain value.
pub(crate) trait FieldType: Sized {
    const KIND: ColumnKind;
    fn value(&self) -> FieldValue;
    /// `Err` gives the value back when the column cannot hold it.
    fn from_value(v: FieldValue) -> Result<Self, FieldValue>;
}

impl FieldType for i32 {
    const KIND: ColumnKind = ColumnKind::Int;
    fn value(&self) -> FieldValue {
        FieldValue::Int(i64::from(*self))
    }
    fn from_value(v: FieldValue) -> Result<Self, FieldValue> {
        match v {
            FieldValue::Int(i) => i32::try_from(i).map_err(|_| v),
            other => Err(other),
        }
    }
}

impl FieldType for String {
    const KIND: ColumnKind = ColumnKind::Text;
    fn value(&self) -> FieldValue {
        FieldValue::Text(self.clone())
    }
    fn from_value(v: FieldValue) -> Result<Self, FieldValue> {
        match v {
            FieldValue::Text(s) => Ok(s),
            other => Err(other),
        }
    }
}

impl FieldType for bool {
    const KIND: ColumnKind = ColumnKind::Bool;
    fn value(&self) -> FieldValue {
        FieldValue::Bool(*self)
    }
    fn from_value(v: FieldValue) -> Result<Self, FieldValue> {
        match v {
            FieldValue::Bool(b) => Ok(b),
            other => Err(other),
        }
    }
}

impl FieldType for NaiveDateTime {
    const KIND: ColumnKind = ColumnKind::DateTime;
    fn value(&self) -> FieldValue {
        FieldValue::DateTime(*self)
    }
    fn from_value(v: FieldValue) -> Result<Self, FieldValue> {
        match v {
            FieldValue::DateTime(dt) => Ok(dt),
            other => Err(other),
        }
    }
}

/// Enums stored as their wire text.
macro_rules! text_field {
    ($($ty:ty),+) => {$(
        impl FieldType for $ty {
            const KIND: ColumnKind = ColumnKind::Text;
            fn value(&self) -> FieldValue {
                FieldValue::Text(self.as_str().to_owned())
            }
            fn from_value(v: FieldValue) -> Result<Self, FieldValue> {
                match v {
                    FieldValue::Text(s) => s.parse().map_err(|_| FieldValue::Text(s)),
                    other => Err(other),
                }
            }
        }
    )+};
}
text_field!(ClusterStatus, ClusterHealthStatus, FederationStatus);

impl FieldType for NodegroupRole {
    const KIND: ColumnKind = ColumnKind::Text;
    fn value(&self) -> FieldValue {
        FieldValue::Text(self.as_str().to_owned())
    }
    fn from_value(v: FieldValue) -> Result<Self, FieldValue> {
        match v {
            FieldValue::Text(s) => Ok(NodegroupRole::from(s.as_str())),
            other => Err(other),
        }
    }
}

impl<T: FieldType> FieldType for Option<T> {
    const KIND: ColumnKind = T::KIND;
    fn value(&self) -> FieldValue {
        self.as_ref().map_or(FieldValue::Null, T::value)
    }
    fn from_value(v: FieldValue) -> Result<Self, FieldValue> {
        match v {
            FieldValue::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}
