//! Objects from and to our database rows. Every persistent object's fields are columns of
//! the same name, so one generic mapping serves all tables: a row loads as upstream's
//! `_from_db_object` loads it (every field set, none changed), and an object's fields write
//! into a row as upstream's `create()`/`save()` write their values.

use magnum_db::fields::{ColumnKind, FieldValue, RowFields};
use magnum_db::json::{dumps, loads};
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::cluster_template::ClusterTemplate;
use magnum_db::repo::federation::Federation;
use magnum_db::repo::magnum_service::MagnumService;
use magnum_db::repo::nodegroup::NodeGroup;
use magnum_db::repo::quota::Quota;
use magnum_db::repo::x509keypair::X509KeyPair;
use magnum_rpc::oslo::objects::{
    CLUSTER, CLUSTER_TEMPLATE, Class, FEDERATION, Kind, MAGNUM_SERVICE, NODEGROUP, Object,
    ObjectError, QUOTA, STATS, X509KEYPAIR, format_naive, naive_utc,
};
use serde_json::Value;

/// A column value as the field's raw value (JSON text parsed; unparsable text reads as None,
/// as upstream's JSON column type tolerates legacy rows).
fn sql_to_json(kind: Kind, v: FieldValue) -> Value {
    match v {
        FieldValue::Int(i) => Value::from(i),
        FieldValue::Bool(b) => Value::Bool(b),
        FieldValue::DateTime(dt) => Value::String(format_naive(dt)),
        FieldValue::Text(s) if kind.is_json_column() => {
            loads::<Value>(Some(&s)).unwrap_or_default()
        }
        FieldValue::Text(s) => Value::String(s),
        FieldValue::Null => Value::Null,
    }
}

/// A field primitive as a value for a column of `column` kind. JSON columns store None as
/// `{}`/`[]`, as upstream's JSON column types write it.
fn json_to_sql(
    class: &Class,
    name: &str,
    kind: Kind,
    v: &Value,
    column: ColumnKind,
) -> Result<FieldValue, ObjectError> {
    let bad = || ObjectError::Field {
        class: class.name,
        field: name.to_owned(),
        reason: format!("cannot store {v} in its column"),
    };
    if v.is_null() && !(column == ColumnKind::Text && kind.is_json_column()) {
        return Ok(FieldValue::Null);
    }
    Ok(match column {
        ColumnKind::Int => FieldValue::Int(
            v.as_i64()
                .filter(|i| i32::try_from(*i).is_ok())
                .ok_or_else(bad)?,
        ),
        ColumnKind::Bool => FieldValue::Bool(v.as_bool().ok_or_else(bad)?),
        ColumnKind::DateTime => {
            FieldValue::DateTime(v.as_str().and_then(naive_utc).ok_or_else(bad)?)
        }
        ColumnKind::Text if kind.is_json_column() => FieldValue::Text(match v {
            Value::Null if matches!(kind, Kind::DictOfStrings) => "{}".to_owned(),
            Value::Null => "[]".to_owned(),
            other => dumps(other),
        }),
        ColumnKind::Text => match v {
            Value::String(s) => FieldValue::Text(s.clone()),
            _ => return Err(bad()),
        },
    })
}

/// A row's column fields as raw values, before the object's coercion: what upstream's
/// `_from_db_object` reads (JSON columns decoded).
pub fn raw_fields<M: RowFields>(class: &'static Class, row: &M) -> Vec<(&'static str, Value)> {
    class
        .fields
        .iter()
        .filter_map(|f| {
            row.column_value(f.name)
                .map(|v| (f.name, sql_to_json(f.kind, v)))
        })
        .collect()
}

/// The object a row loads as: every column field set, nothing changed.
pub fn from_row<M: RowFields>(class: &'static Class, row: &M) -> Result<Object, ObjectError> {
    let mut obj = Object::new(class);
    for (name, v) in raw_fields(class, row) {
        obj.load(name, v)?;
    }
    Ok(obj)
}

/// Write the named fields of `obj` (those that are set and are columns) into `row`.
pub fn write_fields<'a, M: RowFields>(
    obj: &Object,
    names: impl IntoIterator<Item = &'a str>,
    row: &mut M,
) -> Result<(), ObjectError> {
    let class = obj.class();
    for name in names {
        let (Some(f), Some(v), Some(col)) =
            (class.field(name), obj.get(name), row.column_kind(name))
        else {
            continue;
        };
        let new = json_to_sql(class, name, f.kind, v, col)?;
        row.set_column_value(name, new)
            .map_err(|e| ObjectError::Field {
                class: class.name,
                field: name.to_owned(),
                reason: e.to_string(),
            })?;
    }
    Ok(())
}

/// A new row holding every set field of `obj` except what storage assigns (id, timestamps):
/// what upstream's `create()` inserts.
pub fn new_row<M: RowFields + Default>(obj: &Object) -> Result<M, ObjectError> {
    let mut row = M::default();
    let names: Vec<&str> = obj
        .fields()
        .map(|(n, _)| n)
        .filter(|n| !matches!(*n, "id" | "created_at" | "updated_at"))
        .collect();
    write_fields(obj, names, &mut row)?;
    Ok(row)
}

/// `original` with the object's changed fields applied: what upstream's `save()` writes.
pub fn changed_row<M: RowFields + Clone>(obj: &Object, original: &M) -> Result<M, ObjectError> {
    let mut row = original.clone();
    let changes = obj.changes();
    write_fields(
        obj,
        changes
            .into_iter()
            .filter(|n| !matches!(*n, "id" | "created_at" | "updated_at")),
        &mut row,
    )?;
    Ok(row)
}

pub fn cluster(row: &Cluster) -> Result<Object, ObjectError> {
    from_row(&CLUSTER, row)
}

pub fn cluster_template(row: &ClusterTemplate) -> Result<Object, ObjectError> {
    from_row(&CLUSTER_TEMPLATE, row)
}

pub fn nodegroup(row: &NodeGroup) -> Result<Object, ObjectError> {
    from_row(&NODEGROUP, row)
}

pub fn x509keypair(row: &X509KeyPair) -> Result<Object, ObjectError> {
    from_row(&X509KEYPAIR, row)
}

pub fn magnum_service(row: &MagnumService) -> Result<Object, ObjectError> {
    from_row(&MAGNUM_SERVICE, row)
}

pub fn quota(row: &Quota) -> Result<Object, ObjectError> {
    from_row(&QUOTA, row)
}

pub fn federation(row: &Federation) -> Result<Object, ObjectError> {
    from_row(&FEDERATION, row)
}

/// `Stats.get_cluster_stats`' object (built by the constructor: both fields changed).
pub fn stats(clusters: u64, nodes: i64) -> Result<Object, ObjectError> {
    let mut obj = Object::new(&STATS);
    obj.set("clusters", Value::from(clusters))?;
    obj.set("nodes", Value::from(nodes))?;
    Ok(obj)
}

#[cfg(test)]
pub(crate) mod tests;
