//! Upstream's versioned objects as oslo.versionedobjects puts them on the wire
//! (spec/rpc-wire.md §11): `{"magnum_object.name", ".namespace", ".version", ".data",
//! [".changes"]}` with the field encodings of §11.3.
//!
//! An [`Object`] holds its set fields already in primitive form, coerced by the same rules a
//! Python peer applies when it sets an attribute (nullable fields, defaults, enums, strings),
//! so what we accept and emit is what upstream accepts and emits. Mapping objects onto database
//! rows is the upstream bridge's business (`magnum_service::compat`), not the transport's.

mod classes;

use std::collections::BTreeSet;
use std::fmt;

use chrono::{DateTime, FixedOffset, NaiveDateTime, Utc};
use serde_json::{Map, Value};

pub use classes::{
    CERTIFICATE, CLUSTER, CLUSTER_STATUS, CLUSTER_TEMPLATE, FEDERATION, MAGNUM_SERVICE, NODEGROUP,
    QUOTA, STATS, X509KEYPAIR, class,
};

/// Every primitive's namespace; anything else is not a Magnum object.
pub const NAMESPACE: &str = "magnum";
pub const KEY_NAME: &str = "magnum_object.name";
pub const KEY_NAMESPACE: &str = "magnum_object.namespace";
pub const KEY_VERSION: &str = "magnum_object.version";
pub const KEY_DATA: &str = "magnum_object.data";
pub const KEY_CHANGES: &str = "magnum_object.changes";

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// oslo's UnsupportedObjectError: unknown class or foreign namespace.
    #[error("Unsupported object type {0}")]
    Unsupported(String),
    /// oslo's IncompatibleObjectVersion: another major, or a newer minor than ours.
    #[error("Version {sent} of {name} is not supported, supported version is {ours}")]
    IncompatibleVersion {
        name: &'static str,
        sent: String,
        ours: Version,
    },
    #[error("Field `{field}' of {class}: {reason}")]
    Field {
        class: &'static str,
        field: String,
        reason: String,
    },
    #[error("Malformed object primitive: {0}")]
    Malformed(String),
}

/// An object that cannot be read or built is a malformed request or reply.
impl From<ObjectError> for crate::RpcError {
    fn from(e: ObjectError) -> Self {
        crate::RpcError::Malformed(e.to_string())
    }
}

impl ObjectError {
    fn field(class: &Class, field: &str, reason: impl Into<String>) -> Self {
        Self::Field {
            class: class.name,
            field: field.to_owned(),
            reason: reason.into(),
        }
    }
}

/// `major.minor` of a class. A third component, which oslo tolerates, is ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl Version {
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = match parts.next() {
            Some(m) => m.parse().ok()?,
            None => 0,
        };
        if let Some(patch) = parts.next() {
            patch.parse::<u32>().ok()?;
        }
        if parts.next().is_some() {
            return None;
        }
        Some(Self { major, minor })
    }

    /// Whether a receiver at `self` can hydrate an object sent at `sent` (same major, our
    /// minor not older).
    pub fn accepts(self, sent: Version) -> bool {
        self.major == sent.major && self.minor >= sent.minor
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// oslo field types Magnum's objects use.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Int,
    Str,
    /// UUIDField: a string (Python only warns about non-UUID text).
    Uuid,
    Bool,
    DateTime,
    DictOfStrings,
    ListOfStrings,
    /// Magnum's ListOfDictsField: dict values are untyped.
    ListOfDicts,
    /// An enum field: the string must be one of these.
    Enum(&'static [&'static str]),
    /// A nested object of this class.
    Object(&'static str),
}

impl Kind {
    /// Stored as JSON text in a TEXT column.
    pub fn is_json_column(self) -> bool {
        matches!(
            self,
            Kind::DictOfStrings | Kind::ListOfStrings | Kind::ListOfDicts
        )
    }
}

/// A field's default, what a non-nullable field takes when set to None.
#[derive(Clone, Copy, Debug)]
pub enum FieldDefault {
    Bool(bool),
    Int(i64),
}

#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
    pub default: Option<FieldDefault>,
}

/// One upstream object class: its name, the version we speak and its fields in Python's
/// declaration order (which is also the order of `data` in our primitives).
#[derive(Debug)]
pub struct Class {
    pub name: &'static str,
    pub version: Version,
    pub fields: &'static [Field],
}

impl Class {
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Classes are singletons; their name identifies them.
impl PartialEq for Class {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// One versioned object: the fields that are set (as field primitives) and the ones changed
/// since it was loaded or created.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    class: &'static Class,
    version: Version,
    data: Map<String, Value>,
    changes: BTreeSet<&'static str>,
}

impl Object {
    /// A fresh instance at our version with no field set.
    pub fn new(class: &'static Class) -> Self {
        Self {
            class,
            version: class.version,
            data: Map::new(),
            changes: BTreeSet::new(),
        }
    }

    pub fn class(&self) -> &'static Class {
        self.class
    }

    pub fn name(&self) -> &'static str {
        self.class.name
    }

    /// The version the object came in at (ours for objects we made).
    pub fn version(&self) -> Version {
        self.version
    }

    fn def(&self, name: &str) -> Result<&'static Field, ObjectError> {
        self.class
            .field(name)
            .ok_or_else(|| ObjectError::field(self.class, name, "no such field"))
    }

    /// Set a field as Python's attribute setter does (coerced) and mark it changed.
    pub fn set(&mut self, name: &str, value: Value) -> Result<(), ObjectError> {
        let f = self.def(name)?;
        let v = coerce(self.class, f, value)?;
        self.data.insert(f.name.to_owned(), v);
        self.changes.insert(f.name);
        Ok(())
    }

    /// Set a field without marking it changed, as loading from the database does.
    pub fn load(&mut self, name: &str, value: Value) -> Result<(), ObjectError> {
        let f = self.def(name)?;
        let v = coerce(self.class, f, value)?;
        self.data.insert(f.name.to_owned(), v);
        Ok(())
    }

    pub fn is_set(&self, name: &str) -> bool {
        self.data.contains_key(name)
    }

    /// A set field's primitive (None when unset; `Some(Null)` when set to None).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.data.get(name)
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.data.get(name).and_then(Value::as_str)
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        self.data.get(name).and_then(Value::as_i64)
    }

    /// The set fields, in declaration order.
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, &Value)> + '_ {
        self.class
            .fields
            .iter()
            .filter_map(|f| self.data.get(f.name).map(|v| (f.name, v)))
    }

    /// Changed fields, in declaration order.
    pub fn changes(&self) -> Vec<&'static str> {
        self.class
            .fields
            .iter()
            .map(|f| f.name)
            .filter(|n| self.changes.contains(n))
            .collect()
    }

    pub fn is_changed(&self, name: &str) -> bool {
        self.changes.contains(name)
    }

    pub fn reset_changes(&mut self) {
        self.changes.clear();
    }

    /// The primitive at the object's version.
    pub fn to_primitive(&self) -> Value {
        self.to_primitive_at(self.version)
    }

    /// The primitive labelled `version`. Magnum defines no down-conversions, so an older
    /// version is only a relabelling (what upstream's backport does too).
    pub fn to_primitive_at(&self, version: Version) -> Value {
        let mut data = Map::new();
        for (name, v) in self.fields() {
            data.insert(name.to_owned(), v.clone());
        }
        let mut m = Map::new();
        m.insert(KEY_NAME.into(), Value::String(self.class.name.to_owned()));
        m.insert(KEY_NAMESPACE.into(), Value::String(NAMESPACE.to_owned()));
        m.insert(KEY_VERSION.into(), Value::String(version.to_string()));
        m.insert(KEY_DATA.into(), Value::Object(data));
        let changes = self.changes();
        if !changes.is_empty() {
            m.insert(
                KEY_CHANGES.into(),
                Value::Array(
                    changes
                        .into_iter()
                        .map(|c| Value::String(c.to_owned()))
                        .collect(),
                ),
            );
        }
        Value::Object(m)
    }

    /// Hydrate a primitive as oslo's `obj_from_primitive` does: known namespace and class,
    /// compatible version, every known field coerced (unknown ones ignored), changes kept for
    /// known fields only.
    pub fn from_primitive(v: &Value) -> Result<Self, ObjectError> {
        let m = v
            .as_object()
            .ok_or_else(|| ObjectError::Malformed(format!("not an object: {v}")))?;
        let text = |k: &str| m.get(k).and_then(Value::as_str);
        let name =
            text(KEY_NAME).ok_or_else(|| ObjectError::Malformed(format!("{KEY_NAME} missing")))?;
        let ns = text(KEY_NAMESPACE).unwrap_or_default();
        if ns != NAMESPACE {
            return Err(ObjectError::Unsupported(format!("{ns}.{name}")));
        }
        let class = class(name).ok_or_else(|| ObjectError::Unsupported(name.to_owned()))?;
        let sent = text(KEY_VERSION)
            .ok_or_else(|| ObjectError::Malformed(format!("{KEY_VERSION} missing")))?;
        let version = Version::parse(sent)
            .ok_or_else(|| ObjectError::Malformed(format!("bad version {sent:?}")))?;
        if !class.version.accepts(version) {
            return Err(ObjectError::IncompatibleVersion {
                name: class.name,
                sent: sent.to_owned(),
                ours: class.version,
            });
        }
        let data = m
            .get(KEY_DATA)
            .and_then(Value::as_object)
            .ok_or_else(|| ObjectError::Malformed(format!("{KEY_DATA} missing")))?;
        let mut obj = Object {
            class,
            version,
            data: Map::new(),
            changes: BTreeSet::new(),
        };
        for f in class.fields {
            if let Some(v) = data.get(f.name) {
                obj.data
                    .insert(f.name.to_owned(), coerce(class, f, v.clone())?);
            }
        }
        if let Some(changes) = m.get(KEY_CHANGES).and_then(Value::as_array) {
            for c in changes.iter().filter_map(Value::as_str) {
                if let Some(f) = class.field(c) {
                    obj.changes.insert(f.name);
                }
            }
        }
        Ok(obj)
    }

    /// Hydrate and require a class.
    pub fn from_primitive_of(class: &'static Class, v: &Value) -> Result<Self, ObjectError> {
        let obj = Self::from_primitive(v)?;
        if obj.class != class {
            return Err(ObjectError::Malformed(format!(
                "expected a {} object, got {}",
                class.name, obj.class.name
            )));
        }
        Ok(obj)
    }
}

/// Whether a JSON value is an object primitive (any dict carrying the name key is one).
pub fn is_primitive(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.contains_key(KEY_NAME))
}

/// Python's `str()` of a JSON scalar, as StringField coerces int, float and bool.
fn py_str(v: &Value) -> Option<String> {
    match v {
        Value::Null | Value::Array(_) | Value::Object(_) => None,
        scalar => Some(magnum_core::py::py_str(scalar)),
    }
}

/// Python's `bool()` of a JSON value.
fn py_bool(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// oslo's coercion of a value set on field `f` (None handling first, then the type's).
fn coerce(class: &'static Class, f: &Field, v: Value) -> Result<Value, ObjectError> {
    let bad = |reason: String| ObjectError::field(class, f.name, reason);
    if v.is_null() {
        if f.nullable {
            return Ok(Value::Null);
        }
        return match f.default {
            Some(FieldDefault::Bool(b)) => Ok(Value::Bool(b)),
            Some(FieldDefault::Int(i)) => Ok(Value::from(i)),
            None => Err(bad("Field value cannot be None".into())),
        };
    }
    match f.kind {
        Kind::Int => match &v {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|x| x.trunc() as i64))
                .map(Value::from)
                .ok_or_else(|| bad(format!("not an integer: {v}"))),
            Value::Bool(b) => Ok(Value::from(i64::from(*b))),
            Value::String(s) => s
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| bad(format!("invalid literal for int(): {s:?}"))),
            _ => Err(bad(format!("not an integer: {v}"))),
        },
        Kind::Str | Kind::Uuid => py_str(&v)
            .map(Value::String)
            .ok_or_else(|| bad(format!("A string is required, got {v}"))),
        Kind::Bool => Ok(Value::Bool(py_bool(&v))),
        Kind::DateTime => match &v {
            Value::String(s) => parse_datetime(s)
                .map(|dt| Value::String(format_datetime(dt)))
                .ok_or_else(|| bad(format!("not a datetime: {s:?}"))),
            _ => Err(bad(format!("A datetime.datetime is required, got {v}"))),
        },
        Kind::DictOfStrings => match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, e) in m {
                    let s = py_str(&e)
                        .ok_or_else(|| bad(format!("value of {k:?} is not a string: {e}")))?;
                    out.insert(k, Value::String(s));
                }
                Ok(Value::Object(out))
            }
            other => Err(bad(format!("A dict is required, got {other}"))),
        },
        Kind::ListOfStrings => match v {
            Value::Array(a) => a
                .iter()
                .map(|e| {
                    py_str(e)
                        .map(Value::String)
                        .ok_or_else(|| bad(format!("element is not a string: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            other => Err(bad(format!("A list is required, got {other}"))),
        },
        Kind::ListOfDicts => match v {
            Value::Array(a) if a.iter().all(Value::is_object) => Ok(Value::Array(a)),
            other => Err(bad(format!("A list of dicts is required, got {other}"))),
        },
        Kind::Enum(allowed) => {
            let s = py_str(&v).ok_or_else(|| bad(format!("A string is required, got {v}")))?;
            if allowed.contains(&s.as_str()) {
                Ok(Value::String(s))
            } else {
                Err(bad(format!(
                    "Field value {s} is invalid, valid values are {allowed:?}"
                )))
            }
        }
        Kind::Object(name) => {
            let obj = Object::from_primitive(&v)?;
            if obj.class.name != name {
                return Err(bad(format!("An object of type {name} is required")));
            }
            Ok(obj.to_primitive())
        }
    }
}

/// An ISO-8601 time as oslo parses it: with `Z` or an offset, or naive (then UTC); any
/// fraction of a second is kept until formatting drops it.
pub fn parse_datetime(s: &str) -> Option<DateTime<FixedOffset>> {
    let s = s.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Some(dt);
    }
    let t = s.replacen(' ', "T", 1);
    if let Ok(dt) = DateTime::parse_from_rfc3339(&t) {
        return Some(dt);
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(n) = NaiveDateTime::parse_from_str(&t, fmt) {
            return Some(n.and_utc().fixed_offset());
        }
    }
    // Offsets without a colon (`+0000`), as Python's isoformat variants write them.
    DateTime::parse_from_str(&t, "%Y-%m-%dT%H:%M:%S%.f%z").ok()
}

/// DateTimeField's primitive: seconds precision, `Z` for UTC, any other offset appended
/// (`+02:00`), as oslo's `isotime` writes it.
pub fn format_datetime(dt: DateTime<FixedOffset>) -> String {
    let base = dt.format("%Y-%m-%dT%H:%M:%S");
    if dt.offset().local_minus_utc() == 0 {
        format!("{base}Z")
    } else {
        format!("{base}{}", dt.format("%:z"))
    }
}

/// A database time (naive UTC) as a DateTimeField primitive.
pub fn format_naive(dt: NaiveDateTime) -> String {
    format_datetime(dt.and_utc().fixed_offset())
}

/// A DateTimeField primitive as a database time (naive UTC, whole seconds).
pub fn naive_utc(s: &str) -> Option<NaiveDateTime> {
    use chrono::SubsecRound;
    parse_datetime(s).map(|dt| dt.with_timezone(&Utc).naive_utc().trunc_subsecs(0))
}
