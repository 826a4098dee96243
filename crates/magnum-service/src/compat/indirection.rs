//! Upstream's object indirection endpoint (spec/rpc-wire.md §11.6, conductor.md §4.12): the
//! `magnum-api` console script runs every remotable object method through the conductor.
//! We answer the methods its API uses from our repositories; anything else fails as upstream
//! fails for an unknown method.

use std::str::FromStr;

use magnum_core::ids::{Identity, is_uuid_like};
use magnum_core::{Error, RequestContext};
use magnum_db::fields::RowFields;
use magnum_db::repo::cluster::ClusterFilters;
use magnum_db::repo::federation::FederationFilters;
use magnum_db::repo::nodegroup::NodeGroupFilters;
use magnum_db::repo::quota::QuotaFilters;
use magnum_db::repo::x509keypair::X509KeyPairFilters;
use magnum_db::{Database, Page, SortDir};
use serde_json::{Map, Value};

use super::rows::{self, changed_row, new_row};
use crate::lifecycle::Lifecycle;
use magnum_rpc::oslo::objects::{
    CLUSTER, CLUSTER_TEMPLATE, Class, FEDERATION, MAGNUM_SERVICE, NODEGROUP, Object, ObjectError,
    QUOTA, Version, X509KEYPAIR, class,
};
use magnum_rpc::{RemoteError, RpcError};

pub const OBJECT_CLASS_ACTION_VERSIONS: &str = "object_class_action_versions";
pub const OBJECT_ACTION: &str = "object_action";
pub const OBJECT_BACKPORT_VERSIONS: &str = "object_backport_versions";

/// Why a call failed; becomes the reply's failure.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Domain(#[from] Error),
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// A malformed call: wrong or missing arguments (Python's TypeError).
    #[error("{0}")]
    Call(String),
}

impl From<Failure> for RpcError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Domain(e) => RpcError::Remote(RemoteError::from(&e)),
            Failure::Object(e) => {
                RpcError::Remote(RemoteError::from(&Error::InvalidParameterValue {
                    message: e.to_string(),
                }))
            }
            Failure::Call(m) => RpcError::Remote(RemoteError::from(&Error::Internal(m))),
        }
    }
}

type Outcome<T> = Result<T, Failure>;

/// Answer one indirection call: the reply's `result`, or its failure.
pub async fn answer(
    db: &Database,
    ctx: &RequestContext,
    method: &str,
    args: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let out = match method {
        OBJECT_CLASS_ACTION_VERSIONS => class_action(db, ctx, args).await,
        OBJECT_ACTION => object_action(db, ctx, args).await,
        OBJECT_BACKPORT_VERSIONS => backport(args),
        other => Err(Failure::Call(format!("Unknown indirection method {other}"))),
    };
    out.map_err(RpcError::from)
}

fn arg<'a>(args: &'a Map<String, Value>, name: &str) -> Outcome<&'a Value> {
    args.get(name)
        .ok_or_else(|| Failure::Call(format!("missing argument {name}")))
}

fn text<'a>(args: &'a Map<String, Value>, name: &str) -> Outcome<&'a str> {
    arg(args, name)?
        .as_str()
        .ok_or_else(|| Failure::Call(format!("argument {name} is not a string")))
}

/// Positional `args` and `kwargs` bound to a method's parameter names, as Python binds them.
struct Params<'a> {
    names: &'static [&'static str],
    args: &'a [Value],
    kwargs: Option<&'a Map<String, Value>>,
}

impl<'a> Params<'a> {
    fn bind(
        names: &'static [&'static str],
        call: &'a Map<String, Value>,
        method: &str,
    ) -> Outcome<Self> {
        let args = match call.get("args") {
            Some(Value::Array(a)) => a.as_slice(),
            None | Some(Value::Null) => &[],
            Some(other) => return Err(Failure::Call(format!("args is not a list: {other}"))),
        };
        let kwargs = match call.get("kwargs") {
            Some(Value::Object(k)) => Some(k),
            None | Some(Value::Null) => None,
            Some(other) => return Err(Failure::Call(format!("kwargs is not a dict: {other}"))),
        };
        if args.len() > names.len() {
            return Err(Failure::Call(format!(
                "{method}() takes {} positional arguments but {} were given",
                names.len(),
                args.len()
            )));
        }
        if let Some(k) = kwargs
            .into_iter()
            .flat_map(Map::keys)
            .find(|k| !names.contains(&k.as_str()))
        {
            return Err(Failure::Call(format!(
                "{method}() got an unexpected keyword argument '{k}'"
            )));
        }
        Ok(Self {
            names,
            args,
            kwargs,
        })
    }

    /// The argument (None when absent or null).
    fn get(&self, name: &str) -> Option<&'a Value> {
        let pos = self.names.iter().position(|n| *n == name);
        pos.and_then(|i| self.args.get(i))
            .or_else(|| self.kwargs.and_then(|k| k.get(name)))
            .filter(|v| !v.is_null())
    }

    fn need(&self, name: &str) -> Outcome<&'a Value> {
        self.get(name)
            .ok_or_else(|| Failure::Call(format!("missing required argument '{name}'")))
    }

    /// A string argument; Python code also passes ints where it formats them (`%s`).
    fn string(&self, name: &str) -> Outcome<Option<String>> {
        Ok(match self.get(name) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(other) => return Err(Failure::Call(format!("{name} is not a string: {other}"))),
        })
    }

    fn need_string(&self, name: &str) -> Outcome<String> {
        self.string(name)?
            .ok_or_else(|| Failure::Call(format!("missing required argument '{name}'")))
    }

    fn int(&self, name: &str) -> Outcome<Option<i64>> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .map(Some)
                .ok_or_else(|| Failure::Call(format!("{name} is not an integer: {v}"))),
        }
    }

    fn id(&self, name: &str) -> Outcome<i32> {
        self.int(name)?
            .and_then(|i| i32::try_from(i).ok())
            .ok_or_else(|| Failure::Call(format!("missing or invalid integer '{name}'")))
    }

    fn filters(&self) -> Outcome<Map<String, Value>> {
        match self.get("filters") {
            None => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(other) => Err(Failure::Call(format!("filters is not a dict: {other}"))),
        }
    }

    /// limit, marker (an object primitive), sort_key, sort_dir.
    fn page<M: RowFields + Default>(&self, class: &'static Class) -> Outcome<Page<M>> {
        let marker = match self.get("marker") {
            None => None,
            Some(v) => Some(new_row_with_id::<M>(&Object::from_primitive_of(class, v)?)?),
        };
        Ok(Page {
            limit: self.int("limit")?.and_then(|l| u64::try_from(l).ok()),
            marker,
            sort_key: self.string("sort_key")?,
            sort_dir: match self.string("sort_dir")? {
                Some(d) => SortDir::from_str(&d)?,
                None => SortDir::Asc,
            },
        })
    }
}

/// A row holding every set field, the id included (pagination markers compare by id).
fn new_row_with_id<M: RowFields + Default>(obj: &Object) -> Outcome<M> {
    let mut row: M = new_row(obj)?;
    rows::write_fields(obj, ["id", "created_at", "updated_at"], &mut row)?;
    Ok(row)
}

/// Identity of `get()`: an integer id, a uuid, else (where allowed) a name.
enum Ident {
    Id(i32),
    Uuid(String),
    Name(String),
}

fn ident(v: &Value, names_allowed: bool) -> Outcome<Ident> {
    let s = match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => return Err(Failure::Call(format!("invalid identity {other}"))),
    };
    if let Ok(id) = s.parse::<i32>() {
        return Ok(Ident::Id(id));
    }
    if is_uuid_like(&s) {
        return Ok(Ident::Uuid(s));
    }
    if names_allowed {
        Ok(Ident::Name(s))
    } else {
        Err(Error::InvalidIdentity { identity: s }.into())
    }
}

fn one(obj: Object, at: Version) -> Value {
    obj.to_primitive_at(at)
}

/// Lists travel as primitives at our version (the RPC serializer's doing, not the handler's).
fn many<M>(rows: &[M], f: fn(&M) -> Result<Object, ObjectError>) -> Outcome<Value> {
    Ok(Value::Array(
        rows.iter()
            .map(|r| f(r).map(|o| o.to_primitive()))
            .collect::<Result<Vec<_>, _>>()?,
    ))
}

fn strings(v: &Value) -> Outcome<Vec<String>> {
    match v {
        Value::Array(a) => a
            .iter()
            .map(|e| {
                e.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Failure::Call(format!("not a string: {e}")))
            })
            .collect(),
        Value::String(s) => Ok(vec![s.clone()]),
        other => Err(Failure::Call(format!("not a list of strings: {other}"))),
    }
}

/// Upstream's list queries keep only the filter keys they know and drop the rest (its API
/// sends `project_id` with a nodegroup list, for one), so an unknown key filters nothing.
fn ignored_filter(class: &str, key: &str) {
    tracing::debug!("{class} list filter '{key}' ignored, as upstream ignores it");
}

fn str_filter(v: &Value) -> Outcome<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(Failure::Call(format!(
            "filter value is not a string: {other}"
        ))),
    }
}

fn int_filter(v: &Value) -> Outcome<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| Failure::Call(format!("filter value is not an integer: {v}")))
}

fn cluster_filters(m: &Map<String, Value>) -> Outcome<ClusterFilters> {
    let mut f = ClusterFilters::default();
    for (k, v) in m {
        match k.as_str() {
            "cluster_template_id" => f.cluster_template_id = Some(str_filter(v)?),
            "name" => f.name = Some(str_filter(v)?),
            "stack_id" => f.stack_id = Some(str_filter(v)?),
            "api_address" => f.api_address = Some(str_filter(v)?),
            "project_id" => f.project_id = Some(str_filter(v)?),
            "user_id" => f.user_id = Some(str_filter(v)?),
            "status" => f.status = Some(strings(v)?),
            "node_count" => f.node_count = Some(int_filter(v)?),
            "master_count" => f.master_count = Some(int_filter(v)?),
            // Upstream lists it but clusters lost the column: its query fails.
            "node_addresses" => {
                return Err(Failure::Call(
                    "Cluster list filter 'node_addresses' names no column".into(),
                ));
            }
            other => ignored_filter("Cluster", other),
        }
    }
    Ok(f)
}

fn nodegroup_filters(m: &Map<String, Value>) -> Outcome<NodeGroupFilters> {
    let mut f = NodeGroupFilters::default();
    for (k, v) in m {
        match k.as_str() {
            "name" => f.name = Some(str_filter(v)?),
            "node_count" => {
                f.node_count = Some(
                    i32::try_from(int_filter(v)?)
                        .map_err(|_| Failure::Call(format!("node_count out of range: {v}")))?,
                )
            }
            "node_addresses" => f.node_addresses = Some(strings(v)?),
            "role" => f.role = Some(str_filter(v)?),
            "is_default" => {
                f.is_default = Some(
                    v.as_bool()
                        .ok_or_else(|| Failure::Call(format!("is_default: {v}")))?,
                )
            }
            "status" => f.status = Some(strings(v)?),
            other => ignored_filter("NodeGroup", other),
        }
    }
    Ok(f)
}

fn federation_filters(m: &Map<String, Value>) -> Outcome<FederationFilters> {
    let mut f = FederationFilters::default();
    for (k, v) in m {
        match k.as_str() {
            "name" => f.name = Some(str_filter(v)?),
            "project_id" => f.project_id = Some(str_filter(v)?),
            "hostcluster_id" => f.hostcluster_id = Some(str_filter(v)?),
            "member_ids" => f.member_ids = Some(strings(v)?),
            "properties" => {
                f.properties = Some(
                    v.as_object()
                        .cloned()
                        .ok_or_else(|| Failure::Call(format!("properties: {v}")))?,
                )
            }
            "status" => f.status = Some(strings(v)?),
            other => ignored_filter("Federation", other),
        }
    }
    Ok(f)
}

/// `object_class_action_versions`: a classmethod; an object result at the caller's version.
async fn class_action(
    db: &Database,
    ctx: &RequestContext,
    call: &Map<String, Value>,
) -> Outcome<Value> {
    let objname = text(call, "objname")?;
    let objmethod = text(call, "objmethod")?;
    let cls = class(objname).ok_or_else(|| ObjectError::Unsupported(objname.to_owned()))?;
    let requested = match call
        .get("object_versions")
        .and_then(|v| v.get(objname))
        .and_then(Value::as_str)
    {
        Some(v) => Version::parse(v)
            .ok_or_else(|| Failure::Call(format!("bad version {v:?} for {objname}")))?,
        None => cls.version,
    };
    if !cls.version.accepts(requested) {
        return Err(ObjectError::IncompatibleVersion {
            name: cls.name,
            sent: requested.to_string(),
            ours: cls.version,
        }
        .into());
    }
    let no_method = || {
        Failure::Call(format!(
            "type object '{objname}' has no attribute '{objmethod}'"
        ))
    };
    let bind = |names: &'static [&'static str]| Params::bind(names, call, objmethod);
    let at = requested;
    match (cls.name, objmethod) {
        ("Cluster", "get") => {
            let p = bind(&["cluster_id"])?;
            let c = match ident(p.need("cluster_id")?, false)? {
                Ident::Id(id) => db.clusters().get_by_id(ctx, id).await?,
                Ident::Uuid(u) | Ident::Name(u) => db.clusters().get_by_uuid(ctx, &u).await?,
            };
            Ok(one(rows::cluster(&c)?, at))
        }
        ("Cluster", "get_by_id") => {
            let p = bind(&["cluster_id"])?;
            let c = db.clusters().get_by_id(ctx, p.id("cluster_id")?).await?;
            Ok(one(rows::cluster(&c)?, at))
        }
        ("Cluster", "get_by_uuid") => {
            let p = bind(&["uuid"])?;
            let c = db
                .clusters()
                .get_by_uuid(ctx, &p.need_string("uuid")?)
                .await?;
            Ok(one(rows::cluster(&c)?, at))
        }
        ("Cluster", "get_by_name") => {
            let p = bind(&["name"])?;
            let c = db
                .clusters()
                .get_by_name(ctx, &p.need_string("name")?)
                .await?;
            Ok(one(rows::cluster(&c)?, at))
        }
        ("Cluster", "list") => {
            let p = bind(&["limit", "marker", "sort_key", "sort_dir", "filters"])?;
            let f = cluster_filters(&p.filters()?)?;
            let list = db.clusters().list(ctx, &f, &p.page(&CLUSTER)?).await?;
            many(&list, rows::cluster)
        }
        ("Cluster", "get_count_all") => {
            let p = bind(&["filters"])?;
            let f = cluster_filters(&p.filters()?)?;
            Ok(Value::from(db.clusters().count(ctx, &f).await?))
        }
        ("Cluster", "get_stats") => {
            let p = bind(&["project_id"])?;
            let s = db
                .clusters()
                .stats(p.string("project_id")?.as_deref())
                .await?;
            Ok(Value::Array(vec![s.clusters.into(), s.nodes.into()]))
        }
        ("ClusterTemplate", "get" | "get_by_id" | "get_by_uuid" | "get_by_name") => {
            let repo = db.cluster_templates();
            let t = match objmethod {
                "get" => match ident(
                    bind(&["cluster_template_id"])?.need("cluster_template_id")?,
                    true,
                )? {
                    Ident::Id(id) => repo.get_by_id(ctx, id).await?,
                    Ident::Uuid(u) => repo.get_by_uuid(ctx, &u).await?,
                    Ident::Name(n) => repo.get_by_name(ctx, &n).await?,
                },
                "get_by_id" => {
                    repo.get_by_id(
                        ctx,
                        bind(&["cluster_template_id"])?.id("cluster_template_id")?,
                    )
                    .await?
                }
                "get_by_uuid" => {
                    repo.get_by_uuid(ctx, &bind(&["uuid"])?.need_string("uuid")?)
                        .await?
                }
                _ => {
                    repo.get_by_name(ctx, &bind(&["name"])?.need_string("name")?)
                        .await?
                }
            };
            Ok(one(rows::cluster_template(&t)?, at))
        }
        ("ClusterTemplate", "list") => {
            let p = bind(&["limit", "marker", "sort_key", "sort_dir"])?;
            let list = db
                .cluster_templates()
                .list(ctx, &p.page(&CLUSTER_TEMPLATE)?)
                .await?;
            many(&list, rows::cluster_template)
        }
        ("NodeGroup", "get" | "get_by_id" | "get_by_uuid" | "get_by_name") => {
            let repo = db.nodegroups();
            let ng = match objmethod {
                "get" => {
                    let p = bind(&["cluster_id", "nodegroup_id"])?;
                    let cluster = p.need_string("cluster_id")?;
                    match ident(p.need("nodegroup_id")?, true)? {
                        Ident::Id(id) => repo.get_by_id(ctx, &cluster, id).await?,
                        Ident::Uuid(u) => repo.get_by_uuid(ctx, &cluster, &u).await?,
                        Ident::Name(n) => repo.get_by_name(ctx, &cluster, &n).await?,
                    }
                }
                "get_by_id" => {
                    let p = bind(&["cluster", "id_"])?;
                    repo.get_by_id(ctx, &p.need_string("cluster")?, p.id("id_")?)
                        .await?
                }
                "get_by_uuid" => {
                    let p = bind(&["cluster", "uuid"])?;
                    repo.get_by_uuid(ctx, &p.need_string("cluster")?, &p.need_string("uuid")?)
                        .await?
                }
                _ => {
                    let p = bind(&["cluster", "name"])?;
                    repo.get_by_name(ctx, &p.need_string("cluster")?, &p.need_string("name")?)
                        .await?
                }
            };
            Ok(one(rows::nodegroup(&ng)?, at))
        }
        ("NodeGroup", "list") => {
            let p = bind(&[
                "cluster_id",
                "limit",
                "marker",
                "sort_key",
                "sort_dir",
                "filters",
            ])?;
            let f = nodegroup_filters(&p.filters()?)?;
            let list = db
                .nodegroups()
                .list(ctx, &p.need_string("cluster_id")?, &f, &p.page(&NODEGROUP)?)
                .await?;
            many(&list, rows::nodegroup)
        }
        ("NodeGroup", "get_count_all") => {
            let p = bind(&["cluster_id"])?;
            let n = db
                .nodegroups()
                .count(ctx, &p.need_string("cluster_id")?)
                .await?;
            Ok(Value::from(n))
        }
        ("X509KeyPair", "get" | "get_by_id" | "get_by_uuid") => {
            let repo = db.x509keypairs();
            let k = match objmethod {
                "get" => match ident(bind(&["x509keypair_id"])?.need("x509keypair_id")?, false)? {
                    Ident::Id(id) => repo.get_by_id(ctx, id).await?,
                    Ident::Uuid(u) | Ident::Name(u) => repo.get_by_uuid(ctx, &u).await?,
                },
                "get_by_id" => {
                    repo.get_by_id(ctx, bind(&["x509keypair_id"])?.id("x509keypair_id")?)
                        .await?
                }
                _ => {
                    repo.get_by_uuid(ctx, &bind(&["uuid"])?.need_string("uuid")?)
                        .await?
                }
            };
            Ok(one(rows::x509keypair(&k)?, at))
        }
        ("X509KeyPair", "list") => {
            let p = bind(&["limit", "marker", "sort_key", "sort_dir", "filters"])?;
            let mut f = X509KeyPairFilters::default();
            for (k, v) in p.filters()? {
                match k.as_str() {
                    "project_id" => f.project_id = Some(str_filter(&v)?),
                    "user_id" => f.user_id = Some(str_filter(&v)?),
                    other => ignored_filter("X509KeyPair", other),
                }
            }
            let list = db
                .x509keypairs()
                .list(ctx, &f, &p.page(&X509KEYPAIR)?)
                .await?;
            many(&list, rows::x509keypair)
        }
        ("MagnumService", "get_by_host_and_binary") => {
            let p = bind(&["host", "binary"])?;
            let s = db
                .magnum_services()
                .get_by_host_and_binary(p.string("host")?.as_deref(), &p.need_string("binary")?)
                .await?;
            match s {
                Some(s) => Ok(one(rows::magnum_service(&s)?, at)),
                None => Ok(Value::Null),
            }
        }
        ("MagnumService", "list") => {
            let p = bind(&["limit", "marker", "sort_key", "sort_dir"])?;
            let list = db
                .magnum_services()
                .list(None, &p.page(&MAGNUM_SERVICE)?)
                .await?;
            many(&list, rows::magnum_service)
        }
        ("Quota", "get_by_id") => {
            let p = bind(&["quota_id"])?;
            Ok(one(
                rows::quota(&db.quotas().get_by_id(p.id("quota_id")?).await?)?,
                at,
            ))
        }
        ("Quota", "get_quota_by_project_id_resource") => {
            let p = bind(&["project_id", "resource"])?;
            let q = db
                .quotas()
                .get(&p.need_string("project_id")?, &p.need_string("resource")?)
                .await?;
            Ok(one(rows::quota(&q)?, at))
        }
        ("Quota", "quota_get_all_by_project_id") => {
            let p = bind(&["project_id"])?;
            let list = db
                .quotas()
                .all_for_project(&p.need_string("project_id")?)
                .await?;
            many(&list, rows::quota)
        }
        ("Quota", "list") => {
            let p = bind(&["limit", "marker", "sort_key", "sort_dir", "filters"])?;
            let mut f = QuotaFilters::default();
            for (k, v) in p.filters()? {
                match k.as_str() {
                    "project_id" => f.project_id = Some(str_filter(&v)?),
                    "resource" => f.resource = Some(str_filter(&v)?),
                    other => ignored_filter("Quota", other),
                }
            }
            let list = db.quotas().list(&f, &p.page(&QUOTA)?).await?;
            many(&list, rows::quota)
        }
        ("Quota", "update_quota") => {
            let p = bind(&["project_id", "quota"])?;
            let project = p.need_string("project_id")?;
            let q = p.need("quota")?;
            let resource = q
                .get("resource")
                .and_then(Value::as_str)
                .ok_or_else(|| Failure::Call("quota without resource".into()))?;
            let limit = q
                .get("hard_limit")
                .and_then(Value::as_i64)
                .and_then(|l| i32::try_from(l).ok())
                .ok_or_else(|| Failure::Call("quota without hard_limit".into()))?;
            let q = db.quotas().update(&project, resource, limit).await?;
            Ok(one(rows::quota(&q)?, at))
        }
        ("Federation", "get" | "get_by_id" | "get_by_uuid" | "get_by_name") => {
            let repo = db.federations();
            let f = match objmethod {
                "get" => match ident(bind(&["federation_id"])?.need("federation_id")?, false)? {
                    Ident::Id(id) => repo.get_by_id(ctx, id).await?,
                    Ident::Uuid(u) | Ident::Name(u) => repo.get_by_uuid(ctx, &u).await?,
                },
                "get_by_id" => {
                    repo.get_by_id(ctx, bind(&["federation_id"])?.id("federation_id")?)
                        .await?
                }
                "get_by_uuid" => {
                    repo.get_by_uuid(ctx, &bind(&["uuid"])?.need_string("uuid")?)
                        .await?
                }
                _ => {
                    repo.get_by_name(ctx, &bind(&["name"])?.need_string("name")?)
                        .await?
                }
            };
            Ok(one(rows::federation(&f)?, at))
        }
        ("Federation", "list" | "get_count_all") => {
            let names: &'static [&'static str] = if objmethod == "list" {
                &["limit", "marker", "sort_key", "sort_dir", "filters"]
            } else {
                &["filters"]
            };
            let p = bind(names)?;
            let f = federation_filters(&p.filters()?)?;
            let page = if objmethod == "list" {
                p.page(&FEDERATION)?
            } else {
                Page::default()
            };
            let list = db.federations().list(ctx, &f, &page).await?;
            if objmethod == "list" {
                many(&list, rows::federation)
            } else {
                Ok(Value::from(list.len()))
            }
        }
        ("Stats", "get_cluster_stats") => {
            let p = bind(&["project_id"])?;
            let s = db
                .clusters()
                .stats(p.string("project_id")?.as_deref())
                .await?;
            Ok(one(rows::stats(s.clusters, s.nodes)?, at))
        }
        _ => Err(no_method()),
    }
}

/// What `object_action` reports back: every set field whose value is new or different after
/// the call, plus `obj_what_changed`.
fn updates(before: &Object, after: &Object) -> Value {
    let mut m = Map::new();
    for (name, v) in after.fields() {
        if before.get(name) != Some(v) {
            m.insert(name.to_owned(), v.clone());
        }
    }
    m.insert(
        "obj_what_changed".into(),
        Value::Array(
            after
                .changes()
                .into_iter()
                .map(|c| Value::String(c.to_owned()))
                .collect(),
        ),
    );
    Value::Object(m)
}

/// `obj` with every field of `stored` loaded (as `_from_db_object` does in place) and its
/// changes reset.
fn reloaded(obj: &Object, stored: &Object) -> Outcome<Object> {
    let mut out = obj.clone();
    for (name, v) in stored.fields() {
        out.load(name, v.clone())?;
    }
    out.reset_changes();
    Ok(out)
}

fn uuid_of(obj: &Object) -> Outcome<String> {
    obj.str("uuid")
        .map(str::to_owned)
        .ok_or_else(|| Failure::Call(format!("{} has no uuid", obj.name())))
}

fn id_of(obj: &Object) -> Outcome<i32> {
    obj.int("id")
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| Failure::Call(format!("{} has no id", obj.name())))
}

/// `object_action`: an instance method; `[updates, result]`.
async fn object_action(
    db: &Database,
    ctx: &RequestContext,
    call: &Map<String, Value>,
) -> Outcome<Value> {
    let obj = Object::from_primitive(arg(call, "objinst")?)?;
    let objmethod = text(call, "objmethod")?;
    // Every instance method reachable here takes no argument but the context.
    Params::bind(&[], call, objmethod)?;
    let (after, result): (Object, Value) = match (obj.name(), objmethod) {
        (_, "create") => (create(db, &obj).await?, Value::Null),
        (_, "save") => {
            save(db, &obj).await?;
            let mut after = obj.clone();
            after.reset_changes();
            (after, Value::Null)
        }
        (_, "destroy") => {
            destroy(db, &obj).await?;
            let mut after = obj.clone();
            after.reset_changes();
            (after, Value::Null)
        }
        ("Cluster" | "ClusterTemplate" | "NodeGroup" | "X509KeyPair" | "Federation", "refresh") => {
            let uuid = uuid_of(&obj)?;
            let current = match obj.name() {
                "Cluster" => rows::cluster(&db.clusters().get_by_uuid(ctx, &uuid).await?)?,
                "ClusterTemplate" => {
                    rows::cluster_template(&db.cluster_templates().get_by_uuid(ctx, &uuid).await?)?
                }
                "NodeGroup" => {
                    let cluster = obj.str("cluster_id").unwrap_or_default().to_owned();
                    rows::nodegroup(&db.nodegroups().get_by_uuid(ctx, &cluster, &uuid).await?)?
                }
                "X509KeyPair" => {
                    rows::x509keypair(&db.x509keypairs().get_by_uuid(ctx, &uuid).await?)?
                }
                _ => rows::federation(&db.federations().get_by_uuid(ctx, &uuid).await?)?,
            };
            // Set fields that differ take the stored value, and count as changed.
            let mut after = obj.clone();
            let names: Vec<&str> = obj.fields().map(|(n, _)| n).collect();
            for name in names {
                if let Some(v) = current.get(name)
                    && obj.get(name) != Some(v)
                {
                    after.set(name, v.clone())?;
                }
            }
            (after, Value::Null)
        }
        ("MagnumService", "report_state_up") => {
            let host = obj.str("host").map(str::to_owned);
            let binary = obj.str("binary").unwrap_or_default().to_owned();
            db.magnum_services()
                .report_state_up(host.as_deref(), &binary)
                .await?;
            let mut after = obj.clone();
            after.load(
                "report_count",
                Value::from(obj.int("report_count").unwrap_or(0) + 1),
            )?;
            after.reset_changes();
            (after, Value::Null)
        }
        ("Quota", "delete") => {
            let project = obj.str("project_id").unwrap_or_default().to_owned();
            let resource = obj.str("resource").unwrap_or_default().to_owned();
            db.quotas().delete(&project, &resource).await?;
            let mut after = obj.clone();
            after.reset_changes();
            (after, Value::Null)
        }
        _ => {
            return Err(Failure::Call(format!(
                "'{}' object has no attribute '{objmethod}'",
                obj.name()
            )));
        }
    };
    Ok(Value::Array(vec![updates(&obj, &after), result]))
}

/// `create()`: insert the changed fields; the object then holds the stored row.
async fn create(db: &Database, obj: &Object) -> Outcome<Object> {
    let mut values = Object::new(obj.class());
    for name in obj.changes() {
        if let Some(v) = obj.get(name) {
            values.load(name, v.clone())?;
        }
    }
    let stored = match obj.name() {
        "Cluster" => rows::cluster(
            &Lifecycle::new(db.clone())
                .insert_cluster_as_given(new_row(&values)?)
                .await?,
        )?,
        "ClusterTemplate" => {
            rows::cluster_template(&db.cluster_templates().create(new_row(&values)?).await?)?
        }
        "NodeGroup" => rows::nodegroup(
            &Lifecycle::new(db.clone())
                .insert_nodegroup_as_given(new_row(&values)?)
                .await?,
        )?,
        "X509KeyPair" => rows::x509keypair(&db.x509keypairs().create(new_row(&values)?).await?)?,
        "Federation" => rows::federation(&db.federations().create(new_row(&values)?).await?)?,
        "MagnumService" => {
            let binary = values.str("binary").unwrap_or_default().to_owned();
            rows::magnum_service(
                &db.magnum_services()
                    .create(values.str("host"), &binary)
                    .await?,
            )?
        }
        "Quota" => {
            let project = values.str("project_id").unwrap_or_default().to_owned();
            let resource = values.str("resource").unwrap_or_default().to_owned();
            let limit = values
                .int("hard_limit")
                .and_then(|l| i32::try_from(l).ok())
                .unwrap_or_default();
            rows::quota(&db.quotas().create(&project, &resource, limit).await?)?
        }
        other => {
            return Err(Failure::Call(format!(
                "'{other}' object has no attribute 'create'"
            )));
        }
    };
    reloaded(obj, &stored)
}

/// `save()`: write the changed fields onto the stored row (read fresh, so never stale).
async fn save(db: &Database, obj: &Object) -> Outcome<()> {
    let sys = RequestContext::admin_all_tenants();
    let savable = [
        "Cluster",
        "ClusterTemplate",
        "NodeGroup",
        "X509KeyPair",
        "Federation",
        "MagnumService",
    ];
    if !savable.contains(&obj.name()) {
        return Err(Failure::Call(format!(
            "'{}' object has no attribute 'save'",
            obj.name()
        )));
    }
    if obj.changes().is_empty() {
        return Ok(());
    }
    match obj.name() {
        "Cluster" => {
            let original = db.clusters().get_by_uuid(&sys, &uuid_of(obj)?).await?;
            Lifecycle::new(db.clone())
                .save_cluster(&original, &changed_row(obj, &original)?)
                .await?;
        }
        "ClusterTemplate" => {
            let original = db
                .cluster_templates()
                .get_by_uuid(&sys, &uuid_of(obj)?)
                .await?;
            db.cluster_templates()
                .save(&original, &changed_row(obj, &original)?)
                .await?;
        }
        "NodeGroup" => {
            let cluster = obj.str("cluster_id").unwrap_or_default().to_owned();
            let original = db
                .nodegroups()
                .get_by_uuid(&sys, &cluster, &uuid_of(obj)?)
                .await?;
            Lifecycle::new(db.clone())
                .save_nodegroup(&original, &changed_row(obj, &original)?)
                .await?;
        }
        "X509KeyPair" => {
            let original = db.x509keypairs().get_by_uuid(&sys, &uuid_of(obj)?).await?;
            db.x509keypairs()
                .save(&original, &changed_row(obj, &original)?)
                .await?;
        }
        "Federation" => {
            let original = db.federations().get_by_uuid(&sys, &uuid_of(obj)?).await?;
            db.federations()
                .save(&original, &changed_row(obj, &original)?)
                .await?;
        }
        "MagnumService" => {
            // What an operator changes; report_count and last_seen_up move through
            // report_state_up.
            let changed = |f: &str| obj.is_changed(f);
            db.magnum_services()
                .update(
                    id_of(obj)?,
                    changed("disabled")
                        .then(|| obj.get("disabled").and_then(Value::as_bool))
                        .flatten(),
                    changed("disabled_reason")
                        .then(|| obj.str("disabled_reason").map(str::to_owned)),
                    changed("forced_down")
                        .then(|| obj.get("forced_down").and_then(Value::as_bool))
                        .flatten(),
                )
                .await?;
        }
        other => {
            return Err(Failure::Call(format!(
                "'{other}' object has no attribute 'save'"
            )));
        }
    }
    Ok(())
}

async fn destroy(db: &Database, obj: &Object) -> Outcome<()> {
    let by_uuid = || uuid_of(obj).map(Identity::Uuid);
    match obj.name() {
        "Cluster" => {
            Lifecycle::new(db.clone())
                .remove_cluster(&by_uuid()?)
                .await?
        }
        "ClusterTemplate" => db.cluster_templates().destroy(&by_uuid()?).await?,
        "NodeGroup" => {
            let cluster = obj.str("cluster_id").unwrap_or_default().to_owned();
            Lifecycle::new(db.clone())
                .remove_nodegroup(&cluster, &by_uuid()?)
                .await?
        }
        "X509KeyPair" => db.x509keypairs().destroy(&by_uuid()?).await?,
        "Federation" => db.federations().destroy(&by_uuid()?).await?,
        "MagnumService" => db.magnum_services().destroy(id_of(obj)?).await?,
        other => {
            return Err(Failure::Call(format!(
                "'{other}' object has no attribute 'destroy'"
            )));
        }
    }
    Ok(())
}

/// `object_backport_versions`: the object relabelled at the caller's version.
fn backport(call: &Map<String, Value>) -> Outcome<Value> {
    let obj = Object::from_primitive(arg(call, "objinst")?)?;
    let target = call
        .get("object_versions")
        .and_then(|v| v.get(obj.name()))
        .and_then(Value::as_str)
        .and_then(Version::parse)
        .unwrap_or(obj.version());
    Ok(obj.to_primitive_at(target))
}

#[cfg(test)]
mod tests;
