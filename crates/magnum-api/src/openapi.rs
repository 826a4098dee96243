//! `/v1/openapi.json`: an OpenAPI 3.1 description of the API, built from the route tables
//! the router dispatches on (`table.rs`: paths, methods, query parameters) and the same field declarations the handlers parse bodies
//! with, so it cannot drift from what the handlers accept.

use serde_json::{Map, Value, json};

use crate::input::{Field, Kind};
use crate::table::{Doc, Route};
use crate::version::{MAX_VERSION, MIN_VERSION};

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

/// Each `{name}` of a route's path as a required string parameter: OpenAPI needs every
/// templated segment declared. Any text is accepted there (a name, a uuid, a project id).
fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// A field's type as a response shows it: the input kind's JSON types, no bounds.
fn view_kind(kind: Kind) -> Value {
    match kind {
        Kind::Str { .. } | Kind::Uuid | Kind::Enum(_) => json!({"type": ["string", "null"]}),
        Kind::Int { .. } => json!({"type": ["integer", "null"]}),
        Kind::Bool => json!({"type": ["boolean", "null"]}),
        Kind::StrDict => json!({"type": ["object", "null"]}),
        Kind::StrList => json!({"type": ["array", "null"], "items": {"type": "string"}}),
        Kind::Any => json!({}),
    }
}

fn view_schema(fields: &[Field]) -> Value {
    let props: Map<String, Value> = fields
        .iter()
        .map(|f| (f.name.to_owned(), view_kind(f.kind)))
        .collect();
    json!({"type": "object", "properties": props})
}

/// The collection a route belongs to: its path without a trailing ident, `detail` or action.
fn collection_of(path: &str) -> &str {
    let path = path.split("/actions/").next().unwrap_or(path);
    let path = path.strip_suffix("/detail").unwrap_or(path);
    match path.rsplit_once('/') {
        Some((head, last)) if last.starts_with('{') => {
            // `/v1/quotas/{project_id}/{resource}`: both segments are the ident.
            match head.rsplit_once('/') {
                Some((h, l)) if l.starts_with('{') && h.ends_with("/quotas") => h,
                _ => head,
            }
        }
        _ => path,
    }
}

/// What a route's success answer holds, when it has a body.
fn response_schema(r: &Route, d: &Doc, views: &[(&str, String)]) -> Option<Value> {
    if d.status == 204 {
        return None;
    }
    if r.path == "/v1/stats" {
        return Some(json!({"$ref": "#/components/schemas/Stats"}));
    }
    let collection = collection_of(r.path);
    let view = views
        .iter()
        .find(|(p, _)| *p == collection)
        .map(|(_, v)| json!({"$ref": format!("#/components/schemas/{v}")}));
    // Cluster, federation, credential and CA-rotation changes are asynchronous: the uuid only.
    let uuid_only = [
        "/v1/clusters",
        "/v1/federations",
        "/v1/credentials",
        "/v1/certificates",
    ];
    if d.status == 202 && uuid_only.contains(&collection) {
        return Some(json!({"$ref": "#/components/schemas/Accepted"}));
    }
    let is_list = r.method == "GET"
        && !r.path.ends_with('}')
        && collection == r.path.trim_end_matches("/detail");
    if is_list {
        let key = collection.rsplit('/').next().unwrap_or(collection);
        let items = view.unwrap_or_else(|| json!({"type": "object"}));
        return Some(json!({"type": "object", "required": [key], "properties": {
            key: {"type": "array", "items": items}, "next": {"type": "string"}}}));
    }
    Some(view.unwrap_or_else(|| json!({"type": "object"})))
}

/// The schema of a query parameter, by name (the tables name which a route takes).
fn query_schema(name: &str) -> Value {
    match name {
        "limit" => json!({"type": "integer", "minimum": 1}),
        "sort_dir" => json!({"type": "string", "enum": ["asc", "desc"]}),
        "type" => json!({"type": "string", "enum": ["cluster"]}),
        "all_tenants" | "rollback" => json!({"type": "boolean"}),
        _ => json!({"type": "string"}),
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        "JsonPatch".into(),
        json!({"type": "array", "items": {"type": "object", "additionalProperties": false, "required": ["op", "path"],
            "properties": {"op": {"enum": ["add", "replace", "remove"]}, "path": {"type": "string", "pattern": "^(/[\\w-]+)+$"},
                "value": {"description": "any JSON value: a string, number, boolean, object (labels) or list"}}}}),
    );
    // Every error but the 401 is Magnum's envelope: a list of errors, each with a code and a
    // title (routing errors have an empty code; the microversion 406 adds max/min_version).
    schemas.insert(
        "Errors".into(),
        json!({"type": "object", "required": ["errors"], "properties": {"errors": {"type": "array", "minItems": 1,
            "items": {"type": "object", "required": ["code", "title"], "properties": {
            "request_id": {"type": "string"}, "code": {"type": "string"}, "status": {"type": "integer"},
            "title": {"type": "string"}, "detail": {"type": "string"}, "description": {"type": "string"},
            "max_version": {"type": "string"}, "min_version": {"type": "string"}, "links": {"type": "array"}}}}}}),
    );
    // keystonemiddleware's 401 (no token, or one Keystone refuses).
    schemas.insert(
        "Unauthorized".into(),
        json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
            "required": ["code", "title", "message"], "properties": {
            "code": {"const": 401}, "title": {"type": "string"}, "message": {"type": "string"}}}}}),
    );
    schemas.insert(
        "Accepted".into(),
        json!({"type": "object", "required": ["uuid"], "additionalProperties": false,
            "properties": {"uuid": {"type": "string"}}}),
    );
    schemas.insert(
        "Stats".into(),
        json!({"type": "object", "required": ["clusters", "nodes"], "additionalProperties": false,
            "properties": {"clusters": {"type": "integer"}, "nodes": {"type": "integer"}}}),
    );
    // A resource as answered: the fields its create body declares, typed (without the input
    // bounds, which stored rows need not meet), plus whatever else it shows (links, status).
    let mut views: Vec<(&str, String)> = Vec::new();
    let documented = || {
        crate::v1::ROUTES
            .iter()
            .flat_map(|t| t.iter())
            .filter_map(|r| Some((r, r.doc.as_ref()?)))
    };
    {
        for (r, d) in documented() {
            if let (Body::Object(name, fields), "POST") = (&d.body, r.method)
                && !r.path.contains("/actions/")
            {
                let view = format!("{name}View");
                schemas.insert(view.clone(), view_schema(fields));
                views.push((r.path, view));
            }
        }
    }
    let error = json!({"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Errors"}}}});
    let unauthorized = json!({"description": "no token, or an invalid one", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Unauthorized"}}}});
    {
        for (r, d) in documented() {
            let mut parameters = vec![
                json!({"name": "OpenStack-API-Version", "in": "header", "required": false,
                "schema": {"type": "string", "example": "container-infra latest"}}),
            ];
            parameters.extend(path_parameters(r.path));
            parameters.extend(r.query.iter().map(|name| {
                json!({"name": name, "in": "query", "required": false, "schema": query_schema(name)})
            }));
            let mut success = json!({"description": "success"});
            if let Some(schema) = response_schema(r, d, &views) {
                success["content"] = json!({"application/json": {"schema": schema}});
            }
            let mut op = json!({
                "summary": d.summary,
                "x-policy": d.policy,
                "parameters": parameters,
                "responses": {
                    d.status.to_string(): success,
                    "401": unauthorized,
                    "default": error
                }
            });
            match &d.body {
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
