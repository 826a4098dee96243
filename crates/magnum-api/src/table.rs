//! Routes as data: each resource declares one table of [`Route`]s, and that table alone drives
//! both dispatch ([`dispatch`]) and the OpenAPI document (`openapi.rs`), so what is served and
//! what is described cannot drift apart.
//!
//! Upstream's pecan routing has quirks clients rely on (a missing id is a 400 naming the
//! argument, `/clusters/<x>/detail` binds `<x>` as the detail list's marker, 405 versus 404);
//! they are table entries too, marked [`Route::quirk`] so the document leaves them out.

use std::future::Future;
use std::pin::Pin;

use axum::response::Response;
use http::StatusCode;

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::openapi::Body;
use crate::request::Req;
use crate::version::ApiVersion;

/// What a route's handler returns: boxed, so one table can hold every handler.
pub type Reply<'a> = Pin<Box<dyn Future<Output = ApiResult<Response>> + Send + 'a>>;

/// A route's handler, given the values bound by the `{name}` segments of its path, in order.
pub type Handler = for<'a> fn(&'a AppState, &'a Req, &'a [String]) -> Reply<'a>;

/// A [`Handler`] from an async expression over `app`, `req` and the path values `p`:
/// `handler!(|app, req, p| show(app, req, &p[0]))`.
macro_rules! handler {
    (|$app:ident, $req:ident, $p:ident| $body:expr) => {{
        fn handle<'a>(
            $app: &'a $crate::AppState,
            $req: &'a $crate::request::Req,
            $p: &'a [String],
        ) -> $crate::table::Reply<'a> {
            let _ = (&$app, &$req, &$p);
            Box::pin(async move { $body.await })
        }
        handle as $crate::table::Handler
    }};
}
pub(crate) use handler;

/// The `i`th value bound by a route's path (there are always as many as its `{name}`s).
pub fn arg(p: &[String], i: usize) -> &str {
    p.get(i).map_or("", String::as_str)
}

/// Any method: a quirk that answers whatever the method.
pub const ANY: &str = "*";

/// One operation of the API.
pub struct Route {
    /// `GET`, `POST`, `PATCH`, `DELETE`, or [`ANY`].
    pub method: &'static str,
    /// The full path, `{name}` for a segment bound to a value; a final `**` (quirks only)
    /// stands for one or more further segments.
    pub path: &'static str,
    /// The query parameters the operation takes (any other is a 400, as upstream).
    pub query: &'static [&'static str],
    /// The microversion the operation needs and its name in upstream's refusal.
    pub since: Option<(u32, &'static str)>,
    pub handler: Handler,
    /// For the document: None for a quirk, which is served but not described.
    pub doc: Option<Doc>,
}

/// What the OpenAPI document says of a route.
pub struct Doc {
    pub summary: &'static str,
    /// The success status.
    pub status: u16,
    /// Request body: a named schema and its fields, or a JSON-patch list.
    pub body: Body,
    /// Policy rule checked (the first one, for routes that check several).
    pub policy: &'static str,
}

impl Route {
    /// A documented operation taking no query parameters and no microversion.
    pub const fn op(
        method: &'static str,
        path: &'static str,
        handler: Handler,
        summary: &'static str,
        status: u16,
        body: Body,
        policy: &'static str,
    ) -> Self {
        Self {
            method,
            path,
            query: &[],
            since: None,
            handler,
            doc: Some(Doc {
                summary,
                status,
                body,
                policy,
            }),
        }
    }

    /// An undocumented entry reproducing one of upstream's routing answers.
    pub const fn quirk(method: &'static str, path: &'static str, handler: Handler) -> Self {
        Self {
            method,
            path,
            query: &[],
            since: None,
            handler,
            doc: None,
        }
    }

    pub const fn query(mut self, query: &'static [&'static str]) -> Self {
        self.query = query;
        self
    }

    /// Needs microversion 1.`minor`; `name` is upstream's handler name in the refusal.
    pub const fn since(mut self, minor: u32, name: &'static str) -> Self {
        self.since = Some((minor, name));
        self
    }

    /// The values of its `{name}` segments if `segs` (after `v1`) is this route's path.
    fn bind(&self, segs: &[String]) -> Option<Vec<String>> {
        let pattern = self.path.strip_prefix("/v1/").unwrap_or(self.path);
        let mut values = Vec::new();
        let mut given = segs.iter();
        for want in pattern.split('/') {
            let seg = given.next()?;
            if want == "**" {
                // One or more further segments, bound to nothing.
                return Some(values);
            }
            if want.starts_with('{') {
                values.push(seg.clone());
            } else if want != seg {
                return None;
            }
        }
        given.next().is_none().then_some(values)
    }
}

/// pecan's answer for a path no controller method takes: 404, but 405 for PUT, which no
/// controller implements at all.
pub async fn no_such_path(req: &Req) -> ApiResult<Response> {
    Err(ApiError::Routing(if req.method == http::Method::PUT {
        StatusCode::METHOD_NOT_ALLOWED
    } else {
        StatusCode::NOT_FOUND
    }))
}

/// `{name}: missing` as upstream's 400 for a collection PATCH or DELETE without its id.
pub fn missing(argument: &str) -> ApiError {
    ApiError::BadRequest(format!("Missing argument: \"{argument}\""))
}

/// Serves `req` from `routes`: the first route whose path and method match runs, after its
/// microversion and query checks. Otherwise, as pecan answers: a 406 when the path belongs to
/// an operation newer than the requested microversion; a 405 when some route serves the path
/// with another method, for PUT (no operation takes it), and for a method other than GET on
/// a resource no table names; a 404 for the rest.
pub async fn dispatch(app: &AppState, req: &Req, routes: &[&[Route]]) -> ApiResult<Response> {
    let all = || routes.iter().flat_map(|t| t.iter());
    let mut path_known = false;
    let mut too_new = None;
    // Routes of the request's method first; a microversion refusal of the path next; the
    // routes for any method (quirks) last.
    for route in all().filter(|r| r.method != ANY) {
        let Some(values) = route.bind(&req.segs) else {
            continue;
        };
        path_known = true;
        if route.method != req.method.as_str() {
            if let Some((minor, name)) = route.since
                && too_new.is_none()
                && require_version(req, minor, name).is_err()
            {
                too_new = Some((minor, name));
            }
            continue;
        }
        return serve(app, req, route, &values).await;
    }
    if let Some((minor, name)) = too_new {
        require_version(req, minor, name)?;
    }
    if let Some((route, values)) = all()
        .filter(|r| r.method == ANY)
        .find_map(|r| Some((r, r.bind(&req.segs)?)))
    {
        return serve(app, req, route, &values).await;
    }
    let known_resource = req.segs.first().is_some_and(|first| {
        let prefix = format!("/v1/{first}");
        routes
            .iter()
            .flat_map(|t| t.iter())
            .any(|r| r.path == prefix || r.path.starts_with(&format!("{prefix}/")))
    });
    let not_allowed = path_known
        || req.method == http::Method::PUT
        || (req.method != http::Method::GET && !known_resource);
    Err(ApiError::Routing(if not_allowed {
        StatusCode::METHOD_NOT_ALLOWED
    } else {
        StatusCode::NOT_FOUND
    }))
}

/// The literal segments of the routes' paths (`clusters`, `actions`, ...), gathered once:
/// the metrics label every request with its route.
pub fn literals(routes: &'static [&'static [Route]]) -> std::collections::HashSet<&'static str> {
    routes
        .iter()
        .flat_map(|t| t.iter())
        .flat_map(|r| r.path.split('/'))
        .filter(|seg| !seg.is_empty() && !seg.starts_with('{') && *seg != "**")
        .collect()
}

async fn serve(app: &AppState, req: &Req, route: &Route, values: &[String]) -> ApiResult<Response> {
    if let Some((minor, name)) = route.since {
        require_version(req, minor, name)?;
    }
    req.allow_query(route.query)?;
    (route.handler)(app, req, values).await
}

/// An operation that does not exist at the requested microversion: 406, like pecan's routing
/// error (no version headers). `name` is upstream's handler name, which its detail names.
pub fn require_version(req: &Req, minor: u32, name: &str) -> ApiResult<()> {
    if req.version >= ApiVersion::new(1, minor) {
        return Ok(());
    }
    Err(ApiError::NotAvailableAtVersion(format!(
        "Version {} was requested but the requested API {name} is not supported for this version.",
        req.version
    )))
}
