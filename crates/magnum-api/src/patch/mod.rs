//! Magnum's JSON-patch subset (PATCH on cluster templates, clusters, nodegroups, federations).
//!
//! Upstream splits the work between WSME, which types the body as a list of `JsonPatchType`
//! (shape, path pattern, op enum, `str|int` value, internal / non-removable paths), and
//! `magnum.api.utils.apply_jsonpatch`, which adds two checks of its own, parses Python-literal
//! strings for a few paths, and hands the rest to the `jsonpatch` library. [`parse_patch`] is
//! the WSME half, [`apply_patch`] the other; every error text is the one upstream produces.
//!
//! The document to patch is the *stored object's field dict* (upstream's `obj.as_dict()`), not
//! the API rendering: it decides which root attributes `add` may touch and it is printed in
//! some jsonpointer errors.

mod literal;
mod pointer;

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

pub use literal::python_literal;
pub use magnum_core::py::{py_repr, py_str};

use magnum_core::py;

/// A JSON-patch operation name (`move`, `copy` and `test` are rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Replace,
    Remove,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Replace => "replace",
            Op::Remove => "remove",
        }
    }
}

/// One validated operation. `value` is `None` when the request had none (or `null`); `remove`
/// keeps a value it was sent because upstream does (the cluster controller reads it).
#[derive(Debug, Clone, PartialEq)]
pub struct PatchOp {
    pub op: Op,
    pub path: String,
    pub value: Option<Value>,
}

/// Per-resource path rules.
#[derive(Debug, Clone, Copy)]
pub struct PatchRules<'a> {
    /// Paths no operation may target (exact match: `/labels/x` is not caught by `/labels`).
    pub internal: &'a [&'a str],
    /// Paths `remove` may not target.
    pub non_removable: &'a [&'a str],
    /// Paths whose `replace` string value is parsed as a Python literal.
    pub literal_paths: &'a [&'a str],
    /// Value a removed root attribute takes (the API type's declared default); other removed
    /// attributes become `null`.
    pub defaults: &'a [(&'a str, Value)],
}

/// WSME's `JsonPatchType.internal_attrs()`.
pub const BASE_INTERNAL: &[&str] = &[
    "/created_at",
    "/id",
    "/links",
    "/updated_at",
    "/uuid",
    "/project_id",
    "/user_id",
];

/// `apply_jsonpatch` parses these for every resource, whatever it is.
pub const LITERAL_PATHS: &[&str] = &[
    "/labels",
    "/health_status_reason",
    "/node_labels",
    "/node_taints",
];

/// The mandatory `image_id` plus `ClusterTemplatePatchType._extra_non_removable_attrs`.
pub const CLUSTER_TEMPLATE_NON_REMOVABLE: &[&str] = &[
    "/image_id",
    "/network_driver",
    "/external_network_id",
    "/tls_disabled",
    "/public",
    "/server_type",
    "/coe",
    "/registry_enabled",
    "/cluster_distro",
    "/hidden",
];

pub const CLUSTER_INTERNAL: &[&str] = &[
    "/created_at",
    "/id",
    "/links",
    "/updated_at",
    "/uuid",
    "/project_id",
    "/user_id",
    "/api_address",
    "/node_addresses",
    "/master_addresses",
    "/stack_id",
    "/cluster_id",
    "/ca_cert_ref",
    "/magnum_cert_ref",
    "/etcd_ca_cert_ref",
    "/front_proxy_ca_cert_ref",
];

/// `cluster_template_id` is the Cluster type's only mandatory attribute.
pub const CLUSTER_NON_REMOVABLE: &[&str] = &["/cluster_template_id"];

pub const NODEGROUP_INTERNAL: &[&str] = &[
    "/created_at",
    "/id",
    "/links",
    "/updated_at",
    "/uuid",
    "/project_id",
    "/user_id",
    "/name",
    "/cluster_id",
    "/docker_volume_size",
    "/labels",
    "/flavor_id",
    "/image_id",
    "/node_addresses",
    "/node_count",
    "/role",
    "/is_default",
    "/stack_id",
    "/status",
    "/status_reason",
    "/version",
];

// Declared `wsattr` defaults of each API type (the ones a removal can reach).
static CLUSTER_TEMPLATE_DEFAULTS: LazyLock<[(&str, Value); 2]> = LazyLock::new(|| {
    [
        ("/master_lb_enabled", json!(false)),
        ("/floating_ip_enabled", json!(true)),
    ]
});
static CLUSTER_DEFAULTS: LazyLock<[(&str, Value); 4]> = LazyLock::new(|| {
    [
        ("/node_count", json!(1)),
        ("/master_count", json!(1)),
        ("/create_timeout", json!(60)),
        ("/merge_labels", json!(false)),
    ]
});
static NODEGROUP_DEFAULTS: LazyLock<[(&str, Value); 2]> = LazyLock::new(|| {
    [
        ("/min_node_count", json!(0)),
        ("/merge_labels", json!(false)),
    ]
});

impl PatchRules<'static> {
    pub fn cluster_template() -> Self {
        PatchRules {
            internal: BASE_INTERNAL,
            non_removable: CLUSTER_TEMPLATE_NON_REMOVABLE,
            literal_paths: LITERAL_PATHS,
            defaults: &*CLUSTER_TEMPLATE_DEFAULTS,
        }
    }

    pub fn cluster() -> Self {
        PatchRules {
            internal: CLUSTER_INTERNAL,
            non_removable: CLUSTER_NON_REMOVABLE,
            literal_paths: LITERAL_PATHS,
            defaults: &*CLUSTER_DEFAULTS,
        }
    }

    pub fn nodegroup() -> Self {
        PatchRules {
            internal: NODEGROUP_INTERNAL,
            non_removable: &[],
            literal_paths: LITERAL_PATHS,
            defaults: &*NODEGROUP_DEFAULTS,
        }
    }

    pub fn federation() -> Self {
        PatchRules {
            internal: BASE_INTERNAL,
            non_removable: &[],
            literal_paths: LITERAL_PATHS,
            defaults: &[],
        }
    }
}

/// A rejected patch. `Display` is the exact upstream `detail`; see [`PatchError::status`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// No request body where the handler's `patch` argument is mandatory.
    #[error("Missing argument: \"patch\"")]
    MissingArgument,
    /// WSME type/constraint failure; `value` is Python's `str()` of the offending value.
    #[error("Invalid input for field/attribute {field}. Value: '{value}'. {reason}")]
    InvalidInput {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("{}", unknown_attributes(.0))]
    UnknownAttributes(Vec<String>),
    #[error("'{0}' is an internal attribute and can not be updated")]
    InternalAttribute(String),
    #[error("'{0}' is a mandatory attribute and can not be removed")]
    MandatoryAttribute(String),
    #[error("'add' and 'replace' operations needs value")]
    NeedsValue,
    #[error("Adding a new attribute {0} to the root of the resource is not allowed.")]
    AddToRoot(String),
    #[error("The attribute {0} has existed, please use 'replace' operation instead.")]
    AttributeExists(String),
    /// `magnum.common.exception.PatchError`; `patch` is the Python repr of the op list.
    #[error("Couldn't apply patch '{patch}'. Reason: {reason}")]
    Apply { patch: String, reason: String },
    /// Inputs upstream crashes on (an uncaught Python exception there: HTTP 500 with this
    /// text). The request is at fault, so here it is a 400 with the same text.
    #[error("{0}")]
    Internal(String),
}

impl PatchError {
    /// HTTP status: 400 for every patch error. Upstream answers 500 for [`Self::Internal`];
    /// magnum-rs answers no 5xx for a malformed request (found by schemathesis, see
    /// test-support/fuzz).
    pub fn status(&self) -> u16 {
        400
    }
}

fn unknown_attributes(names: &[String]) -> String {
    // WSME builds this from a set difference; request order is the stable choice.
    let noun = if names.len() > 1 {
        "attributes"
    } else {
        "attribute"
    };
    format!("Unknown {noun} for argument patch: {}", names.join(", "))
}

/// Python `re.search(r'^(/[\w-]+)+$', path)`: note `$` also matches before one final `\n`.
fn path_matches(path: &str) -> bool {
    let path = path.strip_suffix('\n').unwrap_or(path);
    match path.strip_prefix('/') {
        Some(rest) => rest.split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .chars()
                    .all(|c| c == '_' || c == '-' || c.is_alphanumeric())
        }),
        None => false,
    }
}

const PATH_PATTERN: &str = r"^(/[\w-]+)+$";

/// Python repr of one op as `JsonPatchType.validate` returns it: keys `path`, `op`, then
/// `value` when not None.
fn render_entry(path: Option<&str>, op: Option<&str>, value: Option<&Value>) -> String {
    let s = |v: Option<&str>| {
        v.map_or_else(
            || "None".to_string(),
            |s| py_repr(&Value::String(s.to_string())),
        )
    };
    let mut out = format!("{{'path': {}, 'op': {}", s(path), s(op));
    if let Some(v) = value {
        out.push_str(", 'value': ");
        out.push_str(&py_repr(v));
    }
    out.push('}');
    out
}

fn render_ops(ops: &[PatchOp]) -> String {
    let items: Vec<String> = ops
        .iter()
        .map(|o| render_entry(Some(&o.path), Some(o.op.as_str()), o.value.as_ref()))
        .collect();
    format!("[{}]", items.join(", "))
}

/// Validate a PATCH body like WSME does for `body=[<Resource>PatchType]`.
///
/// `body` is `None` when the request had no body. Elements are checked in order and each
/// element's checks run in WSME's order (unknown keys, `path`, `op`, `value`, then internal /
/// non-removable / needs-value). A `null` body answers with the text of upstream's handlers
/// whose `patch` argument is optional (their 500, a 400 here); for those handlers pass
/// `Some(&Value::Null)` when there is no body. Elements upstream only trips over later
/// (`null` entries, `"op": null`, `"path": null`) are reported here, after all other
/// elements passed validation.
pub fn parse_patch(body: Option<&Value>, rules: &PatchRules) -> Result<Vec<PatchOp>, PatchError> {
    let items = match body {
        None => return Err(PatchError::MissingArgument),
        Some(Value::Null) => {
            return Err(PatchError::Internal(
                "'NoneType' object is not iterable".into(),
            ));
        }
        Some(Value::Array(items)) => items,
        Some(other) => {
            let shown = py_str(other);
            return Err(PatchError::InvalidInput {
                field: "patch",
                value: shown.clone(),
                reason: format!("Value not a valid list: {shown}"),
            });
        }
    };
    let mut ops = Vec::with_capacity(items.len());
    let mut rendered = Vec::with_capacity(items.len());
    let mut crash: Option<&'static str> = None;
    let mut invalid: Option<&'static str> = None;
    for item in items {
        let obj = match item {
            Value::Object(obj) => obj,
            Value::Null => {
                crash.get_or_insert("'NoneType' object is not subscriptable");
                rendered.push("None".to_string());
                continue;
            }
            other => {
                return Err(PatchError::Internal(format!(
                    "'{}' object has no attribute 'keys'",
                    py::type_name(other)
                )));
            }
        };
        let unknown: Vec<String> = obj
            .keys()
            .filter(|k| !matches!(k.as_str(), "path" | "op" | "value"))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(PatchError::UnknownAttributes(unknown));
        }
        let invalid_input =
            |field: &'static str, v: &Value, reason: &str| PatchError::InvalidInput {
                field,
                value: py_str(v),
                reason: reason.to_string(),
            };
        let missing = |field: &'static str| PatchError::InvalidInput {
            field,
            value: "None".into(),
            reason: "Mandatory field missing.".into(),
        };
        let path = match obj.get("path") {
            None => return Err(missing("path")),
            Some(Value::Null) => None,
            Some(Value::String(p)) if path_matches(p) => Some(p.clone()),
            Some(v @ Value::String(_)) => {
                return Err(invalid_input(
                    "path",
                    v,
                    &format!("Value should match the pattern {PATH_PATTERN}"),
                ));
            }
            Some(v) => return Err(invalid_input("path", v, "Value should be string")),
        };
        let op = match obj.get("op") {
            None => return Err(missing("op")),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s == "add" => Some(Op::Add),
            Some(Value::String(s)) if s == "replace" => Some(Op::Replace),
            Some(Value::String(s)) if s == "remove" => Some(Op::Remove),
            Some(v @ Value::Array(_)) => {
                return Err(invalid_input("op", v, "unhashable type: 'list'"));
            }
            Some(v @ Value::Object(_)) => {
                return Err(invalid_input("op", v, "unhashable type: 'dict'"));
            }
            // WSME renders its Enum's value *set*, whose order varies per process; this is the
            // order of upstream's published sample.
            Some(v) => {
                return Err(invalid_input(
                    "op",
                    v,
                    "Value should be one of: remove, add, replace",
                ));
            }
        };
        let value = match obj.get("value") {
            None | Some(Value::Null) => None,
            Some(v @ (Value::String(_) | Value::Bool(_))) => Some(v.clone()),
            Some(v @ Value::Number(n)) if py::is_py_int(n) => Some(v.clone()),
            Some(v) => {
                let reason = format!(
                    "Wrong type. Expected '(<class 'str'>, <class 'int'>)', got '<class '{}'>'",
                    py::type_name(v)
                );
                return Err(invalid_input("value", v, &reason));
            }
        };
        if let Some(p) = &path {
            if rules.internal.contains(&p.as_str()) {
                return Err(PatchError::InternalAttribute(p.clone()));
            }
            if op == Some(Op::Remove) && rules.non_removable.contains(&p.as_str()) {
                return Err(PatchError::MandatoryAttribute(p.clone()));
            }
        }
        if op != Some(Op::Remove) && value.is_none() {
            return Err(PatchError::NeedsValue);
        }
        rendered.push(render_entry(
            path.as_deref(),
            op.map(Op::as_str),
            value.as_ref(),
        ));
        match (op, path) {
            (Some(op), Some(path)) => ops.push(PatchOp { op, path, value }),
            (Some(Op::Add), None) => {
                crash.get_or_insert("'NoneType' object has no attribute 'count'");
            }
            (None, _) => {
                invalid.get_or_insert("Operation's op must be a string");
            }
            (Some(_), None) => {
                invalid.get_or_insert("Invalid 'path'");
            }
        }
    }
    // Elements WSME accepts but upstream trips over later: a Python exception escaping the
    // handler (upstream's 500, a 400 here) beats jsonpatch's own validation, as in upstream's
    // order.
    if let Some(msg) = crash {
        return Err(PatchError::Internal(msg.into()));
    }
    if let Some(reason) = invalid {
        return Err(PatchError::Apply {
            patch: format!("[{}]", rendered.join(", ")),
            reason: reason.into(),
        });
    }
    Ok(ops)
}

/// Apply `ops` in order to `doc` like `apply_jsonpatch` + `jsonpatch.apply_patch`.
///
/// First every op is pre-checked against the unpatched document: `add` on a root attribute
/// needs it to exist and be `null`, and `replace` on a literal path parses a string value as a
/// Python literal — the parsed value is written back into the op, as upstream mutates its
/// patch list (a second application then sees the parsed value). Then the ops run on a copy;
/// `doc` is only updated if all succeed. Removed root attributes come back as their declared
/// default or `null`, and root keys keep their original order.
pub fn apply_patch(
    doc: &mut Map<String, Value>,
    ops: &mut [PatchOp],
    rules: &PatchRules,
) -> Result<(), PatchError> {
    for i in 0..ops.len() {
        let op = &ops[i];
        if op.op == Op::Add && op.path.matches('/').count() == 1 {
            let attr = op.path.trim_start_matches('/');
            match doc.get(attr) {
                None => return Err(PatchError::AddToRoot(op.path.clone())),
                Some(v) if !v.is_null() => {
                    return Err(PatchError::AttributeExists(op.path.clone()));
                }
                Some(_) => {}
            }
        }
        if op.op == Op::Replace && rules.literal_paths.contains(&op.path.as_str()) {
            let parsed = match &op.value {
                // Already structured (a previous application parsed it): kept as is.
                Some(Value::Object(_) | Value::Array(_)) => continue,
                Some(Value::String(text)) => python_literal(text),
                // literal_eval on a non-str raises for the object itself.
                Some(other) => Err(format!("malformed node or string: {}", py_repr(other))),
                // `p['value']` raises KeyError, which the controller also turns into PatchError.
                None => Err("'value'".into()),
            };
            match parsed {
                Ok(v) => ops[i].value = Some(v),
                Err(reason) => {
                    return Err(PatchError::Apply {
                        patch: render_ops(ops),
                        reason,
                    });
                }
            }
        }
    }
    let mut work = Value::Object(doc.clone());
    for op in ops.iter() {
        pointer::apply(&mut work, op.op, &op.path, op.value.as_ref()).map_err(|failure| {
            match failure {
                pointer::Failure::Conflict(reason) => PatchError::Apply {
                    patch: render_ops(ops),
                    reason,
                },
                pointer::Failure::Crash(msg) => PatchError::Internal(msg),
            }
        })?;
    }
    let Value::Object(mut patched) = work else {
        return Err(PatchError::Internal(
            "patched document is not an object".into(),
        ));
    };
    // Upstream rebuilds the API object from the dict: a removed attribute reads as its
    // declared default (or None), and rendering follows the type's attribute order.
    let mut result = Map::with_capacity(doc.len());
    for key in doc.keys() {
        let value = patched.shift_remove(key).unwrap_or_else(|| {
            rules
                .defaults
                .iter()
                .find(|(p, _)| p.strip_prefix('/') == Some(key.as_str()))
                .map_or(Value::Null, |(_, v)| v.clone())
        });
        result.insert(key.clone(), value);
    }
    result.extend(patched);
    *doc = result;
    Ok(())
}

#[cfg(test)]
mod tests;
