//! Strict request parsing with WSME's observable rules: unknown attributes and read-only
//! fields are refused, types are checked and coerced as WSME coerces them, and every failure
//! is a 400 whose text matches upstream's.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Text with a length range (characters).
    Str { min: usize, max: usize },
    /// Integer with an optional range; digit strings and booleans are accepted as WSME does.
    Int { min: Option<i64>, max: Option<i64> },
    /// Magnum's BooleanType: JSON booleans or oslo's strict boolean strings.
    Bool,
    /// Any uuid-like string.
    Uuid,
    /// One of a fixed set of strings.
    Enum(&'static [&'static str]),
    /// A dict of string to scalar; values are stored as Python's `str()` of them.
    StrDict,
    /// A list of strings.
    StrList,
    /// Anything JSON; checked by the handler.
    Any,
}

#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub read_only: bool,
    pub mandatory: bool,
}

pub const fn field(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        read_only: false,
        mandatory: false,
    }
}

pub const fn read_only(name: &'static str) -> Field {
    Field {
        name,
        kind: Kind::Any,
        read_only: true,
        mandatory: false,
    }
}

pub const fn mandatory(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        read_only: false,
        mandatory: true,
    }
}

pub const STR255: Kind = Kind::Str { min: 1, max: 255 };
/// Counts (node and master counts, their bounds, timeouts in minutes).
pub const NON_NEGATIVE: Kind = Kind::Int {
    min: Some(0),
    max: None,
};
/// Counts that must be at least one, and row ids.
pub const POSITIVE: Kind = Kind::Int {
    min: Some(1),
    max: None,
};

pub use crate::patch::{py_repr, py_str};

/// Upstream's invalid-attribute 400 (one text for the API's input rules and the services').
pub fn invalid(field: &str, value: &Value, reason: impl std::fmt::Display) -> ApiError {
    magnum_service::invalid_attribute(field, value, reason).into()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<class 'NoneType'>",
        Value::Bool(_) => "<class 'bool'>",
        Value::Number(n) if n.is_f64() => "<class 'float'>",
        Value::Number(_) => "<class 'int'>",
        Value::String(_) => "<class 'str'>",
        Value::Array(_) => "<class 'list'>",
        Value::Object(_) => "<class 'dict'>",
    }
}

/// oslo `bool_from_string(strict=True)`.
pub fn parse_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_i64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
            "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Check and coerce one value of `field`. `null` is always accepted (stored as null).
pub fn check_value(field: &Field, v: &Value) -> ApiResult<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let name = field.name;
    match field.kind {
        Kind::Any => Ok(v.clone()),
        Kind::Str { min, max } => {
            let Value::String(s) = v else {
                return Err(invalid(name, v, format!("Wrong type. Expected '<class 'str'>', got '{}'", type_name(v))));
            };
            let len = s.chars().count();
            if len < min {
                return Err(invalid(name, v, format!("Value should have a minimum character requirement of {min}")));
            }
            if len > max {
                return Err(invalid(name, v, format!("Value should have a maximum character requirement of {max}")));
            }
            Ok(v.clone())
        }
        Kind::Int { min, max } => {
            let n = match v {
                Value::Number(n) if n.is_i64() => n.as_i64(),
                Value::Bool(b) => Some(i64::from(*b)),
                Value::String(s) => s.trim().parse::<i64>().ok(),
                _ => None,
            };
            let Some(n) = n else {
                return Err(invalid(name, v, format!("Wrong type. Expected '<class 'int'>', got '{}'", type_name(v))));
            };
            if let Some(min) = min
                && n < min
            {
                return Err(invalid(name, v, format!("Value should be greater or equal to {min}")));
            }
            if let Some(max) = max
                && n > max
            {
                return Err(invalid(name, v, format!("Value should be lower or equal to {max}")));
            }
            Ok(Value::from(n))
        }
        Kind::Bool => parse_bool(v).map(Value::Bool).ok_or_else(|| {
            invalid(
                name,
                v,
                format!(
                    "Unrecognized value '{}', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'",
                    py_str(v)
                ),
            )
        }),
        Kind::Uuid => match v {
            Value::String(s) if magnum_core::ids::is_uuid_like(s) => Ok(v.clone()),
            _ => Err(ApiError::BadRequest(format!("Expected a uuid but received {}.", py_str(v)))),
        },
        Kind::Enum(values) => match v {
            Value::String(s) if values.contains(&s.as_str()) => Ok(v.clone()),
            _ => Err(invalid(name, v, format!("Value should be one of: {}", values.join(", ")))),
        },
        Kind::StrDict => {
            let Value::Object(m) = v else {
                return Err(invalid(name, v, format!("Wrong type. Expected '<class 'dict'>', got '{}'", type_name(v))));
            };
            let mut out = Map::with_capacity(m.len());
            for (k, val) in m {
                match val {
                    Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                        out.insert(k.clone(), Value::String(py_str(val)));
                    }
                    _ => {
                        return Err(invalid(name, v, format!("Wrong type. Expected '<class 'str'>', got '{}'", type_name(val))));
                    }
                }
            }
            Ok(Value::Object(out))
        }
        Kind::StrList => match v {
            Value::Array(items) if items.iter().all(Value::is_string) => Ok(v.clone()),
            _ => Err(invalid(name, v, format!("Wrong type. Expected '<class 'list'>', got '{}'", type_name(v)))),
        },
    }
}

/// Parse a request object against `fields`: unknown attributes, read-only attributes,
/// missing mandatory ones and bad values are 400s in WSME's words. `arg` is the body
/// parameter's name (`cluster_template`, `quota`, ...). Returns the coerced values, in the
/// body's key order, for the keys present.
pub fn parse_object(
    arg: &str,
    body: Option<&Value>,
    fields: &[Field],
) -> ApiResult<Map<String, Value>> {
    let Some(body) = body else {
        return Err(ApiError::BadRequest(format!("Missing argument: \"{arg}\"")));
    };
    let Value::Object(obj) = body else {
        return Err(invalid(
            arg,
            body,
            format!(
                "Wrong type. Expected '<class 'dict'>', got '{}'",
                type_name(body)
            ),
        ));
    };
    let unknown: Vec<&str> = obj
        .keys()
        .filter(|k| !fields.iter().any(|f| f.name == k.as_str()))
        .map(String::as_str)
        .collect();
    match unknown.len() {
        0 => {}
        1 => {
            return Err(ApiError::BadRequest(format!(
                "Unknown attribute for argument {arg}: {}",
                unknown[0]
            )));
        }
        _ => {
            return Err(ApiError::BadRequest(format!(
                "Unknown attributes for argument {arg}: {}",
                unknown.join(", ")
            )));
        }
    }
    let mut out = Map::with_capacity(obj.len());
    for f in fields {
        match obj.get(f.name) {
            Some(v) if f.read_only => {
                return Err(invalid(f.name, v, "Cannot set read only field."));
            }
            Some(v) => {
                out.insert(f.name.to_owned(), check_value(f, v)?);
            }
            None if f.mandatory => {
                return Err(invalid(f.name, &Value::Null, "Mandatory field missing."));
            }
            None => {}
        }
    }
    Ok(out)
}

/// Re-validate a whole patched document (WSME rebuilds the input type from it).
pub fn revalidate(doc: &Map<String, Value>, fields: &[Field]) -> ApiResult<()> {
    for f in fields.iter().filter(|f| !f.read_only) {
        if let Some(v) = doc.get(f.name) {
            check_value(f, v)?;
        } else if f.mandatory {
            return Err(invalid(f.name, &Value::Null, "Mandatory field missing."));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    const FIELDS: &[Field] = &[
        mandatory("image_id", STR255),
        field(
            "docker_volume_size",
            Kind::Int {
                min: Some(1),
                max: None,
            },
        ),
        field("public", Kind::Bool),
        field("labels", Kind::StrDict),
        read_only("project_id"),
    ];

    #[test]
    fn wsme_rules_and_texts() {
        let e = parse_object(
            "cluster_template",
            Some(&json!({"image_id": "i", "bogus": 1})),
            FIELDS,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Unknown attribute for argument cluster_template: bogus"
        );
        let e = parse_object("cluster_template", Some(&json!({})), FIELDS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid input for field/attribute image_id. Value: 'None'. Mandatory field missing."
        );
        let e = parse_object(
            "cluster_template",
            Some(&json!({"image_id": "i", "project_id": "p"})),
            FIELDS,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid input for field/attribute project_id. Value: 'p'. Cannot set read only field."
        );
        let e = parse_object(
            "cluster_template",
            Some(&json!({"image_id": "i", "docker_volume_size": 0})),
            FIELDS,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid input for field/attribute docker_volume_size. Value: '0'. Value should be greater or equal to 1"
        );
        let e = parse_object(
            "cluster_template",
            Some(&json!({"image_id": "x".repeat(256)})),
            FIELDS,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("Value should have a maximum character requirement of 255")
        );
        let e = parse_object("cluster_template", None, FIELDS).unwrap_err();
        assert_eq!(e.to_string(), "Missing argument: \"cluster_template\"");
        let ok = parse_object(
            "cluster_template",
            Some(&json!({"image_id": "i", "docker_volume_size": "3", "public": "yes", "labels": {"a": 1, "b": true, "c": 1.5}})),
            FIELDS,
        )
        .unwrap();
        assert_eq!(ok["docker_volume_size"], json!(3));
        assert_eq!(ok["public"], json!(true));
        assert_eq!(ok["labels"], json!({"a": "1", "b": "True", "c": "1.5"}));
        assert!(
            parse_object(
                "x",
                Some(&json!({"image_id": "i", "public": "maybe"})),
                FIELDS
            )
            .is_err()
        );
    }

    #[test]
    fn python_repr() {
        assert_eq!(
            py_repr(&json!({"a": "b", "n": [1, null, true]})),
            "{'a': 'b', 'n': [1, None, True]}"
        );
        assert_eq!(py_repr(&json!("it's")), "\"it's\"");
        assert_eq!(py_str(&json!(2.0)), "2.0");
    }
}
