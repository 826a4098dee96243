//! `/v1/openapi.json`: an OpenAPI 3.1 description of the API, built from the same route
//! table the router dispatches on and the same field declarations the handlers parse bodies
//! with, so it cannot drift from what the handlers accept.

use serde_json::{Map, Value, json};

use crate::input::{Field, Kind};
use crate::version::{MAX_VERSION, MIN_VERSION};

/// One route as the router serves it.
pub struct RouteDoc {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    /// The success status.
    pub status: u16,
    /// Request body: a named schema and its fields, or a JSON-patch list.
    pub body: Body,
    /// Policy rule checked (the first one, for routes that check several).
    pub policy: &'static str,
}

pub enum Body {
    None,
    Object(&'static str, &'static [Field]),
    JsonPatch,
}

fn kind_schema(kind: Kind) -> Value {
    match kind {
        Kind::Str { min, max } => {
            json!({"type": ["string", "null"], "minLength": min, "maxLength": max})
        }
        Kind::Int { min, max } => {
            let mut s = json!({"type": ["integer", "null"]});
            if let Some(min) = min {
                s["minimum"] = json!(min);
            }
            if let Some(max) = max {
                s["maximum"] = json!(max);
            }
            s
        }
        Kind::Bool => {
            json!({"type": ["boolean", "string", "null"], "description": "a boolean, or one of 1/0, t/f, true/false, on/off, y/n, yes/no"})
        }
        Kind::Uuid => json!({"type": ["string", "null"], "format": "uuid"}),
        Kind::Enum(values) => json!({"type": ["string", "null"], "enum": values}),
        Kind::StrDict => {
            json!({"type": ["object", "null"], "additionalProperties": {"type": ["string", "integer", "number", "boolean"]}})
        }
        Kind::StrList => json!({"type": ["array", "null"], "items": {"type": "string"}}),
        Kind::Any => json!({}),
    }
}

fn object_schema(fields: &[Field]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for f in fields {
        let mut s = kind_schema(f.kind);
        if f.read_only {
            s["readOnly"] = json!(true);
        }
        if f.mandatory {
            required.push(f.name);
        }
        props.insert(f.name.to_owned(), s);
    }
    json!({"type": "object", "additionalProperties": false, "properties": props, "required": required})
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        "JsonPatch".into(),
        json!({"type": "array", "items": {"type": "object", "additionalProperties": false, "required": ["op", "path"],
            "properties": {"op": {"enum": ["add", "replace", "remove"]}, "path": {"type": "string", "pattern": "^(/[\\w-]+)+$"},
                "value": {"type": ["string", "integer", "boolean"]}}}}),
    );
    schemas.insert(
        "Errors".into(),
        json!({"type": "object", "properties": {"errors": {"type": "array", "items": {"type": "object", "properties": {
            "request_id": {"type": "string"}, "code": {"type": "string"}, "status": {"type": "integer"},
            "title": {"type": "string"}, "detail": {"type": "string"}, "links": {"type": "array"}}}}}}),
    );
    for group in crate::v1::ROUTE_GROUPS {
        for r in *group {
            let mut op = json!({
                "summary": r.summary,
                "x-policy": r.policy,
                "parameters": [{"name": "OpenStack-API-Version", "in": "header", "required": false,
                    "schema": {"type": "string", "example": "container-infra latest"}}],
                "responses": {
                    r.status.to_string(): {"description": "success"},
                    "default": {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Errors"}}}}
                }
            });
            match &r.body {
                Body::None => {}
                Body::Object(name, fields) => {
                    schemas.insert((*name).to_owned(), object_schema(fields));
                    op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}});
                }
                Body::JsonPatch => {
                    op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JsonPatch"}}}});
                }
            }
            let entry = paths.entry(r.path.to_owned()).or_insert_with(|| json!({}));
            entry[r.method.to_ascii_lowercase()] = op;
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "OpenStack Magnum API (magnum-rs)",
            "version": format!("{MIN_VERSION} - {MAX_VERSION}"),
            "description": "Container infrastructure management, wire-compatible with upstream Magnum v1."
        },
        "components": {"schemas": schemas, "securitySchemes": {"keystone": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}}},
        "security": [{"keystone": []}],
        "paths": paths,
    })
}
