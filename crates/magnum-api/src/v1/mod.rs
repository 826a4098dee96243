//! API v1: version documents and what every resource module shares (links, timestamps,
//! collection parameters, `next` links, ident lookups, policy targets).

pub mod certificates;
pub mod clusters;
pub mod clustertemplates;
pub mod credentials;
pub mod federations;
pub(crate) mod json_out;
pub mod lookup;
pub mod mservices;
pub mod nodegroups;
pub mod quotas;
pub mod stats;

/// Every resource's route table: what dispatch serves and the OpenAPI document describes.
pub const ROUTES: &[&[crate::table::Route]] = &[
    clustertemplates::ROUTES,
    clusters::ROUTES,
    nodegroups::ROUTES,
    certificates::ROUTES,
    credentials::ROUTES,
    quotas::ROUTES,
    stats::ROUTES,
    mservices::ROUTES,
    federations::ROUTES,
];

use axum::body::Body;
use axum::response::Response;
use chrono::NaiveDateTime;
use http::{HeaderValue, StatusCode};
use magnum_conf::policy::Target;
use magnum_core::ids::is_uuid_like;
use magnum_db::{Page, SortDir};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, json_response};
use crate::request::Req;
use crate::version::{MAX_VERSION, MIN_VERSION};

pub fn root_document(base: &str) -> Value {
    json!({
        "name": "OpenStack Magnum API",
        "description": "Magnum is an OpenStack project which aims to provide container cluster management.",
        "versions": [{
            "id": "v1",
            "links": [{"href": format!("{base}/v1/"), "rel": "self"}],
            "status": "CURRENT",
            "max_version": MAX_VERSION.to_string(),
            "min_version": MIN_VERSION.to_string(),
        }]
    })
}

pub fn v1_document(base: &str) -> Value {
    let mut doc = json!({
        "id": "v1",
        "media_types": [{"base": "application/json", "type": "application/vnd.openstack.magnum.v1+json"}],
        "links": [
            {"href": format!("{base}/v1/"), "rel": "self"},
            {"href": "http://docs.openstack.org/developer/magnum/dev/api-spec-v1.html", "rel": "describedby", "type": "text/html"}
        ],
    });
    for key in [
        "clustertemplates",
        "clusters",
        "quotas",
        "certificates",
        "mservices",
        "stats",
        "federations",
    ] {
        doc[key] = links_pair(base, &format!("{key}/"));
    }
    doc["nodegroups"] = links_pair(base, "clusters/{cluster_id}/nodegroups");
    doc["credentials"] = links_pair(base, "credentials/");
    doc
}

/// `self` under `/v1`, `bookmark` without it.
pub fn links_pair(base: &str, path: &str) -> Value {
    serde_json::to_value(links(base, path)).unwrap_or(Value::Null)
}

/// Python's `isoformat()` of a UTC datetime, as upstream renders timestamps: microseconds
/// only when there are any.
fn isoformat(t: NaiveDateTime) -> String {
    use chrono::{Datelike, Timelike};
    let micros = t.and_utc().timestamp_subsec_micros();
    let mut s = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    if micros != 0 {
        s.push_str(&format!(".{micros:06}"));
    }
    s.push_str("+00:00");
    s
}

pub fn timestamp(t: Option<NaiveDateTime>) -> Value {
    t.map(|t| Value::String(isoformat(t)))
        .unwrap_or(Value::Null)
}

/// A timestamp field serialised straight from the row (no intermediate `Value`).
pub struct Ts(pub Option<NaiveDateTime>);

impl serde::Serialize for Ts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(t) => s.serialize_str(&isoformat(t)),
            None => s.serialize_none(),
        }
    }
}

/// A JSON TEXT column embedded as it is stored (no parse into a tree, no re-encode); NULL or
/// unparsable legacy text renders `null`.
pub fn raw_json(text: Option<&str>) -> Option<&serde_json::value::RawValue> {
    text.and_then(|t| serde_json::from_str(t).ok())
}

#[derive(serde::Serialize)]
pub struct Link {
    pub href: String,
    pub rel: &'static str,
}

pub fn links(base: &str, path: &str) -> [Link; 2] {
    [
        Link {
            href: format!("{base}/v1/{path}"),
            rel: "self",
        },
        Link {
            href: format!("{base}/{path}"),
            rel: "bookmark",
        },
    ]
}

/// Serialise a body straight to the response.
pub fn respond_with<T: serde::Serialize>(status: StatusCode, body: &T) -> ApiResult<Response> {
    respond_with_capacity(status, body, 128)
}

/// `respond_with` into a buffer of about the body's size: a large list otherwise grows its
/// buffer a dozen times, copying it each time.
pub fn respond_with_capacity<T: serde::Serialize>(
    status: StatusCode,
    body: &T,
    capacity: usize,
) -> ApiResult<Response> {
    let mut bytes = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut bytes, body)
        .map_err(|e| ApiError::Internal(format!("cannot render the response: {e}")))?;
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// A JSON TEXT column as the object it holds (NULL stays null).
pub fn json_column(text: Option<&str>) -> Value {
    magnum_db::json::loads::<Value>(text).unwrap_or(Value::Null)
}

pub fn respond(status: StatusCode, body: &Value) -> ApiResult<Response> {
    Ok(json_response(status, body))
}

pub fn no_content() -> ApiResult<Response> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    Ok(r)
}

pub fn created(body: &Value, location: &str) -> ApiResult<Response> {
    let mut r = json_response(StatusCode::CREATED, body);
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(http::header::LOCATION, v);
    }
    Ok(r)
}

/// `marker`, `limit`, `sort_key`, `sort_dir` of a list request, checked as upstream does.
pub struct ListParams {
    pub marker: Option<String>,
    pub limit: u64,
    pub sort_key: String,
    pub sort_dir: SortDir,
}

/// The type upstream's controller declares for a list's `marker` (WSME converts it before the
/// controller runs, so a bad one is refused ahead of the policy check and any lookup).
#[derive(Clone, Copy)]
pub enum MarkerType {
    Uuid,
    /// Quotas page by their integer id.
    Int,
}

/// WSME's refusal of a query argument it cannot convert.
pub fn unconvertible(field: &str, raw: &str, type_name: &str, error: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "Invalid input for field/attribute {field}. Value: '{raw}'. unable to convert to {type_name}. Error: {error}"
    ))
}

fn not_an_int(field: &str, raw: &str) -> ApiError {
    unconvertible(
        field,
        raw,
        "int",
        &format!("invalid literal for int() with base 10: '{raw}'"),
    )
}

/// A `marker` that is not a UUID, as upstream's `types.uuid` refuses it.
pub fn bad_marker(raw: &str) -> ApiError {
    unconvertible(
        "marker",
        raw,
        "uuid",
        &format!("Expected a uuid but received {raw}."),
    )
}

impl ListParams {
    /// A list whose marker is a UUID (every list but the quotas').
    pub fn parse(req: &Req, max_limit: u64) -> ApiResult<Self> {
        Self::parse_as(req, max_limit, MarkerType::Uuid)
    }

    /// Checked in upstream's argument order: marker, then limit, then the sort.
    pub fn parse_as(req: &Req, max_limit: u64, marker_type: MarkerType) -> ApiResult<Self> {
        let marker = req.query("marker").map(str::to_owned);
        if let Some(m) = &marker {
            match marker_type {
                MarkerType::Uuid if !is_uuid_like(m) => return Err(bad_marker(m)),
                MarkerType::Int if m.trim().parse::<i64>().is_err() => {
                    return Err(not_an_int("marker", m));
                }
                _ => {}
            }
        }
        let limit = match req.query("limit") {
            None => max_limit,
            Some(raw) => {
                let n: i64 = raw.trim().parse().map_err(|_| not_an_int("limit", raw))?;
                if n <= 0 {
                    return Err(ApiError::BadRequest("Limit must be positive".into()));
                }
                (n as u64).min(max_limit)
            }
        };
        let sort_dir = match req.query("sort_dir") {
            None => SortDir::Asc,
            Some(d) => d.parse()?,
        };
        Ok(Self {
            marker,
            limit,
            sort_key: req.query("sort_key").unwrap_or("id").to_owned(),
            sort_dir,
        })
    }

    pub fn page<M>(&self, marker: Option<M>) -> Page<M> {
        Page {
            limit: Some(self.limit),
            marker,
            sort_key: Some(self.sort_key.clone()),
            sort_dir: self.sort_dir,
        }
    }

    /// The `next` link: present when the page is full (even if nothing follows).
    pub fn next(
        &self,
        base: &str,
        path: &str,
        count: usize,
        last_marker: Option<String>,
    ) -> Option<String> {
        if count == 0 || count as u64 != self.limit {
            return None;
        }
        let dir = match self.sort_dir {
            SortDir::Asc => "asc",
            SortDir::Desc => "desc",
        };
        let marker = last_marker?;
        Some(format!(
            "{base}/v1/{path}?sort_key={}&sort_dir={dir}&limit={}&marker={marker}",
            self.sort_key, self.limit
        ))
    }
}

/// A collection body: `{"<key>": [...], "next": "..."}` with `next` only when there is one.
pub fn collection(key: &str, items: Vec<Value>, next: Option<String>) -> Value {
    let mut body = serde_json::Map::with_capacity(2);
    body.insert(key.to_owned(), Value::Array(items));
    if let Some(next) = next {
        body.insert("next".into(), Value::String(next));
    }
    Value::Object(body)
}

/// A policy target from a resource's owner.
pub fn owner_target(project_id: Option<&str>, user_id: Option<&str>) -> Target {
    Target::owned_by(project_id, user_id)
}

/// The default target: the caller's own ids.
pub fn ctx_target(req: &Req) -> Target {
    Target::from_context(&req.ctx)
}
