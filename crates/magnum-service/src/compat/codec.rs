//! The codec that makes our RPC messages look exactly like upstream Magnum's (spec/rpc-wire.md
//! §11, §12), in both directions, so a Python magnum-api can drive our conductor and our API a
//! Python conductor.
//!
//! Our messages carry uuids and the requested change; upstream's carry whole versioned
//! objects. Encoding loads the rows and sends them as upstream's API would; decoding takes the
//! uuids (and, for nodegroup PATCH and certificate signing, the changed values) back out of
//! the objects. The one thing our conductor cannot find in the database is what upstream's
//! API never inserts: a new cluster or nodegroup. Decoding inserts those first, as upstream's
//! conductor does, so our handlers always start from stored rows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use magnum_core::{Error, RequestContext};
use magnum_db::Database;
use magnum_db::json::loads;
use magnum_db::repo::cluster::Cluster;
use magnum_db::repo::nodegroup::NodeGroup;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::indirection;
use super::rows;
use magnum_rpc::messages::{method as m, *};
use magnum_rpc::oslo::codec::{Codec, Decoded, WireRequest, context_from_wire, context_to_wire};
use magnum_rpc::oslo::objects::{
    CERTIFICATE, CLUSTER, CLUSTER_TEMPLATE, NODEGROUP, Object, ObjectError, is_primitive,
};
use magnum_rpc::{Message, RemoteError, RpcError};

/// New rows of clusters (for `cluster_create`) and nodegroups (for `nodegroup_create`) that
/// the API stages right before its cast; encoding takes them out and sends them as upstream's
/// unsaved objects. With `[api] create_cluster_in_conductor` the API did not insert them and
/// the conductor (ours or Python's) does, as upstream's conductor does; otherwise the API
/// inserted them and hands over what it stored, so the message needs no read-back (which,
/// on another pool connection, may reach a Galera node that has not applied the insert).
/// Cheap to clone; every clone is the same store.
#[derive(Clone, Debug, Default)]
pub struct UnsavedRows {
    inner: Arc<Mutex<Staged>>,
}

#[derive(Debug, Default)]
struct Staged {
    clusters: HashMap<String, Cluster>,
    nodegroups: HashMap<String, NodeGroup>,
}

impl UnsavedRows {
    /// Keep a new cluster (its uuid set) until its `cluster_create` is encoded. Only the
    /// cluster: the conductor builds the default nodegroups itself.
    pub fn stage_cluster(&self, cluster: Cluster) {
        if let Some(uuid) = cluster.uuid.clone() {
            self.lock().clusters.insert(uuid, cluster);
        }
    }

    /// Keep a new nodegroup (uuid and cluster_id set) until its `nodegroup_create` is encoded.
    pub fn stage_nodegroup(&self, nodegroup: NodeGroup) {
        self.lock()
            .nodegroups
            .insert(nodegroup.uuid.clone(), nodegroup);
    }

    /// Forget a staged row whose create was abandoned before the cast.
    pub fn discard(&self, uuid: &str) {
        let mut staged = self.lock();
        staged.clusters.remove(uuid);
        staged.nodegroups.remove(uuid);
    }

    fn take_cluster(&self, uuid: &str) -> Option<Cluster> {
        self.lock().clusters.remove(uuid)
    }

    fn take_nodegroup(&self, uuid: &str) -> Option<NodeGroup> {
        self.lock().nodegroups.remove(uuid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Staged> {
        // The maps stay consistent whatever a panicking holder was doing.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The [`Codec`] speaking upstream's argument shapes, backed by the database both sides share.
#[derive(Clone)]
pub struct MagnumCodec {
    db: Database,
    create_cluster_in_conductor: bool,
    unsaved: UnsavedRows,
}

impl MagnumCodec {
    pub fn new(db: Database) -> Self {
        Self {
            db,
            create_cluster_in_conductor: false,
            unsaved: UnsavedRows::default(),
        }
    }

    /// `[api] create_cluster_in_conductor`: the API does not insert new clusters (nor new
    /// nodegroups); it stages them in [`Self::unsaved`] and the conductor inserts them, as
    /// upstream's does. Off (the default), the API has inserted the rows and the creates send
    /// them in upstream's shape all the same, which only our conductor accepts (a Python one
    /// fails on the duplicate uuid).
    pub fn with_create_cluster_in_conductor(mut self, on: bool) -> Self {
        self.create_cluster_in_conductor = on;
        self
    }

    pub fn create_cluster_in_conductor(&self) -> bool {
        self.create_cluster_in_conductor
    }

    /// The store the API stages unsaved rows in (shared with this codec).
    pub fn unsaved(&self) -> UnsavedRows {
        self.unsaved.clone()
    }
}

fn remote(e: &Error) -> RpcError {
    RpcError::Remote(RemoteError::from(e))
}

/// Rows are read past the tenant filter: the sender authorised the request, and the codec
/// only translates it.
fn system() -> RequestContext {
    RequestContext::admin_all_tenants()
}

fn parse<T: DeserializeOwned>(msg: &Message) -> Result<T, RpcError> {
    serde_json::from_value(msg.args.clone())
        .map_err(|e| RpcError::Malformed(format!("arguments of {}: {e}", msg.method)))
}

fn to_value(v: &impl Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::Malformed(e.to_string()))
}

fn dispatch(
    ctx: &Map<String, Value>,
    method: &str,
    args: &impl Serialize,
) -> Result<Decoded, RpcError> {
    Ok(Decoded::Dispatch(Message {
        context: context_from_wire(ctx),
        method: method.to_owned(),
        args: to_value(args)?,
    }))
}

fn arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a Value, RpcError> {
    args.get(name)
        .ok_or_else(|| RpcError::Malformed(format!("argument {name} missing")))
}

fn arg_object(
    args: &Map<String, Value>,
    name: &str,
    class: &'static magnum_rpc::oslo::objects::Class,
) -> Result<Object, RpcError> {
    Ok(Object::from_primitive_of(class, arg(args, name)?)?)
}

fn arg_i32(args: &Map<String, Value>, name: &str) -> Result<i32, RpcError> {
    arg(args, name)?
        .as_i64()
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| RpcError::Malformed(format!("argument {name} is not an integer")))
}

fn opt_i32(args: &Map<String, Value>, name: &str) -> Result<Option<i32>, RpcError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => arg_i32(args, name).map(Some),
    }
}

fn opt_str(args: &Map<String, Value>, name: &str) -> Option<String> {
    args.get(name).and_then(Value::as_str).map(str::to_owned)
}

/// A text field the object must carry, as the type it names (an id newtype or a String).
fn required<T: From<String>>(obj: &Object, field: &str) -> Result<T, RpcError> {
    obj.str(field)
        .map(|s| T::from(s.to_owned()))
        .ok_or_else(|| RpcError::Malformed(format!("{} without {field}", obj.name())))
}

/// The fields upstream's API sets on a new cluster even when their value is None (its API
/// object's attributes after template defaults); other None fields are left unset.
const NEW_CLUSTER_FIELDS: &[&str] = &[
    "uuid",
    "name",
    "project_id",
    "user_id",
    "cluster_template_id",
    "keypair",
    "docker_volume_size",
    "labels",
    "master_flavor_id",
    "flavor_id",
    "create_timeout",
    "fixed_network",
    "fixed_subnet",
    "floating_ip_enabled",
    "master_lb_enabled",
    "coe_version",
    "container_version",
];

/// A stored row as upstream's API sends an object it has just built and not saved: the
/// values it sets, every one in `changes`, nothing storage assigns.
fn as_unsaved(stored: &Object, keep_null: &[&str]) -> Result<Object, ObjectError> {
    let mut obj = Object::new(stored.class());
    for (name, v) in stored.fields() {
        let storage = matches!(name, "id" | "created_at" | "updated_at");
        // The conductor sets the status of what it creates.
        let conductor = matches!(name, "status" | "status_reason");
        if storage || conductor || (v.is_null() && !keep_null.contains(&name)) {
            continue;
        }
        obj.set(name, v.clone())?;
    }
    Ok(obj)
}

impl MagnumCodec {
    async fn cluster_row(&self, uuid: &str) -> Result<Cluster, RpcError> {
        self.db
            .clusters()
            .get_by_uuid(&system(), uuid)
            .await
            .map_err(|e| remote(&e))
    }

    async fn cluster(&self, uuid: &str) -> Result<Object, RpcError> {
        Ok(rows::cluster(&self.cluster_row(uuid).await?)?)
    }

    async fn template(&self, uuid: &str) -> Result<Object, RpcError> {
        let row = self
            .db
            .cluster_templates()
            .get_by_uuid(&system(), uuid)
            .await
            .map_err(|e| remote(&e))?;
        Ok(rows::cluster_template(&row)?)
    }

    async fn nodegroup_row(&self, cluster: &str, uuid: &str) -> Result<NodeGroup, RpcError> {
        self.db
            .nodegroups()
            .get_by_uuid(&system(), cluster, uuid)
            .await
            .map_err(|e| remote(&e))
    }

    async fn nodegroup(&self, cluster: &str, uuid: &str) -> Result<Object, RpcError> {
        Ok(rows::nodegroup(&self.nodegroup_row(cluster, uuid).await?)?)
    }

    /// The new cluster of a `cluster_create`, unsaved: the staged row (the one the conductor
    /// is to insert, or the one our API has inserted), else the stored one.
    async fn new_cluster(&self, uuid: &str) -> Result<Object, RpcError> {
        let row = match self.unsaved.take_cluster(uuid) {
            Some(row) => row,
            None => self.cluster_row(uuid).await?,
        };
        Ok(as_unsaved(&rows::cluster(&row)?, NEW_CLUSTER_FIELDS)?)
    }

    /// The nodegroup of `nodegroup_update` as upstream's API sends it: the stored one with the
    /// PATCH applied, only fields that really change marked as changed.
    async fn patched_nodegroup(&self, r: &NodegroupUpdate) -> Result<Object, RpcError> {
        let mut ng = self.nodegroup(&r.cluster_uuid, &r.nodegroup_uuid).await?;
        let json = |t: &Option<String>| {
            t.as_deref()
                .map(|t| loads::<Value>(Some(t)).unwrap_or_default())
        };
        let mut patch: Vec<(&str, Value)> = Vec::new();
        if let Some(v) = r.min_node_count {
            patch.push(("min_node_count", Value::from(v)));
        }
        // Our PATCH always carries max_node_count (null when removed).
        patch.push((
            "max_node_count",
            r.max_node_count.map_or(Value::Null, Value::from),
        ));
        for (name, v) in [
            ("node_labels", json(&r.node_labels)),
            ("node_taints", json(&r.node_taints)),
            ("labels", json(&r.labels)),
        ] {
            if let Some(v) = v {
                patch.push((name, v));
            }
        }
        for (name, v) in patch {
            if ng.get(name) != Some(&v) {
                ng.set(name, v)?;
            }
        }
        Ok(ng)
    }

    async fn encode_args(&self, msg: &Message) -> Result<Map<String, Value>, RpcError> {
        let mut a = Map::new();
        match msg.method.as_str() {
            m::CLUSTER_CREATE => {
                let r: ClusterCreate = parse(msg)?;
                let cluster = self.new_cluster(&r.cluster_uuid).await?;
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("master_count".into(), r.master_count.into());
                a.insert("node_count".into(), r.node_count.into());
                a.insert("create_timeout".into(), r.create_timeout.into());
            }
            m::CLUSTER_UPDATE => {
                let r: ClusterUpdate = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("node_count".into(), r.node_count.into());
                a.insert("health_status".into(), r.health_status.into());
                a.insert(
                    "health_status_reason".into(),
                    r.health_status_reason.unwrap_or(Value::Null),
                );
                a.insert("rollback".into(), r.rollback.into());
            }
            m::CLUSTER_DELETE => {
                let r: ClusterRef = parse(msg)?;
                a.insert("uuid".into(), r.cluster_uuid.into());
            }
            m::CLUSTER_RESIZE => {
                let r: ClusterResize = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                let ng = self.nodegroup(&r.cluster_uuid, &r.nodegroup_uuid).await?;
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("node_count".into(), r.node_count.into());
                a.insert("nodes_to_remove".into(), r.nodes_to_remove.into());
                a.insert("nodegroup".into(), ng.to_primitive());
            }
            m::CLUSTER_UPGRADE => {
                let r: ClusterUpgrade = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                let template = self.template(&r.cluster_template_uuid).await?;
                let ng = self.nodegroup(&r.cluster_uuid, &r.nodegroup_uuid).await?;
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("cluster_template".into(), template.to_primitive());
                // Upstream's request type defaults the batch size to 1.
                a.insert(
                    "max_batch_size".into(),
                    r.max_batch_size.unwrap_or(1).into(),
                );
                a.insert("nodegroup".into(), ng.to_primitive());
            }
            m::NODEGROUP_CREATE => {
                let r: NodegroupRef = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                let ng = match self.unsaved.take_nodegroup(&r.nodegroup_uuid) {
                    Some(row) => rows::nodegroup(&row)?,
                    None => self.nodegroup(&r.cluster_uuid, &r.nodegroup_uuid).await?,
                };
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("nodegroup".into(), as_unsaved(&ng, &[])?.to_primitive());
            }
            m::NODEGROUP_UPDATE => {
                let r: NodegroupUpdate = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                let ng = self.patched_nodegroup(&r).await?;
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("nodegroup".into(), ng.to_primitive());
            }
            m::NODEGROUP_DELETE => {
                let r: NodegroupRef = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                let ng = self.nodegroup(&r.cluster_uuid, &r.nodegroup_uuid).await?;
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("nodegroup".into(), ng.to_primitive());
            }
            m::CREDENTIAL_ROTATE => {
                let r: ClusterRef = parse(msg)?;
                a.insert(
                    "cluster".into(),
                    self.cluster(&r.cluster_uuid).await?.to_primitive(),
                );
            }
            m::ROTATE_CA_CERTIFICATE => {
                let r: ClusterRef = parse(msg)?;
                let mut cluster = self.cluster(&r.cluster_uuid).await?;
                // Upstream's API reads the template (tls_disabled) first, so its cluster
                // carries it loaded.
                if let Some(t) = cluster.str("cluster_template_id").map(str::to_owned)
                    && let Ok(t) = self.template(&t).await
                {
                    cluster.load("cluster_template", t.to_primitive())?;
                }
                a.insert("cluster".into(), cluster.to_primitive());
            }
            m::SIGN_CERTIFICATE => {
                let r: SignCertificate = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                let mut cert = Object::new(&CERTIFICATE);
                cert.set("project_id", msg.context.project_id.clone().into())?;
                cert.set("user_id", msg.context.user_id.clone().into())?;
                cert.set("cluster_uuid", r.cluster_uuid.clone().into())?;
                cert.set("csr", r.csr.into())?;
                // Left unset when not given: upstream's conductor then signs for kubernetes.
                if let Some(t) = r.ca_cert_type {
                    cert.set("ca_cert_type", t.into())?;
                }
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("certificate".into(), cert.to_primitive());
            }
            m::GET_CA_CERTIFICATE => {
                let r: GetCaCertificate = parse(msg)?;
                let cluster = self.cluster(&r.cluster_uuid).await?;
                a.insert("cluster".into(), cluster.to_primitive());
                a.insert("ca_cert_type".into(), r.ca_cert_type.into());
            }
            m::PING_CONDUCTOR => {}
            // Anything else (e.g. indirection calls) already speaks upstream's shapes.
            _ => match &msg.args {
                Value::Object(args) => a = args.clone(),
                Value::Null => {}
                other => {
                    return Err(RpcError::Malformed(format!(
                        "args must be an object: {other}"
                    )));
                }
            },
        }
        Ok(a)
    }

    /// A `cluster_create`'s cluster: its uuid (upstream's database layer makes one when the
    /// object has none), and the object itself when no row exists yet (upstream's API sent it
    /// unsaved; the conductor inserts it). Reads only.
    async fn unsaved_cluster(
        &self,
        cluster: &mut Object,
    ) -> Result<(String, Option<Value>), RpcError> {
        let uuid = match cluster.str("uuid") {
            Some(u) => u.to_owned(),
            None => {
                let u = uuid::Uuid::new_v4().to_string();
                cluster.set("uuid", Value::String(u.clone()))?;
                u
            }
        };
        match self.db.clusters().get_by_uuid(&system(), &uuid).await {
            Ok(_) => Ok((uuid, None)),
            Err(Error::ClusterNotFound { .. }) => Ok((uuid, Some(cluster.to_primitive()))),
            Err(e) => Err(remote(&e)),
        }
    }

    /// As [`Self::unsaved_cluster`], for a `nodegroup_create`'s nodegroup.
    async fn unsaved_nodegroup(
        &self,
        cluster_uuid: &str,
        ng: &Object,
    ) -> Result<(String, Option<Value>), RpcError> {
        let uuid: String = required(ng, "uuid")?;
        match self.nodegroup_row(cluster_uuid, &uuid).await {
            Ok(_) => Ok((uuid, None)),
            Err(RpcError::Remote(r)) if r.kind == magnum_core::ErrorKind::NotFound => {
                Ok((uuid, Some(ng.to_primitive())))
            }
            Err(e) => Err(e),
        }
    }

    async fn decode(&self, req: WireRequest) -> Result<Decoded, RpcError> {
        let a = &req.args;
        let ctx = &req.context;
        match req.method.as_str() {
            m::CLUSTER_CREATE => {
                let mut cluster = arg_object(a, "cluster", &CLUSTER)?;
                let master_count = arg_i32(a, "master_count")?;
                let node_count = arg_i32(a, "node_count")?;
                let (uuid, unsaved) = self.unsaved_cluster(&mut cluster).await?;
                let r = ClusterCreate {
                    cluster_uuid: uuid.into(),
                    master_count,
                    node_count,
                    create_timeout: opt_i32(a, "create_timeout")?,
                    unsaved,
                };
                dispatch(ctx, m::CLUSTER_CREATE, &r)
            }
            m::CLUSTER_UPDATE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let r = ClusterUpdate {
                    cluster_uuid: required(&cluster, "uuid")?,
                    node_count: arg_i32(a, "node_count")?,
                    health_status: opt_str(a, "health_status")
                        .map(|s| s.parse())
                        .transpose()
                        .map_err(|e| RpcError::Malformed(format!("health_status: {e}")))?,
                    health_status_reason: a
                        .get("health_status_reason")
                        .filter(|v| !v.is_null())
                        .cloned(),
                    rollback: a.get("rollback").and_then(Value::as_bool).unwrap_or(false),
                };
                dispatch(ctx, m::CLUSTER_UPDATE, &r)
            }
            m::CLUSTER_DELETE => {
                let uuid = opt_str(a, "uuid")
                    .ok_or_else(|| RpcError::Malformed("argument uuid missing".into()))?;
                dispatch(
                    ctx,
                    m::CLUSTER_DELETE,
                    &ClusterRef {
                        cluster_uuid: uuid.into(),
                    },
                )
            }
            m::CLUSTER_RESIZE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let ng = arg_object(a, "nodegroup", &NODEGROUP)?;
                let nodes_to_remove = match a.get("nodes_to_remove") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(v) => serde_json::from_value(v.clone())
                        .map_err(|e| RpcError::Malformed(format!("nodes_to_remove: {e}")))?,
                };
                let r = ClusterResize {
                    cluster_uuid: required(&cluster, "uuid")?,
                    nodegroup_uuid: required(&ng, "uuid")?,
                    node_count: arg_i32(a, "node_count")?,
                    nodes_to_remove,
                };
                dispatch(ctx, m::CLUSTER_RESIZE, &r)
            }
            m::CLUSTER_UPGRADE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let template = arg_object(a, "cluster_template", &CLUSTER_TEMPLATE)?;
                let ng = arg_object(a, "nodegroup", &NODEGROUP)?;
                let r = ClusterUpgrade {
                    cluster_uuid: required(&cluster, "uuid")?,
                    nodegroup_uuid: required(&ng, "uuid")?,
                    cluster_template_uuid: required(&template, "uuid")?,
                    max_batch_size: opt_i32(a, "max_batch_size")?,
                };
                dispatch(ctx, m::CLUSTER_UPGRADE, &r)
            }
            m::NODEGROUP_CREATE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let ng = arg_object(a, "nodegroup", &NODEGROUP)?;
                let cluster_uuid: String = required(&cluster, "uuid")?;
                let (nodegroup_uuid, unsaved) = self.unsaved_nodegroup(&cluster_uuid, &ng).await?;
                let r = NodegroupRef {
                    cluster_uuid: cluster_uuid.into(),
                    nodegroup_uuid: nodegroup_uuid.into(),
                    unsaved,
                };
                dispatch(ctx, m::NODEGROUP_CREATE, &r)
            }
            m::NODEGROUP_UPDATE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let ng = arg_object(a, "nodegroup", &NODEGROUP)?;
                // Upstream's conductor saves the changed fields; ours applies the same ones.
                let changed_json = |name: &str, empty: &str| {
                    ng.is_changed(name).then(|| match ng.get(name) {
                        Some(Value::Null) | None => empty.to_owned(),
                        Some(v) => magnum_db::json::dumps(v),
                    })
                };
                let int = |name: &str| ng.int(name).and_then(|i| i32::try_from(i).ok());
                let r = NodegroupUpdate {
                    cluster_uuid: required(&cluster, "uuid")?,
                    nodegroup_uuid: required(&ng, "uuid")?,
                    min_node_count: ng
                        .is_changed("min_node_count")
                        .then(|| int("min_node_count"))
                        .flatten(),
                    // Ours always applies max_node_count; unchanged, it is the stored value.
                    max_node_count: int("max_node_count"),
                    node_labels: changed_json("node_labels", "{}"),
                    node_taints: changed_json("node_taints", "[]"),
                    labels: changed_json("labels", "{}"),
                };
                dispatch(ctx, m::NODEGROUP_UPDATE, &r)
            }
            m::NODEGROUP_DELETE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let ng = arg_object(a, "nodegroup", &NODEGROUP)?;
                let r = NodegroupRef {
                    unsaved: None,
                    cluster_uuid: required(&cluster, "uuid")?,
                    nodegroup_uuid: required(&ng, "uuid")?,
                };
                dispatch(ctx, m::NODEGROUP_DELETE, &r)
            }
            m::CREDENTIAL_ROTATE | m::ROTATE_CA_CERTIFICATE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let r = ClusterRef {
                    cluster_uuid: required(&cluster, "uuid")?,
                };
                dispatch(ctx, &req.method, &r)
            }
            m::SIGN_CERTIFICATE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let cert = arg_object(a, "certificate", &CERTIFICATE)?;
                let r = SignCertificate {
                    cluster_uuid: required(&cluster, "uuid")?,
                    csr: required(&cert, "csr")?,
                    ca_cert_type: cert.str("ca_cert_type").map(str::to_owned),
                };
                dispatch(ctx, m::SIGN_CERTIFICATE, &r)
            }
            m::GET_CA_CERTIFICATE => {
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let r = GetCaCertificate {
                    cluster_uuid: required(&cluster, "uuid")?,
                    ca_cert_type: opt_str(a, "ca_cert_type"),
                };
                dispatch(ctx, m::GET_CA_CERTIFICATE, &r)
            }
            m::PING_CONDUCTOR => dispatch(ctx, m::PING_CONDUCTOR, &Map::new()),
            indirection::OBJECT_CLASS_ACTION_VERSIONS
            | indirection::OBJECT_ACTION
            | indirection::OBJECT_BACKPORT_VERSIONS => {
                let ctx = context_from_wire(ctx);
                Ok(Decoded::Answered(
                    indirection::answer(&self.db, &ctx, &req.method, a).await,
                ))
            }
            // Upstream's federation handlers raise NotImplementedError.
            "federation_create" | "federation_update" | "federation_delete" => {
                Ok(Decoded::Answered(Err(remote(&Error::Internal(format!(
                    "{} is not implemented",
                    req.method
                ))))))
            }
            // Unknown methods reach the dispatcher, which refuses them.
            _ => Ok(Decoded::Dispatch(Message {
                context: context_from_wire(ctx),
                method: req.method,
                args: Value::Object(req.args),
            })),
        }
    }

    /// A cluster as upstream's handlers return it (saved: no changes); None if it is gone.
    async fn returned_cluster(&self, req: &WireRequest) -> Value {
        let uuid = match req.args.get("cluster") {
            Some(c) => Object::from_primitive(c)
                .ok()
                .and_then(|c| c.str("uuid").map(str::to_owned)),
            None => None,
        };
        match uuid {
            Some(u) => self
                .cluster(&u)
                .await
                .map(|c| c.to_primitive())
                .unwrap_or(Value::Null),
            None => Value::Null,
        }
    }
}

#[async_trait]
impl Codec for MagnumCodec {
    async fn encode_request(&self, msg: &Message) -> Result<WireRequest, RpcError> {
        let mut context = context_to_wire(&msg.context);
        // Python conductors act for the user with the user's own token, as upstream's API
        // sends it; between our own processes no token travels.
        if self.create_cluster_in_conductor
            && let Some(token) = &msg.context.user_token
        {
            context.insert(
                "auth_token".into(),
                Value::String(token.secret().to_owned()),
            );
            context.insert("auth_token_info".into(), token.body().clone());
        }
        Ok(WireRequest {
            method: msg.method.clone(),
            args: self.encode_args(msg).await?,
            context,
        })
    }

    async fn decode_request(&self, req: WireRequest) -> Result<Decoded, RpcError> {
        self.decode(req).await
    }

    async fn encode_result(&self, req: &WireRequest, result: Value) -> Result<Value, RpcError> {
        let a = &req.args;
        Ok(match req.method.as_str() {
            m::SIGN_CERTIFICATE => {
                // The request's certificate, with `pem` set (§15.3).
                let mut cert = arg_object(a, "certificate", &CERTIFICATE)?;
                cert.set("pem", result)?;
                cert.to_primitive()
            }
            m::GET_CA_CERTIFICATE => {
                // Certificate.from_object_cluster(cluster), then `pem`.
                let cluster = arg_object(a, "cluster", &CLUSTER)?;
                let mut cert = Object::new(&CERTIFICATE);
                for (field, from) in [
                    ("project_id", "project_id"),
                    ("user_id", "user_id"),
                    ("cluster_uuid", "uuid"),
                ] {
                    cert.set(field, cluster.get(from).cloned().unwrap_or_default())?;
                }
                cert.set("pem", result)?;
                cert.to_primitive()
            }
            m::CLUSTER_CREATE
            | m::CLUSTER_UPDATE
            | m::CLUSTER_RESIZE
            | m::CLUSTER_UPGRADE
            | m::ROTATE_CA_CERTIFICATE => self.returned_cluster(req).await,
            m::NODEGROUP_CREATE | m::NODEGROUP_UPDATE => {
                let ids = arg_object(a, "cluster", &CLUSTER)
                    .ok()
                    .and_then(|c| c.str("uuid").map(str::to_owned))
                    .zip(
                        arg_object(a, "nodegroup", &NODEGROUP)
                            .ok()
                            .and_then(|n| n.str("uuid").map(str::to_owned)),
                    );
                match ids {
                    Some((c, n)) => self
                        .nodegroup(&c, &n)
                        .await
                        .map(|n| n.to_primitive())
                        .unwrap_or(Value::Null),
                    None => Value::Null,
                }
            }
            m::CLUSTER_DELETE | m::NODEGROUP_DELETE | m::CREDENTIAL_ROTATE => Value::Null,
            _ => result,
        })
    }

    async fn decode_result(&self, method: &str, result: Value) -> Result<Value, RpcError> {
        Ok(match method {
            // Our client wants the PEM text of the returned Certificate.
            m::SIGN_CERTIFICATE | m::GET_CA_CERTIFICATE if is_primitive(&result) => {
                let cert = Object::from_primitive_of(&CERTIFICATE, &result)?;
                match cert.str("pem") {
                    Some(p) => Value::String(p.to_owned()),
                    None => {
                        return Err(RpcError::Malformed(format!(
                            "{method}: the returned Certificate has no pem"
                        )));
                    }
                }
            }
            m::SIGN_CERTIFICATE | m::GET_CA_CERTIFICATE | m::PING_CONDUCTOR => result,
            // Our client discards the rest (returned clusters and nodegroups).
            _ => Value::Null,
        })
    }
}

#[cfg(test)]
mod tests;
